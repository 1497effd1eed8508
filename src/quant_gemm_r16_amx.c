/* quant_gemm_r16_amx.c — weights repacked 16 rows to a tile (quant.h,
 * quant_int.h: Q8_0, Q5_0, Q4_K, Q6_K) against 16 tokens at a time on
 * AMX's int8 tiles: the gemm_r16 entries of the "amx" kernel table
 * (quant.c: the AVX-512 table with these four entries, offered only where
 * CPUID has AMX-TILE and AMX-INT8, the OS enables the tile state in XCR0,
 * Linux grants it to the process, and the self-check below passed).
 *
 * Why the repacked layout fits: a tile's quad vectors (quad vector k: row
 * j's quants 4k .. 4k+3 at bytes 4j .. 4j+3) are the layout of a B tile,
 * K / 4 rows x 64 bytes, which TDPBSSD / TDPBSUD read as 16 columns of 4
 * bytes a row; the A tile is 16 tokens' K activation quants, gathered
 * run by run for a chunk of tokens (amx_gather), or where the chunk is
 * too large for that loaded straight from their plain rows (a_stride
 * apart). One product gives
 * C[token][row] = sum a * q over the K elements for 16 x 16 pairs.
 *
 * The contracts (quant_gemm_avx2.c, quant_gemm_k_avx2.c) scale each
 * block's exact sum on its own, and a K type's sub-blocks each by their
 * integer scale, so a tile product spans one run of elements under one
 * scale: a Q8_0 / Q5_0 block or a Q4_K sub-block (K = 32), a Q6_K
 * sub-block (K = 16, its own tile configuration). After each run the C
 * tile is stored and finished on AVX-512 as the VNNI kernels finish
 * theirs: Q8_0 / Q5_0, whose quants are unpacked less their offset
 * (signed, TDPBSSD), C is the exact sum the VNNI kernels form as the
 * unsigned quants' plus the correction -o * sum a, and the float step on
 * 16 rows at once; K types (unsigned quants, TDPBSUD), S += scale * C,
 * and at a super-block's end r16k_finish (mins or the offset from the
 * bsum pairs). The unpacking, corrections and float steps are the VNNI
 * kernels' own (quant_r16_avx512.h). Same integer sums, same float
 * operations in the same order: every output is bit for bit the VNNI
 * kernels'. Runs go two at a stage (amx_tokens), so the tile unit works
 * on the next two while the vector units finish the last.
 *
 * Every tile is unpacked into the B layout (on the stack: rows of at most
 * AMX_MAX_BLOCKS * 32 elements) for a chunk of tokens whose activation
 * rows stay in L1 (AMX_CHUNK_BYTES; all the tokens where that is under
 * 32), 16 at a time; a call of fewer than 16 tokens has tiles of that
 * many rows (configured per call). What the tiles do not take goes to
 * the kernel the table had before (the AVX-512 one, kept in
 * amx_fallback): the tokens past the last
 * full 16 (over the same rows again, in L2 by then), calls of fewer than
 * amx_min_tokens (where the VNNI kernels are as fast: below 16 tokens the
 * tiles run part empty; this also leaves batch-1 decode, a stream of the
 * weights bound by the memory, on AVX-512), and rows longer than
 * AMX_MAX_BLOCKS blocks. Measured on the first host exposing AMX (a
 * Sapphire Rapids-class KVM guest, 2 cores; `ingot bench`): see
 * amx_min_tokens and bench/HISTORY.md.
 *
 * Each call loads the tile configuration and releases the tiles when done
 * (the configuration is per thread, and released tiles cost nothing at a
 * context switch). Tested where AMX is absent: tests/test_r16_amx.c
 * compiles this file against an emulation of the tile instructions written
 * from their specification (tests/amx_emu.h, which also faults on the
 * configurations and shapes the hardware faults on) and SIMDe for
 * AVX-512, bit for bit against quant_gemm_r16_ref; where AMX is present,
 * test_quant checks the table against the scalar reference and the
 * AVX-512 kernels, and quant.c offers the table only after
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
#define AMX_CHUNK_BYTES (32u * 1024) /* activation rows a chunk of tokens (amx_gemm) */
#define AMX_MAX_BLOCKS 64 /* longest row unpacked on the stack: 2048 elements, 32 KB */
#define AMX_U_BYTES (AMX_MAX_BLOCKS * QK * QUANT_R16_ROWS)
#define AMX_A_BYTES (32u * 1024) /* a chunk's activation quants gathered run by run (amx_gather) */

