/* quant_int.h — private to the quant module (quant*.c): block layouts and the
 * hooks between the ISA files.
 *
 * The structs below are byte-for-byte ggml's (ggml-common.h) so a GGUF
 * tensor's data can be cast to an array of them. Half-precision fields are
 * stored as raw uint16_t bits; convert with fp16_to_f32(). Within a block,
 * "element e" means the e-th value of the row the block covers. */
#ifndef INGOT_QUANT_INT_H
#define INGOT_QUANT_INT_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

/* ---- legacy 32-element blocks ---- */

struct block_q4_0 { /* e < 16: qs[e] & 15, else qs[e-16] >> 4; value (q-8)*d */
	uint16_t d;
	uint8_t qs[QK / 2];
};
struct block_q4_1 { /* value q*d + m */
	uint16_t d, m;
	uint8_t qs[QK / 2];
};
struct block_q5_0 { /* 5th bit of element e is bit e of qh; value (q-16)*d */
	uint16_t d;
	uint8_t qh[4];
	uint8_t qs[QK / 2];
};
struct block_q5_1 {
	uint16_t d, m;
	uint8_t qh[4];
	uint8_t qs[QK / 2];
};
struct block_q8_0 {
	uint16_t d;
	int8_t qs[QK];
};
struct block_q8_1 {
	uint16_t d;
	uint16_t s; /* d * sum(qs) */
	int8_t qs[QK];
};

/* ---- 256-element K-quant super-blocks ---- */

struct block_q2_K { /* 16 sub-blocks of 16: scale = scales&15, min = scales>>4 */
	uint8_t scales[QK_K / 16];
	uint8_t qs[QK_K / 4];
	uint16_t d, dmin;
};
struct block_q3_K { /* 16 sub-blocks of 16, 6-bit scales biased by 32 */
	uint8_t hmask[QK_K / 8];
	uint8_t qs[QK_K / 4];
	uint8_t scales[12];
	uint16_t d;
};
struct block_q4_K { /* 8 sub-blocks of 32, 6-bit scales and mins */
	uint16_t d, dmin;
	uint8_t scales[12];
	uint8_t qs[QK_K / 2];
};
struct block_q5_K {
	uint16_t d, dmin;
	uint8_t scales[12];
	uint8_t qh[QK_K / 8];
	uint8_t qs[QK_K / 2];
};
struct block_q6_K { /* 16 sub-blocks of 16, int8 scales */
	uint8_t ql[QK_K / 2];
	uint8_t qh[QK_K / 4];
	int8_t scales[QK_K / 16];
	uint16_t d;
};
struct block_q8_K { /* activations only: bsums[j] = sum of qs[16j .. 16j+16) */
	float d;
	int8_t qs[QK_K];
	int16_t bsums[QK_K / 16];
};

static_assert(sizeof(struct block_q4_0) == 18, "q4_0 layout");
static_assert(sizeof(struct block_q4_1) == 20, "q4_1 layout");
static_assert(sizeof(struct block_q5_0) == 22, "q5_0 layout");
static_assert(sizeof(struct block_q5_1) == 24, "q5_1 layout");
static_assert(sizeof(struct block_q8_0) == 34, "q8_0 layout");
static_assert(sizeof(struct block_q8_1) == 36, "q8_1 layout");
static_assert(sizeof(struct block_q2_K) == 84, "q2_K layout");
static_assert(sizeof(struct block_q3_K) == 110, "q3_K layout");
static_assert(sizeof(struct block_q4_K) == 144, "q4_K layout");
static_assert(sizeof(struct block_q5_K) == 176, "q5_K layout");
static_assert(sizeof(struct block_q6_K) == 210, "q6_K layout");
static_assert(sizeof(struct block_q8_K) == 292, "q8_K layout");

/* Splits the 12 packed bytes of a Q4_K/Q5_K block into 8 six-bit scales and
 * 8 six-bit mins (sub-block j covers elements 32j .. 32j+32). */
void quant_k4_scales_unpack(const uint8_t packed[12], uint8_t sc[8], uint8_t mn[8]);

/* The same 16 bytes (8 scales, then 8 mins) four at a time, as the words
 * w[0..3] of a little-endian vector: what the SIMD kernels widen to int16. */
static inline void quant_k4_scales_mins_words(const uint8_t p[12], uint32_t w[4])
{
	uint32_t u[3];
	memcpy(u, p, 12);
	w[0] = u[0] & 0x3f3f3f3f;
	w[1] = (u[2] & 0x0f0f0f0f) | ((u[0] >> 6) & 0x03030303) << 4;
	w[2] = u[1] & 0x3f3f3f3f;
	w[3] = ((u[2] >> 4) & 0x0f0f0f0f) | ((u[1] >> 6) & 0x03030303) << 4;
}

/* Same for Q3_K: 16 scales with the bias of 32 already removed. */
void quant_q3k_scales_unpack(const uint8_t packed[12], int8_t sc[16]);

