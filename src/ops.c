/* ops.c — shared operations (see ops.h).
 *
 * Plain C: the heavy lifting (quantized dot products) is in the quant
 * kernels; what is here is O(T*D) elementwise work and attention, written
 * so the compiler vectorizes the inner loops. Attention's inner loops come
 * in a scalar set and an AVX2 set (ops_avx2.c), each for K/V rows stored as
 * F32, F16 or Q8_0 (read widened to floats, exactly); attend() is the
 * definition for one query, attend_group() the same arithmetic reordered
 * into tiles of K/V rows and blocks of queries, bit for bit per query. */
#include "ops.h"
#include "ops_int.h"
#include "sanitize.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* The widest loops the CPU runs here: which of attn_sets' rows, and which
 * of the argmax scan's and norm sums' loops; the AVX2 loops from
 * LEVEL_AVX2 on */
enum isa_level { LEVEL_SCALAR, LEVEL_AVX2, LEVEL_AVX512 };
static enum isa_level isa_level;
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

static const struct quant_kernels *kv_quant; /* F16 and Q8_0 KV rows' quantizers */

/* Once: quant_kernels_best() probes cpuid, which costs a trap to the
 * hypervisor on a VM; per stored row it was a fifth of a long prefill. */
static void isa_init(void)
{
	const enum quant_isa isa = quant_isa_detect();
	isa_level = isa >= QUANT_ISA_AVX512 ? LEVEL_AVX512
		    : isa >= QUANT_ISA_AVX2 ? LEVEL_AVX2
					    : LEVEL_SCALAR;
	kv_quant = quant_kernels_best();
}

/* A row's sum of squares: squares in float, sum in double in element
 * order, exactly ggml's rms_norm, so that activations land on the same
 * side of quantization rounding ties. */
static double sumsq(const float *x, int64_t n)
{
	double ss = 0.0;
	for (int64_t i = 0; i < n; i++)
		ss += (double)(x[i] * x[i]);
	return ss;
}

static float rms_scale(double ss, int64_t n, float eps)
{
	return 1.0f / sqrtf((float)(ss / n) + eps);
}

/* y = x * scale * w (w NULL: 1), the scalar definition of
 * ops_scale_mul_avx2. */
static void scale_mul(float *y, const float *x, const float *w, int64_t n, float scale)
{
	if (w)
		for (int64_t i = 0; i < n; i++)
			y[i] = x[i] * scale * w[i];
	else
		for (int64_t i = 0; i < n; i++)
			y[i] = x[i] * scale;
}

/* ops_rmsnorm is the definition, scalar; ops_rmsnorm_rows the same bits
 * through ops_norm_avx2.c where the CPU has AVX2. */
void ops_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
	scale_mul(y, x, w, n, rms_scale(sumsq(x, n), n, eps));
}

/* The sum is a chain of dependent double adds, one per element (4 cycles
 * each): at batch 16 the norms of a step (six a layer, a row's q heads
 * one each) were 4% of it. Four rows' chains side by side take the time
 * of one; each row's sum is still its own in element order. ss[r] for
 * rows r < rows (at most 16) of x. */
static void sumsq_rows(const float *x, int64_t stride, int64_t n, int64_t rows, double *ss)
{
	int64_t r = 0;
	for (; r + 4 <= rows; r += 4) {
		const float *a = x + r * stride, *b = a + stride, *c = b + stride, *d = c + stride;
		double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
		for (int64_t i = 0; i < n; i++) {
			s0 += (double)(a[i] * a[i]);
			s1 += (double)(b[i] * b[i]);
			s2 += (double)(c[i] * c[i]);
			s3 += (double)(d[i] * d[i]);
		}
		ss[r] = s0, ss[r + 1] = s1, ss[r + 2] = s2, ss[r + 3] = s3;
	}
	for (; r < rows; r++)
		ss[r] = sumsq(x + r * stride, n);
}

/* y = x * (1 / sqrt(ss / n + eps)) * w (w NULL: 1), ss the row's sum of
 * squares. */
static void rms_apply(float *y, const float *x, const float *w, int64_t n, float eps, double ss)
{
	const float scale = rms_scale(ss, n, eps);
	if (isa_level >= LEVEL_AVX2)
		ops_scale_mul_avx2(y, x, w, n, scale);
	else
		scale_mul(y, x, w, n, scale);
}

void ops_rmsnorm_rows(float *y, const float *x, const float *w, int64_t n, float eps,
		      int64_t rows, int64_t stride)
{
	pthread_once(&isa_once, isa_init);
	enum { BLOCK = 16 }; /* rows whose sums are made together */
	double ss[BLOCK];
	for (int64_t r0 = 0; r0 < rows; r0 += BLOCK) {
		const int64_t nr = rows - r0 < BLOCK ? rows - r0 : BLOCK;
		if (isa_level == LEVEL_AVX512)
			ops_sumsq_rows_avx512(x + r0 * stride, stride, n, nr, ss);
		else if (isa_level >= LEVEL_AVX2)
			ops_sumsq_rows_avx2(x + r0 * stride, stride, n, nr, ss);
		else
			sumsq_rows(x + r0 * stride, stride, n, nr, ss);
		/* every sum before any row is written: y may be x */
		for (int64_t k = 0; k < nr; k++)
			rms_apply(y + (r0 + k) * stride, x + (r0 + k) * stride, w, n, eps, ss[k]);
	}
}

size_t ops_act_row_bytes(enum qtype act, int64_t n)
{
	uint64_t b = 0;
	qtype_row_bytes(act, (uint64_t)n, &b);
	return (size_t)b;
}

void ops_quantize_act(const struct quant_kernels *k, enum qtype act, const float *x, void *dst,
		      int64_t n)
{
	if (act == QTYPE_F32) {
		memcpy(dst, x, (size_t)n * sizeof(float));
		return;
	}
	SAN_READ(x, (size_t)n * sizeof(float)); /* the kernels are not instrumented */
	SAN_WRITE(dst, ops_act_row_bytes(act, n));
	if (k->quantize_act[act])
		k->quantize_act[act](x, dst, n);
	else
		quant_quantize_ref(act, x, dst, n);
}

