/* quant_gemm_k_avx2.c — Q4_K and Q6_K weights against Q8_K activations:
 * the dot and dot_multi entries and a matrix kernel (many weight rows x a
 * batch of tokens) with one arithmetic (AVX2 + FMA + F16C, registered by
 * quant.c after cpuid).
 *
 * The contract that makes a token's result independent of its batch:
 * every output, whichever kernel computes it, is
 *
 *     acc = accm = 0;  for each super-block b in order:
 *         acc = fma(dw_b * da_b, (float)S_b, acc)
 *         accm = fma(dminw_b * da_b, (float)M_b, accm)      (Q4_K)
 *     result: acc - accm (Q4_K), acc (Q6_K)
 *
 * with S_b the exact int32 sum over the 16 (Q6_K) or 8 (Q4_K) sub-blocks
 * of scale * (dot of the sub-block's quants with the activations), and for
 * Q4_K M_b the exact sum of min * (the activations' sub-block sum, from
 * the Q8_K bsums). |S_b| <= 256 * 32 * 128 * 127 < 2^31 (Q6_K: |q| <= 32,
 * |scale| <= 128; Q4_K: 256 * 15 * 63 * 127), so int32 holds them; the
 * conversion to float rounds above 2^24 but is one and the same operation
 * in every kernel. (The lane-wise dot these replace FMA'd 8 int32 lanes
 * per super-block into 8 float lanes and reduced them at the end of the
 * row, an order a kernel with tokens in the lanes cannot reproduce.)
 *
 * Q4_K's scale and min parts keep separate accumulators, as the lane-wise
 * dot and llama.cpp's kernels do. (One accumulator for both, fma with
 * -dminw_b * da_b, is as exact, but moved one of the greedy reference
 * test's first-token logits 0.615 from llama.cpp's, over its 0.6
 * tolerance; this model amplifies float-order differences: the scalar
 * reference and the lane-wise kernels differ by up to 1.6 on those
 * prompts.) Q6_K's S_b is formed from u = q + 32 as sum scale * u * a
 * minus 32 * sum scale * bsum, <= 2^28 each. The kernels differ only in
 * what they put in the vector lanes:
 *
 *  - dot / dot_multi (one weight row, 1 .. 4 tokens): the table's entries,
 *    and the rows past the last 8-row tile. The sub-block products are
 *    formed as before (vpmaddubsw with the unsigned quants, vpmaddwd with
 *    the scales) in 8 int32 lanes, summed across the lanes per super-block.
 *  - rows8 (8 weight rows in the lanes, one or two tokens per pass):
 *    decode, and the tokens past the last group. The same lanes per row,
 *    the 8 rows' summed by the unpack tree of quant_gemm_avx2.c into one
 *    vector of 8 S_b, the float step on the 8 rows at once.
 *  - tok8 (8 tokens in the lanes, 4 weight rows): batches. The tokens'
 *    Q8_K rows are packed as quads (4 activation bytes per token and int32
 *    lane, quant_gemm_pack_row); 4 unsigned weight bytes broadcast against
 *    a quad with vpmaddubsw give each token's 4 products summed in two
 *    int16, which add up over a run of quads while they fit (Q4_K: the 8
 *    quads of a sub-block; Q6_K: 2) and are then weighed with the
 *    sub-block's scale by vpmaddwd into the int32 lanes: 32 multiply-adds
 *    per vpmaddubsw, about two instructions per 32 instead of the dot's
 *    four. Q4_K's M_b and Q6_K's offset come from 8 vpmaddwd against the
 *    packed bsum pairs. The unpacked weights (bytes, scale pairs) are
 *    stored and read back by broadcast loads, as in quant_gemm_avx2.c,
 *    once per super-block for all the groups of a pass (up to
 *    GEMM_TILE_GROUPS): one thread, 640 rows, T = 32..512, Q4_K 55-70 ->
 *    81-93 G multiply-adds/s, Q6_K 50-70 -> 68-80 (a shared machine).
 *
 * Measured (Zen 3, one thread, 640 rows, thread CPU time, a shared and
 * loaded machine: +-10%), against the lane-wise dot_multi: T = 8, 32:
 * Q4_K 1.6-1.9x (n = 1024: 138 -> 75 us for T = 8), Q6_K 1.3-1.45x; T = 1
 * (rows8) within noise of it.
 *
 * The results differ from the lane-wise kernels (and from llama.cpp's) in
 * float rounding only: the integer sums are the same.
 *
 * VNNI builds (quant_gemm_k_avx512.c, quant_gemm_k_avxvnni.c define
 * QUANT_GEMM_VNNI and include this file): tok8's sums by vpdpbusd, a
 * whole scale run at a time into int32 and weighed by vpmulld, two groups
 * of tokens per broadcast weight quad (tok8_sums_vnni); everything else as
 * in the AVX2 build, so the results are its bits. Zen 4, one thread, 640
 * rows of 2048, three runs, AVX2 -> AVX-512 build in the same run: T = 32
 * Q4_K 114 -> 130, Q6_K 96 -> 122; T = 128 Q4_K 116 -> 136, Q6_K 98 -> 128
 * G multiply-adds/s; T = 8 (one group) within noise. */
