/* test_engine.c — the serving engine on the default model: continuous
 * batching gives every request exactly the greedy tokens it gets alone;
 * preemption under a tiny KV pool changes nothing either, for seeded
 * sampling with penalties too (a request resumes on another slot's
 * sampler with its random state and penalty window), nor does
 * speculative decoding (with and without preemption); prefix caching
 * (token-granular reuse gives the tokens of a cold engine), cancellation,
 * submit errors, and prompt scoring (every prompt token's logprob, rank
 * and alternatives exactly as one forward pass over the prompt gives
 * them, alone, cached, batched and preempted mid-prompt). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "clock.h"
#include "engine.h"
#include "forward.h"
#include "model.h"
#include "ops.h"
#include "pool.h"
#include "runner.h"
#include "generate.h"
#include "grammar.h"
#include "mem.h"
#include "tokenizer.h"

#define NREQ 6
#define GEN 16

#define SCORE_N 80  /* prompt tokens of the scoring scenario */
#define SCORE_TOP 3 /* alternatives per scored token */

/* What a request reported of its prompt (score_prompt). */
struct scores {
	int64_t n;                  /* events seen; event i is position i + 1 */
	bool in_order;              /* positions 1, 2, ... before any generated token */
	float lp[SCORE_N];
	int32_t rank[SCORE_N];
	int32_t top[SCORE_N][SCORE_TOP];
};

