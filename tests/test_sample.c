/* test_sample.c — the sampling chain on synthetic logits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mem.h"
#include "sample.h"

#define V 16

static struct sampler *make(struct sample_params p)
{
	struct sampler *s;
	ing_err err = { 0 };
	int rc = sampler_create(&p, V, &s, &err);
	CHECK(rc == ING_OK, "sampler_create: %s", err.msg);
	return rc ? NULL : s;
}

/* logits where token i has logit log(w[i]) so probabilities are w/sum(w) */
static void set_logits(float *l, const float *w)
{
	for (int i = 0; i < V; i++)
		l[i] = w[i] > 0 ? logf(w[i]) : -INFINITY;
}

static int in_set(const int32_t *ids, int64_t n, int32_t t)
{
	for (int64_t i = 0; i < n; i++)
		if (ids[i] == t)
			return 1;
	return 0;
}

static void test_greedy(void)
{
	struct sample_params p = sample_params_default();
	p.temperature = 0;
	struct sampler *s = make(p);
	float l[V] = { 0 };
	l[7] = 3;
	l[3] = 3; /* tie: lowest id wins */
	CHECK(sampler_sample(s, l) == 3, "greedy tie -> lowest id");
	sampler_free(s);
}

static void test_truncation(void)
{
	/* probabilities 0.4 0.3 0.2 0.05 0.05 0 ... */
	const float w[V] = { 0.4f, 0.3f, 0.2f, 0.05f, 0.05f };
	float l[V];
	const int32_t *ids;
	const float *pr;
	struct sample_params p = { .temperature = 1, .top_p = 1, .repeat_penalty = 1, .seed = 1 };

	p.top_k = 2;
	struct sampler *s = make(p);
	set_logits(l, w);
	sampler_sample(s, l);
	int64_t n = sampler_candidates(s, &ids, &pr);
	CHECK(n == 2 && in_set(ids, n, 0) && in_set(ids, n, 1), "top-k 2 keeps {0,1}, got %lld", (long long)n);
	CHECK(fabsf(pr[0] - 4.0f / 7) < 1e-5f, "top-k renormalizes: %g", pr[0]);
	sampler_free(s);

	p.top_k = 0;
	p.top_p = 0.75f; /* 0.4 + 0.3 = 0.7 < 0.75 -> needs the third */
	s = make(p);
	set_logits(l, w);
	sampler_sample(s, l);
	n = sampler_candidates(s, &ids, &pr);
	CHECK(n == 3 && in_set(ids, n, 2), "top-p 0.75 keeps 3, got %lld", (long long)n);
	sampler_free(s);

	p.top_p = 1;
	p.min_p = 0.45f; /* keep p >= 0.18 */
	s = make(p);
	set_logits(l, w);
	sampler_sample(s, l);
	n = sampler_candidates(s, &ids, &pr);
	CHECK(n == 3 && !in_set(ids, n, 3), "min-p 0.45 keeps 3, got %lld", (long long)n);
	sampler_free(s);
}

static void test_seed_and_distribution(void)
{
	const float w[V] = { 0.5f, 0.25f, 0.25f };
	struct sample_params p = { .temperature = 1, .top_p = 1, .repeat_penalty = 1, .seed = 42 };
	struct sampler *a = make(p), *b = make(p);
	int count[3] = { 0 }, same = 1;
	float l[V];
	for (int i = 0; i < 20000; i++) {
		set_logits(l, w);
		int32_t x = sampler_sample(a, l);
		set_logits(l, w);
		int32_t y = sampler_sample(b, l);
		same &= x == y;
		if (x >= 0 && x < 3)
			count[x]++;
	}
	CHECK(same, "same seed, same tokens");
	CHECK(abs(count[0] - 10000) < 400 && abs(count[1] - 5000) < 350,
	      "frequencies follow p: %d %d %d", count[0], count[1], count[2]);
	sampler_free(a);
	sampler_free(b);
	p.seed = 43;
	struct sampler *c = make(p);
	p.seed = 42;
	struct sampler *d = make(p);
	int diff = 0;
	for (int i = 0; i < 64; i++) {
		set_logits(l, w);
		int32_t x = sampler_sample(c, l);
		set_logits(l, w);
		diff |= x != sampler_sample(d, l);
	}
	CHECK(diff, "different seeds differ");
	sampler_free(c);
	sampler_free(d);
}