#include <math.h>
#include <stddef.h>

#include "quant_avx2_int.h"

/* ---- the float step of a super-block, scalar and 8 lanes ---- */

/* d * S into acc and (Q4_K) dmin * M into accm, both d_w * d_a */
ALWAYS_INLINE float kq_step(float dw, float da, int s, float acc)
{
	return fmaf(dw * da, (float)s, acc);
}

ALWAYS_INLINE __m256 kq_step8(__m256 dw, __m256 da, __m256i s, __m256 acc)
{
	return _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(s), acc);
}

/* ---- one super-block of one weight row in lanes, 1 .. 4 tokens ---- */

/* Q4_K: S of token c in the 8 int32 lanes of s[c], M in the 4 of m[c];
 * the nibbles and scales of each 64-element chunk unpacked once for the
 * tokens. b is super-block i of the row, a the first token's row. */
ALWAYS_INLINE void q4k_lanes(const struct block_q4_K *b, const void *a, size_t a_stride, int64_t i,
			     int nc, __m256i *s, __m128i *m)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	__m256i sm = k4_scales_mins(b->scales);
	__m256i sc = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
	FOR_COLS(c, nc) {
		s[c] = _mm256_setzero_si256();
		m[c] = k4_min_sums(sm, (ACT_ROW(struct block_q8_K, a, a_stride, c) + i)->bsums);
	}
	_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
		__m256i q = load256(b->qs + 32 * j);
		__m256i lo = _mm256_and_si256(q, m4);
		__m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
		__m256i s_lo = _mm256_shuffle_epi8(sc, BCAST16(2 * j));
		__m256i s_hi = _mm256_shuffle_epi8(sc, BCAST16(2 * j + 1));
		FOR_COLS(c, nc) {
			const struct block_q8_K *ac = ACT_ROW(struct block_q8_K, a, a_stride, c) + i;
			s[c] = _mm256_add_epi32(s[c], k4_chunk(lo, hi, ac->qs + 64 * j, s_lo, s_hi));
			KEEP(s[c]);
		}
	}
}

/* Q6_K: S of token c in the 8 int32 lanes of s[c]: the offset correction
 * plus the scaled sums of the 16 sub-blocks, each quarter's quants and
 * scales unpacked once for the tokens. */
ALWAYS_INLINE void q6k_lanes(const struct block_q6_K *b, const void *a, size_t a_stride, int64_t i,
			     int nc, __m256i *s)
{
	__m256i sc16 = _mm256_cvtepi8_epi16(load128(b->scales));
	FOR_COLS(c, nc)
		s[c] = offset_correction(sc16, (ACT_ROW(struct block_q8_K, a, a_stride, c) + i)->bsums, 5);
	_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
		__m256i sc = scales_half(sc16, h);
		__m256i qh = load256(b->qh + 32 * h);
		__m256i l0 = load256(b->ql + 64 * h), l1 = load256(b->ql + 64 * h + 32);
		_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
			__m256i u = q6k_quarter(k & 1 ? l1 : l0, qh, k);
			__m256i sk = _mm256_shuffle_epi8(sc, bcast_pair16(k));
			FOR_COLS(c, nc) {
				const struct block_q8_K *ac = ACT_ROW(struct block_q8_K, a, a_stride, c) + i;
				__m256i p = _mm256_maddubs_epi16(u, load256(ac->qs + 128 * h + 32 * k));
				s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(p, sk));
				KEEP(s[c]);
			}
		}
	}
}

