/* quant_avx512.c — AVX-512 (F/BW/VL/DQ) + VNNI dot kernels for the types
 * the default model streams most: Q8_0 (LM head), Q5_0, Q4_K, Q6_K. Other
 * entries of the AVX-512 table stay the AVX2 kernels (quant.c registers
 * AVX2 first, then this file).
 *
 * Same contract as quant_avx2.c: exact integer sums per block, one FMA per
 * block into float lanes, one reduction per row; and each dot is the
 * one-row instance of a multi-row body (quant_int.h), so its dot_multi
 * twin agrees with it bit for bit. Two 32-element blocks (or
 * two 32-element sub-blocks) share a 512-bit register: the low 256 bits
 * hold one, the high 256 bits the other.
 *  - Q8_0: vpdpbusd needs an unsigned left operand: |w| against a negated
 *    where w < 0 (|-128| = 128 fits u8; a is never -128).
 *  - Q5_0: unsigned u = q + 16 in [0, 31]; sum (q)*a = sum u*a - 16*sum a,
 *    both from vpdpbusd.
 *  - Q4_K / Q6_K: vpmaddubsw (unsigned quants x activations, pairs <= 16002)
 *    then vpdpwssd with the int16 sub-block scales.
 *
 * Test hook: built with -DQUANT_AVX512_SIMDE (and SIMDe's headers) this file
 * runs on any CPU through SIMDe's portable AVX-512 emulation, registering as
 * quant_avx512_simde_register; that is how these kernels can be checked
 * against the reference on a machine without AVX-512. */
#include <string.h>

#include "quant_int.h"

#ifdef QUANT_AVX512_SIMDE
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#define quant_avx512_register quant_avx512_simde_register
/* SIMDe 0.7 lacks these three; plain stand-ins, test build only. */
static inline __m512i shim_zextsi256_si512(__m256i a)
{
	return _mm512_inserti64x4(_mm512_setzero_si512(), a, 0);
}
static inline __m512 shim_cvtepi32_ps(__m512i a)
{
	int32_t t[16];
	float f[16];
	_mm512_storeu_si512(t, a);
	for (int i = 0; i < 16; i++)
		f[i] = (float)t[i];
	return _mm512_loadu_ps(f);
}
static inline float shim_reduce_add_ps(__m512 a)
{
	float f[16], s = 0.0f;
	_mm512_storeu_ps(f, a);
	for (int i = 0; i < 16; i++)
		s += f[i];
	return s;
}
#define _mm512_zextsi256_si512 shim_zextsi256_si512
#define _mm512_cvtepi32_ps shim_cvtepi32_ps
#define _mm512_reduce_add_ps shim_reduce_add_ps
typedef simde__mmask64 mask64;
#else
#include <immintrin.h>
typedef __mmask64 mask64;
#endif

/* ---- helpers ---- */

static inline float half_load(uint16_t h)
{
#ifdef QUANT_AVX512_SIMDE
	return fp16_to_f32(h);
#else
	return _cvtsh_ss(h);
#endif
}

static inline __m256i load256(const void *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

static inline __m128i load128(const void *p)
{
	return _mm_loadu_si128((const __m128i *)p);
}

/* [p0's 32 bytes | p1's 32 bytes] */
static inline __m512i load_2x256(const void *p0, const void *p1)
{
	return _mm512_inserti64x4(_mm512_castsi256_si512(load256(p0)), load256(p1), 1);
}

/* d0 in the low 8 float lanes, d1 in the high 8. */
static inline __m512 scale_2x(float d0, float d1)
{
	return _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
}

/* Signed bytes w * a summed by four into 16 int32, w given as |w| and its
 * sign mask (shared by the rows of a multi-row call). */
static inline __m512i dot_i8_i8(__m512i w_abs, mask64 w_neg, __m512i a)
{
	__m512i a_signed = _mm512_mask_sub_epi8(a, w_neg, _mm512_setzero_si512(), a);
	return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w_abs, a_signed);
}

