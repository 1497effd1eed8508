/* quant_r16_drive.h — the passes over the tiles of a repacked matrix
 * (quant.h: weights 16 rows to a tile) shared by every ISA's repacked
 * kernels (quant_gemm_r16_avx512.c, quant_gemm_r16_avx2.c): how the rows
 * are cut into tiles and runs of tiles, the tokens into packed groups
 * (passed two at a time) and plain rows, the activations into chunks
 * that stay in L2, and what each pass prefetches. An ISA file supplies
 * the work on one tile (a pass of groups, or one plain row, and the
 * preparation of a plain row's blocks) as always-inline functions, so each
 * entry compiles to one loop nest.
 *
 * Include only from an ISA file, after quant_avx2_int.h (or what gives
 * ALWAYS_INLINE and the block structs: quant_int.h), twice: first for the
 * types and helpers its tile functions use; then, after those functions,
 * with R16_TILE_GROUPS, R16_TILE_PLAIN and R16_PLAIN_PREPARE (and
 * optionally R16_TILE_GROUPS2 and R16_TILE_PLAIN2) defined as their
 * names and R16_PASS_GROUPS as its groups per pass, for r16_gemm_drive
 * over them. Direct calls, not
 * pointers: GCC inlines an always_inline function passed as a pointer
 * only when its optimizer has made the call direct first, which at -O1
 * (the ASan and TSan builds) it did not, leaving a call per tile that
 * dispatched on the type, with ASan's redzones around the tile functions'
 * arrays: that build's decode layers ran 3-5x slower and test_engine
 * under ASan took 717 s against 134. */
#ifndef INGOT_QUANT_R16_DRIVE_H
#define INGOT_QUANT_R16_DRIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "quant.h"
#include "quant_int.h"

#define R16_QUADS (QK / 4) /* quad vectors per block */

/* A tile is one linear stream (scales and quants interleaved, quant.h),
 * which on the Zen 4 host the hardware prefetcher follows at the memory's
 * rate; not so on the Emerald Rapids host (struct r16_pf, stream).
 * Measured on the Zen 4 host (the whole 262144 x 640 LM head, one token,
 * one thread, two rounds): no prefetch 33.0 GB/s; the row-major kernels'
 * plan (the next tile into L1, the tile 8 ahead into L2) 21.7-22.1; the
 * next tile into L1 alone 29-30. With the scales in a run of their own
 * after a tile's quads, 21-24 GB/s whatever the prefetch. */

/* ... except in the passes of groups, which stream from memory at a
 * third or less of its rate (16 tokens: 10.9 KB of Q8_0 tile a
 * microsecond a core) and there lose the hardware prefetcher at each 4 KB
 * page: every page then starts at the memory's latency. Each block (or
 * super-block) of the first pass over a run of tiles prefetches the lines
 * R16_PREFETCH_AHEAD bytes further, into the next page before the stream
 * gets there. Measured on the Zen 4 host, the whole Q8_0 LM head against
 * T tokens, 2 threads in 2048-row pieces as exec_lm_head cuts it, best of
 * 5 in three alternating rounds: T = 16 14.5-22.8 -> 9.6-12.1 ms (the
 * memory alone takes 5.9, the multiplies 7.5), T = 32 21.6-22.4 ->
 * 18.2-20.0, T = 8 (bound by the memory) within noise; 1 KB ahead was
 * slower, 3-4 KB about the same, 8 KB slower at T = 16. */
#define R16_PREFETCH_AHEAD 2048

/* (__builtin_prefetch, not _mm_prefetch: GCC 12 dropped this loop's
 * _mm_prefetch calls from every instance, leaving no prefetch at all) */
static inline void r16_prefetch(const uint8_t *p, size_t bytes)
{
	for (size_t o = 0; o < bytes; o += 64)
		__builtin_prefetch(p + R16_PREFETCH_AHEAD + o, 0, 3); /* prefetcht0 */
}

