/* quant_r16k.c — Q4_K and Q6_K matrices repacked 16 rows to a tile (layout
 * in quant_int.h): the packing done once at load, its inverse for tests, and
 * the scalar reference of the tile kernels (quant_gemm_r16_avx512.c,
 * quant_gemm_r16_avx2.c).
 * quant_r16.c calls these for the K types.
 *
 * Why: the default model's attn_output and ffn_down matrices (Q4_K, Q6_K)
 * are a third of a layer's multiply-adds; their row-major kernels put 4
 * or 8 rows in a vector and unpack the 6-bit scales per row and pass, at
 * 90-130 G multiply-adds/s a core (Zen 4) where the repacked Q5_0 ones
 * run at 170. With 16 rows in the lanes the scales are bytes ready to
 * widen, the nibbles unpack once per 16 rows, and one vpdpbusd is 64
 * products of 16 rows. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"
#include "quant_int.h"

/* ---- one row's super-block as integers ---- */

/* Element values (Q4_K: 0 .. 15; Q6_K: u = q + 32, 0 .. 63), the scales
 * (Q4_K: 8, 6-bit; Q6_K: 16, int8), Q4_K's 8 mins, and the fp16 bits. */
struct r16k_row {
	uint8_t u[QK_K];
	int16_t sc[16];
	uint8_t mn[8];
	uint16_t d, dmin;
};

/* Q4_K element e = 64c + 32h + l: nibble h of qs[32c + l]. */
static void row_from_q4_K(const struct block_q4_K *b, struct r16k_row *o)
{
	uint8_t sc[8];
	for (int e = 0; e < QK_K; e++)
		o->u[e] = (uint8_t)((b->qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) & 1))) & 15);
	quant_k4_scales_unpack(b->scales, sc, o->mn);
	for (int s = 0; s < 8; s++)
		o->sc[s] = sc[s];
	o->d = b->d;
	o->dmin = b->dmin;
}

/* The inverse of quant_k4_scales_unpack: all 96 bits carry a scale or a
 * min, so any 8 + 8 six-bit values have exactly one packing. */
