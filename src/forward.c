/* forward.c — the forward pass as a plan of splittable ops (see forward.h).
 *
 * Data flow of one layer (T rows; every arrow is one op):
 *   x --ATTN_IN--> xq_attn --QKV--> q,k,v --ROPE_STORE--> q', KV cache
 *     --ATTN--> att --ATTN_QUANT--> xq_att --WO--> tmp
 *     --FFN_IN (x += norm(tmp))--> xq_ffn --GATE_UP--> hb --FFN_QUANT--> xq_hid
 *     --DOWN--> tmp   (added into x by the next ATTN_IN or by OUT_IN)
 * Quantized activations are kept per *source* (attention input, attention
 * output, FFN input, FFN hidden, final) and per activation format, so a
 * source consumed by weights of different types is quantized once per
 * format, never per matrix.
 *
 * The LM head can also find the greedy token: with fwd_batch.argmax each
 * thread scans its share of the vocabulary tile by tile right after
 * computing it, so a greedy caller never reads the V logits again; with
 * argmax_only too, the tiles go to a buffer of the thread's that stays in
 * cache and the logits rows are not written at all. */
#include "forward.h"

#include <math.h>
#include <string.h>

#include "mem.h"
#include "ops.h"

enum act_src { SRC_ATTN_IN, SRC_ATTN_OUT, SRC_FFN_IN, SRC_FFN_HID, SRC_OUT, SRC_COUNT };

/* Logits per LM-head tile when the argmax is fused: a tile's logits
 * (rows * n_out floats, 256 KB) are scanned while still in L2. Tiles were
 * 512 rows; each tile's matmul call then ended its prefetch stream at the
 * tile's end (the kernels prefetch up to 128 rows ahead), a stall a tile.
 * (Each call now names the rows after it, r_pf, which the prefetches go
 * on into.) With argmax_only a tile goes to the thread's lm_tile, which
 * holds LM_HEAD_TILE_FLOATS and the up to 15 more rows of a tile that
 * starts inside one of the kernels' 16-row tiles (exec_lm_head_argmax);
 * from LM_TILE_ONLY_MAX logits rows on, the logits rows are written as
 * for argmax alone. */
#define LM_HEAD_TILE_FLOATS 65536
#define LM_HEAD_TILE_MIN 512
#define LM_TILE_ONLY_MAX 256
#define LM_TILE_BUF_FLOATS (LM_HEAD_TILE_FLOATS + QUANT_R16_ROWS * LM_TILE_ONLY_MAX)
/* Distinct rope bases whose angles a step makes once (Gemma 3: local and
 * global layers'): sincosf for every pair of every row in every layer was
 * two thirds of rope_store, about 3% of a 512-token prefill. */
#define FWD_ROPE_BASES 4

enum act_fmt { FMT_Q8_0, FMT_Q8_1, FMT_Q8_K, FMT_F32, FMT_COUNT };

static const enum qtype fmt_qtype[FMT_COUNT] = { QTYPE_Q8_0, QTYPE_Q8_1, QTYPE_Q8_K, QTYPE_F32 };

struct act_buf {
	int64_t n;                   /* elements per row */
	unsigned need;               /* bitmask of enum act_fmt */
	unsigned gemm;               /* formats a consumer with a gemm kernel reads: packed too */
	uint8_t *q[FMT_COUNT];       /* [max_rows][row_bytes[f]] */
	size_t row_bytes[FMT_COUNT];
	void *packed[FMT_COUNT];     /* rows of format f regrouped for gemm kernels, or NULL */
};

struct fwd {
	struct model *m;
	const struct model_hparams *hp;
	const struct quant_kernels *k;
	const void *const *r16;      /* the matrices repacked for k (model_r16), or NULL */
	struct fwd_config cfg;
	struct kv_cache *kv;
	int64_t Dq, Dk, Dv, Datt;    /* H*Dh, HKV*Dh, HKV*Dv, H*Dv */
	int64_t max_out;             /* rows of logits */
	float *x, *tmp, *xb;         /* [max_batch][D] */
	float *q, *kk, *vv;          /* [max_batch][Dq|Dk|Dv] */
	float *att;                  /* [max_batch][Datt] */
	float *hb, *hb2;             /* [max_batch][F] */
	float *logits;               /* [max_out][V] */
	float *scratch;              /* [n_threads][scratch_floats] */
	float *lm_tile;              /* [n_threads][LM_TILE_BUF_FLOATS] (exec_lm_head) */
	size_t scratch_floats;       /* ops_attend_group's scratch for a thread */
	const void **rowptr;         /* [n_threads][2][n_ctx] K/V row pointers */
	enum ops_kv_type kv_type;    /* how the KV cache stores rows */
	const float *rope_freqs;     /* [n_rot/2] or NULL */
	/* each row's rope angles, made once a step with its embedding for
	 * each distinct base the layers use (a layer's at layer_rope[il]);
	 * n_rope_bases 0: made per layer instead (no rope, or more bases) */
	float rope_bases[FWD_ROPE_BASES];
	int n_rope_bases;
	uint8_t *layer_rope;         /* [n_layer] */
	float *rope_cs, *rope_sn;    /* [n_rope_bases][max_batch][n_rot/2] */
	struct act_buf act[SRC_COUNT];
	/* the planned batch */
	int64_t n;
	int32_t *tokens, *pos, *seq; /* [max_batch] */
	int64_t *out_rows;           /* [max_out] batch row of each logits row */
	int32_t *tile_row, *tile_len; /* [max_batch] attention tiles: first row, rows */
	int64_t n_tiles;
	int64_t attn_hpu;            /* query heads per attention unit: a KV head's group, or 1 */
	int64_t *seq_next;           /* [n_seq] scratch for batch validation */
	int64_t n_out;
	bool argmax;                 /* fill best[] in the LM head */
	bool argmax_only;            /* ... and keep the logits in lm_tile only */
	struct ops_best *best;       /* [n_threads][max_out] argmax of each thread's share */
	struct fwd_op *ops;
	int n_ops;
};

static enum act_fmt fmt_of(enum qtype act)
{
	switch (act) {
	case QTYPE_Q8_0: return FMT_Q8_0;
	case QTYPE_Q8_1: return FMT_Q8_1;
	case QTYPE_Q8_K: return FMT_Q8_K;
	default: return FMT_F32;
	}
}

static void act_need(const struct fwd *f, struct act_buf *a, const struct gguf_tensor *W)
{
	unsigned fm = 1u << fmt_of(qtype_traits(W->type)->act_type);
	a->need |= fm;
	if (f->k->gemm[W->type])
		a->gemm |= fm;
}

