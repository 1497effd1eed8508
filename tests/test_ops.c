/* test_ops.c — shared operations against their references: the AVX2
 * attention against ops_attend_ref, grouped against single-query
 * attention, the AVX2 softmax exp against expf, rmsnorm, rope, the GELU
 * table, and the split argmax (ops_best_*) against ops_argmax. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "best_rows.h"
#include "sumsq_rows.h"
#include "check.h"
#include "ops.h"
#include "ops_int.h"
#include "quant.h"

static float frand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return ((float)(*s >> 8) / (float)(1u << 24)) * 2.0f - 1.0f;
}

static void test_attend(void)
{
	unsigned seed = 7;
	enum { N = 300, DH = 256 };
	float *k = malloc(sizeof(float) * N * DH), *v = malloc(sizeof(float) * N * DH);
	float q[DH], a[DH], b[DH], sa[N], sb[N];
	const void *K[N], *V[N];
	for (int i = 0; i < N * DH; i++) {
		k[i] = frand(&seed);
		v[i] = frand(&seed);
	}
	for (int i = 0; i < DH; i++)
		q[i] = 3 * frand(&seed);
	for (int j = 0; j < N; j++) {
		K[(j * 7) % N] = k + j * DH; /* rows in scattered order, like KV blocks */
		V[(j * 7) % N] = v + j * DH;
	}
	const int dims[] = { 8, 64, 100, 256 };
	for (int di = 0; di < 4; di++)
		for (int n = 1; n <= N; n += 37) {
			ops_attend_ref(a, q, K, V, OPS_KV_F32, n, dims[di], dims[di], 0.0625f, 0.0f,
				       sa);
			ops_attend(b, q, K, V, OPS_KV_F32, n, dims[di], dims[di], 0.0625f, 0.0f, sb);
			float err = 0;
			for (int i = 0; i < dims[di]; i++)
				err = fmaxf(err, fabsf(a[i] - b[i]));
			/* FMA and a different summation order: float rounding only */
			CHECK(err < 1e-5f, "attend Dh=%d n=%d: max diff %g", dims[di], n, err);
		}
	ops_attend(b, q, K, V, OPS_KV_F32, 1, DH, DH, 0.0625f, 0.0f, sb);
	CHECK(memcmp(b, v, sizeof b) == 0, "one key: the output is exactly its value row");
	ops_attend(b, q, K, V, OPS_KV_F32, 5, DH, DH, 0.0625f, 30.0f, sb);
	CHECK(isfinite(b[0]), "softcap keeps values finite");
	free(k);
	free(v);
}

/* Query i's range in trial `trial`: rows at increasing positions with
 * hpr heads each (hpr 4 puts each row's heads in one block of the kernel;
 * others straddle blocks), a window of 50 on odd trials; every fifth trial
 * arbitrary ranges instead, empty ones included, so blocks have no row in
 * common. */
static void group_range(int trial, int i, unsigned *seed, int64_t n, int64_t *lo, int64_t *hi)
{
	if (trial % 5 == 4) {
		int64_t a = (int64_t)((frand(seed) + 1) * 0.5f * (float)n);
		int64_t b = (int64_t)((frand(seed) + 1) * 0.5f * (float)n);
		*lo = a < b ? a : b;
		*hi = a < b ? b : a;
		return;
	}
	const int hpr = 1 + (trial / 2) % 5;
	const int64_t p = 60 + (trial * 13) % 100 + i / hpr;
	*lo = trial % 2 && p + 1 > 50 ? p + 1 - 50 : 0;
	*hi = p + 1;
}

/* Groups of queries with causal and sliding-window ranges: each output
 * bit for bit what ops_attend gives for the query alone (the forward pass
 * relies on it: a row's logits must not depend on which rows share its
 * attention group). Head dims exercise every column and lane remainder of
 * the blocked kernels: 256 and 64 (whole chunks), 100 (scalar tails), 8
 * (one chunk), 44 and 72 (8-float chunks after the 32s). */
static void test_attend_group(void)
{
	unsigned seed = 9;
	enum { N = 200, DH = 256, NQ = OPS_ATTEND_GROUP_MAX };
	float *k = malloc(sizeof(float) * N * DH), *v = malloc(sizeof(float) * N * DH);
	float *qv = malloc(sizeof(float) * NQ * DH), *out = malloc(sizeof(float) * NQ * DH);
	float *scratch = malloc(sizeof(float) * NQ * N), alone[DH], sa[N];
	const void *K[N], *V[N];
	for (int i = 0; i < N * DH; i++) {
		k[i] = frand(&seed);
		v[i] = frand(&seed);
	}
	for (int i = 0; i < NQ * DH; i++)
		qv[i] = 3 * frand(&seed);
	for (int j = 0; j < N; j++) {
		K[(j * 7) % N] = k + j * DH;
		V[(j * 7) % N] = v + j * DH;
	}
	int bad = 0, cases = 0;
	static const int dims[] = { 256, 64, 100, 8, 44, 72 }; /* Dh = Dv */
	for (int trial = 0; trial < 240; trial++) {
		const int nq = 1 + trial % NQ, dh = dims[trial % 6];
		const float softcap = trial % 3 == 0 ? 30.0f : 0.0f;
		struct ops_attn_query qs[NQ];
		for (int i = 0; i < nq; i++) {
			int64_t lo, hi;
			group_range(trial, i, &seed, N, &lo, &hi);
			qs[i] = (struct ops_attn_query){ out + i * DH, qv + i * DH, lo, hi };
		}
		ops_attend_group(qs, nq, K, V, OPS_KV_F32, dh, dh, 0.125f, softcap, scratch);
		for (int i = 0; i < nq; i++, cases++) {
			ops_attend(alone, qs[i].q, K + qs[i].lo, V + qs[i].lo, OPS_KV_F32,
				   qs[i].hi - qs[i].lo, dh, dh, 0.125f, softcap, sa);
			bad += memcmp(alone, qs[i].out, (size_t)dh * sizeof *alone) != 0;
		}
	}
	CHECK(bad == 0, "grouped attention equals per-query attention: %d of %d differ", bad, cases);
	free(k);
	free(v);
	free(qv);
	free(out);
	free(scratch);
}

