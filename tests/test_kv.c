/* test_kv.c — paged KV cache: blocks, sharing, prefix cache, token-granular
 * reuse of partial blocks (finished and running sequences, rollback,
 * eviction), eviction, copy-on-write, exhaustion, with the bookkeeping
 * checked against itself, with rows of 16, 8 and 34 bytes (as F32, F16 and
 * Q8_0 caches store them); and, on the default model with each cache type,
 * that a sequence reusing a cached prefix gets bit-identical logits to a
 * full prefill. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "forward.h"
#include "kv.h"
#include "mem.h"
#include "model.h"
#include "pool.h"
#include "runner.h"

static size_t cache_row = 16; /* of the caches made: 4 F32, 8 F16 or one Q8_0 block */

static struct kv_cache *make(int64_t n_seq, int64_t n_ctx, int64_t n_blocks)
{
	struct kv_cache *kv;
	ing_err err = { 0 };
	int rc = kv_create(2, cache_row, cache_row, n_seq, n_ctx, n_blocks, &kv, &err);
	CHECK(rc == ING_OK, "kv_create: %s", err.msg);
	return rc ? NULL : kv;
}

/* The tag of a row lives in its last 4 bytes: a copy that moved too few
 * bytes per row would lose it, whatever the element size. */
static void tag_put(void *row, size_t row_bytes, float v)
{
	memcpy((unsigned char *)row + row_bytes - sizeof v, &v, sizeof v);
}

static float tag_get(const void *row, size_t row_bytes)
{
	float v;
	memcpy(&v, (const unsigned char *)row + row_bytes - sizeof v, sizeof v);
	return v;
}

/* Writes a recognizable value into every row of seq's positions [a, b). */
static void fill(struct kv_cache *kv, int64_t seq, int64_t a, int64_t b, float tag)
{
	const size_t kb = kv->k_row, vb = kv->v_row;
	for (int64_t l = 0; l < kv->n_layer; l++)
		for (int64_t p = a; p < b; p++) {
			tag_put(kv_k_row(kv, l, seq, p), kb, tag + (float)p);
			tag_put(kv_v_row(kv, l, seq, p), vb, -tag - (float)p);
		}
}

static int rows_hold(const struct kv_cache *kv, int64_t seq, int64_t a, int64_t b, float tag)
{
	const size_t kb = kv->k_row, vb = kv->v_row;
	int ok = 1;
	for (int64_t l = 0; l < kv->n_layer; l++)
		for (int64_t p = a; p < b; p++)
			ok &= tag_get(kv_k_row(kv, l, seq, p), kb) == tag + (float)p &&
			      tag_get(kv_v_row(kv, l, seq, p), vb) == -tag - (float)p;
	return ok;
}

static int extend(struct kv_cache *kv, int64_t seq, int64_t len)
{
	ing_err err = { 0 };
	int rc = kv_seq_reserve(kv, seq, len, &err);
	if (rc == ING_OK)
		kv_seq_set_len(kv, seq, len);
	return rc;
}

/* Whether b is on the sibling list its parent's kids slot heads. */
static bool listed(const struct kv_cache *kv, int32_t b)
{
	for (int64_t i = 0; i < kv->n_slots; i++) {
		int32_t h = kv->kids[i];
		if (h < 0 || kv->parent[h] != kv->parent[b])
			continue;
		for (int32_t c = h; c >= 0; c = kv->sib_next[c])
			if (c == b)
				return true;
		return false;
	}
	return false;
}

/* The cache's bookkeeping agrees with itself: each block's refs count the
 * tables holding it; unreferenced blocks are free or (if indexed) cached;
 * published blocks are full and in the hash table; every indexed block is
 * on its parent's list. */
