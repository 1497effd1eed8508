/* test_gguf.c — the GGUF reader against files written by tests/gguf_writer.c.
 *
 *   round trips   every tensor type, every metadata value type (nested
 *                 arrays and gguf_arr_iter included), v2 and v3, alignments
 *                 1..4096, the getters' conversions;
 *   corruption    every truncation point of a small file, 10,000 seeded
 *                 random byte flips, and one case per malformed field;
 *   resources     allocation-failure injection over open, no leaks
 *                 (ing_mem_live() back to its start after each case), no
 *                 outsized allocation for absurd counts;
 *   files         gguf_open on a real file, a directory, a missing path, the
 *                 default model when installed.
 *
 * Every corrupt input is opened from an exact-size heap copy so ASan flags a
 * read even one byte past the end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "mem.h"
#include "quant.h"

/* ---- helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void) /* xorshift64* */
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rng_next() >> 56);
}

/* malloc'd copy of exactly n bytes (at least one allocated byte, so n == 0
 * still gives a pointer ASan guards). */
static uint8_t *dup_exact(const uint8_t *buf, size_t n)
{
	uint8_t *p = malloc(n ? n : 1);
	if (!p)
		abort();
	if (n)
		memcpy(p, buf, n);
	return p;
}

static int has(const char *msg, const char *want)
{
	return strstr(msg, want) != NULL;
}

/* Opens buf[0..size) from an exact-size copy and checks that it fails with
 * `code` and a message containing `want` (NULL: any non-empty message),
 * leaving no live allocation behind. */
static void expect_error(const char *label, const uint8_t *buf, size_t size, int code,
			 const char *want)
{
	static struct gguf sentinel; /* *out must be overwritten with NULL */
	uint8_t *copy = dup_exact(buf, size);
	size_t live = ing_mem_live();
	struct gguf *g = &sentinel;
	ing_err err;
	int rc = gguf_open_memory(copy, size, &g, &err);
	CHECK(rc == code, "%s: got %s, want %s (msg: %s)", label, ing_err_name(rc),
	      ing_err_name(code), err.msg);
	CHECK(err.code == rc, "%s: err.code %d != rc %d", label, err.code, rc);
	if (rc != ING_OK) {
		CHECK(g == NULL, "%s: *out not NULL on failure", label);
		CHECK(err.msg[0] != '\0', "%s: empty message", label);
		if (want)
			CHECK(has(err.msg, want), "%s: message '%s' lacks '%s'", label, err.msg, want);
	} else {
		gguf_close(g);
	}
	CHECK(ing_mem_live() == live, "%s: leaked %zu bytes", label, ing_mem_live() - live);
	free(copy);
}

/* finish() + expect_error() + free, for the many one-off writers below. */
static void expect_writer_error(const char *label, struct gguf_writer *w, int code,
				const char *want)
{
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(w, &buf, &size);
	expect_error(label, buf, size, code, want);
	free(buf);
	gguf_writer_free(w);
}

/* Opens a buffer that must be valid; NULL (with a failed CHECK) otherwise. */
static struct gguf *open_ok(const char *label, const uint8_t *buf, size_t size)
{
	struct gguf *g;
	ing_err err;
	int rc = gguf_open_memory(buf, size, &g, &err);
	CHECK(rc == ING_OK, "%s: open failed: %s", label, err.msg);
	return rc == ING_OK ? g : NULL;
}

static int same_bits(double a, double b)
{
	return memcmp(&a, &b, sizeof a) == 0;
}

/* ---- walking an opened file: every value, every tensor byte ---- */

static uint64_t touch(const void *p, uint64_t n)
{
	const volatile uint8_t *b = p;
	uint64_t s = 0;
	for (uint64_t i = 0; i < n; i++)
		s += b[i];
	return s;
}

static uint64_t walk_arr(const struct gguf_arr *a, int depth);

static uint64_t walk_value(const struct gguf_value *v, int depth)
{
	if (v->type == GGUF_VT_STRING)
		return touch(v->str.ptr, v->str.len);
	if (v->type == GGUF_VT_ARRAY)
		return walk_arr(&v->arr, depth + 1);
	return v->u64;
}

/* Iterates a's elements, checking the iterator against the indexed getters
 * and that it ends exactly at the array's last byte. */
static uint64_t walk_arr(const struct gguf_arr *a, int depth)
{
	uint64_t h = 0, i = 0;
	struct gguf_arr_iter it;
	struct gguf_value v;
	CHECK(depth <= 16, "array depth %d", depth);
	gguf_arr_iter_init(&it, a);
	while (gguf_arr_iter_next(&it, &v)) {
		CHECK(v.type == a->elem_type, "iter type %d != %d", v.type, a->elem_type);
		if (a->elem_type == GGUF_VT_FLOAT32 || a->elem_type == GGUF_VT_FLOAT64)
			CHECK(same_bits(v.f64, gguf_arr_f64(a, i)), "f64 elem %llu", (unsigned long long)i);
		else if (a->elem_type == GGUF_VT_INT8 || a->elem_type == GGUF_VT_INT16 ||
			 a->elem_type == GGUF_VT_INT32 || a->elem_type == GGUF_VT_INT64)
			CHECK(v.i64 == gguf_arr_i64(a, i), "i64 elem %llu", (unsigned long long)i);
		else if (a->elem_type != GGUF_VT_STRING && a->elem_type != GGUF_VT_ARRAY)
			CHECK(v.u64 == gguf_arr_u64(a, i), "u64 elem %llu", (unsigned long long)i);
		h += walk_value(&v, depth);
		i++;
	}
	CHECK(i == a->n, "iterated %llu of %llu elements", (unsigned long long)i,
	      (unsigned long long)a->n);
	CHECK(it.p == a->data + a->nbytes, "iterator stopped %lld bytes from the end",
	      (long long)(a->data + a->nbytes - it.p));
	return h;
}

/* Checks the invariants an opened file promises and reads every byte it
 * points at (all tensor bytes when touch_all, else the first and last). */
static uint64_t walk(const struct gguf *g, int touch_all)
{
	uint64_t h = 0;
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const struct gguf_kv *kv = &g->kv[i];
		CHECK(kv->key.len > 0 && (const uint8_t *)kv->key.ptr >= g->map &&
		      (const uint8_t *)kv->key.ptr + kv->key.len <= g->map + g->size, "kv %llu key",
		      (unsigned long long)i);
		h += touch(kv->key.ptr, kv->key.len) + walk_value(&kv->val, 0);
	}
	CHECK(g->data_offset <= g->size, "data offset past the end");
	CHECK(g->alignment && (g->alignment & (g->alignment - 1)) == 0, "alignment %llu",
	      (unsigned long long)g->alignment);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		const uint8_t *d = t->data;
		uint64_t row, nelems = 1;
		CHECK(t->n_dims >= 1 && t->n_dims <= GGUF_MAX_DIMS, "n_dims %u", t->n_dims);
		for (int k = 0; k < GGUF_MAX_DIMS; k++)
			nelems *= t->ne[k];
		CHECK(nelems == t->nelems, "tensor %llu nelems", (unsigned long long)i);
		CHECK(qtype_traits(t->type) && qtype_row_bytes(t->type, t->ne[0], &row) == 0 &&
		      row * (nelems / t->ne[0]) == t->nbytes, "tensor %llu size", (unsigned long long)i);
		CHECK(d == g->map + g->data_offset + t->offset && t->offset % g->alignment == 0 &&
		      t->nbytes <= g->size - (uint64_t)(d - g->map), "tensor %llu placement",
		      (unsigned long long)i);
		h += touch(t->name.ptr, t->name.len);
		if (touch_all)
			h += touch(d, t->nbytes);
		else
			h += d[0] + d[t->nbytes - 1];
	}
	return h;
}

/* ---- the small file most corruption cases start from ----
 * kv 0 general.architecture, 1 test.n_ctx (u32), 2 tokens (string array),
 * 3 nested ([[1,2,3],["x","yz"]]), 4 flag (bool), 5 scale (f32),
 * 6 general.alignment (32), 7 mask (bool array);
 * tensor 0 "w.f32" F32 8x2, 1 "w.q4" Q4_0 64x2, 2 "w.q8" Q8_0 32. */
