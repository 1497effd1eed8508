/* ops_avx2.c — AVX2/FMA versions of the attention inner loops (see ops.h;
 * the scalar reference is ops_attend_ref in ops.c, and tests/test_ops.c
 * compares the two). Compiled with -mavx2 -mfma; called only when cpuid
 * says the CPU has both.
 *
 * Two kinds of loop with one arithmetic: ops_dot_avx2 / ops_axpy_avx2 for
 * one query (ops_attend), and the blocked ops_qk_avx2 / ops_pv_avx2 for a
 * group (ops_attend_group). The blocked ones only reorder independent
 * work: every (query, key) dot is the dot's own FMA chains and reduction,
 * every output element the axpy's fma chain over the keys in order, so a
 * query gets the same bits in a group as alone. What they save is memory
 * traffic and waiting: Q.K loads each query and key chunk once for up to
 * 4 x 3 FMAs, 8 to 12 chains in flight (the dot alone: 2 loads per FMA,
 * one chain), and P.V keeps 4 queries x 24 output
 * columns in registers across the keys, where the axpy loaded and stored
 * the output once per key. ops_exp_avx2 is the softmax's expf, glibc's
 * arithmetic 8 lanes at a time. ops_glu_gelu_avx2 is the FFN's GELU table
 * lookup with F16C conversions and a gather; ops_glu_silu_avx2 its SiLU
 * gate with the same exp.
 *
 * Each attention loop reads its K/V rows through row8/row1, as F32, as F16
 * widened by F16C or as Q8_0 blocks scaled back (an F16 or Q8_0 KV cache:
 * half or ~0.27 of the bytes per row, and the same arithmetic on the
 * widened values); the F16 and Q8 twins are the same inlined code with
 * another loader. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "ops_hsum.h"
#include "ops_int.h"

#define UNROLL _Pragma("GCC unroll 8")

/* Eight values of a K or V row from lane i on (i a multiple of 8), stored
 * as kind (an enum ops_kv_type, a constant after inlining). F16C
 * widens F16 exactly, and a Q8_0 value is its int8 times its block's F16
 * scale, a product float holds exactly, so every kind gives the F32 row of
 * its stored values. */
static inline __attribute__((always_inline)) __m256 row8(const void *row, int64_t i, int kind)
{
	if (kind == OPS_KV_F16)
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
	if (kind == OPS_KV_Q8_0) {
		const unsigned char *b = (const unsigned char *)row + (i / QK) * OPS_Q8_BLOCK_BYTES;
		uint16_t d;
		memcpy(&d, b, sizeof d);
		const __m128i q = _mm_loadl_epi64((const __m128i *)(b + 2 + i % QK));
		return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)),
				     _mm256_set1_ps(_cvtsh_ss(d)));
	}
	return _mm256_loadu_ps((const float *)row + i);
}

static inline __attribute__((always_inline)) float row1(const void *row, int64_t i, int kind)
{
	if (kind == OPS_KV_F16)
		return _cvtsh_ss(((const uint16_t *)row)[i]);
	if (kind == OPS_KV_Q8_0) {
		const unsigned char *b = (const unsigned char *)row + (i / QK) * OPS_Q8_BLOCK_BYTES;
		uint16_t d;
		memcpy(&d, b, sizeof d);
		return (float)(int8_t)b[2 + i % QK] * _cvtsh_ss(d);
	}
	return ((const float *)row)[i];
}

/* The dot of n floats: one 8-lane accumulator, an fma chain per lane over
 * the chunks of 8 in order, reduced by ops_hsum8; the scalar tail is added
 * after the reduction. The blocked ops_qk_avx2 and ops_avx512.c keep this
 * accumulator per (query, key) pair, so every block shape gives these
 * bits. (Alone the chain waits on the FMA latency; it is the reference
 * the group is held to, and the block loops keep 8 to 12 chains going.) */
static inline __attribute__((always_inline)) float dot_row(const float *a, const void *b,
							   int64_t n, int kind)
{
	__m256 acc = _mm256_setzero_ps();
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), row8(b, i, kind), acc);
	float r = ops_hsum8(acc);
	for (; i < n; i++)
		r += a[i] * row1(b, i, kind);
	return r;
}

