/* quant_r16_avx512.h — the AVX-512 pieces of the repacked kernels that
 * both their VNNI build (quant_gemm_r16_avx512.c) and their AMX build
 * (quant_gemm_r16_amx.c) use: a Q8_0 / Q5_0 tile block as 8 quad vectors
 * of unsigned quants with its 16 rows' scales, a token's broadcast quad,
 * the contract's float step, a packed group's offset corrections, a K-type
 * super-block's quad vectors, scales and closing float step, and the rows
 * of a tile a call keeps. Include after quant_r16_drive.h (R16_QUADS), from a file
 * compiled for AVX512-BW. */
#ifndef INGOT_QUANT_R16_AVX512_H
#define INGOT_QUANT_R16_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "quant.h"
#include "quant_int.h"

/* Block b's 16 rows' scales (the fp16 ones of its pair's line). */
ALWAYS_INLINE __m512 r16_scales(enum qtype t, const uint8_t *tile, int64_t b)
{
	const uint8_t *pair = tile + (size_t)(b / 2) * quant_r16_pair_bytes(t);
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pair + (size_t)(b % 2) * 32)));
}

/* Where block b's quants start in a tile. */
ALWAYS_INLINE const uint8_t *r16_quants(enum qtype t, const uint8_t *tile, int64_t b)
{
	return tile + (size_t)(b / 2) * quant_r16_pair_bytes(t) + QUANT_R16_SCALES_LINE +
	       (size_t)(b % 2) * quant_r16_block_quant_bytes(t);
}

/* Quad vectors v and v + 4 (v < 4) of block b of a tile, unsigned
 * quants: Q8_0 loaded; Q5_0 the low and high nibbles of nibble vector v,
 * then 16 added where bit v (or v + 4) of the mask bytes (one vptestmb
 * per quad vector) says the fifth bit is set. A pass of two tiles
 * (r16_groups_two_tiles) holds two of each at a time. */
ALWAYS_INLINE void r16_block_quad_pair(enum qtype t, const uint8_t *tile, int64_t b, int v,
				       __m512i *lo, __m512i *hi)
{
	const uint8_t *p = r16_quants(t, tile, b);
	if (t == QTYPE_Q8_0) {
		*lo = _mm512_loadu_si512(p + 64 * v);
		*hi = _mm512_loadu_si512(p + 64 * (v + 4));
		return;
	}
	const __m512i low4 = _mm512_set1_epi8(0x0f), bit4 = _mm512_set1_epi8(0x10);
	const __m512i nib = _mm512_loadu_si512(p + 64 * v), planes = _mm512_loadu_si512(p + 256);
	const __mmask64 fifth_lo = _mm512_test_epi8_mask(planes, _mm512_set1_epi8((char)(1 << v)));
	const __mmask64 fifth_hi = _mm512_test_epi8_mask(planes, _mm512_set1_epi8((char)(1 << (v + 4))));
	*lo = _mm512_and_si512(nib, low4);
	*hi = _mm512_and_si512(_mm512_srli_epi16(nib, 4), low4);
	*lo = _mm512_mask_add_epi8(*lo, fifth_lo, *lo, bit4); /* nibble + 16 = nibble | 16 */
	*hi = _mm512_mask_add_epi8(*hi, fifth_hi, *hi, bit4);
}

/* Block b of a tile: its 8 quad vectors of unsigned quants
 * (r16_block_quad_pair) and the 16 rows' scales. Q5_0: 28 vector
 * operations per block of 16 rows, shared by every token of the pass. */
ALWAYS_INLINE void r16_block(enum qtype t, const uint8_t *tile, int64_t b, __m512i q[R16_QUADS],
			     __m512 *dw)
{
	*dw = r16_scales(t, tile, b);
	_Pragma("GCC unroll 4") for (int v = 0; v < R16_QUADS / 2; v++)
		r16_block_quad_pair(t, tile, b, v, &q[v], &q[v + R16_QUADS / 2]);
}

ALWAYS_INLINE __m512i r16_bcast(const uint8_t *base, const struct r16_toks *tk, int i, int k)
{
	int32_t v;
	memcpy(&v, base + (size_t)k * tk->step + 4 * (size_t)(i % QUANT_GEMM_GROUP), sizeof v);
	return _mm512_set1_epi32(v);
}

/* The float step of the contract for token i: acc = fma(dw * da, S, acc). */
ALWAYS_INLINE __m512 r16_step(__m512 dw, const struct r16_toks *tk, int i, __m512i S, __m512 acc)
{
	const __m512 da = _mm512_set1_ps(tk->d[i / 8][i % QUANT_GEMM_GROUP]);
	return _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(S), acc);
}

