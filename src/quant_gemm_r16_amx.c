/* quant_gemm_r16_amx.c — weights repacked 16 rows to a tile (quant.h,
 * quant_int.h: Q8_0, Q5_0, Q4_K, Q6_K) against 16 tokens at a time (and
 * a last group of fewer) on AMX's int8 tiles: the gemm_r16 entries of the
 * "amx" kernel table
 * (quant.c: the AVX-512 table with these four entries, offered only where
 * CPUID has AMX-TILE and AMX-INT8, the OS enables the tile state in XCR0,
 * Linux grants it to the process, and the self-check below passed).
 *
 * Why the repacked layout fits: a tile's quad vectors (quad vector k: row
 * j's unsigned quants 4k .. 4k+3 at bytes 4j .. 4j+3) are the layout of a
 * B tile, K / 4 rows x 64 bytes, which TDPBSUD reads as 16 columns of 4
 * bytes a row; the A tile is 16 tokens' K activation quants, loaded
 * straight from their plain rows (a_stride apart). One TDPBSUD gives
 * C[token][row] = sum a * u over the K elements for 16 x 16 pairs.
 *
 * The contracts (quant_gemm_avx2.c, quant_gemm_k_avx2.c) scale each
 * block's exact sum on its own, and a K type's sub-blocks each by their
 * integer scale, so a tile product spans one run of elements under one
 * scale: a Q8_0 / Q5_0 block or a Q4_K sub-block (K = 32), a Q6_K
 * sub-block (K = 16, its own tile configuration). After each run the C
 * tile is stored and finished on AVX-512 as the VNNI kernels finish
 * theirs: Q8_0 / Q5_0, isum = C + corr (corr = -o * sum a takes the
 * unsigned offset back out: o = 128, 16) and the float step on 16 rows at
 * once; K types, S += scale * C, and at a super-block's end r16k_finish
 * (mins or the offset from the bsum pairs). The unpacking, corrections
 * and float steps are the VNNI kernels' own (quant_r16_avx512.h). Same
 * integer sums, same float operations in the
 * same order: every output is bit for bit the VNNI kernels'. Runs
 * alternate between two sets of tile registers, so a run's product is
 * issued before the vector work on the one before it (groups of 16).
 *
 * Per 32 elements and 16 tokens this is one tile product and ~16 x 5
 * vector operations against the VNNI kernel's 16 x 8 vpdpbusd plus the
 * same float step. NOT MEASURED: no host this project has run on exposes
 * AMX (the Emerald Rapids guests hide it in CPUID and refuse
 * ARCH_REQ_XCOMP_PERM).
 *
 * All but Q8_0 are unpacked once per tile into the B layout (on the
 * stack: rows of at most AMX_MAX_BLOCKS * 32 elements) for all the
 * tokens. The tokens go 16 at a time, the last m < 16 as one group on
 * tiles of m rows of their own (configured per call), so every weight is
 * read once per call. Longer rows, and calls without packed groups (T < 4,
 * a stream of the weights bound by the memory), go to the kernel the
 * table had before (the AVX-512 one, kept in amx_fallback).
 *
 * Each call loads the tile configuration and releases the tiles when done
 * (the configuration is per thread, and released tiles cost nothing at a
 * context switch). Tested where AMX is absent: tests/test_r16_amx.c
 * compiles this file against an emulation of the tile instructions written
 * from their specification (tests/amx_emu.h, which also faults on the
 * configurations and shapes the hardware faults on) and SIMDe for
 * AVX-512, bit for bit against quant_gemm_r16_ref; and where AMX is
 * present, quant.c offers the table only after
 * quant_gemm_r16_amx_register's self-check against the AVX-512 kernels
 * passed. */
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
#define AMX_MAX_BLOCKS 64 /* longest row unpacked on the stack: 2048 elements, 32 KB */
#define AMX_U_BYTES (AMX_MAX_BLOCKS * QK * QUANT_R16_ROWS)

