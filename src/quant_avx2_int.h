/* quant_avx2_int.h — inline helpers shared by the AVX2 kernel files
 * (quant_avx2.c, quant_gemm_avx2.c and its VNNI builds, quant_gemm_k_avx2.c);
 * include only from files compiled with -mavx2 -mfma -mf16c.
 *
 * Test hook: with QUANT_SIMDE defined (tests/test_quant.c) the includer
 * has already included SIMDe's headers with native aliases, so the same
 * code runs on any CPU through SIMDe's portable emulation; the two helpers
 * below that SIMDe cannot express get plain stand-ins. */
#ifndef INGOT_QUANT_AVX2_INT_H
#define INGOT_QUANT_AVX2_INT_H

#include <immintrin.h>
#include <string.h>

#include "quant_int.h"

#ifdef QUANT_GEMM_VNNI
/* The VNNI builds (QUANT_GEMM_VNNI defined by the includer): acc + (4
 * adjacent u8 x s8 products summed) in each int32 lane. */
#if QUANT_GEMM_VNNI == QUANT_GEMM_VNNI_VEX
#define dpbusd(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#else
#define dpbusd(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#endif
#endif

static inline float half_load(uint16_t h)
{
#ifdef QUANT_SIMDE
	return fp16_to_f32(h);
#else
	return _cvtsh_ss(h);
#endif
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

/* Row r of a weight matrix of `stride`-byte rows. */
#define WROW(w, stride, r) ((const uint8_t *)(w) + (size_t)(r) * (stride))

/* Keeps GCC from reassociating an integer accumulator into a tree of
 * spilled partial sums. (Under SIMDe a vector is no register operand.) */
#ifdef QUANT_SIMDE
#define KEEP(v) ((void)0)
#else
#define KEEP(v) __asm__("" : "+x"(v))
#endif

static inline int hsum128_epi32(__m128i s)
{
	s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
	return _mm_cvtsi128_si32(s);
}

/* Lane-wise sums of adjacent partial results, the three levels of the
 * unpack tree that turns 8 vectors of 8 lanes into 8 sums. */
static inline __m256i sum_pairs32(__m256i a, __m256i b)
{
	return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

static inline __m256i sum_pairs64(__m256i a, __m256i b)
{
	return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

static inline __m256i sum_halves(__m256i a, __m256i b)
{
	return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
				_mm256_permute2x128_si256(a, b, 0x31));
}

/* Software prefetch of the matrix kernels, in two distances: the 8-row
 * tile two tiles ahead into L1 (eight interleaved row streams defeat the
 * hardware prefetcher), and the tile PREFETCH_L2_ROWS ahead into L2, so
 * that enough lines are in flight to stream at the memory's rate: L1
 * prefetches alone are bounded by the core's L1 miss buffers, about half
 * the bandwidth here. Measured on the Zen 4 host (the whole Q8_0 LM head,
 * 262144 x 640, one token, 2 threads, best of 5, six alternating rounds):
 * 7.1-14.0 ms (13-25 GB/s) with the L1 prefetch alone, 5.3-6.9 ms (26-34
 * GB/s) with the L2 one 128 rows ahead (64 rows: 6.0-7.0, 256: 6.4-8.6);
 * no software prefetch at all, 15.9-17.9 ms. */
#define ROWS8_PREFETCH 16
#define PREFETCH_L2_ROWS 128

/* The tiles a pass prefetches while it computes: l1 and l2 point at 8-row
 * tiles (NULL: none at that distance). */
struct prefetch_plan {
	const char *l1, *l2;
};

/* The bytes of the 8-row tile at pf prefetched per block when a pass has
 * nb blocks: whole lines, rounded up. Computed once per pass (a division). */
ALWAYS_INLINE size_t prefetch_step(size_t w_stride, int64_t nb)
{
	return (8 * w_stride / 64 + (size_t)nb) / (size_t)nb * 64;
}

/* While block i of a pass over a tile computes, the slice i (step bytes,
 * from prefetch_step) of each planned tile (pf NULL: none) is prefetched:
 * a few lines per block, so the requests spread over the pass instead of
 * filling the miss buffers in one burst. */
ALWAYS_INLINE void prefetch_slice(const struct prefetch_plan *pf, size_t w_stride, size_t step,
				  int64_t i)
{
	if (!pf)
		return;
	const size_t tile_bytes = 8 * w_stride;
	for (size_t o = (size_t)i * step; o < (size_t)(i + 1) * step && o < tile_bytes; o += 64) {
		if (pf->l1)
			_mm_prefetch(pf->l1 + o, _MM_HINT_T0);
		if (pf->l2)
			_mm_prefetch(pf->l2 + o, _MM_HINT_T1);
	}
}

/* ---- K-quants with 32-element sub-blocks (Q4_K, Q5_K) ---- */

/* Q4_K/Q5_K scales and mins as 16 int16: lanes 0..7 the scales, 8..15 the
 * mins. Same bit layout as quant_k4_scales_unpack, four bytes at a time. */
static inline __m256i k4_scales_mins(const uint8_t p[12])
{
	uint32_t w[4];
	quant_k4_scales_mins_words(p, w);
	return _mm256_cvtepu8_epi16(_mm_set_epi32((int)w[3], (int)w[2], (int)w[1], (int)w[0]));
}

/* int16 element k of each 128-bit lane broadcast across that lane. */
#define BCAST16(k) _mm256_set1_epi16((short)((2 * (k) + 1) << 8 | 2 * (k)))

/* Sum over sub-blocks of min * (activation sum of the sub-block), as 4
 * int32 lanes; mins: 8 int16, bsums: the Q8_K block's 16 sums of 16. */
static inline __m128i k4_min_sums(__m256i scales_mins, const int16_t *bsums)
{
	__m256i b = load256(bsums);
	__m128i sums32 = _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
	return _mm_madd_epi16(_mm256_extracti128_si256(scales_mins, 1), sums32);
}

/* One 64-element chunk of a Q4_K/Q5_K block: q_lo (sub-block 2j) and q_hi
 * (2j+1) are unsigned quants, a the 64 activations, scales the 8 scales
 * broadcast to both lanes. */
static inline __m256i k4_chunk(__m256i q_lo, __m256i q_hi, const int8_t *a, __m256i s_lo,
			       __m256i s_hi)
{
	__m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(q_lo, load256(a)), s_lo);
	__m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(q_hi, load256(a + 32)), s_hi);
	return _mm256_add_epi32(p_lo, p_hi);
}