float ops_dot_avx2(const float *a, const void *b, int64_t n)
{
	return dot_row(a, b, n, OPS_KV_F32);
}

float ops_dot_f16_avx2(const float *a, const void *b, int64_t n)
{
	return dot_row(a, b, n, OPS_KV_F16);
}

float ops_dot_q8_avx2(const float *a, const void *b, int64_t n)
{
	return dot_row(a, b, n, OPS_KV_Q8_0);
}

/* s[a * ld + r] = ops_dot_avx2(q[a], k[r], n) for a < Q, r < R, Q x R <=
 * 12: the pairs' accumulators all in registers through one pass over the
 * chunks (each query and key chunk loaded once for R and Q FMAs), then
 * reduced eight at a time (ops_hsum8_n), the scalar tails after. The
 * dot's earlier shape, four accumulators per pair, took four passes and
 * a reduction through memory: ~10% more time per pair in attn_bench. */
static inline __attribute__((always_inline)) void qk_block(const float *const *q, int Q,
							    const void *const *k, int R,
							    int64_t n, float *s, int64_t ld, int kind)
{
	__m256 acc[12]; /* pair (a, r) at a * R + r; every index a constant (loops of <= 8) */
	UNROLL for (int a = 0; a < Q; a++)
		UNROLL for (int r = 0; r < R; r++)
			acc[a * R + r] = _mm256_setzero_ps();
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 kv[8];
		UNROLL for (int r = 0; r < R; r++)
			kv[r] = row8(k[r], i, kind);
		UNROLL for (int a = 0; a < Q; a++) {
			const __m256 qv = _mm256_loadu_ps(q[a] + i);
			UNROLL for (int r = 0; r < R; r++)
				acc[a * R + r] = _mm256_fmadd_ps(qv, kv[r], acc[a * R + r]);
		}
	}
	float sum[12];
	ops_hsum8_n(acc, Q * R, sum);
	UNROLL for (int a = 0; a < Q; a++)
		UNROLL for (int r = 0; r < R; r++) {
			float d = sum[a * R + r];
			for (int64_t t = i; t < n; t++)
				d += q[a][t] * row1(k[r], t, kind);
			s[a * ld + r] = d;
		}
}

/* Q queries (a compile-time constant after inlining) against keys in
 * blocks of R = 12 / Q (8 for one query: its chains are the keys' alone),
 * the last keys as a block of their own. */
static inline __attribute__((always_inline)) void qk_keys(const float *const *q, int Q,
							   const void *const *K, int64_t nk,
							   int64_t n, float *s, int64_t ld, int kind)
{
	enum { R_MAX = 8 };
	const int R = Q == 1 ? R_MAX : 12 / Q;
	int64_t j = 0;
	for (; j + R <= nk; j += R)
		qk_block(q, Q, K + j, R, n, s + j, ld, kind);
	/* the last nk - j < R keys: a block of c keys exists for c x Q <= 12 */
#define QK_TAIL(c) \
	case c: \
		if ((c) * Q <= 12) \
			qk_block(q, Q, K + j, c, n, s + j, ld, kind); \
		break
	switch (nk - j) {
		QK_TAIL(7); QK_TAIL(6); QK_TAIL(5); QK_TAIL(4); QK_TAIL(3); QK_TAIL(2); QK_TAIL(1);
	}
#undef QK_TAIL
}

static inline __attribute__((always_inline)) void qk_rows(const float *const *q, int nq,
							   const void *const *K, int64_t nk,
							   int64_t n, float *s, int64_t ld, int kind)
{
	switch (nq) {
	case 4: qk_keys(q, 4, K, nk, n, s, ld, kind); break;
	case 3: qk_keys(q, 3, K, nk, n, s, ld, kind); break;
	case 2: qk_keys(q, 2, K, nk, n, s, ld, kind); break;
	default: qk_keys(q, 1, K, nk, n, s, ld, kind); break;
	}
}

void ops_qk_avx2(const float *const *q, int nq, const void *const *K, int64_t nk, int64_t n,
		 float *s, int64_t ld)
{
	qk_rows(q, nq, K, nk, n, s, ld, OPS_KV_F32);
}

