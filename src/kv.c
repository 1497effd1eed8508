/* kv.c — paged KV cache and prefix cache (see kv.h).
 *
 * Block states: free (on free_list, refs 0, not indexed), used (refs > 0,
 * maybe indexed), cached (refs 0, indexed, in the LRU).
 *
 * Indexed (fill > 0): tokens[0, fill) are recorded and rows [0, fill) hold
 * their K/V after the prefix named by parent (a chained hash; at the start
 * the sequence's root: 0, or a request's cache salt). Every indexed block
 * is on its parent's sibling list, reached through the `kids` table (one
 * slot per parent: the list's head, the most recently indexed child
 * first); a full one (fill == KV_BLOCK) that is the canonical copy of its
 * contents is also *published*: hash != 0 and in the `slots` table. A
 * sequence's partial last block is indexed with the tokens it holds so far,
 * and grows in place as the sequence writes on: writing a row past fill
 * leaves rows [0, fill) as they were. Only writing a row below fill (after
 * a rollback) unindexes the block first (make_tail_writable).
 *
 * Lookup walks the published chain block by block; where it stops, the
 * sibling list of the last matched block (at most PARTIAL_SCAN children)
 * gives the child sharing the longest run of leading tokens with the
 * request, and those rows are copied into a block of the request's own:
 * blocks are shared only whole, so nobody ever writes a shared row. */
#include "kv.h"

#include <string.h>

#include "hash.h"
#include "mem.h"

#define SLOT_EMPTY (-1)
#define SLOT_TOMB (-2)
#define PARTIAL_SCAN 64 /* siblings compared per lookup: bounded admission cost */

/* ---- hashing ---- */

static uint64_t chain_hash(uint64_t parent, const int32_t *tok)
{
	uint64_t h = hash_mix64(parent + 0x9e3779b97f4a7c15ull);
	for (int i = 0; i < KV_BLOCK; i++)
		h = hash_mix64(h ^ (uint32_t)tok[i]);
	return h ? h : 1; /* 0 means "unpublished" */
}

/* ---- open addressing (both tables: block ids, linear probing) ---- */

static int64_t slot_next(const struct kv_cache *kv, int64_t i) { return (i + 1) & (kv->n_slots - 1); }
static int64_t slot_of(const struct kv_cache *kv, uint64_t key) { return (int64_t)(key & (uint64_t)(kv->n_slots - 1)); }

/* Puts b in the first empty or deleted slot from key's. */
static void slot_put(struct kv_cache *kv, int32_t *slots, int64_t *tombs, uint64_t key, int32_t b)
{
	int64_t i = slot_of(kv, key);
	while (slots[i] >= 0)
		i = slot_next(kv, i);
	if (slots[i] == SLOT_TOMB)
		(*tombs)--;
	slots[i] = b;
}

/* The slot holding b, probing from key's; -1 if absent. */
static int64_t slot_find(const struct kv_cache *kv, const int32_t *slots, uint64_t key, int32_t b)
{
	for (int64_t i = slot_of(kv, key), n = 0; n < kv->n_slots; i = slot_next(kv, i), n++) {
		if (slots[i] == b)
			return i;
		if (slots[i] == SLOT_EMPTY)
			break;
	}
	return -1;
}

static void slots_clear(struct kv_cache *kv, int32_t *slots, int64_t *tombs)
{
	for (int64_t i = 0; i < kv->n_slots; i++)
		slots[i] = SLOT_EMPTY;
	*tombs = 0;
}

/* ---- the published table: full blocks by chained hash ---- */

static bool block_matches(const struct kv_cache *kv, int32_t b, uint64_t h, uint64_t parent,
			  const int32_t *tok)
{
	return kv->hash[b] == h && kv->parent[b] == parent &&
	       memcmp(kv->tokens + (int64_t)b * KV_BLOCK, tok, KV_BLOCK * sizeof *tok) == 0;
}

static int32_t table_find(const struct kv_cache *kv, uint64_t h, uint64_t parent, const int32_t *tok)
{
	for (int64_t i = slot_of(kv, h), n = 0; n < kv->n_slots; i = slot_next(kv, i), n++) {
		int32_t b = kv->slots[i];
		if (b == SLOT_EMPTY)
			return -1;
		if (b >= 0 && block_matches(kv, b, h, parent, tok))
			return b;
	}
	return -1;
}

