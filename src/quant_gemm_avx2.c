/* quant_gemm_avx2.c — Q4_0, Q5_0 and Q8_0 weights against Q8_0
 * activations: the dot entry and a matrix kernel (many weight rows x a
 * batch of tokens) with one arithmetic (AVX2 + FMA + F16C, registered by
 * quant.c after cpuid).
 *
 * The contract that makes a token's result independent of its batch:
 * every output, whichever kernel computes it, is
 *
 *     acc = 0;  for each block b in order:  acc = fma(dw_b * da_b, (float)isum_b, acc)
 *
 * with isum_b the exact int32 dot of block b's 32 quants (|isum_b| <=
 * 32 * 128 * 127 < 2^24, so the conversion is exact as well). The kernels
 * differ only in what they put in the vector lanes:
 *
 *  - rows8 (8 weight rows in the lanes, one or two tokens per pass;
 *    Q8_0 up to four): decode, and the tokens after the last full group
 *    of 8 (up to 3; Q8_0 up to 6: from there on the partial group goes
 *    through tok with its missing lanes dropped; see rows8_tokens in
 *    quant_avx2_int.h). Each row's block dot is formed by the
 *    sign trick (|q| * sign(a, q), vpmaddubsw, vpmaddwd) in 8 int32 lanes,
 *    and the 8 rows' lanes are summed by an unpack tree into one vector of
 *    8 isum_b (vphaddd would do it in fewer instructions but runs at 0.4
 *    per cycle on Zen 3, which made the kernel 2x slower).
 *  - tok (8 tokens in the lanes, 4 weight rows, up to GEMM_TILE_GROUPS
 *    groups of 8 per pass): batches. The tokens' activations are packed
 *    as quads (4 bytes of a token per int32 lane, quant_gemm_pack_row), a
 *    broadcast quad of weight bytes against a row of quads (vpmaddubsw)
 *    gives 32 products, and the lanes are already the tokens: no
 *    horizontal work, and the float scaling is one FMA per block per 8
 *    tokens. vpmaddubsw needs one unsigned operand: Q4_0/Q5_0 quants are
 *    offset to unsigned (q + 8, q + 16; the packed block sums take the
 *    offset back out exactly), unpacked once per block for every group,
 *    and their products add up in int16 over 4 quads, two groups per
 *    broadcast weight quad (one group at a time, 4 broadcast loads per 4
 *    vpmaddubsw set the pace: Q5_0 640 x 2048, one thread, Zen 3, best
 *    of 8 alternating runs, T = 32 80.9 -> 87.6 and T = 128 86.0 -> 93.9
 *    G multiply-adds/s; one group, T = 8, unchanged); Q8_0 uses the sign
 *    trick and runs two groups per pass, each broadcast quad serving both.
 *    Its narrow form (quant_kernels_narrow: no quant is -128, as every
 *    quantizer writes) moves the signs onto the weights, |a| * sign(q, a),
 *    so |a| is formed once per quad for 4 rows and each product costs one
 *    vpsignb instead of two.
 *  - dot: one row, one token (the dot entry; rows past the last group of 8
 *    rows).
 *
 * Measured on this machine (Zen 3, one thread, 640-wide Q8_0 rows; runs
 * vary by +-10%), against the lane-wise kernels these replace: rows in L2,
 * T = 8..32: 36-40 vs 27 GMAC/s; 32768 rows from memory, T = 1: 14-16 vs
 * 12-13 GMAC/s (rows8 prefetches the row tile after next: eight
 * interleaved row streams defeat the hardware prefetcher). End to end
 * (`ingot bench -t 2`): batch 8 decode 167 -> 211 tok/s, prefill 276 -> 435.
 * The quad kernels against the int16-pair kernel before them (one thread,
 * thread CPU time, best of several calls, a shared machine): Q4_0/Q5_0 640
 * x 256..4096, T = 32..128: 38-40 -> 78-84 GMAC/s; Q8_0 640 x 16384: T = 32
 * 41 -> 53, T = 8 (one group) 40 -> 41. Q8_0 stays below the others: the
 * sign trick and the immediate widening cost 4.5 vector operations per 32
 * products against 2.5. The narrow form, with the per-block division of
 * the prefetch and a per-block array of row pointers gone from the loop
 * (same benchmark): T = 8 45.5 -> 54.9, T = 32 54.8 -> 59.4 (the general
 * form 48.3 and 56.5). End to end (`ingot bench --batch 32 --prompt 512
 * --profile -t 1`, the other core busy): prefill gate_up 894 -> 580 ms,
 * qkv 251 -> 131 ms; batch 32 decode 132 -> 174-184 tok/s.
 *
 * The results differ from the lane-wise kernels (and from llama.cpp's) in
 * float rounding only: the integer sums are the same.
 *
 * VNNI builds. quant_gemm_avx512.c (AVX512-VNNI + VL, EVEX) and
 * quant_gemm_avxvnni.c (AVX-VNNI, VEX) define QUANT_GEMM_VNNI and include
 * this file: the same kernels, with vpdpbusd (4 unsigned x signed byte
 * products summed into each int32 lane, added to an accumulator, no int16
 * step) forming the integer sums. Only the integer sums change hands, so
 * every output is bit for bit the AVX2 build's:
 *  - block_lanes: |q| against sign(x, q) in one vpdpbusd instead of
 *    vpmaddubsw + vpmaddwd;
 *  - Q4_0/Q5_0 tok: the unsigned quads accumulate straight into int32,
 *    all 8 quads of a block at once and two groups of tokens per
 *    broadcast weight quad (quads8_unsigned_pair; one group at a time the
 *    loads set the pace). Q5_0 640 x 2048, T = 128, one thread, three
 *    runs each: 83-101 -> 110-118 G multiply-adds/s;
 *  - Q8_0 tok: the weights are made unsigned, u = q + 128 (q ^ 0x80, one
 *    vpxor per broadcast quad, shared by the pass's two groups), and
 *    isum = sum u * a - 128 * sum a from the packed block sums, as Q5_0's
 *    offset: one vector operation per 32 products against the narrow
 *    AVX2 form's three (vpsignb, vpmaddubsw, vpmaddwd), and no narrow form
 *    needed (q = -128 gives u = 0).
 *  - Q5_0 unpacking (legacy_uquants, EVEX only): the fifth bit as a byte
 *    mask loaded straight from qh.
 * And in every build, rows8 (decode) takes Q4_0/Q5_0 as unsigned quants
 * against the activations, less the offset times their sum once per
 * block for all 8 rows, in place of a vpsignb pair per row and block.
 * Both measured on a Zen 4 host (`quant_bench --quick`, Q5_0 640 x 2048,
 * one thread, two runs each): T = 1 avx512 24.0 -> 26.8 G multiply-adds/s,
 * avx2 21.4 -> 22.5; T = 2 avx512 34.4 -> 41.2, avx2 29.4 -> 31.3.
 * (The first VNNI forms were written on a Zen 3 machine without either
 * extension; Zen 4 hosts have run them since.) Each build registers as
 * quant_gemm_<isa>_register; tests/test_quant.c builds it a
 * third time under SIMDe (QUANT_SIMDE) and checks it bit for bit against
 * the AVX2 build and the contract above. */
