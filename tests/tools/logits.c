/* logits — prints ingot's logits for a token sequence (test tool).
 *
 *   logits MODEL.gguf ID [ID ...]  >  float32 [n_tokens][n_vocab], little-endian
 *
 * Env: INGOT_THREADS (default 2), INGOT_BATCH (rows per step, default all
 * tokens in one step), INGOT_KV_TYPE (f32, the default, f16, q8_0 or auto,
 * as --kv-cache-dtype takes them: the KV cache's element type). Used by tests/test_forward_tiny.py against the NumPy
 * reference. Exit 1 with a message on any error. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "forward.h"
#include "mem.h"
#include "model.h"
#include "pool.h"
#include "runner.h"

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: logits MODEL.gguf ID [ID ...]\n");
		return 2;
	}
	const char *kv = getenv("INGOT_KV_TYPE");
	enum qtype kv_type = QTYPE_F32;
	if (kv && *kv && fwd_kv_type_parse(kv, &kv_type)) {
		fprintf(stderr, "logits: INGOT_KV_TYPE is f32, f16, q8_0 or auto, not '%s'\n", kv);
		return 2;
	}
	int n = argc - 2;
	int32_t *ids = ing_malloc_array((size_t)n, sizeof *ids);
	int32_t *pos = ing_malloc_array((size_t)n, sizeof *pos);
	int32_t *seq = ing_calloc((size_t)n, sizeof *seq);
	bool *want = ing_malloc_array((size_t)n, sizeof *want);
	for (int i = 0; i < n; i++) {
		ids[i] = (int32_t)strtol(argv[2 + i], NULL, 10);
		pos[i] = i;
		want[i] = true;
	}
	int batch = env_int("INGOT_BATCH", n), threads = env_int("INGOT_THREADS", 2);
	ing_err err = { 0 };
	struct model *m = NULL;
	struct fwd *f = NULL;
	struct pool *pool = NULL;
	struct runner *r = NULL;
	struct fwd_config cfg = { .max_batch = batch, .max_logits = batch, .n_ctx = n, .n_seq = 1,
				  .n_threads = threads, .kv_type = kv_type };
	if (model_open(argv[1], &m, &err) || fwd_create(m, &cfg, &f, &err) ||
	    pool_create(threads, 0, &pool, &err) || runner_create(RUNNER_GRAPH, f, pool, &r, &err))
		goto fail;
	int64_t V = m->hp.n_vocab;
	for (int i0 = 0; i0 < n; i0 += batch) {
		int cnt = n - i0 < batch ? n - i0 : batch;
		struct fwd_batch b = { .n = cnt, .tokens = ids + i0, .pos = pos + i0, .seq = seq,
				       .want_logits = want + i0 };
		if (runner_step(r, &b, &err))
			goto fail;
		int64_t n_out;
		const float *lg = fwd_logits(f, &n_out);
		fwrite(lg, sizeof(float), (size_t)(n_out * V), stdout);
	}
	runner_destroy(r);
	pool_destroy(pool);
	fwd_destroy(f);
	model_close(m);
	ing_free(ids);
	ing_free(pos);
	ing_free(seq);
	ing_free(want);
	return 0;
fail:
	fprintf(stderr, "logits: %s\n", err.msg);
	return 1;
}