void ops_qk_f16_avx2(const float *const *q, int nq, const void *const *K, int64_t nk, int64_t n,
		     float *s, int64_t ld)
{
	qk_rows(q, nq, K, nk, n, s, ld, OPS_KV_F16);
}

void ops_qk_q8_avx2(const float *const *q, int nq, const void *const *K, int64_t nk, int64_t n,
		    float *s, int64_t ld)
{
	qk_rows(q, nq, K, nk, n, s, ld, OPS_KV_Q8_0);
}

static inline __attribute__((always_inline)) void axpy_row(float *y, float p, const void *x,
							    int64_t n, int kind)
{
	const __m256 vp = _mm256_set1_ps(p);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(vp, row8(x, i, kind), _mm256_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] += p * row1(x, i, kind);
}

void ops_axpy_avx2(float *y, float p, const void *x, int64_t n)
{
	axpy_row(y, p, x, n, OPS_KV_F32);
}

void ops_axpy_f16_avx2(float *y, float p, const void *x, int64_t n)
{
	axpy_row(y, p, x, n, OPS_KV_F16);
}

void ops_axpy_q8_avx2(float *y, float p, const void *x, int64_t n)
{
	axpy_row(y, p, x, n, OPS_KV_Q8_0);
}

/* Columns [c, c + 8 W) of P.V for Q queries: the outputs sit in Q x W
 * registers while every key j < nk, in order, adds fma(p[a][j], V[j]). */
static inline __attribute__((always_inline)) void pv_cols(float *const *out,
							   const float *const *p, int Q,
							   const void *const *V, int64_t nk,
							   int64_t c, int W, int kind)
{
	__m256 acc[4][4];
	UNROLL for (int a = 0; a < Q; a++)
		UNROLL for (int w = 0; w < W; w++)
			acc[a][w] = _mm256_loadu_ps(out[a] + c + 8 * w);
	for (int64_t j = 0; j < nk; j++) {
		__m256 v[4];
		UNROLL for (int w = 0; w < W; w++)
			v[w] = row8(V[j], c + 8 * w, kind);
		UNROLL for (int a = 0; a < Q; a++) {
			const __m256 pj = _mm256_broadcast_ss(p[a] + j);
			UNROLL for (int w = 0; w < W; w++)
				acc[a][w] = _mm256_fmadd_ps(pj, v[w], acc[a][w]);
		}
	}
	UNROLL for (int a = 0; a < Q; a++)
		UNROLL for (int w = 0; w < W; w++)
			_mm256_storeu_ps(out[a] + c + 8 * w, acc[a][w]);
}

/* Every column of P.V for Q queries: 32 columns a pass for one query
 * (4 chains), 24 for more (4 x 3 chains, 7 loads per 12 FMAs; 12 beat
 * 8 chains by ~5% in attn_bench), then 16, then 8. */
static inline __attribute__((always_inline)) void pv_block(float *const *out,
							    const float *const *p, int Q,
							    const void *const *V, int64_t nk,
							    int64_t Dv, int kind)
{
	int64_t c = 0;
	if (Q == 1)
		for (; c + 32 <= Dv; c += 32)
			pv_cols(out, p, Q, V, nk, c, 4, kind);
	for (; c + 24 <= Dv; c += 24)
		pv_cols(out, p, Q, V, nk, c, 3, kind);
	for (; c + 16 <= Dv; c += 16)
		pv_cols(out, p, Q, V, nk, c, 2, kind);
	for (; c + 8 <= Dv; c += 8)
		pv_cols(out, p, Q, V, nk, c, 1, kind);
	for (; c < Dv; c++) /* ops_axpy_avx2's scalar tail */
		for (int a = 0; a < Q; a++) {
			float y = out[a][c];
			for (int64_t j = 0; j < nk; j++)
				y += p[a][j] * row1(V[j], c, kind);
			out[a][c] = y;
		}
}

static inline __attribute__((always_inline)) void pv_rows(float *const *out,
							   const float *const *p, int nq,
							   const void *const *V, int64_t nk,
							   int64_t Dv, int kind)
{
	switch (nq) {
	case 4: pv_block(out, p, 4, V, nk, Dv, kind); break;
	case 3: pv_block(out, p, 3, V, nk, Dv, kind); break;
	case 2: pv_block(out, p, 2, V, nk, Dv, kind); break;
	default: pv_block(out, p, 1, V, nk, Dv, kind); break;
	}
}