static void test_penalties(void)
{
	struct sample_params p = { .temperature = 0, .top_p = 1, .repeat_penalty = 2,
				   .penalty_last_n = 4, .presence_penalty = 0.5f,
				   .frequency_penalty = 0.25f };
	struct sampler *s = make(p);
	sampler_accept(s, 1);
	sampler_accept(s, 1);
	sampler_accept(s, 2);
	float l[V] = { 0 };
	l[1] = 4;
	l[2] = -1;
	sampler_sample(s, l);
	CHECK(fabsf(l[1] - (4.0f / 2 - 2 * 0.25f - 0.5f)) < 1e-6f, "penalized positive logit %g", l[1]);
	CHECK(fabsf(l[2] - (-1.0f * 2 - 0.25f - 0.5f)) < 1e-6f, "penalized negative logit %g", l[2]);
	/* the window forgets: 4 more tokens push out both 1s */
	for (int i = 0; i < 4; i++)
		sampler_accept(s, 5);
	float m[V] = { 0 };
	m[1] = 4;
	sampler_sample(s, m);
	CHECK(m[1] == 4, "token outside the window is not penalized (%g)", m[1]);
	sampler_free(s);
}

/* vLLM/OpenAI semantics: a prompt token gets the repetition penalty only;
 * presence and frequency count generated tokens. */
static void test_prompt_penalties(void)
{
	struct sample_params p = { .temperature = 0, .top_p = 1, .repeat_penalty = 2,
				   .penalty_last_n = 8, .presence_penalty = 0.5f,
				   .frequency_penalty = 0.25f };
	struct sampler *s = make(p);
	sampler_accept_prompt(s, 3);
	sampler_accept_prompt(s, 4);
	sampler_accept(s, 4); /* 4 also generated once */
	float l[V] = { 0 };
	l[3] = 4;
	l[4] = 4;
	l[5] = 4;
	sampler_sample(s, l);
	CHECK(l[3] == 2.0f, "prompt-only token: repetition penalty only (%g)", l[3]);
	CHECK(fabsf(l[4] - (2.0f - 0.25f - 0.5f)) < 1e-6f, "generated token: all penalties once (%g)", l[4]);
	CHECK(l[5] == 4.0f, "unseen token untouched (%g)", l[5]);
	sampler_free(s);
}

static void test_params(void)
{
	ing_err err = { 0 };
	struct sample_params p = sample_params_default();
	p.top_p = 1.5f;
	CHECK(sample_params_check(&p, &err) == ING_ERR_RANGE && strstr(err.msg, "top_p"), "top_p > 1");
	p = sample_params_default();
	p.temperature = NAN;
	CHECK(sample_params_check(&p, &err) == ING_ERR_RANGE, "NaN temperature");
	p = sample_params_default();
	p.repeat_penalty = 0;
	CHECK(sample_params_check(&p, &err) == ING_ERR_RANGE, "zero repeat penalty");
}

/* Logits masked to -inf (grammar constraints) are never drawn, whatever
 * the truncation settings, and greedy skips them. */
static void test_masked(void)
{
	struct sample_params p = sample_params_default();
	p.temperature = 1.5f;
	p.top_k = 0;
	p.top_p = 1.0f;
	p.min_p = 0.0f;
	for (int greedy = 0; greedy < 2; greedy++) {
		p.temperature = greedy ? 0.0f : 1.5f;
		struct sampler *s = make(p);
		if (!s)
			return;
		int bad = 0;
		for (int it = 0; it < 2000; it++) {
			float l[V];
			for (int i = 0; i < V; i++)
				l[i] = (i == 3 || i == 11) ? -5.0f : -INFINITY;
			int32_t t = sampler_sample(s, l);
			bad += t != 3 && t != 11;
		}
		CHECK(bad == 0, "masked tokens drawn %d times (greedy %d)", bad, greedy);
		sampler_free(s);
	}
	/* +inf logits are certain: only they are drawn, each of them */
	p.temperature = 1.0f;
	p.top_p = 0.9f;
	struct sampler *s = make(p);
	if (!s)
		return;
	int hits[V] = { 0 };
	for (int it = 0; it < 400; it++) {
		float l[V];
		for (int i = 0; i < V; i++)
			l[i] = (float)i;
		l[4] = l[9] = INFINITY;
		hits[sampler_sample(s, l)]++;
	}
	CHECK(hits[4] + hits[9] == 400 && hits[4] > 100 && hits[9] > 100,
	      "+inf logits drawn uniformly (%d, %d of 400)", hits[4], hits[9]);
	sampler_free(s);
}

