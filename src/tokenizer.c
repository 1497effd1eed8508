/* tokenizer.c — building a tokenizer from GGUF metadata, and its accessors.
 *
 * tokenizer_open() copies the token texts into one arena, hashes them for
 * text -> id lookups, reads scores, types and the special-token ids with
 * llama.cpp's defaults, then hands over to the model-specific loaders
 * (merges for byte-level BPE) and to tokenizer_special.c for the text-based
 * fix-ups llama.cpp applies. Everything is sized once here; encode and
 * decode only read it. */
#include "tokenizer_int.h"

#include <stdio.h>
#include <string.h>

#include "gguf.h"
#include "mem.h"

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"

/* FNV-1a, 64-bit, with a final mix so the low bits index well. */
static uint32_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) {
		h ^= (uint8_t)s[i];
		h *= 1099511628211ull;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)h;
}

int32_t tok_find(const struct tokenizer *tk, const char *s, size_t n)
{
	const struct tok_hash *h = &tk->hash;
	uint32_t hv = hash_bytes(s, n);
	for (uint32_t i = hv & h->mask;; i = (i + 1) & h->mask) {
		uint64_t slot = h->slots[i];
		if (slot == 0)
			return -1;
		if ((uint32_t)(slot >> 32) != hv)
			continue;
		int32_t id = (int32_t)(uint32_t)slot - 1;
		const struct tok_entry *e = &tk->tokens[id];
		if (e->text_len == n && memcmp(tk->text + e->text_off, s, n) == 0)
			return id;
	}
}

static bool same_text(const struct tokenizer *tk, int32_t a, int32_t b)
{
	const struct tok_entry *x = &tk->tokens[a], *y = &tk->tokens[b];
	return x->text_len == y->text_len && memcmp(tk->text + x->text_off, tk->text + y->text_off, x->text_len) == 0;
}

/* Inserts id whose text hashes to hv; returns the id already holding the
 * same text, or -1. Token texts are only read when the hashes agree. */
static int32_t hash_insert(struct tokenizer *tk, int32_t id, uint32_t hv)
{
	struct tok_hash *h = &tk->hash;
	uint32_t i = hv & h->mask;
	for (; h->slots[i]; i = (i + 1) & h->mask) {
		int32_t other = (int32_t)(uint32_t)h->slots[i] - 1;
		if ((uint32_t)(h->slots[i] >> 32) == hv && same_text(tk, id, other))
			return other;
	}
	h->slots[i] = ((uint64_t)hv << 32) | ((uint32_t)id + 1);
	return -1;
}

struct hash_item {
	uint32_t hv, id;
};

/* Hashes every token, then inserts them in the order of their home slots
 * (a counting sort by the top bits), so the writes to the table stay close
 * together: a 262k-token vocabulary loads without a cache miss per token. */
static int hash_build(struct tokenizer *tk, ing_err *err)
{
	uint32_t n = (uint32_t)tk->n_vocab, size = tk->hash.mask + 1;
	uint32_t nb = size < 65536 ? size : 65536, shift = 0;
	while ((size >> shift) > nb)
		shift++;
	struct hash_item *items = ing_malloc_array(n, sizeof *items), *order = ing_malloc_array(n, sizeof *order);
	uint32_t *start = ing_calloc(nb + 1, sizeof *start);
	int rc = items && order && start ? ING_OK : ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for the token hash");
	for (uint32_t id = 0; !rc && id < n; id++) {
		const struct tok_entry *e = &tk->tokens[id];
		items[id] = (struct hash_item){hash_bytes(tk->text + e->text_off, e->text_len), id};
		start[((items[id].hv & tk->hash.mask) >> shift) + 1]++;
	}
	for (uint32_t b = 0; !rc && b < nb; b++)
		start[b + 1] += start[b];
	for (uint32_t id = 0; !rc && id < n; id++)
		order[start[(items[id].hv & tk->hash.mask) >> shift]++] = items[id];
	for (uint32_t k = 0; !rc && k < n; k++) {
		int32_t id = (int32_t)order[k].id, dup = hash_insert(tk, id, order[k].hv);
		if (dup >= 0)
			rc = ing_err_set(err, ING_ERR_FORMAT, "tokenizer: duplicate token '%.64s' has ids %d and %d",
					 tok_text(tk, id), dup < id ? dup : id, dup < id ? id : dup);
	}
	ing_free(items);
	ing_free(order);
	ing_free(start);
	return rc;
}

