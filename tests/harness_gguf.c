/* harness_gguf.c — fuzz body for the GGUF parser and what reads its view.
 *
 * Input: a GGUF file, any bytes. gguf_open_memory() parses it in place
 * (the caller's buffer is exactly the input, so a sanitizer sees any read
 * past it). When it opens, everything gguf.h promises is checked: every
 * string and array lies inside the buffer, array iteration (nested arrays
 * included) yields exactly n elements that agree with the numeric
 * accessors and ends on the array's last byte, lookups find each key and
 * tensor, tensor sizes follow from shape and type, and tensor bytes are
 * all readable. Then the view goes through tokenizer_open() (whose memory
 * must stay proportional to the file, and when a vocabulary opens, the
 * checks of harness_tokenizer_exercise on a fixed text) and finally
 * model_open_gguf(), which takes ownership of it. */
#include "harness_fuzz.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gguf.h"
#include "mem.h"
#include "model.h"
#include "quant.h"
#include "tokenizer.h"

#define WALK_MAX_DEPTH 16

/* Bytes [p, p + n) lie inside the mapped file. */
static bool in_map(const struct gguf *g, const void *p, uint64_t n)
{
	const uint8_t *b = p;
	return b >= g->map && b <= g->map + g->size && n <= (uint64_t)(g->map + g->size - b);
}

/* Reads every byte, so a sanitizer checks the whole span. */
static uint64_t touch(const void *p, uint64_t n)
{
	const volatile uint8_t *b = p;
	uint64_t sum = 0;
	for (uint64_t i = 0; i < n; i++)
		sum += b[i];
	return sum;
}

static void walk_value(const struct gguf *g, const struct gguf_value *v, int depth);

/* An element the iterator produced equals what the accessors read. */
static void check_numeric(const struct gguf_arr *a, uint64_t i, const struct gguf_value *v)
{
	switch (a->elem_type) {
	case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64:
	case GGUF_VT_BOOL:
		if (v->u64 != gguf_arr_u64(a, i))
			harness_fail("array element %llu: iterator and gguf_arr_u64 disagree",
				     (unsigned long long)i);
		if (a->elem_type == GGUF_VT_BOOL && v->u64 > 1)
			harness_fail("bool array element %llu is %llu", (unsigned long long)i,
				     (unsigned long long)v->u64);
		break;
	case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
		if (v->i64 != gguf_arr_i64(a, i))
			harness_fail("array element %llu: iterator and gguf_arr_i64 disagree",
				     (unsigned long long)i);
		break;
	case GGUF_VT_FLOAT32: case GGUF_VT_FLOAT64: {
		double d = gguf_arr_f64(a, i);
		if (memcmp(&d, &v->f64, sizeof d) != 0)
			harness_fail("array element %llu: iterator and gguf_arr_f64 disagree",
				     (unsigned long long)i);
		break;
	}
	default:
		break;
	}
	/* the conversions must not trap on any value (UBSan watches) */
	(void)gguf_arr_u64(a, i);
	(void)gguf_arr_i64(a, i);
	(void)gguf_arr_f64(a, i);
}

static void walk_array(const struct gguf *g, const struct gguf_arr *a, int depth)
{
	if (depth > WALK_MAX_DEPTH)
		harness_fail("arrays nested %d deep got past the parser", depth);
	if (a->elem_type >= GGUF_VT_COUNT)
		harness_fail("array element type %u", (unsigned)a->elem_type);
	if (!in_map(g, a->data, a->nbytes))
		harness_fail("array of %llu elements lies outside the file", (unsigned long long)a->n);
	struct gguf_arr_iter it;
	struct gguf_value v;
	uint64_t count = 0;
	gguf_arr_iter_init(&it, a);
	while (gguf_arr_iter_next(&it, &v)) {
		if (v.type != a->elem_type)
			harness_fail("array element %llu has type %u, array says %u",
				     (unsigned long long)count, (unsigned)v.type, (unsigned)a->elem_type);
		if (v.type == GGUF_VT_STRING &&
		    !(v.str.ptr >= (const char *)a->data &&
		      v.str.len <= (uint64_t)((const char *)a->data + a->nbytes - v.str.ptr)))
			harness_fail("string element %llu lies outside its array", (unsigned long long)count);
		if (v.type == GGUF_VT_ARRAY &&
		    !(v.arr.data >= a->data && v.arr.nbytes <= (uint64_t)(a->data + a->nbytes - v.arr.data)))
			harness_fail("nested array %llu lies outside its array", (unsigned long long)count);
		if (v.type != GGUF_VT_STRING && v.type != GGUF_VT_ARRAY)
			check_numeric(a, count, &v);
		walk_value(g, &v, depth + 1);
		count++;
		if (count > a->n)
			harness_fail("iterator ran past n = %llu", (unsigned long long)a->n);
	}
	if (count != a->n)
		harness_fail("iterator stopped after %llu of %llu elements", (unsigned long long)count,
			     (unsigned long long)a->n);
	if (it.p != a->data + a->nbytes)
		harness_fail("iteration ended %lld bytes off the array's end",
			     (long long)(it.p - (a->data + a->nbytes)));
}

