/* sample.c — the sampling chain (see sample.h).
 *
 * Penalty counts are kept incrementally: a ring of the last N accepted
 * tokens and a per-token count array, so applying penalties costs O(N), not
 * O(V). Top-k uses a quickselect on (logit, id) pairs; top-p sorts only the
 * survivors of top-k (or, with top-k off, all V candidates) with an in-place
 * heapsort.
 *
 * Every buffer is written when the sampler is made, so that its memory is
 * resident from then on: a server's samplers (one per KV slot, see
 * engine.c) then cost the same resident memory from start to end. The
 * candidate buffers, 4/5 of that memory, can be shared by samplers used one
 * at a time (sampler_create_sharing). */
#include "sample.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "mem.h"

struct cand {
	float logit;
	int32_t id;
};

struct sampler {
	struct sample_params p;
	int64_t n_vocab;
	uint64_t rng[4];
	struct cand *cand;      /* [V] */
	int32_t *cand_ids;      /* [V] (exported) */
	float *cand_probs;      /* [V] (exported) */
	int64_t n_cand;
	bool borrowed;          /* cand, cand_ids, cand_probs belong to another sampler */
	int32_t *counts;        /* [V] occurrences in the window */
	int32_t *ring;          /* [penalty_last_n] */
	uint8_t *prompt_seen;   /* [V] tokens of the prompt (repetition penalty only) */
	bool any_prompt;
	int64_t ring_n, ring_head;
};

struct sample_params sample_params_default(void)
{
	return (struct sample_params){ .temperature = 0.8f, .top_k = 40, .top_p = 0.95f,
				       .min_p = 0.05f, .repeat_penalty = 1.0f,
				       .penalty_last_n = 64, .seed = 0 };
}

int sample_params_check(const struct sample_params *p, ing_err *err)
{
	if (!isfinite(p->temperature) || p->temperature < 0)
		return ing_err_set(err, ING_ERR_RANGE, "temperature must be a finite number >= 0");
	if (!isfinite(p->top_p) || p->top_p <= 0 || p->top_p > 1)
		return ing_err_set(err, ING_ERR_RANGE, "top_p must be in (0, 1]");
	if (!isfinite(p->min_p) || p->min_p < 0 || p->min_p > 1)
		return ing_err_set(err, ING_ERR_RANGE, "min_p must be in [0, 1]");
	if (!isfinite(p->repeat_penalty) || p->repeat_penalty <= 0)
		return ing_err_set(err, ING_ERR_RANGE, "repetition_penalty must be > 0");
	if (!isfinite(p->presence_penalty) || fabsf(p->presence_penalty) > 2)
		return ing_err_set(err, ING_ERR_RANGE, "presence_penalty must be in [-2, 2]");
	if (!isfinite(p->frequency_penalty) || fabsf(p->frequency_penalty) > 2)
		return ing_err_set(err, ING_ERR_RANGE, "frequency_penalty must be in [-2, 2]");
	if (p->penalty_last_n < 0 || p->penalty_last_n > SAMPLE_MAX_WINDOW)
		return ing_err_set(err, ING_ERR_RANGE, "penalty window out of range");
	return ING_OK;
}

