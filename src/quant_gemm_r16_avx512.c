/* quant_gemm_r16_avx512.c — the matrix kernels over Q8_0, Q5_0, Q4_K and
 * Q6_K weights repacked 16 rows to a tile (layouts in quant.h and
 * quant_int.h, packing in quant_r16.c and quant_r16k.c), for CPUs with
 * AVX512-VNNI + BW: every matrix of the default model. The K types'
 * super-block code is its own section below; the passes over tiles and
 * groups are shared.
 *
 * A tile's block is 8 vectors of 16 rows x 4 unsigned quants (Q8_0:
 * loaded; Q5_0: unpacked from nibbles and a bit mask, r16_block); a token's
 * block is 8 quads of signed activation bytes, each broadcast from memory
 * (a load and no vector operation on Zen 4: vpdpbusd runs at one per
 * cycle after a vpbroadcastd as with its own {1to16} operand), so one
 * vpdpbusd is 64 products of 16 rows and nothing is summed across lanes.
 * Per token and block: 8 vpdpbusd on an accumulator that starts at -o *
 * sum a (the offset's correction, exact: o = 128 for Q8_0, 16 for Q5_0),
 * then the float step of the contract in quant_gemm_avx2.c, acc = fma(dw
 * * da, (float)isum, acc), on 16 rows at once; those three float
 * operations cost about two vpdpbusd (measured: 8 vpdpbusd + vmulps,
 * vcvtdq2ps, vfmadd run at 0.8 of vpdpbusd's rate), which bounds the
 * kernel near 190 G multiply-adds/s a core on Zen 4. The weight vectors
 * stay in registers for every token of a pass: two packed groups (16
 * tokens) per pass over a tile, each token a chain of vpdpbusd and the 16
 * chains interleaved (r16_chains), each group pair in turn over a run of
 * R16_TILE_CHUNK tiles (which waits in L2 for the next pair); then the
 * tokens past the groups one at a time from their plain rows. A lone
 * group (8 tokens or fewer: batched decode of up to 8) goes over two tiles
 * at a time instead (r16_groups_two_tiles; the K types
 * r16k_group_two_tiles), each broadcast quad feeding both tiles' chains.
 *
 * Measured on the Zen 4 host, against the row-major VNNI kernels on the
 * same rows (`quant_bench --quick`, one thread, cache-resident): Q8_0
 * 640 x 1536, T = 1 32 -> 87 G multiply-adds/s, T = 8 100 -> 180, T = 32
 * 140 -> 180; Q5_0 640 x 2048, T = 1 26 -> 75, T = 8 68 -> 163, T = 32
 * 129 -> 170, T = 128 139 -> 170. The whole Q8_0 LM head streaming from
 * memory, one thread: T = 1 31 -> 33 GB/s, T = 8 86 -> 148 G
 * multiply-adds/s, T = 32 127 -> 137. On the Emerald Rapids host (two
 * vpdpbusd a cycle, latency 5), interleaving 16 chains instead of two
 * (quant_bench's shapes, one thread, cache-resident, G multiply-adds/s):
 * Q8_0 T = 8 169 -> 197, T = 32 176 -> 222; Q5_0 T = 32 155 -> 194;
 * Q4_K T = 32 142 -> 177; Q6_K unchanged (119 -> 124).
 *
 * Bit for bit the Q8_0 / Q5_0 dot entries of the AVX2 and VNNI tables on
 * the original rows: the same exact integer sums, the same float operations
 * in the same order. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"
#include "quant_avx2_int.h"
#define R16_STREAM_L1_AHEAD 1024 /* a pass of one token: quant_r16_drive.h */
#define R16_AHEAD_EVERY_PASS 1 /* the later passes of groups too: quant_r16_drive.h */
#include "quant_r16_drive.h"
#include "quant_r16_avx512.h"

/* s[i] += token i's products with the nq quad vectors q (its quads k0 ..
 * k0 + nq - 1), for nt tokens (a constant at each instance: 1, 8 or 16).
 * Each token is one chain of dependent vpdpbusd; the chains interleave
 * quad by quad, so that nt of them are in flight. On the Emerald Rapids
 * host vpdpbusd issues two a cycle with a latency of 5 (10 chains to keep
 * it busy); two chains interleaved, the scheduler finding the next pair's
 * by itself, ran Q8_0 at 176 G multiply-adds/s a core, 16 at 222. */