void ops_pv_avx2(float *const *out, const float *const *p, int nq, const void *const *V,
		 int64_t nk, int64_t Dv)
{
	pv_rows(out, p, nq, V, nk, Dv, OPS_KV_F32);
}

void ops_pv_f16_avx2(float *const *out, const float *const *p, int nq, const void *const *V,
		     int64_t nk, int64_t Dv)
{
	pv_rows(out, p, nq, V, nk, Dv, OPS_KV_F16);
}

void ops_pv_q8_avx2(float *const *out, const float *const *p, int nq, const void *const *V,
		    int64_t nk, int64_t Dv)
{
	pv_rows(out, p, nq, V, nk, Dv, OPS_KV_Q8_0);
}

static inline __attribute__((always_inline)) void widen_row(float *dst, const void *row,
							     int64_t n, int kind)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, row8(row, i, kind));
	for (; i < n; i++)
		dst[i] = row1(row, i, kind);
}

void ops_widen_f16_avx2(float *dst, const void *row, int64_t n)
{
	widen_row(dst, row, n, OPS_KV_F16);
}

void ops_widen_q8_avx2(float *dst, const void *row, int64_t n)
{
	widen_row(dst, row, n, OPS_KV_Q8_0);
}


/* expf, 8 floats at a time, bit for bit glibc's (2.28 and later, the
 * __expf_fma variant its libm picks on CPUs with FMA): the same double
 * arithmetic (x N/ln2 = k + r, 2^(k/N) from a table of N = 32 entries, a
 * cubic in r) with the same operations fused. Inputs the scalar code
 * treats as special (|x| >= 88, inf, NaN) go to libm's expf. Table and
 * coefficients are the published ones (ARM optimized-routines exp2f_data,
 * which glibc uses). */
static const int64_t exp2f_tab[32] = {
	0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
	0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
	0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
	0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
	0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
	0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
	0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
	0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

static inline __m128 exp4(__m128 x)
{
	const __m256d inv_ln2_n = _mm256_set1_pd(0x1.71547652b82fep+5);
	const __m256d shift = _mm256_set1_pd(0x1.8p+52);
	const __m256d xd = _mm256_cvtps_pd(x);
	const __m256d kz = _mm256_fmadd_pd(inv_ln2_n, xd, shift); /* k + shift */
	const __m256i ki = _mm256_castpd_si256(kz);
	const __m256d r = _mm256_fmsub_pd(inv_ln2_n, xd, _mm256_sub_pd(kz, shift));
	__m256i t = _mm256_i64gather_epi64((const long long *)exp2f_tab,
					   _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
	t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
	const __m256d z = _mm256_fmadd_pd(_mm256_set1_pd(0x1.c6af84b912394p-20), r,
					  _mm256_set1_pd(0x1.ebfce50fac4f3p-13));
	const __m256d r2 = _mm256_mul_pd(r, r);
	__m256d y = _mm256_fmadd_pd(_mm256_set1_pd(0x1.62e42ff0c52d6p-6), r, _mm256_set1_pd(1.0));
	y = _mm256_fmadd_pd(z, r2, y);
	return _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_castsi256_pd(t)));
}

/* expf of 8 lanes: exp4 on each half, or libm's expf for all 8 when one
 * lies outside exp4's range (|v| >= 88 or so, inf, NaN), as the scalar
 * code treats them. */
static inline __m256 exp8(__m256 v)
{
	const __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 20),
					     _mm256_set1_epi32(0x7ff));
	if (_mm256_movemask_epi8(_mm256_cmpgt_epi32(top, _mm256_set1_epi32(0x42a)))) {
		float t[8];
		_mm256_storeu_ps(t, v);
		for (int i = 0; i < 8; i++)
			t[i] = expf(t[i]);
		return _mm256_loadu_ps(t);
	}
	const __m128 lo = exp4(_mm256_castps256_ps128(v));
	const __m128 hi = exp4(_mm256_extractf128_ps(v, 1));
	return _mm256_set_m128(hi, lo);
}

