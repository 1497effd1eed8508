/* test_spec.c — the model-free drafters without a model: the suffix trie's
 * counts against a brute-force count of substrings, n-gram prompt lookup,
 * suffix drafts (repeats, frequency choice, the global cache, sequence
 * boundaries), adaptive draft length, bounds and allocation failures. The
 * model-level guarantee (speculation never changes output) is
 * tests/test_spec.py. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mem.h"
#include "spec.h"
#include "spec_trie.h"

/* Occurrences of pat[0,m) in s[0,n), and of pat followed by any token. */
static void brute_count(const int32_t *s, int n, const int32_t *pat, int m, uint32_t *cnt,
			uint32_t *followed)
{
	*cnt = *followed = 0;
	for (int i = 0; i + m <= n; i++)
		if (!memcmp(s + i, pat, (size_t)m * sizeof *s)) {
			(*cnt)++;
			*followed += i + m < n;
		}
}

static void test_trie_counts(void)
{
	struct strie t;
	CHECK(strie_init(&t, 100000, 6) == ING_OK, "init");
	int32_t s[400];
	srand(7);
	for (int i = 0; i < 400; i++)
		s[i] = rand() % 5; /* small alphabet: many repeats */
	for (int i = 0; i < 400; i++)
		CHECK(strie_append(&t, s[i]), "append %d", i);
	/* every substring of length <= depth: node exists with the right counts */
	int bad = 0;
	for (int i = 0; i < 400; i++)
		for (int m = 1; m <= 6 && i + m <= 400; m++) {
			int32_t node = strie_find(&t, s + i, m);
			uint32_t cnt, fol;
			brute_count(s, 400, s + i, m, &cnt, &fol);
			/* substrings of the full depth have no children stored */
			if (node < 0 || t.cnt[node] != cnt || (m < 6 && t.child_total[node] != fol))
				bad++;
			else if (m < 6 && fol > 0) { /* best child is a most frequent follower */
				int32_t b = t.best[node];
				int32_t ext[8];
				memcpy(ext, s + i, (size_t)m * sizeof *ext);
				ext[m] = strie_token(&t, b);
				uint32_t bc, bf;
				brute_count(s, 400, ext, m + 1, &bc, &bf);
				for (int32_t tok = 0; tok < 5; tok++) {
					ext[m] = tok;
					uint32_t c2, f2;
					brute_count(s, 400, ext, m + 1, &c2, &f2);
					if (c2 > bc)
						bad++;
				}
			}
		}
	CHECK(bad == 0, "%d substrings with wrong counts", bad);
	int32_t seven = 7;
	CHECK(strie_find(&t, &seven, 1) < 0, "absent token found");
	int32_t long_pat[7] = { s[0], s[1], s[2], s[3], s[4], s[5], s[6] };
	CHECK(strie_find(&t, long_pat, 7) < 0, "path deeper than the depth found");
	/* clear is complete; break keeps suffixes from spanning sequences */
	strie_clear(&t);
	CHECK(t.n_nodes == 1 && strie_find(&t, s, 1) < 0, "clear");
	int32_t a[2] = { 1, 2 }, b2[2] = { 3, 4 };
	for (int i = 0; i < 2; i++)
		strie_append(&t, a[i]);
	strie_break(&t);
	for (int i = 0; i < 2; i++)
		strie_append(&t, b2[i]);
	int32_t span[2] = { 2, 3 };
	CHECK(strie_find(&t, span, 2) < 0, "suffix spans a break");
	strie_free(&t);

	/* full: refuses whole tokens, never a partial set of suffixes */
	CHECK(strie_init(&t, 20, 4) == ING_OK, "init small");
	int appended = 0;
	for (int i = 0; i < 100; i++)
		appended += strie_append(&t, i);
	CHECK(appended > 0 && appended < 100 && t.n_nodes <= 20, "capacity: %d appended, %d nodes",
	      appended, t.n_nodes);
	strie_free(&t);
}

static struct spec_seq *seq_new(enum spec_method m, int k, int64_t len, struct spec_cache *c)
{
	struct spec_seq *s = NULL;
	ing_err err = { 0 };
	CHECK(spec_seq_create(m, k, len, c, &s, &err) == ING_OK, "create: %s", err.msg);
	return s;
}

