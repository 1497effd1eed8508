/* grammar_match.c — matching bytes and tokens against a grammar.
 *
 * The state of a parse is the set of stacks consistent with the bytes so
 * far (grammar_int.h). A transition on byte b advances every stack whose
 * top class holds b and expands the result (closure): a rule reference is
 * replaced by each of its alternatives, END pops to the caller, and a
 * reference in tail position pops its caller first so right recursion
 * keeps stacks flat. The resulting set, sorted and deduplicated, is the
 * key under which the next state is interned.
 *
 * States and their 256-way transition tables are built lazily and shared
 * by every matcher of the grammar (under the grammar's lock), so each
 * distinct (state, byte group) pair is computed once: bytes that no class
 * of the grammar tells apart form a group (grammar.c), and one closure
 * fills the table for all of them. A state's token mask is
 * computed on first use by walking the vocabulary trie in preorder with
 * one automaton state per depth, skipping a whole subtree as soon as its
 * prefix reaches a dead state, and cached on the state. After
 * GRAMMAR_MAX_STATES states the automaton is reset (a matcher keeps its
 * own copy of its key and re-interns it); after GRAMMAR_MAX_MASKS masks
 * the masks are dropped.
 *
 * The sole allocation in a decode step is that lazy construction; a state
 * already seen costs a table load per byte and one pass over the mask. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_int.h"
#include "mem.h"
#include "tokenizer.h"

struct grammar_matcher {
	struct grammar *g;
	const struct grammar_vocab *v;
	int32_t state;
	int64_t work;       /* automaton work its masks have needed so far */
	uint64_t generation;
	uint32_t *key;      /* copy of the state's key (re-interned after a reset) */
	size_t key_len, key_cap;
};

/* ---- scratch buffers ---- */

/* Grows *p to hold n words. Always leaves a buffer, even for n == 0, so
 * callers may form p + offset (an empty key at offset 0) without pointer
 * arithmetic on NULL. */