ALWAYS_INLINE void r16_chains(const __m512i *q, int nq, const struct r16_toks *tk, int k0, int nt,
			      __m512i *s)
{
	_Pragma("GCC unroll 8") for (int k = 0; k < nq; k++)
		_Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)
			s[i] = _mm512_dpbusd_epi32(s[i], q[k], r16_bcast(tk->x[i / 8], tk, i, k0 + k));
}

/* nt tokens' blocks against the 16 rows (Q8_0, Q5_0): token i's sums start
 * at corr[i] = -offset * the sum of its quants, then the float step of the
 * contract with its scale into acc[i]. */
ALWAYS_INLINE void r16_tokens(const __m512i q[R16_QUADS], __m512 dw, const struct r16_toks *tk,
			      const int32_t *corr, int nt, __m512 *acc)
{
	__m512i s[2 * QUANT_GEMM_GROUP];
	_Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)
		s[i] = _mm512_set1_epi32(corr[i]);
	r16_chains(q, R16_QUADS, tk, 0, nt, s);
	_Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)
		acc[i] = r16_step(dw, tk, i, s[i], acc[i]);
}

/* ng (1 or 2, a constant at each instance) packed groups at g (nb blocks
 * apart) against one tile: acc[8 * gi + l] gets token l of group gi; pf:
 * what to prefetch (struct r16_pf). */
ALWAYS_INLINE void r16_groups(enum qtype t, const uint8_t *tile, int64_t nb,
			      const struct quant_gemm_block *g, int ng, const struct r16_pf *pf,
			      __m512 out[2 * QUANT_GEMM_GROUP])
{
	/* the accumulators local and every loop over them unrolled, so
	 * that they live in registers (16 float, 8 quad vectors, 16 chains:
	 * the compiler keeps some float ones in memory, touched once a block) */
	__m512 acc[2 * QUANT_GEMM_GROUP];
	_Pragma("GCC unroll 16") for (int l = 0; l < 2 * QUANT_GEMM_GROUP; l++)
		acc[l] = _mm512_setzero_ps();
	const size_t block_bytes = quant_r16_pair_bytes(t) / 2;
	for (int64_t b = 0; b < nb; b++) {
		__m512i q[R16_QUADS];
		__m512 dw;
		/* a block's share of its pair */
		r16_prefetch_block(pf, tile + (size_t)b * block_bytes, block_bytes, b);
		r16_block(t, tile, b, q, &dw);
		/* the groups' corrections through memory, so that each token's
		 * is one broadcast load */
		int32_t corr[2 * QUANT_GEMM_GROUP] __attribute__((aligned(32)));
		struct r16_toks tk = { .step = sizeof g->quads[0] };
		_Pragma("GCC unroll 2") for (int gi = 0; gi < ng; gi++) {
			const struct quant_gemm_block *blk = g + (size_t)gi * (size_t)nb + b;
			r16_group_corr(t, blk, &corr[gi * QUANT_GEMM_GROUP]);
			tk.x[gi] = (const uint8_t *)blk->quads;
			tk.d[gi] = blk->d;
		}
		__asm__ volatile("" ::: "memory");
		r16_tokens(q, dw, &tk, corr, ng * QUANT_GEMM_GROUP, acc);
	}
	_Pragma("GCC unroll 16") for (int l = 0; l < 2 * QUANT_GEMM_GROUP; l++)
		out[l] = acc[l];
}

/* One packed group (8 tokens) at g against two tiles at once (Q8_0,
 * Q5_0): each token's broadcast quad feeds both tiles' chains, so a
 * block takes 64 broadcast loads for 128 vpdpbusd where a tile at a time
 * takes 64 for 64. A pass of 8 tokens over one tile was bound by its
 * loads (the broadcasts, 8 per cache line of weights, beside the
 * weights' own loads and prefetches) more than by the vector ports, and
 * streaming from memory those loads cost the most
 * (tests/tools/stream_compute: one core's read with 8 vpdpbusd a line
 * against a register 16.3 GB/s, against a broadcast 15.5, the work
 * alone 54 and 30). Same chains, same float steps, in the same order, as
 * r16_groups: outa and outb are bit for bit its results for ta and tb.
 * pfa, pfb: what each tile's pass prefetches (struct r16_pf).
 *
 * Measured on the Sapphire Rapids-class host against a tile at a time:
 * `quant_bench --gemm 4,8` (one thread, hot), G multiply-adds/s, Q8_0 T
 * = 4 90 -> 97, T = 8 180 -> 191-196; Q5_0 T = 4 83.5 -> 87, T = 8 165 ->
 * 173. The Q8_0 LM head streaming, `lmhead_bench --tokens 8 --threads
 * 1`, A B B A twice, third best of 7 rounds: 14.1-14.3 -> 12.9-13.2 ms.
 * `ingot bench --batch 8 --runs 3 --gen 32 --prompt 16`, processes A B B
 * A, tok/s ratio: mega 1.043 (four cycles, each 1.03-1.05), graph 1.041
 * (three); batch 4, mega 1.036 (two). The K types' own is
 * r16k_group_two_tiles. */
