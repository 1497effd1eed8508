/* quant_gemm_r16_avx2.c — the matrix kernels over Q5_0, Q4_K and Q6_K
 * weights repacked 16 rows to a tile (layouts in quant.h and quant_int.h,
 * packing in quant_r16.c and quant_r16k.c) for CPUs with AVX2 and no
 * AVX-512: the default model's Q5_0 projections (q, k, half the v, gate
 * and up: 44 of its 67 MB of layer weights), its Q4_K ones (attn_output,
 * half the down: 13 MB) and its Q6_K ones (the other half of the down:
 * 10 MB). Q8_0 stays row-major here (u = q + 128 against an activation
 * overflows vpmaddubsw's int16 pairs). The passes over tiles and groups
 * are quant_r16_drive.h's, shared with the AVX-512 kernels; this file is
 * the work on one tile.
 *
 * Why: on the Zen 3 host the row-major batch-1 kernel (rows8 in
 * quant_gemm_avx2.c) does ~17 G multiply-adds/s a core cache-resident,
 * ~12 GB/s of Q5_0, so two cores cannot stream the layers at the memory's
 * rate (they read ~14 GB/s in a decode step against the LM head's ~24).
 * Per 32 weights of a row it spends ~13 vector operations, a third of them
 * on the unpack tree that sums each row's 8 lanes and the vpmaddwd after
 * every vpmaddubsw. With 16 rows in the lanes (a 256-bit half holds 8 rows
 * x 4 quants) nothing is summed across lanes, four vpmaddubsw add up in
 * int16 before one vpmaddwd, and the offset correction and the float step
 * serve 8 rows per instruction.
 *
 * A block of a tile: quad vector k (16 rows x 4 unsigned quants u = q +
 * 16) in two halves, rows 0-7 and 8-15; half h of quad vector k is the low
 * (k < 4) or high (k >= 4) nibbles of nibble vector k % 4's half, plus 16
 * where bit k of the same byte of the mask bytes' half is set (q5_half).
 * Against a token's quad k broadcast, vpmaddubsw gives two int16 sums per
 * row; |u| <= 31 and |a| <= 128 bound four of them (quads 0-3, then 4-7)
 * by 4 * 2 * 31 * 128 = 31744 < 2^15, so they add in int16 exactly. The
 * integer sum starts at -16 * sum a (the offset's correction), then the
 * contract's float step acc = fma(dw * da, (float)isum, acc) on 8 rows at
 * once: bit for bit the AVX2 table's Q5_0 dot on the original rows.
 *
 * Batches (packed groups of 8 tokens, up to R16_AVX2_PASS_GROUPS per
 * pass): each block is unpacked once into L1 for every group of the pass,
 * then taken 4 rows at a time with the 8 tokens of a group in the lanes,
 * as the row-major kernel's tok does (a broadcast weight quad against two
 * groups' quads): there the tile layout only saves unpacking. One plain
 * row (decode): the block is unpacked and multiplied nibble vector by
 * nibble vector in registers, with the rows in the lanes.
 *
 * Measured on the Zen 3 host (`quant_bench --quick`, one thread,
 * cache-resident, Q5_0 640 x 2048, two runs, G multiply-adds/s, row-major
 * -> this): T = 1 17.9 -> 26.1-26.3, T = 2 24.3 -> 27.4-27.5, T = 8 56.1 ->
 * 66.1-66.3, T = 32 85.9-86.5 -> 91.4, T = 128 89.6-93.1 -> 93.3-95.8. In
 * a batch-1 decode step (`ingot bench --batch 1 --runner graph --prompt
 * 16 --runs 3 --profile`, two alternating rounds): gate_up 2.37-2.88 ->
 * 1.77-1.79 ms, qkv 0.94-1.09 -> 0.71-0.72 ms.
 *
 * Two plain rows (a batch of 2 or 3, a verify step of 2 or 3 rows) share
 * each Q5_0 tile's unpacking (q5_plain): `quant_bench --quick`, Q5_0 640
 * x 2048, T = 2, 36.4 -> 51.5 G multiply-adds/s; `ingot bench --batch
 * 2,3 --runner graph --prompt 16 --runs 3 --profile`, two alternating
 * rounds: gate_up 2.17-2.18 -> 1.73-1.87 ms at batch 2, 3.13-3.27 ->
 * 2.79-2.80 at batch 3.
 *
 * Q4_K, the same shapes (its own section below): quant_bench --quick, one
 * thread, cache-resident, 2048 x 640, G multiply-adds/s, row-major ->
 * this: T = 1 22.8 -> 52.9, T = 2 33.9 -> 57.0, T = 8 72.3 -> 83.5, T = 32
 * 95.7 -> 97.4, T = 128 98.8 -> 98.3.
 *
 * Q6_K, the same way (its section below), for the row-major kernels'
 * ~17 GB/s a core at batch 1, which is what the down products streamed
 * in a decode step: `quant_bench --gemm` on the Zen 3 host, one thread,
 * cache-resident, 2048 x 624, three runs, G multiply-adds/s, row-major ->
 * this: T = 1 21.0 -> 25.5-25.8, T = 2 34.7 -> 40.7-41.4, T = 8 65.1 ->
 * 63.1-64.1, T = 32 78.8 -> 74.2-75.3, T = 128 79.5 -> 79.3-79.7 (its
 * batches pay for unpacking 16 rows' u once per pass where the row-major
 * kernel unpacks 4 from a denser layout). `ingot bench --batch 1 --runner
 * graph --profile`, processes alternating, two rounds of three: the down
 * op 0.91-1.09 -> 0.83-1.02 ms a step. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"
#include "quant_avx2_int.h"
#include "quant_r16_drive.h"

#define R16_HALF_ROWS 8 /* rows in a 256-bit half of a quad vector */

/* The unsigned quants of one half of Q5_0 quad vector k (a constant at
 * each call): the nibbles in the low 4 bits of each byte of nib (the rest
 * masked off), plus bit k of the half's mask bytes moved to bit 4 by a
 * 16-bit shift (by at most 4 either way, so no bit crosses into bit 4 of
 * the other byte). Four operations where spreading a 32-bit mask word
 * into bytes (bits_expand) took six. */
