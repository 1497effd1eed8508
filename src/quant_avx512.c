/* quant_avx512.c — AVX-512 (F/BW/VL/DQ) + VNNI dot kernels for the types
 * the default model streams most: Q8_0 (LM head), Q5_0, Q4_K, Q6_K. Other
 * entries of the AVX-512 table stay the AVX2 kernels (quant.c registers
 * AVX2 first, then this file).
 *
 * Same contract as quant_avx2.c: exact integer sums per block, one FMA per
 * block into float lanes, one reduction per row. Two 32-element blocks (or
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

/* Signed bytes w * a summed by four into 16 int32. */
static inline __m512i dot_i8_i8(__m512i w, __m512i a)
{
	mask64 neg = _mm512_movepi8_mask(w);
	__m512i a_signed = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
	return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), a_signed);
}

#define R8(x) x, x, x, x, x, x, x, x
#define R16(x) R8(x), R8(x)

/* ---- Q8_0 ---- */

static void dot_q8_0(int64_t n, float *out, const void *vw, const void *va)
{
	const struct block_q8_0 *w = vw, *a = va;
	int64_t nb = n / QK, i = 0;
	__m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
	for (; i + 3 < nb; i += 4) {
		__m512i p0 = dot_i8_i8(load_2x256(w[i].qs, w[i + 1].qs), load_2x256(a[i].qs, a[i + 1].qs));
		__m512i p1 = dot_i8_i8(load_2x256(w[i + 2].qs, w[i + 3].qs),
				       load_2x256(a[i + 2].qs, a[i + 3].qs));
		__m512 d0 = scale_2x(half_load(w[i].d) * half_load(a[i].d),
				     half_load(w[i + 1].d) * half_load(a[i + 1].d));
		__m512 d1 = scale_2x(half_load(w[i + 2].d) * half_load(a[i + 2].d),
				     half_load(w[i + 3].d) * half_load(a[i + 3].d));
		acc0 = _mm512_fmadd_ps(d0, _mm512_cvtepi32_ps(p0), acc0);
		acc1 = _mm512_fmadd_ps(d1, _mm512_cvtepi32_ps(p1), acc1);
	}
	for (; i < nb; i++) { /* one block in the low half, zeros above */
		__m512i wq = _mm512_zextsi256_si512(load256(w[i].qs));
		__m512i aq = _mm512_zextsi256_si512(load256(a[i].qs));
		__m512 d = scale_2x(half_load(w[i].d) * half_load(a[i].d), 0.0f);
		acc0 = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(dot_i8_i8(wq, aq)), acc0);
	}
	*out = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

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

static inline __m512i q5_0_dot_2x(const struct block_q5_0 *w, const struct block_q8_0 *a)
{
	__m512i aq = load_2x256(a[0].qs, a[1].qs);
	__m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q5_0_unsigned_2x(&w[0], &w[1]), aq);
	__m512i off = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(16), aq);
	return _mm512_sub_epi32(s, off);
}