enum { KV_ARCH, KV_NCTX, KV_TOKENS, KV_NESTED, KV_FLAG, KV_SCALE, KV_ALIGN, KV_MASK, KV_COUNT };
enum { T_F32, T_Q4, T_Q8, T_COUNT };

static void put_nested(struct gguf_writer *w, const char *key)
{
	gguf_writer_kv_begin(w, key, GGUF_VT_ARRAY);
	gguf_writer_put_arr_header(w, GGUF_VT_ARRAY, 2);
	gguf_writer_put_arr_header(w, GGUF_VT_INT32, 3);
	for (uint32_t i = 1; i <= 3; i++)
		gguf_writer_put_u32(w, i);
	gguf_writer_put_arr_header(w, GGUF_VT_STRING, 2);
	gguf_writer_put_str(w, "x");
	gguf_writer_put_str(w, "yz");
}

static void small_file(struct gguf_writer *w, uint32_t version)
{
	static const char *const toks[] = { "<s>", "hello", "" };
	uint8_t raw[34 * 4];
	float x[16];
	for (int i = 0; i < 16; i++)
		x[i] = (float)i - 7.5f;
	for (size_t i = 0; i < sizeof raw; i++)
		raw[i] = (uint8_t)(i * 37 + 11);
	gguf_writer_init(w, version);
	gguf_writer_kv_str(w, "general.architecture", "test");
	gguf_writer_kv_u32(w, "test.n_ctx", 128);
	gguf_writer_kv_arr_str(w, "tokens", 3, toks);
	put_nested(w, "nested");
	gguf_writer_kv_bool(w, "flag", true);
	gguf_writer_kv_f32(w, "scale", 0.5f);
	gguf_writer_kv_u32(w, "general.alignment", 32);
	gguf_writer_kv_arr(w, "mask", GGUF_VT_BOOL, 4, (const uint8_t[]){ 1, 0, 0, 1 });
	gguf_writer_tensor(w, "w.f32", QTYPE_F32, 2, (const uint64_t[]){ 8, 2 }, x);
	gguf_writer_tensor(w, "w.q4", QTYPE_Q4_0, 2, (const uint64_t[]){ 64, 2 }, raw);
	gguf_writer_tensor(w, "w.q8", QTYPE_Q8_0, 1, (const uint64_t[]){ 32 }, raw);
}

/* ---- round trips: tensors ---- */

static const uint32_t all_types[] = {
	QTYPE_F32, QTYPE_F16, QTYPE_BF16, QTYPE_Q4_0, QTYPE_Q4_1, QTYPE_Q5_0, QTYPE_Q5_1,
	QTYPE_Q8_0, QTYPE_Q8_1, QTYPE_Q2_K, QTYPE_Q3_K, QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K,
	QTYPE_Q8_K,
};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* One tensor per type and shape: raw random bytes, and floats through the
 * reference quantizer; read back byte for byte. */
static void test_tensor_roundtrip(uint32_t version, uint32_t alignment, int write_alignment)
{
	char label[64], name[64];
	snprintf(label, sizeof label, "v%u align %u%s", version, alignment,
		 write_alignment ? "" : " (default)");
	size_t live = ing_mem_live();
	struct gguf_writer w;
	gguf_writer_init(&w, version);
	if (write_alignment)
		gguf_writer_kv_u32(&w, "general.alignment", alignment);
	enum { N_SHAPES = 4 };
	uint8_t *want[N_TYPES][N_SHAPES + 1];
	size_t want_n[N_TYPES][N_SHAPES + 1];
	for (size_t k = 0; k < N_TYPES; k++) {
		uint32_t t = all_types[k];
		uint64_t blk = qtype_traits(t)->block_elems;
		const uint64_t shapes[N_SHAPES][4] = {
			{ blk, 1, 1, 1 }, { 2 * blk, 3, 1, 1 }, { blk, 2, 3, 1 }, { blk, 1, 2, 2 },
		};
		for (uint32_t s = 0; s < N_SHAPES; s++) {
			uint64_t row, rows = shapes[s][1] * shapes[s][2] * shapes[s][3];
			qtype_row_bytes(t, shapes[s][0], &row);
			want_n[k][s] = row * rows;
			want[k][s] = malloc(want_n[k][s]);
			fill_random(want[k][s], want_n[k][s]);
			snprintf(name, sizeof name, "%s.raw%u", qtype_traits(t)->name, s);
			int idx = gguf_writer_tensor(&w, name, t, s + 1, shapes[s], want[k][s]);
			CHECK(idx >= 0, "%s: writer refused %s", label, name);
		}
		/* floats, quantized on the way in */
		uint64_t ne[2] = { 2 * blk, 2 }, row;
		qtype_row_bytes(t, ne[0], &row);
		float *x = malloc(ne[0] * ne[1] * sizeof *x);
		for (uint64_t i = 0; i < ne[0] * ne[1]; i++)
			x[i] = (float)((int)(rng_next() % 2001) - 1000) / 256.0f;
		want_n[k][N_SHAPES] = 2 * row;
		want[k][N_SHAPES] = malloc(2 * row);
		for (int r = 0; r < 2; r++)
			quant_quantize_ref((enum qtype)t, x + r * ne[0], want[k][N_SHAPES] + r * row,
					   (int64_t)ne[0]);
		snprintf(name, sizeof name, "%s.f32", qtype_traits(t)->name);
		CHECK(gguf_writer_tensor_f32(&w, name, t, 2, ne, x) >= 0, "%s: %s", label, name);
		free(x);
	}
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(&w, &buf, &size);
	struct gguf *g = open_ok(label, buf, size);
	if (g) {
		CHECK(g->version == version, "%s: version %u", label, g->version);
		CHECK(g->alignment == alignment, "%s: alignment %llu", label,
		      (unsigned long long)g->alignment);
		CHECK(g->data_offset == w.data_offset && g->data_offset % alignment == 0,
		      "%s: data offset %llu, writer %zu", label, (unsigned long long)g->data_offset,
		      w.data_offset);
		CHECK(g->n_tensors == N_TYPES * (N_SHAPES + 1), "%s: %llu tensors", label,
		      (unsigned long long)g->n_tensors);
		for (size_t k = 0; k < N_TYPES && g->n_tensors == N_TYPES * (N_SHAPES + 1); k++) {
			for (uint32_t s = 0; s <= N_SHAPES; s++) {
				size_t i = k * (N_SHAPES + 1) + s;
				const struct gguf_tensor *t = &g->tensors[i];
				const struct gguf_wtensor *wt = &w.tensors[i];
				CHECK(gguf_str_eq(t->name, wt->name) &&
				      gguf_tensor_find(g, wt->name) == t, "%s: name %s", label, wt->name);
				CHECK(t->type == all_types[k] && t->n_dims == wt->n_dims, "%s: %s type/dims",
				      label, wt->name);
				for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
					CHECK(t->ne[d] == (d < wt->n_dims ? wt->ne[d] : 1), "%s: %s ne[%u]",
					      label, wt->name, d);
				CHECK(t->nbytes == want_n[k][s], "%s: %s nbytes %llu want %zu", label,
				      wt->name, (unsigned long long)t->nbytes, want_n[k][s]);
				CHECK(t->nbytes == want_n[k][s] &&
				      memcmp(t->data, want[k][s], want_n[k][s]) == 0, "%s: %s data", label,
				      wt->name);
				CHECK((const uint8_t *)t->data == buf + wt->pos.data &&
				      wt->pos.data % alignment == 0, "%s: %s placement", label, wt->name);
			}
		}
		walk(g, 1);
		CHECK(gguf_tensor_find(g, "nope") == NULL, "%s: found a missing tensor", label);
		gguf_close(g);
	}
	CHECK(ing_mem_live() == live, "%s: leak", label);
	free(buf);
	gguf_writer_free(&w);
	for (size_t k = 0; k < N_TYPES; k++)
		for (int s = 0; s <= N_SHAPES; s++)
			free(want[k][s]);
}