static int act_alloc(struct act_buf *a, int64_t n, int64_t rows)
{
	a->n = n;
	for (int f = 0; f < FMT_COUNT; f++) {
		if (!(a->need & (1u << f)))
			continue;
		a->row_bytes[f] = ops_act_row_bytes(fmt_qtype[f], n);
		if (a->row_bytes[f] == 0)
			return ING_ERR_UNSUPPORTED;
		a->q[f] = ing_malloc_array((size_t)rows, a->row_bytes[f]);
		if (!a->q[f])
			return ING_ERR_NOMEM;
	}
	for (int f = 0; f < FMT_COUNT && rows >= QUANT_GEMM_PACK_MIN; f++) {
		if (!(a->gemm & (1u << f)))
			continue;
		size_t bytes = quant_gemm_pack_bytes(fmt_qtype[f], n, rows);
		if (bytes == 0)
			return ING_ERR_UNSUPPORTED;
		a->packed[f] = ing_malloc(bytes);
		if (!a->packed[f])
			return ING_ERR_NOMEM;
		memset(a->packed[f], 0, bytes); /* lanes past a partial group are read, never stale garbage */
	}
	return ING_OK;
}

/* Quantizes row x into every format source a needs, at slot `row` of a
 * batch of T rows, and packs it for the gemm kernels when they read packed
 * rows (T >= QUANT_GEMM_PACK_MIN). */
static void act_store(const struct fwd *f, struct act_buf *a, int64_t row, int64_t T,
		      const float *x)
{
	for (int fm = 0; fm < FMT_COUNT; fm++) {
		if (!(a->need & (1u << fm)))
			continue;
		uint8_t *q = a->q[fm] + (size_t)row * a->row_bytes[fm];
		ops_quantize_act(f->k, fmt_qtype[fm], x, q, a->n);
		if (a->packed[fm] && T >= QUANT_GEMM_PACK_MIN)
			quant_gemm_pack_row(fmt_qtype[fm], q, a->n, row, a->packed[fm]);
	}
}

/* W's copy repacked for f's kernels (model_r16), or NULL. */
static const void *r16_of(const struct fwd *f, const struct gguf_tensor *W)
{
	if (!f->r16 || !f->k->gemm_r16[W->type])
		return NULL;
	return f->r16[model_tensor_index(f->m, W)];
}

/* Rows [r0, r1) of W x the activations of src; rows [r1, r_pf) of W are
 * the thread's next (ops_matmul_rows). matmul_w16: with w16 as W's
 * repacked copy (NULL: none). */
static void matmul_w16(const struct fwd *f, const struct gguf_tensor *W, const void *w16,
		       enum act_src src, int64_t T, float *y, int64_t y_stride, int64_t r0, int64_t r1,
		       int64_t r_pf)
{
	const struct act_buf *a = &f->act[src];
	enum act_fmt fm = fmt_of(qtype_traits(W->type)->act_type);
	ops_matmul_rows(f->k, W, w16, a->q[fm], a->row_bytes[fm], a->packed[fm], T, y, y_stride, r0,
			r1, r_pf);
}

/* W as the kernels read its plain rows: where the model holds a copy of
 * them (model_rows), a view of W over the copy, made in *v. */
static const struct gguf_tensor *rows_view(const struct fwd *f, const struct gguf_tensor *W,
					   struct gguf_tensor *v)
{
	const void *rows = model_rows(f->m, W);
	if (rows == W->data)
		return W;
	*v = *W;
	v->data = rows;
	return v;
}

static void matmul(const struct fwd *f, const struct gguf_tensor *W, enum act_src src, int64_t T,
		   float *y, int64_t y_stride, int64_t r0, int64_t r1, int64_t r_pf)
{
	struct gguf_tensor v;
	matmul_w16(f, rows_view(f, W, &v), r16_of(f, W), src, T, y, y_stride, r0, r1, r_pf);
}

/* ---- create / destroy ---- */

static int alloc_buffers(struct fwd *f)
{
	const struct model_hparams *hp = f->hp;
	const size_t B = (size_t)f->cfg.max_batch;
	f->x = ing_malloc_array(B, (size_t)hp->d_model * sizeof(float));
	f->tmp = ing_malloc_array(B, (size_t)hp->d_model * sizeof(float));
	f->xb = ing_malloc_array(B, (size_t)hp->d_model * sizeof(float));
	f->q = ing_malloc_array(B, (size_t)f->Dq * sizeof(float));
	f->kk = ing_malloc_array(B, (size_t)f->Dk * sizeof(float));
	f->vv = ing_malloc_array(B, (size_t)f->Dv * sizeof(float));
	f->att = ing_malloc_array(B, (size_t)f->Datt * sizeof(float));
	f->hb = ing_malloc_array(B, (size_t)hp->n_ff * sizeof(float));
	f->hb2 = ing_malloc_array(B, (size_t)hp->n_ff * sizeof(float));
	f->logits = ing_malloc_array((size_t)f->max_out, (size_t)hp->n_vocab * sizeof(float));
	f->scratch_floats = ops_attend_group_scratch(OPS_ATTEND_GROUP_MAX, f->cfg.n_ctx,
						     f->hp->head_dim, f->hp->head_dim_v, f->kv_type);
	f->scratch = ing_malloc_array((size_t)f->cfg.n_threads, f->scratch_floats * sizeof(float));
	f->lm_tile = ing_malloc_array((size_t)f->cfg.n_threads, LM_TILE_BUF_FLOATS * sizeof(float));
	f->tile_row = ing_malloc_array(B, sizeof(int32_t));
	f->tile_len = ing_malloc_array(B, sizeof(int32_t));
	f->best = ing_malloc_array((size_t)f->cfg.n_threads, (size_t)f->max_out * sizeof *f->best);
	f->rowptr = ing_malloc_array((size_t)f->cfg.n_threads * 2, (size_t)f->cfg.n_ctx * sizeof(void *));
	f->tokens = ing_malloc_array(B, sizeof(int32_t));
	f->pos = ing_malloc_array(B, sizeof(int32_t));
	f->seq = ing_malloc_array(B, sizeof(int32_t));
	f->out_rows = ing_malloc_array((size_t)f->max_out, sizeof(int64_t));
	f->seq_next = ing_malloc_array((size_t)f->cfg.n_seq, sizeof(int64_t));
	f->ops = ing_malloc_array((size_t)FWD_MAX_OPS(hp->n_layer), sizeof(struct fwd_op));
	if (!f->x || !f->tmp || !f->xb || !f->q || !f->kk || !f->vv || !f->att || !f->hb ||
	    !f->hb2 || !f->logits || !f->best || !f->scratch || !f->lm_tile || !f->rowptr ||
	    !f->tokens || !f->pos || !f->seq || !f->out_rows || !f->tile_row || !f->tile_len ||
	    !f->seq_next || !f->ops)
		return ING_ERR_NOMEM;
	/* the logits rows (a MB each on a 262k vocabulary) are written now:
	 * otherwise their pages are first touched whenever a step first wants
	 * that many rows, and the resident size grows long after start,
	 * which reads as a leak */
	memset(f->logits, 0, (size_t)f->max_out * (size_t)hp->n_vocab * sizeof(float));
	return ING_OK;
}

/* The distinct bases of the layers' rope and their angle tables; none
 * (n_rope_bases 0) when the model has no rope or more than
 * FWD_ROPE_BASES bases. */