/* Tile registers, as literal numbers (the intrinsics paste them into the
 * instruction): A (16 tokens x K bytes, or a call's T < 16), B (K / 4 rows
 * x 64 bytes), C (16 or T x 16 int32), twice: the two runs of a stage. */
#define TA0 0
#define TA1 1
#define TB0 2
#define TB1 3
#define TC0 4
#define TC1 5

/* LDTILECFG's 64 bytes: palette 1, then each tile's bytes per row and
 * rows. Written per call (K: 32 for Q8_0 and Q5_0 blocks and Q4_K
 * sub-blocks, 16 for Q6_K's; m: the last group's tokens, 0 for none). */
struct amx_tilecfg {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};
_Static_assert(sizeof(struct amx_tilecfg) == 64, "LDTILECFG operand");

ALWAYS_INLINE void amx_configure(struct amx_tilecfg *cfg, int K, int64_t T)
{
	const int rows = T < AMX_TOKENS ? (int)T : AMX_TOKENS;
	memset(cfg, 0, sizeof *cfg);
	cfg->palette = 1;
	for (int i = 0; i < 2; i++) {
		cfg->colsb[TA0 + i] = (uint16_t)K, cfg->rows[TA0 + i] = (uint8_t)rows;
		cfg->colsb[TB0 + i] = 64, cfg->rows[TB0 + i] = (uint8_t)(K / 4);
		cfg->colsb[TC0 + i] = 64, cfg->rows[TC0 + i] = (uint8_t)rows;
	}
	/* GCC's _tile_loadconfig tells the compiler it reads 8 bytes: the
	 * other stores must be in memory before it */
	__asm__ volatile("" ::: "memory");
	_tile_loadconfig(cfg);
}

/* The entries the table had (quant_gemm_r16_amx_register). */
static quant_gemm_fn amx_fallback[QTYPE_COUNT];

/* The fewest tokens a call takes on the tiles; fewer go to the fallback,
 * which is as fast or faster there. Measured on the Sapphire Rapids-class
 * host (KVM, AMX exposed), `quant_bench --gemm 8,9,10,11,12,16,32,64`
 * (one thread, ~1 MB of the default model's shapes hot), AMX's speed
 * over AVX-512's at T = 9, 10, 11, 12, 16, 32: Q8_0 0.97 1.01 1.45 1.34
 * 1.23 1.44; Q5_0 1.14 1.50 1.70 1.54 1.46 1.58; Q4_K 1.00 1.03 1.12 1.20
 * 1.17 1.37; Q6_K 1.01 1.00 1.27 1.06 1.03 1.22 (T = 8, all through the
 * fallback then, 0.94-1.00). */
ALWAYS_INLINE int64_t amx_min_tokens(enum qtype t)
{
	return t == QTYPE_Q5_0 ? 9 : 11;
}

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

ALWAYS_INLINE const uint8_t *amx_run_b(enum qtype t, const uint8_t *u, int64_t r)
{
	return u + (size_t)r * (size_t)amx_run_k(t) * QUANT_R16_ROWS;
}

/* Where a pass's A tiles come from: the 16 tokens' plain rows (stride
 * apart, run r inside each row, amx_run_a), or, gathered (amx_gather),
 * run r's 16 x K bytes contiguous at base + r * 16 * K. */
struct amx_a {
	const uint8_t *base;
	size_t stride;
	bool gathered;
};

ALWAYS_INLINE const uint8_t *amx_a_run(enum qtype t, const struct amx_a *a, int64_t r)
{
	if (a->gathered)
		return a->base + (size_t)r * AMX_TOKENS * (size_t)amx_run_k(t);
	return amx_run_a(t, a->base, r);
}

/* Tokens [c0, c1) of the plain rows at a (a_stride apart) gathered into
 * g, pass by pass (16 tokens), run by run: token c0 + 16p + i's run r at
 * g + ((p * runs + r) * 16 + i) * K, so that an A tile is one contiguous
 * 16 x K load. From the rows a tile load reads K bytes at an offset of 2
 * (Q8_0) or 4 (Q8_K) in each block, a line split for about half the
 * tokens. The caller checks that the chunk fits AMX_A_BYTES. Measured on
 * the Sapphire Rapids-class host, `quant_bench --gemm 32,64` (one thread,
 * hot), amx/r16 G multiply-adds/s at T = 32 / 64, two rounds each: Q8_0
 * 208-243 / 216-231 -> 280 / 283-285; Q5_0 254-265 / 250-254 -> 298 /
 * 295-297 (the K types' 2048-wide rows do not fit 32 tokens: unchanged);
 * three more alternations against the rows: Q8_0 T = 32 257-259 -> 278-
 * 280, Q5_0 T = 32 254-279 -> 278-284. `ingot bench --batch 32 --prompt
 * 512 --runner mega --runs 3 --gen 32`, three alternations, tok/s: batch
 * 32 1121-1167 -> 1176-1179, prefill 2048-2096 -> 2090-2129. */
