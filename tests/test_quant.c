/* test_quant.c — the quant module against hand-computed values, against
 * itself (quantize/dequantize/dot consistency) and SIMD against scalar.
 *
 * White-box: includes quant_int.h for the block layouts, so special blocks
 * can be built byte by byte. Deterministic (fixed-seed xorshift). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "quant.h"
#include "quant_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h> /* before SIMDe (below), whose aliases would clash */
#endif


static const enum qtype all_types[] = {
	QTYPE_F32,  QTYPE_F16,  QTYPE_BF16, QTYPE_Q4_0, QTYPE_Q4_1, QTYPE_Q5_0, QTYPE_Q5_1, QTYPE_Q8_0,
	QTYPE_Q8_1, QTYPE_Q2_K, QTYPE_Q3_K, QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K, QTYPE_Q8_K,
};
#define N_TYPES (sizeof all_types / sizeof all_types[0])
#define NMAX 8192

/* ---- helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng_u32(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static float rng_uniform(void) /* [0, 1) */
{
	return (float)(rng_u32() >> 8) / 16777216.0f;
}

static float rng_gauss(void)
{
	float s = 0.0f;
	for (int i = 0; i < 4; i++)
		s += rng_uniform();
	return (s - 2.0f) * 1.7320508f;
}

/* Gaussian data whose scale changes every 64 elements, so blocks see
 * different ranges, with an occasional outlier. */
static void fill_data(float *x, int64_t n)
{
	float scale = 1.0f;
	for (int64_t i = 0; i < n; i++) {
		if (i % 64 == 0)
			scale = 0.01f + 2.0f * rng_uniform();
		x[i] = rng_gauss() * scale;
		if (rng_u32() % 97 == 0)
			x[i] *= 6.0f;
	}
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static float f32_from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static int is_float_type(enum qtype t)
{
	return t == QTYPE_F32 || t == QTYPE_F16 || t == QTYPE_BF16;
}

static size_t row_bytes(enum qtype t, int64_t n)
{
	uint64_t b = 0;
	qtype_row_bytes(t, (uint64_t)n, &b);
	return (size_t)b;
}

/* ---- traits ---- */

static void test_traits(void)
{
	uint64_t b = 0;
	CHECK(qtype_row_bytes(QTYPE_Q4_K, 512, &b) == 0 && b == 288, "Q4_K 512 -> %llu",
	      (unsigned long long)b);
	CHECK(qtype_row_bytes(QTYPE_Q8_0, 640, &b) == 0 && b == 680, "Q8_0 640");
	CHECK(qtype_row_bytes(QTYPE_F16, 3, &b) == 0 && b == 6, "F16 3");
	CHECK(qtype_row_bytes(QTYPE_Q4_K, 640, &b) == -1, "640 is not a multiple of 256");
	CHECK(qtype_row_bytes(4, 32, &b) == -1, "type 4 (removed Q4_2) is unknown");
	CHECK(qtype_row_bytes(QTYPE_COUNT, 32, &b) == -1, "out of range type");
	CHECK(qtype_traits(QTYPE_Q6_K) && strcmp(qtype_traits(QTYPE_Q6_K)->name, "Q6_K") == 0,
	      "Q6_K name");
	CHECK(qtype_traits(QTYPE_Q5_0)->act_type == QTYPE_Q8_0, "Q5_0 act");
	CHECK(qtype_traits(QTYPE_Q5_1)->act_type == QTYPE_Q8_1, "Q5_1 act");
	CHECK(qtype_traits(QTYPE_Q3_K)->act_type == QTYPE_Q8_K, "Q3_K act");
	CHECK(qtype_traits(QTYPE_BF16)->act_type == QTYPE_F32, "BF16 act");
	CHECK(qtype_traits(29) == NULL && qtype_traits(1000) == NULL, "unknown ids");
}

/* ---- half precision ---- */

/* Independent decoding of a half: sign * mantissa * 2^exponent in double. */
static double fp16_value(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
	return h & 0x8000 ? -v : v;
}

static void test_fp16_exhaustive(void)
{
	long bad_dec = 0, bad_rt = 0, bad_tie = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = fp16_to_f32((uint16_t)h);
		int nan = ((h >> 10) & 31) == 31 && (h & 1023);
		if (nan) {
			uint16_t back = f32_to_fp16(f);
			bad_dec += !isnan(f) || (f32_bits(f) >> 13 & 1023) != (h & 1023) ||
				   (f32_bits(f) >> 31) != (h >> 15);
			bad_rt += !(((back >> 10) & 31) == 31 && (back & 1023));
			continue;
		}
		if (((h >> 10) & 31) == 31)
			bad_dec += !isinf(f) || (f < 0) != (h >> 15);
		else
			bad_dec += (double)f != fp16_value((uint16_t)h) ||
				   !!signbit(f) != (int)(h >> 15);
		bad_rt += f32_to_fp16(f) != h;
		/* the midpoint to the next half up must round to the even one */
		if ((h & 0x7fff) < 0x7bff) {
			float mid = (float)((fp16_value((uint16_t)h) + fp16_value((uint16_t)(h + 1))) / 2);
			uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
			if ((h & 0x7fff) == 0 && (h & 0x8000))
				continue; /* -0 and the smallest negative subnormal are not adjacent in h */
			bad_tie += f32_to_fp16(mid) != want;
		}
	}
	CHECK(bad_dec == 0, "fp16_to_f32: %ld of 65536 halves decoded wrongly", bad_dec);
	CHECK(bad_rt == 0, "f32_to_fp16(fp16_to_f32(h)) != h for %ld halves", bad_rt);
	CHECK(bad_tie == 0, "f32_to_fp16 ties: %ld midpoints not rounded to even", bad_tie);
	CHECK(f32_to_fp16(65519.99f) == 0x7bff && f32_to_fp16(65520.0f) == 0x7c00, "overflow edge");
	CHECK(f32_to_fp16(1e-8f) == 0 && f32_to_fp16(-1e-30f) == 0x8000, "underflow to signed zero");
	CHECK(f32_to_fp16(f32_from_bits(0x33000001)) == 1, "just above 2^-25 rounds up");
	CHECK(f32_to_fp16(f32_from_bits(0x33000000)) == 0, "2^-25 ties to even zero");
}

/* Random floats against nearest-even chosen by brute force among the two
 * candidate halves around x (also covers the subnormal range). */
static void test_fp16_random(void)
{
	long bad = 0;
	for (int i = 0; i < 200000; i++) {
		uint32_t exp = 127 - 30 + rng_u32() % 46; /* 2^-30 .. 2^15: subnormals too */
		float x = f32_from_bits((rng_u32() & 0x807fffffu) | exp << 23);
		if (fabsf(x) >= 65504.0f)
			continue;
		uint16_t h = f32_to_fp16(x);
		double v = fp16_value(h), ax = fabs((double)x);
		uint16_t hm = h & 0x7fff;
		double up = hm < 0x7bff ? fabs(fp16_value((uint16_t)(hm + 1))) : INFINITY;
		double dn = hm > 0 ? fabs(fp16_value((uint16_t)(hm - 1))) : 0.0;
		double err = fabs(fabs(v) - ax);
		int ok = !!signbit(x) == (h >> 15) && err <= fabs(up - ax) &&
			 err <= fabs(ax - dn);
		if (ok && (err == fabs(up - ax) || err == fabs(ax - dn)) && err != 0.0)
			ok = (hm & 1) == 0;
		bad += !ok;
	}
	CHECK(bad == 0, "f32_to_fp16: %ld random floats not rounded to nearest even", bad);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The SIMD kernels convert fp16 with the F16C instructions, so those must
 * agree with fp16_to_f32 / f32_to_fp16 bit for bit: all 65536 halves one
 * way, random bit patterns (NaN, inf, subnormals included) the other. The
 * one allowed difference: F16C sets the quiet bit of a signalling NaN half,
 * fp16_to_f32 keeps the payload as it is (both are NaN). */
__attribute__((target("f16c"))) static void test_fp16_vs_f16c(void)
{
	long bad_dec = 0, bad_enc = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		uint32_t hw = f32_bits(_cvtsh_ss((uint16_t)h)), sw = f32_bits(fp16_to_f32((uint16_t)h));
		if (isnan(f32_from_bits(sw))) /* F16C quiets signalling NaNs; we keep them */
			hw &= ~0x00400000u, sw &= ~0x00400000u;
		bad_dec += hw != sw;
	}
	for (int i = 0; i < 1000000; i++) {
		float x = f32_from_bits(rng_u32() ^ rng_u32() << 16);
		if (i % 4 == 0) /* concentrate on the half range */
			x = f32_from_bits((rng_u32() & 0x807fffffu) | (97u + rng_u32() % 50) << 23);
		bad_enc += _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT) != f32_to_fp16(x);
	}
	CHECK(bad_dec == 0, "fp16_to_f32 differs from F16C on %ld halves", bad_dec);
	CHECK(bad_enc == 0, "f32_to_fp16 differs from F16C on %ld floats", bad_enc);
}
#endif

