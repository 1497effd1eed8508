/* kv.c — paged KV cache and prefix cache (see kv.h).
 *
 * Block states: free (on free_list, refs 0, unpublished), used (refs > 0,
 * maybe published), cached (refs 0, published, in the LRU). The hash table
 * holds exactly the published blocks (used or cached). */
#include "kv.h"

#include <string.h>

#include "mem.h"

#define SLOT_EMPTY (-1)
#define SLOT_TOMB (-2)

/* ---- hashing ---- */

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t chain_hash(uint64_t parent, const int32_t *tok)
{
	uint64_t h = mix64(parent + 0x9e3779b97f4a7c15ull);
	for (int i = 0; i < KV_BLOCK; i++)
		h = mix64(h ^ (uint32_t)tok[i]);
	return h ? h : 1; /* 0 means "unpublished" */
}

static int64_t slot_of(const struct kv_cache *kv, uint64_t h) { return (int64_t)(h & (uint64_t)(kv->n_slots - 1)); }

static bool block_matches(const struct kv_cache *kv, int32_t b, uint64_t h, uint64_t parent,
			  const int32_t *tok)
{
	return kv->hash[b] == h && kv->parent[b] == parent &&
	       memcmp(kv->tokens + (int64_t)b * KV_BLOCK, tok, KV_BLOCK * sizeof *tok) == 0;
}

static int32_t table_find(const struct kv_cache *kv, uint64_t h, uint64_t parent, const int32_t *tok)
{
	for (int64_t i = slot_of(kv, h), n = 0; n < kv->n_slots; i = (i + 1) & (kv->n_slots - 1), n++) {
		int32_t b = kv->slots[i];
		if (b == SLOT_EMPTY)
			return -1;
		if (b >= 0 && block_matches(kv, b, h, parent, tok))
			return b;
	}
	return -1;
}

static void table_insert(struct kv_cache *kv, int32_t b)
{
	int64_t i = slot_of(kv, kv->hash[b]);
	while (kv->slots[i] >= 0)
		i = (i + 1) & (kv->n_slots - 1);
	if (kv->slots[i] == SLOT_TOMB)
		kv->n_tombs--;
	kv->slots[i] = b;
}

/* Rebuilds the table without tombstones (in place, O(slots)). */
static void table_rebuild(struct kv_cache *kv)
{
	for (int64_t i = 0; i < kv->n_slots; i++)
		kv->slots[i] = SLOT_EMPTY;
	kv->n_tombs = 0;
	for (int32_t b = 0; b < kv->n_blocks; b++)
		if (kv->hash[b])
			table_insert(kv, b);
}

static void unpublish(struct kv_cache *kv, int32_t b)
{
	for (int64_t i = slot_of(kv, kv->hash[b]);; i = (i + 1) & (kv->n_slots - 1)) {
		if (kv->slots[i] == b) {
			kv->slots[i] = SLOT_TOMB;
			kv->n_tombs++;
			break;
		}
		if (kv->slots[i] == SLOT_EMPTY)
			break; /* not found: cannot happen for a published block */
	}
	kv->hash[b] = 0;
	if (kv->n_tombs > kv->n_slots / 4)
		table_rebuild(kv);
}

/* ---- LRU of cached (published, unreferenced) blocks ---- */

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
		unpublish(kv, b);
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
	if (kv->hash[b])
		lru_push(kv, b);
	else
		kv->free_list[kv->n_free++] = b;
}

static void block_copy(struct kv_cache *kv, int32_t dst, int32_t src, int64_t rows)
{
	for (int64_t l = 0; l < kv->n_layer; l++) {
		memcpy(kv->k + ((l * kv->n_blocks + dst) * KV_BLOCK) * kv->k_dim,
		       kv->k + ((l * kv->n_blocks + src) * KV_BLOCK) * kv->k_dim,
		       (size_t)(rows * kv->k_dim) * sizeof(float));
		memcpy(kv->v + ((l * kv->n_blocks + dst) * KV_BLOCK) * kv->v_dim,
		       kv->v + ((l * kv->n_blocks + src) * KV_BLOCK) * kv->v_dim,
		       (size_t)(rows * kv->v_dim) * sizeof(float));
	}
}

/* ---- create / destroy ---- */

static int alloc_arrays(struct kv_cache *kv, uint64_t rows)
{
	const size_t nb = (size_t)kv->n_blocks, ns = (size_t)kv->n_seq;
	kv->k = ing_malloc_array(rows, (size_t)kv->k_dim * sizeof(float));
	kv->v = ing_malloc_array(rows, (size_t)kv->v_dim * sizeof(float));
	kv->tables = ing_malloc_array(ns * (size_t)kv->max_blocks, sizeof *kv->tables);
	kv->seq_chain = ing_malloc_array(ns * (size_t)kv->max_blocks, sizeof *kv->seq_chain);
	kv->seq_len = ing_calloc(ns, sizeof *kv->seq_len);
	kv->seq_blocks = ing_calloc(ns, sizeof *kv->seq_blocks);
	kv->seq_published = ing_calloc(ns, sizeof *kv->seq_published);
	kv->refs = ing_calloc(nb, sizeof *kv->refs);
	kv->free_list = ing_malloc_array(nb, sizeof *kv->free_list);
	kv->hash = ing_calloc(nb, sizeof *kv->hash);
	kv->parent = ing_calloc(nb, sizeof *kv->parent);
	kv->tokens = ing_malloc_array(nb * KV_BLOCK, sizeof *kv->tokens);
	kv->lru_prev = ing_malloc_array(nb, sizeof *kv->lru_prev);
	kv->lru_next = ing_malloc_array(nb, sizeof *kv->lru_next);
	kv->slots = ing_malloc_array((size_t)kv->n_slots, sizeof *kv->slots);
	return kv->k && kv->v && kv->tables && kv->seq_chain && kv->seq_len && kv->seq_blocks &&
	       kv->seq_published && kv->refs && kv->free_list && kv->hash && kv->parent &&
	       kv->tokens && kv->lru_prev && kv->lru_next && kv->slots ? ING_OK : ING_ERR_NOMEM;
}

