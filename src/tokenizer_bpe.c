/* tokenizer_bpe.c — byte-level BPE (GPT-2 style) by merge ranks.
 *
 * A fragment is first made valid UTF-8 (each byte llama.cpp cannot decode
 * becomes U+FFFD, as its unicode_cpts_from_utf8 does), then split into
 * words by the regex pre-tokenizer. Each word starts as one symbol per
 * byte, named by the token of the byte's GPT-2 unicode stand-in; the heap
 * yields the lowest-ranked mergeable pair (ties: leftmost), which becomes
 * the merge's result token. Merges are keyed by token ids, so a merge rule
 * whose sides or result are not tokens is ignored (Hugging Face rejects
 * such files; llama.cpp would keep them as strings).
 *
 * Nothing is cached between calls: per-call scratch is reused across the
 * words of one fragment and freed at the end. */
#include "tokenizer_int.h"

#include <string.h>

#include "gguf.h"
#include "mem.h"

/* ---- the GPT-2 byte <-> unicode table ---------------------------------- */

/* Bytes that stand for themselves; the rest map to 256, 257, ... in order. */
static bool byte_is_printable(unsigned b)
{
	return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

static uint32_t byte_to_cp(uint8_t b)
{
	if (byte_is_printable(b))
		return b;
	uint32_t n = 0;
	for (unsigned c = 0; c < b; c++)
		n += !byte_is_printable(c);
	return 256 + n;
}

size_t tok_bpe_byte_char(uint8_t b, char out[2])
{
	char buf[4];
	size_t n = tok_utf8_encode(byte_to_cp(b), buf);
	memcpy(out, buf, n); /* n <= 2: codepoints stay below 0x800 */
	return n;
}

int tok_bpe_char_byte(uint32_t cp)
{
	if (cp < 256)
		return byte_is_printable(cp) ? (int)cp : -1;
	uint32_t n = 256;
	for (unsigned c = 0; c < 256; c++)
		if (!byte_is_printable(c) && n++ == cp)
			return (int)c;
	return -1;
}

/* ---- merge table -------------------------------------------------------- */

static uint32_t merge_hash(uint64_t key)
{
	key ^= key >> 31;
	key *= 0x7fb5d329728ea185ull;
	key ^= key >> 27;
	key *= 0x81dadef4bc2dd44dull;
	key ^= key >> 33;
	return (uint32_t)key;
}

static const struct tok_merge *merge_find(const struct tokenizer *tk, int32_t l, int32_t r)
{
	uint64_t key = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
	for (uint32_t i = merge_hash(key) & tk->merge_mask;; i = (i + 1) & tk->merge_mask) {
		const struct tok_merge *m = &tk->merges[i];
		if (m->key == key)
			return m;
		if (m->key == UINT64_MAX)
			return NULL;
	}
}

/* Adds a merge unless the pair is already there (the first rank wins). */
static void merge_insert(struct tokenizer *tk, int32_t l, int32_t r, int32_t rank, int32_t result)
{
	uint64_t key = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
	uint32_t i = merge_hash(key) & tk->merge_mask;
	while (tk->merges[i].key != UINT64_MAX) {
		if (tk->merges[i].key == key)
			return;
		i = (i + 1) & tk->merge_mask;
	}
	tk->merges[i] = (struct tok_merge){key, rank, result};
	tk->n_merges++;
}

/* One "left right" rule: the split is at the first space after the first
 * byte, as llama.cpp splits (a side may itself start with a space). */
static void merge_parse(struct tokenizer *tk, const char *s, size_t n, int32_t rank, char *tmp)
{
	const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
	if (!sp)
		return;
	size_t ln = (size_t)(sp - s), rn = n - ln - 1;
	int32_t l = tok_find(tk, s, ln), r = tok_find(tk, sp + 1, rn);
	if (l < 0 || r < 0)
		return;
	memcpy(tmp, s, ln);
	memcpy(tmp + ln, sp + 1, rn);
	int32_t result = tok_find(tk, tmp, ln + rn);
	if (result >= 0)
		merge_insert(tk, l, r, rank, result);
}

static int load_merges(struct tokenizer *tk, const struct gguf *g, ing_err *err)
{
	struct gguf_arr a;
	int rc = gguf_get_arr(g, "tokenizer.ggml.merges", &a);
	if (rc == ING_ERR_NOTFOUND)
		return ing_err_set(err, ING_ERR_FORMAT, "tokenizer: byte-level BPE without tokenizer.ggml.merges");
	if (rc || a.elem_type != GGUF_VT_STRING || a.n > (1u << 28))
		return ing_err_set(err, ING_ERR_FORMAT, "tokenizer: tokenizer.ggml.merges must be an array of strings");
	uint32_t size = 64;
	while (size < 2 * a.n)
		size *= 2;
	tk->merges = ing_malloc_array(size, sizeof *tk->merges);
	char *tmp = ing_malloc((size_t)tk->text_max + 1);
	if (!tk->merges || !tmp) {
		ing_free(tmp);
		return ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for %llu merges",
				   (unsigned long long)a.n);
	}
	memset(tk->merges, 0xff, size * sizeof *tk->merges);
	tk->merge_mask = size - 1;
	struct gguf_arr_iter it;
	struct gguf_value v;
	int32_t rank = 0;
	gguf_arr_iter_init(&it, &a);
	while (gguf_arr_iter_next(&it, &v)) {
		if (v.str.len <= (uint64_t)tk->text_max + 1)
			merge_parse(tk, v.str.ptr, v.str.len, rank, tmp);
		rank++;
	}
	ing_free(tmp);
	return ING_OK;
}