static void walk_value(const struct gguf *g, const struct gguf_value *v, int depth)
{
	if (v->type == GGUF_VT_STRING) {
		if (!in_map(g, v->str.ptr, v->str.len))
			harness_fail("string of %llu bytes lies outside the file",
				     (unsigned long long)v->str.len);
		touch(v->str.ptr, v->str.len);
	} else if (v->type == GGUF_VT_ARRAY) {
		walk_array(g, &v->arr, depth);
	} else if (v->type >= GGUF_VT_COUNT) {
		harness_fail("value type %u", (unsigned)v->type);
	}
	(void)gguf_vtype_name(v->type);
}

/* s as a C string in buf, or false when it holds a NUL or is too long. */
static bool c_string(struct gguf_str s, char *buf, size_t cap)
{
	if (s.len >= cap || memchr(s.ptr, 0, s.len))
		return false;
	memcpy(buf, s.ptr, s.len);
	buf[s.len] = '\0';
	return true;
}

/* Every key is found by lookup and the typed getters accept exactly the
 * types they document. */
static void check_kv(const struct gguf *g, uint64_t i, char *key, size_t cap)
{
	const struct gguf_kv *kv = &g->kv[i];
	if (kv->key.len == 0 || !in_map(g, kv->key.ptr, kv->key.len))
		harness_fail("key %llu lies outside the file or is empty", (unsigned long long)i);
	walk_value(g, &kv->val, 0);
	if (!c_string(kv->key, key, cap))
		return;
	if (gguf_kv_find(g, key) != kv)
		harness_fail("gguf_kv_find('%s') does not find entry %llu", key, (unsigned long long)i);
	uint64_t u;
	int64_t s;
	double d;
	bool b;
	struct gguf_str str;
	struct gguf_arr arr;
	enum gguf_vtype t = kv->val.type;
	bool is_float = t == GGUF_VT_FLOAT32 || t == GGUF_VT_FLOAT64;
	if ((gguf_get_f64(g, key, &d) == ING_OK) != is_float)
		harness_fail("gguf_get_f64 on a %s", gguf_vtype_name(t));
	if ((gguf_get_bool(g, key, &b) == ING_OK) != (t == GGUF_VT_BOOL))
		harness_fail("gguf_get_bool on a %s", gguf_vtype_name(t));
	if ((gguf_get_str(g, key, &str) == ING_OK) != (t == GGUF_VT_STRING))
		harness_fail("gguf_get_str on a %s", gguf_vtype_name(t));
	if ((gguf_get_arr(g, key, &arr) == ING_OK) != (t == GGUF_VT_ARRAY))
		harness_fail("gguf_get_arr on a %s", gguf_vtype_name(t));
	if (gguf_get_u64(g, key, &u) == ING_OK && gguf_get_i64(g, key, &s) == ING_OK && (uint64_t)s != u)
		harness_fail("gguf_get_u64 and gguf_get_i64 disagree on '%s'", key);
}