static bool consistent(const struct kv_cache *kv)
{
	bool ok = kv->n_free + kv->n_cached + kv_blocks_used(kv) == kv->n_blocks;
	int64_t cached = 0;
	for (int32_t b = 0; b < kv->n_blocks; b++) {
		int32_t refs = 0;
		for (int64_t s = 0; s < kv->n_seq; s++)
			for (int64_t i = 0; i < kv->seq_blocks[s]; i++)
				refs += kv->tables[s * kv->max_blocks + i] == b;
		ok &= refs == kv->refs[b];
		cached += refs == 0 && kv->fill[b] > 0;
		bool in_slots = false;
		for (int64_t i = 0; i < kv->n_slots; i++)
			in_slots |= kv->slots[i] == b;
		ok &= in_slots == (kv->hash[b] != 0);
		ok &= !kv->hash[b] || kv->fill[b] == KV_BLOCK;
		ok &= kv->fill[b] <= KV_BLOCK && (!kv->fill[b] || listed(kv, b));
	}
	int64_t n = 0;
	for (int32_t b = kv->lru_head; b >= 0 && n <= kv->n_blocks; b = kv->lru_next[b])
		ok &= kv->refs[b] == 0 && kv->fill[b] > 0, n++;
	return ok && n == cached && n == kv->n_cached;
}

static void test_blocks(void)
{
	struct kv_cache *kv = make(2, 64, 5);
	if (!kv)
		return;
	CHECK(extend(kv, 0, 20) == ING_OK && kv_blocks_used(kv) == 2, "20 positions take 2 blocks");
	fill(kv, 0, 0, 20, 100);
	CHECK(extend(kv, 1, 64) == ING_ERR_NOMEM, "pool of 5 blocks cannot hold 2 + 4");
	kv_seq_truncate(kv, 1, 0);
	CHECK(kv_blocks_used(kv) == 2, "failed reserve released by truncate: %lld",
	      (long long)kv_blocks_used(kv));
	kv_seq_truncate(kv, 0, 5);
	CHECK(kv_blocks_used(kv) == 1 && kv->seq_len[0] == 5, "truncate to 5 keeps one block");
	CHECK(rows_hold(kv, 0, 0, 5, 100), "rows survive truncation");
	ing_err err = { 0 };
	CHECK(kv_seq_reserve(kv, 0, 65, &err) == ING_ERR_RANGE, "past n_ctx is a range error");
	kv_seq_truncate(kv, 0, 0);
	CHECK(kv_blocks_used(kv) == 0 && kv->n_free == 5, "everything back");
	kv_destroy(kv);
}

static void test_prefix(void)
{
	struct kv_cache *kv = make(3, 128, 12);
	if (!kv)
		return;
	int32_t tok[64];
	for (int i = 0; i < 64; i++)
		tok[i] = 1000 + i;
	/* seq 0 computes 40 tokens, publishes its 2 full blocks */
	CHECK(kv_seq_attach_prefix(kv, 0, 0, tok, 40) == 0, "empty cache: no hit");
	extend(kv, 0, 40);
	fill(kv, 0, 0, 40, 7);
	kv_seq_publish(kv, 0, tok, 40);
	/* seq 1 with the same first 35 tokens reuses 32 positions in shared
	 * blocks and 3 copied from seq 0's partial last block */
	int64_t hit = kv_seq_attach_prefix(kv, 1, 0, tok, 35);
	CHECK(hit == 35 && kv->seq_len[1] == 35, "prefix hit of 35, got %lld", (long long)hit);
	CHECK(rows_hold(kv, 1, 0, 35, 7), "reused rows visible to the second sequence");
	CHECK(kv_blocks_used(kv) == 4, "full blocks shared, the partial one copied: %lld",
	      (long long)kv_blocks_used(kv));
	/* a different second block: the first is shared, 4 rows of the
	 * second copied */
	int32_t other[32];
	memcpy(other, tok, sizeof other);
	other[20] = 5;
	CHECK(kv_seq_attach_prefix(kv, 2, 0, other, 32) == 20, "match stops at the first differing token");
	CHECK(rows_hold(kv, 2, 0, 20, 7), "rows of the first 20 positions");
	kv_seq_truncate(kv, 2, 0);
	/* seq 1 writes on: its new block is private; seq 0 unchanged */
	extend(kv, 1, 36);
	fill(kv, 1, 32, 36, 9);
	CHECK(rows_hold(kv, 0, 32, 40, 7), "writing seq 1 did not touch seq 0's rows");
	/* rollback into a shared block, then rewrite: copy-on-write */
	kv_seq_truncate(kv, 1, 20);
	extend(kv, 1, 24);
	fill(kv, 1, 20, 24, 11);
	CHECK(rows_hold(kv, 0, 16, 32, 7), "copy-on-write kept the shared block intact");
	CHECK(rows_hold(kv, 1, 16, 20, 7) && rows_hold(kv, 1, 20, 24, 11), "copied prefix + new rows");
	/* both finish: indexed blocks (2 full, seq 0's partial one) stay
	 * cached, others are free */
	kv_seq_truncate(kv, 0, 0);
	kv_seq_truncate(kv, 1, 0);
	CHECK(kv_blocks_used(kv) == 0 && kv->n_cached == 3, "3 cached blocks remain, %lld",
	      (long long)kv->n_cached);
	CHECK(kv_seq_attach_prefix(kv, 0, 0, tok, 64) == 40, "cached blocks hit after release");
	CHECK(rows_hold(kv, 0, 0, 40, 7), "cached rows intact");
	kv_seq_truncate(kv, 0, 0);
	/* pressure evicts cached blocks (LRU) instead of failing */
	CHECK(extend(kv, 2, 128) == ING_OK && extend(kv, 1, 64) == ING_OK,
	      "whole pool usable: cached blocks evicted");
	CHECK(kv->n_cached == 0, "nothing cached after eviction");
	kv_seq_truncate(kv, 2, 0);
	kv_seq_truncate(kv, 1, 0);
	CHECK(kv_seq_attach_prefix(kv, 0, 0, tok, 64) == 0, "evicted blocks are gone from the index");
	kv_seq_truncate(kv, 0, 0);
	CHECK(kv->prefix_hits > 0 && kv->prefix_queries >= kv->prefix_hits, "hit counters");
	CHECK(consistent(kv), "bookkeeping consistent");
	kv_destroy(kv);
}

