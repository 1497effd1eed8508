/* kv.c — contiguous KV cache (see kv.h). */
#include "kv.h"

#include <stdint.h>

#include "mem.h"

int kv_create(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim, int64_t v_dim,
	      struct kv_cache **out, ing_err *err)
{
	*out = NULL;
	if (n_layer <= 0 || n_seq <= 0 || n_ctx <= 0 || k_dim <= 0 || v_dim <= 0)
		return ing_err_set(err, ING_ERR_INVALID, "bad KV cache dimensions");
	uint64_t rows = (uint64_t)n_layer * (uint64_t)n_seq;
	if (rows > UINT64_MAX / (uint64_t)n_ctx)
		return ing_err_set(err, ING_ERR_RANGE, "KV cache size overflows");
	rows *= (uint64_t)n_ctx;
	uint64_t maxdim = (uint64_t)(k_dim > v_dim ? k_dim : v_dim);
	if (rows > SIZE_MAX / sizeof(float) / maxdim)
		return ing_err_set(err, ING_ERR_RANGE, "KV cache size overflows");
	struct kv_cache *kv = ing_calloc(1, sizeof *kv);
	if (!kv)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	kv->n_layer = n_layer;
	kv->n_seq = n_seq;
	kv->n_ctx = n_ctx;
	kv->k_dim = k_dim;
	kv->v_dim = v_dim;
	/* malloc, not calloc: untouched pages stay uncommitted */
	kv->k = ing_malloc_array(rows, (size_t)k_dim * sizeof(float));
	kv->v = ing_malloc_array(rows, (size_t)v_dim * sizeof(float));
	kv->seq_len = ing_calloc((size_t)n_seq, sizeof *kv->seq_len);
	if (!kv->k || !kv->v || !kv->seq_len) {
		double mb = (double)rows * (double)(k_dim + v_dim) * 4 / 1e6;
		kv_destroy(kv);
		return ing_err_set(err, ING_ERR_NOMEM,
				   "cannot allocate the KV cache (%.0f MB); use a smaller --ctx", mb);
	}
	*out = kv;
	return ING_OK;
}

void kv_destroy(struct kv_cache *kv)
{
	if (!kv)
		return;
	ing_free(kv->k);
	ing_free(kv->v);
	ing_free(kv->seq_len);
	ing_free(kv);
}

void kv_seq_truncate(struct kv_cache *kv, int64_t seq, int64_t len)
{
	if (seq >= 0 && seq < kv->n_seq && len >= 0 && len < kv->seq_len[seq])
		kv->seq_len[seq] = len;
}