ALWAYS_INLINE void r16_groups_two_tiles(enum qtype t, const uint8_t *ta, const uint8_t *tb,
					int64_t nb, const struct quant_gemm_block *g, const struct r16_pf *pfa,
					const struct r16_pf *pfb, __m512 outa[QUANT_GEMM_GROUP],
					__m512 outb[QUANT_GEMM_GROUP])
{
	__m512 acca[QUANT_GEMM_GROUP], accb[QUANT_GEMM_GROUP];
	_Pragma("GCC unroll 8") for (int l = 0; l < QUANT_GEMM_GROUP; l++)
		acca[l] = accb[l] = _mm512_setzero_ps();
	const size_t block_bytes = quant_r16_pair_bytes(t) / 2;
	for (int64_t b = 0; b < nb; b++) {
		r16_prefetch_block(pfa, ta + (size_t)b * block_bytes, block_bytes, b);
		r16_prefetch_block(pfb, tb + (size_t)b * block_bytes, block_bytes, b);
		const struct quant_gemm_block *blk = g + b;
		int32_t corr[QUANT_GEMM_GROUP] __attribute__((aligned(32)));
		r16_group_corr(t, blk, corr);
		__asm__ volatile("" ::: "memory");
		const struct r16_toks tk = { .x = { (const uint8_t *)blk->quads }, .d = { blk->d },
					     .step = sizeof blk->quads[0] };
		__m512i sa[QUANT_GEMM_GROUP], sb[QUANT_GEMM_GROUP];
		_Pragma("GCC unroll 8") for (int i = 0; i < QUANT_GEMM_GROUP; i++)
			sa[i] = sb[i] = _mm512_set1_epi32(corr[i]);
		_Pragma("GCC unroll 4") for (int v = 0; v < R16_QUADS / 2; v++) {
			__m512i qa[2], qb[2];
			r16_block_quad_pair(t, ta, b, v, &qa[0], &qa[1]);
			r16_block_quad_pair(t, tb, b, v, &qb[0], &qb[1]);
			_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
				_Pragma("GCC unroll 8") for (int i = 0; i < QUANT_GEMM_GROUP; i++) {
					const __m512i x = r16_bcast(tk.x[0], &tk, i, v + 4 * h);
					sa[i] = _mm512_dpbusd_epi32(sa[i], qa[h], x);
					sb[i] = _mm512_dpbusd_epi32(sb[i], qb[h], x);
				}
		}
		const __m512 dwa = r16_scales(t, ta, b), dwb = r16_scales(t, tb, b);
		_Pragma("GCC unroll 8") for (int i = 0; i < QUANT_GEMM_GROUP; i++) {
			acca[i] = r16_step(dwa, &tk, i, sa[i], acca[i]);
			accb[i] = r16_step(dwb, &tk, i, sb[i], accb[i]);
		}
	}
	_Pragma("GCC unroll 8") for (int l = 0; l < QUANT_GEMM_GROUP; l++) {
		outa[l] = acca[l];
		outb[l] = accb[l];
	}
}

/* A plain Q8_0 activation row's blocks as r16_tokens takes them, made
 * once per call rather than once per tile: corr[b] = -(1 << off_log2) *
 * the sum of block b's quants, da[b] its scale. */
static void r16_plain_prepare(const struct block_q8_0 *a, int64_t nb, int off_log2, int32_t *corr,
			      float *da)
{
	const __m256i ones = _mm256_set1_epi8(1);
	for (int64_t b = 0; b < nb; b++) {
		const __m256i s8 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, load256(a[b].qs));
		corr[b] = -(hsum_epi32(s8) * (1 << off_log2));
		da[b] = half_load(a[b].d);
	}
}

/* One plain Q8_0 activation row a (its blocks prepared) against one tile;
 * pf: what to prefetch (stream alone). */