#define MATMUL_TILE 32

/* What a gemm kernel touches besides the plain rows, for the sanitizers
 * (the kernels run uninstrumented under them: sanitize.h): the packed
 * groups it reads and the results it writes. */
static void matmul_gemm_declare(enum qtype act, int64_t n, const void *packed, int64_t T,
				float *y, int64_t y_stride, int64_t r0, int64_t r1)
{
	if (T >= QUANT_GEMM_PACK_MIN)
		SAN_READ(packed, quant_gemm_pack_bytes(act, n, T));
	for (int64_t t = 0; t < T; t++)
		SAN_WRITE(y + t * y_stride + r0, (size_t)(r1 - r0) * sizeof(float));
}

void ops_matmul_rows(const struct quant_kernels *k, const struct gguf_tensor *W, const void *w16,
		     const void *xq, size_t xq_stride, const void *packed, int64_t T, float *y,
		     int64_t y_stride, int64_t r0, int64_t r1, int64_t r_pf)
{
	const int64_t n = (int64_t)W->ne[0];
	const size_t row_bytes = W->nbytes / (W->nelems / W->ne[0]);
	const uint8_t *w = (const uint8_t *)W->data;
	SAN_READ(xq, (size_t)T * xq_stride); /* the kernels are not instrumented */
	quant_gemm_fn gemm = w16 ? k->gemm_r16[W->type] : k->gemm[W->type];
	if (gemm) {
		matmul_gemm_declare(qtype_traits(W->type)->act_type, n, packed, T, y, y_stride, r0, r1);
		gemm(n, w16 ? w16 : w, row_bytes, r0, r1, xq, xq_stride,
		     T >= QUANT_GEMM_PACK_MIN ? packed : NULL, T, y, y_stride, r_pf);
		return;
	}
	float s[QUANT_MULTI_MAX];
	/* Tokens in tiles of MATMUL_TILE rows (their activations stay in L1
	 * while the thread's weight rows stream from L2); within a tile each
	 * weight row is unpacked once per QUANT_MULTI_MAX tokens. A token's
	 * result does not depend on its group or tile (quant.h contract). */
	for (int64_t t0 = 0; t0 < T; t0 += MATMUL_TILE) {
		const int64_t t1 = T - t0 < MATMUL_TILE ? T : t0 + MATMUL_TILE;
		for (int64_t r = r0; r < r1; r++) {
			const void *wr = w + (size_t)r * row_bytes;
			for (int64_t t = t0; t < t1; t += QUANT_MULTI_MAX) {
				int cols = (int)(t1 - t < QUANT_MULTI_MAX ? t1 - t : QUANT_MULTI_MAX);
				quant_dot_multi(k, W->type, n, s, wr,
						(const uint8_t *)xq + (size_t)t * xq_stride, xq_stride, cols);
				for (int c = 0; c < cols; c++)
					y[(t + c) * y_stride + r] = s[c];
			}
		}
	}
}

void ops_embed_row(const struct gguf_tensor *E, const void *e16, int64_t row, float *out)
{
	const size_t row_bytes = E->nbytes / E->ne[1];
	SAN_WRITE(out, (size_t)E->ne[0] * sizeof(float)); /* the kernels are not instrumented */
	if (e16) {
		quant_r16_dequantize_row((enum qtype)E->type, e16, (int64_t)E->ne[0], row, out);
		return;
	}
	quant_dequantize_ref(E->type, (const uint8_t *)E->data + (size_t)row * row_bytes, out,
			     (int64_t)E->ne[0]);
}

/* Follows ggml's rope: theta starts at pos*scale and is multiplied by
 * base^(-2/n_rot) per pair, in float, so our angles round like llama.cpp's. */
void ops_rope_angles(float *cs, float *sn, int64_t n_rot, int64_t pos, float base, float scale,
		     const float *freq_factors)
{
	const float theta_scale = powf(base, -2.0f / (float)n_rot);
	float theta = (float)pos;
	for (int64_t i = 0; i < n_rot / 2; i++) {
		float th = theta * scale;
		if (freq_factors)
			th = theta / freq_factors[i] * scale;
		cs[i] = cosf(th);
		sn[i] = sinf(th);
		theta *= theta_scale;
	}
}

void ops_rope_apply(float *x, int64_t n_heads, int64_t Dh, int64_t n_rot, const float *cs,
		    const float *sn, enum rope_kind kind)
{
	pthread_once(&isa_once, isa_init);
	for (int64_t h = 0; h < n_heads; h++) {
		float *v = x + h * Dh;
		/* the AVX2 loop takes whole runs of 8 pairs, this one the rest */
		const int64_t i0 =
			isa_level >= LEVEL_AVX2 ? ops_rope_apply_avx2(v, n_rot, cs, sn, kind) : 0;
		for (int64_t i = i0; i < n_rot / 2; i++) {
			int64_t a = kind == ROPE_NEOX ? i : 2 * i;
			int64_t b = kind == ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
			float x0 = v[a], x1 = v[b];
			v[a] = x0 * cs[i] - x1 * sn[i];
			v[b] = x0 * sn[i] + x1 * cs[i];
		}
	}
}

void ops_rope(float *x, int64_t n_heads, int64_t Dh, int64_t n_rot, int64_t pos, float base,
	      float scale, const float *freq_factors, enum rope_kind kind)
{
	float cs[OPS_ROPE_MAX_PAIRS], sn[OPS_ROPE_MAX_PAIRS];
	ops_rope_angles(cs, sn, n_rot, pos, base, scale, freq_factors);
	ops_rope_apply(x, n_heads, Dh, n_rot, cs, sn, kind);
}

