/* tokenizer_int.h — private layout of the tokenizer, shared by its files.
 *
 *   tokenizer.c         open/close: metadata, vocabulary table, special ids
 *   tokenizer_special.c special-token detection (EOG set, attributes) and
 *                       the partition of text around special tokens
 *   tokenizer_encode.c  tokenizer_encode: the driver over fragments
 *   tokenizer_spm.c     SentencePiece-style BPE by scores
 *   tokenizer_bpe.c     byte-level BPE by merge ranks
 *   tokenizer_pre.c     regex pre-tokenizers (PCRE2)
 *   tokenizer_decode.c  pieces, decode, streaming decoder
 *   tokenizer_heap.c    the binary heap the merge loops run on
 *
 * Names: "text" is a token's vocabulary string, "piece" the bytes it
 * decodes to. n_vocab is the number of tokens, ids are 0..n_vocab-1. */
#ifndef INGOT_TOKENIZER_INT_H
#define INGOT_TOKENIZER_INT_H

#include "tokenizer.h"

/* Token attributes (bit set), as llama.cpp derives them from token_type
 * plus its text-based fix-ups. */
enum {
	TOK_ATTR_UNKNOWN = 1u << 0,
	TOK_ATTR_UNUSED = 1u << 1,
	TOK_ATTR_NORMAL = 1u << 2,
	TOK_ATTR_CONTROL = 1u << 3,
	TOK_ATTR_USER_DEFINED = 1u << 4,
	TOK_ATTR_BYTE = 1u << 5,
	TOK_ATTR_LSTRIP = 1u << 7,
	TOK_ATTR_RSTRIP = 1u << 8,
};

struct tok_entry {
	uint32_t text_off; /* into tokenizer.text, NUL-terminated there */
	uint32_t text_len;
	uint32_t piece_off; /* into tokenizer.piece (RENDER_SPECIAL form) */
	uint32_t piece_len;
	float score;
	uint16_t attr;      /* TOK_ATTR_* */
	uint8_t type;       /* enum token_type as stored */
};

/* Open-addressing hash from token text to id. A slot holds the text's hash
 * in the high 32 bits (checked before touching the token) and id + 1 in the
 * low 32 bits; 0 is empty. */
struct tok_hash {
	uint64_t *slots; /* [mask + 1] */
	uint32_t mask;
};

/* Merge table of byte-level BPE: (left id, right id) -> rank, result. */
struct tok_merge {
	uint64_t key; /* left << 32 | right; UINT64_MAX when the slot is empty */
	int32_t rank;
	int32_t result;
};

/* Trie over the texts of special tokens (control, unknown, user-defined)
 * for the partition step. Node 0 is the root; children of the root are
 * indexed directly by byte, deeper ones through sibling lists. */
struct tok_trie_node {
	int32_t child;   /* first child, -1 none */
	int32_t sibling; /* next sibling, -1 none */
	int32_t token;   /* token ending here, -1 none */
	uint32_t rank;   /* of that token in the partition order */
	uint8_t byte;
};

struct tok_trie {
	struct tok_trie_node *nodes; /* [n] */
	uint32_t n, cap;
	int32_t root[256]; /* child of the root for each first byte, -1 none */
};

struct pre_tokenizer; /* tokenizer_pre.c */

struct tokenizer {
	enum tokenizer_kind kind;
	char pre_name[64];
	int32_t n_vocab;

	struct tok_entry *tokens; /* [n_vocab] */
	char *text;               /* all token texts, NUL-separated */
	char *piece;              /* all pieces back to back */
	size_t piece_max;
	uint32_t text_max;        /* longest token text */
	struct tok_hash hash;

	/* SPM: byte -> <0xXX> token (or the single-byte token), -1 none.
	 * BPE: byte -> token of its GPT-2 unicode stand-in, -1 none. */
	int32_t byte_token[256];

	struct tok_merge *merges; /* [merge_mask + 1], BPE only */
	uint32_t merge_mask;
	uint32_t n_merges;

	struct tok_trie special; /* texts of control/unknown/user-defined */

	const struct pre_tokenizer *pre; /* BPE only */
	void *pre_state;                 /* compiled regexes, tokenizer_pre.c */

	int32_t bos, eos, eot, eom, unk, pad, sep;
	int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
	bool add_bos, add_eos, add_space_prefix;
	bool clean_spaces, ignore_merges;
	uint8_t *eog; /* [n_vocab], 1 for end-of-generation tokens */
};

/* --- tokenizer.c --- */

/* Id of the token whose text is (s, n), or -1. */
int32_t tok_find(const struct tokenizer *tk, const char *s, size_t n);

static inline const char *tok_text(const struct tokenizer *tk, int32_t id)
{
	return tk->text + tk->tokens[id].text_off;
}

/* --- tokenizer_special.c --- */

