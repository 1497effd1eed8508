/* ops_int.h — private to ops.c and its ISA-specific files. */
#ifndef INGOT_OPS_INT_H
#define INGOT_OPS_INT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ops.h"

/* A Q8_0 K/V row: blocks of QK values, each an F16 scale then QK int8
 * (quant's block_q8_0). Value i is int8 i % QK of block i / QK times that
 * block's scale. */
#define OPS_Q8_BLOCK_BYTES (2 + QK)

/* The attention loops over K/V rows stored as F32 (ops_*_avx2), F16
 * (ops_*_f16_avx2) or Q8_0 (ops_*_q8_avx2): each value widened exactly,
 * then the same arithmetic, so a row gives the F32 result of its stored
 * values, bit for bit.
 *
 * One query (ops_attend): a dot of n floats, and y[i] = fma(p, x[i], y[i])
 * (the scalar tail y[i] += p * x[i]). */
float ops_dot_avx2(const float *a, const void *b, int64_t n);
float ops_dot_f16_avx2(const float *a, const void *b, int64_t n);
float ops_dot_q8_avx2(const float *a, const void *b, int64_t n);
void ops_axpy_avx2(float *y, float p, const void *x, int64_t n);
void ops_axpy_f16_avx2(float *y, float p, const void *x, int64_t n);
void ops_axpy_q8_avx2(float *y, float p, const void *x, int64_t n);

/* A block of nq <= 4 queries (ops_attend_group), bit for bit the loops
 * above:
 *   ops_qk_avx2: s[a * ld + j] = ops_dot_avx2(q[a], K[j], n), j < nk;
 *   ops_pv_avx2: for j < nk in order, ops_axpy_avx2(out[a], p[a][j], V[j],
 *                Dv), for each a < nq. */
void ops_qk_avx2(const float *const *q, int nq, const void *const *K, int64_t nk, int64_t n,
		 float *s, int64_t ld);
void ops_qk_f16_avx2(const float *const *q, int nq, const void *const *K, int64_t nk, int64_t n,
		     float *s, int64_t ld);
void ops_qk_q8_avx2(const float *const *q, int nq, const void *const *K, int64_t nk, int64_t n,
		    float *s, int64_t ld);
void ops_pv_avx2(float *const *out, const float *const *p, int nq, const void *const *V,
		 int64_t nk, int64_t Dv);
void ops_pv_f16_avx2(float *const *out, const float *const *p, int nq, const void *const *V,
		     int64_t nk, int64_t Dv);
void ops_pv_q8_avx2(float *const *out, const float *const *p, int nq, const void *const *V,
		    int64_t nk, int64_t Dv);

/* The same two block loops, 16 lanes a register (ops_avx512.c), bit for
 * bit the AVX2 ones. */
void ops_qk_avx512(const float *const *q, int nq, const void *const *K, int64_t nk, int64_t n,
		   float *s, int64_t ld);
void ops_qk_f16_avx512(const float *const *q, int nq, const void *const *K, int64_t nk,
		       int64_t n, float *s, int64_t ld);
void ops_qk_q8_avx512(const float *const *q, int nq, const void *const *K, int64_t nk,
		      int64_t n, float *s, int64_t ld);
void ops_pv_avx512(float *const *out, const float *const *p, int nq, const void *const *V,
		   int64_t nk, int64_t Dv);
void ops_pv_f16_avx512(float *const *out, const float *const *p, int nq, const void *const *V,
		       int64_t nk, int64_t Dv);
void ops_pv_q8_avx512(float *const *out, const float *const *p, int nq, const void *const *V,
		      int64_t nk, int64_t Dv);

/* dst[i] = value i of an F16 / Q8_0 row as a float, i < n (exactly). */
void ops_widen_f16_avx2(float *dst, const void *row, int64_t n);
void ops_widen_q8_avx2(float *dst, const void *row, int64_t n);


/* x[j] = expf(x[j] - mx) for j < n, bit for bit glibc's expf on CPUs
 * with FMA (other libms: its own correctly-rounded-or-nearly results,
 * the same for every caller). */
void ops_exp_avx2(float *x, int64_t n, float mx);

/* ops.h's row exponential (ops_exp_blocks, ops_sum_exp): 0 below
 * OPS_EXP_CUT, v clamped to OPS_EXP_TOP above, else Cephes' expf
 * polynomial: k = round(v / ln 2) (the 1.5 * 2^23 shifter), r = v - k ln 2
 * in two FMA steps, exp(r) by a degree-7 polynomial in Horner's form, times
 * 2^k built from k's bits. Every step is one IEEE float operation or fmaf,
 * so the AVX2 lanes (exp8_poly) give the same bits; within 1.5 ulp of the
 * exact exponential (test_ops). The cut keeps 2^k normal (k >= -126); e^-87 < 2e-38 is a
 * probability no draw can see, and the callers' v is <= 0 (x - the row's
 * maximum). */
#define OPS_EXP_CUT (-87.0f)
#define OPS_EXP_TOP 88.0f

static inline float ops_exp_poly(float v)
{
	if (v < OPS_EXP_CUT)
		return 0.0f;
	if (OPS_EXP_TOP < v) /* NaN stays NaN, as _mm256_min_ps(top, v) keeps it */
		v = OPS_EXP_TOP;
	const float t = fmaf(v, 0x1.715476p+0f, 0x1.8p+23f); /* 1.5 * 2^23 + k */
	const float k = t - 0x1.8p+23f;
	float r = fmaf(k, -0x1.62e430p-1f, v);
	r = fmaf(k, 0x1.05c610p-29f, r); /* ln 2 = 0x1.62e430p-1 - 0x1.05c610p-29 */
	float p = 1.9875691500e-4f;
	p = fmaf(p, r, 1.3981999507e-3f);
	p = fmaf(p, r, 8.3334519073e-3f);
	p = fmaf(p, r, 4.1665795894e-2f);
	p = fmaf(p, r, 1.6666665459e-1f);
	p = fmaf(p, r, 5.0000001201e-1f);
	const float y = fmaf(p, r * r, r) + 1.0f;
	uint32_t tb;
	memcpy(&tb, &t, sizeof tb);
	const uint32_t sb = (tb - 0x4b3fff81u) << 23; /* (k + 127) << 23 */
	float scale;
	memcpy(&scale, &sb, sizeof scale);
	return y * scale;
}