static inline float gelu_tanh(float x)
{
	const float c = 0.79788456080286535587989211986876f; /* sqrt(2/pi) */
	return 0.5f * x * (1.0f + tanhf(c * x * (1.0f + 0.044715f * x * x)));
}

static inline float silu(float x) { return x / (1.0f + expf(-x)); }

/* GELU as llama.cpp's CPU backend computes it (GGML_GELU_FP16): the input
 * rounded to fp16 indexes a table of fp16 results; |x| >= 10 is exact. We
 * follow it because GGUF models are tuned and judged against llama.cpp, and
 * greedy outputs agree far more often with the same activation; the table
 * is also faster than tanhf. */
static uint16_t gelu_table[(1 << 16) + 1]; /* + 1: the AVX2 gather reads 4 bytes */
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void)
{
	for (uint32_t i = 0; i < (1u << 16); i++)
		gelu_table[i] = f32_to_fp16(gelu_tanh(fp16_to_f32((uint16_t)i)));
}

float ops_gelu(float x)
{
	if (x <= -10.0f)
		return 0.0f;
	if (x >= 10.0f)
		return x;
	pthread_once(&gelu_once, gelu_table_init);
	return fp16_to_f32(gelu_table[f32_to_fp16(x)]);
}

/* GELU's scalar loop cost 15 ns an element (the software fp16 rounding):
 * a fifth of a 512-token prefill. The AVX2 loop is the same table and the
 * same roundings, F16C's, 8 at a time. */
void ops_glu(float *g, const float *u, int64_t n, enum act_kind act)
{
	pthread_once(&isa_once, isa_init);
	if (act == ACT_GELU_TANH) {
		pthread_once(&gelu_once, gelu_table_init);
		if (isa_level >= LEVEL_AVX2)
			ops_glu_gelu_avx2(g, u, n, gelu_table);
		else
			for (int64_t i = 0; i < n; i++)
				g[i] = ops_gelu(g[i]) * u[i];
	} else {
		/* the scalar loop: 4.0 ns an element (libm expf), AVX2 1.2 */
		if (isa_level >= LEVEL_AVX2)
			ops_glu_silu_avx2(g, u, n);
		else
			for (int64_t i = 0; i < n; i++)
				g[i] = silu(g[i]) * u[i];
	}
}

void ops_add(float *y, const float *x, int64_t n)
{
	pthread_once(&isa_once, isa_init);
	if (isa_level >= LEVEL_AVX2) {
		ops_add_avx2(y, x, n);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		y[i] += x[i];
}

/* Element i of a K or V row stored as kind (an enum ops_kv_type; Q8_0: its
 * int8 times its block's F16 scale, exact in float); kind is a constant in
 * each of the scalar kernels below. */
static inline float row_at(const void *row, int64_t i, int kind)
{
	if (kind == OPS_KV_F16)
		return fp16_to_f32(((const uint16_t *)row)[i]);
	if (kind == OPS_KV_Q8_0) {
		const unsigned char *b = (const unsigned char *)row + (i / QK) * OPS_Q8_BLOCK_BYTES;
		uint16_t d;
		memcpy(&d, b, sizeof d);
		return (float)(int8_t)b[2 + i % QK] * fp16_to_f32(d);
	}
	return ((const float *)row)[i];
}

static inline float dot_row(const float *a, const void *b, int64_t n, int kind)
{
	float s[8] = { 0 };
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			s[j] += a[i + j] * row_at(b, i + j, kind);
	float r = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
	for (; i < n; i++)
		r += a[i] * row_at(b, i, kind);
	return r;
}

static inline void axpy_row(float *y, float p, const void *x, int64_t n, int kind)
{
	for (int64_t i = 0; i < n; i++)
		y[i] += p * row_at(x, i, kind);
}

static inline void qk_rows(const float *const *q, int nq, const void *const *K, int64_t nk,
			   int64_t n, float *s, int64_t ld, int kind)
{
	for (int a = 0; a < nq; a++)
		for (int64_t j = 0; j < nk; j++)
			s[a * ld + j] = dot_row(q[a], K[j], n, kind);
}

static inline void pv_rows(float *const *out, const float *const *p, int nq,
			   const void *const *V, int64_t nk, int64_t Dv, int kind)
{
	for (int a = 0; a < nq; a++)
		for (int64_t j = 0; j < nk; j++)
			axpy_row(out[a], p[a][j], V[j], Dv, kind);
}

/* The scalar set for each kind of row: F32 (f), F16 (h), Q8_0 (q). */
#define SCALAR_SET(sfx, kind)                                                                   \
	static float dot##sfx(const float *a, const void *b, int64_t n)                         \
	{                                                                                        \
		return dot_row(a, b, n, kind);                                                   \
	}                                                                                        \
	static void axpy##sfx(float *y, float p, const void *x, int64_t n)                      \
	{                                                                                        \
		axpy_row(y, p, x, n, kind);                                                      \
	}                                                                                        \
	static void qk##sfx(const float *const *q, int nq, const void *const *K, int64_t nk,    \
			    int64_t n, float *s, int64_t ld)                                     \
	{                                                                                        \
		qk_rows(q, nq, K, nk, n, s, ld, kind);                                           \
	}                                                                                        \
	static void pv##sfx(float *const *out, const float *const *p, int nq,                   \
			    const void *const *V, int64_t nk, int64_t Dv)                        \
	{                                                                                        \
		pv_rows(out, p, nq, V, nk, Dv, kind);                                            \
	}                                                                                        \
	static void widen##sfx(float *dst, const void *row, int64_t n)                          \
	{                                                                                        \
		for (int64_t i = 0; i < n; i++)                                                  \
			dst[i] = row_at(row, i, kind);                                           \
	}
SCALAR_SET(f, OPS_KV_F32)
SCALAR_SET(h, OPS_KV_F16)
SCALAR_SET(q, OPS_KV_Q8_0)
#undef SCALAR_SET