static int setup_rope(struct fwd *f)
{
	const struct model_hparams *hp = f->hp;
	f->layer_rope = ing_calloc((size_t)hp->n_layer, 1);
	if (!f->layer_rope)
		return ING_ERR_NOMEM;
	f->n_rope_bases = 0;
	if (hp->n_rot <= 0)
		return ING_OK;
	for (int64_t il = 0; il < hp->n_layer; il++) {
		const float base = (float)f->m->layers[il].rope_base;
		int b = 0;
		while (b < f->n_rope_bases && f->rope_bases[b] != base)
			b++;
		if (b == FWD_ROPE_BASES) {
			f->n_rope_bases = 0;
			return ING_OK;
		}
		if (b == f->n_rope_bases)
			f->rope_bases[f->n_rope_bases++] = base;
		f->layer_rope[il] = (uint8_t)b;
	}
	const size_t per_base = (size_t)f->cfg.max_batch * (size_t)(hp->n_rot / 2);
	f->rope_cs = ing_malloc_array((size_t)f->n_rope_bases * per_base, sizeof(float));
	f->rope_sn = ing_malloc_array((size_t)f->n_rope_bases * per_base, sizeof(float));
	return f->rope_cs && f->rope_sn ? ING_OK : ING_ERR_NOMEM;
}

/* Row t's angles for base index b (see struct fwd). */
static float *rope_row(const struct fwd *f, float *table, int b, int64_t t)
{
	const int64_t half = f->hp->n_rot / 2;
	return table + ((size_t)b * (size_t)f->cfg.max_batch + (size_t)t) * (size_t)half;
}

static int setup_acts(struct fwd *f)
{
	const struct model *m = f->m;
	for (int64_t il = 0; il < f->hp->n_layer; il++) {
		const struct model_layer *l = &m->layers[il];
		act_need(f, &f->act[SRC_ATTN_IN], l->wq);
		act_need(f, &f->act[SRC_ATTN_IN], l->wk);
		act_need(f, &f->act[SRC_ATTN_IN], l->wv);
		act_need(f, &f->act[SRC_ATTN_OUT], l->wo);
		act_need(f, &f->act[SRC_FFN_IN], l->w_gate);
		act_need(f, &f->act[SRC_FFN_IN], l->w_up);
		act_need(f, &f->act[SRC_FFN_HID], l->w_down);
	}
	act_need(f, &f->act[SRC_OUT], m->output);
	const int64_t B = f->cfg.max_batch, D = f->hp->d_model;
	int rc;
	if ((rc = act_alloc(&f->act[SRC_ATTN_IN], D, B)) ||
	    (rc = act_alloc(&f->act[SRC_ATTN_OUT], f->Datt, B)) ||
	    (rc = act_alloc(&f->act[SRC_FFN_IN], D, B)) ||
	    (rc = act_alloc(&f->act[SRC_FFN_HID], f->hp->n_ff, B)) ||
	    (rc = act_alloc(&f->act[SRC_OUT], D, f->max_out)))
		return rc;
	return ING_OK;
}

/* The KV cache types: fwd_config.kv_type, the row format it means, and
 * the name --kv-cache-dtype and vllm:cache_config_info use. */
static const struct {
	enum qtype type;
	enum ops_kv_type ops;
	const char *name;
} kv_types[] = {
	{ QTYPE_F32, OPS_KV_F32, "f32" },
	{ QTYPE_F16, OPS_KV_F16, "f16" },
	{ QTYPE_Q8_0, OPS_KV_Q8_0, "q8_0" },
};

/* The row format of a KV cache type, or -1. */
static int kv_ops_type(enum qtype t)
{
	for (size_t i = 0; i < sizeof kv_types / sizeof kv_types[0]; i++)
		if (kv_types[i].type == t)
			return (int)kv_types[i].ops;
	return -1;
}

const char *fwd_kv_type_name(enum qtype t)
{
	for (size_t i = 0; i < sizeof kv_types / sizeof kv_types[0]; i++)
		if (kv_types[i].type == t)
			return kv_types[i].name;
	return NULL;
}

int fwd_kv_type_parse(const char *name, enum qtype *out)
{
	if (!strcmp(name, "auto")) {
		*out = FWD_KV_DEFAULT;
		return 0;
	}
	for (size_t i = 0; i < sizeof kv_types / sizeof kv_types[0]; i++)
		if (!strcmp(kv_types[i].name, name)) {
			*out = kv_types[i].type;
			return 0;
		}
	return -1;
}

double fwd_kv_bytes_per_pos(const struct model_hparams *hp, enum qtype kv_type)
{
	const int kt = kv_ops_type(kv_type);
	if (kt < 0)
		return 0;
	return (double)hp->n_layer *
	       (double)(ops_kv_row_bytes(kt, hp->n_head_kv * hp->head_dim) +
			ops_kv_row_bytes(kt, hp->n_head_kv * hp->head_dim_v));
}

int fwd_create(struct model *m, const struct fwd_config *cfg, struct fwd **out, ing_err *err)
{
	*out = NULL;
	if (cfg->max_batch < 1 || cfg->n_ctx < 1 || cfg->n_seq < 1 || cfg->n_threads < 1)
		return ing_err_set(err, ING_ERR_INVALID, "bad forward configuration");
	const int kt = kv_ops_type(cfg->kv_type);
	if (kt < 0)
		return ing_err_set(err, ING_ERR_UNSUPPORTED, "the KV cache stores F32, F16 or Q8_0");
	if (kt == OPS_KV_Q8_0 && (m->hp.head_dim % QK || m->hp.head_dim_v % QK))
		return ing_err_set(err, ING_ERR_UNSUPPORTED,
				   "a Q8_0 KV cache needs head dims that are multiples of %d "
				   "(this model's: %lld, %lld)", QK, (long long)m->hp.head_dim,
				   (long long)m->hp.head_dim_v);
	struct fwd *f = ing_calloc(1, sizeof *f);
	if (!f)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	f->m = m;
	f->hp = &m->hp;
	/* the faster narrow kernels where the weights allow them (every
	 * quantizer's output does); the same results either way. Tables
	 * without a narrow twin skip the weights' scan. */
	f->k = quant_kernels_best();
	if (quant_kernels_narrow(f->k) != f->k && model_weights_narrow(m))
		f->k = quant_kernels_narrow(f->k);
	f->r16 = model_r16(m, f->k);
	f->cfg = *cfg;
	const struct model_hparams *hp = f->hp;
	f->Dq = hp->n_head * hp->head_dim;
	f->Dk = hp->n_head_kv * hp->head_dim;
	f->Dv = hp->n_head_kv * hp->head_dim_v;
	f->Datt = hp->n_head * hp->head_dim_v;
	f->max_out = cfg->max_logits > 0 ? cfg->max_logits : 1;
	f->rope_freqs = m->rope_freqs ? (const float *)m->rope_freqs->data : NULL;
	f->kv_type = (enum ops_kv_type)kt;
	int rc = kv_create(hp->n_layer, ops_kv_row_bytes(f->kv_type, f->Dk),
			   ops_kv_row_bytes(f->kv_type, f->Dv), cfg->n_seq, cfg->n_ctx,
			   cfg->kv_blocks, &f->kv, err);
	if (rc)
		goto fail;
	if ((rc = alloc_buffers(f)) || (rc = setup_acts(f)) || (rc = setup_rope(f))) {
		ing_err_set(err, rc, "cannot allocate activation buffers for batch %lld",
			    (long long)cfg->max_batch);
		goto fail;
	}
	*out = f;
	return ING_OK;
fail:
	fwd_destroy(f);
	return rc;
}