/* ---- one weight row, 1 .. 4 tokens: the lanes summed per super-block ---- */

ALWAYS_INLINE void q4_K_dot_rows(int64_t n, float *out, const void *vw, const void *a,
				 size_t a_stride, int nc)
{
	const struct block_q4_K *w = vw;
	float acc[QUANT_MULTI_MAX], accm[QUANT_MULTI_MAX];
	FOR_COLS(c, nc)
		acc[c] = accm[c] = 0.0f;
	for (int64_t i = 0; i < n / QK_K; i++) {
		__m256i s[QUANT_MULTI_MAX];
		__m128i m[QUANT_MULTI_MAX];
		q4k_lanes(&w[i], a, a_stride, i, nc, s, m);
		float dw = half_load(w[i].d), dminw = half_load(w[i].dmin);
		FOR_COLS(c, nc) {
			float da = (ACT_ROW(struct block_q8_K, a, a_stride, c) + i)->d;
			acc[c] = kq_step(dw, da, hsum_epi32(s[c]), acc[c]);
			accm[c] = kq_step(dminw, da, hsum128_epi32(m[c]), accm[c]);
		}
	}
	FOR_COLS(c, nc)
		out[c] = acc[c] - accm[c];
}

ALWAYS_INLINE void q6_K_dot_rows(int64_t n, float *out, const void *vw, const void *a,
				 size_t a_stride, int nc)
{
	const struct block_q6_K *w = vw;
	float acc[QUANT_MULTI_MAX];
	FOR_COLS(c, nc)
		acc[c] = 0.0f;
	for (int64_t i = 0; i < n / QK_K; i++) {
		__m256i s[QUANT_MULTI_MAX];
		q6k_lanes(&w[i], a, a_stride, i, nc, s);
		float dw = half_load(w[i].d);
		FOR_COLS(c, nc) {
			float da = (ACT_ROW(struct block_q8_K, a, a_stride, c) + i)->d;
			acc[c] = kq_step(dw, da, hsum_epi32(s[c]), acc[c]);
		}
	}
	FOR_COLS(c, nc)
		out[c] = acc[c];
}

DOT_AND_MULTI(q4_K, q4_K_dot_rows)
DOT_AND_MULTI(q6_K, q6_K_dot_rows)

/* ---- tok8: 4 weight rows, 8 tokens ---- */

/* Over the 4 rows of a pass, unrolled so their sums stay in registers. */
#define FOR_ROWS(r) _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)

/* One super-block of a weight row as tok8 reads it: the 256 unsigned
 * quants as bytes (read 4 at a time), the sub-block scales as int16 pairs
 * (s, s), and the pairs the bsums are weighed with: Q4_K's mins (m, m) of
 * its 8 sub-blocks of 32, Q6_K's scales of sub-blocks 2j, 2j + 1. */
struct kunpacked {
	int32_t u[QK_K / 4];
	int32_t sc[QK_K / 16]; /* Q4_K: 8 used */
	int32_t bw[QK_K / 32];
	float d, dmin;
} __attribute__((aligned(32)));

/* Q4_K: u = the nibbles, elements 64j .. 64j + 31 the low ones of bytes
 * 32j .. 32j + 31, the next 32 the high ones. */
static inline void q4k_unpack(const struct block_q4_K *b, struct kunpacked *o)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	FOR_ROWS(j) {
		__m256i q = load256(b->qs + 32 * j);
		_mm256_store_si256((__m256i *)(o->u + 16 * j), _mm256_and_si256(q, m4));
		_mm256_store_si256((__m256i *)(o->u + 16 * j + 8),
				   _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
	}
	__m256i sm = k4_scales_mins(b->scales);     /* 8 scales | 8 mins as int16 */
	__m256i lo = _mm256_unpacklo_epi16(sm, sm); /* pairs of scales 0-3 | mins 0-3 */
	__m256i hi = _mm256_unpackhi_epi16(sm, sm); /* pairs of scales 4-7 | mins 4-7 */
	_mm256_store_si256((__m256i *)o->sc, _mm256_permute2x128_si256(lo, hi, 0x20));
	_mm256_store_si256((__m256i *)o->bw, _mm256_permute2x128_si256(lo, hi, 0x31));
	o->d = half_load(b->d);
	o->dmin = half_load(b->dmin);
}

