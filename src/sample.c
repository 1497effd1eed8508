/* sample.c — the sampling chain (see sample.h).
 *
 * Penalty counts are kept incrementally: a ring of the last N accepted
 * tokens and a per-token count array, so applying penalties costs O(N), not
 * O(V). A row is 262k logits on the default model, and the engine samples
 * its rows one after another on one thread, so each stage touches the
 * whole row as few times as it can:
 *  - top-k keeps a heap of the k best while one pass compares each logit
 *    with the heap's worst (after the first few thousand logits almost
 *    none gets in), then sorts the k;
 *  - top-p without top-k does not sort the row (a heapsort of 262k
 *    candidates took ~40 ms): a histogram of exp(l - max), 8 bins an
 *    octave, of the weights that can matter says in which bin the cut
 *    lies, and only that bin's tokens are sorted (dist_top_p);
 *  - the scans for the few entries past a threshold (top-k's heap, the
 *    cuts) go 8 or 16 at a time (ops_first_above, ops_collect_above);
 *  - the exponentials come 8 at a time with their sums by blocks of
 *    OPS_EXP_BLOCK (ops_exp_blocks), which the draw's search skips whole;
 *  - the draw works on those unnormalized weights; probabilities are made
 *    only when asked for (sampler_candidates: speculative decoding);
 *  - with neither top-k nor top-p nor a mask, the candidates are the
 *    vocabulary in order: their ids are a table made once.
 * Sums are in double in a fixed order, so a row's distribution and draw
 * depend on nothing but the row and the random state.
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
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "mem.h"
#include "ops.h"

struct cand {
	float logit;
	int32_t id;
};

struct sampler {
	struct sample_params p;
	int64_t n_vocab;
	uint64_t rng[4];
	/* the candidate buffers (shared by sampler_create_sharing) */
	struct cand *cand;      /* [V] top-k's heap, top-p's sorted prefix */
	int32_t *cand_ids;      /* [V] ids of the candidates (unless ids is iota) */
	const int32_t *iota;    /* [V] 0, 1, ..., V - 1 */
	float *cand_w;          /* [V] their weights exp((l - l_max) / T); scratch before */
	float *cand_p;          /* [V] their probabilities, made by sampler_candidates */
	double *cand_blocks;    /* [V / OPS_EXP_BLOCK + 1] sums of cand_w by blocks */
	bool borrowed;          /* they belong to another sampler */
	/* the last distribution */
	const int32_t *ids;     /* cand_ids or iota */
	int64_t n_cand;
	double total;           /* sum of the weights */
	bool normalized;        /* cand_p holds them */
	int32_t *counts;        /* [V] occurrences in the window */
	int32_t *ring;          /* [penalty_last_n] */
	uint8_t *prompt_seen;   /* [V] tokens of the prompt (repetition penalty only) */
	bool any_prompt;
	int64_t ring_n, ring_head;
};