/* ops_kv_store's F16 rows: every pattern of a spread over all 2^32 float
 * bits (finite, subnormal, overflowing, inf, NaN) rounds as f32_to_fp16
 * does, with the SIMD body and the scalar tail alike; F32 rows are copied;
 * Q8_0 rows are the reference quantizer's blocks. */
static void test_kv_store(void)
{
	enum { N = 1003 }; /* not a multiple of 8: a tail */
	float x[N], back[N];
	uint16_t h[N];
	int bad = 0;
	for (uint64_t base = 0; base < (1ull << 32); base += 4099ull * N) {
		for (int i = 0; i < N; i++) {
			uint32_t u = (uint32_t)(base + 4099ull * (uint64_t)i);
			memcpy(&x[i], &u, sizeof u);
		}
		ops_kv_store(h, x, N, OPS_KV_F16);
		for (int i = 0; i < N; i++)
			bad += h[i] != f32_to_fp16(x[i]);
	}
	CHECK(bad == 0, "F16 store: %d values differ from f32_to_fp16", bad);
	for (int i = 0; i < N; i++)
		x[i] = (float)i * 0.37f - 100.0f;
	ops_kv_store(back, x, N, OPS_KV_F32);
	CHECK(memcmp(back, x, sizeof x) == 0, "F32 store copies the row");
	CHECK(ops_kv_row_bytes(OPS_KV_F16, 256) == 512 && ops_kv_row_bytes(OPS_KV_F32, 256) == 1024 &&
	      ops_kv_row_bytes(OPS_KV_Q8_0, 256) == 272 && ops_kv_row_bytes(OPS_KV_Q8_0, 100) == 0,
	      "row sizes");
	/* Q8_0 rows: the activation quantizer's blocks (as quant_quantize_ref) */
	uint8_t q8[34 * 31], ref[34 * 31];
	ops_kv_store(q8, x, 992, OPS_KV_Q8_0);
	quant_quantize_ref(QTYPE_Q8_0, x, ref, 992);
	CHECK(memcmp(q8, ref, sizeof q8) == 0, "Q8_0 store is quant_quantize_ref's");
}

/* Attention over F16 or Q8_0 rows is attention over their widened values:
 * bit for bit what F32 rows holding each stored value (dequantized) give,
 * alone and in groups, with the SIMD kernels and the scalar reference
 * (whose results agree with each other as in test_attend). Head dims as in
 * test_attend_group, tails included (Q8_0: multiples of 32). */
static void test_attend_stored(enum ops_kv_type kt)
{
	unsigned seed = 11;
	enum { N = 200, DH = 256, NQ = OPS_ATTEND_GROUP_MAX }; /* group_range: < 200 */
	float *wide = malloc(sizeof(float) * 2 * N * DH), *src = malloc(sizeof(float) * DH);
	const size_t row = ops_kv_row_bytes(kt, DH);
	uint8_t *half = malloc(row * 2 * N);
	float *qv = malloc(sizeof(float) * NQ * DH), *o16 = malloc(sizeof(float) * NQ * DH);
	float *o32 = malloc(sizeof(float) * NQ * DH);
	float *scratch = malloc(sizeof(float) * ops_attend_group_scratch(NQ, N, DH, DH, kt));
	float a[DH], b[DH], sa[N];
	const void *K16[N], *V16[N], *K32[N], *V32[N];
	for (int r = 0; r < 2 * N; r++) {
		for (int i = 0; i < DH; i++)
			src[i] = 4 * frand(&seed);
		ops_kv_store(half + r * row, src, DH, kt);
		if (kt == OPS_KV_F16)
			for (int i = 0; i < DH; i++)
				wide[r * DH + i] = fp16_to_f32(((uint16_t *)(half + r * row))[i]);
		else
			quant_dequantize_ref(QTYPE_Q8_0, half + r * row, wide + r * DH, DH);
	}
	for (int i = 0; i < NQ * DH; i++)
		qv[i] = 3 * frand(&seed);
	for (int j = 0; j < N; j++) {
		const int r = (j * 7) % N;
		K16[r] = half + 2 * j * row;
		V16[r] = half + (2 * j + 1) * row;
		K32[r] = wide + 2 * j * DH;
		V32[r] = wide + (2 * j + 1) * DH;
	}
	int bad = 0, bad_ref = 0, cases = 0;
	float worst = 0;
	static const int dims[] = { 256, 64, 100, 8, 44, 72 }, dims_q8[] = { 256, 64, 32, 96, 160, 224 };
	for (int trial = 0; trial < 120; trial++) {
		const int nq = 1 + trial % NQ;
		const int dh = kt == OPS_KV_Q8_0 ? dims_q8[trial % 6] : dims[trial % 6];
		const float softcap = trial % 3 == 0 ? 30.0f : 0.0f;
		struct ops_attn_query q16[NQ], q32[NQ];
		for (int i = 0; i < nq; i++) {
			int64_t lo, hi;
			group_range(trial, i, &seed, N, &lo, &hi);
			q16[i] = (struct ops_attn_query){ o16 + i * DH, qv + i * DH, lo, hi };
			q32[i] = (struct ops_attn_query){ o32 + i * DH, qv + i * DH, lo, hi };
		}
		ops_attend_group(q16, nq, K16, V16, kt, dh, dh, 0.125f, softcap, scratch);
		ops_attend_group(q32, nq, K32, V32, OPS_KV_F32, dh, dh, 0.125f, softcap, scratch);
		for (int i = 0; i < nq; i++, cases++) {
			bad += memcmp(o16 + i * DH, o32 + i * DH, (size_t)dh * sizeof(float)) != 0;
			const int64_t lo = q16[i].lo, n = q16[i].hi - lo;
			if (n <= 0)
				continue;
			ops_attend_ref(a, q16[i].q, K16 + lo, V16 + lo, kt, n, dh, dh, 0.125f,
				       softcap, sa);
			ops_attend_ref(b, q16[i].q, K32 + lo, V32 + lo, OPS_KV_F32, n, dh, dh, 0.125f,
				       softcap, sa);
			bad_ref += memcmp(a, b, (size_t)dh * sizeof(float)) != 0;
			ops_attend(b, q16[i].q, K16 + lo, V16 + lo, kt, n, dh, dh, 0.125f,
				   softcap, sa);
			bad += memcmp(b, o16 + i * DH, (size_t)dh * sizeof(float)) != 0;
			for (int c = 0; c < dh; c++)
				worst = fmaxf(worst, fabsf(a[c] - b[c]));
		}
	}
	const char *name = kt == OPS_KV_F16 ? "F16" : "Q8_0";
	CHECK(bad == 0, "%s attention (SIMD) equals F32 on widened rows: %d of %d differ", name,
	      bad, cases);
	CHECK(bad_ref == 0, "%s reference equals the F32 reference on widened rows: %d differ",
	      name, bad_ref);
	CHECK(worst < 1e-4f, "%s reference vs SIMD: max diff %g", name, worst);
	free(wide);
	free(src);
	free(half);
	free(qv);
	free(o16);
	free(o32);
	free(scratch);
}