ALWAYS_INLINE __m256i q5_half(__m256i nib, __m256i masks, int k)
{
	const __m256i at4 = k < 4 ? _mm256_slli_epi16(masks, 4 - k)
				  : k == 4 ? masks : _mm256_srli_epi16(masks, k - 4);
	return _mm256_or_si256(_mm256_and_si256(nib, _mm256_set1_epi8(0x0f)),
			       _mm256_and_si256(at4, _mm256_set1_epi8(0x10)));
}

/* Where block b's quants (the 4 nibble vectors, then the 8 masks) and its
 * 16 fp16 scales lie in a Q5_0 tile (quant.h). */
static inline const uint8_t *q5_block_quants(const uint8_t *tile, int64_t b)
{
	const uint8_t *pair = tile + (size_t)(b / 2) * quant_r16_pair_bytes(QTYPE_Q5_0);
	return pair + QUANT_R16_SCALES_LINE + (size_t)(b % 2) * quant_r16_block_quant_bytes(QTYPE_Q5_0);
}

static inline void q5_block_scales(const uint8_t *tile, int64_t b, __m256 dw[2])
{
	const uint8_t *d16 = tile + (size_t)(b / 2) * quant_r16_pair_bytes(QTYPE_Q5_0) + (size_t)(b % 2) * 32;
	dw[0] = _mm256_cvtph_ps(load128(d16));
	dw[1] = _mm256_cvtph_ps(load128(d16 + 16));
}

/* Token quad k broadcast to every lane (its activation quants 4k .. 4k+3). */
static inline __m256i quad_bcast(const uint8_t *x, size_t step, int k)
{
	int32_t v;
	memcpy(&v, x + (size_t)k * step, sizeof v);
	return _mm256_set1_epi32(v);
}

/* int32 lanes: lo's and hi's int16 pairs summed, plus corr. */
static inline __m256i halves_sum(__m256i lo, __m256i hi, __m256i corr)
{
	const __m256i ones = _mm256_set1_epi16(1);
	return _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones)),
				corr);
}

/* The contract's float step for 8 rows: acc = fma(dw * da, (float)s, acc). */
static inline __m256 r16_float_step(__m256 dw, float da, __m256i s, __m256 acc)
{
	return _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(da)), _mm256_cvtepi32_ps(s), acc);
}

/* ---- packed groups ---- */

/* Block b's quad vectors unpacked into wq (quad k of row j at wq[k][j]),
 * its 16 scales as floats into dw (p: the block's quants). */
ALWAYS_INLINE void q5_block_unpack(const uint8_t *tile, int64_t b,
				   int32_t wq[R16_QUADS][QUANT_R16_ROWS], float dw[QUANT_R16_ROWS])
{
	const uint8_t *p = q5_block_quants(tile, b);
	_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
		const __m256i masks = load256(p + 256 + 32 * h);
		_Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
			const __m256i nib = load256(p + 64 * v + 32 * h);
			_mm256_store_si256((__m256i *)&wq[v][R16_HALF_ROWS * h], q5_half(nib, masks, v));
			_mm256_store_si256((__m256i *)&wq[v + 4][R16_HALF_ROWS * h],
					   q5_half(_mm256_srli_epi16(nib, 4), masks, v + 4));
		}
	}
	__m256 d[2];
	q5_block_scales(tile, b, d);
	_mm256_store_ps(dw, d[0]);
	_mm256_store_ps(dw + R16_HALF_ROWS, d[1]);
}

/* The exact int32 sums of rows j0 .. j0+3 of an unpacked block (wq)
 * against nt (1 or 2, a constant at each instance) group blocks ba, bb,
 * 8 tokens in the lanes: each row's quad broadcast against the groups'
 * quads, four quads' products added in int16 (the bound in the note at
 * the top), then widened. */
ALWAYS_INLINE void q5_rows4(const int32_t wq[R16_QUADS][QUANT_R16_ROWS], int j0,
			    const struct quant_gemm_block *ba, const struct quant_gemm_block *bb,
			    int nt, __m256i ia[4], __m256i ib[4])
{
	const __m256i ones = _mm256_set1_epi16(1);
	_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
		ia[j] = ib[j] = _mm256_setzero_si256();
	_Pragma("GCC unroll 2") for (int k0 = 0; k0 < R16_QUADS; k0 += 4) {
		__m256i sa[4], sb[4];
		_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
			sa[j] = sb[j] = _mm256_setzero_si256();
		_Pragma("GCC unroll 4") for (int k = k0; k < k0 + 4; k++) {
			const __m256i xa = load256(ba->quads[k]);
			const __m256i xb = nt == 2 ? load256(bb->quads[k]) : xa;
			_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
				const __m256i w = _mm256_set1_epi32(wq[k][j0 + j]);
				sa[j] = _mm256_add_epi16(sa[j], _mm256_maddubs_epi16(w, xa));
				KEEP(sa[j]);
				if (nt == 2) {
					sb[j] = _mm256_add_epi16(sb[j], _mm256_maddubs_epi16(w, xb));
					KEEP(sb[j]);
				}
			}
		}
		_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
			ia[j] = _mm256_add_epi32(ia[j], _mm256_madd_epi16(sa[j], ones));
			if (nt == 2)
				ib[j] = _mm256_add_epi32(ib[j], _mm256_madd_epi16(sb[j], ones));
		}
	}
}

/* The float step for rows j0 .. j0+3 and one group block gb (tokens in
 * the lanes): isum = is - 16 * its activation sums, then acc[j0 + j] =
 * fma(dw * da, isum, acc[j0 + j]). */
ALWAYS_INLINE void q5_rows4_step(const float dw[QUANT_R16_ROWS], int j0,
				 const struct quant_gemm_block *gb, const __m256i is[4],
				 __m256 acc[QUANT_R16_ROWS])
{
	const __m256i off = _mm256_slli_epi32(load256(gb->sums), 4);
	const __m256 da = _mm256_loadu_ps(gb->d);
	_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
		acc[j0 + j] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dw[j0 + j]), da),
					      _mm256_cvtepi32_ps(_mm256_sub_epi32(is[j], off)), acc[j0 + j]);
}

/* An unpacked block (wq, dw) against nt (1 or 2, a constant at each
 * instance) group blocks, the first at ba, the second nb blocks further,
 * into acc[0] (and acc[1]). */