/* Copies a GGUF string into buf as a NUL-terminated C string (truncating). */
static void str_copy(char *buf, size_t cap, struct gguf_str s)
{
	size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
	memcpy(buf, s.ptr, n);
	buf[n] = '\0';
}

/* Reads the token texts into tk->text and builds the hash. */
static int load_texts(struct tokenizer *tk, const struct gguf_arr *arr, ing_err *err)
{
	struct gguf_arr_iter it;
	struct gguf_value v;
	size_t total = 0;
	gguf_arr_iter_init(&it, arr);
	while (gguf_arr_iter_next(&it, &v))
		total += (v.str.len ? v.str.len : 24) + 1; /* "[EMPTY_n]" fallback */
	if (total > UINT32_MAX)
		return ing_err_set(err, ING_ERR_FORMAT, "tokenizer: token texts too large (%zu bytes)", total);
	tk->text = ing_malloc(total);
	uint32_t size = 64;
	while (size < 2u * (uint32_t)tk->n_vocab)
		size *= 2;
	tk->hash.slots = ing_calloc(size, sizeof *tk->hash.slots);
	tk->hash.mask = size - 1;
	if (!tk->text || !tk->hash.slots)
		return ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for %d tokens", tk->n_vocab);

	size_t off = 0;
	int32_t id = 0;
	gguf_arr_iter_init(&it, arr);
	while (gguf_arr_iter_next(&it, &v)) {
		struct tok_entry *e = &tk->tokens[id];
		e->text_off = (uint32_t)off;
		if (v.str.len) {
			memcpy(tk->text + off, v.str.ptr, v.str.len);
			e->text_len = (uint32_t)v.str.len;
		} else { /* llama.cpp names empty tokens so lookups stay unique */
			e->text_len = (uint32_t)snprintf(tk->text + off, 25, "[EMPTY_%d]", id);
		}
		tk->text[off + e->text_len] = '\0';
		off += e->text_len + 1;
		if (e->text_len > tk->text_max)
			tk->text_max = e->text_len;
		id++;
	}
	return hash_build(tk, err);
}

static uint16_t attr_from_type(int64_t type)
{
	switch (type) {
	case TOKEN_TYPE_NORMAL: return TOK_ATTR_NORMAL;
	case TOKEN_TYPE_UNKNOWN: return TOK_ATTR_UNKNOWN;
	case TOKEN_TYPE_CONTROL: return TOK_ATTR_CONTROL;
	case TOKEN_TYPE_USER_DEFINED: return TOK_ATTR_USER_DEFINED;
	case TOKEN_TYPE_UNUSED: return TOK_ATTR_UNUSED;
	case TOKEN_TYPE_BYTE: return TOK_ATTR_BYTE;
	default: return 0;
	}
}

static bool arr_is_int(enum gguf_vtype t)
{
	return t == GGUF_VT_INT8 || t == GGUF_VT_UINT8 || t == GGUF_VT_INT16 ||
	       t == GGUF_VT_UINT16 || t == GGUF_VT_INT32 || t == GGUF_VT_UINT32 ||
	       t == GGUF_VT_INT64 || t == GGUF_VT_UINT64;
}

/* Scores (float or int arrays) and token types; both optional. */
static int load_scores_types(struct tokenizer *tk, const struct gguf *g, ing_err *err)
{
	struct gguf_arr a;
	int rc = gguf_get_arr(g, KEY_SCORES, &a);
	if (rc == ING_OK) {
		bool is_float = a.elem_type == GGUF_VT_FLOAT32 || a.elem_type == GGUF_VT_FLOAT64;
		if ((!is_float && !arr_is_int(a.elem_type)) || a.n < (uint64_t)tk->n_vocab)
			return ing_err_set(err, ING_ERR_FORMAT, "tokenizer: %s has %llu %s elements for %d tokens",
					   KEY_SCORES, (unsigned long long)a.n, gguf_vtype_name(a.elem_type), tk->n_vocab);
		for (int32_t i = 0; i < tk->n_vocab; i++)
			tk->tokens[i].score = is_float ? (float)gguf_arr_f64(&a, i) : (float)gguf_arr_i64(&a, i);
	} else if (rc != ING_ERR_NOTFOUND) {
		return ing_err_set(err, rc, "tokenizer: %s is not an array", KEY_SCORES);
	}

	rc = gguf_get_arr(g, KEY_TYPES, &a);
	if (rc == ING_OK) {
		if (!arr_is_int(a.elem_type) || a.n < (uint64_t)tk->n_vocab)
			return ing_err_set(err, ING_ERR_FORMAT, "tokenizer: %s has %llu %s elements for %d tokens",
					   KEY_TYPES, (unsigned long long)a.n, gguf_vtype_name(a.elem_type), tk->n_vocab);
		for (int32_t i = 0; i < tk->n_vocab; i++) {
			int64_t t = gguf_arr_i64(&a, i);
			tk->tokens[i].type = (t >= 0 && t <= TOKEN_TYPE_BYTE) ? (uint8_t)t : TOKEN_TYPE_UNDEFINED;
			tk->tokens[i].attr = attr_from_type(t);
		}
	} else if (rc == ING_ERR_NOTFOUND) {
		for (int32_t i = 0; i < tk->n_vocab; i++) {
			tk->tokens[i].type = TOKEN_TYPE_NORMAL;
			tk->tokens[i].attr = TOK_ATTR_NORMAL;
		}
	} else {
		return ing_err_set(err, rc, "tokenizer: %s is not an array", KEY_TYPES);
	}
	return ING_OK;
}

