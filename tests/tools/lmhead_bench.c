/* lmhead_bench.c — the default model's LM head (262144 rows of 640, Q8_0,
 * repacked 16 rows to a tile) streaming from memory against T tokens, on
 * 1 or 2 threads, each taking half the rows in the pieces exec_lm_head
 * (forward.c) cuts them into: what a batched decode step's LM head does,
 * apart from the rest of the step. Wall time of each round, and G
 * multiply-adds/s.
 *
 *   lmhead_bench [--threads N] [--tokens T] [--piece ROWS] [--rounds R] [--amx]
 *
 * --amx: the amx table's kernel instead of the AVX-512 one (exits 2 where
 * the CPU or the OS does not offer it).
 *
 * Random quants with one sane scale; the results are not checked (that is
 * test_quant's job). The 178 MB of weights do not fit in any cache, so
 * every round reads them from memory once per pass of groups. Needs the
 * AVX-512 table's repacked kernel (exits 2 without it). */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant.h"

enum { N = 640, V = 262144, T_MAX = 64 };

struct bench {
	const struct quant_kernels *k;
	const void *w16, *a, *packed;
	size_t a_stride, w_stride;
	float *y;
	int64_t T, piece;
};

struct share {
	const struct bench *b;
	int64_t r0, r1;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *share_run(void *p)
{
	const struct share *s = p;
	const struct bench *b = s->b;
	for (int64_t r0 = s->r0; r0 < s->r1; r0 += b->piece) {
		const int64_t r1 = r0 + b->piece < s->r1 ? r0 + b->piece : s->r1;
		b->k->gemm_r16[QTYPE_Q8_0](N, b->w16, b->w_stride, r0, r1, b->a, b->a_stride,
					   b->T >= QUANT_GEMM_PACK_MIN ? b->packed : NULL, b->T, b->y, V,
					   s->r1);
	}
	return NULL;
}

static uint64_t rng = 88172645463325252ull;

static uint8_t rng_byte(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (uint8_t)rng;
}

int main(int argc, char **argv)
{
	int nth = 2, rounds = 5;
	enum quant_isa isa = QUANT_ISA_AVX512;
	int64_t T = 16, piece = 2048;
	static const struct option opts[] = { { "threads", 1, 0, 'j' }, { "tokens", 1, 0, 't' },
					       { "piece", 1, 0, 'p' }, { "rounds", 1, 0, 'r' },
					       { "amx", 0, 0, 'x' },
					       { 0, 0, 0, 0 } };
	for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		if (c == 'j')
			nth = atoi(optarg);
		else if (c == 't')
			T = atoll(optarg);
		else if (c == 'p')
			piece = atoll(optarg);
		else if (c == 'r')
			rounds = atoi(optarg);
		else if (c == 'x')
			isa = QUANT_ISA_AMX;
		else
			return 1;
	}
	if (nth < 1 || nth > 2 || T < 1 || T > T_MAX || piece < 16 || rounds < 1) {
		fprintf(stderr, "lmhead_bench: --threads 1|2, --tokens 1..%d, --piece >= 16, --rounds >= 1\n",
			T_MAX);
		return 1;
	}
	struct bench b = { .k = quant_kernels_get(isa), .T = T, .piece = piece };
	if (!b.k || !b.k->gemm_r16[QTYPE_Q8_0]) {
		fprintf(stderr, "lmhead_bench: no %s repacked Q8_0 kernel on this CPU\n", quant_isa_name(isa));
		return 2;
	}
	size_t row_bytes = 0;
	if (qtype_row_bytes(QTYPE_Q8_0, N, &row_bytes) != 0)
		return 1;
	b.w_stride = b.a_stride = row_bytes;
	uint8_t *w = malloc((size_t)V * row_bytes), *a = malloc(T_MAX * row_bytes);
	void *w16 = malloc(quant_r16_bytes(QTYPE_Q8_0, N, V));
	void *packed = malloc(quant_gemm_pack_bytes(QTYPE_Q8_0, N, T_MAX));
	b.y = malloc(sizeof(float) * (size_t)V * (size_t)T);
	if (!w || !a || !w16 || !packed || !b.y) {
		fprintf(stderr, "lmhead_bench: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < (size_t)V * row_bytes; i++)
		w[i] = rng_byte();
	const uint16_t d = f32_to_fp16(1.0f / 4096);
	for (size_t blk = 0; blk < (size_t)V * (N / QK); blk++)
		memcpy(w + blk * (row_bytes / (N / QK)), &d, sizeof d); /* each block's d */
	quant_r16_pack(QTYPE_Q8_0, w, N, V, w16);
	free(w);
	float x[N];
	for (int t = 0; t < T_MAX; t++) {
		for (int i = 0; i < N; i++)
			x[i] = (float)((i * 7 + t * 13) % 17) - 8.0f;
		quant_quantize_ref(QTYPE_Q8_0, x, a + (size_t)t * row_bytes, N);
		quant_gemm_pack_row(QTYPE_Q8_0, a + (size_t)t * row_bytes, N, t, packed);
	}
	memset(b.y, 0, sizeof(float) * (size_t)V * (size_t)T);
	b.w16 = w16, b.a = a, b.packed = packed;
	printf("lmhead_bench: %d x %d Q8_0 repacked (%.0f MB), %lld tokens, %d threads, pieces of %lld rows\n",
	       V, N, (double)quant_r16_bytes(QTYPE_Q8_0, N, V) / 1e6, (long long)T, nth,
	       (long long)piece);
	for (int r = 0; r < rounds; r++) {
		pthread_t th[2];
		struct share s[2];
		const double t0 = now_s();
		for (int i = 0; i < nth; i++) {
			s[i] = (struct share){ &b, (int64_t)V / nth * i, (int64_t)V / nth * (i + 1) };
			if (pthread_create(&th[i], NULL, share_run, &s[i]) != 0) {
				fprintf(stderr, "lmhead_bench: pthread_create failed\n");
				return 1;
			}
		}
		for (int i = 0; i < nth; i++)
			pthread_join(th[i], NULL);
		const double dt = now_s() - t0;
		printf("  round %d: %7.2f ms  %6.1f G multiply-adds/s\n", r + 1, dt * 1e3,
		       (double)V * N * (double)T / dt / 1e9);
	}
	free(w16), free(a), free(packed), free(b.y);
	return 0;
}