ALWAYS_INLINE void q5_block_groups(const int32_t wq[R16_QUADS][QUANT_R16_ROWS],
				   const float dw[QUANT_R16_ROWS], const struct quant_gemm_block *ba,
				   int64_t nb, int nt, __m256 acc[][QUANT_R16_ROWS])
{
	const struct quant_gemm_block *bb = nt == 2 ? ba + nb : ba;
	_Pragma("GCC unroll 1") for (int j0 = 0; j0 < QUANT_R16_ROWS; j0 += 4) {
		__m256i ia[4], ib[4];
		q5_rows4(wq, j0, ba, bb, nt, ia, ib);
		q5_rows4_step(dw, j0, ba, ia, acc[0]);
		if (nt == 2)
			q5_rows4_step(dw, j0, bb, ib, acc[1]);
	}
}

/* Packed groups per pass over a tile (quant_r16_drive.h's
 * R16_PASS_GROUPS): each block is unpacked once for all of them, and 8
 * groups' activations (51 KB for 640-wide rows) stay in L2. In pairs (the AVX-512 kernel's pass),
 * each block unpacked for every pair cost 11% of the products from 32
 * tokens on: Q5_0 640 x 2048, T = 128, one thread, Zen 3, 88.5 G
 * multiply-adds/s against the row-major kernel's 94 (which unpacks a
 * block once for 8 groups too). */
#define R16_AVX2_PASS_GROUPS 8

/* ng (1 .. R16_AVX2_PASS_GROUPS) packed groups at g (nb blocks apart)
 * against one Q5_0 tile: acc[gi][j] gets row j against the 8 tokens of
 * group gi, in the lanes. Each block is unpacked once into L1 (wq) for
 * all the groups, then taken 4 rows and 2 groups at a time with the
 * tokens in the lanes, as the row-major kernel's tok does: a broadcast
 * weight quad against both groups' quads. With the rows in the lanes
 * instead (a half's 8 quad vectors in registers, each token's quads
 * broadcast), the broadcasts, the float step per token and half and the
 * loop cost ~45 instructions per 256 products, and the kernel ran at ~60
 * G multiply-adds/s a core on the Zen 3 host from 8 tokens on, against
 * the row-major kernel's 88-94 from 32 on. */
ALWAYS_INLINE void q5_groups(const uint8_t *tile, int64_t nb, const struct quant_gemm_block *g,
			     int ng, const struct r16_pf *pf,
			     __m256 acc[R16_AVX2_PASS_GROUPS][QUANT_R16_ROWS])
{
	const size_t block_bytes = quant_r16_pair_bytes(QTYPE_Q5_0) / 2; /* a block's share of its pair */
	for (int gi = 0; gi < ng; gi++)
		for (int j = 0; j < QUANT_R16_ROWS; j++)
			acc[gi][j] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		r16_prefetch_block(pf, tile + (size_t)b * block_bytes, block_bytes, b);
		int32_t wq[R16_QUADS][QUANT_R16_ROWS] __attribute__((aligned(32)));
		float dw[QUANT_R16_ROWS] __attribute__((aligned(32)));
		q5_block_unpack(tile, b, wq, dw);
		int gi = 0;
		for (; gi + 1 < ng; gi += 2)
			q5_block_groups(wq, dw, g + (size_t)gi * (size_t)nb + b, nb, 2, &acc[gi]);
		if (gi < ng)
			q5_block_groups(wq, dw, g + (size_t)gi * (size_t)nb + b, nb, 1, &acc[gi]);
	}
}

/* ---- Q4_K (layout in quant_int.h) ----
 *
 * Per super-block of 16 rows and a token: S = sum over the 8 sub-blocks s
 * of sc_s * (the products of its 8 quads, added in int16: <= 8 * 2 * 15 *
 * 128 = 30720), by vpmaddwd against (sc_s, sc_s) int16 pairs; M = sum_s
 * m_s * (bsums 2s + 2s + 1), by vpmaddwd of (m_s, m_s) against the bsum
 * pair; then the K contract's two float steps (quant_gemm_k_avx2.c). */

/* 8 bytes at p (rows 8h .. 8h+7 of a scale or min run) as (v, v) int16
 * pairs in the int32 lanes. */
static inline __m256i k_pairs8(const uint8_t *p)
{
	const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
	return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* One plain Q8_K row a against one Q4_K tile of nsb super-blocks, rows in
 * the lanes: each chunk's nibble vectors give two sub-blocks (low and
 * high nibbles) for both halves, against the token's quads broadcast. */
ALWAYS_INLINE void q4k_plain(const uint8_t *tile, int64_t nsb, const struct block_q8_K *a,
			     const struct r16_pf *pf, __m256 out[2])
{
	const __m256i low4 = _mm256_set1_epi8(0x0f);
	__m256 acc[2] = { _mm256_setzero_ps(), _mm256_setzero_ps() }, accm[2] = { acc[0], acc[1] };
	for (int64_t b = 0; b < nsb; b++) {
		const uint8_t *sb = tile + (size_t)b * QUANT_R16K_Q4_K_SB;
		const struct block_q8_K *ab = a + b;
		r16_prefetch_stream(pf, sb, QUANT_R16K_Q4_K_SB);
		__m256i S[2] = { _mm256_setzero_si256(), _mm256_setzero_si256() }, M[2] = { S[0], S[1] };
		_Pragma("GCC unroll 1") for (int c = 0; c < 4; c++) {
			const uint8_t *v = sb + QUANT_R16K_Q4_K_QUANTS + 512 * (size_t)c;
			__m256i p[2][2]; /* [sub-block 2c, 2c + 1][half] */
			p[0][0] = p[0][1] = p[1][0] = p[1][1] = _mm256_setzero_si256();
			_Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {
				const __m256i xl = quad_bcast((const uint8_t *)ab->qs + 64 * c, 4, k);
				const __m256i xh = quad_bcast((const uint8_t *)ab->qs + 64 * c + 32, 4, k);
				_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
					const __m256i nib = load256(v + 64 * k + 32 * h);
					p[0][h] = _mm256_add_epi16(
						p[0][h], _mm256_maddubs_epi16(_mm256_and_si256(nib, low4), xl));
					p[1][h] = _mm256_add_epi16(
						p[1][h], _mm256_maddubs_epi16(
								 _mm256_and_si256(_mm256_srli_epi16(nib, 4), low4), xh));
				}
			}
			_Pragma("GCC unroll 2") for (int e = 0; e < 2; e++)
				_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
					S[h] = _mm256_add_epi32(
						S[h], _mm256_madd_epi16(p[e][h], k_pairs8(sb + QUANT_R16K_Q4_K_SCALES +
											  16 * (2 * c + e) + 8 * h)));
		}
		_Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
			const __m256i bs = quad_bcast((const uint8_t *)ab->bsums, 4, s); /* bsums 2s, 2s + 1 */
			_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
				M[h] = _mm256_add_epi32(
					M[h], _mm256_madd_epi16(k_pairs8(sb + QUANT_R16K_Q4_K_MINS + 16 * s + 8 * h), bs));
		}
		_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
			const __m256 dw = _mm256_cvtph_ps(load128(sb + 16 * h));
			const __m256 dmin = _mm256_cvtph_ps(load128(sb + 32 + 16 * h));
			acc[h] = r16_float_step(dw, ab->d, S[h], acc[h]);
			accm[h] = r16_float_step(dmin, ab->d, M[h], accm[h]);
		}
	}
	out[0] = _mm256_sub_ps(acc[0], accm[0]);
	out[1] = _mm256_sub_ps(acc[1], accm[1]);
}