static void test_fp16_hw(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (quant_kernels_get(QUANT_ISA_AVX2)) { /* implies F16C, OS-enabled */
		test_fp16_vs_f16c();
		return;
	}
#endif
	printf("SKIP fp16 vs F16C: CPU lacks AVX2/F16C\n");
}

static void test_bf16(void)
{
	long bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = bf16_to_f32((uint16_t)h);
		bad += f32_bits(f) != h << 16;
		uint16_t back = f32_to_bf16(f);
		if (isnan(f))
			bad += !isnan(bf16_to_f32(back));
		else
			bad += back != h;
	}
	CHECK(bad == 0, "bf16 exhaustive round trip: %ld failures", bad);
	CHECK(f32_to_bf16(f32_from_bits(0x3f808000)) == 0x3f80, "tie to even (down)");
	CHECK(f32_to_bf16(f32_from_bits(0x3f818000)) == 0x3f82, "tie to even (up)");
	CHECK(f32_to_bf16(f32_from_bits(0x3f808001)) == 0x3f81, "above tie rounds up");
	CHECK(f32_to_bf16(f32_from_bits(0x7f800001)) == 0x7fc0, "signalling NaN made quiet");
}

/* ---- hand-computed blocks ---- */

static void test_hand_q4_0(void)
{
	struct block_q4_0 b;
	float y[QK];
	b.d = 0x3800; /* 0.5 */
	for (int j = 0; j < 16; j++)
		b.qs[j] = (uint8_t)(j | (15 - j) << 4);
	quant_dequantize_ref(QTYPE_Q4_0, &b, y, QK);
	int bad = 0;
	for (int j = 0; j < 16; j++)
		bad += y[j] != (j - 8) * 0.5f || y[j + 16] != (7 - j) * 0.5f;
	CHECK(bad == 0, "Q4_0 hand block: y[0]=%g y[16]=%g", y[0], y[16]);
}

static void test_hand_q8_0(void)
{
	struct block_q8_0 b[2];
	float y[2 * QK];
	b[0].d = 0x3400; /* 0.25 */
	b[1].d = 0xc000; /* -2 */
	for (int j = 0; j < QK; j++) {
		b[0].qs[j] = (int8_t)(j - 16);
		b[1].qs[j] = (int8_t)(j == 0 ? -128 : 127 - j);
	}
	quant_dequantize_ref(QTYPE_Q8_0, b, y, 2 * QK);
	int bad = 0;
	for (int j = 0; j < QK; j++)
		bad += y[j] != (j - 16) * 0.25f;
	bad += y[32] != 256.0f || y[33] != -252.0f || y[63] != -192.0f;
	CHECK(bad == 0, "Q8_0 hand blocks: y[0]=%g y[32]=%g y[63]=%g", y[0], y[32], y[63]);
}

/* Q4_K with scales {1,2,3,4,33,34,35,63} and mins {0,1,2,3,17,18,19,48},
 * packed by hand into the 12 scale bytes. */
static void test_hand_q4_K(void)
{
	static const int sc[8] = { 1, 2, 3, 4, 33, 34, 35, 63 };
	static const int mn[8] = { 0, 1, 2, 3, 17, 18, 19, 48 };
	static const uint8_t packed[12] = { 0x81, 0x82, 0x83, 0xc4, 0x40, 0x41,
					    0x42, 0xc3, 0x11, 0x22, 0x33, 0x0f };
	struct block_q4_K b;
	float y[QK_K];
	b.d = 0x3c00;    /* 1.0 */
	b.dmin = 0x3800; /* 0.5 */
	memcpy(b.scales, packed, 12);
	for (int i = 0; i < 128; i++) /* low nibble l&15, high nibble 15-(l&15) */
		b.qs[i] = (uint8_t)((i & 15) | (15 - (i & 15)) << 4);
	quant_dequantize_ref(QTYPE_Q4_K, &b, y, QK_K);
	int bad = 0;
	for (int e = 0; e < QK_K; e++) {
		int s = e / 32, l = e % 32;
		int q = s % 2 == 0 ? (l & 15) : 15 - (l & 15);
		bad += y[e] != (float)(sc[s] * q) - 0.5f * (float)mn[s];
	}
	CHECK(bad == 0, "Q4_K hand block: %d wrong (y[0]=%g y[255]=%g)", bad, y[0], y[255]);
	CHECK(y[255] == 63.0f * 0.0f - 24.0f && y[224] == 63.0f * 15 - 24.0f, "Q4_K last sub-block");
}

/* Q6_K: ql bytes 0x53 (first 32 of each half) and 0x97 (next 32), qh bytes
 * 0xe4 (bit pairs 0,1,2,3): the four quarters of each half hold
 * {3|0<<4, 7|1<<4, 5|2<<4, 9|3<<4} - 32 = {-29, -9, 5, 25}. */
static void test_hand_q6_K(void)
{
	static const int quarter[4] = { -29, -9, 5, 25 };
	struct block_q6_K b;
	float y[QK_K];
	for (int i = 0; i < 128; i++)
		b.ql[i] = (i % 64) < 32 ? 0x53 : 0x97;
	memset(b.qh, 0xe4, sizeof b.qh);
	for (int s = 0; s < 16; s++)
		b.scales[s] = (int8_t)(s == 15 ? -128 : s - 8);
	b.d = 0x3400; /* 0.25 */
	quant_dequantize_ref(QTYPE_Q6_K, &b, y, QK_K);
	int bad = 0;
	for (int e = 0; e < QK_K; e++) {
		int s = e / 16, k = (e % 128) / 32;
		bad += y[e] != 0.25f * (float)b.scales[s] * (float)quarter[k];
	}
	CHECK(bad == 0, "Q6_K hand block: %d wrong (y[0]=%g y[255]=%g)", bad, y[0], y[255]);
	CHECK(y[0] == 58.0f && y[255] == -800.0f, "Q6_K corners y[0]=%g y[255]=%g", y[0], y[255]);
}

/* Q5_0: d = 1, qs nibbles 0..15, qh = 0xaaaaaaaa (5th bit on odd elements). */
static void test_hand_q5_0(void)
{
	struct block_q5_0 b;
	float y[QK];
	b.d = 0x3c00;
	memset(b.qh, 0xaa, 4);
	for (int j = 0; j < 16; j++)
		b.qs[j] = (uint8_t)(j | (15 - j) << 4);
	quant_dequantize_ref(QTYPE_Q5_0, &b, y, QK);
	int bad = 0;
	for (int e = 0; e < QK; e++) {
		int lo = e < 16 ? e : 15 - (e - 16);
		bad += y[e] != (float)((lo | (e & 1) << 4) - 16);
	}
	CHECK(bad == 0, "Q5_0 hand block: %d wrong", bad);
}

/* ---- quantize / dequantize round trip ---- */

/* Largest error allowed, as a fraction of the largest |x| of the super-block
 * (QK_K elements), from each format's step size:
 *  - Q8_*: half a step of amax/127, plus the fp16 rounding of d (2^-11).
 *  - Q4_0/Q5_0: ggml maps the extreme value to -8/-16, so a value of the
 *    opposite sign and the same size clamps to +7/+15: one full step,
 *    amax/8 and amax/16.
 *  - Q4_1/Q5_1: half a step of range/15 or range/31, range <= 2 amax.
 *  - K-quants (simple quantizer, see quant_ref.c): half a step of the
 *    sub-block range/levels, plus up to one super-scale unit from rounding
 *    the integer scale up and half a unit of the min: Q2_K range/3 -> ~0.37,
 *    Q3_K amax/3 -> ~0.17, Q4_K ~0.075, Q5_K ~0.04, Q6_K amax/62 -> ~0.017.
 *  - F16 / BF16: relative rounding 2^-11 / 2^-8. */
