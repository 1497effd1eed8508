/* spec_draft.c — see spec_draft.h. */
#include "spec_draft.h"

#include <string.h>

#include "forward.h"
#include "gguf.h"
#include "kv.h"
#include "mem.h"
#include "model.h"
#include "spec.h"
#include "tokenizer.h"

#define DRAFT_CHUNK 256

struct spec_draft {
	struct model *m;
	struct fwd *f;
	struct runner *r;
	struct sampler *s;
	int64_t V, n_ctx, n, n_done; /* n tokens known; n_done were in the KV at the last proposal */
	int32_t drafted[SPEC_MAX_K]; /* the draft rows in the KV after n_done */
	int n_kv_draft;
	int32_t *tokens;             /* [n_ctx] */
	int k_max;
	bool sampling;
	float *q;                    /* [k_max * V] when sampling */
	float *p;                    /* [V] caller's scratch */
};

/* Token-for-token vocabulary equality (texts and count). */
static int vocab_check(const char *path, const struct tokenizer *target, ing_err *err)
{
	struct gguf *g;
	struct tokenizer *tk;
	int rc = gguf_open(path, &g, err);
	if (rc)
		return rc;
	rc = tokenizer_open(g, &tk, err);
	gguf_close(g);
	if (rc)
		return rc;
	int32_t n = tokenizer_n_vocab(tk);
	if (n != tokenizer_n_vocab(target))
		rc = ing_err_set(err, ING_ERR_UNSUPPORTED, "draft model: vocabulary of %d tokens, the "
				 "target has %d", n, tokenizer_n_vocab(target));
	for (int32_t i = 0; i < n && !rc; i++) {
		size_t la, lb;
		const char *a = tokenizer_token_text(tk, i, &la);
		const char *b = tokenizer_token_text(target, i, &lb);
		if (la != lb || memcmp(a, b, la))
			rc = ing_err_set(err, ING_ERR_UNSUPPORTED, "draft model: token %d differs from "
					 "the target's (the vocabularies must be the same)", i);
	}
	tokenizer_close(tk);
	return rc;
}

int spec_draft_create(const char *path, const struct tokenizer *target_tk, struct pool *pool,
		      enum runner_kind kind, int64_t n_ctx, int k_max,
		      const struct sample_params *sp, struct spec_draft **out, ing_err *err)
{
	*out = NULL;
	if (k_max < 1 || k_max > SPEC_MAX_K || n_ctx < 2)
		return ing_err_set(err, ING_ERR_RANGE, "draft model: bad draft length or context");
	int rc = vocab_check(path, target_tk, err);
	if (rc)
		return rc;
	struct spec_draft *d = ing_calloc(1, sizeof *d);
	if (!d)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	d->k_max = k_max;
	d->n_ctx = n_ctx;
	d->sampling = sp->temperature > 0;
	struct sample_params dp = *sp; /* no penalties; its own random stream */
	dp.repeat_penalty = 1.0f;
	dp.presence_penalty = dp.frequency_penalty = 0.0f;
	dp.seed = sp->seed ^ 0x5bd1e995u;
	struct fwd_config fc = { .max_batch = DRAFT_CHUNK, .max_logits = 1, .n_ctx = n_ctx,
				 .n_seq = 1, .n_threads = pool_threads(pool), .kv_type = QTYPE_F32 };
	if ((rc = model_open(path, &d->m, err)) || (rc = fwd_create(d->m, &fc, &d->f, err)) ||
	    (rc = runner_create(kind, d->f, pool, &d->r, err)) ||
	    (rc = sampler_create(&dp, d->m->hp.n_vocab, &d->s, err)))
		goto fail;
	ing_err_clear(err); /* fwd_create may leave a note */
	d->V = d->m->hp.n_vocab;
	d->tokens = ing_malloc_array((size_t)n_ctx, sizeof *d->tokens);
	d->p = ing_malloc_array((size_t)d->V, sizeof *d->p);
	if (d->sampling)
		d->q = ing_malloc_array((size_t)k_max * (size_t)d->V, sizeof *d->q);
	if (!d->tokens || !d->p || (d->sampling && !d->q)) {
		rc = ing_err_set(err, ING_ERR_NOMEM, "out of memory");
		goto fail;
	}
	*out = d;
	return ING_OK;
fail:
	spec_draft_free(d);
	return rc;
}

