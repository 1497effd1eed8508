/* tokenizer_decode.c — from ids back to bytes.
 *
 * Each token's piece (what it decodes to, control tokens included) is
 * computed once at open, as llama.cpp's token-to-piece cache: SentencePiece
 * normal tokens turn U+2581 into spaces, byte-level BPE tokens map their
 * GPT-2 stand-in characters back to bytes, byte tokens <0xXX> become the
 * byte, and control/user-defined/unknown tokens keep their text. Decoding
 * is then concatenation plus llama.cpp's detokenize rules; the stream
 * decoder adds UTF-8 reassembly across tokens. */
#include "tokenizer_int.h"

#include <stdio.h>
#include <string.h>

#include "mem.h"

#define ATTR_SHOWN (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED)

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* SPM: U+2581 -> ' '. Writes into out when non-NULL; returns the length. */
static size_t piece_spm(const char *s, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
			if (out)
				out[o] = ' ';
			o++;
			i += 3;
		} else {
			if (out)
				out[o] = s[i];
			o++;
			i++;
		}
	}
	return o;
}

/* Byte-level BPE: each character names a byte. Characters outside the
 * table come out as llama.cpp writes them: "[UNK_BYTE_0x<hex>" text "]".
 * That repeats the whole text per such character, so a piece can grow as
 * the square of its text: measuring (out NULL) stops once past limit. */
static size_t piece_bpe(const char *s, size_t n, char *out, size_t limit)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o <= limit;) {
		uint32_t cp;
		size_t d = tok_utf8_decode((const uint8_t *)s + i, n - i, &cp);
		if (d == 0) {
			cp = 0xFFFD;
			d = 1;
		}
		int b = tok_bpe_char_byte(cp);
		if (b >= 0) {
			if (out)
				out[o] = (char)b;
			o++;
		} else {
			char enc[4], tmp[24];
			size_t el = tok_utf8_encode(cp, enc);
			size_t k = (size_t)snprintf(tmp, sizeof tmp, "[UNK_BYTE_0x");
			for (size_t j = 0; j < el; j++)
				k += (size_t)snprintf(tmp + k, sizeof tmp - k, "%02x", (uint8_t)enc[j]);
			if (out) {
				memcpy(out + o, tmp, k);
				memcpy(out + o + k, s, n);
				out[o + k + n] = ']';
			}
			o += k + n + 1;
		}
		i += d;
	}
	return o;
}

/* The piece of token id into out (NULL: just measure, giving up with
 * some length over limit once the piece is longer than limit). */
static size_t piece_of(const struct tokenizer *tk, int32_t id, char *out, size_t limit)
{
	const struct tok_entry *e = &tk->tokens[id];
	const char *s = tok_text(tk, id);
	if (e->attr & ATTR_SHOWN) {
		if (out)
			memcpy(out, s, e->text_len);
		return e->text_len;
	}
	if (e->attr & TOK_ATTR_NORMAL)
		return tk->kind == TOKENIZER_SPM ? piece_spm(s, e->text_len, out)
						 : piece_bpe(s, e->text_len, out, limit);
	if ((e->attr & TOK_ATTR_BYTE) && e->text_len == 6 && memcmp(s, "<0x", 3) == 0 &&
	    hexval(s[3]) >= 0 && hexval(s[4]) >= 0) {
		if (out)
			out[0] = (char)(hexval(s[3]) * 16 + hexval(s[4]));
		return 1;
	}
	return 0;
}

/* Pieces may take PIECE_GROWTH times the bytes of the token texts plus
 * PIECE_SLACK. Real vocabularies need at most about their texts' size (a
 * piece is never longer than its text but for the rare character outside
 * the byte table); without a bound a hostile vocabulary of a few KB would
 * make pieces of gigabytes (n^2 per token of n such characters), and the
 * sum could wrap. */
#define PIECE_GROWTH 4
#define PIECE_SLACK ((size_t)1 << 20)

