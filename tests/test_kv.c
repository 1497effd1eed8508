/* test_kv.c — paged KV cache: blocks, sharing, prefix cache, eviction,
 * copy-on-write, exhaustion; and, on the default model, that a sequence
 * reusing a cached prefix gets bit-identical logits to a full prefill. */
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

static struct kv_cache *make(int64_t n_seq, int64_t n_ctx, int64_t n_blocks)
{
	struct kv_cache *kv;
	ing_err err = { 0 };
	int rc = kv_create(2, 4, 4, n_seq, n_ctx, n_blocks, &kv, &err);
	CHECK(rc == ING_OK, "kv_create: %s", err.msg);
	return rc ? NULL : kv;
}

/* Writes a recognizable value into every row of seq's positions [a, b). */
static void fill(struct kv_cache *kv, int64_t seq, int64_t a, int64_t b, float tag)
{
	for (int64_t l = 0; l < kv->n_layer; l++)
		for (int64_t p = a; p < b; p++) {
			kv_k_row(kv, l, seq, p)[0] = tag + (float)p;
			kv_v_row(kv, l, seq, p)[0] = -tag - (float)p;
		}
}

static int rows_hold(const struct kv_cache *kv, int64_t seq, int64_t a, int64_t b, float tag)
{
	int ok = 1;
	for (int64_t l = 0; l < kv->n_layer; l++)
		for (int64_t p = a; p < b; p++)
			ok &= kv_k_row(kv, l, seq, p)[0] == tag + (float)p &&
			      kv_v_row(kv, l, seq, p)[0] == -tag - (float)p;
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
	CHECK(kv_seq_attach_prefix(kv, 0, tok, 40) == 0, "empty cache: no hit");
	extend(kv, 0, 40);
	fill(kv, 0, 0, 40, 7);
	kv_seq_publish(kv, 0, tok, 40);
	/* seq 1 with the same first 35 tokens reuses 32 positions */
	int64_t hit = kv_seq_attach_prefix(kv, 1, tok, 35);
	CHECK(hit == 32 && kv->seq_len[1] == 32, "prefix hit of 32, got %lld", (long long)hit);
	CHECK(rows_hold(kv, 1, 0, 32, 7), "shared rows visible to the second sequence");
	CHECK(kv_blocks_used(kv) == 3, "blocks shared, not copied: %lld", (long long)kv_blocks_used(kv));
	/* a different second block: only the first matches */
	int32_t other[32];
	memcpy(other, tok, sizeof other);
	other[20] = 5;
	CHECK(kv_seq_attach_prefix(kv, 2, other, 32) == 16, "partial match stops at the first differing block");
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
	/* both finish: published blocks stay cached, others are free */
	kv_seq_truncate(kv, 0, 0);
	kv_seq_truncate(kv, 1, 0);
	CHECK(kv_blocks_used(kv) == 0 && kv->n_cached == 2, "2 cached blocks remain, %lld",
	      (long long)kv->n_cached);
	CHECK(kv_seq_attach_prefix(kv, 0, tok, 64) == 32, "cached blocks hit after release");
	kv_seq_truncate(kv, 0, 0);
	/* pressure evicts cached blocks (LRU) instead of failing */
	CHECK(extend(kv, 2, 128) == ING_OK && extend(kv, 1, 64) == ING_OK,
	      "whole pool usable: cached blocks evicted");
	CHECK(kv->n_cached == 0, "nothing cached after eviction");
	kv_seq_truncate(kv, 2, 0);
	kv_seq_truncate(kv, 1, 0);
	CHECK(kv_seq_attach_prefix(kv, 0, tok, 64) == 0, "evicted blocks are gone from the index");
	kv_seq_truncate(kv, 0, 0);
	CHECK(kv->prefix_hits > 0 && kv->prefix_queries >= kv->prefix_hits, "hit counters");
	kv_destroy(kv);
}

/* On the real model: prefill 40 tokens in seq 0 and publish; seq 1 attaches
 * the prefix of the same prompt and prefills only the rest. Its last-row
 * logits must equal seq 0's bit for bit. */
static void test_prefix_logits(void)
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
	struct fwd_config cfg = { .max_batch = 64, .max_logits = 1, .n_ctx = 64, .n_seq = 2,
				  .n_threads = 2, .kv_type = QTYPE_F32 };
	if (model_open(path, &m, &err) || fwd_create(m, &cfg, &f, &err) ||
	    pool_create(2, 0, &pool, &err) || runner_create(RUNNER_MEGA, f, pool, &r, &err)) {
		CHECK(0, "setup: %s", err.msg);
		goto out;
	}
	int32_t tok[40], pos[40], seq[40];
	for (int i = 0; i < 40; i++) {
		tok[i] = i ? 1000 + 37 * i : 2;
		pos[i] = i;
		seq[i] = 0;
	}
	struct fwd_batch b = { .n = 40, .tokens = tok, .pos = pos, .seq = seq };
	CHECK(runner_step(r, &b, &err) == ING_OK, "prefill: %s", err.msg);
	const int64_t V = m->hp.n_vocab;
	int64_t n_out;
	float *full = malloc((size_t)V * sizeof(float));
	memcpy(full, fwd_logits(f, &n_out), (size_t)V * sizeof(float));
	struct kv_cache *kv = fwd_kv(f);
	kv_seq_publish(kv, 0, tok, 40);
	int64_t hit = kv_seq_attach_prefix(kv, 1, tok, 39);
	CHECK(hit == 32, "attached %lld cached positions", (long long)hit);
	for (int i = 0; i < 40; i++)
		seq[i] = 1;
	struct fwd_batch rest = { .n = 40 - hit, .tokens = tok + hit, .pos = pos + hit, .seq = seq };
	CHECK(runner_step(r, &rest, &err) == ING_OK, "rest: %s", err.msg);
	CHECK(memcmp(full, fwd_logits(f, &n_out), (size_t)V * sizeof(float)) == 0,
	      "logits after a prefix-cache hit differ from a full prefill");
	free(full);
out:
	runner_destroy(r);
	pool_destroy(pool);
	fwd_destroy(f);
	model_close(m);
}

int main(void)
{
	size_t live = ing_mem_live();
	test_blocks();
	test_prefix();
	test_prefix_logits();
	CHECK(ing_mem_live() == live, "leak: %zu bytes", ing_mem_live() - live);
	return check_summary("test_kv");
}
