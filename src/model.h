/* model.h — architectures as data: hyperparameters and tensor binding.
 *
 * One forward pass serves every supported family; what differs between them
 * is described by a static `struct arch_desc` (rope layout, activation,
 * which norms exist, embedding scale, sliding-window pattern) plus the
 * hyperparameters read from `{arch}.*` metadata and optional tensors whose
 * presence is checked at load (biases, QK-norms, rope frequency factors).
 *
 * model_open() opens the GGUF, reads hyperparameters, and binds every tensor
 * each layer needs, checking shapes; the forward pass never looks a tensor
 * up by name. Names: D = d_model, F = FFN width, H = query heads,
 * HKV = key/value heads, Dh = head dim (key), Dv = head dim (value),
 * V = vocabulary size, L = layers. */
#ifndef INGOT_MODEL_H
#define INGOT_MODEL_H

#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "gguf.h"

struct quant_kernels;

enum rope_kind { ROPE_NORM, ROPE_NEOX };  /* pairs (2i,2i+1) vs (i,i+Dh/2) */
enum act_kind { ACT_SILU, ACT_GELU_TANH };

enum {
	ARCH_EMBD_SCALE = 1 << 0, /* embeddings multiplied by sqrt(D) */
	ARCH_POST_NORMS = 1 << 1, /* RMSNorm after attention and after FFN */
	ARCH_QK_NORM = 1 << 2,    /* per-head RMSNorm of q and k (required) */
	ARCH_QKV_BIAS = 1 << 3,   /* q/k/v biases (required) */
};

struct arch_desc {
	const char *name;      /* general.architecture */
	enum rope_kind rope;
	enum act_kind act;
	unsigned flags;
	int swa_pattern;       /* every swa_pattern-th layer is global; 0: none */
	double rope_base_swa;  /* rope base of sliding-window layers (default) */
};

struct model_hparams {
	int64_t n_vocab, d_model, n_layer, n_ff, n_head, n_head_kv;
	int64_t head_dim, head_dim_v, n_rot, ctx_train;
	double eps;
	double rope_base, rope_base_swa;
	double rope_scale;        /* linear position scale (1 = none) */
	int64_t sliding_window;   /* 0: no sliding-window layers */
	double query_scale;       /* multiplies q·k */
	double final_softcap;     /* 0: none */
	double attn_softcap;      /* 0: none */
};

struct model_tensor {
	const struct gguf_tensor *t; /* NULL when absent */
};

struct model_layer {
	const struct gguf_tensor *attn_norm, *wq, *wk, *wv, *wo;
	const struct gguf_tensor *bq, *bk, *bv;          /* optional */
	const struct gguf_tensor *q_norm, *k_norm;       /* optional */
	const struct gguf_tensor *post_attn_norm;        /* ARCH_POST_NORMS */
	const struct gguf_tensor *ffn_norm, *w_gate, *w_up, *w_down;
	const struct gguf_tensor *post_ffn_norm;         /* ARCH_POST_NORMS */
	bool is_swa;   /* sliding-window (local) layer */
	double rope_base;
};

struct model {
	struct gguf *gguf;
	const struct arch_desc *arch;
	struct model_hparams hp;
	const struct gguf_tensor *tok_embd;    /* [V, D] */
	const struct gguf_tensor *output_norm; /* [D] */
	const struct gguf_tensor *output;      /* [V, D]; == tok_embd when tied */
	const struct gguf_tensor *rope_freqs;  /* [n_rot/2] optional (llama3) */
	struct model_layer *layers;            /* [L] */
	char path[1024];
	atomic_int narrow;                     /* model_weights_narrow: 0 not yet known, 1 yes, 2 no */
	/* model_r16: the matrices' copies, one anonymous mapping of
	 * r16_bytes (r16_map); r16[i] tensor i's repacked copy or NULL,
	 * rows[i] its plain rows' copy or NULL (model_rows); built once
	 * under r16_lock; r16_tried says a build was attempted */
	pthread_mutex_t r16_lock;
	void *r16_map;
	size_t r16_bytes;
	const void **r16;
	const void **rows;
	bool r16_tried;
};

/* Architecture descriptor by general.architecture name, or NULL. */
const struct arch_desc *arch_find(const char *name, size_t len);

/* Opens and binds the model at path. *out is owned by the caller and freed
 * with model_close(); on failure *out = NULL and err says what is wrong
 * (unknown architecture, missing tensor, shape mismatch ...). */
int model_open(const char *path, struct model **out, ing_err *err);

/* Binds an already opened GGUF (ownership of g moves to the model, also on
 * failure). */
int model_open_gguf(struct gguf *g, struct model **out, ing_err *err);

void model_close(struct model *m);

/* Bytes of weights one decode step reads (all matrices + embedding row). */
uint64_t model_weight_bytes(const struct model *m);

/* Multiply-adds per token in the layers' weight matrices (one per weight
 * element), plus the LM head's when lm_head (a decode token computes it,
 * a prompt token before the last does not). Attention's own products,
 * which grow with the context, are not counted. */
uint64_t model_weight_macs(const struct model *m, bool lm_head);

/* Whether every matrix (the layers' and the LM head) avoids its type's
 * most negative quant, so that quant_kernels_narrow's table computes the
 * same results. The first call reads the matrices (18 ms warm, 28 cold for
 * the default model); the answer is kept in the model (thread-safe: racing
 * first calls both compute the same answer). */
bool model_weights_narrow(struct model *m);

/* The model's matrices (the LM head, the layers') repacked 16 rows to a
 * tile for table k's gemm_r16 kernels (quant.h): an array indexed like
 * the GGUF's tensors (model_tensor_index), entry i tensor i's copy or
 * NULL where the plain rows serve (not a matrix, a type k has no such
 * kernel for, rows too long); NULL for all when k has none or the copies
 * (about 220 MB for the default model, a third of a second) could not be
 * made. The first call, whatever the table, builds the copies, kept until
 * model_close (thread-safe): from a mapped file, the matrices it does not
 * repack are copied as they are (model_rows), all onto huge pages, and
 * the originals' pages are then given back (a tied embedding faults in
 * the rows it looks up), so the weights stay in memory once. A later
 * table may lack a kernel an entry was made for: check k->gemm_r16[type]
 * before using one. */
const void *const *model_r16(struct model *m, const struct quant_kernels *k);

/* W's rows as the file lays them out, where the kernels read them: the
 * copy model_r16's build made of a matrix it did not repack (starting on
 * a 64-byte line, on huge pages, where 4 KB ones cost the Q8_0 LM head's
 * AVX2 kernel a tenth of its rate), else W->data. Call it after model_r16
 * (whose lock orders the build before the read). */
const void *model_rows(const struct model *m, const struct gguf_tensor *W);

/* The matrices a layer multiplies each token by, into w: wq, wk, wv, wo,
 * w_gate, w_up, w_down (the copies' build visits the LM head, then these
 * for each layer). */
#define MODEL_LAYER_MATRICES 7
void model_layer_matrices(const struct model_layer *l,
			  const struct gguf_tensor *w[MODEL_LAYER_MATRICES]);

/* Index of tensor W (one of m's) in its GGUF's tensor array. */
static inline size_t model_tensor_index(const struct model *m, const struct gguf_tensor *W)
{
	return (size_t)(W - m->gguf->tensors);
}

#endif
