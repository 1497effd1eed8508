/* cmd_perplexity.c — `ingot perplexity`: perplexity of a model on a text.
 *
 * The method is llama.cpp's `llama-perplexity` default, so the two numbers
 * can be compared directly:
 *   - the whole text is tokenized once, with BOS when the vocabulary adds it
 *     (special-token text is not parsed);
 *   - it is cut into n_chunk = n_tok / C chunks of C tokens (the tail is
 *     dropped); the first token of each chunk is replaced by BOS when the
 *     vocabulary adds BOS;
 *   - each chunk is evaluated from an empty cache on sequence 0, in
 *     sub-batches of B rows with increasing positions;
 *   - only the second half is scored: the logits at positions
 *     first = C/2 .. C-2 predict the tokens at first+1 .. C-1, so each chunk
 *     contributes C - first - 1 negative log-likelihoods;
 *   - log-softmax as llama.cpp computes it: max in float, sum of
 *     expf(l - max) in double, log-probability in double;
 *   - PPL = exp(mean nll); the uncertainty is llama.cpp's
 *     PPL * sqrt((mean(nll^2) - mean(nll)^2) / (count - 1)).
 * Running estimates "[k]ppl," go to stderr as each chunk finishes; the final
 * "PPL = X +/- Y" line goes to stdout.
 *
 * Shapes: C context (tokens per chunk), B rows per sub-batch, V vocabulary.
 * Logits: at most B rows of V floats per step (fwd_config.max_logits = B). */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clock.h"
#include "forward.h"
#include "mem.h"
#include "model.h"
#include "pool.h"
#include "runner.h"
#include "tokenizer.h"

struct ppl_opts {
	const char *model, *file;
	int64_t n_ctx, batch, n_chunks; /* n_chunks: -1 = all */
	int threads;
	enum qtype kv_type;
};

