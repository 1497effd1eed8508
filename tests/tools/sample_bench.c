/* sample_bench.c — the time to sample one row of logits the size of the
 * default model's vocabulary (262144), per sampling setting, and of the
 * log-softmax logprobs need (ops_logsumexp): what the engine thread spends
 * on each sequence of a step after the forward pass, one sequence after
 * another.
 *
 *   sample_bench [--logits FILE] [--rounds R]
 *
 * --logits: rows of float32 logits, 262144 each (tests/tools/logits
 * writes them for a prompt); without it, three synthetic rows: a model's
 * shape (40 likely tokens over a long tail), flat (every token within 4
 * of the maximum), and a grammar's (all but one token in 50 masked).
 * Each row is sampled R times (default 20) per setting from a fresh copy
 * (sampling modifies its row); prints the best and the median time per
 * row, in ms, averaged over the rows. One thread. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ops.h"
#include "sample.h"

#define VOCAB 262144
#define MAX_ROUNDS 1000

static const struct setting {
	const char *name;
	struct sample_params p;
} settings[] = {
	{ "temperature 1 (OpenAI's default)", { .temperature = 1, .top_p = 1 } },
	{ "temperature 0.7", { .temperature = 0.7f, .top_p = 1 } },
	{ "top-p 0.9", { .temperature = 1, .top_p = 0.9f } },
	{ "top-p 0.95, temperature 0.6", { .temperature = 0.6f, .top_p = 0.95f } },
	{ "top-p 0.99999", { .temperature = 1, .top_p = 0.99999f } },
	{ "min-p 0.05", { .temperature = 1, .top_p = 1, .min_p = 0.05f } },
	{ "top-k 40, top-p 0.95, min-p 0.05 (ingot run)",
	  { .temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f } },
	{ "top-k 20, top-p 0.8, temperature 0.7",
	  { .temperature = 0.7f, .top_k = 20, .top_p = 0.8f } },
};

static void synthetic_row(float *l, int shape)
{
	uint64_t r = 0x9e3779b97f4a7c15ull * (uint64_t)(shape + 1);
	for (int64_t i = 0; i < VOCAB; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		const float u = (float)(r >> 40) / (float)(1 << 24);
		l[i] = shape == 1 ? 4.0f * u : -6.0f - 12.0f * u;
		if (shape == 2 && i % 50 != 7)
			l[i] = -INFINITY;
	}
	for (int i = 0; i < 40 && shape != 1; i++)
		l[(i * 7919) % VOCAB] = 9.0f - 0.25f * (float)i;
}

static int cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Best and median of t[0..n). */
static void best_median(double *t, int n, double *best, double *median)
{
	qsort(t, (size_t)n, sizeof *t, cmp_double);
	*best = t[0];
	*median = t[n / 2];
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	int rounds = 20;
	static const struct option opts[] = { { "logits", required_argument, NULL, 'l' },
					      { "rounds", required_argument, NULL, 'r' },
					      { NULL, 0, NULL, 0 } };
	for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		if (c == 'l') {
			path = optarg;
		} else if (c == 'r' && atoi(optarg) >= 1 && atoi(optarg) <= MAX_ROUNDS) {
			rounds = atoi(optarg);
		} else {
			fprintf(stderr, "usage: sample_bench [--logits FILE] [--rounds 1..%d]\n",
				MAX_ROUNDS);
			return 2;
		}
	}
	float *rows = NULL;
	int n_rows = 0;
	if (path) {
		FILE *f = fopen(path, "rb");
		if (!f) {
			perror(path);
			return 1;
		}
		fseek(f, 0, SEEK_END);
		long bytes = ftell(f);
		fseek(f, 0, SEEK_SET);
		n_rows = (int)(bytes / (long)(VOCAB * sizeof(float)));
		rows = malloc((size_t)n_rows * VOCAB * sizeof *rows);
		if (n_rows < 1 || !rows ||
		    fread(rows, VOCAB * sizeof *rows, (size_t)n_rows, f) != (size_t)n_rows) {
			fprintf(stderr, "%s: no whole row of %d float32 logits\n", path, VOCAB);
			return 1;
		}
		fclose(f);
	} else {
		n_rows = 3;
		rows = malloc((size_t)n_rows * VOCAB * sizeof *rows);
		if (!rows)
			return 1;
		for (int s = 0; s < n_rows; s++)
			synthetic_row(rows + (size_t)s * VOCAB, s);
	}
	float *row = malloc(VOCAB * sizeof *row);
	double t[MAX_ROUNDS];
	if (!row)
		return 1;
	printf("sample_bench: %d row%s of %d logits (%s), %d rounds; ms per row, best / median\n",
	       n_rows, n_rows == 1 ? "" : "s", VOCAB, path ? path : "synthetic", rounds);
	for (size_t k = 0; k < sizeof settings / sizeof *settings; k++) {
		struct sample_params p = settings[k].p;
		p.repeat_penalty = 1;
		struct sampler *s;
		ing_err err = { 0 };
		if (sampler_create(&p, VOCAB, &s, &err)) {
			fprintf(stderr, "sampler_create: %s\n", err.msg);
			return 1;
		}
		double best = 0, median = 0;
		for (int i = 0; i < n_rows; i++) {
			for (int r = 0; r < rounds; r++) {
				memcpy(row, rows + (size_t)i * VOCAB, VOCAB * sizeof *row);
				const double t0 = clock_now_s();
				sampler_sample(s, row);
				t[r] = clock_now_s() - t0;
			}
			double b, m;
			best_median(t, rounds, &b, &m);
			best += b / n_rows;
			median += m / n_rows;
		}
		printf("  %-48s %7.3f / %7.3f\n", settings[k].name, best * 1e3, median * 1e3);
		sampler_free(s);
	}
	double best = 0, median = 0;
	for (int i = 0; i < n_rows; i++) {
		for (int r = 0; r < rounds; r++) {
			const double t0 = clock_now_s();
			volatile float lse = ops_logsumexp(rows + (size_t)i * VOCAB, VOCAB);
			(void)lse;
			t[r] = clock_now_s() - t0;
		}
		double b, m;
		best_median(t, rounds, &b, &m);
		best += b / n_rows;
		median += m / n_rows;
	}
	printf("  %-48s %7.3f / %7.3f\n", "log-sum-exp (logprobs)", best * 1e3, median * 1e3);
	free(row);
	free(rows);
	return 0;
}
