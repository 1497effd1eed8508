/* quant_act_avx512.c — the activation quantizers (Q8_0 and Q8_K) at
 * AVX-512 width, for the AVX-512 and AMX tables; bit for bit the reference
 * rules in quant_ref.c (and the AVX2 quantizers of quant_avx2.c, which the
 * other SIMD tables keep).
 *
 * Why: a batch-32 decode step quantizes every token's FFN hidden row
 * (2048 wide, Q8_K for the K-type down matrices, Q8_0 for the others) and
 * attention output in every layer, and the AVX2 Q8_K rule took 1.5
 * cycles an element (36 us a step's 32 rows of 2048 on the Emerald Rapids
 * host: ~2% of a one-thread step, all layers), most of it in sixteen
 * horizontal sums a block for its bsums. Here a block's quants are packed
 * four vectors at a time and the bsums come from vpsadbw on the packed
 * bytes.
 *
 * NaN inputs (which no rule here defines a result for) are skipped when
 * the largest magnitude is found, as the reference's compare skips them. */
#include <immintrin.h>
#include <string.h>

#include "quant.h"
#include "quant_int.h"

static inline __m512 abs16(__m512 v)
{
	return _mm512_andnot_ps(_mm512_set1_ps(-0.0f), v);
}

/* Four vectors of 16 int32 (each within int8) as 64 bytes in order: the
 * packs work per 128-bit lane, leaving lane L's dwords as a[4L..4L+3],
 * b[..], c[..], d[..]; the permute puts vector k's dword L at 4k + L. */
static inline __m512i pack64(__m512i a, __m512i b, __m512i c, __m512i d)
{
	const __m512i p = _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
	const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13,
						2, 6, 10, 14, 3, 7, 11, 15);
	return _mm512_permutexvar_epi32(order, p);
}

/* The products rounded in the current rounding mode (nearest, ties to
 * even: nothing here changes MXCSR), as the reference's rintf and
 * nearbyintf round them. */
static inline __m512i round16(__m512 v)
{
	return _mm512_cvtps_epi32(v);
}

/* The first element of largest magnitude of the 256 in v (its sign sets
 * Q8_K's scale), or 0 where all are zero. */
static inline float q8k_signed_max(const __m512 v[16])
{
	__m512 am = _mm512_setzero_ps();
	for (int k = 0; k < 16; k++) /* a NaN element: max_ps returns am */
		am = _mm512_max_ps(abs16(v[k]), am);
	const float m = _mm512_reduce_max_ps(am);
	if (m == 0.0f)
		return 0.0f;
	const __m512 vm = _mm512_set1_ps(m);
	for (int k = 0; k < 16; k++) {
		const __mmask16 hit = _mm512_cmp_ps_mask(abs16(v[k]), vm, _CMP_EQ_OQ);
		if (hit) {
			float lanes[16];
			_mm512_storeu_ps(lanes, v[k]);
			return lanes[__builtin_ctz((unsigned)hit)];
		}
	}
	return 0.0f;
}

/* bsums of the 256 quants in q[0..3] (64 each, in order): each 16's sum.
 * vpsadbw sums 8 unsigned bytes into a qword, so the quants are offset
 * by 128 first (x ^ 0x80) and each sum of 16 loses 2048 again. */
static inline void q8k_bsums(const __m512i q[4], int16_t bsums[16])
{
	const __m512i flip = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
	__m512i s[4];
	for (int k = 0; k < 4; k++)
		s[k] = _mm512_sad_epu8(_mm512_xor_si512(q[k], flip), zero);
	/* qwords 2g and 2g + 1 of s[k] are bsum 4k + g's two halves */
	const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
	const __m512i odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
	const __m512i lo = _mm512_add_epi64(_mm512_permutex2var_epi64(s[0], even, s[1]),
					    _mm512_permutex2var_epi64(s[0], odd, s[1]));
	const __m512i hi = _mm512_add_epi64(_mm512_permutex2var_epi64(s[2], even, s[3]),
					    _mm512_permutex2var_epi64(s[2], odd, s[3]));
	const __m256i sums = _mm256_set_m128i(_mm512_cvtepi64_epi16(hi), _mm512_cvtepi64_epi16(lo));
	_mm256_storeu_si256((__m256i *)bsums, _mm256_sub_epi16(sums, _mm256_set1_epi16(2048)));
}