static double roundtrip_bound(enum qtype t)
{
	switch (t) {
	case QTYPE_F32: return 0.0;
	case QTYPE_F16: return 1.0 / 2048;
	case QTYPE_BF16: return 1.0 / 256;
	case QTYPE_Q8_0: case QTYPE_Q8_1: case QTYPE_Q8_K: return 0.005;
	case QTYPE_Q6_K: return 0.02;
	case QTYPE_Q5_1: return 0.035;
	case QTYPE_Q5_K: return 0.05;
	case QTYPE_Q5_0: return 0.066;
	case QTYPE_Q4_1: return 0.07;
	case QTYPE_Q4_K: return 0.08;
	case QTYPE_Q4_0: return 0.13;
	case QTYPE_Q3_K: return 0.18;
	default: return 0.4; /* Q2_K */
	}
}

static void test_roundtrip(void)
{
	const int64_t n = 4096;
	float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
	void *q = malloc(row_bytes(QTYPE_F32, n));
	fill_data(x, n);
	memset(x + 512, 0, 256 * sizeof *x); /* an all-zero super-block */
	for (size_t ti = 0; ti < N_TYPES; ti++) {
		enum qtype t = all_types[ti];
		quant_quantize_ref(t, x, q, n);
		quant_dequantize_ref(t, q, y, n);
		double worst = 0.0;
		for (int64_t sb = 0; sb < n / QK_K; sb++) {
			float amax = 0.0f, emax = 0.0f;
			for (int i = 0; i < QK_K; i++) {
				amax = fmaxf(amax, fabsf(x[sb * QK_K + i]));
				emax = fmaxf(emax, fabsf(x[sb * QK_K + i] - y[sb * QK_K + i]));
			}
			double rel = amax > 0 ? emax / amax : emax;
			worst = rel > worst ? rel : worst;
		}
		if (getenv("QUANT_TEST_VERBOSE"))
			printf("%-5s round trip max error %.4f of block max\n", qtype_traits(t)->name, worst);
		CHECK(worst <= roundtrip_bound(t), "%s round trip: max error %.4f of block max > %.4f",
		      qtype_traits(t)->name, worst, roundtrip_bound(t));
		int zero_ok = 1;
		for (int i = 512; i < 768; i++)
			zero_ok &= y[i] == 0.0f;
		CHECK(zero_ok, "%s: zero block does not dequantize to zeros", qtype_traits(t)->name);
	}
	free(x);
	free(y);
	free(q);
}

/* Rounding rules of the activation quantizers, on blocks where the scaled
 * values land exactly on .5: both round ties to even, as llama.cpp's x86
 * run-time kernels do (Q8_0: _mm256_round_ps nearest; Q8_K: nearest_int). */
static void test_act_rounding(void)
{
	float x[QK_K];
	for (int i = 0; i < QK_K; i++) /* every 32-block has amax 127: d = 1 */
		x[i] = i % 32 == 0 ? (i == 0 ? 127.0f : -127.0f) : (float)(i % 64) - 31.5f;
	struct block_q8_0 b0[QK_K / QK];
	struct block_q8_K bk;
	quant_quantize_ref(QTYPE_Q8_0, x, b0, QK_K);
	quant_quantize_ref(QTYPE_Q8_K, x, &bk, QK_K);
	CHECK(fp16_to_f32(b0[0].d) == 1.0f && b0[0].qs[1] == -30 && b0[0].qs[2] == -30 &&
		      b0[0].qs[31] == 0,
	      "Q8_0 ties to even: -30.5 -> %d, -29.5 -> %d, -0.5 -> %d", b0[0].qs[1],
	      b0[0].qs[2], b0[0].qs[31]);
	CHECK(b0[1].qs[1] == 2 && b0[1].qs[2] == 2, "Q8_0 ties: 1.5 -> %d, 2.5 -> %d", b0[1].qs[1],
	      b0[1].qs[2]);
	/* max = x[0] = +127 (the later -127s do not replace it): iscale = -1 */
	CHECK(bk.d == -1.0f && bk.qs[0] == -127 && bk.qs[32] == 127, "Q8_K d %g from first max",
	      bk.d);
	CHECK(bk.qs[1] == 30 && bk.qs[2] == 30 && bk.qs[33] == -2 && bk.qs[34] == -2 &&
		      bk.qs[31] == 0,
	      "Q8_K ties to even: %d %d %d %d %d", bk.qs[1], bk.qs[2], bk.qs[33], bk.qs[34],
	      bk.qs[31]);
	int sum = 0;
	for (int i = 0; i < 16; i++)
		sum += bk.qs[i];
	CHECK(bk.bsums[0] == sum, "Q8_K bsums[0] %d != %d", bk.bsums[0], sum);
}

/* ---- dot product consistency ---- */

/* Sum of |w_i a_i| over dequantized rows. */
static double dot_magnitude(const float *wd, const float *ad, int64_t n)
{
	double m = 0.0;
	for (int64_t i = 0; i < n; i++)
		m += fabs((double)wd[i] * ad[i]);
	return m;
}

/* Byte offsets of the (scale, min) fp16 pair in a block of a type with a
 * min term, or -1. */
static int min_field_offset(enum qtype t, int *d_off)
{
	switch (t) {
	case QTYPE_Q4_1: case QTYPE_Q5_1: case QTYPE_Q4_K: case QTYPE_Q5_K:
		*d_off = 0;
		return 2;
	case QTYPE_Q2_K:
		*d_off = 80;
		return 82;
	default:
		return -1;
	}
}

/* Magnitude of the terms a dot of w with ad adds up: sum |w_i a_i|, or for
 * types with a min term (value = scale part - min part) the two parts
 * counted separately, since they can cancel. wd is scratch (n floats). */
static double dot_terms_magnitude(enum qtype t, const void *w, float *wd, const float *ad,
				  int64_t n)
{
	int d_off, m_off = min_field_offset(t, &d_off);
	if (m_off < 0) {
		quant_dequantize_ref(t, w, wd, n);
		return dot_magnitude(wd, ad, n);
	}
	const struct qtype_traits *tr = qtype_traits(t);
	size_t bytes = row_bytes(t, n);
	uint8_t *c = malloc(bytes);
	double mag = 0.0;
	for (int part = 0; part < 2; part++) {
		memcpy(c, w, bytes);
		for (int64_t b = 0; b < n / tr->block_elems; b++)
			memset(c + b * tr->block_bytes + (part ? d_off : m_off), 0, 2);
		quant_dequantize_ref(t, c, wd, n);
		mag += dot_magnitude(wd, ad, n);
	}
	free(c);
	return mag;
}

static void test_dot_vs_dequant(void)
{
	const int64_t n = 2048;
	float *x = malloc(n * sizeof *x), *xa = malloc(n * sizeof *xa);
	float *wd = malloc(n * sizeof *wd), *ad = malloc(n * sizeof *ad);
	void *w = malloc(row_bytes(QTYPE_F32, n)), *a = malloc(row_bytes(QTYPE_F32, n));
	fill_data(x, n);
	fill_data(xa, n);
	for (size_t ti = 0; ti < N_TYPES; ti++) {
		enum qtype t = all_types[ti], at = qtype_traits(t)->act_type;
		quant_quantize_ref(t, x, w, n);
		quant_quantize_ref(at, xa, a, n);
		quant_dequantize_ref(t, w, wd, n);
		quant_dequantize_ref(at, a, ad, n);
		double want = 0.0;
		for (int64_t i = 0; i < n; i++)
			want += (double)wd[i] * ad[i];
		double got = quant_dot_ref(t, w, a, n);
		/* 1e-5 relative: float rounding of the per-block scale products
		 * and of the sum. Q8_1 also stores s = d*sum(q) rounded to fp16,
		 * which the Q4_1/Q5_1 dot uses for the min term: allow its
		 * 2^-11 relative error on |m * s| per block. */
		double tol = 1e-5 * dot_terms_magnitude(t, w, wd, ad, n) + 1e-30;
		if (at == QTYPE_Q8_1 && (t == QTYPE_Q4_1 || t == QTYPE_Q5_1)) {
			for (int64_t i = 0; i < n / QK; i++) {
				const struct block_q8_1 *ab = (const struct block_q8_1 *)a + i;
				const uint16_t *m16 = (const uint16_t *)((const uint8_t *)w +
					i * qtype_traits(t)->block_bytes) + 1;
				tol += fabs(fp16_to_f32(*m16) * fp16_to_f32(ab->s)) / 2048.0;
			}
		}
		CHECK(fabs(got - want) <= tol, "%s dot_ref %.9g vs dequantized %.9g (tol %.3g)",
		      qtype_traits(t)->name, got, want, tol);
	}
	free(x), free(xa), free(wd), free(ad), free(w), free(a);
}

