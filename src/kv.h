/* kv.h — the paged key/value cache with automatic prefix caching.
 *
 * Storage is one pool of blocks of KV_BLOCK positions; a block id addresses
 * the same slot in every layer (K and V rows of k_row / v_row bytes: how a
 * row stores its values, F32, F16 or Q8_0, is the forward pass's
 * business). Each
 * sequence slot has a block table mapping position p to block
 * table[p / KV_BLOCK]. Blocks are reference counted: sequences that share a
 * prompt prefix share its full blocks.
 *
 * Prefix cache: a full block whose contents are final is *published* under
 * a chained hash of (parent block's hash, its KV_BLOCK token ids); the token
 * ids are stored too and compared on lookup, so a hit is exact. Reuse is
 * token-granular: where the chain of full blocks stops matching, the cached
 * block after it (full, or the partial last block a sequence left) that
 * shares the most leading tokens with the request gives those rows, copied
 * into a block of the request's own. Blocks holding reusable rows that no
 * sequence references stay cached in LRU order and are evicted only when
 * the pool has no free block. A block about to be written while shared is
 * copied first (copy-on-write); one whose reusable rows are about to be
 * overwritten while unshared is simply taken out of the index.
 *
 * Sizes are fixed at creation; nothing here allocates afterwards. Not
 * thread-safe: the engine thread owns the cache (compute workers only read
 * and write rows of blocks the plan reserved). */
#ifndef INGOT_KV_H
#define INGOT_KV_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define KV_BLOCK 16

struct kv_cache {
	int64_t n_layer;
	size_t k_row, v_row;         /* bytes of a K row, of a V row */
	int64_t n_blocks;            /* in the pool */
	int64_t n_seq;               /* sequence slots */
	int64_t n_ctx;               /* positions per sequence */
	int64_t max_blocks;          /* per sequence: ceil(n_ctx / KV_BLOCK) */
	unsigned char *k, *v;        /* [n_layer][n_blocks][KV_BLOCK] rows */
	int32_t *tables;             /* [n_seq][max_blocks] */
	int64_t *seq_len;            /* [n_seq] valid positions */
	int64_t *seq_blocks;         /* [n_seq] blocks in the table */
	int64_t *seq_published;      /* [n_seq] leading blocks already published */
	uint64_t *seq_root;          /* [n_seq] where its hash chain starts (attach) */
	uint64_t *seq_chain;         /* [n_seq][max_blocks] chained hash of each
					published block index */
	int32_t *refs;               /* [n_blocks] */
	int32_t *free_list;          /* stack of unreferenced, unpublished blocks */
	int64_t n_free;
	/* prefix cache */
	uint64_t *hash;              /* [n_blocks] chained hash, 0 = unpublished */
	uint64_t *parent;            /* [n_blocks] parent's chained hash */
	int32_t *tokens;             /* [n_blocks][KV_BLOCK] */
	int32_t *lru_prev, *lru_next;/* [n_blocks] cached unreferenced blocks */
	int32_t lru_head, lru_tail;  /* head = least recently used */
	int64_t n_cached;            /* blocks in the LRU */
	int32_t *slots;              /* [n_slots] published blocks by hash */
	int64_t n_slots;             /* power of two, both tables */
	int64_t n_tombs;             /* deleted slots awaiting a rebuild */
	/* token-granular reuse: blocks with reusable rows, by parent */
	uint8_t *fill;               /* [n_blocks] leading rows indexed for reuse
					(0: none; KV_BLOCK: full) */
	int32_t *sib_prev, *sib_next;/* [n_blocks] same parent's indexed blocks,
					most recently indexed first */
	int32_t *kids;               /* [n_slots] head of each parent's list */
	int64_t n_kid_tombs;
	/* counters for metrics */
	uint64_t prefix_queries, prefix_hits; /* in tokens */
};

/* Creates a pool of n_blocks blocks (0: enough for every slot to hold
 * n_ctx positions) for n_seq sequence slots of up to n_ctx positions, K
 * rows of k_row bytes and V rows of v_row bytes. Memory is reserved but
 * committed by the OS only as blocks are used. */
int kv_create(int64_t n_layer, size_t k_row, size_t v_row, int64_t n_seq, int64_t n_ctx,
	      int64_t n_blocks, struct kv_cache **out, ing_err *err);
void kv_destroy(struct kv_cache *kv);

/* The K / V row of seq at pos in layer: k_row / v_row bytes. */
static inline void *kv_k_row(const struct kv_cache *kv, int64_t layer, int64_t seq, int64_t pos)
{
	int64_t b = kv->tables[seq * kv->max_blocks + pos / KV_BLOCK];
	return kv->k + (size_t)((layer * kv->n_blocks + b) * KV_BLOCK + pos % KV_BLOCK) * kv->k_row;
}

static inline void *kv_v_row(const struct kv_cache *kv, int64_t layer, int64_t seq, int64_t pos)
{
	int64_t b = kv->tables[seq * kv->max_blocks + pos / KV_BLOCK];
	return kv->v + (size_t)((layer * kv->n_blocks + b) * KV_BLOCK + pos % KV_BLOCK) * kv->v_row;
}

/* Makes positions [seq_len, len) of seq writable: allocates blocks (evicting
 * cached ones in LRU order when no block is free) and copies or unpublishes
 * the partially filled last block if it is shared or published. Does not
 * change seq_len. ING_ERR_NOMEM "KV cache full" when the pool is exhausted
 * (the blocks allocated so far stay with seq; kv_seq_truncate releases
 * them); ING_ERR_RANGE when len > n_ctx. */
int kv_seq_reserve(struct kv_cache *kv, int64_t seq, int64_t len, ing_err *err);

/* Sets the valid length (<= reserved capacity). */
void kv_seq_set_len(struct kv_cache *kv, int64_t seq, int64_t len);

/* Forgets positions >= len and releases the blocks past the new end. */
void kv_seq_truncate(struct kv_cache *kv, int64_t seq, int64_t len);

/* For an empty seq: attaches the longest run of cached full blocks that
 * matches tokens[0, n) from the start, then copies the rows of the cached
 * block after them that shares the most leading tokens with the rest (if
 * a block can be had for the copy), and sets seq_len to the positions
 * reused (at most n). Returns that count; counts it as prefix hits out of
 * n queried. root starts the hash chain, for this lookup and for what seq
 * publishes until it is emptied: sequences share blocks only with the
 * same root (0: the common cache; a request's cache salt keeps its rows
 * from every other root's). */
int64_t kv_seq_attach_prefix(struct kv_cache *kv, int64_t seq, uint64_t root,
			     const int32_t *tokens, int64_t n);

/* Makes the rows of seq for tokens[0, n) (the token ids at positions
 * 0..n-1, n <= seq_len) reusable by later sequences: publishes the full
 * blocks and indexes the partial last one. Cheap enough for every step
 * (amortized O(1) per new block; no allocation). */
void kv_seq_publish(struct kv_cache *kv, int64_t seq, const int32_t *tokens, int64_t n);

/* Blocks referenced by some sequence (not free, not merely cached). */
int64_t kv_blocks_used(const struct kv_cache *kv);

#endif