/* sum_j w[j] * token i's bsum pair j, by vpdpwssd (Q4_K: M; Q6_K: the
 * offset sum sum_s sc_s * bsum_s). */
ALWAYS_INLINE __m512i r16k_pairs(const __m512i w[8], const struct r16_toks *tk, int i)
{
	__m512i m = _mm512_setzero_si512();
	_Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)
		m = _mm512_dpwssd_epi32(m, w[j], r16_bcast(tk->p[i / 8], tk, i, j));
	return m;
}

/* The offset corrections of a packed group block's 8 tokens (Q8_0, Q5_0):
 * corr[l] = -o * the sum of token l's quants, o = 1 << r16_offset_log2(t)
 * (exact: the unsigned offset taken back out). */
ALWAYS_INLINE void r16_group_corr(enum qtype t, const struct quant_gemm_block *blk,
				  int32_t corr[QUANT_GEMM_GROUP])
{
	const __m256i sums = _mm256_loadu_si256((const __m256i *)blk->sums);
	_mm256_storeu_si256((__m256i *)corr,
			    _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sums, r16_offset_log2(t))));
}

/* ---- Q4_K and Q6_K super-blocks (layout in quant_int.h) ---- */

/* Quad vector k (quad 8s + k) of Q4_K sub-block s of the super-block at
 * sb: the low (s even) or high nibbles of chunk s / 2. */
ALWAYS_INLINE __m512i r16k_q4k_quad(const uint8_t *sb, int s, int k)
{
	const uint8_t *v = sb + QUANT_R16K_Q4_K_QUANTS + 512 * (size_t)(s / 2) + 64 * (size_t)k;
	const __m512i nib = _mm512_loadu_si512(v);
	return _mm512_and_si512(s % 2 ? _mm512_srli_epi16(nib, 4) : nib, _mm512_set1_epi8(0x0f));
}

/* Sub-block s's 8 quad vectors (quads 8s .. 8s + 7). */
ALWAYS_INLINE void r16k_q4k_quads(const uint8_t *sb, int s, __m512i q[8])
{
	_Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
		q[k] = r16k_q4k_quad(sb, s, k);
}

/* The 16 rows' scales of Q4_K sub-block s, as int32. */
ALWAYS_INLINE __m512i r16k_q4k_scale(const uint8_t *sb, int s)
{
	return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sb + QUANT_R16K_Q4_K_SCALES + 16 * s)));
}

/* Q6_K quad 8r + k (k < 8) of the super-block at sb, u = q + 32 put
 * together from its nibble and its 2-bit part (quad vector K: nibble
 * vector K % 32, low or high; 2-bit vector K % 16, bits 2 (K / 16)). */
ALWAYS_INLINE __m512i r16k_q6k_quad(const uint8_t *sb, int r, int k)
{
	const __m512i low4 = _mm512_set1_epi8(0x0f), top2 = _mm512_set1_epi8(0x30);
	const __m128i nib_shift = _mm_cvtsi32_si128(r < 4 ? 0 : 4);
	const __m128i bits_shift = _mm_cvtsi32_si128(2 * (r / 2));
	const uint8_t *nv = sb + QUANT_R16K_Q6_K_NIBBLES + 64 * (size_t)(8 * (r % 4));
	const uint8_t *bv = sb + QUANT_R16K_Q6_K_BITS + 64 * (size_t)(8 * (r % 2));
	const __m512i lo = _mm512_srl_epi16(_mm512_loadu_si512(nv + 64 * k), nib_shift);
	const __m512i bits = _mm512_srl_epi16(_mm512_loadu_si512(bv + 64 * k), bits_shift);
	const __m512i hi = _mm512_and_si512(_mm512_slli_epi16(bits, 4), top2);
	return _mm512_ternarylogic_epi32(lo, hi, low4, 0xec); /* (lo & low4) | hi */
}

/* Quads 8r .. 8r + 7. */
ALWAYS_INLINE void r16k_q6k_quads(const uint8_t *sb, int r, __m512i q[8])
{
	_Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
		q[k] = r16k_q6k_quad(sb, r, k);
}

/* r16k_q6k_quads for r a constant (the caller unrolls over it): the
 * nibble takes a shift only when high, the 2-bit part one shift to bits
 * 4-5 and none from there, 1.25 shifts a quad where a count known at
 * run time takes 3 (the shifts share a port with vpdpbusd). Loops that
 * keep r a variable (passes of groups, whose unrolling would not fit the
 * registers: unrolled, 8 tokens ran 35% slower) take r16k_q6k_quads.
 * Measured on the Sapphire Rapids-class host, `quant_bench --gemm
 * 1,8,16` (one thread, cache-resident, G multiply-adds/s, four runs):
 * Q6_K T = 1 35-39 -> 49-55; T = 8 and 16 unchanged. */