uint64_t sample_seed_random(void)
{
	uint64_t s = 0;
	if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s)
		s = 0;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return s ^ ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^
	       ((uint64_t)getpid() << 32);
}

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
	int32_t *iota = ing_malloc_array((size_t)n_vocab, sizeof *iota);
	s->iota = iota;
	s->cand_w = ing_calloc((size_t)n_vocab, sizeof *s->cand_w);
	s->cand_p = ing_calloc((size_t)n_vocab, sizeof *s->cand_p);
	s->cand_blocks = ing_calloc((size_t)(n_vocab / OPS_EXP_BLOCK + 1), sizeof *s->cand_blocks);
	if (!s->cand || !s->cand_ids || !iota || !s->cand_w || !s->cand_p || !s->cand_blocks) {
		sampler_free(s);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	for (int64_t i = 0; i < n_vocab; i++)
		iota[i] = (int32_t)i;
	s->ids = s->cand_ids;
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
	s->iota = owner->iota;
	s->cand_w = owner->cand_w;
	s->cand_p = owner->cand_p;
	s->cand_blocks = owner->cand_blocks;
	s->borrowed = true;
	s->ids = s->cand_ids;
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
		ing_free((void *)s->iota);
		ing_free(s->cand_w);
		ing_free(s->cand_p);
		ing_free(s->cand_blocks);
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

static void heapify(struct cand *c, int64_t n)
{
	for (int64_t i = n / 2 - 1; i >= 0; i--)
		sift_down(c, i, n);
}

/* The k best candidates (k < their number), sorted, into s->cand: a heap
 * of the k best so far, its worst at the root, which one pass over the
 * row replaces whenever a logit beats it. */
static int64_t cands_top_k(struct sampler *s, const float *l, int64_t k)
{
	struct cand *h = s->cand;
	int64_t m = 0, i = 0;
	for (; m < k; i++)
		if (l[i] > -INFINITY)
			h[m++] = (struct cand){ l[i], (int32_t)i };
	heapify(h, k);
	float worst = h[0].logit;
	for (;; i++) { /* a tie loses: its id is larger */
		i += ops_first_above(l + i, s->n_vocab - i, worst);
		if (i >= s->n_vocab)
			break;
		h[0] = (struct cand){ l[i], (int32_t)i };
		sift_down(h, 0, k);
		worst = h[0].logit;
	}
	sort_cands(h, k);
	return k;
}

/* min-p's floor: l >= max + log(min_p) keeps exp(l - max) >= min_p */
static float min_p_floor(const struct sampler *s, float mx)
{
	return s->p.min_p > 0.0f ? mx + logf(s->p.min_p) : -INFINITY;
}

/* Of the n sorted candidates (top-k's), how many top-p and min-p keep,
 * judged on the distribution at temperature 1: top-p the shortest prefix
 * whose weights exp(l - l_0) sum (in double, in order) to top_p of the
 * n's; min-p those with l >= l_0 + log(min_p), dist_all's test. */
static int64_t truncate_sorted(struct sampler *s, int64_t n)
{
	float *e = s->cand_w;
	int64_t keep = n;
	if (s->p.top_p < 1.0f) {
		for (int64_t i = 0; i < n; i++)
			e[i] = s->cand[i].logit;
		const double want = (double)s->p.top_p *
				    ops_exp_blocks(e, e, n, s->cand[0].logit, 1.0f, NULL);
		double cum = 0;
		for (int64_t i = 0; i < n; i++) {
			cum += e[i];
			if (cum >= want) {
				keep = i + 1;
				break;
			}
		}
	}
	const float floor_l = min_p_floor(s, s->cand[0].logit); /* -inf: keeps all */
	int64_t i = 1;
	while (i < keep && s->cand[i].logit >= floor_l)
		i++;
	return i;
}

/* The final distribution over the first keep sorted candidates. */
static int64_t dist_sorted(struct sampler *s, int64_t keep)
{
	for (int64_t i = 0; i < keep; i++) {
		s->cand_ids[i] = s->cand[i].id;
		s->cand_w[i] = s->cand[i].logit;
	}
	s->ids = s->cand_ids;
	s->n_cand = keep;
	s->total = ops_exp_blocks(s->cand_w, s->cand_w, keep, s->cand[0].logit,
				  s->p.temperature, s->cand_blocks);
	return keep;
}

/* The final distribution over the tokens with l > cut, or l == cut and
 * id <= tie_id, in vocabulary order (cut -inf: every unmasked token). */
static int64_t dist_above(struct sampler *s, const float *l, float mx, float cut, int32_t tie_id)
{
	const float below = cut > -INFINITY ? nextafterf(cut, -INFINITY) : -INFINITY;
	int32_t *ids = s->cand_ids;
	const int64_t m = ops_collect_above(l, s->n_vocab, below, ids);
	int64_t n = 0;
	for (int64_t j = 0; j < m; j++) {
		const int32_t i = ids[j];
		if (l[i] == cut && i > tie_id)
			continue;
		ids[n] = i;
		s->cand_w[n++] = l[i];
	}
	s->ids = ids;
	s->n_cand = n;
	s->total = ops_exp_blocks(s->cand_w, s->cand_w, n, mx, s->p.temperature, s->cand_blocks);
	return n;
}

/* The final distribution without top-k or top-p: the candidates in
 * vocabulary order (min-p's floor applied). */
static int64_t dist_all(struct sampler *s, const float *l, int64_t n_valid, int64_t best)
{
	const int64_t V = s->n_vocab;
	const float mx = l[best];
	if (n_valid == V && s->p.min_p <= 0.0f) {
		s->ids = s->iota;
		s->n_cand = V;
		s->total = ops_exp_blocks(s->cand_w, l, V, mx, s->p.temperature, s->cand_blocks);
		return V;
	}
	return dist_above(s, l, mx, min_p_floor(s, mx), INT32_MAX);
}

/* Top-p's bins: a weight e in [0, 1] by the top bits of its float (the
 * binary exponent and 3 bits of mantissa: 8 bins an octave), an order
 * that follows e's. */
enum { TOP_P_SHIFT = 20, TOP_P_BINS = 1024 };

static inline uint32_t top_p_bin(float e)
{
	uint32_t bits;
	memcpy(&bits, &e, sizeof bits);
	bits >>= TOP_P_SHIFT;
	return bits < TOP_P_BINS ? bits : TOP_P_BINS - 1;
}

/* Top-p without top-k, then min-p: the shortest prefix of the row sorted
 * by logit (ties: lower id first) whose weights exp(l - max) sum to top_p
 * of the row's, found without sorting the row (a heapsort of 262k
 * candidates took ~40 ms). The weights at or below t0 = (1 - top_p) / 2
 * of the mass over V add up to less than the mass past top_p, so the cut
 * lies above t0: only the weights above it (on a model's row, a few
 * percent) go into a histogram, which says in which bin the running sum
 * from the top passes top_p; only that bin's tokens are sorted, and the
 * sum goes on through them from the bins above. The cut (its last token's
 * logit and id) then selects the candidates in vocabulary order. The
 * bins' sums follow another order than the sorted one: a cut within
 * rounding (~1e-11 of the mass) of a bin's edge may fall one token off. */
static int64_t dist_top_p(struct sampler *s, const float *l, int64_t best)
{
	const int64_t V = s->n_vocab;
	const float mx = l[best];
	float *e = s->cand_w; /* by token id, as scratch */
	int32_t *idx = s->cand_ids;
	const double total = ops_exp_blocks(e, l, V, mx, 1.0f, NULL);
	const double want = (double)s->p.top_p * total;
	const int64_t n = ops_collect_above(e, V, (float)((total - want) * 0.5 / (double)V), idx);
	double h[2][TOP_P_BINS]; /* two, so that runs of one bin do not chain their adds */
	memset(h, 0, sizeof h);
	for (int64_t j = 0; j < n; j++)
		h[j & 1][top_p_bin(e[idx[j]])] += e[idx[j]];
	double acc = 0;
	int bin = TOP_P_BINS - 1;
	for (; bin > 0; bin--) {
		const double in = h[0][bin] + h[1][bin];
		if (acc + in >= want)
			break;
		acc += in;
	}
	float cut = -INFINITY; /* rounding kept the sum below want: every token */
	int32_t tie_id = INT32_MAX;
	if (bin > 0) {
		int64_t m = 0;
		for (int64_t j = 0; j < n; j++)
			if (top_p_bin(e[idx[j]]) == (uint32_t)bin)
				s->cand[m++] = (struct cand){ l[idx[j]], idx[j] };
		sort_cands(s->cand, m);
		for (int64_t j = 0; j < m; j++) { /* the last one if rounding runs past */
			cut = s->cand[j].logit;
			tie_id = s->cand[j].id;
			acc += e[s->cand[j].id];
			if (acc >= want)
				break;
		}
	}
	const float floor_l = min_p_floor(s, mx);
	if (floor_l > cut) {
		cut = floor_l;
		tie_id = INT32_MAX;
	}
	return dist_above(s, l, mx, cut, tie_id);
}

int64_t sampler_dist(struct sampler *s, float *logits)
{
	const int64_t V = s->n_vocab;
	if (penalties_on(&s->p))
		apply_penalties(s, logits);
	s->normalized = false;
	if (s->p.temperature <= 0.0f) {
		int64_t best = 0;
		for (int64_t i = 1; i < V; i++)
			if (logits[i] > logits[best])
				best = i;
		sampler_take_argmax(s, (int32_t)best);
		return 1;
	}
	/* tokens masked to -inf (grammars, logit_bias) are never candidates;
	 * all of them masked: every token, uniformly (the caller's problem) */
	int64_t best;
	int64_t n_valid = ops_logits_scan(logits, V, &best);
	if (n_valid == 0) {
		memset(logits, 0, (size_t)V * sizeof *logits);
		n_valid = V;
	} else if (logits[best] == INFINITY) { /* certain: the +inf ones, uniformly */
		for (int64_t i = 0; i < V; i++)
			logits[i] = logits[i] == INFINITY ? 0.0f : -INFINITY;
		n_valid = ops_logits_scan(logits, V, &best);
	}
	if (s->p.top_k > 0 && s->p.top_k < n_valid) {
		const int64_t k = cands_top_k(s, logits, s->p.top_k);
		return dist_sorted(s, truncate_sorted(s, k));
	}
	if (s->p.top_p < 1.0f)
		return dist_top_p(s, logits, best);
	return dist_all(s, logits, n_valid, best);
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

/* The candidate at which the running sum of the weights first passes
 * target: whole blocks are skipped by their sums, then the weights are
 * added one by one from the block the sums point at (on into the next
 * blocks if rounding ran past). Never one of weight 0. */
static int64_t draw_index(const struct sampler *s, double target)
{
	const float *w = s->cand_w;
	const int64_t n = s->n_cand, nb = (n + OPS_EXP_BLOCK - 1) / OPS_EXP_BLOCK;
	double cum = 0;
	int64_t b = 0;
	for (; b < nb - 1 && !(target < cum + s->cand_blocks[b]); b++)
		cum += s->cand_blocks[b];
	int64_t last = -1;
	for (int64_t i = b * OPS_EXP_BLOCK; i < n; i++) {
		if (!(w[i] > 0.0f))
			continue;
		last = i;
		cum += w[i];
		if (target < cum)
			return i;
	}
	for (int64_t i = b * OPS_EXP_BLOCK - 1; last < 0 && i >= 0; i--)
		if (w[i] > 0.0f)
			last = i;
	return last < 0 ? 0 : last; /* rounding at the very top of the range */
}

int32_t sampler_draw(struct sampler *s)
{
	if (s->p.temperature <= 0.0f)
		return s->ids[0]; /* greedy draws no random number */
	return s->ids[draw_index(s, rng_uniform(s->rng) * s->total)];
}

bool sampler_is_plain_greedy(const struct sampler *s)
{
	return s->p.temperature <= 0.0f && !penalties_on(&s->p);
}

int32_t sampler_take_argmax(struct sampler *s, int32_t argmax)
{
	s->n_cand = 1;
	s->cand_ids[0] = argmax;
	s->cand_w[0] = 1.0f;
	s->cand_blocks[0] = 1.0;
	s->total = 1.0;
	s->ids = s->cand_ids;
	s->normalized = false;
	return argmax;
}

int32_t sampler_sample(struct sampler *s, float *logits)
{
	sampler_dist(s, logits);
	return sampler_draw(s);
}

int64_t sampler_candidates(struct sampler *s, const int32_t **ids, const float **probs)
{
	if (!s->normalized) {
		const double inv = 1.0 / s->total;
		for (int64_t i = 0; i < s->n_cand; i++)
			s->cand_p[i] = (float)(s->cand_w[i] * inv);
		s->normalized = true;
	}
	*ids = s->ids;
	*probs = s->cand_p;
	return s->n_cand;
}
