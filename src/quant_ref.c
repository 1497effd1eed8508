/* quant_ref.c — the portable scalar reference of the quant module: type
 * traits, half-precision conversion, and dequantize / quantize / dot for
 * every type. This file is the ground truth the SIMD kernels are tested
 * against, so it favours the obvious over the fast.
 *
 * Design: every block is first *unpacked* into plain integers — the signed
 * quant value of each element, an integer scale (and min) per sub-block and
 * the float super-scales — by one small function per type. Dequantize and
 * dot are then written once over the unpacked form:
 *
 *   dequantize:  y[e] = (d * sc[s]) * q[e] - (dmin * mn[s])
 *   dot:         isum = sum_s sc[s] * sum_{e in s} q[e] * a[e]   (exact int)
 *                imin = sum_s mn[s] * sum_{e in s} a[e]          (from bsums)
 *                sum += (d * da) * isum - (dmin * da) * imin
 *
 * which is ggml's arithmetic: the float expressions of dequantize are the
 * ones of ggml-quants.c and gguf-py (so results are bit-identical to both),
 * and the dot products form the same exact integer sums per sub-block as
 * ggml's reference vec_dot before scaling them (only the order of the float
 * additions that follow may differ). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "quant.h"
#include "quant_int.h"

/* ---- type traits ---- */

#define TRAIT(id, nm, elems, bytes, act) \
	[id] = { .name = nm, .block_elems = elems, .block_bytes = bytes, .act_type = act }

static const struct qtype_traits traits_table[QTYPE_COUNT] = {
	TRAIT(QTYPE_F32, "F32", 1, 4, QTYPE_F32),
	TRAIT(QTYPE_F16, "F16", 1, 2, QTYPE_F32),
	TRAIT(QTYPE_BF16, "BF16", 1, 2, QTYPE_F32),
	TRAIT(QTYPE_Q4_0, "Q4_0", QK, sizeof(struct block_q4_0), QTYPE_Q8_0),
	TRAIT(QTYPE_Q4_1, "Q4_1", QK, sizeof(struct block_q4_1), QTYPE_Q8_1),
	TRAIT(QTYPE_Q5_0, "Q5_0", QK, sizeof(struct block_q5_0), QTYPE_Q8_0),
	TRAIT(QTYPE_Q5_1, "Q5_1", QK, sizeof(struct block_q5_1), QTYPE_Q8_1),
	TRAIT(QTYPE_Q8_0, "Q8_0", QK, sizeof(struct block_q8_0), QTYPE_Q8_0),
	TRAIT(QTYPE_Q8_1, "Q8_1", QK, sizeof(struct block_q8_1), QTYPE_Q8_1),
	TRAIT(QTYPE_Q2_K, "Q2_K", QK_K, sizeof(struct block_q2_K), QTYPE_Q8_K),
	TRAIT(QTYPE_Q3_K, "Q3_K", QK_K, sizeof(struct block_q3_K), QTYPE_Q8_K),
	TRAIT(QTYPE_Q4_K, "Q4_K", QK_K, sizeof(struct block_q4_K), QTYPE_Q8_K),
	TRAIT(QTYPE_Q5_K, "Q5_K", QK_K, sizeof(struct block_q5_K), QTYPE_Q8_K),
	TRAIT(QTYPE_Q6_K, "Q6_K", QK_K, sizeof(struct block_q6_K), QTYPE_Q8_K),
	TRAIT(QTYPE_Q8_K, "Q8_K", QK_K, sizeof(struct block_q8_K), QTYPE_Q8_K),
};

const struct qtype_traits *qtype_traits(uint32_t t)
{
	if (t >= QTYPE_COUNT || !traits_table[t].name)
		return NULL;
	return &traits_table[t];
}

int qtype_row_bytes(uint32_t t, uint64_t n, uint64_t *bytes)
{
	const struct qtype_traits *tr = qtype_traits(t);
	if (!tr || n % tr->block_elems)
		return -1;
	uint64_t blocks = n / tr->block_elems;
	if (blocks > UINT64_MAX / tr->block_bytes)
		return -1;
	*bytes = blocks * tr->block_bytes;
	return 0;
}

/* ---- half precision ---- */

static float f32_from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

float fp16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;
	if (exp == 0x1f) /* inf, or NaN with its payload kept */
		return f32_from_bits(sign | 0x7f800000u | man << 13);
	if (exp == 0) {
		if (man == 0)
			return f32_from_bits(sign);
		exp = 1; /* subnormal: normalise the mantissa */
		while (!(man & 0x400)) {
			man <<= 1;
			exp--;
		}
		man &= 0x3ff;
	}
	return f32_from_bits(sign | (exp + 112) << 23 | man << 13);
}

