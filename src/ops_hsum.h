/* ops_hsum.h — the horizontal sum that ends every attention dot (Q.K), for
 * the files compiled with AVX (ops_avx2.c, ops_avx512.c): the dot's one
 * 8-lane accumulator reduced in one fixed order, so every width and block
 * shape that keeps that accumulator gives the same float. */
#ifndef INGOT_OPS_HSUM_H
#define INGOT_OPS_HSUM_H

#include <immintrin.h>

/* Lanes l and l + 4 first, then lanes 0 + 2 and 1 + 3 of that, then the
 * two sums. */
static inline float ops_hsum8(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* ops_hsum8 of each of v[0..8), in one vector: lane i is ops_hsum8(v[2 i])
 * and lane 4 + i is ops_hsum8(v[2 i + 1]), i < 4. The additions are
 * ops_hsum8's, pair for pair, for eight vectors at once (the shuffles
 * only move values); 21 instructions where eight ops_hsum8 take 48. */
static inline __attribute__((always_inline)) __m256 ops_hsum8_x8(const __m256 v[8])
{
	__m256 a[4], b[2];
	for (int i = 0; i < 4; i++) /* [a(v[2i]) | a(v[2i+1])], a_l = v_l + v_l+4 */
		a[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
				     _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
	for (int i = 0; i < 2; i++) /* per half: b0, b1 of one vector, then of the next */
		b[i] = _mm256_add_ps(_mm256_shuffle_ps(a[2 * i], a[2 * i + 1], 0x44),
				     _mm256_shuffle_ps(a[2 * i], a[2 * i + 1], 0xee));
	return _mm256_add_ps(_mm256_shuffle_ps(b[0], b[1], 0x88),
			     _mm256_shuffle_ps(b[0], b[1], 0xdd));
}

/* out[p] = ops_hsum8(v[p]) for p < n (n a constant after inlining, at
 * most 32), eight at a time through ops_hsum8_x8 (the last eight padded
 * with zeros): the end of every blocked Q.K. */
static inline __attribute__((always_inline)) void ops_hsum8_n(const __m256 *v, int n, float *out)
{
	_Pragma("GCC unroll 4") for (int p0 = 0; p0 < n; p0 += 8) {
		__m256 w[8];
		_Pragma("GCC unroll 8") for (int p = 0; p < 8; p++)
			w[p] = p0 + p < n ? v[p0 + p] : _mm256_setzero_ps();
		float x[8];
		_mm256_storeu_ps(x, ops_hsum8_x8(w));
		_Pragma("GCC unroll 8") for (int p = 0; p < 8; p++) {
			if (p0 + p >= n)
				break;
			out[p0 + p] = x[p / 2 + 4 * (p % 2)]; /* ops_hsum8(w[p])'s lane */
		}
	}
}

#endif