/* Rebuilds a table without tombstones (in place, O(slots + blocks)). */
static void table_rebuild(struct kv_cache *kv)
{
	slots_clear(kv, kv->slots, &kv->n_tombs);
	for (int32_t b = 0; b < kv->n_blocks; b++)
		if (kv->hash[b])
			slot_put(kv, kv->slots, &kv->n_tombs, kv->hash[b], b);
}

static void table_remove(struct kv_cache *kv, int32_t b)
{
	int64_t i = slot_find(kv, kv->slots, kv->hash[b], b);
	if (i >= 0) { /* always, for a published block */
		kv->slots[i] = SLOT_TOMB;
		kv->n_tombs++;
	}
	kv->hash[b] = 0;
	if (kv->n_tombs > kv->n_slots / 4)
		table_rebuild(kv);
}

/* ---- the sibling index: indexed blocks by parent ---- */

/* Head of parent's sibling list, or -1. */
static int32_t kids_head(const struct kv_cache *kv, uint64_t parent)
{
	for (int64_t i = slot_of(kv, parent), n = 0; n < kv->n_slots; i = slot_next(kv, i), n++) {
		int32_t b = kv->kids[i];
		if (b == SLOT_EMPTY)
			return -1;
		if (b >= 0 && kv->parent[b] == parent)
			return b;
	}
	return -1;
}

static void kids_rebuild(struct kv_cache *kv)
{
	slots_clear(kv, kv->kids, &kv->n_kid_tombs);
	for (int32_t b = 0; b < kv->n_blocks; b++)
		if (kv->fill[b] && kv->sib_prev[b] < 0)
			slot_put(kv, kv->kids, &kv->n_kid_tombs, kv->parent[b], b);
}

/* Puts b (fill and parent set) at the head of its parent's list. */
static void kids_add(struct kv_cache *kv, int32_t b)
{
	int32_t head = kids_head(kv, kv->parent[b]);
	kv->sib_prev[b] = -1;
	kv->sib_next[b] = head;
	if (head < 0) {
		slot_put(kv, kv->kids, &kv->n_kid_tombs, kv->parent[b], b);
		return;
	}
	kv->sib_prev[head] = b;
	kv->kids[slot_find(kv, kv->kids, kv->parent[b], head)] = b;
}

static void kids_remove(struct kv_cache *kv, int32_t b)
{
	int32_t p = kv->sib_prev[b], n = kv->sib_next[b];
	if (n >= 0)
		kv->sib_prev[n] = p;
	if (p >= 0) {
		kv->sib_next[p] = n;
		return;
	}
	int64_t i = slot_find(kv, kv->kids, kv->parent[b], b); /* b heads the list */
	if (i < 0)
		return; /* cannot happen for an indexed block */
	if (n >= 0) {
		kv->kids[i] = n;
		return;
	}
	kv->kids[i] = SLOT_TOMB;
	kv->n_kid_tombs++;
}

/* Takes b out of both tables: its rows are about to change or go. */
static void unindex(struct kv_cache *kv, int32_t b)
{
	if (!kv->fill[b])
		return;
	if (kv->hash[b])
		table_remove(kv, b);
	kids_remove(kv, b);
	kv->fill[b] = 0;
	if (kv->n_kid_tombs > kv->n_slots / 4)
		kids_rebuild(kv);
}

/* Common leading tokens of block b and tok[0, n). */
static int64_t common_prefix(const struct kv_cache *kv, int32_t b, const int32_t *tok, int64_t n)
{
	const int32_t *bt = kv->tokens + (int64_t)b * KV_BLOCK;
	int64_t j = 0, lim = n < kv->fill[b] ? n : kv->fill[b];
	while (j < lim && bt[j] == tok[j])
		j++;
	return j;
}

/* The child of parent sharing the most leading tokens with tok[0, n)
 * (n <= KV_BLOCK), among the first PARTIAL_SCAN; -1 when none shares one.
 * *len gets the count. */