/* ops_exp_blocks, ops_sum_exp, ops_count_above, ops_first_above,
 * ops_collect_above and ops_top_k (ops.h), bit for bit their scalar
 * definitions in ops.c. */
double ops_exp_blocks_avx2(float *y, const float *x, int64_t n, float mx, float div,
			   double *blocks);
double ops_sum_exp_avx2(const float *x, int64_t n, float mx);
int64_t ops_count_above_avx2(const float *x, int64_t n, float v);
int64_t ops_first_above_avx2(const float *x, int64_t n, float v);
int64_t ops_collect_above_avx2(const float *x, int64_t n, float v, int32_t *idx);
int ops_top_k_avx2(const float *x, int64_t n, int k, int32_t *ids, float *vals);

/* ops_logits_scan's first half: NaNs become -INFINITY; returns how many
 * entries are > -INFINITY. */
int64_t ops_logits_count_avx2(float *x, int64_t n);

/* What an entry must beat to join ops_top_k's m best so far. */
static inline float ops_top_worst(const float *vals, int k, int m)
{
	return m < k ? -INFINITY : vals[k - 1];
}

/* ops_top_k's step: x[i] into the k best so far (*m of them), in order;
 * the caller has checked that it beats the worst when there are k. */
static inline void ops_top_insert(int32_t *ids, float *vals, int k, int *m, float v, int64_t i)
{
	int j = *m < k ? (*m)++ : k - 1;
	while (j > 0 && v > vals[j - 1]) {
		ids[j] = ids[j - 1];
		vals[j] = vals[j - 1];
		j--;
	}
	ids[j] = (int32_t)i;
	vals[j] = v;
}

/* x[j] *= scale for j < n; returns the largest x[j] that is not NaN
 * (-INFINITY if none), the value ops.c's scalar loop finds. */
float ops_scale_max_avx2(float *x, int64_t n, float scale);

/* The RMS norm's loops (ops_norm_avx2.c), bit for bit ops.c's scalar ones:
 *   ops_sumsq_rows_avx2: ss[r] = the sum in element order of (double)(x_r[i]
 *     * x_r[i]), i < n, for rows x_r = x + r * stride, r < rows;
 *   ops_scale_mul_avx2: y[i] = x[i] * scale * w[i] (w NULL: x[i] * scale),
 *     i < n, y == x allowed;
 *   ops_add_avx2: y[i] += x[i], i < n. */
void ops_sumsq_rows_avx2(const float *x, int64_t stride, int64_t n, int64_t rows, double *ss);
/* Their scalar tail: ss[r] += the squares of elements [i0, n) of row x +
 * r * stride, r < rows, in element order. */
static inline void ops_sumsq_tail(const float *x, int64_t stride, int64_t i0, int64_t n, int rows,
				  double *ss)
{
	for (int r = 0; r < rows; r++)
		for (int64_t i = i0; i < n; i++) {
			const float v = x[r * stride + i];
			ss[r] += (double)(v * v);
		}
}
/* ops_sumsq_rows_avx2's sums, bit for bit, 8 rows a vector of doubles (ops_avx512.c) */
void ops_sumsq_rows_avx512(const float *x, int64_t stride, int64_t n, int64_t rows, double *ss);
void ops_scale_mul_avx2(float *y, const float *x, const float *w, int64_t n, float scale);
void ops_add_avx2(float *y, const float *x, int64_t n);

/* The rope's rotation of one head v by angles cs, sn [n_rot / 2] (the
 * loop of ops_rope_apply), its pairs in runs of 8 from pair 0; returns
 * the number of pairs rotated (a multiple of 8), the rest left to the
 * scalar loop. Bit for bit that loop. */
int64_t ops_rope_apply_avx2(float *v, int64_t n_rot, const float *cs, const float *sn,
			    enum rope_kind kind);

/* ops_best_scan: the scalar rule (ops.c), and the AVX2 and AVX-512 scans
 * that skip the blocks that rule would leave unchanged (the same result;
 * ops_avx512.c is compiled with AVX-512 F/BW/VL/DQ). */
void ops_best_scan_scalar(struct ops_best *b, const float *x, int64_t i0, int64_t i1);
void ops_best_scan_avx2(struct ops_best *b, const float *x, int64_t i0, int64_t i1);
void ops_best_scan_avx512(struct ops_best *b, const float *x, int64_t i0, int64_t i1);

/* g[i] = ops_gelu(g[i]) * u[i] for i < n, bit for bit: the input rounded
 * to fp16 (F16C, to nearest even, as f32_to_fp16) indexes table (1 << 16
 * fp16 GELU values and one entry of padding), |x| >= 10 as ops_gelu. */
void ops_glu_gelu_avx2(float *g, const float *u, int64_t n, const uint16_t *table);

/* g[i] = g[i] / (1 + expf(-g[i])) * u[i] for i < n (SiLU's formula in
 * ops.c), each operation IEEE, expf as ops_exp_avx2's: bit for bit the
 * scalar loop under glibc. */
void ops_glu_silu_avx2(float *g, const float *u, int64_t n);

#endif
