/* test_runner.c — bit-identity of logits across schedules (default model).
 *
 * The two runners, any thread count, and any batch composition must give
 * the same logits bit for bit: runner_mega only reschedules the same units
 * of work, and speculative decoding relies on a row computed inside a batch
 * matching the same row computed alone. Checked here:
 *   1. graph vs mega, 1 and 2 threads: a 7-token prefill and 3 decode steps;
 *   2. a sequence's rows inside a 2-sequence batch vs that sequence alone;
 *   3. a prompt prefilled in one step vs in chunks of 3 vs token by token;
 *   4. the argmax the LM head finds (fwd_batch.argmax) equals ops_argmax of
 *      every logits row, and finding it leaves the logits unchanged;
 *   5. with argmax_only too, the same argmax, and no logits row written
 *      but for its first logit;
 *   6. an 80-token prefill (the megakernel's wide chunks) on both runners;
 * all with an F32, an F16 and a Q8_0 KV cache. Under a sanitizer (steps
 * 5-20x slower) the schedules of 1. and 4.-5. are dealt out among the KV
 * types instead, each run once: every schedule and every KV type still
 * runs under it, in a third of the time. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "forward.h"
#include "mem.h"
#include "model.h"
#include "ops.h"
#include "pool.h"
#include "runner.h"

static const int32_t prompt_a[7] = { 2, 818, 5279, 529, 7001, 563, 506 };
static const int32_t prompt_b[5] = { 2, 14946, 3324, 496, 990 };

struct rig {
	struct fwd *f;
	struct pool *pool;
	struct runner *r;
	int64_t V;
	bool argmax; /* steps ask the LM head for the argmax */
	bool argmax_only;     /* ... and for nothing else */
	int64_t found[16];    /* argmax_only: fwd_argmax of each row of the script */
	int n_found;
};

#define POISON 12345.0f /* what the logits rows hold before an argmax_only step */

static enum qtype kv_type = QTYPE_F32; /* of the rigs opened */
static int kv_index;                    /* its place in main's list of 3 */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* Whether schedule number i runs with this KV type: always, but under a
 * sanitizer only with one of the three. */
static bool schedule_runs(int i)
{
	return !SANITIZED || i % 3 == kv_index;
}

static int rig_open_sized(struct rig *g, struct model *m, enum runner_kind kind, int threads,
			  int n_seq, int max_batch)
{
	ing_err err = { 0 };
	struct fwd_config cfg = { .max_batch = max_batch, .max_logits = 16, .n_ctx = 4 * max_batch,
				  .n_seq = n_seq, .n_threads = threads, .kv_type = kv_type };
	memset(g, 0, sizeof *g);
	g->V = m->hp.n_vocab;
	if (fwd_create(m, &cfg, &g->f, &err) || pool_create(threads, 0, &g->pool, &err) ||
	    runner_create(kind, g->f, g->pool, &g->r, &err)) {
		CHECK(0, "rig: %s", err.msg);
		return -1;
	}
	return 0;
}

static int rig_open(struct rig *g, struct model *m, enum runner_kind kind, int threads, int n_seq)
{
	return rig_open_sized(g, m, kind, threads, n_seq, 16);
}

static void rig_close(struct rig *g)
{
	runner_destroy(g->r);
	pool_destroy(g->pool);
	fwd_destroy(g->f);
}

/* Runs rows (tokens[i], pos[i], seq[i]) as one step with logits for all
 * rows; copies them to out[n][V]. */
static void step(struct rig *g, int n, const int32_t *tok, const int32_t *pos, const int32_t *seq,
		 float *out)
{
	bool want[16];
	for (int i = 0; i < n; i++)
		want[i] = true;
	struct fwd_batch b = { .n = n, .tokens = tok, .pos = pos, .seq = seq, .want_logits = want,
			       .argmax = g->argmax || g->argmax_only, .argmax_only = g->argmax_only };
	int64_t n_out;
	float *lg = fwd_logits(g->f, &n_out);
	if (g->argmax_only)
		for (size_t i = 0; i < (size_t)n * (size_t)g->V; i++)
			lg[i] = POISON;
	ing_err err = { 0 };
	int rc = runner_step(g->r, &b, &err);
	CHECK(rc == ING_OK, "step: %s", err.msg);
	lg = fwd_logits(g->f, &n_out);
	memcpy(out, lg, (size_t)(n * g->V) * sizeof(float));
	if (g->argmax_only) {
		for (int64_t o = 0; o < n_out && g->n_found < 16; o++)
			g->found[g->n_found++] = fwd_argmax(g->f, o);
		return;
	}
	for (int64_t o = 0; o < n_out; o++)
		CHECK(fwd_argmax(g->f, o) == ops_argmax(lg + o * g->V, g->V),
		      "row %lld: fused argmax %lld, scan %lld", (long long)o,
		      (long long)fwd_argmax(g->f, o), (long long)ops_argmax(lg + o * g->V, g->V));
}