static int32_t kids_best(const struct kv_cache *kv, uint64_t parent, const int32_t *tok, int64_t n,
			 int64_t *len)
{
	int32_t best = -1;
	*len = 0;
	int32_t b = kids_head(kv, parent);
	for (int k = 0; b >= 0 && k < PARTIAL_SCAN && *len < n; k++, b = kv->sib_next[b]) {
		int64_t j = common_prefix(kv, b, tok, n);
		if (j > *len) {
			*len = j;
			best = b;
		}
	}
	return best;
}

/* ---- LRU of cached (indexed, unreferenced) blocks ---- */

static void lru_remove(struct kv_cache *kv, int32_t b)
{
	int32_t p = kv->lru_prev[b], n = kv->lru_next[b];
	if (p >= 0)
		kv->lru_next[p] = n;
	else
		kv->lru_head = n;
	if (n >= 0)
		kv->lru_prev[n] = p;
	else
		kv->lru_tail = p;
	kv->n_cached--;
}

static void lru_push(struct kv_cache *kv, int32_t b)
{
	kv->lru_prev[b] = kv->lru_tail;
	kv->lru_next[b] = -1;
	if (kv->lru_tail >= 0)
		kv->lru_next[kv->lru_tail] = b;
	else
		kv->lru_head = b;
	kv->lru_tail = b;
	kv->n_cached++;
}

/* ---- blocks ---- */

static int32_t block_alloc(struct kv_cache *kv)
{
	int32_t b;
	if (kv->n_free > 0) {
		b = kv->free_list[--kv->n_free];
	} else if (kv->lru_head >= 0) {
		b = kv->lru_head; /* evict the least recently used cached block */
		lru_remove(kv, b);
		unindex(kv, b);
	} else {
		return -1;
	}
	kv->refs[b] = 1;
	return b;
}

static void block_release(struct kv_cache *kv, int32_t b)
{
	if (--kv->refs[b] > 0)
		return;
	if (kv->fill[b])
		lru_push(kv, b);
	else
		kv->free_list[kv->n_free++] = b;
}

static void block_copy(struct kv_cache *kv, int32_t dst, int32_t src, int64_t rows)
{
	const size_t kb = kv->k_row, vb = kv->v_row;
	for (int64_t l = 0; l < kv->n_layer; l++) {
		const size_t d = (size_t)((l * kv->n_blocks + dst) * KV_BLOCK);
		const size_t s = (size_t)((l * kv->n_blocks + src) * KV_BLOCK);
		memcpy(kv->k + d * kb, kv->k + s * kb, (size_t)rows * kb);
		memcpy(kv->v + d * vb, kv->v + s * vb, (size_t)rows * vb);
	}
}

/* ---- create / destroy ---- */

static int alloc_arrays(struct kv_cache *kv, uint64_t rows)
{
	const size_t nb = (size_t)kv->n_blocks, ns = (size_t)kv->n_seq;
	kv->k = ing_malloc_array(rows, kv->k_row);
	kv->v = ing_malloc_array(rows, kv->v_row);
	kv->tables = ing_malloc_array(ns * (size_t)kv->max_blocks, sizeof *kv->tables);
	kv->seq_chain = ing_malloc_array(ns * (size_t)kv->max_blocks, sizeof *kv->seq_chain);
	kv->seq_len = ing_calloc(ns, sizeof *kv->seq_len);
	kv->seq_blocks = ing_calloc(ns, sizeof *kv->seq_blocks);
	kv->seq_published = ing_calloc(ns, sizeof *kv->seq_published);
	kv->seq_root = ing_calloc(ns, sizeof *kv->seq_root);
	kv->refs = ing_calloc(nb, sizeof *kv->refs);
	kv->free_list = ing_malloc_array(nb, sizeof *kv->free_list);
	kv->hash = ing_calloc(nb, sizeof *kv->hash);
	kv->parent = ing_calloc(nb, sizeof *kv->parent);
	kv->tokens = ing_malloc_array(nb * KV_BLOCK, sizeof *kv->tokens);
	kv->lru_prev = ing_malloc_array(nb, sizeof *kv->lru_prev);
	kv->lru_next = ing_malloc_array(nb, sizeof *kv->lru_next);
	kv->slots = ing_malloc_array((size_t)kv->n_slots, sizeof *kv->slots);
	kv->fill = ing_calloc(nb, sizeof *kv->fill);
	kv->sib_prev = ing_malloc_array(nb, sizeof *kv->sib_prev);
	kv->sib_next = ing_malloc_array(nb, sizeof *kv->sib_next);
	kv->kids = ing_malloc_array((size_t)kv->n_slots, sizeof *kv->kids);
	return kv->k && kv->v && kv->tables && kv->seq_chain && kv->seq_len && kv->seq_blocks &&
	       kv->seq_published && kv->seq_root && kv->refs && kv->free_list && kv->hash &&
	       kv->parent && kv->tokens && kv->lru_prev && kv->lru_next && kv->slots && kv->fill &&
	       kv->sib_prev && kv->sib_next && kv->kids ? ING_OK : ING_ERR_NOMEM;
}

