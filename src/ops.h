/* ops.h — the operations both runners share.
 *
 * Each op works on a caller-chosen slice (rows, heads, tokens) so that a
 * runner can split it across threads without the op knowing about threads.
 * All reductions run in a fixed order that does not depend on how the work
 * was split, so any schedule produces bit-identical results.
 *
 * Shapes: T = tokens in the batch, D = d_model, Dh = head dim, n = length. */
#ifndef INGOT_OPS_H
#define INGOT_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "model.h"
#include "quant.h"

/* y[n] = x / sqrt(mean(x^2) + eps) * w   (w may be NULL: no weight). y may
 * alias x. Sum of squares accumulated in double, like ggml. */
void ops_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);
/* ops_rmsnorm of each of `rows` rows, row r from x + r * stride to
 * y + r * stride (y == x allowed), bit for bit; faster for rows >= 4. */
void ops_rmsnorm_rows(float *y, const float *x, const float *w, int64_t n, float eps,
		      int64_t rows, int64_t stride);

/* Quantizes x[n] into the activation format act (Q8_0, Q8_1, Q8_K) or copies
 * it (F32). */
void ops_quantize_act(const struct quant_kernels *k, enum qtype act, const float *x, void *dst,
		      int64_t n);

/* Bytes one activation row of n elements takes in format act. */
size_t ops_act_row_bytes(enum qtype act, int64_t n);

/* Matrix product over weight rows [r0, r1):
 *   y[t * y_stride + r] = W[r,:] . x_t   for t in [0, T)
 * where x_t = xq + t * xq_stride is activation row t already in W's act
 * format. W is [rows, n] of any supported type; w16, where not NULL, is W
 * repacked 16 rows to a tile (model_r16), which k's gemm_r16 kernel for
 * W's type (then required) reads instead, bit for bit the same. packed
 * holds the same rows regrouped by quant_gemm_pack_row (needed where k
 * has a gemm kernel for W's type and T >= QUANT_GEMM_PACK_MIN; NULL
 * otherwise). r_pf: rows [r1, r_pf) are the caller's next, for the
 * kernels' prefetch (quant.h); r1 where nothing follows. */
void ops_matmul_rows(const struct quant_kernels *k, const struct gguf_tensor *W, const void *w16,
		     const void *xq, size_t xq_stride, const void *packed, int64_t T, float *y,
		     int64_t y_stride, int64_t r0, int64_t r1, int64_t r_pf);

/* Row `row` of an embedding table [V, D] into out[D] (dequantized), from
 * E's rows or, where it is not NULL, from e16, E repacked 16 rows to a
 * tile (model_r16: a tied LM head's copy; the same floats). */
void ops_embed_row(const struct gguf_tensor *E, const void *e16, int64_t row, float *out);

/* Rotary embedding in place on n_heads heads of Dh floats each, at position
 * pos, rotating the first n_rot dimensions as llama.cpp does: theta_i =
 * pos * scale * base^(-2i/n_rot) / freq_factor_i (freq_factors may be NULL). */
void ops_rope(float *x, int64_t n_heads, int64_t Dh, int64_t n_rot, int64_t pos, float base,
	      float scale, const float *freq_factors, enum rope_kind kind);

/* ops_rope in two steps, so one position's angles serve several tensors
 * (a token's q and k heads): ops_rope_angles fills cs, sn [n_rot/2] (the
 * sines and cosines ops_rope uses), ops_rope_apply rotates n_heads heads
 * with them. Together, bit for bit ops_rope. */
void ops_rope_angles(float *cs, float *sn, int64_t n_rot, int64_t pos, float base, float scale,
		     const float *freq_factors);
void ops_rope_apply(float *x, int64_t n_heads, int64_t Dh, int64_t n_rot, const float *cs,
		    const float *sn, enum rope_kind kind);
#define OPS_ROPE_MAX_PAIRS 512 /* n_rot / 2, checked at model load */

/* GELU (tanh form) through llama.cpp's fp16 lookup table. */
float ops_gelu(float x);

/* g[i] = act(g[i]) * u[i] for i < n. */
void ops_glu(float *g, const float *u, int64_t n, enum act_kind act);