/* A Q4_K super-block of a tile unpacked for the groups: quad k (elements
 * 4k .. 4k+3) of row j at q[k][j], the scale and min pairs of sub-block s
 * at sc[s][j], mn[s][j], the fp16 factors as floats. */
struct q4k_unpacked {
	int32_t q[QK_K / 4][QUANT_R16_ROWS];
	int32_t sc[8][QUANT_R16_ROWS], mn[8][QUANT_R16_ROWS];
	float d[QUANT_R16_ROWS], dmin[QUANT_R16_ROWS];
} __attribute__((aligned(32)));

static inline void q4k_unpack(const uint8_t *sb, struct q4k_unpacked *o)
{
	const __m256i low4 = _mm256_set1_epi8(0x0f);
	for (int c = 0; c < 4; c++)
		for (int k = 0; k < 8; k++)
			for (int h = 0; h < 2; h++) {
				const __m256i nib = load256(sb + QUANT_R16K_Q4_K_QUANTS + 512 * c + 64 * k + 32 * h);
				_mm256_store_si256((__m256i *)&o->q[8 * (2 * c) + k][R16_HALF_ROWS * h],
						   _mm256_and_si256(nib, low4));
				_mm256_store_si256((__m256i *)&o->q[8 * (2 * c + 1) + k][R16_HALF_ROWS * h],
						   _mm256_and_si256(_mm256_srli_epi16(nib, 4), low4));
			}
	for (int s = 0; s < 8; s++)
		for (int h = 0; h < 2; h++) {
			_mm256_store_si256((__m256i *)&o->sc[s][R16_HALF_ROWS * h],
					   k_pairs8(sb + QUANT_R16K_Q4_K_SCALES + 16 * s + 8 * h));
			_mm256_store_si256((__m256i *)&o->mn[s][R16_HALF_ROWS * h],
					   k_pairs8(sb + QUANT_R16K_Q4_K_MINS + 16 * s + 8 * h));
		}
	for (int h = 0; h < 2; h++) {
		_mm256_store_ps(o->d + R16_HALF_ROWS * h, _mm256_cvtph_ps(load128(sb + 16 * h)));
		_mm256_store_ps(o->dmin + R16_HALF_ROWS * h, _mm256_cvtph_ps(load128(sb + 32 + 16 * h)));
	}
}

/* Rows j0 .. j0+3 of an unpacked super-block against one group block gb,
 * 8 tokens in the lanes (as tok8 of quant_gemm_k_avx2.c, one group at a
 * time: two would spill the sums): into f (S) and fm (M). */
ALWAYS_INLINE void q4k_rows4(const struct q4k_unpacked *o, int j0,
			     const struct quant_gemm_kblock *gb, __m256 *f, __m256 *fm)
{
	__m256i S[4], M[4];
	_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
		S[r] = M[r] = _mm256_setzero_si256();
	_Pragma("GCC unroll 1") for (int s = 0; s < 8; s++) {
		__m256i p[4];
		_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
			p[r] = _mm256_setzero_si256();
		_Pragma("GCC unroll 8") for (int kk = 0; kk < 8; kk++) {
			const int k = 8 * s + kk;
			const __m256i x = load256(gb->quads[k]);
			_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
				p[r] = _mm256_add_epi16(
					p[r], _mm256_maddubs_epi16(_mm256_set1_epi32(o->q[k][j0 + r]), x));
				KEEP(p[r]);
			}
		}
		_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
			S[r] = _mm256_add_epi32(S[r], _mm256_madd_epi16(p[r], _mm256_set1_epi32(o->sc[s][j0 + r])));
			KEEP(S[r]);
		}
	}
	_Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
		const __m256i x = load256(gb->bsum_pairs[s]);
		_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
			M[r] = _mm256_add_epi32(M[r], _mm256_madd_epi16(_mm256_set1_epi32(o->mn[s][j0 + r]), x));
	}
	const __m256 da = _mm256_loadu_ps(gb->d);
	_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
		f[j0 + r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(o->d[j0 + r]), da),
					    _mm256_cvtepi32_ps(S[r]), f[j0 + r]);
		fm[j0 + r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(o->dmin[j0 + r]), da),
					     _mm256_cvtepi32_ps(M[r]), fm[j0 + r]);
	}
}

/* The 4-row blocks j0 = 0, 4, 8, 12 of a tile, each running the
 * statement after j0 (a block in braces): unrolled where a pass has two
 * groups or more, so the rows' offsets into the unpacked super-block are
 * constants, and rolled for one group, where the unrolled code lost
 * (Q4_K T = 8 76 -> 71, Q6_K 61 -> 55); unroll is a constant at each
 * instance (k_groups). `quant_bench --gemm` on the Zen 3 host, one
 * thread, cache-resident, alternating with the build before (rolled
 * throughout), best of runs, G multiply-adds/s: Q4_K T = 8 76.3 -> 79.2,
 * T = 32 87.5 -> 93.3, T = 128 92.1 -> 99.7; Q5_0 unchanged. */