/* Q6_K: u = q + 32, elements in order (quarter k of half h: 128h + 32k). */
static inline void q6k_unpack(const struct block_q6_K *b, struct kunpacked *o)
{
	_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
		__m256i qh = load256(b->qh + 32 * h);
		__m256i l0 = load256(b->ql + 64 * h), l1 = load256(b->ql + 64 * h + 32);
		_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
			_mm256_store_si256((__m256i *)(o->u + 32 * h + 8 * k),
					   q6k_quarter(k & 1 ? l1 : l0, qh, k));
	}
	__m256i sc16 = _mm256_cvtepi8_epi16(load128(b->scales));
	_mm256_store_si256((__m256i *)o->bw, sc16);
	sc16 = _mm256_permute4x64_epi64(sc16, 0xd8); /* 128-bit lanes: scales 0-3 8-11, 4-7 12-15 */
	_mm256_store_si256((__m256i *)o->sc, _mm256_unpacklo_epi16(sc16, sc16));
	_mm256_store_si256((__m256i *)o->sc + 1, _mm256_unpackhi_epi16(sc16, sc16));
	o->d = half_load(b->d);
}

/* vpmaddubsw of quad k of the 4 rows (unsigned, broadcast) against the 8
 * tokens' quad x, added to the int16 sums p. */
#define QUAD_STEP(p, o, k, x)                                                                 \
	do {                                                                                  \
		FOR_ROWS(r_) {                                                                \
			__m256i m_ = _mm256_maddubs_epi16(_mm256_set1_epi32((o)[r_].u[k]), x);    \
			p[r_] = _mm256_add_epi16(p[r_], m_);                                   \
			KEEP(p[r_]);                                                           \
		}                                                                             \
	} while (0)

/* The exact S of the 4 rows for the 8 tokens: sub-block sums of the
 * products kept in int16 while they fit (Q4_K: 8 quads, <= 8 * 2 * 15 *
 * 127 = 30480; Q6_K: 2 quads, <= 2 * 2 * 63 * 127 = 32004), then weighed
 * with the scale pair into int32 by vpmaddwd. Q6_K's offset correction
 * (32 * sum sc * bsum) is subtracted by the caller. */
ALWAYS_INLINE void tok8_sums(enum qtype t, const struct kunpacked *o,
			     const struct quant_gemm_kblock *g, __m256i *acc)
{
	const int quads = t == QTYPE_Q4_K ? 8 : 2; /* per int16 run */
	const int per_scale = t == QTYPE_Q4_K ? 8 : 4;
	/* 8 quads per pass (one unrolled body; more spills the sums) */
	_Pragma("GCC unroll 1") for (int k8 = 0; k8 < QK_K / 4; k8 += 8) {
		_Pragma("GCC unroll 4") for (int k0 = k8; k0 < k8 + 8; k0 += quads) {
			__m256i p[4];
			FOR_ROWS(r)
				p[r] = _mm256_setzero_si256();
			_Pragma("GCC unroll 8") for (int k = k0; k < k0 + quads; k++) {
				__m256i x = load256(g->quads[k]);
				QUAD_STEP(p, o, k, x);
			}
			FOR_ROWS(r) {
				__m256i sc = _mm256_set1_epi32(o[r].sc[k0 / per_scale]);
				acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(p[r], sc));
				KEEP(acc[r]);
			}
		}
	}
}

#ifdef QUANT_GEMM_VNNI
/* VNNI: tok8_sums for nt (1 or 2, a constant) groups at ga, gb, each
 * broadcast quad of weights serving both. vpdpbusd sums the products of a
 * whole scale run (Q4_K: 8 quads, Q6_K: 4) straight into int32, which
 * vpmulld weighs with the run's scale: the same exact S as the int16
 * runs of tok8_sums (|run| <= 32 * 63 * 127). */
