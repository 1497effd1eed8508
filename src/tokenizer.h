/* tokenizer.h — text <-> token ids for the vocabularies GGUF files carry.
 *
 * Two tokenizer models, selected by the metadata key tokenizer.ggml.model:
 *   "llama"  SentencePiece-style BPE driven by token scores, with byte
 *            fallback (<0xXX> tokens) and an optional space prefix
 *            (LLaMA, Gemma, Phi-3, ...);
 *   "gpt2"   byte-level BPE driven by merge ranks, after a regex
 *            pre-tokenizer chosen by tokenizer.ggml.pre (gpt-2, llama3,
 *            qwen2, deepseek-llm, deepseek-coder, falcon, starcoder, ...).
 * The behaviour follows llama.cpp's tokenizer, which is what the
 * conformance data under shared/testdata/vocab comes from.
 *
 * A tokenizer copies what it needs out of the GGUF view at open time, so
 * the view may be closed afterwards. Once open it is immutable: any number
 * of threads may encode and decode with it at the same time (every call
 * keeps its scratch to itself).
 *
 * Token ids are int32_t; TOKEN_NONE (-1) stands for "no such token". */
#ifndef INGOT_TOKENIZER_H
#define INGOT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct gguf;
struct tokenizer;

#define TOKEN_NONE (-1)

/* Flags for tokenizer_encode. */
enum {
	/* Add BOS / EOS around the text as the vocabulary's metadata asks
	 * (tokenizer.ggml.add_bos_token / add_eos_token and their defaults). */
	TOKENIZER_ADD_SPECIAL = 1u << 0,
	/* Recognise the text of control tokens ("<start_of_turn>", "<s>", ...)
	 * and emit them as single tokens. Without it such text is tokenized as
	 * ordinary text. User-defined tokens are always recognised, as in
	 * llama.cpp and Hugging Face tokenizers. */
	TOKENIZER_PARSE_SPECIAL = 1u << 1,
};

/* Flags for tokenizer_piece, tokenizer_decode and the stream decoder. */
enum {
	/* Render control and unknown tokens as their text; without it they
	 * produce no bytes. */
	TOKENIZER_RENDER_SPECIAL = 1u << 2,
	/* Drop a leading BOS and a trailing EOS when the metadata says they
	 * are added on encode (llama.cpp's remove_special). */
	TOKENIZER_REMOVE_SPECIAL = 1u << 3,
};

enum tokenizer_kind {
	TOKENIZER_SPM = 1, /* tokenizer.ggml.model = "llama" */
	TOKENIZER_BPE = 2, /* tokenizer.ggml.model = "gpt2" */
};

/* Token types as stored in tokenizer.ggml.token_type. */
enum token_type {
	TOKEN_TYPE_UNDEFINED = 0,
	TOKEN_TYPE_NORMAL = 1,
	TOKEN_TYPE_UNKNOWN = 2,
	TOKEN_TYPE_CONTROL = 3,
	TOKEN_TYPE_USER_DEFINED = 4,
	TOKEN_TYPE_UNUSED = 5,
	TOKEN_TYPE_BYTE = 6,
};

/* A growable, caller-owned list of token ids. Zero-initialise it
 * (`struct token_ids ids = {0};`), let tokenizer_encode append to it, and
 * release it with token_ids_free(). */
struct token_ids {
	int32_t *ids; /* [cap], the first n in use */
	size_t n;
	size_t cap;
};

/* Appends id, growing the buffer. ING_OK or ING_ERR_NOMEM. */
int token_ids_push(struct token_ids *t, int32_t id);

/* Frees the buffer and zeroes the struct. Accepts NULL. */
void token_ids_free(struct token_ids *t);

/* Builds a tokenizer from the tokenizer.ggml.* metadata of g. On success
 * *out is a handle the caller closes with tokenizer_close(); it does not
 * refer to g afterwards. On failure returns ING_ERR_NOTFOUND (no vocabulary),
 * ING_ERR_FORMAT (malformed or duplicate tokens, bad types),
 * ING_ERR_UNSUPPORTED (unknown model or pre-tokenizer) or ING_ERR_NOMEM,
 * writes the reason into err and sets *out = NULL. */
int tokenizer_open(const struct gguf *g, struct tokenizer **out, ing_err *err);

/* Frees everything. Accepts NULL. */
void tokenizer_close(struct tokenizer *tk);

/* Tokenizes len bytes of text (any bytes; invalid UTF-8 is tolerated) and
 * appends the ids to out. flags: TOKENIZER_ADD_SPECIAL,
 * TOKENIZER_PARSE_SPECIAL. On failure (ING_ERR_NOMEM, or ING_ERR_RANGE for
 * text over 4 GiB or when the regex engine gives up) out keeps the ids it
 * had before the call. Time is O(n log n) in len; scratch is per call. */
int tokenizer_encode(const struct tokenizer *tk, const char *text, size_t len,
		     unsigned flags, struct token_ids *out, ing_err *err);