ALWAYS_INLINE __m512 r16_plain(enum qtype t, const uint8_t *tile, int64_t nb,
				const struct block_q8_0 *a, const int32_t *corr, const float *da,
				const struct r16_pf *pf)
{
	__m512 acc = _mm512_setzero_ps();
	const size_t block_bytes = quant_r16_pair_bytes(t) / 2; /* a block's share of its pair */
	for (int64_t b = 0; b < nb; b++) {
		__m512i q[R16_QUADS];
		__m512 dw;
		r16_prefetch_stream(pf, tile + (size_t)b * block_bytes, block_bytes);
		r16_block(t, tile, b, q, &dw);
		const struct r16_toks tk = { .x = { (const uint8_t *)a[b].qs }, .d = { &da[b] }, .step = 4 };
		r16_tokens(q, dw, &tk, &corr[b], 1, &acc);
	}
	return acc;
}


/* ---- Q4_K and Q6_K (layout in quant_int.h) ----
 *
 * Measured on the Zen 4 host against the row-major VNNI kernels on the
 * same rows (quant_bench, one thread, 640 rows of 2048, cache-resident, G
 * multiply-adds/s): Q4_K T = 1 29 -> 109, T = 8 69 -> 133, T = 32 130 ->
 * 155, T = 128 136 -> 155; Q6_K T = 1 31 -> 48, T = 8 88 -> 121, T = 32
 * 124 -> 130, T = 128 128 -> 127 (its 6-bit unpacking, 5 operations a
 * quad vector, is what the repacked Q6_K spends beyond Q4_K).
 *
 * Per super-block and token: the products of each scale's run of quads
 * (Q4_K: 8 quads of 32 elements; Q6_K: 4 of 16) summed by vpdpbusd from
 * zero, weighed with the run's 16 scales by vpmulld into S (exact, as in
 * tok8_sums_vnni of quant_gemm_k_avx2.c); Q4_K's M and Q6_K's offset sum
 * from the token's 8 bsum pairs by vpdpwssd against int16 pairs of mins
 * (m, m) or scales (sc_2p, sc_2p+1); then the contract's float step on 16
 * rows at once. The 16 tokens' S stay over the super-block (beside 8 quad
 * vectors and the 16 chains of r16_chains: the compiler keeps some of them
 * in memory, touched once per run), their float accumulators in memory. */

/* S[i] += sc * (token i's products with the nq quads q, its quads k0 ..
 * k0 + nq - 1), for the nt tokens. */
ALWAYS_INLINE void r16k_run(const __m512i *q, int nq, __m512i sc, const struct r16_toks *tk,
			    int k0, int nt, __m512i *S)
{
	__m512i s[2 * QUANT_GEMM_GROUP];
	_Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)
		s[i] = _mm512_setzero_si512();
	r16_chains(q, nq, tk, k0, nt, s);
	_Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)
		S[i] = _mm512_add_epi32(S[i], _mm512_mullo_epi32(s[i], sc));
}

/* One Q4_K super-block at sb (the tile's b-th) against nt tokens into acc,
 * accm; pf: what to prefetch, a sub-block's share at a time. */
ALWAYS_INLINE void r16k_q4k(const uint8_t *sb, int64_t b, const struct r16_toks *tk, int nt,
			    __m512 *acc, __m512 *accm, const struct r16_pf *pf)
{
	const size_t share = quant_r16k_sb_bytes(QTYPE_Q4_K) / 8;
	__m512i S[2 * QUANT_GEMM_GROUP];
	_Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)
		S[i] = _mm512_setzero_si512();
	_Pragma("GCC unroll 1") for (int c = 0; c < 4; c++)
		_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
			const int s = 2 * c + h; /* the sub-block */
			r16_prefetch_stream(pf, sb + (size_t)s * share, share);
			r16_prefetch_block_part(pf, sb, QUANT_R16K_Q4_K_SB, b, s, 8);
			__m512i q[8];
			r16k_q4k_quads(sb, s, q);
			r16k_run(q, 8, r16k_q4k_scale(sb, s), tk, 8 * s, nt, S);
		}
	r16k_finish(QTYPE_Q4_K, sb, tk, nt, S, acc, accm);
}

/* A pass of one token prefetches its stream (r16_prefetch_stream) this
 * much further ahead over Q6_K than over the other types: step r of a
 * super-block reads its nibbles and, 2 KB on, its 2-bit parts (the whole
 * super-block by r = 1), where the stream's distances count from a point
 * moving through it evenly. Measured on the Sapphire Rapids-class host,
 * `lmhead_bench --type q6_k --tokens 1` (the best 3 of 15 rounds, four
 * processes each, alternating): 2 threads 31-34 GB/s -> 35-38 (1 KB
 * further 34-36, 3.3 KB 34-37); 1 thread 13-15.5 -> 13-16.4. */
