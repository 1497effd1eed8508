/* tokenizer_heap.c — a plain binary min-heap for the tokenizer's merge
 * loops (SPM bigrams by score, BPE bigrams by rank, special-token
 * candidates by length). Items carry a two-part key so each user can
 * encode its ordering (priority, then position) as integers. */
#include "tokenizer_int.h"

#include "mem.h"

static bool heap_less(const struct tok_heap_item *x, const struct tok_heap_item *y)
{
	return x->k1 < y->k1 || (x->k1 == y->k1 && x->k2 < y->k2);
}

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
		size_t parent = (i - 1) / 2;
		if (!heap_less(&it, &h->items[parent]))
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
		size_t l = 2 * i + 1, best = i;
		const struct tok_heap_item *cur = &last;
		if (l < n && heap_less(&h->items[l], cur)) {
			best = l;
			cur = &h->items[l];
		}
		if (l + 1 < n && heap_less(&h->items[l + 1], cur))
			best = l + 1;
		if (best == i)
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
