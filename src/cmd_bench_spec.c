/* cmd_bench_spec.c — `ingot bench spec`: what speculative decoding buys on
 * a workload, measured in one process on one model.
 *
 * For every prompt of bench/data/spec/WORKLOAD.jsonl it generates greedily
 * without and with the drafter (runs times each; tok/s is the median of
 * the per-run totals), checks that both produced the same tokens, and
 * reports the mean acceptance length (1 + accepted / drafts), acceptance
 * rate (accepted / drafted), acceptance per draft position (accepted at
 * position i / drafts), drafting time per step and the speedup. It also
 * measures T(k+1)/T(1): the time of one step verifying k draft tokens of
 * one sequence against a plain decode step, k = 0..spec-max, which is what
 * bounds the gain. --json prints one JSON object instead of the table. */
#include <cjson/cJSON.h>
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
#include "runner.h"
#include "sample.h"
#include "spec.h"
#include "tokenizer.h"

#define MAX_PROMPTS 64
#define T_REPS 7

struct bs_opts {
	const char *model, *workload, *data, *spec, *runner;
	int spec_max, runs, threads, json, max_tokens;
};

struct bs_prompt {
	struct token_ids ids;
	int max_tokens;
};

struct bs_result {
	double tps_plain, tps_spec, draft_ms_per_step, step_ms;
	int64_t n_gen, n_steps, n_drafts, n_draft_tokens, n_accepted;
	int64_t per_pos[SPEC_MAX_K];
	bool same;
	double t_ratio[SPEC_MAX_K + 1]; /* T(k+1)/T(1) */
};

/* f: stdout for --help, else stderr; returns 2, the usage error's status */
static int usage(FILE *f)
{
	fprintf(f,
		"usage: ingot bench spec [options]\n"
		"  -m, --model FILE         GGUF model (default: the pulled default model)\n"
		"  -w, --workload NAME      code-edit, summarize, agentic or chat (default code-edit)\n"
		"      --data DIR           workload directory (default bench/data/spec)\n"
		"      --spec ngram|suffix  drafter (default suffix)\n"
		"      --spec-max N         longest draft (default 16)\n"
		"  -n, --max-tokens N       override every prompt's max_tokens\n"
		"      --runs N             runs per prompt and mode (default 3)\n"
		"  -t, --threads N          compute threads (default: physical cores)\n"
		"      --runner mega|graph  (default mega)\n"
		"      --json               one JSON object on stdout\n");
	return 2;
}

static int parse_args(int argc, char **argv, struct bs_opts *o)
{
	static const struct option lo[] = {
		{ "model", 1, 0, 'm' }, { "workload", 1, 0, 'w' }, { "data", 1, 0, 'D' },
		{ "spec", 1, 0, 'S' }, { "spec-max", 1, 0, 'K' }, { "max-tokens", 1, 0, 'n' },
		{ "runs", 1, 0, 'R' }, { "threads", 1, 0, 't' }, { "runner", 1, 0, 'r' },
		{ "json", 0, 0, 'j' }, { 0 }
	};
	*o = (struct bs_opts){ .workload = "code-edit", .data = "bench/data/spec", .spec = "suffix",
			       .runner = "mega", .spec_max = 16, .runs = 3 };
	int opt;
	while ((opt = getopt_long(argc, argv, "m:w:n:t:", lo, NULL)) != -1) {
		char *end = NULL;
		long v = optarg ? strtol(optarg, &end, 10) : 0;
		bool num_ok = optarg && end != optarg && !*end;
		switch (opt) {
		case 'm': o->model = optarg; break;
		case 'w': o->workload = optarg; break;
		case 'D': o->data = optarg; break;
		case 'S': o->spec = optarg; break;
		case 'r': o->runner = optarg; break;
		case 'j': o->json = 1; break;
		case 'K':
			if (!num_ok || v < 1 || v > SPEC_MAX_K)
				goto bad;
			o->spec_max = (int)v;
			break;
		case 'n':
			if (!num_ok || v < 1 || v > 100000)
				goto bad;
			o->max_tokens = (int)v;
			break;
		case 'R':
			if (!num_ok || v < 1 || v > 50)
				goto bad;
			o->runs = (int)v;
			break;
		case 't':
			if (!num_ok || v < 1 || v > 1024)
				goto bad;
			o->threads = (int)v;
			break;
		default: return -1; /* getopt_long has said what */
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ingot bench spec: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
bad:
	cli_bad_value("ingot bench spec", lo, opt, optarg, NULL);
	return -1;
}

/* Reads WORKLOAD.jsonl: one {"prompt", "max_tokens"} per line. */
static int load_prompts(const struct bs_opts *o, const struct tokenizer *tk,
			struct bs_prompt *p, int *n, ing_err *err)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.jsonl", o->data, o->workload);
	size_t len;
	char *text = cli_read_file(path, &len);
	if (!text)
		return ing_err_set(err, ING_ERR_IO, "cannot read %s (workloads: code-edit, summarize, "
				   "agentic, chat; --data DIR)", path);
	*n = 0;
	int rc = ING_OK;
	for (char *line = text, *next; line && *line && !rc; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (!*line)
			continue;
		cJSON *j = cJSON_Parse(line);
		const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "prompt");
		const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "max_tokens");
		if (!cJSON_IsString(pr) || !cJSON_IsNumber(mt) || mt->valuedouble < 1 ||
		    *n == MAX_PROMPTS) {
			rc = ing_err_set(err, ING_ERR_FORMAT, "%s: bad line (want {\"prompt\": str, "
					 "\"max_tokens\": int}, at most %d lines)", path, MAX_PROMPTS);
		} else {
			p[*n].max_tokens = o->max_tokens ? o->max_tokens : (int)mt->valuedouble;
			rc = tokenizer_encode(tk, pr->valuestring, strlen(pr->valuestring),
					      TOKENIZER_ADD_SPECIAL, &p[*n].ids, err);
			(*n)++;
		}
		cJSON_Delete(j);
	}
	ing_free(text);
	if (!rc && *n == 0)
		rc = ing_err_set(err, ING_ERR_FORMAT, "%s: no prompts", path);
	return rc;
}

