/* bench.c — the streaming-bandwidth and int8 multiply-add probes (see
 * bench.h).
 *
 * Each thread sums 64-bit words of its contiguous slice with independent
 * accumulators, in the widest loads the matrix kernels use on this CPU,
 * prefetching each line a distance ahead of the read; the sum is kept so
 * the loads cannot be optimized away. The probe should read as fast as
 * the memory lets a simple loop read, so that the kernels' share of it
 * says what is left. On the Emerald Rapids host (2 threads, 246 MB, 4 KB
 * pages): a plain read in 128-bit loads (the first probe) streamed
 * 15.5-16.5 GB/s where the same read prefetching 4 KB ahead streams 19-21
 * (the hardware prefetcher restarts at each 4 KB page there), and in
 * 512-bit loads 26.4 against 22.6 in 128-bit ones (median of 30 passes).
 *
 * On the Sapphire Rapids-class host (2 threads, 246 MB, mean of 9 passes,
 * each after a 1.5 GB read that evicts the buffer, a throwaway harness of
 * this loop): from huge pages, the mapping the repacked weights get, no
 * prefetch 30.3 GB/s, 512 bytes ahead 37.1, 1 KB 36.4, 2 KB 36.8, 4 KB
 * 33.7; from 4 KB pages (which this probe read until then, while the
 * weights sat on huge pages) 22.1, 25.2, 25.8, 26.9, 26.1. Batch-1 decode
 * read "108-112%" of that probe. So the buffer now comes from
 * ing_pages_alloc, and each measurement reads at both distances below and
 * keeps the faster. */
#include "bench.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "clock.h"
#include "generate.h"
#include "mem.h"
#include "quant.h"

/* The prefetch distances a measurement reads at, in bytes (the faster
 * counts). */
static const size_t stream_aheads[] = { 2048, 4096 };
#define STREAM_AHEADS (sizeof stream_aheads / sizeof stream_aheads[0])

/* The probe: a buffer as large as the weights, read by every thread in
 * the widest loads the matrix kernels use here (quant_isa_detect). */
struct bench_stream {
	uint64_t *buf;
	size_t words, bytes; /* bytes mapped */
	size_t ahead;	     /* this pass's prefetch distance */
	enum quant_isa isa;
	uint64_t sink[64][8]; /* one cache line per thread */
};

/* Baseline x86-64 (and other CPUs): 128-bit loads, or plain words. */
static void stream_sum_base(const uint64_t *w, size_t lines, size_t ahead, uint64_t sink[8])
{
#ifdef __SSE2__
	/* four independent chains, a line an iteration */
	__m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
	const __m128i *p = (const __m128i *)w;
	for (size_t i = 0; i < lines * 4; i += 4) {
		__builtin_prefetch((const char *)(p + i) + ahead, 0, 2);
		a0 = _mm_add_epi64(a0, _mm_loadu_si128(p + i));
		a1 = _mm_add_epi64(a1, _mm_loadu_si128(p + i + 1));
		a2 = _mm_add_epi64(a2, _mm_loadu_si128(p + i + 2));
		a3 = _mm_add_epi64(a3, _mm_loadu_si128(p + i + 3));
	}
	__m128i acc = _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3));
	memset(sink, 0, 8 * sizeof *sink);
	_mm_storeu_si128((__m128i *)sink, acc);
#else
	uint64_t acc[8] = { 0 };
	for (size_t i = 0; i < lines * 8; i += 8) {
		__builtin_prefetch((const char *)(w + i) + ahead, 0, 2);
		for (int k = 0; k < 8; k++)
			acc[k] += w[i + k];
	}
	memcpy(sink, acc, sizeof acc);
#endif
}