/* ---- K-quants with 16-element sub-blocks (Q2_K, Q3_K, Q6_K) ---- */

/* Control for _mm256_shuffle_epi8 that puts int16 element 2k of the lane in
 * every slot of the low lane and element 2k+1 in every slot of the high one
 * (both lanes holding the same 8 scales). */
static inline __m256i bcast_pair16(int k)
{
	__m128i lo = _mm_set1_epi16((short)((4 * k + 1) << 8 | 4 * k));
	__m128i hi = _mm_set1_epi16((short)((4 * k + 3) << 8 | (4 * k + 2)));
	return _mm256_set_m128i(hi, lo);
}

/* The 8 int16 scales of half h (sub-blocks 8h .. 8h+7) in both lanes. */
static inline __m256i scales_half(__m256i sc16, int h)
{
	return h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
		 : _mm256_permute2x128_si256(sc16, sc16, 0x00);
}

/* -off * sum_s sc[s] * bsum[s] as 8 int32: the start of a super-block's
 * integer sum (off a power of two, 1 << off_log2). */
static inline __m256i offset_correction(__m256i sc16, const int16_t *bsums, int off_log2)
{
	__m256i corr = _mm256_madd_epi16(sc16, load256(bsums));
	return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(corr, off_log2));
}

/* Q6_K: u = q + 32 (6 bits: 4 from ql, 2 from qh). Quarter k (elements
 * 32k .. 32k+32) of half h: the low (k < 2) or high (k >= 2) nibbles of l,
 * the ql bytes 64h + 32(k & 1) .. +32, below bits 2k, 2k+1 of qh, the qh
 * bytes 32h .. 32h+32. */
static inline __m256i q6k_quarter(__m256i l, __m256i qh, int k)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), m2_4 = _mm256_set1_epi8(0x30);
	__m256i lo = k < 2 ? _mm256_and_si256(l, m4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
	/* bits 2k, 2k+1 of each qh byte to bits 4, 5 (16-bit shifts: what
	 * crosses from the neighbouring byte lands outside the mask) */
	__m256i hb = k == 2 ? qh
		   : k < 2  ? _mm256_slli_epi16(qh, 4 - 2 * k)
			    : _mm256_srli_epi16(qh, 2 * k - 4);
	return _mm256_or_si256(lo, _mm256_and_si256(hb, m2_4));
}

