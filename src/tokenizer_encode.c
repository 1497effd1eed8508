/* tokenizer_encode.c — tokenizer_encode: special tokens first, then each
 * raw-text fragment through the model's tokenizer.
 *
 * Mirrors llama.cpp's llama_vocab::tokenize: the text is partitioned around
 * special-token text (tokenizer_special.c); SentencePiece fragments get
 * spaces escaped to U+2581 and, when the vocabulary asks, a space prefix
 * on every fragment that starts the text or follows a special token;
 * byte-level BPE fragments go through the regex pre-tokenizer. All scratch
 * belongs to the call, so concurrent encodes do not interact. */
#include "tokenizer_int.h"

#include <string.h>

#include "mem.h"

size_t tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	size_t need;
	uint32_t v;
	if ((c & 0xE0) == 0xC0) {
		need = 2;
		v = c & 0x1F;
	} else if ((c & 0xF0) == 0xE0) {
		need = 3;
		v = c & 0x0F;
	} else if ((c & 0xF8) == 0xF0) {
		need = 4;
		v = c & 0x07;
	} else {
		return 0; /* continuation byte or 0xF8.. */
	}
	if (n < need)
		return 0;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3F);
	}
	*cp = v;
	return need;
}

size_t tok_utf8_encode(uint32_t cp, char out[4])
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* SPM input: optional leading space, then ' ' -> U+2581 ("\xe2\x96\x81").
 * buf must hold 3 * (len + 1) bytes; returns the length written. */
static size_t spm_escape(const char *text, size_t len, bool prefix, char *buf)
{
	size_t o = 0;
	if (prefix) {
		memcpy(buf, "\xe2\x96\x81", 3);
		o = 3;
	}
	for (size_t i = 0; i < len; i++) {
		if (text[i] == ' ') {
			memcpy(buf + o, "\xe2\x96\x81", 3);
			o += 3;
		} else {
			buf[o++] = text[i];
		}
	}
	return o;
}

static int encode_spm(const struct tokenizer *tk, const char *text, const struct tok_frag *frags,
		      size_t n_frags, struct token_ids *out, ing_err *err)
{
	size_t max = 0;
	for (size_t i = 0; i < n_frags; i++)
		if (frags[i].token < 0 && frags[i].len > max)
			max = frags[i].len;
	char *buf = NULL;
	if (max > 0 && !(buf = ing_malloc(3 * (max + 1))))
		return ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", max);
	bool prev_special = true; /* the start of the text counts as one */
	int rc = ING_OK;
	for (size_t i = 0; i < n_frags && !rc; i++) {
		const struct tok_frag *f = &frags[i];
		if (f->token >= 0) {
			rc = token_ids_push(out, f->token);
			prev_special = true;
			continue;
		}
		size_t n = spm_escape(text + f->off, f->len, tk->add_space_prefix && prev_special, buf);
		rc = tok_spm_encode(tk, buf, n, out, err);
		prev_special = false;
	}
	ing_free(buf);
	return rc;
}

static int encode_bpe(const struct tokenizer *tk, const char *text, const struct tok_frag *frags,
		      size_t n_frags, struct token_ids *out, ing_err *err)
{
	int rc = ING_OK;
	for (size_t i = 0; i < n_frags && !rc; i++) {
		const struct tok_frag *f = &frags[i];
		if (f->token >= 0)
			rc = token_ids_push(out, f->token);
		else
			rc = tok_bpe_encode(tk, text + f->off, f->len, out, err);
	}
	return rc;
}

int tokenizer_encode(const struct tokenizer *tk, const char *text, size_t len, unsigned flags,
		     struct token_ids *out, ing_err *err)
{
	size_t n0 = out->n;
	bool add_special = flags & TOKENIZER_ADD_SPECIAL;
	struct tok_frag *frags;
	size_t n_frags;
	int rc = tok_partition(tk, text, len, flags & TOKENIZER_PARSE_SPECIAL, &frags, &n_frags, err);
	if (rc)
		return rc;
	if (add_special && tk->add_bos)
		rc = token_ids_push(out, tk->bos);
	if (!rc && tk->kind == TOKENIZER_SPM)
		rc = encode_spm(tk, text, frags, n_frags, out, err);
	else if (!rc)
		rc = encode_bpe(tk, text, frags, n_frags, out, err);
	if (!rc && add_special && tk->add_eos)
		rc = token_ids_push(out, tk->eos);
	ing_free(frags);
	if (rc) {
		out->n = n0;
		if (rc == ING_ERR_NOMEM) /* token_ids_push fails without a message */
			ing_err_set(err, rc, "tokenizer: out of memory encoding %zu bytes", len);
	}
	return rc;
}
