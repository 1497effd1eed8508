/* quant.h — tensor element types, block formats and the kernels over them.
 *
 * Type ids are GGUF's (ggml's) so a tensor's type field indexes straight in.
 * Every quantized weight type is dotted against *quantized activations* in a
 * companion format (qtype_traits()->act_type): Q8_0 for the 32-element
 * legacy quants, Q8_1 for Q4_1/Q5_1, Q8_K for the 256-element K-quants, F32
 * for float weights. Activations are quantized once per input vector and
 * reused by every row of every matrix that consumes them.
 *
 * Kernels come in pairs: quant_ref.c holds the portable scalar reference (the
 * ground truth), quant_avx2.c, quant_gemm_avx2.c (with its VNNI builds
 * quant_gemm_avx512.c, quant_gemm_avxvnni.c) and quant_gemm_k_avx2.c the
 * SIMD versions, picked at run time from cpuid by quant_kernels_best().
 * Tests compare each SIMD kernel with the reference on random data.
 *
 * Names: n = number of elements in a row (a multiple of the block size). */
#ifndef INGOT_QUANT_H
#define INGOT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum qtype {
	QTYPE_F32 = 0,
	QTYPE_F16 = 1,
	QTYPE_Q4_0 = 2,
	QTYPE_Q4_1 = 3,
	QTYPE_Q5_0 = 6,
	QTYPE_Q5_1 = 7,
	QTYPE_Q8_0 = 8,
	QTYPE_Q8_1 = 9,
	QTYPE_Q2_K = 10,
	QTYPE_Q3_K = 11,
	QTYPE_Q4_K = 12,
	QTYPE_Q5_K = 13,
	QTYPE_Q6_K = 14,
	QTYPE_Q8_K = 15,
	QTYPE_BF16 = 30,
	QTYPE_COUNT = 40, /* size of per-type tables; ids >= this are unknown */
};

#define QK 32    /* elements per block of the legacy quants */
#define QK_K 256 /* elements per super-block of the K-quants */

/* Static description of a type. */
struct qtype_traits {
	const char *name;         /* "Q4_K", as ggml and gguf-py spell it */
	uint32_t block_elems;     /* elements per block (1 for float types) */
	uint32_t block_bytes;     /* bytes per block */
	enum qtype act_type;      /* activation format its dot product takes */
};

/* Traits of type id t, or NULL when ingot does not read that type. */
const struct qtype_traits *qtype_traits(uint32_t t);

/* Bytes of a row of n elements of type t into *bytes. Returns 0, or -1 when t
 * is unknown or n is not a multiple of the block size. */
int qtype_row_bytes(uint32_t t, uint64_t n, uint64_t *bytes);

/* ---- half-precision helpers (exact, IEEE round-to-nearest-even) ---- */
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
static inline float bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}
uint16_t f32_to_bf16(float f);

/* ---- scalar reference kernels (quant_ref.c) ---- */

/* dst[0..n) = the values stored in src (n elements of type t), with the
 * float expressions of ggml's dequantize_row_* (so bit-identical to ggml
 * and to gguf-py's gguf.quants.dequantize). */
void quant_dequantize_ref(enum qtype t, const void *src, float *dst, int64_t n);

/* Quantizes n finite floats into type t. Defined for every type qtype_traits
 * knows. Legacy types (Q4_0 .. Q5_1) and Q8_K follow ggml's reference
 * quantizers; Q8_0/Q8_1 follow llama.cpp's x86 run-time kernels
 * (d = amax/127, q = rint(x * (127/amax)), ties to even); Q8_K:
 * d = max/-127 with max the first element of largest |x|, nearest-even
 * rounding, bsums); for Q2_K..Q6_K a simple round-to-nearest quantizer:
 * exact format, not llama.cpp's error-minimizing search. */
void quant_quantize_ref(enum qtype t, const float *src, void *dst, int64_t n);

/* Dot product of a weight row w (type t, n elements) with an activation row
 * a already quantized to qtype_traits(t)->act_type. Like ggml: exact integer
 * sums per (sub-)block, then scaled in float. Activations must come from
 * quant_quantize_ref or a quantize_act kernel: the SIMD kernels rely on
 * their quants never being -128. */
float quant_dot_ref(enum qtype t, const void *w, const void *a, int64_t n);

/* ---- run-time kernel selection ---- */

enum quant_isa {
	QUANT_ISA_SCALAR = 0,
	QUANT_ISA_AVX2,    /* AVX2 + FMA + F16C */
	QUANT_ISA_AVXVNNI, /* AVX2's, with AVX-VNNI for the legacy types */
	QUANT_ISA_AVX512,  /* AVX2's, with AVX512-VNNI + VL (F/BW/DQ too) for the legacy types */
	QUANT_ISA_AMX,     /* AVX-512's, with AMX-INT8 tiles for repacked batches (packed groups) */
	QUANT_ISA_COUNT,
};

