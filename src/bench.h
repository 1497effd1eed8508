/* bench.h — measurements `ingot bench` reports (machine side).
 *
 * The streaming-read probe measures the machine's bandwidth the way a
 * decode step reads weights: every pool thread summing its part of a
 * buffer of `bytes` (as large as the weights, so it cannot sit in cache).
 * It is kept for measurements spread over a benchmark (the bandwidth of a
 * shared host drifts between them): create commits the buffer (NULL out
 * of memory; free with destroy, NULL is fine), measure returns the GB/s
 * of the faster of its reads (the prefetch distances of bench.c), each
 * the median of `runs` passes (0 for a NULL probe or runs outside
 * 1..64). The buffer is mapped as the repacked weights are
 * (ing_pages_alloc): a probe on smaller pages read slower than the
 * weights stream, and overstated their share of the bandwidth. */
#ifndef INGOT_BENCH_H
#define INGOT_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"

struct bench_stream;
struct bench_stream *bench_stream_create(size_t bytes);
double bench_stream_measure(struct pool *pool, struct bench_stream *s, int runs);
void bench_stream_destroy(struct bench_stream *s);

/* The machine's int8 multiply-add peak in G/s: n_threads threads issuing
 * the int8 product instruction of the matrix kernels the CPU runs
 * (bench_int8_peak_instr) back to back on registers; the median of `runs`
 * passes. The ceiling a compute-bound step (batched decode, prefill)
 * cannot pass, however good its kernels. 0 when the CPU has no such
 * kernels (below AVX2). */
double bench_int8_peak(struct pool *pool, int runs);

/* That instruction: "vpdpbusd zmm" (AVX512-VNNI kernels) or "vpmaddubsw
 * ymm" (AVX2 and AVX-VNNI: the same count per instruction). */
const char *bench_int8_peak_instr(void);

/* The probes' loops (bench_avx2.c, bench_avx512.c): iters rounds, return
 * the multiply-adds done; sink (16 int32s) keeps the result observable. */
uint64_t bench_int8_macs_avx2(long iters, int32_t *sink);
uint64_t bench_int8_macs_avx512(long iters, int32_t *sink);

/* The stream probe's loops, one a vector width (bench.c picks the widest
 * the matrix kernels use here): sum the 64-byte lines [0, lines) of p into
 * sink[0..7], prefetching each line `ahead` bytes before reading it. */
void bench_stream_sum_avx2(const void *p, size_t lines, size_t ahead, uint64_t sink[8]);
void bench_stream_sum_avx512(const void *p, size_t lines, size_t ahead, uint64_t sink[8]);

/* Median of n doubles (sorts v in place). */
double bench_median(double *v, int n);

#endif