/* ---- packed activation groups (quant_gemm_pack_row) ----
 *
 * Group g (tokens 8g .. 8g+7) of Q8_0 rows is a quant_gemm_block per 32-element
 * block b, in block order: 8 x 8 quads (elements 4k .. 4k+3 of token l as
 * the 4 bytes of quads[k][l]: a vpmaddubsw of 4 broadcast weight bytes
 * against row k gives the 8 tokens' products, two per int16), the 8
 * tokens' sums of their 32 quants (what an unsigned weight offset costs:
 * sum (q + o) * a = sum q * a + o * sum a), then their block scales as
 * float. */
struct quant_gemm_block {
	int32_t quads[QK / 4][QUANT_GEMM_GROUP];
	int32_t sums[QUANT_GEMM_GROUP];
	float d[QUANT_GEMM_GROUP];
};
static_assert(sizeof(struct quant_gemm_block) == 320, "packed block layout");

/* The groups a gemm kernel computes for T tokens (quant.h): the full
 * groups, and a partial last one of group_min (>= QUANT_GEMM_PACK_MIN:
 * below it nothing is packed) or more tokens (its other lanes computed
 * and dropped; fewer go through the kernel's plain-row path); none
 * without packed rows. */
static inline int64_t quant_gemm_groups(int64_t T, bool packed, int64_t group_min)
{
	if (!packed)
		return 0;
	return T / QUANT_GEMM_GROUP + (T % QUANT_GEMM_GROUP >= group_min);
}

/* Group g of Q8_K rows: a quant_gemm_kblock per 256-element super-block,
 * in order: 64 x 8 quads of activations (elements 4k .. 4k+3 of token l as
 * the 4 bytes of quads[k][l]: a vpmaddubsw of 4 broadcast unsigned weight
 * bytes against row k gives the 8 tokens' products, two per int16), the
 * pairs of 16-sums (bsums 2j and 2j+1 of token l as the int16 pair
 * bsum_pairs[j][l], low first: a vpmaddwd of a broadcast pair of weight
 * scales or mins weighs them), then the 8 scales. */
struct quant_gemm_kblock {
	int32_t quads[QK_K / 4][QUANT_GEMM_GROUP];
	int32_t bsum_pairs[QK_K / 32][QUANT_GEMM_GROUP];
	float d[QUANT_GEMM_GROUP];
};
static_assert(sizeof(struct quant_gemm_kblock) == 2336, "packed super-block layout");

/* ---- multi-row kernels (the ISA files' dot_multi entries) ----
 *
 * A kernel with a dot_multi twin is written once, as an always-inlined body
 * over nc activation rows, nc a constant 1 .. QUANT_MULTI_MAX at each
 * instance: each weight block is unpacked once, then every row runs the
 * float computation of the single-row kernel on its own accumulators: the
 * same int32 lanes per block, scaled by the same float product, FMA'd in the
 * same order, reduced the same way at the end. dot is the nc = 1 instance
 * and dot_multi dispatches to the instance for its ncols, so the two agree
 * bit for bit: a row's result does not depend on the batch it is computed
 * in. Integer work may be regrouped freely between instances (it is exact),
 * float work may not. That includes the compiler's: the build's -std=c11
 * implies -ffp-contract=off, so no instance gets a mul+add fused that
 * another keeps apart. */

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Loop over the activation rows, fully unrolled so the per-row accumulator
 * arrays of the bodies live in registers. */
#define FOR_COLS(c, nc) _Pragma("GCC unroll 4") for (int c = 0; c < (nc); c++)

/* Activation row c of a multi-row call, as an array of blocks. */
#define ACT_ROW(type, a, a_stride, c) ((const type *)((const uint8_t *)(a) + (size_t)(c) * (a_stride)))

/* static dot_<name> (one row) and dot_multi_<name> (1 .. 4 rows) from the
 * body <body>(n, out, w, a, a_stride, nc). */
#define DOT_AND_MULTI(name, body)                                                          \
	static void dot_##name(int64_t n, float *out, const void *w, const void *a)          \
	{                                                                                  \
		body(n, out, w, a, 0, 1);                                                  \
	}                                                                                  \
	static void dot_multi_##name(int64_t n, float *out, const void *w, const void *a,    \
				     size_t a_stride, int ncols)                           \
	{                                                                                  \
		switch (ncols) {                                                           \
		case 1: dot_##name(n, out, w, a); break;                                   \
		case 2: body(n, out, w, a, a_stride, 2); break;                            \
		case 3: body(n, out, w, a, a_stride, 3); break;                            \
		default: assert(ncols == 4); body(n, out, w, a, a_stride, 4); break;       \
		}                                                                          \
	}

/* Fill the non-NULL entries an ISA file provides. Only called by quant.c
 * after cpuid said the ISA runs here. */