ALWAYS_INLINE void tok8_sums_vnni(enum qtype t, const struct kunpacked *o,
				  const struct quant_gemm_kblock *ga,
				  const struct quant_gemm_kblock *gb, int nt, __m256i *acc_a,
				  __m256i *acc_b)
{
	const int per_scale = t == QTYPE_Q4_K ? 8 : 4;
	_Pragma("GCC unroll 1") for (int k8 = 0; k8 < QK_K / 4; k8 += 8) {
		_Pragma("GCC unroll 2") for (int k0 = k8; k0 < k8 + 8; k0 += per_scale) {
			__m256i pa[4], pb[4];
			FOR_ROWS(r)
				pa[r] = pb[r] = _mm256_setzero_si256();
			_Pragma("GCC unroll 8") for (int k = k0; k < k0 + per_scale; k++) {
				const __m256i xa = load256(ga->quads[k]);
				const __m256i xb = nt == 2 ? load256(gb->quads[k]) : xa;
				FOR_ROWS(r) {
					const __m256i w = _mm256_set1_epi32(o[r].u[k]);
					pa[r] = dpbusd(pa[r], w, xa);
					if (nt == 2)
						pb[r] = dpbusd(pb[r], w, xb);
					KEEP(pa[r]);
					if (nt == 2)
						KEEP(pb[r]);
				}
			}
			FOR_ROWS(r) {
				/* the run's scale: the low half of its int16 pair */
				const __m256i sc = _mm256_set1_epi32((int16_t)o[r].sc[k0 / per_scale]);
				acc_a[r] = _mm256_add_epi32(acc_a[r], _mm256_mullo_epi32(pa[r], sc));
				if (nt == 2)
					acc_b[r] = _mm256_add_epi32(acc_b[r], _mm256_mullo_epi32(pb[r], sc));
			}
		}
	}
}
#endif

/* sum_j bw_j * bsum pair j for the 4 rows (Q4_K: M; Q6_K: the offset sum). */
static inline void tok8_bsums(const struct kunpacked *o, const struct quant_gemm_kblock *g,
			      __m256i *m)
{
	FOR_ROWS(r)
		m[r] = _mm256_setzero_si256();
	_Pragma("GCC unroll 8") for (int j = 0; j < QK_K / 32; j++) {
		__m256i x = load256(g->bsum_pairs[j]);
		FOR_ROWS(r)
			m[r] = _mm256_add_epi32(m[r], _mm256_madd_epi16(_mm256_set1_epi32(o[r].bw[j]), x));
	}
}

/* The float step of a super-block for the 4 rows (unpacked at o) and one
 * group of tokens gb, given the rows' S in s: into f (and Q4_K's M part
 * into fm). */
ALWAYS_INLINE void tok8_group_step(enum qtype t, const struct kunpacked *o,
				   const struct quant_gemm_kblock *gb, const __m256i *s, __m256 *f,
				   __m256 *fm)
{
	__m256i m[4];
	tok8_bsums(o, gb, m);
	const __m256 da = _mm256_loadu_ps(gb->d);
	FOR_ROWS(j) {
		if (t == QTYPE_Q4_K) {
			f[j] = kq_step8(_mm256_set1_ps(o[j].d), da, s[j], f[j]);
			fm[j] = kq_step8(_mm256_set1_ps(o[j].dmin), da, m[j], fm[j]);
		} else
			f[j] = kq_step8(_mm256_set1_ps(o[j].d), da,
					_mm256_sub_epi32(s[j], _mm256_slli_epi32(m[j], 5)), f[j]);
	}
}

/* Rows r .. r+3 for the ng <= GEMM_TILE_GROUPS groups of tokens at g
 * (nb super-blocks apart; the first is token t0): each super-block of the
 * 4 rows is unpacked once for all the groups. Into y, the lanes of tokens
 * t0 .. T-1 only (a partial last group's other lanes are computed and
 * dropped). */