/* Applies llama.cpp's text-based fix-ups (EOT/EOM/FIM detection, the EOG
 * set, unused markers, per-model strip flags) and builds tk->special.
 * Needs tokens, hash and the ids read from metadata. model_name is
 * general.name (may be ""). */
int tok_special_setup(struct tokenizer *tk, const char *model_name, ing_err *err);

/* One piece of the partitioned text: a special token or a span of raw text. */
struct tok_frag {
	int32_t token; /* -1 for raw text */
	uint32_t off, len;
};

/* Splits text[0..len) around special tokens the way llama.cpp's
 * tokenizer_st_partition does (longest token text first, then left to
 * right; LSTRIP/RSTRIP drop neighbouring whitespace). Control and unknown
 * tokens take part only with parse_special. On success *frags is an array
 * of *n_frags fragments in text order that the caller frees with ing_free. */
int tok_partition(const struct tokenizer *tk, const char *text, size_t len,
		  bool parse_special, struct tok_frag **frags, size_t *n_frags,
		  ing_err *err);

void tok_trie_free(struct tok_trie *t);

/* --- tokenizer_spm.c --- */

/* SentencePiece-style BPE of text (already escaped: ' ' -> U+2581). */
int tok_spm_encode(const struct tokenizer *tk, const char *text, size_t len,
		   struct token_ids *out, ing_err *err);

/* --- tokenizer_bpe.c --- */

/* Reads tokenizer.ggml.merges into tk->merges and fills tk->byte_token. */
int tok_bpe_load(struct tokenizer *tk, const struct gguf *g, ing_err *err);

/* Byte-level BPE of one fragment: sanitises UTF-8, pre-tokenizes, merges. */
int tok_bpe_encode(const struct tokenizer *tk, const char *text, size_t len,
		   struct token_ids *out, ing_err *err);

/* GPT-2 byte-to-unicode stand-in of byte b as UTF-8 into out[0..2); returns
 * its length (1 or 2). */
size_t tok_bpe_byte_char(uint8_t b, char out[2]);

/* Inverse: the byte whose stand-in is codepoint cp, or -1. */
int tok_bpe_char_byte(uint32_t cp);

/* --- tokenizer_pre.c --- */

struct pre_tokenizer {
	const char *names;      /* '|'-separated tokenizer.ggml.pre values */
	const char *regex[6];   /* applied in order, NULL-terminated */
	bool clean_spaces;
	bool ignore_merges;
	bool add_bos;           /* default before the metadata's say */
};

/* The entry for a tokenizer.ggml.pre value, or NULL when unknown. */
const struct pre_tokenizer *tok_pre_find(const char *name);

/* Compiles the regexes of pre into *state (freed by tok_pre_free). */
int tok_pre_compile(const struct pre_tokenizer *pre, void **state, ing_err *err);
void tok_pre_free(void *state);

/* Called for each pre-token ("word") of a split, in text order. */
typedef int (*tok_word_fn)(void *ctx, const char *word, size_t len, ing_err *err);

/* Splits valid UTF-8 text into words as llama.cpp's unicode_regex_split
 * does: each regex splits every piece the previous one left, keeping both
 * the matches and the text between them. Calls fn for each word; stops at
 * the first non-zero status and returns it. */
int tok_pre_split(const void *state, const char *text, size_t len, tok_word_fn fn,
		  void *ctx, ing_err *err);

/* --- tokenizer_decode.c --- */

/* Fills tokens[].piece_* and tk->piece from the texts and attributes. */
int tok_pieces_build(struct tokenizer *tk, ing_err *err);

/* --- tokenizer_heap.c --- */

/* Min-heap ordered by key; a and b are payload. Users pack their order
 * into the key (priority in the high half, position in the low half); 16
 * bytes an item keeps the million-item heaps of a 1 MB text cache-light. */
struct tok_heap_item {
	uint64_t key;
	uint32_t a, b;
};

struct tok_heap {
	struct tok_heap_item *items; /* [cap], the first n in use */
	size_t n, cap;
};

int tok_heap_push(struct tok_heap *h, struct tok_heap_item it);
/* Removes the smallest item into *it; false when empty. */
bool tok_heap_pop(struct tok_heap *h, struct tok_heap_item *it);
void tok_heap_free(struct tok_heap *h);

/* --- UTF-8 helpers (tokenizer_encode.c) --- */

/* Length of the UTF-8 sequence a lead byte announces, as llama.cpp's
 * unicode_len_utf8 (1 for continuation and invalid bytes). */
static inline size_t tok_utf8_len(uint8_t c)
{
	static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
	return lookup[c >> 4];
}

/* Decodes one codepoint at s[0..n) the way llama.cpp does; returns the
 * number of bytes used, or 0 when the bytes are not a character (the
 * caller then treats one byte as U+FFFD). */
size_t tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* Encodes cp as UTF-8 into out[0..4); returns the length. */
size_t tok_utf8_encode(uint32_t cp, char out[4]);

#endif