/* Float types hold the written values exactly. */
static void test_float_values(void)
{
	float x[8] = { 0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 1.0f / 1024, 3.0f, -1000.0f };
	struct gguf_writer w;
	gguf_writer_init(&w, 3);
	gguf_writer_tensor_f32(&w, "f32", QTYPE_F32, 1, (const uint64_t[]){ 8 }, x);
	gguf_writer_tensor_f32(&w, "f16", QTYPE_F16, 1, (const uint64_t[]){ 8 }, x);
	gguf_writer_tensor_f32(&w, "bf16", QTYPE_BF16, 1, (const uint64_t[]){ 8 }, x);
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(&w, &buf, &size);
	struct gguf *g = open_ok("float values", buf, size);
	if (g) {
		const struct gguf_tensor *f32 = gguf_tensor_find(g, "f32");
		const struct gguf_tensor *f16 = gguf_tensor_find(g, "f16");
		const struct gguf_tensor *bf16 = gguf_tensor_find(g, "bf16");
		CHECK(f32 && f16 && bf16, "float tensors missing");
		for (int i = 0; f32 && f16 && bf16 && i < 8; i++) {
			float a, b, c;
			uint16_t h;
			memcpy(&a, (const uint8_t *)f32->data + 4 * i, 4);
			memcpy(&h, (const uint8_t *)f16->data + 2 * i, 2);
			b = fp16_to_f32(h);
			memcpy(&h, (const uint8_t *)bf16->data + 2 * i, 2);
			c = bf16_to_f32(h);
			CHECK(a == x[i] && b == x[i] && (i == 4 || c == x[i]), "float %d: %g %g %g want %g",
			      i, a, b, c, x[i]);
		}
		gguf_close(g);
	}
	free(buf);
	gguf_writer_free(&w);
}

/* The writer refuses tensors gguf.c would refuse. */
static void test_writer_refuses(void)
{
	struct gguf_writer w;
	gguf_writer_init(&w, 3);
	CHECK(gguf_writer_tensor(&w, "a", 4, 1, (const uint64_t[]){ 32 }, NULL) < 0, "type 4");
	CHECK(gguf_writer_tensor(&w, "a", QTYPE_Q4_0, 1, (const uint64_t[]){ 33 }, NULL) < 0,
	      "Q4_0 row 33");
	CHECK(gguf_writer_tensor(&w, "a", QTYPE_F32, 0, (const uint64_t[]){ 1 }, NULL) < 0, "0 dims");
	CHECK(gguf_writer_tensor(&w, "a", QTYPE_F32, 5, (const uint64_t[]){ 1, 1, 1, 1, 1 }, NULL) < 0,
	      "5 dims");
	CHECK(gguf_writer_tensor(&w, "a", QTYPE_F32, 2, (const uint64_t[]){ 4, 0 }, NULL) < 0, "dim 0");
	CHECK(w.n_tensors == 0, "refused tensors were added");
	gguf_writer_free(&w);
}

/* ---- round trips: metadata ---- */

static void put_deep(struct gguf_writer *w, const char *key, int depth)
{
	/* depth arrays, each holding the next; the innermost holds one u8 */
	gguf_writer_kv_begin(w, key, GGUF_VT_ARRAY);
	for (int d = 1; d < depth; d++)
		gguf_writer_put_arr_header(w, GGUF_VT_ARRAY, 1);
	gguf_writer_put_arr_header(w, GGUF_VT_UINT8, 1);
	gguf_writer_put_u8(w, 42);
}

static void write_all_values(struct gguf_writer *w)
{
	static const char *const strs[] = { "alpha", "", "gamma with spaces" };
	static const uint8_t u8s[] = { 0, 1, 255 };
	static const int8_t i8s[] = { -128, 0, 127 };
	static const uint16_t u16s[] = { 0, 65535 };
	static const int16_t i16s[] = { -32768, 32767 };
	static const uint32_t u32s[] = { 0, 4000000000u };
	static const int32_t i32s[] = { INT32_MIN, -1, INT32_MAX };
	static const float f32s[] = { 0.25f, -1e30f, INFINITY };
	static const uint64_t u64s[] = { UINT64_MAX, 1 };
	static const int64_t i64s[] = { INT64_MIN, INT64_MAX };
	static const double f64s[] = { 1e300, -0.0 };
	static const uint8_t bools[] = { 1, 0, 1 };
	static const double fsat[] = { -1.0, 1e30, NAN, 3.75, -INFINITY };
	gguf_writer_kv_u8(w, "u8", 200);
	gguf_writer_kv_i8(w, "i8", -100);
	gguf_writer_kv_u16(w, "u16", 60000);
	gguf_writer_kv_i16(w, "i16", -30000);
	gguf_writer_kv_u32(w, "u32", 4000000000u);
	gguf_writer_kv_i32(w, "i32", -2000000000);
	gguf_writer_kv_f32(w, "f32", 1.5f);
	gguf_writer_kv_bool(w, "true", true);
	gguf_writer_kv_bool(w, "false", false);
	gguf_writer_kv_str(w, "str", "hello");
	gguf_writer_kv_str(w, "empty", "");
	gguf_writer_kv_strn(w, "nul", "a\0b", 3);
	gguf_writer_kv_u64(w, "u64", UINT64_MAX);
	gguf_writer_kv_i64(w, "i64", INT64_MIN);
	gguf_writer_kv_f64(w, "f64", -2.25e-300);
	gguf_writer_kv_i32(w, "i32pos", 7);
	gguf_writer_kv_u64(w, "u64small", 9);
	gguf_writer_kv_arr(w, "a.u8", GGUF_VT_UINT8, 3, u8s);
	gguf_writer_kv_arr(w, "a.i8", GGUF_VT_INT8, 3, i8s);
	gguf_writer_kv_arr(w, "a.u16", GGUF_VT_UINT16, 2, u16s);
	gguf_writer_kv_arr(w, "a.i16", GGUF_VT_INT16, 2, i16s);
	gguf_writer_kv_arr_u32(w, "a.u32", 2, u32s);
	gguf_writer_kv_arr_i32(w, "a.i32", 3, i32s);
	gguf_writer_kv_arr_f32(w, "a.f32", 3, f32s);
	gguf_writer_kv_arr(w, "a.u64", GGUF_VT_UINT64, 2, u64s);
	gguf_writer_kv_arr(w, "a.i64", GGUF_VT_INT64, 2, i64s);
	gguf_writer_kv_arr(w, "a.f64", GGUF_VT_FLOAT64, 2, f64s);
	gguf_writer_kv_arr(w, "a.bool", GGUF_VT_BOOL, 3, bools);
	gguf_writer_kv_arr(w, "a.fsat", GGUF_VT_FLOAT64, 5, fsat);
	gguf_writer_kv_arr_str(w, "a.str", 3, strs);
	gguf_writer_kv_arr_i32(w, "a.empty", 0, NULL);
	put_nested(w, "a.nested");
	put_deep(w, "a.deep", 8);
	gguf_writer_kv_begin(w, "a.empty_nested", GGUF_VT_ARRAY);
	gguf_writer_put_arr_header(w, GGUF_VT_ARRAY, 2);
	gguf_writer_put_arr_header(w, GGUF_VT_STRING, 0);
	gguf_writer_put_arr_header(w, GGUF_VT_ARRAY, 0);
}