/* What one pass of groups over a tile prefetches. ahead: the first pass
 * over a run of tiles, which reads the tile from memory, fetches its own
 * lines R16_PREFETCH_AHEAD further into L1 (r16_prefetch); with
 * R16_AHEAD_EVERY_PASS (below) every pass over a Q8_0 or Q5_0 run does.
 * next: where the run has a successor (in the call's rows, or for the
 * last run in the rows the caller names as its next, r_pf: the
 * megakernel's next chunk, a few tiles at batch 8, which otherwise began
 * cold; not measured on an AVX-512 host yet), every pass fetches into L2
 * its share of the tile that the next run holds at this place (the
 * `lines` cache lines from next, per_block of them a block): the passes
 * of a run fetch the next run between them, so the weights stream from
 * memory through all of a run's passes
 * instead of its first alone (which, computing on half the tokens or
 * fewer, wants them faster than the memory gives them while the later
 * passes leave it idle). Measured on the Emerald Rapids host, the whole
 * Q8_0 LM head (lmhead_bench, 2 threads, 8 rounds, three alternations,
 * best / 4th best, ms): T = 32 19.2-22.8 / 22.5-27.2 -> 15.7-16.9 /
 * 18.0-21.8; T = 16 10.2-13.0 / 11.8-13.7 -> 9.8-10.4 / 10.5-19.0 (prefetcht0
 * for the next run: no better; no ahead prefetch: T = 32 about the same,
 * T = 16 slower; neither prefetch: T = 32 30-33). */
struct r16_pf {
	bool ahead, stream;
	const uint8_t *next;
	size_t lines, per_block;
};

/* stream: the one pass of a plain row (fewer tokens than a group) over
 * tiles no pass of groups brought in, which prefetches the lines
 * R16_STREAM_AHEAD bytes further into L2, a block's (or super-block's)
 * share at a time, as bench.c's stream probe does. Here too the hardware
 * prefetcher alone restarts at each 4 KB page, and a pass of one token
 * computes too little to hide that. Measured on the Emerald Rapids host,
 * `ingot bench --batch 1 --runner mega --prompt 16`, five alternating
 * rounds, tok/s: none 72 62 64 52 76; 4 KB into L2 87 83 88 118 108; 2
 * KB into L1 85 76 72 115 86; 8 KB into L2 86 79 56 124 92. */
#define R16_STREAM_AHEAD 4096

/* ... and, where the ISA file sets R16_STREAM_L1_AHEAD before including
 * this header, the same lines again that many bytes ahead into L1
 * (prefetcht0), so that the loads of a pass of one token hit L1 rather
 * than wait on L2. Measured on the Sapphire Rapids-class host (the
 * AVX-512 file; the AVX2 one, whose hosts were not at hand, leaves it
 * out), `ingot bench --batch 1 --runner mega --runs 5 --gen 64 --prompt
 * 16`, processes alternating A B B A, tok/s ratio: 512 bytes against
 * none 1.036 (four cycles, each above 1.02), 256 against 512 0.967,
 * 1024 against 512 1.014, 2048 against 1024 0.984. */
#ifndef R16_STREAM_L1_AHEAD
#define R16_STREAM_L1_AHEAD 0
#endif

/* ... and, where the ISA file sets R16_AHEAD_EVERY_PASS to 1 before
 * including this header, every pass of groups over a Q8_0 or Q5_0 run,
 * not its first alone, fetches its own lines R16_PREFETCH_AHEAD further
 * (pf->ahead): the later passes read the run from L2, where the next-run
 * prefetch left it, and their loads then hit L1. Measured on the Emerald
 * Rapids host (AVX-512 file; its neighbour halves a core's speed for
 * seconds at a time, so minima of many rounds): `lmhead_bench --threads 1
 * --tokens 32 --rounds 20-30`, alternating builds, ms, Q8_0 26.68-26.93 ->
 * 26.25-26.43, Q5_0 44.11-44.41 -> 43.15-43.37, Q4_K 66.16-66.39 ->
 * 67.54-67.69 and Q6_K 57.93-58.34 -> 58.32-58.46 (so not the K types);
 * the AVX2 file's Q5_0 102.55-102.80 -> 102.54-103.11 (left as it was).
 * `ingot bench -t 1 --batch 32 --runner graph --runs 3 --gen 32 --prompt
 * 16 --profile`, three alternating rounds: 615.9-620.1 -> 624.8-628.7
 * tok/s, the LM head 26.61-27.31 -> 26.00-26.16 ms, gate_up 8.74-8.96 ->
 * 8.59-8.69; two threads, mega, four rounds, the step 26.62-27.13 ->
 * 26.15-26.61 ms. */
#ifndef R16_AHEAD_EVERY_PASS
#define R16_AHEAD_EVERY_PASS 0
#endif