struct collect {
	int32_t *ids;
	int64_t n, cap;
};

static int collect_token(void *ud, int32_t tok)
{
	struct collect *c = ud;
	if (c->n < c->cap)
		c->ids[c->n++] = tok;
	return 0;
}

/* Generates every prompt once; sums stats into acc; out[] gets the ids. */
static int run_all(struct cli_session *s, const struct bs_prompt *p, int n, struct spec_seq *spec,
		   int k, struct collect *out, struct gen_stats *acc, double *gen_s, ing_err *err)
{
	struct sample_params sp = sample_params_default();
	sp.temperature = 0;
	memset(acc, 0, sizeof *acc);
	*gen_s = 0;
	for (int i = 0; i < n; i++) {
		struct sampler *smp;
		int rc = sampler_create(&sp, s->m->hp.n_vocab, &smp, err);
		if (rc)
			return rc;
		struct gen_config gc = { .n_predict = p[i].max_tokens, .prefill_chunk = 256,
					 .ignore_eos = true, .spec = spec, .spec_k = k };
		struct gen_stats st;
		out[i].n = 0;
		rc = generate(s->r, s->f, smp, s->tk, p[i].ids.ids, (int64_t)p[i].ids.n, &gc,
			      collect_token, &out[i], &st, err);
		sampler_free(smp);
		if (rc)
			return rc;
		*gen_s += st.t_gen_s;
		acc->n_gen += st.n_gen;
		acc->n_steps += st.n_steps;
		acc->n_drafts += st.n_drafts;
		acc->n_draft_tokens += st.n_draft_tokens;
		acc->n_accepted += st.n_accepted;
		acc->t_draft_s += st.t_draft_s;
		for (int j = 0; j < SPEC_MAX_K; j++)
			acc->accepted_per_pos[j] += st.accepted_per_pos[j];
	}
	return ING_OK;
}

/* T(k+1)/T(1): one sequence at position `at`, steps of 1 + k rows. */
static int measure_verify_cost(struct cli_session *s, const struct bs_prompt *p, int kmax,
			       double *ratio, ing_err *err)
{
	struct kv_cache *kv = fwd_kv(s->f);
	int64_t at = (int64_t)p->ids.n;
	kv_seq_truncate(kv, 0, 0);
	int32_t pos[512], seq[512] = { 0 };
	for (int64_t i0 = 0; i0 < at; i0 += 256) { /* prefill the prompt once */
		int64_t cnt = at - i0 < 256 ? at - i0 : 256;
		for (int64_t i = 0; i < cnt; i++)
			pos[i] = (int32_t)(i0 + i);
		struct fwd_batch b = { .n = cnt, .tokens = p->ids.ids + i0, .pos = pos, .seq = seq };
		int rc = runner_step(s->r, &b, err);
		if (rc)
			return rc;
	}
	double t1 = 0;
	for (int k = 0; k <= kmax; k++) {
		int32_t tok[SPEC_MAX_K + 1], rp[SPEC_MAX_K + 1];
		bool want[SPEC_MAX_K + 1];
		for (int i = 0; i <= k; i++) {
			tok[i] = p->ids.ids[(i + 1) % p->ids.n];
			rp[i] = (int32_t)(at + i);
			want[i] = true;
		}
		double t[T_REPS];
		for (int r = 0; r < T_REPS; r++) {
			kv_seq_truncate(kv, 0, at);
			struct fwd_batch b = { .n = k + 1, .tokens = tok, .pos = rp, .seq = seq,
					       .want_logits = want };
			double t0 = clock_now_s();
			int rc = runner_step(s->r, &b, err);
			if (rc)
				return rc;
			t[r] = clock_now_s() - t0;
		}
		double med = bench_median(t, T_REPS);
		if (k == 0)
			t1 = med;
		ratio[k] = med / t1;
	}
	kv_seq_truncate(kv, 0, 0);
	return ING_OK;
}