/* ---- SIMD kernels against the reference ---- */

/* Weights for a kernel test: half the time quantized from data, otherwise
 * random bits with the fp16 scales replaced by tame values (random bits reach
 * codes a quantizer never emits, e.g. -128 in Q8_0 or negative Q6_K scales). */
static void weights_make(enum qtype t, const float *x, void *w, int64_t n, int random_bits)
{
	quant_quantize_ref(t, x, w, n);
	if (!random_bits || is_float_type(t) || t == QTYPE_Q8_K)
		return;
	const struct qtype_traits *tr = qtype_traits(t);
	uint8_t *p = w;
	for (size_t i = 0; i < row_bytes(t, n); i++)
		p[i] = (uint8_t)rng_u32();
	for (int64_t b = 0; b < n / tr->block_elems; b++) {
		uint8_t *blk = p + b * tr->block_bytes;
		uint16_t d = f32_to_fp16((rng_uniform() + 0.1f) * 0.01f);
		uint16_t m = f32_to_fp16((rng_uniform() - 0.5f) * 0.01f);
		switch (t) {
		case QTYPE_Q2_K:
			memcpy(blk + 80, &d, 2), memcpy(blk + 82, &m, 2);
			break;
		case QTYPE_Q3_K:
			memcpy(blk + 108, &d, 2);
			break;
		case QTYPE_Q6_K:
			memcpy(blk + 208, &d, 2);
			break;
		case QTYPE_Q4_1: case QTYPE_Q5_1: case QTYPE_Q4_K: case QTYPE_Q5_K:
			m = f32_to_fp16(fabsf(fp16_to_f32(m)));
			memcpy(blk, &d, 2), memcpy(blk + 2, &m, 2);
			break;
		default: /* Q4_0 Q5_0 Q8_0 Q8_1: d first (Q8_1's s is unused) */
			memcpy(blk, &d, 2);
			break;
		}
	}
}

static void test_simd_dot(const struct quant_kernels *k)
{
	static const int64_t blocks[] = { 1, 2, 3, 5, 16 };
	float *x = malloc(NMAX * sizeof *x), *xa = malloc(NMAX * sizeof *xa);
	float *wd = malloc(NMAX * sizeof *wd), *ad = malloc(NMAX * sizeof *ad);
	void *w = malloc(row_bytes(QTYPE_F32, NMAX)), *a = malloc(row_bytes(QTYPE_F32, NMAX));
	for (size_t ti = 0; ti < N_TYPES; ti++) {
		enum qtype t = all_types[ti], at = qtype_traits(t)->act_type;
		int64_t be = qtype_traits(t)->block_elems == 1 ? 32 : qtype_traits(t)->block_elems;
		CHECK(k->dot[t] && k->quantize_act[at], "%s: missing kernel", qtype_traits(t)->name);
		if (!k->dot[t] || !k->quantize_act[at])
			continue;
		for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0] + 1; bi++) {
			int64_t n = bi < sizeof blocks / sizeof blocks[0] ? blocks[bi] * be
									  : (be == QK_K ? 32 : 128) * be;
			for (int rb = 0; rb < 2; rb++) {
				fill_data(x, n);
				fill_data(xa, n);
				weights_make(t, x, w, n, rb);
				quant_quantize_ref(at, xa, a, n);
				float ref = quant_dot_ref(t, w, a, n), got = -1.0f;
				k->dot[t](n, &got, w, a);
				quant_dequantize_ref(at, a, ad, n);
				/* Same integer sums; only the order of the float
				 * additions (8 lanes + FMA vs one running sum) differs.
				 * Each of the <= 128 block terms carries a few ulp of
				 * rounding (2^-24 = 6e-8), so 1e-5 of the magnitude of
				 * the terms bounds the difference. The min terms of
				 * Q4_1/Q5_1/Q2_K/Q4_K/Q5_K can cancel the scale terms,
				 * so both parts count in the magnitude. */
				double mag = dot_terms_magnitude(t, w, wd, ad, n);
				double tol = 1e-5 * mag + 1e-30;
				CHECK(fabsf(got - ref) <= tol,
				      "%s %s n=%lld %s: simd %.9g ref %.9g (tol %.3g)",
				      quant_isa_name(k->isa), qtype_traits(t)->name, (long long)n,
				      rb ? "random bits" : "quantized", got, ref, tol);
			}
		}
	}
	free(x), free(xa), free(wd), free(ad), free(w), free(a);
}

/* ---- multi-row dots ---- */

#define MULTI_ROWS (2 * QUANT_MULTI_MAX + 1) /* rows per quant_dot_multi call, at most */

/* One weight row against `rows` activation rows stride bytes apart through
 * quant_dot_multi (and, for 1 .. QUANT_MULTI_MAX rows, the table's
 * dot_multi kernel directly): each result must be bit for bit the table's
 * dot of that row alone, and nothing past out[rows - 1] may be written. */
static void multi_check_rows(const struct quant_kernels *k, enum qtype t, int64_t n, const void *w,
			     const uint8_t *a, size_t stride, int rows, const char *what)
{
	float out[MULTI_ROWS + 2], one[MULTI_ROWS];
	const float canary = -12345.0f;
	for (int c = 0; c < rows; c++)
		k->dot[t](n, &one[c], w, a + (size_t)c * stride);
	for (int direct = 0; direct < 2; direct++) {
		if (direct && (!k->dot_multi[t] || rows < 1 || rows > QUANT_MULTI_MAX))
			continue;
		for (int c = 0; c < MULTI_ROWS + 2; c++)
			out[c] = canary;
		if (direct)
			k->dot_multi[t](n, out, w, a, stride, rows);
		else
			quant_dot_multi(k, t, n, out, w, a, stride, rows);
		int bad = 0;
		for (int c = 0; c < rows; c++)
			bad += memcmp(&out[c], &one[c], sizeof out[c]) != 0;
		CHECK(bad == 0, "%s %s %s n=%lld rows=%d %s: %d results differ from dot (row 0: %.9g vs %.9g)",
		      quant_isa_name(k->isa), qtype_traits(t)->name, direct ? "dot_multi" : "quant_dot_multi",
		      (long long)n, rows, what, bad, out[0], one[0]);
		CHECK(out[rows] == canary && out[rows + 1] == canary, "%s %s rows=%d: wrote past out[%d]",
		      quant_isa_name(k->isa), qtype_traits(t)->name, rows, rows - 1);
	}
}

/* Every type, several n, quantized and random-bit weights, 0 .. MULTI_ROWS
 * activation rows at a padded stride: results bit-identical to dot row by
 * row; where the table has a multi kernel, also within the reference
 * tolerance of test_simd_dot. */
