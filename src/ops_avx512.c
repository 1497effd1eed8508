/* ops_avx512.c — AVX-512 versions of the blocked attention loops
 * (ops_qk_avx2 / ops_pv_avx2, see ops_avx2.c and ops_int.h), bit for bit
 * the AVX2 ones. Compiled with AVX-512 F/BW/VL/DQ and F16C; called only
 * when cpuid says the CPU has them (quant's AVX512 level).
 *
 * Why a second width: at 16 streams the server spends a fifth of its time
 * in these two loops (contexts of a few hundred tokens, an F16 KV cache),
 * and a zmm register holds twice the lanes of a ymm one for the same
 * instruction count, so the FMA and F16 conversion counts halve.
 *
 * Why the same bits: the AVX2 dot keeps four 8-lane accumulators s0..s3
 * over lanes 0-7, 8-15, 16-23, 24-31 of each chunk of 32 and reduces
 * them as hsum((s0 + s1) + (s2 + s3)). Here one zmm accumulator holds
 * s0 | s1 (lanes 0-15 of each chunk) and a second s2 | s3 (lanes 16-31):
 * the same FMAs per lane in the same order, and the halves are split
 * back out for the AVX2 reduction. P.V is per output column an fma chain
 * over the keys in order, whatever the vector width, so 16 columns a
 * register change nothing but the instruction count.
 *
 * Only whole chunks are done here: head dims that are multiples of 32
 * (Q.K) and 16 (P.V), as every model's are (64, 128, 256). Other dims go
 * to the AVX2 loops themselves, whose leftover chunks and scalar tails a
 * copy here would only repeat. */
#include <immintrin.h>
#include <string.h>

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

/* ops_avx2.c's hsum of each of v[0..8), in one vector: lane i is
 * hsum(v[2 i]) and lane 4 + i is hsum(v[2 i + 1]), i < 4. The additions
 * are hsum's, pair for pair, for eight vectors at once:
 * lanes l and l + 4 first, then lanes 0 + 2 and 1 + 3 of that, then the
 * two sums (the shuffles only move values). */