/* Token-granular reuse from a finished sequence's partial last block:
 * exactly the shared leading tokens, copied (no aliasing), bounded by the
 * query; hits and queries counted in tokens. */
static void test_partial_finished(void)
{
	struct kv_cache *kv = make(3, 64, 8);
	if (!kv)
		return;
	int32_t tok[40], q[40];
	for (int i = 0; i < 40; i++)
		tok[i] = q[i] = 500 + i;
	extend(kv, 0, 21);
	fill(kv, 0, 0, 21, 3);
	kv_seq_publish(kv, 0, tok, 21);
	kv_seq_truncate(kv, 0, 0); /* finished: a full block and 5 rows cached */
	CHECK(kv->n_cached == 2 && kv->fill[kv->lru_head] == 5, "partial block cached with 5 rows");
	q[19] = 7; /* differs at position 19: 3 rows of the partial block */
	uint64_t h0 = kv->prefix_hits, q0 = kv->prefix_queries;
	CHECK(kv_seq_attach_prefix(kv, 1, 0, q, 30) == 19, "16 shared + 3 copied");
	CHECK(kv->prefix_hits - h0 == 19 && kv->prefix_queries - q0 == 30, "counted in tokens");
	CHECK(rows_hold(kv, 1, 0, 19, 3), "the copied rows");
	CHECK(kv_seq_attach_prefix(kv, 2, 0, tok, 18) == 18, "a short query takes what it asks: 2 rows");
	CHECK(consistent(kv), "bookkeeping after partial hits");
	/* seq 1 writes over its copy; the cached block keeps its rows */
	extend(kv, 1, 24);
	fill(kv, 1, 16, 24, 50);
	kv_seq_truncate(kv, 2, 0);
	CHECK(kv_seq_attach_prefix(kv, 2, 0, tok, 40) == 21 && rows_hold(kv, 2, 0, 21, 3),
	      "a copy does not alias the cached rows");
	kv_seq_truncate(kv, 1, 0);
	kv_seq_truncate(kv, 2, 0);
	CHECK(kv_blocks_used(kv) == 0 && consistent(kv), "refs back to zero");
	for (int32_t b = 0; b < kv->n_blocks; b++)
		CHECK(kv->refs[b] == 0, "block %d still referenced", b);
	kv_destroy(kv);
}

/* A running sequence's partial last block grows in place as it writes on;
 * a rollback (speculative decoding's truncate) and rewrite takes the
 * overwritten rows out of the index; a query never gets stale rows. */