#define R16K_ROW_BLOCKS(unroll, j0, ...)                                                          \
	do {                                                                                     \
		if (unroll) {                                                                    \
			_Pragma("GCC unroll 4") for (int j0 = 0; j0 < QUANT_R16_ROWS; j0 += 4)   \
				__VA_ARGS__                                                      \
		} else {                                                                         \
			_Pragma("GCC unroll 1") for (int j0 = 0; j0 < QUANT_R16_ROWS; j0 += 4)   \
				__VA_ARGS__                                                      \
		}                                                                                \
	} while (0)

/* ---- Q6_K (layout in quant_int.h) ----
 *
 * Per super-block of 16 rows and a token: S = sum over the 16 sub-blocks
 * s of sc_s * (the products of u = q + 32 with its 4 quads of
 * activations), less 32 * sum_s sc_s * bsum_s: the exact S_b of the K
 * contract (quant_gemm_k_avx2.c), so the same float step gives the row-
 * major kernels' bits. u <= 63 and |a| <= 128 bound a vpmaddubsw pair by
 * 2 * 63 * 128 = 16128: two quads add up in int16, then vpmaddwd weighs
 * them with the sub-block's (sc, sc) pair. The offset takes the scales as
 * stored, (sc_2p, sc_2p + 1) in each row's int32 lane, against the bsum
 * pair (bsum_2p, bsum_2p + 1): one vpmaddwd per two sub-blocks. */

/* Half h (rows 8h .. 8h+7) of quad vectors v, v + 16, v + 32 and v + 48
 * (v < 16) of the Q6_K super-block at sb into u[0 .. 3]: the four that
 * share 2-bit vector v. The low 4 bits of u come from nibble vectors v
 * and v + 16 (low nibbles for the first two, high for the others), the
 * top 2 from bits 2p, 2p + 1 of the 2-bit vector for u[p], moved to bits
 * 4-5 by a 16-bit shift (what crosses into the other byte is masked off). */
ALWAYS_INLINE void q6k_quads4(const uint8_t *sb, int v, int h, __m256i u[4])
{
	const __m256i low4 = _mm256_set1_epi8(0x0f), top2 = _mm256_set1_epi8(0x30);
	const __m256i n0 = load256(sb + QUANT_R16K_Q6_K_NIBBLES + 64 * v + 32 * h);
	const __m256i n1 = load256(sb + QUANT_R16K_Q6_K_NIBBLES + 64 * (v + 16) + 32 * h);
	const __m256i bits = load256(sb + QUANT_R16K_Q6_K_BITS + 64 * v + 32 * h);
	u[0] = _mm256_or_si256(_mm256_and_si256(n0, low4),
			       _mm256_and_si256(_mm256_slli_epi16(bits, 4), top2));
	u[1] = _mm256_or_si256(_mm256_and_si256(n1, low4),
			       _mm256_and_si256(_mm256_slli_epi16(bits, 2), top2));
	u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n0, 4), low4),
			       _mm256_and_si256(bits, top2));
	u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n1, 4), low4),
			       _mm256_and_si256(_mm256_srli_epi16(bits, 2), top2));
}

/* The scales of rows 8h .. 8h+7 of sub-block pair p as stored: (sc_2p,
 * sc_2p + 1) sign-extended into each row's int32 lane. */
static inline __m256i q6k_scale_pairs(const uint8_t *sb, int p, int h)
{
	return _mm256_cvtepi8_epi16(load128(sb + QUANT_R16K_Q6_K_SCALES + 32 * p + 16 * h));
}

/* Sub-block s's scale of rows 8h .. 8h+7 as (sc_s, sc_s) in each row's
 * int32 lane. */
static inline __m256i q6k_scale_dup(const uint8_t *sb, int s, int h)
{
	const __m128i even = _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14);
	const __m128i pick = _mm_add_epi8(even, _mm_set1_epi8((char)(s % 2)));
	const __m128i pairs = load128(sb + QUANT_R16K_Q6_K_SCALES + 32 * (s / 2) + 16 * h);
	return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(pairs, pick));
}

/* Half h of the exact S of one Q6_K super-block at sb against nt (1 or 2,
 * a constant at each instance) plain Q8_K blocks x[c], rows in the lanes,
 * each quad vector unpacked once for all of them. Quads in 2-bit vector
 * order (q6k_quads4): vectors 4c .. 4c + 3 hold the quads of sub-blocks
 * c, c + 4, c + 8 and c + 12, two vectors to a run. */
ALWAYS_INLINE void q6k_plain_sums(const uint8_t *sb, int h, const struct block_q8_K *const *x,
				  int nt, __m256i S[2])
{
	__m256i O[2];
	FOR_COLS(c, nt)
		S[c] = O[c] = _mm256_setzero_si256();
	_Pragma("GCC unroll 1") for (int v0 = 0; v0 < 16; v0 += 2) {
		__m256i run[2][4];
		FOR_COLS(c, nt)
			for (int i = 0; i < 4; i++)
				run[c][i] = _mm256_setzero_si256();
		_Pragma("GCC unroll 2") for (int v = v0; v < v0 + 2; v++) {
			__m256i u[4];
			q6k_quads4(sb, v, h, u);
			FOR_COLS(c, nt) {
				const uint8_t *qs = (const uint8_t *)x[c]->qs;
				_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
					const __m256i xq = quad_bcast(qs, 4, v + 16 * i);
					run[c][i] = _mm256_add_epi16(run[c][i], _mm256_maddubs_epi16(u[i], xq));
				}
			}
		}
		_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
			const __m256i sc = q6k_scale_dup(sb, v0 / 4 + 4 * i, h);
			FOR_COLS(c, nt)
				S[c] = _mm256_add_epi32(S[c], _mm256_madd_epi16(run[c][i], sc));
		}
	}
	_Pragma("GCC unroll 8") for (int p = 0; p < 8; p++) {
		const __m256i scp = q6k_scale_pairs(sb, p, h);
		FOR_COLS(c, nt) {
			const __m256i bs = quad_bcast((const uint8_t *)x[c]->bsums, 4, p);
			O[c] = _mm256_add_epi32(O[c], _mm256_madd_epi16(scp, bs));
		}
	}
	FOR_COLS(c, nt)
		S[c] = _mm256_sub_epi32(S[c], _mm256_slli_epi32(O[c], 5));
}