void ops_exp_avx2(float *x, int64_t n, float mx)
{
	const __m256 vmx = _mm256_set1_ps(mx);
	int64_t j = 0;
	for (; j + 8 <= n; j += 8)
		_mm256_storeu_ps(x + j, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmx)));
	for (; j < n; j++)
		x[j] = expf(x[j] - mx);
}

/* ops_exp_poly (ops_int.h) on 8 lanes, the same operations in the same
 * order: the same bits. Lanes below the cut are computed on whatever they
 * hold and then zeroed; a group wholly below it (most of a row at a low
 * temperature, grammar-masked -inf) skips the arithmetic. */
static inline __m256 exp8_poly(__m256 v)
{
	const __m256 low = _mm256_cmp_ps(v, _mm256_set1_ps(OPS_EXP_CUT), _CMP_LT_OQ);
	if (_mm256_movemask_ps(low) == 0xff)
		return _mm256_setzero_ps();
	v = _mm256_min_ps(_mm256_set1_ps(OPS_EXP_TOP), v); /* NaN: v */
	const __m256 shift = _mm256_set1_ps(0x1.8p+23f);
	const __m256 t = _mm256_fmadd_ps(v, _mm256_set1_ps(0x1.715476p+0f), shift);
	const __m256 k = _mm256_sub_ps(t, shift);
	__m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-0x1.62e430p-1f), v);
	r = _mm256_fmadd_ps(k, _mm256_set1_ps(0x1.05c610p-29f), r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r),
				       _mm256_set1_ps(1.0f));
	const __m256i sb = _mm256_slli_epi32(
		_mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4b3fff81)), 23);
	return _mm256_andnot_ps(low, _mm256_mul_ps(y, _mm256_castsi256_ps(sb)));
}

static double sum_lanes(__m256d s03, __m256d s47)
{
	const __m256d s = _mm256_add_pd(s03, s47); /* s0+s4, s1+s5, s2+s6, s3+s7 */
	const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
	return _mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h));
}

double ops_exp_blocks_avx2(float *y, const float *x, int64_t n, float mx, float div,
			   double *blocks)
{
	const __m256 vmx = _mm256_set1_ps(mx), vdiv = _mm256_set1_ps(div);
	double total = 0;
	for (int64_t b = 0; b * OPS_EXP_BLOCK < n; b++) {
		const int64_t end = n - b * OPS_EXP_BLOCK > OPS_EXP_BLOCK ? (b + 1) * OPS_EXP_BLOCK
									    : n;
		__m256d s03 = _mm256_setzero_pd(), s47 = _mm256_setzero_pd();
		int64_t j = b * OPS_EXP_BLOCK;
		for (; j + 8 <= end; j += 8) {
			const __m256 v = _mm256_div_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmx),
						       vdiv);
			const __m256 e = exp8_poly(v);
			_mm256_storeu_ps(y + j, e);
			s03 = _mm256_add_pd(s03, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
			s47 = _mm256_add_pd(s47, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
		}
		if (j < end) { /* the row's last elements: lane by lane */
			double s[8];
			_mm256_storeu_pd(s, s03);
			_mm256_storeu_pd(s + 4, s47);
			for (; j < end; j++) {
				y[j] = ops_exp_poly((x[j] - mx) / div);
				s[j & 7] += y[j];
			}
			s03 = _mm256_loadu_pd(s);
			s47 = _mm256_loadu_pd(s + 4);
		}
		const double sum = sum_lanes(s03, s47);
		if (blocks)
			blocks[b] = sum;
		total += sum;
	}
	return total;
}

int64_t ops_logits_count_avx2(float *x, int64_t n)
{
	const __m256 ninf = _mm256_set1_ps(-INFINITY);
	int64_t count = 0, i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
		if (_mm256_movemask_ps(nan)) {
			v = _mm256_blendv_ps(v, ninf, nan);
			_mm256_storeu_ps(x + i, v);
		}
		count += __builtin_popcount(
			(unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, ninf, _CMP_GT_OQ)));
	}
	for (; i < n; i++) {
		if (x[i] != x[i])
			x[i] = -INFINITY;
		count += x[i] > -INFINITY;
	}
	return count;
}

