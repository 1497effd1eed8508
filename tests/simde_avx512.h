/* simde_avx512.h — SIMDe's portable AVX-512 for tests that compile an
 * AVX-512 kernel file of src/ through it (test_ops_simde: ops_avx512.c;
 * test_r16_simde: quant_gemm_r16_avx512.c), so that those kernels are
 * checked on CPUs without AVX-512 too (and test_act_simde:
 * quant_act_avx512.c).
 *
 * Include after <immintrin.h> (SIMDe's aliases would clash with it
 * otherwise) and quant.h (fp16_to_f32), then the kernel file. SIMDe 0.7
 * lacks a few of the intrinsics those files use: they are written below
 * over arrays (exact: conversions of integers and of F16 values to float
 * are) and mapped onto the intrinsics' names. Its FMA fallback rounds
 * twice, so the fused operation comes from simde_fused.h. Defines
 * INGOT_SIMDE_AVX512 where SIMDe's headers are installed (Debian:
 * libsimde-dev); without them a test prints SKIP. */
#ifndef INGOT_SIMDE_AVX512_H
#define INGOT_SIMDE_AVX512_H

#if defined(__has_include)
#if __has_include(<simde/x86/avx512.h>)
#define INGOT_SIMDE_AVX512 1
/* vector types passed by value without -mavx: ABI notes only */
#pragma GCC diagnostic ignored "-Wpsabi"
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>
#include <simde/x86/fma.h>

#include <stdint.h>

#include "simde_fused.h"

#define SIMDE_EMU static inline __attribute__((always_inline))

SIMDE_EMU simde__m512 emu_cvtph512(simde__m256i h)
{
	uint16_t u[16];
	float f[16];
	simde_mm256_storeu_si256(u, h);
	for (int i = 0; i < 16; i++)
		f[i] = fp16_to_f32(u[i]);
	return simde_mm512_loadu_ps(f);
}

/* 16 bytes widened to int32 lanes, as signed or unsigned bytes */
SIMDE_EMU simde__m512i emu_widen8_epi32(simde__m128i b, int is_signed)
{
	uint8_t s[16];
	int32_t d[16];
	simde_mm_storeu_si128(s, b);
	for (int i = 0; i < 16; i++)
		d[i] = is_signed ? (int32_t)(int8_t)s[i] : (int32_t)s[i];
	return simde_mm512_loadu_si512(d);
}

SIMDE_EMU simde__m512i emu_cvtepi8_epi32(simde__m128i b)
{
	return emu_widen8_epi32(b, 1);
}

SIMDE_EMU simde__m512i emu_cvtepu8_epi32(simde__m128i b)
{
	return emu_widen8_epi32(b, 0);
}

SIMDE_EMU simde__m512 emu_cvtepi32_ps(simde__m512i v)
{
	int32_t s[16];
	float d[16];
	simde_mm512_storeu_si512(s, v);
	for (int i = 0; i < 16; i++)
		d[i] = (float)s[i];
	return simde_mm512_loadu_ps(d);
}

SIMDE_EMU simde__m512i emu_srai_epi32(simde__m512i v, int c)
{
	int32_t s[16];
	simde_mm512_storeu_si512(s, v);
	for (int i = 0; i < 16; i++)
		s[i] >>= c; /* arithmetic on GCC, as vpsrad */
	return simde_mm512_loadu_si512(s);
}

SIMDE_EMU simde__m256 emu_extractf32x8(simde__m512 v, int hi)
{
	float f[16];
	simde_mm512_storeu_ps(f, v);
	return simde_mm256_loadu_ps(f + 8 * (hi & 1));
}

SIMDE_EMU void emu_mask_storeu_ps(void *p, uint16_t m, simde__m512 v)
{
	float f[16];
	simde_mm512_storeu_ps(f, v);
	for (int i = 0; i < 16; i++)
		if (m >> i & 1)
			((float *)p)[i] = f[i];
}

/* vcvtps2dq in the default rounding mode (nearest, ties to even), as
 * nearbyintf rounds; the products quantized are all within int32 */
SIMDE_EMU simde__m512i emu_cvtps_epi32(simde__m512 v)
{
	float f[16];
	int32_t d[16];
	simde_mm512_storeu_ps(f, v);
	for (int i = 0; i < 16; i++)
		d[i] = (int32_t)nearbyintf(f[i]);
	return simde_mm512_loadu_si512(d);
}

/* the largest lane (no NaN lanes: the callers skip them first) */
SIMDE_EMU float emu_reduce_max_ps(simde__m512 v)
{
	float f[16];
	simde_mm512_storeu_ps(f, v);
	float m = f[0];
	for (int i = 1; i < 16; i++)
		m = f[i] > m ? f[i] : m;
	return m;
}

/* vcvtps2pd: exact */
SIMDE_EMU simde__m512d emu_cvtps_pd(simde__m256 v)
{
	float f[8];
	double d[8];
	simde_mm256_storeu_ps(f, v);
	for (int i = 0; i < 8; i++)
		d[i] = (double)f[i];
	return simde_mm512_loadu_pd(d);
}

/* vpmovqw: each qword's low 16 bits */
SIMDE_EMU simde__m128i emu_cvtepi64_epi16(simde__m512i v)
{
	int64_t q[8];
	int16_t w[8];
	simde_mm512_storeu_si512(q, v);
	for (int i = 0; i < 8; i++)
		w[i] = (int16_t)q[i];
	return simde_mm_loadu_si128(w);
}

#undef _mm512_fmadd_ps
#define _mm512_fmadd_ps fmadd512_fused
#undef _mm256_fmadd_ps
#define _mm256_fmadd_ps fmadd256_fused
#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps emu_cvtph512
#undef _mm256_cvtph_ps
#define _mm256_cvtph_ps simde_mm256_cvtph_ps
#undef _mm512_cvtepi8_epi32
#define _mm512_cvtepi8_epi32 emu_cvtepi8_epi32
#undef _mm512_cvtepu8_epi32
#define _mm512_cvtepu8_epi32 emu_cvtepu8_epi32
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps emu_cvtepi32_ps
#undef _mm512_srai_epi32
#define _mm512_srai_epi32 emu_srai_epi32
#undef _mm512_extractf32x8_ps
#define _mm512_extractf32x8_ps emu_extractf32x8
#undef _mm512_shuffle_f32x4
#define _mm512_shuffle_f32x4 simde_mm512_shuffle_f32x4
#undef _mm512_mask_storeu_ps
#define _mm512_mask_storeu_ps emu_mask_storeu_ps
#undef _cvtsh_ss
#define _cvtsh_ss fp16_to_f32
#undef _mm512_cvtps_epi32
#define _mm512_cvtps_epi32 emu_cvtps_epi32
#undef _mm512_reduce_max_ps
#define _mm512_reduce_max_ps emu_reduce_max_ps
#undef _mm512_cvtepi64_epi16
#define _mm512_cvtepi64_epi16 emu_cvtepi64_epi16
#undef _mm512_cvtps_pd
#define _mm512_cvtps_pd emu_cvtps_pd
/* F16C's rounding is f32_to_fp16's (quant.h); the rounding argument is
 * always to nearest here */
#undef _cvtss_sh
#define _cvtss_sh(x, r) f32_to_fp16(x)

#endif
#endif

#endif