static void test_partial_running(void)
{
	struct kv_cache *kv = make(3, 64, 8);
	if (!kv)
		return;
	int32_t tok[40], alt[40];
	for (int i = 0; i < 40; i++)
		tok[i] = alt[i] = 900 + i;
	extend(kv, 0, 21);
	fill(kv, 0, 0, 21, 3);
	kv_seq_publish(kv, 0, tok, 21);
	CHECK(kv_seq_attach_prefix(kv, 1, 0, tok, 40) == 21, "reuse of a running sequence's tail");
	kv_seq_truncate(kv, 1, 0);
	extend(kv, 0, 25);
	fill(kv, 0, 21, 25, 3);
	kv_seq_publish(kv, 0, tok, 25);
	CHECK(kv_seq_attach_prefix(kv, 1, 0, tok, 40) == 25 && rows_hold(kv, 1, 0, 25, 3),
	      "the indexed tail grew in place");
	kv_seq_truncate(kv, 1, 0);
	/* rejected draft: truncate without rewriting keeps the rows valid */
	kv_seq_truncate(kv, 0, 22);
	kv_seq_publish(kv, 0, tok, 22);
	CHECK(kv_seq_attach_prefix(kv, 1, 0, tok, 40) == 25, "rows past a truncation, unwritten, stay");
	kv_seq_truncate(kv, 1, 0);
	/* rewriting from 18 with other tokens unindexes the old rows */
	kv_seq_truncate(kv, 0, 18);
	extend(kv, 0, 21);
	for (int i = 18; i < 21; i++)
		alt[i] = 77;
	fill(kv, 0, 18, 21, 60);
	CHECK(kv_seq_attach_prefix(kv, 1, 0, tok, 40) == 16, "stale rows are not served");
	kv_seq_truncate(kv, 1, 0);
	kv_seq_publish(kv, 0, alt, 21);
	CHECK(kv_seq_attach_prefix(kv, 1, 0, alt, 40) == 21 && rows_hold(kv, 1, 18, 21, 60) &&
		      rows_hold(kv, 1, 0, 18, 3), "the rewritten rows are served for their tokens");
	kv_seq_truncate(kv, 1, 0);
	/* the tail fills up: published as a full block, found by hash */
	extend(kv, 0, 32);
	fill(kv, 0, 21, 32, 60);
	for (int i = 21; i < 32; i++)
		alt[i] = 1000 + i;
	kv_seq_publish(kv, 0, alt, 32);
	CHECK(kv_seq_attach_prefix(kv, 1, 0, alt, 33) == 32 && kv_blocks_used(kv) == 2,
	      "a filled tail is shared whole");
	CHECK(consistent(kv), "bookkeeping");
	kv_seq_truncate(kv, 0, 0);
	kv_seq_truncate(kv, 1, 0);
	CHECK(kv_blocks_used(kv) == 0 && kv->n_cached == 2 && consistent(kv), "refs back to zero");
	kv_destroy(kv);
}

/* Partial blocks are evicted in LRU order like full ones; the block a
 * partial hit copies from is pinned while the copy's block is found; with
 * no block left for the copy the hit is the full blocks alone. */
