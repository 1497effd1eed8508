/* ops_avx512.c — AVX-512 versions of the blocked attention loops
 * (ops_qk_avx2 / ops_pv_avx2, see ops_avx2.c and ops_int.h), bit for bit
 * the AVX2 ones. Compiled with AVX-512 F/BW/VL/DQ and F16C; called only
 * when cpuid says the CPU has them (quant's AVX512 level).
 *
 * Why a second width: at 16 streams the server spends a fifth of its time
 * in these two loops (contexts of a few hundred tokens, an F16 KV cache),
 * and a zmm register holds twice the lanes of a ymm one for the same
 * instruction count, so the FMA counts halve (and P.V's F16 conversions).
 *
 * Why the same bits: the AVX2 dot keeps one 8-lane accumulator per
 * (query, key) pair, an fma chain per lane over the chunks of 8, reduced
 * by ops_hsum8 (ops_hsum.h). Here a zmm register holds two queries' chunk
 * side by side and the key's chunk is broadcast to both halves, so one
 * FMA advances two pairs' accumulators, lane for lane the AVX2 chains;
 * the halves are split back out for the same reduction. (The dot's
 * earlier shape, four accumulators over the lanes of chunks of 32, fit a
 * zmm's 16 lanes directly but needed two passes and a reduction from
 * memory. At AVX2 width the one accumulator measured 10-15% less time per
 * pair; this width was rewritten for it without an AVX-512 host to time
 * it on: the same FMAs per pair, no second pass, but one F16 or Q8_0 key
 * conversion per 8 values rather than 16.) P.V is per
 * output column an fma chain over the keys in order, whatever the vector
 * width, so 16 columns a register change nothing but the instruction
 * count.
 *
 * Only whole chunks are done here: Q.K for two to four queries and head
 * dims that are multiples of 8 (up to QK_DIM_MAX), P.V for multiples of
 * 16, as every model's are (64, 128, 256). One query and other dims go
 * to the AVX2 loops themselves, whose scalar tails a copy here would only
 * repeat. */
#include <immintrin.h>
#include <string.h>

#include "ops_hsum.h"
#include "ops_int.h"

#define UNROLL _Pragma("GCC unroll 8")

/* Sixteen values of a K or V row from lane i on (i a multiple of 16),
 * stored as kind, widened exactly as ops_avx2.c's row8 does; 16 lanes
 * never straddle a Q8_0 block of 32. */
static inline __attribute__((always_inline)) __m512 row16(const void *row, int64_t i, int kind)
{
	if (kind == OPS_KV_F16)
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i)));
	if (kind == OPS_KV_Q8_0) {
		const unsigned char *b = (const unsigned char *)row + (i / QK) * OPS_Q8_BLOCK_BYTES;
		uint16_t d;
		memcpy(&d, b, sizeof d);
		const __m128i q = _mm_loadu_si128((const __m128i *)(b + 2 + i % QK));
		return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)),
				     _mm512_set1_ps(_cvtsh_ss(d)));
	}
	return _mm512_loadu_ps((const float *)row + i);
}

/* Eight values of a K row from lane i on (i a multiple of 8) in both
 * halves of a register, widened as row8 in ops_avx2.c does (F16 by F16C,
 * a Q8_0 value as its int8 times its block's scale, exact in float); 8
 * lanes never straddle a Q8_0 block. */
static inline __attribute__((always_inline)) __m512 row8x2(const void *row, int64_t i, int kind)
{
	if (kind == OPS_KV_F16)
		return _mm512_cvtph_ps(_mm256_broadcastsi128_si256(
			_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i))));
	if (kind == OPS_KV_Q8_0) {
		const unsigned char *b = (const unsigned char *)row + (i / QK) * OPS_Q8_BLOCK_BYTES;
		uint16_t d;
		memcpy(&d, b, sizeof d);
		const __m128i q = _mm_loadl_epi64((const __m128i *)(b + 2 + i % QK));
		const __m512i q2 = _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(q, q)); /* [q | q] */
		return _mm512_mul_ps(_mm512_cvtepi32_ps(q2), _mm512_set1_ps(_cvtsh_ss(d)));
	}
	return _mm512_broadcast_f32x8(_mm256_loadu_ps((const float *)row + i));
}