static inline void r16_prefetch_stream(const struct r16_pf *pf, const uint8_t *p, size_t bytes)
{
	if (!pf->stream)
		return;
	for (size_t o = 0; o < bytes; o += 64)
		__builtin_prefetch(p + R16_STREAM_AHEAD + o, 0, 2); /* prefetcht1 */
	if (R16_STREAM_L1_AHEAD > 0)
		for (size_t o = 0; o < bytes; o += 64)
			__builtin_prefetch(p + R16_STREAM_L1_AHEAD + o, 0, 3); /* prefetcht0 */
}

/* Lines [l0, l1) of the next run (those below pf->lines), into L2
 * (prefetcht1). */
ALWAYS_INLINE void r16_prefetch_next_lines(const struct r16_pf *pf, size_t l0, size_t l1)
{
	if (!pf->next)
		return;
	l1 = l1 < pf->lines ? l1 : pf->lines;
	for (size_t l = l0; l < l1; l++)
		__builtin_prefetch(pf->next + 64 * l, 0, 2);
}

/* Block b's share of the next run's lines. */
ALWAYS_INLINE void r16_prefetch_next(const struct r16_pf *pf, int64_t b)
{
	const size_t l0 = (size_t)b * pf->per_block;
	r16_prefetch_next_lines(pf, l0, l0 + pf->per_block);
}

/* Part j of n of what a pass of groups prefetches at block (or super-
 * block) b, whose bytes start at p: its own lines R16_PREFETCH_AHEAD
 * further where the pass is the run's first (pf->ahead), and its share of
 * the next run. The K types' passes call it at each of a super-block's n
 * runs of quads: a super-block's lines (Q4_K 37, Q6_K 53, each ahead and
 * again for the next run) then go out a run's share at a time rather than
 * in one burst at its start, which left the stream waiting on a full
 * queue of misses while the runs computed. Measured on the Sapphire
 * Rapids-class host, `lmhead_bench --tokens 8 --threads 2` (Q4_K 194 MB,
 * Q6_K 282 MB), the best 2 of 5-7 rounds, alternating processes: AVX-512,
 * T = 8, Q4_K 10.5-11.7 -> 9.4 ms, Q6_K 9.0-11.3 -> 8.7-9.0; T = 16, Q4_K
 * 20-23 -> 16-18, Q6_K 17.4-19.2 -> 13.5-15.8; the AVX2 Q4_K kernel
 * (--isa avx2, parts of 4 rows), T = 8 19.8-22.7 -> 16.8-17.4, T = 16
 * 33.5-34.7 -> 28.3-31.6. */
ALWAYS_INLINE void r16_prefetch_block_part(const struct r16_pf *pf, const uint8_t *p, size_t bytes,
					   int64_t b, int j, int n)
{
	if (pf->ahead) {
		const size_t o0 = bytes * (size_t)j / (size_t)n;
		r16_prefetch(p + o0, bytes * (size_t)(j + 1) / (size_t)n - o0);
	}
	const size_t base = (size_t)b * pf->per_block;
	r16_prefetch_next_lines(pf, base + pf->per_block * (size_t)j / (size_t)n,
				base + pf->per_block * (size_t)(j + 1) / (size_t)n);
}

/* All of block b's prefetches at once (Q8_0, Q5_0: a block's are few). */
ALWAYS_INLINE void r16_prefetch_block(const struct r16_pf *pf, const uint8_t *p, size_t bytes,
				      int64_t b)
{
	r16_prefetch_block_part(pf, p, bytes, b, 0, 1);
}

/* Packed activations per pass over the tiles (prefill): 512 KB, half
 * of L2, holds 80 groups of 640-wide rows, so the default model's 512-
 * token prefill reads each tile once. */
#define R16_CHUNK_BYTES (512u * 1024)

/* Tiles per run over which each pass of groups (a pair on AVX-512) goes in turn: with more than
 * two groups (T > 16) a tile's passes would otherwise each bring the
 * groups back from L2 (a tile and four groups of 640-wide activations,
 * 36.5 KB, overfill L1); a run of 8 tiles (87 KB of Q8_0) waits in L2
 * for the next pair instead. The whole Q8_0 LM head streaming, T = 32,
 * one thread, three rounds: 125-130 G multiply-adds/s tile by tile, 134-
 * 135 in runs of 8, 133-135 of 16; 110-118 over all tiles (the weights
 * read from memory once per pair). */
