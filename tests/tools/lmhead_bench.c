/* lmhead_bench.c — the default model's LM head (262144 rows of 640, Q8_0,
 * repacked 16 rows to a tile) streaming from memory against T tokens, on
 * 1 or 2 threads, each taking half the rows in the pieces exec_lm_head
 * (forward.c) cuts them into: what a decode step's LM head does, apart
 * from the rest of the step. Wall time of each round, its G
 * multiply-adds/s and GB/s of weights.
 *
 *   lmhead_bench [--threads N] [--tokens T] [--piece ROWS] [--rounds R] [--amx]
 *                [--isa avx2|avx512|amx] [--type q8_0|q5_0|q4_k|q6_k] [--logits]
 *
 * Each piece's results go to a buffer of the thread's (T x piece floats,
 * the matrix taken from the piece's first row on), as a greedy batch's
 * do (fwd_batch.argmax_only, exec_lm_head_argmax), pieces of 65536 / T
 * rows unless --piece says; --logits: into a whole T x rows logits
 * matrix instead, as a batch that reads its logits (pieces of 2048).
 *
 * --amx: the amx table's kernel instead of the AVX-512 one (exits 2 where
 * the CPU or the OS does not offer it); --isa: that table's (avx2: the
 * AVX2 kernels, also on a host with AVX-512). --type: a matrix of that type
 * and about that size instead (the K types 2048 columns wide, as the
 * default model's ffn_down): the layers' types streaming from memory.
 *
 * The weights live on pages mapped as the model maps its repacked copies
 * (ing_pages_alloc: huge pages where offered; on the Sapphire
 * Rapids-class host a 4 KB-page copy read ~25% slower). Random quants
 * with small sane scales (quant_fill.h); the results are not checked
 * (that is test_quant's job). The 170-190 MB of weights do not fit in
 * any cache, so every round reads them from memory once per pass of groups.
 * Needs the chosen table's repacked kernel (exits 2 without it). */
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "mem.h"
#include "quant.h"
#include "quant_fill.h"

enum { T_MAX = 64 };

struct bench {
	const struct quant_kernels *k;
	enum qtype type;
	int64_t n, rows; /* the matrix: rows x n */
	const void *w16, *a, *packed;
	size_t a_stride, w_stride;
	float *y, *y_piece[2]; /* the logits matrix; each thread's piece buffer */
	bool logits;
	int64_t T, piece;
};

struct share {
	const struct bench *b;
	int64_t r0, r1;
	int ith;
};

static void *share_run(void *p)
{
	const struct share *s = p;
	const struct bench *b = s->b;
	/* pinned, as the model's pool pins its workers (a failure leaves the
	 * thread unpinned: the figures are then the scheduler's) */
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(s->ith, &set);
	pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	const void *packed = b->T >= QUANT_GEMM_PACK_MIN ? b->packed : NULL;
	const size_t tile_bytes = quant_r16_tile_bytes(b->type, b->n);
	for (int64_t r0 = s->r0; r0 < s->r1; r0 += b->piece) {
		const int64_t r1 = r0 + b->piece < s->r1 ? r0 + b->piece : s->r1;
		if (b->logits) {
			b->k->gemm_r16[b->type](b->n, b->w16, b->w_stride, r0, r1, b->a, b->a_stride, packed,
						b->T, b->y, b->rows, s->r1);
			continue;
		}
		/* rows from r0 on (r0 a multiple of 16) into the piece buffer */
		const uint8_t *w = (const uint8_t *)b->w16 + (size_t)(r0 / QUANT_R16_ROWS) * tile_bytes;
		b->k->gemm_r16[b->type](b->n, w, b->w_stride, 0, r1 - r0, b->a, b->a_stride, packed, b->T,
					b->y_piece[s->ith], r1 - r0, s->r1 - r0);
	}
	return NULL;
}

static const struct {
	const char *name;
	enum qtype type;
	int64_t n, rows;
} types[] = { /* each 170-190 MB repacked, as the LM head */
	      { "q8_0", QTYPE_Q8_0, 640, 262144 }, { "q5_0", QTYPE_Q5_0, 640, 393216 },
	      { "q4_k", QTYPE_Q4_K, 2048, 163840 }, { "q6_k", QTYPE_Q6_K, 2048, 106496 } };