#include <math.h>
#include <stdbool.h>

#include "quant_avx2_int.h"

/* Bytes of one block of weight type t. */
ALWAYS_INLINE size_t block_bytes(enum qtype t)
{
	switch (t) {
	case QTYPE_Q4_0: return sizeof(struct block_q4_0);
	case QTYPE_Q5_0: return sizeof(struct block_q5_0);
	default: return sizeof(struct block_q8_0);
	}
}

/* fp16 scale of block i of a weight row (every legacy block starts with it). */
ALWAYS_INLINE uint16_t block_d16(enum qtype t, const uint8_t *row, int64_t i)
{
	uint16_t d;
	memcpy(&d, row + (size_t)i * block_bytes(t), sizeof d);
	return d;
}

/* The exact sums of 4 adjacent products of unsigned u and signed x in 8
 * int32 lanes (u <= 128 and |x| <= 127: a vpmaddubsw pair stays within int16). */
static inline __m256i ublock_lanes(__m256i u, __m256i x)
{
#ifdef QUANT_GEMM_VNNI
	return dpbusd(_mm256_setzero_si256(), u, x);
#else
	return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
#endif
}

/* The exact block dot in 8 int32 lanes: q signed weight quants, x the
 * activation quants (|q| <= 16 for Q4_0, Q5_0; 127 for Q8_0; |x| <= 127):
 * |q| against x with q's sign. */
static inline __m256i block_lanes(__m256i q, __m256i x)
{
	return ublock_lanes(_mm256_sign_epi8(q, q), _mm256_sign_epi8(x, q));
}

/* ---- one row, one token ---- */

ALWAYS_INLINE float dot_one(enum qtype t, int64_t n, const void *w, const void *va)
{
	const struct block_q8_0 *a = va;
	float acc = 0.0f;
	for (int64_t i = 0; i < n / QK; i++) {
		int isum = hsum_epi32(block_lanes(legacy_quants(t, w, i), load256(a[i].qs)));
		float d = half_load(block_d16(t, w, i)) * half_load(a[i].d);
		acc = fmaf(d, (float)isum, acc);
	}
	return acc;
}