/* Rounds the 24-bit mantissa mant right by r bits, to nearest even. */
static uint32_t shift_round_even(uint32_t mant, uint32_t r)
{
	uint32_t q = mant >> r;
	uint32_t rem = mant & ((1u << r) - 1);
	uint32_t half = 1u << (r - 1);
	if (rem > half || (rem == half && (q & 1)))
		q++;
	return q;
}

uint16_t f32_to_fp16(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t a = u & 0x7fffffff;
	if (a > 0x7f800000) /* NaN: keep it quiet and keep the top payload */
		return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
	if (a >= 0x477ff000) /* >= 65520 rounds to infinity */
		return (uint16_t)(sign | 0x7c00);
	if (a < 0x38800000) { /* below 2^-14: half subnormal or zero */
		uint32_t exp = a >> 23;
		if (exp < 102) /* < 2^-25: rounds to zero */
			return sign;
		uint32_t mant = (a & 0x7fffff) | 0x800000;
		return (uint16_t)(sign | shift_round_even(mant, 126 - exp));
	}
	uint32_t h = (a >> 13) - (112u << 10);
	uint32_t rem = a & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}

uint16_t f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);
	if ((u & 0x7fffffff) > 0x7f800000) /* NaN: force quiet */
		return (uint16_t)((u >> 16) | 64);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* ---- unpacked blocks ---- */

/* A legacy block as integers: value[e] = q[e] * d + m. */
struct lq_block {
	int8_t q[QK];
	float d, m;
};

/* A K-quant super-block as integers (see the file comment). */
struct kq_block {
	int8_t q[QK_K];
	int16_t sc[16];
	int16_t mn[16];
	int sub;     /* elements per sub-block: 16 or 32 */
	int has_min; /* 0: mn[] and dmin are unused */
	float d, dmin;
};

static void nibbles_unpack(const uint8_t qs[QK / 2], int8_t q[QK])
{
	for (int j = 0; j < QK / 2; j++) {
		q[j] = (int8_t)(qs[j] & 15);
		q[j + QK / 2] = (int8_t)(qs[j] >> 4);
	}
}

static void fifth_bits_add(const uint8_t qh[4], int8_t q[QK])
{
	uint32_t h;
	memcpy(&h, qh, sizeof h);
	for (int e = 0; e < QK; e++)
		q[e] = (int8_t)(q[e] | ((h >> e) & 1) << 4);
}

static void lq_unpack(enum qtype t, const void *blk, struct lq_block *o)
{
	o->m = 0.0f;
	switch (t) {
	case QTYPE_Q4_0: {
		const struct block_q4_0 *b = blk;
		nibbles_unpack(b->qs, o->q);
		for (int e = 0; e < QK; e++)
			o->q[e] = (int8_t)(o->q[e] - 8);
		o->d = fp16_to_f32(b->d);
		break;
	}
	case QTYPE_Q4_1: {
		const struct block_q4_1 *b = blk;
		nibbles_unpack(b->qs, o->q);
		o->d = fp16_to_f32(b->d);
		o->m = fp16_to_f32(b->m);
		break;
	}
	case QTYPE_Q5_0: {
		const struct block_q5_0 *b = blk;
		nibbles_unpack(b->qs, o->q);
		fifth_bits_add(b->qh, o->q);
		for (int e = 0; e < QK; e++)
			o->q[e] = (int8_t)(o->q[e] - 16);
		o->d = fp16_to_f32(b->d);
		break;
	}
	case QTYPE_Q5_1: {
		const struct block_q5_1 *b = blk;
		nibbles_unpack(b->qs, o->q);
		fifth_bits_add(b->qh, o->q);
		o->d = fp16_to_f32(b->d);
		o->m = fp16_to_f32(b->m);
		break;
	}
	case QTYPE_Q8_0: {
		const struct block_q8_0 *b = blk;
		memcpy(o->q, b->qs, QK);
		o->d = fp16_to_f32(b->d);
		break;
	}
	default: { /* QTYPE_Q8_1 */
		const struct block_q8_1 *b = blk;
		memcpy(o->q, b->qs, QK);
		o->d = fp16_to_f32(b->d);
		break;
	}
	}
}

