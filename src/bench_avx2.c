/* bench_avx2.c — the int8 multiply-add probe of `ingot bench` (see
 * bench.h), AVX2: the instruction every int8 matrix kernel of ingot is
 * built on, vpmaddubsw (32 multiply-adds into 16 int16), issued back to
 * back on registers with nothing else to wait for: the most a core can do,
 * which no real kernel reaches (they also unpack weights, widen sums and
 * load operands). Ten independent chains cover its latency. */
#include <immintrin.h>
#include <string.h>

#include "bench.h"

uint64_t bench_int8_macs_avx2(long iters, int32_t *sink)
{
	/* Ten chains, each feeding its products back in as the next signed
	 * operand (the values saturate and wander; only the issue rate
	 * counts). Written in assembly: compiled C moves and spills the
	 * chains between the multiplies and measures that instead. */
	const __m256i a = _mm256_set1_epi8(3);
	__m256i s0 = _mm256_set1_epi16(1), s1 = s0, s2 = s0, s3 = s0, s4 = s0;
	__m256i s5 = s0, s6 = s0, s7 = s0, s8 = s0, s9 = s0;
	for (long i = 0; i < iters; i++)
		__asm__("vpmaddubsw %0, %10, %0\n\t"
			"vpmaddubsw %1, %10, %1\n\t"
			"vpmaddubsw %2, %10, %2\n\t"
			"vpmaddubsw %3, %10, %3\n\t"
			"vpmaddubsw %4, %10, %4\n\t"
			"vpmaddubsw %5, %10, %5\n\t"
			"vpmaddubsw %6, %10, %6\n\t"
			"vpmaddubsw %7, %10, %7\n\t"
			"vpmaddubsw %8, %10, %8\n\t"
			"vpmaddubsw %9, %10, %9"
			: "+x"(s0), "+x"(s1), "+x"(s2), "+x"(s3), "+x"(s4), "+x"(s5), "+x"(s6),
			  "+x"(s7), "+x"(s8), "+x"(s9)
			: "x"(a));
	__m256i t = _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(s0, s1), s2),
				     _mm256_add_epi16(s3, s4));
	t = _mm256_add_epi16(t, _mm256_add_epi16(_mm256_add_epi16(s5, s6), s7));
	t = _mm256_add_epi16(t, _mm256_add_epi16(s8, s9));
	*sink = _mm256_extract_epi32(t, 0);
	return (uint64_t)iters * 10 * 32;
}

/* The stream probe's read with the loads of the AVX2 kernels: a line is
 * two ymm loads, on two independent chains. */
void bench_stream_sum_avx2(const void *p, size_t lines, size_t ahead, uint64_t sink[8])
{
	const char *c = p;
	__m256i a0 = _mm256_setzero_si256(), a1 = a0;
	for (size_t l = 0; l < lines; l++) {
		__builtin_prefetch(c + 64 * l + ahead, 0, 2); /* prefetcht1 */
		a0 = _mm256_add_epi64(a0, _mm256_loadu_si256((const __m256i *)(c + 64 * l)));
		a1 = _mm256_add_epi64(a1, _mm256_loadu_si256((const __m256i *)(c + 64 * l + 32)));
	}
	a0 = _mm256_add_epi64(a0, a1);
	memcpy(sink, &a0, sizeof a0);
	memset(sink + 4, 0, 4 * sizeof *sink);
}