static void expsf(float *x, int64_t n, float mx)
{
	for (int64_t j = 0; j < n; j++)
		x[j] = expf(x[j] - mx);
}

static float scale_maxf(float *x, int64_t n, float scale)
{
	float mx = -INFINITY;
	for (int64_t j = 0; j < n; j++) {
		x[j] *= scale;
		if (x[j] > mx)
			mx = x[j];
	}
	return mx;
}

/* The inner loops of attention, scalar or AVX2, over F32, F16 or Q8_0
 * rows: dot and axpy for one query, qk and pv the same arithmetic for a
 * block of up to ATTN_BLOCK queries (see ops_int.h), bit for bit, in each
 * set; exps is x[j] = expf(x[j] - mx) over a row of scores; scale_max is
 * x[j] *= scale over a row, returning the largest x[j] that is not NaN
 * (-INFINITY if none; the sign of a zero maximum may differ between sets,
 * which exps(x - mx) cannot see); widen writes a row's n values as floats
 * (exactly: the F32 set's qk/pv over widened rows give this set's
 * results). */
struct attn_kernels {
	float (*dot)(const float *, const void *, int64_t);
	void (*axpy)(float *, float, const void *, int64_t);
	void (*qk)(const float *const *, int, const void *const *, int64_t, int64_t, float *,
		   int64_t);
	void (*pv)(float *const *, const float *const *, int, const void *const *, int64_t,
		   int64_t);
	void (*exps)(float *, int64_t, float);
	float (*scale_max)(float *, int64_t, float);
	void (*widen)(float *, const void *, int64_t);
};

/* [isa_level][enum ops_kv_type]; the AVX-512 row has AVX2's single-query
 * loops and softmax, and its own block loops with the same results. */
static const struct attn_kernels attn_sets[3][3] = {
	{ { dotf, axpyf, qkf, pvf, expsf, scale_maxf, widenf },
	  { doth, axpyh, qkh, pvh, expsf, scale_maxf, widenh },
	  { dotq, axpyq, qkq, pvq, expsf, scale_maxf, widenq } },
	{ { ops_dot_avx2, ops_axpy_avx2, ops_qk_avx2, ops_pv_avx2, ops_exp_avx2,
	    ops_scale_max_avx2, widenf },
	  { ops_dot_f16_avx2, ops_axpy_f16_avx2, ops_qk_f16_avx2, ops_pv_f16_avx2, ops_exp_avx2,
	    ops_scale_max_avx2, ops_widen_f16_avx2 },
	  { ops_dot_q8_avx2, ops_axpy_q8_avx2, ops_qk_q8_avx2, ops_pv_q8_avx2, ops_exp_avx2,
	    ops_scale_max_avx2, ops_widen_q8_avx2 } },
	{ { ops_dot_avx2, ops_axpy_avx2, ops_qk_avx512, ops_pv_avx512, ops_exp_avx2,
	    ops_scale_max_avx2, widenf },
	  { ops_dot_f16_avx2, ops_axpy_f16_avx2, ops_qk_f16_avx512, ops_pv_f16_avx512,
	    ops_exp_avx2, ops_scale_max_avx2, ops_widen_f16_avx2 },
	  { ops_dot_q8_avx2, ops_axpy_q8_avx2, ops_qk_q8_avx512, ops_pv_q8_avx512, ops_exp_avx2,
	    ops_scale_max_avx2, ops_widen_q8_avx2 } },
};

/* scratch[0..n) holds the scores; softmax them in place (exp, then the
 * sum in double in j order) and turn them into the weights of the V rows.
 * The AVX2 set's exp is glibc's expf bit for bit, 8 at a time (a libm call
 * per score was a fifth of grouped attention). */
/* s[j] /= the sum (in double, j order), as one float multiply each. */
static void weights_scale(float *s, int64_t n, double sum, const struct attn_kernels *k)
{
	k->scale_max(s, n, (float)(1.0 / sum));
}

static void softmax_weights(float *scratch, int64_t n, float mx, const struct attn_kernels *k)
{
	k->exps(scratch, n, mx);
	double sum = 0.0;
	for (int64_t j = 0; j < n; j++)
		sum += scratch[j];
	weights_scale(scratch, n, sum, k);
}

/* softmax_weights of four rows of n scores (maxima mx) at once: per row
 * the same operations in the same order, so the same bits, with the four
 * double sums side by side. One row's sum is a chain of dependent adds,
 * one per score; at a decode step's few hundred keys the chains, one row
 * after another, cost a tenth of grouped attention. */
static void softmax_weights4(float *const *s, int64_t n, const float *mx,
			     const struct attn_kernels *k)
{
	for (int r = 0; r < 4; r++)
		k->exps(s[r], n, mx[r]);
	double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
	for (int64_t j = 0; j < n; j++) {
		s0 += s[0][j];
		s1 += s[1][j];
		s2 += s[2][j];
		s3 += s[3][j];
	}
	weights_scale(s[0], n, s0, k);
	weights_scale(s[1], n, s1, k);
	weights_scale(s[2], n, s2, k);
	weights_scale(s[3], n, s3, k);
}

static float score(float dot, float scale, float softcap)
{
	float s = dot * scale;
	return softcap > 0.0f ? softcap * tanhf(s / softcap) : s;
}

/* The definition of attention for one query, and the test reference: the
 * grouped version below must give each query exactly this. */
static void attend(float *out, const float *q, const void *const *K, const void *const *V,
		   int64_t n, int64_t Dh, int64_t Dv, float scale, float softcap, float *scratch,
		   const struct attn_kernels *k)
{
	float mx = -INFINITY;
	for (int64_t j = 0; j < n; j++) {
		float s = score(k->dot(q, K[j], Dh), scale, softcap);
		scratch[j] = s;
		if (s > mx)
			mx = s;
	}
	softmax_weights(scratch, n, mx, k);
	memset(out, 0, (size_t)Dv * sizeof *out);
	for (int64_t j = 0; j < n; j++)
		k->axpy(out, scratch[j], V[j], Dv);
}