/* f: stdout for --help, else stderr; returns 2, the usage error's status */
static int usage(FILE *f)
{
	fprintf(f,
		"usage: ingot perplexity [options] -f FILE\n"
		"  -m, --model FILE   GGUF model (default: the pulled default model)\n"
		"  -f, --file FILE    text to score (needs at least 2*ctx tokens)\n"
		"      --ctx N        tokens per chunk (default 512)\n"
		"      --batch N      rows per forward step (default 128)\n"
		"      --chunks N     score only the first N chunks (default: all)\n"
		"  -t, --threads N    compute threads (default: physical cores)\n"
		"      --kv-cache-dtype f16|f32|q8_0|auto   KV cache element type (default f16)\n"
		"Method and numbers match llama.cpp's llama-perplexity -c N.\n");
	return 2;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

enum { O_CTX = 256, O_BATCH, O_CHUNKS, O_KV_DTYPE };

static int parse_args(int argc, char **argv, struct ppl_opts *o)
{
	static const struct option lo[] = {
		{ "model", 1, 0, 'm' }, { "file", 1, 0, 'f' }, { "threads", 1, 0, 't' },
		{ "ctx", 1, 0, O_CTX }, { "batch", 1, 0, O_BATCH },
		{ "chunks", 1, 0, O_CHUNKS }, { "kv-cache-dtype", 1, 0, O_KV_DTYPE }, { 0 }
	};
	*o = (struct ppl_opts){ .n_ctx = 512, .batch = 128, .n_chunks = -1,
				.kv_type = FWD_KV_DEFAULT };
	int opt;
	long v;
	while ((opt = getopt_long(argc, argv, "m:f:t:", lo, NULL)) != -1) {
		if (opt == 'm') {
			o->model = optarg;
		} else if (opt == 'f') {
			o->file = optarg;
		} else if (opt == 't' && !parse_int(optarg, 1, 1024, &v)) {
			o->threads = (int)v;
		} else if (opt == O_CTX && !parse_int(optarg, 4, 1 << 20, &v)) {
			o->n_ctx = v;
		} else if (opt == O_BATCH && !parse_int(optarg, 1, 4096, &v)) {
			o->batch = v;
		} else if (opt == O_CHUNKS && !parse_int(optarg, 1, 1L << 30, &v)) {
			o->n_chunks = v;
		} else if (opt == O_KV_DTYPE && !fwd_kv_type_parse(optarg, &o->kv_type)) {
			continue;
		} else {
			if (opt != '?')
				cli_bad_value("ingot perplexity", lo, opt, optarg, NULL);
			return -1;
		}
	}
	if (optind != argc || !o->file) {
		fprintf(stderr, "ingot perplexity: give the text with -f FILE\n");
		return -1;
	}
	if (o->batch > o->n_ctx)
		o->batch = o->n_ctx;
	return 0;
}

/* ---- engine ---- */

struct ppl_ctx {
	struct cli_session ses;
	int32_t *tok, *pos, *seq; /* [B] one sub-batch */
	bool *want;               /* [B] */
	double *nll;              /* [B] per scored row, filled by the pool */
};

static void ppl_ctx_close(struct ppl_ctx *c)
{
	ing_free(c->nll);
	ing_free(c->want);
	ing_free(c->seq);
	ing_free(c->pos);
	ing_free(c->tok);
	cli_session_close(&c->ses);
}

static int ppl_ctx_open(struct ppl_ctx *c, const char *path, const struct ppl_opts *o,
			ing_err *err)
{
	struct fwd_config fc = { .max_batch = o->batch, .max_logits = o->batch,
				 .n_ctx = o->n_ctx, .n_seq = 1, .kv_type = o->kv_type };
	int rc = cli_session_open(&c->ses, path, &fc, o->threads, RUNNER_MEGA, "ingot perplexity",
				  err);
	if (rc)
		return rc;
	size_t b = (size_t)o->batch;
	c->tok = ing_malloc(b * sizeof *c->tok);
	c->pos = ing_malloc(b * sizeof *c->pos);
	c->seq = ing_calloc(b, sizeof *c->seq);
	c->want = ing_malloc(b * sizeof *c->want);
	c->nll = ing_malloc(b * sizeof *c->nll);
	if (!c->tok || !c->pos || !c->seq || !c->want || !c->nll)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	return ING_OK;
}

/* ---- scoring ---- */

/* -log softmax(logits)[tok] over V entries, as llama.cpp's log_softmax:
 * the maximum in float, the sum of expf(l - max) in double. */
static double neg_log_prob(const float *logits, int64_t V, int32_t tok)
{
	float max = logits[0];
	for (int64_t i = 1; i < V; i++)
		max = logits[i] > max ? logits[i] : max;
	double sum = 0.0;
	for (int64_t i = 0; i < V; i++)
		sum += expf(logits[i] - max);
	return -((double)logits[tok] - max - log(sum));
}

struct score_job {
	const float *logits;   /* [n][V] */
	const int32_t *target; /* [n] token each row predicts */
	double *nll;           /* [n] */
	int64_t n, V;
};

static void score_rows(void *ctx, int ith, int nth)
{
	struct score_job *j = ctx;
	long r0, r1;
	pool_split(j->n, ith, nth, &r0, &r1);
	for (long r = r0; r < r1; r++)
		j->nll[r] = neg_log_prob(j->logits + r * j->V, j->V, j->target[r]);
}

struct ppl_sums {
	double nll, nll2;
	int64_t count;
};

/* Evaluates chunk tokens [C] (tokens[0] already BOS where wanted) from an
 * empty cache and adds the nll of positions first+1 .. C-1 to s. */
static int eval_chunk(struct ppl_ctx *c, const int32_t *tokens, int64_t C, int64_t B,
		      struct ppl_sums *s, ing_err *err)
{
	const int64_t first = C / 2, V = c->ses.m->hp.n_vocab;
	kv_seq_truncate(fwd_kv(c->ses.f), 0, 0);
	for (int64_t p0 = 0; p0 < C; p0 += B) {
		int64_t n = C - p0 < B ? C - p0 : B;
		for (int64_t i = 0; i < n; i++) {
			int64_t p = p0 + i;
			c->tok[i] = tokens[p];
			c->pos[i] = (int32_t)p;
			/* the logits at C-1 would predict past the chunk */
			c->want[i] = p >= first && p < C - 1;
		}
		struct fwd_batch b = { .n = n, .tokens = c->tok, .pos = c->pos, .seq = c->seq,
				       .want_logits = c->want };
		int rc = runner_step(c->ses.r, &b, err);
		if (rc)
			return rc;
		int64_t n_out;
		float *logits = fwd_logits(c->ses.f, &n_out);
		if (n_out == 0)
			continue;
		int64_t p_first = p0 > first ? p0 : first; /* position of logits row 0 */
		struct score_job j = { .logits = logits, .target = tokens + p_first + 1,
				       .nll = c->nll, .n = n_out, .V = V };
		pool_run(c->ses.pool, score_rows, &j);
		for (int64_t r = 0; r < n_out; r++) {
			s->nll += c->nll[r];
			s->nll2 += c->nll[r] * c->nll[r];
		}
		s->count += n_out;
	}
	return ING_OK;
}

/* Tokenizes len bytes of text as llama.cpp does (BOS added as the
 * vocabulary asks, special-token text not parsed); prints the error. */
static int tokenize_text(const struct ppl_ctx *c, const char *text, size_t len,
			 struct token_ids *ids)
{
	ing_err err = { 0 };
	if (tokenizer_encode(c->ses.tk, text, len, TOKENIZER_ADD_SPECIAL, ids, &err)) {
		fprintf(stderr, "ingot perplexity: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* Scores every chunk, printing running estimates; returns 0 or -1. */
static int run_chunks(struct ppl_ctx *c, const struct ppl_opts *o, struct token_ids *ids,
		      struct ppl_sums *s)
{
	const int64_t C = o->n_ctx;
	int64_t n_chunk = (int64_t)ids->n / C;
	if (o->n_chunks > 0 && o->n_chunks < n_chunk)
		n_chunk = o->n_chunks;
	const bool add_bos = tokenizer_adds_bos(c->ses.tk);
	const int nth = pool_threads(c->ses.pool);
	fprintf(stderr, "perplexity: %zu tokens, %lld chunks of %lld, batch %lld, %d thread%s\n",
		ids->n, (long long)n_chunk, (long long)C, (long long)o->batch, nth, cli_plural(nth));
	double t0 = clock_now_s();
	for (int64_t k = 0; k < n_chunk; k++) {
		int32_t *chunk = ids->ids + k * C, saved = chunk[0];
		if (add_bos)
			chunk[0] = tokenizer_bos(c->ses.tk);
		ing_err err = { 0 };
		int rc = eval_chunk(c, chunk, C, o->batch, s, &err);
		chunk[0] = saved;
		if (rc) {
			fprintf(stderr, "\ningot perplexity: chunk %lld: %s\n", (long long)k + 1, err.msg);
			return -1;
		}
		fprintf(stderr, "[%lld]%.4f,", (long long)k + 1, exp(s->nll / (double)s->count));
		fflush(stderr);
	}
	double dt = clock_now_s() - t0;
	fprintf(stderr, "\nperplexity: %.2f s, %.1f tok/s\n", dt,
		dt > 0 ? (double)(n_chunk * C) / dt : 0.0);
	return 0;
}

static void print_result(const struct ppl_sums *s)
{
	double mean = s->nll / (double)s->count;
	double var = s->nll2 / (double)s->count - mean * mean;
	double ppl = exp(mean);
	if (var > 0 && s->count > 1)
		printf("PPL = %.4f +/- %.5f\n", ppl, sqrt(var / (double)(s->count - 1)) * ppl);
	else
		printf("PPL = %.4f +/- nan\n", ppl);
	fflush(stdout);
}

int cmd_perplexity(int argc, char **argv)
{
	if (cli_help_asked(argc, argv))
		return usage(stdout), 0;
	struct ppl_opts o;
	if (parse_args(argc, argv, &o))
		return usage(stderr);
	char path[4096];
	if (cli_model_path(o.model, path, sizeof path))
		return 1;
	ing_err err = { 0 };
	struct ppl_ctx c = { 0 };
	struct token_ids ids = { 0 };
	struct ppl_sums s = { 0 };
	char *text = NULL;
	int status = 1;
	size_t len;
	text = cli_read_file(o.file, &len);
	if (!text) {
		fprintf(stderr, "ingot perplexity: cannot read %s\n", o.file);
		goto out;
	}
	if (ppl_ctx_open(&c, path, &o, &err)) {
		fprintf(stderr, "ingot perplexity: %s\n", err.msg);
		goto out;
	}
	if (tokenize_text(&c, text, len, &ids))
		goto out;
	if ((int64_t)ids.n < 2 * o.n_ctx) {
		fprintf(stderr,
			"ingot perplexity: %s tokenizes to only %zu tokens; a context of %lld "
			"needs at least %lld\n", o.file, ids.n, (long long)o.n_ctx,
			(long long)(2 * o.n_ctx));
		goto out;
	}
	if (run_chunks(&c, &o, &ids, &s))
		goto out;
	print_result(&s);
	status = 0;
out:
	ing_free(text);
	token_ids_free(&ids);
	ppl_ctx_close(&c);
	return status;
}