static void k4_scales_pack(const int16_t sc[8], const uint8_t mn[8], uint8_t p[12])
{
	for (int j = 0; j < 4; j++) {
		p[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
		p[j + 4] = (uint8_t)((mn[j] & 63) | (mn[j + 4] >> 4) << 6);
		p[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
	}
}

static void row_to_q4_K(const struct r16k_row *o, struct block_q4_K *b)
{
	memset(b->qs, 0, sizeof b->qs);
	for (int e = 0; e < QK_K; e++)
		b->qs[32 * (e / 64) + e % 32] |= (uint8_t)(o->u[e] << (4 * ((e / 32) & 1)));
	k4_scales_pack(o->sc, o->mn, b->scales);
	b->d = o->d;
	b->dmin = o->dmin;
}

/* Q6_K element e = 128h + 32k + l: low 4 bits the nibble k >> 1 of
 * ql[64h + 32(k & 1) + l], top 2 bits bits 2k of qh[32h + l]. */
static void row_from_q6_K(const struct block_q6_K *b, struct r16k_row *o)
{
	for (int e = 0; e < QK_K; e++) {
		const int h = e / 128, k = (e % 128) / 32, l = e % 32;
		const int lo = (b->ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 15;
		const int hi = (b->qh[32 * h + l] >> (2 * k)) & 3;
		o->u[e] = (uint8_t)(lo | hi << 4);
	}
	for (int s = 0; s < 16; s++)
		o->sc[s] = b->scales[s];
	o->d = b->d;
	o->dmin = 0;
}

static void row_to_q6_K(const struct r16k_row *o, struct block_q6_K *b)
{
	memset(b->ql, 0, sizeof b->ql);
	memset(b->qh, 0, sizeof b->qh);
	for (int e = 0; e < QK_K; e++) {
		const int h = e / 128, k = (e % 128) / 32, l = e % 32;
		b->ql[64 * h + 32 * (k & 1) + l] |= (uint8_t)((o->u[e] & 15) << (4 * (k >> 1)));
		b->qh[32 * h + l] |= (uint8_t)((o->u[e] >> 4) << (2 * k));
	}
	for (int s = 0; s < 16; s++)
		b->scales[s] = (int8_t)o->sc[s];
	b->d = o->d;
}

/* ---- a row's super-block in a tile ---- */

/* Byte offsets of row j's value of element e in the super-block at sb
 * (Q4_K: its nibble; Q6_K: the nibble and the 2-bit part). */
static size_t q4k_quant_byte(int j, int e)
{
	const int c = e / 64, k = (e % 32) / 4; /* chunk, vector */
	return QUANT_R16K_Q4_K_QUANTS + (size_t)(8 * c + k) * 64 + 4 * (size_t)j + (size_t)(e % 4);
}

static size_t q6k_nibble_byte(int j, int e)
{
	return QUANT_R16K_Q6_K_NIBBLES + (size_t)((e / 4) % 32) * 64 + 4 * (size_t)j + (size_t)(e % 4);
}

static size_t q6k_bits_byte(int j, int e)
{
	return QUANT_R16K_Q6_K_BITS + (size_t)((e / 4) % 16) * 64 + 4 * (size_t)j + (size_t)(e % 4);
}

/* Stores row j's super-block o into the tile's super-block at sb (zeroed
 * before the first row). */
static void sb_put(enum qtype t, uint8_t *sb, int j, const struct r16k_row *o)
{
	memcpy(sb + 2 * j, &o->d, 2);
	if (t == QTYPE_Q4_K) {
		memcpy(sb + 32 + 2 * j, &o->dmin, 2);
		for (int s = 0; s < 8; s++) {
			sb[QUANT_R16K_Q4_K_SCALES + 16 * s + j] = (uint8_t)o->sc[s];
			sb[QUANT_R16K_Q4_K_MINS + 16 * s + j] = o->mn[s];
		}
		for (int e = 0; e < QK_K; e++)
			sb[q4k_quant_byte(j, e)] |= (uint8_t)(o->u[e] << (4 * ((e / 32) & 1)));
		return;
	}
	for (int p = 0; p < 8; p++) { /* scale pair p: sub-blocks 2p, 2p + 1 */
		sb[QUANT_R16K_Q6_K_SCALES + 32 * p + 2 * j] = (uint8_t)o->sc[2 * p];
		sb[QUANT_R16K_Q6_K_SCALES + 32 * p + 2 * j + 1] = (uint8_t)o->sc[2 * p + 1];
	}
	for (int e = 0; e < QK_K; e++) {
		sb[q6k_nibble_byte(j, e)] |= (uint8_t)((o->u[e] & 15) << (4 * (e / 128)));
		sb[q6k_bits_byte(j, e)] |= (uint8_t)((o->u[e] >> 4) << (2 * (e / 64)));
	}
}

static void sb_get(enum qtype t, const uint8_t *sb, int j, struct r16k_row *o)
{
	memcpy(&o->d, sb + 2 * j, 2);
	o->dmin = 0;
	if (t == QTYPE_Q4_K) {
		memcpy(&o->dmin, sb + 32 + 2 * j, 2);
		for (int s = 0; s < 8; s++) {
			o->sc[s] = sb[QUANT_R16K_Q4_K_SCALES + 16 * s + j];
			o->mn[s] = sb[QUANT_R16K_Q4_K_MINS + 16 * s + j];
		}
		for (int e = 0; e < QK_K; e++)
			o->u[e] = (uint8_t)((sb[q4k_quant_byte(j, e)] >> (4 * ((e / 32) & 1))) & 15);
		return;
	}
	for (int s = 0; s < 16; s++)
		o->sc[s] = (int8_t)sb[QUANT_R16K_Q6_K_SCALES + 32 * (s / 2) + 2 * j + s % 2];
	for (int e = 0; e < QK_K; e++) {
		const int lo = (sb[q6k_nibble_byte(j, e)] >> (4 * (e / 128))) & 15;
		const int hi = (sb[q6k_bits_byte(j, e)] >> (2 * (e / 64))) & 3;
		o->u[e] = (uint8_t)(lo | hi << 4);
	}
}

void quant_r16k_pack(enum qtype t, const void *w, int64_t n, int64_t rows, void *dst)
{
	const int64_t nsb = n / QK_K;
	const size_t sb_bytes = quant_r16k_sb_bytes(t), block_bytes = qtype_traits(t)->block_bytes;
	const int64_t tiles = (rows + QUANT_R16_ROWS - 1) / QUANT_R16_ROWS;
	struct r16k_row o;
	for (int64_t ti = 0; ti < tiles; ti++) {
		uint8_t *tile = (uint8_t *)dst + (size_t)(ti * nsb) * sb_bytes;
		memset(tile, 0, (size_t)nsb * sb_bytes);
		for (int j = 0; j < QUANT_R16_ROWS; j++) {
			const int64_t r = ti * QUANT_R16_ROWS + j;
			for (int64_t b = 0; b < nsb; b++) {
				const uint8_t *blk = (const uint8_t *)w + (size_t)(r * nsb + b) * block_bytes;
				if (r >= rows) /* padding: all zeros, Q6_K's u = 32 (q = 0) */
					memset(&o, 0, sizeof o), memset(o.u, t == QTYPE_Q6_K ? 32 : 0, QK_K);
				else if (t == QTYPE_Q4_K)
					row_from_q4_K((const void *)blk, &o);
				else
					row_from_q6_K((const void *)blk, &o);
				sb_put(t, tile + (size_t)b * sb_bytes, j, &o);
			}
		}
	}
}

void quant_r16k_unpack_sb(enum qtype t, const uint8_t *sb, int j, void *blk)
{
	struct r16k_row o;
	sb_get(t, sb, j, &o);
	if (t == QTYPE_Q4_K)
		row_to_q4_K(&o, blk);
	else
		row_to_q6_K(&o, blk);
}

void quant_r16k_unpack_row(enum qtype t, const void *p, int64_t n, int64_t row, void *dst)
{
	const int64_t nsb = n / QK_K;
	const size_t sb_bytes = quant_r16k_sb_bytes(t), block_bytes = qtype_traits(t)->block_bytes;
	const uint8_t *tile = (const uint8_t *)p + (size_t)((row / QUANT_R16_ROWS) * nsb) * sb_bytes;
	for (int64_t b = 0; b < nsb; b++)
		quant_r16k_unpack_sb(t, tile + (size_t)b * sb_bytes, (int)(row % QUANT_R16_ROWS),
				     (uint8_t *)dst + (size_t)b * block_bytes);
}

/* One output: row j of the tile (nsb super-blocks) against the Q8_K
 * activation row a, in the contract of quant_gemm_k_avx2.c: per super-
 * block the exact S (and Q4_K's M), then acc = fma(dw * da, S, acc),
 * accm = fma(dminw * da, M, accm). */
float quant_r16k_dot_ref(enum qtype t, const uint8_t *tile, int64_t nsb, int j, const void *act)
{
	const struct block_q8_K *a = act;
	const size_t sb_bytes = quant_r16k_sb_bytes(t);
	const int sub = t == QTYPE_Q4_K ? 32 : 16;
	float acc = 0.0f, accm = 0.0f;
	struct r16k_row o;
	for (int64_t b = 0; b < nsb; b++) {
		sb_get(t, tile + (size_t)b * sb_bytes, j, &o);
		const int off = t == QTYPE_Q6_K ? 32 : 0;
		int32_t S = 0, M = 0;
		for (int s = 0; s < QK_K / sub; s++) {
			int32_t dot = 0;
			for (int e = s * sub; e < (s + 1) * sub; e++)
				dot += ((int32_t)o.u[e] - off) * a[b].qs[e];
			S += o.sc[s] * dot;
		}
		for (int s = 0; t == QTYPE_Q4_K && s < 8; s++)
			M += o.mn[s] * (a[b].bsums[2 * s] + a[b].bsums[2 * s + 1]);
		acc = fmaf(fp16_to_f32(o.d) * a[b].d, (float)S, acc);
		accm = fmaf(fp16_to_f32(o.dmin) * a[b].d, (float)M, accm);
	}
	return t == QTYPE_Q4_K ? acc - accm : acc;
}