typedef void (*quant_dot_fn)(int64_t n, float *out, const void *w, const void *a);
typedef void (*quant_quantize_fn)(const float *x, void *dst, int64_t n);

/* Most activation rows one dot_multi kernel call takes. */
#define QUANT_MULTI_MAX 4

/* One weight row w against ncols (1 .. QUANT_MULTI_MAX) activation rows,
 * the first at a, the next a_stride bytes further each: out[c] = dot of w
 * with row c. Each weight block is unpacked once for all the rows. The
 * result for every row is bit-for-bit what the same table's dot entry
 * returns for that row alone (same integer sums, same float operations in
 * the same order), so a row's result does not depend on the batch it is
 * computed in. a_stride must keep every row aligned like its blocks (a
 * multiple of 4 bytes does for every activation format). */
typedef void (*quant_dot_multi_fn)(int64_t n, float *out, const void *w, const void *a,
				   size_t a_stride, int ncols);

/* ---- matrix kernels (weights x a batch of activation rows) ----
 *
 * A gemm kernel multiplies weight rows r0 .. r1-1 (w_stride bytes apart
 * from w, row r at w + r * w_stride) by T activation rows (the first at a,
 * a_stride bytes apart) into y[t * y_stride + r]. Each result is bit for
 * bit what the same table's dot entry gives for that row pair alone, for
 * any T, r0 and r1: a token's logits do not depend on its batch.
 *
 * Besides the plain rows, the kernels read the rows of every full group of
 * QUANT_GEMM_GROUP tokens (rows 0 .. T - T % QUANT_GEMM_GROUP) regrouped by
 * quant_gemm_pack_row into `packed`; from T >= QUANT_GEMM_PACK_MIN on, all T
 * rows are packed and `packed` is required, below it is NULL. A partial
 * last group of QUANT_GEMM_PACK_MIN or more tokens may be computed as a
 * group (its other lanes hold whatever the buffer held and are computed
 * and dropped; the kernel decides from how many tokens on, e.g. the AVX2
 * Q8_0 kernel from 7); fewer leftover tokens go through a kernel that
 * reads the plain rows. The activation rows are packed in the weight
 * type's act_type: Q8_0 (Q4_0, Q5_0, Q8_0 weights) or Q8_K (Q4_K, Q6_K).
 *
 * r_pf: rows [r1, r_pf) of the same matrix are the caller's next (a
 * runner taking a thread's rows chunk by chunk): kernels that prefetch
 * rows ahead of their own go on into those, so the next call's first rows
 * are not read cold. r_pf <= r1: none. Only addresses; never read. */
#define QUANT_GEMM_GROUP 8
#define QUANT_GEMM_PACK_MIN 4

typedef void (*quant_gemm_fn)(int64_t n, const void *w, size_t w_stride, int64_t r0, int64_t r1,
			      const void *a, size_t a_stride, const void *packed, int64_t T,
			      float *y, int64_t y_stride, int64_t r_pf);

/* The rows worth verifying out of T in one step of a speculating
 * sequence: T itself, except that 1 .. QUANT_GEMM_PACK_MIN - 1 rows past a
 * full group are dropped (T > QUANT_GEMM_GROUP). Leftover rows cost a pass
 * over every weight row per two of them (four for the AVX2 Q8_0 kernel;
 * measured: about half a batch-1 step each pass), more than the deepest,
 * least likely draft tokens are worth; from QUANT_GEMM_PACK_MIN on they
 * run as one more group (or passes as good). */
int64_t quant_gemm_rows_trim(int64_t T);

/* Bytes of a packed buffer for `rows` activation rows of format act
 * (QTYPE_Q8_0 or QTYPE_Q8_K, the formats gemm kernels read) of n elements
 * (a multiple of act's block size); 0 for another format or on overflow. */
size_t quant_gemm_pack_bytes(enum qtype act, int64_t n, int64_t rows);

/* Writes activation row t (format act, n elements at row) into its place
 * in packed. Rows of one group may be written by different threads: each
 * writes only its own words. */
void quant_gemm_pack_row(enum qtype act, const void *row, int64_t n, int64_t t, void *packed);

