/* quant_avx2.c — AVX2 + FMA + F16C kernels; compiled with -mavx2 -mfma
 * -mf16c and only called after cpuid said so (quant.c).
 *
 * Every kernel here has its scalar twin in quant_ref.c and is tested
 * against it (tests/test_quant.c). The dot products form the same exact
 * integer sums as the reference; they keep them in 8 int32 lanes, scale each
 * block's lanes with one FMA into float accumulators and reduce across lanes
 * once per row, so only the order of the float additions differs.
 *
 * Integer ranges (why no 16-bit saturation can occur): activations are in
 * [-127, 127] (quantize_act never emits -128). _mm256_maddubs_epi16 adds two
 * u8*s8 products: with |w| <= 128 (sign trick) that is <= 32512; with
 * unsigned 6-bit weights (Q6_K) <= 16002.
 *
 * The activation quantizers are byte-identical to the reference: same
 * scalar formulas for the scales, IEEE mul/div in the same order, and the
 * same rounding (nearest-even for Q8_0/Q8_1 as llama.cpp's x86 kernels, nearest-even
 * for Q8_K). */
#include <immintrin.h>
#include <string.h>

#include "quant_avx2_int.h"

/* ---- helpers ---- */

/* The fp16 at p, where at least 4 bytes are readable from p (a scale at the
 * start of a block): a plain 32-bit load instead of a word insert, which
 * keeps the shuffle ports free for the quants. */
static inline __m128 half_load4(const void *p)
{
	int32_t u;
	memcpy(&u, p, sizeof u);
	return _mm_cvtph_ps(_mm_cvtsi32_si128(u));
}

/* d_w * d_a of two blocks that both start with their fp16 scale, broadcast. */
static inline __m256 scale_product(const void *w, const void *a)
{
	return _mm256_broadcastss_ps(_mm_mul_ss(half_load4(w), half_load4(a)));
}

static inline float hsum_ps(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static inline float hsum_ps128(__m128 s)
{
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* Unsigned bytes x (< 64) * signed bytes y, grouped by four into int32. */
static inline __m256i dot_u8_i8(__m256i x, __m256i y)
{
	return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}

/* ---- legacy 32-element blocks ----
 *
 * Q4_0, Q5_0 and Q8_0 are in quant_gemm_avx2.c (a dot and a matrix kernel
 * sharing one arithmetic). */

/* Q4_1 and Q5_1 against Q8_1: unsigned quants, value = q*d + m; the min
 * term m * s uses the activation block's s = d * sum(q). */
static void dot_q4_1(int64_t n, float *out, const void *vw, const void *va)
{
	const struct block_q4_1 *w = vw;
	const struct block_q8_1 *a = va;
	__m256 acc = _mm256_setzero_ps();
	float summ = 0.0f;
	for (int64_t i = 0; i < n / QK; i++) {
		__m256i p = dot_u8_i8(nibbles_expand(w[i].qs), load256(a[i].qs));
		__m256 d = scale_product(&w[i], &a[i]);
		acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
		summ += half_load(w[i].m) * half_load(a[i].s);
	}
	*out = hsum_ps(acc) + summ;
}

static void dot_q5_1(int64_t n, float *out, const void *vw, const void *va)
{
	const struct block_q5_1 *w = vw;
	const struct block_q8_1 *a = va;
	__m256 acc = _mm256_setzero_ps();
	float summ = 0.0f;
	for (int64_t i = 0; i < n / QK; i++) {
		__m256i hi = _mm256_and_si256(bits_expand(w[i].qh), _mm256_set1_epi8(0x10));
		__m256i q = _mm256_or_si256(nibbles_expand(w[i].qs), hi);
		__m256i p = dot_u8_i8(q, load256(a[i].qs));
		__m256 d = scale_product(&w[i], &a[i]);
		acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
		summ += half_load(w[i].m) * half_load(a[i].s);
	}
	*out = hsum_ps(acc) + summ;
}

/* ---- K-quants ----
 *
 * Q4_K and Q6_K are in quant_gemm_k_avx2.c (a dot and a matrix kernel
 * sharing one arithmetic); the helpers they share with Q5_K, Q2_K and Q3_K
 * are in quant_avx2_int.h. */

static void dot_q5_K(int64_t n, float *out, const void *vw, const void *va)
{
	const struct block_q5_K *w = vw;
	const struct block_q8_K *a = va;
	const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
	__m256 acc = _mm256_setzero_ps();
	__m128 accm = _mm_setzero_ps();
	for (int64_t i = 0; i < n / QK_K; i++) {
		float d = half_load(w[i].d) * a[i].d;
		float dmin = half_load(w[i].dmin) * a[i].d;
		__m256i sm = k4_scales_mins(w[i].scales);
		accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(k4_min_sums(sm, a[i].bsums)), accm);
		__m256i sc = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
		__m256i qh = load256(w[i].qh);
		__m256i sumi = _mm256_setzero_si256();
		/* 5th bit of sub-block s is bit s of qh[l]: mask it, move to bit 4 */
#define Q5K_CHUNK(j)                                                                        \
	do {                                                                                \
		__m256i q = load256(w[i].qs + 32 * (j));                                    \
		__m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * (j)), one);          \
		__m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * (j) + 1), one);      \
		__m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(h0, 4)); \
		__m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),   \
					     _mm256_slli_epi16(h1, 4));                     \
		sumi = _mm256_add_epi32(sumi, k4_chunk(lo, hi, a[i].qs + 64 * (j),           \
						       _mm256_shuffle_epi8(sc, BCAST16(2 * (j))), \
						       _mm256_shuffle_epi8(sc, BCAST16(2 * (j) + 1)))); \
	} while (0)
		Q5K_CHUNK(0);
		Q5K_CHUNK(1);
		Q5K_CHUNK(2);
		Q5K_CHUNK(3);
