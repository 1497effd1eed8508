/* spec.c — the n-gram and suffix drafters (see spec.h). */
#include "spec.h"

#include <string.h>

#include "mem.h"
#include "spec_trie.h"

#define SUFFIX_DEPTH 16      /* longest context a suffix trie remembers */
#define SUFFIX_MIN_PROB 0.1f /* stop drafting below this running product */
#define SUFFIX_LEN_FACTOR 2  /* draft at most this many times the match length */
#define NGRAM_MAX 4
#define NGRAM_MIN 2
#define CACHE_DEFAULT_NODES (1 << 20)

struct spec_cache {
	struct strie t;
};

struct spec_seq {
	enum spec_method method;
	int k_max, k_cap;
	int64_t max_len, n;
	int32_t *tokens;         /* [max_len] */
	struct strie t;          /* SPEC_SUFFIX: this sequence */
	struct spec_cache *cache;
	bool isolated;           /* until the next reset: drafts ignore cache */
};

int spec_method_parse(const char *name)
{
	static const char *const names[] = { "none", "ngram", "suffix", "draft" };
	for (int i = 0; i < 4; i++)
		if (!strcmp(name, names[i]))
			return i;
	return -1;
}

const char *spec_method_name(enum spec_method m)
{
	switch (m) {
	case SPEC_NONE: return "none";
	case SPEC_NGRAM: return "ngram";
	case SPEC_SUFFIX: return "suffix";
	case SPEC_DRAFT: return "draft";
	}
	return "?";
}

/* ---- global cache ---- */

int spec_cache_create(int64_t max_nodes, struct spec_cache **out, ing_err *err)
{
	*out = NULL;
	if (max_nodes <= 0)
		max_nodes = CACHE_DEFAULT_NODES;
	if (max_nodes > (1 << 28))
		return ing_err_set(err, ING_ERR_RANGE, "spec cache: %lld nodes is too many",
				   (long long)max_nodes);
	struct spec_cache *c = ing_calloc(1, sizeof *c);
	if (!c || strie_init(&c->t, (int32_t)max_nodes, SUFFIX_DEPTH)) {
		ing_free(c);
		return ing_err_set(err, ING_ERR_NOMEM, "spec cache: out of memory");
	}
	*out = c;
	return ING_OK;
}

void spec_cache_free(struct spec_cache *c)
{
	if (!c)
		return;
	strie_free(&c->t);
	ing_free(c);
}

void spec_cache_add(struct spec_cache *c, const int32_t *tokens, int64_t n)
{
	if (!c || n <= 0)
		return;
	/* a sequence that cannot fit whole starts the cache over: the cache
	 * is about recent sequences, so the oldest knowledge goes first */
	if ((int64_t)c->t.n_nodes + n * c->t.depth > c->t.cap)
		strie_clear(&c->t);
	strie_break(&c->t);
	for (int64_t i = 0; i < n; i++)
		if (!strie_append(&c->t, tokens[i]))
			break;
	strie_break(&c->t);
}

/* ---- per sequence ---- */

int spec_seq_create(enum spec_method m, int k_max, int64_t max_len, struct spec_cache *cache,
		    struct spec_seq **out, ing_err *err)
{
	*out = NULL;
	if (m != SPEC_NGRAM && m != SPEC_SUFFIX)
		return ing_err_set(err, ING_ERR_INVALID, "spec: '%s' is not a model-free drafter",
				   spec_method_name(m));
	if (k_max < 1 || k_max > SPEC_MAX_K)
		return ing_err_set(err, ING_ERR_RANGE, "spec: draft length %d outside 1..%d", k_max,
				   SPEC_MAX_K);
	if (max_len < 1 || max_len > (1 << 24))
		return ing_err_set(err, ING_ERR_RANGE, "spec: sequence length %lld outside 1..%d",
				   (long long)max_len, 1 << 24);
	struct spec_seq *s = ing_calloc(1, sizeof *s);
	if (!s)
		return ing_err_set(err, ING_ERR_NOMEM, "spec: out of memory");
	s->method = m;
	s->k_max = k_max;
	s->max_len = max_len;
	s->cache = m == SPEC_SUFFIX ? cache : NULL;
	s->tokens = ing_malloc_array((size_t)max_len, sizeof *s->tokens);
	int rc = s->tokens ? ING_OK : ING_ERR_NOMEM;
	if (!rc && m == SPEC_SUFFIX) {
		int64_t cap = max_len * SUFFIX_DEPTH + 1;
		rc = strie_init(&s->t, (int32_t)(cap < (1 << 22) ? cap : (1 << 22)), SUFFIX_DEPTH);
	}
	if (rc) {
		spec_seq_free(s);
		return ing_err_set(err, ING_ERR_NOMEM, "spec: out of memory");
	}
	spec_seq_reset(s);
	*out = s;
	return ING_OK;
}