/* Prefill prompt_a in chunks of `chunk`, then 3 greedy-free decode steps of
 * fixed tokens; logits of every row into out[10][V]. */
static void run_script(struct rig *g, int chunk, float *out)
{
	int32_t seq[16] = { 0 }, pos[16];
	int done = 0;
	while (done < 7) {
		int n = 7 - done < chunk ? 7 - done : chunk;
		for (int i = 0; i < n; i++)
			pos[i] = done + i;
		step(g, n, prompt_a + done, pos, seq, out + (size_t)done * g->V);
		done += n;
	}
	const int32_t next[3] = { 5279, 529, 506 };
	for (int i = 0; i < 3; i++) {
		pos[0] = 7 + i;
		step(g, 1, &next[i], pos, seq, out + (size_t)(7 + i) * g->V);
	}
}

/* An argmax_only run of the script (got) against the reference's logits:
 * each row's fused argmax is the reference row's, and its logits row kept
 * the poison but for logit 0 (which fwd_argmax reads). */
static void check_argmax_only(const struct rig *g, const float *ref, const float *got,
			      const char *what)
{
	CHECK(g->n_found == 10, "%s: %d argmaxes found, not 10", what, g->n_found);
	int64_t written = 0, wrong = 0;
	for (int r = 0; r < g->n_found; r++) {
		const float *want = ref + (size_t)r * g->V, *row = got + (size_t)r * g->V;
		wrong += g->found[r] != ops_argmax(want, g->V);
		written += memcmp(&row[0], &want[0], sizeof(float)) != 0;
		for (int64_t i = 1; i < g->V; i++)
			written += row[i] != POISON;
	}
	CHECK(wrong == 0 && written == 0, "%s: %lld argmaxes wrong, %lld logits written or logit 0 wrong",
	      what, (long long)wrong, (long long)written);
}

static void test_schedules(struct model *m)
{
	const size_t sz = (size_t)10 * m->hp.n_vocab * sizeof(float);
	float *ref = malloc(sz), *got = malloc(sz);
	struct rig g;
	if (rig_open(&g, m, RUNNER_GRAPH, 1, 1) == 0) {
		run_script(&g, 7, ref);
		rig_close(&g);
	}
	/* the reference scans for no argmax; everything else finds it in the
	 * LM head (3 threads: three shares of the vocabulary to merge, which
	 * start inside a 16-row tile), with the logits and without them
	 * (argmax_only) */
	const enum runner_kind kinds[2] = { RUNNER_GRAPH, RUNNER_MEGA };
	int schedule = 0;
	for (int k = 0; k < 2; k++)
		for (int threads = 1; threads <= 3; threads++)
			for (int chunk = 1; chunk <= 7; chunk += 2)
				for (int only = 0; only < 2; only++) {
					if (!schedule_runs(schedule++) ||
					    rig_open(&g, m, kinds[k], threads, 1))
						continue;
					g.argmax = !only;
					g.argmax_only = only;
					run_script(&g, chunk, got);
					rig_close(&g);
					char what[128];
					snprintf(what, sizeof what, "%s KV, %s, %d threads, prefill chunks of %d%s",
						 qtype_traits(kv_type)->name, runner_kind_name(kinds[k]), threads,
						 chunk, only ? ", argmax_only" : "");
					if (only)
						check_argmax_only(&g, ref, got, what);
					else
						CHECK(memcmp(ref, got, sz) == 0, "%s: logits differ", what);
				}
	free(ref);
	free(got);
}