struct result {
	int32_t toks[256];
	float lp[256]; /* each token's logprob (top_logprobs >= 0) */
	int n;
	int done, finish, error;
	int64_t cached;
	struct scores sc;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void on_event(void *ud, const struct engine_event *ev)
{
	struct result *r = ud;
	pthread_mutex_lock(&mu);
	if (ev->kind == ENGINE_EV_PROMPT_TOKEN) {
		struct scores *sc = &r->sc;
		if (sc->n == 0)
			sc->in_order = true;
		sc->in_order = sc->in_order && ev->pos == sc->n + 1 && r->n == 0 &&
			       sc->n < SCORE_N && ev->n_top == SCORE_TOP;
		if (sc->in_order) {
			sc->lp[sc->n] = ev->logprob;
			sc->rank[sc->n] = ev->rank;
			memcpy(sc->top[sc->n], ev->top_ids, sizeof sc->top[0]);
		}
		sc->n++;
	} else if (ev->kind == ENGINE_EV_TOKEN && r->n < 256) {
		r->lp[r->n] = ev->logprob;
		r->toks[r->n++] = ev->token;
	} else if (ev->kind != ENGINE_EV_TOKEN) {
		r->done = 1;
		r->finish = ev->finish;
		r->error = ev->kind == ENGINE_EV_ERROR;
		r->cached = ev->n_cached_prompt;
	}
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void wait_all(struct result *r, int n)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < n; i++)
		while (!r[i].done)
			pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

static int32_t prompts[NREQ][12];
static int prompt_len[NREQ];

static void make_prompts(void)
{
	for (int i = 0; i < NREQ; i++) {
		prompt_len[i] = 4 + i;
		prompts[i][0] = 2;
		for (int j = 1; j < prompt_len[i]; j++)
			prompts[i][j] = 1000 + 97 * i + 13 * j;
	}
}

static enum spec_method g_spec = SPEC_NONE; /* drafter of engines start() makes */
static bool g_sampled;                       /* submit samples (seeded, penalties) */
static uint64_t g_salt;                      /* submit's cache salt (0: none) */

static struct engine *start(int seqs, int64_t kv_mb, int waiting)
{
	struct engine_config c = engine_config_default();
	c.spec = g_spec;
	c.spec_max = 6;
	c.max_num_seqs = seqs;
	c.max_model_len = 128;
	c.step_tokens = 32;
	c.kv_cache_mb = kv_mb;
	c.max_waiting = waiting;
	c.threads = 2;
	struct engine *e;
	ing_err err = { 0 };
	int rc = engine_create(check_default_model(), &c, &e, &err);
	CHECK(rc == ING_OK, "engine_create: %s", err.msg);
	return rc ? NULL : e;
}

static int submit(struct engine *e, int i, struct result *r, int64_t max_tokens)
{
	struct engine_params p = { .prompt = prompts[i], .n_prompt = prompt_len[i],
				   .max_tokens = max_tokens, .top_logprobs = -1,
				   .sample = sample_params_default(), .cache_salt = g_salt };
	p.sample.temperature = 0;
	if (g_sampled) {
		p.sample.temperature = 1.0f;
		p.sample.seed = 100 + (uint64_t)i;
		p.sample.repeat_penalty = 1.3f;
		p.sample.frequency_penalty = 0.5f;
	}
	uint64_t id;
	ing_err err = { 0 };
	int rc = engine_submit(e, &p, on_event, r, &id, &err);
	CHECK(rc == ING_OK, "submit %d: %s", i, err.msg);
	return rc;
}

/* Every request alone (one sequence at a time) for reference. */
static void run_solo(struct result *solo)
{
	struct engine *e = start(1, 0, NREQ);
	if (!e)
		return;
	for (int i = 0; i < NREQ; i++)
		if (submit(e, i, &solo[i], GEN) == ING_OK)
			wait_all(&solo[i], 1);
	engine_destroy(e, true);
}

static void compare(const struct result *a, const struct result *b, const char *what)
{
	for (int i = 0; i < NREQ; i++)
		CHECK(a[i].n == b[i].n && memcmp(a[i].toks, b[i].toks, sizeof(int32_t) * a[i].n) == 0,
		      "%s: request %d differs from its solo run (%d vs %d tokens)", what, i, b[i].n, a[i].n);
}

static void test_batching(const struct result *solo)
{
	struct result r[NREQ] = { 0 };
	struct engine *e = start(4, 0, NREQ);
	if (!e)
		return;
	for (int i = 0; i < NREQ; i++)
		submit(e, i, &r[i], GEN);
	wait_all(r, NREQ);
	struct engine_stats st;
	engine_stats_get(e, &st);
	CHECK(st.running == 0 && st.kv_usage == 0.0, "idle after: running %d, kv %.3f", st.running,
	      st.kv_usage);
	CHECK(st.batch_rows > st.steps, "steps held several rows (%llu rows in %llu steps)",
	      (unsigned long long)st.batch_rows, (unsigned long long)st.steps);
	engine_destroy(e, true);
	compare(solo, r, "continuous batching");
	for (int i = 0; i < NREQ; i++)
		CHECK(r[i].finish == ENGINE_FINISH_LENGTH && !r[i].error, "request %d finish %d", i,
		      r[i].finish);
}

static void test_preemption(const struct result *solo)
{
	struct result r[NREQ] = { 0 };
	/* 1 MB of F16 KV (the default type): 3 blocks of 16 positions */
	struct engine *e = start(4, 1, NREQ);
	if (!e)
		return;
	for (int i = 0; i < NREQ; i++)
		submit(e, i, &r[i], GEN);
	wait_all(r, NREQ);
	struct engine_stats st;
	engine_stats_get(e, &st);
	CHECK(st.preemptions > 0, "a tiny pool preempts (%llu)", (unsigned long long)st.preemptions);
	engine_destroy(e, true);
	compare(solo, r, g_sampled ? "preemption, sampled" : "preemption");
}

/* Seeded sampling with penalties: the same tokens solo and preempted. */
static void test_preemption_sampled(void)
{
	struct result solo[NREQ] = { 0 };
	g_sampled = true;
	run_solo(solo);
	test_preemption(solo);
	g_sampled = false;
}

/* Every request at once on an engine start(4, kv_mb, NREQ) makes; its
 * stats into *st. False when the engine did not start. */
static bool run_all(int64_t kv_mb, struct result *r, struct engine_stats *st)
{
	struct engine *e = start(4, kv_mb, NREQ);
	if (!e)
		return false;
	for (int i = 0; i < NREQ; i++)
		submit(e, i, &r[i], GEN);
	wait_all(r, NREQ);
	engine_stats_get(e, st);
	engine_destroy(e, true);
	return true;
}

/* With a drafter, batching and preemption (which drops a request's drafts
 * and KV mid-flight) still give every request its solo greedy tokens;
 * salted requests draft from their own tokens alone (not the suffix
 * cache of the others' outputs), with the same result. */
static void test_speculation(const struct result *solo)
{
	g_spec = SPEC_SUFFIX;
	struct result r[NREQ] = { 0 }, rp[NREQ] = { 0 }, rs[NREQ] = { 0 };
	struct engine_stats st = { 0 }, stp = { 0 }, sts = { 0 };
	if (run_all(0, r, &st))
		compare(solo, r, "speculation");
	if (run_all(1, rp, &stp)) {
		compare(solo, rp, "speculation + preemption");
		CHECK(stp.preemptions > 0, "a tiny pool preempts with speculation too");
		CHECK(st.spec_drafts + stp.spec_drafts > 0, "drafts were proposed");
	}
	g_salt = 0x5a175a17;
	if (run_all(0, rs, &sts)) {
		compare(solo, rs, "salted speculation");
		CHECK(sts.spec_drafts > 0, "salted requests draft (from their own tokens)");
	}
	g_salt = 0;
	g_spec = SPEC_NONE;
}

static void test_prefix_cancel_errors(void)
{
	struct engine *e = start(2, 0, 2);
	if (!e)
		return;
	int32_t longp[80];
	longp[0] = 2;
	for (int j = 1; j < 80; j++)
		longp[j] = 3000 + j;
	struct engine_params p = { .prompt = longp, .n_prompt = 80, .max_tokens = 4,
				   .top_logprobs = 3, .sample = sample_params_default() };
	p.sample.temperature = 0;
	struct result a = { 0 }, b = { 0 }, c = { 0 };
	uint64_t id;
	ing_err err = { 0 };
	engine_submit(e, &p, on_event, &a, &id, &err);
	wait_all(&a, 1);
	engine_submit(e, &p, on_event, &b, &id, &err);
	wait_all(&b, 1);
	CHECK(a.cached == 0 && b.cached == 79, "second run reuses 79 cached prompt tokens (%lld): "
	      "all but the last, 64 in shared blocks, 15 copied", (long long)b.cached);
	CHECK(a.n == b.n && memcmp(a.toks, b.toks, sizeof(int32_t) * a.n) == 0,
	      "cached prefix gives the same tokens");
	p.max_tokens = 40;
	engine_submit(e, &p, on_event, &c, &id, &err);
	engine_cancel(e, id);
	wait_all(&c, 1);
	CHECK(c.finish == ENGINE_FINISH_CANCELLED || c.n < 40, "cancel stops the request");
	p.max_tokens = 100; /* 80 + 100 > 128 */
	CHECK(engine_submit(e, &p, on_event, &c, &id, &err) == ING_ERR_RANGE &&
	      strstr(err.msg, "context length"), "over-long request refused: %s", err.msg);
	int32_t bad = 1 << 30;
	struct engine_params q = p;
	q.prompt = &bad;
	q.n_prompt = 1;
	q.max_tokens = 1;
	CHECK(engine_submit(e, &q, on_event, &c, &id, &err) == ING_ERR_RANGE, "bad token id refused");
	/* 2 running + 2 waiting is all this engine takes: the fifth is busy,
	 * an error to retry, not the request's fault */
	struct result full[5];
	memset(full, 0, sizeof full);
	uint64_t ids[5];
	p.max_tokens = 40;
	int n_in = 0, rc = ING_OK;
	for (; n_in < 5 && (rc = engine_submit(e, &p, on_event, &full[n_in], &ids[n_in], &err)) ==
				   ING_OK; n_in++)
		;
	CHECK(n_in == 4 && rc == ING_ERR_BUSY && strstr(err.msg, "busy"),
	      "a full queue: busy (%d taken, %d: %s)", n_in, rc, err.msg);
	for (int i = 0; i < n_in; i++)
		engine_cancel(e, ids[i]);
	wait_all(full, n_in);
	struct engine_stats st;
	engine_stats_get(e, &st);
	CHECK(st.prefix_hits >= 64 && st.running == 0, "prefix hits counted (%llu)",
	      (unsigned long long)st.prefix_hits);
	engine_destroy(e, false);
}

/* One greedy request of prompt p[0, n) for GEN tokens on e; false if it
 * could not be submitted. */
static bool run_greedy(struct engine *e, const int32_t *p, int64_t n, int64_t max_tokens,
		       struct result *r)
{
	struct engine_params ep = { .prompt = p, .n_prompt = n, .max_tokens = max_tokens,
				    .top_logprobs = -1, .sample = sample_params_default() };
	ep.sample.temperature = 0;
	uint64_t id;
	ing_err err = { 0 };
	int rc = engine_submit(e, &ep, on_event, r, &id, &err);
	CHECK(rc == ING_OK, "submit: %s", err.msg);
	if (rc == ING_OK)
		wait_all(r, 1);
	return rc == ING_OK;
}

/* Tokens of p[0, n) on a fresh engine: no prefix cache to hit. */
static void run_cold(const int32_t *p, int64_t n, struct result *r)
{
	struct engine *e = start(1, 0, 1);
	if (e && run_greedy(e, p, n, GEN, r))
		CHECK(r->cached == 0, "a cold engine hits nothing");
	engine_destroy(e, true);
}

/* The agentic pattern: each turn's prompt is the previous turn's plus new
 * tokens, so the previous turn's last prompt block, filled up with tokens
 * it generated, matches only in part. The cache supplies every prompt
 * position an earlier turn computed (full blocks shared, the rest copied)
 * and every turn gets exactly the greedy tokens of a cold engine. */
static void test_partial_prefix(void)
{
	enum { N1 = 45, N2 = 51, N3 = 61 };
	int32_t p[N3];
	for (int j = 0; j < N3; j++)
		p[j] = j ? 4000 + 7 * j : 2;
	struct result t1 = { 0 }, t2 = { 0 }, t3 = { 0 }, c2 = { 0 }, c3 = { 0 };
	struct engine *e = start(2, 0, 2);
	if (!e || !run_greedy(e, p, N1, 3, &t1)) {
		engine_destroy(e, true);
		return;
	}
	/* the new tokens differ from what turn 1 generated there, as a
	 * client's own message would */
	p[N1] += p[N1] == t1.toks[0];
	if (run_greedy(e, p, N2, GEN, &t2)) {
		p[N2] += p[N2] == t2.toks[0];
		run_greedy(e, p, N3, GEN, &t3);
	}
	engine_destroy(e, true);
	CHECK(t1.cached == 0 && t2.cached == N1 && t3.cached == N2,
	      "each turn reuses the previous turn's whole prompt: %lld of %d, %lld of %d",
	      (long long)t2.cached, N1, (long long)t3.cached, N2);
	run_cold(p, N2, &c2);
	run_cold(p, N3, &c3);
	CHECK(t2.n == c2.n && memcmp(t2.toks, c2.toks, sizeof(int32_t) * (size_t)c2.n) == 0,
	      "turn 2 after a partial-block hit differs from a cold run");
	CHECK(t3.n == c3.n && memcmp(t3.toks, c3.toks, sizeof(int32_t) * (size_t)c3.n) == 0,
	      "turn 3 after a partial-block hit differs from a cold run");
}

/* Requests over one prompt (a request's n choices) or one long new prefix
 * (a burst of sub-agent requests), submitted together: one computes the
 * shared positions and the others take them from the prefix cache as it
 * publishes them (chunk by chunk: the first request's own tail is still
 * being computed when they start), instead of each computing them too;
 * every one gets the tokens it gets alone. */
static void test_shared_prefill(void)
{
	enum { N = 80, TAIL = 8, LONG_TAIL = 40, K = 4 };
	int32_t p[K][N + LONG_TAIL];
	for (int i = 0; i < K; i++)
		for (int j = 0; j < N + LONG_TAIL; j++)
			p[i][j] = j == 0 ? 2 : j < N ? 5000 + 11 * j : 7000 + 29 * i + j;
	struct result same[K] = { 0 }, tails[K] = { 0 }, alone = { 0 }, alone_tail = { 0 };
	run_cold(p[0], N, &alone);
	struct engine *e = start(K, 0, 2 * K);
	if (!e)
		return;
	struct engine_params ep = { .prompt = p[0], .n_prompt = N, .max_tokens = GEN,
				    .top_logprobs = -1, .sample = sample_params_default() };
	ep.sample.temperature = 0;
	uint64_t id;
	ing_err err = { 0 };
	for (int i = 0; i < K; i++)
		CHECK(engine_submit(e, &ep, on_event, &same[i], &id, &err) == ING_OK, "submit: %s",
		      err.msg);
	wait_all(same, K);
	int64_t cached = 0;
	int cold = 0;
	for (int i = 0; i < K; i++) {
		cached += same[i].cached;
		cold += same[i].cached == 0;
		CHECK(same[i].n == alone.n && !memcmp(same[i].toks, alone.toks, sizeof alone.toks),
		      "one prompt, %d at once: request %d differs from a cold run", K, i);
	}
	CHECK(cold == 1 && cached == (K - 1) * (N - 1),
	      "one prompt, %d at once: one computes it, the rest reuse %d tokens each "
	      "(%d cold, %lld reused)", K, N - 1, cold, (long long)cached);
	/* a new prefix (the second token differs from the prompt above: only
	 * BOS is cached); the first request's tail is longer than a prefill
	 * chunk */
	for (int i = 0; i < K; i++)
		p[i][1] = 6001;
	cached = cold = 0;
	for (int i = 0; i < K; i++) {
		ep.prompt = p[i];
		ep.n_prompt = i ? N + TAIL : N + LONG_TAIL;
		ep.max_tokens = i ? GEN : 4;
		CHECK(engine_submit(e, &ep, on_event, &tails[i], &id, &err) == ING_OK, "submit: %s",
		      err.msg);
	}
	wait_all(tails, K);
	for (int i = 0; i < K; i++) {
		cold += tails[i].cached < N;
		cached += tails[i].cached;
	}
	CHECK(cold == 1 && tails[0].cached < N && cached - tails[0].cached == (K - 1) * N,
	      "one new %d-token prefix, %d requests at once: the first computes it, the rest "
	      "take it while the first computes its own tail (%d computed it, %lld reused)",
	      N, K, cold, (long long)cached);
	engine_destroy(e, true);
	run_cold(p[1], N + TAIL, &alone_tail);
	CHECK(tails[1].n == alone_tail.n &&
	      !memcmp(tails[1].toks, alone_tail.toks, sizeof alone_tail.toks),
	      "a request that took the prefix another computed differs from a cold run");
}

/* Requests under a JSON schema (greedy and sampled, batched together)
 * stop by themselves with text the schema accepts; the engine holds its
 * own grammar reference. */
static void test_grammar_requests(void)
{
	static const char schema[] =
		"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":0,"
		"\"maximum\":9},\"b\":{\"enum\":[\"x\",\"y\"]}},\"required\":[\"a\",\"b\"],"
		"\"additionalProperties\":false}";
	struct grammar *g = NULL;
	ing_err err = { 0 };
	CHECK(grammar_from_json_schema(schema, sizeof schema - 1, &g, &err) == ING_OK, "%s", err.msg);
	struct engine *e = start(4, 0, NREQ);
	if (!e || !g) {
		engine_destroy(e, false);
		grammar_free(g);
		return;
	}
	struct result r[4] = { 0 };
	for (int i = 0; i < 4; i++) {
		struct engine_params p = { .prompt = prompts[i], .n_prompt = prompt_len[i],
					   .max_tokens = 100, .top_logprobs = i == 3 ? 5 : -1,
					   .sample = sample_params_default(), .grammar = g };
		p.sample.temperature = i == 0 ? 0.0f : 1.5f;
		p.sample.seed = (uint64_t)i;
		uint64_t id;
		CHECK(engine_submit(e, &p, on_event, &r[i], &id, &err) == ING_OK, "submit: %s", err.msg);
	}
	grammar_free(g); /* the requests keep theirs */
	wait_all(r, 4);
	/* a grammar whose first byte opens 250 x 250 alternatives: refused
	 * at submit as the request's fault (not "busy") */
	char *gbnf = malloc(8192);
	size_t len = 0;
	len += (size_t)sprintf(gbnf, "root ::= a\na ::= ");
	for (int i = 0; i < 250; i++)
		len += (size_t)sprintf(gbnf + len, "%sb", i ? " | " : "");
	len += (size_t)sprintf(gbnf + len, "\nb ::= ");
	for (int i = 0; i < 250; i++)
		len += (size_t)sprintf(gbnf + len, "%s\"%c%c\"", i ? " | " : "", 'a' + i % 26,
				       'a' + i / 26);
	struct grammar *wide = NULL;
	CHECK(grammar_from_gbnf(gbnf, len, &wide, &err) == ING_OK, "wide grammar: %s", err.msg);
	free(gbnf);
	if (wide) {
		struct engine_params p = { .prompt = prompts[0], .n_prompt = prompt_len[0],
					   .max_tokens = 4, .top_logprobs = -1,
					   .sample = sample_params_default(), .grammar = wide };
		struct result rw = { 0 };
		uint64_t id;
		int rc = engine_submit(e, &p, on_event, &rw, &id, &err);
		CHECK(rc == ING_ERR_UNSUPPORTED && strstr(err.msg, "expands too far"),
		      "a grammar too wide to follow: refused at submit (%d: %s)", rc, err.msg);
		grammar_free(wide);
	}
	for (int i = 0; i < 4; i++) {
		char *text = NULL;
		size_t n = 0;
		tokenizer_decode(engine_tokenizer(e), r[i].toks, (size_t)r[i].n, 0, &text, &n, &err);
		cJSON *v = text ? cJSON_Parse(text) : NULL;
		const cJSON *a = cJSON_GetObjectItem(v, "a"), *b = cJSON_GetObjectItem(v, "b");
		CHECK(r[i].finish == ENGINE_FINISH_STOP && !r[i].error && cJSON_IsNumber(a) &&
			      a->valueint >= 0 && a->valueint <= 9 && cJSON_IsString(b) &&
			      cJSON_GetArraySize(v) == 2,
		      "constrained request %d: finish %d, text '%s'", i, r[i].finish, text ? text : "");
		cJSON_Delete(v);
		ing_free(text);
	}
	engine_destroy(e, true);
}

/* The scores of prompt p[0, n) from one forward pass over it (graph
 * runner, every row's logits): log-softmax (ops_logsumexp, as the engine
 * forms it), rank and the best SCORE_TOP ids. */
static void score_reference(const int32_t *p, int n, struct scores *ref)
{
	struct model *m = NULL;
	struct fwd *f = NULL;
	struct pool *pool = NULL;
	struct runner *r = NULL;
	ing_err err = { 0 };
	struct fwd_config fc = { .max_batch = n, .max_logits = n, .n_ctx = n, .n_seq = 1,
				 .n_threads = 2, .kv_type = engine_config_default().kv_type };
	int rc = model_open(check_default_model(), &m, &err);
	if (!rc)
		rc = fwd_create(m, &fc, &f, &err);
	if (!rc)
		rc = pool_create(2, 1, &pool, &err);
	if (!rc)
		rc = runner_create(RUNNER_GRAPH, f, pool, &r, &err);
	int32_t pos[SCORE_N], seq[SCORE_N] = { 0 };
	bool want[SCORE_N];
	for (int i = 0; i < n; i++) {
		pos[i] = i;
		want[i] = true;
	}
	struct fwd_batch b = { .n = n, .tokens = p, .pos = pos, .seq = seq, .want_logits = want };
	if (!rc)
		rc = runner_step(r, &b, &err);
	CHECK(rc == ING_OK, "reference forward pass: %s", err.msg);
	ref->n = rc ? 0 : n - 1;
	ref->in_order = true;
	const int64_t V = m ? m->hp.n_vocab : 0;
	int64_t n_out;
	const float *logits = rc ? NULL : fwd_logits(f, &n_out);
	for (int i = 0; i < ref->n; i++) {
		const float *l = logits + (size_t)i * (size_t)V;
		const float lse = ops_logsumexp(l, V);
		ref->lp[i] = l[p[i + 1]] - lse;
		ref->rank[i] = 1;
		for (int k = 0; k < SCORE_TOP; k++)
			ref->top[i][k] = -1;
		for (int64_t v = 0; v < V; v++) {
			float lv = l[v] - lse;
			ref->rank[i] += lv > ref->lp[i];
			for (int k = 0; k < SCORE_TOP; k++) {
				int32_t t = ref->top[i][k];
				if (t < 0 || lv > l[t] - lse) {
					memmove(&ref->top[i][k + 1], &ref->top[i][k],
						sizeof(int32_t) * (SCORE_TOP - 1 - k));
					ref->top[i][k] = (int32_t)v;
					break;
				}
			}
		}
	}
	runner_destroy(r);
	pool_destroy(pool);
	fwd_destroy(f);
	model_close(m);
}

static void scores_compare(const struct scores *ref, const struct result *r, const char *what)
{
	bool same = r->sc.n == ref->n && r->sc.in_order;
	for (int64_t i = 0; same && i < ref->n; i++)
		same = r->sc.lp[i] == ref->lp[i] && r->sc.rank[i] == ref->rank[i] &&
		       !memcmp(r->sc.top[i], ref->top[i], sizeof ref->top[i]);
	CHECK(same, "%s: %lld prompt scores (of %lld) in order and equal to the forward pass's",
	      what, (long long)r->sc.n, (long long)ref->n);
	CHECK(r->done && !r->error && r->n == 4, "%s: 4 tokens follow (%d)", what, r->n);
}

/* score_prompt: alone, again with the prompt in the prefix cache (which
 * it must not use), batched with decoding requests, and in a pool small
 * enough that it is preempted while scoring; its generated tokens are
 * those of the same request unscored. */
static void test_prompt_scoring(const struct result *solo)
{
	int32_t p[SCORE_N];
	for (int j = 0; j < SCORE_N; j++)
		p[j] = j ? 5000 + 11 * j : 2;
	struct scores ref = { 0 };
	score_reference(p, SCORE_N, &ref);
	struct engine_params ep = { .prompt = p, .n_prompt = SCORE_N, .max_tokens = 4,
				    .top_logprobs = -1, .sample = sample_params_default(),
				    .score_prompt = true, .prompt_top = SCORE_TOP };
	ep.sample.temperature = 0;
	static struct result a, b, c, d, plain, others[2], tiny[2];
	uint64_t id;
	ing_err err = { 0 };
	struct engine *e = start(3, 0, 4);
	if (!e)
		return;
	run_greedy(e, p, SCORE_N, 4, &plain);
	CHECK(engine_submit(e, &ep, on_event, &a, &id, &err) == ING_OK, "%s", err.msg);
	wait_all(&a, 1);
	scores_compare(&ref, &a, "alone");
	CHECK(a.cached == 0 && a.n == plain.n && !memcmp(a.toks, plain.toks, sizeof a.toks),
	      "scoring skips the prefix cache and changes no token");
	CHECK(engine_submit(e, &ep, on_event, &b, &id, &err) == ING_OK, "%s", err.msg);
	wait_all(&b, 1);
	scores_compare(&ref, &b, "cached prompt");
	submit(e, 0, &others[0], GEN);
	CHECK(engine_submit(e, &ep, on_event, &c, &id, &err) == ING_OK, "%s", err.msg);
	submit(e, 1, &others[1], GEN);
	wait_all(&c, 1);
	wait_all(others, 2);
	scores_compare(&ref, &c, "batched");
	CHECK(!memcmp(others[0].toks, solo[0].toks, sizeof others[0].toks) &&
	      !memcmp(others[1].toks, solo[1].toks, sizeof others[1].toks),
	      "requests batched with a scoring one get their solo tokens");
	engine_destroy(e, true);
	e = start(3, 2, 4); /* 6 blocks of 16 positions (F16): 84 for d, 20 and 21 for the others */
	if (!e)
		return;
	submit(e, 0, &tiny[0], GEN);
	submit(e, 1, &tiny[1], GEN);
	CHECK(engine_submit(e, &ep, on_event, &d, &id, &err) == ING_OK, "%s", err.msg);
	wait_all(&d, 1);
	wait_all(tiny, 2);
	struct engine_stats st;
	engine_stats_get(e, &st);
	CHECK(st.preemptions > 0, "the small pool preempts (%llu)", (unsigned long long)st.preemptions);
	scores_compare(&ref, &d, "preempted");
	CHECK(!memcmp(d.toks, plain.toks, sizeof d.toks), "preempted: the same tokens");
	engine_destroy(e, true);
}

/* A greedy request with top_logprobs, alone and then in the same steps as
 * two greedy requests without: its logprobs are the forward pass's
 * (score_reference over the prompt and the tokens), and batched the same
 * tokens and logprobs bit for bit. (Rows of greedy requests alone leave
 * the logits rows unwritten, fwd_batch.argmax_only; a row wanting
 * logprobs must keep them.) */
static void test_logprobs_batched(const struct result *solo)
{
	struct engine_params p = { .prompt = prompts[2], .n_prompt = prompt_len[2], .max_tokens = GEN,
				   .top_logprobs = 2, .sample = sample_params_default() };
	p.sample.temperature = 0;
	static struct result alone, mixed, others[2];
	uint64_t id;
	ing_err err = { 0 };
	struct engine *e = start(3, 0, 4);
	if (!e)
		return;
	CHECK(engine_submit(e, &p, on_event, &alone, &id, &err) == ING_OK, "%s", err.msg);
	wait_all(&alone, 1);
	submit(e, 0, &others[0], GEN);
	CHECK(engine_submit(e, &p, on_event, &mixed, &id, &err) == ING_OK, "%s", err.msg);
	submit(e, 1, &others[1], GEN);
	wait_all(&mixed, 1);
	wait_all(others, 2);
	int32_t seq[SCORE_N]; /* the prompt and the tokens: token j at prompt_len + j */
	const int n = prompt_len[2] + alone.n;
	memcpy(seq, prompts[2], sizeof(int32_t) * (size_t)prompt_len[2]);
	memcpy(seq + prompt_len[2], alone.toks, sizeof(int32_t) * (size_t)alone.n);
	struct scores ref = { 0 };
	score_reference(seq, n, &ref);
	bool same = alone.n > 0 && ref.n == n - 1;
	for (int j = 0; same && j < alone.n; j++)
		same = alone.lp[j] == ref.lp[prompt_len[2] - 1 + j];
	CHECK(same, "a greedy request's logprobs are the forward pass's");
	CHECK(alone.n > 0 && alone.n == solo[2].n && mixed.n == alone.n &&
		      !memcmp(alone.toks, mixed.toks, sizeof alone.toks) &&
		      !memcmp(alone.lp, mixed.lp, sizeof alone.lp) &&
		      !memcmp(alone.toks, solo[2].toks, sizeof alone.toks),
	      "a logprobs request batched with greedy ones: its solo tokens and logprobs");
	CHECK(!memcmp(others[0].toks, solo[0].toks, sizeof others[0].toks) &&
		      !memcmp(others[1].toks, solo[1].toks, sizeof others[1].toks),
	      "greedy requests batched with a logprobs one get their solo tokens");
	engine_destroy(e, true);
}

/* Runs a scenario and prints how long it took (the TSan build is slow). */
#define SCENARIO(call)                                                                   \
	do {                                                                             \
		double t0_ = clock_now_s();                                                    \
		call;                                                                    \
		fprintf(stderr, "test_engine: %-28s %6.1f s\n", #call, clock_now_s() - t0_); \
	} while (0)

int main(void)
{
	if (!check_default_model()) {
		CHECK(0, "default model missing: run ./ingot pull");
		return check_summary("test_engine");
	}
	size_t live = ing_mem_live();
	make_prompts();
	struct result solo[NREQ] = { 0 };
	SCENARIO(run_solo(solo));
	SCENARIO(test_batching(solo));
	SCENARIO(test_preemption(solo));
	SCENARIO(test_preemption_sampled());
	SCENARIO(test_speculation(solo));
	SCENARIO(test_prefix_cancel_errors());
	SCENARIO(test_partial_prefix());
	SCENARIO(test_shared_prefill());
	SCENARIO(test_grammar_requests());
	SCENARIO(test_prompt_scoring(solo));
	SCENARIO(test_logprobs_batched(solo));
	CHECK(ing_mem_live() == live, "leak: %zu bytes", ing_mem_live() - live);
	return check_summary("test_engine");
}