enum tokenizer_kind tokenizer_kind(const struct tokenizer *tk);
/* Pre-tokenizer name as stored in the metadata ("default" when absent). */
const char *tokenizer_pre_name(const struct tokenizer *tk);
int32_t tokenizer_n_vocab(const struct tokenizer *tk);

/* Special token ids, TOKEN_NONE when the vocabulary has none. */
int32_t tokenizer_bos(const struct tokenizer *tk);
int32_t tokenizer_eos(const struct tokenizer *tk);
int32_t tokenizer_eot(const struct tokenizer *tk);
int32_t tokenizer_unk(const struct tokenizer *tk);
int32_t tokenizer_pad(const struct tokenizer *tk);
/* Whether TOKENIZER_ADD_SPECIAL adds BOS / EOS. */
bool tokenizer_adds_bos(const struct tokenizer *tk);
bool tokenizer_adds_eos(const struct tokenizer *tk);

/* True when id ends generation: EOS, EOT, EOM and the tokens llama.cpp
 * treats so by their text (<end_of_turn>, <|im_end|>, <|eot_id|>, ...).
 * False for ids out of range. */
bool tokenizer_is_eog(const struct tokenizer *tk, int32_t id);

/* True for control and unknown tokens (rendered only with
 * TOKENIZER_RENDER_SPECIAL). False for ids out of range. */
bool tokenizer_is_control(const struct tokenizer *tk, int32_t id);

/* Type of id as stored in the metadata; TOKEN_TYPE_UNDEFINED when out of
 * range. */
enum token_type tokenizer_token_type(const struct tokenizer *tk, int32_t id);

/* The vocabulary text of id ("▁the", "Ġthe", "<0x0A>"), NUL-terminated and
 * owned by tk; *len (may be NULL) gets its length. NULL when out of range. */
const char *tokenizer_token_text(const struct tokenizer *tk, int32_t id, size_t *len);

/* Id of the token whose vocabulary text is exactly text, or TOKEN_NONE. */
int32_t tokenizer_find_token(const struct tokenizer *tk, const char *text);

/* The bytes id stands for when decoded ("▁the" -> " the", "<0x0A>" ->
 * "\n"); may be partial UTF-8. Owned by tk, not NUL-terminated; *len gets
 * the length. Control/unknown tokens give "" unless flags has
 * TOKENIZER_RENDER_SPECIAL. Out-of-range ids give "". */
const char *tokenizer_piece(const struct tokenizer *tk, int32_t id, unsigned flags,
			    size_t *len);

/* Longest piece of any token in bytes (sizes streaming buffers). */
size_t tokenizer_piece_max(const struct tokenizer *tk);

/* Decodes n ids to text as llama.cpp's detokenize does: pieces
 * concatenated, the space prefix of SentencePiece vocabularies removed
 * from the first token, and for byte-level BPE the clean-up of spaces
 * before punctuation where the vocabulary asks for it. flags:
 * TOKENIZER_RENDER_SPECIAL, TOKENIZER_REMOVE_SPECIAL. On success *out is a
 * NUL-terminated string of *out_len bytes the caller frees with ing_free().
 * Fails with ING_ERR_RANGE for an id out of range, or ING_ERR_NOMEM. */
int tokenizer_decode(const struct tokenizer *tk, const int32_t *ids, size_t n,
		     unsigned flags, char **out, size_t *out_len, ing_err *err);

/* Incremental decoder: feed ids one at a time and get back only complete
 * UTF-8 characters; bytes of a character split across tokens (byte
 * fallback, byte-level BPE) are held until the character is whole. Output
 * is always valid UTF-8: bytes that cannot start or continue a character
 * come out as U+FFFD. The first token loses its space prefix as in
 * tokenizer_decode; no other clean-up is applied. */
struct tokenizer_stream {
	const struct tokenizer *tk;
	unsigned flags;     /* TOKENIZER_RENDER_SPECIAL */
	bool started;       /* a token has been fed */
	uint8_t pend[4];    /* bytes of an incomplete character */
	uint8_t npend;
	char *buf;          /* [cap] output of the last feed/flush */
	size_t cap;
};

/* Prepares s for tk (which must outlive it); allocates its output buffer
 * once. ING_OK or ING_ERR_NOMEM. Release with tokenizer_stream_free(). */
int tokenizer_stream_init(struct tokenizer_stream *s, const struct tokenizer *tk,
			  unsigned flags, ing_err *err);

/* Feeds one id. *out and *out_len receive the complete characters it made
 * available (possibly none); the bytes stay valid until the next call on
 * s. ING_ERR_RANGE for an id out of range (s is unchanged). */
int tokenizer_stream_feed(struct tokenizer_stream *s, int32_t id, const char **out,
			  size_t *out_len, ing_err *err);

/* Ends the stream: held bytes of an unfinished character come out as
 * U+FFFD. s is then ready for a new stream. */
void tokenizer_stream_flush(struct tokenizer_stream *s, const char **out, size_t *out_len);

/* Frees the buffer. Accepts NULL and a zeroed struct. */
void tokenizer_stream_free(struct tokenizer_stream *s);

#endif