void quant_k4_scales_unpack(const uint8_t p[12], uint8_t sc[8], uint8_t mn[8])
{
	for (int j = 0; j < 4; j++) {
		sc[j] = p[j] & 63;
		mn[j] = p[j + 4] & 63;
		sc[j + 4] = (uint8_t)((p[j + 8] & 15) | (p[j] >> 6) << 4);
		mn[j + 4] = (uint8_t)((p[j + 8] >> 4) | (p[j + 4] >> 6) << 4);
	}
}

void quant_q3k_scales_unpack(const uint8_t p[12], int8_t sc[16])
{
	for (int i = 0; i < 16; i++) {
		int lo = i < 8 ? p[i] & 15 : p[i - 8] >> 4;
		int hi = (p[8 + i % 4] >> (2 * (i / 4))) & 3;
		sc[i] = (int8_t)((lo | hi << 4) - 32);
	}
}

/* Q2_K and Q3_K share the 2-bit layout: element e = 128n + 32j + l sits in
 * bits 2j of qs[32n + l], and belongs to sub-block e / 16. */
static int q2_bits(const uint8_t *qs, int e)
{
	int n = e / 128, j = (e % 128) / 32, l = e % 32;
	return (qs[32 * n + l] >> (2 * j)) & 3;
}

static void kq_unpack_q2_K(const struct block_q2_K *b, struct kq_block *o)
{
	for (int e = 0; e < QK_K; e++)
		o->q[e] = (int8_t)q2_bits(b->qs, e);
	for (int s = 0; s < 16; s++) {
		o->sc[s] = b->scales[s] & 15;
		o->mn[s] = b->scales[s] >> 4;
	}
	o->sub = 16;
	o->has_min = 1;
	o->d = fp16_to_f32(b->d);
	o->dmin = fp16_to_f32(b->dmin);
}

static void kq_unpack_q3_K(const struct block_q3_K *b, struct kq_block *o)
{
	int8_t sc[16];
	for (int e = 0; e < QK_K; e++) {
		int hbit = (b->hmask[e % 32] >> (e / 32)) & 1;
		o->q[e] = (int8_t)(q2_bits(b->qs, e) - (hbit ? 0 : 4));
	}
	quant_q3k_scales_unpack(b->scales, sc);
	for (int s = 0; s < 16; s++)
		o->sc[s] = sc[s];
	o->sub = 16;
	o->has_min = 0;
	o->d = fp16_to_f32(b->d);
	o->dmin = 0.0f;
}

/* Q4_K / Q5_K: element e = 64c + 32h + l is the low (h = 0) or high nibble
 * of qs[32c + l]; its 5th bit (Q5_K) is bit e / 32 of qh[l]. */
static void kq_unpack_q45_K(const uint8_t *qs, const uint8_t *qh, const uint8_t *scales,
			    uint16_t d, uint16_t dmin, struct kq_block *o)
{
	uint8_t sc[8], mn[8];
	for (int e = 0; e < QK_K; e++) {
		int c = e / 64, h = (e / 32) & 1, l = e % 32;
		int v = (qs[32 * c + l] >> (4 * h)) & 15;
		if (qh)
			v |= ((qh[l] >> (e / 32)) & 1) << 4;
		o->q[e] = (int8_t)v;
	}
	quant_k4_scales_unpack(scales, sc, mn);
	for (int s = 0; s < 8; s++) {
		o->sc[s] = sc[s];
		o->mn[s] = mn[s];
	}
	o->sub = 32;
	o->has_min = 1;
	o->d = fp16_to_f32(d);
	o->dmin = fp16_to_f32(dmin);
}

/* Q6_K: element e = 128h + 32k + l: low 4 bits are the low (k < 2) or high
 * nibble of ql[64h + 32(k&1) + l], top 2 bits are bits 2k of qh[32h + l]. */