/* ---- weights repacked 16 rows to a tile ----
 *
 * Q8_0, Q5_0 (below) and Q4_K, Q6_K (quant_int.h: super-blocks of 16
 * rows, their own layout) matrices are copied at load into tiles of
 * QUANT_R16_ROWS rows (the last padded with rows of zeros), for kernels
 * that put the 16 rows in the lanes of one 512-bit vector: no horizontal
 * sums, one linear stream per thread, and each weight vector reused for
 * every token. The quants are stored unsigned, u = q + o (Q8_0: o = 128;
 * Q5_0: o = 16, its 5-bit value as stored), the unsigned operand of
 * vpdpbusd: sum u * a = sum q * a + o * sum a, exact.
 *
 * Q8_0 and Q5_0: a tile of n-element rows (nb = n / QK blocks) is a run
 * of block pairs:
 * one cache line with the pair's scales (block 2p, then 2p + 1: 16 fp16
 * each, row j's at 2 * j), then each block's quants; an odd last block
 * is a pair of one (its line of scales half used). A block's quants, in
 * quad vectors (quad vector k: row j's quants 4k .. 4k+3 at bytes 4j ..
 * 4j+3):
 *  - Q8_0: the 8 quad vectors of u, 64 bytes each (512 bytes);
 *  - Q5_0: 4 vectors of 64 nibble bytes, vector v holding row j's qs
 *    bytes 4v .. 4v+3 at 4j (low nibbles: quad vector v; high nibbles:
 *    quad vector v + 4), then 64 bytes of masks laid out as a quad
 *    vector, bit k of byte 4j + e the fifth bit of row j's quant 4k + e
 *    (320 bytes): a shift and an AND give a quad vector's bits in place
 *    (AVX2), one vptestmb its 64-bit mask (AVX-512).
 * Scales and quants in one stream: with the scales in a run of their own
 * after the quads, the hardware prefetcher lost a quarter of the
 * streaming rate.
 *
 * A table's gemm_r16[t] entry takes the packed matrix as w and the plain
 * rows' stride as w_stride, any r0 .. r1 (rows of a tile outside it are
 * computed and dropped), and gives every output bit for bit what the
 * table's dot entry for t gives on the original row. */
#define QUANT_R16_ROWS 16
#define QUANT_R16_MAX_BLOCKS 512 /* longest row: 16384 elements */

/* Whether type t has a repacked layout (Q8_0, Q5_0, Q4_K, Q6_K), and
 * whether it is one of the K types (layout in quant_int.h: super-blocks,
 * Q8_K activations, the contract of quant_gemm_k_avx2.c). */
bool quant_r16_type(enum qtype t);
/* (inline: the kernels test it in their inner loops, where a call would
 * spill every vector register) */
static inline bool quant_r16_k_type(enum qtype t)
{
	return t == QTYPE_Q4_K || t == QTYPE_Q6_K;
}

/* Bytes of one block's quants for a tile's 16 rows (Q8_0 512, Q5_0 256 of
 * nibbles + 64 of masks), and of a block pair with its line of scales. */
#define QUANT_R16_SCALES_LINE 64
static inline size_t quant_r16_block_quant_bytes(enum qtype t)
{
	return t == QTYPE_Q8_0 ? QUANT_R16_ROWS * QK : QUANT_R16_ROWS * QK / 2 + QUANT_R16_ROWS * QK / 8;
}
static inline size_t quant_r16_pair_bytes(enum qtype t)
{
	return QUANT_R16_SCALES_LINE + 2 * quant_r16_block_quant_bytes(t);
}

/* Bytes of one tile of n-element rows of type t, and of a packed matrix
 * of `rows` rows (0 for another type, on overflow, or when n is not a
 * multiple of QK or longer than QUANT_R16_MAX_BLOCKS blocks: such rows
 * are not repacked). */
size_t quant_r16_tile_bytes(enum qtype t, int64_t n);
size_t quant_r16_bytes(enum qtype t, int64_t n, int64_t rows);

/* Packs rows [0, rows) of the type t matrix w (n-element rows,
 * contiguous) into dst (quant_r16_bytes(t, n, rows) bytes). */
void quant_r16_pack(enum qtype t, const void *w, int64_t n, int64_t rows, void *dst);

/* Row `row` of the packed matrix p back as a type t row into dst: exactly
 * the row packed. */
void quant_r16_unpack_row(enum qtype t, const void *p, int64_t n, int64_t row, void *dst);

/* Row `row` of the packed matrix p as floats into dst[0..n): exactly
 * quant_dequantize_ref of the row packed (a tied embedding's lookup). */
void quant_r16_dequantize_row(enum qtype t, const void *p, int64_t n, int64_t row, float *dst);

/* The scalar reference of the gemm_r16 entries: per output, the SIMD
 * tables' order (acc = fma(dw * da, isum, acc) block by block), on the
 * plain rows only (packed is ignored). */
