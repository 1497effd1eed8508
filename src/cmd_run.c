/* cmd_run.c — `ingot run`: generate text from a prompt.
 *
 * stdout carries only the generated text (or ids with --ids); the summary
 * (prompt tokens and speed, generated tokens and speed, stop reason) goes to
 * stderr. A grammar (--grammar / --json-schema / --regex, llama.cpp's
 * names where it has them) constrains the output as the server's
 * response_format does. */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "forward.h"
#include "generate.h"
#include "grammar.h"
#include "mem.h"
#include "model.h"
#include "pool.h"
#include "runner.h"
#include "sample.h"
#include "spec.h"
#include "spec_draft.h"
#include "tokenizer.h"

struct run_opts {
	const char *model, *prompt, *prompt_file, *runner, *spec, *draft_model;
	/* at most one constraint: GBNF, a JSON schema or a regular expression,
	 * given inline or (the first two) in a file */
	const char *grammar, *grammar_file, *json_schema, *json_schema_file, *regex;
	int64_t n_predict, n_ctx, batch;
	int threads, spec_max;
	int chat, ids, ignore_eos, no_bos;
	bool random_seed; /* --seed -1 (llama.cpp's way of asking for one) */
	enum qtype kv_type;
	struct sample_params sp;
};

/* f: stdout for --help, else stderr; returns 2, the usage error's status */
static int usage(FILE *f)
{
	fprintf(f,
		"usage: ingot run [options]\n"
		"  -m, --model FILE        GGUF model (default: the pulled default model)\n"
		"  -p, --prompt TEXT       prompt text\n"
		"  -f, --file FILE         read the prompt from FILE\n"
		"  -n, --n-predict N       tokens to generate (default 128; -1 = until EOS)\n"
		"      --chat              wrap the prompt in the model's chat turn format\n"
		"      --ids               print generated token ids instead of text\n"
		"      --temp T            temperature (default 0.8; 0 = greedy)\n"
		"      --top-k K           (default 40; 0 = off)\n"
		"      --top-p P           (default 0.95; 1 = off)\n"
		"      --min-p P           (default 0.05; 0 = off)\n"
		"      --repeat-penalty R  (default 1 = off)\n"
		"      --repeat-last-n N   penalty window (default 64)\n"
		"      --presence-penalty P, --frequency-penalty P   (default 0)\n"
		"      --seed S            RNG seed (default 0; -1: a random one, printed)\n"
		"      --ctx N             context length (default: the model's, capped by memory)\n"
		"      --batch N           prefill chunk size (default 256)\n"
		"      --kv-cache-dtype f16|f32|q8_0|auto   KV cache element type (default f16)\n"
		"  -t, --threads N         compute threads (default: physical cores)\n"
		"      --runner mega|graph schedule: megakernel (default) or one dispatch per op\n"
		"      --ignore-eos        keep generating past end-of-sequence tokens\n"
		"      --spec ngram|suffix|draft   speculative decoding (output unchanged): prompt lookup,\n"
		"                          suffix tries, or a draft model sharing the vocabulary\n"
		"      --draft-model FILE  the draft model for --spec draft\n"
		"      --spec-max N        longest draft per step (default 16, max %d)\n"
		"      --grammar GBNF      constrain the output to a GBNF grammar (rule root)\n"
		"      --grammar-file FILE ... read from FILE\n"
		"  -j, --json-schema JSON  constrain the output to JSON values of a JSON schema\n"
		"      --json-schema-file FILE   ... read from FILE\n"
		"      --regex RE          constrain the output to match a regular expression\n",
		SPEC_MAX_K);
	return 2;
}