static void test_dot_multi(const struct quant_kernels *k)
{
	static const int64_t blocks[] = { 1, 2, 3, 5, 16 };
	float *x = malloc(NMAX * sizeof *x), *wd = malloc(NMAX * sizeof *wd), *ad = malloc(NMAX * sizeof *ad);
	void *w = malloc(row_bytes(QTYPE_F32, NMAX));
	size_t a_bytes = MULTI_ROWS * (row_bytes(QTYPE_F32, NMAX) + 64);
	uint8_t *a = malloc(a_bytes);
	int multi_kernels = 0;
	for (size_t ti = 0; ti < N_TYPES; ti++) {
		enum qtype t = all_types[ti], at = qtype_traits(t)->act_type;
		int64_t be = qtype_traits(t)->block_elems == 1 ? 32 : qtype_traits(t)->block_elems;
		multi_kernels += k->dot_multi[t] != NULL;
		for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
			int64_t n = blocks[bi] * be;
			for (int rb = 0; rb < 2; rb++) {
				/* rows 4-byte aligned (Q8_K's float d), then a few
				 * words of padding so stride != row size */
				size_t stride = (row_bytes(at, n) + 3) / 4 * 4 + 4 * (rng_u32() % 4);
				memset(a, 0xcd, a_bytes);
				fill_data(x, n);
				weights_make(t, x, w, n, rb);
				for (int c = 0; c < MULTI_ROWS; c++) {
					fill_data(x, n);
					if (c == 2)
						memset(x, 0, (size_t)n * sizeof *x); /* an all-zero row */
					quant_quantize_ref(at, x, a + (size_t)c * stride, n);
				}
				const char *what = rb ? "random bits" : "quantized";
				for (int rows = 0; rows <= MULTI_ROWS; rows++)
					multi_check_rows(k, t, n, w, a, stride, rows, what);
				if (!k->dot_multi[t])
					continue;
				float out[QUANT_MULTI_MAX];
				k->dot_multi[t](n, out, w, a, stride, QUANT_MULTI_MAX);
				for (int c = 0; c < QUANT_MULTI_MAX; c++) {
					const uint8_t *ac = a + (size_t)c * stride;
					float ref = quant_dot_ref(t, w, ac, n);
					quant_dequantize_ref(at, ac, ad, n);
					double tol = 1e-5 * dot_terms_magnitude(t, w, wd, ad, n) + 1e-30;
					CHECK(fabsf(out[c] - ref) <= tol,
					      "%s %s dot_multi n=%lld row %d %s: %.9g ref %.9g (tol %.3g)",
					      quant_isa_name(k->isa), qtype_traits(t)->name, (long long)n, c,
					      what, out[c], ref, tol);
				}
			}
		}
	}
	if (k->isa != QUANT_ISA_SCALAR)
		printf("  %d types with dot_multi kernels\n", multi_kernels);
	free(x), free(wd), free(ad), free(w), free(a);
}

/* ---- matrix kernels ---- */

#define GEMM_ROWS 41   /* weight rows: several 8-row tiles plus a tail */
#define GEMM_TOKENS 77 /* activation rows: nine full groups of 8 plus 5 (the AVX2 kernels
                        * take 8 groups a pass: T from 65 on needs two) */

/* The weights and activations a series of gemm checks share: rows of w
 * (type t, n elements), GEMM_TOKENS activation rows of a, their packed
 * groups (the caller repacks them for each T), and want, every (token,
 * row) pair's dot from one table's dot entry (gemm_case_dots), computed
 * once rather than in each of the ~150 checks of a case. */
struct gemm_case {
	enum qtype t;
	int64_t n;
	const uint8_t *w, *a;
	size_t w_stride, a_stride;
	const void *packed;
	const char *what, *dot_isa;
	float want[GEMM_TOKENS * GEMM_ROWS]; /* [token][row] */
};

/* c->want from table k's dot entry for c->t. */
static void gemm_case_dots(struct gemm_case *c, const struct quant_kernels *k)
{
	c->dot_isa = quant_isa_name(k->isa);
	for (int64_t tk = 0; tk < GEMM_TOKENS; tk++)
		for (int64_t r = 0; r < GEMM_ROWS; r++) {
			const uint8_t *w = c->w + (size_t)r * c->w_stride;
			k->dot[c->t](c->n, &c->want[tk * GEMM_ROWS + r], w,
				     c->a + (size_t)tk * c->a_stride);
		}
}

/* gemm run on the weights kw (the rows of c->w, or them repacked), T
 * tokens, rows [r0, r1): every result must be bit for bit c->want, and
 * nothing outside the range written, while rows r1 .. GEMM_ROWS are named
 * as the caller's next (r_pf: prefetched by some kernels, never read or
 * written). name: the kernel, for the messages. */
static void gemm_check_with(quant_gemm_fn gemm, const void *kw, const char *name,
			    const struct gemm_case *c, int64_t T, int64_t r0, int64_t r1)
{
	static float y[GEMM_TOKENS * GEMM_ROWS];
	const float canary = -12345.5f;
	for (size_t i = 0; i < sizeof y / sizeof y[0]; i++)
		y[i] = canary;
	gemm(c->n, kw, c->w_stride, r0, r1, c->a, c->a_stride,
	     T >= QUANT_GEMM_PACK_MIN ? c->packed : NULL, T, y, GEMM_ROWS, GEMM_ROWS);
	int bad = 0, outside = 0;
	float got = 0, want = 0;
	for (int64_t tk = 0; tk < GEMM_TOKENS; tk++)
		for (int64_t r = 0; r < GEMM_ROWS; r++) {
			float v = y[tk * GEMM_ROWS + r];
			if (tk >= T || r < r0 || r >= r1) {
				outside += v != canary;
				continue;
			}
			const float *one = &c->want[tk * GEMM_ROWS + r];
			if (memcmp(&v, one, sizeof v) != 0 && bad++ == 0)
				got = v, want = *one;
		}
	CHECK(bad == 0, "%s %s gemm n=%lld T=%lld rows [%lld,%lld) %s: %d results differ from the %s "
	      "dot (first %.9g vs %.9g)", name, qtype_traits(c->t)->name, (long long)c->n,
	      (long long)T, (long long)r0, (long long)r1, c->what, bad, c->dot_isa, got, want);
	CHECK(outside == 0, "%s %s gemm T=%lld rows [%lld,%lld): %d writes outside the range", name,
	      qtype_traits(c->t)->name, (long long)T, (long long)r0, (long long)r1, outside);
}

/* Every type with a gemm kernel: quantized and random-bit weights, several
 * n, T from 0 to GEMM_TOKENS (no group, partial and full groups, more
 * groups than one token tile, leftover tokens) and row ranges that start
 * and end off the 8-row tiles. */
/* Q8_0 quants of -128 in the row at w (n elements) made -127, so random
 * bits suit a narrow table (quant_kernels_narrow). */
static void q8_0_narrow_make(uint8_t *w, int64_t n)
{
	for (int64_t b = 0; b < n / QK; b++)
		for (int i = 0; i < QK; i++) {
			int8_t *q = (int8_t *)w + b * (int64_t)sizeof(struct block_q8_0) + 2 + i;
			if (*q == -128)
				*q = -127;
		}
}

static void test_gemm(const struct quant_kernels *k, bool narrow)
{
	static const int64_t blocks[] = { 1, 3, 20 }; /* 32-element blocks (K-quants: 1, 2, 5 super-blocks) */
	enum { N_RANGES = 5 };
	static const int64_t ranges[N_RANGES][2] = {
		{ 0, GEMM_ROWS }, { 3, 37 }, { 8, 16 }, { 5, 9 }, { 2, 2 }
	};
	const int64_t nmax = 5 * QK_K; /* >= 20 * QK */
	float *x = malloc(nmax * sizeof *x);
	size_t w_stride = row_bytes(QTYPE_Q8_0, nmax) + 6, a_stride = row_bytes(QTYPE_Q8_K, nmax) + 4;
	uint8_t *w = malloc(GEMM_ROWS * w_stride), *a = malloc(GEMM_TOKENS * a_stride);
	size_t pb0 = quant_gemm_pack_bytes(QTYPE_Q8_0, nmax, GEMM_TOKENS);
	size_t pbk = quant_gemm_pack_bytes(QTYPE_Q8_K, nmax, GEMM_TOKENS);
	void *packed = malloc(pb0 > pbk ? pb0 : pbk);
	struct gemm_case *c = malloc(sizeof *c);
	const char *name = quant_isa_name(k->isa);
	int kernels = 0;
	for (size_t ti = 0; ti < N_TYPES; ti++) {
		enum qtype t = all_types[ti];
		if (!k->gemm[t])
			continue;
		kernels++;
		enum qtype at = qtype_traits(t)->act_type;
		CHECK(at == QTYPE_Q8_0 || at == QTYPE_Q8_K, "%s gemm: activations neither Q8_0 nor Q8_K",
		      qtype_traits(t)->name);
		for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
			int64_t n = at == QTYPE_Q8_K ? (blocks[bi] + 3) / 4 * QK_K : blocks[bi] * QK;
			for (int rb = 0; rb < 2; rb++) {
				bool have_min = false;
				for (int r = 0; r < GEMM_ROWS; r++) {
					uint8_t *row = w + (size_t)r * w_stride;
					fill_data(x, n);
					weights_make(t, x, row, n, rb);
					if (narrow && t == QTYPE_Q8_0)
						q8_0_narrow_make(row, n);
					else if (rb && t == QTYPE_Q8_0 && r == 5)
						row[2 + 7] = 0x80; /* one -128 for sure */
					have_min |= !quant_weights_narrow(t, row, row_bytes(t, n));
				}
				/* quantizers never write -128; random bits over 41
				 * rows do, and the narrow table never sees it */
				CHECK(have_min == (t == QTYPE_Q8_0 && rb && !narrow),
				      "%s rows %s: -128 found %d", qtype_traits(t)->name,
				      rb ? "random bits" : "quantized", have_min);
				for (int tk = 0; tk < GEMM_TOKENS; tk++) {
					fill_data(x, n);
					if (tk == 9)
						memset(x, 0, (size_t)n * sizeof *x);
					quant_quantize_ref(at, x, a + (size_t)tk * a_stride, n);
				}
				*c = (struct gemm_case){ .t = t, .n = n, .w = w, .a = a,
							 .w_stride = w_stride, .a_stride = a_stride,
							 .packed = packed,
							 .what = rb ? "random bits" : "quantized" };
				gemm_case_dots(c, k);
				for (int64_t T = 0; T <= GEMM_TOKENS; T += T < 20 ? 1 : 3) {
					/* rows past T in a partial group: stale bytes */
					memset(packed, 0xcd, quant_gemm_pack_bytes(at, n, GEMM_TOKENS));
					for (int64_t tk = 0; tk < T; tk++)
						quant_gemm_pack_row(at, a + (size_t)tk * a_stride, n, tk, packed);
					for (size_t ri = 0; ri < N_RANGES; ri++) {
						const int64_t *rr = ranges[ri];
						gemm_check_with(k->gemm[t], w, name, c, T, rr[0],
								rr[1]);
					}
				}
			}
		}
	}
	if (k->isa != QUANT_ISA_SCALAR)
		printf("  %d types with gemm kernels%s\n", kernels, narrow ? " (narrow twin)" : "");
	free(x), free(w), free(a), free(packed), free(c);
}