ALWAYS_INLINE void r16k_q6k_quads_const(const uint8_t *sb, int r, __m512i q[8])
{
	const __m512i low4 = _mm512_set1_epi8(0x0f), top2 = _mm512_set1_epi8(0x30);
	const int p = 2 * (r / 2); /* the 2-bit parts' place in their bytes */
	const uint8_t *nv = sb + QUANT_R16K_Q6_K_NIBBLES + 64 * (size_t)(8 * (r % 4));
	const uint8_t *bv = sb + QUANT_R16K_Q6_K_BITS + 64 * (size_t)(8 * (r % 2));
	_Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
		__m512i lo = _mm512_loadu_si512(nv + 64 * k), hi = _mm512_loadu_si512(bv + 64 * k);
		if (r >= 4)
			lo = _mm512_srli_epi16(lo, 4);
		if (p < 4)
			hi = _mm512_slli_epi16(hi, 4 - p);
		else if (p > 4)
			hi = _mm512_srli_epi16(hi, p - 4);
		q[k] = _mm512_ternarylogic_epi32(lo, _mm512_and_si512(hi, top2), low4, 0xec);
	}
}

/* The 16 rows' scales of Q6_K sub-blocks 2p (*lo) and 2p + 1 (*hi), as
 * int32 (pair p of row j at 32p + 2j). */
ALWAYS_INLINE void r16k_q6k_scales(const uint8_t *sb, int p, __m512i *lo, __m512i *hi)
{
	const __m512i pr = _mm512_cvtepi8_epi16(
		_mm256_loadu_si256((const __m256i *)(sb + QUANT_R16K_Q6_K_SCALES + 32 * p)));
	*lo = _mm512_srai_epi32(_mm512_slli_epi32(pr, 16), 16);
	*hi = _mm512_srai_epi32(pr, 16);
}

/* The 16 rows' scales of K-type run s of the super-block at sb, as int32:
 * Q4_K sub-block s (32 elements), Q6_K sub-block s (16: half s % 2 of
 * scale pair s / 2). */
ALWAYS_INLINE __m512i r16k_run_scale(enum qtype t, const uint8_t *sb, int s)
{
	if (t == QTYPE_Q4_K)
		return r16k_q4k_scale(sb, s);
	__m512i lo, hi;
	r16k_q6k_scales(sb, s / 2, &lo, &hi);
	return s % 2 ? hi : lo;
}

/* The end of a super-block at sb for nt tokens (tk) with sums S: the
 * contract's float step on 16 rows at once (Q4_K: S against d into acc,
 * M from the mins against the bsum pairs, against dmin, into accm; Q6_K:
 * S less 32 * the scales against the bsums, into acc). */
ALWAYS_INLINE void r16k_finish(enum qtype t, const uint8_t *sb, const struct r16_toks *tk, int nt,
			       const __m512i *S, __m512 *acc, __m512 *accm)
{
	__m512i pw[8]; /* Q4_K: (m, m); Q6_K: the scale pairs */
	_Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
		if (t == QTYPE_Q4_K) {
			const __m512i m = _mm512_cvtepu8_epi32(
				_mm_loadu_si128((const __m128i *)(sb + QUANT_R16K_Q4_K_MINS + 16 * j)));
			pw[j] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
		} else {
			pw[j] = _mm512_cvtepi8_epi16(
				_mm256_loadu_si256((const __m256i *)(sb + QUANT_R16K_Q6_K_SCALES + 32 * j)));
		}
	}
	const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sb));
	if (t == QTYPE_Q4_K) {
		const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sb + 32)));
		_Pragma("GCC unroll 16") for (int i = 0; i < nt; i++) {
			acc[i] = r16_step(dw, tk, i, S[i], acc[i]);
			accm[i] = r16_step(dmin, tk, i, r16k_pairs(pw, tk, i), accm[i]);
		}
		return;
	}
	_Pragma("GCC unroll 16") for (int i = 0; i < nt; i++) {
		const __m512i s = _mm512_sub_epi32(S[i], _mm512_slli_epi32(r16k_pairs(pw, tk, i), 5));
		acc[i] = r16_step(dw, tk, i, s, acc[i]);
	}
}

/* The rows of tile ti inside [r0, r1), as a store mask. */
static inline __mmask16 r16_rows_mask(int64_t ti, int64_t r0, int64_t r1)
{
	const int64_t row0 = ti * QUANT_R16_ROWS;
	const int j0 = r0 > row0 ? (int)(r0 - row0) : 0;
	const int j1 = r1 < row0 + QUANT_R16_ROWS ? (int)(r1 - row0) : QUANT_R16_ROWS;
	return (__mmask16)(((1u << j1) - 1) & ~((1u << j0) - 1));
}

#endif