static void kq_unpack_q6_K(const struct block_q6_K *b, struct kq_block *o)
{
	for (int e = 0; e < QK_K; e++) {
		int h = e / 128, k = (e % 128) / 32, l = e % 32;
		int lo = (b->ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 15;
		int hi = (b->qh[32 * h + l] >> (2 * k)) & 3;
		o->q[e] = (int8_t)((lo | hi << 4) - 32);
	}
	for (int s = 0; s < 16; s++)
		o->sc[s] = b->scales[s];
	o->sub = 16;
	o->has_min = 0;
	o->d = fp16_to_f32(b->d);
	o->dmin = 0.0f;
}

static void kq_unpack_q8_K(const struct block_q8_K *b, struct kq_block *o)
{
	memcpy(o->q, b->qs, QK_K);
	for (int s = 0; s < 16; s++)
		o->sc[s] = 1;
	o->sub = 16;
	o->has_min = 0;
	o->d = b->d;
	o->dmin = 0.0f;
}

static void kq_unpack(enum qtype t, const void *blk, struct kq_block *o)
{
	switch (t) {
	case QTYPE_Q2_K:
		kq_unpack_q2_K(blk, o);
		break;
	case QTYPE_Q3_K:
		kq_unpack_q3_K(blk, o);
		break;
	case QTYPE_Q4_K: {
		const struct block_q4_K *b = blk;
		kq_unpack_q45_K(b->qs, NULL, b->scales, b->d, b->dmin, o);
		break;
	}
	case QTYPE_Q5_K: {
		const struct block_q5_K *b = blk;
		kq_unpack_q45_K(b->qs, b->qh, b->scales, b->d, b->dmin, o);
		break;
	}
	case QTYPE_Q6_K:
		kq_unpack_q6_K(blk, o);
		break;
	default: /* QTYPE_Q8_K */
		kq_unpack_q8_K(blk, o);
		break;
	}
}

static int type_is_legacy(enum qtype t)
{
	return t == QTYPE_Q4_0 || t == QTYPE_Q4_1 || t == QTYPE_Q5_0 || t == QTYPE_Q5_1 ||
	       t == QTYPE_Q8_0 || t == QTYPE_Q8_1;
}

/* ---- dequantize ---- */

static void lq_dequantize(enum qtype t, const void *src, float *dst, int64_t n)
{
	size_t bytes = qtype_traits(t)->block_bytes;
	int has_m = t == QTYPE_Q4_1 || t == QTYPE_Q5_1;
	for (int64_t i = 0; i < n / QK; i++) {
		struct lq_block b;
		lq_unpack(t, (const uint8_t *)src + i * bytes, &b);
		for (int e = 0; e < QK; e++)
			dst[i * QK + e] = has_m ? b.d * b.q[e] + b.m : b.q[e] * b.d;
	}
}

static void kq_dequantize(enum qtype t, const void *src, float *dst, int64_t n)
{
	size_t bytes = qtype_traits(t)->block_bytes;
	for (int64_t i = 0; i < n / QK_K; i++) {
		struct kq_block b;
		kq_unpack(t, (const uint8_t *)src + i * bytes, &b);
		float *y = dst + i * QK_K;
		for (int s = 0; s < QK_K / b.sub; s++) {
			float ds = b.d * (float)b.sc[s];
			float dm = b.dmin * (float)b.mn[s];
			for (int l = 0; l < b.sub; l++) {
				int e = s * b.sub + l;
				y[e] = b.has_min ? ds * b.q[e] - dm : ds * b.q[e];
			}
		}
	}
}

void quant_dequantize_ref(enum qtype t, const void *src, float *dst, int64_t n)
{
	const uint16_t *h = src;
	switch (t) {
	case QTYPE_F32:
		memcpy(dst, src, (size_t)n * sizeof(float));
		return;
	case QTYPE_F16:
		for (int64_t i = 0; i < n; i++)
			dst[i] = fp16_to_f32(h[i]);
		return;
	case QTYPE_BF16:
		for (int64_t i = 0; i < n; i++)
			dst[i] = bf16_to_f32(h[i]);
		return;
	default:
		if (type_is_legacy(t))
			lq_dequantize(t, src, dst, n);
		else if (qtype_traits(t))
			kq_dequantize(t, src, dst, n);
		return;
	}
}

/* ---- quantize: legacy types, ggml's reference quantizers ---- */

static float block_amax(const float *x, int n, float *signed_max)
{
	float amax = 0.0f, max = 0.0f;
	for (int j = 0; j < n; j++) {
		if (amax < fabsf(x[j])) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	}
	if (signed_max)
		*signed_max = max;
	return amax;
}

static void block_minmax(const float *x, int n, float *mn, float *mx)
{
	*mn = FLT_MAX;
	*mx = -FLT_MAX;
	for (int j = 0; j < n; j++) {
		if (x[j] < *mn)
			*mn = x[j];
		if (x[j] > *mx)
			*mx = x[j];
	}
}

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }
static int clampi(int v, int lo, int hi) { return imin(imax(v, lo), hi); }