/* The most head dims the pair buffer below holds; larger ones go to the
 * AVX2 loops (none of the models we serve has one). */
#define QK_DIM_MAX 512

/* s[a * ld + r] = ops_dot_avx2(q[a], k[r], n) for a < Q, r < R, n a
 * multiple of 8 (<= QK_DIM_MAX): queries 2 p and 2 p + 1 side by side in
 * one register (qp, interleaved chunk by chunk; an odd Q's last pair
 * holds its last query twice), each key chunk broadcast to both halves,
 * so a zmm FMA advances two pairs' 8-lane accumulators: the AVX2 dot's
 * chain per lane, in the same order. (P x R <= 12 chains, the pairs'
 * accumulators then reduced eight at a time by ops_hsum8_n.) */
static inline __attribute__((always_inline)) void qk_pairs(const float *qp, int Q,
							    const void *const *k, int R,
							    int64_t n, float *s, int64_t ld,
							    int kind)
{
	enum { P_MAX = 2 };
	const int P = (Q + 1) / 2;
	__m512 acc[P_MAX][8];
	UNROLL for (int p = 0; p < P; p++)
		UNROLL for (int r = 0; r < R; r++)
			acc[p][r] = _mm512_setzero_ps();
	for (int64_t i = 0; i < n; i += 8) {
		__m512 kv[8];
		UNROLL for (int r = 0; r < R; r++)
			kv[r] = row8x2(k[r], i, kind);
		UNROLL for (int p = 0; p < P; p++) {
			const __m512 qv = _mm512_loadu_ps(qp + p * 2 * QK_DIM_MAX + 2 * i);
			UNROLL for (int r = 0; r < R; r++)
				acc[p][r] = _mm512_fmadd_ps(qv, kv[r], acc[p][r]);
		}
	}
	/* pair (a, r) is in half a % 2 of acc[a / 2][r] */
	__m256 v[4 * 8]; /* Q x R of them (tail blocks' dead instances index up to 4 x 7) */
	UNROLL for (int a = 0; a < Q; a++)
		UNROLL for (int r = 0; r < R; r++)
			v[a * R + r] = a % 2 == 0 ? _mm512_castps512_ps256(acc[a / 2][r])
						  : _mm512_extractf32x8_ps(acc[a / 2][r], 1);
	float sum[4 * 8];
	ops_hsum8_n(v, Q * R, sum);
	UNROLL for (int a = 0; a < Q; a++)
		UNROLL for (int r = 0; r < R; r++)
			s[a * ld + r] = sum[a * R + r];
}

/* Q in 2..4 queries against keys in blocks of R = 6 (two pairs) or 8
 * (one), the last keys as a block of their own; the queries interleaved
 * once into pairs first. */
static inline __attribute__((always_inline)) void qk_keys(const float *const *q, int Q,
							   const void *const *K, int64_t nk,
							   int64_t n, float *s, int64_t ld, int kind)
{
	float qp[2][2 * QK_DIM_MAX] __attribute__((aligned(64)));
	for (int a = 0; a < Q + Q % 2; a++) {
		const float *src = q[a < Q ? a : Q - 1];
		for (int64_t i = 0; i < n; i += 8)
			memcpy(&qp[a / 2][2 * i + 8 * (a % 2)], src + i, 8 * sizeof(float));
	}
	const int R = Q > 2 ? 6 : 8;
	int64_t j = 0;
	for (; j + R <= nk; j += R)
		qk_pairs(qp[0], Q, K + j, R, n, s + j, ld, kind);
	switch (nk - j) { /* R - 1 at most */
	case 7: qk_pairs(qp[0], Q, K + j, 7, n, s + j, ld, kind); break;
	case 6: qk_pairs(qp[0], Q, K + j, 6, n, s + j, ld, kind); break;
	case 5: qk_pairs(qp[0], Q, K + j, 5, n, s + j, ld, kind); break;
	case 4: qk_pairs(qp[0], Q, K + j, 4, n, s + j, ld, kind); break;
	case 3: qk_pairs(qp[0], Q, K + j, 3, n, s + j, ld, kind); break;
	case 2: qk_pairs(qp[0], Q, K + j, 2, n, s + j, ld, kind); break;
	case 1: qk_pairs(qp[0], Q, K + j, 1, n, s + j, ld, kind); break;
	}
}