static int bench(struct cli_session *s, const struct bs_opts *o, struct spec_seq *spec,
		 const struct bs_prompt *p, int n, struct bs_result *res, ing_err *err)
{
	struct collect plain[MAX_PROMPTS], sped[MAX_PROMPTS];
	int rc = ING_OK;
	for (int i = 0; i < n; i++) {
		plain[i] = (struct collect){ ing_malloc_array((size_t)p[i].max_tokens, sizeof(int32_t)),
					     0, p[i].max_tokens };
		sped[i] = (struct collect){ ing_malloc_array((size_t)p[i].max_tokens, sizeof(int32_t)),
					    0, p[i].max_tokens };
		if (!plain[i].ids || !sped[i].ids)
			rc = ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	double tp[50], ts[50];
	struct gen_stats st_plain, st_spec;
	for (int r = 0; r < o->runs && !rc; r++) {
		double g;
		rc = run_all(s, p, n, NULL, 0, plain, &st_plain, &g, err);
		tp[r] = (double)st_plain.n_gen / g;
		if (!rc)
			rc = run_all(s, p, n, spec, o->spec_max, sped, &st_spec, &g, err);
		ts[r] = (double)st_spec.n_gen / g;
		res->step_ms = 1e3 * g / (double)(st_spec.n_steps ? st_spec.n_steps : 1);
	}
	if (!rc)
		rc = measure_verify_cost(s, &p[0], o->spec_max, res->t_ratio, err);
	if (!rc) {
		res->tps_plain = bench_median(tp, o->runs);
		res->tps_spec = bench_median(ts, o->runs);
		res->n_gen = st_spec.n_gen;
		res->n_steps = st_spec.n_steps;
		res->n_drafts = st_spec.n_drafts;
		res->n_draft_tokens = st_spec.n_draft_tokens;
		res->n_accepted = st_spec.n_accepted;
		memcpy(res->per_pos, st_spec.accepted_per_pos, sizeof res->per_pos);
		res->draft_ms_per_step = 1e3 * st_spec.t_draft_s /
					 (double)(st_spec.n_steps ? st_spec.n_steps : 1);
		res->same = true;
		for (int i = 0; i < n; i++)
			res->same &= plain[i].n == sped[i].n &&
				     !memcmp(plain[i].ids, sped[i].ids, (size_t)plain[i].n * sizeof(int32_t));
	}
	for (int i = 0; i < n; i++) {
		ing_free(plain[i].ids);
		ing_free(sped[i].ids);
	}
	return rc;
}

static void print_table(const struct bs_opts *o, const struct bs_result *r, int n_prompts)
{
	double acc_len = r->n_drafts ? 1.0 + (double)r->n_accepted / (double)r->n_drafts : 1.0;
	printf("workload %s: %d prompts, %lld tokens, drafter %s, spec-max %d, %d runs\n",
	       o->workload, n_prompts, (long long)r->n_gen, o->spec, o->spec_max, o->runs);
	printf("  decode tok/s        plain %.1f   speculative %.1f   speedup %.2fx\n",
	       r->tps_plain, r->tps_spec, r->tps_spec / r->tps_plain);
	printf("  mean acceptance length %.2f   acceptance rate %.1f%%   drafts %lld of %lld steps\n",
	       acc_len, r->n_draft_tokens ? 100.0 * r->n_accepted / r->n_draft_tokens : 0.0,
	       (long long)r->n_drafts, (long long)r->n_steps);
	printf("  drafting %.3f ms per step (%.2f%% of a %.2f ms step)\n", r->draft_ms_per_step,
	       100.0 * r->draft_ms_per_step / r->step_ms, r->step_ms);
	printf("  accepted per position:");
	for (int i = 0; i < o->spec_max; i++)
		printf(" %.2f", r->n_drafts ? (double)r->per_pos[i] / r->n_drafts : 0.0);
	printf("\n  T(k+1)/T(1):");
	for (int k = 0; k <= o->spec_max; k++)
		printf(" k=%d:%.2f", k, r->t_ratio[k]);
	printf("\n  output identical to plain decoding: %s\n", r->same ? "yes" : "NO");
}

static void print_json(const struct bs_opts *o, const struct bs_result *r, int n_prompts)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "workload", o->workload);
	cJSON_AddStringToObject(j, "spec", o->spec);
	cJSON_AddNumberToObject(j, "spec_max", o->spec_max);
	cJSON_AddNumberToObject(j, "prompts", n_prompts);
	cJSON_AddNumberToObject(j, "tokens", (double)r->n_gen);
	cJSON_AddNumberToObject(j, "decode_tok_s_plain", r->tps_plain);
	cJSON_AddNumberToObject(j, "decode_tok_s_spec", r->tps_spec);
	cJSON_AddNumberToObject(j, "speedup", r->tps_spec / r->tps_plain);
	cJSON_AddNumberToObject(j, "mean_acceptance_length",
				r->n_drafts ? 1.0 + (double)r->n_accepted / (double)r->n_drafts : 1.0);
	cJSON_AddNumberToObject(j, "acceptance_rate",
				r->n_draft_tokens ? (double)r->n_accepted / r->n_draft_tokens : 0.0);
	cJSON_AddNumberToObject(j, "drafts", (double)r->n_drafts);
	cJSON_AddNumberToObject(j, "steps", (double)r->n_steps);
	cJSON_AddNumberToObject(j, "draft_ms_per_step", r->draft_ms_per_step);
	cJSON_AddNumberToObject(j, "step_ms", r->step_ms);
	cJSON *pp = cJSON_AddArrayToObject(j, "accepted_per_position");
	cJSON *tr = cJSON_AddArrayToObject(j, "t_ratio");
	for (int i = 0; i < o->spec_max; i++)
		cJSON_AddItemToArray(pp, cJSON_CreateNumber(r->n_drafts ? (double)r->per_pos[i] /
									     r->n_drafts : 0.0));
	for (int k = 0; k <= o->spec_max; k++)
		cJSON_AddItemToArray(tr, cJSON_CreateNumber(r->t_ratio[k]));
	cJSON_AddBoolToObject(j, "identical_output", r->same);
	char *s = cJSON_PrintUnformatted(j);
	if (s)
		printf("%s\n", s);
	free(s);
	cJSON_Delete(j);
}

