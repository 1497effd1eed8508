/* cmd_bench.c — `ingot bench`: decode and prefill speed against the
 * machine's measured memory bandwidth, for each runner and batch size.
 *
 * Decode: B sequences, each prefilled with an 8-token prompt, then `gen`
 * steps of B rows (one token per sequence, greedy); tok/s = B*gen / time,
 * median (min, max) over `runs`, the runners' runs alternating (see
 * bench_decode). Weights are read once per step, so the
 * achieved bandwidth is weight_bytes * steps/s. With --depth N each
 * prompt is N + 8 tokens, prefilled once per runner (not timed; later
 * runs drop their decoded rows and decode again from there), so the steps
 * attend over N + 8 .. N + 8 + gen keys a sequence: a server's contexts,
 * where reading the KV cache costs as much as a large part of the weights
 * (llama-bench's -d). Prefill: one sequence of
 * `prompt` tokens in chunks of up to 512 rows, median of 3. The streaming
 * bandwidth is measured in the same run with the same threads.
 *
 * So is the int8 multiply-add peak (bench_int8_peak): batched decode and
 * prefill do many multiply-adds per weight byte and are bound by it, not
 * by the bandwidth. Their "% mac" is the weight multiply-adds done per
 * second (model_weight_macs per token; decode counts the LM head, prefill
 * does not) against that peak.
 *
 * --profile adds where the time goes: the same decode and prefill runs again
 * on each runner with the steps timed (runner_profile): the graph runner's
 * ops, which are separate dispatches, by kind; each runner's threads' work
 * by op kind and their idle time; from the graph runner's, the most that a
 * schedule without idle time could gain with the same work; and what the
 * kernels allow: the step with its matrix ops at their cache-resident
 * rates (matrix_hot_seconds) and no idle time, the ceiling a batched
 * decode bound by the multiplies can reach without faster kernels. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "clock.h"
#include "forward.h"
#include "generate.h"
#include "kv.h"
#include "mem.h"
#include "model.h"
#include "pool.h"
#include "quant.h"
#include "runner.h"

#define MAX_LIST 16

struct bench_opts {
	const char *model;
	int runners[MAX_LIST], n_runners;
	int batches[MAX_LIST], n_batches;
	int prompt, gen, runs, threads, json, prefetch, profile, depth;
	enum qtype kv_type;
};

struct bench_row {
	int runner, batch;
	double tok_s, tok_min, tok_max, ms_step, bw_gbs, bw_pct, prefill_tok_s;
	double mac_pct, prefill_mac_pct; /* of the int8 multiply-add peak */
};

/* What the bench measured of the machine and the model. */
struct bench_machine {
	double bw;           /* streaming read GB/s: median of the probes */
	double bw_min, bw_max;
	double peak;         /* int8 multiply-add G/s; 0: not measured */
	uint64_t wbytes;     /* weight bytes per decode token */
	uint64_t macs_token; /* weight multiply-adds per decode token */
	uint64_t macs_prompt; /* per prompt token (no LM head) */
};

/* f: stdout for --help, else stderr; returns 2, the usage error's status */
static int usage(FILE *f)
{
	fprintf(f,
		"usage: ingot bench [-m MODEL] [--batch 1,8,32] [--runner mega,graph] [--prompt 512]\n"
		"                   [--gen 32] [--runs 5] [-t THREADS] [--prefetch on|off] [--json]\n"
		"                   [--profile] [--kv-cache-dtype f16|f32|q8_0|auto] [--depth 0]\n"
		"  -m, --model FILE     GGUF model (default: the pulled default model)\n"
		"      --batch LIST     sequences decoded together, one figure each (default 1)\n"
		"      --runner LIST    mega, graph or both (default both, runs alternating)\n"
		"      --prompt N       prefill prompt length in tokens (default 512)\n"
		"      --gen N          decode steps a run (default 32)\n"
		"      --runs N         decode runs a figure; the median is reported (default 5)\n"
		"  -t, --threads N      compute threads (default: physical cores)\n"
		"      --prefetch on|off  the megakernel's weight prefetch while waiting (default on)\n"
		"      --json           one JSON object on stdout instead of the table\n"
		"      --profile        where each step's time goes: ops, work and idle per thread\n"
		"      --kv-cache-dtype T  KV cache element type (default f16)\n"
		"      --depth N        decode after N more prompt tokens (llama-bench's -d)\n"
		"  ingot bench serve --help, ingot bench spec --help: the other benchmarks\n");
	return 2;
}

static int runner_item(const char *tok, void *ctx)
{
	(void)ctx;
	return runner_kind_parse(tok);
}

enum { O_BATCH = 256, O_RUNNER, O_PROMPT, O_GEN, O_RUNS, O_JSON, O_PREFETCH, O_PROFILE,
       O_KV_DTYPE, O_DEPTH };