/* A tensor's info is consistent and its bytes are inside the data section. */
static void check_tensor(const struct gguf *g, uint64_t i, char *name, size_t cap)
{
	const struct gguf_tensor *t = &g->tensors[i];
	if (t->name.len == 0 || !in_map(g, t->name.ptr, t->name.len))
		harness_fail("tensor %llu name lies outside the file or is empty", (unsigned long long)i);
	if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
		harness_fail("tensor %llu has %u dims", (unsigned long long)i, t->n_dims);
	uint64_t n = 1;
	for (int d = 0; d < GGUF_MAX_DIMS; d++) {
		if (t->ne[d] == 0 || (d >= (int)t->n_dims && t->ne[d] != 1))
			harness_fail("tensor %llu: ne[%d] = %llu", (unsigned long long)i, d,
				     (unsigned long long)t->ne[d]);
		if (__builtin_mul_overflow(n, t->ne[d], &n))
			harness_fail("tensor %llu: element count overflows", (unsigned long long)i);
	}
	uint64_t row;
	if (n != t->nelems || !qtype_traits(t->type) || qtype_row_bytes(t->type, t->ne[0], &row) != 0 ||
	    row * (n / t->ne[0]) != t->nbytes)
		harness_fail("tensor %llu: nelems/type/nbytes inconsistent", (unsigned long long)i);
	if (t->offset % g->alignment != 0 || g->data_offset > g->size ||
	    (const uint8_t *)t->data != g->map + g->data_offset + t->offset ||
	    !in_map(g, t->data, t->nbytes))
		harness_fail("tensor %llu data lies outside the data section", (unsigned long long)i);
	touch(t->data, t->nbytes);
	if (c_string(t->name, name, cap) && gguf_tensor_find(g, name) != t)
		harness_fail("gguf_tensor_find('%s') does not find tensor %llu", name,
			     (unsigned long long)i);
}

static void check_view(const struct gguf *g)
{
	static char buf[65536 + 1]; /* keys are at most 65535 bytes */
	if (g->version != 2 && g->version != 3)
		harness_fail("opened version %u", g->version);
	if (g->alignment == 0 || (g->alignment & (g->alignment - 1)) != 0)
		harness_fail("alignment %llu", (unsigned long long)g->alignment);
	for (uint64_t i = 0; i < g->n_kv; i++)
		check_kv(g, i, buf, sizeof buf);
	for (uint64_t i = 0; i < g->n_tensors; i++)
		check_tensor(g, i, buf, sizeof buf);
}

/* What a tokenizer may hold per byte of GGUF, and on top of that (regexes,
 * tables). Tokens, hash and merges take ~10 bytes per file byte. */
#define TOKENIZER_GROWTH 64
#define TOKENIZER_SLACK ((size_t)16 << 20)

static void check_tokenizer(const struct gguf *g)
{
	static const char sample[] =
		"Hello world! <s></s><|endoftext|> <unk> 'll 're 123456 \t\n  x"
		"\xe2\x96\x81\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80 \xff\xc0\x80\xed\xa0\x80 ?!";
	ing_err err = {0};
	struct tokenizer *tk;
	size_t live = ing_mem_live();
	if (tokenizer_open(g, &tk, &err) != ING_OK) {
		if (tk)
			harness_fail("tokenizer_open failed but returned a handle");
		return;
	}
	size_t held = ing_mem_live() - live;
	if (held > TOKENIZER_GROWTH * g->size + TOKENIZER_SLACK)
		harness_fail("a tokenizer from %llu bytes of GGUF holds %zu bytes",
			     (unsigned long long)g->size, held);
	harness_tokenizer_exercise(tk, (const uint8_t *)sample, sizeof sample - 1, false);
	tokenizer_close(tk);
}

/* Binds a model; the model owns g from here on, also on failure. */
static void check_model(struct gguf *g)
{
	ing_err err = {0};
	struct model *m;
	if (model_open_gguf(g, &m, &err) != ING_OK) {
		if (m)
			harness_fail("model_open_gguf failed but returned a model");
		return;
	}
	const struct model_hparams *hp = &m->hp;
	if (!m->tok_embd || !m->output || !m->output_norm || hp->n_layer <= 0 || hp->n_vocab <= 0)
		harness_fail("model opened without its global tensors");
	for (int64_t il = 0; il < hp->n_layer; il++) {
		const struct model_layer *l = &m->layers[il];
		if (!l->attn_norm || !l->wq || !l->wk || !l->wv || !l->wo || !l->ffn_norm ||
		    !l->w_gate || !l->w_up || !l->w_down)
			harness_fail("model layer %lld opened without a required tensor", (long long)il);
	}
	(void)model_weight_bytes(m);
	model_close(m);
}

int harness_gguf(const uint8_t *data, size_t size)
{
	struct gguf *g;
	ing_err err = {0};
	if (gguf_open_memory(data, size, &g, &err) != ING_OK) {
		if (g)
			harness_fail("gguf_open_memory failed but returned a handle");
		if (err.code == ING_OK || err.msg[0] == '\0')
			harness_fail("gguf_open_memory failed without a message");
		return 0;
	}
	if (g->map != data || g->size != size)
		harness_fail("the view is not over the caller's buffer");
	check_view(g);
	check_tokenizer(g);
	check_model(g);
	return 0;
}
