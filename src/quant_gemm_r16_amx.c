/* quant_gemm_r16_amx.c — Q8_0 and Q5_0 weights repacked 16 rows to a tile
 * (quant.h) against 16 tokens at a time on AMX's int8 tiles: the gemm_r16
 * entries of the "amx" kernel table (quant.c: the AVX-512 table with these
 * two entries, offered only where CPUID has AMX-TILE and AMX-INT8, the OS
 * enables the tile state in XCR0 and Linux grants it to the process).
 *
 * Why the repacked layout fits: a block's 8 quad vectors (quad vector k:
 * row j's unsigned quants 4k .. 4k+3 at bytes 4j .. 4j+3) are the layout
 * of a B tile of 8 rows x 64 bytes, which TDPBSUD reads as 16 columns of 4
 * bytes a row; the A tile is 16 tokens' 32 quants of the block, loaded
 * straight from their plain Q8_0 rows (a_stride apart). One TDPBSUD gives
 * C[token][row] = sum a * u for 16 x 16 pairs (8192 multiply-adds).
 *
 * The contract of quant_gemm_avx2.c scales each block's exact sum on its
 * own (acc = fma(dw * da, (float)isum, acc), block by block), so a tile
 * product spans one block (K = 32) and its C tile is stored after each
 * block and finished on AVX-512: per token isum = C + corr (corr = -o *
 * sum a takes the unsigned offset back out exactly: o = 128 for Q8_0, 16
 * for Q5_0; the sums come from the packed groups), then the float step on
 * the 16 rows at once. Same integer sums, same float operations in the
 * same order as the VNNI kernels: every output is bit for bit theirs.
 * Blocks alternate between two sets of tile registers, so a block's
 * product runs while the previous block's float step does.
 *
 * Per block and 16 tokens this is one tile product and 16 x (a load, an
 * add, a conversion, a multiply, an FMA) against the VNNI kernel's 16 x 8
 * vpdpbusd plus the same float step: about a third of the vector work.
 * NOT MEASURED: no host this project has run on exposes AMX (the Emerald
 * Rapids guests hide it in CPUID and refuse ARCH_REQ_XCOMP_PERM).
 *
 * Q5_0 tiles are unpacked once per tile into the B layout (r16_block, on
 * the stack: rows of at most AMX_MAX_BLOCKS blocks) for all the tokens.
 * Tokens past the last full 16, rows longer than that, and calls without
 * packed groups go to the kernel the table had before (the AVX-512 one,
 * kept in amx_fallback).
 *
 * Each call loads the tile configuration and releases the tiles when done
 * (the configuration is per thread, and released tiles cost nothing at a
 * context switch). Tested where AMX is absent: tests/test_r16_amx.c
 * compiles this file against an emulation of the tile instructions written
 * from their specification (tests/amx_emu.h, which also faults on the
 * shape mismatches the hardware faults on) and SIMDe for AVX-512, bit for
 * bit against quant_gemm_r16_ref; and where AMX is present, quant.c
 * offers the table only after quant_gemm_r16_amx_register's self-check
 * against the AVX-512 kernels passed. */
#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"
#include "quant_int.h"
#include "quant_r16_drive.h"
#include "quant_r16_avx512.h"

#define AMX_TOKENS 16     /* tokens in an A tile (its rows) */
#define AMX_MAX_BLOCKS 64 /* longest Q5_0 row unpacked on the stack: 32 KB */

/* Tile registers, as literal numbers (the intrinsics paste them into the
 * instruction): A (16 tokens x 32 bytes), B (8 rows x 64 bytes), C (16 x
 * 16 int32), twice. */
#define TA0 0
#define TA1 1
#define TB0 2
#define TB1 3
#define TC0 4
#define TC1 5

/* LDTILECFG's 64 bytes: palette 1, then each tile's bytes per row and
 * rows. Static and constant: GCC's _tile_loadconfig tells the compiler
 * that it reads 8 bytes, so a configuration built on the stack just
 * before could be partly unwritten. */
struct amx_tilecfg {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};
static const struct amx_tilecfg amx_cfg __attribute__((aligned(64))) = {
	.palette = 1,
	.colsb = { QK, QK, 64, 64, 64, 64 },
	.rows = { AMX_TOKENS, AMX_TOKENS, QK / 4, QK / 4, AMX_TOKENS, AMX_TOKENS },
};
_Static_assert(sizeof(struct amx_tilecfg) == 64, "LDTILECFG operand");

