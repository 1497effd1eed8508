/* model.c — architecture registry, hyperparameters, tensor binding, and
 * the matrices' copies the kernels read.
 *
 * Adding an architecture: add a row to `arches` and, only if it needs a new
 * kind of operation, a flag the forward pass understands. Hyperparameters
 * come from `{arch}.{key}`; defaults follow llama.cpp's loader.
 *
 * The copies (model_r16, model_rows): once per model, every matrix is
 * copied onto huge pages, repacked into 16-row tiles where the first
 * table's kernels take them, as it is otherwise (from a mapped file), and
 * the mapping's pages are given back, so the weights stay in memory once
 * and the streams run without 4 KB pages' TLB misses. */
#include "model.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mem.h"
#include "quant.h"
#include "sanitize.h"

static const struct arch_desc arches[] = {
	{ .name = "llama", .rope = ROPE_NORM, .act = ACT_SILU },
	{ .name = "qwen2", .rope = ROPE_NEOX, .act = ACT_SILU, .flags = ARCH_QKV_BIAS },
	{ .name = "qwen3", .rope = ROPE_NEOX, .act = ACT_SILU, .flags = ARCH_QK_NORM },
	{ .name = "gemma3", .rope = ROPE_NEOX, .act = ACT_GELU_TANH,
	  .flags = ARCH_EMBD_SCALE | ARCH_POST_NORMS | ARCH_QK_NORM,
	  .swa_pattern = 6, .rope_base_swa = 10000.0 },
};

const struct arch_desc *arch_find(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++)
		if (strlen(arches[i].name) == len && memcmp(arches[i].name, name, len) == 0)
			return &arches[i];
	return NULL;
}

/* ---- hyperparameters ---- */

struct hp_reader {
	const struct gguf *g;
	const char *arch;
	ing_err *err;
};

static void hp_key(const struct hp_reader *r, const char *suffix, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s.%s", r->arch, suffix);
}

/* Integer hyperparameter; def < 0 means required. Arrays (per-layer values)
 * must be uniform: per-layer widths are not supported yet. */
static int hp_int(const struct hp_reader *r, const char *suffix, int64_t def, int64_t *out)
{
	char key[128];
	hp_key(r, suffix, key, sizeof key);
	const struct gguf_kv *kv = gguf_kv_find(r->g, key);
	if (!kv) {
		if (def < 0)
			return ing_err_set(r->err, ING_ERR_FORMAT, "missing metadata %s", key);
		*out = def;
		return ING_OK;
	}
	if (kv->val.type == GGUF_VT_ARRAY) {
		const struct gguf_arr *a = &kv->val.arr;
		if (a->n == 0 || a->elem_type == GGUF_VT_STRING || a->elem_type == GGUF_VT_ARRAY)
			return ing_err_set(r->err, ING_ERR_FORMAT, "%s: bad array", key);
		for (uint64_t i = 1; i < a->n; i++)
			if (gguf_arr_i64(a, i) != gguf_arr_i64(a, 0))
				return ing_err_set(r->err, ING_ERR_UNSUPPORTED,
						   "%s: per-layer values are not supported", key);
		*out = gguf_arr_i64(a, 0);
	} else if (gguf_get_i64(r->g, key, out) != ING_OK) {
		return ing_err_set(r->err, ING_ERR_FORMAT, "%s: not an integer", key);
	}
	if (*out < 0 || *out > (int64_t)1 << 40)
		return ing_err_set(r->err, ING_ERR_FORMAT, "%s = %lld is out of range", key,
				   (long long)*out);
	return ING_OK;
}

static int hp_float(const struct hp_reader *r, const char *suffix, double def, double *out)
{
	char key[128];
	hp_key(r, suffix, key, sizeof key);
	int rc = gguf_get_f64(r->g, key, out);
	if (rc == ING_ERR_NOTFOUND) {
		*out = def;
		return ING_OK;
	}
	if (rc || !isfinite(*out))
		return ing_err_set(r->err, ING_ERR_FORMAT, "%s: not a finite float", key);
	return ING_OK;
}

