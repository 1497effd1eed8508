/* tokenizer_heap.c — a plain binary min-heap for the tokenizer's merge
 * loops (SPM bigrams by score, BPE bigrams by rank, special-token
 * candidates by length). Each user encodes its ordering (priority, then
 * position) in one integer key. */
#include "tokenizer_int.h"

#include "mem.h"

/* A 4-ary heap: half the depth of a binary one, and a node's children lie
 * next to each other in memory, which is what counts once the heap is
 * larger than the cache. */
#define ARITY 4

int tok_heap_push(struct tok_heap *h, struct tok_heap_item it)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 64;
		struct tok_heap_item *p = ing_realloc(h->items, cap * sizeof *p);
		if (!p)
			return ING_ERR_NOMEM;
		h->items = p;
		h->cap = cap;
	}
	size_t i = h->n++;
	while (i > 0) {
		size_t parent = (i - 1) / ARITY;
		if (h->items[parent].key <= it.key)
			break;
		h->items[i] = h->items[parent];
		i = parent;
	}
	h->items[i] = it;
	return ING_OK;
}

bool tok_heap_pop(struct tok_heap *h, struct tok_heap_item *it)
{
	if (h->n == 0)
		return false;
	*it = h->items[0];
	struct tok_heap_item last = h->items[--h->n];
	size_t i = 0, n = h->n;
	for (;;) {
		size_t first = ARITY * i + 1, best = first;
		if (first >= n)
			break;
		size_t end = first + ARITY < n ? first + ARITY : n;
		for (size_t c = first + 1; c < end; c++)
			if (h->items[c].key < h->items[best].key)
				best = c;
		if (h->items[best].key >= last.key)
			break;
		h->items[i] = h->items[best];
		i = best;
	}
	if (n > 0)
		h->items[i] = last;
	return true;
}

void tok_heap_free(struct tok_heap *h)
{
	ing_free(h->items);
	h->items = NULL;
	h->n = h->cap = 0;
}