int cmd_bench_spec(int argc, char **argv)
{
	if (cli_help_asked(argc, argv))
		return usage(stdout), 0;
	struct bs_opts o;
	if (parse_args(argc, argv, &o))
		return usage(stderr);
	int method = spec_method_parse(o.spec);
	int kind = runner_kind_parse(o.runner);
	if ((method != SPEC_NGRAM && method != SPEC_SUFFIX) || kind < 0) {
		fprintf(stderr, "ingot bench spec: --spec must be ngram or suffix, --runner mega or graph\n");
		return 2;
	}
	char path[4096];
	if (cli_model_path(o.model, path, sizeof path))
		return 1;
	static struct bs_prompt p[MAX_PROMPTS];
	int n = 0, status = 1;
	ing_err err = { 0 };
	struct cli_session s = { 0 };
	struct spec_seq *spec = NULL;
	struct bs_result res = { 0 };
	/* the context: the longest prompt plus its output (below) */
	struct fwd_config fc = { .max_batch = 256, .max_logits = o.spec_max + 1, .n_ctx = 0,
				 .n_seq = 1, .kv_type = FWD_KV_DEFAULT };
	struct tokenizer *tk = NULL;
	if (cli_tokenizer_open(path, &tk))
		goto out;
	if (load_prompts(&o, tk, p, &n, &err))
		goto fail;
	for (int i = 0; i < n; i++)
		if ((int64_t)p[i].ids.n + p[i].max_tokens + 1 > fc.n_ctx)
			fc.n_ctx = (int64_t)p[i].ids.n + p[i].max_tokens + 1;
	/* and measure_verify_cost's steps of up to spec_max + 1 rows after the
	 * first prompt (more than its output when -n is small) */
	if (n > 0 && (int64_t)p[0].ids.n + o.spec_max + 1 > fc.n_ctx)
		fc.n_ctx = (int64_t)p[0].ids.n + o.spec_max + 1;
	if (cli_session_open(&s, path, &fc, o.threads, kind, "ingot bench spec", &err) ||
	    spec_seq_create((enum spec_method)method, o.spec_max, fc.n_ctx, NULL, &spec, &err) ||
	    bench(&s, &o, spec, p, n, &res, &err))
		goto fail;
	if (o.json)
		print_json(&o, &res, n);
	else
		print_table(&o, &res, n);
	status = res.same ? 0 : 1;
	goto out;
fail:
	fprintf(stderr, "ingot bench spec: %s\n", err.msg);
out:
	for (int i = 0; i < n; i++)
		token_ids_free(&p[i].ids);
	spec_seq_free(spec);
	cli_session_close(&s);
	tokenizer_close(tk);
	return status;
}