#undef Q5K_CHUNK
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
	}
	*out = hsum_ps(acc) - hsum_ps128(accm);
}

/* ---- K-quants with 16-element sub-blocks (Q2_K, Q3_K) ----
 *
 * These decode 32 elements at a time into unsigned quants u (q plus a fixed
 * offset). A 32-element quarter spans two sub-blocks: after maddubs the low
 * 128-bit lane holds the first, the high lane the second, so the int16
 * scales are broadcast pairwise (scales_pair) before madd. The offset is
 * taken back once per super-block from the activation bsums:
 * sum_s sc[s] * (sum u*a - off * bsum[s]). */

/* Scaled int32 partial sums of quarter k of a half: u the 32 unsigned
 * quants, q8 its 32 activations, sc from scales_half(). */
static inline __m256i quarter_dot(__m256i u, const int8_t *q8, __m256i sc, int k)
{
	__m256i p = _mm256_maddubs_epi16(u, load256(q8));
	return _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc, bcast_pair16(k)));
}

/* Q2_K: u = q (2 bits at 2j of qs[32n + l]), no offset; the mins are a
 * separate term: value = d*sc*q - dmin*m. */
static inline __m256i q2k_half_dot(const uint8_t *qs, const int8_t *q8, __m256i sc)
{
	const __m256i m2 = _mm256_set1_epi8(3);
	__m256i q = load256(qs);
	__m256i s0 = quarter_dot(_mm256_and_si256(q, m2), q8, sc, 0);
	__m256i s1 = quarter_dot(_mm256_and_si256(_mm256_srli_epi16(q, 2), m2), q8 + 32, sc, 1);
	__m256i s2 = quarter_dot(_mm256_and_si256(_mm256_srli_epi16(q, 4), m2), q8 + 64, sc, 2);
	__m256i s3 = quarter_dot(_mm256_and_si256(_mm256_srli_epi16(q, 6), m2), q8 + 96, sc, 3);
	return _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3));
}

static void dot_q2_K(int64_t n, float *out, const void *vw, const void *va)
{
	const struct block_q2_K *w = vw;
	const struct block_q8_K *a = va;
	const __m128i m4 = _mm_set1_epi8(0x0f);
	__m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
	for (int64_t i = 0; i < n / QK_K; i++) {
		float d = half_load(w[i].d) * a[i].d;
		float dmin = half_load(w[i].dmin) * a[i].d;
		__m128i raw = load128(w[i].scales);
		__m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, m4));
		__m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
		__m256i msum = _mm256_madd_epi16(mn16, load256(a[i].bsums));
		accm = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(msum), accm);
		__m256i sumi = q2k_half_dot(w[i].qs, a[i].qs, scales_half(sc16, 0));
		sumi = _mm256_add_epi32(sumi, q2k_half_dot(w[i].qs + 32, a[i].qs + 128, scales_half(sc16, 1)));
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
	}
	*out = hsum_ps(acc) - hsum_ps(accm);
}

/* Q3_K scales: 16 six-bit values minus 32 as int16 (the layout of
 * quant_q3k_scales_unpack, four at a time: low nibbles from bytes 0..7,
 * high bit pairs from bytes 8..11). */