/* The entries the table had for Q8_0 and Q5_0 (quant_gemm_r16_amx_register). */
static quant_gemm_fn amx_fallback[QTYPE_COUNT];

/* Block b's C into tile register tc: A from the 16 tokens' plain rows
 * (their block b's quants at a_blk, a_stride apart), B the block's quad
 * vectors at wq. */
#define AMX_PRODUCT(ta, tb, tc, a_blk, a_stride, wq)  \
	do {                                          \
		_tile_loadd(ta, a_blk, a_stride);     \
		_tile_loadd(tb, wq, 64);              \
		_tile_zero(tc);                       \
		_tile_dpbsud(tc, ta, tb);             \
	} while (0)

/* Block b's quad vectors: in the tile (Q8_0) or unpacked at u (Q5_0). */
ALWAYS_INLINE const uint8_t *amx_b(enum qtype t, const uint8_t *tile, const uint8_t *u, int64_t b)
{
	return t == QTYPE_Q8_0 ? r16_quants(t, tile, b) : u + (size_t)b * QUANT_R16_ROWS * QK;
}

/* The float step of block b for the 16 tokens of groups ga, gb (their
 * block b) from the stored C: acc[i] = fma(dw * da_i, (float)(C[i] +
 * corr_i), acc[i]). */
ALWAYS_INLINE void amx_step(enum qtype t, const uint8_t *tile, int64_t b,
			    const int32_t c[AMX_TOKENS][QUANT_R16_ROWS], const struct quant_gemm_block *ga,
			    const struct quant_gemm_block *gb, __m512 acc[AMX_TOKENS])
{
	const __m512 dw = r16_scales(t, tile, b);
	int32_t corr[AMX_TOKENS] __attribute__((aligned(32)));
	const int k = r16_offset_log2(t);
	_mm256_store_si256((__m256i *)corr,
			   _mm256_sub_epi32(_mm256_setzero_si256(),
					    _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)ga->sums), k)));
	_mm256_store_si256((__m256i *)&corr[QUANT_GEMM_GROUP],
			   _mm256_sub_epi32(_mm256_setzero_si256(),
					    _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)gb->sums), k)));
	_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++) {
		const float *d = i < QUANT_GEMM_GROUP ? ga->d : gb->d;
		const __m512i s = _mm512_add_epi32(_mm512_load_si512(c[i]), _mm512_set1_epi32(corr[i]));
		acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(d[i % QUANT_GEMM_GROUP])),
					 _mm512_cvtepi32_ps(s), acc[i]);
	}
}

/* One tile against 16 tokens: their plain rows at a (a_stride apart), their
 * two packed groups at g (nb blocks each), into acc. Block b's product
 * goes to the tile set b % 2, issued one block ahead of its float step. */
ALWAYS_INLINE void amx_tokens16(enum qtype t, const uint8_t *tile, const uint8_t *u, int64_t nb,
				const uint8_t *a, size_t a_stride, const struct quant_gemm_block *g,
				__m512 acc[AMX_TOKENS])
{
	int32_t c[2][AMX_TOKENS][QUANT_R16_ROWS] __attribute__((aligned(64)));
	const uint8_t *aq = a + offsetof(struct block_q8_0, qs);
	const size_t ab = sizeof(struct block_q8_0);
	_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++)
		acc[i] = _mm512_setzero_ps();
	AMX_PRODUCT(TA0, TB0, TC0, aq, a_stride, amx_b(t, tile, u, 0));
	for (int64_t b = 0; b < nb; b += 2) {
		if (b + 1 < nb)
			AMX_PRODUCT(TA1, TB1, TC1, aq + (size_t)(b + 1) * ab, a_stride, amx_b(t, tile, u, b + 1));
		_tile_stored(TC0, c[0], 64);
		amx_step(t, tile, b, c[0], g + b, g + nb + b, acc);
		if (b + 1 >= nb)
			break;
		if (b + 2 < nb)
			AMX_PRODUCT(TA0, TB0, TC0, aq + (size_t)(b + 2) * ab, a_stride, amx_b(t, tile, u, b + 2));
		_tile_stored(TC1, c[1], 64);
		amx_step(t, tile, b + 1, c[1], g + b + 1, g + nb + b + 1, acc);
	}
}