ALWAYS_INLINE void tok8(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r,
			const void *vg, int ng, int64_t t0, int64_t T, float *y, int64_t y_stride,
			const struct prefetch_plan *pf)
{
	const struct quant_gemm_kblock *g = vg;
	const uint8_t *w0 = WROW(w, w_stride, r);
	const int64_t nb = n / QK_K;
	struct kunpacked o[4]; /* the current super-block of the 4 rows */
	__m256 f[GEMM_TILE_GROUPS][4], fm[GEMM_TILE_GROUPS][4];
	for (int gi = 0; gi < ng; gi++)
		FOR_ROWS(j)
			f[gi][j] = fm[gi][j] = _mm256_setzero_ps();
	const size_t pf_step = prefetch_step(w_stride, nb);
	for (int64_t i = 0; i < nb; i++) {
		prefetch_slice(pf, w_stride, pf_step, i);
		FOR_ROWS(j) {
			if (t == QTYPE_Q4_K)
				q4k_unpack((const struct block_q4_K *)(w0 + j * w_stride) + i, &o[j]);
			else
				q6k_unpack((const struct block_q6_K *)(w0 + j * w_stride) + i, &o[j]);
		}
		int gi = 0;
#ifdef QUANT_GEMM_VNNI
		for (; gi + 2 <= ng; gi += 2) {
			const struct quant_gemm_kblock *ga = g + gi * nb + i, *gb = ga + nb;
			const struct kunpacked *og = o; /* as below */
			__asm__ volatile("" : "+r"(og) : : "memory");
			__m256i sa[4], sb[4];
			FOR_ROWS(j)
				sa[j] = sb[j] = _mm256_setzero_si256();
			tok8_sums_vnni(t, og, ga, gb, 2, sa, sb);
			tok8_group_step(t, og, ga, sa, f[gi], fm[gi]);
			tok8_group_step(t, og, gb, sb, f[gi + 1], fm[gi + 1]);
		}
#endif
		for (; gi < ng; gi++) {
			const struct quant_gemm_kblock *gb = g + gi * nb + i;
			/* the broadcasts below must read o from memory (one load
			 * each), not be rebuilt from the registers by shuffles, nor
			 * hoisted out of this loop (they would spill) */
			const struct kunpacked *og = o;
			__asm__ volatile("" : "+r"(og) : : "memory");
			__m256i s[4];
			FOR_ROWS(j)
				s[j] = _mm256_setzero_si256();
#ifdef QUANT_GEMM_VNNI
			tok8_sums_vnni(t, og, gb, NULL, 1, s, NULL);
#else
			tok8_sums(t, og, gb, s);
#endif
			tok8_group_step(t, og, gb, s, f[gi], fm[gi]);
		}
	}
	for (int gi = 0; gi < ng; gi++) {
		float out[4][QUANT_GEMM_GROUP] __attribute__((aligned(32)));
		FOR_ROWS(j)
			_mm256_store_ps(out[j], t == QTYPE_Q4_K ? _mm256_sub_ps(f[gi][j], fm[gi][j])
								: f[gi][j]);
		const int64_t tg = t0 + gi * QUANT_GEMM_GROUP;
		const int lanes = (int)(T - tg < QUANT_GEMM_GROUP ? T - tg : QUANT_GEMM_GROUP);
		for (int l = 0; l < lanes; l++)
			FOR_ROWS(j)
				y[(tg + l) * y_stride + r + j] = out[j][l];
	}
}

/* ---- rows8: 8 weight rows, 1 or 2 tokens ---- */

/* The 4 int32 lanes of a and b summed pairwise ([a0+a2, b0+b2, a1+a3,
 * b1+b3]) and then to [a, b, c, d]: sum_pairs32/64 on 128 bits. */
static inline __m128i sum_pairs32_128(__m128i a, __m128i b)
{
	return _mm_add_epi32(_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b));
}

static inline __m128i sum_pairs64_128(__m128i a, __m128i b)
{
	return _mm_add_epi32(_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b));
}