ALWAYS_INLINE void amx_gather(enum qtype t, const uint8_t *a, size_t a_stride, int64_t c0,
			      int64_t c1, int64_t runs, uint8_t *g)
{
	const size_t K = (size_t)amx_run_k(t);
	for (int64_t tk = c0; tk < c1; tk++) {
		const int64_t p = (tk - c0) / AMX_TOKENS, i = (tk - c0) % AMX_TOKENS;
		const uint8_t *row = a + (size_t)tk * a_stride;
		for (int64_t r = 0; r < runs; r++)
			memcpy(g + (size_t)((p * runs + r) * AMX_TOKENS + i) * K, amx_run_a(t, row, r), K);
	}
}

/* C += A * B: Q8_0 and Q5_0 unpacked as signed quants (TDPBSSD, no
 * offset to take back out), the K types as unsigned (TDPBSUD). The tile
 * numbers must be literals. */
#define AMX_DP(t, c, a, b)                 \
	do {                               \
		if (quant_r16_k_type(t))   \
			_tile_dpbsud(c, a, b); \
		else                       \
			_tile_dpbssd(c, a, b); \
	} while (0)

/* Run r's C into tile set r % 2. */
ALWAYS_INLINE void amx_issue(enum qtype t, const uint8_t *u, const struct amx_a *a, int64_t r)
{
	const uint8_t *ar = amx_a_run(t, a, r), *br = amx_run_b(t, u, r);
	const size_t a_stride = a->gathered ? (size_t)amx_run_k(t) : a->stride;
	if (r % 2 == 0) {
		_tile_loadd(TA0, ar, a_stride);
		_tile_loadd(TB0, br, 64);
		_tile_zero(TC0);
		AMX_DP(t, TC0, TA0, TB0);
	} else {
		_tile_loadd(TA1, ar, a_stride);
		_tile_loadd(TB1, br, 64);
		_tile_zero(TC1);
		AMX_DP(t, TC1, TA1, TB1);
	}
}

/* ---- what follows each product ---- */

/* Q8_0 / Q5_0 block b for the 16 tokens of groups ga, gb (their block b),
 * from the stored C (the signed quants' exact sums, which the VNNI
 * kernels form as the unsigned ones' plus the offset correction):
 * acc[i] = fma(dw * da_i, (float)C[i], acc[i]), r16_step as they take it. */
ALWAYS_INLINE void amx_block_step(enum qtype t, const uint8_t *tile, int64_t b,
				  const int32_t c[AMX_TOKENS][QUANT_R16_ROWS],
				  const struct quant_gemm_block *ga, const struct quant_gemm_block *gb,
				  __m512 acc[AMX_TOKENS])
{
	const __m512 dw = r16_scales(t, tile, b);
	const struct r16_toks tk = { .d = { ga->d, gb->d } };
	_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++)
		acc[i] = r16_step(dw, &tk, i, _mm512_load_si512(c[i]), acc[i]);
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

/* The next tile's lines, into L2, a few at each run of every pass over
 * this one (each pass its share of the lines: a struct r16_pf whose
 * per_block is the lines a run, fetched by r16_prefetch_next): a burst of
 * prefetches for the whole tile (170 lines of Q8_0) fills the line-fill
 * buffers and stalls the core until memory answers, and so does a rate
 * above the memory's (the first of two passes fetching it all: the LM
 * head against 32 tokens streamed at 6 GB/s a thread, computing at 60% of
 * its hot speed, memory and arithmetic hardly overlapping). next NULL:
 * nothing to fetch (the last tile). */

/* Run r's stored C (16 or T tokens' rows) into the 16 tokens' sums:
 * Q8_0 / Q5_0 into acc; K types into S, and at a super-block's last run
 * from S into acc and accm. */