/* a[i] = the float of bit pattern base + 7919 i (mod 2^32), i < n, but
 * for the first n_edge, which are edge[i]: a sweep of every kind of float
 * across the 64 bases of a test. */
static void spread_bits(float *a, int n, uint64_t base, const float *edge, int n_edge)
{
	for (int i = 0; i < n; i++) {
		uint32_t u = (uint32_t)(base + (uint64_t)i * 7919u);
		memcpy(&a[i], &u, sizeof u);
		if (i < n_edge)
			a[i] = edge[i];
	}
}

/* The AVX2 softmax exp against libm's expf on a spread of bit patterns
 * (every one of the 2^32 was checked once, in 60 s, on glibc 2.36): equal
 * bits under glibc, whose x86-64 expf on FMA CPUs it reproduces; within an
 * ulp elsewhere. Specials and the edges of the fast path included. */
static void test_exp(void)
{
	if (quant_isa_detect() < QUANT_ISA_AVX2)
		return;
	enum { C = 4096 };
	static const float edge[] = { 0.0f, -0.0f, -88.0f, -87.99999f, 88.0f, -103.97f, -104.0f,
				      -1e-45f, -INFINITY, INFINITY, NAN, -0.5f, 1.0f };
	static float a[C], b[C];
	int bad = 0;
	for (uint64_t base = 0; base < (1ull << 32); base += (1ull << 32) / 64) {
		spread_bits(a, C, base, edge, (int)(sizeof edge / sizeof *edge));
		const float mx = base & (1ull << 31) ? -1.5f : 0.0f;
		for (int i = 0; i < C; i++)
			b[i] = expf(a[i] - mx);
		ops_exp_avx2(a, C - 3, mx); /* a tail past the last 8 */
		for (int i = 0; i < C - 3; i++) {
#ifdef __GLIBC__
			bad += memcmp(&a[i], &b[i], sizeof *a) != 0;
#else
			bad += !(fabsf(a[i] - b[i]) <= 1.2e-7f * fabsf(b[i]) || a[i] == b[i] ||
				 (a[i] != a[i] && b[i] != b[i]));
#endif
		}
	}
	CHECK(bad == 0, "ops_exp_avx2 equals expf: %d differ", bad);
}

/* The AVX2 score scaling and maximum against the scalar loop ops.c
 * defines them by: the same products, and the same maximum, NaNs (which
 * never pass x > mx) anywhere among them, lengths around the vector
 * blocks of 8 and 16. */
static void test_scale_max(void)
{
	if (quant_isa_detect() < QUANT_ISA_AVX2)
		return;
	enum { N = 70 };
	float a[N], b[N];
	int bad = 0, bad_max = 0;
	for (int n = 0; n <= N; n++)
		for (int nan_at = -1; nan_at < n; nan_at += n / 3 + 1) {
			for (int i = 0; i < n; i++)
				a[i] = b[i] = (float)((i * 37 + n * 11) % 29) - 14.5f;
			if (nan_at >= 0)
				a[nan_at] = b[nan_at] = NAN;
			float want = -INFINITY;
			for (int i = 0; i < n; i++) {
				b[i] *= 0.37f;
				if (b[i] > want)
					want = b[i];
			}
			const float got = ops_scale_max_avx2(a, n, 0.37f);
			bad += n > 0 && memcmp(a, b, sizeof(float) * (size_t)n) != 0;
			bad_max += got != want;
		}
	float all_nan[9] = { NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN };
	CHECK(ops_scale_max_avx2(all_nan, 9, 2.0f) == -INFINITY, "all NaN: max -inf");
	CHECK(bad == 0, "ops_scale_max_avx2 products equal the scalar ones: %d rows differ", bad);
	CHECK(bad_max == 0, "ops_scale_max_avx2 maximum equals the scalar one: %d differ",
	      bad_max);
}