static int read_hparams(struct model *m, const char *arch, ing_err *err)
{
	struct hp_reader r = { m->gguf, arch, err };
	struct model_hparams *hp = &m->hp;
	int rc;
	if ((rc = hp_int(&r, "embedding_length", -1, &hp->d_model)) ||
	    (rc = hp_int(&r, "block_count", -1, &hp->n_layer)) ||
	    (rc = hp_int(&r, "feed_forward_length", -1, &hp->n_ff)) ||
	    (rc = hp_int(&r, "attention.head_count", -1, &hp->n_head)) ||
	    (rc = hp_int(&r, "context_length", 2048, &hp->ctx_train)))
		return rc;
	if (hp->n_head == 0 || hp->d_model == 0 || hp->n_layer == 0)
		return ing_err_set(err, ING_ERR_FORMAT, "zero d_model, layers or heads");
	if ((rc = hp_int(&r, "attention.head_count_kv", hp->n_head, &hp->n_head_kv)) ||
	    (rc = hp_int(&r, "attention.key_length", hp->d_model / hp->n_head, &hp->head_dim)) ||
	    (rc = hp_int(&r, "attention.value_length", hp->head_dim, &hp->head_dim_v)) ||
	    (rc = hp_int(&r, "rope.dimension_count", hp->head_dim, &hp->n_rot)) ||
	    (rc = hp_int(&r, "attention.sliding_window", 0, &hp->sliding_window)))
		return rc;
	if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0)
		return ing_err_set(err, ING_ERR_FORMAT, "head_count %lld is not a multiple of "
				   "head_count_kv %lld", (long long)hp->n_head, (long long)hp->n_head_kv);
	if (hp->head_dim == 0 || hp->head_dim % 2 || hp->n_rot > hp->head_dim || hp->n_rot % 2 ||
	    hp->n_rot > 1024 || hp->head_dim_v == 0)
		return ing_err_set(err, ING_ERR_FORMAT, "bad head/rope dimensions");
	double scale_factor = 1.0;
	if ((rc = hp_float(&r, "attention.layer_norm_rms_epsilon", 1e-5, &hp->eps)) ||
	    (rc = hp_float(&r, "rope.freq_base", 10000.0, &hp->rope_base)) ||
	    (rc = hp_float(&r, "rope.freq_base_swa", m->arch->rope_base_swa ? m->arch->rope_base_swa : hp->rope_base, &hp->rope_base_swa)) ||
	    (rc = hp_float(&r, "rope.scaling.factor", 1.0, &scale_factor)) ||
	    (rc = hp_float(&r, "final_logit_softcapping", 0.0, &hp->final_softcap)) ||
	    (rc = hp_float(&r, "attn_logit_softcapping", 0.0, &hp->attn_softcap)))
		return rc;
	/* Only linear scaling changes positions; llama3-style scaling comes
	 * as the rope_freqs tensor instead. */
	struct gguf_str st;
	char key[128];
	hp_key(&r, "rope.scaling.type", key, sizeof key);
	hp->rope_scale = 1.0;
	if (gguf_get_str(m->gguf, key, &st) == ING_OK && gguf_str_eq(st, "linear") && scale_factor > 0)
		hp->rope_scale = 1.0 / scale_factor;
	hp->query_scale = 1.0 / sqrt((double)hp->head_dim);
	return ING_OK;
}

/* ---- tensor binding ---- */