static void test_ngram(void)
{
	struct spec_seq *s = seq_new(SPEC_NGRAM, 8, 100, NULL);
	if (!s)
		return;
	int32_t d[SPEC_MAX_K];
	int32_t seq[] = { 1, 2, 3, 4, 5, 6, 9, 9, 1, 2, 3 };
	spec_seq_append(s, seq, 11);
	/* cap starts at 4: proposes 4, 5, 6, 9 after "1 2 3" */
	int n = spec_seq_draft(s, 8, d);
	CHECK(n == 4 && d[0] == 4 && d[1] == 5 && d[2] == 6 && d[3] == 9, "ngram draft n=%d", n);
	spec_seq_feedback(s, 4, 4); /* all accepted: cap doubles */
	n = spec_seq_draft(s, 8, d);
	CHECK(n == 8 && d[4] == 9 && d[5] == 1 && d[7] == 3, "ngram after growth n=%d", n);
	spec_seq_feedback(s, 8, 1); /* rejected after 1: cap = 2 */
	CHECK(spec_seq_draft(s, 8, d) == 2, "cap after rejection");
	CHECK(spec_seq_draft(s, 1, d) == 1, "k bounds the draft");
	/* latest occurrence wins; no match: nothing */
	spec_seq_reset(s);
	int32_t seq2[] = { 5, 6, 1, 5, 6, 2, 5, 6 };
	spec_seq_append(s, seq2, 8);
	n = spec_seq_draft(s, 4, d);
	CHECK(n >= 1 && d[0] == 2, "latest occurrence: n=%d d0=%d", n, d[0]);
	spec_seq_reset(s);
	int32_t seq3[] = { 1, 2, 3, 4, 5 };
	spec_seq_append(s, seq3, 5);
	CHECK(spec_seq_draft(s, 4, d) == 0, "no repeat, no draft");
	CHECK(spec_seq_len(s) == 5, "len");
	/* tokens past max_len are ignored */
	for (int i = 0; i < 200; i++)
		spec_seq_append(s, seq3, 1);
	CHECK(spec_seq_len(s) == 100, "bounded by max_len");
	spec_seq_free(s);
}

