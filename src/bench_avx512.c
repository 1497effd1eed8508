/* bench_avx512.c — the int8 multiply-add probe of `ingot bench` (see
 * bench.h) on CPUs with AVX512-VNNI: the product instruction of the
 * matrix kernels there (quant_gemm_avx512.c, quant_gemm_r16_avx512.c) is
 * vpdpbusd on zmm registers, 64 multiply-adds summed into 16 int32 lanes,
 * twice bench_avx2.c's vpmaddubsw on ymm (32 into 16 int16). Measured on
 * the Zen 5 host: 7.9 G of either instruction a second per core, so the
 * vpmaddubsw probe put the peak at half of what these kernels can issue,
 * and the repacked kernels (~300 G multiply-adds/s a core in quant_bench)
 * above it. Twelve independent chains cover the latency. */
#include <immintrin.h>
#include <string.h>

#include "bench.h"

uint64_t bench_int8_macs_avx512(long iters, int32_t *sink)
{
	/* Each chain accumulates into itself (the sums wrap; only the issue
	 * rate counts). Written in assembly, as bench_avx2.c's loop. */
	const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
	__m512i s0 = _mm512_set1_epi32(1), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0;
	__m512i s6 = s0, s7 = s0, s8 = s0, s9 = s0, s10 = s0, s11 = s0;
	for (long i = 0; i < iters; i++)
		__asm__("vpdpbusd %13, %12, %0\n\t"
			"vpdpbusd %13, %12, %1\n\t"
			"vpdpbusd %13, %12, %2\n\t"
			"vpdpbusd %13, %12, %3\n\t"
			"vpdpbusd %13, %12, %4\n\t"
			"vpdpbusd %13, %12, %5\n\t"
			"vpdpbusd %13, %12, %6\n\t"
			"vpdpbusd %13, %12, %7\n\t"
			"vpdpbusd %13, %12, %8\n\t"
			"vpdpbusd %13, %12, %9\n\t"
			"vpdpbusd %13, %12, %10\n\t"
			"vpdpbusd %13, %12, %11"
			: "+v"(s0), "+v"(s1), "+v"(s2), "+v"(s3), "+v"(s4), "+v"(s5), "+v"(s6),
			  "+v"(s7), "+v"(s8), "+v"(s9), "+v"(s10), "+v"(s11)
			: "v"(a), "v"(b));
	__m512i t = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(s0, s1), s2),
				     _mm512_add_epi32(s3, s4));
	t = _mm512_add_epi32(t, _mm512_add_epi32(_mm512_add_epi32(s5, s6), s7));
	t = _mm512_add_epi32(t, _mm512_add_epi32(_mm512_add_epi32(s8, s9),
						 _mm512_add_epi32(s10, s11)));
	/* the lanes as they are: summed in int they would overflow, which
	 * is undefined (UBSan) where the vector adds above wrap */
	_mm512_storeu_si512(sink, t);
	return (uint64_t)iters * 12 * 64;
}

/* The stream probe's read with the loads of the repacked kernels: on the
 * Emerald Rapids host, 2 threads over 246 MB, median of 30 passes, 26.4
 * GB/s against 22.6 for the same read in 128-bit loads. Two independent
 * chains, a line each. */
void bench_stream_sum_avx512(const void *p, size_t lines, size_t ahead, uint64_t sink[8])
{
	const char *c = p;
	__m512i a0 = _mm512_setzero_si512(), a1 = a0;
	size_t l = 0;
	for (; l + 2 <= lines; l += 2) {
		__builtin_prefetch(c + 64 * l + ahead, 0, 2); /* prefetcht1 */
		__builtin_prefetch(c + 64 * l + 64 + ahead, 0, 2);
		a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(c + 64 * l));
		a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(c + 64 * l + 64));
	}
	if (l < lines)
		a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(c + 64 * l));
	a0 = _mm512_add_epi64(a0, a1);
	memcpy(sink, &a0, sizeof a0);
}