/* ---- the matrix kernels' tiling (quant_gemm_avx2.c, quant_gemm_k_avx2.c) ---- */

/* Token groups per pass over the rows: 8 groups of packed activations
 * (51 KB of Q8_0 for a 640-wide row, 280 KB of Q8_K for a 2048-wide one)
 * stay in L2 while the weights stream, each weight block unpacked once
 * for all of them. Against 4 (one thread, 2048 x 640 Q5_0, alternating
 * runs): T = 512 77.7 -> 81.5 G multiply-adds/s, T = 128 81 -> 86.5; 16
 * loses at T = 512 (79), its Q8_K activations no longer fitting L2. */
#define GEMM_TILE_GROUPS 8

/* The most plain activation rows a rows8 pass takes (each weight block
 * unpacked once for them; rows8_tokens below). */
#define ROWS8_MAX_TOKENS 4

/* What a family of weight types plugs into gemm_tiles (always-inline
 * functions, called with the type t as a constant, so each type's gemm
 * entry compiles to one loop nest with no calls):
 *  tok:   rows r .. r+3 against the ng <= GEMM_TILE_GROUPS packed groups
 *         at g (the first holds token t0), into the lanes of tokens
 *         t0 .. T-1 of y;
 *  rows8: rows r .. r+7 against nt (1 .. ROWS8_MAX_TOKENS) plain
 *         activation rows at a;
 *  tail:  row r (past the last 8-row tile) against all T plain rows. */
typedef void (*gemm_tok_fn)(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r,
			    const void *g, int ng, int64_t t0, int64_t T, float *y,
			    int64_t y_stride, const struct prefetch_plan *pf);
typedef void (*gemm_rows8_fn)(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r,
			      const void *a, size_t a_stride, int nt, float *y, int64_t y_stride,
			      const struct prefetch_plan *pf);
typedef void (*gemm_tail_fn)(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r,
			     const void *a, size_t a_stride, int64_t T, float *y, int64_t y_stride);

/* Plain activation rows one rows8 pass of type t takes (up to
 * ROWS8_MAX_TOKENS, each instance a constant), and the fewest tokens of a
 * partial last group that go through tok rather than rows8 passes (at
 * least QUANT_GEMM_PACK_MIN: below it nothing is packed). Q8_0 without
 * VNNI: 4 and 7. Its tok pass computes all 8 lanes of a group with the
 * sign trick, so a group of 4 cost as much as one of 8, while a rows8 pass
 * unpacks a block once for all its tokens. Measured on the Zen 3 host
 * (Q8_0 640 x 2048, one thread, cache-resident, best of 200 calls, G
 * multiply-adds/s, before -> after): T = 3 (2 + 1 rows) 33.5-33.9 -> 35.3-
 * 36.8, T = 4 (tok) 24.8 -> 40.9-41.2, T = 5 30.8 -> 39.0, T = 6 37.0 ->
 * 40.5-41.0; T = 7 stays with tok (42.9 against 41.1 for 4 + 3), and 2 per
 * pass gave T = 4 37.3. The K types' rows8 lost at 4 rows (Q6_K T = 4
 * 28.6-34.7 against tok's 30.4-31.3), and with VNNI tok forms Q8_0's
 * products in one instruction: both keep 2 and QUANT_GEMM_PACK_MIN. */
ALWAYS_INLINE int rows8_tokens(enum qtype t)
{
#ifndef QUANT_GEMM_VNNI
	if (t == QTYPE_Q8_0)
		return 4;
#endif
	return 2;
}

ALWAYS_INLINE int64_t tok_group_min(enum qtype t)
{
#ifndef QUANT_GEMM_VNNI
	if (t == QTYPE_Q8_0)
		return 7;
#endif
	return QUANT_GEMM_PACK_MIN;
}

/* The two tok passes of an 8-row tile (rows r, r + 4) against ng groups;
 * the first carries the tile's prefetch. */
ALWAYS_INLINE void tok_tile(gemm_tok_fn tok, enum qtype t, int64_t n, const void *w,
			    size_t w_stride, int64_t r, const void *g, int ng, int64_t t0, int64_t T,
			    float *y, int64_t y_stride, const struct prefetch_plan *pf)
{
	tok(t, n, w, w_stride, r, g, ng, t0, T, y, y_stride, pf);
	tok(t, n, w, w_stride, r + 4, g, ng, t0, T, y, y_stride, NULL);
}