static void test_rmsnorm(void)
{
	float x[640], y[640], w[640];
	unsigned seed = 3;
	double ss = 0;
	for (int i = 0; i < 640; i++) {
		x[i] = 50 * frand(&seed);
		w[i] = 1 + frand(&seed);
		ss += (double)x[i] * x[i];
	}
	ops_rmsnorm(y, x, w, 640, 1e-6f);
	float scale = (float)(1.0 / sqrt(ss / 640 + 1e-6));
	float err = 0;
	for (int i = 0; i < 640; i++)
		err = fmaxf(err, fabsf(y[i] - x[i] * scale * w[i]) / (fabsf(y[i]) + 1e-6f));
	CHECK(err < 1e-5f, "rmsnorm relative error %g", err);

	/* several rows at once: each row's bits as ops_rmsnorm (the scalar
	 * definition) gives them, in place or not, with and without a weight,
	 * in blocks of 16, 8 and 4 rows and alone (the SIMD sums' groupings), with
	 * and without a tail of elements past a multiple of 4 or 8 */
	enum { ROWS = 37, STRIDE = 104 };
	static float xs[ROWS * STRIDE], ys[ROWS * STRIDE], want[ROWS * STRIDE];
	static const int widths[] = { 100, 37 };
	int bad = 0;
	for (int wi = 0; wi < 2; wi++)
		for (int rows = 1; rows <= ROWS; rows++)
			for (int mode = 0; mode < 4; mode++) {
				const int N = widths[wi];
				for (int i = 0; i < ROWS * STRIDE; i++)
					xs[i] = 30 * frand(&seed) * (i % 7 == 0 ? 1000.0f : 1.0f);
				const float *wv = mode & 1 ? w : NULL;
				for (int r = 0; r < rows; r++)
					ops_rmsnorm(want + r * STRIDE, xs + r * STRIDE, wv, N, 1e-6f);
				float *out = mode & 2 ? xs : ys; /* in place */
				ops_rmsnorm_rows(out, xs, wv, N, 1e-6f, rows, STRIDE);
				for (int r = 0; r < rows; r++)
					bad += memcmp(out + r * STRIDE, want + r * STRIDE, N * sizeof(float)) != 0;
			}
	CHECK(bad == 0, "ops_rmsnorm_rows equals ops_rmsnorm row by row: %d rows differ", bad);

	/* the SIMD sums themselves, as doubles (sumsq_rows.h) */
	if (quant_isa_detect() >= QUANT_ISA_AVX2)
		CHECK(sumsq_mismatches(ops_sumsq_rows_avx2) == 0,
		      "AVX2 sums of squares in element order");
	if (quant_isa_detect() >= QUANT_ISA_AVX512)
		CHECK(sumsq_mismatches(ops_sumsq_rows_avx512) == 0,
		      "AVX-512 sums of squares in element order");

	/* the residual add, against the plain loop, tails included */
	for (int n = 1; n <= 40; n++) {
		float a[40], b[40], ref[40];
		for (int i = 0; i < n; i++) {
			a[i] = 10 * frand(&seed), b[i] = 10 * frand(&seed);
			ref[i] = a[i] + b[i];
		}
		ops_add(a, b, n);
		CHECK(memcmp(a, ref, (size_t)n * sizeof(float)) == 0, "ops_add of %d floats", n);
	}
}

static void test_rope(void)
{
	float x[2 * 8], r[2 * 8];
	for (int i = 0; i < 16; i++)
		x[i] = (float)(i + 1);
	memcpy(r, x, sizeof r);
	ops_rope(r, 2, 8, 8, 0, 10000.0f, 1.0f, NULL, ROPE_NEOX);
	CHECK(memcmp(r, x, sizeof r) == 0, "rope at position 0 is the identity");
	ops_rope(r, 2, 8, 8, 3, 10000.0f, 1.0f, NULL, ROPE_NEOX);
	/* pair (0, 4) rotates by 3 rad; norms are preserved */
	float c = cosf(3.0f), s = sinf(3.0f);
	CHECK(fabsf(r[0] - (x[0] * c - x[4] * s)) < 1e-5f && fabsf(r[4] - (x[0] * s + x[4] * c)) < 1e-5f,
	      "neox pair (0,4) rotated by pos*theta_0");
	memcpy(r, x, sizeof r);
	ops_rope(r, 2, 8, 8, 3, 10000.0f, 1.0f, NULL, ROPE_NORM);
	CHECK(fabsf(r[0] - (x[0] * c - x[1] * s)) < 1e-5f, "normal rope rotates adjacent pairs");

	/* ops_rope_apply (AVX2 runs of 8 pairs where the CPU has AVX2) bit for
	 * bit the rotation written out here, each product and sum rounded on
	 * its own: both kinds, whole and partial rotation, pair counts with
	 * and without a tail past a multiple of 8 */
	static const int64_t dims[][2] = { { 256, 256 }, { 128, 64 }, { 40, 24 }, { 16, 10 } };
	unsigned seed = 99;
	for (int kind = 0; kind < 2; kind++)
		for (int d = 0; d < 4; d++) {
			enum { HEADS = 3 };
			const int64_t Dh = dims[d][0], n_rot = dims[d][1], half = n_rot / 2;
			float v[HEADS * 256], want[HEADS * 256], cs[128], sn[128];
			for (int64_t i = 0; i < HEADS * Dh; i++)
				v[i] = want[i] = 20 * frand(&seed) * (i % 5 == 0 ? 1000.0f : 1.0f);
			for (int64_t i = 0; i < half; i++)
				cs[i] = frand(&seed), sn[i] = frand(&seed);
			for (int h = 0; h < HEADS; h++)
				for (int64_t i = 0; i < half; i++) {
					float *w = want + h * Dh;
					const int64_t a = kind == ROPE_NEOX ? i : 2 * i;
					const int64_t b = kind == ROPE_NEOX ? i + half : 2 * i + 1;
					const float x0 = w[a], x1 = w[b];
					const float p0 = x0 * cs[i], p1 = x1 * sn[i];
					const float p2 = x0 * sn[i], p3 = x1 * cs[i];
					w[a] = p0 - p1;
					w[b] = p2 + p3;
				}
			ops_rope_apply(v, HEADS, Dh, n_rot, cs, sn, (enum rope_kind)kind);
			CHECK(memcmp(v, want, (size_t)(HEADS * Dh) * sizeof(float)) == 0,
			      "ops_rope_apply %s, head dim %lld rotating %lld, bit for bit",
			      kind == ROPE_NEOX ? "neox" : "norm", (long long)Dh, (long long)n_rot);
		}
}