/* ggml's quantize_row_q8_K_ref (quant_ref.c): iscale = -127 / max, q =
 * nearest-even(iscale * x) capped at 127 (the packs' saturation: no
 * product rounds above 127, nor below -128), d = 1 / iscale; an all-zero
 * block is all zeros. */
static void quantize_q8_K(const float *x, void *dst, int64_t n)
{
	struct block_q8_K *y = dst;
	for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
		__m512 v[16];
		for (int k = 0; k < 16; k++)
			v[k] = _mm512_loadu_ps(x + 16 * k);
		const float max = q8k_signed_max(v);
		if (max == 0.0f) {
			memset(&y[i], 0, sizeof y[i]);
			continue;
		}
		const float iscale = -127.0f / max;
		const __m512 vs = _mm512_set1_ps(iscale);
		__m512i q[4];
		for (int k = 0; k < 4; k++) {
			q[k] = pack64(round16(_mm512_mul_ps(vs, v[4 * k])),
				      round16(_mm512_mul_ps(vs, v[4 * k + 1])),
				      round16(_mm512_mul_ps(vs, v[4 * k + 2])),
				      round16(_mm512_mul_ps(vs, v[4 * k + 3])));
			_mm512_storeu_si512(y[i].qs + 64 * k, q[k]);
		}
		q8k_bsums(q, y[i].bsums);
		y[i].d = 1.0f / iscale;
	}
}

/* Q8_0 (quant_ref.c's quantize_q8_block): d = amax / 127, q =
 * nearest-even(x * (127 / amax)); two blocks at a time, their two
 * vectors each packed together. */
static void q8_0_pair(const float *x, struct block_q8_0 *y, int nb)
{
	__m512 v[4];
	__m512i q[4] = { _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
			 _mm512_setzero_si512() };
	for (int b = 0; b < 2; b++) {
		v[2 * b] = _mm512_loadu_ps(x + QK * b);
		v[2 * b + 1] = _mm512_loadu_ps(x + QK * b + 16);
	}
	for (int b = 0; b < nb; b++) {
		const __m512 m0 = _mm512_max_ps(abs16(v[2 * b]), _mm512_setzero_ps());
		const float amax = _mm512_reduce_max_ps(_mm512_max_ps(abs16(v[2 * b + 1]), m0));
		const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
		/* F16C's rounding: f32_to_fp16's bits (see quant_avx2.c) */
		y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		const __m512 vid = _mm512_set1_ps(id);
		q[2 * b] = round16(_mm512_mul_ps(v[2 * b], vid));
		q[2 * b + 1] = round16(_mm512_mul_ps(v[2 * b + 1], vid));
	}
	const __m512i p = pack64(q[0], q[1], q[2], q[3]);
	_mm256_storeu_si256((__m256i *)y[0].qs, _mm512_castsi512_si256(p));
	if (nb == 2)
		_mm256_storeu_si256((__m256i *)y[1].qs, _mm512_extracti64x4_epi64(p, 1));
}

static void quantize_q8_0(const float *x, void *dst, int64_t n)
{
	struct block_q8_0 *y = dst;
	const int64_t nb = n / QK;
	int64_t b = 0;
	for (; b + 2 <= nb; b += 2)
		q8_0_pair(x + b * QK, y + b, 2);
	if (b < nb) { /* the odd block: its loads from a copy, the rest zeros */
		float tail[2 * QK] = { 0 };
		memcpy(tail, x + b * QK, QK * sizeof *x);
		q8_0_pair(tail, y + b, 1);
	}
}

void quant_act_avx512_register(struct quant_kernels *k)
{
	k->quantize_act[QTYPE_Q8_0] = quantize_q8_0;
	k->quantize_act[QTYPE_Q8_K] = quantize_q8_K;
}