ALWAYS_INLINE void amx_finish_run(enum qtype t, const uint8_t *tile, int64_t r,
				  const int32_t c[AMX_TOKENS][QUANT_R16_ROWS], const void *g0, const void *g1,
				  __m512i S[AMX_TOKENS], __m512 acc[AMX_TOKENS], __m512 accm[AMX_TOKENS])
{
	if (!quant_r16_k_type(t)) {
		const struct quant_gemm_block *ga = g0, *gb = g1;
		amx_block_step(t, tile, r, c, ga + r, gb + r, acc);
		return;
	}
	const int64_t per = amx_runs_per_block(t), b = r / per;
	const uint8_t *sb = tile + (size_t)b * quant_r16k_sb_bytes(t);
	const __m512i sc = r16k_run_scale(t, sb, (int)(r % per));
	_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++)
		S[i] = _mm512_add_epi32(S[i], _mm512_mullo_epi32(_mm512_load_si512(c[i]), sc));
	if (r % per == per - 1) {
		const struct quant_gemm_kblock *ga = g0, *gb = g1;
		amx_sb_step(t, sb, ga + b, gb + b, S, acc, accm);
		_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++)
			S[i] = _mm512_setzero_si512();
	}
}

/* One tile against m tokens (16, or a call's T < 16 configured for: more
 * than 8, amx_min_tokens): their activation quants as a says, their
 * packed groups at g0 and g1 (nb blocks or super-blocks each), into
 * out[0 .. 16) (the lanes past m are computed from zeros and dropped).
 * Two runs a stage: their products are stored, the next two issued into
 * the freed tiles, then the vector work takes the stored two while the
 * tile unit computes. Against one run a stage (store, issue the next,
 * finish), `quant_bench --gemm 16,32,128`, two alternating rounds, G
 * multiply-adds/s at T = 32 / 128: Q8_0 304-335 / 304-306 -> 320-334 /
 * 322-325, Q5_0 385 / 348-351 -> 391-392 / 340-387, Q4_K 243-259 / 293-297
 * -> 253-267 / 294, Q6_K 166-176 / 176-206 -> 192-193 / 220-221. */
ALWAYS_INLINE void amx_tokens(enum qtype t, const uint8_t *tile, const uint8_t *u, int64_t nb,
			      const struct amx_a *a, const void *g0, const void *g1, int m,
			      const struct r16_pf *pf, __m512 out[AMX_TOKENS])
{
	int32_t c[2][AMX_TOKENS][QUANT_R16_ROWS] __attribute__((aligned(64)));
	if (m < AMX_TOKENS) /* their rows past m are never stored to */
		for (int k = 0; k < 2; k++)
			memset(c[k][m], 0, sizeof c[k][0] * (size_t)(AMX_TOKENS - m));
	__m512 acc[AMX_TOKENS], accm[AMX_TOKENS];
	__m512i S[AMX_TOKENS];
	_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++) {
		acc[i] = accm[i] = _mm512_setzero_ps();
		S[i] = _mm512_setzero_si512();
	}
	const int64_t runs = nb * amx_runs_per_block(t);
	amx_issue(t, u, a, 0);
	if (runs > 1)
		amx_issue(t, u, a, 1);
	for (int64_t r = 0; r < runs; r += 2) {
		r16_prefetch_next(pf, r);
		r16_prefetch_next(pf, r + 1);
		_tile_stored(TC0, c[0], 64);
		if (r + 1 < runs)
			_tile_stored(TC1, c[1], 64);
		if (r + 2 < runs)
			amx_issue(t, u, a, r + 2);
		if (r + 3 < runs)
			amx_issue(t, u, a, r + 3);
		amx_finish_run(t, tile, r, c[0], g0, g1, S, acc, accm);
		if (r + 1 < runs)
			amx_finish_run(t, tile, r + 1, c[1], g0, g1, S, acc, accm);
	}
	_Pragma("GCC unroll 16") for (int i = 0; i < AMX_TOKENS; i++)
		out[i] = t == QTYPE_Q4_K ? _mm512_sub_ps(acc[i], accm[i]) : acc[i];
}

/* A tile's nb blocks or super-blocks unpacked into u as B tiles, run
 * after run, with the VNNI kernels' unpacking; Q8_0 and Q5_0 then less
 * their offset (128, 16: the signed quants, for TDPBSSD). */
