/* test_bench.c — the machine probes of `ingot bench` (bench.h): the
 * stream probe's vector loops sum exactly what a plain loop over the same
 * words sums (every line read once, none skipped at an odd count or an
 * unaligned start), and the probes return positive figures through a pool,
 * 0 for arguments outside their contracts. Speed is never checked. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "check.h"
#include "mem.h"
#include "quant.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

typedef void (*stream_sum_fn)(const void *p, size_t lines, size_t ahead, uint64_t sink[8]);

static void test_stream_sum(const char *name, stream_sum_fn fn)
{
	enum { WORDS = 8 * 1200 + 8 };
	uint64_t *buf = malloc(WORDS * sizeof *buf);
	CHECK(buf != NULL, "out of memory");
	if (!buf)
		return;
	for (size_t i = 0; i < WORDS; i++)
		buf[i] = rng_next();
	static const size_t counts[] = { 0, 1, 2, 3, 64, 65, 1000, 1200 };
	for (int skew = 0; skew < 2; skew++) { /* a start 8 bytes off the line */
		for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
			const uint64_t *p = buf + skew;
			uint64_t want = 0, got = 0, sink[8];
			for (size_t i = 0; i < 8 * counts[c]; i++)
				want += p[i];
			memset(sink, 0xa5, sizeof sink); /* every slot must be written */
			fn(p, counts[c], 64 * (c + 1), sink); /* the distance changes no sum */
			for (int k = 0; k < 8; k++)
				got += sink[k];
			CHECK(got == want, "%s: %zu lines at +%d words sum %llu, not %llu", name,
			      counts[c], skew, (unsigned long long)got, (unsigned long long)want);
		}
	}
	free(buf);
}

static void test_probes(void)
{
	struct pool *pool = NULL;
	ing_err err = { 0 };
	CHECK(pool_create(2, 0, &pool, &err) == ING_OK, "pool: %s", err.msg);
	if (!pool)
		return;
	struct bench_stream *s = bench_stream_create(8u << 20);
	CHECK(s != NULL, "stream probe of 8 MB");
	CHECK(bench_stream_measure(pool, s, 3) > 0, "stream probe: a positive figure");
	CHECK(bench_stream_measure(pool, s, 0) == 0, "stream probe: 0 runs give 0");
	CHECK(bench_stream_measure(pool, s, 65) == 0, "stream probe: 65 runs give 0");
	CHECK(bench_stream_measure(pool, NULL, 3) == 0, "stream probe: NULL gives 0");
	bench_stream_destroy(s);
	bench_stream_destroy(NULL);
	CHECK(ing_pages_alloc(0) == NULL, "pages: 0 bytes give NULL");
	ing_pages_free(NULL, 0);
	if (quant_isa_detect() >= QUANT_ISA_AVX2)
		CHECK(bench_int8_peak(pool, 1) > 0, "int8 peak: a positive figure");
	pool_destroy(pool);
}

int main(void)
{
	if (quant_kernels_get(QUANT_ISA_AVX2))
		test_stream_sum("avx2", bench_stream_sum_avx2);
	if (quant_kernels_get(QUANT_ISA_AVX512))
		test_stream_sum("avx512", bench_stream_sum_avx512);
	test_probes();
	return check_summary("test_bench");
}
