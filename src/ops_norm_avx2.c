/* ops_norm_avx2.c — AVX2 loops of the RMS norm and the residual add (see
 * ops_int.h; the scalar definitions are ops_rmsnorm and the plain loops of
 * ops.c, and tests/test_ops.c compares the two bit for bit).
 *
 * A row's sum of squares is a chain of dependent double adds in element
 * order (ggml's definition, which ops_rmsnorm keeps), so one row cannot
 * go faster than an add's latency per element. What SIMD can do is run
 * rows side by side: four rows' elements i .. i + 3 are loaded, squared in
 * float, transposed so that a vector holds element i of the four rows,
 * widened to doubles and added in element order: lane r is row r's own
 * chain. Four such chains (16 rows) are in flight in a prefill. The scale
 * and the weight are then plain elementwise products, 8 lanes at a time.
 * The compiler left these loops scalar in ops.c (baseline x86-64, and
 * -O2's vectorizer does not version loops for aliasing): in a 512-token
 * prefill the row-wise ops between the products (norms, residual adds,
 * quantizations, rope) took a fifth of the time.
 *
 * The rope's rotation is two products and a difference (or sum) per
 * value, separately rounded (no FMA, as the scalar loop compiles without
 * contraction), 8 pairs at a time; adjacent pairs (ROPE_NORM) are split
 * into their even and odd values by shuffles and put back after. */
#include <immintrin.h>

#include "ops_int.h"

/* s (element i of 4 rows, lane r = row r) += the squares of elements
 * i .. i + 3 of rows x, x + stride, .. in element order. */
static inline __m256d sumsq_step4(const float *x, int64_t stride, int64_t i, __m256d s)
{
	__m128 a = _mm_loadu_ps(x + i), b = _mm_loadu_ps(x + stride + i);
	__m128 c = _mm_loadu_ps(x + 2 * stride + i), d = _mm_loadu_ps(x + 3 * stride + i);
	a = _mm_mul_ps(a, a);
	b = _mm_mul_ps(b, b);
	c = _mm_mul_ps(c, c);
	d = _mm_mul_ps(d, d);
	_MM_TRANSPOSE4_PS(a, b, c, d); /* a: element i of the 4 rows, b: i + 1, .. */
	s = _mm256_add_pd(s, _mm256_cvtps_pd(a));
	s = _mm256_add_pd(s, _mm256_cvtps_pd(b));
	s = _mm256_add_pd(s, _mm256_cvtps_pd(c));
	return _mm256_add_pd(s, _mm256_cvtps_pd(d));
}

/* ss[0..3] = the 4 lanes of s, then the elements from i0 on, in order. */
static inline void sumsq_finish4(const float *x, int64_t stride, int64_t i0, int64_t n, __m256d s,
				 double *ss)
{
	_mm256_storeu_pd(ss, s);
	ops_sumsq_tail(x, stride, i0, n, 4, ss);
}

void ops_sumsq_rows_avx2(const float *x, int64_t stride, int64_t n, int64_t rows, double *ss)
{
	const int64_t n4 = n / 4 * 4;
	int64_t r = 0;
	for (; r + 16 <= rows; r += 16) { /* four independent chains */
		const float *x0 = x + r * stride;
		__m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
		for (int64_t i = 0; i < n4; i += 4) {
			s0 = sumsq_step4(x0, stride, i, s0);
			s1 = sumsq_step4(x0 + 4 * stride, stride, i, s1);
			s2 = sumsq_step4(x0 + 8 * stride, stride, i, s2);
			s3 = sumsq_step4(x0 + 12 * stride, stride, i, s3);
		}
		sumsq_finish4(x0, stride, n4, n, s0, ss + r);
		sumsq_finish4(x0 + 4 * stride, stride, n4, n, s1, ss + r + 4);
		sumsq_finish4(x0 + 8 * stride, stride, n4, n, s2, ss + r + 8);
		sumsq_finish4(x0 + 12 * stride, stride, n4, n, s3, ss + r + 12);
	}
	for (; r + 4 <= rows; r += 4) {
		const float *x0 = x + r * stride;
		__m256d s = _mm256_setzero_pd();
		for (int64_t i = 0; i < n4; i += 4)
			s = sumsq_step4(x0, stride, i, s);
		sumsq_finish4(x0, stride, n4, n, s, ss + r);
	}
	for (; r < rows; r++) { /* alone: the scalar chain */
		double s = 0.0;
		for (int64_t i = 0; i < n; i++) {
			const float v = x[r * stride + i];
			s += (double)(v * v);
		}
		ss[r] = s;
	}
}