/* The fp16 at byte offset off of the 8 rows from w0, as 8 floats. */
ALWAYS_INLINE __m256 halves8(const uint8_t *w0, size_t w_stride, size_t off)
{
	uint64_t h0 = 0, h1 = 0;
	for (int j = 0; j < 4; j++) {
		uint16_t a, b;
		memcpy(&a, w0 + j * w_stride + off, 2);
		memcpy(&b, w0 + (j + 4) * w_stride + off, 2);
		uint64_t d0 = a, d1 = b;
		__asm__("" : "+r"(d0), "+r"(d1)); /* or GCC vectorizes the packing */
		h0 |= d0 << 16 * j;
		h1 |= d1 << 16 * j;
	}
	return _mm256_cvtph_ps(_mm_set_epi64x((long long)h1, (long long)h0));
}

/* Super-block i of rows j0 .. j0+3 for nt tokens: S of the 4 rows in
 * the lanes of each 128-bit half of s4[c] (to be summed by sum_halves),
 * Q4_K's M of the 4 rows in m4[c]. */
ALWAYS_INLINE void rows4_sums(enum qtype t, const uint8_t *w0, size_t w_stride, int64_t i,
			      const void *a, size_t a_stride, int nt, __m256i *s4, __m128i *m4)
{
	__m256i s[4][ROWS8_MAX_TOKENS], s01[ROWS8_MAX_TOKENS];
	__m128i m[4][ROWS8_MAX_TOKENS], m01[ROWS8_MAX_TOKENS];
	for (int j = 0; j < 4; j++) {
		const uint8_t *row = w0 + j * w_stride;
		if (t == QTYPE_Q4_K)
			q4k_lanes((const struct block_q4_K *)row + i, a, a_stride, i, nt, s[j], m[j]);
		else
			q6k_lanes((const struct block_q6_K *)row + i, a, a_stride, i, nt, s[j]);
		if (j == 1)
			FOR_COLS(c, nt) {
				s01[c] = sum_pairs32(s[0][c], s[1][c]);
				if (t == QTYPE_Q4_K)
					m01[c] = sum_pairs32_128(m[0][c], m[1][c]);
			}
	}
	FOR_COLS(c, nt) {
		s4[c] = sum_pairs64(s01[c], sum_pairs32(s[2][c], s[3][c]));
		if (t == QTYPE_Q4_K)
			m4[c] = sum_pairs64_128(m01[c], sum_pairs32_128(m[2][c], m[3][c]));
	}
}

/* nt (1 or 2, a constant at each instance) tokens at a, a_stride bytes
 * apart, into y + r, y + y_stride + r: each row's super-block is unpacked
 * once for both, the 8 rows' sums meet in the lanes of one vector (the
 * unpack tree of quant_gemm_avx2.c), and the float step runs on 8 rows. */
ALWAYS_INLINE void rows8(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r,
			 const void *a, size_t a_stride, int nt, float *y, int64_t y_stride,
			 const struct prefetch_plan *pf)
{
	const uint8_t *w0 = WROW(w, w_stride, r);
	const int64_t nb = n / QK_K;
	const size_t bb = t == QTYPE_Q4_K ? sizeof(struct block_q4_K) : sizeof(struct block_q6_K);
	__m256 acc[ROWS8_MAX_TOKENS], accm[ROWS8_MAX_TOKENS];
	FOR_COLS(c, nt)
		acc[c] = accm[c] = _mm256_setzero_ps();
	const size_t pf_step = prefetch_step(w_stride, nb);
	for (int64_t i = 0; i < nb; i++) {
		prefetch_slice(pf, w_stride, pf_step, i);
		__m256i s03[ROWS8_MAX_TOKENS], s47[ROWS8_MAX_TOKENS];
		__m128i m03[ROWS8_MAX_TOKENS], m47[ROWS8_MAX_TOKENS];
		rows4_sums(t, w0, w_stride, i, a, a_stride, nt, s03, m03);
		rows4_sums(t, w0 + 4 * w_stride, w_stride, i, a, a_stride, nt, s47, m47);
		if (t == QTYPE_Q4_K) {
			__m256 dw = halves8(w0, w_stride, (size_t)i * bb + offsetof(struct block_q4_K, d));
			__m256 dminw = halves8(w0, w_stride, (size_t)i * bb + offsetof(struct block_q4_K, dmin));
			FOR_COLS(c, nt) {
				__m256 da = _mm256_set1_ps((ACT_ROW(struct block_q8_K, a, a_stride, c) + i)->d);
				acc[c] = kq_step8(dw, da, sum_halves(s03[c], s47[c]), acc[c]);
				accm[c] = kq_step8(dminw, da, _mm256_set_m128i(m47[c], m03[c]), accm[c]);
			}
		} else {
			__m256 dw = halves8(w0, w_stride, (size_t)i * bb + offsetof(struct block_q6_K, d));
			FOR_COLS(c, nt) {
				__m256 da = _mm256_set1_ps((ACT_ROW(struct block_q8_K, a, a_stride, c) + i)->d);
				acc[c] = kq_step8(dw, da, sum_halves(s03[c], s47[c]), acc[c]);
			}
		}
	}
	FOR_COLS(c, nt)
		_mm256_storeu_ps(y + c * y_stride + r,
				 t == QTYPE_Q4_K ? _mm256_sub_ps(acc[c], accm[c]) : acc[c]);
}