/* Sequence A alone vs interleaved with sequence B in the same steps. */
static void test_batch_rows(struct model *m, enum runner_kind kind)
{
	const int64_t V = m->hp.n_vocab;
	float *alone = malloc((size_t)7 * V * sizeof(float));
	float *mixed = malloc((size_t)12 * V * sizeof(float));
	struct rig g;
	int32_t pos[16], seq[16] = { 0 };
	for (int i = 0; i < 7; i++)
		pos[i] = i;
	if (rig_open(&g, m, kind, 2, 2) == 0) {
		step(&g, 7, prompt_a, pos, seq, alone);
		rig_close(&g);
	}
	/* one step: B0 A0 A1 B1 A2 ... interleaved rows of both sequences */
	int32_t tok[12], p2[12], s2[12], a_row[7];
	int na = 0, nb = 0, n = 0;
	while (na < 7 || nb < 5) {
		if (nb < 5 && (n % 2 == 0 || na >= 7)) {
			tok[n] = prompt_b[nb];
			p2[n] = nb++;
			s2[n] = 1;
		} else {
			a_row[na] = n;
			tok[n] = prompt_a[na];
			p2[n] = na++;
			s2[n] = 0;
		}
		n++;
	}
	if (rig_open(&g, m, kind, 2, 2) == 0) {
		step(&g, n, tok, p2, s2, mixed);
		rig_close(&g);
	}
	int same = 1;
	for (int i = 0; i < 7; i++)
		same &= memcmp(alone + (size_t)i * V, mixed + (size_t)a_row[i] * V,
			       (size_t)V * sizeof(float)) == 0;
	CHECK(same, "%s KV, %s: rows of a sequence inside a mixed batch differ from the sequence "
	      "alone", qtype_traits(kv_type)->name, runner_kind_name(kind));
	free(alone);
	free(mixed);
}

/* A prefill wider than the megakernel's MEGA_WIDE_TOKENS (64: its matrix
 * ops then cut in fewer, larger chunks), its last row's logits: mega on 2
 * and 3 threads against graph on 1. */
static void test_wide_prefill(struct model *m)
{
	enum { N = 80 };
	int32_t tok[N], pos[N], seq[N] = { 0 };
	bool want[N] = { false };
	for (int i = 0; i < N; i++)
		tok[i] = i == 0 ? 2 : 100 + (i * 7919) % 5000, pos[i] = i;
	want[N - 1] = true;
	const struct fwd_batch b = { .n = N, .tokens = tok, .pos = pos, .seq = seq, .want_logits = want };
	const size_t bytes = (size_t)m->hp.n_vocab * sizeof(float);
	float *ref = malloc(bytes);
	bool have_ref = false;
	if (!ref) {
		CHECK(0, "wide prefill: out of memory");
		return;
	}
	const struct { enum runner_kind kind; int threads; } runs[3] = {
		{ RUNNER_GRAPH, 1 }, { RUNNER_MEGA, 2 }, { RUNNER_MEGA, 3 }
	};
	for (int i = 0; i < 3; i++) {
		struct rig g;
		if (rig_open_sized(&g, m, runs[i].kind, runs[i].threads, 1, N))
			continue;
		ing_err err = { 0 };
		int rc = runner_step(g.r, &b, &err);
		CHECK(rc == ING_OK, "wide prefill: %s", err.msg);
		int64_t n_out;
		const float *lg = fwd_logits(g.f, &n_out);
		if (i == 0) {
			memcpy(ref, lg, bytes);
			have_ref = rc == ING_OK && n_out == 1;
		} else if (have_ref) {
			CHECK(n_out == 1 && memcmp(ref, lg, bytes) == 0,
			      "%s KV: %d-token prefill, mega on %d threads differs from graph",
			      qtype_traits(kv_type)->name, N, runs[i].threads);
		}
		rig_close(&g);
	}
	free(ref);
}

int main(void)
{
	const char *path = check_default_model();
	if (!path) {
		CHECK(0, "default model missing: run ./ingot pull");
		return check_summary("test_runner");
	}
	ing_err err = { 0 };
	struct model *m;
	if (model_open(path, &m, &err)) {
		CHECK(0, "model_open: %s", err.msg);
		return check_summary("test_runner");
	}
	size_t live = ing_mem_live();
	const enum qtype kv_types[3] = { QTYPE_F32, QTYPE_F16, QTYPE_Q8_0 };
	for (int i = 0; i < 3; i++) {
		kv_type = kv_types[i];
		kv_index = i;
		test_schedules(m);
		test_batch_rows(m, RUNNER_GRAPH);
		test_batch_rows(m, RUNNER_MEGA);
		test_wide_prefill(m);
	}
	CHECK(ing_mem_live() == live, "leak: %zu bytes", ing_mem_live() - live);
	model_close(m);
	return check_summary("test_runner");
}