void ops_scale_mul_avx2(float *y, const float *x, const float *w, int64_t n, float scale)
{
	const __m256 vs = _mm256_set1_ps(scale);
	int64_t i = 0;
	if (w) {
		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs),
							      _mm256_loadu_ps(w + i)));
		for (; i < n; i++)
			y[i] = x[i] * scale * w[i];
	} else {
		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
		for (; i < n; i++)
			y[i] = x[i] * scale;
	}
}

void ops_add_avx2(float *y, const float *x, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
	for (; i < n; i++)
		y[i] += x[i];
}

/* The rotation of 8 pairs (x0[k], x1[k]) by angles with cosines c and
 * sines s: ops.c's rope loop, lane by lane. */
static inline void rope_rotate8(__m256 *x0, __m256 *x1, __m256 c, __m256 s)
{
	const __m256 a = *x0, b = *x1;
	*x0 = _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s));
	*x1 = _mm256_add_ps(_mm256_mul_ps(a, s), _mm256_mul_ps(b, c));
}

/* One head's pairs (i, i + half) from pair 0 on, 8 at a time; returns
 * the first pair not done. */
static int64_t rope_neox8(float *v, int64_t half, const float *cs, const float *sn)
{
	int64_t i = 0;
	for (; i + 8 <= half; i += 8) {
		__m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + half + i);
		rope_rotate8(&a, &b, _mm256_loadu_ps(cs + i), _mm256_loadu_ps(sn + i));
		_mm256_storeu_ps(v + i, a);
		_mm256_storeu_ps(v + half + i, b);
	}
	return i;
}

/* One head's adjacent pairs (2i, 2i + 1), 8 at a time; returns the first
 * pair not done. The shuffles take lanes in 128-bit halves: the evens of
 * v[0..16) come out as pairs 0 1 4 5 | 2 3 6 7, so the angles are put in
 * that order too, and unpacking puts the values back in place. */
static int64_t rope_norm8(float *v, int64_t half, const float *cs, const float *sn)
{
	int64_t i = 0;
	for (; i + 8 <= half; i += 8) {
		const __m256 lo = _mm256_loadu_ps(v + 2 * i), hi = _mm256_loadu_ps(v + 2 * i + 8);
		__m256 ev = _mm256_shuffle_ps(lo, hi, 0x88), od = _mm256_shuffle_ps(lo, hi, 0xdd);
		const __m256 c = _mm256_castpd_ps(
			_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_loadu_ps(cs + i)), 0xd8));
		const __m256 s = _mm256_castpd_ps(
			_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_loadu_ps(sn + i)), 0xd8));
		rope_rotate8(&ev, &od, c, s);
		_mm256_storeu_ps(v + 2 * i, _mm256_unpacklo_ps(ev, od));
		_mm256_storeu_ps(v + 2 * i + 8, _mm256_unpackhi_ps(ev, od));
	}
	return i;
}

int64_t ops_rope_apply_avx2(float *v, int64_t n_rot, const float *cs, const float *sn,
			    enum rope_kind kind)
{
	return kind == ROPE_NEOX ? rope_neox8(v, n_rot / 2, cs, sn) : rope_norm8(v, n_rot / 2, cs, sn);
}