#define R16K_Q6K_STREAM_LEAD (QUANT_R16K_Q6_K_BITS - QUANT_R16K_Q6_K_NIBBLES)

/* Quads 8r .. 8r + 7 of the Q6_K super-block at sb (the tile's b-th; the
 * runs of scale pair r) against nt tokens into S. */
ALWAYS_INLINE void r16k_q6k_run_pair(const uint8_t *sb, int64_t b, int r, const struct r16_toks *tk,
				     int nt, __m512i *S, const struct r16_pf *pf, size_t share)
{
	__m512i q[8], lo, hi;
	r16_prefetch_stream(pf, sb + (size_t)r * share + R16K_Q6K_STREAM_LEAD, share);
	r16_prefetch_block_part(pf, sb, QUANT_R16K_Q6_K_SB, b, r, 8);
	if (nt == 1)
		r16k_q6k_quads_const(sb, r, q);
	else
		r16k_q6k_quads(sb, r, q);
	/* scale pair r: sub-blocks 2r (quads 8r .. 8r + 3), 2r + 1 */
	r16k_q6k_scales(sb, r, &lo, &hi);
	r16k_run(q, 4, lo, tk, 8 * r, nt, S);
	r16k_run(q + 4, 4, hi, tk, 8 * r + 4, nt, S);
}

/* One Q6_K super-block at sb (the tile's b-th) against nt tokens into
 * acc: S = sum sc * u * a - 32 * sum sc * bsum (r16k_q6k_quads,
 * r16k_finish); pf: what to prefetch, a scale pair's share at a time. */
ALWAYS_INLINE void r16k_q6k(const uint8_t *sb, int64_t b, const struct r16_toks *tk, int nt,
			    __m512 *acc, const struct r16_pf *pf)
{
	const size_t share = (quant_r16k_sb_bytes(QTYPE_Q6_K) + 7) / 8;
	__m512i S[2 * QUANT_GEMM_GROUP];
	_Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)
		S[i] = _mm512_setzero_si512();
	if (nt == 1) {
		_Pragma("GCC unroll 8") for (int r = 0; r < 8; r++)
			r16k_q6k_run_pair(sb, b, r, tk, nt, S, pf, share);
	} else {
		_Pragma("GCC unroll 1") for (int r = 0; r < 8; r++)
			r16k_q6k_run_pair(sb, b, r, tk, nt, S, pf, share);
	}
	r16k_finish(QTYPE_Q6_K, sb, tk, nt, S, acc, NULL);
}

/* nt tokens (a constant: 1, 8 or 16) against a K-type tile of nsb super-
 * blocks, the packed groups at g (the second nsb blocks further) or the
 * plain row a (nt = 1); pf: what to prefetch. out[i] gets token i's 16
 * results. */
ALWAYS_INLINE void r16k_tile(enum qtype t, const uint8_t *tile, int64_t nsb,
			     const struct quant_gemm_kblock *g, const struct block_q8_K *a, int nt,
			     const struct r16_pf *pf, __m512 *out)
{
	const size_t sb_bytes = quant_r16k_sb_bytes(t);
	__m512 acc[2 * QUANT_GEMM_GROUP], accm[2 * QUANT_GEMM_GROUP];
	_Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)
		acc[i] = accm[i] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nsb; b++) {
		struct r16_toks tk;
		if (g) { /* packed groups, the second nsb blocks further */
			const struct quant_gemm_kblock *g1 = nt > QUANT_GEMM_GROUP ? g + nsb + b : g + b;
			tk = (struct r16_toks){ { (const uint8_t *)g[b].quads, (const uint8_t *)g1->quads },
						 { (const uint8_t *)g[b].bsum_pairs,
						   (const uint8_t *)g1->bsum_pairs },
						 { g[b].d, g1->d },
						 sizeof g->quads[0] };
		} else {
			tk = (struct r16_toks){ { (const uint8_t *)a[b].qs, NULL },
						 { (const uint8_t *)a[b].bsums, NULL },
						 { &a[b].d, NULL },
						 4 };
		}
		const uint8_t *sb = tile + (size_t)b * sb_bytes;
		if (t == QTYPE_Q4_K)
			r16k_q4k(sb, b, &tk, nt, acc, accm, pf);
		else
			r16k_q6k(sb, b, &tk, nt, acc, pf);
	}
	_Pragma("GCC unroll 16") for (int i = 0; i < nt; i++)
		out[i] = t == QTYPE_Q4_K ? _mm512_sub_ps(acc[i], accm[i]) : acc[i];
}

