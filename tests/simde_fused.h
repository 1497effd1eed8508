/* simde_fused.h — the fused multiply-add for tests that compile SIMD
 * kernels through SIMDe's portable emulation (test_quant, test_ops_simde):
 * its fallback FMA rounds twice (a * b, then + c), while the kernels'
 * contract is the fused operation, so these do fmaf per lane. Include
 * after SIMDe's headers. */
#ifndef INGOT_SIMDE_FUSED_H
#define INGOT_SIMDE_FUSED_H

#include <math.h>

static inline void fused_lanes(float *a, const float *b, const float *c, int n)
{
	for (int i = 0; i < n; i++)
		a[i] = fmaf(a[i], b[i], c[i]);
}

static inline __attribute__((always_inline)) simde__m256 fmadd256_fused(simde__m256 a,
								       simde__m256 b,
								       simde__m256 c)
{
	float fa[8], fb[8], fc[8];
	simde_mm256_storeu_ps(fa, a);
	simde_mm256_storeu_ps(fb, b);
	simde_mm256_storeu_ps(fc, c);
	fused_lanes(fa, fb, fc, 8);
	return simde_mm256_loadu_ps(fa);
}

static inline __attribute__((always_inline)) simde__m512 fmadd512_fused(simde__m512 a,
								       simde__m512 b,
								       simde__m512 c)
{
	float fa[16], fb[16], fc[16];
	simde_mm512_storeu_ps(fa, a);
	simde_mm512_storeu_ps(fb, b);
	simde_mm512_storeu_ps(fc, c);
	fused_lanes(fa, fb, fc, 16);
	return simde_mm512_loadu_ps(fa);
}

#endif