void fwd_destroy(struct fwd *f)
{
	if (!f)
		return;
	kv_destroy(f->kv);
	void *bufs[] = { f->x, f->tmp, f->xb, f->q, f->kk, f->vv, f->att, f->hb, f->hb2,
			 f->logits, f->best, f->scratch, f->lm_tile, (void *)f->rowptr, f->tokens,
			 f->pos, f->seq, f->out_rows, f->tile_row, f->tile_len,
			 f->seq_next, f->ops, f->layer_rope, f->rope_cs, f->rope_sn };
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		ing_free(bufs[i]);
	for (int s = 0; s < SRC_COUNT; s++) {
		for (int fm = 0; fm < FMT_COUNT; fm++) {
			ing_free(f->act[s].q[fm]);
			ing_free(f->act[s].packed[fm]);
		}
	}
	ing_free(f);
}

/* ---- planning ---- */

/* Reserves KV blocks for every sequence the batch extends (seq_next) and
 * commits the new lengths; on failure releases what it reserved and leaves
 * every length as it was. */
static int reserve_blocks(struct fwd *f, ing_err *err)
{
	struct kv_cache *kv = f->kv;
	int64_t s = 0;
	int rc = ING_OK;
	for (; s < f->cfg.n_seq && rc == ING_OK; s++)
		if (f->seq_next[s] > kv->seq_len[s])
			rc = kv_seq_reserve(kv, s, f->seq_next[s], err);
	if (rc) {
		for (int64_t u = 0; u < s; u++)
			kv_seq_truncate(kv, u, kv->seq_len[u]);
		return rc;
	}
	for (s = 0; s < f->cfg.n_seq; s++)
		if (f->seq_next[s] > kv->seq_len[s])
			kv_seq_set_len(kv, s, f->seq_next[s]);
	return ING_OK;
}

static int check_batch(struct fwd *f, const struct fwd_batch *b, ing_err *err)
{
	if (b->n < 1 || b->n > f->cfg.max_batch)
		return ing_err_set(err, ING_ERR_RANGE, "batch of %lld rows (max %lld)",
				   (long long)b->n, (long long)f->cfg.max_batch);
	/* expected next position per sequence, advanced as rows are checked;
	 * the cache's lengths change only when the whole batch is valid */
	int64_t n_out = 0;
	memcpy(f->seq_next, f->kv->seq_len, (size_t)f->cfg.n_seq * sizeof *f->seq_next);
	for (int64_t i = 0; i < b->n; i++) {
		int32_t s = b->seq[i], p = b->pos[i], t = b->tokens[i];
		if (t < 0 || t >= f->hp->n_vocab)
			return ing_err_set(err, ING_ERR_RANGE, "token id %d outside the vocabulary (0..%lld)",
					   t, (long long)f->hp->n_vocab - 1);
		if (s < 0 || s >= f->cfg.n_seq)
			return ing_err_set(err, ING_ERR_RANGE, "sequence slot %d out of range", s);
		if (p < 0 || p >= f->cfg.n_ctx)
			return ing_err_set(err, ING_ERR_RANGE,
					   "position %d is outside the context of %lld tokens", p,
					   (long long)f->cfg.n_ctx);
		if (p != f->seq_next[s])
			return ing_err_set(err, ING_ERR_INVALID,
					   "sequence %d: position %d does not follow its cached length %lld",
					   s, p, (long long)f->seq_next[s]);
		f->seq_next[s] = p + 1;
		n_out += b->want_logits ? b->want_logits[i] : i == b->n - 1;
	}
	if (n_out > f->max_out)
		return ing_err_set(err, ING_ERR_RANGE, "%lld rows want logits (max %lld)",
				   (long long)n_out, (long long)f->max_out);
	return reserve_blocks(f, err);
}

/* Attention units: tiles of up to R adjacent rows of one sequence, each
 * with all query heads of one KV head, so one pass over the K/V rows
 * serves R * group queries. When that leaves threads idle or unevenly
 * loaded (fewer than two units a thread, not a multiple of the threads:
 * decoding a few sequences), a unit takes fewer heads of a tile (the
 * largest divisor of the group that fixes it), so every thread gets work
 * and each still reads the rows once for as many heads as it can: one
 * sequence on two threads, two heads each. Returns the number of units. */
static int64_t plan_attn(struct fwd *f)
{
	const struct model_hparams *hp = f->hp;
	const int64_t group = hp->n_head / hp->n_head_kv;
	int64_t hpu = group <= OPS_ATTEND_GROUP_MAX ? group : 1;
	const int64_t R = OPS_ATTEND_GROUP_MAX / hpu;
	f->n_tiles = 0;
	for (int64_t t = 0; t < f->n; t++) {
		int64_t k = f->n_tiles - 1;
		if (k >= 0 && f->seq[f->tile_row[k]] == f->seq[t] && f->tile_len[k] < R) {
			f->tile_len[k]++;
			continue;
		}
		f->tile_row[f->n_tiles] = (int32_t)t;
		f->tile_len[f->n_tiles++] = 1;
	}
	const int64_t nth = f->cfg.n_threads;
	while (hpu > 1) {
		const int64_t units = f->n_tiles * (hp->n_head / hpu);
		if (units >= 2 * nth || units % nth == 0)
			break;
		do /* the next divisor of the group down (1 at the latest) */
			hpu--;
		while (group % hpu);
	}
	f->attn_hpu = hpu;
	return f->n_tiles * (hp->n_head / hpu);
}

static void plan_push(struct fwd *f, enum op_kind kind, int32_t layer, int64_t units)
{
	f->ops[f->n_ops++] = (struct fwd_op){ .kind = kind, .layer = layer, .n_units = units };
}

/* Units of the gate_up op (F = n_ff): F, each a row of both matrices,
 * the activation applied by the thread that computed it; or, for a step
 * of at most GATE_UP_SPLIT_MAX_TOKENS tokens, 2F, the gate's rows then
 * the up's (as QKV's units run through q, k, v), the activation left to
 * the ffn_quant op. A thread's share then reads one matrix, then maybe
 * the other, where F units made each of the megakernel's chunks (1/16 of
 * a share) read 128 rows of gate, then 128 of up, then gate again: two
 * streams taking turns, which read slower than each in one piece (the
 * graph runner with its shares cut so, batch 1, 0.985). Measured on the
 * Sapphire Rapids-class host, `ingot bench --batch B --runner mega
 * --runs 5 --gen 64 --prompt 16` (3 at B > 1), processes alternating A
 * B B A, tok/s ratio, 2F units against F (at every batch size): batch 1
 * 1.028 (three cycles, each above 1.01), batch 4 1.006, batch 8 0.990
 * (three cycles: there the activation of 8 rows runs on one thread,
 * ffn_quant being an epilogue), batch 32 1.005; the graph runner at batch
 * 1 0.998. As here (2F units up to 4 tokens): batch 1 1.015 (three more
 * cycles, each above 1.008), one thread 1.010; mega against graph in the
 * same `ingot bench` runs 1.026 and 1.031, where it had been 0.96-1.03. */