int kv_create(int64_t n_layer, int64_t k_dim, int64_t v_dim, int64_t n_seq, int64_t n_ctx,
	      int64_t n_blocks, struct kv_cache **out, ing_err *err)
{
	*out = NULL;
	if (n_layer <= 0 || n_seq <= 0 || n_ctx <= 0 || k_dim <= 0 || v_dim <= 0 || n_blocks < 0 ||
	    n_seq > (1 << 20) || n_ctx > ((int64_t)1 << 30))
		return ing_err_set(err, ING_ERR_INVALID, "bad KV cache dimensions");
	const int64_t max_blocks = (n_ctx + KV_BLOCK - 1) / KV_BLOCK;
	if (n_blocks == 0)
		n_blocks = n_seq * max_blocks;
	if (n_blocks > INT32_MAX / 4 || (uint64_t)n_layer * (uint64_t)n_blocks > UINT64_MAX / KV_BLOCK)
		return ing_err_set(err, ING_ERR_RANGE, "KV cache too large");
	uint64_t rows = (uint64_t)n_layer * (uint64_t)n_blocks * KV_BLOCK;
	uint64_t maxdim = (uint64_t)(k_dim > v_dim ? k_dim : v_dim);
	if (rows > SIZE_MAX / sizeof(float) / maxdim)
		return ing_err_set(err, ING_ERR_RANGE, "KV cache size overflows");
	struct kv_cache *kv = ing_calloc(1, sizeof *kv);
	if (!kv)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	*kv = (struct kv_cache){ .n_layer = n_layer, .k_dim = k_dim, .v_dim = v_dim,
				 .n_blocks = n_blocks, .n_seq = n_seq, .n_ctx = n_ctx,
				 .max_blocks = max_blocks, .lru_head = -1, .lru_tail = -1 };
	kv->n_slots = 16;
	while (kv->n_slots < 2 * n_blocks)
		kv->n_slots *= 2;
	if (alloc_arrays(kv, rows)) {
		double mb = (double)rows * (double)(k_dim + v_dim) * 4 / 1e6;
		kv_destroy(kv);
		return ing_err_set(err, ING_ERR_NOMEM,
				   "cannot allocate the KV cache (%.0f MB); use a smaller context", mb);
	}
	for (int64_t b = 0; b < n_blocks; b++)
		kv->free_list[b] = (int32_t)(n_blocks - 1 - b); /* pop 0 first */
	kv->n_free = n_blocks;
	for (int64_t i = 0; i < kv->n_slots; i++)
		kv->slots[i] = SLOT_EMPTY;
	*out = kv;
	return ING_OK;
}

void kv_destroy(struct kv_cache *kv)
{
	if (!kv)
		return;
	void *p[] = { kv->k, kv->v, kv->tables, kv->seq_chain, kv->seq_len, kv->seq_blocks,
		      kv->seq_published, kv->refs, kv->free_list, kv->hash, kv->parent,
		      kv->tokens, kv->lru_prev, kv->lru_next, kv->slots };
	for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
		ing_free(p[i]);
	ing_free(kv);
}

/* ---- sequences ---- */

/* The block holding position seq_len is about to be written: make it
 * private and unpublished. */
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
	} else if (kv->hash[b]) {
		unpublish(kv, b);
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
}

int64_t kv_seq_attach_prefix(struct kv_cache *kv, int64_t seq, const int32_t *tokens, int64_t n)
{
	if (kv->seq_blocks[seq] != 0)
		return 0;
	kv->prefix_queries += (uint64_t)n;
	uint64_t chain = 0;
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
	kv->prefix_hits += (uint64_t)(i * KV_BLOCK);
	return i * KV_BLOCK;
}

void kv_seq_publish(struct kv_cache *kv, int64_t seq, const int32_t *tokens, int64_t n)
{
	if (n > kv->seq_len[seq])
		n = kv->seq_len[seq];
	const int64_t full = n / KV_BLOCK;
	uint64_t *chains = kv->seq_chain + seq * kv->max_blocks;
	for (int64_t i = kv->seq_published[seq]; i < full; i++) {
		uint64_t parent = i ? chains[i - 1] : 0;
		const int32_t *tok = tokens + i * KV_BLOCK;
		uint64_t h = chain_hash(parent, tok);
		chains[i] = h;
		int32_t b = kv->tables[seq * kv->max_blocks + i];
		/* an identical block published by another sequence stays the
		 * canonical one; ours remains private */
		if (kv->hash[b] || table_find(kv, h, parent, tok) >= 0)
			continue;
		kv->hash[b] = h;
		kv->parent[b] = parent;
		memcpy(kv->tokens + (int64_t)b * KV_BLOCK, tok, KV_BLOCK * sizeof *tok);
		table_insert(kv, b);
	}
	if (full > kv->seq_published[seq])
		kv->seq_published[seq] = full;
}

int64_t kv_blocks_used(const struct kv_cache *kv)
{
	return kv->n_blocks - kv->n_free - kv->n_cached;
}