#define R16_TILE_CHUNK 8

/* log2 of the unsigned offset: 128 (Q8_0), 16 (Q5_0). */
ALWAYS_INLINE int r16_offset_log2(enum qtype t)
{
	return t == QTYPE_Q8_0 ? 7 : 4;
}

/* Where nt tokens' data of one block (Q8_0, Q5_0) or super-block (K
 * types) lie: token i's quad k at x[i / 8] + k * step + 4 * (i % 8); its
 * bsum pair j (K types: bsums 2j, 2j + 1 as int16) at p[i / 8] + j * step
 * + 4 * (i % 8); its scale at d[i / 8][i % 8]. step: 32 in a packed group
 * (quant_gemm_block, quant_gemm_kblock), 4 in a plain row. */
struct r16_toks {
	const uint8_t *x[2], *p[2];
	const float *d[2];
	size_t step;
};

/* The signatures of the functions the second inclusion's macros name.
 *
 * R16_TILE_GROUPS: tile ti against the groups of one pass, from g0
 * (R16_PASS_GROUPS of them at most, and none from c1 on) into y, the
 * lanes of tokens below T and rows in [r0, r1) only; pf: what the pass
 * prefetches. */
typedef void (*r16_tile_groups_fn)(enum qtype t, const void *w, size_t tile_bytes, int64_t ti,
				   int64_t r0, int64_t r1, int64_t nb, const void *packed,
				   size_t group_bytes, int64_t g0, int64_t c1, int64_t T,
				   const struct r16_pf *pf, float *y, int64_t y_stride);

/* R16_TILE_PLAIN: tile ti against one plain activation row at (Q8_0
 * blocks prepared by R16_PLAIN_PREPARE; Q8_K for the K types) into its
 * row of results yr, rows in [r0, r1) only; stream: prefetch ahead
 * (struct r16_pf). */
typedef void (*r16_tile_plain_fn)(enum qtype t, const void *w, size_t tile_bytes, int64_t ti,
				  int64_t r0, int64_t r1, int64_t nb, const void *at,
				  const int32_t *corr, const float *da, bool stream, float *yr);

/* R16_TILE_GROUPS2 (optional): R16_TILE_GROUPS for tiles ti and ti + 1
 * of one run at once (pf, pf2: what each tile's pass prefetches), where
 * one load of a token's quad feeding both tiles pays; returns false,
 * having done nothing, for the passes it leaves to R16_TILE_GROUPS. */
typedef bool (*r16_tile_groups2_fn)(enum qtype t, const void *w, size_t tile_bytes, int64_t ti,
				    int64_t r0, int64_t r1, int64_t nb, const void *packed,
				    size_t group_bytes, int64_t g0, int64_t c1, int64_t T,
				    const struct r16_pf *pf, const struct r16_pf *pf2, float *y,
				    int64_t y_stride);

/* R16_TILE_PLAIN2 (optional): R16_TILE_PLAIN for two plain rows at once
 * (at, bt, their prepared blocks, results into ya, yb; stream for the
 * pair's pass), where sharing the tile's unpacking pays; returns false,
 * having done nothing, for a type it leaves to R16_TILE_PLAIN. */
typedef bool (*r16_tile_plain2_fn)(enum qtype t, const void *w, size_t tile_bytes, int64_t ti,
				   int64_t r0, int64_t r1, int64_t nb, const void *at,
				   const void *bt, const int32_t *corr_a, const int32_t *corr_b,
				   const float *da_a, const float *da_b, bool stream, float *ya,
				   float *yb);

/* R16_PLAIN_PREPARE: a plain Q8_0 activation row's blocks as the tile
 * kernels take them, made once per call rather than once per tile:
 * corr[b] = -(1 << off_log2) * the sum of block b's quants, da[b] its
 * scale. */
typedef void (*r16_plain_prepare_fn)(const struct block_q8_0 *a, int64_t nb, int off_log2,
				     int32_t *corr, float *da);

#endif

/* ---- the drive, on the second inclusion ---- */
#if defined(R16_TILE_GROUPS) && !defined(INGOT_QUANT_R16_DRIVE_PASSES)
#define INGOT_QUANT_R16_DRIVE_PASSES

/* the named functions have the signatures above (typeof: nothing is
 * called through a pointer) */