int tok_bpe_load(struct tokenizer *tk, const struct gguf *g, ing_err *err)
{
	for (int b = 0; b < 256; b++) {
		char c[2];
		size_t n = tok_bpe_byte_char((uint8_t)b, c);
		tk->byte_token[b] = tok_find(tk, c, n);
	}
	return load_merges(tk, g, err);
}

/* ---- encoding ----------------------------------------------------------- */

struct bpe_sym {
	int32_t prev, next;
	int32_t id;  /* token of the symbol, -1 for a byte without one */
	uint32_t n;  /* bytes of the word covered; 0 once merged away */
	uint8_t byte; /* the byte, for symbols still of length 1 */
};

struct bpe_ctx {
	const struct tokenizer *tk;
	struct token_ids *out;
	struct bpe_sym *syms; /* [cap] */
	size_t cap;
	struct tok_heap heap;
	char *enc; /* [2 * cap] byte-encoded word, for ignore_merges */
};

static int pair_push(struct bpe_ctx *c, int32_t l, int32_t r)
{
	if (l < 0 || r < 0 || c->syms[l].id < 0 || c->syms[r].id < 0)
		return ING_OK;
	const struct tok_merge *m = merge_find(c->tk, c->syms[l].id, c->syms[r].id);
	if (!m)
		return ING_OK;
	struct tok_heap_item it = {.key = ((uint64_t)(uint32_t)m->rank << 32) | (uint32_t)l, .a = (uint32_t)r,
				   .b = c->syms[l].n + c->syms[r].n};
	return tok_heap_push(&c->heap, it);
}

static int merge_word(struct bpe_ctx *c, size_t n)
{
	int rc = ING_OK;
	for (size_t i = 1; i < n && !rc; i++)
		rc = pair_push(c, (int32_t)i - 1, (int32_t)i);
	struct tok_heap_item it;
	while (!rc && tok_heap_pop(&c->heap, &it)) {
		int32_t l = (int32_t)(uint32_t)it.key, r = (int32_t)it.a;
		struct bpe_sym *ls = &c->syms[l], *rs = &c->syms[r];
		if (ls->n == 0 || rs->n == 0 || ls->n + rs->n != it.b)
			continue; /* stale */
		ls->id = merge_find(c->tk, ls->id, rs->id)->result;
		ls->n += rs->n;
		rs->n = 0;
		ls->next = rs->next;
		if (rs->next >= 0)
			c->syms[rs->next].prev = l;
		rc = pair_push(c, ls->prev, l);
		if (!rc)
			rc = pair_push(c, l, ls->next);
	}
	c->heap.n = 0;
	return rc;
}

