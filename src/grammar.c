/* grammar.c — building rules and flattening them into a grammar (see
 * grammar_int.h for the representation).
 *
 * The builder keeps every alternative in its own growable array so that
 * rules can be created while another is half built (the schema compiler
 * recurses); gb_finish lays them out back to back. Failures are sticky:
 * after the first one every call is a no-op and gb_finish reports it, so
 * compilers need not check each call. */
#include <string.h>

#include "grammar_int.h"
#include "mem.h"

static bool grow(void **p, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return true;
	int c = *cap ? *cap * 2 : 8;
	while (c < need)
		c *= 2;
	void *q = ing_realloc(*p, (size_t)c * elem);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

void gb_free(struct gbuild *b)
{
	for (int r = 0; r < b->n_rules; r++) {
		for (int a = 0; a < b->rules[r].n; a++)
			ing_free(b->rules[r].alts[a].s);
		ing_free(b->rules[r].alts);
	}
	ing_free(b->rules);
	ing_free(b->classes);
	*b = (struct gbuild){ 0 };
}

int gb_rule_new(struct gbuild *b)
{
	if (b->failed)
		return 0;
	if (b->n_rules >= GRAMMAR_MAX_RULES) {
		b->failed = ING_ERR_UNSUPPORTED;
		return 0;
	}
	if (!grow((void **)&b->rules, &b->cap_rules, b->n_rules + 1, sizeof *b->rules)) {
		b->failed = ING_ERR_NOMEM;
		return 0;
	}
	b->rules[b->n_rules] = (struct gb_rule){ 0 };
	return b->n_rules++;
}

void gb_rule_add(struct gbuild *b, int r, const uint32_t *syms, int n)
{
	if (b->failed)
		return;
	struct gb_rule *R = &b->rules[r];
	if (!grow((void **)&R->alts, &R->cap, R->n + 1, sizeof *R->alts)) {
		b->failed = ING_ERR_NOMEM;
		return;
	}
	struct gb_alt *A = &R->alts[R->n];
	*A = (struct gb_alt){ 0 };
	if (n > 0) {
		A->s = ing_malloc_array((size_t)n, sizeof *A->s);
		if (!A->s) {
			b->failed = ING_ERR_NOMEM;
			return;
		}
		memcpy(A->s, syms, (size_t)n * sizeof *syms);
	}
	A->n = A->cap = n;
	R->n++;
}

uint32_t gb_class(struct gbuild *b, const struct gclass *c)
{
	if (b->failed)
		return GSYM_CLASS;
	for (int i = 0; i < b->n_classes; i++)
		if (!memcmp(&b->classes[i], c, sizeof *c))
			return GSYM_CLASS | (uint32_t)i;
	if (!grow((void **)&b->classes, &b->cap_classes, b->n_classes + 1, sizeof *b->classes)) {
		b->failed = ING_ERR_NOMEM;
		return GSYM_CLASS;
	}
	b->classes[b->n_classes] = *c;
	return GSYM_CLASS | (uint32_t)b->n_classes++;
}

uint32_t gb_range(struct gbuild *b, unsigned lo, unsigned hi)
{
	struct gclass c = { { 0 } };
	for (unsigned x = lo; x <= hi && x < 256; x++)
		c.w[x >> 5] |= 1u << (x & 31);
	return gb_class(b, &c);
}

uint32_t gb_byte(struct gbuild *b, unsigned c) { return gb_range(b, c, c); }

uint32_t gb_set(struct gbuild *b, const char *set)
{
	struct gclass c = { { 0 } };
	for (const unsigned char *p = (const unsigned char *)set; *p; p++)
		c.w[*p >> 5] |= 1u << (*p & 31);
	return gb_class(b, &c);
}

uint32_t gb_seqv(struct gbuild *b, const uint32_t *syms, int n)
{
	if (n == 1)
		return syms[0];
	int r = gb_rule_new(b);
	gb_rule_add(b, r, syms, n);
	return (uint32_t)r;
}

uint32_t gb_altv(struct gbuild *b, const uint32_t *syms, int n)
{
	if (n == 1)
		return syms[0];
	int r = gb_rule_new(b);
	for (int i = 0; i < n; i++)
		gb_rule_add(b, r, &syms[i], 1);
	return (uint32_t)r;
}

uint32_t gb_nothing(struct gbuild *b) { return (uint32_t)gb_rule_new(b); }

uint32_t gb_lit(struct gbuild *b, const char *s, size_t n)
{
	if (n == 1)
		return gb_byte(b, (unsigned char)s[0]);
	int r = gb_rule_new(b);
	if (b->failed)
		return 0;
	uint32_t buf[64];
	uint32_t *syms = n <= 64 ? buf : ing_malloc_array(n, sizeof *syms);
	if (!syms) {
		b->failed = ING_ERR_NOMEM;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		syms[i] = gb_byte(b, (unsigned char)s[i]);
	gb_rule_add(b, r, syms, (int)n);
	if (syms != buf)
		ing_free(syms);
	return (uint32_t)r;
}

/* x{min,max}: min copies, then a chain of optional ones (right-nested so
 * that each continuation is a tail call and stacks stay flat), or a
 * right-recursive star when max < 0. */
uint32_t gb_repeat(struct gbuild *b, uint32_t x, int min, int max)
{
	if (b->failed)
		return 0;
	if (max >= 0 && max < min)
		max = min;
	int tail;
	if (max < 0) {
		tail = gb_rule_new(b); /* tail ::= x tail | "" */
		uint32_t a[2] = { x, (uint32_t)tail };
		gb_rule_add(b, tail, a, 2);
		gb_rule_add(b, tail, NULL, 0);
	} else {
		tail = gb_rule_new(b); /* "" */
		gb_rule_add(b, tail, NULL, 0);
		for (int i = min; i < max; i++) {
			int r = gb_rule_new(b);
			uint32_t a[2] = { x, (uint32_t)tail };
			gb_rule_add(b, r, a, 2);
			gb_rule_add(b, r, NULL, 0);
			tail = r;
		}
	}
	for (int i = 0; i < min; i++) {
		int r = gb_rule_new(b);
		uint32_t a[2] = { x, (uint32_t)tail };
		gb_rule_add(b, r, a, 2);
		tail = r;
	}
	return (uint32_t)tail;
}

/* Counts symbols and alternatives to size the flat arrays. */
static int flat_sizes(const struct gbuild *b, size_t *n_syms, size_t *n_alts)
{
	size_t s = 2, a = 0; /* + the synthetic start "root END" */
	for (int r = 0; r < b->n_rules; r++) {
		a += (size_t)b->rules[r].n;
		for (int i = 0; i < b->rules[r].n; i++)
			s += (size_t)b->rules[r].alts[i].n + 1;
	}
	*n_syms = s;
	*n_alts = a;
	return s > GRAMMAR_MAX_SYMS ? ING_ERR_UNSUPPORTED : ING_OK;
}

static void flatten(const struct gbuild *b, uint32_t root, struct grammar *g)
{
	uint32_t s = 0, a = 0;
	for (int r = 0; r < b->n_rules; r++) {
		g->rule_alt[r] = a;
		for (int i = 0; i < b->rules[r].n; i++) {
			const struct gb_alt *A = &b->rules[r].alts[i];
			g->alt_start[a++] = s;
			if (A->n)
				memcpy(&g->syms[s], A->s, (size_t)A->n * sizeof *A->s);
			s += (uint32_t)A->n;
			g->syms[s++] = GSYM_END;
		}
	}
	g->rule_alt[b->n_rules] = a;
	g->start = s;
	g->syms[s++] = root;
	g->syms[s++] = GSYM_END;
	g->n_syms = s;
}

/* ---- left recursion ----
 *
 * A rule that can reach itself without consuming a byte (r ::= r x, or a
 * $ref cycle through schemas that match nothing first) would make the
 * matcher's expansion run forever; such grammars are refused. nullable[r]
 * comes from rules_mark (no class is nullable), then a depth-first search
 * follows, for each alternative, the references reachable through nullable
 * prefixes. */

static bool sym_nullable(const uint8_t *nullable, uint32_t s)
{
	return !GSYM_IS_CLASS(s) && nullable[s];
}

/* mark[r] (zeroed by the caller, n_rules entries) for every rule with an
 * alternative whose symbols all qualify: a rule symbol once its rule is
 * marked, a class symbol when class_ok says so. A worklist keeps this
 * linear in the grammar's size (a fixpoint of passes over all rules took
 * one pass per link of a chain r0 ::= r1 "a", r1 ::= r2 "a", ...: seconds
 * for a few hundred kilobytes of GBNF): each alternative counts its rule
 * symbols not yet marked, each rule lists the alternatives that use it
 * (once per use), and marking a rule counts those down. */
static int rules_mark(const struct gbuild *b, bool (*class_ok)(const struct gbuild *, uint32_t),
		      uint8_t *mark)
{
	size_t n_alts = 0, n_refs = 0;
	for (int r = 0; r < b->n_rules; r++)
		for (int a = 0; a < b->rules[r].n; a++, n_alts++)
			for (int i = 0; i < b->rules[r].alts[a].n; i++)
				n_refs += !GSYM_IS_CLASS(b->rules[r].alts[a].s[i]);
	int *left = ing_malloc_array(n_alts + 1, sizeof *left);     /* -1: a class fails */
	int *alt_rule = ing_malloc_array(n_alts + 1, sizeof *alt_rule);
	size_t *first = ing_calloc((size_t)b->n_rules + 2, sizeof *first); /* users of rule s: */
	int *users = ing_malloc_array(n_refs + 1, sizeof *users);   /* [first[s], first[s+1]) */
	int *queue = ing_malloc_array((size_t)b->n_rules + 1, sizeof *queue);
	int rc = ING_ERR_NOMEM;
	if (!left || !alt_rule || !first || !users || !queue)
		goto out;
	size_t k = 0;
	for (int r = 0; r < b->n_rules; r++)
		for (int a = 0; a < b->rules[r].n; a++, k++) {
			const struct gb_alt *A = &b->rules[r].alts[a];
			alt_rule[k] = r;
			left[k] = 0;
			for (int i = 0; i < A->n; i++) {
				if (!GSYM_IS_CLASS(A->s[i]))
					left[k]++, first[A->s[i] + 2]++;
				else if (!class_ok(b, A->s[i]))
					left[k] = -1 - A->n; /* never reaches 0 */
			}
		}
	for (int s = 0; s < b->n_rules; s++) /* first[s + 1]: where rule s's users start */
		first[s + 2] += first[s + 1];
	k = 0;
	for (int r = 0; r < b->n_rules; r++)
		for (int a = 0; a < b->rules[r].n; a++, k++)
			for (int i = 0; i < b->rules[r].alts[a].n; i++) {
				const uint32_t sym = b->rules[r].alts[a].s[i];
				if (!GSYM_IS_CLASS(sym))
					users[first[sym + 1]++] = (int)k;
			}
	/* now first[s] .. first[s + 1] are rule s's users */
	int n_queue = 0;
	for (k = 0; k < n_alts; k++)
		if (left[k] == 0 && !mark[alt_rule[k]])
			mark[alt_rule[k]] = 1, queue[n_queue++] = alt_rule[k];
	while (n_queue > 0) {
		const int s = queue[--n_queue];
		for (size_t u = first[s]; u < first[s + 1]; u++) {
			const int a = users[u];
			if (--left[a] == 0 && !mark[alt_rule[a]])
				mark[alt_rule[a]] = 1, queue[n_queue++] = alt_rule[a];
		}
	}
	rc = ING_OK;
out:
	ing_free(left);
	ing_free(alt_rule);
	ing_free(first);
	ing_free(users);
	ing_free(queue);
	return rc;
}

static bool class_never(const struct gbuild *b, uint32_t s)
{
	(void)b, (void)s;
	return false;
}

/* state: 0 unvisited, 1 on the DFS path, 2 done. Iterative DFS over the
 * "left-reaches" edges; true when a cycle exists. */
static bool left_cycle(const struct gbuild *b, const uint8_t *nullable, uint8_t *state,
		       int *stack_r, int *stack_a, int *stack_i)
{
	for (int start = 0; start < b->n_rules; start++) {
		if (state[start])
			continue;
		int top = 0;
		stack_r[0] = start, stack_a[0] = 0, stack_i[0] = 0;
		state[start] = 1;
		while (top >= 0) {
			int r = stack_r[top];
			const struct gb_rule *R = &b->rules[r];
			if (stack_a[top] >= R->n) {
				state[r] = 2;
				top--;
				continue;
			}
			const struct gb_alt *A = &R->alts[stack_a[top]];
			int i = stack_i[top];
			/* symbol i is left-reachable if all before it are nullable */
			if (i >= A->n || (i > 0 && !sym_nullable(nullable, A->s[i - 1])) ||
			    GSYM_IS_CLASS(A->s[i])) {
				stack_a[top]++;
				stack_i[top] = 0;
				continue;
			}
			stack_i[top]++;
			int s = (int)A->s[i];
			if (state[s] == 1)
				return true;
			if (state[s] == 0) {
				state[s] = 1;
				top++;
				stack_r[top] = s, stack_a[top] = 0, stack_i[top] = 0;
			}
		}
	}
	return false;
}

static int check_left_recursion(const struct gbuild *b)
{
	size_t n = (size_t)b->n_rules + 1;
	uint8_t *nullable = ing_calloc(n, 1), *state = ing_calloc(n, 1);
	int *sr = ing_malloc_array(n, sizeof *sr), *sa = ing_malloc_array(n, sizeof *sa);
	int *si = ing_malloc_array(n, sizeof *si);
	int rc = ING_ERR_NOMEM;
	if (nullable && state && sr && sa && si && rules_mark(b, class_never, nullable) == ING_OK)
		rc = left_cycle(b, nullable, state, sr, sa, si) ? ING_ERR_UNSUPPORTED : ING_OK;
	ing_free(nullable);
	ing_free(state);
	ing_free(sr);
	ing_free(sa);
	ing_free(si);
	return rc;
}

/* ---- an empty language ----
 *
 * A grammar whose root derives no string at all (root ::= [], a rule that
 * only recurses, a schema that nothing satisfies) would let a matcher
 * allow no token from the first step, and generation would stop at once
 * with an empty text the grammar does not match; such grammars are
 * refused. productive[r] (r derives some string) comes from rules_mark,
 * as nullable does above: a class is productive when it holds a byte, an
 * alternative when all its symbols are. */

static bool class_nonempty(const struct gbuild *b, uint32_t s)
{
	const struct gclass *c = &b->classes[s & ~GSYM_CLASS];
	for (int w = 0; w < 8; w++)
		if (c->w[w])
			return true;
	return false;
}

static int check_productive(const struct gbuild *b, uint32_t root)
{
	uint8_t *productive = ing_calloc((size_t)b->n_rules + 1, 1);
	if (!productive)
		return ING_ERR_NOMEM;
	int rc = rules_mark(b, class_nonempty, productive);
	if (rc == ING_OK && !(GSYM_IS_CLASS(root) ? class_nonempty(b, root) : productive[root]))
		rc = ING_ERR_UNSUPPORTED;
	ing_free(productive);
	return rc;
}

/* ---- byte classes ----
 *
 * Two bytes that every class of the grammar either holds both or lacks
 * both take any automaton state to the same next state, so the matcher
 * computes a transition once per group of such bytes (RE2's byte classes).
 * Refined class by class: a byte's group is the pair (old group, whether
 * this class holds it), renumbered in byte order. */
static void byte_classes(const struct gclass *classes, uint32_t n_classes, uint8_t byte_class[256])
{
	memset(byte_class, 0, 256);
	for (uint32_t i = 0; i < n_classes; i++) {
		int16_t renum[512];
		memset(renum, 0xff, sizeof renum);
		int16_t n = 0;
		for (unsigned c = 0; c < 256; c++) {
			unsigned k = byte_class[c] * 2u + gclass_has(&classes[i], c);
			if (renum[k] < 0)
				renum[k] = n++;
			byte_class[c] = (uint8_t)renum[k];
		}
	}
}

int gb_finish(struct gbuild *b, uint32_t root, struct grammar **out, ing_err *err)
{
	*out = NULL;
	size_t n_syms = 0, n_alts = 0;
	int rc = b->failed ? b->failed : flat_sizes(b, &n_syms, &n_alts);
	if (rc) {
		gb_free(b);
		return rc == ING_ERR_NOMEM ? ing_err_set(err, rc, "out of memory")
					   : ing_err_set(err, rc, "the grammar is too large");
	}
	if ((rc = check_left_recursion(b))) {
		gb_free(b);
		return rc == ING_ERR_NOMEM
			       ? ing_err_set(err, rc, "out of memory")
			       : ing_err_set(err, rc, "the grammar is left-recursive (a $ref cycle that "
						      "matches nothing before recursing)");
	}
	if ((rc = check_productive(b, root))) {
		gb_free(b);
		return rc == ING_ERR_NOMEM ? ing_err_set(err, rc, "out of memory")
					   : ing_err_set(err, rc, "the grammar matches no string");
	}
	struct grammar *g = ing_calloc(1, sizeof *g);
	if (g) {
		g->syms = ing_malloc_array(n_syms, sizeof *g->syms);
		g->rule_alt = ing_malloc_array((size_t)b->n_rules + 1, sizeof *g->rule_alt);
		g->alt_start = ing_malloc_array(n_alts + 1, sizeof *g->alt_start);
		g->classes = ing_malloc_array((size_t)b->n_classes + 1, sizeof *g->classes);
	}
	if (!g || !g->syms || !g->rule_alt || !g->alt_start || !g->classes) {
		if (g) {
			ing_free(g->syms);
			ing_free(g->rule_alt);
			ing_free(g->alt_start);
			ing_free(g->classes);
			ing_free(g);
		}
		gb_free(b);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	flatten(b, root, g);
	g->n_rules = (uint32_t)b->n_rules;
	if (b->n_classes)
		memcpy(g->classes, b->classes, (size_t)b->n_classes * sizeof *g->classes);
	g->n_classes = (uint32_t)b->n_classes;
	byte_classes(g->classes, g->n_classes, g->byte_class);
	g->dfa.max_work = GRAMMAR_MAX_WORK;
	g->dfa.max_work_total = GRAMMAR_MAX_WORK_TOTAL;
	atomic_init(&g->refs, 1);
	pthread_mutex_init(&g->mu, NULL);
	gb_free(b);
	*out = g;
	return ING_OK;
}

struct grammar *grammar_ref(struct grammar *g)
{
	atomic_fetch_add(&g->refs, 1);
	return g;
}

void grammar_free(struct grammar *g)
{
	if (!g || atomic_fetch_sub(&g->refs, 1) != 1)
		return;
	gdfa_free(&g->dfa);
	pthread_mutex_destroy(&g->mu);
	ing_free(g->syms);
	ing_free(g->rule_alt);
	ing_free(g->alt_start);
	ing_free(g->classes);
	ing_free(g);
}