/* ---- rows8: 8 weight rows, one token ---- */

/* The quants of a Q4_0 / Q5_0 block plus the offset that makes them
 * unsigned (8: the nibble; 16: nibble | bit << 4), for vpmaddubsw and
 * vpdpbusd. The EVEX build makes Q5_0's 16s under a byte mask straight
 * from the 32 high bits (kmovd, one zero-masked vmovdqu8) instead of
 * spreading the bits into bytes (bits_expand: 4 vector operations and a
 * broadcast). */
ALWAYS_INLINE __m256i legacy_uquants(enum qtype t, const void *w, int64_t i)
{
	if (t == QTYPE_Q4_0)
		return nibbles_expand(((const struct block_q4_0 *)w)[i].qs);
	const struct block_q5_0 *b = (const struct block_q5_0 *)w + i;
#if defined(QUANT_GEMM_VNNI) && QUANT_GEMM_VNNI == QUANT_GEMM_VNNI_EVEX
	uint32_t qh;
	memcpy(&qh, b->qh, sizeof qh);
	return _mm256_or_si256(nibbles_expand(b->qs),
			       _mm256_maskz_mov_epi8((__mmask32)qh, _mm256_set1_epi8(0x10)));
#else
	__m256i hi = _mm256_and_si256(bits_expand(b->qh), _mm256_set1_epi8(0x10));
	return _mm256_or_si256(nibbles_expand(b->qs), hi);
#endif
}

/* log2 of that offset */
ALWAYS_INLINE int legacy_offset_log2(enum qtype t)
{
	return t == QTYPE_Q4_0 ? 3 : 4;
}

/* The sum of the 32 signed bytes of x in every int32 lane. */
static inline __m256i bytes_sum_bcast(__m256i x)
{
	__m256i s = ublock_lanes(_mm256_set1_epi8(1), x);
	s = _mm256_add_epi32(s, _mm256_permute2x128_si256(s, s, 0x01));
	s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0x4e));
	return _mm256_add_epi32(s, _mm256_shuffle_epi32(s, 0xb1));
}

/* nt (1 or 2, a constant at each instance) tokens at a, a_stride bytes
 * apart, into y + r, y + y_stride + r: each weight block is unpacked once
 * for both (Q5_0's unpacking costs as much as its products). */
ALWAYS_INLINE void rows8(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r,
			 const void *a, size_t a_stride, int nt, float *y, int64_t y_stride,
			 const struct prefetch_plan *pf)
{
	const uint8_t *w0 = WROW(w, w_stride, r);
	const struct block_q8_0 *ac[ROWS8_MAX_TOKENS];
	__m256 acc[ROWS8_MAX_TOKENS];
	FOR_COLS(c, nt) {
		ac[c] = (const struct block_q8_0 *)((const uint8_t *)a + (size_t)c * a_stride);
		acc[c] = _mm256_setzero_ps();
	}
	const size_t pf_step = prefetch_step(w_stride, n / QK);
	for (int64_t i = 0; i < n / QK; i++) {
		prefetch_slice(pf, w_stride, pf_step, i);
		__m256i x[ROWS8_MAX_TOKENS], s03[ROWS8_MAX_TOKENS], s47[ROWS8_MAX_TOKENS];
		FOR_COLS(c, nt)
			x[c] = load256(ac[c][i].qs);
		/* Q4_0 / Q5_0: the unsigned quants u = q + o against x, less
		 * o * sum x (the same for the 8 rows) at the end: no vpsignb
		 * pair per row and block, and cheaper unpacking */
#define ROW_QUANTS(j) (t == QTYPE_Q8_0 ? legacy_quants(t, w0 + (j) * w_stride, i) \
				       : legacy_uquants(t, w0 + (j) * w_stride, i))
#define LANES(q, x) (t == QTYPE_Q8_0 ? block_lanes(q, x) : ublock_lanes(q, x))
#define FOUR_ROWS(j, out)                                                                 \
	do {                                                                              \
		__m256i qa = ROW_QUANTS(j), qb = ROW_QUANTS(j + 1);                       \
		__m256i qc = ROW_QUANTS(j + 2), qd = ROW_QUANTS(j + 3);                   \
		FOR_COLS(c, nt)                                                           \
			out[c] = sum_pairs64(sum_pairs32(LANES(qa, x[c]), LANES(qb, x[c])), \
					     sum_pairs32(LANES(qc, x[c]), LANES(qd, x[c])));  \
	} while (0)
		FOUR_ROWS(0, s03);
		FOUR_ROWS(4, s47);
#undef FOUR_ROWS
#undef LANES
#undef ROW_QUANTS
		/* the 8 rows' fp16 scales, packed in general registers (idle here) */
		uint64_t h0 = 0, h1 = 0;
		for (int j = 0; j < 4; j++) {
			uint64_t d0 = block_d16(t, w0 + j * w_stride, i);
			uint64_t d1 = block_d16(t, w0 + (j + 4) * w_stride, i);
			__asm__("" : "+r"(d0), "+r"(d1)); /* or GCC vectorizes the packing */
			h0 |= d0 << 16 * j;
			h1 |= d1 << 16 * j;
		}
		__m256 dw = _mm256_cvtph_ps(_mm_set_epi64x((long long)h1, (long long)h0));
		FOR_COLS(c, nt) {
			__m256i is = sum_halves(s03[c], s47[c]);
			if (t != QTYPE_Q8_0)
				is = _mm256_sub_epi32(is, _mm256_slli_epi32(bytes_sum_bcast(x[c]),
									    legacy_offset_log2(t)));
			__m256 isum = _mm256_cvtepi32_ps(is);
			__m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(half_load(ac[c][i].d)));
			acc[c] = _mm256_fmadd_ps(d, isum, acc[c]);
		}
	}
	FOR_COLS(c, nt)
		_mm256_storeu_ps(y + c * y_stride + r, acc[c]);
}