/* Symmetric 4/5-bit blocks (Q4_0, Q5_0): d = max / -(levels/2), so the
 * element of largest magnitude maps exactly to the lowest level. */
static void quantize_sym(const float *x, uint8_t qs[16], uint32_t *qh, uint16_t *d16, int bits)
{
	float max;
	block_amax(x, QK, &max);
	int half = 1 << (bits - 1), top = (1 << bits) - 1;
	float d = max / (float)-half;
	float id = d ? 1.0f / d : 0.0f;
	float offset = (float)half + 0.5f; /* ggml adds 8.5f / 16.5f in one step */
	*d16 = f32_to_fp16(d);
	*qh = 0;
	for (int j = 0; j < QK / 2; j++) {
		int q0 = imin(top, (int8_t)(x[j] * id + offset));
		int q1 = imin(top, (int8_t)(x[j + QK / 2] * id + offset));
		qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
		*qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + QK / 2);
	}
}

/* Asymmetric blocks (Q4_1, Q5_1): value = q*d + min. */
static void quantize_asym(const float *x, uint8_t qs[16], uint32_t *qh, uint16_t *d16,
			  uint16_t *m16, int bits)
{
	float mn, mx;
	block_minmax(x, QK, &mn, &mx);
	int top = (1 << bits) - 1;
	float d = (mx - mn) / (float)top;
	float id = d ? 1.0f / d : 0.0f;
	*d16 = f32_to_fp16(d);
	*m16 = f32_to_fp16(mn);
	*qh = 0;
	for (int j = 0; j < QK / 2; j++) {
		int q0 = imin(top, (int)(uint8_t)((x[j] - mn) * id + 0.5f));
		int q1 = imin(top, (int)(uint8_t)((x[j + QK / 2] - mn) * id + 0.5f));
		qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
		*qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + QK / 2);
	}
}

/* Q8_0 / Q8_1: d = amax / 127, q = x * (127 / amax) rounded half to even.
 * This is what llama.cpp's x86 kernels compute at run time (not its _ref
 * C code, which uses x / d and roundf). Activations sit on rounding ties
 * surprisingly often (x/d = -42.5 exactly in Gemma 3's first layer), and
 * one flipped step moves the logits by ~1%, so we match the runtime. */
static float quantize_q8_block(const float *x, int8_t qs[QK], uint16_t *d16)
{
	float amax = block_amax(x, QK, NULL);
	float d = amax / 127.0f;
	float id = amax != 0.0f ? 127.0f / amax : 0.0f;
	*d16 = f32_to_fp16(d);
	for (int j = 0; j < QK; j++)
		qs[j] = (int8_t)nearbyintf(x[j] * id);
	return d;
}

static void lq_quantize_block(enum qtype t, const float *x, void *dst)
{
	uint32_t qh;
	switch (t) {
	case QTYPE_Q4_0: {
		struct block_q4_0 *b = dst;
		quantize_sym(x, b->qs, &qh, &b->d, 4);
		break;
	}
	case QTYPE_Q4_1: {
		struct block_q4_1 *b = dst;
		quantize_asym(x, b->qs, &qh, &b->d, &b->m, 4);
		break;
	}
	case QTYPE_Q5_0: {
		struct block_q5_0 *b = dst;
		quantize_sym(x, b->qs, &qh, &b->d, 5);
		memcpy(b->qh, &qh, 4);
		break;
	}
	case QTYPE_Q5_1: {
		struct block_q5_1 *b = dst;
		quantize_asym(x, b->qs, &qh, &b->d, &b->m, 5);
		memcpy(b->qh, &qh, 4);
		break;
	}
	case QTYPE_Q8_0: {
		struct block_q8_0 *b = dst;
		quantize_q8_block(x, b->qs, &b->d);
		break;
	}
	default: { /* QTYPE_Q8_1 */
		struct block_q8_1 *b = dst;
		float d = quantize_q8_block(x, b->qs, &b->d);
		int sum = 0;
		for (int j = 0; j < QK; j++)
			sum += b->qs[j];
		b->s = f32_to_fp16((float)sum * d);
		break;
	}
	}
}

/* ---- quantize: K-quants, plain round-to-nearest ----
 *
 * Each sub-block gets its own range; the per-sub-block scales (and mins) are
 * then quantized against one fp16 super-scale. Scales round *up* (after the
 * min is fixed) so every element stays representable, which keeps the error
 * of each element within about one quantization step. */

struct kq_fit {
	int sub, nsub;   /* elements per sub-block, sub-blocks */
	int qmin, qmax;  /* range of q */
	int scmax;       /* largest integer scale / min */
	int has_min;
};