static void check_arr_numbers(const struct gguf *g)
{
	struct gguf_arr a;
	CHECK(gguf_get_arr(g, "a.u8", &a) == ING_OK && a.elem_type == GGUF_VT_UINT8 && a.n == 3 &&
	      gguf_arr_u64(&a, 2) == 255 && gguf_arr_i64(&a, 2) == 255 && gguf_arr_f64(&a, 1) == 1.0,
	      "a.u8");
	CHECK(gguf_get_arr(g, "a.i8", &a) == ING_OK && a.n == 3 && gguf_arr_i64(&a, 0) == -128 &&
	      gguf_arr_i64(&a, 2) == 127 && gguf_arr_f64(&a, 0) == -128.0, "a.i8");
	CHECK(gguf_get_arr(g, "a.u16", &a) == ING_OK && gguf_arr_u64(&a, 1) == 65535, "a.u16");
	CHECK(gguf_get_arr(g, "a.i16", &a) == ING_OK && gguf_arr_i64(&a, 0) == -32768 &&
	      gguf_arr_i64(&a, 1) == 32767, "a.i16");
	CHECK(gguf_get_arr(g, "a.u32", &a) == ING_OK && gguf_arr_u64(&a, 1) == 4000000000u &&
	      gguf_arr_i64(&a, 1) == 4000000000ll, "a.u32");
	CHECK(gguf_get_arr(g, "a.i32", &a) == ING_OK && gguf_arr_i64(&a, 0) == INT32_MIN &&
	      gguf_arr_i64(&a, 1) == -1 && gguf_arr_u64(&a, 2) == INT32_MAX, "a.i32");
	CHECK(gguf_get_arr(g, "a.f32", &a) == ING_OK && gguf_arr_f64(&a, 0) == 0.25 &&
	      gguf_arr_f64(&a, 1) == (double)-1e30f && isinf(gguf_arr_f64(&a, 2)), "a.f32");
	CHECK(gguf_get_arr(g, "a.u64", &a) == ING_OK && gguf_arr_u64(&a, 0) == UINT64_MAX, "a.u64");
	CHECK(gguf_get_arr(g, "a.i64", &a) == ING_OK && gguf_arr_i64(&a, 0) == INT64_MIN &&
	      gguf_arr_i64(&a, 1) == INT64_MAX, "a.i64");
	CHECK(gguf_get_arr(g, "a.f64", &a) == ING_OK && gguf_arr_f64(&a, 0) == 1e300 &&
	      same_bits(gguf_arr_f64(&a, 1), -0.0), "a.f64");
	CHECK(gguf_get_arr(g, "a.bool", &a) == ING_OK && a.elem_type == GGUF_VT_BOOL &&
	      gguf_arr_u64(&a, 0) == 1 && gguf_arr_u64(&a, 1) == 0, "a.bool");
	CHECK(gguf_get_arr(g, "a.empty", &a) == ING_OK && a.n == 0 && a.nbytes == 0, "a.empty");
	/* floats read as integers saturate, NaN gives 0 */
	CHECK(gguf_get_arr(g, "a.fsat", &a) == ING_OK && a.n == 5, "a.fsat");
	static const uint64_t want_u[] = { 0, UINT64_MAX, 0, 3, 0 };
	static const int64_t want_i[] = { -1, INT64_MAX, 0, 3, INT64_MIN };
	for (uint64_t k = 0; k < 5 && a.n == 5; k++)
		CHECK(gguf_arr_u64(&a, k) == want_u[k] && gguf_arr_i64(&a, k) == want_i[k],
		      "a.fsat[%llu]: %llu %lld", (unsigned long long)k,
		      (unsigned long long)gguf_arr_u64(&a, k), (long long)gguf_arr_i64(&a, k));
}

static void check_arr_iter(const struct gguf *g)
{
	struct gguf_arr a;
	struct gguf_arr_iter it;
	struct gguf_value v;
	static const char *const strs[] = { "alpha", "", "gamma with spaces" };
	CHECK(gguf_get_arr(g, "a.str", &a) == ING_OK && a.elem_type == GGUF_VT_STRING && a.n == 3,
	      "a.str");
	gguf_arr_iter_init(&it, &a);
	for (int i = 0; i < 3; i++)
		CHECK(gguf_arr_iter_next(&it, &v) && v.type == GGUF_VT_STRING &&
		      gguf_str_eq(v.str, strs[i]), "a.str[%d]", i);
	CHECK(!gguf_arr_iter_next(&it, &v), "a.str has a 4th element");

	/* [[1, 2, 3], ["x", "yz"]] */
	CHECK(gguf_get_arr(g, "a.nested", &a) == ING_OK && a.elem_type == GGUF_VT_ARRAY && a.n == 2,
	      "a.nested");
	gguf_arr_iter_init(&it, &a);
	CHECK(gguf_arr_iter_next(&it, &v) && v.type == GGUF_VT_ARRAY &&
	      v.arr.elem_type == GGUF_VT_INT32 && v.arr.n == 3 && gguf_arr_i64(&v.arr, 0) == 1 &&
	      gguf_arr_i64(&v.arr, 2) == 3, "a.nested[0]");
	CHECK(gguf_arr_iter_next(&it, &v) && v.type == GGUF_VT_ARRAY &&
	      v.arr.elem_type == GGUF_VT_STRING && v.arr.n == 2, "a.nested[1]");
	struct gguf_arr inner = v.arr;
	struct gguf_arr_iter it2;
	struct gguf_value s;
	gguf_arr_iter_init(&it2, &inner);
	CHECK(gguf_arr_iter_next(&it2, &s) && gguf_str_eq(s.str, "x") &&
	      gguf_arr_iter_next(&it2, &s) && gguf_str_eq(s.str, "yz") &&
	      !gguf_arr_iter_next(&it2, &s), "a.nested[1] strings");
	CHECK(!gguf_arr_iter_next(&it, &v), "a.nested has a 3rd element");

	/* 8 levels deep, 42 at the bottom */
	CHECK(gguf_get_arr(g, "a.deep", &a) == ING_OK, "a.deep");
	int depth = 1;
	while (a.elem_type == GGUF_VT_ARRAY) {
		gguf_arr_iter_init(&it, &a);
		if (!gguf_arr_iter_next(&it, &v) || v.type != GGUF_VT_ARRAY)
			break;
		a = v.arr;
		depth++;
	}
	CHECK(depth == 8 && a.elem_type == GGUF_VT_UINT8 && gguf_arr_u64(&a, 0) == 42,
	      "a.deep: depth %d", depth);

	/* a numeric array walked by the iterator */
	CHECK(gguf_get_arr(g, "a.i16", &a) == ING_OK, "a.i16");
	gguf_arr_iter_init(&it, &a);
	CHECK(gguf_arr_iter_next(&it, &v) && v.type == GGUF_VT_INT16 && v.i64 == -32768 &&
	      gguf_arr_iter_next(&it, &v) && v.i64 == 32767 && !gguf_arr_iter_next(&it, &v),
	      "a.i16 iter");
}

