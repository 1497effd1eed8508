/* engine.c — the serving engine's step loop (see engine.h).
 *
 * Threads: callers of engine_submit/engine_cancel/engine_stats_get touch
 * only `mu`-protected state (the incoming queue, the registry of live
 * requests, the stats snapshot). Everything else — model, KV cache,
 * scheduler lists, samplers — belongs to the engine thread, which also
 * creates and drives the compute pool.
 *
 * A request's tokens array holds its prompt followed by what it generated;
 * n_computed of them are in the KV cache. Each step feeds the rest: one row
 * for a decoding request, a chunk for one still prefilling. Preemption
 * simply frees a request's KV and resets n_computed to 0: it is recomputed
 * later from tokens[], prompt and generated alike, but for what the prefix
 * cache still holds of it then.
 *
 * Rows are published to the prefix cache as they are computed, prefill
 * chunks included. A waiting request whose prompt shares a prefix with one
 * that a running request is still computing waits for it (when that is at
 * least half of its own work) and then takes it from the cache: n > 1
 * choices of one prompt, or a burst of requests over one new system
 * prompt, compute it once.
 *
 * Prompt scoring (score_prompt): the prefill rows before the prompt's last
 * want logits too, and each reports the log-probability of the prompt
 * token after it. Those rows share the logits rows that drafts use
 * (extra_rows a step), which bounds a scored request's prefill chunk; a
 * request preempted mid-prompt takes from the prefix cache only what it
 * has already scored.
 *
 * Samplers belong to KV slots, like the KV itself: made once at start
 * (sharing one set of candidate buffers, since only this thread samples),
 * so that no request allocates vocabulary-sized buffers. A request made
 * them on its HTTP thread (5 MB each on a 262k vocabulary); glibc's
 * adaptive mmap threshold then served them from per-thread arenas, which
 * fragmented: resident memory grew ~6% over a 5-minute soak. A request
 * takes its slot's sampler at admission; a preempted one keeps its random
 * state and gets its penalty window back from tokens[] when readmitted. */
#include "engine.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "forward.h"
#include "generate.h"
#include "gguf.h"
#include "grammar.h"
#include "kv.h"
#include "logit_mask.h"
#include "mem.h"
#include "model.h"
#include "ops.h"
#include "pool.h"
#include "spec_draft.h"
#include "tokenizer.h"

#define SPEC_STEP_ROWS 64   /* logits rows reserved for drafts per step */
#define SPEC_TARGET_ROWS 24 /* decode + draft rows a step aims at */

struct req {
	uint64_t id;
	engine_event_fn cb;
	void *ud;
	int32_t *tokens;          /* [max_model_len] prompt, then generated */
	int64_t n_prompt, n_tokens, n_computed, n_generated, max_tokens, n_cached_prompt;
	struct sample_params sp;
	bool ignore_eos, spec;    /* spec: drafts may be proposed for it */
	int n_draft;              /* draft rows in the current step */
	int32_t draft[SPEC_MAX_K];
	int top_logprobs;
	int32_t *bias_ids;
	float *bias_values;
	int n_bias;
	int32_t stop_ids[ENGINE_MAX_STOP_IDS];
	int n_stop_ids;
	int64_t min_tokens;
	bool score_prompt;        /* prompt tokens' logprobs are reported */
	int prompt_top;
	int64_t n_scored;         /* prompt positions scored so far (position 0 has none) */
	struct logit_mask mask;   /* allowed ids, bad words */
	uint64_t cache_salt;      /* the root of its prefix-cache chain (kv.h) */
	struct sampler *sampler;  /* its slot's while running, else NULL */
	uint64_t rng[4];          /* the sampler's random state across a preemption */
	bool has_rng;             /* rng holds it (q was preempted) */
	struct grammar_matcher *matcher; /* response_format constraint, or NULL */
	int slot;                 /* KV sequence slot while running, else -1 */
	uint64_t admitted;        /* admission order, for choosing whom to preempt */
	uint64_t in_step;         /* step number of the last batch holding rows of it */
	atomic_bool cancelled;
	double t_submit, t_start, t_first;
	struct req *next;         /* waiting / incoming queue link */
};

struct engine {
	struct engine_config cfg;
	char path[4096];
	struct model *m;
	struct tokenizer *tk;
	struct fwd *f;
	struct pool *pool;
	struct runner *r;
	pthread_t thread;
	int started;
	/* shared, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct req *in_head, *in_tail;
	struct req **live;        /* [max_waiting + max_num_seqs] registry for cancel */
	int n_live, max_live;
	bool stop, drain;
	int ready;                /* 0 starting, 1 ok, -1 failed */
	ing_err start_err;
	struct engine_stats stats;
	uint64_t next_id;
	/* engine thread only */
	ing_err emit_err;         /* why emit_token returned EMIT_FAILED */
	struct req **running;     /* [max_num_seqs] */
	int n_running;
	struct req *wait_head, *wait_tail;
	int n_waiting;
	int *free_slots, n_free_slots;
	uint64_t admissions;
	uint64_t step_no;
	int32_t *b_tok, *b_pos, *b_seq; /* [step_tokens] batch rows */
	bool *b_want;
	struct req **b_req;       /* [step_tokens] request of each row */
	struct sampler **samplers; /* [max_num_seqs] one per slot; [0] owns the candidates */
	float *lp;                /* [V] a logprobs row as it was before sampling */
	int32_t *eog_ids;         /* [n_eog] the vocabulary's end-of-generation tokens */
	int n_eog;
	struct spec_seq **spec;   /* [max_num_seqs] drafter per slot, when cfg.spec */
	struct spec_cache *spec_cache;
	struct spec_draft *draft; /* cfg.spec == SPEC_DRAFT */
	char draft_path[4096];
	int64_t spec_rows;        /* draft rows allowed per step */
	int64_t extra_rows;       /* logits rows beyond one per sequence: drafts and
				   * scored prompt positions share them */
	struct engine_stats st_spec; /* speculation counters (engine thread) */
	pthread_mutex_t gv_mu;    /* guards gvocab's lazy creation */
	struct grammar_vocab *gvocab; /* token trie for constrained requests */
};

struct engine_config engine_config_default(void)
{
	return (struct engine_config){ .max_num_seqs = 16, .max_model_len = 4096,
				       .step_tokens = 256, .max_waiting = 64,
				       .mixed_prefill_tokens = 0, .runner = RUNNER_MEGA,
				       .spec = SPEC_NONE, .spec_max = 16,
				       .kv_type = FWD_KV_DEFAULT };
}

const struct model *engine_model(const struct engine *e) { return e->m; }
const struct tokenizer *engine_tokenizer(const struct engine *e) { return e->tk; }
const struct engine_config *engine_config_of(const struct engine *e) { return &e->cfg; }

/* ---- requests ---- */

static void req_free(struct req *q)
{
	if (!q)
		return;
	grammar_matcher_free(q->matcher);
	logit_mask_free(&q->mask);
	ing_free(q->tokens);
	ing_free(q->bias_ids);
	ing_free(q->bias_values);
	ing_free(q);
}