/* One query, head dims that are not multiples of 8, and very large ones
 * go to the AVX2 loops, which give the same bits (see the top of the
 * file); the rest here. */
static inline __attribute__((always_inline)) int qk_here(int nq, int64_t n)
{
	return nq >= 2 && n % 8 == 0 && n <= QK_DIM_MAX;
}

static inline __attribute__((always_inline)) void qk_rows(const float *const *q, int nq,
							   const void *const *K, int64_t nk,
							   int64_t n, float *s, int64_t ld, int kind)
{
	switch (nq) {
	case 4: qk_keys(q, 4, K, nk, n, s, ld, kind); break;
	case 3: qk_keys(q, 3, K, nk, n, s, ld, kind); break;
	default: qk_keys(q, 2, K, nk, n, s, ld, kind); break;
	}
}

void ops_qk_avx512(const float *const *q, int nq, const void *const *K, int64_t nk, int64_t n,
		   float *s, int64_t ld)
{
	if (qk_here(nq, n))
		qk_rows(q, nq, K, nk, n, s, ld, OPS_KV_F32);
	else
		ops_qk_avx2(q, nq, K, nk, n, s, ld);
}

void ops_qk_f16_avx512(const float *const *q, int nq, const void *const *K, int64_t nk,
		       int64_t n, float *s, int64_t ld)
{
	if (qk_here(nq, n))
		qk_rows(q, nq, K, nk, n, s, ld, OPS_KV_F16);
	else
		ops_qk_f16_avx2(q, nq, K, nk, n, s, ld);
}

void ops_qk_q8_avx512(const float *const *q, int nq, const void *const *K, int64_t nk,
		      int64_t n, float *s, int64_t ld)
{
	if (qk_here(nq, n))
		qk_rows(q, nq, K, nk, n, s, ld, OPS_KV_Q8_0);
	else
		ops_qk_q8_avx2(q, nq, K, nk, n, s, ld);
}

/* Columns [c, c + 16 W) of P.V for Q queries: Q x W registers of outputs
 * while every key j < nk, in order, adds fma(p[a][j], V[j]). */
static inline __attribute__((always_inline)) void pv_cols(float *const *out,
							   const float *const *p, int Q,
							   const void *const *V, int64_t nk,
							   int64_t c, int W, int kind)
{
	__m512 acc[4][4];
	UNROLL for (int a = 0; a < Q; a++)
		UNROLL for (int w = 0; w < W; w++)
			acc[a][w] = _mm512_loadu_ps(out[a] + c + 16 * w);
	for (int64_t j = 0; j < nk; j++) {
		__m512 v[4];
		UNROLL for (int w = 0; w < W; w++)
			v[w] = row16(V[j], c + 16 * w, kind);
		UNROLL for (int a = 0; a < Q; a++) {
			const __m512 pj = _mm512_set1_ps(p[a][j]);
			UNROLL for (int w = 0; w < W; w++)
				acc[a][w] = _mm512_fmadd_ps(pj, v[w], acc[a][w]);
		}
	}
	UNROLL for (int a = 0; a < Q; a++)
		UNROLL for (int w = 0; w < W; w++)
			_mm512_storeu_ps(out[a] + c + 16 * w, acc[a][w]);
}

/* Every column of P.V for Q queries, Dv a multiple of 16: 64 columns a
 * pass (Q x 4 chains), then 16. */
