/* ops_simd_int.h — what ops_avx2.c and ops_avx512.c share: the loaders
 * of K/V rows (each stored kind widened exactly to floats) and the AVX2
 * dot's 8-lane reduction, whose order both files' dots reproduce. For
 * files compiled with AVX2 + FMA + F16C or more; static inline, so each
 * ISA build gets its own copy. */
#ifndef INGOT_OPS_SIMD_INT_H
#define INGOT_OPS_SIMD_INT_H

#include <immintrin.h>
#include <string.h>

#include "ops_int.h"

#define UNROLL _Pragma("GCC unroll 8")

/* The sum of 8 lanes as ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)):
 * the order every dot here ends with. */
static inline float hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

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

/* Columns [c, Dv) of P.V one at a time for Q queries: the scalar tail of
 * the blocked P.V loops (y += p * v per key in order, as ops_axpy's). */
static inline __attribute__((always_inline)) void pv_tail(float *const *out,
							   const float *const *p, int Q,
							   const void *const *V, int64_t nk,
							   int64_t c, int64_t Dv, int kind)
{
	for (; c < Dv; c++)
		for (int a = 0; a < Q; a++) {
			float y = out[a][c];
			for (int64_t j = 0; j < nk; j++)
				y += p[a][j] * row1(V[j], c, kind);
			out[a][c] = y;
		}
}

#endif