static void test_partial_eviction(void)
{
	struct kv_cache *kv = make(3, 64, 4);
	if (!kv)
		return;
	int32_t a[40], b[40];
	for (int i = 0; i < 40; i++) {
		a[i] = 100 + i;
		b[i] = 200 + i;
	}
	extend(kv, 1, 5); /* a cached partial block of another prompt, least recent */
	kv_seq_publish(kv, 1, b, 5);
	kv_seq_truncate(kv, 1, 0);
	extend(kv, 0, 20);
	fill(kv, 0, 0, 20, 4);
	kv_seq_publish(kv, 0, a, 20);
	kv_seq_truncate(kv, 0, 0);
	extend(kv, 2, 16); /* the last free block in use: copies must evict */
	CHECK(kv->n_free == 0 && kv->n_cached == 3, "pool: 1 used, 3 cached");
	CHECK(kv_seq_attach_prefix(kv, 0, 0, a, 30) == 20 && rows_hold(kv, 0, 0, 20, 4),
	      "the copy's block came from evicting the other prompt's block");
	CHECK(kv_seq_attach_prefix(kv, 1, 0, b, 30) == 0, "the evicted partial block is gone");
	CHECK(consistent(kv), "bookkeeping after eviction");
	kv_seq_truncate(kv, 0, 0); /* a's copy is free again, a's blocks cached */
	kv_seq_truncate(kv, 1, 0);
	extend(kv, 1, 16);         /* takes the free block */
	CHECK(kv->n_free == 0 && kv->n_cached == 2, "no free block");
	CHECK(kv_seq_attach_prefix(kv, 0, 0, a, 30) == 16, "no block for the copy: full blocks only");
	CHECK(kv->n_cached == 1, "the partial source stays cached");
	kv_seq_truncate(kv, 0, 0);
	kv_seq_truncate(kv, 1, 0);
	CHECK(kv_seq_attach_prefix(kv, 0, 0, a, 30) == 20, "and is hit once a block is free");
	kv_seq_truncate(kv, 0, 0);
	kv_seq_truncate(kv, 2, 0);
	CHECK(kv_blocks_used(kv) == 0 && consistent(kv), "refs back to zero");
	kv_destroy(kv);
}

/* Prefills tok[from, n) in seq and copies the last row's logits to out. */
static int prefill(struct runner *r, struct fwd *f, int32_t seq, const int32_t *tok, int32_t from,
		   int32_t n, float *out, int64_t V)
{
	int32_t pos[64], sq[64];
	for (int32_t i = from; i < n; i++) {
		pos[i - from] = i;
		sq[i - from] = seq;
	}
	struct fwd_batch b = { .n = n - from, .tokens = tok + from, .pos = pos, .seq = sq };
	ing_err err = { 0 };
	int rc = runner_step(r, &b, &err);
	CHECK(rc == ING_OK, "prefill: %s", err.msg);
	int64_t n_out;
	if (rc == ING_OK)
		memcpy(out, fwd_logits(f, &n_out), (size_t)V * sizeof(float));
	return rc;
}

/* On the real model: the last-row logits of a prompt prefilled after a
 * prefix-cache hit equal those of a full prefill bit for bit: prompt A
 * again after A was published (32 shared positions, 7 copied from A's
 * partial last block), and a prompt B that leaves A after 35 tokens (3
 * copied). Rows of every layer are cached for every position (sliding-
 * window layers included: forward.c only reads fewer of them), so a copy
 * carries all a later position needs. */
static void test_prefix_logits(enum qtype kv_type)
{
	const char *path = check_default_model();
	if (!path) {
		CHECK(0, "default model missing: run ./ingot pull");
		return;
	}
	ing_err err = { 0 };
	struct model *m = NULL;
	struct fwd *f = NULL;
	struct pool *pool = NULL;
	struct runner *r = NULL;
	float *la = NULL, *lb = NULL, *got = NULL;
	struct fwd_config cfg = { .max_batch = 64, .max_logits = 1, .n_ctx = 64, .n_seq = 2,
				  .n_threads = 2, .kv_type = kv_type };
	if (model_open(path, &m, &err) || fwd_create(m, &cfg, &f, &err) ||
	    pool_create(2, 0, &pool, &err) || runner_create(RUNNER_MEGA, f, pool, &r, &err)) {
		CHECK(0, "setup: %s", err.msg);
		goto out;
	}
	const int64_t V = m->hp.n_vocab;
	la = malloc((size_t)V * sizeof(float));
	lb = malloc((size_t)V * sizeof(float));
	got = malloc((size_t)V * sizeof(float));
	int32_t a[40], b[40];
	for (int i = 0; i < 40; i++)
		a[i] = b[i] = i ? 1000 + 37 * i : 2;
	for (int i = 35; i < 40; i++)
		b[i] = 5000 + 11 * i;
	struct kv_cache *kv = fwd_kv(f);
	if (prefill(r, f, 1, b, 0, 40, lb, V) || prefill(r, f, 0, a, 0, 40, la, V))
		goto out;
	kv_seq_truncate(kv, 1, 0); /* B computed cold, never published */
	kv_seq_publish(kv, 0, a, 40);
	int64_t hit = kv_seq_attach_prefix(kv, 1, 0, a, 39);
	CHECK(hit == 39, "attached %lld cached positions of A", (long long)hit);
	if (prefill(r, f, 1, a, (int32_t)hit, 40, got, V) == ING_OK)
		CHECK(memcmp(la, got, (size_t)V * sizeof(float)) == 0,
		      "logits after a prefix-cache hit differ from a full prefill");
	kv_seq_truncate(kv, 1, 0);
	hit = kv_seq_attach_prefix(kv, 1, 0, b, 39);
	CHECK(hit == 35, "attached %lld cached positions of B", (long long)hit);
	if (prefill(r, f, 1, b, (int32_t)hit, 40, got, V) == ING_OK)
		CHECK(memcmp(lb, got, (size_t)V * sizeof(float)) == 0,
		      "logits after a partial-block hit differ from a full prefill");
out:
	free(la);
	free(lb);
	free(got);
	runner_destroy(r);
	pool_destroy(pool);
	fwd_destroy(f);
	model_close(m);
}