/* An optional bool key into *out; a wrong type is an error. */
static int get_flag(const struct gguf *g, const char *key, bool *out, ing_err *err)
{
	bool b;
	int rc = gguf_get_bool(g, key, &b);
	if (rc == ING_OK)
		*out = b;
	else if (rc != ING_ERR_NOTFOUND)
		return ing_err_set(err, rc, "tokenizer: %s is not a bool", key);
	return ING_OK;
}

/* An optional token-id key: kept only when it names a token, as llama.cpp
 * keeps its default for out-of-range values. */
static int get_token_id(const struct tokenizer *tk, const struct gguf *g, const char *key,
			int32_t *id, ing_err *err)
{
	int64_t v;
	int rc = gguf_get_i64(g, key, &v);
	if (rc == ING_OK) {
		if (v >= 0 && v < tk->n_vocab)
			*id = (int32_t)v;
	} else if (rc != ING_ERR_NOTFOUND) {
		return ing_err_set(err, rc, "tokenizer: %s is not an integer", key);
	}
	return ING_OK;
}

/* Special-token ids: llama.cpp's per-model defaults, then the metadata. */
static int load_special_ids(struct tokenizer *tk, const struct gguf *g, ing_err *err)
{
	if (tk->kind == TOKENIZER_SPM) {
		tk->bos = 1;
		tk->eos = 2;
		tk->unk = 0;
	} else {
		tk->bos = 11;
		tk->eos = 11;
		tk->unk = -1;
	}
	tk->eot = tk->eom = tk->pad = tk->sep = -1;
	tk->fim_pre = tk->fim_suf = tk->fim_mid = -1;
	tk->fim_pad = tk->fim_rep = tk->fim_sep = -1;
	if (tk->bos >= tk->n_vocab)
		tk->bos = -1;
	if (tk->eos >= tk->n_vocab)
		tk->eos = -1;
	if (tk->unk >= tk->n_vocab)
		tk->unk = -1;

	static const struct { const char *key; size_t off; } keys[] = {
		{"tokenizer.ggml.bos_token_id", offsetof(struct tokenizer, bos)},
		{"tokenizer.ggml.eos_token_id", offsetof(struct tokenizer, eos)},
		{"tokenizer.ggml.eot_token_id", offsetof(struct tokenizer, eot)},
		{"tokenizer.ggml.eom_token_id", offsetof(struct tokenizer, eom)},
		{"tokenizer.ggml.unknown_token_id", offsetof(struct tokenizer, unk)},
		{"tokenizer.ggml.seperator_token_id", offsetof(struct tokenizer, sep)},
		{"tokenizer.ggml.padding_token_id", offsetof(struct tokenizer, pad)},
		{"tokenizer.ggml.fim_pre_token_id", offsetof(struct tokenizer, fim_pre)},
		{"tokenizer.ggml.fim_suf_token_id", offsetof(struct tokenizer, fim_suf)},
		{"tokenizer.ggml.fim_mid_token_id", offsetof(struct tokenizer, fim_mid)},
		{"tokenizer.ggml.fim_pad_token_id", offsetof(struct tokenizer, fim_pad)},
		{"tokenizer.ggml.fim_rep_token_id", offsetof(struct tokenizer, fim_rep)},
		{"tokenizer.ggml.fim_sep_token_id", offsetof(struct tokenizer, fim_sep)},
		{"tokenizer.ggml.prefix_token_id", offsetof(struct tokenizer, fim_pre)},
		{"tokenizer.ggml.suffix_token_id", offsetof(struct tokenizer, fim_suf)},
		{"tokenizer.ggml.middle_token_id", offsetof(struct tokenizer, fim_mid)},
	};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		int32_t *id = (int32_t *)((char *)tk + keys[i].off);
		int rc = get_token_id(tk, g, keys[i].key, id, err);
		if (rc)
			return rc;
	}
	return ING_OK;
}