void spec_seq_free(struct spec_seq *s)
{
	if (!s)
		return;
	ing_free(s->tokens);
	if (s->t.cnt)
		strie_free(&s->t);
	ing_free(s);
}

void spec_seq_reset(struct spec_seq *s)
{
	s->n = 0;
	s->isolated = false;
	s->k_cap = spec_cap_first(s->k_max);
	if (s->method == SPEC_SUFFIX)
		strie_clear(&s->t);
}

int64_t spec_seq_len(const struct spec_seq *s) { return s->n; }

void spec_seq_isolate(struct spec_seq *s) { s->isolated = true; }

void spec_seq_append(struct spec_seq *s, const int32_t *tokens, int64_t n)
{
	for (int64_t i = 0; i < n && s->n < s->max_len; i++) {
		s->tokens[s->n++] = tokens[i];
		if (s->method == SPEC_SUFFIX)
			strie_append(&s->t, tokens[i]); /* full: stop learning, keep drafting */
	}
}

#define SPEC_CAP_START 4

int spec_cap_first(int k_max) { return k_max < SPEC_CAP_START ? k_max : SPEC_CAP_START; }

int spec_cap_next(int cap, int k_max, int n_draft, int accepted)
{
	if (n_draft <= 0)
		return cap;
	if (accepted >= n_draft)
		return cap * 2 < k_max ? cap * 2 : k_max;
	return accepted + 1;
}

void spec_seq_feedback(struct spec_seq *s, int n_draft, int accepted)
{
	s->k_cap = spec_cap_next(s->k_cap, s->k_max, n_draft, accepted);
}

/* Prompt lookup: the latest earlier occurrence of the last n tokens. */
static int draft_ngram(const struct spec_seq *s, int k, int32_t *draft)
{
	const int32_t *h = s->tokens;
	const int64_t n = s->n;
	for (int g = NGRAM_MAX; g >= NGRAM_MIN; g--) {
		if (n <= g)
			continue;
		const int32_t *tail = h + n - g;
		/* occurrence at [i, i+g) with at least one token after it */
		for (int64_t i = n - g - 1; i >= 0; i--) {
			if (h[i] != tail[0] || memcmp(h + i, tail, (size_t)g * sizeof *h))
				continue;
			int64_t avail = n - (i + g);
			int m = avail < k ? (int)avail : k;
			memcpy(draft, h + i + g, (size_t)m * sizeof *draft);
			return m;
		}
	}
	return 0;
}

struct guess {
	int32_t token;
	int match;  /* context length the guess was conditioned on */
	float prob; /* how often that context continued with token */
};

/* The most frequent continuation of the longest suffix of ctx[0, n) that
 * t knows to have continuations. */
static struct guess trie_guess(const struct strie *t, const int32_t *ctx, int n)
{
	int dmax = n < t->depth - 1 ? n : t->depth - 1;
	for (int d = dmax; d >= 1; d--) {
		int32_t node = strie_find(t, ctx + n - d, d);
		if (node < 0 || t->child_total[node] == 0)
			continue;
		int32_t b = t->best[node];
		return (struct guess){ strie_token(t, b), d,
				       (float)t->cnt[b] / (float)t->child_total[node] };
	}
	return (struct guess){ -1, 0, 0.0f };
}

static int draft_suffix(const struct spec_seq *s, int k, int32_t *draft)
{
	/* context window: the last depth tokens, then the draft as it grows */
	int32_t ctx[SUFFIX_DEPTH + SPEC_MAX_K];
	int64_t w = s->n < SUFFIX_DEPTH ? s->n : SUFFIX_DEPTH;
	memcpy(ctx, s->tokens + s->n - w, (size_t)w * sizeof *ctx);
	int n = (int)w, m = 0, first_match = 0;
	float score = 1.0f;
	while (m < k) {
		struct guess g = trie_guess(&s->t, ctx, n);
		if (s->cache && !s->isolated) {
			struct guess c = trie_guess(&s->cache->t, ctx, n);
			if (c.match > g.match || (c.match == g.match && c.prob > g.prob))
				g = c;
		}
		if (g.token < 0)
			break;
		if (m == 0)
			first_match = g.match;
		score *= g.prob;
		if (score < SUFFIX_MIN_PROB || m >= SUFFIX_LEN_FACTOR * first_match)
			break;
		draft[m++] = g.token;
		ctx[n++] = g.token;
		if (n == (int)(sizeof ctx / sizeof *ctx)) { /* keep the last depth tokens */
			memmove(ctx, ctx + n - SUFFIX_DEPTH, SUFFIX_DEPTH * sizeof *ctx);
			n = SUFFIX_DEPTH;
		}
	}
	return m;
}

int spec_seq_draft(struct spec_seq *s, int k, int32_t *draft)
{
	if (k > s->k_cap)
		k = s->k_cap;
	if (k <= 0 || s->n == 0)
		return 0;
	return s->method == SPEC_NGRAM ? draft_ngram(s, k, draft) : draft_suffix(s, k, draft);
}