/* y[i] += x[i] */
void ops_add(float *y, const float *x, int64_t n);

/* How K/V rows are stored: F32, F16 (IEEE half, rounded to nearest even)
 * or Q8_0 (blocks of 32: an F16 scale and 32 int8, quantized as llama.cpp
 * does). Attention widens each stored value exactly (a Q8_0 value is its
 * int8 times its scale, a product float holds) and then does the F32
 * arithmetic, so such rows give bit for bit what F32 rows holding the same
 * values give. */
enum ops_kv_type { OPS_KV_F32, OPS_KV_F16, OPS_KV_Q8_0 };

/* Bytes of a row of n values stored as kt; 0 when kt cannot store n
 * (Q8_0: n a multiple of 32). Head slices of a row start at row bytes of
 * the values before them. */
size_t ops_kv_row_bytes(enum ops_kv_type kt, int64_t n);

/* Stores a row of n floats as kt at dst (ops_kv_row_bytes(kt, n) bytes). */
void ops_kv_store(void *dst, const float *x, int64_t n, enum ops_kv_type kt);

/* One head of attention for one query over n key/value rows:
 *   out[Dv] = softmax(scale * q . K[j] for j < n) . V[j]
 * K[j] / V[j] point at row j, stored as kt (rows may live in different KV
 * blocks); the reduction runs in j order, so paging never changes the
 * result. scratch holds n floats. softcap > 0 applies
 * softcap * tanh(s / softcap). */
void ops_attend(float *out, const float *q, const void *const *K, const void *const *V,
		enum ops_kv_type kt, int64_t n, int64_t Dh, int64_t Dv, float scale, float softcap,
		float *scratch);

/* The portable scalar reference of ops_attend (which uses AVX2/FMA loops
 * when the CPU has them). */
void ops_attend_ref(float *out, const float *q, const void *const *K, const void *const *V,
		    enum ops_kv_type kt, int64_t n, int64_t Dh, int64_t Dv, float scale,
		    float softcap, float *scratch);

/* The queries of one attention group: heads that share a KV head, on
 * rows of one sequence. Query i attends over K/V rows [lo, hi) of the
 * group's row lists. */
struct ops_attn_query {
	float *out;      /* [Dv] */
	const float *q;  /* [Dh] */
	int64_t lo, hi;
};

#define OPS_ATTEND_GROUP_MAX 32 /* queries per ops_attend_group call */

/* nq <= OPS_ATTEND_GROUP_MAX queries over one list of K/V rows. Each
 * out[i] is bit for bit what ops_attend gives for that query alone over
 * rows K + lo .. K + hi - 1 (the same dot, exp and axpy sequence per
 * query); the group only changes the loop order: K/V rows in tiles that
 * stay in cache while every query reads them, queries in blocks of 4
 * whose dots share each load and whose outputs stay in registers across
 * a tile (F16 and Q8_0 tiles read by several blocks are widened to floats
 * once). scratch holds ops_attend_group_scratch(nq, max hi - min lo, Dh,
 * Dv, kt) floats. */
void ops_attend_group(const struct ops_attn_query *qs, int nq, const void *const *K,
		      const void *const *V, enum ops_kv_type kt, int64_t Dh, int64_t Dv,
		      float scale, float softcap, float *scratch);

/* Floats of scratch ops_attend_group needs for nq queries whose ranges
 * span `span` rows. */
size_t ops_attend_group_scratch(int nq, int64_t span, int64_t Dh, int64_t Dv,
				enum ops_kv_type kt);

/* A row's softmax arithmetic, for sampling and logprobs over the whole
 * vocabulary (262k entries: libm's expf a token cost ~1 ms a row). The
 * exponential of v here is ops_exp_poly's (ops_int.h): 0 below -87
 * (e^-87 < 2e-38, a probability no draw can see; such entries skip the
 * arithmetic), else a float polynomial within 1.5 ulp of exp whose AVX2
 * lanes give the scalar definition's bits, so every ISA draws the same
 * tokens. (Attention's softmax keeps libm's expf: ops_exp_avx2.) */

#define OPS_EXP_BLOCK 64 /* elements per partial sum of ops_exp_blocks */