void spec_draft_free(struct spec_draft *d)
{
	if (!d)
		return;
	runner_destroy(d->r);
	fwd_destroy(d->f);
	model_close(d->m);
	sampler_free(d->s);
	ing_free(d->tokens);
	ing_free(d->q);
	ing_free(d->p);
	ing_free(d);
}

void spec_draft_reset(struct spec_draft *d)
{
	d->n = d->n_done = 0;
	d->n_kv_draft = 0;
	kv_seq_truncate(fwd_kv(d->f), 0, 0);
}

void spec_draft_append(struct spec_draft *d, const int32_t *tokens, int64_t n)
{
	for (int64_t i = 0; i < n && d->n < d->n_ctx; i++)
		d->tokens[d->n++] = tokens[i];
}

bool spec_draft_sampling(const struct spec_draft *d) { return d->sampling; }
float *spec_draft_p_scratch(struct spec_draft *d) { return d->p; }

const float *spec_draft_q(const struct spec_draft *d, int i)
{
	return d->q + (size_t)i * (size_t)d->V;
}

/* Runs the draft over tokens[from, to) (positions from..to-1). */
static int feed(struct spec_draft *d, const int32_t *tokens, int64_t from, int64_t to,
		ing_err *err)
{
	int32_t pos[DRAFT_CHUNK], seq[DRAFT_CHUNK] = { 0 };
	for (int64_t i0 = from; i0 < to; i0 += DRAFT_CHUNK) {
		int64_t cnt = to - i0 < DRAFT_CHUNK ? to - i0 : DRAFT_CHUNK;
		for (int64_t i = 0; i < cnt; i++)
			pos[i] = (int32_t)(i0 + i);
		struct fwd_batch b = { .n = cnt, .tokens = tokens + (i0 - from), .pos = pos,
				       .seq = seq };
		int rc = runner_step(d->r, &b, err);
		if (rc)
			return rc;
	}
	return ING_OK;
}

int spec_draft_propose(struct spec_draft *d, int k, int32_t *draft, int *n_out, ing_err *err)
{
	*n_out = 0;
	if (k > d->k_max)
		k = d->k_max;
	if (k > d->n_ctx - d->n)
		k = (int)(d->n_ctx - d->n);
	if (k <= 0 || d->n == 0)
		return ING_OK;
	/* the cache holds the sequence as of the last proposal plus that
	 * draft's first tokens: keep the part the sequence confirmed, and
	 * always recompute the last token (its logits propose the next) */
	struct kv_cache *kv = fwd_kv(d->f);
	int64_t common = d->n_done;
	for (int j = 0; j < d->n_kv_draft && common < d->n && d->tokens[common] == d->drafted[j]; j++)
		common++;
	if (common > d->n - 1)
		common = d->n - 1;
	kv_seq_truncate(kv, 0, common);
	int rc = feed(d, d->tokens + common, common, d->n, err);
	if (rc)
		return rc;
	d->n_done = d->n;
	d->n_kv_draft = 0;
	for (int i = 0; i < k; i++) {
		int64_t n_logits;
		float *logits = fwd_logits(d->f, &n_logits);
		int32_t tok;
		if (d->sampling) {
			int64_t nc = sampler_dist(d->s, logits);
			const int32_t *ids;
			const float *probs;
			sampler_candidates(d->s, &ids, &probs);
			float *q = d->q + (size_t)i * (size_t)d->V;
			memset(q, 0, (size_t)d->V * sizeof *q);
			for (int64_t c = 0; c < nc; c++)
				q[ids[c]] = probs[c];
			tok = sampler_draw(d->s);
		} else {
			tok = 0;
			for (int64_t v = 1; v < d->V; v++)
				if (logits[v] > logits[tok])
					tok = (int32_t)v;
		}
		draft[i] = tok;
		*n_out = i + 1;
		if (i + 1 < k) { /* its logits propose the next one */
			int32_t p = (int32_t)(d->n + i), sq = 0;
			struct fwd_batch b = { .n = 1, .tokens = &tok, .pos = &p, .seq = &sq };
			if ((rc = runner_step(d->r, &b, err)))
				return rc;
		}
	}
	/* the KV now holds the sequence plus draft[0, k-1) */
	d->n_kv_draft = k - 1;
	memcpy(d->drafted, draft, (size_t)(k - 1) * sizeof *draft);
	return ING_OK;
}