_Static_assert(__builtin_types_compatible_p(__typeof__(&R16_TILE_GROUPS), r16_tile_groups_fn),
	       "R16_TILE_GROUPS: r16_tile_groups_fn");
_Static_assert(__builtin_types_compatible_p(__typeof__(&R16_TILE_PLAIN), r16_tile_plain_fn),
	       "R16_TILE_PLAIN: r16_tile_plain_fn");
_Static_assert(__builtin_types_compatible_p(__typeof__(&R16_PLAIN_PREPARE), r16_plain_prepare_fn),
	       "R16_PLAIN_PREPARE: r16_plain_prepare_fn");
#ifdef R16_TILE_GROUPS2
_Static_assert(__builtin_types_compatible_p(__typeof__(&R16_TILE_GROUPS2), r16_tile_groups2_fn),
	       "R16_TILE_GROUPS2: r16_tile_groups2_fn");
#endif
#ifdef R16_TILE_PLAIN2
_Static_assert(__builtin_types_compatible_p(__typeof__(&R16_TILE_PLAIN2), r16_tile_plain2_fn),
	       "R16_TILE_PLAIN2: r16_tile_plain2_fn");
#endif

/* Where a pass's share of tile tn's lines starts (line line0 on), for its
 * next-run prefetch (struct r16_pf): NULL from tile_end on. */
static inline const uint8_t *r16_next_share(const void *w, size_t tile_bytes, int64_t tn,
					    int64_t tile_end, int64_t line0)
{
	return tn < tile_end ? (const uint8_t *)w + (size_t)tn * tile_bytes + 64 * (size_t)line0 : NULL;
}

/* A gemm entry (quant.h's contract for gemm_r16) over the including ISA
 * file's tile functions; R16_PASS_GROUPS (a constant): the packed groups
 * each pass of R16_TILE_GROUPS takes (AVX-512: 2, its 16 tokens' chains in
 * registers). */