/* nt (1 or 2, a constant at each instance) plain Q8_K rows a[c] against
 * one Q6_K tile of nsb super-blocks into acc[c], rows in the lanes. */
ALWAYS_INLINE void q6k_plain(const uint8_t *tile, int64_t nsb, const struct block_q8_K *const *a,
			     int nt, const struct r16_pf *pf, __m256 acc[][2])
{
	FOR_COLS(c, nt)
		acc[c][0] = acc[c][1] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nsb; b++) {
		const uint8_t *sb = tile + (size_t)b * QUANT_R16K_Q6_K_SB;
		const struct block_q8_K *x[2];
		FOR_COLS(c, nt)
			x[c] = a[c] + b;
		r16_prefetch_stream(pf, sb, QUANT_R16K_Q6_K_SB);
		_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
			__m256i S[2];
			q6k_plain_sums(sb, h, x, nt, S);
			const __m256 dw = _mm256_cvtph_ps(load128(sb + 16 * h));
			FOR_COLS(c, nt)
				acc[c][h] = r16_float_step(dw, x[c]->d, S[c], acc[c][h]);
		}
	}
}

/* q6k_plain out of line, for one and for two rows: inlined into the
 * entry beside the two instances of the groups' pass, the one-row loop
 * ran 15% slower (`quant_bench --gemm 1`, Q6_K: 26 -> 22-23.5 G
 * multiply-adds/s). */
static __attribute__((noinline)) void q6k_plain1(const uint8_t *tile, int64_t nsb,
						 const struct block_q8_K *a, const struct r16_pf *pf,
						 __m256 acc[1][2])
{
	q6k_plain(tile, nsb, (const struct block_q8_K *const[]){ a }, 1, pf, acc);
}

static __attribute__((noinline)) void q6k_plain2(const uint8_t *tile, int64_t nsb,
						 const struct block_q8_K *a,
						 const struct block_q8_K *b, const struct r16_pf *pf,
						 __m256 acc[2][2])
{
	q6k_plain(tile, nsb, (const struct block_q8_K *const[]){ a, b }, 2, pf, acc);
}

/* A Q6_K super-block of a tile unpacked for the groups: quad k of row j
 * (u = q + 32) at q[k][j], sub-block s's (sc, sc) at sc[s][j], pair p's
 * stored (sc_2p, sc_2p + 1) at scp[p][j], the fp16 factors as floats. */
struct q6k_unpacked {
	int32_t q[QK_K / 4][QUANT_R16_ROWS];
	int32_t sc[16][QUANT_R16_ROWS], scp[8][QUANT_R16_ROWS];
	float d[QUANT_R16_ROWS];
} __attribute__((aligned(32)));

static inline void q6k_unpack(const uint8_t *sb, struct q6k_unpacked *o)
{
	for (int h = 0; h < 2; h++) {
		const int j = R16_HALF_ROWS * h;
		_Pragma("GCC unroll 16") for (int v = 0; v < 16; v++) {
			__m256i u[4];
			q6k_quads4(sb, v, h, u);
			for (int i = 0; i < 4; i++)
				_mm256_store_si256((__m256i *)&o->q[v + 16 * i][j], u[i]);
		}
		_Pragma("GCC unroll 16") for (int s = 0; s < 16; s++)
			_mm256_store_si256((__m256i *)&o->sc[s][j], q6k_scale_dup(sb, s, h));
		_Pragma("GCC unroll 8") for (int p = 0; p < 8; p++)
			_mm256_store_si256((__m256i *)&o->scp[p][j], q6k_scale_pairs(sb, p, h));
		_mm256_store_ps(o->d + j, _mm256_cvtph_ps(load128(sb + 16 * h)));
	}
}

/* Rows j0 .. j0+3 of an unpacked super-block against one group block gb,
 * 8 tokens in the lanes (as tok8 of quant_gemm_k_avx2.c): into f. */
ALWAYS_INLINE void q6k_rows4(const struct q6k_unpacked *o, int j0,
			     const struct quant_gemm_kblock *gb, __m256 *f)
{
	__m256i S[4], O[4];
	_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
		S[r] = O[r] = _mm256_setzero_si256();
	/* 8 quads (4 runs of 2) per pass, as tok8_sums */
	_Pragma("GCC unroll 1") for (int k8 = 0; k8 < QK_K / 4; k8 += 8) {
		_Pragma("GCC unroll 4") for (int k0 = k8; k0 < k8 + 8; k0 += 2) {
			__m256i p[4];
			_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)
				p[r] = _mm256_setzero_si256();
			_Pragma("GCC unroll 2") for (int k = k0; k < k0 + 2; k++) {
				const __m256i x = load256(gb->quads[k]);
				_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
					const __m256i u = _mm256_set1_epi32(o->q[k][j0 + r]);
					p[r] = _mm256_add_epi16(p[r], _mm256_maddubs_epi16(u, x));
					KEEP(p[r]);
				}
			}
			_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
				const __m256i sc = _mm256_set1_epi32(o->sc[k0 / 4][j0 + r]);
				S[r] = _mm256_add_epi32(S[r], _mm256_madd_epi16(p[r], sc));
				KEEP(S[r]);
			}
		}
	}
	_Pragma("GCC unroll 8") for (int p = 0; p < 8; p++) {
		const __m256i x = load256(gb->bsum_pairs[p]);
		_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
			const __m256i scp = _mm256_set1_epi32(o->scp[p][j0 + r]);
			O[r] = _mm256_add_epi32(O[r], _mm256_madd_epi16(scp, x));
		}
	}
	const __m256 da = _mm256_loadu_ps(gb->d);
	_Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
		const __m256i s = _mm256_sub_epi32(S[r], _mm256_slli_epi32(O[r], 5));
		f[j0 + r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(o->d[j0 + r]), da),
					    _mm256_cvtepi32_ps(s), f[j0 + r]);
	}
}

/* ng (1 .. R16_AVX2_PASS_GROUPS) packed groups at g (nsb super-blocks
 * apart) against one Q4_K or Q6_K tile (t, a constant): acc[gi][j] gets
 * row j against the 8 tokens of group gi, in the lanes. Each super-block
 * is unpacked once for all the groups. unroll: a constant
 * (R16K_ROW_BLOCKS). */