/* The repacked kernels' scalar reference as a gemm entry, for the type in
 * r16_ref_type. */
static enum qtype r16_ref_type;

static void r16_ref(int64_t n, const void *w, size_t w_stride, int64_t r0, int64_t r1,
		    const void *a, size_t a_stride, const void *packed, int64_t T, float *y,
		    int64_t y_stride, int64_t r_pf)
{
	(void)r_pf;
	quant_gemm_r16_ref(r16_ref_type, n, w, w_stride, r0, r1, a, a_stride, packed, T, y, y_stride);
}

/* The repacked kernels test_r16 checks for one type: each table's (NULL
 * where it has none; amx NULL where it is AVX-512's). */
struct r16_kernels {
	quant_gemm_fn avx512, amx, avx2;
};

/* Case c's rows repacked (p) through the reference and each of g's
 * kernels: T tokens, rows [r0, r1). */
static void r16_check(const struct gemm_case *c, const struct r16_kernels *g, const void *p,
		      int64_t T, int64_t r0, int64_t r1)
{
	r16_ref_type = c->t;
	gemm_check_with(r16_ref, p, "reference r16", c, T, r0, r1);
	if (g->avx512)
		gemm_check_with(g->avx512, p, "avx512 r16", c, T, r0, r1);
	if (g->amx)
		gemm_check_with(g->amx, p, "amx r16", c, T, r0, r1);
	if (g->avx2)
		gemm_check_with(g->avx2, p, "avx2 r16", c, T, r0, r1);
}

/* Q8_0, Q5_0, Q4_K and Q6_K rows repacked 16 to a tile (quant_r16_pack):
 * the packing is lossless (bytes, and the floats of an embedding lookup);
 * the scalar reference and the AVX-512 and AVX2 tables' kernels (where
 * they have one)
 * give, for every T and row range (tiles cut at both ends, the padded
 * last tile, groups in chunks at the longest rows), bit for bit what a
 * SIMD table's dot entry gives on the original rows (their legacy dots
 * and their K-quant contract share the order the repacked kernels keep),
 * and write nothing outside the range. */