/* A Q5_0 tile's nb blocks unpacked into u as B tiles (Q8_0: nothing). */
ALWAYS_INLINE void amx_unpack(enum qtype t, const uint8_t *tile, int64_t nb, uint8_t *u)
{
	if (t == QTYPE_Q8_0)
		return;
	for (int64_t b = 0; b < nb; b++) {
		__m512i q[R16_QUADS];
		__m512 dw;
		r16_block(t, tile, b, q, &dw);
		_Pragma("GCC unroll 8") for (int k = 0; k < R16_QUADS; k++)
			_mm512_storeu_si512(u + (size_t)b * QUANT_R16_ROWS * QK + 64 * k, q[k]);
	}
	/* GCC's tile loads name their address as a register, not as memory
	 * read: without this the stores to u could be sunk past them, or
	 * dropped as never read */
	__asm__ volatile("" ::: "memory");
}

/* The gemm_r16 contract (quant.h) for t = Q8_0 or Q5_0: the first T / 16
 * * 16 tokens here, 16 at a time over each tile of [r0, r1) (the tile
 * stays in L1 for all of them while the next is prefetched into L2, up to
 * the tiles of r_pf), the rest through amx_fallback[t]. u: room for a
 * Q5_0 tile unpacked (AMX_MAX_BLOCKS blocks of 512 bytes). */
ALWAYS_INLINE void amx_gemm(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r0,
			    int64_t r1, const void *a, size_t a_stride, const void *packed, int64_t T,
			    float *y, int64_t y_stride, int64_t r_pf, uint8_t *u)
{
	const int64_t nb = n / QK;
	const size_t group_bytes = (size_t)nb * sizeof(struct quant_gemm_block);
	const int64_t t16 = packed && nb <= AMX_MAX_BLOCKS ? T / AMX_TOKENS * AMX_TOKENS : 0;
	if (t16 > 0 && r0 < r1) {
		const size_t tile_bytes = quant_r16_tile_bytes(t, n);
		const int64_t tiles_end = ((r_pf > r1 ? r_pf : r1) + QUANT_R16_ROWS - 1) / QUANT_R16_ROWS;
		_tile_loadconfig(&amx_cfg);
		for (int64_t ti = r0 / QUANT_R16_ROWS; ti * QUANT_R16_ROWS < r1; ti++) {
			const uint8_t *tile = (const uint8_t *)w + (size_t)ti * tile_bytes;
			if (ti + 1 < tiles_end)
				for (size_t o = 0; o < tile_bytes; o += 64)
					__builtin_prefetch(tile + tile_bytes + o, 0, 2); /* prefetcht1 */
			amx_unpack(t, tile, nb, u);
			const __mmask16 rows = r16_rows_mask(ti, r0, r1);
			for (int64_t t0 = 0; t0 < t16; t0 += AMX_TOKENS) {
				__m512 acc[AMX_TOKENS];
				amx_tokens16(t, tile, u, nb, (const uint8_t *)a + (size_t)t0 * a_stride, a_stride,
					     (const struct quant_gemm_block *)((const uint8_t *)packed +
									       (size_t)(t0 / QUANT_GEMM_GROUP) * group_bytes),
					     acc);
				for (int i = 0; i < AMX_TOKENS; i++)
					_mm512_mask_storeu_ps(y + (t0 + i) * y_stride + ti * QUANT_R16_ROWS, rows, acc[i]);
			}
		}
		_tile_release();
	}
	if (t16 < T) {
		const int64_t rest = T - t16;
		const void *pk = rest >= QUANT_GEMM_PACK_MIN
					 ? (const uint8_t *)packed + (size_t)(t16 / QUANT_GEMM_GROUP) * group_bytes
					 : NULL;
		amx_fallback[t](n, w, w_stride, r0, r1, (const uint8_t *)a + (size_t)t16 * a_stride, a_stride,
				pk, rest, y + t16 * y_stride, y_stride, r_pf);
	}
}

static void gemm_q8_0_amx(int64_t n, const void *w, size_t w_stride, int64_t r0, int64_t r1,
			  const void *a, size_t a_stride, const void *packed, int64_t T, float *y,
			  int64_t y_stride, int64_t r_pf)
{
	amx_gemm(QTYPE_Q8_0, n, w, w_stride, r0, r1, a, a_stride, packed, T, y, y_stride, r_pf, NULL);
}

static void gemm_q5_0_amx(int64_t n, const void *w, size_t w_stride, int64_t r0, int64_t r1,
			  const void *a, size_t a_stride, const void *packed, int64_t T, float *y,
			  int64_t y_stride, int64_t r_pf)
{
	uint8_t u[AMX_MAX_BLOCKS * QUANT_R16_ROWS * QK] __attribute__((aligned(64)));
	amx_gemm(QTYPE_Q5_0, n, w, w_stride, r0, r1, a, a_stride, packed, T, y, y_stride, r_pf, u);
}