static const struct option bench_options[] = {
	{ "model", 1, 0, 'm' }, { "threads", 1, 0, 't' }, { "batch", 1, 0, O_BATCH },
	{ "runner", 1, 0, O_RUNNER }, { "prompt", 1, 0, O_PROMPT }, { "gen", 1, 0, O_GEN },
	{ "runs", 1, 0, O_RUNS }, { "json", 0, 0, O_JSON }, { "prefetch", 1, 0, O_PREFETCH },
	{ "profile", 0, 0, O_PROFILE }, { "kv-cache-dtype", 1, 0, O_KV_DTYPE },
	{ "depth", 1, 0, O_DEPTH }, { 0 }
};

/* One option's value into o: NULL, or what the value should have been. */
static const char *parse_opt(struct bench_opts *o, int opt, const char *arg)
{
	switch (opt) {
	case 'm': o->model = arg; return NULL;
	case 't': return cli_parse_int(arg, 1, 1024, &o->threads) ? "1 .. 1024" : NULL;
	case O_BATCH:
		o->n_batches = cli_parse_ints(arg, o->batches, MAX_LIST, 1, 256);
		return o->n_batches < 1 ? "a list of batch sizes 1 .. 256, e.g. 1,8,32" : NULL;
	case O_RUNNER:
		o->n_runners = cli_parse_list(arg, o->runners, MAX_LIST, runner_item, NULL);
		return o->n_runners < 1 ? "a list of mega, graph" : NULL;
	case O_PROMPT: return cli_parse_int(arg, 1, 8192, &o->prompt) ? "1 .. 8192 tokens" : NULL;
	case O_GEN: return cli_parse_int(arg, 1, 4096, &o->gen) ? "1 .. 4096 steps" : NULL;
	case O_RUNS: return cli_parse_int(arg, 1, 64, &o->runs) ? "1 .. 64" : NULL;
	case O_DEPTH: return cli_parse_int(arg, 0, 32768, &o->depth) ? "0 .. 32768 tokens" : NULL;
	case O_JSON: o->json = 1; return NULL;
	case O_PROFILE: o->profile = 1; return NULL;
	case O_KV_DTYPE:
		return fwd_kv_type_parse(arg, &o->kv_type) ? "f16, f32, q8_0 or auto" : NULL;
	case O_PREFETCH:
		o->prefetch = !strcmp(arg, "on");
		return strcmp(arg, "on") && strcmp(arg, "off") ? "on or off" : NULL;
	}
	return "?";
}