static void stream_thread(void *ctx, int ith, int nth)
{
	struct bench_stream *j = ctx;
	long b, e;
	pool_split((long)(j->words / 8), ith, nth, &b, &e); /* lines */
	const uint64_t *w = j->buf + b * 8;
	uint64_t *sink = j->sink[ith % 64];
	if (j->isa >= QUANT_ISA_AVX512)
		bench_stream_sum_avx512(w, (size_t)(e - b), j->ahead, sink);
	else if (j->isa >= QUANT_ISA_AVX2)
		bench_stream_sum_avx2(w, (size_t)(e - b), j->ahead, sink);
	else
		stream_sum_base(w, (size_t)(e - b), j->ahead, sink);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct bench_stream *bench_stream_create(size_t bytes)
{
	struct bench_stream *s = ing_calloc(1, sizeof *s);
	uint64_t *buf = ing_pages_alloc(bytes);
	if (!s || !buf) {
		ing_free(s);
		ing_pages_free(buf, bytes);
		return NULL;
	}
	/* commit the pages, each with its own words: pages alike could be
	 * merged (KSM, on this machine or its host) and read from cache */
	for (size_t i = 0; i < bytes / sizeof *buf; i++)
		buf[i] = i;
	s->buf = buf;
	s->bytes = bytes;
	s->words = bytes / sizeof(uint64_t);
	s->isa = quant_isa_detect();
	return s;
}

double bench_stream_measure(struct pool *pool, struct bench_stream *s, int runs)
{
	if (!s || runs < 1 || runs > 64)
		return 0;
	double gbs[STREAM_AHEADS][64];
	for (int r = 0; r < runs; r++) /* the distances alternate: drift hits both */
		for (size_t d = 0; d < STREAM_AHEADS; d++) {
			s->ahead = stream_aheads[d];
			double t0 = clock_now_s();
			pool_run(pool, stream_thread, s);
			gbs[d][r] = (double)(s->words * sizeof(uint64_t)) / (clock_now_s() - t0) / 1e9;
		}
	double best = 0;
	for (size_t d = 0; d < STREAM_AHEADS; d++) {
		double m = bench_median(gbs[d], runs);
		best = m > best ? m : best;
	}
	return best;
}

void bench_stream_destroy(struct bench_stream *s)
{
	if (!s)
		return;
	ing_pages_free(s->buf, s->bytes);
	ing_free(s);
}

/* ---- int8 multiply-add peak ---- */

#define PEAK_ITERS (1L << 21) /* per thread and pass: 0.8 G multiply-adds, ~10 ms */

struct peak_job {
	bool zmm; /* the AVX-512 probe */
	uint64_t macs[64];
	int32_t sink[64][16]; /* one cache line per thread */
};

static bool peak_zmm(void)
{
	return quant_isa_detect() >= QUANT_ISA_AVX512;
}

const char *bench_int8_peak_instr(void)
{
	return peak_zmm() ? "vpdpbusd zmm" : "vpmaddubsw ymm";
}

static void peak_thread(void *ctx, int ith, int nth)
{
	(void)nth;
	struct peak_job *j = ctx;
	int32_t *sink = &j->sink[ith % 64][0];
	j->macs[ith % 64] = j->zmm ? bench_int8_macs_avx512(PEAK_ITERS, sink)
				   : bench_int8_macs_avx2(PEAK_ITERS, sink);
}

double bench_int8_peak(struct pool *pool, int runs)
{
	if (quant_isa_detect() < QUANT_ISA_AVX2 || runs < 1 || runs > 64)
		return 0;
	struct peak_job *j = ing_calloc(1, sizeof *j);
	if (!j)
		return 0;
	j->zmm = peak_zmm();
	double gmacs[64];
	pool_run(pool, peak_thread, j); /* warm-up (clocks up, code in cache) */
	for (int r = 0; r < runs; r++) {
		double t0 = clock_now_s();
		pool_run(pool, peak_thread, j);
		double dt = clock_now_s() - t0;
		uint64_t macs = 0;
		for (int t = 0; t < pool_threads(pool) && t < 64; t++)
			macs += j->macs[t];
		gmacs[r] = (double)macs / dt / 1e9;
	}
	ing_free(j);
	return bench_median(gmacs, runs);
}