static void test_suffix(void)
{
	struct spec_cache *c = NULL;
	ing_err err = { 0 };
	CHECK(spec_cache_create(4096, &c, &err) == ING_OK, "cache: %s", err.msg);
	struct spec_seq *s = seq_new(SPEC_SUFFIX, 16, 1000, c);
	if (!s || !c)
		return;
	int32_t d[SPEC_MAX_K];
	/* a 20-token phrase, then its start again: the draft continues it */
	int32_t phrase[20];
	for (int i = 0; i < 20; i++)
		phrase[i] = 100 + i;
	spec_seq_append(s, phrase, 20);
	int32_t sep = 7;
	spec_seq_append(s, &sep, 1);
	spec_seq_append(s, phrase, 6);
	spec_seq_feedback(s, 4, 4);
	spec_seq_feedback(s, 8, 8); /* cap 16 */
	int n = spec_seq_draft(s, 16, d);
	int ok = n >= 8;
	for (int i = 0; i < n; i++)
		ok &= d[i] == 106 + i || (106 + i > 119 && d[i] == 7);
	CHECK(ok, "suffix continues the phrase: n=%d d0=%d", n, d[0]);

	/* the more frequent continuation wins; among equals the latest */
	spec_seq_reset(s);
	int32_t freq[] = { 9, 1, 2, 3, 8, 1, 2, 3, 7, 1, 2, 4, 6, 1, 2 };
	spec_seq_append(s, freq, 15);
	n = spec_seq_draft(s, 1, d);
	CHECK(n == 1 && d[0] == 3, "frequency choice: n=%d d0=%d", n, d[0]);
	spec_seq_reset(s);
	int32_t tie[] = { 1, 2, 3, 1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 2 };
	spec_seq_append(s, tie, 14); /* "1 2 3 1 2" went on with 3, then 4 */
	n = spec_seq_draft(s, 1, d);
	CHECK(n == 1 && d[0] == 4, "longest context, latest of equals: n=%d d0=%d", n, d[0]);

	/* no history: nothing; unrelated text: nothing */
	spec_seq_reset(s);
	CHECK(spec_seq_draft(s, 8, d) == 0, "empty");
	int32_t uniq[30];
	for (int i = 0; i < 30; i++)
		uniq[i] = 500 + i;
	spec_seq_append(s, uniq, 30);
	CHECK(spec_seq_draft(s, 8, d) == 0, "no repeats, no draft");

	/* the global cache: an earlier sequence's output drafts for a new one */
	int32_t out[24];
	for (int i = 0; i < 24; i++)
		out[i] = 900 + i;
	spec_cache_add(c, out, 24);
	spec_seq_reset(s);
	spec_seq_append(s, uniq, 5);
	spec_seq_append(s, out, 5);
	n = spec_seq_draft(s, 4, d);
	CHECK(n == 4 && d[0] == 905 && d[3] == 908, "cache draft: n=%d d0=%d", n, d[0]);
	/* an isolated sequence (a salted request) drafts from itself alone,
	 * until its next reset */
	spec_seq_reset(s);
	spec_seq_isolate(s);
	spec_seq_append(s, uniq, 5);
	spec_seq_append(s, out, 5);
	CHECK(spec_seq_draft(s, 4, d) == 0, "isolated: nothing from the cache");
	spec_seq_append(s, uniq, 5); /* its own repeat still drafts */
	n = spec_seq_draft(s, 4, d);
	CHECK(n == 4 && d[0] == 900 && d[3] == 903, "isolated: its own tokens: n=%d d0=%d", n,
	      d[0]);
	spec_seq_reset(s);
	spec_seq_append(s, uniq, 5);
	spec_seq_append(s, out, 5);
	n = spec_seq_draft(s, 4, d);
	CHECK(n == 4 && d[0] == 905, "reset ends isolation: n=%d", n);
	/* a sequence larger than the cache restarts it: no crash, still bounded */
	int32_t big[600];
	for (int i = 0; i < 600; i++)
		big[i] = i;
	spec_cache_add(c, big, 600);
	spec_cache_add(c, out, 24);
	n = spec_seq_draft(s, 4, d);
	CHECK(n == 4 && d[0] == 905, "cache after restart: n=%d", n);
	spec_seq_free(s);
	spec_cache_free(c);
}

static void test_errors(void)
{
	struct spec_seq *s = NULL;
	ing_err err = { 0 };
	CHECK(spec_seq_create(SPEC_NONE, 4, 10, NULL, &s, &err) == ING_ERR_INVALID && !s, "none");
	CHECK(spec_seq_create(SPEC_NGRAM, 0, 10, NULL, &s, &err) == ING_ERR_RANGE, "k 0");
	CHECK(spec_seq_create(SPEC_NGRAM, SPEC_MAX_K + 1, 10, NULL, &s, &err) == ING_ERR_RANGE,
	      "k too big");
	CHECK(spec_seq_create(SPEC_SUFFIX, 4, 0, NULL, &s, &err) == ING_ERR_RANGE, "len 0");
	CHECK(spec_method_parse("suffix") == SPEC_SUFFIX && spec_method_parse("x") < 0 &&
	      !strcmp(spec_method_name(SPEC_NGRAM), "ngram"), "names");
	/* every allocation failure: a clean error, nothing leaked */
	size_t live = ing_mem_live();
	for (long nth = 1; nth < 20; nth++) {
		ing_mem_fail_at(nth, 0);
		struct spec_cache *c = NULL;
		int rc = spec_cache_create(1000, &c, &err);
		if (rc == ING_OK)
			rc = spec_seq_create(SPEC_SUFFIX, 8, 100, c, &s, &err);
		ing_mem_fail_at(0, 0);
		if (rc == ING_OK)
			spec_seq_free(s);
		spec_cache_free(c);
		CHECK(ing_mem_live() == live, "leak after failing allocation %ld", nth);
	}
}

static uint64_t rng_state = 88172645463325252ull;