ALWAYS_INLINE void k_groups_run(enum qtype t, const uint8_t *tile, int64_t nsb,
				const struct quant_gemm_kblock *g, int ng, bool unroll,
				const struct r16_pf *pf,
				__m256 acc[R16_AVX2_PASS_GROUPS][QUANT_R16_ROWS])
{
	const size_t sb_bytes = quant_r16k_sb_bytes(t);
	__m256 accm[R16_AVX2_PASS_GROUPS][QUANT_R16_ROWS]; /* Q4_K's M part */
	for (int gi = 0; gi < ng; gi++)
		for (int j = 0; j < QUANT_R16_ROWS; j++) {
			acc[gi][j] = _mm256_setzero_ps();
			if (t == QTYPE_Q4_K)
				accm[gi][j] = acc[gi][j];
		}
	for (int64_t b = 0; b < nsb; b++) {
		const uint8_t *sb = tile + (size_t)b * sb_bytes;
		union {
			struct q4k_unpacked q4;
			struct q6k_unpacked q6;
		} o;
		if (t == QTYPE_Q4_K)
			q4k_unpack(sb, &o.q4);
		else
			q6k_unpack(sb, &o.q6);
		for (int gi = 0; gi < ng; gi++)
			R16K_ROW_BLOCKS(unroll, j0, {
				const int part = gi * 4 + j0 / 4, parts = ng * 4;
				const struct quant_gemm_kblock *gb = g + (size_t)gi * (size_t)nsb + b;
				r16_prefetch_block_part(pf, sb, sb_bytes, b, part, parts);
				if (t == QTYPE_Q4_K)
					q4k_rows4(&o.q4, j0, gb, acc[gi], accm[gi]);
				else
					q6k_rows4(&o.q6, j0, gb, acc[gi]);
			});
	}
	for (int gi = 0; t == QTYPE_Q4_K && gi < ng; gi++)
		for (int j = 0; j < QUANT_R16_ROWS; j++)
			acc[gi][j] = _mm256_sub_ps(acc[gi][j], accm[gi][j]);
}

/* k_groups_run, its row blocks unrolled for two groups or more. */
ALWAYS_INLINE void k_groups(enum qtype t, const uint8_t *tile, int64_t nsb,
			    const struct quant_gemm_kblock *g, int ng, const struct r16_pf *pf,
			    __m256 acc[R16_AVX2_PASS_GROUPS][QUANT_R16_ROWS])
{
	if (ng > 1)
		k_groups_run(t, tile, nsb, g, ng, true, pf, acc);
	else
		k_groups_run(t, tile, nsb, g, 1, false, pf, acc);
}

/* An 8 x 8 transpose: out[l] lane j = in[j] lane l. */
static inline void transpose8(const __m256 in[8], __m256 out[8])
{
	__m256 t[8], u[8];
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_ps(in[i], in[i + 1]);
		t[i + 1] = _mm256_unpackhi_ps(in[i], in[i + 1]);
	}
	for (int i = 0; i < 8; i += 4) {
		u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
		u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
		u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
		u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
	}
	for (int i = 0; i < 4; i++) {
		out[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
		out[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
	}
}

/* 8 results v of rows row0 .. row0+7 into yr (row r at yr[r]), rows in
 * [r0, r1) only. */
static inline void r16_store_half(float *yr, int64_t row0, int64_t r0, int64_t r1, __m256 v)
{
	if (r0 <= row0 && row0 + R16_HALF_ROWS <= r1) {
		_mm256_storeu_ps(yr + row0, v);
		return;
	}
	float tmp[R16_HALF_ROWS];
	_mm256_storeu_ps(tmp, v);
	for (int j = 0; j < R16_HALF_ROWS; j++)
		if (row0 + j >= r0 && row0 + j < r1)
			yr[row0 + j] = tmp[j];
}

/* R16_TILE_GROUPS (quant_r16_drive.h): Q5_0 or Q4_K (t a constant). */
ALWAYS_INLINE void avx2_tile_groups(enum qtype t, const void *w, size_t tile_bytes, int64_t ti,
				    int64_t r0, int64_t r1, int64_t nb, const void *packed,
				    size_t group_bytes, int64_t g0, int64_t c1, int64_t T,
				    const struct r16_pf *pf, float *y, int64_t y_stride)
{
	const uint8_t *tile = (const uint8_t *)w + (size_t)ti * tile_bytes;
	const void *g = (const uint8_t *)packed + (size_t)g0 * group_bytes;
	__m256 acc[R16_AVX2_PASS_GROUPS][QUANT_R16_ROWS];
	const int ng = c1 - g0 < R16_AVX2_PASS_GROUPS ? (int)(c1 - g0) : R16_AVX2_PASS_GROUPS;
	if (t == QTYPE_Q4_K || t == QTYPE_Q6_K)
		k_groups(t, tile, nb, g, ng, pf, acc);
	else
		q5_groups(tile, nb, g, ng, pf, acc);
	for (int gi = 0; gi < ng; gi++)
		for (int h = 0; h < 2; h++) {
			__m256 v[QUANT_GEMM_GROUP]; /* token l's 8 rows 8h .. 8h+7 */
			transpose8(&acc[gi][R16_HALF_ROWS * h], v);
			for (int l = 0; l < QUANT_GEMM_GROUP; l++) {
				const int64_t tk = (g0 + gi) * QUANT_GEMM_GROUP + l;
				if (tk < T)
					r16_store_half(y + tk * y_stride, ti * QUANT_R16_ROWS + R16_HALF_ROWS * h,
						       r0, r1, v[l]);
			}
		}
}

/* ---- one plain row ---- */

/* R16_PLAIN_PREPARE (quant_r16_drive.h). */
static void q5_plain_prepare(const struct block_q8_0 *a, int64_t nb, int off_log2, int32_t *corr,
			     float *da)
{
	const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
	for (int64_t b = 0; b < nb; b++) {
		const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load256(a[b].qs)), ones16);
		corr[b] = -hsum_epi32(s) * (1 << off_log2);
		da[b] = half_load(a[b].d);
	}
}