/* Model kind, pre-tokenizer and the flags that follow from them. */
static int load_kind(struct tokenizer *tk, const struct gguf *g, ing_err *err)
{
	struct gguf_str s;
	int rc = gguf_get_str(g, KEY_MODEL, &s);
	if (rc)
		return ing_err_set(err, rc == ING_ERR_NOTFOUND ? ING_ERR_NOTFOUND : ING_ERR_FORMAT,
				   "tokenizer: %s %s", KEY_MODEL,
				   rc == ING_ERR_NOTFOUND ? "is missing" : "is not a string");
	char model[32];
	str_copy(model, sizeof model, s);
	strcpy(tk->pre_name, "default");
	rc = gguf_get_str(g, KEY_PRE, &s);
	if (rc == ING_OK && s.len > 0)
		str_copy(tk->pre_name, sizeof tk->pre_name, s);
	else if (rc != ING_OK && rc != ING_ERR_NOTFOUND)
		return ing_err_set(err, rc, "tokenizer: %s is not a string", KEY_PRE);

	if (strcmp(model, "llama") == 0) {
		tk->kind = TOKENIZER_SPM;
		tk->add_space_prefix = true;
		tk->add_bos = true;
	} else if (strcmp(model, "gpt2") == 0) {
		tk->kind = TOKENIZER_BPE;
		tk->pre = tok_pre_find(tk->pre_name);
		if (!tk->pre)
			return ing_err_set(err, ING_ERR_UNSUPPORTED,
					   "tokenizer: unknown pre-tokenizer '%s'", tk->pre_name);
		tk->clean_spaces = tk->pre->clean_spaces;
		tk->ignore_merges = tk->pre->ignore_merges;
		tk->add_bos = tk->pre->add_bos;
	} else {
		return ing_err_set(err, ING_ERR_UNSUPPORTED, "tokenizer: unsupported model '%s'", model);
	}
	return get_flag(g, "tokenizer.ggml.add_space_prefix", &tk->add_space_prefix, err);
}

/* SPM byte fallback: <0xXX>, else the single byte as a token. */
static void spm_byte_tokens(struct tokenizer *tk)
{
	static const char hex[] = "0123456789ABCDEF";
	for (int b = 0; b < 256; b++) {
		char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
		int32_t id = tok_find(tk, buf, 6);
		if (id < 0) {
			char c = (char)b;
			id = tok_find(tk, &c, 1);
		}
		tk->byte_token[b] = id;
	}
}

static int load_vocab(struct tokenizer *tk, const struct gguf *g, ing_err *err)
{
	struct gguf_arr arr;
	int rc = gguf_get_arr(g, KEY_TOKENS, &arr);
	if (rc)
		return ing_err_set(err, rc == ING_ERR_NOTFOUND ? ING_ERR_NOTFOUND : ING_ERR_FORMAT,
				   "tokenizer: %s %s", KEY_TOKENS,
				   rc == ING_ERR_NOTFOUND ? "is missing" : "is not an array");
	if (arr.elem_type != GGUF_VT_STRING || arr.n == 0 || arr.n > (1u << 30))
		return ing_err_set(err, ING_ERR_FORMAT, "tokenizer: %s must be 1..2^30 strings, not %llu %s",
				   KEY_TOKENS, (unsigned long long)arr.n, gguf_vtype_name(arr.elem_type));
	tk->n_vocab = (int32_t)arr.n;
	tk->tokens = ing_calloc(arr.n, sizeof *tk->tokens);
	tk->eog = ing_calloc(arr.n, 1);
	if (!tk->tokens || !tk->eog)
		return ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory for %llu tokens",
				   (unsigned long long)arr.n);
	rc = load_texts(tk, &arr, err);
	if (!rc)
		rc = load_scores_types(tk, g, err);
	return rc;
}