static double uniform(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double)(rng_state >> 11) * 0x1.0p-53;
}

static int32_t draw(const float *d, int V)
{
	double u = uniform(), cum = 0;
	for (int i = 0; i < V; i++) {
		cum += d[i];
		if (u < cum)
			return i;
	}
	return V - 1;
}

/* Speculative sampling emits tokens distributed as p for any draft q:
 * chi-square over 200,000 draws per (p, q) pair, 7 degrees of freedom;
 * 24.3 is the 0.001 critical value. The generator is seeded, so the test
 * is deterministic. */
static void test_rejection_sampling(void)
{
	enum { V = 8, DRAWS = 200000 };
	const float ps[3][V] = {
		{ 0.30f, 0.20f, 0.15f, 0.10f, 0.10f, 0.08f, 0.05f, 0.02f },
		{ 0.01f, 0.01f, 0.01f, 0.01f, 0.01f, 0.01f, 0.04f, 0.90f },
		{ 0.0f, 0.5f, 0.0f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f },
	};
	const float qs[3][V] = {
		{ 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f },
		{ 0.90f, 0.04f, 0.01f, 0.01f, 0.01f, 0.01f, 0.01f, 0.01f },
		{ 0.2f, 0.2f, 0.2f, 0.2f, 0.2f, 0.0f, 0.0f, 0.0f },
	};
	for (int c = 0; c < 3; c++) {
		long count[V] = { 0 }, accepted = 0;
		for (int i = 0; i < DRAWS; i++) {
			int32_t x = draw(qs[c], V), out;
			double u1 = uniform(), u2 = uniform();
			accepted += spec_accept_draft(ps[c], qs[c], V, x, u1, u2, &out);
			count[out]++;
		}
		double chi2 = 0;
		int bad_support = 0;
		for (int t = 0; t < V; t++) {
			double expect = (double)DRAWS * ps[c][t];
			if (expect == 0)
				bad_support += count[t] != 0;
			else
				chi2 += (count[t] - expect) * (count[t] - expect) / expect;
		}
		/* acceptance rate is sum(min(p, q)) */
		double overlap = 0;
		for (int t = 0; t < V; t++)
			overlap += ps[c][t] < qs[c][t] ? ps[c][t] : qs[c][t];
		double rate = (double)accepted / DRAWS;
		CHECK(chi2 < 24.3 && !bad_support, "case %d: chi2 %.2f, %d tokens outside p", c, chi2,
		      bad_support);
		CHECK(rate > overlap - 0.01 && rate < overlap + 0.01, "case %d: acceptance %.3f vs %.3f",
		      c, rate, overlap);
	}
	/* q == p accepts everything */
	const float same[4] = { 0.1f, 0.2f, 0.3f, 0.4f };
	int all = 1;
	for (int i = 0; i < 1000; i++) {
		int32_t x = draw(same, 4), out;
		all &= spec_accept_draft(same, same, 4, x, uniform(), uniform(), &out) && out == x;
	}
	CHECK(all, "p == q must accept every draft");
}

/* The cap rule the model-free drafters and the draft model share. */
static void test_cap_rule(void)
{
	CHECK(spec_cap_next(4, 16, 4, 4) == 8, "all accepted: doubles");
	CHECK(spec_cap_next(8, 16, 8, 8) == 16 && spec_cap_next(16, 16, 16, 16) == 16,
	      "doubling stops at k_max");
	CHECK(spec_cap_next(12, 16, 12, 12) == 16, "doubling clamps to k_max");
	CHECK(spec_cap_next(16, 16, 16, 5) == 6, "rejection: accepted + 1");
	CHECK(spec_cap_next(16, 16, 7, 0) == 1, "rejected at once: one token");
	CHECK(spec_cap_next(4, 16, 3, 3) == 8, "a shorter draft fully accepted doubles the cap");
	CHECK(spec_cap_next(5, 16, 0, 0) == 5, "no draft: unchanged");
}

int main(void)
{
	test_cap_rule();
	test_rejection_sampling();
	test_trie_counts();
	test_ngram();
	test_suffix();
	test_errors();
	return check_summary("test_spec");
}