#define R8(x) x, x, x, x, x, x, x, x
#define R16(x) R8(x), R8(x)

/* ---- Q8_0 ---- */

/* Blocks i and i+1 of the rows (i + 1 == i: one block, the high half
 * weighted 0) into acc[c], given the weights as |w| and sign mask. */
ALWAYS_INLINE void q8_0_pair_rows(const struct block_q8_0 *w, int64_t i, int64_t i1,
				  const void *a, size_t a_stride, int nc, __m512 *acc)
{
	__m512i wq = i1 == i ? _mm512_zextsi256_si512(load256(w[i].qs)) : load_2x256(w[i].qs, w[i1].qs);
	__m512i w_abs = _mm512_abs_epi8(wq);
	mask64 w_neg = _mm512_movepi8_mask(wq);
	float dw0 = half_load(w[i].d), dw1 = half_load(w[i1].d);
	FOR_COLS(c, nc) {
		const struct block_q8_0 *ac = ACT_ROW(struct block_q8_0, a, a_stride, c);
		__m512i aq = i1 == i ? _mm512_zextsi256_si512(load256(ac[i].qs)) : load_2x256(ac[i].qs, ac[i1].qs);
		__m512 d = scale_2x(dw0 * half_load(ac[i].d), i1 == i ? 0.0f : dw1 * half_load(ac[i1].d));
		acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dot_i8_i8(w_abs, w_neg, aq)), acc[c]);
	}
}

ALWAYS_INLINE void q8_0_dot_rows(int64_t n, float *out, const void *vw, const void *a,
				 size_t a_stride, int nc)
{
	const struct block_q8_0 *w = vw;
	int64_t nb = n / QK, i = 0;
	__m512 acc0[QUANT_MULTI_MAX], acc1[QUANT_MULTI_MAX];
	FOR_COLS(c, nc) {
		acc0[c] = _mm512_setzero_ps();
		acc1[c] = _mm512_setzero_ps();
	}
	for (; i + 3 < nb; i += 4) {
		q8_0_pair_rows(w, i, i + 1, a, a_stride, nc, acc0);
		q8_0_pair_rows(w, i + 2, i + 3, a, a_stride, nc, acc1);
	}
	for (; i < nb; i++) /* one block in the low half, zeros above */
		q8_0_pair_rows(w, i, i, a, a_stride, nc, acc0);
	FOR_COLS(c, nc)
		out[c] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[c], acc1[c]));
}

DOT_AND_MULTI(q8_0, q8_0_dot_rows)

/* ---- Q5_0 ---- */

/* Unsigned quants u = nibble | bit << 4 of two Q5_0 blocks. */
static inline __m512i q5_0_unsigned_2x(const struct block_q5_0 *b0, const struct block_q5_0 *b1)
{
	/* [b0.qs | b0.qs | b1.qs | b1.qs], then the second copy of each
	 * shifted right by 4: low nibbles for elements 0..15, high for 16..31 */
	static const int16_t shifts[32] = { R8(0), R8(4), R8(0), R8(4) };
	__m512i t = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(load128(b0->qs))),
				       _mm256_broadcastsi128_si256(load128(b1->qs)), 1);
	t = _mm512_srlv_epi16(t, _mm512_loadu_si512(shifts));
	__m512i nib = _mm512_and_si512(t, _mm512_set1_epi8(0x0f));
	uint32_t h0, h1;
	memcpy(&h0, b0->qh, 4);
	memcpy(&h1, b1->qh, 4);
	mask64 hbit = (mask64)((uint64_t)h1 << 32 | h0); /* bit e: element e */
	return _mm512_mask_add_epi8(nib, hbit, nib, _mm512_set1_epi8(16));
}

/* Blocks i and i1 of the rows into acc[c]: i1 == i pairs the last block
 * with itself, its high half weighted 0. */
