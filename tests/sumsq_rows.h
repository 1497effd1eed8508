/* sumsq_rows.h — a SIMD sums-of-squares loop (ops_int.h:
 * ops_sumsq_rows_avx2 / _avx512) against the scalar rule, the sum in
 * element order of (double)(x * x): the number of rows whose sums differ,
 * as doubles, over 1 to 37 rows (the loops' groups of 16, 8 and 4 rows,
 * and the rows past them) of 100 and 37 elements (tails past a multiple of
 * 4 and 8), values spread over twelve orders of magnitude, so that adding
 * in another order changes a sum's last bits (the float norms hide that
 * nearly always). Header-only: test_ops runs the host's loops, test_ops_simde
 * the AVX-512 one under SIMDe. */
#ifndef INGOT_SUMSQ_ROWS_H
#define INGOT_SUMSQ_ROWS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef void (*sumsq_rows_fn)(const float *x, int64_t stride, int64_t n, int64_t rows,
			      double *ss);

static int sumsq_mismatches(sumsq_rows_fn fn)
{
	enum { ROWS = 37, STRIDE = 104 };
	static float xs[ROWS * STRIDE];
	static const int widths[] = { 100, 37 };
	unsigned seed = 17;
	int bad = 0;
	for (int wi = 0; wi < 2; wi++)
		for (int rows = 1; rows <= ROWS; rows++) {
			const int N = widths[wi];
			for (int i = 0; i < ROWS * STRIDE; i++) {
				seed = seed * 1103515245u + 12345u;
				const float r = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
				xs[i] = r * powf(10.0f, (float)(i * 7 % 13) - 6.0f);
			}
			double got[ROWS];
			fn(xs, STRIDE, N, rows, got);
			for (int r = 0; r < rows; r++) {
				double ref = 0.0;
				for (int i = 0; i < N; i++)
					ref += (double)(xs[r * STRIDE + i] * xs[r * STRIDE + i]);
				bad += memcmp(&ref, &got[r], sizeof ref) != 0;
			}
		}
	return bad;
}

#endif
