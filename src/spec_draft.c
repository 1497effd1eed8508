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

struct draft_slot {
	int32_t *tokens;             /* [n_ctx] the sequence */
	int64_t n, n_done;           /* tokens known; in the KV at the last proposal */
	int32_t drafted[SPEC_MAX_K]; /* draft rows in the KV after n_done */
	int n_kv_draft;
	int k_cap;                   /* adaptive draft length (spec_cap_next) */
	struct sampler *s;
	bool sampling;
	float *q;                    /* [k_max * V] */
};

struct spec_draft {
	struct model *m;
	struct fwd *f;
	struct runner *r;
	int64_t V, n_ctx;
	int n_seq, k_max;
	struct draft_slot *slots;    /* [n_seq] */
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

static int slots_alloc(struct spec_draft *d)
{
	d->slots = ing_calloc((size_t)d->n_seq, sizeof *d->slots);
	d->p = ing_malloc_array((size_t)d->V, sizeof *d->p);
	if (!d->slots || !d->p)
		return ING_ERR_NOMEM;
	struct sample_params sp = sample_params_default();
	sp.penalty_last_n = 0;
	for (int i = 0; i < d->n_seq; i++) {
		struct draft_slot *s = &d->slots[i];
		ing_err e;
		s->tokens = ing_malloc_array((size_t)d->n_ctx, sizeof *s->tokens);
		s->q = ing_malloc_array((size_t)d->k_max * (size_t)d->V, sizeof *s->q);
		if (!s->tokens || !s->q || sampler_create(&sp, d->V, &s->s, &e))
			return ING_ERR_NOMEM;
	}
	return ING_OK;
}

int spec_draft_create(const char *path, const struct tokenizer *target_tk, struct pool *pool,
		      enum runner_kind kind, int64_t n_ctx, int n_seq, int k_max,
		      struct spec_draft **out, ing_err *err)
{
	*out = NULL;
	if (k_max < 1 || k_max > SPEC_MAX_K || n_ctx < 2 || n_seq < 1)
		return ing_err_set(err, ING_ERR_RANGE, "draft model: bad draft length, context or "
				   "sequence count");
	int rc = vocab_check(path, target_tk, err);
	if (rc)
		return rc;
	struct spec_draft *d = ing_calloc(1, sizeof *d);
	if (!d)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	d->k_max = k_max;
	d->n_ctx = n_ctx;
	d->n_seq = n_seq;
	struct fwd_config fc = { .max_batch = DRAFT_CHUNK, .max_logits = 1, .n_ctx = n_ctx,
				 .n_seq = n_seq, .n_threads = pool_threads(pool),
				 .kv_type = FWD_KV_DEFAULT };
	if ((rc = model_open(path, &d->m, err)) || (rc = fwd_create(d->m, &fc, &d->f, err)) ||
	    (rc = runner_create(kind, d->f, pool, &d->r, err)))
		goto fail;
	ing_err_clear(err); /* fwd_create may leave a note */
	d->V = d->m->hp.n_vocab;
	if (slots_alloc(d)) {
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
	for (int i = 0; d->slots && i < d->n_seq; i++) {
		ing_free(d->slots[i].tokens);
		ing_free(d->slots[i].q);
		sampler_free(d->slots[i].s);
	}
	ing_free(d->slots);
	runner_destroy(d->r);
	fwd_destroy(d->f);
	model_close(d->m);
	ing_free(d->p);
	ing_free(d);
}

int spec_draft_start(struct spec_draft *d, int slot, const struct sample_params *sp,
		     ing_err *err)
{
	struct draft_slot *s = &d->slots[slot];
	struct sample_params dp = *sp; /* no penalties; its own random stream */
	dp.repeat_penalty = 1.0f;
	dp.presence_penalty = dp.frequency_penalty = 0.0f;
	dp.penalty_last_n = 0;
	dp.seed = sp->seed ^ 0x5bd1e995u;
	int rc = sampler_reset(s->s, &dp, err);
	if (rc)
		return rc;
	s->sampling = sp->temperature > 0;
	s->n = s->n_done = 0;
	s->n_kv_draft = 0;
	s->k_cap = spec_cap_first(d->k_max);
	kv_seq_truncate(fwd_kv(d->f), slot, 0);
	return ING_OK;
}

void spec_draft_feedback(struct spec_draft *d, int slot, int n_draft, int accepted)
{
	struct draft_slot *s = &d->slots[slot];
	s->k_cap = spec_cap_next(s->k_cap, d->k_max, n_draft, accepted);
}

void spec_draft_append(struct spec_draft *d, int slot, const int32_t *tokens, int64_t n)
{
	struct draft_slot *s = &d->slots[slot];
	for (int64_t i = 0; i < n && s->n < d->n_ctx; i++)
		s->tokens[s->n++] = tokens[i];
}

bool spec_draft_sampling(const struct spec_draft *d, int slot) { return d->slots[slot].sampling; }
float *spec_draft_p_scratch(struct spec_draft *d) { return d->p; }

const float *spec_draft_q(const struct spec_draft *d, int slot, int i)
{
	return d->slots[slot].q + (size_t)i * (size_t)d->V;
}

/* Runs the draft over tokens[from, to) of slot (positions from..to-1). */
static int feed(struct spec_draft *d, int slot, int64_t from, int64_t to, ing_err *err)
{
	int32_t pos[DRAFT_CHUNK], seq[DRAFT_CHUNK];
	static const bool no_logits[DRAFT_CHUNK]; /* chunks before the last need none */
	const int32_t *tokens = d->slots[slot].tokens;
	for (int64_t i0 = from; i0 < to; i0 += DRAFT_CHUNK) {
		int64_t cnt = to - i0 < DRAFT_CHUNK ? to - i0 : DRAFT_CHUNK;
		for (int64_t i = 0; i < cnt; i++) {
			pos[i] = (int32_t)(i0 + i);
			seq[i] = slot;
		}
		struct fwd_batch b = { .n = cnt, .tokens = tokens + i0, .pos = pos, .seq = seq,
				       .want_logits = i0 + cnt < to ? no_logits : NULL,
				       .argmax = !d->slots[slot].sampling,
				       .argmax_only = !d->slots[slot].sampling };
		int rc = runner_step(d->r, &b, err);
		if (rc)
			return rc;
	}
	return ING_OK;
}

/* The draft's next token from its last logits (q_i recorded when sampling). */
static int32_t next_token(struct spec_draft *d, struct draft_slot *s, int i)
{
	int64_t n_logits;
	float *logits = fwd_logits(d->f, &n_logits);
	if (!s->sampling)
		return (int32_t)fwd_argmax(d->f, 0); /* found by the LM head (feed, propose) */
	int64_t nc = sampler_dist(s->s, logits);
	const int32_t *ids;
	const float *probs;
	sampler_candidates(s->s, &ids, &probs);
	float *q = s->q + (size_t)i * (size_t)d->V;
	memset(q, 0, (size_t)d->V * sizeof *q);
	for (int64_t c = 0; c < nc; c++)
		q[ids[c]] = probs[c];
	return sampler_draw(s->s);
}

int spec_draft_propose(struct spec_draft *d, int slot, int k, int32_t *draft, int *n_out,
		       ing_err *err)
{
	struct draft_slot *s = &d->slots[slot];
	*n_out = 0;
	if (k > s->k_cap)
		k = s->k_cap;
	if (k > d->n_ctx - s->n)
		k = (int)(d->n_ctx - s->n);
	if (k <= 0 || s->n == 0)
		return ING_OK;
	/* the KV holds the sequence as of the last proposal plus that draft's
	 * first tokens: keep what the sequence confirmed, and always
	 * recompute the last token (its logits propose the next) */
	int64_t common = s->n_done;
	for (int j = 0; j < s->n_kv_draft && common < s->n && s->tokens[common] == s->drafted[j]; j++)
		common++;
	if (common > s->n - 1)
		common = s->n - 1;
	kv_seq_truncate(fwd_kv(d->f), slot, common);
	s->n_kv_draft = 0;
	s->n_done = common;
	int rc = feed(d, slot, common, s->n, err);
	if (rc)
		return rc;
	s->n_done = s->n;
	for (int i = 0; i < k; i++) {
		int32_t tok = next_token(d, s, i);
		draft[i] = tok;
		*n_out = i + 1;
		if (i + 1 == k)
			break;
		int32_t p = (int32_t)(s->n + i), sq = slot;
		struct fwd_batch b = { .n = 1, .tokens = &tok, .pos = &p, .seq = &sq,
				       .argmax = !s->sampling, .argmax_only = !s->sampling };
		if ((rc = runner_step(d->r, &b, err)))
			return rc;
		s->drafted[s->n_kv_draft++] = tok;
	}
	return ING_OK;
}