int main(int argc, char **argv)
{
	int nth = 2, rounds = 5;
	enum quant_isa isa = QUANT_ISA_AVX512;
	int64_t T = 16, piece = 0;
	bool logits = false;
	int ty = 0;
	static const struct option opts[] = { { "threads", 1, 0, 'j' }, { "tokens", 1, 0, 't' },
					       { "piece", 1, 0, 'p' }, { "rounds", 1, 0, 'r' },
					       { "amx", 0, 0, 'x' }, { "type", 1, 0, 'y' },
					       { "logits", 0, 0, 'l' }, { "isa", 1, 0, 'i' },
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
		else if (c == 'l')
			logits = true;
		else if (c == 'i') {
			for (isa = 0; isa < QUANT_ISA_COUNT; isa++)
				if (strcmp(optarg, quant_isa_name(isa)) == 0)
					break;
			if (isa == QUANT_ISA_COUNT) {
				fprintf(stderr, "lmhead_bench: --isa avx2|avx512|amx\n");
				return 1;
			}
		}
		else if (c == 'y') {
			for (ty = 0; ty < (int)(sizeof types / sizeof types[0]); ty++)
				if (strcmp(optarg, types[ty].name) == 0)
					break;
			if (ty == (int)(sizeof types / sizeof types[0])) {
				fprintf(stderr, "lmhead_bench: --type q8_0|q5_0|q4_k|q6_k\n");
				return 1;
			}
		} else
			return 1;
	}
	if (piece == 0)
		piece = logits ? 2048 : 65536 / T / QUANT_R16_ROWS * QUANT_R16_ROWS;
	if (nth < 1 || nth > 2 || T < 1 || T > T_MAX || piece < 16 || piece % QUANT_R16_ROWS ||
	    rounds < 1) {
		fprintf(stderr, "lmhead_bench: --threads 1|2, --tokens 1..%d, --piece a multiple of 16, "
				"--rounds >= 1\n",
			T_MAX);
		return 1;
	}
	struct bench b = { .k = quant_kernels_get(isa), .type = types[ty].type, .n = types[ty].n,
			   .rows = types[ty].rows, .T = T, .piece = piece, .logits = logits };
	if (!b.k || !b.k->gemm_r16[b.type]) {
		fprintf(stderr, "lmhead_bench: no %s repacked %s kernel on this CPU\n", quant_isa_name(isa),
			types[ty].name);
		return 2;
	}
	const enum qtype at = qtype_traits(b.type)->act_type;
	size_t row_bytes = 0, a_row = 0;
	if (qtype_row_bytes(b.type, (uint64_t)b.n, &row_bytes) != 0 ||
	    qtype_row_bytes(at, (uint64_t)b.n, &a_row) != 0)
		return 1;
	b.w_stride = row_bytes, b.a_stride = a_row;
	const size_t w16_bytes = quant_r16_bytes(b.type, b.n, b.rows);
	uint8_t *w = malloc((size_t)b.rows * row_bytes), *a = malloc(T_MAX * a_row);
	void *w16 = ing_pages_alloc(w16_bytes);
	void *packed = malloc(quant_gemm_pack_bytes(at, b.n, T_MAX));
	b.y = logits ? malloc(sizeof(float) * (size_t)b.rows * (size_t)T) : NULL;
	for (int i = 0; i < 2; i++)
		b.y_piece[i] = logits ? NULL : malloc(sizeof(float) * (size_t)piece * (size_t)T);
	float *x = malloc(sizeof(float) * (size_t)b.n);
	if (!w || !a || !w16 || !packed || (logits ? !b.y : !b.y_piece[0] || !b.y_piece[1]) || !x) {
		fprintf(stderr, "lmhead_bench: out of memory\n");
		return 1;
	}
	uint64_t rng = 88172645463325252ull;
	quant_fill_weights(b.type, w, (size_t)b.rows * row_bytes, &rng);
	quant_r16_pack(b.type, w, b.n, b.rows, w16);
	free(w);
	for (int t = 0; t < T_MAX; t++) {
		quant_fill_activations(x, b.n, &rng);
		quant_quantize_ref(at, x, a + (size_t)t * a_row, b.n);
		quant_gemm_pack_row(at, a + (size_t)t * a_row, b.n, t, packed);
	}
	if (logits)
		memset(b.y, 0, sizeof(float) * (size_t)b.rows * (size_t)T);
	b.w16 = w16, b.a = a, b.packed = packed;
	printf("lmhead_bench: %lld x %lld %s repacked (%.0f MB), %lld tokens, %d threads, pieces of %lld "
	       "rows, into %s\n",
	       (long long)b.rows, (long long)b.n, types[ty].name, (double)w16_bytes / 1e6, (long long)T,
	       nth, (long long)piece, logits ? "the logits matrix" : "a buffer a thread");
	for (int r = 0; r < rounds; r++) {
		pthread_t th[2];
		struct share s[2];
		const double t0 = clock_now_s();
		for (int i = 0; i < nth; i++) {
			s[i] = (struct share){ &b, b.rows / nth * i, b.rows / nth * (i + 1), i };
			if (pthread_create(&th[i], NULL, share_run, &s[i]) != 0) {
				fprintf(stderr, "lmhead_bench: pthread_create failed\n");
				return 1;
			}
		}
		for (int i = 0; i < nth; i++)
			pthread_join(th[i], NULL);
		const double dt = clock_now_s() - t0;
		printf("  round %d: %7.2f ms  %6.1f G multiply-adds/s  %5.1f GB/s\n", r + 1, dt * 1e3,
		       (double)b.rows * (double)b.n * (double)T / dt / 1e9, (double)w16_bytes / dt / 1e9);
	}
	ing_pages_free(w16, w16_bytes);
	free(a), free(packed), free(b.y), free(b.y_piece[0]), free(b.y_piece[1]), free(x);
	return 0;
}