static void check_getters(const struct gguf *g)
{
	uint64_t u;
	int64_t i;
	double f;
	bool b;
	struct gguf_str s;
	struct gguf_arr a;
	CHECK(gguf_get_u64(g, "u8", &u) == ING_OK && u == 200, "u8");
	CHECK(gguf_get_i64(g, "u8", &i) == ING_OK && i == 200, "u8 as i64");
	CHECK(gguf_get_i64(g, "i8", &i) == ING_OK && i == -100, "i8");
	CHECK(gguf_get_u64(g, "i8", &u) == ING_ERR_FORMAT, "negative i8 as u64");
	CHECK(gguf_get_u64(g, "u16", &u) == ING_OK && u == 60000, "u16");
	CHECK(gguf_get_i64(g, "i16", &i) == ING_OK && i == -30000, "i16");
	CHECK(gguf_get_u64(g, "u32", &u) == ING_OK && u == 4000000000u, "u32");
	CHECK(gguf_get_i64(g, "u32", &i) == ING_OK && i == 4000000000ll, "u32 as i64");
	CHECK(gguf_get_i64(g, "i32", &i) == ING_OK && i == -2000000000, "i32");
	CHECK(gguf_get_u64(g, "i32pos", &u) == ING_OK && u == 7, "positive i32 as u64");
	CHECK(gguf_get_u64(g, "u64", &u) == ING_OK && u == UINT64_MAX, "u64");
	CHECK(gguf_get_i64(g, "u64", &i) == ING_ERR_FORMAT, "u64 max as i64");
	CHECK(gguf_get_i64(g, "u64small", &i) == ING_OK && i == 9, "small u64 as i64");
	CHECK(gguf_get_i64(g, "i64", &i) == ING_OK && i == INT64_MIN, "i64");
	CHECK(gguf_get_f64(g, "f32", &f) == ING_OK && f == 1.5, "f32");
	CHECK(gguf_get_f64(g, "f64", &f) == ING_OK && f == -2.25e-300, "f64");
	CHECK(gguf_get_f64(g, "u32", &f) == ING_ERR_FORMAT, "u32 as f64");
	CHECK(gguf_get_u64(g, "f32", &u) == ING_ERR_FORMAT, "f32 as u64");
	CHECK(gguf_get_bool(g, "true", &b) == ING_OK && b, "true");
	CHECK(gguf_get_bool(g, "false", &b) == ING_OK && !b, "false");
	CHECK(gguf_get_bool(g, "u8", &b) == ING_ERR_FORMAT, "u8 as bool");
	CHECK(gguf_get_str(g, "str", &s) == ING_OK && gguf_str_eq(s, "hello"), "str");
	CHECK(gguf_get_str(g, "empty", &s) == ING_OK && s.len == 0, "empty str");
	CHECK(gguf_get_str(g, "nul", &s) == ING_OK && s.len == 3 && memcmp(s.ptr, "a\0b", 3) == 0,
	      "str with NUL");
	CHECK(gguf_get_str(g, "u8", &s) == ING_ERR_FORMAT, "u8 as str");
	CHECK(gguf_get_arr(g, "str", &a) == ING_ERR_FORMAT, "str as arr");
	CHECK(gguf_get_u64(g, "a.u8", &u) == ING_ERR_FORMAT, "arr as u64");
	CHECK(gguf_get_u64(g, "missing", &u) == ING_ERR_NOTFOUND &&
	      gguf_get_i64(g, "missing", &i) == ING_ERR_NOTFOUND &&
	      gguf_get_f64(g, "missing", &f) == ING_ERR_NOTFOUND &&
	      gguf_get_bool(g, "missing", &b) == ING_ERR_NOTFOUND &&
	      gguf_get_str(g, "missing", &s) == ING_ERR_NOTFOUND &&
	      gguf_get_arr(g, "missing", &a) == ING_ERR_NOTFOUND, "missing key");
	CHECK(gguf_kv_find(g, "u") == NULL && gguf_kv_find(g, "u8x") == NULL, "prefix lookups");
}

static void test_metadata_roundtrip(uint32_t version)
{
	char label[32];
	snprintf(label, sizeof label, "metadata v%u", version);
	size_t live = ing_mem_live();
	struct gguf_writer w;
	gguf_writer_init(&w, version);
	write_all_values(&w);
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(&w, &buf, &size);
	struct gguf *g = open_ok(label, buf, size);
	if (g) {
		CHECK(g->n_kv == w.n_kv && g->n_tensors == 0 && g->version == version, "%s: counts",
		      label);
		for (uint64_t i = 0; i < g->n_kv && g->n_kv == w.n_kv; i++)
			CHECK(g->kv[i].offset == w.kvs[i].key, "%s: kv %llu offset", label,
			      (unsigned long long)i);
		check_getters(g);
		check_arr_numbers(g);
		check_arr_iter(g);
		walk(g, 1);
		gguf_close(g);
	}
	CHECK(ing_mem_live() == live, "%s: leak", label);
	free(buf);
	gguf_writer_free(&w);
	CHECK(strcmp(gguf_vtype_name(GGUF_VT_UINT32), "uint32") == 0 &&
	      strcmp(gguf_vtype_name(GGUF_VT_ARRAY), "array") == 0 &&
	      strcmp(gguf_vtype_name(GGUF_VT_FLOAT64), "float64") == 0 &&
	      strcmp(gguf_vtype_name(99), "unknown") == 0, "gguf_vtype_name");
}

/* Degenerate but valid files. */
static void test_minimal_files(void)
{
	uint8_t hdr[GGUF_HEADER_BYTES] = { 'G', 'G', 'U', 'F', 3 };
	struct gguf *g = open_ok("header only", hdr, sizeof hdr);
	if (g) {
		CHECK(g->n_kv == 0 && g->n_tensors == 0 && g->data_offset == sizeof hdr, "header only");
		gguf_close(g);
	}
	/* metadata only, no padding after it */
	struct gguf_writer w;
	gguf_writer_init(&w, 2);
	gguf_writer_kv_str(&w, "general.architecture", "x");
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(&w, &buf, &size);
	g = open_ok("metadata only", buf, size);
	if (g) {
		CHECK(g->n_kv == 1 && g->n_tensors == 0 && g->data_offset == size, "metadata only");
		gguf_close(g);
	}
	free(buf);
	gguf_writer_free(&w);
	/* a key of the longest allowed length */
	char *key = malloc(65535);
	memset(key, 'k', 65535);
	gguf_writer_init(&w, 3);
	gguf_writer_kv_beginn(&w, key, 65535, GGUF_VT_UINT8);
	gguf_writer_put_u8(&w, 1);
	gguf_writer_finish(&w, &buf, &size);
	g = open_ok("65535-byte key", buf, size);
	gguf_close(g);
	free(buf);
	gguf_writer_free(&w);
	free(key);
}

/* ---- corruption: truncation ---- */

/* Every prefix shorter than the end of the last tensor's data fails with a
 * message naming an offset; longer ones (cut in the final padding) open. */
static void test_truncation(void)
{
	struct gguf_writer w;
	small_file(&w, 3);
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(&w, &buf, &size);
	size_t need = 0;
	for (size_t i = 0; i < w.n_tensors; i++) {
		size_t end = w.tensors[i].pos.data + w.tensors[i].nbytes;
		need = end > need ? end : need;
	}
	CHECK(need > 0 && need <= size, "small file: end %zu, size %zu", need, size);
	char label[64];
	for (size_t cut = 0; cut <= size; cut++) {
		snprintf(label, sizeof label, "truncated at %zu of %zu", cut, size);
		expect_error(label, buf, cut, cut < need ? ING_ERR_FORMAT : ING_OK,
			     cut < need ? "offset " : NULL);
	}
	free(buf);
	gguf_writer_free(&w);
}

/* ---- corruption: random byte flips ---- */

/* Flips 1..4 random bytes of buf per iteration (seeded, so reproducible):
 * each copy either opens, and then every value and tensor byte is walked,
 * or fails cleanly. */
static void random_flips(const char *label, const uint8_t *buf, size_t size, int iterations,
			 uint64_t seed)
{
	size_t live = ing_mem_live();
	long opened = 0, failed = 0;
	rng_state = seed;
	for (int it = 0; it < iterations; it++) {
		uint8_t *copy = dup_exact(buf, size);
		int flips = 1 + (int)(rng_next() % 4);
		for (int k = 0; k < flips; k++) {
			size_t at = (size_t)(rng_next() % size);
			/* mostly single bits, sometimes a whole new byte */
			uint8_t x = (uint8_t)(rng_next() % 4 ? 1u << (rng_next() % 8) : rng_next() | 1);
			copy[at] ^= x;
		}
		struct gguf *g;
		ing_err err;
		int rc = gguf_open_memory(copy, size, &g, &err);
		if (rc == ING_OK) {
			opened++;
			walk(g, 1);
			gguf_close(g);
		} else {
			failed++;
			CHECK(g == NULL && err.code == rc && err.msg[0], "%s, flip %d: unclean failure",
			      label, it);
			CHECK(rc == ING_ERR_FORMAT, "%s, flip %d: %s: %s", label, it, ing_err_name(rc),
			      err.msg);
		}
		CHECK(ing_mem_live() == live, "flip %d: leaked %zu bytes", it, ing_mem_live() - live);
		free(copy);
	}
	printf("random flips, %s: %ld opened, %ld rejected\n", label, opened, failed);
	CHECK(opened > 0 && failed > 0, "%s: flips never hit one side: %ld opened, %ld failed",
	      label, opened, failed);
}

/* GGUF_FLIPS flips of the small file (tensors), a fifth as many of the file
 * holding every value type. Build with -DGGUF_FLIPS=1000000 for a long run. */