void quant_gemm_r16_ref(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r0,
			int64_t r1, const void *a, size_t a_stride, const void *packed, int64_t T,
			float *y, int64_t y_stride);

/* One kernel table per ISA. A NULL dot entry means "use the reference"; a
 * NULL dot_multi entry means "call dot once per row" (quant_dot_multi does
 * that, so callers need not care); a NULL gemm entry means the type has no
 * matrix kernel (callers use quant_dot_multi). */
struct quant_kernels {
	enum quant_isa isa;
	quant_dot_fn dot[QTYPE_COUNT];               /* indexed by weight type */
	quant_dot_multi_fn dot_multi[QTYPE_COUNT];   /* indexed by weight type */
	quant_gemm_fn gemm[QTYPE_COUNT];             /* indexed by weight type */
	quant_quantize_fn quantize_act[QTYPE_COUNT]; /* indexed by act type */
	/* weights repacked 16 rows to a tile (quant_r16_pack above), indexed
	 * by weight type; NULL: no such kernel, use the plain rows */
	quant_gemm_fn gemm_r16[QTYPE_COUNT];
};

/* out[c] = dot of weight row w (type t, n elements) with activation row c,
 * for c < ncols, the rows a_stride bytes apart from a. Any ncols >= 0: the
 * rows go to k's dot_multi kernel QUANT_MULTI_MAX at a time, or one by one
 * to its dot where the type has no multi kernel. Bit-identical, row by row,
 * to calling k->dot[t] on each row alone. */
void quant_dot_multi(const struct quant_kernels *k, enum qtype t, int64_t n, float *out,
		     const void *w, const void *a, size_t a_stride, int ncols);

/* The ISA whose kernels run: the best this CPU (and OS, for AVX-512
 * state) supports and ingot has. The SIMD tables give the same results bit
 * for bit (the VNNI ones differ from AVX2's only in how the legacy types'
 * integer sums are formed). The environment variable
 * INGOT_ISA=scalar|avx2|avxvnni|avx512|amx picks another the CPU supports
 * (INGOT_ISA=scalar runs the reference everywhere); unknown values and
 * ISAs the CPU lacks are ignored. The first call builds the tables
 * (quant_kernels_get: on an AMX host that asks for the tile permission and
 * runs the AMX self-check); later ones are a few cpuid instructions. Call
 * it once and keep the table from quant_kernels_best() rather than in a
 * hot loop. */
enum quant_isa quant_isa_detect(void);
const char *quant_isa_name(enum quant_isa isa);

/* Why the amx table is or is not offered here, in a few words ("available";
 * "no AMX-INT8 in CPUID"; "arch_prctl(ARCH_REQ_XCOMP_PERM): <error>";
 * ...), for bench and info output. Static storage, never NULL. */
const char *quant_amx_status(void);

/* Kernel table for isa with every NULL entry filled from the reference, or
 * NULL when the CPU cannot run that ISA. quant_kernels_best() never fails
 * (it follows quant_isa_detect(), INGOT_ISA included).
 * Tables are static, built once on first call (thread-safe), never freed.
 * Every known type has a dot entry and a quantize_act entry (the latter
 * quantizes into that type; it is the reference except for the activation
 * formats Q8_0, Q8_1 and Q8_K and for F16 (the F16 KV cache's rows), whose
 * SIMD versions are byte-identical to quant_quantize_ref). Dot kernels may differ from quant_dot_ref only in the
 * order of float additions: the integer sums are the same. dot_multi entries
 * are set only where the ISA has a multi-row kernel for the type; within a
 * table they always agree bit for bit with the dot entry. */
const struct quant_kernels *quant_kernels_get(enum quant_isa isa);
const struct quant_kernels *quant_kernels_best(void);

/* The twin of table k for weights that avoid their type's most negative
 * quant (Q8_0: -128; quantizers write -127..127, but a file may hold it):
 * its matrix kernels may assume so and run faster (AVX2 Q8_0: one vpsignb
 * per product instead of two). On such weights every entry gives exactly
 * k's results; on others the narrow entries are wrong, so use the twin
 * only for models whose every matrix passes quant_weights_narrow. A twin
 * is its own twin; a table with no faster twin (the VNNI ones: their Q8_0
 * kernel needs no such assumption) and tables not from quant_kernels_get
 * are returned as is. */
const struct quant_kernels *quant_kernels_narrow(const struct quant_kernels *k);

/* Whether the nbytes of type t weights at w avoid the type's most negative
 * quant (see quant_kernels_narrow). Types with no narrow kernel: true.
 * Reads every block (about 15 ms for a 168 MB Q8_0 matrix in memory). */
bool quant_weights_narrow(enum qtype t, const void *w, uint64_t nbytes);

#endif