/* nt (1 or 2, a constant at each instance) plain Q8_0 rows a[c] (their
 * blocks prepared: corr[c], da[c]) against one Q5_0 tile into acc[c],
 * each nibble vector unpacked in registers once for all of them (the
 * unpacking costs about as much as one row's products). Nibble vector v
 * outer, the halves inner: v's quads broadcast once for both halves. */
ALWAYS_INLINE void q5_plain(const uint8_t *tile, int64_t nb, const struct block_q8_0 *const *a,
			    const int32_t *const *corr, const float *const *da, int nt,
			    const struct r16_pf *pf, __m256 acc[][2])
{
	const size_t block_bytes = quant_r16_pair_bytes(QTYPE_Q5_0) / 2;
	FOR_COLS(c, nt)
		acc[c][0] = acc[c][1] = _mm256_setzero_ps();
	for (int64_t i = 0; i < nb; i++) {
		r16_prefetch_stream(pf, tile + (size_t)i * block_bytes, block_bytes);
		const uint8_t *p = q5_block_quants(tile, i);
		__m256i lo[2][2], hi[2][2]; /* [row][half] */
		FOR_COLS(c, nt)
			lo[c][0] = hi[c][0] = lo[c][1] = hi[c][1] = _mm256_setzero_si256();
		_Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
			__m256i xl[2], xh[2];
			FOR_COLS(c, nt) {
				xl[c] = quad_bcast((const uint8_t *)a[c][i].qs, 4, v);
				xh[c] = quad_bcast((const uint8_t *)a[c][i].qs, 4, v + 4);
			}
			_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
				const __m256i masks = load256(p + 256 + 32 * h);
				const __m256i nib = load256(p + 64 * v + 32 * h);
				const __m256i ql = q5_half(nib, masks, v);
				const __m256i qh = q5_half(_mm256_srli_epi16(nib, 4), masks, v + 4);
				FOR_COLS(c, nt) {
					lo[c][h] = _mm256_add_epi16(lo[c][h], _mm256_maddubs_epi16(ql, xl[c]));
					hi[c][h] = _mm256_add_epi16(hi[c][h], _mm256_maddubs_epi16(qh, xh[c]));
				}
			}
		}
		__m256 dw[2];
		q5_block_scales(tile, i, dw);
		FOR_COLS(c, nt) {
			const __m256i cb = _mm256_set1_epi32(corr[c][i]);
			_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
				acc[c][h] = r16_float_step(dw[h], da[c][i], halves_sum(lo[c][h], hi[c][h], cb),
							   acc[c][h]);
		}
	}
}

/* R16_TILE_PLAIN (quant_r16_drive.h): Q5_0 (a Q8_0 row, its blocks
 * prepared) or Q4_K (a Q8_K row). */
ALWAYS_INLINE void avx2_tile_plain(enum qtype t, const void *w, size_t tile_bytes, int64_t ti,
				   int64_t r0, int64_t r1, int64_t nb, const void *at,
				   const int32_t *corr, const float *da, bool stream, float *yr)
{
	const struct r16_pf pf = { .stream = stream };
	const uint8_t *tile = (const uint8_t *)w + (size_t)ti * tile_bytes;
	__m256 acc[1][2];
	if (t == QTYPE_Q4_K)
		q4k_plain(tile, nb, at, &pf, acc[0]);
	else if (t == QTYPE_Q6_K)
		q6k_plain1(tile, nb, at, &pf, acc);
	else
		q5_plain(tile, nb, (const struct block_q8_0 *const[]){ at }, &corr, &da, 1, &pf, acc);
	r16_store_half(yr, ti * QUANT_R16_ROWS, r0, r1, acc[0][0]);
	r16_store_half(yr, ti * QUANT_R16_ROWS + R16_HALF_ROWS, r0, r1, acc[0][1]);
}

/* R16_TILE_PLAIN2 (quant_r16_drive.h): two plain rows at once, Q5_0 and
 * Q6_K (Q4_K's nibbles unpack in two instructions: it takes one row at a
 * time). */
ALWAYS_INLINE bool avx2_tile_plain2(enum qtype t, const void *w, size_t tile_bytes, int64_t ti,
				    int64_t r0, int64_t r1, int64_t nb, const void *at,
				    const void *bt, const int32_t *corr_a, const int32_t *corr_b,
				    const float *da_a, const float *da_b, bool stream, float *ya,
				    float *yb)
{
	if (t == QTYPE_Q4_K)
		return false;
	const struct r16_pf pf = { .stream = stream };
	const uint8_t *tile = (const uint8_t *)w + (size_t)ti * tile_bytes;
	__m256 acc[2][2];
	if (t == QTYPE_Q6_K)
		q6k_plain2(tile, nb, at, bt, &pf, acc);
	else
		q5_plain(tile, nb, (const struct block_q8_0 *const[]){ at, bt },
			 (const int32_t *const[]){ corr_a, corr_b },
			 (const float *const[]){ da_a, da_b }, 2, &pf, acc);
	_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
		r16_store_half(ya, ti * QUANT_R16_ROWS + R16_HALF_ROWS * h, r0, r1, acc[0][h]);
		r16_store_half(yb, ti * QUANT_R16_ROWS + R16_HALF_ROWS * h, r0, r1, acc[1][h]);
	}
	return true;
}

#define R16_TILE_GROUPS avx2_tile_groups
#define R16_TILE_PLAIN avx2_tile_plain
#define R16_TILE_PLAIN2 avx2_tile_plain2
#define R16_PLAIN_PREPARE q5_plain_prepare
#define R16_PASS_GROUPS R16_AVX2_PASS_GROUPS
#include "quant_r16_drive.h" /* again: r16_gemm_drive over the functions above */

R16_GEMM_ENTRY(gemm_q5_0_r16, QTYPE_Q5_0)
R16_GEMM_ENTRY(gemm_q4_K_r16, QTYPE_Q4_K)
R16_GEMM_ENTRY(gemm_q6_K_r16, QTYPE_Q6_K)

void quant_gemm_r16_avx2_register(struct quant_kernels *k)
{
	k->gemm_r16[QTYPE_Q5_0] = gemm_q5_0_r16;
	k->gemm_r16[QTYPE_Q4_K] = gemm_q4_K_r16;
	k->gemm_r16[QTYPE_Q6_K] = gemm_q6_K_r16;
}
