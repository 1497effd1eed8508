/* forward.h — one forward pass, described as a plan of splittable ops.
 *
 * fwd_plan() turns a batch into a list of ops (embed, norm+quantize,
 * QKV matmul, rope+KV append, attention, output projection, FFN, LM head),
 * each with a number of independent work units (rows, heads, tokens).
 * fwd_op_exec() runs units [u0, u1) of one op. A runner decides who runs
 * which units and how ops are ordered against each other: runner_graph puts
 * a barrier after every op; the megakernel waits only on true dependencies.
 * Either way every value is computed by the same code in the same order of
 * reduction, so logits are bit-identical across runners and thread counts.
 *
 * Memory: fwd_create() allocates every activation buffer and the KV cache
 * for at most cfg.max_batch rows and cfg.n_ctx positions per sequence;
 * nothing is allocated per step.
 *
 * Shapes: T rows in the batch (each row is one token of some sequence),
 * D d_model, F ffn width, H/HKV heads, Dh/Dv head dims, V vocabulary. */
#ifndef INGOT_FORWARD_H
#define INGOT_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "kv.h"
#include "model.h"
#include "quant.h"

struct fwd_config {
	int64_t max_batch;  /* rows per step (prefill chunk size) */
	int64_t max_logits; /* rows per step that may want logits (V floats each) */
	int64_t n_ctx;      /* positions per sequence */
	int64_t n_seq;      /* sequences sharing the cache */
	int n_threads;      /* sizes per-thread scratch */
	enum qtype kv_type; /* KV cache rows: QTYPE_F32, QTYPE_F16 (FWD_KV_DEFAULT) or
			     * QTYPE_Q8_0 (head dims multiples of 32) */
	int64_t kv_blocks;  /* KV pool size in blocks; 0: n_seq * n_ctx worth */
};

/* One step's input. Rows of the same sequence must have increasing
 * positions; a row attends to every position <= its own in its sequence,
 * including rows earlier in the same batch. */
struct fwd_batch {
	int64_t n;
	const int32_t *tokens;      /* [n] */
	const int32_t *pos;         /* [n] */
	const int32_t *seq;         /* [n] kv sequence slot */
	const bool *want_logits;    /* [n]; NULL: only the last row */
	bool argmax;                /* the LM head also finds each logits row's
				     * argmax as it computes it (fwd_argmax) */
	bool argmax_only;           /* with argmax: the caller reads no logits row,
				     * only fwd_argmax, so the LM head need not
				     * store them (fwd_logits' rows are then
				     * stale, but for their first logit) */
};

enum op_kind {
	OP_EMBED,       /* units T: x = embedding (scaled) */
	OP_ATTN_IN,     /* units T: finish previous layer's FFN, norm, quantize */
	OP_QKV,         /* units Dq+Dk+Dv: q, k, v projections */
	OP_ROPE_STORE,  /* units T: biases, QK-norm, rope, append K/V */
	OP_ATTN,        /* units: row tiles x head groups (plan_attn in forward.c) */
	OP_ATTN_QUANT,  /* units T: quantize attention output */
	OP_WO,          /* units D: output projection */
	OP_FFN_IN,      /* units T: post-attn norm, residual, FFN norm, quantize */
	OP_GATE_UP,     /* units F: gate & up projections + activation (a
			 * step of <= 4 tokens: 2F, gate's rows then up's) */
	OP_FFN_QUANT,   /* units T: (<= 4 tokens: the activation,) quantize */
	OP_DOWN,        /* units D: down projection */
	OP_OUT_IN,      /* units T_out: finish last layer, final norm, quantize */
	OP_LM_HEAD,     /* units V: logits */
	OP_KIND_COUNT,
};

struct fwd_op {
	enum op_kind kind;
	int32_t layer;
	int64_t n_units;
};

#define FWD_MAX_OPS(n_layer) (3 + 10 * (n_layer))

struct fwd;

/* The KV cache's element type when the user names none. */
#define FWD_KV_DEFAULT QTYPE_F16

/* A KV cache type's name ("f32", "f16", "q8_0"), or NULL for another
 * type; and back, "auto" being FWD_KV_DEFAULT (-1: no such name). */
const char *fwd_kv_type_name(enum qtype t);
int fwd_kv_type_parse(const char *name, enum qtype *out);

/* Bytes of KV cache one position takes in every layer, with rows of
 * kv_type (QTYPE_F32, QTYPE_F16 or QTYPE_Q8_0; 0 for another type): what
 * --kv-cache-mb and default contexts are sized by. */
double fwd_kv_bytes_per_pos(const struct model_hparams *hp, enum qtype kv_type);

int fwd_create(struct model *m, const struct fwd_config *cfg, struct fwd **out, ing_err *err);
void fwd_destroy(struct fwd *f);

/* Validates the batch (token ids, positions inside n_ctx, sequence slots)
 * and builds the op list into f. ING_ERR_INVALID/RANGE with a message when
 * the batch is bad. */
int fwd_plan(struct fwd *f, const struct fwd_batch *b, ing_err *err);

/* "qkv", "attn", ... for op kind k (profiles). */
const char *fwd_op_kind_name(enum op_kind k);

/* The current plan: *n ops. */
const struct fwd_op *fwd_ops(const struct fwd *f, int *n);

/* Runs units [u0, u1) of op on thread ith (ith selects scratch memory).
 * u_pf: units [u1, u_pf) of op are what the thread runs next, and the
 * matrix kernels may prefetch their weight rows on from u1 (quant.h's
 * r_pf); u1 (or less) where nothing of op follows. */
void fwd_op_exec(struct fwd *f, const struct fwd_op *op, int64_t u0, int64_t u1, int64_t u_pf,
		 int ith);

/* The weight bytes that units [u0, u1) of op read first (of a QKV range,
 * its first matrix's rows): *base and *bytes. False for ops without
 * weights or an empty range. */
bool fwd_op_weight_span(const struct fwd *f, const struct fwd_op *op, int64_t u0, int64_t u1,
			const void **base, size_t *bytes);

/* Logits of the planned batch: n_out rows of V floats, in batch order of
 * the rows that wanted logits. Valid until the next fwd_plan; not written
 * by a batch with argmax_only. */
float *fwd_logits(struct fwd *f, int64_t *n_out);

/* ops_argmax of logits row o (o < n_out) as the LM head left it. When the
 * batch asked for it (fwd_batch.argmax) each thread found the argmax of
 * its share of the vocabulary while those logits were in cache, and this
 * only merges the shares; otherwise it scans the row. Same answer either
 * way, for any runner and thread count. */
int64_t fwd_argmax(const struct fwd *f, int64_t o);

/* The activation rows matrix op multiplies: the LM head's n_out, every
 * other op's batch rows. */
int64_t fwd_op_tokens(const struct fwd *f, const struct fwd_op *op);

const struct model *fwd_model(const struct fwd *f);
struct kv_cache *fwd_kv(struct fwd *f);

#endif