/* 0, or -1 with the reason on stderr. */
static int parse_args(int argc, char **argv, struct bench_opts *o)
{
	*o = (struct bench_opts){ .runners = { RUNNER_MEGA, RUNNER_GRAPH }, .n_runners = 2,
				  .batches = { 1 }, .n_batches = 1, .prompt = 512, .gen = 32,
				  .runs = 5, .prefetch = 1, .kv_type = FWD_KV_DEFAULT };
	int opt;
	while ((opt = getopt_long(argc, argv, "m:t:", bench_options, NULL)) != -1) {
		if (opt == '?') /* getopt_long has said what */
			return -1;
		const char *want = parse_opt(o, opt, optarg);
		if (want) {
			cli_bad_value("ingot bench", bench_options, opt, optarg, want);
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ingot bench: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (o->json && o->profile) { /* the profile's tables would follow the JSON on stdout */
		fprintf(stderr, "ingot bench: --profile prints tables, not JSON: give one of "
				"--json, --profile\n");
		return -1;
	}
	return 0;
}

#define MAX_PROBES 256

struct bench_ctx {
	struct model *m;
	struct pool *pool;
	int prefetch;
	struct bench_stream *stream;  /* bandwidth probe before each decode run, or NULL */
	double probes[MAX_PROBES];    /* GB/s of every probe so far */
	int n_probes;
	/* by runner kind: where its runners add their step times, or NULL */
	struct runner_profile *profile[RUNNER_MEGA + 1];
	/* --profile: where bench_decode puts the step's matrix_hot_seconds
	 * (graph runner), by op kind, or NULL */
	double *hot;
	ing_err err;
};

static int open_runner(struct bench_ctx *c, int kind, const struct fwd_config *cfg,
		       struct fwd **f, struct runner **r)
{
	*r = NULL;
	if (fwd_create(c->m, cfg, f, &c->err))
		return -1;
	if (runner_create((enum runner_kind)kind, *f, c->pool, r, &c->err)) {
		fwd_destroy(*f);
		return -1;
	}
	runner_mega_set_prefetch(*r, c->prefetch);
	runner_set_profile(*r, c->profile[kind]);
	return 0;
}

/* Prompt token i of the bench's sequences: the 8-token prompt, repeated. */
static int32_t prompt_token(int64_t i)
{
	static const int32_t prompt[8] = { 2, 818, 5279, 529, 7001, 563, 506, 5279 };
	return prompt[i % 8];
}

/* Prefills B sequences with P prompt tokens each, 8 of each sequence a
 * step (the runner's batch is 8 B rows), logits for the last. */
static int prefill_seqs(struct bench_ctx *c, struct fwd *f, struct runner *r, int B, int P)
{
	int32_t tok[256 * 8], pos[256 * 8], seq[256 * 8];
	bool want[256 * 8];
	struct kv_cache *kv = fwd_kv(f);
	for (int s = 0; s < B; s++)
		kv_seq_truncate(kv, s, 0);
	for (int p0 = 0; p0 < P; p0 += 8) {
		const int len = P - p0 < 8 ? P - p0 : 8;
		int n = 0;
		for (int s = 0; s < B; s++)
			for (int i = 0; i < len; i++, n++) {
				tok[n] = prompt_token(p0 + i);
				pos[n] = p0 + i;
				seq[n] = s;
				want[n] = p0 + i == P - 1;
			}
		struct fwd_batch b = { .n = n, .tokens = tok, .pos = pos, .seq = seq,
				       .want_logits = want, .argmax = true, .argmax_only = true };
		if (runner_step(r, &b, &c->err))
			return -1;
	}
	return 0;
}

/* One decode run: B sequences prefilled with P = depth + 8 tokens (every
 * run at depth 0; at depth > 0 only when `fill`, else each sequence cut
 * back to its prompt and its first token a prompt token), then `gen`
 * steps timed. Seconds or -1. */
static double decode_once(struct bench_ctx *c, struct fwd *f, struct runner *r, int kind, int B,
			  int gen, int depth, bool fill)
{
	const int P = depth + 8;
	int32_t tok[256], pos[256], seq[256];
	struct kv_cache *kv = fwd_kv(f);
	if (depth == 0 || fill) {
		runner_set_profile(r, NULL); /* --profile: decode steps alone */
		const int rc = prefill_seqs(c, f, r, B, P);
		runner_set_profile(r, c->profile[kind]);
		if (rc)
			return -1;
		for (int s = 0; s < B; s++)
			tok[s] = (int32_t)fwd_argmax(f, s);
	} else {
		for (int s = 0; s < B; s++) {
			kv_seq_truncate(kv, s, P);
			tok[s] = prompt_token(P);
		}
	}
	double t0 = clock_now_s();
	for (int g = 0; g < gen; g++) {
		for (int s = 0; s < B; s++) {
			if (g > 0)
				tok[s] = (int32_t)fwd_argmax(f, s);
			pos[s] = P + g;
			seq[s] = s;
		}
		struct fwd_batch d = { .n = B, .tokens = tok, .pos = pos, .seq = seq, .argmax = true,
				       .argmax_only = true };
		bool w[256];
		for (int s = 0; s < B; s++)
			w[s] = true;
		d.want_logits = w;
		if (runner_step(r, &d, &c->err))
			return -1;
	}
	return clock_now_s() - t0;
}

/* Decode steps of the warm-up run (pages in the weights): within the
 * context sized for `gen` steps. */
static int warmup_steps(const struct bench_opts *o)
{
	return o->gen < 4 ? o->gen : 4;
}

/* The streaming bandwidth now (c->stream's probe, noted in c->probes);
 * 0 without a probe. */
static double probe_bw(struct bench_ctx *c, int runs)
{
	double bw = bench_stream_measure(c->pool, c->stream, runs);
	if (bw > 0 && c->n_probes < MAX_PROBES)
		c->probes[c->n_probes++] = bw;
	return bw;
}

/* The weights of the slices a matrix op is timed in (matrix_hot_seconds):
 * from HOT_SLICE_MIN, doubling, to HOT_SLICE_MAX. Small slices stay in
 * any host's L2 with their activations and results (a gate_up slice reads
 * up's rows too: twice this) but pay each call's setup more often; on the
 * Emerald Rapids host the batch-32 step's matrix ops took 24.7-24.9 ms a
 * thread in 128 KB slices, 23.1-24.0 in 512 KB ones (two runs each), the
 * former below what the step itself did in one run. Each op takes the
 * size that ran it fastest: 22.6-22.8 ms (three runs). And each size is
 * timed HOT_REPEATS times, the fastest kept: a shared host slows down for
 * a while now and then (one run's LM head took 15.5 ms a thread where
 * others took 13.1-13.3). */
#define HOT_SLICE_MIN (128 * 1024)
#define HOT_SLICE_MAX (1024 * 1024)
#define HOT_REPEATS 2

/* Units [0, n_units) of op on this thread in slices of about slice_bytes
 * of weights (op's weights: bytes), 16 rows aligned, each slice once to
 * bring it in and once more timed: the timed seconds. */
static double op_hot_seconds(struct fwd *f, const struct fwd_op *op, size_t bytes,
			     size_t slice_bytes)
{
	int64_t slice = (int64_t)((double)slice_bytes * (double)op->n_units / (double)bytes);
	slice = slice < 16 ? 16 : slice / 16 * 16;
	double sec = 0;
	for (int64_t u0 = 0; u0 < op->n_units; u0 += slice) {
		const int64_t u1 = op->n_units - u0 < slice ? op->n_units : u0 + slice;
		fwd_op_exec(f, op, u0, u1, u1, 0);
		const double t0 = clock_now_s();
		fwd_op_exec(f, op, u0, u1, u1, 0);
		sec += clock_now_s() - t0;
	}
	return sec;
}

/* The matrix ops of f's plan (its last step's), each timed in cache on this
 * thread (op_hot_seconds) in the slice size and repeat that ran it fastest: into
 * sec[kind], seconds of the step's matrix work of each kind at the
 * kernels' cache-resident rates on one thread (0 for kinds without
 * weights). The slices run ops whose results add into the residual stream
 * again and again, so f's activations are garbage afterwards: call it
 * after the runs, with the pool idle (the slices use thread 0's scratch). */
static void matrix_hot_seconds(struct fwd *f, double sec[OP_KIND_COUNT])
{
	int n;
	const struct fwd_op *ops = fwd_ops(f, &n);
	memset(sec, 0, OP_KIND_COUNT * sizeof *sec);
	for (int i = 0; i < n; i++) {
		const void *base;
		size_t bytes; /* of a QKV op, its first matrix's: the slices come out larger */
		if (!fwd_op_weight_span(f, &ops[i], 0, ops[i].n_units, &base, &bytes) || bytes == 0)
			continue;
		double best = -1;
		for (int rep = 0; rep < HOT_REPEATS; rep++)
			for (size_t sb = HOT_SLICE_MIN; sb <= HOT_SLICE_MAX; sb *= 2) {
				const double t = op_hot_seconds(f, &ops[i], bytes, sb);
				best = best < 0 || t < best ? t : best;
			}
		sec[ops[i].kind] += best;
	}
}

/* Decode at batch B on each of the n runners in kinds, into rows[0..n).
 * Their runs are interleaved (run i of every runner before run i+1 of
 * any), so that a host whose speed drifts, as shared ones do by 2x within
 * a minute, treats them alike; and each run is weighed against the
 * bandwidth probed just before it (row bw_pct: the median of those
 * shares), not against one figure from the start. */
static int bench_decode(struct bench_ctx *c, const struct bench_opts *o, const int *kinds, int n,
			int B, struct bench_row *rows)
{
	struct fwd_config cfg = { .max_batch = 8 * B, .max_logits = B,
				  .n_ctx = o->depth + 8 + o->gen + 1,
				  .n_seq = B, .n_threads = pool_threads(c->pool),
				  .kv_type = o->kv_type };
	struct fwd *f[MAX_LIST];
	struct runner *r[MAX_LIST];
	double tps[MAX_LIST][64], share[MAX_LIST][64];
	const double wbytes = (double)model_weight_bytes(c->m);
	int opened = 0, rc = 0;
	while (opened < n && !rc)
		if (!(rc = open_runner(c, kinds[opened], &cfg, &f[opened], &r[opened])))
			opened++;
	for (int k = 0; k < opened && !rc; k++)
		rc = decode_once(c, f[k], r[k], kinds[k], B, warmup_steps(o), o->depth, true) < 0;
	for (int i = 0; i < o->runs && !rc; i++)
		for (int k = 0; k < n && !rc; k++) {
			const double bw = probe_bw(c, 1);
			const double sec = decode_once(c, f[k], r[k], kinds[k], B, o->gen, o->depth,
						       false);
			rc = sec < 0;
			tps[k][i] = (double)B * o->gen / sec;
			share[k][i] = bw > 0 ? 100.0 * wbytes * tps[k][i] / B / 1e9 / bw : 0;
		}
	for (int k = 0; k < opened; k++) {
		if (!rc && c->hot && kinds[k] == RUNNER_GRAPH)
			matrix_hot_seconds(f[k], c->hot);
		runner_destroy(r[k]);
		fwd_destroy(f[k]);
	}
	if (rc)
		return -1;
	for (int k = 0; k < n; k++) {
		struct bench_row *row = &rows[k];
		row->runner = kinds[k];
		row->batch = B;
		row->tok_min = row->tok_max = tps[k][0];
		for (int i = 1; i < o->runs; i++) {
			row->tok_min = tps[k][i] < row->tok_min ? tps[k][i] : row->tok_min;
			row->tok_max = tps[k][i] > row->tok_max ? tps[k][i] : row->tok_max;
		}
		row->tok_s = bench_median(tps[k], o->runs);
		row->ms_step = 1e3 * B / row->tok_s;
		row->bw_gbs = wbytes * row->tok_s / B / 1e9;
		row->bw_pct = bench_median(share[k], o->runs);
	}
	return 0;
}

static int bench_prefill(struct bench_ctx *c, const struct bench_opts *o, int kind, double *out)
{
	const int chunk = o->prompt < 512 ? o->prompt : 512;
	struct fwd_config cfg = { .max_batch = chunk, .max_logits = 1, .n_ctx = o->prompt,
				  .n_seq = 1, .n_threads = pool_threads(c->pool),
				  .kv_type = o->kv_type };
	struct fwd *f;
	struct runner *r;
	if (open_runner(c, kind, &cfg, &f, &r))
		return -1;
	int32_t *tok = ing_malloc_array((size_t)o->prompt, sizeof *tok);
	int32_t *pos = ing_malloc_array((size_t)o->prompt, sizeof *pos);
	int32_t *seq = ing_calloc((size_t)o->prompt, sizeof *seq);
	uint64_t x = 12345;
	for (int i = 0; tok && pos && i < o->prompt; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		tok[i] = i == 0 ? 2 : (int32_t)(1000 + (x >> 33) % 20000);
		pos[i] = i;
	}
	double t[3];
	int rc = !tok || !pos || !seq;
	for (int run = 0; run < 3 && !rc; run++) {
		kv_seq_truncate(fwd_kv(f), 0, 0);
		double t0 = clock_now_s();
		for (int i = 0; i < o->prompt && !rc; i += chunk) {
			int n = o->prompt - i < chunk ? o->prompt - i : chunk;
			struct fwd_batch b = { .n = n, .tokens = tok + i, .pos = pos + i, .seq = seq };
			rc = runner_step(r, &b, &c->err) != ING_OK;
		}
		t[run] = o->prompt / (clock_now_s() - t0);
	}
	ing_free(tok);
	ing_free(pos);
	ing_free(seq);
	if (!rc && c->hot && kind == RUNNER_GRAPH && o->prompt <= chunk) /* its plan: all of it */
		matrix_hot_seconds(f, c->hot);
	runner_destroy(r);
	fwd_destroy(f);
	if (!rc)
		*out = bench_median(t, 3);
	return rc ? -1 : 0;
}

static void print_table(const struct bench_opts *o, const struct bench_ctx *c,
			const struct bench_machine *mc, const struct bench_row *rows, int n)
{
	const double bw = mc->bw;
	const uint64_t wbytes = mc->wbytes;
	const int nth = pool_threads(c->pool);
	printf("ingot bench: %s (%s), %.1f MB of weights per token, %d thread%s, %s kernels "
	       "(AMX: %s)\n",
	       c->m->path, c->m->arch->name, wbytes / 1e6, nth, cli_plural(nth),
	       quant_isa_name(quant_kernels_best()->isa), quant_amx_status());
	printf("stream read bandwidth: %.1f GB/s (%d thread%s over %.0f MB; median of %d probes, "
	       "one before each decode run: %.1f .. %.1f)\n",
	       bw, nth, cli_plural(nth), wbytes / 1e6, c->n_probes, mc->bw_min, mc->bw_max);
	if (mc->peak > 0)
		printf("int8 multiply-add peak: %.1f G/s (%d thread%s, %s on registers); "
		       "%.1f M weight multiply-adds per decode token, %.1f M per prompt token\n",
		       mc->peak, nth, cli_plural(nth), bench_int8_peak_instr(), mc->macs_token / 1e6,
		       mc->macs_prompt / 1e6);
	printf("%-6s %5s %14s %17s %8s %7s %6s %6s %14s %6s\n", "runner", "batch", "decode tok/s",
	       "(min .. max)", "ms/step", "GB/s", "% bw", "% mac", "prefill tok/s", "% mac");
	for (int i = 0; i < n; i++) {
		char mac[16] = "     -", pmac[16] = "     -"; /* no peak measured (below AVX2) */
		if (mc->peak > 0) {
			snprintf(mac, sizeof mac, "%5.0f%%", rows[i].mac_pct);
			snprintf(pmac, sizeof pmac, "%5.0f%%", rows[i].prefill_mac_pct);
		}
		printf("%-6s %5d %14.1f %7.1f .. %7.1f %8.2f %7.1f %5.0f%% %s %14.1f %s\n",
		       runner_kind_name((enum runner_kind)rows[i].runner), rows[i].batch,
		       rows[i].tok_s, rows[i].tok_min, rows[i].tok_max, rows[i].ms_step,
		       rows[i].bw_gbs, rows[i].bw_pct, mac, rows[i].prefill_tok_s, pmac);
	}
	printf("(prefill: %d-token prompt; decode: %d steps x %d runs after %d prompt tokens, "
	       "median, the runners' runs alternating; %% bw: the median of each run against the "
	       "probe before it; prefetch %s)\n",
	       o->prompt, o->gen, o->runs, o->depth + 8, o->prefetch ? "on" : "off");
}

static void print_json(const struct bench_opts *o, const struct bench_ctx *c,
		       const struct bench_machine *mc, const struct bench_row *rows, int n)
{
	printf("{\"model\": \"%s\", \"threads\": %d, \"isa\": \"%s\", \"amx\": \"%s\", "
	       "\"prefetch\": %s, "
	       "\"stream_bw_gbs\": %.3f, \"stream_bw_min_gbs\": %.3f, \"stream_bw_max_gbs\": %.3f, "
	       "\"weight_bytes_per_token\": %llu, "
	       "\"int8_peak_gmacs\": %.3f, \"int8_peak_instr\": \"%s\", "
	       "\"weight_macs_per_token\": %llu, "
	       "\"weight_macs_per_prompt_token\": %llu, \"prompt\": %d, \"depth\": %d, "
	       "\"results\": [",
	       c->m->path, pool_threads(c->pool), quant_isa_name(quant_kernels_best()->isa),
	       quant_amx_status(), o->prefetch ? "true" : "false", mc->bw, mc->bw_min, mc->bw_max,
	       (unsigned long long)mc->wbytes, mc->peak, bench_int8_peak_instr(),
	       (unsigned long long)mc->macs_token, (unsigned long long)mc->macs_prompt, o->prompt,
	       o->depth);
	for (int i = 0; i < n; i++)
		printf("%s{\"runner\": \"%s\", \"batch\": %d, \"decode_tok_s\": %.3f, "
		       "\"decode_tok_s_min\": %.3f, \"decode_tok_s_max\": %.3f, \"ms_per_step\": %.4f, "
		       "\"bw_gbs\": %.3f, \"bw_pct\": %.2f, \"mac_pct\": %.2f, \"prefill_tok_s\": %.3f, "
		       "\"prefill_mac_pct\": %.2f}",
		       i ? ", " : "", runner_kind_name((enum runner_kind)rows[i].runner),
		       rows[i].batch, rows[i].tok_s, rows[i].tok_min, rows[i].tok_max,
		       rows[i].ms_step, rows[i].bw_gbs, rows[i].bw_pct, rows[i].mac_pct,
		       rows[i].prefill_tok_s, rows[i].prefill_mac_pct);
	printf("]}\n");
}

/* --profile's runs: decode at each batch size, the runners' runs
 * alternating as in the table (bench_decode), then each runner's prefill,
 * again with the steps timed (runner_profile): p[k][i] for kinds[k] at
 * batch i, p[k][n_batches] its prefill; per[k][i] the steps (decode) or
 * prompts (prefill) to divide by; hot[i] batch i's matrix_hot_seconds,
 * hot[n_batches] the prefill's (a prompt of one chunk; else zeros). */
static int profile_runs(struct bench_ctx *c, const struct bench_opts *o, const int *kinds, int n,
			struct runner_profile (*p)[MAX_LIST + 1], double (*per)[MAX_LIST + 1],
			double (*hot)[OP_KIND_COUNT])
{
	struct bench_row rows[MAX_LIST + 1];
	double prefill;
	int rc = 0;
	for (int i = 0; i <= o->n_batches && !rc; i++) {
		for (int k = 0; k < n; k++) {
			p[k][i] = (struct runner_profile){ 0 };
			c->profile[kinds[k]] = &p[k][i];
		}
		memset(hot[i], 0, sizeof hot[i]);
		c->hot = hot[i];
		if (i < o->n_batches)
			rc = bench_decode(c, o, kinds, n, o->batches[i], rows);
		for (int k = 0; k < n && !rc && i == o->n_batches; k++)
			rc = bench_prefill(c, o, kinds[k], &prefill);
		c->hot = NULL;
		for (int k = 0; k < n; k++) {
			c->profile[kinds[k]] = NULL;
			/* bench_prefill: 3 prompts */
			per[k][i] = i < o->n_batches ? (double)p[k][i].steps : 3;
		}
	}
	return rc ? -1 : 0;
}

/* A thread's work over p's steps: the threads' mean. */
static double profile_thread_work(const struct runner_profile *p)
{
	double w = 0;
	for (int k = 0; k < OP_KIND_COUNT; k++)
		w += p->work[k];
	return p->threads > 0 ? w / p->threads : 0;
}

/* The graph runner's ops, wall time of each kind's dispatches. */
static void print_op_walls(const struct bench_opts *o, const struct runner_profile *g,
			   const double *per)
{
	const int n_col = o->n_batches + 1;
	printf("\nwhere the time goes (graph runner; ms per decode step, ms per %d-token prefill):\n",
	       o->prompt);
	printf("%-11s", "op");
	for (int i = 0; i < o->n_batches; i++)
		printf(" %9s=%-3d %4s", "batch", o->batches[i], "");
	printf(" %14s %4s\n", "prefill", "");
	for (int k = 0; k <= OP_KIND_COUNT; k++) {
		printf("%-11s", k < OP_KIND_COUNT ? fwd_op_kind_name((enum op_kind)k) : "total");
		for (int i = 0; i < n_col; i++) {
			double s = k < OP_KIND_COUNT ? g[i].op_wall[k] : g[i].wall;
			const double share = g[i].wall > 0 ? 100 * s / g[i].wall : 0;
			printf(" %9.2f ms %3.0f%%", 1e3 * s / per[i], share);
		}
		printf("\n");
	}
}

/* Each runner's thread step: work by op kind, idle, the step. */
static void print_thread_steps(const struct bench_opts *o, const int *kinds, int n_kinds,
			       struct runner_profile (*p)[MAX_LIST + 1],
			       double (*per)[MAX_LIST + 1])
{
	const int n_col = o->n_batches + 1;
	printf("\na thread's step (ms per decode step, ms per prefill; the threads' mean): its "
	       "work in each op kind, and idle\n(dispatch, waits on the other threads, barriers; "
	       "of which `waits` on the megakernel's counters):\n");
	printf("%-11s", "op");
	for (int i = 0; i < n_col; i++)
		for (int ri = 0; ri < n_kinds; ri++) {
			char head[32];
			const char *name = runner_kind_name((enum runner_kind)kinds[ri]);
			if (i < o->n_batches)
				snprintf(head, sizeof head, "%s b=%d", name, o->batches[i]);
			else
				snprintf(head, sizeof head, "%s pp", name);
			printf(" %11s", head);
		}
	printf("\n");
	static const char *const tail[3] = { "idle", " waits", "step" };
	for (int k = 0; k < OP_KIND_COUNT + 3; k++) {
		printf("%-11s", k < OP_KIND_COUNT ? fwd_op_kind_name((enum op_kind)k) :
						    tail[k - OP_KIND_COUNT]);
		for (int i = 0; i < n_col; i++)
			for (int ri = 0; ri < n_kinds; ri++) {
				const struct runner_profile *q = &p[ri][i];
				const double nth = q->threads > 0 ? q->threads : 1;
				if (k == OP_KIND_COUNT + 1 && kinds[ri] != RUNNER_MEGA) {
					printf(" %11s", "-");
					continue;
				}
				double s = k < OP_KIND_COUNT ? q->work[k] / nth :
					   k == OP_KIND_COUNT ? q->wall - profile_thread_work(q) :
					   k == OP_KIND_COUNT + 1 ? q->wait / nth : q->wall;
				printf(" %11.2f", 1e3 * s / per[ri][i]);
			}
		printf("\n");
	}
}

/* What scheduling alone could still give at each batch size: the graph
 * runner's step with its threads' idle time removed and their work kept,
 * against its step as measured. */
static void print_idle_bound(const struct bench_opts *o, const int *kinds, int n_kinds, int g,
			     struct runner_profile (*p)[MAX_LIST + 1])
{
	printf("\n");
	for (int i = 0; i < o->n_batches; i++) {
		const struct runner_profile *q = &p[g][i];
		const double work = profile_thread_work(q);
		if (work <= 0 || q->wall <= 0)
			continue;
		printf("batch %d: the graph runner's threads idle %.1f%% of its step; with their "
		       "work and no idle time a\nschedule would be at most %.3fx as fast",
		       o->batches[i], 100 * (1 - work / q->wall), q->wall / work);
		for (int ri = 0; ri < n_kinds; ri++) {
			const struct runner_profile *m = &p[ri][i];
			if (ri == g || m->wall <= 0 || m->steps <= 0 || q->steps <= 0)
				continue;
			const double mwork = profile_thread_work(m);
			printf(" (%s: idle %.1f%%, %.3fx the graph runner in these runs)",
			       runner_kind_name((enum runner_kind)kinds[ri]),
			       100 * (1 - mwork / m->wall),
			       (q->wall / (double)q->steps) / (m->wall / (double)m->steps));
		}
		printf("\n");
	}
}

/* What the kernels themselves allow at each batch size and in the
 * prefill: the graph runner's step (or prompt) with its matrix ops at their
 * cache-resident rates (matrix_hot_seconds, split evenly over the threads),
 * the rest of its threads' work as measured and no idle time. */
static void print_kernel_bound(const struct bench_opts *o, const int *kinds, int n_kinds, int g,
			       struct runner_profile (*p)[MAX_LIST + 1],
			       double (*per)[MAX_LIST + 1], const double (*hot)[OP_KIND_COUNT])
{
	printf("\nwhat the kernels allow (the graph runner's matrix ops, slices of each timed "
	       "again in cache on one\nthread, split evenly over the threads):\n");
	for (int i = 0; i <= o->n_batches; i++) {
		const struct runner_profile *q = &p[g][i];
		if (per[g][i] <= 0 || q->threads <= 0)
			continue;
		/* tokens a step (decode) or a prompt (prefill) */
		const int tokens = i < o->n_batches ? o->batches[i] : o->prompt;
		const double steps = per[g][i], nth = q->threads;
		/* a thread's work a step in each op kind: cache-resident (matrix
		 * ops only, 0 for the rest) and in the step; their sums, and the
		 * rest of its work */
		double cached[OP_KIND_COUNT], in_step[OP_KIND_COUNT];
		double hot_ms = 0, step_ms = 0, other_ms = 0;
		for (int k = 0; k < OP_KIND_COUNT; k++) {
			cached[k] = 1e3 * hot[i][k] / nth;
			in_step[k] = 1e3 * q->work[k] / nth / steps;
			hot_ms += cached[k];
			*(cached[k] > 0 ? &step_ms : &other_ms) += in_step[k];
		}
		if (hot_ms <= 0)
			continue;
		if (i < o->n_batches)
			printf("batch %d: ", tokens);
		else
			printf("prefill: ");
		printf("matrix ops cache-resident %.2f ms a thread (in the step %.2f); with the "
		       "rest of the\nwork as measured and no idle time at most %.1f tok/s", hot_ms,
		       step_ms, tokens / (1e-3 * (hot_ms + other_ms)));
		for (int ri = 0; ri < n_kinds; ri++) {
			const struct runner_profile *m = &p[ri][i];
			if (m->wall > 0 && per[ri][i] > 0)
				printf("%s %s %.1f", ri == 0 ? " (these runs:" : ",",
				       runner_kind_name((enum runner_kind)kinds[ri]),
				       tokens * per[ri][i] / m->wall);
		}
		printf(")\n");
		/* "name cached / in_step" items, comma-separated, lines of 100 */
		int col = printf("  by op, ms a thread, cache-resident / in the step:");
		const char *sep = " ";
		for (int k = 0; k < OP_KIND_COUNT; k++) {
			if (cached[k] <= 0)
				continue;
			char item[64];
			const char *name = fwd_op_kind_name((enum op_kind)k);
			const int len = snprintf(item, sizeof item, "%s %.2f / %.2f", name,
						 cached[k], in_step[k]);
			if (col + (int)strlen(sep) + len > 100) {
				printf(",\n ");
				col = 1;
				sep = " ";
			}
			col += printf("%s%s", sep, item);
			sep = ", ";
		}
		printf("\n");
	}
}

/* Every runner's decode at each batch size and its prefill again, timed
 * (the graph runner's too where --runner leaves it out: the op walls and
 * the bound come from it): the graph runner's op walls (where the time
 * goes), each runner's thread step (work and idle), the bound on
 * scheduling and the kernels' own bound. */
static int print_profile(struct bench_ctx *c, const struct bench_opts *o)
{
	enum { N_KINDS = RUNNER_MEGA + 1 };
	struct runner_profile p[N_KINDS][MAX_LIST + 1];
	double per[N_KINDS][MAX_LIST + 1], hot[MAX_LIST + 1][OP_KIND_COUNT];
	int kinds[N_KINDS], n = 0, g = -1;
	for (int ri = 0; ri <= o->n_runners; ri++) { /* each kind once; graph last if not named */
		const int kind = ri < o->n_runners ? o->runners[ri] : RUNNER_GRAPH;
		bool seen = false;
		for (int k = 0; k < n; k++)
			seen |= kinds[k] == kind;
		if (seen)
			continue;
		g = kind == RUNNER_GRAPH ? n : g;
		kinds[n++] = kind;
	}
	if (profile_runs(c, o, kinds, n, p, per, hot))
		return -1;
	print_op_walls(o, p[g], per[g]);
	print_thread_steps(o, kinds, n, p, per);
	print_idle_bound(o, kinds, n, g, p);
	print_kernel_bound(o, kinds, n, g, p, per, hot);
	return 0;
}

int cmd_bench(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "serve"))
		return cmd_bench_serve(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "spec"))
		return cmd_bench_spec(argc - 1, argv + 1);
	if (cli_help_asked(argc, argv))
		return usage(stdout), 0;
	struct bench_opts o;
	if (parse_args(argc, argv, &o))
		return usage(stderr);
	char path[4096];
	if (cli_model_path(o.model, path, sizeof path))
		return 1;
	struct bench_ctx c = { .prefetch = o.prefetch };
	int threads = cli_threads(o.threads);
	if (model_open(path, &c.m, &c.err) || pool_create(threads, 1, &c.pool, &c.err)) {
		fprintf(stderr, "ingot bench: %s\n", c.err.msg);
		model_close(c.m);
		return 1;
	}
	struct bench_machine mc = { .wbytes = model_weight_bytes(c.m),
				    .macs_token = model_weight_macs(c.m, true),
				    .macs_prompt = model_weight_macs(c.m, false) };
	c.stream = bench_stream_create((size_t)mc.wbytes);
	bench_stream_measure(c.pool, c.stream, 1); /* warm-up, not a probe */
	probe_bw(&c, 5);
	mc.peak = bench_int8_peak(c.pool, 5);
	struct bench_row rows[MAX_LIST * MAX_LIST];
	double prefill[MAX_LIST];
	int status = 0;
	for (int ri = 0; ri < o.n_runners && !status; ri++)
		status = bench_prefill(&c, &o, o.runners[ri], &prefill[ri]) != 0;
	/* rows by runner, then batch; each batch's runners measured together */
	for (int bi = 0; bi < o.n_batches && !status; bi++) {
		struct bench_row got[MAX_LIST];
		if (bench_decode(&c, &o, o.runners, o.n_runners, o.batches[bi], got)) {
			status = 1;
			break;
		}
		for (int ri = 0; ri < o.n_runners; ri++) {
			struct bench_row *row = &rows[ri * o.n_batches + bi];
			*row = got[ri];
			row->prefill_tok_s = prefill[ri];
			if (mc.peak > 0) {
				row->mac_pct = 100.0 * (double)mc.macs_token * row->tok_s / 1e9 / mc.peak;
				row->prefill_mac_pct =
					100.0 * (double)mc.macs_prompt * prefill[ri] / 1e9 / mc.peak;
			}
		}
	}
	const int n = o.n_runners * o.n_batches;
	if (c.n_probes > 0) {
		double p[MAX_PROBES];
		memcpy(p, c.probes, (size_t)c.n_probes * sizeof *p);
		mc.bw = bench_median(p, c.n_probes); /* sorts p */
		mc.bw_min = p[0];
		mc.bw_max = p[c.n_probes - 1];
	}
	bench_stream_destroy(c.stream);
	c.stream = NULL; /* the profile's runs probe nothing */
	if (status)
		fprintf(stderr, "ingot bench: %s\n", c.err.msg);
	else if (o.json)
		print_json(&o, &c, &mc, rows, n);
	else
		print_table(&o, &c, &mc, rows, n);
	if (!status && o.profile && print_profile(&c, &o)) {
		fprintf(stderr, "ingot bench: %s\n", c.err.msg);
		status = 1;
	}
	pool_destroy(c.pool);
	model_close(c.m);
	return status;
}
