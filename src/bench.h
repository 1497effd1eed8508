/* bench.h — measurements `ingot bench` reports (machine side).
 *
 * bench_stream_bw measures the machine's streaming-read bandwidth the way a
 * decode step reads weights: n_threads threads each summing their part of
 * a buffer of `bytes` (as large as the weights, so it cannot sit in cache).
 * Returns the median GB/s of `runs` passes; 0 when the buffer cannot be
 * allocated. */
#ifndef INGOT_BENCH_H
#define INGOT_BENCH_H

#include <stddef.h>

#include "pool.h"

double bench_stream_bw(struct pool *pool, size_t bytes, int runs);

/* Median of n doubles (sorts v in place). */
double bench_median(double *v, int n);

#endif