#ifndef GGUF_FLIPS
#define GGUF_FLIPS 10000
#endif
static void test_random_flips(void)
{
	struct gguf_writer w;
	uint8_t *buf;
	size_t size;
	small_file(&w, 3);
	gguf_writer_finish(&w, &buf, &size);
	random_flips("small file", buf, size, GGUF_FLIPS, 0x5eed5eed12345678ull);
	free(buf);
	gguf_writer_free(&w);
	gguf_writer_init(&w, 3);
	write_all_values(&w);
	gguf_writer_tensor(&w, "t", QTYPE_Q4_K, 1, (const uint64_t[]){ 256 }, NULL);
	gguf_writer_finish(&w, &buf, &size);
	random_flips("all value types", buf, size, GGUF_FLIPS / 5, 0xfeedface01234567ull);
	free(buf);
	gguf_writer_free(&w);
}

/* ---- corruption: one case per malformed field ---- */

/* The small file with the `nbytes`-byte little-endian field at `off` set to
 * v must fail with a message containing want. */
static void expect_patched(const char *label, size_t off, uint64_t v, unsigned nbytes,
			   const char *want)
{
	struct gguf_writer w;
	small_file(&w, 3);
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(&w, &buf, &size);
	gguf_patch_le(buf, off, v, nbytes);
	expect_error(label, buf, size, ING_ERR_FORMAT, want);
	free(buf);
	gguf_writer_free(&w);
}

/* Field offsets of the small file (they do not depend on the patch). */
static struct gguf_kv_pos small_kv[KV_COUNT];
static struct gguf_tensor_pos small_t[T_COUNT];
static size_t small_size;

static void small_file_layout(void)
{
	struct gguf_writer w;
	small_file(&w, 3);
	uint8_t *buf;
	gguf_writer_finish(&w, &buf, &small_size);
	for (int i = 0; i < KV_COUNT; i++)
		small_kv[i] = *gguf_writer_kv_pos(&w, (size_t)i);
	for (int i = 0; i < T_COUNT; i++)
		small_t[i] = *gguf_writer_tensor_pos(&w, (size_t)i);
	free(buf);
	gguf_writer_free(&w);
}

static void test_bad_header(void)
{
	expect_error("empty file", (const uint8_t *)"", 0, ING_ERR_FORMAT, "offset 0");
	expect_error("3 bytes", (const uint8_t *)"GGU", 3, ING_ERR_FORMAT, "truncated");
	expect_error("magic only", (const uint8_t *)"GGUF", 4, ING_ERR_FORMAT, "version");
	uint8_t hdr[GGUF_HEADER_BYTES] = { 'G', 'G', 'U', 'F', 3 };
	expect_error("header cut in n_kv", hdr, 20, ING_ERR_FORMAT, "metadata count");
	gguf_patch_le(hdr, GGUF_POS_N_KV, 1, 8);
	expect_error("header only, claims a kv", hdr, sizeof hdr, ING_ERR_FORMAT, "offset 24");
	expect_patched("bad magic", GGUF_POS_MAGIC, 0x46554747 ^ 0x100, 4, "bad magic");
	expect_patched("magic GGML", GGUF_POS_MAGIC, 0x4c4d4747, 4, "bad magic");
	expect_patched("version 1", GGUF_POS_VERSION, 1, 4, "version 1");
	expect_patched("version 0", GGUF_POS_VERSION, 0, 4, "unsupported GGUF version");
	expect_patched("version 4", GGUF_POS_VERSION, 4, 4, "unsupported GGUF version");
	expect_patched("version 0xffffffff", GGUF_POS_VERSION, 0xffffffff, 4,
		       "unsupported GGUF version");
	expect_patched("big-endian v3", GGUF_POS_VERSION, 0x03000000, 4, "big-endian");
	expect_patched("big-endian v2", GGUF_POS_VERSION, 0x02000000, 4, "big-endian");
}

/* Absurd counts are refused before anything is allocated for them. */
static void test_bad_counts(void)
{
	static const uint64_t absurd[] = { UINT64_MAX, 1ull << 63, 1ull << 40, 0x7fffffffffffull };
	for (size_t i = 0; i < sizeof absurd / sizeof absurd[0]; i++) {
		ing_mem_fail_at(0, 0);
		expect_patched("huge n_kv", GGUF_POS_N_KV, absurd[i], 8, "more metadata entries");
		CHECK(ing_mem_count() <= 1, "huge n_kv: %ld allocations", ing_mem_count());
		ing_mem_fail_at(0, 0);
		expect_patched("huge n_tensors", GGUF_POS_N_TENSORS, absurd[i], 8, "more tensors");
		CHECK(ing_mem_count() <= 1, "huge n_tensors: %ld allocations", ing_mem_count());
	}
	/* just over what the bytes could hold */
	expect_patched("n_kv = size/14", GGUF_POS_N_KV, small_size / 14, 8, "more metadata entries");
	expect_patched("n_tensors = size/33", GGUF_POS_N_TENSORS, small_size / 33, 8, "more tensors");
	/* plausible but wrong: the parse runs off the rails somewhere */
	expect_patched("n_kv + 1", GGUF_POS_N_KV, KV_COUNT + 1, 8, "offset ");
	expect_patched("n_kv - 1", GGUF_POS_N_KV, KV_COUNT - 1, 8, "offset ");
	expect_patched("n_tensors + 1", GGUF_POS_N_TENSORS, T_COUNT + 1, 8, "offset ");
	/* n_tensors = 0 turns the infos into bytes of an unused data section:
	 * still a valid file, with no tensors */
	struct gguf_writer w;
	uint8_t *buf;
	size_t size;
	small_file(&w, 3);
	gguf_writer_finish(&w, &buf, &size);
	gguf_patch_le(buf, GGUF_POS_N_TENSORS, 0, 8);
	expect_error("n_tensors = 0 with infos", buf, size, ING_OK, NULL);
	free(buf);
	gguf_writer_free(&w);
}