/* Quad vector k of run u (below) of the super-block at s. */
ALWAYS_INLINE __m512i r16k_run_quad(enum qtype t, const uint8_t *s, int u, int k)
{
	return t == QTYPE_Q4_K ? r16k_q4k_quad(s, u, k) : r16k_q6k_quad(s, u / 2, 4 * (u % 2) + k);
}

/* Run u of a K-type super-block against one packed group (8 tokens, tk)
 * for two tiles at once, their super-blocks at sa and sb: S*[i] += the
 * run's scale * token i's products with the run's quads. A run is Q4_K
 * sub-block u (quads 8u .. 8u + 7), or the half u % 2 of Q6_K scale pair
 * u / 2 (quads 4u .. 4u + 3); each broadcast quad feeds both tiles'
 * chains (16 of them). The same sums as r16k_run's over one tile. */
ALWAYS_INLINE void r16k_run_two_tiles(enum qtype t, const uint8_t *sa, const uint8_t *sb, int u,
				      const struct r16_toks *tk, __m512i Sa[QUANT_GEMM_GROUP],
				      __m512i Sb[QUANT_GEMM_GROUP])
{
	const int nq = t == QTYPE_Q4_K ? 8 : 4, k0 = nq * u;
	__m512i ca[QUANT_GEMM_GROUP], cb[QUANT_GEMM_GROUP];
	_Pragma("GCC unroll 8") for (int i = 0; i < QUANT_GEMM_GROUP; i++)
		ca[i] = cb[i] = _mm512_setzero_si512();
	_Pragma("GCC unroll 8") for (int k = 0; k < nq; k++) {
		const __m512i qa = r16k_run_quad(t, sa, u, k), qb = r16k_run_quad(t, sb, u, k);
		_Pragma("GCC unroll 8") for (int i = 0; i < QUANT_GEMM_GROUP; i++) {
			const __m512i x = r16_bcast(tk->x[0], tk, i, k0 + k);
			ca[i] = _mm512_dpbusd_epi32(ca[i], qa, x);
			cb[i] = _mm512_dpbusd_epi32(cb[i], qb, x);
		}
	}
	const __m512i sca = r16k_run_scale(t, sa, u), scb = r16k_run_scale(t, sb, u);
	_Pragma("GCC unroll 8") for (int i = 0; i < QUANT_GEMM_GROUP; i++) {
		Sa[i] = _mm512_add_epi32(Sa[i], _mm512_mullo_epi32(ca[i], sca));
		Sb[i] = _mm512_add_epi32(Sb[i], _mm512_mullo_epi32(cb[i], scb));
	}
}

/* One packed group at g against two K-type tiles at once, ta and tb of
 * nsb super-blocks: r16_groups_two_tiles for Q4_K and Q6_K, by runs
 * (r16k_run_two_tiles), each tile's sums S closed as r16k_tile closes
 * them, so that outa and outb are bit for bit r16k_tile's results for ta
 * and tb. The 16 chains of a run and its quads fill the registers: both
 * tiles' S wait in memory, touched once a run. Each run issues its share
 * of both tiles' prefetches (r16_prefetch_block_part).
 *
 * Measured on the Sapphire Rapids-class host against a tile at a time:
 * `quant_bench --gemm 4,8` (one thread, hot), G multiply-adds/s, Q4_K T
 * = 8 161-181 -> 172-190, T = 4 81-91 -> 89-95, Q6_K no faster;
 * streaming, `lmhead_bench --tokens T --threads 2` (the best 2 of 5
 * rounds, alternating processes, ms), Q4_K T = 4 9.9-10.1 -> 8.6-8.9, T
 * = 8 9.8-10.2 -> 8.4-9.0; Q6_K T = 4 9.3-9.9 -> 8.2-8.6, T = 8 9.6-10.0
 * -> 8.2-8.6. `ingot bench --batch B --runs 5 --gen 64 --prompt 16`,
 * processes A B B A, tok/s ratio: batch 8 mega 1.009 (three cycles),
 * graph 1.034 (two), batch 4 mega 1.016 (two). (Before the prefetches
 * were spread, each super-block's at its start, the pass gained hot but
 * not streaming, and lost 2-3% in the model.) */
