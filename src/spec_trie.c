/* spec_trie.c — see spec_trie.h. */
#include "spec_trie.h"

#include <string.h>

#include "err.h"
#include "mem.h"

int strie_init(struct strie *t, int32_t cap, int depth)
{
	memset(t, 0, sizeof *t);
	if (cap < 1 || depth < 1 || depth > STRIE_MAX_DEPTH)
		return ING_ERR_INVALID;
	uint32_t hsize = 1;
	while (hsize < (uint32_t)cap * 2u && hsize < (1u << 30))
		hsize <<= 1;
	t->cap = cap;
	t->depth = depth;
	t->hmask = hsize - 1;
	t->cnt = ing_malloc_array((size_t)cap, sizeof *t->cnt);
	t->child_total = ing_malloc_array((size_t)cap, sizeof *t->child_total);
	t->best = ing_malloc_array((size_t)cap, sizeof *t->best);
	t->tok = ing_malloc_array((size_t)cap, sizeof *t->tok);
	t->edges = ing_calloc(hsize, sizeof *t->edges);
	if (!t->cnt || !t->child_total || !t->best || !t->tok || !t->edges) {
		strie_free(t);
		return ING_ERR_NOMEM;
	}
	strie_clear(t);
	return ING_OK;
}

void strie_free(struct strie *t)
{
	ing_free(t->cnt);
	ing_free(t->child_total);
	ing_free(t->best);
	ing_free(t->tok);
	ing_free(t->edges);
	memset(t, 0, sizeof *t);
}

void strie_clear(struct strie *t)
{
	/* epoch 0 marks never-used entries (calloc); live ones carry >= 1 */
	if (++t->epoch == 0) {
		memset(t->edges, 0, ((size_t)t->hmask + 1) * sizeof *t->edges);
		t->epoch = 1;
	}
	t->n_nodes = 1;
	t->cnt[0] = 0;
	t->child_total[0] = 0;
	t->best[0] = -1;
	t->tok[0] = -1;
	t->n_active = 0;
}

void strie_break(struct strie *t) { t->n_active = 0; }

static uint32_t edge_hash(int32_t parent, int32_t token)
{
	uint64_t x = ((uint64_t)(uint32_t)parent << 32) | (uint32_t)token;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x;
}

/* The slot holding edge (parent, token), or the empty slot where it goes. */
static struct strie_edge *edge_slot(const struct strie *t, int32_t parent, int32_t token)
{
	for (uint32_t i = edge_hash(parent, token);; i++) {
		struct strie_edge *e = &t->edges[i & t->hmask];
		if (e->epoch != t->epoch || (e->parent == parent && e->token == token))
			return e;
	}
}

static int32_t child_of(const struct strie *t, int32_t parent, int32_t token)
{
	const struct strie_edge *e = edge_slot(t, parent, token);
	return e->epoch == t->epoch ? e->child : -1;
}

/* Counts one more occurrence of parent followed by token; -1 when full. */
static int32_t extend(struct strie *t, int32_t parent, int32_t token)
{
	struct strie_edge *e = edge_slot(t, parent, token);
	int32_t c;
	if (e->epoch == t->epoch) {
		c = e->child;
	} else {
		if (t->n_nodes >= t->cap)
			return -1;
		c = t->n_nodes++;
		t->cnt[c] = 0;
		t->child_total[c] = 0;
		t->best[c] = -1;
		t->tok[c] = token;
		*e = (struct strie_edge){ parent, token, c, t->epoch };
	}
	t->cnt[c]++;
	t->child_total[parent]++;
	/* >=: among equally frequent continuations the latest wins */
	if (t->best[parent] < 0 || t->cnt[c] >= t->cnt[t->best[parent]])
		t->best[parent] = c;
	return c;
}

bool strie_append(struct strie *t, int32_t token)
{
	/* worst case this token adds depth nodes: refuse rather than store a
	 * partial set of suffixes (counts would disagree between lengths) */
	if (t->n_nodes + t->depth > t->cap)
		return false;
	int n = t->n_active < t->depth ? t->n_active + 1 : t->depth;
	/* suffix of length L+1 extends the node of length L (root for L = 0);
	 * go from long to short so active[L - 1] is read before it is replaced */
	for (int len = n; len >= 1; len--) {
		int32_t parent = len == 1 ? 0 : t->active[len - 2];
		t->active[len - 1] = extend(t, parent, token);
	}
	t->cnt[0]++;
	t->n_active = n;
	return true;
}

int32_t strie_find(const struct strie *t, const int32_t *path, int n)
{
	int32_t node = 0;
	for (int i = 0; i < n && node >= 0; i++)
		node = child_of(t, node, path[i]);
	return node;
}

int32_t strie_token(const struct strie *t, int32_t node) { return t->tok[node]; }