/* ---- tok: 4 weight rows, groups of 8 tokens ---- */

/* The scales of block i of the 4 rows, each broadcast: read once per
 * block for every group of tokens. */
ALWAYS_INLINE void tok_scales(enum qtype t, const uint8_t *w0, size_t w_stride, int64_t i,
			      __m256 dw[4])
{
	_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
		dw[j] = _mm256_set1_ps(half_load(block_d16(t, w0 + j * w_stride, i)));
}

/* The float step of a block for 4 rows (scales dw) and one group of tokens
 * (block scales da): acc[j] = fma(dw_j * da, isum_j, acc[j]). */
ALWAYS_INLINE void tok_step(const __m256 dw[4], __m256 da, const __m256i isum[4], __m256 acc[4])
{
	_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
		acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(dw[j], da), _mm256_cvtepi32_ps(isum[j]), acc[j]);
}

/* Quads k0 .. k0+3 of 4 rows of unsigned quants (wq) against nt (1 or 2)
 * packed group blocks ba, bb: the products add up in int16 (|sum| <= 4 *
 * 2 * 31 * 128 < 2^15), then widen to the 8 tokens' int32 partial sums of
 * each row, into oa (and ob). (VNNI: straight into the int32 sums.) */
#ifdef QUANT_GEMM_VNNI
#define QUAD_PRODUCTS(p, w, x) dpbusd(p, w, x)
#else
#define QUAD_PRODUCTS(p, w, x) _mm256_add_epi16(p, _mm256_maddubs_epi16(w, x))
#endif
ALWAYS_INLINE void quads4_unsigned(const int32_t wq[4][QK / 4], const struct quant_gemm_block *ba,
				   const struct quant_gemm_block *bb, int nt, int k0, __m256i oa[4],
				   __m256i ob[4])
{
	/* nt is a constant at each instance; with 2, each broadcast weight
	 * quad serves both groups */
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
	__m256i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
#define QUAD(k)                                                                  \
	do {                                                                     \
		const __m256i x = load256(ba->quads[k]);                         \
		const __m256i y = nt == 2 ? load256(bb->quads[k]) : x;           \
		ROW(0, a0, b0, k);                                               \
		ROW(1, a1, b1, k);                                               \
		ROW(2, a2, b2, k);                                               \
		ROW(3, a3, b3, k);                                               \
	} while (0)
#define ROW(j, A, B, k)                                                          \
	do {                                                                     \
		const __m256i w = _mm256_set1_epi32(wq[j][k]);                   \
		A = QUAD_PRODUCTS(A, w, x);                                      \
		KEEP(A);                                                         \
		if (nt == 2) {                                                   \
			B = QUAD_PRODUCTS(B, w, y);                              \
			KEEP(B);                                                 \
		}                                                                \
	} while (0)
	QUAD(k0);
	QUAD(k0 + 1);
	QUAD(k0 + 2);
	QUAD(k0 + 3);
#undef ROW
#undef QUAD
#ifdef QUANT_GEMM_VNNI
	oa[0] = a0, oa[1] = a1, oa[2] = a2, oa[3] = a3;
	if (nt == 2)
		ob[0] = b0, ob[1] = b1, ob[2] = b2, ob[3] = b3;
#else
	const __m256i ones = _mm256_set1_epi16(1);
	oa[0] = _mm256_madd_epi16(a0, ones);
	oa[1] = _mm256_madd_epi16(a1, ones);
	oa[2] = _mm256_madd_epi16(a2, ones);
	oa[3] = _mm256_madd_epi16(a3, ones);
	if (nt == 2) {
		ob[0] = _mm256_madd_epi16(b0, ones);
		ob[1] = _mm256_madd_epi16(b1, ones);
		ob[2] = _mm256_madd_epi16(b2, ones);
		ob[3] = _mm256_madd_epi16(b3, ones);
	}
#endif
}
#undef QUAD_PRODUCTS