int tok_pieces_build(struct tokenizer *tk, ing_err *err)
{
	size_t text = 0, total = 0;
	for (int32_t id = 0; id < tk->n_vocab; id++)
		text += tk->tokens[id].text_len; /* <= UINT32_MAX: load_texts checked */
	size_t budget = PIECE_GROWTH * text + PIECE_SLACK;
	for (int32_t id = 0; id < tk->n_vocab; id++) {
		size_t n = piece_of(tk, id, NULL, budget - total);
		if (n > budget - total)
			return ing_err_set(err, ING_ERR_FORMAT,
					   "tokenizer: pieces exceed %zu bytes at token %d (%zu bytes of "
					   "token text)", budget, id, text);
		total += n;
	}
	if (total > UINT32_MAX)
		return ing_err_set(err, ING_ERR_FORMAT, "tokenizer: pieces too large (%zu bytes)", total);
	tk->piece = ing_malloc(total ? total : 1);
	if (!tk->piece)
		return ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for pieces");
	size_t off = 0;
	for (int32_t id = 0; id < tk->n_vocab; id++) {
		size_t n = piece_of(tk, id, tk->piece + off, SIZE_MAX);
		tk->tokens[id].piece_off = (uint32_t)off;
		tk->tokens[id].piece_len = (uint32_t)n;
		if (n > tk->piece_max)
			tk->piece_max = n;
		off += n;
	}
	return ING_OK;
}

const char *tokenizer_piece(const struct tokenizer *tk, int32_t id, unsigned flags, size_t *len)
{
	*len = 0;
	if (id < 0 || id >= tk->n_vocab)
		return "";
	const struct tok_entry *e = &tk->tokens[id];
	if (!(flags & TOKENIZER_RENDER_SPECIAL) && (e->attr & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL)))
		return "";
	*len = e->piece_len;
	return tk->piece + e->piece_off;
}

size_t tokenizer_piece_max(const struct tokenizer *tk)
{
	return tk->piece_max;
}

/* llama.cpp's clean_up_tokenization_spaces passes, in place; returns the
 * new length. */
static size_t clean_spaces(char *t, size_t n)
{
	/* " ?", " !", " .", " ," lose the space */
	size_t total = n ? 1 : 0;
	for (size_t i = 1; i < n; i++) {
		char x = t[i];
		if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
			total--;
		t[total++] = x;
	}
	/* " ' " becomes "'" */
	n = total;
	total = n ? 1 : 0;
	for (size_t i = 1; i < n; i++) {
		char x = t[i];
		if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
			total--;
			t[++i] = '\0';
		}
		t[total++] = x;
	}
	/* " 's", " 'm", " 're", " 've" lose the space */
	n = total;
	total = n ? 1 : 0;
	for (size_t i = 1; i < n; i++) {
		char x = t[i];
		if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
			char x1 = t[i + 1];
			if (x1 == 's' || x1 == 'm')
				total--;
			else if (i + 2 < n && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e')))
				total--;
		}
		t[total++] = x;
	}
	return total;
}

int tokenizer_decode(const struct tokenizer *tk, const int32_t *ids, size_t n, unsigned flags,
		     char **out, size_t *out_len, ing_err *err)
{
	*out = NULL;
	*out_len = 0;
	bool remove_space = tk->add_space_prefix;
	if ((flags & TOKENIZER_REMOVE_SPECIAL) && tk->add_bos && n > 0 && ids[0] == tk->bos) {
		remove_space = false;
		ids++;
		n--;
	}
	if ((flags & TOKENIZER_REMOVE_SPECIAL) && tk->add_eos && n > 0 && ids[n - 1] == tk->eos)
		n--;
	size_t total = 0, len;
	for (size_t i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= tk->n_vocab)
			return ing_err_set(err, ING_ERR_RANGE, "tokenizer: token id %d at %zu is not in 0..%d",
					   ids[i], i, tk->n_vocab - 1);
		tokenizer_piece(tk, ids[i], flags, &len);
		total += len;
	}
	char *buf = ing_malloc(total + 1);
	if (!buf)
		return ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", total);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		const char *p = tokenizer_piece(tk, ids[i], flags, &len);
		if (i == 0 && remove_space && len > 0 && p[0] == ' ') {
			p++;
			len--;
		}
		memcpy(buf + o, p, len);
		o += len;
	}
	if (tk->clean_spaces)
		o = clean_spaces(buf, o);
	buf[o] = '\0';
	*out = buf;
	*out_len = o;
	return ING_OK;
}