static void test_r16(void)
{
	const struct quant_kernels *simd = quant_kernels_get(QUANT_ISA_AVX2);
	const struct quant_kernels *k = quant_kernels_get(QUANT_ISA_AVX512);
	const struct quant_kernels *amx = quant_kernels_get(QUANT_ISA_AMX); /* NULL on most hosts */
	static const enum qtype types[] = { QTYPE_Q8_0, QTYPE_Q5_0, QTYPE_Q4_K, QTYPE_Q6_K };
	/* the longest rows make the kernels split the groups into chunks
	 * (their activations past L2's share): all T there, one row range */
	static const int64_t blocks[] = { 1, 3, 20, QUANT_R16_MAX_BLOCKS };
	static const int64_t kblocks[] = { 1, 2, 5, QUANT_R16_MAX_BLOCKS * QK / QK_K };
	static const int64_t ranges[][2] = { { 0, GEMM_ROWS }, { 3, 37 }, { 16, 32 }, { 5, 9 },
					     { 33, 41 }, { 2, 2 } };
	const int64_t nmax = QUANT_R16_MAX_BLOCKS * QK;
	const size_t w_max = row_bytes(QTYPE_Q8_0, nmax), a_stride = row_bytes(QTYPE_Q8_K, nmax) + 4;
	float *x = malloc(nmax * sizeof *x);
	uint8_t *w = malloc(GEMM_ROWS * w_max), *a = malloc(GEMM_TOKENS * a_stride);
	uint8_t *row = malloc(w_max);
	float *f_plain = malloc(nmax * sizeof(float)), *f_r16 = malloc(nmax * sizeof(float));
	void *p = malloc(quant_r16_bytes(QTYPE_Q8_0, nmax, GEMM_ROWS));
	void *p2 = malloc(quant_r16_bytes(QTYPE_Q8_0, nmax, GEMM_ROWS));
	const size_t pb0 = quant_gemm_pack_bytes(QTYPE_Q8_0, nmax, GEMM_TOKENS);
	const size_t pbk = quant_gemm_pack_bytes(QTYPE_Q8_K, nmax, GEMM_TOKENS);
	void *packed = malloc(pb0 > pbk ? pb0 : pbk);
	struct gemm_case *c = malloc(sizeof *c);
	CHECK(quant_r16_bytes(QTYPE_Q8_0, nmax, GEMM_ROWS) >= quant_r16_bytes(QTYPE_Q6_K, nmax, GEMM_ROWS) &&
		      quant_r16_bytes(QTYPE_Q8_0, nmax, GEMM_ROWS) >=
			      quant_r16_bytes(QTYPE_Q4_K, nmax, GEMM_ROWS),
	      "r16 test buffers: Q8_0's tiles the largest");
	CHECK(quant_r16_tile_bytes(QTYPE_Q8_0, 640) == 10880 &&
	      quant_r16_bytes(QTYPE_Q8_0, 640, 17) == 2 * 10880 &&
	      quant_r16_tile_bytes(QTYPE_Q8_0, 32) == 576 && quant_r16_bytes(QTYPE_Q8_0, 33, 1) == 0 &&
	      quant_r16_tile_bytes(QTYPE_Q5_0, 640) == 7040 &&
	      quant_r16_tile_bytes(QTYPE_Q5_0, 96) == 704 + 384 &&
	      quant_r16_tile_bytes(QTYPE_Q4_K, 256) == 2368 &&
	      quant_r16_tile_bytes(QTYPE_Q6_K, 2048) == 8 * 3392 &&
	      quant_r16_tile_bytes(QTYPE_Q4_K, 640) == 0 && quant_r16_tile_bytes(QTYPE_Q4_0, 32) == 0 &&
	      quant_r16_tile_bytes(QTYPE_Q6_K, (QUANT_R16_MAX_BLOCKS * QK / QK_K + 1) * QK_K) == 0 &&
	      quant_r16_tile_bytes(QTYPE_Q8_0, (QUANT_R16_MAX_BLOCKS + 1) * QK) == 0,
	      "r16 sizes: whole cache lines, padded tiles, n a multiple of the block, four types");
	int checked = 0;
	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
		const enum qtype t = types[ti], at = qtype_traits(t)->act_type;
		for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
			const int64_t n = at == QTYPE_Q8_K ? kblocks[bi] * QK_K : blocks[bi] * QK;
			const size_t stride = row_bytes(t, n);
			for (int rb = 0; rb < 2; rb++) {
				for (int r = 0; r < GEMM_ROWS; r++) {
					fill_data(x, n);
					weights_make(t, x, w + (size_t)r * stride, n, rb);
				}
				if (rb && t == QTYPE_Q8_0)
					w[5 * stride + 2 + 7] = 0x80; /* a -128 for sure */
				quant_r16_pack(t, w, n, GEMM_ROWS, p);
				int lossy = 0;
				for (int r = 0; r < GEMM_ROWS; r++) {
					quant_r16_unpack_row(t, p, n, r, row);
					lossy += memcmp(row, w + (size_t)r * stride, stride) != 0;
					/* the embedding lookup: the plain row's floats */
					quant_dequantize_ref(t, w + (size_t)r * stride, f_plain, n);
					quant_r16_dequantize_row(t, p, n, r, f_r16);
					lossy += memcmp(f_plain, f_r16, (size_t)n * sizeof(float)) != 0;
				}
				CHECK(lossy == 0, "%s r16 n=%lld: %d rows unpack to other bytes or floats",
				      qtype_traits(t)->name, (long long)n, lossy);
				/* packed in pieces of whole tiles (as model.c's load-time
				 * jobs do), each into its tiles' place: the same bytes */
				const size_t tile = quant_r16_tile_bytes(t, n);
				memset(p2, 0xa5, quant_r16_bytes(t, n, GEMM_ROWS));
				for (int r0 = 0; r0 < GEMM_ROWS; r0 += 2 * QUANT_R16_ROWS) {
					const int r1 = GEMM_ROWS - r0 < 2 * QUANT_R16_ROWS ? GEMM_ROWS : r0 + 2 * QUANT_R16_ROWS;
					quant_r16_pack(t, w + (size_t)r0 * stride, n, r1 - r0,
						       (uint8_t *)p2 + (size_t)(r0 / QUANT_R16_ROWS) * tile);
				}
				CHECK(memcmp(p, p2, quant_r16_bytes(t, n, GEMM_ROWS)) == 0,
				      "%s r16 n=%lld: packed in pieces differs", qtype_traits(t)->name, (long long)n);
				for (int tk = 0; tk < GEMM_TOKENS; tk++) {
					fill_data(x, n);
					if (tk == 9)
						memset(x, 0, (size_t)n * sizeof *x);
					quant_quantize_ref(at, x, a + (size_t)tk * a_stride, n);
				}
				*c = (struct gemm_case){ .t = t, .n = n, .w = w, .a = a,
							 .w_stride = stride, .a_stride = a_stride,
							 .packed = packed, .what = "repacked" };
				if (simd)
					gemm_case_dots(c, simd);
				struct r16_kernels g = {
					.avx512 = k ? k->gemm_r16[t] : NULL,
					.amx = amx ? amx->gemm_r16[t] : NULL,
					.avx2 = simd ? simd->gemm_r16[t] : NULL,
				};
				if (g.amx == g.avx512)
					g.amx = NULL;
				const bool longest = blocks[bi] == QUANT_R16_MAX_BLOCKS;
				for (int64_t T = longest ? GEMM_TOKENS : 0; T <= GEMM_TOKENS;
				     T += T < 20 ? 1 : 3) {
					memset(packed, 0xcd, quant_gemm_pack_bytes(at, n, GEMM_TOKENS));
					for (int64_t tk = 0; tk < T; tk++)
						quant_gemm_pack_row(at, a + (size_t)tk * a_stride, n, tk, packed);
					const size_t n_ranges = longest ? 1 : sizeof ranges / sizeof ranges[0];
					for (size_t ri = 0; simd && ri < n_ranges; ri++) {
						const int64_t *rr = ranges[ri];
						r16_check(c, &g, p, T, rr[0], rr[1]);
						checked++;
					}
				}
			}
		}
	}
	int kernels = 0, kernels2 = 0, kernels_amx = 0;
	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
		kernels += k && k->gemm_r16[types[ti]] != NULL;
		kernels2 += simd && simd->gemm_r16[types[ti]] != NULL;
		kernels_amx += amx && amx->gemm_r16[types[ti]] != k->gemm_r16[types[ti]];
	}
	printf("  r16: %d checks%s, %d avx512 kernels, %d amx kernels, %d avx2 kernels\n", checked,
	       simd ? "" : " (no SIMD table to compare with)", kernels, kernels_amx, kernels2);
	free(x), free(w), free(a), free(row), free(f_plain), free(f_r16), free(p), free(p2), free(packed);
	free(c);
}

/* quant_weights_narrow finds a single -128 anywhere in the quants (and
 * only there: scale bytes of 0x80 are not quants); the narrow twin differs
 * from its table in matrix entries only. */
static void test_narrow(const struct quant_kernels *k)
{
	enum { NB = 5 };
	struct block_q8_0 b[NB];
	for (int i = 0; i < NB; i++) {
		b[i].d = 0x8080;
		for (int j = 0; j < QK; j++)
			b[i].qs[j] = (int8_t)(j * 37 % 255 - 127);
	}
	CHECK(quant_weights_narrow(QTYPE_Q8_0, b, sizeof b), "no -128: narrow");
	for (int i = 0; i < NB; i++)
		for (int j = 0; j < QK; j++) {
			int8_t keep = b[i].qs[j];
			b[i].qs[j] = -128;
			CHECK(!quant_weights_narrow(QTYPE_Q8_0, b, sizeof b), "-128 at block %d quant %d found",
			      i, j);
			b[i].qs[j] = keep;
		}
	CHECK(quant_weights_narrow(QTYPE_Q4_K, b, sizeof b), "types without a narrow kernel pass");
	const struct quant_kernels *nk = quant_kernels_narrow(k);
	CHECK(nk && nk->isa == k->isa && quant_kernels_narrow(nk) == nk, "%s narrow twin",
	      quant_isa_name(k->isa));
	/* only AVX2's Q8_0 matrix kernel has a narrow form */
	CHECK((nk != k) == (k->isa == QUANT_ISA_AVX2), "%s: %s narrow twin", quant_isa_name(k->isa),
	      nk != k ? "a" : "no");
	for (int t = 0; t < QTYPE_COUNT; t++)
		CHECK(nk->dot[t] == k->dot[t] && nk->dot_multi[t] == k->dot_multi[t] &&
			      nk->quantize_act[t] == k->quantize_act[t] && !nk->gemm[t] == !k->gemm[t],
		      "%s narrow twin: type %d's entries", quant_isa_name(k->isa), t);
}

static void test_simd_quantize(const struct quant_kernels *k)
{
	static const enum qtype acts[] = { QTYPE_Q8_0, QTYPE_Q8_1, QTYPE_Q8_K, QTYPE_F16 };
	const int64_t n = 4096;
	float *x = malloc(n * sizeof *x);
	uint8_t *r = malloc(row_bytes(QTYPE_F32, n)), *s = malloc(row_bytes(QTYPE_F32, n));
	for (int round = 0; round < 4; round++) {
		fill_data(x, n);
		if (round == 1)
			for (int i = 0; i < n; i++) /* exact .5 ties after scaling */
				x[i] = (i % 256 == 0) ? -127.0f : (float)(i % 61) - 30.5f;
		if (round == 2)
			memset(x + 256, 0, 256 * sizeof *x);
		if (round == 3) /* blocks from 1e-9 to 1e6: F16 scales subnormal, and past 65504 */
			for (int i = 0; i < n; i++)
				x[i] *= powf(10.0f, (float)((i / 32) % 16) - 9.0f);
		for (size_t ai = 0; ai < sizeof acts / sizeof acts[0]; ai++) {
			enum qtype at = acts[ai];
			/* and an odd number of 32-blocks (kernels that go two
			 * blocks at a time) */
			const int64_t m = at == QTYPE_Q8_K ? n : n - 32;
			size_t bytes = row_bytes(at, m);
			memset(r, 0x55, bytes);
			memset(s, 0xaa, bytes);
			quant_quantize_ref(at, x, r, m);
			k->quantize_act[at](x, s, m);
			CHECK(memcmp(r, s, bytes) == 0, "%s quantize %s round %d differs from reference",
			      quant_isa_name(k->isa), qtype_traits(at)->name, round);
		}
	}
	free(x), free(r), free(s);
}

/* The default is the last ISA of the enum the CPU runs; INGOT_ISA picks
 * any the CPU runs and is ignored otherwise. */