static bool need(uint32_t **p, size_t *cap, size_t n)
{
	if (n <= *cap && *p)
		return true;
	size_t c = *cap ? *cap * 2 : 256;
	while (c < n)
		c *= 2;
	uint32_t *q = ing_realloc(*p, c * sizeof *q);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

static void states_clear(struct gdfa *d)
{
	for (int32_t i = 0; i < d->n; i++) {
		ing_free(d->st[i].trans);
		ing_free(d->st[i].mask);
	}
	d->n = 0;
	d->n_keys = 0;
	d->n_masks = 0;
	if (d->table)
		memset(d->table, 0xff, d->table_cap * sizeof *d->table);
	d->generation++;
}

void gdfa_free(struct gdfa *d)
{
	states_clear(d);
	ing_free(d->st);
	ing_free(d->keys);
	ing_free(d->table);
	ing_free(d->todo);
	ing_free(d->out);
	ing_free(d->cur);
	ing_free(d->recs);
	ing_free(d->walk);
	*d = (struct gdfa){ 0 };
}

/* ---- closure ---- */

/* Pushes the stack cur[0..len) onto the todo list as a record
 * [p0 .. p(len-1), len] (length last so records pop from the end). */
static bool todo_push(struct gdfa *d, const uint32_t *cur, uint32_t len, uint32_t extra)
{
	size_t n = len + (extra != GSYM_END) + 1;
	if (!need(&d->todo, &d->cap_todo, d->n_todo + n))
		return false;
	uint32_t *t = d->todo + d->n_todo;
	memcpy(t, cur, len * sizeof *cur);
	if (extra != GSYM_END)
		t[len++] = extra;
	t[len] = len;
	d->n_todo += n;
	return true;
}

static bool out_push(struct gdfa *d, const uint32_t *cur, uint32_t len)
{
	if (!need(&d->out, &d->cap_out, d->n_out + len + 1))
		return false;
	d->out[d->n_out] = len;
	memcpy(d->out + d->n_out + 1, cur, len * sizeof *cur);
	d->n_out += len + 1;
	return true;
}

/* Expands every stack on the todo list into d->out. Stacks deeper than
 * GRAMMAR_MAX_DEPTH are dropped. Returns 0, GFAIL_NOMEM, or GFAIL_EXPAND
 * when the expansion does not terminate within GRAMMAR_MAX_EXPAND steps (a
 * grammar with empty cycles). The steps count toward d->work. */
static enum gdfa_fail closure(const struct grammar *g, struct gdfa *d)
{
	uint32_t *cur = d->cur;
	long steps = 0;
	enum gdfa_fail rc = 0;
	while (d->n_todo > 0 && !rc) {
		uint32_t len = d->todo[d->n_todo - 1];
		d->n_todo -= len + 1;
		memcpy(cur, d->todo + d->n_todo, len * sizeof *cur);
		for (;;) {
			if (++steps > GRAMMAR_MAX_EXPAND) {
				rc = GFAIL_EXPAND;
				break;
			}
			if (len == 0) {
				rc = out_push(d, cur, 0) ? 0 : GFAIL_NOMEM;
				break;
			}
			uint32_t p = cur[len - 1], s = g->syms[p];
			if (GSYM_IS_CLASS(s)) {
				rc = out_push(d, cur, len) ? 0 : GFAIL_NOMEM;
				break;
			}
			if (s == GSYM_END) {
				len--;
				continue;
			}
			/* a reference: the caller continues after it (unless
			 * that is the end of its alternative: tail call) */
			if (g->syms[p + 1] == GSYM_END)
				len--;
			else
				cur[len - 1] = p + 1;
			if (len + 1 > GRAMMAR_MAX_DEPTH)
				break;
			for (uint32_t a = g->rule_alt[s]; a < g->rule_alt[s + 1] && !rc; a++)
				if (!todo_push(d, cur, len, g->alt_start[a]))
					rc = GFAIL_NOMEM;
			break;
		}
	}
	d->work += steps;
	return rc;
}

/* ---- interning ---- */

static int rec_cmp(const void *a, const void *b, void *keys)
{
	const uint32_t *x = (const uint32_t *)keys + *(const uint32_t *)a;
	const uint32_t *y = (const uint32_t *)keys + *(const uint32_t *)b;
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	for (uint32_t i = 1; i <= x[0]; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}

static uint64_t key_hash(const uint32_t *k, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	for (size_t i = 0; i < n; i++) {
		h ^= k[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

/* Sorts and deduplicates the records of d->out into d->cur (canonical
 * key); returns its length. */
static size_t canonical(struct gdfa *d, bool *ok)
{
	size_t n_rec = 0;
	for (size_t i = 0; i < d->n_out; i += d->out[i] + 1)
		n_rec++;
	if (!need(&d->recs, &d->cap_recs, n_rec + 1) || !need(&d->cur, &d->cap_cur, d->n_out + 1)) {
		*ok = false;
		return 0;
	}
	n_rec = 0;
	for (size_t i = 0; i < d->n_out; i += d->out[i] + 1)
		d->recs[n_rec++] = (uint32_t)i;
	qsort_r(d->recs, n_rec, sizeof *d->recs, rec_cmp, d->out);
	size_t n = 0;
	for (size_t r = 0; r < n_rec; r++) {
		if (r > 0 && rec_cmp(&d->recs[r], &d->recs[r - 1], d->out) == 0)
			continue;
		const uint32_t *x = d->out + d->recs[r];
		memcpy(d->cur + n, x, (x[0] + 1) * sizeof *x);
		n += x[0] + 1;
	}
	*ok = true;
	return n;
}

static bool table_grow(struct gdfa *d)
{
	uint32_t cap = d->table_cap ? d->table_cap * 2 : 1024;
	int32_t *t = ing_malloc_array(cap, sizeof *t);
	if (!t)
		return false;
	memset(t, 0xff, cap * sizeof *t);
	for (int32_t i = 0; i < d->n; i++) {
		uint32_t h = (uint32_t)d->st[i].hash & (cap - 1);
		while (t[h] >= 0)
			h = (h + 1) & (cap - 1);
		t[h] = i;
	}
	ing_free(d->table);
	d->table = t;
	d->table_cap = cap;
	return true;
}

/* The state for key k[0..n), created if new. -1 on allocation failure. */
static int32_t intern(struct gdfa *d, const uint32_t *k, size_t n)
{
	uint64_t h = key_hash(k, n);
	if ((uint32_t)(d->n + 1) * 2 > d->table_cap && !table_grow(d))
		return -1;
	uint32_t i = (uint32_t)h & (d->table_cap - 1);
	for (; d->table[i] >= 0; i = (i + 1) & (d->table_cap - 1)) {
		const struct gstate *s = &d->st[d->table[i]];
		if (s->hash == h && s->key_len == n && !memcmp(d->keys + s->key_off, k, n * sizeof *k))
			return d->table[i];
	}
	if (d->n == d->cap) {
		int32_t c = d->cap ? d->cap * 2 : 64;
		struct gstate *st = ing_realloc(d->st, (size_t)c * sizeof *st);
		if (!st)
			return -1;
		d->st = st;
		d->cap = c;
	}
	/* k may point into d->keys (re-interning a matcher's key does not,
	 * but be safe): copy through need() first */
	if (!need(&d->keys, &d->cap_keys, d->n_keys + n))
		return -1;
	memmove(d->keys + d->n_keys, k, n * sizeof *k);
	struct gstate *s = &d->st[d->n];
	*s = (struct gstate){ .key_off = (uint32_t)d->n_keys, .key_len = (uint32_t)n, .hash = h,
			      .plain_next = GDFA_UNKNOWN };
	/* records are sorted by length: an empty stack comes first */
	s->accepting = n > 0 && k[0] == 0;
	s->done = n == 1 && k[0] == 0;
	d->n_keys += n;
	d->table[i] = d->n;
	return d->n++;
}

/* The error for a failure, in err (may be NULL); returns its code. */
static int fail_report(const struct gdfa *d, enum gdfa_fail why, ing_err *err)
{
	switch (why) {
	case GFAIL_EXPAND:
		return ing_err_set(err, ING_ERR_UNSUPPORTED,
				   "the grammar expands too far at one byte (more than %d "
				   "steps: a rule that can match nothing recurses into itself, "
				   "or too many alternatives open at once)", GRAMMAR_MAX_EXPAND);
	case GFAIL_WORK:
		return ing_err_set(err, ING_ERR_UNSUPPORTED,
				   "the grammar is too complex to follow: the tokens allowed at "
				   "one step need more than %lld automaton steps (e.g. a pattern "
				   "with '.*' and then many '.')", (long long)d->max_work);
	case GFAIL_WORK_TOTAL:
		return ing_err_set(err, ING_ERR_UNSUPPORTED,
				   "the grammar is too complex to follow: its masks needed more "
				   "than %lld automaton steps over the output so far",
				   (long long)d->max_work_total);
	case GFAIL_NOMEM:
	default:
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory (grammar automaton)");
	}
}

static int32_t step_fail(struct gdfa *d, enum gdfa_fail why)
{
	d->fail = why;
	return GDFA_FAIL;
}

/* The state reached from state s on byte c: an id, GDFA_DEAD, or GDFA_FAIL
 * (allocation, runaway expansion, or d->work past d->budget before this
 * transition). */
static int32_t step(const struct grammar *g, struct gdfa *d, int32_t s, unsigned c)
{
	struct gstate *st = &d->st[s];
	if (st->trans && st->trans[c] != GDFA_UNKNOWN)
		return st->trans[c];
	if (d->work > d->budget) /* the call's own limit, or what its matcher had left */
		return step_fail(d, d->budget < d->max_work ? GFAIL_WORK_TOTAL : GFAIL_WORK);
	if (!st->trans) {
		st->trans = ing_malloc_array(256, sizeof *st->trans);
		if (!st->trans)
			return step_fail(d, GFAIL_NOMEM);
		for (int i = 0; i < 256; i++)
			st->trans[i] = GDFA_UNKNOWN;
	}
	d->n_todo = d->n_out = 0;
	const uint32_t *k = d->keys + st->key_off;
	for (size_t i = 0; i < st->key_len; i += k[i] + 1) {
		uint32_t len = k[i];
		if (len == 0)
			continue;
		uint32_t top = k[i + len];
		if (!gclass_has(&g->classes[g->syms[top] & ~GSYM_CLASS], c))
			continue;
		if (!todo_push(d, k + i + 1, len - 1, top + 1)) /* k stays valid: no interning yet */
			return step_fail(d, GFAIL_NOMEM);
	}
	d->work += (int64_t)st->key_len;
	int32_t next = GDFA_DEAD;
	if (d->n_todo > 0) {
		if (!need(&d->cur, &d->cap_cur, GRAMMAR_MAX_DEPTH + 1))
			return step_fail(d, GFAIL_NOMEM);
		enum gdfa_fail why = closure(g, d);
		if (why)
			return step_fail(d, why);
		bool ok;
		size_t n = canonical(d, &ok);
		if (!ok)
			return step_fail(d, GFAIL_NOMEM);
		d->work += (int64_t)d->n_out;
		if (n > 0 && (next = intern(d, d->cur, n)) < 0)
			return step_fail(d, GFAIL_NOMEM);
	}
	/* every byte of c's group leads to the same state */
	int32_t *trans = d->st[s].trans;
	for (unsigned b = 0; b < 256; b++)
		if (g->byte_class[b] == g->byte_class[c])
			trans[b] = next;
	return next;
}

/* The start state: an id, or GDFA_FAIL (why in d->fail). */
static int32_t initial_state(const struct grammar *g, struct gdfa *d)
{
	d->n_todo = d->n_out = 0;
	uint32_t start = g->start;
	if (!need(&d->cur, &d->cap_cur, GRAMMAR_MAX_DEPTH + 1) ||
	    !todo_push(d, &start, 1, GSYM_END))
		return step_fail(d, GFAIL_NOMEM);
	enum gdfa_fail why = closure(g, d);
	if (why)
		return step_fail(d, why);
	bool ok;
	size_t n = canonical(d, &ok);
	int32_t s = ok ? intern(d, d->cur, n) : -1;
	return s < 0 ? step_fail(d, GFAIL_NOMEM) : s;
}

/* ---- matchers ---- */

static bool remember(struct grammar_matcher *m)
{
	const struct gdfa *d = &m->g->dfa;
	const struct gstate *s = &d->st[m->state];
	if (!need(&m->key, &m->key_cap, s->key_len + 1))
		return false;
	memcpy(m->key, d->keys + s->key_off, s->key_len * sizeof *m->key);
	m->key_len = s->key_len;
	m->generation = d->generation;
	return true;
}

/* Under the lock: makes m->state valid for the current automaton,
 * resetting the automaton first when it has grown too large. */
static bool sync_state(struct grammar_matcher *m)
{
	struct gdfa *d = &m->g->dfa;
	if (d->n > GRAMMAR_MAX_STATES)
		states_clear(d);
	if (m->generation == d->generation)
		return true;
	int32_t s = intern(d, m->key, m->key_len);
	if (s < 0)
		return false;
	m->state = s;
	m->generation = d->generation;
	return true;
}

int grammar_matcher_create(struct grammar *g, const struct grammar_vocab *v,
			   struct grammar_matcher **out, ing_err *err)
{
	*out = NULL;
	struct grammar_matcher *m = ing_calloc(1, sizeof *m);
	if (!m)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	m->g = grammar_ref(g);
	m->v = v;
	pthread_mutex_lock(&g->mu);
	m->state = initial_state(g, &g->dfa);
	enum gdfa_fail why = m->state < 0 ? g->dfa.fail : remember(m) ? 0 : GFAIL_NOMEM;
	pthread_mutex_unlock(&g->mu);
	if (why) {
		grammar_matcher_free(m);
		return fail_report(&g->dfa, why, err);
	}
	*out = m;
	return ING_OK;
}

void grammar_matcher_free(struct grammar_matcher *m)
{
	if (!m)
		return;
	grammar_free(m->g);
	ing_free(m->key);
	ing_free(m);
}

/* Follows bytes from state s; GDFA_DEAD when they leave the language. */
static int32_t walk_bytes(struct grammar *g, int32_t s, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n && s >= 0; i++)
		s = step(g, &g->dfa, s, p[i]);
	return s < 0 ? GDFA_DEAD : s;
}

bool grammar_matcher_accept_bytes(struct grammar_matcher *m, const char *s, size_t n)
{
	struct grammar *g = m->g;
	pthread_mutex_lock(&g->mu);
	g->dfa.work = 0;
	g->dfa.budget = g->dfa.max_work;
	bool ok = sync_state(m);
	int32_t t = ok ? walk_bytes(g, m->state, (const unsigned char *)s, n) : GDFA_DEAD;
	ok = t >= 0;
	if (ok) {
		int32_t old = m->state;
		m->state = t;
		if (!remember(m)) {
			m->state = old;
			ok = false;
		}
	}
	pthread_mutex_unlock(&g->mu);
	return ok;
}

static bool is_eog(const struct grammar_vocab *v, int32_t tok)
{
	for (int i = 0; i < v->n_eog; i++)
		if (v->eog[i] == tok)
			return true;
	return false;
}

bool grammar_matcher_accept_token(struct grammar_matcher *m, int32_t tok)
{
	const struct grammar_vocab *v = m->v;
	if (!v || tok < 0 || tok >= v->n_vocab)
		return false;
	if (is_eog(v, tok))
		return grammar_matcher_can_end(m);
	if (tokenizer_is_control(v->tk, tok) ||
	    tokenizer_token_type(v->tk, tok) == TOKEN_TYPE_UNUSED)
		return false;
	size_t n;
	const char *p = tokenizer_piece(v->tk, tok, 0, &n);
	return n > 0 && grammar_matcher_accept_bytes(m, p, n);
}

bool grammar_matcher_can_end(const struct grammar_matcher *m)
{
	/* the key's first record is the empty stack iff complete; read the
	 * matcher's own copy, which needs no lock */
	return m->key_len > 0 && m->key[0] == 0;
}

bool grammar_matcher_done(const struct grammar_matcher *m)
{
	return m->key_len == 1 && m->key[0] == 0;
}

/* ---- masks ---- */

/* Walks trie t from state s, setting the bits of allowed tokens and
 * counting those not set before. */
static bool mask_walk(struct grammar *g, const struct gtrie *t, int32_t s, uint32_t *bits,
		      int64_t *n_allowed)
{
	struct gdfa *d = &g->dfa;
	if ((size_t)t->max_depth + 1 > d->cap_walk) {
		int32_t *w = ing_realloc(d->walk, ((size_t)t->max_depth + 1) * sizeof *w);
		if (!w) {
			d->fail = GFAIL_NOMEM;
			return false;
		}
		d->walk = w;
		d->cap_walk = (size_t)t->max_depth + 1;
	}
	int32_t *at = d->walk;
	at[0] = s;
	int64_t n = 0;
	for (int32_t j = 0; j < t->n_nodes;) {
		const struct gnode *nd = &t->nodes[j];
		int32_t next = step(g, d, at[nd->depth - 1], nd->byte);
		if (next == GDFA_FAIL)
			return false;
		if (next < 0) {
			j = nd->end;
			continue;
		}
		at[nd->depth] = next;
		for (int32_t i = nd->tok_lo; i < nd->tok_lo + nd->tok_n; i++) {
			int32_t tok = t->sorted[i];
			n += !((bits[tok >> 5] >> (tok & 31)) & 1u);
			bits[tok >> 5] |= 1u << (tok & 31);
		}
		j++;
	}
	*n_allowed += n;
	return true;
}

/* The distinct states reached from set[0..n) on bytes lo..hi, into set;
 * returns the new size, or -1 on a dead end or more than cap states. */
static int step_set(struct grammar *g, int32_t *set, int n, int cap, unsigned lo, unsigned hi)
{
	int32_t next[16];
	int m = 0;
	for (int i = 0; i < n; i++)
		for (unsigned c = lo; c <= hi; c++) {
			int32_t t = step(g, &g->dfa, set[i], c);
			if (t < 0)
				return -1;
			int k = 0;
			while (k < m && next[k] != t)
				k++;
			if (k == m) {
				if (m == cap)
					return -1;
				next[m++] = t;
			}
		}
	memcpy(set, next, (size_t)m * sizeof *set);
	return m;
}

/* The one state every plain-text character (grammar_int.h) takes s to,
 * GDFA_DEAD when s refuses them all, else GDFA_MIXED (also on failure).
 * The states after each byte of the UTF-8 patterns are followed as sets,
 * which stay tiny because the automaton is deterministic. */
static int32_t plain_next(struct grammar *g, int32_t s)
{
	if (g->dfa.st[s].plain_next != GDFA_UNKNOWN)
		return g->dfa.st[s].plain_next;
	static const unsigned char pat[][5] = { /* lead lo, lead hi, 2nd lo, 2nd hi, more */
		{ 0xc2, 0xdf, 0x80, 0xbf, 0 }, { 0xe0, 0xe0, 0xa0, 0xbf, 1 },
		{ 0xe1, 0xec, 0x80, 0xbf, 1 }, { 0xed, 0xed, 0x80, 0x9f, 1 },
		{ 0xee, 0xef, 0x80, 0xbf, 1 }, { 0xf0, 0xf0, 0x90, 0xbf, 2 },
		{ 0xf1, 0xf3, 0x80, 0xbf, 2 }, { 0xf4, 0xf4, 0x80, 0x8f, 2 },
	};
	int32_t to = step(g, &g->dfa, s, ' ');
	bool ok = to >= GDFA_DEAD;
	for (unsigned c = 0x21; c < 0x80 && ok; c++)
		if (c != '"' && c != '\\')
			ok = step(g, &g->dfa, s, c) == to;
	for (size_t p = 0; p < sizeof pat / sizeof *pat && ok; p++) {
		if (to == GDFA_DEAD) { /* every lead byte must be refused */
			for (unsigned c = pat[p][0]; c <= pat[p][1] && ok; c++)
				ok = step(g, &g->dfa, s, c) == GDFA_DEAD;
			continue;
		}
		int32_t set[16] = { s };
		int n = step_set(g, set, 1, 16, pat[p][0], pat[p][1]);
		if (n > 0)
			n = step_set(g, set, n, 16, pat[p][2], pat[p][3]);
		for (int k = 0; k < pat[p][4] && n > 0; k++)
			n = step_set(g, set, n, 16, 0x80, 0xbf);
		ok = n == 1 && set[0] == to;
	}
	int32_t r = ok ? to : GDFA_MIXED;
	/* a step that ran out of budget decided nothing: ask again next time */
	if (ok || g->dfa.work <= g->dfa.budget)
		g->dfa.st[s].plain_next = r;
	return r;
}

/* How many plain-text characters s accepts in a row when it treats them
 * all alike (INT32_MAX: any number), or -1 when it does not. */
static int32_t plain_run(struct grammar *g, int32_t s)
{
	for (int32_t k = 0; k <= GRAMMAR_PLAIN_MAXLEN; k++) {
		int32_t next = plain_next(g, s);
		if (next == s)
			return INT32_MAX;
		if (next == GDFA_DEAD)
			return k;
		if (next < 0)
			return -1;
		s = next;
	}
	return -1;
}

/* Sets logits[t] = -INFINITY for every token t whose bit is clear. */
static void mask_apply(const uint32_t *bits, int64_t V, float *logits)
{
	for (int64_t w = 0; w * 32 < V; w++) {
		uint32_t b = bits[w];
		if (b == 0xffffffffu)
			continue;
		int64_t hi = V - w * 32 < 32 ? V - w * 32 : 32;
		float *l = logits + w * 32;
		if (b == 0) {
			for (int64_t i = 0; i < hi; i++)
				l[i] = -INFINITY;
			continue;
		}
		for (int64_t i = 0; i < hi; i++)
			if (!((b >> i) & 1u))
				l[i] = -INFINITY;
	}
}

/* The cached mask of state s, computed if missing. NULL on failure, why
 * in d->fail. */
static const uint32_t *state_mask(struct grammar *g, const struct grammar_vocab *v, int32_t s)
{
	struct gdfa *d = &g->dfa;
	if (d->mask_vocab != v || d->n_masks >= GRAMMAR_MAX_MASKS) {
		for (int32_t i = 0; i < d->n; i++) {
			ing_free(d->st[i].mask);
			d->st[i].mask = NULL;
		}
		d->n_masks = 0;
		d->mask_vocab = v;
	}
	if (d->st[s].mask)
		return d->st[s].mask;
	size_t words = ((size_t)v->n_vocab + 31) / 32;
	uint32_t *bits = ing_calloc(words, sizeof *bits);
	if (!bits) {
		d->fail = GFAIL_NOMEM;
		return NULL;
	}
	int64_t n = 0;
	int32_t run = plain_run(g, s);
	if (run == INT32_MAX) {
		memcpy(bits, v->plain_bits, words * sizeof *bits);
		n = v->n_plain;
	} else if (run >= 0) {
		n = v->plain_upto[run];
		for (int64_t i = 0; i < n; i++) {
			int32_t tok = v->plain_sorted[i];
			bits[tok >> 5] |= 1u << (tok & 31);
		}
	}
	bool ok = mask_walk(g, run >= 0 ? &v->other : &v->all, s, bits, &n);
	if (ok && d->st[s].accepting)
		for (int i = 0; i < v->n_eog; i++) {
			int32_t tok = v->eog[i];
			n += !((bits[tok >> 5] >> (tok & 31)) & 1u);
			bits[tok >> 5] |= 1u << (tok & 31);
		}
	if (!ok) {
		ing_free(bits);
		return NULL;
	}
	d->st[s].mask = bits; /* mask_walk may have moved d->st: index again */
	d->st[s].n_allowed = n;
	d->n_masks++;
	return bits;
}

int64_t grammar_matcher_mask(struct grammar_matcher *m, float *logits, ing_err *err)
{
	struct grammar *g = m->g;
	if (!m->v) {
		ing_err_set(err, ING_ERR_INVALID, "the matcher has no vocabulary");
		return -1;
	}
	const int64_t V = m->v->n_vocab;
	pthread_mutex_lock(&g->mu);
	struct gdfa *d = &g->dfa;
	/* one call may take max_work, and all of a matcher's max_work_total:
	 * a grammar just under the first must not cost every step forever */
	int64_t left = d->max_work_total - m->work;
	d->budget = left < d->max_work ? left : d->max_work;
	d->work = 0;
	const uint32_t *bits = NULL;
	if (sync_state(m))
		bits = state_mask(g, m->v, m->state);
	else
		d->fail = GFAIL_NOMEM;
	m->work += d->work;
	int64_t n = -1;
	if (bits) {
		n = d->st[m->state].n_allowed;
		mask_apply(bits, V, logits);
	} else {
		fail_report(d, d->fail, err);
	}
	pthread_mutex_unlock(&g->mu);
	return n;
}