static int req_check(const struct engine *e, const struct engine_params *p, ing_err *err)
{
	const int64_t V = e->m->hp.n_vocab;
	if (p->n_prompt < 1)
		return ing_err_set(err, ING_ERR_INVALID, "the prompt is empty");
	if (p->max_tokens < 1)
		return ing_err_set(err, ING_ERR_INVALID, "max_tokens must be at least 1");
	if (p->n_prompt + p->max_tokens > e->cfg.max_model_len)
		return ing_err_set(err, ING_ERR_RANGE,
				   "this model's maximum context length is %lld tokens; the prompt "
				   "has %lld and max_tokens asks for %lld more",
				   (long long)e->cfg.max_model_len, (long long)p->n_prompt,
				   (long long)p->max_tokens);
	for (int64_t i = 0; i < p->n_prompt; i++)
		if (p->prompt[i] < 0 || p->prompt[i] >= V)
			return ing_err_set(err, ING_ERR_RANGE, "token id %d is outside the vocabulary "
					   "(0..%lld)", p->prompt[i], (long long)V - 1);
	for (int i = 0; i < p->n_bias; i++)
		if (p->bias_ids[i] < 0 || p->bias_ids[i] >= V || !isfinite(p->bias_values[i]))
			return ing_err_set(err, ING_ERR_RANGE, "logit_bias: bad token id or value");
	if (p->top_logprobs > ENGINE_MAX_LOGPROBS)
		return ing_err_set(err, ING_ERR_RANGE, "top_logprobs must be at most %d",
				   ENGINE_MAX_LOGPROBS);
	if (p->n_stop_ids < 0 || p->n_stop_ids > ENGINE_MAX_STOP_IDS)
		return ing_err_set(err, ING_ERR_RANGE, "at most %d stop token ids",
				   ENGINE_MAX_STOP_IDS);
	for (int i = 0; i < p->n_stop_ids; i++)
		if (p->stop_ids[i] < 0 || p->stop_ids[i] >= V)
			return ing_err_set(err, ING_ERR_RANGE, "stop token id %d is outside the "
					   "vocabulary (0..%lld)", p->stop_ids[i], (long long)V - 1);
	if (p->score_prompt && (p->prompt_top < 0 || p->prompt_top > ENGINE_MAX_LOGPROBS))
		return ing_err_set(err, ING_ERR_RANGE, "prompt_logprobs must be between 0 and %d",
				   ENGINE_MAX_LOGPROBS);
	if (p->min_tokens < 0 || p->min_tokens > p->max_tokens)
		return ing_err_set(err, ING_ERR_RANGE, "min_tokens must be between 0 and max_tokens "
				   "(%lld)", (long long)p->max_tokens);
	return sample_params_check(&p->sample, err);
}

/* The token trie, built on the first constrained request (HTTP thread). */
static const struct grammar_vocab *engine_gvocab(struct engine *e, ing_err *err)
{
	pthread_mutex_lock(&e->gv_mu);
	if (!e->gvocab)
		grammar_vocab_create(e->tk, &e->gvocab, err);
	pthread_mutex_unlock(&e->gv_mu);
	return e->gvocab;
}

static struct req *req_new(struct engine *e, const struct engine_params *p, ing_err *err)
{
	struct req *q = ing_calloc(1, sizeof *q);
	if (!q)
		return NULL;
	q->tokens = ing_malloc_array((size_t)e->cfg.max_model_len, sizeof *q->tokens);
	q->bias_ids = ing_malloc_array((size_t)(p->n_bias + 1), sizeof *q->bias_ids);
	q->bias_values = ing_malloc_array((size_t)(p->n_bias + 1), sizeof *q->bias_values);
	const struct grammar_vocab *gv = p->grammar ? engine_gvocab(e, err) : NULL;
	if (!q->tokens || !q->bias_ids || !q->bias_values || (p->grammar && !gv) ||
	    (p->grammar && grammar_matcher_create(p->grammar, gv, &q->matcher, err)) ||
	    logit_mask_init(&q->mask, p->allowed_ids, p->n_allowed, p->bad_words, p->bad_word_len,
			    p->n_bad_words, e->m->hp.n_vocab, err)) {
		req_free(q);
		return NULL;
	}
	memcpy(q->tokens, p->prompt, (size_t)p->n_prompt * sizeof *q->tokens);
	if (p->n_bias > 0) {
		memcpy(q->bias_ids, p->bias_ids, (size_t)p->n_bias * sizeof *q->bias_ids);
		memcpy(q->bias_values, p->bias_values, (size_t)p->n_bias * sizeof *q->bias_values);
	}
	q->n_bias = p->n_bias;
	q->n_prompt = q->n_tokens = p->n_prompt;
	q->max_tokens = p->max_tokens;
	q->sp = p->sample;
	/* a sequence never holds more tokens: the same window, and it fits the
	 * slot samplers' ring */
	if (q->sp.penalty_last_n > e->cfg.max_model_len)
		q->sp.penalty_last_n = (int32_t)e->cfg.max_model_len;
	q->ignore_eos = p->ignore_eos;
	q->top_logprobs = p->top_logprobs;
	if (p->n_stop_ids > 0)
		memcpy(q->stop_ids, p->stop_ids, (size_t)p->n_stop_ids * sizeof *q->stop_ids);
	q->n_stop_ids = p->n_stop_ids;
	q->min_tokens = p->min_tokens;
	q->cache_salt = p->cache_salt;
	q->score_prompt = p->score_prompt;
	q->prompt_top = p->prompt_top;
	q->n_scored = 1;
	/* constrained requests do not draft (yet: verify_rows masks every
	 * row through emit_token, so drafting would stay correct); salted
	 * ones draft from their own tokens only (admit isolates them from the
	 * suffix drafter's cache of other requests' outputs, release_slot
	 * keeps their output out of it) */
	q->spec = e->cfg.spec != SPEC_NONE && !p->no_spec && !p->grammar;
	q->slot = -1;
	return q;
}

int engine_submit(struct engine *e, const struct engine_params *p, engine_event_fn on_event,
		  void *ud, uint64_t *id, ing_err *err)
{
	int rc = req_check(e, p, err);
	if (rc)
		return rc;
	struct req *q = req_new(e, p, err);
	if (!q)
		return err->code ? err->code : ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	q->cb = on_event;
	q->ud = ud;
	q->t_submit = clock_now_s();
	pthread_mutex_lock(&e->mu);
	if (e->stop || e->n_live >= e->max_live) {
		pthread_mutex_unlock(&e->mu);
		req_free(q);
		return ing_err_set(err, ING_ERR_BUSY, e->stop ? "the server is shutting down"
							   : "the server is busy; retry later");
	}
	q->id = *id = ++e->next_id;
	e->live[e->n_live++] = q;
	if (e->in_tail)
		e->in_tail->next = q;
	else
		e->in_head = q;
	e->in_tail = q;
	pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return ING_OK;
}