/* ---- streaming ---------------------------------------------------------- */

static const char replacement[3] = {'\xef', '\xbf', '\xbd'};

/* Length a valid lead byte announces, 0 for bytes that cannot lead. */
static int lead_len(uint8_t b)
{
	if (b >= 0xC2 && b <= 0xDF)
		return 2;
	if (b >= 0xE0 && b <= 0xEF)
		return 3;
	if (b >= 0xF0 && b <= 0xF4)
		return 4;
	return 0;
}

/* Whether b may follow the pending bytes (rules out overlong forms,
 * surrogates and codepoints above U+10FFFF). */
static bool continues(const uint8_t *pend, int npend, uint8_t b)
{
	if ((b & 0xC0) != 0x80)
		return false;
	if (npend != 1)
		return true;
	switch (pend[0]) {
	case 0xE0: return b >= 0xA0;
	case 0xED: return b <= 0x9F;
	case 0xF0: return b >= 0x90;
	case 0xF4: return b <= 0x8F;
	default: return true;
	}
}

/* Feeds one byte; appends complete output to s->buf at *o. */
static void stream_byte(struct tokenizer_stream *s, uint8_t b, size_t *o)
{
	if (s->npend > 0) {
		if (continues(s->pend, s->npend, b)) {
			s->pend[s->npend++] = b;
			if (s->npend == lead_len(s->pend[0])) {
				memcpy(s->buf + *o, s->pend, s->npend);
				*o += s->npend;
				s->npend = 0;
			}
			return;
		}
		memcpy(s->buf + *o, replacement, 3); /* the unfinished character */
		*o += 3;
		s->npend = 0;
	}
	if (b < 0x80) {
		s->buf[(*o)++] = (char)b;
	} else if (lead_len(b)) {
		s->pend[0] = b;
		s->npend = 1;
	} else {
		memcpy(s->buf + *o, replacement, 3);
		*o += 3;
	}
}

int tokenizer_stream_init(struct tokenizer_stream *s, const struct tokenizer *tk, unsigned flags,
			  ing_err *err)
{
	memset(s, 0, sizeof *s);
	s->tk = tk;
	s->flags = flags;
	s->cap = 3 * (tk->piece_max + 4);
	s->buf = ing_malloc(s->cap);
	if (!s->buf)
		return ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for a stream buffer");
	return ING_OK;
}

int tokenizer_stream_feed(struct tokenizer_stream *s, int32_t id, const char **out, size_t *out_len,
			  ing_err *err)
{
	*out = s->buf;
	*out_len = 0;
	if (id < 0 || id >= s->tk->n_vocab)
		return ing_err_set(err, ING_ERR_RANGE, "tokenizer: token id %d is not in 0..%d", id,
				   s->tk->n_vocab - 1);
	size_t len, o = 0;
	const char *p = tokenizer_piece(s->tk, id, s->flags, &len);
	if (!s->started && s->tk->add_space_prefix && len > 0 && p[0] == ' ') {
		p++;
		len--;
	}
	s->started = true;
	for (size_t i = 0; i < len; i++)
		stream_byte(s, (uint8_t)p[i], &o);
	*out_len = o;
	return ING_OK;
}

void tokenizer_stream_flush(struct tokenizer_stream *s, const char **out, size_t *out_len)
{
	*out = s->buf;
	*out_len = 0;
	if (s->npend > 0) {
		memcpy(s->buf, replacement, 3);
		*out_len = 3;
	}
	s->npend = 0;
	s->started = false;
}

void tokenizer_stream_free(struct tokenizer_stream *s)
{
	if (!s)
		return;
	ing_free(s->buf);
	s->buf = NULL;
	s->cap = 0;
}
