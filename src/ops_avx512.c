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
 * back out for the AVX2 reduction (leftover chunks of 8 into s0, then
 * the scalar tail, as there). P.V is per output column an fma chain over
 * the keys in order, whatever the vector width, so 16 columns a register
 * change nothing but the instruction count. */
#include <immintrin.h>
#include <string.h>

#include "ops_int.h"
#include "ops_simd_int.h"

/* Sixteen values of a K or V row from lane i on (i a multiple of 16),
 * stored as kind, widened exactly as row8 (ops_simd_int.h) does; 16 lanes
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

/* Half h of the dot accumulators (h 0: s0 | s1, h 1: s2 | s3) for each of
 * the Q x R pairs of queries q and keys k over the whole chunks of 32,
 * stored at acc + 16 * (a * R + r); 12 zmm chains for 4 x 3 in registers,
 * the stores fenced as in ops_avx2.c's qk_lanes. */
static inline __attribute__((always_inline)) void qk_half(const float *const *q, int Q,
							   const void *const *k, int R,
							   int64_t n, int h, float *acc, int kind)
{
	__m512 s[4][3];
	UNROLL for (int a = 0; a < Q; a++)
		UNROLL for (int r = 0; r < R; r++)
			s[a][r] = _mm512_setzero_ps();
	for (int64_t i = 16 * h; i + 32 - 16 * h <= n; i += 32) {
		__m512 kv[3];
		UNROLL for (int r = 0; r < R; r++)
			kv[r] = row16(k[r], i, kind);
		UNROLL for (int a = 0; a < Q; a++) {
			const __m512 qv = _mm512_loadu_ps(q[a] + i);
			UNROLL for (int r = 0; r < R; r++)
				s[a][r] = _mm512_fmadd_ps(qv, kv[r], s[a][r]);
		}
	}
	UNROLL for (int a = 0; a < Q; a++)
		UNROLL for (int r = 0; r < R; r++)
			_mm512_storeu_ps(acc + 16 * (a * R + r), s[a][r]);
	__asm__ volatile("" : : "r"(acc) : "memory");
}

/* s[a * ld + r] = ops_dot_avx2(q[a], k[r], n) for a < Q <= 4, r < R <= 3. */
static inline __attribute__((always_inline)) void qk_block(const float *const *q, int Q,
							    const void *const *k, int R,
							    int64_t n, float *s, int64_t ld, int kind)
{
	float part[2][12 * 16];
	qk_half(q, Q, k, R, n, 0, part[0], kind);
	qk_half(q, Q, k, R, n, 1, part[1], kind);
	const int64_t whole = n - n % 32, tail = n - n % 8;
	UNROLL for (int a = 0; a < Q; a++)
		UNROLL for (int r = 0; r < R; r++) {
			const float *lo = part[0] + 16 * (a * R + r), *hi = part[1] + 16 * (a * R + r);
			__m256 s0 = _mm256_loadu_ps(lo);
			for (int64_t i = whole; i + 8 <= n; i += 8) /* chunks of 8 after the 32s */
				s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q[a] + i), row8(k[r], i, kind), s0);
			const __m256 s1 = _mm256_loadu_ps(lo + 8);
			const __m256 s2 = _mm256_loadu_ps(hi), s3 = _mm256_loadu_ps(hi + 8);
			float x = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
			for (int64_t i = tail; i < n; i++)
				x += q[a][i] * row1(k[r], i, kind);
			s[a * ld + r] = x;
		}
}

/* hsum of each of v[0..8), in one vector: lane i is hsum(v[2 i]) and
 * lane 4 + i is hsum(v[2 i + 1]), i < 4.
 * The additions are hsum's, pair for pair, for eight vectors at once:
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

/* qk_block for n a multiple of 32 (head dims 64, 128, 256, ...) and up
 * to 4 keys: half 0's chains (s0 | s1 of each pair) over every chunk,
 * kept, then half 1's (s2 | s3), Q x R zmm chains a pass; the pairs'
 * reductions then go eight at a time through hsum8_x8, in registers.
 * Reducing one pair at a time through memory (qk_block) cost as much as
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

/* Q queries against keys in threes, the last one or two as a block (in
 * fours through qk_quad32 when n is a multiple of 32, the last one to
 * three as a block of its own). */
static inline __attribute__((always_inline)) void qk_keys(const float *const *q, int Q,
							   const void *const *K, int64_t nk,
							   int64_t n, float *s, int64_t ld, int kind)
{
	int64_t j = 0;
	if (n % 32 == 0) {
		for (; j + 4 <= nk; j += 4)
			qk_quad32(q, Q, K + j, 4, n, s + j, ld, kind);
		switch (nk - j) {
		case 3: qk_quad32(q, Q, K + j, 3, n, s + j, ld, kind); break;
		case 2: qk_quad32(q, Q, K + j, 2, n, s + j, ld, kind); break;
		case 1: qk_quad32(q, Q, K + j, 1, n, s + j, ld, kind); break;
		}
		return;
	}
	for (; j + 3 <= nk; j += 3)
		qk_block(q, Q, K + j, 3, n, s + j, ld, kind);
	if (j + 2 <= nk)
		qk_block(q, Q, K + j, 2, n, s + j, ld, kind);
	else if (j < nk)
		qk_block(q, Q, K + j, 1, n, s + j, ld, kind);
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
	qk_rows(q, nq, K, nk, n, s, ld, OPS_KV_F32);
}

void ops_qk_f16_avx512(const float *const *q, int nq, const void *const *K, int64_t nk,
		       int64_t n, float *s, int64_t ld)
{
	qk_rows(q, nq, K, nk, n, s, ld, OPS_KV_F16);
}

void ops_qk_q8_avx512(const float *const *q, int nq, const void *const *K, int64_t nk,
		      int64_t n, float *s, int64_t ld)
{
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

/* Every column of P.V for Q queries: 64 columns a pass (Q x 4 chains),
 * then 16, then one ymm chain per query for 8, then ops_avx2.c's scalar
 * tail. */
static inline __attribute__((always_inline)) void pv_block(float *const *out,
							    const float *const *p, int Q,
							    const void *const *V, int64_t nk,
							    int64_t Dv, int kind)
{
	int64_t c = 0;
	for (; c + 64 <= Dv; c += 64)
		pv_cols(out, p, Q, V, nk, c, 4, kind);
	for (; c + 16 <= Dv; c += 16)
		pv_cols(out, p, Q, V, nk, c, 1, kind);
	if (c + 8 <= Dv) {
		UNROLL for (int a = 0; a < Q; a++) {
			__m256 y = _mm256_loadu_ps(out[a] + c);
			for (int64_t j = 0; j < nk; j++)
				y = _mm256_fmadd_ps(_mm256_broadcast_ss(p[a] + j), row8(V[j], c, kind), y);
			_mm256_storeu_ps(out[a] + c, y);
		}
		c += 8;
	}
	pv_tail(out, p, Q, V, nk, c, Dv, kind);
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
	pv_rows(out, p, nq, V, nk, Dv, OPS_KV_F32);
}

void ops_pv_f16_avx512(float *const *out, const float *const *p, int nq, const void *const *V,
		       int64_t nk, int64_t Dv)
{
	pv_rows(out, p, nq, V, nk, Dv, OPS_KV_F16);
}

void ops_pv_q8_avx512(float *const *out, const float *const *p, int nq, const void *const *V,
		      int64_t nk, int64_t Dv)
{
	pv_rows(out, p, nq, V, nk, Dv, OPS_KV_Q8_0);
}