static int bind(struct model *m, const char *name, int64_t ne0, int64_t ne1, bool required,
		const struct gguf_tensor **out, ing_err *err)
{
	const struct gguf_tensor *t = gguf_tensor_find(m->gguf, name);
	*out = t;
	if (!t)
		return required ? ing_err_set(err, ING_ERR_FORMAT, "missing tensor %s", name) : ING_OK;
	int64_t want_dims = ne1 ? 2 : 1;
	if ((int64_t)t->ne[0] != ne0 || (ne1 && (int64_t)t->ne[1] != ne1) ||
	    t->n_dims > want_dims || t->ne[2] != 1 || t->ne[3] != 1)
		return ing_err_set(err, ING_ERR_FORMAT,
				   "tensor %s has shape [%llu, %llu], expected [%lld, %lld]", name,
				   (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
				   (long long)ne0, (long long)(ne1 ? ne1 : 1));
	/* vectors (norms, biases) are read directly as floats */
	if (!ne1 && t->type != QTYPE_F32)
		return ing_err_set(err, ING_ERR_UNSUPPORTED, "tensor %s: vectors must be F32", name);
	return ING_OK;
}

/* Whether layer il uses the sliding window: `{arch}.attention.
 * sliding_window_pattern` as a per-layer bool array or as a period n (every
 * n-th layer global), else the architecture's default period. */
static bool layer_is_swa(const struct model *m, int64_t il)
{
	char key[128];
	snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", m->arch->name);
	const struct gguf_kv *kv = gguf_kv_find(m->gguf, key);
	int64_t pat = m->arch->swa_pattern;
	if (kv && kv->val.type == GGUF_VT_ARRAY && kv->val.arr.elem_type == GGUF_VT_BOOL)
		return (uint64_t)il < kv->val.arr.n && gguf_arr_u64(&kv->val.arr, (uint64_t)il);
	if (kv)
		gguf_get_i64(m->gguf, key, &pat);
	if (pat <= 0)
		return pat == 0 && kv; /* llama.cpp: period 0 means every layer local */
	return (il % pat) < pat - 1;
}

static int bind_layer(struct model *m, int64_t il, ing_err *err)
{
	const struct model_hparams *hp = &m->hp;
	struct model_layer *l = &m->layers[il];
	const unsigned f = m->arch->flags;
	int64_t D = hp->d_model, Dq = hp->n_head * hp->head_dim;
	int64_t Dk = hp->n_head_kv * hp->head_dim, Dv = hp->n_head_kv * hp->head_dim_v;
	char n[20][96];
	const char *names[] = { "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
				"attn_q_norm", "attn_k_norm", "post_attention_norm", "ffn_norm",
				"ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm" };
	for (int i = 0; i < 13; i++)
		snprintf(n[i], sizeof n[i], "blk.%lld.%s.weight", (long long)il, names[i]);
	for (int i = 0; i < 3; i++)
		snprintf(n[13 + i], sizeof n[13 + i], "blk.%lld.%s.bias", (long long)il, names[1 + i]);
	int rc;
	if ((rc = bind(m, n[0], D, 0, true, &l->attn_norm, err)) ||
	    (rc = bind(m, n[1], D, Dq, true, &l->wq, err)) ||
	    (rc = bind(m, n[2], D, Dk, true, &l->wk, err)) ||
	    (rc = bind(m, n[3], D, Dv, true, &l->wv, err)) ||
	    (rc = bind(m, n[4], hp->n_head * hp->head_dim_v, D, true, &l->wo, err)) ||
	    (rc = bind(m, n[5], hp->head_dim, 0, f & ARCH_QK_NORM, &l->q_norm, err)) ||
	    (rc = bind(m, n[6], hp->head_dim, 0, f & ARCH_QK_NORM, &l->k_norm, err)) ||
	    (rc = bind(m, n[7], D, 0, f & ARCH_POST_NORMS, &l->post_attn_norm, err)) ||
	    (rc = bind(m, n[8], D, 0, true, &l->ffn_norm, err)) ||
	    (rc = bind(m, n[9], D, hp->n_ff, true, &l->w_gate, err)) ||
	    (rc = bind(m, n[10], D, hp->n_ff, true, &l->w_up, err)) ||
	    (rc = bind(m, n[11], hp->n_ff, D, true, &l->w_down, err)) ||
	    (rc = bind(m, n[12], D, 0, f & ARCH_POST_NORMS, &l->post_ffn_norm, err)) ||
	    (rc = bind(m, n[13], Dq, 0, f & ARCH_QKV_BIAS, &l->bq, err)) ||
	    (rc = bind(m, n[14], Dk, 0, f & ARCH_QKV_BIAS, &l->bk, err)) ||
	    (rc = bind(m, n[15], Dv, 0, f & ARCH_QKV_BIAS, &l->bv, err)))
		return rc;
	l->is_swa = hp->sliding_window > 0 && layer_is_swa(m, il);
	l->rope_base = l->is_swa ? hp->rope_base_swa : hp->rope_base;
	return ING_OK;
}

static int bind_all(struct model *m, ing_err *err)
{
	const struct model_hparams *hp = &m->hp;
	int rc;
	const struct gguf_tensor *emb = gguf_tensor_find(m->gguf, "token_embd.weight");
	if (!emb)
		return ing_err_set(err, ING_ERR_FORMAT, "missing tensor token_embd.weight");
	m->hp.n_vocab = (int64_t)emb->ne[1];
	if ((rc = bind(m, "token_embd.weight", hp->d_model, hp->n_vocab, true, &m->tok_embd, err)) ||
	    (rc = bind(m, "output_norm.weight", hp->d_model, 0, true, &m->output_norm, err)) ||
	    (rc = bind(m, "output.weight", hp->d_model, hp->n_vocab, false, &m->output, err)) ||
	    (rc = bind(m, "rope_freqs.weight", hp->n_rot / 2, 0, false, &m->rope_freqs, err)))
		return rc;
	if (!m->output)
		m->output = m->tok_embd;
	/* every layer binds at least 9 tensors: a block_count the file cannot
	 * back is an error, not a huge allocation */
	if ((uint64_t)hp->n_layer > m->gguf->n_tensors / 9)
		return ing_err_set(err, ING_ERR_FORMAT, "block_count %lld exceeds what the %llu tensors "
				   "can hold", (long long)hp->n_layer,
				   (unsigned long long)m->gguf->n_tensors);
	m->layers = ing_calloc((size_t)hp->n_layer, sizeof *m->layers);
	if (!m->layers)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	for (int64_t il = 0; il < hp->n_layer; il++)
		if ((rc = bind_layer(m, il, err)))
			return rc;
	return ING_OK;
}

int model_open_gguf(struct gguf *g, struct model **out, ing_err *err)
{
	*out = NULL;
	struct model *m = ing_calloc(1, sizeof *m);
	if (!m) {
		gguf_close(g);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	m->gguf = g;
	atomic_init(&m->narrow, 0);
	pthread_mutex_init(&m->r16_lock, NULL);
	/* allocated now, filled by model_r16: what a model holds is
	 * allocated when it is opened */
	const size_t n_tensors = g->n_tensors ? (size_t)g->n_tensors : 1;
	m->r16 = ing_calloc(n_tensors, sizeof *m->r16);
	m->rows = ing_calloc(n_tensors, sizeof *m->rows);
	if (!m->r16 || !m->rows) {
		model_close(m);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	struct gguf_str arch;
	int rc;
	if (gguf_get_str(g, "general.architecture", &arch) != ING_OK) {
		rc = ing_err_set(err, ING_ERR_FORMAT, "no general.architecture in metadata");
		goto fail;
	}
	m->arch = arch_find(arch.ptr, arch.len);
	if (!m->arch) {
		rc = ing_err_set(err, ING_ERR_UNSUPPORTED,
				 "architecture '%.*s' is not supported (supported: llama, qwen2, "
				 "qwen3, gemma3)", (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
		goto fail;
	}
	char archz[64];
	snprintf(archz, sizeof archz, "%s", m->arch->name);
	if ((rc = read_hparams(m, archz, err)) || (rc = bind_all(m, err)))
		goto fail;
	*out = m;
	return ING_OK;
fail:
	model_close(m);
	return rc;
}

int model_open(const char *path, struct model **out, ing_err *err)
{
	*out = NULL;
	struct gguf *g;
	int rc = gguf_open(path, &g, err);
	if (rc)
		return rc;
	rc = model_open_gguf(g, out, err);
	if (rc == ING_OK)
		snprintf((*out)->path, sizeof (*out)->path, "%s", path);
	return rc;
}

void model_close(struct model *m)
{
	if (!m)
		return;
	ing_pages_free(m->r16_map, m->r16_bytes);
	ing_free(m->r16);
	ing_free(m->rows);
	pthread_mutex_destroy(&m->r16_lock);
	gguf_close(m->gguf);
	ing_free(m->layers);
	ing_free(m);
}

void model_layer_matrices(const struct model_layer *l,
			  const struct gguf_tensor *w[MODEL_LAYER_MATRICES])
{
	const struct gguf_tensor *all[MODEL_LAYER_MATRICES] = { l->wq,     l->wk,   l->wv,
								l->wo,     l->w_gate, l->w_up,
								l->w_down };
	memcpy(w, all, sizeof all);
}

uint64_t model_weight_bytes(const struct model *m)
{
	uint64_t b = m->output->nbytes + m->tok_embd->nbytes / (uint64_t)m->hp.n_vocab;
	for (int64_t il = 0; il < m->hp.n_layer; il++) {
		const struct gguf_tensor *w[MODEL_LAYER_MATRICES];
		model_layer_matrices(&m->layers[il], w);
		for (int i = 0; i < MODEL_LAYER_MATRICES; i++)
			b += w[i]->nbytes;
	}
	return b;
}

static bool weights_narrow_scan(const struct model *m)
{
	if (!quant_weights_narrow(m->output->type, m->output->data, m->output->nbytes))
		return false;
	for (int64_t il = 0; il < m->hp.n_layer; il++) {
		const struct gguf_tensor *w[MODEL_LAYER_MATRICES];
		model_layer_matrices(&m->layers[il], w);
		for (int i = 0; i < MODEL_LAYER_MATRICES; i++)
			if (!quant_weights_narrow(w[i]->type, w[i]->data, w[i]->nbytes))
				return false;
	}
	return true;
}

/* once per model: ingot bench, for one, creates a forward pass per runner
 * and batch size */
bool model_weights_narrow(struct model *m)
{
	int v = atomic_load_explicit(&m->narrow, memory_order_relaxed);
	if (v == 0) {
		v = weights_narrow_scan(m) ? 1 : 2;
		atomic_store_explicit(&m->narrow, v, memory_order_relaxed);
	}
	return v == 1;
}

uint64_t model_weight_macs(const struct model *m, bool lm_head)
{
	uint64_t n = lm_head ? m->output->nelems : 0;
	for (int64_t il = 0; il < m->hp.n_layer; il++) {
		const struct gguf_tensor *w[MODEL_LAYER_MATRICES];
		model_layer_matrices(&m->layers[il], w);
		for (int i = 0; i < MODEL_LAYER_MATRICES; i++)
			n += w[i]->nelems;
	}
	return n;
}

/* ---- the repacked matrices ---- */

/* Gives back the whole pages of [p, p + n) of the file mapping: they were
 * only read, so a later read faults them in again from the file. */
static void mapping_release(const void *p, size_t n)
{
	const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + n) / page * page;
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* The matrices the forward pass multiplies by: the LM head and each
 * layer's, fn(m, W, ctx) for each (no tensor is two of them). */
static void matrices_each(struct model *m, void (*fn)(struct model *, const struct gguf_tensor *, void *),
			  void *ctx)
{
	fn(m, m->output, ctx);
	for (int64_t il = 0; il < m->hp.n_layer; il++) {
		const struct gguf_tensor *w[MODEL_LAYER_MATRICES];
		model_layer_matrices(&m->layers[il], w);
		for (int i = 0; i < MODEL_LAYER_MATRICES; i++)
			fn(m, w[i], ctx);
	}
}

static int64_t rows_of(const struct gguf_tensor *W)
{
	return (int64_t)(W->nelems / W->ne[0]);
}

/* Bytes of W's repacked copy for table k (0: none). */
static size_t r16_bytes_of(const struct quant_kernels *k, const struct gguf_tensor *W)
{
	if (!k->gemm_r16[W->type])
		return 0;
	return quant_r16_bytes((enum qtype)W->type, (int64_t)W->ne[0], rows_of(W));
}

/* The packing pass runs as jobs, pieces of at most R16_JOB_ROWS rows
 * (whole tiles) of each matrix, taken in turn by up to R16_BUILD_THREADS
 * threads: one thread packed the default model's Q5_0 and Q4_K copies in
 * ~0.15 s on the Zen 3 host, the AVX-512 hosts' (the LM head too, 235 MB)
 * in 0.2-0.6 s. `ingot run -n 8 -p Hello` on the Zen 3 host, three
 * alternating runs: 0.29-0.48 s with one thread, 0.25-0.29 with two (0.23-
 * 0.37 before AVX2 hosts repacked anything). A matrix the table does not
 * repack is copied as it is, in the same jobs, where the file is mapped:
 * the mapping's 4 KB pages cost the AVX2 table's Q8_0 LM head a tenth of
 * its rate at batch 1, against the copy's huge pages. The originals go
 * back piece by piece: `ingot run -n 1 -p Hello` peaks at 296 MB
 * resident with the AVX2 and the AMX tables alike (Sapphire Rapids-class
 * host; giving back each matrix's pages when its last piece was done, 388
 * and 379 MB: the LM head's 178 MB original beside its copy until the end;
 * all of them at the end, 317 MB on Zen 3 before the AVX2 table copied
 * its LM head). */
#define R16_JOB_ROWS 4096
#define R16_BUILD_THREADS 8
#define R16_COPY_ALIGN 64 /* each copy starts on a cache line */

struct r16_job {
	const struct gguf_tensor *W;
	int64_t r0, r1;   /* its rows */
	uint8_t *dst;     /* the matrix's copy */
	bool plain;       /* copied as it is, not repacked */
	size_t first;     /* the matrix's first job, whose `left` counts */
	atomic_int left;  /* (in a matrix's first job) its jobs not yet done */
};

struct r16_build {
	const struct quant_kernels *k;
	size_t bytes;  /* sizing pass: the total; packing pass: the offset */
	size_t n_jobs; /* sizing pass: the count; packing pass: jobs made */
	struct r16_job *jobs; /* NULL in the sizing pass */
	atomic_size_t next;   /* the next job to take */
	bool mapped;          /* the file is mapped: copy the plain matrices,
			       * give the originals' pages back */
};

static void r16_visit(struct model *m, const struct gguf_tensor *W, void *ctx)
{
	struct r16_build *b = ctx;
	const size_t i = model_tensor_index(m, W);
	const size_t packed = r16_bytes_of(b->k, W);
	const bool plain = packed == 0;
	const size_t bytes = plain ? (b->mapped ? (size_t)W->nbytes : 0) : packed;
	if (bytes == 0 || m->r16[i] || m->rows[i])
		return; /* no copy, or one made already */
	const size_t first = b->n_jobs;
	for (int64_t r0 = 0; r0 < rows_of(W); r0 += R16_JOB_ROWS) {
		if (b->jobs) {
			struct r16_job *jb = &b->jobs[b->n_jobs];
			jb->W = W;
			jb->r0 = r0;
			jb->r1 = rows_of(W) - r0 < R16_JOB_ROWS ? rows_of(W) : r0 + R16_JOB_ROWS;
			jb->dst = (uint8_t *)m->r16_map + b->bytes;
			jb->plain = plain;
			jb->first = first;
			atomic_init(&jb->left, 0);
			atomic_fetch_add(&b->jobs[first].left, 1);
		}
		b->n_jobs++;
	}
	if (b->jobs)
		*(plain ? &m->rows[i] : &m->r16[i]) = (uint8_t *)m->r16_map + b->bytes;
	b->bytes += (bytes + R16_COPY_ALIGN - 1) / R16_COPY_ALIGN * R16_COPY_ALIGN;
}

/* The job's rows in the original: their first byte, and their bytes in *n. */
static const uint8_t *r16_job_src(const struct r16_job *jb, size_t *n)
{
	const size_t row_bytes = jb->W->nbytes / (size_t)rows_of(jb->W);
	*n = (size_t)(jb->r1 - jb->r0) * row_bytes;
	return (const uint8_t *)jb->W->data + (size_t)jb->r0 * row_bytes;
}

/* Rows [r0, r1) of the job's matrix into its copy: repacked, or as they
 * are (at the same offset as in the original). */
static void r16_job_run(const struct r16_job *jb)
{
	size_t n_src;
	const uint8_t *src = r16_job_src(jb, &n_src);
	if (jb->plain) {
		/* unchecked under TSan: the weights are read-only and written
		 * before any reader exists, and the memcpy interceptor's shadow
		 * writes over ~180 MB, on fresh pages for every model opened,
		 * took two fifths of test_engine's time there (page faults and
		 * TLB shootdowns: 280 -> 177 s) */
		SAN_IGNORE_BEGIN();
		memcpy(jb->dst + (src - (const uint8_t *)jb->W->data), src, n_src);
		SAN_IGNORE_END();
		return;
	}
	const enum qtype t = (enum qtype)jb->W->type;
	const int64_t n = (int64_t)jb->W->ne[0];
	const size_t tiles = (size_t)(jb->r0 / QUANT_R16_ROWS);
	quant_r16_pack(t, src, n, jb->r1 - jb->r0, jb->dst + tiles * quant_r16_tile_bytes(t, n));
}

/* Runs jobs until none is left (every building thread, the caller too).
 * From a mapped file, each job gives back the pages its rows fill alone,
 * and whoever finishes a matrix's last job the rest of its pages, so that
 * the originals are not resident beside the copies for long. */
static void *r16_jobs_run(void *arg)
{
	struct r16_build *b = arg;
	for (size_t j; (j = atomic_fetch_add(&b->next, 1)) < b->n_jobs;) {
		struct r16_job *jb = &b->jobs[j];
		r16_job_run(jb);
		if (!b->mapped)
			continue;
		size_t n_src;
		const uint8_t *src = r16_job_src(jb, &n_src);
		mapping_release(src, n_src);
		if (atomic_fetch_sub(&b->jobs[jb->first].left, 1) == 1)
			mapping_release(jb->W->data, jb->W->nbytes);
	}
	return NULL;
}

static void r16_build(struct model *m, const struct quant_kernels *k)
{
	const bool mapped = m->gguf->mapped;
	struct r16_build b = { .k = k, .mapped = mapped };
	matrices_each(m, r16_visit, &b);
	if (b.bytes == 0)
		return; /* nothing to copy */
	void *p = ing_pages_alloc(b.bytes); /* huge pages: fewer TLB misses on the streams */
	if (!p)
		return;
	struct r16_job *jobs = ing_malloc_array(b.n_jobs, sizeof *jobs);
	if (!jobs) { /* no copies: the kernels read the plain rows */
		ing_pages_free(p, b.bytes);
		return;
	}
	m->r16_map = p;
	m->r16_bytes = b.bytes;
	b = (struct r16_build){ .k = k, .jobs = jobs, .mapped = mapped };
	matrices_each(m, r16_visit, &b);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t helpers = cpus > 1 ? (size_t)cpus - 1 : 0;
	helpers = helpers < R16_BUILD_THREADS - 1 ? helpers : R16_BUILD_THREADS - 1;
	helpers = helpers < b.n_jobs ? helpers : b.n_jobs;
	pthread_t tid[R16_BUILD_THREADS - 1];
	size_t started = 0;
	while (started < helpers && pthread_create(&tid[started], NULL, r16_jobs_run, &b) == 0)
		started++; /* a thread that cannot start leaves its jobs to the others */
	r16_jobs_run(&b);
	for (size_t i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	ing_free(jobs);
	/* read-only from here on: a stray write faults instead of changing weights */
	mprotect(p, m->r16_bytes, PROT_READ);
}

const void *const *model_r16(struct model *m, const struct quant_kernels *k)
{
	bool any = false;
	for (int t = 0; t < QTYPE_COUNT; t++)
		any |= k->gemm_r16[t] != NULL;
	pthread_mutex_lock(&m->r16_lock);
	if (!m->r16_tried) {
		m->r16_tried = true;
		r16_build(m, k);
	}
	const void *const *r = any && m->r16_map ? m->r16 : NULL;
	pthread_mutex_unlock(&m->r16_lock);
	return r;
}

const void *model_rows(const struct model *m, const struct gguf_tensor *W)
{
	const void *rows = m->rows[model_tensor_index(m, W)];
	return rows ? rows : W->data;
}