/* Tile registers, as literal numbers (the intrinsics paste them into the
 * instruction): A (16 tokens x K bytes), B (K / 4 rows x 64 bytes), C (16
 * x 16 int32), twice; and A and C of a last group of m < 16 tokens. */
#define TA0 0
#define TA1 1
#define TB0 2
#define TB1 3
#define TC0 4
#define TC1 5
#define TAM 6
#define TCM 7

/* LDTILECFG's 64 bytes: palette 1, then each tile's bytes per row and
 * rows. Written per call (K: 32 for Q8_0 and Q5_0 blocks and Q4_K
 * sub-blocks, 16 for Q6_K's; m: the last group's tokens, 0 for none). */
struct amx_tilecfg {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};
_Static_assert(sizeof(struct amx_tilecfg) == 64, "LDTILECFG operand");

ALWAYS_INLINE void amx_configure(struct amx_tilecfg *cfg, int K, int m)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->palette = 1;
	for (int i = 0; i < 2; i++) {
		cfg->colsb[TA0 + i] = (uint16_t)K, cfg->rows[TA0 + i] = AMX_TOKENS;
		cfg->colsb[TB0 + i] = 64, cfg->rows[TB0 + i] = (uint8_t)(K / 4);
		cfg->colsb[TC0 + i] = 64, cfg->rows[TC0 + i] = AMX_TOKENS;
	}
	if (m) {
		cfg->colsb[TAM] = (uint16_t)K, cfg->rows[TAM] = (uint8_t)m;
		cfg->colsb[TCM] = 64, cfg->rows[TCM] = (uint8_t)m;
	}
	/* GCC's _tile_loadconfig tells the compiler it reads 8 bytes: the
	 * other stores must be in memory before it */
	__asm__ volatile("" ::: "memory");
	_tile_loadconfig(cfg);
}

/* The entries the table had (quant_gemm_r16_amx_register). */
static quant_gemm_fn amx_fallback[QTYPE_COUNT];

/* ---- runs: the spans of a row that one tile product covers ----
 *
 * A run is K elements under one scale: a Q8_0 / Q5_0 block (K = 32), a
 * Q4_K sub-block (32), a Q6_K sub-block (16). Its B is K / 4 quad vectors
 * of 16 rows (in the tile for Q8_0, unpacked into u for the others, run
 * after run); its A is the 16 tokens' K activation quants of the run, in
 * their plain rows. */

ALWAYS_INLINE int amx_run_k(enum qtype t)
{
	return t == QTYPE_Q6_K ? 16 : 32;
}

ALWAYS_INLINE int64_t amx_runs_per_block(enum qtype t)
{
	return t == QTYPE_Q4_K ? QK_K / 32 : t == QTYPE_Q6_K ? QK_K / 16 : 1;
}

/* Run r's activations in the plain row at a (Q8_0 or Q8_K blocks). */
ALWAYS_INLINE const uint8_t *amx_run_a(enum qtype t, const uint8_t *a, int64_t r)
{
	if (!quant_r16_k_type(t))
		return a + (size_t)r * sizeof(struct block_q8_0) + offsetof(struct block_q8_0, qs);
	const int64_t per = amx_runs_per_block(t);
	return a + (size_t)(r / per) * sizeof(struct block_q8_K) + offsetof(struct block_q8_K, qs) +
	       (size_t)(r % per) * (size_t)amx_run_k(t);
}

ALWAYS_INLINE const uint8_t *amx_run_b(enum qtype t, const uint8_t *tile, const uint8_t *u, int64_t r)
{
	return t == QTYPE_Q8_0 ? r16_quants(t, tile, r) : u + (size_t)r * (size_t)amx_run_k(t) * QUANT_R16_ROWS;
}