ALWAYS_INLINE void r16k_group_two_tiles(enum qtype t, const uint8_t *ta, const uint8_t *tb,
					int64_t nsb, const struct quant_gemm_kblock *g,
					const struct r16_pf *pfa, const struct r16_pf *pfb,
					__m512 outa[QUANT_GEMM_GROUP],
					__m512 outb[QUANT_GEMM_GROUP])
{
	const size_t sb_bytes = quant_r16k_sb_bytes(t);
	const int run_pairs = t == QTYPE_Q4_K ? 4 : 8;
	__m512 acca[QUANT_GEMM_GROUP], accma[QUANT_GEMM_GROUP];
	__m512 accb[QUANT_GEMM_GROUP], accmb[QUANT_GEMM_GROUP];
	_Pragma("GCC unroll 8") for (int i = 0; i < QUANT_GEMM_GROUP; i++)
		acca[i] = accma[i] = accb[i] = accmb[i] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nsb; b++) {
		const struct r16_toks tk = { { (const uint8_t *)g[b].quads, NULL },
					     { (const uint8_t *)g[b].bsum_pairs, NULL },
					     { g[b].d, NULL },
					     sizeof g->quads[0] };
		const uint8_t *sa = ta + (size_t)b * sb_bytes, *sb = tb + (size_t)b * sb_bytes;
		__m512i Sa[QUANT_GEMM_GROUP], Sb[QUANT_GEMM_GROUP];
		_Pragma("GCC unroll 8") for (int i = 0; i < QUANT_GEMM_GROUP; i++)
			Sa[i] = Sb[i] = _mm512_setzero_si512();
		/* runs in pairs, so that u % 2 is a constant (Q4_K: which
		 * nibble; Q6_K: which scale of the pair) */
		_Pragma("GCC unroll 1") for (int c = 0; c < run_pairs; c++)
			_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
				const int u = 2 * c + h; /* the run, of 2 * run_pairs */
				r16_prefetch_block_part(pfa, sa, sb_bytes, b, u, 2 * run_pairs);
				r16_prefetch_block_part(pfb, sb, sb_bytes, b, u, 2 * run_pairs);
				r16k_run_two_tiles(t, sa, sb, u, &tk, Sa, Sb);
			}
		r16k_finish(t, sa, &tk, QUANT_GEMM_GROUP, Sa, acca, accma);
		r16k_finish(t, sb, &tk, QUANT_GEMM_GROUP, Sb, accb, accmb);
	}
	_Pragma("GCC unroll 8") for (int i = 0; i < QUANT_GEMM_GROUP; i++) {
		outa[i] = t == QTYPE_Q4_K ? _mm512_sub_ps(acca[i], accma[i]) : acca[i];
		outb[i] = t == QTYPE_Q4_K ? _mm512_sub_ps(accb[i], accmb[i]) : accb[i];
	}
}

/* Tile ti's results for the nt tokens of groups g0 on (acc[l]: token
 * 8 * g0 + l) into y: the tokens below T, the rows in [r0, r1). */
ALWAYS_INLINE void r16_tile_store(int64_t ti, int64_t r0, int64_t r1, int64_t g0, int nt, int64_t T,
				  const __m512 *acc, float *y, int64_t y_stride)
{
	const __mmask16 rows = r16_rows_mask(ti, r0, r1);
	float *yt = y + ti * QUANT_R16_ROWS;
	for (int l = 0; l < nt; l++) {
		const int64_t tk = g0 * QUANT_GEMM_GROUP + l;
		if (tk < T)
			_mm512_mask_storeu_ps(yt + tk * y_stride, rows, acc[l]);
	}
}

/* Tile ti against the group pair at g0 (or the last group alone, before
 * c1) into y, the lanes of tokens below T only; pf: what the pass
 * prefetches. */