static void test_gelu(void)
{
	float err = 0;
	for (float x = -12; x < 12; x += 0.01f) {
		float exact = 0.5f * x * (1 + tanhf(0.7978845608f * x * (1 + 0.044715f * x * x)));
		err = fmaxf(err, fabsf(ops_gelu(x) - exact) / (fabsf(exact) + 1e-3f));
	}
	/* fp16 rounding of the input (2^-11 relative, amplified up to ~2x by
	 * the slope near the zero crossing) and of the output (2^-11) */
	CHECK(err < 5e-3f, "gelu table within fp16 rounding of the formula: %g", err);
	CHECK(ops_gelu(-20) == 0 && ops_gelu(20) == 20, "gelu tails");
}

/* Input i of round `round` of the GLU tests: a spread of bit patterns,
 * three in four folded into (-range, range) where the activation bends,
 * edges[] first; the up value 1 or -0.75. */
static void glu_input(int round, int i, float range, const float *edges, int n_edges, float *g,
		      float *u)
{
	uint32_t bits = (uint32_t)round * 0x9e3779b9u + (uint32_t)i * 2654435761u;
	float x;
	memcpy(&x, &bits, sizeof x);
	*g = i < n_edges ? edges[i] : i % 4 ? fmodf(x, range) : x;
	*u = i % 3 ? 1.0f : -0.75f;
}

/* ops_glu with GELU (its AVX2 loop where the CPU has one) against
 * ops_gelu(g) * u element by element, bit for bit: every fp16 rounding
 * case (ties, subnormals, the +-10 edges, signed zeros, infinities), a
 * spread of bit patterns, and lengths with a tail past the last 8. */
static void test_glu(void)
{
	enum { N = 4099 };
	static const float edge[] = { 0.0f, -0.0f, 10.0f, -10.0f, 9.999999f, -9.999999f, 10.000001f,
				      -10.000001f, 1e-8f, -1e-8f, 6e-5f, -6e-5f, 65504.0f, -7e5f,
				      INFINITY, -INFINITY, 0.5f, -0.5f, 1.00048828125f,
				      1.000732421875f /* fp16 ties */ };
	static float g[N], u[N], want[N];
	int bad = 0, bad_nan = 0;
	for (int round = 0; round < 64; round++) {
		for (int i = 0; i < N; i++) {
			/* most of them in GELU's table range */
			glu_input(round, i, 12.0f, edge, (int)(sizeof edge / sizeof *edge), &g[i], &u[i]);
			if (g[i] != g[i] && round % 2) /* NaNs in every other round */
				g[i] = 0.25f;
			want[i] = ops_gelu(g[i]) * u[i];
		}
		const int n = N - round % 8;
		ops_glu(g, u, n, ACT_GELU_TANH);
		for (int i = 0; i < n; i++) {
			if (want[i] != want[i])
				bad_nan += g[i] == g[i];
			else
				bad += memcmp(&g[i], &want[i], sizeof *g) != 0;
		}
	}
	CHECK(bad == 0, "ops_glu (GELU) equals ops_gelu * u: %d differ", bad);
	CHECK(bad_nan == 0, "ops_glu (GELU) keeps NaN inputs NaN: %d not", bad_nan);
}

/* ops_glu with SiLU (its AVX2 loop where the CPU has one) against the
 * formula g / (1 + expf(-g)) * u in scalar code: equal bits under glibc,
 * within an ulp or two elsewhere (the exp's). exp's fast-path edges,
 * specials, a spread of bit patterns and a tail past the last 8. */
