/* best_rows.h — a vectorized ops_best scan against the scalar rule
 * (ops_best_scan_scalar) on rows built to reach every path of the SIMD
 * scans: runs of 256 and blocks of 16 or 32 that are skipped, runs whose
 * maximum is a new best, rows rising all the way (a new best at every
 * element), NaNs (also a run of nothing but NaNs, and at the start, before
 * anything was seen), infinities, signed zeros, ties and rows below zero. Each scan starts
 * from nothing or from a best an earlier piece found (its index also
 * before the range, even negative: ops_best_scan_at's frame), over a
 * random range with ragged ends. The result, value bits and index, must be
 * the scalar rule's every time. Header-only: test_ops runs it on the
 * host's own scans, test_ops_simde on the AVX-512 one under SIMDe. */
#ifndef INGOT_BEST_ROWS_H
#define INGOT_BEST_ROWS_H

#include <math.h>
#include <string.h>

#include "ops_int.h"

typedef void (*best_scan_fn)(struct ops_best *b, const float *x, int64_t i0, int64_t i1);

static float best_rows_rand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return ((float)(*s >> 8) / (float)(1u << 24)) * 2.0f - 1.0f;
}

/* A row of n (kind: 0 noise with specials, 1 rising, 2 NaN stretches, 3
 * few values, many ties, 4 below zero throughout, where a scan that
 * started from the initial best's 0 instead of the first element would
 * find nothing). */
static void best_rows_fill(float *x, int n, int kind, unsigned *s)
{
	static const float vals[] = { 1.0f, -0.0f, 0.0f, INFINITY, -INFINITY, NAN, 2.5f };
	for (int i = 0; i < n; i++) {
		float r = best_rows_rand(s);
		switch (kind) {
		case 0: x[i] = r < -0.9f ? vals[i % 7] : 10.0f * r; break;
		case 1: x[i] = (float)i * 0.01f + (r < -0.95f ? -1.0f : 0.0f); break;
		case 2: x[i] = (i / 300) % 2 ? NAN : r; break;
		case 4: x[i] = i % 97 == 3 ? NAN : -1.0f - fabsf(r); break;
		default: x[i] = vals[(unsigned)((r + 1.0f) * 3.5f) % 7]; break;
		}
	}
}

/* Scans in `trials` cases where fn and the scalar rule disagree. */
static int best_rows_mismatches(best_scan_fn fn, int trials)
{
	enum { N = 1200 };
	static float x[N];
	unsigned s = 29;
	int bad = 0;
	for (int t = 0; t < trials; t++) {
		best_rows_fill(x, N, t % 5, &s);
		int64_t i0 = (int64_t)((best_rows_rand(&s) + 1.0f) * 60.0f);
		int64_t i1 = N - (int64_t)((best_rows_rand(&s) + 1.0f) * 60.0f);
		if (t % 3 == 0)
			i1 = i0 + (i1 - i0) % 40; /* short: tails alone */
		struct ops_best want, got;
		ops_best_init(&want);
		if (t % 2) { /* a best found before: in the row or outside it */
			int64_t j = (int64_t)((best_rows_rand(&s) + 1.0f) * 0.5f * (float)N) % N;
			want.val = t % 5 == 1 ? -INFINITY : x[j];
			want.idx = t % 7 == 1 ? -5 - j : j;
			if (want.val != want.val)
				want.val = 0.5f;
		}
		got = want;
		ops_best_scan_scalar(&want, x, i0, i1);
		fn(&got, x, i0, i1);
		bad += got.idx != want.idx || memcmp(&got.val, &want.val, sizeof got.val) != 0;
	}
	return bad;
}

#endif