static void test_bad_keys_and_values(void)
{
	const struct gguf_kv_pos *k = small_kv;
	expect_patched("key length 0", k[KV_NCTX].key, 0, 8, "key length is 0");
	expect_patched("key length huge", k[KV_NCTX].key, UINT64_MAX, 8, "string length exceeds");
	expect_patched("key length = bytes left + 1", k[KV_NCTX].key, small_size - k[KV_NCTX].key - 7,
		       8, "string length exceeds");
	expect_patched("unknown value type 13", k[KV_NCTX].type, 13, 4, "unknown value type");
	expect_patched("unknown value type ~0", k[KV_NCTX].type, 0xffffffff, 4, "unknown value type");
	expect_patched("string value length huge", k[KV_ARCH].value, 1ull << 62, 8,
		       "string length exceeds");
	expect_patched("string array elem type 13", k[KV_TOKENS].value, 13, 4,
		       "unknown array element type");
	expect_patched("string array length huge", k[KV_TOKENS].value + 4, 1ull << 61, 8,
		       "array length exceeds");
	expect_patched("string array length + 1", k[KV_TOKENS].value + 4, 4, 8, "offset ");
	expect_patched("string in array too long", k[KV_TOKENS].value + 12, 1ull << 40, 8,
		       "string length exceeds");
	expect_patched("nested inner length huge", k[KV_NESTED].value + 16, 1ull << 62, 8,
		       "array length exceeds");
	expect_patched("nested inner elem type", k[KV_NESTED].value + 12, 99, 4,
		       "unknown array element type");
	expect_patched("bool 2", k[KV_FLAG].value, 2, 1, "bool");
	expect_patched("bool 255", k[KV_FLAG].value, 255, 1, "bool");
	expect_patched("u32 128 read as bool", k[KV_NCTX].type, GGUF_VT_BOOL, 4, "bool");
	expect_patched("bool array element 3", k[KV_MASK].value + 12 + 2, 3, 1, "bool");
	expect_patched("alignment 33 in place", k[KV_ALIGN].value, 33, 4, "not a power of two");
	expect_patched("alignment 64 in place", k[KV_ALIGN].value, 64, 4, "general.alignment");

	struct gguf_writer w;
	char *key = malloc(65536);
	memset(key, 'k', 65536);
	gguf_writer_init(&w, 3);
	gguf_writer_kv_beginn(&w, key, 65536, GGUF_VT_UINT8);
	gguf_writer_put_u8(&w, 1);
	expect_writer_error("key of 65536 bytes", &w, ING_ERR_FORMAT, "over 65535");
	free(key);

	static const uint8_t bools[] = { 1, 0, 2 };
	gguf_writer_init(&w, 3);
	gguf_writer_kv_arr(&w, "bools", GGUF_VT_BOOL, 3, bools);
	expect_writer_error("bool array element 2", &w, ING_ERR_FORMAT, "bool");

	gguf_writer_init(&w, 3);
	gguf_writer_kv_begin(&w, "u32s", GGUF_VT_ARRAY);
	gguf_writer_put_arr_header(&w, GGUF_VT_UINT32, (UINT64_MAX / 4) + 2); /* n*4 wraps to 4 */
	gguf_writer_put_u32(&w, 1);
	expect_writer_error("u32 array n*4 overflows", &w, ING_ERR_FORMAT, "array length exceeds");

	gguf_writer_init(&w, 3);
	gguf_writer_kv_begin(&w, "f64s", GGUF_VT_ARRAY);
	gguf_writer_put_arr_header(&w, GGUF_VT_FLOAT64, 2);
	gguf_writer_put_f64(&w, 1.0);
	gguf_writer_put_u32(&w, 0); /* half an element */
	expect_writer_error("f64 array cut mid-element", &w, ING_ERR_FORMAT, "array length exceeds");

	gguf_writer_init(&w, 3);
	put_deep(&w, "deep", 9);
	expect_writer_error("arrays nested 9 deep", &w, ING_ERR_FORMAT, "nested too deeply");

	gguf_writer_init(&w, 3);
	put_deep(&w, "deep", 100);
	expect_writer_error("arrays nested 100 deep", &w, ING_ERR_FORMAT, "nested too deeply");

	gguf_writer_init(&w, 3);
	gguf_writer_kv_u32(&w, "dup", 1);
	gguf_writer_kv_u32(&w, "other", 2);
	gguf_writer_kv_str(&w, "dup", "again");
	expect_writer_error("duplicate key", &w, ING_ERR_FORMAT, "duplicate metadata key 'dup'");

	gguf_writer_init(&w, 3);
	gguf_writer_kv_strn(&w, "a", "x", 1);
	gguf_writer_kv_beginn(&w, "a\0b", 3, GGUF_VT_UINT8); /* differs after a NUL: not a dup */
	gguf_writer_put_u8(&w, 0);
	expect_writer_error("keys differing after NUL", &w, ING_OK, NULL);
}

static void test_bad_alignment(void)
{
	static const uint32_t bad[] = { 0, 3, 48, 1u << 21, 0x80000000u, 0xffffffffu };
	char label[64];
	struct gguf_writer w;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(label, sizeof label, "alignment %u", bad[i]);
		gguf_writer_init(&w, 3);
		gguf_writer_kv_u32(&w, "general.alignment", bad[i]);
		gguf_writer_tensor(&w, "t", QTYPE_F32, 1, (const uint64_t[]){ 4 }, NULL);
		expect_writer_error(label, &w, ING_ERR_FORMAT, "not a power of two");
	}
	gguf_writer_init(&w, 3);
	gguf_writer_kv_u64(&w, "general.alignment", 32);
	expect_writer_error("alignment as uint64", &w, ING_ERR_FORMAT, "must be uint32, got uint64");
	gguf_writer_init(&w, 3);
	gguf_writer_kv_i32(&w, "general.alignment", 32);
	expect_writer_error("alignment as int32", &w, ING_ERR_FORMAT, "must be uint32, got int32");
	gguf_writer_init(&w, 3);
	gguf_writer_kv_str(&w, "general.alignment", "32");
	expect_writer_error("alignment as string", &w, ING_ERR_FORMAT, "must be uint32, got string");
	gguf_writer_init(&w, 3);
	gguf_writer_kv_u32(&w, "general.alignment", 64);
	gguf_writer_kv_u32(&w, "general.alignment", 64);
	expect_writer_error("alignment twice", &w, ING_ERR_FORMAT, "duplicate metadata key");
}

static void test_bad_tensor_infos(void)
{
	const struct gguf_tensor_pos *t = small_t;
	static const uint32_t bad_types[] = { 4, 5, 16, 20, 29, 31, 39, 40, 1000, 0xffffffffu };
	char label[64];
	for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
		snprintf(label, sizeof label, "tensor type %u", bad_types[i]);
		expect_patched(label, t[T_Q8].type, bad_types[i], 4, "unknown or unsupported tensor type");
	}
	expect_patched("n_dims 0", t[T_F32].n_dims, 0, 4, "n_dims");
	expect_patched("n_dims 5", t[T_Q8].n_dims, 5, 4, "n_dims");
	expect_patched("n_dims ~0", t[T_Q8].n_dims, 0xffffffff, 4, "n_dims");
	expect_patched("ne[0] = 0", t[T_F32].ne, 0, 8, "dimension");
	expect_patched("ne[1] = 0", t[T_F32].ne + 8, 0, 8, "dimension");
	expect_patched("ne[1] > INT64_MAX", t[T_F32].ne + 8, 1ull << 63, 8, "dimension");
	expect_patched("Q4_0 ne[0] = 33", t[T_Q4].ne, 33, 8, "multiple of the type's block size");
	expect_patched("Q8_0 ne[0] = 16", t[T_Q8].ne, 16, 8, "multiple of the type's block size");
	expect_patched("name length 0", t[T_Q4].name, 0, 8, "empty name");
	expect_patched("name length huge", t[T_Q4].name, UINT64_MAX - 3, 8, "string length exceeds");
	expect_patched("offset misaligned", t[T_Q4].offset, 64 + 1, 8, "general.alignment");
	expect_patched("offset past the end", t[T_Q8].offset, 1ull << 40, 8, "past the end");
	expect_patched("offset near 2^64", t[T_Q8].offset, UINT64_MAX & ~31ull, 8, "past the end");
	expect_patched("data runs past the end", t[T_Q8].offset,
		       (small_size - small_t[T_F32].data) & ~31ull, 8, "past the end");
	expect_patched("overlap (same offset)", t[T_Q4].offset, 0, 8, "overlap");
	expect_patched("overlap (partial)", t[T_Q4].offset, 32, 8, "overlap");
	expect_patched("big ne[0] runs past the end", t[T_Q8].ne, 1ull << 50, 8, "past the end");

	struct gguf_writer w;
	gguf_writer_init(&w, 3);
	gguf_writer_tensor_raw(&w, "t", 1, QTYPE_F32, 4,
			       (const uint64_t[]){ 1u << 20, 1u << 20, 1u << 20, 1u << 20 }, NULL, 4);
	expect_writer_error("element count overflow", &w, ING_ERR_FORMAT, "overflow");

	gguf_writer_init(&w, 3);
	gguf_writer_tensor_raw(&w, "t", 1, QTYPE_F32, 2, (const uint64_t[]){ 1ull << 31, 1ull << 31 },
			       NULL, 4);
	expect_writer_error("byte size overflow (rows)", &w, ING_ERR_FORMAT, "overflow");

	gguf_writer_init(&w, 3);
	gguf_writer_tensor_raw(&w, "t", 1, QTYPE_F32, 1, (const uint64_t[]){ 1ull << 62 }, NULL, 4);
	expect_writer_error("byte size overflow (row)", &w, ING_ERR_FORMAT, "overflow");

	gguf_writer_init(&w, 3);
	gguf_writer_tensor_raw(&w, "t", 1, QTYPE_F16, 2, (const uint64_t[]){ 1ull << 62, 2 }, NULL, 4);
	expect_writer_error("byte size overflow (F16 row)", &w, ING_ERR_FORMAT, "overflow");

	gguf_writer_init(&w, 3);
	gguf_writer_tensor_raw(&w, "t", 1, QTYPE_Q4_K, 1, (const uint64_t[]){ 32 }, NULL, 18);
	expect_writer_error("Q4_K row of 32", &w, ING_ERR_FORMAT, "multiple of the type's block size");

	gguf_writer_init(&w, 3);
	gguf_writer_tensor_raw(&w, "t", 1, QTYPE_F32, 6, (const uint64_t[]){ 1, 1, 1, 1, 1, 1 }, NULL, 4);
	expect_writer_error("6 dims", &w, ING_ERR_FORMAT, "n_dims");

	gguf_writer_init(&w, 3);
	gguf_writer_tensor(&w, "same", QTYPE_F32, 1, (const uint64_t[]){ 4 }, NULL);
	gguf_writer_tensor(&w, "other", QTYPE_F32, 1, (const uint64_t[]){ 4 }, NULL);
	gguf_writer_tensor(&w, "same", QTYPE_F16, 1, (const uint64_t[]){ 8 }, NULL);
	expect_writer_error("duplicate tensor", &w, ING_ERR_FORMAT, "duplicate tensor name 'same'");

	/* alignment 1: any offset is aligned, but overlap is still caught */
	gguf_writer_init(&w, 3);
	gguf_writer_kv_u32(&w, "general.alignment", 1);
	gguf_writer_tensor(&w, "a", QTYPE_F32, 1, (const uint64_t[]){ 4 }, NULL);
	int b = gguf_writer_tensor(&w, "b", QTYPE_F32, 1, (const uint64_t[]){ 4 }, NULL);
	gguf_writer_tensor_offset(&w, b, 15);
	expect_writer_error("alignment 1, overlap by one byte", &w, ING_ERR_FORMAT, "overlap");

	/* the padding before the data section is cut */
	gguf_writer_init(&w, 3);
	gguf_writer_kv_u32(&w, "general.alignment", 4096);
	gguf_writer_tensor(&w, "a", QTYPE_F32, 1, (const uint64_t[]){ 4 }, NULL);
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(&w, &buf, &size);
	expect_error("file ends in the padding", buf, w.data_offset - 1, ING_ERR_FORMAT,
		     "before the tensor data section");
	expect_error("file ends at the data section", buf, w.data_offset, ING_ERR_FORMAT,
		     "past the end");
	free(buf);
	gguf_writer_free(&w);
}