/* Chooses integer scales (and mins) for one super-block; returns them and
 * the fp16 super-scales. Values are x ~= (d*sc)*q - dmin*mn. */
static void kq_fit_scales(const float *x, const struct kq_fit *f, int sc[16], int mn[16],
			  uint16_t *d16, uint16_t *dmin16)
{
	float lo[16], hi[16], maxrange = 0.0f, maxmin = 0.0f;
	for (int s = 0; s < f->nsub; s++) {
		block_minmax(x + s * f->sub, f->sub, &lo[s], &hi[s]);
		if (f->has_min) {
			lo[s] = fminf(lo[s], 0.0f); /* min stored as -lo >= 0 */
			maxmin = fmaxf(maxmin, -lo[s]);
			maxrange = fmaxf(maxrange, (hi[s] - lo[s]) / (float)f->qmax);
		} else {
			hi[s] = fmaxf(fabsf(lo[s]), fabsf(hi[s]));
			maxrange = fmaxf(maxrange, hi[s] / (float)f->qmax);
		}
	}
	*d16 = f32_to_fp16(maxrange / (float)f->scmax);
	*dmin16 = f32_to_fp16(maxmin / (float)f->scmax);
	float d = fp16_to_f32(*d16), dmin = fp16_to_f32(*dmin16);
	for (int s = 0; s < f->nsub; s++) {
		mn[s] = 0;
		if (f->has_min && dmin > 0.0f)
			mn[s] = clampi((int)rintf(-lo[s] / dmin), 0, f->scmax);
		float top = f->has_min ? hi[s] + dmin * (float)mn[s] : hi[s];
		sc[s] = d > 0.0f ? clampi((int)ceilf(top / (d * (float)f->qmax)), 0, f->scmax) : 0;
	}
}

/* Integer quant of every element given the fitted scales (q in qmin..qmax). */
static void kq_fit_quants(const float *x, const struct kq_fit *f, const int sc[16],
			  const int mn[16], float d, float dmin, int q[QK_K])
{
	for (int s = 0; s < f->nsub; s++) {
		float ds = d * (float)sc[s], dm = dmin * (float)mn[s];
		for (int l = 0; l < f->sub; l++) {
			int e = s * f->sub + l;
			int v = ds > 0.0f ? (int)rintf((x[e] + dm) / ds) : 0;
			q[e] = clampi(v, f->qmin, f->qmax);
		}
	}
}

static void q2_bits_pack(const int q[QK_K], uint8_t qs[QK_K / 4])
{
	memset(qs, 0, QK_K / 4);
	for (int e = 0; e < QK_K; e++) {
		int n = e / 128, j = (e % 128) / 32, l = e % 32;
		qs[32 * n + l] |= (uint8_t)((q[e] & 3) << (2 * j));
	}
}

static void quantize_q2_K(const float *x, struct block_q2_K *b)
{
	static const struct kq_fit f = { 16, 16, 0, 3, 15, 1 };
	int sc[16], mn[16], q[QK_K];
	kq_fit_scales(x, &f, sc, mn, &b->d, &b->dmin);
	kq_fit_quants(x, &f, sc, mn, fp16_to_f32(b->d), fp16_to_f32(b->dmin), q);
	for (int s = 0; s < 16; s++)
		b->scales[s] = (uint8_t)(sc[s] | mn[s] << 4);
	q2_bits_pack(q, b->qs);
}

static void quantize_q3_K(const float *x, struct block_q3_K *b)
{
	static const struct kq_fit f = { 16, 16, -4, 3, 31, 0 };
	int sc[16], mn[16], q[QK_K];
	uint16_t unused;
	kq_fit_scales(x, &f, sc, mn, &b->d, &unused);
	kq_fit_quants(x, &f, sc, mn, fp16_to_f32(b->d), 0.0f, q);
	memset(b->hmask, 0, sizeof b->hmask);
	for (int e = 0; e < QK_K; e++) {
		q[e] += 4; /* 0..7: low 2 bits in qs, bit 2 in hmask */
		b->hmask[e % 32] |= (uint8_t)((q[e] >> 2) << (e / 32));
	}
	q2_bits_pack(q, b->qs);
	memset(b->scales, 0, sizeof b->scales);
	for (int i = 0; i < 16; i++) {
		int r = sc[i] + 32;
		b->scales[i % 8] |= (uint8_t)((r & 15) << (4 * (i / 8)));
		b->scales[8 + i % 4] |= (uint8_t)((r >> 4) << (2 * (i / 4)));
	}
}