#ifdef QUANT_GEMM_VNNI
/* VNNI: all 8 quads of 4 rows of unsigned quants (wq) against two packed
 * group blocks at once, each broadcast quad serving both (as Q8_0's tok
 * does): per quad 2 loads of tokens and 4 broadcasts for 8 vpdpbusd, where
 * one group at a time takes 1 and 4 for 4 and the loads, not the
 * multiplies, set the pace. The int32 sums are exactly quads4_unsigned's
 * two halves added (|sum| <= 32 * 31 * 127). */
ALWAYS_INLINE void quads8_unsigned_pair(const int32_t wq[4][QK / 4],
					const struct quant_gemm_block *ba,
					const struct quant_gemm_block *bb, __m256i ia[4], __m256i ib[4])
{
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
	__m256i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
	_Pragma("GCC unroll 8") for (int k = 0; k < QK / 4; k++) {
		const __m256i xa = load256(ba->quads[k]), xb = load256(bb->quads[k]);
#define QUAD(j, A, B)                                             \
	do {                                                      \
		const __m256i w = _mm256_set1_epi32(wq[j][k]);    \
		A = dpbusd(A, w, xa);                             \
		B = dpbusd(B, w, xb);                             \
	} while (0)
		QUAD(0, a0, b0);
		QUAD(1, a1, b1);
		QUAD(2, a2, b2);
		QUAD(3, a3, b3);
#undef QUAD
		KEEP(a0);
		KEEP(a1);
		KEEP(a2);
		KEEP(a3);
		KEEP(b0);
		KEEP(b1);
		KEEP(b2);
		KEEP(b3);
	}
	ia[0] = a0, ia[1] = a1, ia[2] = a2, ia[3] = a3;
	ib[0] = b0, ib[1] = b1, ib[2] = b2, ib[3] = b3;
}
#endif

/* The float step of a Q4_0/Q5_0 block for 4 rows (scales dw) and the
 * group block b, from the rows' sums of u * a in us: less the offset
 * times b's activation sums, then tok_step. */
ALWAYS_INLINE void tok_unsigned_step(enum qtype t, const __m256 dw[4],
				     const struct quant_gemm_block *b, __m256i us[4], __m256 acc[4])
{
	const __m256i off = _mm256_slli_epi32(load256(b->sums), legacy_offset_log2(t));
	_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)
		us[j] = _mm256_sub_epi32(us[j], off);
	tok_step(dw, _mm256_loadu_ps(b->d), us, acc);
}

/* The exact int32 sums of a whole block of 4 rows of unsigned quants (wq)
 * against nt (1 or 2, a constant at each instance) group blocks ba, bb:
 * the two halves of quads4_unsigned added, or with VNNI and two groups
 * all 8 quads at once (quads8_unsigned_pair: the same sums). */
ALWAYS_INLINE void block_unsigned(const int32_t wq[4][QK / 4], const struct quant_gemm_block *ba,
				  const struct quant_gemm_block *bb, int nt, __m256i ia[4],
				  __m256i ib[4])
{
#ifdef QUANT_GEMM_VNNI
	if (nt == 2) {
		quads8_unsigned_pair(wq, ba, bb, ia, ib);
		return;
	}
#endif
	__m256i ha[4], hb[4];
	quads4_unsigned(wq, ba, bb, nt, 0, ia, ib);
	quads4_unsigned(wq, ba, bb, nt, 4, ha, hb);
	_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
		ia[j] = _mm256_add_epi32(ia[j], ha[j]);
		if (nt == 2)
			ib[j] = _mm256_add_epi32(ib[j], hb[j]);
	}
}

/* Q4_0 / Q5_0: 4 rows x ng groups (at g, nb blocks apart). Each block of
 * the 4 rows is unpacked once, as unsigned quants u = q + o, for all the
 * groups; a broadcast quad of u against a row of packed quads
 * (vpmaddubsw) gives 32 products in 16 int16, 4 quads' worth at a time
 * (block_unsigned); then isum = sum u * a - o * sum a, exact. */