/* Grouped attention works on tiles of ATTN_TILE K/V rows (64 KB of K or
 * V at head dim 256: L2-resident while every block of queries reads it;
 * measured with tests/tools/attn_bench on Zen 3, 64 beat 8, 16 and 32,
 * whose shorter P.V runs reload the outputs more often, and 128 and up,
 * which spill L2) and blocks of ATTN_BLOCK queries (consecutive in qs:
 * the heads of one row in exec_attn, so usually one range). */
#define ATTN_TILE 64
#define ATTN_BLOCK 4

/* A group's geometry: rows [lo, hi) of K/V, each query's scores at
 * scratch + i * span + (j - lo). */
struct attn_span {
	int64_t lo, hi, span;
};

/* The end of the tile that starts at t0 within g. */
static int64_t tile_end(struct attn_span g, int64_t t0)
{
	return t0 + ATTN_TILE < g.hi ? t0 + ATTN_TILE : g.hi;
}

/* Query i's rows within tile [t0, t1): [*a, *b), empty when *a >= *b. */
static void tile_cut(const struct ops_attn_query *q, int64_t t0, int64_t t1, int64_t *a,
		     int64_t *b)
{
	*a = q->lo > t0 ? q->lo : t0;
	*b = q->hi < t1 ? q->hi : t1;
}

/* The rows of a tile as its kernels read them: row j at rows[j - base],
 * through kernel set k. */
struct attn_rows {
	const void *const *rows;
	int64_t base;
	const struct attn_kernels *k;
};

/* Kernel sets and buffers of a group: k for the stored rows, kf the F32
 * set of the same ISA; buf (NULL for F32 rows) holds a tile of widened
 * rows, ptrs their addresses. */
struct attn_ctx {
	const struct attn_kernels *k, *kf;
	float *buf;
	const void **ptrs;
	size_t kbytes, vbytes; /* bytes of a stored K / V row */
};

/* Reads every cache line of rows [t0, t1) of R (bytes each), doing
 * nothing with them, before a kernel computes on them. One block of
 * queries (a decode row's heads) reads each K and V row once, and at a
 * server's contexts they come from DRAM (16 sequences of a few hundred
 * tokens: ~80 MB a step, scattered in 8 KB blocks). The kernels' loads
 * then sit among their FMAs, so few are in flight at once; this loop is a
 * load and an OR a line, and keeps many more going. Measured on Zen 5 at
 * 256 keys from DRAM (attn_bench --cold): touch first, then compute, 18 us
 * a call against 35 for the kernels alone (software prefetches of the
 * same lines: 31). */