static inline __attribute__((always_inline)) void pv_block(float *const *out,
							    const float *const *p, int Q,
							    const void *const *V, int64_t nk,
							    int64_t Dv, int kind)
{
	int64_t c = 0;
	for (; c + 64 <= Dv; c += 64)
		pv_cols(out, p, Q, V, nk, c, 4, kind);
	for (; c < Dv; c += 16)
		pv_cols(out, p, Q, V, nk, c, 1, kind);
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

void ops_pv_avx512(float *const *out, const float *const *p, int nq, const void *const *V,
		   int64_t nk, int64_t Dv)
{
	if (Dv % 16)
		ops_pv_avx2(out, p, nq, V, nk, Dv);
	else
		pv_rows(out, p, nq, V, nk, Dv, OPS_KV_F32);
}

void ops_pv_f16_avx512(float *const *out, const float *const *p, int nq, const void *const *V,
		       int64_t nk, int64_t Dv)
{
	if (Dv % 16)
		ops_pv_f16_avx2(out, p, nq, V, nk, Dv);
	else
		pv_rows(out, p, nq, V, nk, Dv, OPS_KV_F16);
}

void ops_pv_q8_avx512(float *const *out, const float *const *p, int nq, const void *const *V,
		      int64_t nk, int64_t Dv)
{
	if (Dv % 16)
		ops_pv_q8_avx2(out, p, nq, V, nk, Dv);
	else
		pv_rows(out, p, nq, V, nk, Dv, OPS_KV_Q8_0);
}

/* ops_best_scan's elements [i, e) 16 at a time: a vector with none above
 * the best so far is one the scalar rule would leave b unchanged by. */
static void best_blocks(struct ops_best *b, const float *x, int64_t i, int64_t e)
{
	for (; i + 16 <= e; i += 16)
		if (_mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), _mm512_set1_ps(b->val), _CMP_GT_OQ))
			ops_best_scan_scalar(b, x, i, i + 16);
	ops_best_scan_scalar(b, x, i, e);
}

#define BEST_RUN 256 /* elements a run: 16 vmaxps on 4 chains */

/* ops_best_scan a run of BEST_RUN at a time: the run's maximum by vmaxps
 * (which returns its second operand, here the running maximum, where the
 * first is a NaN: NaNs never taken), and only a run whose maximum is
 * above the best so far goes through best_blocks; in a row of logits
 * that is a few runs of the row (each new maximum). Until a non-NaN
 * element was seen every element is the scalar rule's. The AVX2 scan's
 * compare, or and movemask per 8 elements, with a scalar scan of each
 * tile's first block (every LM head tile's scan started from nothing),
 * were 3% of the batch-32 LM head. */
void ops_best_scan_avx512(struct ops_best *b, const float *x, int64_t i0, int64_t i1)
{
	int64_t i = i0;
	for (; i < i1 && b->idx == OPS_BEST_NONE; i++)
		ops_best_scan_scalar(b, x, i, i + 1);
	for (; i + BEST_RUN <= i1; i += BEST_RUN) {
		__m512 m[4];
		UNROLL for (int c = 0; c < 4; c++)
			m[c] = _mm512_set1_ps(-INFINITY);
		_Pragma("GCC unroll 16") for (int k = 0; k < BEST_RUN / 16; k++)
			m[k % 4] = _mm512_max_ps(_mm512_loadu_ps(x + i + 16 * k), m[k % 4]);
		const __m512 mx =
			_mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3]));
		if (_mm512_cmp_ps_mask(mx, _mm512_set1_ps(b->val), _CMP_GT_OQ))
			best_blocks(b, x, i, i + BEST_RUN);
	}
	best_blocks(b, x, i, i1);
}

/* ---- RMSNorm's sums of squares ---- */