#define GATE_UP_SPLIT_MAX_TOKENS 4

/* Whether this step's gate_up units are 2F (f->n set by fwd_plan). */
static bool gate_up_split(const struct fwd *f) { return f->n <= GATE_UP_SPLIT_MAX_TOKENS; }

int fwd_plan(struct fwd *f, const struct fwd_batch *b, ing_err *err)
{
	int rc = check_batch(f, b, err);
	if (rc)
		return rc;
	const int64_t T = b->n;
	f->n = T;
	memcpy(f->tokens, b->tokens, (size_t)T * sizeof *f->tokens);
	memcpy(f->pos, b->pos, (size_t)T * sizeof *f->pos);
	memcpy(f->seq, b->seq, (size_t)T * sizeof *f->seq);
	f->n_out = 0;
	for (int64_t i = 0; i < T; i++)
		if (b->want_logits ? b->want_logits[i] : i == T - 1)
			f->out_rows[f->n_out++] = i;
	f->argmax = b->argmax;
	f->argmax_only = b->argmax && b->argmax_only;
	if (f->argmax) /* a thread with no share of the LM head leaves its slots empty */
		for (int th = 0; th < f->cfg.n_threads; th++)
			for (int64_t o = 0; o < f->n_out; o++)
				ops_best_init(&f->best[(size_t)th * (size_t)f->max_out + (size_t)o]);
	const struct model_hparams *hp = f->hp;
	const int64_t attn_units = plan_attn(f);
	const int64_t gate_up_units = gate_up_split(f) ? 2 * hp->n_ff : hp->n_ff;
	f->n_ops = 0;
	plan_push(f, OP_EMBED, 0, T);
	for (int32_t il = 0; il < hp->n_layer; il++) {
		plan_push(f, OP_ATTN_IN, il, T);
		plan_push(f, OP_QKV, il, f->Dq + f->Dk + f->Dv);
		plan_push(f, OP_ROPE_STORE, il, T);
		plan_push(f, OP_ATTN, il, attn_units);
		plan_push(f, OP_ATTN_QUANT, il, T);
		plan_push(f, OP_WO, il, hp->d_model);
		plan_push(f, OP_FFN_IN, il, T);
		plan_push(f, OP_GATE_UP, il, gate_up_units);
		plan_push(f, OP_FFN_QUANT, il, T);
		plan_push(f, OP_DOWN, il, hp->d_model);
	}
	if (f->n_out > 0) {
		plan_push(f, OP_OUT_IN, (int32_t)hp->n_layer, f->n_out);
		plan_push(f, OP_LM_HEAD, (int32_t)hp->n_layer, hp->n_vocab);
	}
	return ING_OK;
}

const char *fwd_op_kind_name(enum op_kind k)
{
	static const char *const names[OP_KIND_COUNT] = {
		[OP_EMBED] = "embed", [OP_ATTN_IN] = "attn_in", [OP_QKV] = "qkv",
		[OP_ROPE_STORE] = "rope_store", [OP_ATTN] = "attn", [OP_ATTN_QUANT] = "attn_quant",
		[OP_WO] = "wo", [OP_FFN_IN] = "ffn_in", [OP_GATE_UP] = "gate_up",
		[OP_FFN_QUANT] = "ffn_quant", [OP_DOWN] = "down", [OP_OUT_IN] = "out_in",
		[OP_LM_HEAD] = "lm_head",
	};
	return k >= 0 && k < OP_KIND_COUNT ? names[k] : "?";
}

const struct fwd_op *fwd_ops(const struct fwd *f, int *n)
{
	*n = f->n_ops;
	return f->ops;
}

/* ---- op bodies ---- */

static const float *vec(const struct gguf_tensor *t) { return t ? (const float *)t->data : NULL; }

static void exec_embed(struct fwd *f, int64_t u0, int64_t u1)
{
	const int64_t D = f->hp->d_model;
	const float scale = sqrtf((float)D);
	/* a tied embedding's rows from the LM head's copy, repacked or
	 * plain: the mapped original's pages were given back (model_r16) */
	const void *e16 = f->r16 ? f->r16[model_tensor_index(f->m, f->m->tok_embd)] : NULL;
	struct gguf_tensor v;
	const struct gguf_tensor *E = rows_view(f, f->m->tok_embd, &v);
	for (int64_t t = u0; t < u1; t++) {
		float *x = f->x + t * D;
		ops_embed_row(E, e16, f->tokens[t], x);
		if (f->m->arch->flags & ARCH_EMBD_SCALE)
			for (int64_t i = 0; i < D; i++)
				x[i] *= scale;
		for (int b = 0; b < f->n_rope_bases; b++)
			ops_rope_angles(rope_row(f, f->rope_cs, b, t), rope_row(f, f->rope_sn, b, t),
					f->hp->n_rot, f->pos[t], f->rope_bases[b],
					(float)f->hp->rope_scale, f->rope_freqs);
	}
}

/* x_t += post_norm(tmp_t) for rows t in [t0, t1): closes the FFN block of
 * layer il. */
static void finish_ffn(struct fwd *f, int32_t il, int64_t t0, int64_t t1)
{
	const int64_t D = f->hp->d_model;
	const struct gguf_tensor *pn = f->m->layers[il].post_ffn_norm;
	if (pn)
		ops_rmsnorm_rows(f->tmp + t0 * D, f->tmp + t0 * D, vec(pn), D, (float)f->hp->eps,
				 t1 - t0, D);
	for (int64_t t = t0; t < t1; t++)
		ops_add(f->x + t * D, f->tmp + t * D, D);
}

/* The rows' norms go through ops_rmsnorm_rows (several rows at once), so
 * each loop below does one step for all its rows before the next. */
static void exec_attn_in(struct fwd *f, int32_t il, int64_t u0, int64_t u1)
{
	const int64_t D = f->hp->d_model;
	const float eps = (float)f->hp->eps;
	if (il > 0)
		finish_ffn(f, il - 1, u0, u1);
	ops_rmsnorm_rows(f->xb + u0 * D, f->x + u0 * D, vec(f->m->layers[il].attn_norm), D, eps,
			 u1 - u0, D);
	for (int64_t t = u0; t < u1; t++)
		act_store(f, &f->act[SRC_ATTN_IN], t, f->n, f->xb + t * D);
}

/* Matrices an op's units run through one after another, each into its
 * own output rows of `rows` floats a token: QKV's q, k, v; gate_up's
 * gate, up (2F units: GATE_UP_SPLIT_MAX_TOKENS). Unit u is row u - base of
 * the matrix whose rows [base, base + rows) hold it. */
struct stacked {
	int n;
	const struct gguf_tensor *W[3];
	float *Y[3];
	int64_t rows[3];
};