static inline uint64_t line_word(const char *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static void rows_touch(const void *const *R, int64_t t0, int64_t t1, size_t bytes)
{
	uint64_t x0 = 0, x1 = 0;
	for (int64_t j = t0; j < t1; j++) {
		const char *r = R[j];
		size_t o = 0;
		for (; o + 256 <= bytes; o += 256) {
			x0 |= line_word(r + o) | line_word(r + o + 64);
			x1 |= line_word(r + o + 128) | line_word(r + o + 192);
		}
		for (; o + sizeof x0 <= bytes; o += 64) /* (a row of fewer than 8 bytes: none) */
			x0 |= line_word(r + o);
	}
	__asm__ volatile("" : : "r"(x0 | x1)); /* the loads are the point: keep them */
}

/* Whether a tile's rows are read as stored (one block of queries, or F32
 * rows) rather than widened into c->buf (tile_rows). */
static bool tile_as_stored(const struct attn_ctx *c, int nq)
{
	return !c->buf || nq <= ATTN_BLOCK;
}

/* Prefetches into L2 every line of rows [t0, t1) of R (bytes each): the
 * next tile's, while this one is touched and computed, so that its loads
 * are in flight during the arithmetic instead of after it. Every line
 * (one in two or four: no gain) and prefetcht1 (prefetcht0: no gain; the
 * L1's miss buffers are what rows_touch already fills). Measured on the
 * Zen 4 host, a decode row's 4 heads over F16 rows from DRAM
 * (attn_bench --f16 --rows 1 --cold), three alternating rounds: 256 rows
 * 44-50 -> 41-42 us, 1024 rows 171-182 -> 147-152; cache-resident rows
 * (no --cold) 17-19 -> 21-24 us at 256, the prefetches' own cost. A
 * server's rows come from DRAM: `ingot bench --batch 16 --depth 270
 * --profile`, attention 7.7 / 8.0 -> 7.0 / 7.1 ms a step. */
static void rows_prefetch(const void *const *R, int64_t t0, int64_t t1, size_t bytes)
{
	for (int64_t j = t0; j < t1; j++)
		for (size_t o = 0; o < bytes; o += 64)
			__builtin_prefetch((const char *)R[j] + o, 0, 2);
}

/* The tile of R (bytes a row) that starts at t0 within g prefetched, where
 * its rows will be read as stored and t0 is inside g. */
static void tile_prefetch(const struct attn_ctx *c, int nq, const void *const *R,
			  struct attn_span g, int64_t t0, size_t bytes)
{
	if (tile_as_stored(c, nq) && t0 < g.hi)
		rows_prefetch(R, t0, tile_end(g, t0), bytes);
}

/* Rows [t0, t1) of R (D values, bytes bytes each): as stored when one
 * block of queries reads them (touched first, see rows_touch), else
 * widened once into c->buf and read as F32 by every block (the same
 * values, so the same bits; F16 and Q8_0 rows cost a conversion per load,
 * which several blocks would each pay). */
static struct attn_rows tile_rows(const struct attn_ctx *c, const void *const *R, int64_t t0,
				  int64_t t1, int64_t D, size_t bytes, int nq)
{
	if (tile_as_stored(c, nq)) {
		rows_touch(R, t0, t1, bytes);
		return (struct attn_rows){ R, 0, c->k };
	}
	for (int64_t j = t0; j < t1; j++) {
		float *w = c->buf + (j - t0) * D;
		c->k->widen(w, R[j], D);
		c->ptrs[j - t0] = w;
	}
	return (struct attn_rows){ c->ptrs, t0, c->kf };
}

/* The raw dots of every query with the rows of its range, tile by tile;
 * a block's dots run over the union of its queries' ranges (the extra
 * ones are never read). */
static void group_dots(const struct ops_attn_query *qs, int nq, const void *const *K,
		       const void *const *V, int64_t Dh, struct attn_span g, float *scratch,
		       const struct attn_ctx *c)
{
	for (int64_t t0 = g.lo; t0 < g.hi; t0 += ATTN_TILE) {
		const int64_t t1 = tile_end(g, t0);
		if (t1 < g.hi) /* the next K tile; after the last, V's first */
			tile_prefetch(c, nq, K, g, t1, c->kbytes);
		else
			tile_prefetch(c, nq, V, g, g.lo, c->vbytes);
		const struct attn_rows t = tile_rows(c, K, t0, t1, Dh, c->kbytes, nq);
		for (int b = 0; b < nq; b += ATTN_BLOCK) {
			const int nb = nq - b < ATTN_BLOCK ? nq - b : ATTN_BLOCK;
			const float *q[ATTN_BLOCK];
			int64_t ja = t1, jb = t0;
			for (int a = 0; a < nb; a++) {
				int64_t qa, qb;
				tile_cut(&qs[b + a], t0, t1, &qa, &qb);
				q[a] = qs[b + a].q;
				if (qa < qb) {
					ja = qa < ja ? qa : ja;
					jb = qb > jb ? qb : jb;
				}
			}
			if (ja < jb)
				t.k->qk(q, nb, t.rows + (ja - t.base), jb - ja, Dh,
					scratch + b * g.span + (ja - g.lo), g.span);
		}
	}
}

/* P.V of the queries of block [b, b + nb) over tile [t0, t1): the rows all
 * of them read together in one kernel call, any rows before or after that
 * per query, so each output still takes its rows in increasing order. */
static void block_pv(const struct ops_attn_query *qs, int b, int nb, struct attn_rows t,
		     int64_t Dv, struct attn_span g, const float *scratch, int64_t t0, int64_t t1)
{
	int64_t qa[ATTN_BLOCK], qb[ATTN_BLOCK], ca = t0, cb = t1;
	float *out[ATTN_BLOCK];
	const float *p[ATTN_BLOCK];
	for (int a = 0; a < nb; a++) {
		tile_cut(&qs[b + a], t0, t1, &qa[a], &qb[a]);
		ca = qa[a] > ca ? qa[a] : ca;
		cb = qb[a] < cb ? qb[a] : cb;
		out[a] = qs[b + a].out;
		p[a] = scratch + (b + a) * g.span; /* p[a][j - g.lo]: row j's weight */
	}
	if (ca >= cb) /* no row common to all: each alone */
		ca = cb = t1;
	for (int a = 0; a < nb; a++) {
		const int64_t e = qb[a] < ca ? qb[a] : ca;
		if (qa[a] < e)
			t.k->pv(&out[a], &(const float *){ p[a] + (qa[a] - g.lo) }, 1,
				t.rows + (qa[a] - t.base), e - qa[a], Dv);
	}
	if (ca < cb) {
		const float *pc[ATTN_BLOCK];
		for (int a = 0; a < nb; a++)
			pc[a] = p[a] + (ca - g.lo);
		t.k->pv(out, pc, nb, t.rows + (ca - t.base), cb - ca, Dv);
	}
	for (int a = 0; a < nb; a++) {
		if (cb > ca && cb < qb[a])
			t.k->pv(&out[a], &(const float *){ p[a] + (cb - g.lo) }, 1,
				t.rows + (cb - t.base), qb[a] - cb, Dv);
	}
}

static int64_t n_of(const struct ops_attn_query *q) { return q->hi - q->lo; }

/* Each query's scores, their max and softmax, as attend() does them (the
 * outputs zeroed for P.V); four queries of one length at a time go
 * through softmax_weights4. */
static void group_softmax(const struct ops_attn_query *qs, int nq, struct attn_span g, float scale,
			  float softcap, int64_t Dv, float *scratch, const struct attn_kernels *k)
{
	float *s[OPS_ATTEND_GROUP_MAX], mx[OPS_ATTEND_GROUP_MAX];
	for (int i = 0; i < nq; i++) {
		s[i] = scratch + i * g.span + (qs[i].lo - g.lo);
		if (softcap > 0.0f) {
			mx[i] = -INFINITY;
			for (int64_t j = 0; j < n_of(&qs[i]); j++) {
				s[i][j] = score(s[i][j], scale, softcap);
				if (s[i][j] > mx[i])
					mx[i] = s[i][j];
			}
		} else { /* score() without a softcap: one multiply */
			mx[i] = k->scale_max(s[i], n_of(&qs[i]), scale);
		}
		memset(qs[i].out, 0, (size_t)Dv * sizeof *qs[i].out);
	}
	for (int i = 0; i < nq;) {
		const int64_t n = n_of(&qs[i]);
		if (i + 4 <= nq && n_of(&qs[i + 1]) == n && n_of(&qs[i + 2]) == n &&
		    n_of(&qs[i + 3]) == n) {
			softmax_weights4(s + i, n, mx + i, k);
			i += 4;
		} else {
			softmax_weights(s[i], n, mx[i], k);
			i++;
		}
	}
}

/* attend() for a group of queries: all dots (tile by tile, each K tile
 * read by every block of queries while in L1), then per query the same
 * scores, max and softmax as attend(), then P.V tile by tile. Per query
 * every value goes through the same operations in the same j order as
 * attend(). */
static void attend_group(const struct ops_attn_query *qs, int nq, const void *const *K,
			 const void *const *V, int64_t Dh, int64_t Dv, float scale,
			 float softcap, float *scratch, enum ops_kv_type kt,
			 const struct attn_kernels *k, const struct attn_kernels *kf)
{
	struct attn_span g = { qs[0].lo, qs[0].hi, 0 };
	for (int i = 1; i < nq; i++) {
		g.lo = qs[i].lo < g.lo ? qs[i].lo : g.lo;
		g.hi = qs[i].hi > g.hi ? qs[i].hi : g.hi;
	}
	g.span = g.hi - g.lo;
	const void *ptrs[ATTN_TILE];
	const struct attn_ctx c = { k, kf, k == kf ? NULL : scratch + (size_t)nq * (size_t)g.span,
				    ptrs, ops_kv_row_bytes(kt, Dh), ops_kv_row_bytes(kt, Dv) };
	group_dots(qs, nq, K, V, Dh, g, scratch, &c);
	group_softmax(qs, nq, g, scale, softcap, Dv, scratch, k);
	for (int64_t t0 = g.lo; t0 < g.hi; t0 += ATTN_TILE) {
		const int64_t t1 = tile_end(g, t0);
		tile_prefetch(&c, nq, V, g, t1, c.vbytes);
		const struct attn_rows t = tile_rows(&c, V, t0, t1, Dv, c.vbytes, nq);
		for (int b = 0; b < nq; b += ATTN_BLOCK)
			block_pv(qs, b, nq - b < ATTN_BLOCK ? nq - b : ATTN_BLOCK, t, Dv, g, scratch,
				 t0, t1);
	}
}

void ops_attend_ref(float *out, const float *q, const void *const *K, const void *const *V,
		    enum ops_kv_type kt, int64_t n, int64_t Dh, int64_t Dv, float scale,
		    float softcap, float *scratch)
{
	attend(out, q, K, V, n, Dh, Dv, scale, softcap, scratch, &attn_sets[0][kt]);
}

static const struct attn_kernels *attn_best(enum ops_kv_type kt)
{
	pthread_once(&isa_once, isa_init);
	return &attn_sets[isa_level][kt];
}

void ops_attend_group(const struct ops_attn_query *qs, int nq, const void *const *K,
		      const void *const *V, enum ops_kv_type kt, int64_t Dh, int64_t Dv,
		      float scale, float softcap, float *scratch)
{
	if (nq > 0)
		attend_group(qs, nq, K, V, Dh, Dv, scale, softcap, scratch, kt, attn_best(kt),
			     attn_best(OPS_KV_F32));
}

size_t ops_attend_group_scratch(int nq, int64_t span, int64_t Dh, int64_t Dv,
				enum ops_kv_type kt)
{
	size_t n = (size_t)nq * (size_t)span;
	if (kt != OPS_KV_F32) /* a tile of widened rows */
		n += (size_t)ATTN_TILE * (size_t)(Dh > Dv ? Dh : Dv);
	return n;
}

void ops_attend(float *out, const float *q, const void *const *K, const void *const *V,
		enum ops_kv_type kt, int64_t n, int64_t Dh, int64_t Dv, float scale, float softcap,
		float *scratch)
{
	attend(out, q, K, V, n, Dh, Dv, scale, softcap, scratch, attn_best(kt));
}

/* The quant type a KV row format is. */
static enum qtype kv_qtype(enum ops_kv_type kt)
{
	return kt == OPS_KV_F16 ? QTYPE_F16 : kt == OPS_KV_Q8_0 ? QTYPE_Q8_0 : QTYPE_F32;
}

/* F16 and Q8_0 rows through the quant table's quantizers (F16C and the
 * activation quantizer where the CPU has them; the reference bits). */
void ops_kv_store(void *dst, const float *x, int64_t n, enum ops_kv_type kt)
{
	pthread_once(&isa_once, isa_init);
	ops_quantize_act(kv_quant, kv_qtype(kt), x, dst, n);
}

size_t ops_kv_row_bytes(enum ops_kv_type kt, int64_t n)
{
	uint64_t b = 0;
	return qtype_row_bytes(kv_qtype(kt), (uint64_t)n, &b) ? 0 : (size_t)b;
}

/* ops_sum_exp's order of eight partial sums */
static double sum_lanes(const double s[8])
{
	return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

double ops_exp_blocks_ref(float *y, const float *x, int64_t n, float mx, float div,
			  double *blocks)
{
	double total = 0;
	for (int64_t b = 0; b * OPS_EXP_BLOCK < n; b++) {
		const int64_t end = n - b * OPS_EXP_BLOCK > OPS_EXP_BLOCK ? (b + 1) * OPS_EXP_BLOCK
									    : n;
		double s[8] = { 0 };
		for (int64_t j = b * OPS_EXP_BLOCK; j < end; j++) {
			y[j] = ops_exp_poly((x[j] - mx) / div);
			s[j & 7] += y[j];
		}
		if (blocks)
			blocks[b] = sum_lanes(s);
		total += sum_lanes(s);
	}
	return total;
}

double ops_exp_blocks(float *y, const float *x, int64_t n, float mx, float div, double *blocks)
{
	pthread_once(&isa_once, isa_init);
	return isa_level >= LEVEL_AVX2 ? ops_exp_blocks_avx2(y, x, n, mx, div, blocks)
				       : ops_exp_blocks_ref(y, x, n, mx, div, blocks);
}

int64_t ops_logits_scan_ref(float *x, int64_t n, int64_t *best)
{
	int64_t count = 0, b = 0;
	float mx = -INFINITY;
	for (int64_t i = 0; i < n; i++) {
		if (x[i] != x[i])
			x[i] = -INFINITY;
		if (!(x[i] > -INFINITY))
			continue;
		count++;
		if (x[i] > mx) {
			mx = x[i];
			b = i;
		}
	}
	*best = b;
	return count;
}

/* ops_argmax's index through the ops_best scan (8 at a time with AVX2). */
static int64_t argmax_fast(const float *x, int64_t n)
{
	struct ops_best b;
	ops_best_init(&b);
	ops_best_scan(&b, x, 0, n);
	return ops_best_index(&b, x);
}

int64_t ops_logits_scan(float *x, int64_t n, int64_t *best)
{
	pthread_once(&isa_once, isa_init);
	if (isa_level < LEVEL_AVX2)
		return ops_logits_scan_ref(x, n, best);
	/* with the NaNs gone, the first of the largest is ops_argmax's */
	const int64_t count = ops_logits_count_avx2(x, n);
	*best = count ? argmax_fast(x, n) : 0;
	return count;
}

double ops_sum_exp_ref(const float *x, int64_t n, float mx)
{
	double s[8] = { 0 };
	for (int64_t i = 0; i < n; i++)
		s[i & 7] += ops_exp_poly(x[i] - mx);
	return sum_lanes(s);
}

double ops_sum_exp(const float *x, int64_t n, float mx)
{
	pthread_once(&isa_once, isa_init);
	return isa_level >= LEVEL_AVX2 ? ops_sum_exp_avx2(x, n, mx) : ops_sum_exp_ref(x, n, mx);
}

float ops_logsumexp(const float *x, int64_t n)
{
	const float mx = x[argmax_fast(x, n)];
	return mx + (float)log(ops_sum_exp(x, n, mx));
}

int64_t ops_count_above_ref(const float *x, int64_t n, float v)
{
	int64_t c = 0;
	for (int64_t i = 0; i < n; i++)
		c += x[i] > v;
	return c;
}

int64_t ops_count_above(const float *x, int64_t n, float v)
{
	pthread_once(&isa_once, isa_init);
	return isa_level >= LEVEL_AVX2 ? ops_count_above_avx2(x, n, v)
				       : ops_count_above_ref(x, n, v);
}

int64_t ops_first_above_ref(const float *x, int64_t n, float v)
{
	int64_t i = 0;
	while (i < n && !(x[i] > v))
		i++;
	return i;
}

int64_t ops_first_above(const float *x, int64_t n, float v)
{
	pthread_once(&isa_once, isa_init);
	return isa_level >= LEVEL_AVX2 ? ops_first_above_avx2(x, n, v)
				       : ops_first_above_ref(x, n, v);
}

int64_t ops_collect_above_ref(const float *x, int64_t n, float v, int32_t *idx)
{
	int64_t c = 0;
	for (int64_t i = 0; i < n; i++)
		if (x[i] > v)
			idx[c++] = (int32_t)i;
	return c;
}

int64_t ops_collect_above(const float *x, int64_t n, float v, int32_t *idx)
{
	pthread_once(&isa_once, isa_init);
	return isa_level >= LEVEL_AVX2 ? ops_collect_above_avx2(x, n, v, idx)
				       : ops_collect_above_ref(x, n, v, idx);
}

int ops_top_k_ref(const float *x, int64_t n, int k, int32_t *ids, float *vals)
{
	int m = 0;
	for (int64_t i = 0; i < n && k > 0; i++)
		if (x[i] > ops_top_worst(vals, k, m))
			ops_top_insert(ids, vals, k, &m, x[i], i);
	return m;
}

int ops_top_k(const float *x, int64_t n, int k, int32_t *ids, float *vals)
{
	pthread_once(&isa_once, isa_init);
	return isa_level >= LEVEL_AVX2 ? ops_top_k_avx2(x, n, k, ids, vals)
				       : ops_top_k_ref(x, n, k, ids, vals);
}

int64_t ops_argmax(const float *x, int64_t n)
{
	int64_t best = 0;
	for (int64_t i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

void ops_best_init(struct ops_best *b) { *b = (struct ops_best){ 0.0f, OPS_BEST_NONE }; }

void ops_best_scan_scalar(struct ops_best *b, const float *x, int64_t i0, int64_t i1)
{
	for (int64_t i = i0; i < i1; i++)
		/* x == x: not NaN */
		if (x[i] > b->val || (b->idx == OPS_BEST_NONE && x[i] == x[i])) {
			b->val = x[i];
			b->idx = i;
		}
}

void ops_best_scan(struct ops_best *b, const float *x, int64_t i0, int64_t i1)
{
	pthread_once(&isa_once, isa_init);
	if (isa_level == LEVEL_AVX512)
		ops_best_scan_avx512(b, x, i0, i1);
	else if (isa_level >= LEVEL_AVX2)
		ops_best_scan_avx2(b, x, i0, i1);
	else
		ops_best_scan_scalar(b, x, i0, i1);
}

/* The scan in x's frame: b's index moved base back for it (an index
 * before base goes negative there, which is why "none" is INT64_MIN and
 * not -1) and forward again after. */
void ops_best_scan_at(struct ops_best *b, const float *x, int64_t base, int64_t i0, int64_t i1)
{
	if (b->idx != OPS_BEST_NONE)
		b->idx -= base;
	ops_best_scan(b, x, i0 - base, i1 - base);
	if (b->idx != OPS_BEST_NONE)
		b->idx += base;
}

/* ops_argmax is the first index of the maximum over the non-NaN elements
 * (a NaN never compares greater, and a non-NaN never beats a NaN x[0]).
 * Each partial result is such a first maximum over a subset, so the whole
 * row's is the largest value, lowest index on ties; -0 == +0 keeps the
 * lowest index, as ops_argmax's strict > does. */
void ops_best_merge(struct ops_best *into, const struct ops_best *b)
{
	if (b->idx != OPS_BEST_NONE &&
	    (into->idx == OPS_BEST_NONE || b->val > into->val ||
	     (b->val == into->val && b->idx < into->idx)))
		*into = *b;
}

int64_t ops_best_index(const struct ops_best *b, const float *x)
{
	return x[0] != x[0] || b->idx == OPS_BEST_NONE ? 0 : b->idx;
}