/* A byte with no token of its own: llama.cpp tries each byte of its
 * stand-in's UTF-8 as a token and drops what it cannot find. */
static int emit_orphan(struct bpe_ctx *c, uint8_t b)
{
	char ch[2];
	size_t n = tok_bpe_byte_char(b, ch);
	for (size_t i = 0; i < n; i++) {
		int32_t id = tok_find(c->tk, &ch[i], 1);
		if (id >= 0) {
			int rc = token_ids_push(c->out, id);
			if (rc)
				return rc;
		}
	}
	return ING_OK;
}

static int reserve(struct bpe_ctx *c, size_t n)
{
	if (n <= c->cap)
		return ING_OK;
	size_t cap = c->cap ? c->cap : 64;
	while (cap < n)
		cap *= 2;
	struct bpe_sym *s = ing_realloc(c->syms, cap * sizeof *s);
	if (s)
		c->syms = s;
	char *e = ing_realloc(c->enc, 2 * cap);
	if (e)
		c->enc = e;
	if (!s || !e)
		return ING_ERR_NOMEM;
	c->cap = cap;
	return ING_OK;
}

/* ignore_merges: a word that is a token as a whole is taken as it is. */
static int32_t whole_word(struct bpe_ctx *c, const char *word, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += tok_bpe_byte_char((uint8_t)word[i], c->enc + n);
	return tok_find(c->tk, c->enc, n);
}

static int bpe_word(void *ctx, const char *word, size_t len, ing_err *err)
{
	struct bpe_ctx *c = ctx;
	if (len > INT32_MAX)
		return ing_err_set(err, ING_ERR_RANGE, "tokenizer: word of %zu bytes is too long", len);
	int rc = reserve(c, len);
	if (rc)
		return ing_err_set(err, rc, "tokenizer: out of memory for a %zu-byte word", len);
	if (c->tk->ignore_merges) {
		int32_t id = whole_word(c, word, len);
		if (id >= 0)
			return token_ids_push(c->out, id);
	}
	for (size_t i = 0; i < len; i++) {
		uint8_t b = (uint8_t)word[i];
		c->syms[i] = (struct bpe_sym){.prev = (int32_t)i - 1, .next = (int32_t)i + 1,
					      .id = c->tk->byte_token[b], .n = 1, .byte = b};
	}
	c->syms[len - 1].next = -1;
	rc = merge_word(c, len);
	for (int32_t i = 0; i != -1 && !rc; i = c->syms[i].next) {
		const struct bpe_sym *s = &c->syms[i];
		rc = s->id >= 0 ? token_ids_push(c->out, s->id) : emit_orphan(c, s->byte);
	}
	if (rc)
		return ing_err_set(err, rc, "tokenizer: out of memory encoding a word");
	return ING_OK;
}

/* Valid UTF-8 copy of text into buf (3 * len bytes); returns its length. */
static size_t sanitize(const char *text, size_t len, char *buf)
{
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t d = tok_utf8_decode((const uint8_t *)text + i, len - i, &cp);
		if (d == 0) {
			cp = 0xFFFD;
			d = 1;
		} else if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
			cp = 0xFFFD; /* PCRE2 cannot take these; llama.cpp fails on them */
		}
		o += tok_utf8_encode(cp, buf + o);
		i += d;
	}
	return o;
}

int tok_bpe_encode(const struct tokenizer *tk, const char *text, size_t len, struct token_ids *out,
		   ing_err *err)
{
	if (len == 0)
		return ING_OK;
	char *clean = ing_malloc_array(len, 3);
	if (!clean)
		return ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", len);
	size_t n = sanitize(text, len, clean);
	struct bpe_ctx c = {.tk = tk, .out = out};
	int rc = tok_pre_split(tk->pre_state, clean, n, bpe_word, &c, err);
	tok_heap_free(&c.heap);
	ing_free(c.syms);
	ing_free(c.enc);
	ing_free(clean);
	return rc;
}