ALWAYS_INLINE void r16_gemm_drive(enum qtype t, int64_t n, const void *w, size_t w_stride,
				  int64_t r0, int64_t r1, const void *a, size_t a_stride,
				  const void *packed, int64_t T, float *y, int64_t y_stride,
				  int64_t r_pf)
{
	if (r1 <= r0 || T <= 0)
		return;
	const bool kt = quant_r16_k_type(t);
	const int64_t nb = n / (kt ? QK_K : QK); /* blocks or super-blocks */
	const size_t tile_bytes = quant_r16_tile_bytes(t, n);
	const size_t group_bytes =
		(size_t)nb * (kt ? sizeof(struct quant_gemm_kblock) : sizeof(struct quant_gemm_block));
	const int64_t groups = quant_gemm_groups(T, packed != NULL, QUANT_GEMM_PACK_MIN);
	const int64_t t_grouped = groups * QUANT_GEMM_GROUP < T ? groups * QUANT_GEMM_GROUP : T;
	const int64_t tile0 = r0 / QUANT_R16_ROWS, tile1 = (r1 - 1) / QUANT_R16_ROWS + 1;
	/* the tiles the caller reads next (rows [r1, r_pf), quant.h): the last
	 * chunk of groups' passes prefetch the next run from them too, so a
	 * megakernel chunk of a few tiles does not start the next one cold */
	const int64_t tile_pf = r_pf > r1 ? (r_pf - 1) / QUANT_R16_ROWS + 1 : tile1;
	/* the plain rows past the groups: fewer than QUANT_GEMM_PACK_MIN,
	 * unless packed was missing where quant.h requires it (then the
	 * reference, rather than overrun the arrays below) */
	if (T - t_grouped >= QUANT_GEMM_PACK_MIN || n / QK > QUANT_R16_MAX_BLOCKS) {
		quant_gemm_r16_ref(t, n, w, w_stride, r0, r1, a, a_stride, packed, T, y, y_stride);
		return;
	}
	int32_t corr[QUANT_GEMM_PACK_MIN - 1][QUANT_R16_MAX_BLOCKS];
	float da[QUANT_GEMM_PACK_MIN - 1][QUANT_R16_MAX_BLOCKS];
	for (int64_t tk = t_grouped; !kt && tk < T; tk++)
		R16_PLAIN_PREPARE((const void *)((const uint8_t *)a + (size_t)tk * a_stride), nb,
				  r16_offset_log2(t), corr[tk - t_grouped], da[tk - t_grouped]);
	/* groups in chunks of at most R16_CHUNK_BYTES of activations, which
	 * stay in L2 while every tile streams past them once per chunk */
	int64_t chunk = (int64_t)(R16_CHUNK_BYTES / group_bytes) / R16_PASS_GROUPS * R16_PASS_GROUPS;
	chunk = chunk < R16_PASS_GROUPS ? R16_PASS_GROUPS : chunk;
	for (int64_t c0 = 0; c0 == 0 || c0 < groups; c0 += chunk) {
		const int64_t c1 = groups - c0 < chunk ? groups : c0 + chunk;
		const bool last = c1 == groups;
		const int64_t tile_next = last && tile_pf > tile1 ? tile_pf : tile1;
		for (int64_t tc0 = tile0; tc0 < tile1; tc0 += R16_TILE_CHUNK) {
			const int64_t tc1 = tile1 - tc0 < R16_TILE_CHUNK ? tile1 : tc0 + R16_TILE_CHUNK;
			const int64_t passes = (c1 - c0 + R16_PASS_GROUPS - 1) / R16_PASS_GROUPS;
			const int64_t lines = (int64_t)(tile_bytes / 64);
			const int64_t run = tc1 - tc0; /* R16_TILE_CHUNK but for the last */
			for (int64_t g0 = c0; g0 < c1; g0 += R16_PASS_GROUPS) {
				/* this pass's share of the next run: lines [line0, line1) */
				const int64_t p = (g0 - c0) / R16_PASS_GROUPS;
				const int64_t line0 = p * lines / passes, line1 = (p + 1) * lines / passes;
				const bool ahead = g0 == c0 || (R16_AHEAD_EVERY_PASS && !kt);
				struct r16_pf pf = { .ahead = ahead,
						     .lines = (size_t)(line1 - line0),
						     .per_block = (size_t)((line1 - line0 + nb - 1) / nb) };
				for (int64_t ti = tc0; ti < tc1; ti++) {
					pf.next = r16_next_share(w, tile_bytes, ti + run, tile_next, line0);
#ifdef R16_TILE_GROUPS2
					if (ti + 1 < tc1) {
						struct r16_pf pf2 = pf;
						pf2.next = r16_next_share(w, tile_bytes, ti + 1 + run, tile_next,
									  line0);
						if (R16_TILE_GROUPS2(t, w, tile_bytes, ti, r0, r1, nb, packed,
								     group_bytes, g0, c1, T, &pf, &pf2, y,
								     y_stride)) {
							ti++;
							continue;
						}
					}
#endif
					R16_TILE_GROUPS(t, w, tile_bytes, ti, r0, r1, nb, packed, group_bytes,
							g0, c1, T, &pf, y, y_stride);
				}
			}
			for (int64_t ti = tc0; last && ti < tc1; ti++)
				for (int64_t tk = t_grouped; tk < T; tk++) {
					const uint8_t *at = (const uint8_t *)a + (size_t)tk * a_stride;
					const bool stream = groups == 0 && tk == t_grouped;
#ifdef R16_TILE_PLAIN2
					if (tk + 1 < T &&
					    R16_TILE_PLAIN2(t, w, tile_bytes, ti, r0, r1, nb, at, at + a_stride,
							    corr[tk - t_grouped], corr[tk + 1 - t_grouped],
							    da[tk - t_grouped], da[tk + 1 - t_grouped], stream,
							    y + tk * y_stride, y + (tk + 1) * y_stride)) {
						tk++;
						continue;
					}
#endif
					R16_TILE_PLAIN(t, w, tile_bytes, ti, r0, r1, nb, at,
						       corr[tk - t_grouped], da[tk - t_grouped], stream,
						       y + tk * y_stride);
				}
		}
	}
}

/* A gemm entry of quant.h's contract named `name` for type `type` (a
 * constant) over r16_gemm_drive. */
#define R16_GEMM_ENTRY(name, type)                                                                \
	static void name(int64_t n, const void *w, size_t w_stride, int64_t r0, int64_t r1,        \
			 const void *a, size_t a_stride, const void *packed, int64_t T, float *y,   \
			 int64_t y_stride, int64_t r_pf)                                            \
	{                                                                                          \
		r16_gemm_drive(type, n, w, w_stride, r0, r1, a, a_stride, packed, T, y, y_stride,     \
			       r_pf);                                                               \
	}

#endif