int tokenizer_open(const struct gguf *g, struct tokenizer **out, ing_err *err)
{
	*out = NULL;
	struct tokenizer *tk = ing_calloc(1, sizeof *tk);
	if (!tk)
		return ing_err_set(err, ING_ERR_NOMEM, "tokenizer: out of memory");
	int rc = load_kind(tk, g, err);
	if (!rc)
		rc = load_vocab(tk, g, err);
	if (!rc && tk->kind == TOKENIZER_BPE)
		rc = tok_bpe_load(tk, g, err);
	if (!rc && tk->kind == TOKENIZER_BPE)
		rc = tok_pre_compile(tk->pre, &tk->pre_state, err);
	if (!rc && tk->kind == TOKENIZER_SPM)
		spm_byte_tokens(tk);
	if (!rc)
		rc = load_special_ids(tk, g, err);
	if (!rc)
		rc = get_flag(g, "tokenizer.ggml.add_bos_token", &tk->add_bos, err);
	if (!rc)
		rc = get_flag(g, "tokenizer.ggml.add_eos_token", &tk->add_eos, err);
	if (!rc && ((tk->add_bos && tk->bos < 0) || (tk->add_eos && tk->eos < 0)))
		rc = ing_err_set(err, ING_ERR_FORMAT, "tokenizer: add_%s_token is set but there is no %s token",
				 tk->add_bos && tk->bos < 0 ? "bos" : "eos", tk->add_bos && tk->bos < 0 ? "BOS" : "EOS");
	if (!rc) {
		char name[128] = "";
		struct gguf_str s;
		if (gguf_get_str(g, "general.name", &s) == ING_OK)
			str_copy(name, sizeof name, s);
		rc = tok_special_setup(tk, name, err);
	}
	if (!rc)
		rc = tok_pieces_build(tk, err);
	if (rc) {
		tokenizer_close(tk);
		return rc;
	}
	*out = tk;
	return ING_OK;
}

void tokenizer_close(struct tokenizer *tk)
{
	if (!tk)
		return;
	tok_pre_free(tk->pre_state);
	tok_trie_free(&tk->special);
	ing_free(tk->tokens);
	ing_free(tk->text);
	ing_free(tk->piece);
	ing_free(tk->hash.slots);
	ing_free(tk->merges);
	ing_free(tk->eog);
	ing_free(tk);
}

int token_ids_push(struct token_ids *t, int32_t id)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		int32_t *p = ing_realloc(t->ids, cap * sizeof *p);
		if (!p)
			return ING_ERR_NOMEM;
		t->ids = p;
		t->cap = cap;
	}
	t->ids[t->n++] = id;
	return ING_OK;
}

void token_ids_free(struct token_ids *t)
{
	if (!t)
		return;
	ing_free(t->ids);
	t->ids = NULL;
	t->n = t->cap = 0;
}

enum tokenizer_kind tokenizer_kind(const struct tokenizer *tk) { return tk->kind; }
const char *tokenizer_pre_name(const struct tokenizer *tk) { return tk->pre_name; }
int32_t tokenizer_n_vocab(const struct tokenizer *tk) { return tk->n_vocab; }
int32_t tokenizer_bos(const struct tokenizer *tk) { return tk->bos; }
int32_t tokenizer_eos(const struct tokenizer *tk) { return tk->eos; }
int32_t tokenizer_eot(const struct tokenizer *tk) { return tk->eot; }
int32_t tokenizer_unk(const struct tokenizer *tk) { return tk->unk; }
int32_t tokenizer_pad(const struct tokenizer *tk) { return tk->pad; }
bool tokenizer_adds_bos(const struct tokenizer *tk) { return tk->add_bos; }
bool tokenizer_adds_eos(const struct tokenizer *tk) { return tk->add_eos; }

static bool id_ok(const struct tokenizer *tk, int32_t id)
{
	return id >= 0 && id < tk->n_vocab;
}

bool tokenizer_is_eog(const struct tokenizer *tk, int32_t id)
{
	return id_ok(tk, id) && tk->eog[id];
}

bool tokenizer_is_control(const struct tokenizer *tk, int32_t id)
{
	return id_ok(tk, id) && (tk->tokens[id].attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN));
}

enum token_type tokenizer_token_type(const struct tokenizer *tk, int32_t id)
{
	return id_ok(tk, id) ? (enum token_type)tk->tokens[id].type : TOKEN_TYPE_UNDEFINED;
}

const char *tokenizer_token_text(const struct tokenizer *tk, int32_t id, size_t *len)
{
	if (!id_ok(tk, id))
		return NULL;
	if (len)
		*len = tk->tokens[id].text_len;
	return tok_text(tk, id);
}

int32_t tokenizer_find_token(const struct tokenizer *tk, const char *text)
{
	return tok_find(tk, text, strlen(text));
}