void engine_cancel(struct engine *e, uint64_t id)
{
	pthread_mutex_lock(&e->mu);
	for (int i = 0; i < e->n_live; i++)
		if (e->live[i]->id == id)
			atomic_store(&e->live[i]->cancelled, true);
	pthread_cond_signal(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

void engine_stats_get(struct engine *e, struct engine_stats *out)
{
	pthread_mutex_lock(&e->mu);
	*out = e->stats;
	pthread_mutex_unlock(&e->mu);
}

/* ---- finishing ---- */

static void unregister(struct engine *e, struct req *q)
{
	pthread_mutex_lock(&e->mu);
	for (int i = 0; i < e->n_live; i++)
		if (e->live[i] == q) {
			e->live[i] = e->live[--e->n_live];
			break;
		}
	pthread_mutex_unlock(&e->mu);
}

static void release_slot(struct engine *e, struct req *q)
{
	if (q->slot < 0)
		return;
	/* later requests may repeat this output (a salted one's is its own) */
	if (q->spec && q->n_generated > 0 && !q->cache_salt)
		spec_cache_add(e->spec_cache, q->tokens + q->n_prompt, q->n_generated);
	struct kv_cache *kv = fwd_kv(e->f);
	kv_seq_publish(kv, q->slot, q->tokens, q->n_computed);
	kv_seq_truncate(kv, q->slot, 0);
	e->free_slots[e->n_free_slots++] = q->slot;
	q->slot = -1;
	q->sampler = NULL;
}

/* Ends q with its final event: finished for why, or failed with error
 * (NULL: none). */
static void finish(struct engine *e, struct req *q, enum engine_finish why, const ing_err *error)
{
	release_slot(e, q);
	double now = clock_now_s();
	struct engine_event ev = { .kind = error ? ENGINE_EV_ERROR : ENGINE_EV_FINISHED, .id = q->id,
				   .finish = why, .n_prompt = q->n_prompt,
				   .n_generated = q->n_generated,
				   .n_cached_prompt = q->n_cached_prompt,
				   .queue_s = (q->t_start ? q->t_start : now) - q->t_submit,
				   .ttft_s = q->t_first ? q->t_first - q->t_submit : 0,
				   .total_s = now - q->t_submit,
				   .error = error ? error->msg : NULL,
				   .error_code = error ? error->code : ING_OK };
	const struct kv_cache *kv = fwd_kv(e->f);
	pthread_mutex_lock(&e->mu);
	if (!error)
		e->stats.requests_finished[why]++;
	/* callers removed q from the running list: the snapshot a client
	 * reads after its final event already shows it gone */
	e->stats.running = e->n_running;
	e->stats.waiting = e->n_waiting;
	e->stats.kv_usage = (double)kv_blocks_used(kv) / (double)kv->n_blocks;
	pthread_mutex_unlock(&e->mu);
	unregister(e, q);
	q->cb(q->ud, &ev);
	req_free(q);
}

static void running_remove(struct engine *e, int i)
{
	memmove(&e->running[i], &e->running[i + 1],
		(size_t)(e->n_running - i - 1) * sizeof *e->running);
	e->n_running--;
}

static void waiting_push(struct engine *e, struct req *q, bool front)
{
	q->next = NULL;
	if (front) {
		q->next = e->wait_head;
		e->wait_head = q;
		if (!e->wait_tail)
			e->wait_tail = q;
	} else {
		if (e->wait_tail)
			e->wait_tail->next = q;
		else
			e->wait_head = q;
		e->wait_tail = q;
	}
	e->n_waiting++;
}

static struct req *waiting_pop(struct engine *e)
{
	struct req *q = e->wait_head;
	if (q) {
		e->wait_head = q->next;
		if (!e->wait_head)
			e->wait_tail = NULL;
		e->n_waiting--;
		q->next = NULL;
	}
	return q;
}

/* Finishes every cancelled request, running or waiting. */
static void reap_cancelled(struct engine *e)
{
	for (int i = 0; i < e->n_running;)
		if (atomic_load(&e->running[i]->cancelled)) {
			struct req *q = e->running[i];
			running_remove(e, i);
			finish(e, q, ENGINE_FINISH_CANCELLED, NULL);
		} else {
			i++;
		}
	int n = e->n_waiting;
	for (int i = 0; i < n; i++) {
		struct req *q = waiting_pop(e);
		if (atomic_load(&q->cancelled))
			finish(e, q, ENGINE_FINISH_CANCELLED, NULL);
		else
			waiting_push(e, q, false);
	}
}

/* ---- scheduling ---- */

/* Whether the row at position p of q scores the prompt token after it. */
static bool req_scores_at(const struct req *q, int64_t p)
{
	return q->score_prompt && p < q->n_prompt - 1 && p + 1 >= q->n_scored;
}

/* Appends rows feeding tokens[n_computed, n_computed + count) of q. */
static int64_t add_rows(struct engine *e, int64_t n, struct req *q, int64_t count)
{
	for (int64_t i = 0; i < count; i++, n++) {
		int64_t p = q->n_computed + i;
		e->b_tok[n] = q->tokens[p];
		e->b_pos[n] = (int32_t)p;
		e->b_seq[n] = q->slot;
		e->b_req[n] = q;
		/* logits where a token comes next, or a prompt token is scored */
		e->b_want[n] = p == q->n_tokens - 1 || req_scores_at(q, p);
	}
	return n;
}

/* Gives q its slot's sampler in the state q's own would be in: fresh from
 * q's parameters with the prompt seen (OpenAI/vLLM penalty semantics), and
 * after a preemption with q's random state and generated tokens too. Fails
 * only on parameters req_check would have refused. */
static int sampler_bind(struct engine *e, struct req *q, ing_err *err)
{
	struct sampler *s = e->samplers[q->slot];
	int rc = sampler_reset(s, &q->sp, err);
	if (rc)
		return rc;
	for (int64_t i = 0; i < q->n_prompt; i++)
		sampler_accept_prompt(s, q->tokens[i]);
	for (int64_t i = q->n_prompt; i < q->n_tokens; i++)
		sampler_accept(s, q->tokens[i]);
	if (q->has_rng)
		sampler_rng_set(s, q->rng);
	q->sampler = s;
	return ING_OK;
}

/* Positions of q the prefix cache may supply: all but the last token (its
 * logits pick the next token); a prompt still being scored needs the
 * logits of the rows from its last scored position on. */
static int64_t req_reusable(const struct req *q)
{
	int64_t reuse = q->n_tokens - 1;
	if (q->score_prompt && q->n_scored < q->n_prompt && q->n_scored - 1 < reuse)
		reuse = q->n_scored - 1;
	return reuse;
}

/* Whether waiting q should let a running request that is computing the
 * same prefix get ahead first: n > 1 choices of one prompt, or a burst of
 * requests over one long new prefix, would each compute it otherwise.
 * Running requests publish their rows every step (after_step), so q waits
 * only until the one ahead has computed the shared positions, and only
 * while those it has yet to compute are at least half of what q would
 * compute (not for a few template tokens in front of a long prompt of
 * q's own). */
static bool req_prefix_pending(const struct engine *e, const struct req *q)
{
	const int64_t reuse = req_reusable(q);
	for (int i = 0; i < e->n_running; i++) {
		const struct req *r = e->running[i];
		int64_t done = r->n_computed;
		if (r->n_tokens - done <= 1 || reuse <= done || r->cache_salt != q->cache_salt)
			continue; /* decoding (all published), nothing left to share, or
				   * rows q may not see */
		int64_t n = reuse < r->n_tokens ? reuse : r->n_tokens, same = 0;
		while (same < n && q->tokens[same] == r->tokens[same])
			same++;
		int64_t gain = same - done;
		if (gain > 0 && 2 * gain >= q->n_tokens - done)
			return true;
	}
	return false;
}

/* Moves waiting requests into free slots, reusing cached prompt blocks.
 * One that waits for a running request's prefix (req_prefix_pending)
 * keeps its place at the head of the queue and its claim on a slot. */
static void admit(struct engine *e, int64_t budget)
{
	struct req *held = NULL, *held_tail = NULL;
	int n_held = 0;
	while (budget > 0 && e->n_running + n_held < e->cfg.max_num_seqs && e->wait_head) {
		struct req *q = waiting_pop(e);
		if (req_prefix_pending(e, q)) {
			if (held_tail)
				held_tail->next = q;
			else
				held = q;
			held_tail = q;
			n_held++;
			continue;
		}
		q->slot = e->free_slots[--e->n_free_slots];
		ing_err serr;
		if (sampler_bind(e, q, &serr)) {
			finish(e, q, ENGINE_FINISH_STOP, &serr);
			continue;
		}
		q->admitted = ++e->admissions;
		q->n_draft = 0; /* a preempted request may carry its aborted step's draft */
		if (!q->t_start) {
			q->t_start = clock_now_s();
			pthread_mutex_lock(&e->mu);
			e->stats.prompt_tokens += (uint64_t)q->n_prompt;
			pthread_mutex_unlock(&e->mu);
		}
		int64_t hit = kv_seq_attach_prefix(fwd_kv(e->f), q->slot, q->cache_salt, q->tokens,
						   req_reusable(q));
		q->n_computed = hit;
		if (q->n_generated == 0)
			q->n_cached_prompt = hit;
		if (q->spec && e->draft) {
			ing_err err;
			q->spec = spec_draft_start(e->draft, q->slot, &q->sp, &err) == ING_OK;
			spec_draft_append(e->draft, q->slot, q->tokens, q->n_tokens);
		} else if (q->spec) {
			struct spec_seq *sp = e->spec[q->slot];
			spec_seq_reset(sp);
			if (q->cache_salt)
				spec_seq_isolate(sp);
			spec_seq_append(sp, q->tokens, q->n_tokens);
		}
		e->running[e->n_running++] = q;
		budget -= q->n_tokens - q->n_computed;
	}
	if (held) {
		held_tail->next = e->wait_head;
		e->wait_head = held;
		if (!e->wait_tail)
			e->wait_tail = held_tail;
		e->n_waiting += n_held;
	}
}

/* Appends q's draft after its decode row: the draft tokens at the next
 * positions, every row wanting logits. spec_room bounds the draft rows
 * left in this step; returns the new row count. */
static int64_t add_draft(struct engine *e, int64_t n, struct req *q, int64_t room,
			 int64_t *spec_room)
{
	q->n_draft = 0;
	if (!q->spec)
		return n;
	int64_t k = e->cfg.spec_max;
	int64_t left = q->max_tokens - q->n_generated - 1; /* a step emits <= k + 1 */
	int64_t ctx_left = e->cfg.max_model_len - 1 - q->n_tokens;
	k = k < left ? k : left;
	k = k < ctx_left ? k : ctx_left;
	k = k < room ? k : room;
	k = k < *spec_room ? k : *spec_room;
	if (k <= 0)
		return n;
	int m = 0;
	if (!e->draft) {
		m = spec_seq_draft(e->spec[q->slot], (int)k, q->draft);
	} else {
		ing_err err;
		if (spec_draft_propose(e->draft, q->slot, (int)k, q->draft, &m, &err))
			m = 0; /* the draft model failed (its KV is full): no draft */
	}
	for (int j = 0; j < m; j++, n++) {
		int64_t p = q->n_computed + 1 + j;
		e->b_tok[n] = q->draft[j];
		e->b_pos[n] = (int32_t)p;
		e->b_seq[n] = q->slot;
		e->b_req[n] = q;
		e->b_want[n] = true;
	}
	q->n_draft = m;
	*spec_room -= m;
	return n;
}

/* Builds the step's batch: a decode row for every request that has one
 * token to feed (followed by its draft when speculating), then (after
 * admitting waiting requests when allowed) prefill chunks within the token
 * budget. A request's rows are contiguous. */
static int64_t build_batch(struct engine *e, bool allow_admit)
{
	const int64_t cap = e->cfg.step_tokens;
	const uint64_t step = ++e->step_no;
	int64_t n = 0, n_decode = 0;
	for (int i = 0; i < e->n_running; i++)
		n_decode += e->running[i]->n_tokens - e->running[i]->n_computed == 1;
	/* drafts are nearly free while a step is bound by reading the weights
	 * (few rows) and cost full price once it is bound by compute: keep
	 * decode + draft rows near SPEC_TARGET_ROWS */
	int64_t spec_room = SPEC_TARGET_ROWS - n_decode;
	spec_room = spec_room < e->spec_rows ? spec_room : e->spec_rows;
	spec_room = spec_room > 0 ? spec_room : 0;
	const int64_t spec_room0 = spec_room;
	for (int i = 0; i < e->n_running && n < cap; i++) {
		struct req *q = e->running[i];
		q->n_draft = 0;
		if (q->n_tokens - q->n_computed == 1) {
			n = add_rows(e, n, q, 1);
			/* leave a row for every decode request still to come */
			n = add_draft(e, n, q, cap - n - (n_decode - 1), &spec_room);
			n_decode--;
			q->in_step = step;
		}
	}
	/* a step that decodes takes only a small prefill chunk: the step's
	 * time is every decoding client's inter-token latency */
	int64_t pcap = cap;
	if (n > 0 && e->cfg.mixed_prefill_tokens > 0 && n + e->cfg.mixed_prefill_tokens < cap)
		pcap = n + e->cfg.mixed_prefill_tokens;
	if (allow_admit)
		admit(e, pcap - n);
	/* scored prompt positions take the logits rows drafts left */
	int64_t score_room = e->extra_rows - (spec_room0 - spec_room);
	for (int i = 0; i < e->n_running && n < pcap; i++) {
		struct req *q = e->running[i];
		int64_t pending = q->n_tokens - q->n_computed;
		int64_t take = pending < pcap - n ? pending : pcap - n;
		if (q->in_step == step || take < 1)
			continue;
		int64_t scored = 0; /* rows of the chunk that score */
		while (scored < take && req_scores_at(q, q->n_computed + scored))
			scored++;
		if (scored > score_room)
			take = scored = score_room;
		if (take < 1)
			continue;
		score_room -= scored;
		n = add_rows(e, n, q, take);
		q->in_step = step;
	}
	return n;
}

/* Frees the KV of the most recently admitted running request and puts it
 * back at the head of the queue. False when nothing can be preempted. Its
 * computed rows stay in the prefix cache (evictable like any cached block)
 * for its readmission to attach: the failed step wrote no row. */
static bool preempt_newest(struct engine *e)
{
	if (e->n_running <= 1)
		return false;
	int victim = 0;
	for (int i = 1; i < e->n_running; i++)
		if (e->running[i]->admitted > e->running[victim]->admitted)
			victim = i;
	struct req *q = e->running[victim];
	running_remove(e, victim);
	kv_seq_publish(fwd_kv(e->f), q->slot, q->tokens, q->n_computed);
	kv_seq_truncate(fwd_kv(e->f), q->slot, 0);
	e->free_slots[e->n_free_slots++] = q->slot;
	q->slot = -1;
	sampler_rng_get(q->sampler, q->rng);
	q->has_rng = true;
	q->sampler = NULL;
	q->n_computed = 0;
	waiting_push(e, q, true);
	pthread_mutex_lock(&e->mu);
	e->stats.preemptions++;
	pthread_mutex_unlock(&e->mu);
	return true;
}

/* ---- sampling ---- */

/* The `top` most likely tokens of a logits row into ev (descending, the
 * earlier id first among equals; masked ones never) with their
 * log-probabilities logit - lse; returns lse, the row's log-sum-exp. */
static float fill_logprobs(struct engine *e, const float *logits, struct engine_event *ev, int top)
{
	const int64_t V = e->m->hp.n_vocab;
	const float lse = ops_logsumexp(logits, V);
	ev->n_top = ops_top_k(logits, V, top, ev->top_ids, ev->top_logprobs);
	for (int i = 0; i < ev->n_top; i++)
		ev->top_logprobs[i] -= lse;
	return lse;
}

/* Reports the prompt token after position p of q, scored from logits row
 * o of the step: its log-probability, rank and q's prompt_top
 * alternatives, from the model's own logits (no bias, penalty or mask). */
static void score_row(struct engine *e, struct req *q, int64_t o, int64_t p)
{
	int64_t n_out;
	const float *logits = fwd_logits(e->f, &n_out) + (size_t)o * (size_t)e->m->hp.n_vocab;
	struct engine_event ev = { .kind = ENGINE_EV_PROMPT_TOKEN, .id = q->id, .pos = p + 1,
				   .token = q->tokens[p + 1] };
	const float lse = fill_logprobs(e, logits, &ev, q->prompt_top);
	ev.logprob = logits[ev.token] - lse;
	ev.rank = 1 + ops_count_above(logits, e->m->hp.n_vocab, logits[ev.token]);
	q->n_scored = p + 2;
	q->cb(q->ud, &ev);
}

/* q picks plain argmaxes of unmodified logits: the LM head finds them */
static bool req_takes_argmax(const struct req *q)
{
	return q->n_bias == 0 && !q->matcher && !logit_mask_active(&q->mask) &&
	       q->n_generated >= q->min_tokens &&
	       sampler_is_plain_greedy(q->sampler);
}

/* Whether batch row i's logits are read only through its argmax: its
 * token comes from the LM head's argmax (req_takes_argmax: no bias, mask,
 * stop masking or grammar, greedy, so emit_token touches no logit and
 * spec_accept_sampled is never called), with no log-probabilities asked
 * and no prompt token scored from it. */
static bool row_argmax_only(const struct engine *e, int64_t i)
{
	const struct req *q = e->b_req[i];
	return req_takes_argmax(q) && q->top_logprobs < 0 && !req_scores_at(q, e->b_pos[i]);
}

/* Whether tok ends q's generation: an end-of-generation token (unless
 * ignore_eos) or one of its stop ids. */
static bool req_stops_at(const struct engine *e, const struct req *q, int32_t tok)
{
	if (!q->ignore_eos && tokenizer_is_eog(e->tk, tok))
		return true;
	for (int i = 0; i < q->n_stop_ids; i++)
		if (q->stop_ids[i] == tok)
			return true;
	return false;
}

/* Before min_tokens are out, no token may end q's generation. */
static void req_mask_stops(const struct engine *e, const struct req *q, float *logits)
{
	if (q->n_generated >= q->min_tokens)
		return;
	for (int i = 0; !q->ignore_eos && i < e->n_eog; i++)
		logits[e->eog_ids[i]] = -INFINITY;
	for (int i = 0; i < q->n_stop_ids; i++)
		logits[q->stop_ids[i]] = -INFINITY;
}

#define EMIT_GOES_ON (-1)
#define EMIT_FAILED (-2) /* the request fails: why in e->emit_err */

/* Samples the next token of q from its logits row (row o of the step's
 * logits) and reports it. Returns the finish reason, EMIT_GOES_ON, or
 * EMIT_FAILED (the grammar could not say which tokens may come next). The
 * token is appended to q->tokens (and told to q's drafter). For a row
 * whose next token was drafted (draft_i >= 0), *same tells whether the
 * draft stands. */
static int emit_token(struct engine *e, struct req *q, int64_t o, int draft_i, bool *same)
{
	int64_t n_out;
	float *logits = fwd_logits(e->f, &n_out) + (size_t)o * (size_t)e->m->hp.n_vocab;
	struct engine_event ev = { .kind = ENGINE_EV_TOKEN, .id = q->id };
	for (int i = 0; i < q->n_bias; i++)
		logits[q->bias_ids[i]] += q->bias_values[i];
	if (logit_mask_active(&q->mask))
		logit_mask_apply(&q->mask, logits, e->m->hp.n_vocab, q->tokens + q->n_prompt,
				 q->n_generated);
	req_mask_stops(e, q, logits);
	*same = false;
	if (!logit_mask_any_left(&q->mask, logits))
		return ENGINE_FINISH_STOP; /* no allowed token may come next */
	if (q->matcher) {
		int64_t n_allowed = grammar_matcher_mask(q->matcher, logits, &e->emit_err);
		if (n_allowed < 0)
			return EMIT_FAILED;
		if (n_allowed == 0)
			return ENGINE_FINISH_STOP; /* the grammar cannot go on */
	}
	float lse = 0;
	if (q->top_logprobs >= 0) {
		lse = fill_logprobs(e, logits, &ev, q->top_logprobs);
		/* the row as it is now: sampling applies penalties to it */
		memcpy(e->lp, logits, (size_t)e->m->hp.n_vocab * sizeof *e->lp);
	}
	int32_t tok;
	if (draft_i >= 0 && e->draft && spec_draft_sampling(e->draft, q->slot)) {
		*same = spec_accept_sampled(q->sampler, logits,
					    spec_draft_q(e->draft, q->slot, draft_i), e->m->hp.n_vocab,
					    q->draft[draft_i], spec_draft_p_scratch(e->draft), &tok);
	} else {
		tok = req_takes_argmax(q) ? sampler_take_argmax(q->sampler, (int32_t)fwd_argmax(e->f, o)) :
					    sampler_sample(q->sampler, logits);
		*same = draft_i >= 0 && tok == q->draft[draft_i];
	}
	sampler_accept(q->sampler, tok);
	if (q->top_logprobs >= 0)
		ev.logprob = e->lp[tok] - lse;
	q->tokens[q->n_tokens++] = tok;
	q->n_generated++;
	if (q->spec && e->draft)
		spec_draft_append(e->draft, q->slot, &tok, 1);
	else if (q->spec)
		spec_seq_append(e->spec[q->slot], &tok, 1);
	if (!q->t_first)
		q->t_first = clock_now_s();
	ev.token = tok;
	ev.is_eos = req_stops_at(e, q, tok);
	if (q->matcher && !grammar_matcher_accept_token(q->matcher, tok)) {
		/* the mask allowed it: only memory can fail here */
		ing_err_set(&e->emit_err, ING_ERR_NOMEM, "out of memory (grammar automaton)");
		return EMIT_FAILED;
	}
	q->cb(q->ud, &ev);
	if (ev.is_eos || (q->matcher && grammar_matcher_done(q->matcher)))
		return ENGINE_FINISH_STOP;
	if (q->n_generated >= q->max_tokens || q->n_tokens >= e->cfg.max_model_len)
		return ENGINE_FINISH_LENGTH;
	return EMIT_GOES_ON;
}

/* ---- the step ---- */

static int run_step(struct engine *e, int64_t *rows, ing_err *err)
{
	/* after a preemption, admit nobody this step: the pool just proved
	 * too small for the running set */
	for (bool allow_admit = true;; allow_admit = false) {
		int64_t n = build_batch(e, allow_admit);
		*rows = n;
		if (n == 0)
			return ING_OK;
		struct fwd_batch b = { .n = n, .tokens = e->b_tok, .pos = e->b_pos, .seq = e->b_seq,
				       .want_logits = e->b_want };
		for (int64_t i = 0; i < n && !b.argmax; i++)
			b.argmax = e->b_want[i] && req_takes_argmax(e->b_req[i]);
		b.argmax_only = b.argmax;
		for (int64_t i = 0; i < n && b.argmax_only; i++)
			b.argmax_only = !e->b_want[i] || row_argmax_only(e, i);
		int rc = runner_step(e->r, &b, err);
		if (rc != ING_ERR_NOMEM)
			return rc;
		if (!preempt_newest(e))
			return rc; /* one request alone does not fit the pool */
	}
}

/* Samples the tokens of q's rows in this step (logits: row o of the step's
 * logits, then o+1, ...): one for a decode row, then one more for each
 * draft token the model confirmed. Returns what emit_token returned last;
 * *gen counts the tokens emitted. */
static int verify_rows(struct engine *e, struct req *q, int64_t o, uint64_t *gen)
{
	int why = EMIT_GOES_ON, acc = 0;
	for (int j = 0; j <= q->n_draft; j++) {
		bool same;
		why = emit_token(e, q, o + j, j < q->n_draft ? j : -1, &same);
		if (why == EMIT_FAILED)
			break;
		(*gen)++;
		if (why >= 0 || !same)
			break;
		/* draft token j is what was chosen: its row was computed right */
		q->n_computed++;
		acc++;
	}
	if (q->n_draft > 0) {
		if (!e->draft)
			spec_seq_feedback(e->spec[q->slot], q->n_draft, acc);
		else
			spec_draft_feedback(e->draft, q->slot, q->n_draft, acc);
		e->st_spec.spec_drafts++;
		e->st_spec.spec_draft_tokens += (uint64_t)q->n_draft;
		e->st_spec.spec_accepted += (uint64_t)acc;
		for (int j = 0; j < acc; j++)
			e->st_spec.spec_accepted_per_pos[j]++;
		/* the rejected rows leave the cache */
		kv_seq_truncate(fwd_kv(e->f), q->slot, q->n_computed);
	}
	return why;
}

static void after_step(struct engine *e, int64_t n)
{
	int64_t o = 0;
	uint64_t gen = 0;
	for (int64_t i = 0; i < n;) {
		struct req *q = e->b_req[i];
		int64_t cnt = 1;
		while (i + cnt < n && e->b_req[i + cnt] == q)
			cnt++;
		for (int64_t r = i; r < i + cnt; r++) /* logits rows come in row order */
			if (e->b_want[r] && req_scores_at(q, e->b_pos[r]))
				score_row(e, q, o++, e->b_pos[r]);
		i += cnt;
		q->n_computed += cnt - q->n_draft; /* draft rows count once confirmed */
		if (!e->b_want[i - 1] || e->b_pos[i - 1] < q->n_prompt - 1) {
			/* a prefill chunk that does not reach the end yet: its rows
			 * are final, and requests with the same prefix may be
			 * waiting for them (req_prefix_pending) */
			kv_seq_publish(fwd_kv(e->f), q->slot, q->tokens, q->n_computed);
			continue;
		}
		int why = verify_rows(e, q, o, &gen);
		o += 1 + q->n_draft;
		q->n_draft = 0;
		kv_seq_publish(fwd_kv(e->f), q->slot, q->tokens, q->n_computed);
		if (why == EMIT_GOES_ON && atomic_load(&q->cancelled))
			why = ENGINE_FINISH_CANCELLED;
		if (why == EMIT_GOES_ON)
			continue;
		for (int r = 0; r < e->n_running; r++)
			if (e->running[r] == q) {
				running_remove(e, r);
				break;
			}
		if (why == EMIT_FAILED)
			finish(e, q, ENGINE_FINISH_STOP, &e->emit_err);
		else
			finish(e, q, (enum engine_finish)why, NULL);
	}
	pthread_mutex_lock(&e->mu);
	e->stats.generation_tokens += gen;
	e->stats.spec_drafts = e->st_spec.spec_drafts;
	e->stats.spec_draft_tokens = e->st_spec.spec_draft_tokens;
	e->stats.spec_accepted = e->st_spec.spec_accepted;
	memcpy(e->stats.spec_accepted_per_pos, e->st_spec.spec_accepted_per_pos,
	       sizeof e->stats.spec_accepted_per_pos);
	pthread_mutex_unlock(&e->mu);
}

/* ---- the loop ---- */

static void publish_stats(struct engine *e, int64_t rows, double dt)
{
	const struct kv_cache *kv = fwd_kv(e->f);
	pthread_mutex_lock(&e->mu);
	e->stats.running = e->n_running;
	e->stats.waiting = e->n_waiting;
	e->stats.kv_usage = (double)kv_blocks_used(kv) / (double)kv->n_blocks;
	e->stats.prefix_queries = kv->prefix_queries;
	e->stats.prefix_hits = kv->prefix_hits;
	if (rows > 0) {
		e->stats.steps++;
		e->stats.batch_rows += (uint64_t)rows;
		int bin = 0;
		while (bin < ENGINE_STEP_ROWS_BINS - 1 && (1ll << bin) < rows)
			bin++;
		e->stats.step_rows_bins[bin]++;
		e->stats.step_seconds += dt;
	}
	pthread_mutex_unlock(&e->mu);
}

/* Takes submitted requests into the waiting queue; waits while idle.
 * Returns false when the loop should end. */
static bool take_incoming(struct engine *e)
{
	pthread_mutex_lock(&e->mu);
	for (;;) {
		while (e->in_head) {
			struct req *q = e->in_head;
			e->in_head = q->next;
			if (!e->in_head)
				e->in_tail = NULL;
			waiting_push(e, q, false);
		}
		bool idle = e->n_running == 0 && e->n_waiting == 0;
		if (e->stop && (idle || !e->drain)) {
			pthread_mutex_unlock(&e->mu);
			return false;
		}
		if (!idle)
			break;
		e->stats.running = e->stats.waiting = 0;
		pthread_cond_wait(&e->cv, &e->mu);
	}
	e->stats.waiting = e->n_waiting;
	pthread_mutex_unlock(&e->mu);
	return true;
}

static void loop(struct engine *e)
{
	ing_err err = { 0 };
	while (take_incoming(e)) {
		reap_cancelled(e);
		int64_t rows = 0;
		double t0 = clock_now_s();
		int rc = run_step(e, &rows, &err);
		if (rc) {
			/* the lone running request cannot fit: fail it, keep serving */
			struct req *q = e->n_running ? e->running[0] : NULL;
			if (q) {
				running_remove(e, 0);
				finish(e, q, ENGINE_FINISH_STOP, &err);
			}
		} else if (rows > 0) {
			after_step(e, rows);
		}
		publish_stats(e, rows, clock_now_s() - t0);
	}
	/* not draining: everything left is cancelled */
	while (e->n_running) {
		struct req *q = e->running[0];
		running_remove(e, 0);
		finish(e, q, ENGINE_FINISH_CANCELLED, NULL);
	}
	for (struct req *q; (q = waiting_pop(e));)
		finish(e, q, ENGINE_FINISH_CANCELLED, NULL);
	pthread_mutex_lock(&e->mu);
	while (e->in_head) {
		struct req *q = e->in_head;
		e->in_head = q->next;
		pthread_mutex_unlock(&e->mu);
		finish(e, q, ENGINE_FINISH_CANCELLED, NULL);
		pthread_mutex_lock(&e->mu);
	}
	e->in_tail = NULL;
	pthread_mutex_unlock(&e->mu);
}

/* ---- setup on the engine thread ---- */

static int64_t kv_blocks_for(const struct engine *e)
{
	if (e->cfg.kv_cache_mb <= 0)
		return 0; /* kv_create: n_seq full contexts */
	double per_block = KV_BLOCK * fwd_kv_bytes_per_pos(&e->m->hp, e->cfg.kv_type);
	if (per_block <= 0)
		return 0; /* rows this model's heads cannot take (fwd_create says why) */
	int64_t n = (int64_t)(e->cfg.kv_cache_mb * 1e6 / per_block);
	return n > 0 ? n : 1;
}

/* The vocabulary's end-of-generation ids (min_tokens masks them). */
static int eog_list(struct engine *e, ing_err *err)
{
	const int64_t V = e->m->hp.n_vocab;
	int n = 0;
	for (int64_t i = 0; i < V; i++)
		n += tokenizer_is_eog(e->tk, (int32_t)i);
	e->eog_ids = ing_malloc_array((size_t)n + 1, sizeof *e->eog_ids);
	if (!e->eog_ids)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	for (int64_t i = 0; i < V; i++)
		if (tokenizer_is_eog(e->tk, (int32_t)i))
			e->eog_ids[e->n_eog++] = (int32_t)i;
	return ING_OK;
}

/* One sampler per slot, its ring long enough for any request's window
 * (req_new clamps it to max_model_len). */
static int samplers_create(struct engine *e, ing_err *err)
{
	const int n = e->cfg.max_num_seqs;
	e->samplers = ing_calloc((size_t)n, sizeof *e->samplers);
	if (!e->samplers)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	struct sample_params sp = sample_params_default();
	int64_t window = e->cfg.max_model_len;
	sp.penalty_last_n = (int32_t)(window < SAMPLE_MAX_WINDOW ? window : SAMPLE_MAX_WINDOW);
	int rc = sampler_create(&sp, e->m->hp.n_vocab, &e->samplers[0], err);
	for (int i = 1; i < n && !rc; i++)
		rc = sampler_create_sharing(&sp, e->samplers[0], &e->samplers[i], err);
	return rc;
}

static void samplers_free(struct engine *e)
{
	if (!e->samplers)
		return;
	for (int i = e->cfg.max_num_seqs - 1; i >= 0; i--) /* [0] owns the shared buffers */
		sampler_free(e->samplers[i]);
	ing_free(e->samplers);
}

static int setup(struct engine *e, ing_err *err)
{
	const struct engine_config *c = &e->cfg;
	int rc = model_open(e->path, &e->m, err);
	if (rc)
		return rc;
	struct gguf *g;
	if ((rc = gguf_open(e->path, &g, err)))
		return rc;
	rc = tokenizer_open(g, &e->tk, err);
	gguf_close(g);
	if (rc)
		return rc;
	int threads = c->threads > 0 ? c->threads : pool_physical_cores();
	/* speculation: at most SPEC_STEP_ROWS draft rows per step, each with
	 * logits (V floats a row) */
	e->spec_rows = c->spec == SPEC_NONE ? 0 : SPEC_STEP_ROWS;
	if (e->spec_rows > c->step_tokens - c->max_num_seqs)
		e->spec_rows = c->step_tokens - c->max_num_seqs;
	e->extra_rows = e->spec_rows > ENGINE_SCORE_ROWS ? e->spec_rows : ENGINE_SCORE_ROWS;
	/* One request of max_model_len tokens must fit the pool alone (as it
	 * does once every other is preempted): a smaller pool lowers
	 * max_model_len to what it holds (engine_config_of says so), where it
	 * failed such requests with "KV cache full" after prefilling them. */
	const int64_t pool_blocks = kv_blocks_for(e);
	if (pool_blocks > 0 && pool_blocks * KV_BLOCK < c->max_model_len)
		e->cfg.max_model_len = pool_blocks * KV_BLOCK;
	struct fwd_config fc = { .max_batch = c->step_tokens,
				 .max_logits = c->max_num_seqs + e->extra_rows,
				 .n_ctx = c->max_model_len, .n_seq = c->max_num_seqs,
				 .n_threads = threads, .kv_type = c->kv_type,
				 .kv_blocks = kv_blocks_for(e) };
	if ((rc = fwd_create(e->m, &fc, &e->f, err)) ||
	    (rc = pool_create(threads, 1, &e->pool, err)))
		return rc;
	if (err->msg[0])
		fprintf(stderr, "ingot: note: %s\n", err->msg);
	ing_err_clear(err);
	if ((rc = runner_create(c->runner, e->f, e->pool, &e->r, err)))
		return rc;
	const size_t B = (size_t)c->step_tokens;
	e->b_tok = ing_malloc_array(B, sizeof *e->b_tok);
	e->b_pos = ing_malloc_array(B, sizeof *e->b_pos);
	e->b_seq = ing_malloc_array(B, sizeof *e->b_seq);
	e->b_want = ing_malloc_array(B, sizeof *e->b_want);
	e->b_req = ing_malloc_array(B, sizeof *e->b_req);
	e->lp = ing_malloc_array((size_t)e->m->hp.n_vocab, sizeof *e->lp);
	if (!e->b_tok || !e->b_pos || !e->b_seq || !e->b_want || !e->b_req || !e->lp)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	if ((rc = eog_list(e, err)))
		return rc;
	if ((rc = samplers_create(e, err)))
		return rc;
	/* before ready: no lock needed */
	e->stats.kv_blocks = fwd_kv(e->f)->n_blocks;
	e->stats.kv_dtype = fwd_kv_type_name(c->kv_type);
	if (c->spec == SPEC_NONE)
		return ING_OK;
	e->stats.spec_positions = c->spec_max; /* before ready: no lock needed */
	if (c->spec == SPEC_DRAFT)
		return spec_draft_create(e->draft_path, e->tk, e->pool, c->runner, c->max_model_len,
					 c->max_num_seqs, c->spec_max, &e->draft, err);
	e->spec = ing_calloc((size_t)c->max_num_seqs, sizeof *e->spec);
	if (!e->spec)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	if (c->spec == SPEC_SUFFIX && (rc = spec_cache_create(0, &e->spec_cache, err)))
		return rc;
	for (int i = 0; i < c->max_num_seqs; i++)
		if ((rc = spec_seq_create(c->spec, c->spec_max, c->max_model_len, e->spec_cache,
					  &e->spec[i], err)))
			return rc;
	return ING_OK;
}

static void *engine_main(void *arg)
{
	struct engine *e = arg;
	ing_err err = { 0 };
	int rc = setup(e, &err);
	pthread_mutex_lock(&e->mu);
	e->ready = rc ? -1 : 1;
	e->start_err = err;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	if (rc == ING_OK)
		loop(e);
	spec_draft_free(e->draft); /* runs on the pool */
	e->draft = NULL;
	runner_destroy(e->r);
	pool_destroy(e->pool); /* on the thread that created it */
	e->r = NULL;
	e->pool = NULL;
	return NULL;
}

static void free_engine(struct engine *e)
{
	if (e->spec)
		for (int i = 0; i < e->cfg.max_num_seqs; i++)
			spec_seq_free(e->spec[i]);
	ing_free(e->spec);
	spec_cache_free(e->spec_cache);
	samplers_free(e);
	fwd_destroy(e->f);
	grammar_vocab_free(e->gvocab);
	tokenizer_close(e->tk);
	model_close(e->m);
	void *p[] = { e->b_tok, e->b_pos, e->b_seq, e->b_want, e->b_req, e->lp, e->eog_ids,
		      e->running, e->free_slots, e->live };
	for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
		ing_free(p[i]);
	pthread_mutex_destroy(&e->mu);
	pthread_mutex_destroy(&e->gv_mu);
	pthread_cond_destroy(&e->cv);
	ing_free(e);
}

static int check_config(const struct engine_config *c, ing_err *err)
{
	if (c->max_num_seqs < 1 || c->max_num_seqs > 1024)
		return ing_err_set(err, ING_ERR_RANGE, "max_num_seqs must be in 1..1024");
	if (c->max_model_len < 2 || c->step_tokens < 1 || c->step_tokens > 8192 ||
	    c->max_waiting < 0 || c->kv_cache_mb < 0 || c->mixed_prefill_tokens < 0)
		return ing_err_set(err, ING_ERR_RANGE, "bad engine configuration");
	if (!fwd_kv_type_name(c->kv_type))
		return ing_err_set(err, ING_ERR_INVALID, "the KV cache stores f16, f32 or q8_0");
	if ((c->spec == SPEC_DRAFT) != (c->draft_model != NULL))
		return ing_err_set(err, ING_ERR_INVALID, "draft-model speculation needs a draft model "
				   "and a draft model needs spec draft");
	if (c->spec != SPEC_NONE && (c->spec_max < 1 || c->spec_max > SPEC_MAX_K))
		return ing_err_set(err, ING_ERR_RANGE, "spec_max must be in 1..%d", SPEC_MAX_K);
	return ING_OK;
}

int engine_create(const char *model_path, const struct engine_config *cfg, struct engine **out,
		  ing_err *err)
{
	*out = NULL;
	int rc = check_config(cfg, err);
	if (rc)
		return rc;
	struct engine *e = ing_calloc(1, sizeof *e);
	if (!e)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	e->cfg = *cfg;
	if (e->cfg.step_tokens < e->cfg.max_num_seqs)
		e->cfg.step_tokens = e->cfg.max_num_seqs; /* room for every decode row */
	snprintf(e->path, sizeof e->path, "%s", model_path);
	if (cfg->draft_model)
		snprintf(e->draft_path, sizeof e->draft_path, "%s", cfg->draft_model);
	pthread_mutex_init(&e->mu, NULL);
	pthread_mutex_init(&e->gv_mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	e->max_live = cfg->max_waiting + cfg->max_num_seqs;
	e->live = ing_malloc_array((size_t)e->max_live, sizeof *e->live);
	e->running = ing_malloc_array((size_t)cfg->max_num_seqs, sizeof *e->running);
	e->free_slots = ing_malloc_array((size_t)cfg->max_num_seqs, sizeof *e->free_slots);
	if (!e->live || !e->running || !e->free_slots) {
		free_engine(e);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	for (int i = 0; i < cfg->max_num_seqs; i++)
		e->free_slots[e->n_free_slots++] = cfg->max_num_seqs - 1 - i;
	if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
		free_engine(e);
		return ing_err_set(err, ING_ERR_NOMEM, "cannot start the engine thread");
	}
	e->started = 1;
	pthread_mutex_lock(&e->mu);
	while (e->ready == 0)
		pthread_cond_wait(&e->cv, &e->mu);
	pthread_mutex_unlock(&e->mu);
	if (e->ready < 0) {
		*err = e->start_err;
		pthread_join(e->thread, NULL);
		free_engine(e);
		return err->code ? err->code : ING_ERR_INVALID;
	}
	*out = e;
	return ING_OK;
}

void engine_destroy(struct engine *e, bool drain)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	e->stop = true;
	e->drain = drain;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	if (e->started)
		pthread_join(e->thread, NULL);
	free_engine(e);
}