/* Roots (the server's cache_salt): sequences share full blocks and
 * partial rows only with sequences of the same root, and a root lasts
 * until its sequence is emptied. */
static void test_roots(void)
{
	struct kv_cache *kv = make(3, 128, 12);
	if (!kv)
		return;
	const uint64_t salt_a = 0x1234567890abcdefull, salt_b = 0x0fedcba987654321ull;
	int32_t tok[40];
	for (int i = 0; i < 40; i++)
		tok[i] = 2000 + i;
	CHECK(kv_seq_attach_prefix(kv, 0, salt_a, tok, 40) == 0, "empty cache: no hit");
	extend(kv, 0, 40);
	fill(kv, 0, 0, 40, 5);
	kv_seq_publish(kv, 0, tok, 40);
	kv_seq_truncate(kv, 0, 0);
	CHECK(kv->seq_root[0] == 0, "an emptied sequence forgets its root");
	CHECK(kv_seq_attach_prefix(kv, 1, 0, tok, 39) == 0, "no root: nothing of salt a's");
	kv_seq_truncate(kv, 1, 0);
	CHECK(kv_seq_attach_prefix(kv, 1, salt_b, tok, 39) == 0, "salt b: nothing of salt a's");
	kv_seq_truncate(kv, 1, 0);
	CHECK(kv_seq_attach_prefix(kv, 1, salt_a, tok, 39) == 39 && rows_hold(kv, 1, 0, 39, 5),
	      "salt a: its 2 full blocks and 7 rows of the partial one");
	kv_seq_truncate(kv, 1, 0);
	/* a sequence without a root publishes the same tokens apart */
	CHECK(kv_seq_attach_prefix(kv, 2, 0, tok, 40) == 0, "no root: a cold start");
	extend(kv, 2, 40);
	fill(kv, 2, 0, 40, 6);
	kv_seq_publish(kv, 2, tok, 40);
	kv_seq_truncate(kv, 2, 0);
	CHECK(kv_seq_attach_prefix(kv, 0, 0, tok, 39) == 39 && rows_hold(kv, 0, 0, 39, 6),
	      "no root: its own rows");
	kv_seq_truncate(kv, 0, 0);
	CHECK(kv_seq_attach_prefix(kv, 0, salt_a, tok, 39) == 39 && rows_hold(kv, 0, 0, 39, 5),
	      "salt a: still its own rows");
	kv_seq_truncate(kv, 0, 0);
	CHECK(consistent(kv), "bookkeeping consistent");
	kv_destroy(kv);
}

int main(void)
{
	size_t live = ing_mem_live();
	static const size_t rows[] = { 4 * sizeof(float), 8 * sizeof(uint16_t), 34 };
	for (int i = 0; i < 3; i++) {
		cache_row = rows[i];
		test_blocks();
		test_prefix();
		test_partial_finished();
		test_partial_running();
		test_partial_eviction();
		test_roots();
	}
	test_prefix_logits(QTYPE_F32);
	test_prefix_logits(QTYPE_F16);
	test_prefix_logits(QTYPE_Q8_0);
	CHECK(ing_mem_live() == live, "leak: %zu bytes", ing_mem_live() - live);
	return check_summary("test_kv");
}