/* Samplers sharing candidate buffers, used in turn, draw what samplers of
 * their own draw; a generator state moved to another sampler carries its
 * random stream on. */
static void test_sharing_and_rng(void)
{
	const float w[V] = { 0.4f, 0.3f, 0.2f, 0.1f };
	struct sample_params p = { .temperature = 1, .top_p = 1, .repeat_penalty = 1.5f,
				   .penalty_last_n = 8, .seed = 7 };
	struct sample_params q = p;
	q.seed = 8;
	struct sampler *s[4] = { make(p), make(q), make(p), NULL }; /* own, own, owner, sharer */
	ing_err err = { 0 };
	CHECK(s[2] && sampler_create_sharing(&q, s[2], &s[3], &err) == ING_OK, "%s", err.msg);
	int same = 1;
	float l[V];
	for (int i = 0; i < 200 && s[0] && s[1] && s[3]; i++) {
		int32_t x[4];
		for (int j = 0; j < 4; j++) {
			set_logits(l, w);
			x[j] = sampler_sample(s[j], l);
			sampler_accept(s[j], x[j]);
		}
		same &= x[0] == x[2] && x[1] == x[3];
	}
	CHECK(same, "shared candidate buffers change no draw");
	for (int j = 3; j >= 0; j--)
		sampler_free(s[j]);
	p.repeat_penalty = 1;
	q.repeat_penalty = 1;
	struct sampler *a = make(p), *b = make(q);
	if (!a || !b)
		return;
	for (int i = 0; i < 10; i++) {
		set_logits(l, w);
		sampler_sample(a, l);
	}
	uint64_t st[4];
	sampler_rng_get(a, st);
	sampler_rng_set(b, st);
	same = 1;
	for (int i = 0; i < 100; i++) {
		set_logits(l, w);
		int32_t x = sampler_sample(a, l);
		set_logits(l, w);
		same &= x == sampler_sample(b, l);
	}
	CHECK(same, "the random stream moves with its state");
	sampler_free(a);
	sampler_free(b);
}

/* ---- a vocabulary of model size against a plain reference ---- */

#define BIG_V 70001 /* past the 64-weight blocks, with a short last one */

struct ref_cand {
	float l;
	int32_t id;
};