ALWAYS_INLINE void q5_0_pair_rows(const struct block_q5_0 *w, int64_t i, int64_t i1,
				  const void *a, size_t a_stride, int nc, __m512 *acc)
{
	__m512i u = q5_0_unsigned_2x(&w[i], &w[i1]);
	float dw0 = half_load(w[i].d), dw1 = half_load(w[i1].d);
	FOR_COLS(c, nc) {
		const struct block_q8_0 *ac = ACT_ROW(struct block_q8_0, a, a_stride, c);
		__m512i aq = load_2x256(ac[i].qs, ac[i1].qs);
		__m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, aq);
		__m512i off = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(16), aq);
		__m512 d = scale_2x(dw0 * half_load(ac[i].d), i1 == i ? 0.0f : dw1 * half_load(ac[i1].d));
		acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(s, off)), acc[c]);
	}
}

ALWAYS_INLINE void q5_0_dot_rows(int64_t n, float *out, const void *vw, const void *a,
				 size_t a_stride, int nc)
{
	const struct block_q5_0 *w = vw;
	int64_t nb = n / QK, i = 0;
	__m512 acc0[QUANT_MULTI_MAX], acc1[QUANT_MULTI_MAX];
	FOR_COLS(c, nc) {
		acc0[c] = _mm512_setzero_ps();
		acc1[c] = _mm512_setzero_ps();
	}
	for (; i + 3 < nb; i += 4) {
		q5_0_pair_rows(w, i, i + 1, a, a_stride, nc, acc0);
		q5_0_pair_rows(w, i + 2, i + 3, a, a_stride, nc, acc1);
	}
	for (; i + 1 < nb; i += 2)
		q5_0_pair_rows(w, i, i + 1, a, a_stride, nc, acc0);
	if (i < nb)
		q5_0_pair_rows(w, i, i, a, a_stride, nc, acc0);
	FOR_COLS(c, nc)
		out[c] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[c], acc1[c]));
}

DOT_AND_MULTI(q5_0, q5_0_dot_rows)

/* ---- Q4_K ---- */

/* Scales (int16 lanes 0..7) and mins (8..15); see quant_avx2_int.h. */
static inline __m256i k4_scales_mins(const uint8_t p[12])
{
	uint32_t w[4];
	quant_k4_scales_mins_words(p, w);
	return _mm256_cvtepu8_epi16(_mm_set_epi32((int)w[3], (int)w[2], (int)w[1], (int)w[0]));
}

static inline __m128i k4_min_sums(__m256i scales_mins, const int16_t *bsums)
{
	__m256i b = load256(bsums);
	__m128i sums32 = _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
	return _mm_madd_epi16(_mm256_extracti128_si256(scales_mins, 1), sums32);
}

/* vpermw indices: sub-block scale A for int16 lanes 0..15, B for 16..31.
 * Half h of a Q4_K block (128 elements, qs bytes 64h..64h+63) holds
 * sub-blocks 4h, 4h+2 in its low nibbles and 4h+1, 4h+3 in its high ones. */
static const int16_t q4k_scale_idx[4][32] = {
	{ R16(0), R16(2) }, { R16(1), R16(3) }, { R16(4), R16(6) }, { R16(5), R16(7) },
};