int kv_create(int64_t n_layer, size_t k_row, size_t v_row, int64_t n_seq, int64_t n_ctx,
	      int64_t n_blocks, struct kv_cache **out, ing_err *err)
{
	*out = NULL;
	if (n_layer <= 0 || n_seq <= 0 || n_ctx <= 0 || k_row == 0 || v_row == 0 || n_blocks < 0 ||
	    n_seq > (1 << 20) || n_ctx > ((int64_t)1 << 30))
		return ing_err_set(err, ING_ERR_INVALID, "bad KV cache dimensions");
	const int64_t max_blocks = (n_ctx + KV_BLOCK - 1) / KV_BLOCK;
	if (n_blocks == 0)
		n_blocks = n_seq * max_blocks;
	if (n_blocks > INT32_MAX / 4 || (uint64_t)n_layer * (uint64_t)n_blocks > UINT64_MAX / KV_BLOCK)
		return ing_err_set(err, ING_ERR_RANGE, "KV cache too large");
	uint64_t rows = (uint64_t)n_layer * (uint64_t)n_blocks * KV_BLOCK;
	size_t maxrow = k_row > v_row ? k_row : v_row;
	if (rows > SIZE_MAX / maxrow)
		return ing_err_set(err, ING_ERR_RANGE, "KV cache size overflows");
	struct kv_cache *kv = ing_calloc(1, sizeof *kv);
	if (!kv)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	*kv = (struct kv_cache){ .n_layer = n_layer, .k_row = k_row, .v_row = v_row,
				 .n_blocks = n_blocks, .n_seq = n_seq, .n_ctx = n_ctx,
				 .max_blocks = max_blocks, .lru_head = -1, .lru_tail = -1 };
	kv->n_slots = 16;
	while (kv->n_slots < 2 * n_blocks)
		kv->n_slots *= 2;
	if (alloc_arrays(kv, rows)) {
		double mb = (double)rows * (double)(k_row + v_row) / 1e6;
		kv_destroy(kv);
		return ing_err_set(err, ING_ERR_NOMEM,
				   "cannot allocate the KV cache (%.0f MB); use a smaller context", mb);
	}
	for (int64_t b = 0; b < n_blocks; b++)
		kv->free_list[b] = (int32_t)(n_blocks - 1 - b); /* pop 0 first */
	kv->n_free = n_blocks;
	slots_clear(kv, kv->slots, &kv->n_tombs);
	slots_clear(kv, kv->kids, &kv->n_kid_tombs);
	*out = kv;
	return ING_OK;
}

void kv_destroy(struct kv_cache *kv)
{
	if (!kv)
		return;
	void *p[] = { kv->k, kv->v, kv->tables, kv->seq_chain, kv->seq_len, kv->seq_blocks,
		      kv->seq_published, kv->seq_root, kv->refs, kv->free_list, kv->hash,
		      kv->parent, kv->tokens, kv->lru_prev, kv->lru_next, kv->slots, kv->fill,
		      kv->sib_prev, kv->sib_next, kv->kids };
	for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
		ing_free(p[i]);
	ing_free(kv);
}

/* ---- sequences ---- */

/* The block holding position seq_len is about to be written: make it
 * private, and unindexed if the rows written are indexed ones. */