/* Run r's C into tile set r % 2, or (partial) into TCM from TAM. */
ALWAYS_INLINE void amx_issue(enum qtype t, const uint8_t *tile, const uint8_t *u, const uint8_t *a,
			     size_t a_stride, int64_t r, bool partial)
{
	const uint8_t *ar = amx_run_a(t, a, r), *br = amx_run_b(t, tile, u, r);
	if (partial) {
		_tile_loadd(TAM, ar, a_stride);
		_tile_loadd(TB0, br, 64);
		_tile_zero(TCM);
		_tile_dpbsud(TCM, TAM, TB0);
	} else if (r % 2 == 0) {
		_tile_loadd(TA0, ar, a_stride);
		_tile_loadd(TB0, br, 64);
		_tile_zero(TC0);
		_tile_dpbsud(TC0, TA0, TB0);
	} else {
		_tile_loadd(TA1, ar, a_stride);
		_tile_loadd(TB1, br, 64);
		_tile_zero(TC1);
		_tile_dpbsud(TC1, TA1, TB1);
	}
}

/* ---- what follows each product ---- */

/* Q8_0 / Q5_0 block b for the 16 tokens of groups ga, gb (their block b),
 * from the stored C: acc[i] = fma(dw * da_i, (float)(C[i] + corr_i),
 * acc[i]), r16_step as the VNNI kernels take it. */
ALWAYS_INLINE void amx_block_step(enum qtype t, const uint8_t *tile, int64_t b,
				  const int32_t c[AMX_TOKENS][QUANT_R16_ROWS],
				  const struct quant_gemm_block *ga, const struct quant_gemm_block *gb,
				  __m512 acc[AMX_TOKENS])
{
	const __m512 dw = r16_scales(t, tile, b);
	const struct r16_toks tk = { .d = { ga->d, gb->d } };
	int32_t corr[AMX_TOKENS];
	r16_group_corr(t, ga, corr);
	r16_group_corr(t, gb, corr + QUANT_GEMM_GROUP);
	_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++)
		acc[i] = r16_step(dw, &tk, i, _mm512_add_epi32(_mm512_load_si512(c[i]), _mm512_set1_epi32(corr[i])),
				  acc[i]);
}

/* The 16 rows' integer scale of K-type run s of the super-block at sb. */
ALWAYS_INLINE __m512i amx_run_scale(enum qtype t, const uint8_t *sb, int s)
{
	if (t == QTYPE_Q4_K)
		return r16k_q4k_scale(sb, s);
	__m512i lo, hi;
	r16k_q6k_scales(sb, s / 2, &lo, &hi);
	return s % 2 ? hi : lo;
}

/* The end of a K-type super-block at sb for the 16 tokens of the packed
 * pair ga, gb on the sums S: r16k_finish, as the VNNI kernels end one. */
ALWAYS_INLINE void amx_sb_step(enum qtype t, const uint8_t *sb, const struct quant_gemm_kblock *ga,
			       const struct quant_gemm_kblock *gb, const __m512i S[AMX_TOKENS],
			       __m512 acc[AMX_TOKENS], __m512 accm[AMX_TOKENS])
{
	const struct r16_toks tk = { { (const uint8_t *)ga->quads, (const uint8_t *)gb->quads },
				     { (const uint8_t *)ga->bsum_pairs, (const uint8_t *)gb->bsum_pairs },
				     { ga->d, gb->d },
				     sizeof ga->quads[0] };
	r16k_finish(t, sb, &tk, AMX_TOKENS, S, acc, accm);
}

/* One tile against m tokens (16, or fewer in a call's last group): their
 * plain rows at a (a_stride apart), their packed groups at g0 and g1 (nb
 * blocks or super-blocks each; g1 = g0 when m <= 8), into out[0 .. 16)
 * (the lanes past m are computed from stale data and dropped). A group
 * of 16 issues run r's product into tile set r % 2 one run ahead of the
 * vector work on the one before; a last group uses TAM and TCM in turn. */
