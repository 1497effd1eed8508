/* quant_avx2_int.h — inline helpers shared by the AVX2 kernel files
 * (quant_avx2.c, quant_gemm_avx2.c); include only from files compiled
 * with -mavx2 -mfma -mf16c. */
#ifndef INGOT_QUANT_AVX2_INT_H
#define INGOT_QUANT_AVX2_INT_H

#include <immintrin.h>
#include <string.h>

#include "quant_int.h"

static inline float half_load(uint16_t h)
{
	return _cvtsh_ss(h);
}

static inline int hsum_epi32(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
	return _mm_cvtsi128_si32(s);
}

static inline __m256i load256(const void *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

static inline __m128i load128(const void *p)
{
	return _mm_loadu_si128((const __m128i *)p);
}

/* 16 packed bytes of nibbles -> 32 bytes: element e < 16 is the low nibble
 * of byte e, element e >= 16 the high nibble of byte e - 16. */
static inline __m256i nibbles_expand(const uint8_t *qs)
{
	__m256i t = _mm256_broadcastsi128_si256(load128(qs));
	__m256i v = _mm256_blend_epi32(t, _mm256_srli_epi16(t, 4), 0xf0);
	return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* Bit e of the 32-bit word at qh -> byte e is 0xff when set, else 0. */
static inline __m256i bits_expand(const uint8_t *qh)
{
	uint32_t x;
	memcpy(&x, qh, sizeof x);
	__m256i v = _mm256_set1_epi32((int)x);
	const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
						 0x0101010101010101, 0x0000000000000000);
	v = _mm256_shuffle_epi8(v, spread); /* byte e = byte e/8 of x */
	/* byte e: all bits but bit e%8 set, so the OR is all ones iff that bit is */
	v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
	return _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1));
}

/* ---- legacy 32-element blocks ---- */

/* Signed quants of one Q4_0 block: nibble - 8. */
static inline __m256i q4_0_quants(const struct block_q4_0 *b)
{
	return _mm256_sub_epi8(nibbles_expand(b->qs), _mm256_set1_epi8(8));
}

/* Signed quants of one Q5_0 block: (nibble | bit << 4) - 16, i.e. the
 * nibble where the bit is set and nibble - 16 (= nibble | 0xf0) where not. */
static inline __m256i q5_0_quants(const struct block_q5_0 *b)
{
	__m256i hi = _mm256_andnot_si256(bits_expand(b->qh), _mm256_set1_epi8((char)0xf0));
	return _mm256_or_si256(nibbles_expand(b->qs), hi);
}

/* Block i of a Q4_0 / Q5_0 / Q8_0 row (all start with their fp16 d). */
ALWAYS_INLINE const void *legacy_block(enum qtype t, const void *w, int64_t i)
{
	switch (t) {
	case QTYPE_Q4_0: return (const struct block_q4_0 *)w + i;
	case QTYPE_Q5_0: return (const struct block_q5_0 *)w + i;
	default: return (const struct block_q8_0 *)w + i;
	}
}

/* Its 32 quants as signed bytes. */
ALWAYS_INLINE __m256i legacy_quants(enum qtype t, const void *w, int64_t i)
{
	switch (t) {
	case QTYPE_Q4_0: return q4_0_quants((const struct block_q4_0 *)w + i);
	case QTYPE_Q5_0: return q5_0_quants((const struct block_q5_0 *)w + i);
	default: return load256(((const struct block_q8_0 *)w)[i].qs);
	}
}

#endif