ALWAYS_INLINE void r16_tile_groups(enum qtype t, const void *w, size_t tile_bytes, int64_t ti,
				   int64_t r0, int64_t r1, int64_t nb, const void *packed,
				   size_t group_bytes, int64_t g0, int64_t c1, int64_t T,
				   const struct r16_pf *pf, float *y, int64_t y_stride)
{
	const uint8_t *tile = (const uint8_t *)w + (size_t)ti * tile_bytes;
	/* group g0: quant_gemm_block or (K types) quant_gemm_kblock ones */
	const void *g = (const uint8_t *)packed + (size_t)g0 * group_bytes;
	__m512 acc[2 * QUANT_GEMM_GROUP];
	const int ng = c1 - g0 >= 2 ? 2 : 1;
	if (quant_r16_k_type(t)) {
		if (ng == 2)
			r16k_tile(t, tile, nb, g, NULL, 2 * QUANT_GEMM_GROUP, pf, acc);
		else
			r16k_tile(t, tile, nb, g, NULL, QUANT_GEMM_GROUP, pf, acc);
	} else if (ng == 2) {
		r16_groups(t, tile, nb, g, 2, pf, acc);
	} else {
		r16_groups(t, tile, nb, g, 1, pf, acc);
	}
	r16_tile_store(ti, r0, r1, g0, ng * QUANT_GEMM_GROUP, T, acc, y, y_stride);
}

/* Tiles ti and ti + 1 against the last group alone (8 tokens or fewer,
 * before c1): r16_groups_two_tiles, or r16k_group_two_tiles for the K
 * types; false, having done nothing, for a pair of groups. pf, pf2: what
 * each tile's pass prefetches. */
ALWAYS_INLINE bool r16_tile_groups2(enum qtype t, const void *w, size_t tile_bytes, int64_t ti,
				    int64_t r0, int64_t r1, int64_t nb, const void *packed,
				    size_t group_bytes, int64_t g0, int64_t c1, int64_t T,
				    const struct r16_pf *pf, const struct r16_pf *pf2, float *y,
				    int64_t y_stride)
{
	if (c1 - g0 != 1)
		return false;
	const uint8_t *tile = (const uint8_t *)w + (size_t)ti * tile_bytes;
	const void *g = (const uint8_t *)packed + (size_t)g0 * group_bytes;
	__m512 acc[2][QUANT_GEMM_GROUP];
	if (quant_r16_k_type(t))
		r16k_group_two_tiles(t, tile, tile + tile_bytes, nb, g, pf, pf2, acc[0], acc[1]);
	else
		r16_groups_two_tiles(t, tile, tile + tile_bytes, nb, g, pf, pf2, acc[0], acc[1]);
	for (int k = 0; k < 2; k++)
		r16_tile_store(ti + k, r0, r1, g0, QUANT_GEMM_GROUP, T, acc[k], y, y_stride);
	return true;
}

/* Tile ti against one plain activation row at (its blocks prepared)
 * into its row of results yr; stream: prefetch ahead (struct r16_pf). */
ALWAYS_INLINE void r16_tile_plain(enum qtype t, const void *w, size_t tile_bytes, int64_t ti,
				  int64_t r0, int64_t r1, int64_t nb, const void *at,
				  const int32_t *corr, const float *da, bool stream, float *yr)
{
	const uint8_t *tile = (const uint8_t *)w + (size_t)ti * tile_bytes;
	const struct r16_pf pf = { .stream = stream };
	__m512 acc;
	if (quant_r16_k_type(t))
		r16k_tile(t, tile, nb, NULL, at, 1, &pf, &acc);
	else
		acc = r16_plain(t, tile, nb, at, corr, da, &pf);
	_mm512_mask_storeu_ps(yr + ti * QUANT_R16_ROWS, r16_rows_mask(ti, r0, r1), acc);
}

#define R16_TILE_GROUPS r16_tile_groups
#define R16_TILE_GROUPS2 r16_tile_groups2
#define R16_TILE_PLAIN r16_tile_plain
#define R16_PLAIN_PREPARE r16_plain_prepare
#define R16_PASS_GROUPS 2
#include "quant_r16_drive.h" /* again: r16_gemm_drive over the functions above */

R16_GEMM_ENTRY(gemm_q8_0_r16, QTYPE_Q8_0)
R16_GEMM_ENTRY(gemm_q5_0_r16, QTYPE_Q5_0)
R16_GEMM_ENTRY(gemm_q4_K_r16, QTYPE_Q4_K)
R16_GEMM_ENTRY(gemm_q6_K_r16, QTYPE_Q6_K)

void quant_gemm_r16_avx512_register(struct quant_kernels *k)
{
	k->gemm_r16[QTYPE_Q8_0] = gemm_q8_0_r16;
	k->gemm_r16[QTYPE_Q5_0] = gemm_q5_0_r16;
	k->gemm_r16[QTYPE_Q4_K] = gemm_q4_K_r16;
	k->gemm_r16[QTYPE_Q6_K] = gemm_q6_K_r16;
}