int64_t ops_count_above_avx2(const float *x, int64_t n, float v)
{
	const __m256 vv = _mm256_set1_ps(v);
	int64_t c = 0, i = 0;
	for (; i + 8 <= n; i += 8)
		c += __builtin_popcount((unsigned)_mm256_movemask_ps(
			_mm256_cmp_ps(_mm256_loadu_ps(x + i), vv, _CMP_GT_OQ)));
	for (; i < n; i++)
		c += x[i] > v;
	return c;
}

int64_t ops_first_above_avx2(const float *x, int64_t n, float v)
{
	const __m256 vv = _mm256_set1_ps(v);
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) { /* two vectors a test: hits are rare */
		const __m256 a = _mm256_cmp_ps(_mm256_loadu_ps(x + i), vv, _CMP_GT_OQ);
		const __m256 b = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), vv, _CMP_GT_OQ);
		const unsigned m = (unsigned)_mm256_movemask_ps(a) |
				   (unsigned)_mm256_movemask_ps(b) << 8;
		if (m)
			return i + __builtin_ctz(m);
	}
	while (i < n && !(x[i] > v))
		i++;
	return i;
}

int64_t ops_collect_above_avx2(const float *x, int64_t n, float v, int32_t *idx)
{
	const __m256 vv = _mm256_set1_ps(v);
	int64_t c = 0, i = 0;
	for (; i + 8 <= n; i += 8) {
		unsigned m = (unsigned)_mm256_movemask_ps(
			_mm256_cmp_ps(_mm256_loadu_ps(x + i), vv, _CMP_GT_OQ));
		for (; m; m &= m - 1)
			idx[c++] = (int32_t)(i + __builtin_ctz(m));
	}
	for (; i < n; i++)
		if (x[i] > v)
			idx[c++] = (int32_t)i;
	return c;
}

/* ops_top_k_ref's insertions, on the lanes of each 8 that beat the worst
 * of the k so far (after the first few thousand entries, almost none). */
int ops_top_k_avx2(const float *x, int64_t n, int k, int32_t *ids, float *vals)
{
	int m = 0;
	if (k <= 0)
		return 0;
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 worst = _mm256_set1_ps(ops_top_worst(vals, k, m));
		int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), worst,
							   _CMP_GT_OQ));
		for (; hit; hit &= hit - 1) {
			const int64_t j = i + __builtin_ctz((unsigned)hit);
			if (x[j] > ops_top_worst(vals, k, m))
				ops_top_insert(ids, vals, k, &m, x[j], j);
		}
	}
	for (; i < n; i++)
		if (x[i] > ops_top_worst(vals, k, m))
			ops_top_insert(ids, vals, k, &m, x[i], i);
	return m;
}

double ops_sum_exp_avx2(const float *x, int64_t n, float mx)
{
	const __m256 vmx = _mm256_set1_ps(mx);
	__m256d s03 = _mm256_setzero_pd(), s47 = _mm256_setzero_pd();
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 e = exp8_poly(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx));
		s03 = _mm256_add_pd(s03, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
		s47 = _mm256_add_pd(s47, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
	}
	double s[8];
	_mm256_storeu_pd(s, s03);
	_mm256_storeu_pd(s + 4, s47);
	for (; i < n; i++)
		s[i & 7] += ops_exp_poly(x[i] - mx);
	return sum_lanes(_mm256_loadu_pd(s), _mm256_loadu_pd(s + 4));
}

/* x[j] *= scale, returning the largest x[j] that is not NaN: vmaxps
 * returns its second operand when either is NaN, so a NaN never enters
 * the running maxima, as it never passes ops.c's scalar x > mx. */
float ops_scale_max_avx2(float *x, int64_t n, float scale)
{
	const __m256 vs = _mm256_set1_ps(scale);
	__m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
	int64_t j = 0;
	for (; j + 16 <= n; j += 16) {
		const __m256 a = _mm256_mul_ps(_mm256_loadu_ps(x + j), vs);
		const __m256 b = _mm256_mul_ps(_mm256_loadu_ps(x + j + 8), vs);
		_mm256_storeu_ps(x + j, a);
		_mm256_storeu_ps(x + j + 8, b);
		m0 = _mm256_max_ps(a, m0);
		m1 = _mm256_max_ps(b, m1);
	}
	for (; j + 8 <= n; j += 8) {
		const __m256 a = _mm256_mul_ps(_mm256_loadu_ps(x + j), vs);
		_mm256_storeu_ps(x + j, a);
		m0 = _mm256_max_ps(a, m0);
	}
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(m0), _mm256_extractf128_ps(m0, 1));
	m = _mm_max_ps(m, _mm_max_ps(_mm256_castps256_ps128(m1), _mm256_extractf128_ps(m1, 1)));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	float mx = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
	for (; j < n; j++) {
		x[j] *= scale;
		if (x[j] > mx)
			mx = x[j];
	}
	return mx;
}