ALWAYS_INLINE void tok_unsigned(enum qtype t, int64_t n, const uint8_t *w0, size_t w_stride,
				const struct quant_gemm_block *g, int64_t nb, int ng,
				__m256 acc[][4], const struct prefetch_plan *pf)
{
	int32_t wq[4][QK / 4] __attribute__((aligned(32)));
	const size_t pf_step = prefetch_step(w_stride, nb);
	for (int64_t i = 0; i < n / QK; i++) {
		prefetch_slice(pf, w_stride, pf_step, i);
		for (int j = 0; j < 4; j++)
			_mm256_store_si256((__m256i *)wq[j], legacy_uquants(t, w0 + j * w_stride, i));
		__m256 dw[4];
		tok_scales(t, w0, w_stride, i, dw);
		/* the broadcasts below must read wq from memory (one load each),
		 * not be rebuilt from the registers by shuffles */
		__asm__ volatile("" ::: "memory");
		/* two groups per broadcast weight quad, then the odd one; wq is
		 * broadcast anew for each (hoisted out of the loop, the 32
		 * broadcasts spill to the stack) */
		int gi = 0;
		for (; gi + 2 <= ng; gi += 2) {
			const struct quant_gemm_block *ba = g + gi * nb + i, *bb = ba + nb;
			const int32_t(*wqg)[QK / 4] = wq;
			__asm__("" : "+r"(wqg));
			__m256i ia[4], ib[4];
			block_unsigned(wqg, ba, bb, 2, ia, ib);
			tok_unsigned_step(t, dw, ba, ia, acc[gi]);
			tok_unsigned_step(t, dw, bb, ib, acc[gi + 1]);
		}
		for (; gi < ng; gi++) {
			const struct quant_gemm_block *b = g + gi * nb + i;
			const int32_t(*wqg)[QK / 4] = wq;
			__asm__("" : "+r"(wqg));
			__m256i is[4];
			block_unsigned(wqg, b, NULL, 1, is, NULL);
			tok_unsigned_step(t, dw, b, is, acc[gi]);
		}
	}
}

/* The exact int32 dots of one Q8_0 block of 4 rows (quants at qs, row j's
 * j * w_stride on) against nt (1 or 2) packed group blocks xa, xb: ia[j],
 * ib[j] hold the 8 tokens' sums. vpmaddubsw needs one unsigned operand,
 * and a pair of products can reach 2 * 128 * 127, so each product is
 * widened at once (vpmaddwd). With narrow (a constant) the unsigned side
 * is |a|, formed once per quad for all 4 rows, against sign(q, a): one
 * vpsignb per broadcast weight quad and group, valid only when no quant
 * is -128 (its negation does not fit in a byte). Otherwise |q| against
 * sign(a, q), which holds for every q (a is never -128): a second
 * vpsignb per broadcast quad.
 *
 * VNNI: each broadcast weight quad is made unsigned once, u = q + 128
 * (q ^ 0x80), for both groups; vpdpbusd sums u * a into int32 (|sum| <=
 * 32 * 255 * 127), less 128 * sum a at the end. Exact for every q, so
 * narrow makes no difference (the VNNI builds never set it). */
#ifdef QUANT_GEMM_VNNI
#define Q8_WEIGHTS(q) _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80))
#define Q8_PRODUCTS(A, q, x, ux) ((void)(ux), dpbusd(A, q, x))
#define Q8_FINISH(A, b) _mm256_sub_epi32(A, _mm256_slli_epi32(load256((b)->sums), 7))
#else
#define Q8_WEIGHTS(q) (q)
#define Q8_PRODUCTS(A, q, x, ux)                                                            \
	_mm256_add_epi32(A, _mm256_madd_epi16(                                              \
				    narrow ? _mm256_maddubs_epi16(ux, _mm256_sign_epi8(q, x))     \
					   : _mm256_maddubs_epi16(_mm256_sign_epi8(q, q),     \
								  _mm256_sign_epi8(x, q)), \
				    _mm256_set1_epi16(1)))