static struct stacked stacked_qkv(const struct fwd *f, const struct model_layer *l)
{
	return (struct stacked){ 3, { l->wq, l->wk, l->wv }, { f->q, f->kk, f->vv },
				 { f->Dq, f->Dk, f->Dv } };
}

static struct stacked stacked_gate_up(const struct fwd *f, const struct model_layer *l)
{
	return (struct stacked){ 2, { l->w_gate, l->w_up }, { f->hb, f->hb2 },
				 { f->hp->n_ff, f->hp->n_ff } };
}

/* Units [u0, u1) of the stack against the activations of src; [u1, u_pf)
 * the thread's next (the kernels' prefetch runs on into them). */
static void stacked_matmul(const struct fwd *f, const struct stacked *st, enum act_src src,
			   int64_t u0, int64_t u1, int64_t u_pf)
{
	int64_t base = 0;
	for (int i = 0; i < st->n; i++) {
		const int64_t rows = st->rows[i];
		const int64_t r0 = u0 > base ? u0 - base : 0;
		const int64_t r1 = u1 - base < rows ? u1 - base : rows;
		const int64_t r_pf = u_pf - base < rows ? u_pf - base : rows;
		if (r0 < r1)
			matmul(f, st->W[i], src, f->n, st->Y[i], rows, r0, r1, r_pf);
		base += rows;
	}
}

static void exec_qkv(struct fwd *f, int32_t il, int64_t u0, int64_t u1, int64_t u_pf)
{
	const struct stacked st = stacked_qkv(f, &f->m->layers[il]);
	stacked_matmul(f, &st, SRC_ATTN_IN, u0, u1, u_pf);
}

static void add_bias(float *y, const struct gguf_tensor *b, int64_t n)
{
	if (b)
		ops_add(y, vec(b), n);
}

static void head_norm(float *x, const struct gguf_tensor *w, int64_t n_heads, int64_t Dh, float eps)
{
	if (!w)
		return;
	ops_rmsnorm_rows(x, x, vec(w), Dh, eps, n_heads, Dh);
}

static void exec_rope_store(struct fwd *f, int32_t il, int64_t u0, int64_t u1)
{
	const struct model_hparams *hp = f->hp;
	const struct model_layer *l = &f->m->layers[il];
	const float eps = (float)hp->eps;
	for (int64_t t = u0; t < u1; t++) {
		add_bias(f->q + t * f->Dq, l->bq, f->Dq);
		add_bias(f->kk + t * f->Dk, l->bk, f->Dk);
		add_bias(f->vv + t * f->Dv, l->bv, f->Dv);
	}
	/* the heads of all the rows at once (contiguous): the norm's sums run
	 * 16 heads side by side where one row's 4 q heads and lone k head ran
	 * as two chains; each head's arithmetic is its own either way */
	head_norm(f->q + u0 * f->Dq, l->q_norm, (u1 - u0) * hp->n_head, hp->head_dim, eps);
	head_norm(f->kk + u0 * f->Dk, l->k_norm, (u1 - u0) * hp->n_head_kv, hp->head_dim, eps);
	for (int64_t t = u0; t < u1; t++) {
		float *q = f->q + t * f->Dq, *k = f->kk + t * f->Dk, *v = f->vv + t * f->Dv;
		/* one set of angles for the token's q and k heads (computed for
		 * each, they cost a sixth more: 512-token prefill 25 -> 21 ms),
		 * made with the embedding where the step keeps them */
		float cs_own[OPS_ROPE_MAX_PAIRS], sn_own[OPS_ROPE_MAX_PAIRS];
		const float *cs = cs_own, *sn = sn_own;
		if (f->n_rope_bases) {
			cs = rope_row(f, f->rope_cs, f->layer_rope[il], t);
			sn = rope_row(f, f->rope_sn, f->layer_rope[il], t);
		} else {
			ops_rope_angles(cs_own, sn_own, hp->n_rot, f->pos[t], (float)l->rope_base,
					(float)hp->rope_scale, f->rope_freqs);
		}
		ops_rope_apply(q, hp->n_head, hp->head_dim, hp->n_rot, cs, sn, f->m->arch->rope);
		ops_rope_apply(k, hp->n_head_kv, hp->head_dim, hp->n_rot, cs, sn, f->m->arch->rope);
		ops_kv_store(kv_k_row(f->kv, il, f->seq[t], f->pos[t]), k, f->Dk, f->kv_type);
		ops_kv_store(kv_v_row(f->kv, il, f->seq[t], f->pos[t]), v, f->Dv, f->kv_type);
	}
}

/* The first position a row at position p attends to in layer l. */
static int64_t window_start(const struct fwd *f, const struct model_layer *l, int64_t p)
{
	const int64_t w = f->hp->sliding_window;
	return l->is_swa && p + 1 > w ? p + 1 - w : 0;
}

/* Units [u0, u1) of the attention: unit u is head slice u % per_tile of
 * tile u / per_tile (see plan_attn), tiles in zig-zag order (0, last, 1,
 * last-1, ...) so a contiguous range of units mixes short and long causal
 * rows and threads get similar work. */
static void exec_attn(struct fwd *f, int32_t il, int64_t u0, int64_t u1, int ith)
{
	const struct model_hparams *hp = f->hp;
	const struct model_layer *l = &f->m->layers[il];
	const int64_t group = hp->n_head / hp->n_head_kv, n_ctx = f->cfg.n_ctx;
	const int64_t hpu = f->attn_hpu, per_tile = hp->n_head / hpu;
	float *scratch = f->scratch + (size_t)ith * f->scratch_floats;
	const void **K = f->rowptr + (size_t)ith * 2 * (size_t)n_ctx, **V = K + n_ctx;
	/* bytes from a row's start to KV head kvh's slice */
	const size_t kb = ops_kv_row_bytes(f->kv_type, hp->head_dim);
	const size_t vb = ops_kv_row_bytes(f->kv_type, hp->head_dim_v);
	struct ops_attn_query qs[OPS_ATTEND_GROUP_MAX];
	for (int64_t u = u0; u < u1; u++) {
		const int64_t i = u / per_tile, h0 = (u % per_tile) * hpu, kvh = h0 / group;
		const int64_t k = i % 2 == 0 ? i / 2 : f->n_tiles - 1 - i / 2;
		const int64_t t0 = f->tile_row[k], t1 = t0 + f->tile_len[k];
		const int32_t s = f->seq[t0];
		/* the queries with their windows in positions, then the K/V row
		 * list over the union [lo, hi) of the windows */
		int64_t lo = n_ctx, hi = 0;
		int nq = 0;
		for (int64_t t = t0; t < t1; t++) {
			const int64_t p = f->pos[t], j0 = window_start(f, l, p);
			lo = j0 < lo ? j0 : lo;
			hi = p + 1 > hi ? p + 1 : hi;
			for (int64_t h = h0; h < h0 + hpu; h++)
				qs[nq++] = (struct ops_attn_query){
					.out = f->att + t * f->Datt + h * hp->head_dim_v,
					.q = f->q + t * f->Dq + h * hp->head_dim, .lo = j0, .hi = p + 1 };
		}
		for (int qi = 0; qi < nq; qi++) {
			qs[qi].lo -= lo;
			qs[qi].hi -= lo;
		}
		for (int64_t j = lo; j < hi; j++) {
			K[j - lo] = (const char *)kv_k_row(f->kv, il, s, j) + (size_t)kvh * kb;
			V[j - lo] = (const char *)kv_v_row(f->kv, il, s, j) + (size_t)kvh * vb;
		}
		ops_attend_group(qs, nq, K, V, f->kv_type, hp->head_dim, hp->head_dim_v,
				 (float)hp->query_scale, (float)hp->attn_softcap, scratch);
	}
}