static int make_tail_writable(struct kv_cache *kv, int64_t seq, ing_err *err)
{
	const int64_t len = kv->seq_len[seq];
	if (len % KV_BLOCK == 0 || len / KV_BLOCK >= kv->seq_blocks[seq])
		return ING_OK;
	int32_t *slot = &kv->tables[seq * kv->max_blocks + len / KV_BLOCK];
	int32_t b = *slot;
	if (kv->refs[b] > 1) {
		int32_t nb = block_alloc(kv);
		if (nb < 0)
			return ing_err_set(err, ING_ERR_NOMEM, "KV cache full");
		block_copy(kv, nb, b, len % KV_BLOCK);
		kv->refs[b]--;
		*slot = nb;
	} else if (kv->fill[b] > len % KV_BLOCK) {
		unindex(kv, b);
	}
	return ING_OK;
}

int kv_seq_reserve(struct kv_cache *kv, int64_t seq, int64_t len, ing_err *err)
{
	if (len > kv->n_ctx)
		return ing_err_set(err, ING_ERR_RANGE, "position %lld is outside the context of %lld",
				   (long long)len - 1, (long long)kv->n_ctx);
	if (len <= kv->seq_len[seq])
		return ING_OK;
	int rc = make_tail_writable(kv, seq, err);
	if (rc)
		return rc;
	const int64_t need = (len + KV_BLOCK - 1) / KV_BLOCK;
	while (kv->seq_blocks[seq] < need) {
		int32_t b = block_alloc(kv);
		if (b < 0)
			return ing_err_set(err, ING_ERR_NOMEM, "KV cache full");
		kv->tables[seq * kv->max_blocks + kv->seq_blocks[seq]++] = b;
	}
	return ING_OK;
}

void kv_seq_set_len(struct kv_cache *kv, int64_t seq, int64_t len)
{
	if (len >= 0 && len <= kv->seq_blocks[seq] * KV_BLOCK)
		kv->seq_len[seq] = len;
}

void kv_seq_truncate(struct kv_cache *kv, int64_t seq, int64_t len)
{
	if (seq < 0 || seq >= kv->n_seq || len < 0)
		return;
	if (len < kv->seq_len[seq])
		kv->seq_len[seq] = len;
	const int64_t keep = (kv->seq_len[seq] + KV_BLOCK - 1) / KV_BLOCK;
	while (kv->seq_blocks[seq] > keep)
		block_release(kv, kv->tables[seq * kv->max_blocks + --kv->seq_blocks[seq]]);
	if (kv->seq_published[seq] > kv->seq_len[seq] / KV_BLOCK)
		kv->seq_published[seq] = kv->seq_len[seq] / KV_BLOCK;
	if (kv->seq_len[seq] == 0)
		kv->seq_root[seq] = 0;
}

/* For seq, whose blocks end where parent's chain does: copies the rows of
 * the cached child of parent that shares the most leading tokens with
 * tok[0, n) into a new block of seq's own. Returns the positions gained
 * (0: no child shares a token, or no block is left). */
static int64_t attach_partial(struct kv_cache *kv, int64_t seq, uint64_t parent,
			      const int32_t *tok, int64_t n)
{
	int64_t j;
	int32_t src = kids_best(kv, parent, tok, n < KV_BLOCK ? n : KV_BLOCK, &j);
	if (src < 0)
		return 0;
	if (kv->refs[src]++ == 0) /* pinned: the allocation must not evict it */
		lru_remove(kv, src);
	int32_t b = block_alloc(kv);
	if (b >= 0) {
		block_copy(kv, b, src, j);
		kv->tables[seq * kv->max_blocks + kv->seq_blocks[seq]++] = b;
		kv->seq_len[seq] += j;
	}
	block_release(kv, src); /* back in the LRU as its most recent entry */
	return b >= 0 ? j : 0;
}