#define Q8_FINISH(A, b) (A)
#endif
ALWAYS_INLINE void q8_quads_signed(const uint8_t *qs, size_t w_stride,
				   const struct quant_gemm_block *xa, const struct quant_gemm_block *xb,
				   int nt, bool narrow, __m256i ia[4], __m256i ib[4])
{
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
	__m256i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
	_Pragma("GCC unroll 8") for (int k = 0; k < QK / 4; k++) {
		const __m256i x = load256(xa->quads[k]);
		const __m256i y = nt == 2 ? load256(xb->quads[k]) : x;
		/* |a|, for the narrow form only */
		const __m256i ux = narrow ? _mm256_sign_epi8(x, x) : x;
		const __m256i uy = narrow ? _mm256_sign_epi8(y, y) : y;
#define QUAD(j, A, B)                                                         \
	do {                                                                  \
		int32_t wv;                                                   \
		memcpy(&wv, qs + (j) * w_stride + 4 * k, sizeof wv);          \
		const __m256i q = Q8_WEIGHTS(_mm256_set1_epi32(wv));          \
		A = Q8_PRODUCTS(A, q, x, ux);                                 \
		if (nt == 2)                                                  \
			B = Q8_PRODUCTS(B, q, y, uy);                         \
	} while (0)
		QUAD(0, a0, b0);
		QUAD(1, a1, b1);
		QUAD(2, a2, b2);
		QUAD(3, a3, b3);
#undef QUAD
		KEEP(a0);
		KEEP(a1);
		KEEP(a2);
		KEEP(a3);
		if (nt == 2) {
			KEEP(b0);
			KEEP(b1);
			KEEP(b2);
			KEEP(b3);
		}
	}
	ia[0] = Q8_FINISH(a0, xa), ia[1] = Q8_FINISH(a1, xa);
	ia[2] = Q8_FINISH(a2, xa), ia[3] = Q8_FINISH(a3, xa);
	if (nt == 2) {
		b0 = Q8_FINISH(b0, xb), b1 = Q8_FINISH(b1, xb);
		b2 = Q8_FINISH(b2, xb), b3 = Q8_FINISH(b3, xb);
	}
	ib[0] = b0, ib[1] = b1, ib[2] = b2, ib[3] = b3;
}
#undef Q8_WEIGHTS
#undef Q8_PRODUCTS
#undef Q8_FINISH

/* Q8_0: 4 rows x nt (1 or 2, a constant at each instance) groups at ga,
 * gb, block by block (q8_quads_signed, narrow or not); each broadcast
 * weight quad serves both groups. */
ALWAYS_INLINE void tok_signed(int64_t n, const uint8_t *w0, size_t w_stride,
			      const struct quant_gemm_block *ga, const struct quant_gemm_block *gb,
			      int nt, bool narrow, __m256 acc[][4], const struct prefetch_plan *pf)
{
	const int64_t nb = n / QK;
	__m256 fa[4], fb[4];
	for (int j = 0; j < 4; j++)
		fa[j] = fb[j] = _mm256_setzero_ps();
	const size_t pf_step = prefetch_step(w_stride, nb);
	for (int64_t i = 0; i < nb; i++) {
		prefetch_slice(pf, w_stride, pf_step, i);
		const uint8_t *qs = (const uint8_t *)((const struct block_q8_0 *)w0 + i)->qs;
		const struct quant_gemm_block *xb = nt == 2 ? gb + i : NULL;
		__m256i ia[4], ib[4];
		q8_quads_signed(qs, w_stride, ga + i, xb, nt, narrow, ia, ib);
		__m256 dw[4];
		tok_scales(QTYPE_Q8_0, w0, w_stride, i, dw);
		tok_step(dw, _mm256_loadu_ps(ga[i].d), ia, fa);
		if (nt == 2)
			tok_step(dw, _mm256_loadu_ps(gb[i].d), ib, fb);
	}
	for (int j = 0; j < 4; j++) {
		acc[0][j] = fa[j];
		if (nt == 2)
			acc[1][j] = fb[j];
	}
}

/* Rows r .. r+3 for the ng groups of tokens at g (the first is token t0):
 * into y, the lanes of tokens t0 .. T-1 only (a partial last group's other
 * lanes are computed and dropped). narrow (a constant): Q8_0 weights hold
 * no -128 (q8_quads_signed). */
ALWAYS_INLINE void tok_rows4_any(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r,
				 const void *vg, int ng, int64_t t0, int64_t T, float *y,
				 int64_t y_stride, const struct prefetch_plan *pf, bool narrow)
{
	const struct quant_gemm_block *g = vg;
	const uint8_t *w0 = WROW(w, w_stride, r);
	const int64_t nb = n / QK;
	__m256 acc[GEMM_TILE_GROUPS][4];
	if (t == QTYPE_Q8_0) {
		int gi = 0;
		for (; gi + 2 <= ng; gi += 2)
			tok_signed(n, w0, w_stride, g + gi * nb, g + (gi + 1) * nb, 2, narrow, acc + gi,
				   gi == 0 ? pf : NULL);
		if (gi < ng)
			tok_signed(n, w0, w_stride, g + gi * nb, NULL, 1, narrow, acc + gi,
				   gi == 0 ? pf : NULL);
	} else {
		for (int gi = 0; gi < ng; gi++)
			for (int j = 0; j < 4; j++)
				acc[gi][j] = _mm256_setzero_ps();
		tok_unsigned(t, n, w0, w_stride, g, nb, ng, acc, pf);
	}
	for (int gi = 0; gi < ng; gi++) {
		float o[4][QUANT_GEMM_GROUP] __attribute__((aligned(32)));
		for (int j = 0; j < 4; j++)
			_mm256_store_ps(o[j], acc[gi][j]);
		const int64_t tg = t0 + gi * QUANT_GEMM_GROUP;
		const int lanes = (int)(T - tg < QUANT_GEMM_GROUP ? T - tg : QUANT_GEMM_GROUP);
		for (int l = 0; l < lanes; l++)
			for (int j = 0; j < 4; j++)
				y[(tg + l) * y_stride + r + j] = o[j][l];
	}
}