ALWAYS_INLINE void amx_tokens(enum qtype t, const uint8_t *tile, const uint8_t *u, int64_t nb,
			      const uint8_t *a, size_t a_stride, const void *g0, const void *g1, int m,
			      __m512 out[AMX_TOKENS])
{
	int32_t c[AMX_TOKENS][QUANT_R16_ROWS] __attribute__((aligned(64)));
	const bool partial = m < AMX_TOKENS;
	if (partial) /* its rows past m are never stored to */
		memset(c, 0, sizeof c);
	__m512 acc[AMX_TOKENS], accm[AMX_TOKENS];
	__m512i S[AMX_TOKENS];
	_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++) {
		acc[i] = accm[i] = _mm512_setzero_ps();
		S[i] = _mm512_setzero_si512();
	}
	const int64_t per = amx_runs_per_block(t), runs = nb * per;
	if (!partial)
		amx_issue(t, tile, u, a, a_stride, 0, false);
	for (int64_t r = 0; r < runs; r++) {
		if (partial) {
			amx_issue(t, tile, u, a, a_stride, r, true);
			_tile_stored(TCM, c, 64);
		} else {
			if (r + 1 < runs)
				amx_issue(t, tile, u, a, a_stride, r + 1, false);
			if (r % 2 == 0)
				_tile_stored(TC0, c, 64);
			else
				_tile_stored(TC1, c, 64);
		}
		if (!quant_r16_k_type(t)) {
			const struct quant_gemm_block *ga = g0, *gb = g1;
			amx_block_step(t, tile, r, c, ga + r, gb + r, acc);
			continue;
		}
		const int64_t b = r / per;
		const uint8_t *sb = tile + (size_t)b * quant_r16k_sb_bytes(t);
		const __m512i sc = amx_run_scale(t, sb, (int)(r % per));
		_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++)
			S[i] = _mm512_add_epi32(S[i], _mm512_mullo_epi32(_mm512_load_si512(c[i]), sc));
		if (r % per == per - 1) {
			const struct quant_gemm_kblock *ga = g0, *gb = g1;
			amx_sb_step(t, sb, ga + b, gb + b, S, acc, accm);
			_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++)
				S[i] = _mm512_setzero_si512();
		}
	}
	_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++)
		out[i] = t == QTYPE_Q4_K ? _mm512_sub_ps(acc[i], accm[i]) : acc[i];
}

/* A tile's nb blocks or super-blocks unpacked into u as B tiles, run
 * after run, with the VNNI kernels' unpacking (Q8_0: nothing, its tile is
 * read as it is). */
ALWAYS_INLINE void amx_unpack(enum qtype t, const uint8_t *tile, int64_t nb, uint8_t *u)
{
	if (t == QTYPE_Q8_0)
		return;
	for (int64_t b = 0; b < nb; b++) {
		__m512i q[R16_QUADS];
		__m512 dw;
		if (t == QTYPE_Q5_0) {
			r16_block(t, tile, b, q, &dw);
			_Pragma("GCC unroll 8") for (int k = 0; k < R16_QUADS; k++)
				_mm512_storeu_si512(u + (size_t)b * QUANT_R16_ROWS * QK + 64 * k, q[k]);
			continue;
		}
		/* K types: 8 runs of 8 quad vectors, as the VNNI kernels take them */
		const uint8_t *sb = tile + (size_t)b * quant_r16k_sb_bytes(t);
		uint8_t *ub = u + (size_t)b * QK_K * QUANT_R16_ROWS;
		for (int r = 0; r < 8; r++) {
			if (t == QTYPE_Q4_K)
				r16k_q4k_quads(sb, r, q);
			else
				r16k_q6k_quads(sb, r, q);
			_Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
				_mm512_storeu_si512(ub + 64 * (8 * r + k), q[k]);
		}
	}
	/* GCC's tile loads name their address as a register, not as memory
	 * read: without this the stores to u could be sunk past them, or
	 * dropped as never read */
	__asm__ volatile("" ::: "memory");
}

