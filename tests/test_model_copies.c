/* test_model_copies.c — the model's copies of its matrices (model_r16,
 * model_rows), on the default model.
 *
 * From a mapped file, the first table's build repacks the types it has
 * kernels for and copies every other matrix as it is, on a cache line,
 * with the file's bytes (the originals' pages given back fault in again
 * from the file); from a caller's buffer it makes no plain copies. The
 * logits do not depend on which copy a kernel reads: a model whose LM head
 * was copied plain for the AVX2 table (or the scalar one, where a CPU has
 * no AVX2) gives the same bits under the best table as a model whose LM
 * head that table repacked or reads from the buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "forward.h"
#include "gguf.h"
#include "mem.h"
#include "model.h"
#include "pool.h"
#include "quant.h"
#include "runner.h"

#define COPY_ALIGN 64 /* model_rows: a copy starts on a 64-byte line */

/* The matrices the build visits: the LM head, then each layer's. */
static int matrices_of(const struct model *m, const struct gguf_tensor **w, int max)
{
	int n = 0;
	w[n++] = m->output;
	for (int64_t il = 0; il < m->hp.n_layer && n + MODEL_LAYER_MATRICES <= max; il++) {
		model_layer_matrices(&m->layers[il], w + n);
		n += MODEL_LAYER_MATRICES;
	}
	return n;
}

/* After model_r16 for table k, each matrix has one copy at most:
 * repacked (for a type the first build's table repacks), plain (the rest,
 * from a mapped file only) or none. Returns the plain ones. */
static int check_copies(struct model *m, const struct quant_kernels *k, bool mapped)
{
	(void)model_r16(m, k);
	const struct gguf_tensor *w[1024];
	const int n = matrices_of(m, w, 1024);
	int plain = 0;
	for (int i = 0; i < n; i++) {
		const struct gguf_tensor *W = w[i];
		const void *rows = model_rows(m, W);
		const bool repacked = m->r16[model_tensor_index(m, W)] != NULL;
		if (repacked || !mapped) {
			CHECK(rows == W->data, "%.*s: a plain copy beside %s", (int)W->name.len,
			      W->name.ptr, repacked ? "the repacked one" : "the caller's buffer");
			continue;
		}
		plain++;
		CHECK(rows != W->data, "%.*s: not copied", (int)W->name.len, W->name.ptr);
		CHECK((uintptr_t)rows % COPY_ALIGN == 0, "%.*s: copy at %p", (int)W->name.len,
		      W->name.ptr, rows);
		CHECK(memcmp(rows, W->data, W->nbytes) == 0, "%.*s: the copy differs from the file",
		      (int)W->name.len, W->name.ptr);
	}
	return plain;
}

/* The logits of a 9-token prompt, one step of the graph runner, into out[V]. */
static int prompt_logits(struct model *m, float *out)
{
	static const int32_t tok[9] = { 2, 818, 5279, 529, 7001, 563, 506, 14946, 3324 };
	int32_t pos[9], seq[9] = { 0 };
	for (int i = 0; i < 9; i++)
		pos[i] = i;
	struct fwd_config cfg = { .max_batch = 16, .max_logits = 1, .n_ctx = 32, .n_seq = 1,
				  .n_threads = 2, .kv_type = QTYPE_F32 };
	ing_err err = { 0 };
	struct fwd *f = NULL;
	struct pool *pool = NULL;
	struct runner *r = NULL;
	struct fwd_batch b = { .n = 9, .tokens = tok, .pos = pos, .seq = seq };
	int rc = fwd_create(m, &cfg, &f, &err);
	if (!rc)
		rc = pool_create(2, 0, &pool, &err);
	if (!rc)
		rc = runner_create(RUNNER_GRAPH, f, pool, &r, &err);
	if (!rc)
		rc = runner_step(r, &b, &err);
	CHECK(rc == ING_OK, "prompt: %s", err.msg);
	int64_t n_out;
	if (!rc)
		memcpy(out, fwd_logits(f, &n_out), (size_t)m->hp.n_vocab * sizeof(float));
	runner_destroy(r);
	pool_destroy(pool);
	fwd_destroy(f);
	return rc;
}

int main(void)
{
	const char *path = check_default_model();
	if (!path) {
		CHECK(0, "default model missing: run ./ingot pull");
		return check_summary("test_model_copies");
	}
	const size_t live = ing_mem_live();
	const struct quant_kernels *plain_k = quant_kernels_get(QUANT_ISA_AVX2);
	if (!plain_k)
		plain_k = quant_kernels_get(QUANT_ISA_SCALAR);
	ing_err err = { 0 };
	struct model *mapped = NULL, *from_buf = NULL;
	struct gguf *g = NULL;
	size_t size = 0;
	char *buf = check_read_file(path, &size);
	float *a = NULL, *b = NULL;
	CHECK(buf != NULL, "cannot read %s", path);
	if (!buf || model_open(path, &mapped, &err) ||
	    gguf_open_memory(buf, size, &g, &err) || model_open_gguf(g, &from_buf, &err)) {
		CHECK(0, "setup: %s", err.msg);
		goto out;
	}
	/* the AVX2 table does not repack Q8_0: the LM head is copied plain */
	int plain = check_copies(mapped, plain_k, true);
	CHECK(plain > 0, "%s table: no plain copies", quant_isa_name(plain_k->isa));
	CHECK(model_rows(mapped, mapped->output) != mapped->output->data, "LM head not copied");
	/* a later table finds the first build's copies, and makes none */
	CHECK(check_copies(mapped, quant_kernels_best(), true) == plain, "a second build");
	CHECK(check_copies(from_buf, quant_kernels_best(), false) == 0, "plain copies of a buffer");
	const size_t V = (size_t)mapped->hp.n_vocab;
	a = malloc(V * sizeof *a);
	b = malloc(V * sizeof *b);
	if (a && b && !prompt_logits(mapped, a) && !prompt_logits(from_buf, b))
		CHECK(memcmp(a, b, V * sizeof *a) == 0,
		      "logits from the plain copies differ from the buffer's (%s table)",
		      quant_isa_name(quant_kernels_best()->isa));
out:
	free(a);
	free(b);
	model_close(mapped);
	model_close(from_buf);
	free(buf);
	CHECK(ing_mem_live() == live, "leak: %zu bytes", ing_mem_live() - live);
	return check_summary("test_model_copies");
}
