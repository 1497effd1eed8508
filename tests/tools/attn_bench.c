/* attn_bench.c — single-thread time of grouped prefill attention
 * (ops_attend_group) on the default model's shapes, in thread CPU time so
 * other processes on the machine change the figures little.
 *
 *   attn_bench [--quick] [--f16 | --q8] [--rows R] [--cold]
 *
 * Shape: Gemma 3 270M, head_dim 256 (Dh = Dv), 4 query heads per KV head,
 * a unit of R = 8 adjacent rows x 4 heads = 32 queries (what exec_attn in
 * forward.c hands ops_attend_group; --rows 1 is a decode step's row, R
 * up to 8), causal: row r of the tile at position
 * p + r attends over keys [0, p + r + 1). K/V rows are scattered 256-float
 * rows, as in the paged KV cache. For each n (keys of the last row) the
 * median over repeats of the time per call is printed, with ns per
 * (query, key) pair, and "alone": the same 32 queries through ops_attend
 * one at a time (the pre-group baseline; it must give the same bits, or
 * the line says NOT IDENTICAL). --f16 / --q8 store the K/V rows as F16 /
 * Q8_0, as those KV caches do. --cold: each call's rows are a window of
 * a 128 MB pool, the next window each call, so they come from DRAM, as a
 * server's KV rows do (16 sequences of a few hundred tokens are ~80 MB a
 * step). Deterministic data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops.h"

enum { DH = 256, HEADS = 4, ROWS_MAX = 8, NQ_MAX = ROWS_MAX * HEADS, NMAX = 1024 };

static int rows = ROWS_MAX, nq = NQ_MAX; /* --rows R: R rows, R x HEADS queries */

static double thread_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static unsigned seed = 1;