/* The gemm_r16 contract (quant.h) for t: with packed groups (T >= 4) and
 * rows of at most AMX_MAX_BLOCKS blocks, all T tokens here, 16 at a time
 * and then the rest as one group, over each tile of [r0, r1) (the tile
 * stays in L1 for all of them while the next is prefetched into L2, up to
 * the tiles of r_pf); otherwise amx_fallback[t]. u: AMX_U_BYTES for the
 * tile unpacked (NULL for Q8_0). */
ALWAYS_INLINE void amx_gemm(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r0,
			    int64_t r1, const void *a, size_t a_stride, const void *packed, int64_t T,
			    float *y, int64_t y_stride, int64_t r_pf, uint8_t *u)
{
	if (!packed || n > AMX_MAX_BLOCKS * QK) {
		amx_fallback[t](n, w, w_stride, r0, r1, a, a_stride, packed, T, y, y_stride, r_pf);
		return;
	}
	if (r0 >= r1 || T <= 0)
		return;
	const bool kt = quant_r16_k_type(t);
	const int64_t nb = n / (kt ? QK_K : QK);
	const size_t group_bytes =
		(size_t)nb * (kt ? sizeof(struct quant_gemm_kblock) : sizeof(struct quant_gemm_block));
	const size_t tile_bytes = quant_r16_tile_bytes(t, n);
	const int64_t tiles_end = ((r_pf > r1 ? r_pf : r1) + QUANT_R16_ROWS - 1) / QUANT_R16_ROWS;
	struct amx_tilecfg cfg __attribute__((aligned(64)));
	amx_configure(&cfg, amx_run_k(t), (int)(T % AMX_TOKENS));
	for (int64_t ti = r0 / QUANT_R16_ROWS; ti * QUANT_R16_ROWS < r1; ti++) {
		const uint8_t *tile = (const uint8_t *)w + (size_t)ti * tile_bytes;
		if (ti + 1 < tiles_end)
			for (size_t o = 0; o < tile_bytes; o += 64)
				__builtin_prefetch(tile + tile_bytes + o, 0, 2); /* prefetcht1 */
		amx_unpack(t, tile, nb, u);
		const __mmask16 rows = r16_rows_mask(ti, r0, r1);
		for (int64_t t0 = 0; t0 < T; t0 += AMX_TOKENS) {
			const int m = (int)(T - t0 < AMX_TOKENS ? T - t0 : AMX_TOKENS);
			const uint8_t *g0 = (const uint8_t *)packed + (size_t)(t0 / QUANT_GEMM_GROUP) * group_bytes;
			const uint8_t *g1 = m > QUANT_GEMM_GROUP ? g0 + group_bytes : g0;
			__m512 acc[AMX_TOKENS];
			amx_tokens(t, tile, u, nb, (const uint8_t *)a + (size_t)t0 * a_stride, a_stride, g0, g1, m,
				   acc);
			for (int i = 0; i < m; i++)
				_mm512_mask_storeu_ps(y + (t0 + i) * y_stride + ti * QUANT_R16_ROWS, rows, acc[i]);
		}
	}
	_tile_release();
}

#define AMX_ENTRY(fn, type, unpacked)                                                               \
	static void fn(int64_t n, const void *w, size_t w_stride, int64_t r0, int64_t r1, const void *a, \
		       size_t a_stride, const void *packed, int64_t T, float *y, int64_t y_stride,     \
		       int64_t r_pf)                                                                   \
	{                                                                                              \
		uint8_t u[unpacked ? AMX_U_BYTES : 1] __attribute__((aligned(64)));                     \
		amx_gemm(type, n, w, w_stride, r0, r1, a, a_stride, packed, T, y, y_stride, r_pf,      \
			 unpacked ? u : NULL);                                                          \
	}