int64_t kv_seq_attach_prefix(struct kv_cache *kv, int64_t seq, uint64_t root,
			     const int32_t *tokens, int64_t n)
{
	if (kv->seq_blocks[seq] != 0)
		return 0;
	kv->seq_root[seq] = root;
	kv->prefix_queries += (uint64_t)n;
	uint64_t chain = root;
	int64_t i = 0;
	for (; (i + 1) * KV_BLOCK <= n && i < kv->max_blocks; i++) {
		uint64_t h = chain_hash(chain, tokens + i * KV_BLOCK);
		int32_t b = table_find(kv, h, chain, tokens + i * KV_BLOCK);
		if (b < 0)
			break;
		if (kv->refs[b]++ == 0)
			lru_remove(kv, b);
		kv->tables[seq * kv->max_blocks + i] = b;
		kv->seq_chain[seq * kv->max_blocks + i] = h;
		chain = h;
	}
	kv->seq_blocks[seq] = kv->seq_published[seq] = i;
	kv->seq_len[seq] = i * KV_BLOCK;
	if (n > i * KV_BLOCK && i < kv->max_blocks)
		attach_partial(kv, seq, chain, tokens + i * KV_BLOCK, n - i * KV_BLOCK);
	kv->prefix_hits += (uint64_t)kv->seq_len[seq];
	return kv->seq_len[seq];
}

/* Publishes block i of seq, now full with tok[0, KV_BLOCK). */
static void publish_full(struct kv_cache *kv, int64_t seq, int64_t i, const int32_t *tok)
{
	uint64_t *chains = kv->seq_chain + seq * kv->max_blocks;
	uint64_t parent = i ? chains[i - 1] : kv->seq_root[seq];
	uint64_t h = chain_hash(parent, tok);
	chains[i] = h;
	int32_t b = kv->tables[seq * kv->max_blocks + i];
	if (kv->hash[b])
		return; /* attached: already the canonical block */
	/* an identical block published by another sequence stays the
	 * canonical one; ours remains private (and leaves the index, where
	 * it may be as a partial block) */
	bool twin = table_find(kv, h, parent, tok) >= 0;
	if (kv->fill[b] && (twin || kv->parent[b] != parent))
		unindex(kv, b);
	if (twin)
		return;
	kv->hash[b] = h;
	kv->parent[b] = parent;
	memcpy(kv->tokens + (int64_t)b * KV_BLOCK, tok, KV_BLOCK * sizeof *tok);
	slot_put(kv, kv->slots, &kv->n_tombs, h, b);
	bool listed = kv->fill[b] > 0; /* as our partial tail, under the same parent */
	kv->fill[b] = KV_BLOCK;
	if (!listed)
		kids_add(kv, b);
}

/* Indexes block i of seq holding tok[0, r) (0 < r < KV_BLOCK) so far. */
static void publish_tail(struct kv_cache *kv, int64_t seq, int64_t i, const int32_t *tok, int64_t r)
{
	uint64_t parent = i ? kv->seq_chain[seq * kv->max_blocks + i - 1] : kv->seq_root[seq];
	int32_t b = kv->tables[seq * kv->max_blocks + i];
	if (kv->hash[b] || kv->refs[b] > 1)
		return; /* a shared full block, reusable as it is */
	if (kv->fill[b] && kv->parent[b] != parent)
		unindex(kv, b);
	if (kv->fill[b] >= r)
		return;
	int64_t f = kv->fill[b];
	memcpy(kv->tokens + (int64_t)b * KV_BLOCK + f, tok + f, (size_t)(r - f) * sizeof *tok);
	kv->parent[b] = parent;
	kv->fill[b] = (uint8_t)r;
	if (f == 0)
		kids_add(kv, b);
}

void kv_seq_publish(struct kv_cache *kv, int64_t seq, const int32_t *tokens, int64_t n)
{
	if (n > kv->seq_len[seq])
		n = kv->seq_len[seq];
	const int64_t full = n / KV_BLOCK;
	for (int64_t i = kv->seq_published[seq]; i < full; i++)
		publish_full(kv, seq, i, tokens + i * KV_BLOCK);
	if (full > kv->seq_published[seq])
		kv->seq_published[seq] = full;
	if (n % KV_BLOCK)
		publish_tail(kv, seq, full, tokens + full * KV_BLOCK, n % KV_BLOCK);
}

int64_t kv_blocks_used(const struct kv_cache *kv)
{
	return kv->n_blocks - kv->n_free - kv->n_cached;
}