void quant_avx2_register(struct quant_kernels *k);
void quant_gemm_k_avx2_register(struct quant_kernels *k);
void quant_gemm_k_avx512_register(struct quant_kernels *k);  /* AVX512-VNNI + VL */
void quant_gemm_k_avxvnni_register(struct quant_kernels *k); /* AVX-VNNI */

/* The legacy-type (Q4_0, Q5_0, Q8_0) dot and gemm entries of
 * quant_gemm_avx2.c, in its AVX2 build and its two VNNI builds (same
 * results); narrow: the entries of the narrow twin (quant_kernels_narrow). */
void quant_gemm_avx2_register(struct quant_kernels *k, bool narrow);
void quant_gemm_avx512_register(struct quant_kernels *k, bool narrow);  /* AVX512-VNNI + VL */
void quant_gemm_avxvnni_register(struct quant_kernels *k, bool narrow); /* AVX-VNNI */

/* The repacked kernels: gemm_r16 of Q8_0, Q5_0, Q4_K and Q6_K
 * (quant_gemm_r16_avx512.c); of Q5_0, Q4_K and Q6_K (quant_gemm_r16_avx2.c). */
void quant_gemm_r16_avx512_register(struct quant_kernels *k); /* AVX512-VNNI + BW */
void quant_act_avx512_register(struct quant_kernels *k);      /* AVX-512 F/BW/VL/DQ + F16C */
void quant_gemm_r16_avx2_register(struct quant_kernels *k);   /* AVX2: Q5_0, Q4_K, Q6_K */
/* The AMX gemm_r16 entries (all four types) over k's AVX-512 ones (kept
 * for what they leave), once each passed a self-check against those: 0,
 * or -1 with k unchanged (quant_gemm_r16_amx.c). */
int quant_gemm_r16_amx_register(struct quant_kernels *k);

/* ---- Q4_K and Q6_K repacked 16 rows to a tile (quant_r16k.c) ----
 *
 * A tile is its rows' super-blocks in order, each a whole number of cache
 * lines; byte offsets within one (row j's entries at j, 2j or 4j):
 *  Q4_K: d (16 fp16) at 0, dmin (16 fp16) at 32; scales at 64 and mins at
 *    192, bytes, sub-block s's 16 rows at 16s; then 4 chunks of 8 nibble
 *    vectors at 320: vector k of chunk c holds row j's qs bytes 32c + 4k
 *    .. +3 at 4j (low nibbles: quad vector k of sub-block 2c; high: of
 *    sub-block 2c + 1). 2368 bytes (the plain rows: 2304).
 *  Q6_K: d (16 fp16) at 0; the int8 scales at 32 in pairs, pair p (sub-
 *    blocks 2p, 2p + 1) of row j at 32p + 2j; 32 nibble vectors at 320,
 *    vector v's byte 4j + e the low 4 bits of u = q + 32 of row j's
 *    element 4v + e (low nibble) and 128 + 4v + e (high); 16 vectors of
 *    2-bit parts at 2368, vector h's byte 4j + e holding in bits 2p, 2p + 1
 *    the top 2 bits of u of element 4(h + 16p) + e. 3392 bytes (3360). */
#define QUANT_R16K_Q4_K_SCALES 64
#define QUANT_R16K_Q4_K_MINS 192
#define QUANT_R16K_Q4_K_QUANTS 320
#define QUANT_R16K_Q4_K_SB 2368
#define QUANT_R16K_Q6_K_SCALES 32
#define QUANT_R16K_Q6_K_NIBBLES 320
#define QUANT_R16K_Q6_K_BITS 2368
#define QUANT_R16K_Q6_K_SB 3392

/* Bytes of one super-block of a tile (t: Q4_K or Q6_K). */
static inline size_t quant_r16k_sb_bytes(enum qtype t)
{
	return t == QTYPE_Q4_K ? QUANT_R16K_Q4_K_SB : QUANT_R16K_Q6_K_SB;
}

/* The K types' quant_r16_pack, quant_r16_unpack_row and the output of
 * quant_gemm_r16_ref for row j of a tile of nsb super-blocks against one
 * Q8_K row a (quant_r16.c checks the arguments and calls these). */
void quant_r16k_pack(enum qtype t, const void *w, int64_t n, int64_t rows, void *dst);
void quant_r16k_unpack_row(enum qtype t, const void *p, int64_t n, int64_t row, void *dst);
/* Row j's super-block of the tile's super-block at sb, as one plain
 * block_q4_K or block_q6_K into blk. */
void quant_r16k_unpack_sb(enum qtype t, const uint8_t *sb, int j, void *blk);
float quant_r16k_dot_ref(enum qtype t, const uint8_t *tile, int64_t nsb, int j, const void *a);

/* QUANT_GEMM_VNNI in quant_gemm_avx2.c: which vpdpbusd encoding. */
#define QUANT_GEMM_VNNI_EVEX 1
#define QUANT_GEMM_VNNI_VEX 2

#endif