AMX_ENTRY(gemm_q8_0_amx, QTYPE_Q8_0, 0)
AMX_ENTRY(gemm_q5_0_amx, QTYPE_Q5_0, 1)
AMX_ENTRY(gemm_q4_K_amx, QTYPE_Q4_K, 1)
AMX_ENTRY(gemm_q6_K_amx, QTYPE_Q6_K, 1)

/* ---- the self-check ---- */

enum { CHECK_N = 2 * QK_K, CHECK_ROWS = 2 * QUANT_R16_ROWS, CHECK_T = AMX_TOKENS + 4 };

/* A small matrix of type t (random quants, fixed normal scales) against
 * CHECK_T tokens, through amx and through the fallback: whether every
 * output agrees bit for bit. */
static bool amx_check_type(enum qtype t, quant_gemm_fn amx)
{
	static uint8_t w[CHECK_ROWS * (CHECK_N / QK) * sizeof(struct block_q8_0)];
	static uint8_t w16[2 * 9216] __attribute__((aligned(64)));
	static uint8_t a[CHECK_T * (CHECK_N / QK_K) * sizeof(struct block_q8_K)];
	static uint8_t packed[16384] __attribute__((aligned(64)));
	static float x[CHECK_N], y[2][CHECK_T * CHECK_ROWS];
	const struct qtype_traits *tr = qtype_traits(t);
	const enum qtype at = tr->act_type;
	const int64_t nb = CHECK_N / tr->block_elems;
	const size_t row_bytes = (size_t)nb * tr->block_bytes;
	uint64_t a_stride = 0;
	if (qtype_row_bytes(at, CHECK_N, &a_stride) != 0 || a_stride * CHECK_T > sizeof a ||
	    row_bytes * CHECK_ROWS > sizeof w || quant_r16_bytes(t, CHECK_N, CHECK_ROWS) > sizeof w16 ||
	    quant_gemm_pack_bytes(at, CHECK_N, CHECK_T) > sizeof packed)
		return false;
	uint64_t s = 0x2545f4914f6cdd1dull;
	for (size_t i = 0; i < CHECK_ROWS * row_bytes; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		w[i] = (uint8_t)(s >> 56);
	}
	/* each block's fp16 scales normal numbers (Q4_K: d and dmin first;
	 * Q6_K: d last) */
	const size_t d_at = t == QTYPE_Q6_K ? offsetof(struct block_q6_K, d) : 0;
	for (int64_t i = 0; i < CHECK_ROWS * nb; i++) {
		const uint16_t d[2] = { (uint16_t)(0x2000 + (i * 37) % 0x1000), (uint16_t)(0x1c00 + (i * 53) % 0x400) };
		memcpy(w + (size_t)i * tr->block_bytes + d_at, d, t == QTYPE_Q4_K ? sizeof d : sizeof d[0]);
	}
	quant_r16_pack(t, w, CHECK_N, CHECK_ROWS, w16);
	for (int tk = 0; tk < CHECK_T; tk++) {
		for (int e = 0; e < CHECK_N; e++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			x[e] = (float)((int64_t)(s >> 40) - (1 << 23)) / (float)(1 << 20);
		}
		quant_quantize_ref(at, x, a + (size_t)tk * a_stride, CHECK_N);
		quant_gemm_pack_row(at, a + (size_t)tk * a_stride, CHECK_N, tk, packed);
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
	static const enum qtype types[] = { QTYPE_Q8_0, QTYPE_Q5_0, QTYPE_Q4_K, QTYPE_Q6_K };
	static const quant_gemm_fn entries[] = { gemm_q8_0_amx, gemm_q5_0_amx, gemm_q4_K_amx, gemm_q6_K_amx };
	for (int i = 0; i < 4; i++) {
		amx_fallback[types[i]] = k->gemm_r16[types[i]];
		if (!amx_fallback[types[i]] || !amx_check_type(types[i], entries[i]))
			return -1;
	}
	for (int i = 0; i < 4; i++)
		k->gemm_r16[types[i]] = entries[i];
	return 0;
}