static void test_glu_silu(void)
{
	enum { N = 4099 };
	static const float edge[] = { 0.0f, -0.0f, 88.0f, -88.0f, 87.9f, -87.9f, 103.9f, -103.9f,
				      104.0f, 1e-8f, -1e-8f, 1e-40f, INFINITY, -INFINITY, NAN, 0.5f,
				      -0.5f, 20.0f, -20.0f };
	static float g[N], u[N], want[N];
	int bad = 0, bad_nan = 0;
	for (int round = 0; round < 64; round++) {
		for (int i = 0; i < N; i++) {
			glu_input(round, i, 30.0f, edge, (int)(sizeof edge / sizeof *edge), &g[i], &u[i]);
			want[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
		}
		const int n = N - round % 8;
		ops_glu(g, u, n, ACT_SILU);
		for (int i = 0; i < n; i++) {
			if (want[i] != want[i]) {
				bad_nan += g[i] == g[i];
				continue;
			}
#ifdef __GLIBC__
			bad += memcmp(&g[i], &want[i], sizeof *g) != 0;
#else
			bad += !(g[i] == want[i] || fabsf(g[i] - want[i]) <= 3e-7f * fabsf(want[i]));
#endif
		}
	}
	CHECK(bad == 0, "ops_glu (SiLU) equals g / (1 + expf(-g)) * u: %d differ", bad);
	CHECK(bad_nan == 0, "ops_glu (SiLU) keeps NaN results NaN: %d not", bad_nan);
}

/* Rows with ties, NaNs (also at x[0]), infinities and signed zeros, cut
 * into random pieces (1 to 150 long: whole 32-element blocks for the
 * AVX2 scan's skip, and tails) scanned by random "threads" and merged in
 * a random order: the result must be ops_argmax's, every time. */
static void test_best_split(void)
{
	unsigned seed = 11;
	enum { N = 397, PARTS = 5 };
	float x[N];
	int bad = 0;
	for (int trial = 0; trial < 4000; trial++) {
		const int kinds = 1 + trial % 7; /* few kinds: many ties */
		for (int i = 0; i < N; i++) {
			unsigned k = (unsigned)((frand(&seed) + 1.0f) * 0.5f * (float)kinds);
			static const float vals[] = { 1.0f, -0.0f, 0.0f, INFINITY, -INFINITY, NAN, 2.5f };
			x[i] = frand(&seed) < 0.6f ? vals[k % 7] : frand(&seed);
		}
		if (trial % 5 == 0)
			x[0] = NAN;
		struct ops_best part[PARTS];
		for (int p = 0; p < PARTS; p++)
			ops_best_init(&part[p]);
		/* ranges in ascending order, each given to a random part */
		for (int64_t i0 = 0; i0 < N;) {
			int64_t len = 1 + (int64_t)((frand(&seed) + 1.0f) *
						    (trial % 2 ? 12.0f : 75.0f));
			int64_t i1 = i0 + len < N ? i0 + len : N;
			int p = (int)((frand(&seed) + 1.0f) * 0.5f * PARTS) % PARTS;
			ops_best_scan(&part[p], x, i0, i1);
			i0 = i1;
		}
		/* merge in a rotated order */
		struct ops_best all;
		ops_best_init(&all);
		for (int p = 0; p < PARTS; p++)
			ops_best_merge(&all, &part[(p + trial) % PARTS]);
		if (ops_best_index(&all, x) != ops_argmax(x, N))
			bad++;
	}
	CHECK(bad == 0, "split argmax equals ops_argmax: %d of 4000 rows differ", bad);
	float all_nan[3] = { NAN, NAN, NAN };
	struct ops_best b;
	ops_best_init(&b);
	ops_best_scan(&b, all_nan, 1, 3);
	CHECK(ops_best_index(&b, all_nan) == 0 && ops_argmax(all_nan, 3) == 0, "all NaN: 0");
}

/* The SIMD scans against the scalar rule (best_rows.h): the dispatch's
 * choice, and each vector width the CPU has. */
static void test_best_scans(void)
{
	CHECK(best_rows_mismatches(ops_best_scan, 3000) == 0,
	      "ops_best_scan equals the scalar rule");
	if (quant_isa_detect() >= QUANT_ISA_AVX2)
		CHECK(best_rows_mismatches(ops_best_scan_avx2, 3000) == 0,
		      "the AVX2 scan equals the scalar rule");
	if (quant_isa_detect() >= QUANT_ISA_AVX512)
		CHECK(best_rows_mismatches(ops_best_scan_avx512, 3000) == 0,
		      "the AVX-512 scan equals the scalar rule");
}

/* A row computed a tile at a time into a buffer of its own, as the LM
 * head does, each tile scanned there by ops_best_scan_at with what the
 * tiles before found: ops_argmax of the whole row. Tiles from 1 to 700
 * wide, rows of every best_rows kind, NaN at x[0] in some. */
static void test_best_scan_at(void)
{
	enum { N = 4000 };
	static float x[N], buf[N];
	unsigned seed = 41;
	int bad = 0;
	for (int trial = 0; trial < 400; trial++) {
		best_rows_fill(x, N, trial % 5, &seed);
		if (trial % 9 == 0)
			x[0] = NAN;
		struct ops_best b;
		ops_best_init(&b);
		for (int64_t base = 0, end; base < N; base = end) {
			end = base + 1 + (int64_t)((frand(&seed) + 1.0f) * 350.0f);
			end = end < N ? end : N;
			memcpy(buf, x + base, (size_t)(end - base) * sizeof *x);
			/* the tile's first rows may be another thread's: scan from
			 * a row inside it, as exec_lm_head_argmax does */
			const int64_t r0 = base + (trial % 2 ? (end - base) / 3 : 0);
			ops_best_scan(&b, x, base, r0);
			ops_best_scan_at(&b, buf, base, r0, end);
		}
		bad += ops_best_index(&b, x) != ops_argmax(x, N);
	}
	CHECK(bad == 0, "tiles scanned in their own buffers give ops_argmax: %d of 400 rows differ",
	      bad);
}

static bool same_float(float a, float b)
{
#ifdef __GLIBC__
	return memcmp(&a, &b, sizeof a) == 0;
#else
	return fabsf(a - b) <= 1.2e-7f * fabsf(b) || a == b || (a != a && b != b);
#endif
}

/* ops_exp_poly against exp in double on a spread of bit patterns: 0
 * below -87, within 1.5 ulp of the rounded exponential up to 88, exp(88)
 * above, NaN for NaN; and ops_exp_blocks (mx 0, div 1: y = ops_exp_poly(x))
 * equal to it bit for bit on the same patterns, with a tail past the last
 * 8. (Every float in [-87, 88], one in three, was checked once: worst 1.01
 * ulp.) */
static void test_exp_poly(void)
{
	enum { C = 4099 };
	static const float edge[] = { 0.0f, -0.0f, -87.0f, -87.00001f, -86.99999f, 88.0f,
				      88.00001f, -1e-45f, 1e-45f, -INFINITY, INFINITY, NAN,
				      -0.5f, 0.34657359f, -0.34657359f, -0.3465736f, 1.0f };
	static float a[C], b[C];
	int bad_def = 0, bad_bits = 0;
	for (uint64_t base = 0; base < (1ull << 32); base += (1ull << 32) / 64) {
		spread_bits(a, C, base, edge, (int)(sizeof edge / sizeof *edge));
		ops_exp_blocks(b, a, C, 0.0f, 1.0f, NULL);
		for (int i = 0; i < C; i++) {
			const float v = a[i], e = ops_exp_poly(v);
			bad_bits += memcmp(&e, &b[i], sizeof e) != 0 && !(e != e && b[i] != b[i]);
			if (v != v) {
				bad_def += e == e;
				continue;
			}
			if (v < -87.0f) {
				bad_def += e != 0.0f;
				continue;
			}
			const double want = exp(v > 88.0f ? 88.0 : (double)v);
			const float r = (float)want;
			const double ulp = (double)nextafterf(r, INFINITY) - (double)r;
			bad_def += !(fabs((double)e - want) <= 1.5 * ulp);
		}
	}
	CHECK(bad_def == 0, "ops_exp_poly within 1.5 ulp of exp: %d differ", bad_def);
	CHECK(bad_bits == 0, "ops_exp_blocks equals ops_exp_poly: %d differ", bad_bits);
}

/* The softmax loops over a vocabulary row (ops_exp_blocks, ops_sum_exp,
 * ops_logits_scan): the AVX2 forms against their scalar definitions bit
 * for bit, on logits of a model's range, near the cut at -87, masked
 * (-inf) entries and temperatures that put most of the row below the cut;
 * lengths with a tail past the last 8 and a last block cut short. */
static void test_softmax_rows(void)
{
	enum { V = 5003 };
	static float x[V], a[V], b[V];
	static double ba[V / OPS_EXP_BLOCK + 1], bb[V / OPS_EXP_BLOCK + 1];
	static const float temps[] = { 1.0f, 0.7f, 0.05f, 2.5f };
	uint64_t r = 12345;
	for (int i = 0; i < V; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = (float)((r >> 33) % 60000) / 1000.0f - 40.0f; /* [-40, 20) */
		if (i % 97 == 0)
			x[i] = -INFINITY;
		if (i % 89 == 0) /* just around the cut at temperature 1 */
			x[i] = 20.0f - 87.0f + (float)(i % 5 - 2) * 1e-5f;
	}
	x[17] = 20.0f; /* the maximum */
	int bad_exp = 0, bad_sum = 0, bad_def = 0, bad_blocks = 0;
	for (int t = 0; t < (int)(sizeof temps / sizeof *temps); t++) {
		for (int n = V - 7; n <= V; n += 7) {
			double ta = ops_exp_blocks_ref(a, x, n, 20.0f, temps[t], ba);
			double tb = ops_exp_blocks(b, x, n, 20.0f, temps[t], bb);
			double tn = ops_exp_blocks(b, x, n, 20.0f, temps[t], NULL);
			double want = 0;
			for (int i = 0; i < n; i++) {
				bad_exp += !same_float(a[i], b[i]);
				const float v = (x[i] - 20.0f) / temps[t];
				bad_def += !(v < -87.0f ? a[i] == 0.0f : a[i] == ops_exp_poly(v));
				want += a[i];
			}
			for (int k = 0; k * OPS_EXP_BLOCK < n; k++) {
				const int lo = k * OPS_EXP_BLOCK;
				double in = 0;
				for (int i = lo; i < n && i < lo + OPS_EXP_BLOCK; i++)
					in += a[i];
				bad_blocks += fabs(ba[k] - in) > 1e-12 * in || ba[k] != bb[k];
			}
			bad_sum += fabs(ta - want) > 1e-12 * want || tb != ta || tn != tb;
			double sr = ops_sum_exp_ref(x, n, 20.0f), sd = ops_sum_exp(x, n, 20.0f);
			bad_sum += sr != sd;
		}
	}
	CHECK(bad_exp == 0, "ops_exp_blocks equals its scalar definition: %d differ", bad_exp);
	CHECK(bad_def == 0, "the scalar definition: ops_exp_poly (%d differ)", bad_def);
	CHECK(bad_blocks == 0, "block sums: %d differ", bad_blocks);
	CHECK(bad_sum == 0, "totals and ops_sum_exp: %d differ", bad_sum);
	double want = 0;
	for (int i = 0; i < V; i++)
		want += ops_exp_poly(x[i] - 20.0f);
	double got = ops_sum_exp(x, V, 20.0f);
	CHECK(fabs(got - want) <= 1e-12 * want, "ops_sum_exp is the sum: %.17g vs %.17g", got,
	      want);
	/* the scan: NaNs masked, the count of candidates, the first of the
	 * largest (ties, zeros of both signs, a maximum in the tail) */
	static const struct {
		int n, at[3], best, count;
		float v[3];
	} cases[] = {
		{ 37, { 3, 20, -1 }, 3, 28, { 9.0f, 9.0f } },
		{ 37, { 35, 36, -1 }, 35, 27, { 50.0f, NAN } },
		{ 16, { 2, 9, -1 }, 2, 13, { -0.0f, 0.0f } },
		{ 19, { 0, 18, 5 }, 5, 14, { NAN, 7.5f, 7.5f } },
		{ 21, { 4, -1, -1 }, 0, 0, { NAN } },
	};
	int bad_scan = 0;
	for (int c = 0; c < (int)(sizeof cases / sizeof *cases); c++) {
		const int n = cases[c].n;
		for (int i = 0; i < n; i++) /* below zero; every fourth masked */
			a[i] = i % 4 == 1 || cases[c].count == 0 ? -INFINITY
								  : -1.0f - (float)(i % 7);
		for (int k = 0; k < 3 && cases[c].at[k] >= 0; k++)
			a[cases[c].at[k]] = cases[c].v[k];
		memcpy(b, a, sizeof *a * (size_t)n);
		int64_t best_r = -1, best_d = -1;
		int64_t cr = ops_logits_scan_ref(a, n, &best_r);
		int64_t cd = ops_logits_scan(b, n, &best_d);
		bad_scan += cr != cd || best_r != best_d || memcmp(a, b, sizeof *a * (size_t)n);
		bad_scan += best_r != cases[c].best || cr != cases[c].count;
		for (int i = 0; i < n; i++)
			bad_scan += a[i] != a[i];
	}
	CHECK(bad_scan == 0, "ops_logits_scan equals its scalar definition: %d differ", bad_scan);
}

/* The logprobs and candidate loops (ops_logsumexp's maximum,
 * ops_count_above, ops_first_above, ops_collect_above, ops_top_k): the
 * AVX2 forms against their scalar definitions on rows with repeated
 * values, masked and NaN entries, signed zeros, a NaN first entry, and
 * tails past the last 8; the top entries against a sort. */
static void test_logprob_rows(void)
{
	enum { N = 1003 };
	static float x[N];
	int bad_max = 0, bad_count = 0, bad_first = 0, bad_collect = 0, bad_top = 0, bad_sorted = 0;
	uint64_t r = 99;
	for (int round = 0; round < 40; round++) {
		const int n = N - round % 9;
		for (int i = 0; i < n; i++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			x[i] = (float)((int)((r >> 40) % 64) - 48) * 0.5f; /* many repeats */
			if ((r >> 20) % 13 == 0)
				x[i] = -INFINITY;
			if ((r >> 26) % 97 == 0)
				x[i] = NAN;
		}
		if (round % 4 == 1) /* the maximum a zero of either sign */
			for (int i = 0; i < n; i++)
				x[i] = x[i] > 0 ? -x[i] : x[i] == 0 ? (i % 3 ? 0.0f : -0.0f) : x[i];
		if (round % 5 == 2)
			x[0] = NAN;
		float mr = x[0]; /* the maximum as the scalar loop finds it */
		for (int i = 1; i < n; i++)
			mr = x[i] > mr ? x[i] : mr;
		const float lr = mr + (float)log(ops_sum_exp_ref(x, n, mr));
		const float ld = ops_logsumexp(x, n);
		bad_max += memcmp(&lr, &ld, sizeof lr) != 0;
		const float v = x[round * 7 % n];
		bad_count += ops_count_above_ref(x, n, v) != ops_count_above(x, n, v);
		/* the first above v from every start near the front and the end
		 * (hits anywhere in a group of 16, a tail, none at all) */
		for (int s0 = 0; s0 < n; s0 += s0 < 40 || s0 > n - 40 ? 1 : 37) {
			const int64_t f = ops_first_above(x + s0, n - s0, v);
			int64_t want = 0;
			while (want < n - s0 && !(x[s0 + want] > v))
				want++;
			bad_first += f != want || f != ops_first_above_ref(x + s0, n - s0, v);
		}
		bad_first += ops_first_above(x, n, INFINITY) != n;
		static int32_t ia[N], ib[N];
		const int64_t ca = ops_collect_above_ref(x + round % 3, n - round % 3, v, ia);
		const int64_t cb = ops_collect_above(x + round % 3, n - round % 3, v, ib);
		int64_t cw = 0;
		for (int i = round % 3; i < n; i++)
			cw += x[i] > v;
		bad_collect += ca != cw || cb != ca || memcmp(ia, ib, sizeof *ia * (size_t)ca);
		for (int64_t j = 0; j < ca; j++)
			bad_collect += !(x[round % 3 + ia[j]] > v) || (j && ia[j] <= ia[j - 1]);
		const int k = 1 + round % 20;
		int32_t ir[20], id[20];
		float vr[20], vd[20];
		const int cr = ops_top_k_ref(x, n, k, ir, vr), cd = ops_top_k(x, n, k, id, vd);
		bad_top += cr != cd || memcmp(ir, id, sizeof *ir * (size_t)cr) ||
			   memcmp(vr, vd, sizeof *vr * (size_t)cr);
		/* the definition: no entry outside beats one inside; ties by index */
		for (int j = 0; j < cr; j++) {
			const bool after = j && (vr[j] > vr[j - 1] ||
						 (vr[j] == vr[j - 1] && ir[j] < ir[j - 1]));
			bad_sorted += !(x[ir[j]] == vr[j]) || after;
		}
		int valid = 0;
		for (int i = 0; i < n; i++) {
			valid += x[i] > -INFINITY;
			bool in = false;
			for (int j = 0; j < cr; j++)
				in |= ir[j] == i;
			if (!in && cr == k && x[i] > -INFINITY &&
			    (x[i] > vr[k - 1] || (x[i] == vr[k - 1] && i < ir[k - 1])))
				bad_sorted++;
		}
		bad_sorted += cr != (valid < k ? valid : k);
	}
	CHECK(bad_max == 0, "ops_logsumexp equals its scalar definition: %d rows differ", bad_max);
	CHECK(bad_count == 0, "ops_count_above equals its scalar definition: %d differ", bad_count);
	CHECK(bad_first == 0, "ops_first_above is the first entry above: %d differ", bad_first);
	CHECK(bad_collect == 0, "ops_collect_above lists the entries above: %d differ",
	      bad_collect);
	CHECK(bad_top == 0, "ops_top_k equals its scalar definition: %d rows differ", bad_top);
	CHECK(bad_sorted == 0, "ops_top_k gives the k largest in order: %d wrong", bad_sorted);
}

/* log-sum-exp against long double, large values (no overflow: the max
 * comes out first), and masked (-inf) entries adding nothing. */
static void test_logsumexp(void)
{
	float x[1000];
	long double ref = 0;
	for (int i = 0; i < 1000; i++) {
		x[i] = 500.0f + (float)((i * 37) % 101) * 0.25f;
		ref += expl((long double)x[i] - 525.0L);
	}
	float got = ops_logsumexp(x, 1000);
	double want = (double)(525.0L + logl(ref));
	CHECK(fabs(got - want) <= 1e-4 * fabs(want), "large values: %.7g vs %.7g", got, want);
	float m[4] = { -INFINITY, 2.0f, -INFINITY, 2.0f };
	CHECK(fabsf(ops_logsumexp(m, 4) - (2.0f + logf(2.0f))) < 1e-6f, "-inf entries add nothing");
}

int main(void)
{
	test_logsumexp();
	test_exp_poly();
	test_softmax_rows();
	test_logprob_rows();
	test_best_split();
	test_best_scans();
	test_best_scan_at();
	test_exp();
	test_scale_max();
	test_attend_group();
	test_attend();
	test_kv_store();
	test_attend_stored(OPS_KV_F16);
	test_attend_stored(OPS_KV_Q8_0);
	test_rmsnorm();
	test_rope();
	test_gelu();
	test_glu();
	test_glu_silu();
	return check_summary("test_ops");
}