/* ---- RNG: xoshiro256** seeded by splitmix64 ---- */

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t s[4])
{
	uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

/* uniform in [0, 1) with 53 random bits */
static double rng_uniform(uint64_t s[4]) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

/* The sampler without its candidate buffers: parameters, generator, the
 * penalty window and counts (zeroed). */
static int sampler_new(const struct sample_params *p, int64_t n_vocab, struct sampler **out,
		       ing_err *err)
{
	*out = NULL;
	int rc = sample_params_check(p, err);
	if (rc)
		return rc;
	if (n_vocab < 1)
		return ing_err_set(err, ING_ERR_INVALID, "empty vocabulary");
	struct sampler *s = ing_calloc(1, sizeof *s);
	if (!s)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	s->p = *p;
	s->n_vocab = n_vocab;
	uint64_t seed = p->seed;
	for (int i = 0; i < 4; i++)
		s->rng[i] = hash_splitmix64(&seed);
	s->counts = ing_calloc((size_t)n_vocab, sizeof *s->counts);
	s->prompt_seen = ing_calloc((size_t)n_vocab, 1);
	s->ring = ing_calloc((size_t)(p->penalty_last_n > 0 ? p->penalty_last_n : 1),
			     sizeof *s->ring);
	if (!s->counts || !s->ring || !s->prompt_seen) {
		sampler_free(s);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	*out = s;
	return ING_OK;
}

int sampler_create(const struct sample_params *p, int64_t n_vocab, struct sampler **out,
		   ing_err *err)
{
	struct sampler *s;
	int rc = sampler_new(p, n_vocab, &s, err);
	if (rc)
		return rc;
	/* calloc: written now, resident now (see the top of the file) */
	s->cand = ing_calloc((size_t)n_vocab, sizeof *s->cand);
	s->cand_ids = ing_calloc((size_t)n_vocab, sizeof *s->cand_ids);
	s->cand_probs = ing_calloc((size_t)n_vocab, sizeof *s->cand_probs);
	if (!s->cand || !s->cand_ids || !s->cand_probs) {
		sampler_free(s);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	*out = s;
	return ING_OK;
}

int sampler_create_sharing(const struct sample_params *p, struct sampler *owner,
			   struct sampler **out, ing_err *err)
{
	struct sampler *s;
	int rc = sampler_new(p, owner->n_vocab, &s, err);
	if (rc)
		return rc;
	s->cand = owner->cand;
	s->cand_ids = owner->cand_ids;
	s->cand_probs = owner->cand_probs;
	s->borrowed = true;
	*out = s;
	return ING_OK;
}

int sampler_reset(struct sampler *s, const struct sample_params *p, ing_err *err)
{
	int rc = sample_params_check(p, err);
	if (rc)
		return rc;
	/* the ring is sized by penalty_last_n at create time */
	int32_t cap = s->p.penalty_last_n > 0 ? s->p.penalty_last_n : 1;
	if (p->penalty_last_n > cap)
		return ing_err_set(err, ING_ERR_RANGE, "sampler_reset: penalty window %d > %d",
				   p->penalty_last_n, cap);
	s->p = *p;
	uint64_t seed = p->seed;
	for (int i = 0; i < 4; i++)
		s->rng[i] = hash_splitmix64(&seed);
	memset(s->counts, 0, (size_t)s->n_vocab * sizeof *s->counts);
	memset(s->prompt_seen, 0, (size_t)s->n_vocab);
	s->any_prompt = false;
	s->ring_n = s->ring_head = 0;
	s->n_cand = 0;
	return ING_OK;
}

void sampler_free(struct sampler *s)
{
	if (!s)
		return;
	if (!s->borrowed) {
		ing_free(s->cand);
		ing_free(s->cand_ids);
		ing_free(s->cand_probs);
	}
	ing_free(s->counts);
	ing_free(s->ring);
	ing_free(s->prompt_seen);
	ing_free(s);
}

void sampler_accept(struct sampler *s, int32_t token)
{
	const int64_t N = s->p.penalty_last_n;
	if (N <= 0 || token < 0 || token >= s->n_vocab)
		return;
	if (s->ring_n == N) {
		s->counts[s->ring[s->ring_head]]--;
		s->ring_n--;
	}
	s->ring[s->ring_head] = token;
	s->ring_head = (s->ring_head + 1) % N;
	s->ring_n++;
	s->counts[token]++;
}

void sampler_accept_prompt(struct sampler *s, int32_t token)
{
	if (token >= 0 && token < s->n_vocab) {
		s->prompt_seen[token] = 1;
		s->any_prompt = true;
	}
}

static bool penalties_on(const struct sample_params *p)
{
	return p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f ||
	       p->frequency_penalty != 0.0f;
}

/* Applies penalties once per distinct token in the window. */
static void apply_penalties(struct sampler *s, float *logits)
{
	const int64_t N = s->p.penalty_last_n;
	for (int64_t i = 0; i < s->ring_n; i++) {
		int32_t t = s->ring[(s->ring_head - 1 - i + N) % N];
		int32_t c = s->counts[t];
		if (c <= 0)
			continue;
		float l = logits[t];
		l = l > 0 ? l / s->p.repeat_penalty : l * s->p.repeat_penalty;
		logits[t] = l - (float)c * s->p.frequency_penalty - s->p.presence_penalty;
		s->counts[t] = -c; /* mark done; restored below */
	}
	/* prompt tokens (sampler_accept_prompt) get only the repetition
	 * penalty, and only if the window did not already penalize them */
	if (s->any_prompt && s->p.repeat_penalty != 1.0f)
		for (int64_t t = 0; t < s->n_vocab; t++)
			if (s->prompt_seen[t] && s->counts[t] == 0)
				logits[t] = logits[t] > 0 ? logits[t] / s->p.repeat_penalty
							  : logits[t] * s->p.repeat_penalty;
	for (int64_t i = 0; i < s->ring_n; i++) {
		int32_t t = s->ring[(s->ring_head - 1 - i + N) % N];
		if (s->counts[t] < 0)
			s->counts[t] = -s->counts[t];
	}
}

static int cand_before(const struct cand *a, const struct cand *b)
{
	return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* In-place heapsort, best candidate first. Not qsort: glibc's qsort may
 * malloc a merge buffer, and sampling must not allocate. */
static void sift_down(struct cand *c, int64_t root, int64_t n)
{
	for (;;) {
		int64_t child = 2 * root + 1;
		if (child >= n)
			return;
		/* min-heap on "before": the worst candidate sits at the root */
		if (child + 1 < n && cand_before(&c[child], &c[child + 1]))
			child++;
		if (!cand_before(&c[root], &c[child]))
			return;
		struct cand t = c[root];
		c[root] = c[child];
		c[child] = t;
		root = child;
	}
}

static void sort_cands(struct cand *c, int64_t n)
{
	for (int64_t i = n / 2 - 1; i >= 0; i--)
		sift_down(c, i, n);
	for (int64_t end = n - 1; end > 0; end--) {
		struct cand t = c[0];
		c[0] = c[end];
		c[end] = t;
		sift_down(c, 0, end);
	}
}

/* Moves the k best candidates to the front (unordered). */
static void select_top_k(struct cand *c, int64_t n, int64_t k)
{
	int64_t lo = 0, hi = n - 1;
	while (lo < hi) {
		struct cand pivot = c[(lo + hi) / 2];
		int64_t i = lo, j = hi;
		while (i <= j) {
			while (cand_before(&c[i], &pivot))
				i++;
			while (cand_before(&pivot, &c[j]))
				j--;
			if (i <= j) {
				struct cand t = c[i];
				c[i++] = c[j];
				c[j--] = t;
			}
		}
		if (k - 1 <= j)
			hi = j;
		else if (k - 1 >= i)
			lo = i;
		else
			break;
	}
}

/* Softmax of the first n candidates at temperature temp into probs. */
static void softmax(const struct cand *c, int64_t n, float temp, float *probs)
{
	double sum = 0;
	for (int64_t i = 0; i < n; i++) {
		probs[i] = expf((c[i].logit - c[0].logit) / temp);
		sum += probs[i];
	}
	for (int64_t i = 0; i < n; i++)
		probs[i] = (float)(probs[i] / sum);
}

/* Truncates the sorted candidates by top-p and min-p at temperature 1. */
static int64_t truncate_p(struct sampler *s, int64_t n)
{
	softmax(s->cand, n, 1.0f, s->cand_probs);
	int64_t keep = n;
	if (s->p.top_p < 1.0f) {
		double cum = 0;
		for (int64_t i = 0; i < n; i++) {
			cum += s->cand_probs[i];
			if (cum >= s->p.top_p) {
				keep = i + 1;
				break;
			}
		}
	}
	if (s->p.min_p > 0.0f) {
		const float thr = s->cand_probs[0] * s->p.min_p;
		int64_t i = 1;
		while (i < keep && s->cand_probs[i] >= thr)
			i++;
		keep = i;
	}
	return keep;
}

/* Without top-p nothing needs the candidates in order (sorting 262k of
 * them costs ~50 ms a row): the best goes first (softmax subtracts it) and
 * min-p keeps exp(l - l_best) >= min_p, the same test truncate_p makes on
 * probabilities at temperature 1. */
static int64_t truncate_unsorted(struct sampler *s, int64_t n)
{
	struct cand *c = s->cand;
	int64_t best = 0;
	for (int64_t i = 1; i < n; i++)
		if (cand_before(&c[i], &c[best]))
			best = i;
	struct cand t = c[0];
	c[0] = c[best];
	c[best] = t;
	if (s->p.min_p <= 0.0f)
		return n;
	const float floor_l = c[0].logit + logf(s->p.min_p);
	int64_t keep = 1;
	for (int64_t i = 1; i < n; i++)
		if (c[i].logit >= floor_l)
			c[keep++] = c[i];
	return keep;
}

int64_t sampler_dist(struct sampler *s, float *logits)
{
	const int64_t V = s->n_vocab;
	if (penalties_on(&s->p))
		apply_penalties(s, logits);
	if (s->p.temperature <= 0.0f) {
		int64_t best = 0;
		for (int64_t i = 1; i < V; i++)
			if (logits[i] > logits[best])
				best = i;
		s->n_cand = 1;
		s->cand_ids[0] = (int32_t)best;
		s->cand_probs[0] = 1.0f;
		return 1;
	}
	/* tokens masked to -inf (grammars, logit_bias) are never candidates */
	int64_t n = 0;
	for (int64_t i = 0; i < V; i++)
		if (logits[i] > -INFINITY)
			s->cand[n++] = (struct cand){ logits[i], (int32_t)i };
	if (n == 0) /* everything masked: fall back to all (the caller's problem) */
		for (int64_t i = 0; i < V; i++)
			s->cand[n++] = (struct cand){ 0.0f, (int32_t)i };
	if (s->p.top_k > 0 && s->p.top_k < n) {
		select_top_k(s->cand, n, s->p.top_k);
		n = s->p.top_k;
	}
	if (s->p.top_p < 1.0f) {
		sort_cands(s->cand, n);
		n = truncate_p(s, n);
	} else {
		n = truncate_unsorted(s, n);
	}
	softmax(s->cand, n, s->p.temperature, s->cand_probs);
	for (int64_t i = 0; i < n; i++)
		s->cand_ids[i] = s->cand[i].id;
	s->n_cand = n;
	return n;
}

const struct sample_params *sampler_params(const struct sampler *s) { return &s->p; }

double sampler_uniform(struct sampler *s) { return rng_uniform(s->rng); }

void sampler_rng_get(const struct sampler *s, uint64_t state[4])
{
	memcpy(state, s->rng, sizeof s->rng);
}

void sampler_rng_set(struct sampler *s, const uint64_t state[4])
{
	memcpy(s->rng, state, sizeof s->rng);
}

int32_t sampler_draw(struct sampler *s)
{
	if (s->p.temperature <= 0.0f)
		return s->cand_ids[0]; /* greedy draws no random number */
	double r = rng_uniform(s->rng), cum = 0;
	int64_t pick = s->n_cand - 1;
	for (int64_t i = 0; i < s->n_cand; i++) {
		cum += s->cand_probs[i];
		if (r < cum) {
			pick = i;
			break;
		}
	}
	return s->cand_ids[pick];
}

bool sampler_is_plain_greedy(const struct sampler *s)
{
	return s->p.temperature <= 0.0f && !penalties_on(&s->p);
}

int32_t sampler_take_argmax(struct sampler *s, int32_t argmax)
{
	s->n_cand = 1;
	s->cand_ids[0] = argmax;
	s->cand_probs[0] = 1.0f;
	return argmax;
}

int32_t sampler_sample(struct sampler *s, float *logits)
{
	sampler_dist(s, logits);
	return sampler_draw(s);
}

int64_t sampler_candidates(const struct sampler *s, const int32_t **ids, const float **probs)
{
	*ids = s->cand_ids;
	*probs = s->cand_probs;
	return s->n_cand;
}