/* ---- the self-check ---- */

enum { CHECK_N = 3 * QK, CHECK_ROWS = 2 * QUANT_R16_ROWS, CHECK_T = AMX_TOKENS + 4 };

/* A small matrix of type t (random quants and scales from a fixed
 * stream) against CHECK_T tokens, through amx and through the fallback:
 * whether every output agrees bit for bit. */
static bool amx_check_type(enum qtype t, quant_gemm_fn amx)
{
	static uint8_t w[CHECK_ROWS * (CHECK_N / QK) * sizeof(struct block_q8_0)];
	static uint8_t w16[CHECK_ROWS * (CHECK_N / QK) * (QUANT_R16_ROWS * QK + 64)];
	static uint8_t a[CHECK_T * (CHECK_N / QK) * sizeof(struct block_q8_0)];
	static struct quant_gemm_block packed[(CHECK_T + QUANT_GEMM_GROUP - 1) / QUANT_GEMM_GROUP * (CHECK_N / QK)];
	static float x[CHECK_N], y[2][CHECK_T * CHECK_ROWS];
	const size_t block_bytes = qtype_traits(t)->block_bytes, row_bytes = (CHECK_N / QK) * block_bytes;
	const size_t a_stride = (CHECK_N / QK) * sizeof(struct block_q8_0);
	uint64_t s = 0x2545f4914f6cdd1dull;
	for (size_t i = 0; i < CHECK_ROWS * row_bytes; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		w[i] = (uint8_t)(s >> 56);
	}
	for (int64_t i = 0; i < CHECK_ROWS * (CHECK_N / QK); i++) {
		/* each block's fp16 scale a normal number */
		const uint16_t d = (uint16_t)(0x2000 + (i * 37) % 0x1000);
		memcpy(w + (size_t)i * block_bytes, &d, sizeof d);
	}
	if (quant_r16_bytes(t, CHECK_N, CHECK_ROWS) > sizeof w16)
		return false;
	quant_r16_pack(t, w, CHECK_N, CHECK_ROWS, w16);
	for (int tk = 0; tk < CHECK_T; tk++) {
		for (int e = 0; e < CHECK_N; e++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			x[e] = (float)((int64_t)(s >> 40) - (1 << 23)) / (float)(1 << 20);
		}
		quant_quantize_ref(QTYPE_Q8_0, x, a + (size_t)tk * a_stride, CHECK_N);
		quant_gemm_pack_row(QTYPE_Q8_0, a + (size_t)tk * a_stride, CHECK_N, tk, packed);
	}
	amx(CHECK_N, w16, row_bytes, 0, CHECK_ROWS, a, a_stride, packed, CHECK_T, y[0], CHECK_ROWS, 0);
	amx_fallback[t](CHECK_N, w16, row_bytes, 0, CHECK_ROWS, a, a_stride, packed, CHECK_T, y[1],
			CHECK_ROWS, 0);
	return memcmp(y[0], y[1], sizeof y[0]) == 0;
}

#ifndef QUANT_GEMM_R16_AMX_REGISTER
#define QUANT_GEMM_R16_AMX_REGISTER quant_gemm_r16_amx_register
#endif

/* Called once, while quant.c builds the amx table (k already holds the
 * AVX-512 entries, which become the fallbacks). Returns 0 when the AMX
 * entries agree with them bit for bit on a small matrix of each type and
 * are now k's, -1 (k unchanged) when not. */
int QUANT_GEMM_R16_AMX_REGISTER(struct quant_kernels *k)
{
	amx_fallback[QTYPE_Q8_0] = k->gemm_r16[QTYPE_Q8_0];
	amx_fallback[QTYPE_Q5_0] = k->gemm_r16[QTYPE_Q5_0];
	if (!amx_fallback[QTYPE_Q8_0] || !amx_fallback[QTYPE_Q5_0] ||
	    !amx_check_type(QTYPE_Q8_0, gemm_q8_0_amx) || !amx_check_type(QTYPE_Q5_0, gemm_q5_0_amx))
		return -1;
	k->gemm_r16[QTYPE_Q8_0] = gemm_q8_0_amx;
	k->gemm_r16[QTYPE_Q5_0] = gemm_q5_0_amx;
	return 0;
}