static void exec_ffn_in(struct fwd *f, int32_t il, int64_t u0, int64_t u1)
{
	const int64_t D = f->hp->d_model;
	const struct model_layer *l = &f->m->layers[il];
	const float eps = (float)f->hp->eps;
	if (l->post_attn_norm)
		ops_rmsnorm_rows(f->tmp + u0 * D, f->tmp + u0 * D, vec(l->post_attn_norm), D, eps,
				 u1 - u0, D);
	for (int64_t t = u0; t < u1; t++)
		ops_add(f->x + t * D, f->tmp + t * D, D);
	ops_rmsnorm_rows(f->xb + u0 * D, f->x + u0 * D, vec(l->ffn_norm), D, eps, u1 - u0, D);
	for (int64_t t = u0; t < u1; t++)
		act_store(f, &f->act[SRC_FFN_IN], t, f->n, f->xb + t * D);
}

static void exec_gate_up(struct fwd *f, int32_t il, int64_t u0, int64_t u1, int64_t u_pf)
{
	const struct model_layer *l = &f->m->layers[il];
	const int64_t F = f->hp->n_ff;
	if (gate_up_split(f)) {
		const struct stacked st = stacked_gate_up(f, l);
		stacked_matmul(f, &st, SRC_FFN_IN, u0, u1, u_pf);
		return;
	}
	matmul(f, l->w_gate, SRC_FFN_IN, f->n, f->hb, F, u0, u1, u_pf);
	matmul(f, l->w_up, SRC_FFN_IN, f->n, f->hb2, F, u0, u1, u_pf);
	for (int64_t t = 0; t < f->n; t++)
		ops_glu(f->hb + t * F + u0, f->hb2 + t * F + u0, u1 - u0, f->m->arch->act);
}

/* Row t of the FFN's hidden activations quantized for down (after the
 * activation, where gate_up left it: gate_up_split). */
static void exec_ffn_quant(struct fwd *f, int64_t t)
{
	const int64_t F = f->hp->n_ff;
	float *h = f->hb + t * F;
	if (gate_up_split(f))
		ops_glu(h, f->hb2 + t * F, F, f->m->arch->act);
	act_store(f, &f->act[SRC_FFN_HID], t, f->n, h);
}

static void exec_out_in(struct fwd *f, int64_t u0, int64_t u1)
{
	const int64_t D = f->hp->d_model;
	for (int64_t o = u0; o < u1; o++) {
		const int64_t t = f->out_rows[o];
		finish_ffn(f, (int32_t)f->hp->n_layer - 1, t, t + 1);
		float *xb = f->xb + t * D;
		ops_rmsnorm(xb, f->x + t * D, vec(f->m->output_norm), D, (float)f->hp->eps);
		act_store(f, &f->act[SRC_OUT], o, f->n_out, xb);
	}
}

/* Rows [r0, r1) of the LM head into y[o * y_stride + (r - base)] for
 * each logits row o, base (<= r0) a multiple of QUANT_R16_ROWS: the
 * matrix is taken from row base on (its repacked tiles or its plain rows
 * from there; a view of W with the rows before base dropped), so the
 * kernels' row index is y's column. */
static void lm_head_rows_from(const struct fwd *f, int64_t base, int64_t r0, int64_t r1,
			      int64_t r_pf, float *y, int64_t y_stride)
{
	const struct gguf_tensor *W = f->m->output;
	const int64_t n = (int64_t)W->ne[0];
	const size_t row_bytes = W->nbytes / (W->nelems / W->ne[0]);
	struct gguf_tensor v = *W;
	v.data = (const uint8_t *)model_rows(f->m, W) + (size_t)base * row_bytes;
	v.ne[1] = W->ne[1] - (uint64_t)base;
	v.nelems = W->nelems - (uint64_t)base * W->ne[0];
	v.nbytes = W->nbytes - (uint64_t)base * row_bytes;
	const uint8_t *w16 = r16_of(f, W);
	if (w16)
		w16 += (size_t)(base / QUANT_R16_ROWS) * quant_r16_tile_bytes((enum qtype)W->type, n);
	matmul_w16(f, &v, w16, SRC_OUT, f->n_out, y, y_stride, r0 - base, r1 - base, r_pf - base);
}

/* The model's final logit softcap (hparams final_softcap > 0) on x[i0 .. i1). */
static void lm_head_cap(float *x, int64_t i0, int64_t i1, float cap)
{
	for (int64_t i = i0; i < i1; i++)
		x[i] = cap * tanhf(x[i] / cap);
}

/* exec_lm_head for an argmax_only batch: each tile of rows into the
 * thread's lm_tile, capped and scanned there, its best merged into the
 * thread's. The logits rows are never written (at 32 rows, 33.5 MB a
 * step, read for ownership and written back: as much memory traffic as a
 * fifth of the weights), but for each row's logit 0, which fwd_argmax
 * reads (ops_best_index). Measured on the Sapphire Rapids-class host,
 * `ingot bench --batch 1,8,32 --runner mega --runs 3 --gen 32 --prompt
 * 16`, A B B A, tok/s: batch 32 1164-1180 -> 1262-1271, batch 8 587-589
 * -> 602-614, batch 1 within noise. */
static void exec_lm_head_argmax(struct fwd *f, int64_t u0, int64_t u1, int64_t r_pf, int ith)
{
	const float cap = (float)f->hp->final_softcap;
	struct ops_best *best = f->best + (size_t)ith * (size_t)f->max_out;
	float *buf = f->lm_tile + (size_t)ith * LM_TILE_BUF_FLOATS;
	const int64_t tile = LM_HEAD_TILE_FLOATS / f->n_out / QUANT_R16_ROWS * QUANT_R16_ROWS;
	for (int64_t r0 = u0, r1; r0 < u1; r0 = r1) {
		r1 = u1 - r0 > tile ? r0 + tile : u1;
		const int64_t base = r0 / QUANT_R16_ROWS * QUANT_R16_ROWS, width = r1 - base; /* <= tile + 15 */
		lm_head_rows_from(f, base, r0, r1, r_pf, buf, width);
		for (int64_t o = 0; o < f->n_out; o++) {
			float *row = buf + o * width;
			if (cap > 0.0f)
				lm_head_cap(row, r0 - base, r1 - base, cap);
			/* the tiles come in order: as one scan of the thread's rows,
			 * each tile's scan knowing the best so far */
			ops_best_scan_at(&best[o], row, base, r0, r1);
			if (r0 == 0)
				f->logits[(size_t)o * (size_t)f->hp->n_vocab] = row[0];
		}
	}
}