/* A NULL err must be harmless. */
static void test_null_err(void)
{
	struct gguf *g;
	size_t live = ing_mem_live();
	CHECK(gguf_open_memory("GGUX", 4, &g, NULL) == ING_ERR_FORMAT && g == NULL, "NULL err");
	CHECK(gguf_open("/nonexistent/x.gguf", &g, NULL) == ING_ERR_IO && g == NULL, "NULL err io");
	CHECK(ing_mem_live() == live, "NULL err: leak");
}

/* ---- resources ---- */

/* Fails the 1st, 2nd, ... allocation of an open until one succeeds: each
 * failure is a clean ING_ERR_NOMEM with nothing leaked. */
static void test_alloc_failures(void)
{
	struct gguf_writer w;
	small_file(&w, 3);
	gguf_writer_kv_str(&w, "late", "value");
	uint8_t *buf;
	size_t size;
	gguf_writer_finish(&w, &buf, &size);
	size_t live = ing_mem_live();
	for (int sticky = 0; sticky <= 1; sticky++) {
		long n;
		int rc = ING_ERR_NOMEM;
		for (n = 1; n < 100 && rc != ING_OK; n++) {
			struct gguf *g;
			ing_err err;
			ing_mem_fail_at(n, sticky);
			rc = gguf_open_memory(buf, size, &g, &err);
			ing_mem_fail_at(0, 0);
			if (rc == ING_OK) {
				gguf_close(g);
			} else {
				CHECK(rc == ING_ERR_NOMEM && g == NULL && err.code == rc,
				      "fail at %ld: %s: %s", n, ing_err_name(rc), err.msg);
			}
			CHECK(ing_mem_live() == live, "fail at %ld (sticky %d): leak", n, sticky);
		}
		CHECK(rc == ING_OK && n > 3, "open never succeeded or allocates too little (%ld)", n);
	}
	free(buf);
	gguf_writer_free(&w);
}

/* ---- files ---- */

static void test_files(void)
{
	char path[] = "/tmp/ingot_test_gguf_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp");
	if (fd < 0)
		return;
	close(fd);
	struct gguf_writer w;
	small_file(&w, 2);
	CHECK(gguf_writer_save(&w, path) == 0, "save");
	size_t live = ing_mem_live();
	struct gguf *g;
	ing_err err;
	int rc = gguf_open(path, &g, &err);
	CHECK(rc == ING_OK, "open %s: %s", path, err.msg);
	if (rc == ING_OK) {
		CHECK(g->mapped && g->n_tensors == T_COUNT && g->n_kv == KV_COUNT && g->version == 2,
		      "saved file contents");
		walk(g, 1);
		gguf_close(g);
	}
	/* a truncated file on disk: message carries the path */
	CHECK(truncate(path, (off_t)(w.data_offset + 1)) == 0, "truncate");
	rc = gguf_open(path, &g, &err);
	CHECK(rc == ING_ERR_FORMAT && g == NULL && has(err.msg, path) && has(err.msg, "past the end"),
	      "truncated file: %s", err.msg);
	CHECK(truncate(path, 0) == 0, "truncate");
	rc = gguf_open(path, &g, &err);
	CHECK(rc == ING_ERR_FORMAT && g == NULL && has(err.msg, "empty"), "empty file: %s", err.msg);
	unlink(path);
	rc = gguf_open(path, &g, &err);
	CHECK(rc == ING_ERR_IO && g == NULL && has(err.msg, path), "missing file: %s", err.msg);
	rc = gguf_open("/tmp", &g, &err);
	CHECK(rc == ING_ERR_IO && g == NULL, "directory: %s %s", ing_err_name(rc), err.msg);
	CHECK(ing_mem_live() == live, "files: leak");
	gguf_close(NULL);
	gguf_writer_free(&w);
}

static void test_default_model(void)
{
	const char *path = check_default_model();
	if (!path)
		return;
	size_t live = ing_mem_live();
	struct gguf *g;
	ing_err err;
	int rc = gguf_open(path, &g, &err);
	CHECK(rc == ING_OK, "default model: %s", err.msg);
	if (rc != ING_OK)
		return;
	struct gguf_str arch;
	CHECK(g->n_tensors == 236, "default model: %llu tensors", (unsigned long long)g->n_tensors);
	CHECK(gguf_get_str(g, "general.architecture", &arch) == ING_OK && gguf_str_eq(arch, "gemma3"),
	      "default model: architecture");
	CHECK(gguf_tensor_find(g, "token_embd.weight") != NULL, "default model: token_embd.weight");
	walk(g, 0);
	printf("default model: %llu tensors, %llu metadata entries, arch %.*s\n",
	       (unsigned long long)g->n_tensors, (unsigned long long)g->n_kv, (int)arch.len, arch.ptr);
	gguf_close(g);
	CHECK(ing_mem_live() == live, "default model: leak");
}

int main(void)
{
	size_t live0 = ing_mem_live();
	static const uint32_t aligns[] = { 1, 8, 32, 64, 4096 };
	for (uint32_t v = 2; v <= 3; v++) {
		for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
			test_tensor_roundtrip(v, aligns[a], 1);
		test_tensor_roundtrip(v, GGUF_DEFAULT_ALIGNMENT, 0);
		test_metadata_roundtrip(v);
	}
	test_float_values();
	test_writer_refuses();
	test_minimal_files();
	small_file_layout();
	test_truncation();
	test_random_flips();
	test_bad_header();
	test_bad_counts();
	test_bad_keys_and_values();
	test_bad_alignment();
	test_bad_tensor_infos();
	test_null_err();
	test_alloc_failures();
	test_files();
	test_default_model();
	ing_mem_fail_at(0, 0);
	CHECK(ing_mem_live() == live0, "leaked %zu bytes overall", ing_mem_live() - live0);
	return check_summary("test_gguf");
}
