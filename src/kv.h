/* kv.h — the key/value cache.
 *
 * For now one contiguous region per (layer, sequence): K and V rows of
 * HKV*Dh floats for positions 0..n_ctx-1. Pages are committed lazily by the
 * OS, so reserving the trained context costs only what is used. (Paging,
 * block tables and prefix caching come with the server, issue #5.)
 *
 * A sequence's length is the number of leading positions that hold valid
 * entries; kv_seq_truncate() rolls back (speculative decoding, retries). */
#ifndef INGOT_KV_H
#define INGOT_KV_H

#include <stdint.h>

#include "err.h"

struct kv_cache {
	int64_t n_layer, n_seq, n_ctx;
	int64_t k_dim, v_dim;   /* HKV*Dh, HKV*Dv floats per row */
	float *k, *v;           /* [n_layer][n_seq][n_ctx][k_dim|v_dim] */
	int64_t *seq_len;       /* [n_seq] */
};

int kv_create(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim, int64_t v_dim,
	      struct kv_cache **out, ing_err *err);
void kv_destroy(struct kv_cache *kv);

static inline float *kv_k_row(const struct kv_cache *kv, int64_t layer, int64_t seq, int64_t pos)
{
	return kv->k + ((layer * kv->n_seq + seq) * kv->n_ctx + pos) * kv->k_dim;
}

static inline float *kv_v_row(const struct kv_cache *kv, int64_t layer, int64_t seq, int64_t pos)
{
	return kv->v + ((layer * kv->n_seq + seq) * kv->n_ctx + pos) * kv->v_dim;
}

/* Forgets positions >= len of seq. */
void kv_seq_truncate(struct kv_cache *kv, int64_t seq, int64_t len);

#endif