/* ---- SiLU-gated linear unit ---- */

/* Eight elements of ops_glu_silu_avx2: the scalar formula's operations,
 * IEEE each, with the exp above. */
static inline __m256 glu_silu8(__m256 x, __m256 u)
{
	const __m256 e = exp8(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));
	return _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

/* ---- GELU-gated linear unit, and both GLU entries ---- */

/* Eight elements of ops_glu_gelu_avx2. */
static inline __m256 glu_gelu8(__m256 x, __m256 u, const uint16_t *table)
{
	const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	/* 32-bit gathers at 2-byte steps: the entry is the low half */
	__m256i t = _mm256_i32gather_epi32((const int *)table, _mm256_cvtepu16_epi32(h), 2);
	t = _mm256_and_si256(t, _mm256_set1_epi32(0xffff));
	const __m128i t16 = _mm_packus_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
	__m256 y = _mm256_cvtph_ps(t16);
	y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-10.0f), _CMP_LE_OQ));
	y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, _mm256_set1_ps(10.0f), _CMP_GE_OQ));
	return _mm256_mul_ps(y, u);
}

/* g[i] = act(g[i]) * u[i] over n elements, 8 at a time, the tail through
 * the same arithmetic, padded: GELU with table, SiLU without (a constant
 * after inlining). */
static inline __attribute__((always_inline)) void glu_rows(float *g, const float *u, int64_t n,
							   const uint16_t *table)
{
#define GLU8(x, u) (table ? glu_gelu8((x), (u), table) : glu_silu8((x), (u)))
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(g + i, GLU8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
	if (i < n) {
		float gt[8] = { 0 }, ut[8] = { 0 };
		memcpy(gt, g + i, (size_t)(n - i) * sizeof *g);
		memcpy(ut, u + i, (size_t)(n - i) * sizeof *u);
		_mm256_storeu_ps(gt, GLU8(_mm256_loadu_ps(gt), _mm256_loadu_ps(ut)));
		memcpy(g + i, gt, (size_t)(n - i) * sizeof *g);
	}
#undef GLU8
}

void ops_glu_gelu_avx2(float *g, const float *u, int64_t n, const uint16_t *table)
{
	glu_rows(g, u, n, table);
}

void ops_glu_silu_avx2(float *g, const float *u, int64_t n)
{
	glu_rows(g, u, n, NULL);
}

/* ops_best_scan, 32 elements a block: a block with no element above the
 * best so far (ordered compares: a NaN is never above) cannot change it
 * once a non-NaN was seen, so only blocks that can go through the scalar
 * rule, which stays the one definition of the result. In a row of logits
 * that is a few blocks in the whole row (each new maximum); the scalar
 * loop's compare-and-branch per element was 5% of a 16-stream server. */
void ops_best_scan_avx2(struct ops_best *b, const float *x, int64_t i0, int64_t i1)
{
	int64_t i = i0;
	for (; i + 32 <= i1; i += 32) {
		if (b->idx != OPS_BEST_NONE) {
			const __m256 v = _mm256_set1_ps(b->val);
			const __m256 a = _mm256_or_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), v, _CMP_GT_OQ),
						      _mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), v, _CMP_GT_OQ));
			const __m256 c = _mm256_or_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i + 16), v, _CMP_GT_OQ),
						      _mm256_cmp_ps(_mm256_loadu_ps(x + i + 24), v, _CMP_GT_OQ));
			if (!_mm256_movemask_ps(_mm256_or_ps(a, c)))
				continue;
		}
		ops_best_scan_scalar(b, x, i, i + 32);
	}
	ops_best_scan_scalar(b, x, i, i1);
}