/* The gemm entry (quant.h) over a type's kernels: rows in tiles of 8; for
 * each tile of up to GEMM_TILE_GROUPS groups of tokens, two tok passes of
 * 4 rows, then rows8 for the tokens past the groups (rows8_tokens at a
 * time), the row tile two ahead prefetched during the first pass (each
 * tile, 8 x 680 bytes for the default model's LM head, stays in L1
 * meanwhile); rows past the last full tile go through tail. With more
 * than GEMM_TILE_GROUPS groups (prefill) the weights are read once per
 * token tile. group_bytes:
 * the packed bytes of one group of 8 tokens. The prefetches run on past
 * the last tile into rows up to r_pf (quant.h). */
ALWAYS_INLINE void gemm_tiles(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r0,
			      int64_t r1, const void *a, size_t a_stride, const void *packed,
			      size_t group_bytes, int64_t T, float *y, int64_t y_stride, int64_t r_pf,
			      gemm_tok_fn tok, gemm_rows8_fn rows8, gemm_tail_fn tail)
{
	const int64_t groups = quant_gemm_groups(T, packed != NULL, tok_group_min(t));
	const int64_t t_grouped = groups * QUANT_GEMM_GROUP < T ? groups * QUANT_GEMM_GROUP : T;
	const int64_t r_end = r1 - (r1 - r0) % 8;
	for (int64_t g0 = 0; g0 == 0 || g0 < groups; g0 += GEMM_TILE_GROUPS) {
		const int64_t g1 = groups - g0 < GEMM_TILE_GROUPS ? groups : g0 + GEMM_TILE_GROUPS;
		/* rows the prefetches may reach: past r_end only in the last
		 * token tile (another goes back to r0) */
		const int64_t pf_end = g1 == groups && r_pf > r_end ? r_pf : r_end;
		const int64_t t_left = g1 == groups ? t_grouped : T; /* leftover tokens */
		for (int64_t r = r0; r < r_end; r += 8) {
			const struct prefetch_plan plan = {
				.l1 = r + ROWS8_PREFETCH + 8 <= pf_end
					      ? (const char *)WROW(w, w_stride, r + ROWS8_PREFETCH)
					      : NULL,
				.l2 = r + PREFETCH_L2_ROWS + 8 <= pf_end
					      ? (const char *)WROW(w, w_stride, r + PREFETCH_L2_ROWS)
					      : NULL,
			};
			const struct prefetch_plan *pf = plan.l1 ? &plan : NULL;
			if (g1 > g0) {
				const void *g = (const uint8_t *)packed + (size_t)g0 * group_bytes;
				const int ng = (int)(g1 - g0);
				const int64_t t0 = g0 * QUANT_GEMM_GROUP;
				/* one group (a batched decode step of 4 .. 11
				 * tokens) as its own instance, ng a constant: its
				 * accumulators stay in registers. One thread,
				 * cache-resident, T = 8 (quant_bench --quick, two
				 * alternating runs, Zen 3): Q8_0 37.5 -> 48.3, Q5_0
				 * 50.5 -> 56.5, Q4_K 59 -> 72 G multiply-adds/s */
				if (ng == 1)
					tok_tile(tok, t, n, w, w_stride, r, g, 1, t0, T, y, y_stride, pf);
				else
					tok_tile(tok, t, n, w, w_stride, r, g, ng, t0, T, y, y_stride, pf);
			}
			for (int64_t tk = t_left, nt; tk < T; tk += nt) {
				const void *at = (const uint8_t *)a + tk * a_stride;
				const struct prefetch_plan *p = g1 == g0 && tk == t_left ? pf : NULL;
				nt = T - tk < rows8_tokens(t) ? T - tk : rows8_tokens(t);
				if (rows8_tokens(t) >= 4 && nt == 4)
					rows8(t, n, w, w_stride, r, at, a_stride, 4, y + tk * y_stride, y_stride,
					      p);
				else if (rows8_tokens(t) >= 3 && nt == 3)
					rows8(t, n, w, w_stride, r, at, a_stride, 3, y + tk * y_stride, y_stride,
					      p);
				else if (nt == 2)
					rows8(t, n, w, w_stride, r, at, a_stride, 2, y + tk * y_stride, y_stride,
					      p);
				else
					rows8(t, n, w, w_stride, r, at, a_stride, 1, y + tk * y_stride, y_stride,
					      p);
			}
		}
	}
	for (int64_t r = r_end; r < r1; r++)
		tail(t, n, w, w_stride, r, a, a_stride, T, y, y_stride);
}

#endif
