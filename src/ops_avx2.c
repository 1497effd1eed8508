/* ops_avx2.c — AVX2/FMA versions of the attention inner loops (see ops.h;
 * the scalar reference is ops_attend_ref in ops.c, and tests/test_ops.c
 * compares the two). Compiled with -mavx2 -mfma; called only when cpuid
 * says the CPU has both. */
#include <immintrin.h>

#include "ops_int.h"

static inline float hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

float ops_dot_avx2(const float *a, const float *b, int64_t n)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
		s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
		s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
	}
	for (; i + 8 <= n; i += 8)
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
	float r = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
	for (; i < n; i++)
		r += a[i] * b[i];
	return r;
}

void ops_dot2_avx2(const float *a0, const float *a1, const float *b, int64_t n, float *r0,
		   float *r1)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	__m256 t0 = s0, t1 = s0, t2 = s0, t3 = s0;
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		const __m256 b0 = _mm256_loadu_ps(b + i), b1 = _mm256_loadu_ps(b + i + 8);
		const __m256 b2 = _mm256_loadu_ps(b + i + 16), b3 = _mm256_loadu_ps(b + i + 24);
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + i), b0, s0);
		t0 = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + i), b0, t0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + i + 8), b1, s1);
		t1 = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + i + 8), b1, t1);
		s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + i + 16), b2, s2);
		t2 = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + i + 16), b2, t2);
		s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + i + 24), b3, s3);
		t3 = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + i + 24), b3, t3);
	}
	for (; i + 8 <= n; i += 8) {
		const __m256 bv = _mm256_loadu_ps(b + i);
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a0 + i), bv, s0);
		t0 = _mm256_fmadd_ps(_mm256_loadu_ps(a1 + i), bv, t0);
	}
	float x0 = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
	float x1 = hsum(_mm256_add_ps(_mm256_add_ps(t0, t1), _mm256_add_ps(t2, t3)));
	for (; i < n; i++) {
		x0 += a0[i] * b[i];
		x1 += a1[i] * b[i];
	}
	*r0 = x0;
	*r1 = x1;
}

void ops_axpy_avx2(float *y, float p, const float *x, int64_t n)
{
	const __m256 vp = _mm256_set1_ps(p);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(vp, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] += p * x[i];
}