static void test_isa(void)
{
	char *old = getenv("INGOT_ISA") ? strdup(getenv("INGOT_ISA")) : NULL;
	unsetenv("INGOT_ISA");
	enum quant_isa best = quant_isa_detect(); /* the default */
	enum quant_isa top = QUANT_ISA_SCALAR;
	for (int i = 0; i < QUANT_ISA_COUNT; i++)
		if (quant_kernels_get((enum quant_isa)i))
			top = (enum quant_isa)i;
	CHECK(best == top, "default ISA %s, not %s", quant_isa_name(best), quant_isa_name(top));
	printf("detected ISA: %s%s%s\n", quant_isa_name(best), old ? ", INGOT_ISA=" : "", old ? old : "");
	CHECK(quant_kernels_get(QUANT_ISA_SCALAR) != NULL, "scalar table");
	CHECK(quant_kernels_best() != NULL && quant_kernels_best()->isa == best, "best table");
	CHECK(quant_kernels_get(QUANT_ISA_COUNT) == NULL, "bad isa");
	for (int i = 0; i < QUANT_ISA_COUNT; i++) {
		const enum quant_isa isa = (enum quant_isa)i;
		setenv("INGOT_ISA", quant_isa_name(isa), 1);
		const enum quant_isa want = quant_kernels_get(isa) ? isa : best;
		CHECK(quant_isa_detect() == want, "INGOT_ISA=%s gives %s, not %s", quant_isa_name(isa),
		      quant_isa_name(quant_isa_detect()), quant_isa_name(want));
		CHECK(quant_kernels_best()->isa == want, "best follows INGOT_ISA=%s", quant_isa_name(isa));
	}
	setenv("INGOT_ISA", "bogus", 1);
	CHECK(quant_isa_detect() == best, "unknown INGOT_ISA ignored");
	if (old)
		setenv("INGOT_ISA", old, 1);
	else
		unsetenv("INGOT_ISA");
	free(old);
}

/* Signed quant e of block i of a Q4_0 / Q5_0 / Q8_0 row (the layouts of
 * quant_int.h, read element by element). */
static int legacy_quant(enum qtype t, const uint8_t *row, int64_t i, int e)
{
	if (t == QTYPE_Q8_0)
		return ((const struct block_q8_0 *)row)[i].qs[e];
	if (t == QTYPE_Q4_0) {
		const struct block_q4_0 *b = (const struct block_q4_0 *)row + i;
		return (e < 16 ? b->qs[e] & 15 : b->qs[e - 16] >> 4) - 8;
	}
	const struct block_q5_0 *b = (const struct block_q5_0 *)row + i;
	uint32_t qh;
	memcpy(&qh, b->qh, sizeof qh);
	int nib = e < 16 ? b->qs[e] & 15 : b->qs[e - 16] >> 4;
	return (nib | (int)((qh >> e) & 1) << 4) - 16;
}

/* Every SIMD table's legacy-type dot (and so its gemm, which test_gemm
 * holds to the dot) is the stated contract of quant_gemm_avx2.c bit for
 * bit: acc = fma(dw * da, (float)isum, acc) block by block, isum exact.
 * So the AVX2 and VNNI builds agree with each other. Quantized and
 * random-bit weights (Q8_0's with quants of -128). */
static void test_legacy_contract(const struct quant_kernels *k)
{
	static const enum qtype types[] = { QTYPE_Q4_0, QTYPE_Q5_0, QTYPE_Q8_0 };
	enum { NB = 24 };
	float x[NB * QK];
	uint8_t w[NB * sizeof(struct block_q8_0)];
	struct block_q8_0 a[NB];
	int bad = 0, total = 0;
	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
		const enum qtype t = types[ti];
		for (int round = 0; round < 40; round++) {
			const int64_t nb = 1 + round % NB, n = nb * QK;
			fill_data(x, n);
			weights_make(t, x, w, n, round & 1);
			fill_data(x, n);
			if (round == 2)
				memset(x, 0, sizeof x);
			quant_quantize_ref(QTYPE_Q8_0, x, a, n);
			float acc = 0.0f;
			for (int64_t i = 0; i < nb; i++) {
				uint16_t dw;
				memcpy(&dw, w + (size_t)i * qtype_traits(t)->block_bytes, sizeof dw);
				int isum = 0;
				for (int e = 0; e < QK; e++)
					isum += legacy_quant(t, w, i, e) * a[i].qs[e];
				acc = fmaf(fp16_to_f32(dw) * fp16_to_f32(a[i].d), (float)isum, acc);
			}
			float got;
			k->dot[t](n, &got, w, a);
			total++;
			if (memcmp(&got, &acc, sizeof got) != 0 && bad++ < 3)
				printf("  %s %s n=%lld: dot %.9g, contract %.9g\n", quant_isa_name(k->isa),
				       qtype_traits(t)->name, (long long)n, got, acc);
		}
	}
	CHECK(bad == 0, "%s legacy dots: %d of %d differ from the contract", quant_isa_name(k->isa), bad,
	      total);
}

/* Where SIMDe's headers are installed (Debian: libsimde-dev), the VNNI build
 * of quant_gemm_avx2.c is also compiled into this test (last, as SIMDe's
 * macros rename intrinsics), all of it through SIMDe's portable emulation:
 * so its kernels are checked on CPUs without VNNI (this one) too. */
#if defined(__has_include)
#if __has_include(<simde/x86/avx512.h>)
#define QUANT_SIMDE 1
/* 256-bit vector types passed by value without -mavx: ABI notes only */
#pragma GCC diagnostic ignored "-Wpsabi"
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>
#include <simde/x86/fma.h>
#include "simde_fused.h"
#undef _mm256_fmadd_ps
#define _mm256_fmadd_ps fmadd256_fused
#define QUANT_GEMM_VNNI QUANT_GEMM_VNNI_EVEX
#define QUANT_GEMM_REGISTER quant_gemm_simde_register
#include "quant_gemm_avx2.c"
#endif
#endif

/* The VNNI legacy kernels under SIMDe, in a table otherwise the reference's
 * (test_legacy_contract ties them to the AVX2 build bit for bit). */
static void test_vnni_emulated(void)
{
#ifdef QUANT_SIMDE
	struct quant_kernels k = *quant_kernels_get(QUANT_ISA_SCALAR);
	k.isa = QUANT_ISA_AVX512;
	struct quant_kernels kn = k;
	quant_gemm_simde_register(&k, false);
	quant_gemm_simde_register(&kn, true);
	printf("testing the VNNI legacy kernels under SIMDe emulation\n");
	test_legacy_contract(&k);
	test_simd_dot(&k);
	test_gemm(&k, false);
	test_gemm(&kn, true);
#else
	printf("SKIP VNNI emulation: SIMDe headers not installed (apt-get install libsimde-dev)\n");
#endif
}

int main(void)
{
	test_traits();
	test_fp16_exhaustive();
	test_fp16_random();
	test_fp16_hw();
	test_bf16();
	test_hand_q4_0();
	test_hand_q8_0();
	test_hand_q4_K();
	test_hand_q6_K();
	test_hand_q5_0();
	test_roundtrip();
	test_act_rounding();
	test_dot_vs_dequant();
	test_isa();
	for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
		const struct quant_kernels *k = quant_kernels_get((enum quant_isa)isa);
		if (!k) {
			if (isa == QUANT_ISA_AMX)
				printf("SKIP amx: %s (test_r16_amx runs its kernels emulated)\n",
				       quant_amx_status());
			else
				printf("SKIP %s: CPU lacks %s\n", quant_isa_name((enum quant_isa)isa),
				       isa == QUANT_ISA_AVX512    ? "AVX-512 (F/BW/VL/DQ/VNNI)"
				       : isa == QUANT_ISA_AVXVNNI ? "AVX-VNNI"
								  : "AVX2/FMA/F16C");
			continue;
		}
		printf("testing %s kernels\n", quant_isa_name(k->isa));
		if (k->isa != QUANT_ISA_SCALAR)
			test_legacy_contract(k);
		test_simd_dot(k);
		test_simd_quantize(k);
		test_dot_multi(k);
		test_gemm(k, false);
		test_gemm(quant_kernels_narrow(k), true);
		test_narrow(k);
	}
	test_vnni_emulated();
	test_r16();
	return check_summary("test_quant");
}