/* s (lane r = row r of the 8 at x, stride apart) += the squares of their
 * elements i .. i + 7, in element order. The squares (float, as the
 * scalar rule makes them) are transposed in two vpermt2ps levels: rows
 * paired into four registers, then [element e of rows 0-3 | ...], then
 * [element 2k of rows 0-7 | element 2k + 1 of rows 0-7]; each half then
 * widens to double and adds. The AVX2 loop's 4 x 4 transposes (unpack and
 * move shuffles, and a widening per 4 lanes) took 0.75 cycles an element
 * on port 5; these 0.375. */
static inline __attribute__((always_inline)) __m512d sumsq_step8(const float *x, int64_t stride,
								  int64_t i, __m512d s)
{
	__m512 z[4];
	UNROLL for (int j = 0; j < 4; j++) {
		const __m256 a = _mm256_loadu_ps(x + 2 * j * stride + i);
		const __m256 b = _mm256_loadu_ps(x + (2 * j + 1) * stride + i);
		z[j] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_mul_ps(a, a)),
					  _mm256_mul_ps(b, b), 1);
	}
	/* lane 4e + r: element e (first four, or last four) of row r (0-3) */
	const __m512i lo4 = _mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25,
					      2, 10, 18, 26, 3, 11, 19, 27);
	const __m512i hi4 = _mm512_setr_epi32(4, 12, 20, 28, 5, 13, 21, 29,
					      6, 14, 22, 30, 7, 15, 23, 31);
	const __m512 wa = _mm512_permutex2var_ps(z[0], lo4, z[1]);
	const __m512 wb = _mm512_permutex2var_ps(z[0], hi4, z[1]);
	const __m512 wc = _mm512_permutex2var_ps(z[2], lo4, z[3]);
	const __m512 wd = _mm512_permutex2var_ps(z[2], hi4, z[3]);
	/* lane 8h + r: element 2k + h of row r (0-7), k = 0 or 1 of the four */
	const __m512i e01 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19,
					      4, 5, 6, 7, 20, 21, 22, 23);
	const __m512i e23 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27,
					      12, 13, 14, 15, 28, 29, 30, 31);
	const __m512 o[4] = {
		_mm512_permutex2var_ps(wa, e01, wc), _mm512_permutex2var_ps(wa, e23, wc),
		_mm512_permutex2var_ps(wb, e01, wd), _mm512_permutex2var_ps(wb, e23, wd)
	};
	UNROLL for (int k = 0; k < 4; k++) {
		s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm512_castps512_ps256(o[k])));
		s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm512_extractf32x8_ps(o[k], 1)));
	}
	return s;
}

/* ss[0..7] = the lanes of s, then the elements from i0 on, in order. */
static void sumsq_finish8(const float *x, int64_t stride, int64_t i0, int64_t n, __m512d s,
			  double *ss)
{
	_mm512_storeu_pd(ss, s);
	ops_sumsq_tail(x, stride, i0, n, 8, ss);
}

void ops_sumsq_rows_avx512(const float *x, int64_t stride, int64_t n, int64_t rows, double *ss)
{
	const int64_t n8 = n / 8 * 8;
	int64_t r = 0;
	for (; r + 16 <= rows; r += 16) { /* two independent chains */
		const float *x0 = x + r * stride, *x1 = x0 + 8 * stride;
		__m512d s0 = _mm512_setzero_pd(), s1 = s0;
		for (int64_t i = 0; i < n8; i += 8) {
			s0 = sumsq_step8(x0, stride, i, s0);
			s1 = sumsq_step8(x1, stride, i, s1);
		}
		sumsq_finish8(x0, stride, n8, n, s0, ss + r);
		sumsq_finish8(x1, stride, n8, n, s1, ss + r + 8);
	}
	for (; r + 8 <= rows; r += 8) {
		const float *x0 = x + r * stride;
		__m512d s = _mm512_setzero_pd();
		for (int64_t i = 0; i < n8; i += 8)
			s = sumsq_step8(x0, stride, i, s);
		sumsq_finish8(x0, stride, n8, n, s, ss + r);
	}
	if (r < rows)
		ops_sumsq_rows_avx2(x + r * stride, stride, n, rows - r, ss + r);
}