ALWAYS_INLINE void amx_unpack(enum qtype t, const uint8_t *tile, int64_t nb, uint8_t *u)
{
	for (int64_t b = 0; b < nb; b++) {
		__m512i q[R16_QUADS];
		__m512 dw;
		if (!quant_r16_k_type(t)) {
			r16_block(t, tile, b, q, &dw);
			/* u - 128 as the sign bit flipped (Q8_0; a subtraction
			 * wraps there, which SIMDe's emulation, under UBSan in
			 * test_r16_amx, reports as signed overflow); u - 16
			 * (Q5_0, u < 32) as it is */
			const __m512i o = _mm512_set1_epi8((char)(1 << r16_offset_log2(t)));
			_Pragma("GCC unroll 8") for (int k = 0; k < R16_QUADS; k++)
				_mm512_store_si512(u + (size_t)b * QUANT_R16_ROWS * QK + 64 * k,
						   t == QTYPE_Q8_0 ? _mm512_xor_si512(q[k], o) : _mm512_sub_epi8(q[k], o));
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

/* Whether the tiles take a call: packed groups (T >= 4), amx_min_tokens
 * or more, rows of at most AMX_MAX_BLOCKS blocks. */
ALWAYS_INLINE bool amx_takes(enum qtype t, int64_t n, const void *packed, int64_t T)
{
	return packed && n <= AMX_MAX_BLOCKS * QK && T >= amx_min_tokens(t);
}

/* The gemm_r16 contract (quant.h) for t on a call amx_takes: chunk by
 * chunk of tokens, the chunk's activation quants gathered into ga
 * (AMX_A_BYTES) where they fit, each tile of [r0, r1) unpacked into u
 * (AMX_U_BYTES) and taken 16 tokens at a time (or all of fewer than
 * 16), the first
 * chunk prefetching the next tile into L2 (up to the tiles of r_pf); then
 * any tokens past the last full 16 through amx_fallback[t]. */
ALWAYS_INLINE void amx_gemm(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r0,
			    int64_t r1, const void *a, size_t a_stride, const void *packed, int64_t T,
			    float *y, int64_t y_stride, int64_t r_pf, uint8_t *u, uint8_t *ga)
{
	if (r0 >= r1)
		return;
	const bool kt = quant_r16_k_type(t);
	const int64_t nb = n / (kt ? QK_K : QK);
	const size_t group_bytes =
		(size_t)nb * (kt ? sizeof(struct quant_gemm_kblock) : sizeof(struct quant_gemm_block));
	/* the tokens past the last 16 (when there are 16 or more) go to the
	 * fallback afterwards, over the same rows (in L2 by then) */
	const int64_t T_amx = T < AMX_TOKENS ? T : T - T % AMX_TOKENS;
	const size_t tile_bytes = quant_r16_tile_bytes(t, n);
	const int64_t tiles_end = ((r_pf > r1 ? r_pf : r1) + QUANT_R16_ROWS - 1) / QUANT_R16_ROWS;
	const int64_t runs = nb * amx_runs_per_block(t);
	const size_t lines = (tile_bytes + 63) / 64;
	/* the tokens in chunks whose activation rows stay in L1 while the
	 * call's tiles pass (the tiles come back from L2 for the next chunk);
	 * rows too long for 32 tokens' (Q8_K of 1024 and more) in one chunk:
	 * 16-token chunks, each unpacking every tile again, were slower. On
	 * the Sapphire Rapids-class host, a 512-token prefill (`ingot bench
	 * --batch 1 --runner mega --runs 2 --gen 2 --prompt 512 --profile`,
	 * the graph runner, each thread's half of a matrix a call), ms: qkv
	 * 24 -> 18-21, gate_up 68 -> 52-58; the AVX-512 table's 24-25 and
	 * 70-72 in the same rounds. The megakernel, a few tiles a call, gains
	 * nothing (its prefill within noise). */
	int64_t chunk = (int64_t)(AMX_CHUNK_BYTES / a_stride) / AMX_TOKENS * AMX_TOKENS;
	chunk = chunk < 2 * AMX_TOKENS ? T_amx : chunk;
	struct amx_tilecfg cfg __attribute__((aligned(64)));
	amx_configure(&cfg, amx_run_k(t), T);
	for (int64_t c0 = 0; c0 < T_amx; c0 += chunk) {
		const int64_t c1 = T_amx - c0 < chunk ? T_amx : c0 + chunk;
		const size_t pass_bytes = (size_t)runs * AMX_TOKENS * (size_t)amx_run_k(t);
		const bool gather =
			(size_t)((c1 - c0 + AMX_TOKENS - 1) / AMX_TOKENS) * pass_bytes <= AMX_A_BYTES;
		if (gather)
			amx_gather(t, a, a_stride, c0, c1, runs, ga);
		/* the first chunk's passes prefetch the next tile, each a share */
		const int64_t passes = (c1 - c0 + AMX_TOKENS - 1) / AMX_TOKENS;
		const size_t share = (lines + (size_t)passes - 1) / (size_t)passes;
		const size_t per_run = (share + (size_t)runs - 1) / (size_t)runs;
		for (int64_t ti = r0 / QUANT_R16_ROWS; ti * QUANT_R16_ROWS < r1; ti++) {
			const uint8_t *tile = (const uint8_t *)w + (size_t)ti * tile_bytes;
			const uint8_t *next = c0 == 0 && ti + 1 < tiles_end ? tile + tile_bytes : NULL;
			amx_unpack(t, tile, nb, u);
			const __mmask16 rows = r16_rows_mask(ti, r0, r1);
			for (int64_t t0 = c0; t0 < c1; t0 += AMX_TOKENS) {
				const int m = (int)(c1 - t0 < AMX_TOKENS ? c1 - t0 : AMX_TOKENS);
				const uint8_t *g0 = (const uint8_t *)packed + (size_t)(t0 / QUANT_GEMM_GROUP) * group_bytes;
				const uint8_t *g1 = m > QUANT_GEMM_GROUP ? g0 + group_bytes : g0;
				const struct amx_a at = {
					gather ? ga + (size_t)((t0 - c0) / AMX_TOKENS) * pass_bytes
					       : (const uint8_t *)a + (size_t)t0 * a_stride,
					a_stride, gather
				};
				/* this pass's share of the next tile: lines [l0, l0 + share) */
				const size_t l0 = (size_t)((t0 - c0) / AMX_TOKENS) * share;
				const struct r16_pf pf = { .next = next && l0 < lines ? next + 64 * l0 : NULL,
							   .lines = l0 + share < lines ? share : lines - l0,
							   .per_block = per_run };
				__m512 acc[AMX_TOKENS];
				amx_tokens(t, tile, u, nb, &at, g0, g1, m, &pf, acc);
				for (int i = 0; i < m; i++)
					_mm512_mask_storeu_ps(y + (t0 + i) * y_stride + ti * QUANT_R16_ROWS, rows,
							      acc[i]);
			}
		}
	}
	_tile_release();
	const int64_t rest = T - T_amx;
	if (rest > 0)
		amx_fallback[t](n, w, w_stride, r0, r1, (const uint8_t *)a + (size_t)T_amx * a_stride, a_stride,
				rest >= QUANT_GEMM_PACK_MIN ?
					(const uint8_t *)packed + (size_t)(T_amx / QUANT_GEMM_GROUP) * group_bytes :
					NULL,
				rest, y + T_amx * y_stride, y_stride, r_pf);
}

/* An entry: the calls the tiles take to amx_gemm, with the unpacking
 * and gathering buffers (32 KB each) in a frame of their own; the rest
 * straight to the fallback. */
#define AMX_ENTRY(fn, type)                                                                         \
	__attribute__((noinline)) static void fn##_tiles(                                           \
		int64_t n, const void *w, size_t w_stride, int64_t r0, int64_t r1, const void *a,  \
		size_t a_stride, const void *packed, int64_t T, float *y, int64_t y_stride,         \
		int64_t r_pf)                                                                       \
	{                                                                                              \
		uint8_t u[AMX_U_BYTES] __attribute__((aligned(64)));                                    \
		uint8_t ga[AMX_A_BYTES] __attribute__((aligned(64)));                                   \
		amx_gemm(type, n, w, w_stride, r0, r1, a, a_stride, packed, T, y, y_stride, r_pf, u, ga); \
	}                                                                                              \
	static void fn(int64_t n, const void *w, size_t w_stride, int64_t r0, int64_t r1, const void *a, \
		       size_t a_stride, const void *packed, int64_t T, float *y, int64_t y_stride,     \
		       int64_t r_pf)                                                                   \
	{                                                                                              \
		if (amx_takes(type, n, packed, T))                                                     \
			fn##_tiles(n, w, w_stride, r0, r1, a, a_stride, packed, T, y, y_stride, r_pf);  \
		else                                                                                   \
			amx_fallback[type](n, w, w_stride, r0, r1, a, a_stride, packed, T, y, y_stride, \
					   r_pf);                                                      \
	}
AMX_ENTRY(gemm_q8_0_amx, QTYPE_Q8_0)
AMX_ENTRY(gemm_q5_0_amx, QTYPE_Q5_0)
AMX_ENTRY(gemm_q4_K_amx, QTYPE_Q4_K)
AMX_ENTRY(gemm_q6_K_amx, QTYPE_Q6_K)

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