/* ---- the matrix kernel ---- */

/* Weight row r against tokens t0 .. t1-1 through dot_multi (dm), 4 at a
 * time. */
static void rows_by_dot(quant_dot_multi_fn dm, int64_t n, const uint8_t *wr, const void *a,
			size_t a_stride, int64_t t0, int64_t t1, float *y, int64_t y_stride, int64_t r)
{
	float o[QUANT_MULTI_MAX];
	for (int64_t tk = t0; tk < t1; tk += QUANT_MULTI_MAX) {
		int nc = (int)(t1 - tk < QUANT_MULTI_MAX ? t1 - tk : QUANT_MULTI_MAX);
		dm(n, o, wr, (const uint8_t *)a + (size_t)tk * a_stride, a_stride, nc);
		for (int c = 0; c < nc; c++)
			y[(tk + c) * y_stride + r] = o[c];
	}
}

/* ---- the gemm entries: gemm_tiles over tok8, rows8 and rows_by_dot ---- */

/* Weight row r (past the last 8-row tile) against all T tokens, through
 * the type's dot_multi. */
ALWAYS_INLINE void tail_rows(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r,
			     const void *a, size_t a_stride, int64_t T, float *y, int64_t y_stride)
{
	rows_by_dot(t == QTYPE_Q4_K ? dot_multi_q4_K : dot_multi_q6_K, n, WROW(w, w_stride, r), a,
		    a_stride, 0, T, y, y_stride, r);
}

#define K_GEMM(name, type)                                                                    \
	static void gemm_##name(int64_t n, const void *w, size_t w_stride, int64_t r0,       \
				int64_t r1, const void *a, size_t a_stride, const void *packed,    \
				int64_t T, float *y, int64_t y_stride, int64_t r_pf)               \
	{                                                                                  \
		gemm_tiles(type, n, w, w_stride, r0, r1, a, a_stride, packed,              \
			   (size_t)(n / QK_K) * sizeof(struct quant_gemm_kblock), T, y,      \
			   y_stride, r_pf, tok8, rows8, tail_rows);                        \
	}

K_GEMM(q4_K, QTYPE_Q4_K)
K_GEMM(q6_K, QTYPE_Q6_K)

/* The build's name: quant_gemm_k_avx2_register, quant_gemm_k_avx512_register
 * or quant_gemm_k_avxvnni_register (quant_int.h). */
#ifndef QUANT_GEMM_K_REGISTER
#define QUANT_GEMM_K_REGISTER quant_gemm_k_avx2_register
#endif

/* The dot, dot_multi and gemm entries of both types, one arithmetic. */
void QUANT_GEMM_K_REGISTER(struct quant_kernels *k)
{
	k->dot[QTYPE_Q4_K] = dot_q4_K;
	k->dot[QTYPE_Q6_K] = dot_q6_K;
	k->dot_multi[QTYPE_Q4_K] = dot_multi_q4_K;
	k->dot_multi[QTYPE_Q6_K] = dot_multi_q6_K;
	k->gemm[QTYPE_Q4_K] = gemm_q4_K;
	k->gemm[QTYPE_Q6_K] = gemm_q6_K;
}