static inline float hsum_ps128(__m128 m)
{
	m = _mm_add_ps(m, _mm_movehl_ps(m, m));
	m = _mm_add_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

ALWAYS_INLINE void q4_K_dot_rows(int64_t n, float *out, const void *vw, const void *a,
				 size_t a_stride, int nc)
{
	const struct block_q4_K *w = vw;
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	__m512 acc[QUANT_MULTI_MAX];
	__m128 accm[QUANT_MULTI_MAX];
	FOR_COLS(c, nc) {
		acc[c] = _mm512_setzero_ps();
		accm[c] = _mm_setzero_ps();
	}
	for (int64_t i = 0; i < n / QK_K; i++) {
		float dw = half_load(w[i].d), dminw = half_load(w[i].dmin);
		__m256i sm = k4_scales_mins(w[i].scales);
		__m512i sc = _mm512_castsi256_si512(sm);
		__m512i sumi[QUANT_MULTI_MAX];
		FOR_COLS(c, nc) {
			const struct block_q8_K *ac = ACT_ROW(struct block_q8_K, a, a_stride, c) + i;
			__m128 mins = _mm_cvtepi32_ps(k4_min_sums(sm, ac->bsums));
			accm[c] = _mm_fmadd_ps(_mm_set1_ps(dminw * ac->d), mins, accm[c]);
			sumi[c] = _mm512_setzero_si512();
		}
		for (int h = 0; h < 2; h++) {
			__m512i q = _mm512_loadu_si512(w[i].qs + 64 * h);
			__m512i lo = _mm512_and_si512(q, m4);
			__m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
			__m512i s_lo = _mm512_permutexvar_epi16(_mm512_loadu_si512(q4k_scale_idx[2 * h]), sc);
			__m512i s_hi = _mm512_permutexvar_epi16(_mm512_loadu_si512(q4k_scale_idx[2 * h + 1]), sc);
			FOR_COLS(c, nc) {
				const int8_t *q8 = (ACT_ROW(struct block_q8_K, a, a_stride, c) + i)->qs + 128 * h;
				__m512i p_lo = _mm512_maddubs_epi16(lo, load_2x256(q8, q8 + 64));
				__m512i p_hi = _mm512_maddubs_epi16(hi, load_2x256(q8 + 32, q8 + 96));
				sumi[c] = _mm512_dpwssd_epi32(sumi[c], p_lo, s_lo);
				sumi[c] = _mm512_dpwssd_epi32(sumi[c], p_hi, s_hi);
			}
		}
		FOR_COLS(c, nc) {
			const struct block_q8_K *ac = ACT_ROW(struct block_q8_K, a, a_stride, c) + i;
			acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dw * ac->d), _mm512_cvtepi32_ps(sumi[c]), acc[c]);
		}
	}
	FOR_COLS(c, nc)
		out[c] = _mm512_reduce_add_ps(acc[c]) - hsum_ps128(accm[c]);
}

DOT_AND_MULTI(q4_K, q4_K_dot_rows)

/* ---- Q6_K ---- */

/* vpermw indices: 64 elements = 4 sub-blocks of 16 = 8 int16 lanes each.
 * Row r: half r/2 of the block, its first (r even) or last 64 elements. */
static const int16_t q6k_scale_idx[4][32] = {
	{ R8(0), R8(1), R8(2), R8(3) },
	{ R8(4), R8(5), R8(6), R8(7) },
	{ R8(8), R8(9), R8(10), R8(11) },
	{ R8(12), R8(13), R8(14), R8(15) },
};

/* Bits of qh for the two quarters in a register: quarters 0,1 (shift 0, 2)
 * or 2,3 (shift 4, 6), moved to bits 4..5 of each byte. */
static const int16_t q6k_qh_shift[2][32] = {
	{ R16(0), R16(2) },
	{ R16(4), R16(6) },
};

/* Unsigned quants (q + 32) of one half of a Q6_K block: elements 0..63 into
 * *u_lo and 64..127 into *u_hi. */
static inline void q6k_half_unpack(const uint8_t *ql, const uint8_t *qh, __m512i *u_lo,
				   __m512i *u_hi)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(3);
	__m512i l = _mm512_loadu_si512(ql);
	__m512i h = _mm512_broadcast_i64x4(load256(qh));
	__m512i h_lo = _mm512_and_si512(_mm512_srlv_epi16(h, _mm512_loadu_si512(q6k_qh_shift[0])), m2);
	__m512i h_hi = _mm512_and_si512(_mm512_srlv_epi16(h, _mm512_loadu_si512(q6k_qh_shift[1])), m2);
	*u_lo = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(h_lo, 4));
	*u_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), _mm512_slli_epi16(h_hi, 4));
}

