/* stream_compute.c — how one core's streaming read from memory holds up
 * as work is added between the loads: what bounds the batched decode,
 * whose matrix kernels do 8 or more vpdpbusd for each cache line of
 * weights where batch 1 does one, each with a token's activation quad
 * broadcast from memory (quant_gemm_r16_avx512.c, r16_chains).
 *
 *   stream_compute [--mb M] [--rounds R]
 *
 * One thread reads a buffer of M MB (default 192; pages as the repacked
 * weights get them, ing_pages_alloc) line by line, prefetching as the
 * batch-1 kernels do (4 KB ahead into L2, 1 KB ahead into L1), and does N
 * vpdpbusd on each line it loads (N = 0, 2, 4, 8, 12; independent chains,
 * so the work is bound by its ports, not by latency), in two forms: the
 * line against a register (`register`), and against a dword broadcast
 * from a small array in L1 (`broadcast`, as the kernels take a token's
 * quad: one more load a vpdpbusd). For each it prints GB/s from memory
 * and of the same loop over 256 KB that stays in L2 (the work alone).
 * The best of R rounds (default 3). Needs AVX512-VNNI (the avx512 table);
 * exits 2 without it. */
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "mem.h"
#include "quant.h"

#define VNNI_FNS __attribute__((target("avx512f,avx512bw,avx512vnni"), noinline))

enum { HOT_BYTES = 256 * 1024, L2_AHEAD = 4096, L1_AHEAD = 1024, N_MAX = 12 };

static const int work_counts[] = { 0, 2, 4, 8, 12 };

/* the broadcast form's activation quads: 48 dwords (QUADS), a few lines
 * that stay in L1 */
enum { QUADS = 48 };
static int32_t quads[QUADS];

/* One pass over p[0 .. bytes) (a multiple of 256), n vpdpbusd a 64-byte
 * line; returns a value of the sums, so the work is kept. n is a
 * constant at each instance (stream_pass): every loop over the
 * accumulators unrolled, so that they stay in registers. */
__attribute__((always_inline, target("avx512f,avx512bw,avx512vnni"))) static inline int
stream_pass_n(const uint8_t *p, size_t bytes, int n, bool bcast)
{
	__m512i acc[N_MAX];
	_Pragma("GCC unroll 12") for (int i = 0; i < N_MAX; i++)
		acc[i] = _mm512_setzero_si512();
	__m512i x = _mm512_setzero_si512();
	const __m512i ones = _mm512_set1_epi8(1);
	for (size_t o = 0; o < bytes; o += 256) {
		for (int l = 0; l < 4; l++) {
			__builtin_prefetch(p + o + L2_AHEAD + 64 * l, 0, 2);
			__builtin_prefetch(p + o + L1_AHEAD + 64 * l, 0, 3);
		}
		__m512i v[4];
		_Pragma("GCC unroll 4") for (int l = 0; l < 4; l++) {
			v[l] = _mm512_load_si512(p + o + 64 * l);
			x = _mm512_xor_si512(x, v[l]);
		}
		_Pragma("GCC unroll 12") for (int k = 0; k < n; k++)
			_Pragma("GCC unroll 4") for (int l = 0; l < 4; l++) {
				const int c = (4 * k + l) % N_MAX;
				const __m512i b = bcast ? _mm512_set1_epi32(quads[(4 * k + l) % QUADS]) : ones;
				acc[c] = _mm512_dpbusd_epi32(acc[c], v[l], b);
			}
	}
	_Pragma("GCC unroll 12") for (int i = 0; i < N_MAX; i++)
		x = _mm512_add_epi32(x, acc[i]);
	return _mm512_reduce_add_epi32(x);
}

#define PASS_CASES(bcast)                                              \
	switch (n) {                                                   \
	case 0: return stream_pass_n(p, bytes, 0, bcast);             \
	case 2: return stream_pass_n(p, bytes, 2, bcast);             \
	case 4: return stream_pass_n(p, bytes, 4, bcast);             \
	case 8: return stream_pass_n(p, bytes, 8, bcast);             \
	default: return stream_pass_n(p, bytes, 12, bcast);           \
	}

VNNI_FNS static int stream_pass(const uint8_t *p, size_t bytes, int n, bool bcast)
{
	if (bcast) {
		PASS_CASES(true)
	}
	PASS_CASES(false)
}

static volatile int sink;

/* GB/s of the best of `rounds` passes over bytes at p (`repeat` passes
 * timed together, for the hot buffer). */
static double pass_rate(const uint8_t *p, size_t bytes, int n, bool bcast, int rounds, int repeat)
{
	double best = 0;
	for (int r = 0; r < rounds; r++) {
		const double t0 = clock_now_s();
		for (int i = 0; i < repeat; i++)
			sink += stream_pass(p, bytes, n, bcast);
		const double gbs = (double)bytes * repeat / (clock_now_s() - t0) / 1e9;
		best = gbs > best ? gbs : best;
	}
	return best;
}

int main(int argc, char **argv)
{
	int mb = 192, rounds = 3;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc && atoi(argv[i + 1]) >= 16) {
			mb = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
			rounds = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: stream_compute [--mb M (16 or more)] [--rounds R]\n");
			return 2;
		}
	}
	if (!quant_kernels_get(QUANT_ISA_AVX512)) {
		fprintf(stderr, "stream_compute: no AVX512-VNNI here\n");
		return 2;
	}
	const size_t bytes = (size_t)mb << 20;
	/* the prefetches run up to L2_AHEAD past the end: mapped too */
	uint8_t *buf = ing_pages_alloc(bytes + L2_AHEAD);
	if (!buf) {
		fprintf(stderr, "stream_compute: cannot map %d MB\n", mb);
		return 1;
	}
	memset(buf, 1, bytes + L2_AHEAD);
	for (int i = 0; i < QUADS; i++)
		quads[i] = 0x01010101 * (i % 7 + 1);
	printf("one thread, %d MB from memory; GB/s, best of %d\n", mb, rounds);
	printf("                   register              broadcast\n");
	printf("vpdpbusd/line  memory  alone (L2)    memory  alone (L2)\n");
	const int repeat = (int)(bytes / HOT_BYTES / 4);
	for (size_t w = 0; w < sizeof work_counts / sizeof work_counts[0]; w++) {
		const int n = work_counts[w];
		double rate[2][2]; /* [broadcast][hot] */
		for (int b = 0; b < 2; b++) {
			rate[b][0] = pass_rate(buf, bytes, n, b, rounds, 1);
			rate[b][1] = pass_rate(buf, HOT_BYTES, n, b, rounds, repeat);
		}
		printf("%13d  %6.1f  %10.1f    %6.1f  %10.1f\n", n, rate[0][0], rate[0][1], rate[1][0],
		       rate[1][1]);
	}
	ing_pages_free(buf, bytes + L2_AHEAD);
	return 0;
}