static void exec_lm_head(struct fwd *f, int64_t u0, int64_t u1, int64_t u_pf, int ith)
{
	const int64_t V = f->hp->n_vocab;
	const float cap = (float)f->hp->final_softcap;
	struct ops_best *best = f->best + (size_t)ith * (size_t)f->max_out;
	const int64_t tile = LM_HEAD_TILE_FLOATS / f->n_out > LM_HEAD_TILE_MIN
				     ? LM_HEAD_TILE_FLOATS / f->n_out
				     : LM_HEAD_TILE_MIN;
	const int64_t r_pf = u_pf > u1 ? u_pf : u1; /* after every tile: the rest of [u0, u_pf) */
	if (f->argmax_only && f->n_out <= LM_TILE_ONLY_MAX) {
		exec_lm_head_argmax(f, u0, u1, r_pf, ith);
		return;
	}
	for (int64_t r0 = u0, r1; r0 < u1; r0 = r1) {
		r1 = f->argmax && u1 - r0 > tile ? r0 + tile : u1;
		matmul(f, f->m->output, SRC_OUT, f->n_out, f->logits, V, r0, r1, r_pf);
		for (int64_t o = 0; o < f->n_out; o++) {
			float *row = f->logits + o * V;
			if (cap > 0.0f)
				lm_head_cap(row, r0, r1, cap);
			if (f->argmax)
				ops_best_scan(&best[o], row, r0, r1);
		}
	}
}

void fwd_op_exec(struct fwd *f, const struct fwd_op *op, int64_t u0, int64_t u1, int64_t u_pf,
		 int ith)
{
	const int32_t il = op->layer;
	const struct model_layer *l = il < f->hp->n_layer ? &f->m->layers[il] : NULL;
	const int64_t D = f->hp->d_model;
	switch (op->kind) {
	case OP_EMBED: exec_embed(f, u0, u1); break;
	case OP_ATTN_IN: exec_attn_in(f, il, u0, u1); break;
	case OP_QKV: exec_qkv(f, il, u0, u1, u_pf); break;
	case OP_ROPE_STORE: exec_rope_store(f, il, u0, u1); break;
	case OP_ATTN: exec_attn(f, il, u0, u1, ith); break;
	case OP_ATTN_QUANT:
		for (int64_t t = u0; t < u1; t++)
			act_store(f, &f->act[SRC_ATTN_OUT], t, f->n, f->att + t * f->Datt);
		break;
	case OP_WO: matmul(f, l->wo, SRC_ATTN_OUT, f->n, f->tmp, D, u0, u1, u_pf); break;
	case OP_FFN_IN: exec_ffn_in(f, il, u0, u1); break;
	case OP_GATE_UP: exec_gate_up(f, il, u0, u1, u_pf); break;
	case OP_FFN_QUANT:
		for (int64_t t = u0; t < u1; t++)
			exec_ffn_quant(f, t);
		break;
	case OP_DOWN: matmul(f, l->w_down, SRC_FFN_HID, f->n, f->tmp, D, u0, u1, u_pf); break;
	case OP_OUT_IN: exec_out_in(f, u0, u1); break;
	case OP_LM_HEAD: exec_lm_head(f, u0, u1, u_pf, ith); break;
	case OP_KIND_COUNT: break;
	}
}

/* The bytes rows [r0, r1) of W take where the kernels read them: the
 * whole tiles of a repacked copy, or the plain rows. */
static bool weight_rows(const struct fwd *f, const struct gguf_tensor *W, int64_t r0, int64_t r1,
			const void **base, size_t *bytes)
{
	if (r1 <= r0)
		return false;
	const void *w16 = r16_of(f, W);
	if (w16) {
		const size_t tile = quant_r16_tile_bytes((enum qtype)W->type, (int64_t)W->ne[0]);
		*base = (const uint8_t *)w16 + (size_t)(r0 / QUANT_R16_ROWS) * tile;
		*bytes = (size_t)((r1 - 1) / QUANT_R16_ROWS - r0 / QUANT_R16_ROWS + 1) * tile;
		return true;
	}
	const size_t row_bytes = W->nbytes / (W->nelems / W->ne[0]);
	*base = (const uint8_t *)model_rows(f->m, W) + (size_t)r0 * row_bytes;
	*bytes = (size_t)(r1 - r0) * row_bytes;
	return true;
}

/* The bytes of the first matrix of the stack that units [u0, u1) touch,
 * its rows among them (weight_rows). */
static bool stacked_first_rows(const struct fwd *f, const struct stacked *st, int64_t u0,
			       int64_t u1, const void **base, size_t *bytes)
{
	int64_t b = 0;
	for (int i = 0; i < st->n; b += st->rows[i++])
		if (u0 < b + st->rows[i] || i == st->n - 1)
			return weight_rows(f, st->W[i], u0 - b,
					   u1 - b < st->rows[i] ? u1 - b : st->rows[i], base, bytes);
	return false;
}

bool fwd_op_weight_span(const struct fwd *f, const struct fwd_op *op, int64_t u0, int64_t u1,
			const void **base, size_t *bytes)
{
	const struct model_layer *l = op->layer < f->hp->n_layer ? &f->m->layers[op->layer] : NULL;
	switch (op->kind) {
	case OP_QKV: {
		const struct stacked st = stacked_qkv(f, l);
		return stacked_first_rows(f, &st, u0, u1, base, bytes);
	}
	case OP_WO: return weight_rows(f, l->wo, u0, u1, base, bytes);
	case OP_GATE_UP: { /* F units: gate's rows, inside the stack's first F */
		const struct stacked st = stacked_gate_up(f, l);
		return stacked_first_rows(f, &st, u0, u1, base, bytes);
	}
	case OP_DOWN: return weight_rows(f, l->w_down, u0, u1, base, bytes);
	case OP_LM_HEAD: return weight_rows(f, f->m->output, u0, u1, base, bytes);
	default: return false;
	}
}

float *fwd_logits(struct fwd *f, int64_t *n_out)
{
	*n_out = f->n_out;
	return f->logits;
}

int64_t fwd_argmax(const struct fwd *f, int64_t o)
{
	const float *row = f->logits + (size_t)o * (size_t)f->hp->n_vocab;
	if (!f->argmax)
		return ops_argmax(row, f->hp->n_vocab);
	struct ops_best all;
	ops_best_init(&all);
	for (int th = 0; th < f->cfg.n_threads; th++)
		ops_best_merge(&all, &f->best[(size_t)th * (size_t)f->max_out + (size_t)o]);
	return ops_best_index(&all, row);
}

int64_t fwd_op_tokens(const struct fwd *f, const struct fwd_op *op)
{
	return op->kind == OP_LM_HEAD ? f->n_out : f->n;
}

const struct model *fwd_model(const struct fwd *f) { return f->m; }
struct kv_cache *fwd_kv(struct fwd *f) { return f->kv; }