ALWAYS_INLINE void tok_rows4(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r,
			     const void *vg, int ng, int64_t t0, int64_t T, float *y,
			     int64_t y_stride, const struct prefetch_plan *pf)
{
	tok_rows4_any(t, n, w, w_stride, r, vg, ng, t0, T, y, y_stride, pf, false);
}

ALWAYS_INLINE void tok_rows4_narrow(enum qtype t, int64_t n, const void *w, size_t w_stride,
				    int64_t r, const void *vg, int ng, int64_t t0, int64_t T,
				    float *y, int64_t y_stride, const struct prefetch_plan *pf)
{
	tok_rows4_any(t, n, w, w_stride, r, vg, ng, t0, T, y, y_stride, pf, true);
}

/* ---- the entries ---- */

/* Weight row r (past the last 8-row tile) against all T tokens. */
ALWAYS_INLINE void tail_rows(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r,
			     const void *a, size_t a_stride, int64_t T, float *y, int64_t y_stride)
{
	for (int64_t tk = 0; tk < T; tk++)
		y[tk * y_stride + r] =
			dot_one(t, n, WROW(w, w_stride, r), (const uint8_t *)a + tk * a_stride);
}

/* A gemm entry: gemm_tiles over the tok kernel given, rows8 and tail_rows. */
#define GEMM_ENTRY(fn, type, tok)                                                             \
	static void fn(int64_t n, const void *w, size_t w_stride, int64_t r0, int64_t r1,      \
		       const void *a, size_t a_stride, const void *packed, int64_t T, float *y,  \
		       int64_t y_stride, int64_t r_pf)                                           \
	{                                                                                  \
		gemm_tiles(type, n, w, w_stride, r0, r1, a, a_stride, packed,              \
			   (size_t)(n / QK) * sizeof(struct quant_gemm_block), T, y, y_stride, \
			   r_pf, tok, rows8, tail_rows);                                   \
	}

/* Each type's dot and gemm. */
#define LEGACY_KERNELS(name, type)                                                             \
	static void dot_##name(int64_t n, float *out, const void *w, const void *a)          \
	{                                                                                  \
		*out = dot_one(type, n, w, a);                                             \
	}                                                                                  \
	GEMM_ENTRY(gemm_##name, type, tok_rows4)

LEGACY_KERNELS(q4_0, QTYPE_Q4_0)
LEGACY_KERNELS(q5_0, QTYPE_Q5_0)
LEGACY_KERNELS(q8_0, QTYPE_Q8_0)

/* Q8_0 weights with no quant of -128 (quant_kernels_narrow); the VNNI
 * kernel serves every Q8_0 weight alike. */
#ifdef QUANT_GEMM_VNNI
#define gemm_q8_0_narrow gemm_q8_0
#else
GEMM_ENTRY(gemm_q8_0_narrow, QTYPE_Q8_0, tok_rows4_narrow)
#endif

/* The build's name: quant_gemm_avx2_register, quant_gemm_avx512_register,
 * quant_gemm_avxvnni_register (quant_int.h), or the test's. */
#ifndef QUANT_GEMM_REGISTER
#define QUANT_GEMM_REGISTER quant_gemm_avx2_register
#endif

/* Replaces the dot entries of the three types (and clears their dot_multi:
 * quant_dot_multi then calls this dot per row, which agrees with gemm) and
 * sets their gemm entries; narrow: the narrow twin's (quant_kernels_narrow). */
void QUANT_GEMM_REGISTER(struct quant_kernels *k, bool narrow)
{
	k->dot[QTYPE_Q4_0] = dot_q4_0;
	k->dot[QTYPE_Q5_0] = dot_q5_0;
	k->dot[QTYPE_Q8_0] = dot_q8_0;
	k->dot_multi[QTYPE_Q4_0] = NULL;
	k->dot_multi[QTYPE_Q5_0] = NULL;
	k->dot_multi[QTYPE_Q8_0] = NULL;
	k->gemm[QTYPE_Q4_0] = gemm_q4_0;
	k->gemm[QTYPE_Q5_0] = gemm_q5_0;
	k->gemm[QTYPE_Q8_0] = narrow ? gemm_q8_0_narrow : gemm_q8_0;
}