static float frand(void)
{
	seed = seed * 1103515245u + 12345u;
	return ((float)(seed >> 8) / (float)(1u << 24)) * 2.0f - 1.0f;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

struct bench {
	const void *K[NMAX], *V[NMAX];
	unsigned char *pool; /* --cold: npool (K, V) row pairs, else NULL */
	size_t row, npool, next;
	enum ops_kv_type kt;
	float *q, *out, *alone, *scratch;
	struct ops_attn_query qs[NQ_MAX];
};

/* The tile whose last row sees n keys: row r sees n - rows + 1 + r. */
static void tile_set(struct bench *b, int64_t n)
{
	for (int i = 0; i < nq; i++) {
		const int64_t r = i / HEADS;
		b->qs[i] = (struct ops_attn_query){ b->out + i * DH, b->q + i * DH, 0,
						    n - rows + 1 + r };
	}
}

/* K/V point into the window of rows at b->next: its K rows, then its V
 * rows, in blocks of 16 as the paged KV cache keeps them (kv.h: a block's
 * rows of one layer adjacent, the blocks anywhere), the blocks in
 * scattered order; b->next moves to the following window. */
static void rows_set(struct bench *b)
{
	enum { BLOCK = 16, NBLOCKS = NMAX / BLOCK };
	const unsigned char *k = b->pool + b->next * 2 * b->row, *v = k + NMAX * b->row;
	for (int j = 0; j < NMAX; j++) {
		const size_t r = (size_t)((j / BLOCK * 7) % NBLOCKS * BLOCK + j % BLOCK);
		b->K[j] = k + r * b->row;
		b->V[j] = v + r * b->row;
	}
	b->next = b->next + 2 * NMAX <= b->npool ? b->next + NMAX : 0;
}

static void run_group(struct bench *b)
{
	if (b->pool)
		rows_set(b);
	ops_attend_group(b->qs, nq, b->K, b->V, b->kt, DH, DH, 0.0625f, 0.0f, b->scratch);
}

static void run_alone(struct bench *b)
{
	if (b->pool)
		rows_set(b);
	for (int i = 0; i < nq; i++)
		ops_attend(b->alone + i * DH, b->qs[i].q, b->K, b->V, b->kt, b->qs[i].hi, DH, DH,
			   0.0625f, 0.0f, b->scratch);
}

/* Median seconds per call of f over reps calls, timed in batches. */
static double time_median(void (*f)(struct bench *), struct bench *b, int reps)
{
	double t[15];
	const int nt = 15;
	for (int k = 0; k < nt; k++) {
		double t0 = thread_s();
		for (int r = 0; r < reps; r++)
			f(b);
		t[k] = (thread_s() - t0) / reps;
	}
	qsort(t, nt, sizeof *t, cmp_double);
	return t[nt / 2];
}

int main(int argc, char **argv)
{
	int quick = 0, f16 = 0, q8 = 0, cold = 0;
	for (int i = 1; i < argc; i++) {
		quick |= strcmp(argv[i], "--quick") == 0;
		f16 |= strcmp(argv[i], "--f16") == 0;
		q8 |= strcmp(argv[i], "--q8") == 0;
		cold |= strcmp(argv[i], "--cold") == 0;
		if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc) {
			rows = atoi(argv[++i]);
			if (rows < 1 || rows > ROWS_MAX)
				return fprintf(stderr, "attn_bench: --rows 1..%d\n", ROWS_MAX), 2;
			nq = rows * HEADS;
		}
	}
	struct bench *b = calloc(1, sizeof *b);
	const enum ops_kv_type kt = q8 ? OPS_KV_Q8_0 : f16 ? OPS_KV_F16 : OPS_KV_F32;
	const size_t row = ops_kv_row_bytes(kt, DH);
	float *src = malloc(sizeof(float) * DH);
	const size_t nrows = cold ? ((size_t)128 << 20) / (2 * row) : NMAX;
	unsigned char *kv = malloc(2 * nrows * row);
	b->q = malloc(sizeof(float) * NQ_MAX * DH);
	b->out = malloc(sizeof(float) * NQ_MAX * DH);
	b->alone = malloc(sizeof(float) * NQ_MAX * DH);
	b->scratch = malloc(sizeof(float) * ops_attend_group_scratch(NQ_MAX, NMAX, DH, DH, kt));
	if (!b || !src || !kv || !b->q || !b->out || !b->alone || !b->scratch)
		return 1;
	b->kt = kt;
	for (int64_t r = 0; r < 2 * (int64_t)nrows; r++) {
		for (int i = 0; i < DH; i++)
			src[i] = frand();
		ops_kv_store(kv + r * row, src, DH, kt);
	}
	for (int i = 0; i < nq * DH; i++)
		b->q[i] = 3 * frand();
	for (int j = 0; j < NMAX; j++) { /* scattered rows, like KV blocks */
		b->K[(j * 7) % NMAX] = kv + (size_t)j * 2 * row;
		b->V[(j * 7) % NMAX] = kv + (size_t)j * 2 * row + row;
	}
	if (cold) { /* rows_set points K/V into the pool before each call */
		b->pool = kv;
		b->row = row;
		b->npool = nrows;
	}
	printf("attn_bench: %d queries (%d rows x %d heads), Dh = Dv = %d, %s K/V%s, thread CPU "
	       "time\n", nq, rows, HEADS, DH, q8 ? "Q8_0" : f16 ? "F16" : "F32",
	       cold ? " from DRAM (--cold)" : "");
	printf("%6s %12s %10s %12s %8s\n", "keys", "group us", "ns/pair", "alone us", "gain");
	static const int64_t ns[] = { 64, 128, 256, 512, 1024 };
	for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
		const int64_t n = ns[c];
		tile_set(b, n);
		double pairs = 0;
		for (int i = 0; i < nq; i++)
			pairs += (double)b->qs[i].hi;
		const int reps = (int)(4e6 / pairs / (quick ? 4 : 1)) + 1;
		const double tg = time_median(run_group, b, reps);
		const double ta = time_median(run_alone, b, reps);
		/* (--cold: the two ran over other windows of rows) */
		const int same = cold || memcmp(b->out, b->alone, sizeof(float) * nq * DH) == 0;
		printf("%6lld %12.1f %10.3f %12.1f %7.2fx%s\n", (long long)n, tg * 1e6,
		       tg * 1e9 / pairs, ta * 1e6, ta / tg, same ? "" : "  NOT IDENTICAL");
	}
	free(kv);
	free(src);
	free(b->q);
	free(b->out);
	free(b->alone);
	free(b->scratch);
	free(b);
	return 0;
}