static int parse_num(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !isfinite(v) || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

enum { O_CHAT = 256, O_IDS, O_TEMP, O_TOPK, O_TOPP, O_MINP, O_REP, O_REPN, O_PRES, O_FREQ,
       O_SEED, O_CTX, O_BATCH, O_RUNNER, O_IGNORE_EOS, O_SPEC, O_SPEC_MAX, O_DRAFT,
       O_KV_DTYPE, O_GRAMMAR, O_GRAMMAR_FILE, O_SCHEMA_FILE, O_REGEX };

static const struct option run_options[] = {
	{ "model", 1, 0, 'm' }, { "prompt", 1, 0, 'p' }, { "file", 1, 0, 'f' },
	{ "n-predict", 1, 0, 'n' }, { "threads", 1, 0, 't' }, { "chat", 0, 0, O_CHAT },
	{ "ids", 0, 0, O_IDS }, { "temp", 1, 0, O_TEMP }, { "top-k", 1, 0, O_TOPK },
	{ "top-p", 1, 0, O_TOPP }, { "min-p", 1, 0, O_MINP },
	{ "repeat-penalty", 1, 0, O_REP }, { "repeat-last-n", 1, 0, O_REPN },
	{ "presence-penalty", 1, 0, O_PRES }, { "frequency-penalty", 1, 0, O_FREQ },
	{ "seed", 1, 0, O_SEED }, { "ctx", 1, 0, O_CTX }, { "batch", 1, 0, O_BATCH },
	{ "runner", 1, 0, O_RUNNER }, { "ignore-eos", 0, 0, O_IGNORE_EOS },
	{ "spec", 1, 0, O_SPEC }, { "spec-max", 1, 0, O_SPEC_MAX },
	{ "draft-model", 1, 0, O_DRAFT }, { "kv-cache-dtype", 1, 0, O_KV_DTYPE },
	{ "grammar", 1, 0, O_GRAMMAR }, { "grammar-file", 1, 0, O_GRAMMAR_FILE },
	{ "json-schema", 1, 0, 'j' }, { "json-schema-file", 1, 0, O_SCHEMA_FILE },
	{ "regex", 1, 0, O_REGEX }, { 0 }
};

static int parse_opt(struct run_opts *o, int opt, const char *arg)
{
	double v;
	switch (opt) {
	case 'm': o->model = arg; return 0;
	case 'p': o->prompt = arg; return 0;
	case 'f': o->prompt_file = arg; return 0;
	case O_CHAT: o->chat = 1; return 0;
	case O_IDS: o->ids = 1; return 0;
	case O_IGNORE_EOS: o->ignore_eos = 1; return 0;
	case O_RUNNER: o->runner = arg; return 0;
	case O_SPEC: o->spec = arg; return 0;
	case O_DRAFT: o->draft_model = arg; return 0;
	case O_GRAMMAR: o->grammar = arg; return 0;
	case O_GRAMMAR_FILE: o->grammar_file = arg; return 0;
	case 'j': o->json_schema = arg; return 0;
	case O_SCHEMA_FILE: o->json_schema_file = arg; return 0;
	case O_REGEX: o->regex = arg; return 0;
	case O_KV_DTYPE:
		if (!fwd_kv_type_parse(arg, &o->kv_type))
			return 0;
		fprintf(stderr, "ingot run: --kv-cache-dtype takes f16, f32, q8_0 or auto, not '%s'\n",
			arg);
		return -1;
	}
	if (opt == 'n' && !parse_num(arg, -1, 1e9, &v)) o->n_predict = (int64_t)v;
	else if (opt == 't' && !parse_num(arg, 1, 1024, &v)) o->threads = (int)v;
	else if (opt == O_CTX && !parse_num(arg, 1, 1 << 24, &v)) o->n_ctx = (int64_t)v;
	else if (opt == O_BATCH && !parse_num(arg, 1, 512, &v)) o->batch = (int64_t)v;
	else if (opt == O_SPEC_MAX && !parse_num(arg, 1, SPEC_MAX_K, &v)) o->spec_max = (int)v;
	else if (opt == O_TEMP && !parse_num(arg, 0, 1e6, &v)) o->sp.temperature = (float)v;
	else if (opt == O_TOPK && !parse_num(arg, 0, 1e9, &v)) o->sp.top_k = (int32_t)v;
	else if (opt == O_TOPP && !parse_num(arg, 0, 1, &v)) o->sp.top_p = (float)v;
	else if (opt == O_MINP && !parse_num(arg, 0, 1, &v)) o->sp.min_p = (float)v;
	else if (opt == O_REP && !parse_num(arg, 0, 1e6, &v)) o->sp.repeat_penalty = (float)v;
	else if (opt == O_REPN && !parse_num(arg, 0, 1 << 20, &v)) o->sp.penalty_last_n = (int32_t)v;
	else if (opt == O_PRES && !parse_num(arg, -2, 2, &v)) o->sp.presence_penalty = (float)v;
	else if (opt == O_FREQ && !parse_num(arg, -2, 2, &v)) o->sp.frequency_penalty = (float)v;
	else if (opt == O_SEED && !strcmp(arg, "-1")) o->random_seed = true;
	else if (opt == O_SEED && !parse_num(arg, 0, 18446744073709551615.0, &v)) {
		o->sp.seed = strtoull(arg, NULL, 10);
		o->random_seed = false;
	}
	else {
		cli_bad_value("ingot run", run_options, opt, arg, NULL);
		return -1;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct run_opts *o)
{
	*o = (struct run_opts){ .n_predict = 128, .batch = 256, .runner = "mega", .spec = "none",
				.spec_max = 16, .kv_type = FWD_KV_DEFAULT,
				.sp = sample_params_default() };
	int opt;
	while ((opt = getopt_long(argc, argv, "m:p:f:n:t:j:", run_options, NULL)) != -1)
		if (opt == '?' || parse_opt(o, opt, optarg))
			return -1;
	if (optind != argc || (!o->prompt && !o->prompt_file) || (o->prompt && o->prompt_file)) {
		fprintf(stderr, "ingot run: give exactly one of -p TEXT or -f FILE\n");
		return -1;
	}
	if (o->random_seed) {
		o->sp.seed = sample_seed_random();
		fprintf(stderr, "seed:      %llu\n", (unsigned long long)o->sp.seed);
	}
	return 0;
}

/* ---- prompt construction ---- */

static int encode(const struct tokenizer *tk, const char *s, size_t n, unsigned flags,
		  struct token_ids *ids)
{
	ing_err err = { 0 };
	if (tokenizer_encode(tk, s, n, flags, ids, &err)) {
		fprintf(stderr, "ingot run: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* Chat turn formats by the control tokens a vocabulary has. The user's
 * text is always encoded without special-token parsing. */
static int encode_chat(const struct tokenizer *tk, const char *text, size_t n,
		       struct token_ids *ids)
{
	const char *pre, *post;
	if (tokenizer_find_token(tk, "<start_of_turn>") != TOKEN_NONE) {
		pre = "<start_of_turn>user\n";
		post = "<end_of_turn>\n<start_of_turn>model\n";
	} else if (tokenizer_find_token(tk, "<|im_start|>") != TOKEN_NONE) {
		pre = "<|im_start|>user\n";
		post = "<|im_end|>\n<|im_start|>assistant\n";
	} else if (tokenizer_find_token(tk, "<|start_header_id|>") != TOKEN_NONE) {
		pre = "<|start_header_id|>user<|end_header_id|>\n\n";
		post = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
	} else {
		pre = "[INST] ";
		post = " [/INST]";
	}
	unsigned sp = TOKENIZER_PARSE_SPECIAL;
	if (tokenizer_adds_bos(tk) && token_ids_push(ids, tokenizer_bos(tk)))
		return -1;
	return encode(tk, pre, strlen(pre), sp, ids) || encode(tk, text, n, 0, ids) ||
	       encode(tk, post, strlen(post), sp, ids) ? -1 : 0;
}

static int build_prompt(const struct run_opts *o, const struct tokenizer *tk,
			struct token_ids *ids)
{
	size_t n;
	char *owned = NULL;
	const char *text = o->prompt;
	if (o->prompt_file) {
		text = owned = cli_read_file(o->prompt_file, &n);
		if (!text) {
			fprintf(stderr, "ingot run: cannot read %s\n", o->prompt_file);
			return -1;
		}
	} else {
		n = strlen(text);
	}
	int rc = o->chat ? encode_chat(tk, text, n, ids)
			 : encode(tk, text, n, TOKENIZER_ADD_SPECIAL, ids);
	ing_free(owned);
	return rc;
}

/* ---- output ---- */

struct printer {
	struct tokenizer_stream ts;
	const struct tokenizer *tk;
	int ids;
	int64_t count;
};

static int print_token(void *ud, int32_t tok)
{
	struct printer *p = ud;
	if (p->ids) {
		printf(p->count++ ? " %d" : "%d", tok);
	} else if (!tokenizer_is_eog(p->tk, tok)) {
		const char *s;
		size_t n;
		ing_err err;
		if (tokenizer_stream_feed(&p->ts, tok, &s, &n, &err) == ING_OK)
			fwrite(s, 1, n, stdout);
	}
	fflush(stdout);
	return 0;
}

struct run_ctx {
	struct cli_session ses;
	struct sampler *s;
	struct spec_seq *spec;
	struct spec_draft *draft;
	struct grammar_vocab *gv;       /* with a constraint: the token trie ... */
	struct grammar_matcher *matcher; /* ... and the output's place in the grammar */
};

static void run_ctx_close(struct run_ctx *c)
{
	grammar_matcher_free(c->matcher);
	grammar_vocab_free(c->gv); /* before the session's tokenizer */
	spec_seq_free(c->spec);
	spec_draft_free(c->draft); /* before the session: it runs on its pool */
	sampler_free(c->s);
	cli_session_close(&c->ses);
}

static int run_ctx_open(struct run_ctx *c, const char *path, const struct run_opts *o, ing_err *err)
{
	int kind = runner_kind_parse(o->runner);
	if (kind < 0)
		return ing_err_set(err, ING_ERR_INVALID, "unknown runner '%s' (mega, graph)", o->runner);
	int method = spec_method_parse(o->spec);
	if (method < 0)
		return ing_err_set(err, ING_ERR_INVALID, "unknown --spec '%s' (none, ngram, suffix)",
				   o->spec);
	if ((method == SPEC_DRAFT) != (o->draft_model != NULL))
		return ing_err_set(err, ING_ERR_INVALID,
				   "--spec draft and --draft-model FILE go together");
	int rows = method == SPEC_NONE ? 1 : 1 + o->spec_max;
	struct fwd_config fc = { .max_batch = o->batch > rows ? o->batch : rows, .max_logits = rows,
				 .n_ctx = o->n_ctx, .n_seq = 1, .kv_type = o->kv_type };
	int rc = cli_session_open(&c->ses, path, &fc, o->threads, kind, "ingot run", err);
	if (rc == ING_OK)
		rc = sampler_create(&o->sp, c->ses.m->hp.n_vocab, &c->s, err);
	if (rc == ING_OK && method == SPEC_DRAFT) {
		char dpath[4096];
		if (cli_model_path(o->draft_model, dpath, sizeof dpath))
			return ing_err_set(err, ING_ERR_NOTFOUND, "no draft model");
		rc = spec_draft_create(dpath, c->ses.tk, c->ses.pool, (enum runner_kind)kind,
				       fwd_kv(c->ses.f)->n_ctx, 1, o->spec_max, &c->draft, err);
	} else if (rc == ING_OK && method != SPEC_NONE)
		rc = spec_seq_create((enum spec_method)method, o->spec_max, fwd_kv(c->ses.f)->n_ctx,
				     NULL, &c->spec, err);
	return rc;
}

/* Compiles the constraint the options name, if any, into c->matcher. */
static int constraint_open(struct run_ctx *c, const struct run_opts *o, ing_err *err)
{
	enum { GBNF, SCHEMA, REGEX };
	const struct { const char *arg, *opt; bool file; int kind; } given[] = {
		{ o->grammar, "--grammar", false, GBNF },
		{ o->grammar_file, "--grammar-file", true, GBNF },
		{ o->json_schema, "--json-schema", false, SCHEMA },
		{ o->json_schema_file, "--json-schema-file", true, SCHEMA },
		{ o->regex, "--regex", false, REGEX },
	};
	int pick = -1;
	for (int i = 0; i < (int)(sizeof given / sizeof *given); i++) {
		if (!given[i].arg)
			continue;
		if (pick >= 0)
			return ing_err_set(err, ING_ERR_INVALID, "%s and %s: give one constraint",
					   given[pick].opt, given[i].opt);
		pick = i;
	}
	if (pick < 0)
		return ING_OK;
	if (strcmp(o->spec, "none"))
		return ing_err_set(err, ING_ERR_INVALID, "%s cannot be combined with --spec "
				   "(constrained output is not drafted)", given[pick].opt);
	size_t len = strlen(given[pick].arg);
	char *owned = given[pick].file ? cli_read_file(given[pick].arg, &len) : NULL;
	if (given[pick].file && !owned)
		return ing_err_set(err, ING_ERR_IO, "%s: cannot read %s", given[pick].opt,
				   given[pick].arg);
	const char *text = owned ? owned : given[pick].arg;
	struct grammar *g = NULL;
	int kind = given[pick].kind;
	int rc = kind == GBNF ? grammar_from_gbnf(text, len, &g, err) :
		 kind == SCHEMA ? grammar_from_json_schema(text, len, &g, err) :
		 grammar_from_regex(text, len, &g, err);
	ing_free(owned);
	if (rc) {
		char msg[sizeof err->msg];
		snprintf(msg, sizeof msg, "%s", err->msg);
		return ing_err_set(err, rc, "%s: %s", given[pick].opt, msg);
	}
	rc = grammar_vocab_create(c->ses.tk, &c->gv, err);
	if (rc == ING_OK)
		rc = grammar_matcher_create(g, c->gv, &c->matcher, err);
	grammar_free(g); /* the matcher holds its own reference */
	return rc;
}

static void print_summary(const struct gen_stats *st)
{
	fprintf(stderr, "\nprompt:    %lld tokens, %.1f tok/s\n", (long long)st->n_prompt,
		st->t_prompt_s > 0 ? st->n_prompt / st->t_prompt_s : 0.0);
	int64_t steps = st->n_gen > 1 ? st->n_gen - 1 : 0;
	fprintf(stderr, "generated: %lld tokens, %.1f tok/s\n", (long long)st->n_gen,
		st->t_gen_s > 0 && steps ? steps / st->t_gen_s : 0.0);
	fprintf(stderr, "stop:      %s\n", gen_stop_name(st->stop));
	if (st->n_drafts > 0)
		fprintf(stderr, "spec:      %lld drafts, %lld drafted, %lld accepted, "
			"mean acceptance length %.2f\n", (long long)st->n_drafts,
			(long long)st->n_draft_tokens, (long long)st->n_accepted,
			1.0 + (double)st->n_accepted / (double)st->n_drafts);
}

int cmd_run(int argc, char **argv)
{
	if (cli_help_asked(argc, argv))
		return usage(stdout), 0;
	struct run_opts o;
	if (parse_args(argc, argv, &o))
		return usage(stderr);
	char path[4096];
	if (cli_model_path(o.model, path, sizeof path))
		return 1;
	ing_err err = { 0 };
	struct run_ctx c = { 0 };
	struct token_ids ids = { 0 };
	struct printer pr = { .ids = o.ids };
	int status = 1;
	if (run_ctx_open(&c, path, &o, &err) || constraint_open(&c, &o, &err) ||
	    tokenizer_stream_init(&pr.ts, c.ses.tk, 0, &err)) {
		fprintf(stderr, "ingot run: %s\n", err.msg);
		goto out;
	}
	pr.tk = c.ses.tk;
	if (build_prompt(&o, c.ses.tk, &ids))
		goto out;
	struct gen_config gc = { .n_predict = o.n_predict, .prefill_chunk = o.batch,
				 .ignore_eos = o.ignore_eos, .spec = c.spec, .draft = c.draft,
				 .spec_k = o.spec_max, .matcher = c.matcher };
	struct gen_stats st;
	if (generate(c.ses.r, c.ses.f, c.s, c.ses.tk, ids.ids, (int64_t)ids.n, &gc, print_token,
		     &pr, &st, &err)) {
		fflush(stdout);
		/* after partial output, the message on a line of its own */
		fprintf(stderr, "%singot run: %s\n", st.n_gen ? "\n" : "", err.msg);
		goto out;
	}
	const char *tail;
	size_t n;
	tokenizer_stream_flush(&pr.ts, &tail, &n);
	fwrite(tail, 1, n, stdout);
	printf("\n");
	fflush(stdout);
	print_summary(&st);
	status = 0;
out:
	tokenizer_stream_free(&pr.ts);
	token_ids_free(&ids);
	run_ctx_close(&c);
	return status;
}