static int ref_order(const void *a, const void *b)
{
	const struct ref_cand *x = a, *y = b;
	if (x->l != y->l)
		return x->l > y->l ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* The chain as sample.h states it, the obvious way: every candidate
 * sorted, the truncations on the distribution at temperature 1, the
 * final softmax at the temperature, in long double. Returns how many are
 * kept; c[0..kept) the kept (sorted), pr their probabilities. */
static int64_t ref_dist(const float *l, int64_t n_vocab, const struct sample_params *p,
			struct ref_cand *c, long double *pr)
{
	int64_t n = 0;
	for (int64_t i = 0; i < n_vocab; i++)
		if (l[i] > -INFINITY)
			c[n++] = (struct ref_cand){ l[i], (int32_t)i };
	qsort(c, (size_t)n, sizeof *c, ref_order);
	if (p->top_k > 0 && p->top_k < n)
		n = p->top_k;
	long double sum = 0;
	for (int64_t i = 0; i < n; i++)
		sum += expl((long double)c[i].l - c[0].l);
	int64_t keep = n;
	if (p->top_p < 1.0f) {
		long double cum = 0;
		for (int64_t i = 0; i < n; i++) {
			cum += expl((long double)c[i].l - c[0].l) / sum;
			if (cum >= p->top_p) {
				keep = i + 1;
				break;
			}
		}
	}
	if (p->min_p > 0.0f) {
		int64_t i = 1;
		while (i < keep && expl((long double)c[i].l - c[0].l) >= p->min_p)
			i++;
		keep = i;
	}
	long double z = 0;
	for (int64_t i = 0; i < keep; i++)
		z += pr[i] = expl(((long double)c[i].l - c[0].l) / p->temperature);
	for (int64_t i = 0; i < keep; i++)
		pr[i] /= z;
	return keep;
}

/* Logits of three shapes: a model's (a few high, a long tail), flat, and
 * mostly masked (a grammar), with a NaN (but the flat one) and ties. */
static void big_logits(float *l, int shape)
{
	uint64_t r = 0x9e3779b97f4a7c15ull * (uint64_t)(shape + 1);
	for (int64_t i = 0; i < BIG_V; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		const float u = (float)(r >> 40) / (float)(1 << 24); /* [0, 1) */
		l[i] = shape == 1 ? 4.0f * u : -6.0f - 12.0f * u;
		if (shape == 2 && i % 50 != 7)
			l[i] = -INFINITY;
	}
	for (int i = 0; i < 40 && shape != 1; i++) /* the head: 40 likely tokens */
		l[(i * 7919) % BIG_V] = 9.0f - 0.25f * (float)i;
	l[BIG_V - 1] = shape == 1 ? 4.0f : l[(3 * 7919) % BIG_V]; /* a tie across the row */
	if (shape != 1) /* the flat row is all candidates (no mask, no NaN) */
		l[BIG_V / 2] = NAN;
}

static void test_big_vocab(void)
{
	static float l[BIG_V], l2[BIG_V];
	static struct ref_cand c[BIG_V];
	static long double pr[BIG_V];
	static const struct {
		float temperature, top_p, min_p;
		int32_t top_k;
	} grid[] = {
		{ 1.0f, 1.0f, 0.0f, 0 },     { 0.7f, 1.0f, 0.0f, 0 },   { 0.8f, 0.95f, 0.05f, 40 },
		{ 1.0f, 0.9f, 0.0f, 0 },     { 1.3f, 0.5f, 0.0f, 0 },   { 1.0f, 0.999f, 0.0f, 0 },
		{ 1.0f, 1.0f, 0.001f, 0 },   { 0.5f, 1.0f, 0.0f, 1000 }, { 1.0f, 0.9f, 0.0f, 5000 },
		{ 0.05f, 1.0f, 0.0f, 0 },    { 1.0f, 1.0f, 0.0f, 1 },
		{ 1.0f, 1.0f, 0.0f, 4 }, /* the 4th best ties with the last token */
		{ 1.0f, 0.99999f, 0.0f, 0 }, { 0.9f, 0.99999994f, 0.0f, 0 }, /* the far tail */
		{ 1.0f, 0.7f, 0.2f, 0 },
	};
	int bad_set = 0, bad_prob = 0, bad_order = 0, cases = 0;
	for (int shape = 0; shape < 3; shape++) {
		big_logits(l, shape);
		for (int g = 0; g < (int)(sizeof grid / sizeof *grid); g++) {
			struct sample_params p = { .temperature = grid[g].temperature,
						   .top_k = grid[g].top_k, .top_p = grid[g].top_p,
						   .min_p = grid[g].min_p, .repeat_penalty = 1,
						   .seed = 3 };
			struct sampler *s;
			ing_err err = { 0 };
			if (sampler_create(&p, BIG_V, &s, &err) != ING_OK) {
				CHECK(0, "sampler_create: %s", err.msg);
				return;
			}
			memcpy(l2, l, sizeof l);
			const int64_t n = sampler_dist(s, l2);
			const int32_t *ids;
			const float *probs;
			CHECK(sampler_candidates(s, &ids, &probs) == n, "candidates");
			memcpy(l2, l, sizeof l);
			const int64_t want = ref_dist(l2, BIG_V, &p, c, pr);
			cases++;
			if (n != want) {
				bad_set++;
				fprintf(stderr, "shape %d case %d: %lld candidates, want %lld\n",
					shape, g, (long long)n, (long long)want);
				sampler_free(s);
				continue;
			}
			/* the same ids with the same probabilities (top-k's in
			 * decreasing order, the others in id order) */
			static long double by_id[BIG_V];
			static char kept[BIG_V];
			memset(kept, 0, sizeof kept);
			for (int64_t i = 0; i < want; i++) {
				kept[c[i].id] = 1;
				by_id[c[i].id] = pr[i];
			}
			int64_t valid = 0;
			for (int64_t i = 0; i < BIG_V; i++)
				valid += l[i] > -INFINITY; /* NaN: no */
			const bool sorted = p.top_k > 0 && p.top_k < valid;
			for (int64_t i = 0; i < n; i++) {
				const int32_t t = ids[i];
				if (!kept[t]) {
					bad_set++;
					break;
				}
				bad_prob += fabsl(probs[i] - by_id[t]) > 2e-6L * by_id[t] + 1e-12L;
				bad_order += sorted ? t != c[i].id : i > 0 && t <= ids[i - 1];
			}
			sampler_free(s);
		}
	}
	CHECK(bad_set == 0 && bad_prob == 0 && bad_order == 0,
	      "%d distributions as the reference's: %d candidate sets, %d probabilities, %d "
	      "orders differ", cases, bad_set, bad_prob, bad_order);
}

/* Draws over a model-size row: the frequencies of the head tokens within
 * five standard deviations of their probabilities, no masked or NaN token
 * ever drawn, and dist + draw the same tokens as sample from one seed. */
static void test_big_draws(void)
{
	static float l[BIG_V], l2[BIG_V];
	static int hits[BIG_V];
	struct sample_params p = { .temperature = 1.0f, .top_p = 1.0f, .repeat_penalty = 1,
				   .seed = 11 };
	struct sampler *s, *t;
	ing_err err = { 0 };
	if (sampler_create(&p, BIG_V, &s, &err) || sampler_create(&p, BIG_V, &t, &err)) {
		CHECK(0, "sampler_create: %s", err.msg);
		return;
	}
	for (int shape = 0; shape < 3; shape++) {
		big_logits(l, shape);
		memset(hits, 0, sizeof hits);
		enum { N = 4000 };
		int same = 1, masked = 0;
		for (int it = 0; it < N; it++) {
			memcpy(l2, l, sizeof l);
			const int32_t x = sampler_sample(s, l2);
			memcpy(l2, l, sizeof l);
			sampler_dist(t, l2);
			const int32_t *ids;
			const float *probs;
			sampler_candidates(t, &ids, &probs);
			same &= sampler_draw(t) == x;
			hits[x]++;
			masked += !(l[x] > -INFINITY);
		}
		memcpy(l2, l, sizeof l);
		const int64_t n = sampler_dist(s, l2);
		const int32_t *ids;
		const float *probs;
		sampler_candidates(s, &ids, &probs);
		int bad = 0;
		double mass = 0, group_q[16] = { 0 };
		int group_hits[16] = { 0 };
		for (int64_t i = 0; i < n; i++) {
			const double q = probs[i], sd = sqrt(N * q * (1 - q));
			if (q > 1e-3) /* the tail's tokens: by ranges only */
				bad += fabs(hits[ids[i]] - N * q) > 5 * sd + 1;
			mass += q;
			group_q[ids[i] * 16 / BIG_V] += q; /* and by ranges of ids */
			group_hits[ids[i] * 16 / BIG_V] += hits[ids[i]];
		}
		for (int g = 0; g < 16; g++)
			bad += fabs(group_hits[g] - N * group_q[g]) >
			       5 * sqrt(N * group_q[g] * (1 - group_q[g])) + 1;
		CHECK(same, "shape %d: dist + draw draws what sample draws", shape);
		CHECK(masked == 0, "shape %d: %d masked tokens drawn", shape, masked);
		CHECK(bad == 0 && fabs(mass - 1) < 1e-5, "shape %d: %d frequencies off (mass %.7f)",
		      shape, bad, mass);
	}
	sampler_free(s);
	sampler_free(t);
}

/* One random row's oracle: the row as sampler_sample documents it (NaN
 * masked; none left: all 0; +inf: only those), sorted by logit then id. */
static int64_t rand_row_sorted(const float *l, int64_t n_vocab, float *pre, struct ref_cand *c)
{
	int64_t valid = 0, inf = 0;
	for (int64_t i = 0; i < n_vocab; i++) {
		pre[i] = l[i] != l[i] ? -INFINITY : l[i];
		valid += pre[i] > -INFINITY;
		inf += pre[i] == INFINITY;
	}
	for (int64_t i = 0; i < n_vocab; i++)
		pre[i] = !valid ? 0.0f : !inf ? pre[i] : pre[i] == INFINITY ? 0.0f : -INFINITY;
	int64_t n = 0;
	for (int64_t i = 0; i < n_vocab; i++)
		if (pre[i] > -INFINITY)
			c[n++] = (struct ref_cand){ pre[i], (int32_t)i };
	qsort(c, (size_t)n, sizeof *c, ref_order);
	return n;
}

/* The first i (1-based) where the running sum of w reaches want, else n. */
static int64_t reach(const long double *w, int64_t n, long double want)
{
	long double cum = 0;
	for (int64_t i = 0; i < n; i++)
		if ((cum += w[i]) >= want)
			return i + 1;
	return n;
}

/* Random rows (1 to 2,500 tokens, ties, masked, NaN and +inf entries,
 * rows wholly masked, logits across float's range or tiny) under random
 * settings, against the chain's definition: the candidates are a prefix
 * of the sorted row whose length lies where top-k, top-p and min-p put it
 * (within 1e-6 of the mass and 1e-5 of min-p's logit floor, where rounding
 * may go either way); their probabilities the tempered softmax over them;
 * top-k's in order, the others in id order; a draw one of them. */
static void test_random_rows(void)
{
	enum { MAXV = 2500 };
	static float l[MAXV], row[MAXV], pre[MAXV];
	static struct ref_cand c[MAXV];
	static long double w[MAXV], by_id[MAXV];
	static char kept[MAXV];
	static const float temps[] = { 0.3f, 1.0f, 2.0f }, top_ps[] = { 1.0f, 0.1f, 0.5f, 0.9f,
									0.99f, 0.99999f };
	static const float min_ps[] = { 0.0f, 0.0f, 0.05f, 0.5f, 1.0f };
	uint64_t r = 0x243f6a8885a308d3ull;
	int bad_prefix = 0, bad_len = 0, bad_prob = 0, bad_order = 0, bad_draw = 0, rows = 0;
	for (int t = 0; t < 1500; t++) {
#define RND() (r = r * 6364136223846793005ull + 1442695040888963407ull, r >> 33)
		const int64_t n_vocab = 1 + (int64_t)(RND() % MAXV);
		const int levels = (int)(RND() % 3); /* 0: continuous, else few values: ties */
		/* now and then logits across float's range (differences overflow
		 * to -inf) or tiny ones */
		const bool huge = t % 23 == 4;
		const float spread = huge ? 3e38f : t % 23 == 9 ? 1e-30f : (float)(1 + RND() % 30);
		for (int64_t i = 0; i < n_vocab; i++) {
			float u = (float)(RND() % 100000) / 100000.0f;
			if (levels)
				u = (float)(RND() % (uint64_t)(levels * 4)) / (float)(levels * 4);
			l[i] = huge ? (2.0f * u - 1.0f) * spread : spread * u;
			const uint64_t k = RND() % 1000;
			l[i] = k < (uint64_t)(t % 7) * 120 ? -INFINITY : k == 999 ? NAN : l[i];
		}
		if (t % 97 == 5)
			l[RND() % (uint64_t)n_vocab] = INFINITY;
		if (t % 89 == 3)
			for (int64_t i = 0; i < n_vocab; i++)
				l[i] = -INFINITY;
		struct sample_params p = { .temperature = temps[RND() % 3],
					   .top_p = top_ps[RND() % 6], .min_p = min_ps[RND() % 5],
					   .repeat_penalty = 1, .seed = (uint64_t)t };
		static const int64_t ks[] = { 0, 0, 1, 3, 50 };
		const int64_t kc = (int64_t)(RND() % 7);
		p.top_k = (int32_t)(kc < 5 ? ks[kc] : kc == 5 ? n_vocab - 1 : n_vocab + 5);
		struct sampler *s;
		ing_err err = { 0 };
		if (sampler_create(&p, n_vocab, &s, &err) != ING_OK) {
			CHECK(0, "sampler_create: %s", err.msg);
			return;
		}
		memcpy(row, l, (size_t)n_vocab * sizeof *row);
		const int64_t n = sampler_dist(s, row);
		const int32_t tok = sampler_draw(s);
		const int32_t *ids;
		const float *probs;
		sampler_candidates(s, &ids, &probs);
		const int64_t nc = rand_row_sorted(l, n_vocab, pre, c);
		const bool by_k = p.top_k > 0 && p.top_k < nc;
		const int64_t K = by_k ? p.top_k : nc;
		for (int64_t i = 0; i < K; i++)
			w[i] = expl((long double)c[i].l - c[0].l);
		long double mass = 0;
		for (int64_t i = 0; i < K; i++)
			mass += w[i];
		int64_t lo = K, hi = K;
		if (p.top_p < 1.0f) {
			lo = reach(w, K, p.top_p * mass * (1 - 1e-6L));
			hi = reach(w, K, p.top_p * mass * (1 + 1e-6L));
		}
		if (p.min_p > 0.0f) { /* min-p 1: no rounding, ties with the top stay */
			const long double fl = logl(p.min_p), eps = p.min_p < 1.0f ? 1e-5L : 0;
			int64_t mlo = 1, mhi = 1;
			while (mlo < K && (long double)c[mlo].l - c[0].l >= fl + eps)
				mlo++;
			while (mhi < K && (long double)c[mhi].l - c[0].l >= fl - eps)
				mhi++;
			lo = lo < mlo ? lo : mlo;
			hi = hi < mhi ? hi : mhi;
		}
		rows++;
		if (n < lo || n > hi) {
			bad_len++;
			fprintf(stderr,
				"row %d (V %lld, k %d, p %g, min-p %g): %lld kept, want %lld..%lld\n",
				t, (long long)n_vocab, p.top_k, p.top_p, p.min_p, (long long)n,
				(long long)lo, (long long)hi);
			sampler_free(s);
			continue;
		}
		memset(kept, 0, (size_t)n_vocab);
		long double z = 0;
		for (int64_t i = 0; i < n; i++) {
			kept[c[i].id] = 1;
			z += w[i] = expl(((long double)c[i].l - c[0].l) / p.temperature);
		}
		for (int64_t i = 0; i < n; i++)
			by_id[c[i].id] = w[i] / z;
		int in = 0;
		for (int64_t i = 0; i < n; i++) {
			const int32_t id = ids[i];
			in += kept[id];
			bad_order += by_k ? id != c[i].id : i > 0 && id <= ids[i - 1];
			const long double want = kept[id] ? by_id[id] : 0;
			bad_prob += fabsl(probs[i] - want) > 2e-6L * want + 1e-12L;
		}
		bad_prefix += in != n;
		bad_draw += !(tok >= 0 && tok < n_vocab && kept[tok]);
		sampler_free(s);
#undef RND
	}
	CHECK(bad_len == 0 && bad_prefix == 0 && bad_prob == 0 && bad_order == 0 && bad_draw == 0,
	      "%d random rows as the chain's definition: %d lengths, %d sets, %d probabilities, "
	      "%d orders, %d draws wrong", rows, bad_len, bad_prefix, bad_prob, bad_order,
	      bad_draw);
}

int main(void)
{
	size_t live = ing_mem_live();
	test_greedy();
	test_truncation();
	test_seed_and_distribution();
	test_penalties();
	test_prompt_penalties();
	test_params();
	test_masked();
	test_sharing_and_rng();
	test_big_vocab();
	test_big_draws();
	test_random_rows();
	CHECK(ing_mem_live() == live, "leak: %zu bytes", ing_mem_live() - live);
	return check_summary("test_sample");
}