static void dot_q5_0(int64_t n, float *out, const void *vw, const void *va)
{
	const struct block_q5_0 *w = vw;
	const struct block_q8_0 *a = va;
	int64_t nb = n / QK, i = 0;
	__m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
	for (; i + 3 < nb; i += 4) {
		__m512i p0 = q5_0_dot_2x(&w[i], &a[i]);
		__m512i p1 = q5_0_dot_2x(&w[i + 2], &a[i + 2]);
		__m512 d0 = scale_2x(half_load(w[i].d) * half_load(a[i].d),
				     half_load(w[i + 1].d) * half_load(a[i + 1].d));
		__m512 d1 = scale_2x(half_load(w[i + 2].d) * half_load(a[i + 2].d),
				     half_load(w[i + 3].d) * half_load(a[i + 3].d));
		acc0 = _mm512_fmadd_ps(d0, _mm512_cvtepi32_ps(p0), acc0);
		acc1 = _mm512_fmadd_ps(d1, _mm512_cvtepi32_ps(p1), acc1);
	}
	for (; i + 1 < nb; i += 2) {
		__m512 d0 = scale_2x(half_load(w[i].d) * half_load(a[i].d),
				     half_load(w[i + 1].d) * half_load(a[i + 1].d));
		acc0 = _mm512_fmadd_ps(d0, _mm512_cvtepi32_ps(q5_0_dot_2x(&w[i], &a[i])), acc0);
	}
	if (i < nb) { /* last block paired with itself, its high half weighted 0 */
		struct block_q5_0 wp[2] = { w[i], w[i] };
		struct block_q8_0 ap[2] = { a[i], a[i] };
		__m512 d0 = scale_2x(half_load(w[i].d) * half_load(a[i].d), 0.0f);
		acc0 = _mm512_fmadd_ps(d0, _mm512_cvtepi32_ps(q5_0_dot_2x(wp, ap)), acc0);
	}
	*out = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

/* ---- Q4_K ---- */

/* Scales (int16 lanes 0..7) and mins (8..15); see quant_avx2.c. */
static inline __m256i k4_scales_mins(const uint8_t p[12])
{
	uint32_t u[3];
	memcpy(u, p, 12);
	uint32_t sc_lo = u[0] & 0x3f3f3f3f;
	uint32_t sc_hi = (u[2] & 0x0f0f0f0f) | ((u[0] >> 6) & 0x03030303) << 4;
	uint32_t mn_lo = u[1] & 0x3f3f3f3f;
	uint32_t mn_hi = ((u[2] >> 4) & 0x0f0f0f0f) | ((u[1] >> 6) & 0x03030303) << 4;
	return _mm256_cvtepu8_epi16(_mm_set_epi32((int)mn_hi, (int)mn_lo, (int)sc_hi, (int)sc_lo));
}

static inline __m128i k4_min_sums(__m256i scales_mins, const int16_t *bsums)
{
	__m256i b = load256(bsums);
	__m128i sums32 = _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
	return _mm_madd_epi16(_mm256_extracti128_si256(scales_mins, 1), sums32);
}

/* vpermw indices: sub-block scale A for int16 lanes 0..15, B for 16..31.
 * Half c of a Q4_K block (128 elements, qs bytes 64c..64c+63) holds
 * sub-blocks 4c, 4c+2 in its low nibbles and 4c+1, 4c+3 in its high ones. */
static const int16_t q4k_scale_idx[4][32] = {
	{ R16(0), R16(2) }, { R16(1), R16(3) }, { R16(4), R16(6) }, { R16(5), R16(7) },
};

static void dot_q4_K(int64_t n, float *out, const void *vw, const void *va)
{
	const struct block_q4_K *w = vw;
	const struct block_q8_K *a = va;
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	__m512 acc = _mm512_setzero_ps();
	__m128 accm = _mm_setzero_ps();
	for (int64_t i = 0; i < n / QK_K; i++) {
		float d = half_load(w[i].d) * a[i].d;
		float dmin = half_load(w[i].dmin) * a[i].d;
		__m256i sm = k4_scales_mins(w[i].scales);
		accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(k4_min_sums(sm, a[i].bsums)), accm);
		__m512i sc = _mm512_castsi256_si512(sm);
		__m512i sumi = _mm512_setzero_si512();
		for (int c = 0; c < 2; c++) {
			const int8_t *q8 = a[i].qs + 128 * c;
			__m512i q = _mm512_loadu_si512(w[i].qs + 64 * c);
			__m512i lo = _mm512_and_si512(q, m4);
			__m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
			__m512i p_lo = _mm512_maddubs_epi16(lo, load_2x256(q8, q8 + 64));
			__m512i p_hi = _mm512_maddubs_epi16(hi, load_2x256(q8 + 32, q8 + 96));
			__m512i s_lo = _mm512_permutexvar_epi16(_mm512_loadu_si512(q4k_scale_idx[2 * c]), sc);
			__m512i s_hi = _mm512_permutexvar_epi16(_mm512_loadu_si512(q4k_scale_idx[2 * c + 1]), sc);
			sumi = _mm512_dpwssd_epi32(sumi, p_lo, s_lo);
			sumi = _mm512_dpwssd_epi32(sumi, p_hi, s_hi);
		}
		acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
	}
	__m128 m = accm;
	m = _mm_add_ps(m, _mm_movehl_ps(m, m));
	m = _mm_add_ss(m, _mm_movehdup_ps(m));
	*out = _mm512_reduce_add_ps(acc) - _mm_cvtss_f32(m);
}

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

static void dot_q6_K(int64_t n, float *out, const void *vw, const void *va)
{
	const struct block_q6_K *w = vw;
	const struct block_q8_K *a = va;
	__m512 acc = _mm512_setzero_ps();
	for (int64_t i = 0; i < n / QK_K; i++) {
		float d = half_load(w[i].d) * a[i].d;
		__m256i sc16 = _mm256_cvtepi8_epi16(load128(w[i].scales));
		__m256i corr = _mm256_madd_epi16(sc16, load256(a[i].bsums)); /* sum sc*bsum */
		__m512i sc = _mm512_castsi256_si512(sc16);
		__m512i sumi = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(),
								       _mm256_slli_epi32(corr, 5)));
		for (int h = 0; h < 2; h++) {
			const int8_t *q8 = a[i].qs + 128 * h;
			__m512i u_lo, u_hi;
			q6k_half_unpack(w[i].ql + 64 * h, w[i].qh + 32 * h, &u_lo, &u_hi);
			__m512i p_lo = _mm512_maddubs_epi16(u_lo, _mm512_loadu_si512(q8));
			__m512i p_hi = _mm512_maddubs_epi16(u_hi, _mm512_loadu_si512(q8 + 64));
			__m512i s_lo = _mm512_permutexvar_epi16(_mm512_loadu_si512(q6k_scale_idx[2 * h]), sc);
			__m512i s_hi = _mm512_permutexvar_epi16(_mm512_loadu_si512(q6k_scale_idx[2 * h + 1]), sc);
			sumi = _mm512_dpwssd_epi32(sumi, p_lo, s_lo);
			sumi = _mm512_dpwssd_epi32(sumi, p_hi, s_hi);
		}
		acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
	}
	*out = _mm512_reduce_add_ps(acc);
}

/* The AVX2 table's dot_multi entries for these types match the AVX2 dots,
 * not these: clear them (quant_dot_multi then calls these dots per row). */
void quant_avx512_register(struct quant_kernels *k)
{
	k->dot[QTYPE_Q8_0] = dot_q8_0;
	k->dot[QTYPE_Q5_0] = dot_q5_0;
	k->dot[QTYPE_Q4_K] = dot_q4_K;
	k->dot[QTYPE_Q6_K] = dot_q6_K;
	k->dot_multi[QTYPE_Q8_0] = NULL;
	k->dot_multi[QTYPE_Q5_0] = NULL;
	k->dot_multi[QTYPE_Q4_K] = NULL;
	k->dot_multi[QTYPE_Q6_K] = NULL;
}
