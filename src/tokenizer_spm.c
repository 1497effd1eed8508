/* tokenizer_spm.c — SentencePiece-style BPE by token scores.
 *
 * The text (spaces already escaped to U+2581) starts as one symbol per
 * UTF-8 character. Every adjacent pair whose concatenation is a token is a
 * candidate; the heap yields the best-scoring one (ties: leftmost), it is
 * merged, and the pairs it forms with its neighbours become candidates.
 * Stale candidates (a side changed since it was queued) are recognised by
 * their recorded length and skipped. Symbols that end up not being tokens
 * fall back to byte tokens. O(n log n) in the text length.
 *
 * Same algorithm and tie-breaking as llama.cpp's llm_tokenizer_spm. */
#include "tokenizer_int.h"

#include <string.h>

#include "mem.h"

struct spm_sym {
	int32_t prev, next; /* neighbours in the live chain, -1 at the ends */
	uint32_t off, n;    /* bytes of the text; n == 0 once merged away */
};

/* Maps a score to an integer key that sorts best score first. */
static uint64_t score_key(float score)
{
	if (score == 0.0f)
		score = 0.0f; /* one zero */
	uint32_t u;
	memcpy(&u, &score, sizeof u);
	u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending */
	return (uint64_t)(uint32_t)~u;
}

static int try_pair(const struct tokenizer *tk, const char *text, const struct spm_sym *syms,
		    int32_t l, int32_t r, struct tok_heap *h)
{
	if (l < 0 || r < 0)
		return ING_OK;
	uint32_t n = syms[l].n + syms[r].n;
	if (n > tk->text_max)
		return ING_OK;
	int32_t id = tok_find(tk, text + syms[l].off, n);
	if (id < 0)
		return ING_OK;
	struct tok_heap_item it = {
		.key = (score_key(tk->tokens[id].score) << 32) | (uint32_t)l, .a = (uint32_t)r, .b = n};
	return tok_heap_push(h, it);
}

/* Emits the token of one final symbol, or its bytes. */
static int emit(const struct tokenizer *tk, const char *s, uint32_t n, struct token_ids *out)
{
	int32_t id = tok_find(tk, s, n);
	if (id >= 0)
		return token_ids_push(out, id);
	for (uint32_t i = 0; i < n; i++) {
		int32_t b = tk->byte_token[(uint8_t)s[i]];
		if (b < 0)
			b = tk->unk; /* no byte tokens in this vocabulary */
		if (b >= 0) {
			int rc = token_ids_push(out, b);
			if (rc)
				return rc;
		}
	}
	return ING_OK;
}

/* Splits text into one symbol per UTF-8 character; returns the count. */
static size_t split_chars(const char *text, size_t len, struct spm_sym *syms)
{
	size_t n = 0;
	for (size_t off = 0; off < len; n++) {
		size_t cl = tok_utf8_len((uint8_t)text[off]);
		if (cl > len - off)
			cl = len - off;
		syms[n] = (struct spm_sym){.prev = (int32_t)n - 1, .next = (int32_t)n + 1,
					   .off = (uint32_t)off, .n = (uint32_t)cl};
		off += cl;
	}
	syms[n - 1].next = -1;
	return n;
}

static int merge_all(const struct tokenizer *tk, const char *text, struct spm_sym *syms, size_t n,
		     struct tok_heap *h)
{
	int rc = ING_OK;
	for (size_t i = 1; i < n && !rc; i++)
		rc = try_pair(tk, text, syms, (int32_t)i - 1, (int32_t)i, h);
	struct tok_heap_item it;
	while (!rc && tok_heap_pop(h, &it)) {
		int32_t l = (int32_t)(uint32_t)it.key, r = (int32_t)it.a;
		struct spm_sym *ls = &syms[l], *rs = &syms[r];
		if (ls->n == 0 || rs->n == 0 || ls->n + rs->n != it.b)
			continue; /* stale */
		ls->n += rs->n;
		rs->n = 0;
		ls->next = rs->next;
		if (rs->next >= 0)
			syms[rs->next].prev = l;
		rc = try_pair(tk, text, syms, ls->prev, l, h);
		if (!rc)
			rc = try_pair(tk, text, syms, l, ls->next, h);
	}
	return rc;
}

int tok_spm_encode(const struct tokenizer *tk, const char *text, size_t len, struct token_ids *out,
		   ing_err *err)
{
	if (len == 0)
		return ING_OK;
	if (len > INT32_MAX)
		return ing_err_set(err, ING_ERR_RANGE, "tokenizer: fragment of %zu bytes is too long", len);
	struct spm_sym *syms = ing_malloc_array(len, sizeof *syms);
	struct tok_heap h = {0};
	int rc = syms ? ING_OK : ING_ERR_NOMEM;
	if (!rc) {
		size_t n = split_chars(text, len, syms);
		rc = merge_all(tk, text, syms, n, &h);
		for (int32_t i = 0; i != -1 && !rc; i = syms[i].next)
			rc = emit(tk, text + syms[i].off, syms[i].n, out);
	}
	tok_heap_free(&h);
	ing_free(syms);
	if (rc)
		return ing_err_set(err, rc, "tokenizer: out of memory for %zu bytes of text", len);
	return ING_OK;
}