static void k4_scales_pack(const int sc[8], const int mn[8], uint8_t p[12])
{
	for (int j = 0; j < 4; j++) {
		p[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
		p[j + 4] = (uint8_t)((mn[j] & 63) | (mn[j + 4] >> 4) << 6);
		p[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
	}
}

/* Q4_K and Q5_K (qh != NULL); see kq_unpack_q45_K for the element order. */
static void quantize_q45_K(const float *x, uint8_t *qs, uint8_t *qh, uint8_t scales[12],
			   uint16_t *d, uint16_t *dmin)
{
	const struct kq_fit f = { 32, 8, 0, qh ? 31 : 15, 63, 1 };
	int sc[16], mn[16], q[QK_K];
	kq_fit_scales(x, &f, sc, mn, d, dmin);
	kq_fit_quants(x, &f, sc, mn, fp16_to_f32(*d), fp16_to_f32(*dmin), q);
	k4_scales_pack(sc, mn, scales);
	memset(qs, 0, QK_K / 2);
	if (qh)
		memset(qh, 0, QK_K / 8);
	for (int e = 0; e < QK_K; e++) {
		int c = e / 64, h = (e / 32) & 1, l = e % 32;
		qs[32 * c + l] |= (uint8_t)((q[e] & 15) << (4 * h));
		if (qh)
			qh[l] |= (uint8_t)((q[e] >> 4) << (e / 32));
	}
}

static void quantize_q6_K(const float *x, struct block_q6_K *b)
{
	static const struct kq_fit f = { 16, 16, -32, 31, 127, 0 };
	int sc[16], mn[16], q[QK_K];
	uint16_t unused;
	kq_fit_scales(x, &f, sc, mn, &b->d, &unused);
	kq_fit_quants(x, &f, sc, mn, fp16_to_f32(b->d), 0.0f, q);
	for (int s = 0; s < 16; s++)
		b->scales[s] = (int8_t)sc[s];
	memset(b->ql, 0, sizeof b->ql);
	memset(b->qh, 0, sizeof b->qh);
	for (int e = 0; e < QK_K; e++) {
		int h = e / 128, k = (e % 128) / 32, l = e % 32;
		int v = q[e] + 32;
		b->ql[64 * h + 32 * (k & 1) + l] |= (uint8_t)((v & 15) << (4 * (k >> 1)));
		b->qh[32 * h + l] |= (uint8_t)((v >> 4) << (2 * k));
	}
}

/* ggml's quantize_row_q8_K_ref: iscale = -127 / max (max = the element of
 * largest magnitude, first one on ties), q = nearest-even(iscale * x) capped
 * at 127, d = 1 / iscale. An all-zero block gets d = 0 and zero bsums. */
static void quantize_q8_K(const float *x, struct block_q8_K *b)
{
	float max;
	float amax = block_amax(x, QK_K, &max);
	memset(b, 0, sizeof *b);
	if (!amax)
		return;
	float iscale = -127.0f / max;
	for (int j = 0; j < QK_K; j++)
		b->qs[j] = (int8_t)imin(127, (int)rintf(iscale * x[j]));
	for (int j = 0; j < QK_K / 16; j++) {
		int sum = 0;
		for (int l = 0; l < 16; l++)
			sum += b->qs[16 * j + l];
		b->bsums[j] = (int16_t)sum;
	}
	b->d = 1.0f / iscale;
}

static void kq_quantize_block(enum qtype t, const float *x, void *dst)
{
	switch (t) {
	case QTYPE_Q2_K:
		quantize_q2_K(x, dst);
		break;
	case QTYPE_Q3_K:
		quantize_q3_K(x, dst);
		break;
	case QTYPE_Q4_K: {
		struct block_q4_K *b = dst;
		quantize_q45_K(x, b->qs, NULL, b->scales, &b->d, &b->dmin);
		break;
	}
	case QTYPE_Q5_K: {
		struct block_q5_K *b = dst;
		quantize_q45_K(x, b->qs, b->qh, b->scales, &b->d, &b->dmin);
		break;
	}
	case QTYPE_Q6_K:
		quantize_q6_K(x, dst);
		break;
	default: /* QTYPE_Q8_K */
		quantize_q8_K(x, dst);
		break;
	}
}

void quant_quantize_ref(enum qtype t, const float *src, void *dst, int64_t n)
{
	const struct qtype_traits *tr = qtype_traits(t);
	uint16_t *h = dst;
	if (!tr)
		return;
	switch (t) {
	case QTYPE_F32:
		memcpy(dst, src, (size_t)n * sizeof(float));
		return;
	case QTYPE_F16:
		for (int64_t i = 0; i < n; i++)
			h[i] = f32_to_fp16(src[i]);
		return;
	case QTYPE_BF16:
		for (int64_t i = 0; i < n; i++)
			h[i] = f32_to_bf16(src[i]);
		return;
	default:
		break;
	}
	for (int64_t i = 0; i < n / tr->block_elems; i++) {
		const float *x = src + i * tr->block_elems;
		void *b = (uint8_t *)dst + i * tr->block_bytes;
		if (type_is_legacy(t))
			lq_quantize_block(t, x, b);
		else
			kq_quantize_block(t, x, b);
	}
}

/* ---- dot products ---- */

static float lq_dot(enum qtype t, const void *w, const void *a, int64_t n)
{
	size_t wbytes = qtype_traits(t)->block_bytes;
	int q8_1 = qtype_traits(t)->act_type == QTYPE_Q8_1;
	int has_m = t == QTYPE_Q4_1 || t == QTYPE_Q5_1;
	float sum = 0.0f;
	for (int64_t i = 0; i < n / QK; i++) {
		struct lq_block b;
		lq_unpack(t, (const uint8_t *)w + i * wbytes, &b);
		const int8_t *aq;
		float da, sa = 0.0f;
		if (q8_1) {
			const struct block_q8_1 *ab = (const struct block_q8_1 *)a + i;
			aq = ab->qs;
			da = fp16_to_f32(ab->d);
			sa = fp16_to_f32(ab->s);
		} else {
			const struct block_q8_0 *ab = (const struct block_q8_0 *)a + i;
			aq = ab->qs;
			da = fp16_to_f32(ab->d);
		}
		int isum = 0;
		for (int e = 0; e < QK; e++)
			isum += b.q[e] * aq[e];
		sum += (b.d * da) * (float)isum;
		if (has_m)
			sum += b.m * sa;
	}
	return sum;
}

/* Sum of the activations of sub-block s (sub elements) from the bsums. */
static int q8k_sub_sum(const struct block_q8_K *a, int s, int sub)
{
	int sum = 0;
	for (int j = s * sub / 16; j < (s + 1) * sub / 16; j++)
		sum += a->bsums[j];
	return sum;
}

static float kq_dot(enum qtype t, const void *w, const void *a, int64_t n)
{
	size_t wbytes = qtype_traits(t)->block_bytes;
	float sum = 0.0f;
	for (int64_t i = 0; i < n / QK_K; i++) {
		const struct block_q8_K *ab = (const struct block_q8_K *)a + i;
		struct kq_block b;
		kq_unpack(t, (const uint8_t *)w + i * wbytes, &b);
		int isum = 0, imn = 0;
		for (int s = 0; s < QK_K / b.sub; s++) {
			int ssum = 0;
			for (int l = 0; l < b.sub; l++)
				ssum += b.q[s * b.sub + l] * ab->qs[s * b.sub + l];
			isum += b.sc[s] * ssum;
			if (b.has_min)
				imn += b.mn[s] * q8k_sub_sum(ab, s, b.sub);
		}
		sum += (b.d * ab->d) * (float)isum;
		if (b.has_min)
			sum -= (b.dmin * ab->d) * (float)imn;
	}
	return sum;
}

/* Float weights against F32 activations; products summed in double. */
static float float_dot(enum qtype t, const void *w, const float *a, int64_t n)
{
	const float *wf = w;
	const uint16_t *wh = w;
	double sum = 0.0;
	for (int64_t i = 0; i < n; i++) {
		float x = t == QTYPE_F32 ? wf[i] : t == QTYPE_F16 ? fp16_to_f32(wh[i]) : bf16_to_f32(wh[i]);
		sum += (double)(x * a[i]);
	}
	return (float)sum;
}

float quant_dot_ref(enum qtype t, const void *w, const void *a, int64_t n)
{
	if (t == QTYPE_F32 || t == QTYPE_F16 || t == QTYPE_BF16)
		return float_dot(t, w, a, n);
	if (type_is_legacy(t))
		return lq_dot(t, w, a, n);
	if (qtype_traits(t))
		return kq_dot(t, w, a, n);
	return 0.0f;
}