static inline __m256i q3k_scales(const uint8_t p[12])
{
	uint32_t u[3];
	memcpy(u, p, 12);
	uint32_t s0 = (u[0] & 0x0f0f0f0f) | (u[2] & 0x03030303) << 4;
	uint32_t s1 = (u[1] & 0x0f0f0f0f) | ((u[2] >> 2) & 0x03030303) << 4;
	uint32_t s2 = ((u[0] >> 4) & 0x0f0f0f0f) | ((u[2] >> 4) & 0x03030303) << 4;
	uint32_t s3 = ((u[1] >> 4) & 0x0f0f0f0f) | ((u[2] >> 6) & 0x03030303) << 4;
	__m128i s = _mm_sub_epi8(_mm_set_epi32((int)s3, (int)s2, (int)s1, (int)s0), _mm_set1_epi8(32));
	return _mm256_cvtepi8_epi16(s);
}

/* Q3_K: u = q + 4 = 2 low bits | hmask bit << 2 (the bit is set when no 4
 * is subtracted). Half h uses hmask bits 4h .. 4h+3. */
static inline __m256i q3k_half_dot(const struct block_q3_K *b, const int8_t *q8, __m256i sc16, int h)
{
	const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
	__m256i sc = scales_half(sc16, h);
	__m256i q = load256(b->qs + 32 * h), hm = load256(b->hmask);
	__m256i sum = _mm256_setzero_si256();
	for (int j = 0; j < 4; j++) {
		__m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m2);
		__m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), one);
		__m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
		sum = _mm256_add_epi32(sum, quarter_dot(u, q8 + 32 * j, sc, j));
	}
	return sum;
}

static void dot_q3_K(int64_t n, float *out, const void *vw, const void *va)
{
	const struct block_q3_K *w = vw;
	const struct block_q8_K *a = va;
	__m256 acc = _mm256_setzero_ps();
	for (int64_t i = 0; i < n / QK_K; i++) {
		float d = half_load(w[i].d) * a[i].d;
		__m256i sc16 = q3k_scales(w[i].scales);
		__m256i sumi = offset_correction(sc16, a[i].bsums, 2);
		sumi = _mm256_add_epi32(sumi, q3k_half_dot(&w[i], a[i].qs, sc16, 0));
		sumi = _mm256_add_epi32(sumi, q3k_half_dot(&w[i], a[i].qs + 128, sc16, 1));
		acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
	}
	*out = hsum_ps(acc);
}

/* ---- float weights ---- */

static void dot_f32(int64_t n, float *out, const void *vw, const void *va)
{
	const float *w = vw, *a = va;
	__m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
			  _mm256_setzero_ps() };
	int64_t i = 0;
	for (; i + 32 <= n; i += 32)
		for (int k = 0; k < 4; k++)
			acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8 * k),
						 _mm256_loadu_ps(a + i + 8 * k), acc[k]);
	float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
	for (; i < n; i++)
		sum += w[i] * a[i];
	*out = sum;
}

static void dot_f16(int64_t n, float *out, const void *vw, const void *va)
{
	const uint16_t *w = vw;
	const float *a = va;
	__m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
			  _mm256_setzero_ps() };
	int64_t i = 0;
	for (; i + 32 <= n; i += 32)
		for (int k = 0; k < 4; k++)
			acc[k] = _mm256_fmadd_ps(_mm256_cvtph_ps(load128(w + i + 8 * k)),
						 _mm256_loadu_ps(a + i + 8 * k), acc[k]);
	float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
	for (; i < n; i++)
		sum += half_load(w[i]) * a[i];
	*out = sum;
}

static void dot_bf16(int64_t n, float *out, const void *vw, const void *va)
{
	const uint16_t *w = vw;
	const float *a = va;
	__m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
			  _mm256_setzero_ps() };
	int64_t i = 0;
	for (; i + 32 <= n; i += 32)
		for (int k = 0; k < 4; k++) {
			__m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(w + i + 8 * k)), 16);
			acc[k] = _mm256_fmadd_ps(_mm256_castsi256_ps(x), _mm256_loadu_ps(a + i + 8 * k),
						 acc[k]);
		}
	float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
	for (; i < n; i++)
		sum += bf16_to_f32(w[i]) * a[i];
	*out = sum;
}

/* ---- activation quantizers ---- */