ALWAYS_INLINE void q6_K_dot_rows(int64_t n, float *out, const void *vw, const void *a,
				 size_t a_stride, int nc)
{
	const struct block_q6_K *w = vw;
	__m512 acc[QUANT_MULTI_MAX];
	FOR_COLS(c, nc)
		acc[c] = _mm512_setzero_ps();
	for (int64_t i = 0; i < n / QK_K; i++) {
		float dw = half_load(w[i].d);
		__m256i sc16 = _mm256_cvtepi8_epi16(load128(w[i].scales));
		__m512i sc = _mm512_castsi256_si512(sc16);
		__m512i sumi[QUANT_MULTI_MAX];
		FOR_COLS(c, nc) {
			const struct block_q8_K *ac = ACT_ROW(struct block_q8_K, a, a_stride, c) + i;
			__m256i corr = _mm256_madd_epi16(sc16, load256(ac->bsums)); /* sum sc*bsum */
			sumi[c] = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(),
									  _mm256_slli_epi32(corr, 5)));
		}
		for (int h = 0; h < 2; h++) {
			__m512i u_lo, u_hi;
			q6k_half_unpack(w[i].ql + 64 * h, w[i].qh + 32 * h, &u_lo, &u_hi);
			__m512i s_lo = _mm512_permutexvar_epi16(_mm512_loadu_si512(q6k_scale_idx[2 * h]), sc);
			__m512i s_hi = _mm512_permutexvar_epi16(_mm512_loadu_si512(q6k_scale_idx[2 * h + 1]), sc);
			FOR_COLS(c, nc) {
				const int8_t *q8 = (ACT_ROW(struct block_q8_K, a, a_stride, c) + i)->qs + 128 * h;
				__m512i p_lo = _mm512_maddubs_epi16(u_lo, _mm512_loadu_si512(q8));
				__m512i p_hi = _mm512_maddubs_epi16(u_hi, _mm512_loadu_si512(q8 + 64));
				sumi[c] = _mm512_dpwssd_epi32(sumi[c], p_lo, s_lo);
				sumi[c] = _mm512_dpwssd_epi32(sumi[c], p_hi, s_hi);
			}
		}
		FOR_COLS(c, nc) {
			const struct block_q8_K *ac = ACT_ROW(struct block_q8_K, a, a_stride, c) + i;
			acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dw * ac->d), _mm512_cvtepi32_ps(sumi[c]), acc[c]);
		}
	}
	FOR_COLS(c, nc)
		out[c] = _mm512_reduce_add_ps(acc[c]);
}

DOT_AND_MULTI(q6_K, q6_K_dot_rows)

/* Each dot here comes with its multi-row twin, replacing the AVX2 pair. */
void quant_avx512_register(struct quant_kernels *k)
{
	k->dot[QTYPE_Q8_0] = dot_q8_0;
	k->dot[QTYPE_Q5_0] = dot_q5_0;
	k->dot[QTYPE_Q4_K] = dot_q4_K;
	k->dot[QTYPE_Q6_K] = dot_q6_K;
	k->dot_multi[QTYPE_Q8_0] = dot_multi_q8_0;
	k->dot_multi[QTYPE_Q5_0] = dot_multi_q5_0;
	k->dot_multi[QTYPE_Q4_K] = dot_multi_q4_K;
	k->dot_multi[QTYPE_Q6_K] = dot_multi_q6_K;
	/* the AVX2 matrix kernels follow the AVX2 dot, not these */
	k->gemm[QTYPE_Q8_0] = NULL;
	k->gemm[QTYPE_Q5_0] = NULL;
	k->gemm[QTYPE_Q4_K] = NULL;
	k->gemm[QTYPE_Q6_K] = NULL;
}