static inline __attribute__((always_inline)) __m256 hsum8_x8(const __m256 v[8])
{
	__m256 a[4], b[2];
	UNROLL for (int i = 0; i < 4; i++) /* [a(v[2i]) | a(v[2i+1])], a_l = v_l + v_l+4 */
		a[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
				     _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
	UNROLL for (int i = 0; i < 2; i++) /* per half: b0, b1 of one vector, then of the next */
		b[i] = _mm256_add_ps(_mm256_shuffle_ps(a[2 * i], a[2 * i + 1], 0x44),
				     _mm256_shuffle_ps(a[2 * i], a[2 * i + 1], 0xee));
	return _mm256_add_ps(_mm256_shuffle_ps(b[0], b[1], 0x88), _mm256_shuffle_ps(b[0], b[1], 0xdd));
}

/* s[a * ld + r] = ops_dot_avx2(q[a], k[r], n) for a < Q <= 4, r < R <= 4,
 * n a multiple of 32: half 0's chains (s0 | s1 of each pair) over every
 * chunk, kept, then half 1's (s2 | s3), Q x R zmm chains a pass; the
 * pairs' reductions then go eight at a time through hsum8_x8, in
 * registers. Reducing one pair at a time through memory cost as much as
 * the FMAs at n = 256, and one pass with both halves' chains (Q x R x 2)
 * fits only 2 keys, whose chains then wait on the FMA latency. */
static inline __attribute__((always_inline)) void qk_quad32(const float *const *q, int Q,
							     const void *const *k, int R,
							     int64_t n, float *s, int64_t ld,
							     int kind)
{
	__m512 half0[4][4], c[4][4];
	for (int h = 0; h < 2; h++) {
		UNROLL for (int a = 0; a < Q; a++)
			UNROLL for (int r = 0; r < R; r++)
				c[a][r] = _mm512_setzero_ps();
		for (int64_t i = 16 * h; i < n; i += 32) {
			__m512 kv[4];
			UNROLL for (int r = 0; r < R; r++)
				kv[r] = row16(k[r], i, kind);
			UNROLL for (int a = 0; a < Q; a++) {
				const __m512 qv = _mm512_loadu_ps(q[a] + i);
				UNROLL for (int r = 0; r < R; r++)
					c[a][r] = _mm512_fmadd_ps(qv, kv[r], c[a][r]);
			}
		}
		if (h == 0) {
			UNROLL for (int a = 0; a < Q; a++)
				UNROLL for (int r = 0; r < R; r++)
					half0[a][r] = c[a][r];
			__asm__ volatile("" : : "r"(half0) : "memory"); /* spill these, not c */
		}
	}
	/* pair (a, r) in slot 4 a + r; slots 8 g .. 8 g + 7 reduced together */
	UNROLL for (int g = 0; g < (Q + 1) / 2; g++) {
		__m256 v[8];
		UNROLL for (int p = 0; p < 8; p++) {
			const int a = 2 * g + p / 4, r = p % 4;
			if (a >= Q || r >= R) {
				v[p] = _mm256_setzero_ps();
				continue;
			}
			/* [s0 | s2] + [s1 | s3], then its halves: (s0 + s1) + (s2 + s3) */
			const __m512 L = half0[a][r], H = c[a][r];
			const __m512 t = _mm512_add_ps(_mm512_shuffle_f32x4(L, H, 0x44),
						       _mm512_shuffle_f32x4(L, H, 0xee));
			v[p] = _mm256_add_ps(_mm512_castps512_ps256(t), _mm512_extractf32x8_ps(t, 1));
		}
		float x[8];
		_mm256_storeu_ps(x, hsum8_x8(v));
		UNROLL for (int p = 0; p < 8; p++) {
			const int a = 2 * g + p / 4, r = p % 4;
			if (a < Q && r < R)
				s[a * ld + r] = x[p / 2 + 4 * (p % 2)]; /* hsum(v[p])'s lane */
		}
	}
}

/* Q queries against keys in fours, the last one to three as a block. */
static inline __attribute__((always_inline)) void qk_keys(const float *const *q, int Q,
							   const void *const *K, int64_t nk,
							   int64_t n, float *s, int64_t ld, int kind)
{
	int64_t j = 0;
	for (; j + 4 <= nk; j += 4)
		qk_quad32(q, Q, K + j, 4, n, s + j, ld, kind);
	switch (nk - j) {
	case 3: qk_quad32(q, Q, K + j, 3, n, s + j, ld, kind); break;
	case 2: qk_quad32(q, Q, K + j, 2, n, s + j, ld, kind); break;
	case 1: qk_quad32(q, Q, K + j, 1, n, s + j, ld, kind); break;
	}
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

void ops_qk_avx512(const float *const *q, int nq, const void *const *K, int64_t nk, int64_t n,
		   float *s, int64_t ld)
{
	if (n % 32) /* see the top of the file */
		ops_qk_avx2(q, nq, K, nk, n, s, ld);
	else
		qk_rows(q, nq, K, nk, n, s, ld, OPS_KV_F32);
}

void ops_qk_f16_avx512(const float *const *q, int nq, const void *const *K, int64_t nk,
		       int64_t n, float *s, int64_t ld)
{
	if (n % 32) /* see the top of the file */
		ops_qk_f16_avx2(q, nq, K, nk, n, s, ld);
	else
		qk_rows(q, nq, K, nk, n, s, ld, OPS_KV_F16);
}

void ops_qk_q8_avx512(const float *const *q, int nq, const void *const *K, int64_t nk,
		      int64_t n, float *s, int64_t ld)
{
	if (n % 32) /* see the top of the file */
		ops_qk_q8_avx2(q, nq, K, nk, n, s, ld);
	else
		qk_rows(q, nq, K, nk, n, s, ld, OPS_KV_Q8_0);
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