/* y[j] = exp((x[j] - mx) / div) for j < n (y may be x; div > 0: a
 * temperature, 1 leaving x[j] - mx as it is). Unless blocks is NULL,
 * blocks[b] = the sum of y over [b, b + 1) * OPS_EXP_BLOCK (the last
 * block: up to n) in double, in ops_sum_exp's order. Returns the sum of
 * the blocks in block order (computed with blocks NULL too). */
double ops_exp_blocks(float *y, const float *x, int64_t n, float mx, float div, double *blocks);
double ops_exp_blocks_ref(float *y, const float *x, int64_t n, float mx, float div,
			  double *blocks);

/* The sum of exp(x[i] - mx) for i < n in double, in a fixed order: eight
 * partial sums (element i into sum i % 8, in index order) added as
 * ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). */
double ops_sum_exp(const float *x, int64_t n, float mx);
double ops_sum_exp_ref(const float *x, int64_t n, float mx);

/* Over a row of logits: NaNs become -INFINITY; returns how many entries
 * are > -INFINITY, with the first of the largest at *best (0 when none). */
int64_t ops_logits_scan(float *x, int64_t n, int64_t *best);
int64_t ops_logits_scan_ref(float *x, int64_t n, int64_t *best);

/* log(sum of exp(x[i]) for i < n): the maximum x[ops_argmax(x, n)], then
 * ops_sum_exp: x[i] - ops_logsumexp(x, n) is the log-softmax logprobs
 * report. */
float ops_logsumexp(const float *x, int64_t n);

/* How many x[i] > v (a token's rank among the logits, less one). */
int64_t ops_count_above(const float *x, int64_t n, float v);
int64_t ops_count_above_ref(const float *x, int64_t n, float v);

/* The first i < n with x[i] > v, or n when there is none: the scan of a
 * row for the few entries that beat a threshold (a top-k heap's worst),
 * 16 at a time with AVX2. */
int64_t ops_first_above(const float *x, int64_t n, float v);
int64_t ops_first_above_ref(const float *x, int64_t n, float v);

/* The i < n with x[i] > v, in increasing order, into idx[] (room for n;
 * n < 2^31); returns how many. */
int64_t ops_collect_above(const float *x, int64_t n, float v, int32_t *idx);
int64_t ops_collect_above_ref(const float *x, int64_t n, float v, int32_t *idx);

/* The k largest x[i] (at most k; none -INFINITY or NaN), largest first,
 * the lower index first among equals: their indexes into ids[k], values
 * into vals[k]. Returns how many. */
int ops_top_k(const float *x, int64_t n, int k, int32_t *ids, float *vals);
int ops_top_k_ref(const float *x, int64_t n, int k, int32_t *ids, float *vals);

/* Index of the largest x[i] (first one on ties). NaNs are skipped, except
 * that a NaN x[0] makes the answer 0. */
int64_t ops_argmax(const float *x, int64_t n);

/* ops_argmax in pieces, for a row whose elements are computed by several
 * threads (the LM head): each thread scans its index ranges into its own
 * ops_best, in any order of ranges; ops_best_merge folds them together, in
 * any order, and ops_best_index gives exactly ops_argmax of the whole row. */
struct ops_best {
	float val;
	int64_t idx; /* OPS_BEST_NONE: no non-NaN element seen */
};
#define OPS_BEST_NONE INT64_MIN

void ops_best_init(struct ops_best *b);
/* Scans x[i] for i in [i0, i1) (x indexes the whole row). */
void ops_best_scan(struct ops_best *b, const float *x, int64_t i0, int64_t i1);
/* Scans element i of the row for i in [i0, i1) (base <= i0), from x
 * holding the row's elements from index base on (element i at x[i -
 * base]): a piece of the row computed into a buffer of its own, scanned
 * with what the scans before it found, as one scan of the whole row. */
void ops_best_scan_at(struct ops_best *b, const float *x, int64_t base, int64_t i0, int64_t i1);
void ops_best_merge(struct ops_best *into, const struct ops_best *b);
/* The argmax of row x once every element went through some scan (only x[0]
 * is read). */
int64_t ops_best_index(const struct ops_best *b, const float *x);

#endif