static inline __m256 abs_ps(__m256 v)
{
	return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

static inline float hmax_ps(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

/* Packs 4 x 8 int32 (each within int8 range) into 32 bytes in order. */
static inline __m256i pack_i32_to_i8(__m256i i0, __m256i i1, __m256i i2, __m256i i3)
{
	__m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
	return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One 32-element block the Q8_0 way; returns d and writes the quants and
 * their sum (for Q8_1's s). */
static float q8_block(const float *x, int8_t *qs, uint16_t *d16, int *sum)
{
	__m256 v[4];
	__m256 amax = _mm256_setzero_ps();
	for (int k = 0; k < 4; k++) {
		v[k] = _mm256_loadu_ps(x + 8 * k);
		amax = _mm256_max_ps(amax, abs_ps(v[k]));
	}
	float mx = hmax_ps(amax);
	float d = mx / 127.0f;
	float id = mx != 0.0f ? 127.0f / mx : 0.0f;
	/* F16C's rounding, f32_to_fp16's bits (see quantize_f16) without a
	 * call into its software conversion per block */
	*d16 = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256i q[4];
	for (int k = 0; k < 4; k++)
		q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], _mm256_set1_ps(id)),
							  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	_mm256_storeu_si256((__m256i *)qs, pack_i32_to_i8(q[0], q[1], q[2], q[3]));
	*sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
	return d;
}

static void quantize_q8_0(const float *x, void *dst, int64_t n)
{
	struct block_q8_0 *y = dst;
	int sum;
	for (int64_t i = 0; i < n / QK; i++)
		q8_block(x + i * QK, y[i].qs, &y[i].d, &sum);
}

static void quantize_q8_1(const float *x, void *dst, int64_t n)
{
	struct block_q8_1 *y = dst;
	int sum;
	for (int64_t i = 0; i < n / QK; i++) {
		float d = q8_block(x + i * QK, y[i].qs, &y[i].d, &sum);
		y[i].s = f32_to_fp16((float)sum * d);
	}
}

/* The first element of largest magnitude (its sign sets Q8_K's scale),
 * found 8 at a time: a scalar search for it was half of quantizing a
 * 2048-wide row (the FFN's down input, every token of a prefill). */
static float q8k_signed_max(const float *x)
{
	__m256 amax = _mm256_setzero_ps();
	for (int j = 0; j < QK_K; j += 8)
		amax = _mm256_max_ps(amax, abs_ps(_mm256_loadu_ps(x + j)));
	const float m = hmax_ps(amax);
	const __m256 vm = _mm256_set1_ps(m);
	for (int j = 0; j < QK_K; j += 8) {
		const int hit = _mm256_movemask_ps(
			_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + j)), vm, _CMP_EQ_OQ));
		if (hit)
			return x[j + __builtin_ctz((unsigned)hit)];
	}
	return 0.0f;
}

static void quantize_q8_K(const float *x, void *dst, int64_t n)
{
	struct block_q8_K *y = dst;
	for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
		float max = q8k_signed_max(x);
		memset(&y[i], 0, sizeof y[i]);
		if (max == 0.0f)
			continue;
		float iscale = -127.0f / max;
		__m256 vs = _mm256_set1_ps(iscale);
		for (int j = 0; j < QK_K; j += 32) {
			__m256i q[4];
			for (int k = 0; k < 4; k++) {
				__m256 v = _mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 8 * k));
				v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
				q[k] = _mm256_min_epi32(_mm256_cvttps_epi32(v), _mm256_set1_epi32(127));
			}
			_mm256_storeu_si256((__m256i *)(y[i].qs + j), pack_i32_to_i8(q[0], q[1], q[2], q[3]));
			y[i].bsums[j / 16] = (int16_t)hsum_epi32(_mm256_add_epi32(q[0], q[1]));
			y[i].bsums[j / 16 + 1] = (int16_t)hsum_epi32(_mm256_add_epi32(q[2], q[3]));
		}
		y[i].d = 1.0f / iscale;
	}
}

/* x -> F16, to nearest even, 8 at a time with F16C: f32_to_fp16's bits
 * (the F16 KV cache stores rows through it). */
static void quantize_f16(const float *x, void *vy, int64_t n)
{
	uint16_t *y = vy;
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(y + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(x + i),
						 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	for (; i < n; i++)
		y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

void quant_avx2_register(struct quant_kernels *k)
{
	k->dot[QTYPE_F32] = dot_f32;
	k->dot[QTYPE_F16] = dot_f16;
	k->dot[QTYPE_BF16] = dot_bf16;
	k->dot[QTYPE_Q4_1] = dot_q4_1;
	k->dot[QTYPE_Q5_1] = dot_q5_1;
	k->dot[QTYPE_Q2_K] = dot_q2_K;
	k->dot[QTYPE_Q3_K] = dot_q3_K;
	k->dot[QTYPE_Q5_K] = dot_q5_K;
	k->quantize_act[QTYPE_F16] = quantize_f16;
	k->quantize_act[QTYPE_Q8_0] = quantize_q8_0;
	k->quantize_act[QTYPE_Q8_1] = quantize_q8_1;
	k->quantize_act[QTYPE_Q8_K] = quantize_q8_K;
}
