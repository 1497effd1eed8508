/* quant_r16.c — Q8_0 and Q5_0 matrices repacked 16 rows to a tile
 * (layout in quant.h): the packing done once at load, its inverse for
 * tests, and the scalar reference of the tile kernels
 * (quant_gemm_r16_avx512.c); the entries for Q4_K and Q6_K too, whose
 * layout and code are quant_r16k.c's.
 *
 * Why the copy: the LM head of the default model (262144 x 640 Q8_0, half
 * of a batched decode step) and its Q5_0 projections are compute-bound
 * from 8 tokens on, and the row-major kernels spend a third or more of
 * their vector operations on unsigned offsets, unpacking per 4 rows and
 * the float step of 4-row tiles; with 16 rows in the lanes the quants are
 * offset once here, unpacked once per 16 rows, and each weight vector
 * serves every token. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"
#include "quant_int.h"

bool quant_r16_type(enum qtype t)
{
	return t == QTYPE_Q8_0 || t == QTYPE_Q5_0 || quant_r16_k_type(t);
}

size_t quant_r16_tile_bytes(enum qtype t, int64_t n)
{
	if (!quant_r16_type(t) || n <= 0 || n % qtype_traits(t)->block_elems ||
	    n / QK > QUANT_R16_MAX_BLOCKS)
		return 0;
	if (quant_r16_k_type(t))
		return (size_t)(n / QK_K) * quant_r16k_sb_bytes(t);
	const size_t nb = (size_t)(n / QK);
	return nb / 2 * quant_r16_pair_bytes(t) + nb % 2 * (QUANT_R16_SCALES_LINE + quant_r16_block_quant_bytes(t));
}

size_t quant_r16_bytes(enum qtype t, int64_t n, int64_t rows)
{
	const size_t tile = quant_r16_tile_bytes(t, n);
	if (tile == 0 || rows < 0)
		return 0;
	const size_t tiles = (size_t)((rows + QUANT_R16_ROWS - 1) / QUANT_R16_ROWS);
	if (tiles && tile > SIZE_MAX / tiles)
		return 0;
	return tiles * tile;
}

/* Where block b's quants and scales start in a tile. */
static size_t block_offset(enum qtype t, int64_t b)
{
	return (size_t)(b / 2) * quant_r16_pair_bytes(t) + QUANT_R16_SCALES_LINE +
	       (size_t)(b % 2) * quant_r16_block_quant_bytes(t);
}

static size_t scale_offset(enum qtype t, int64_t b, int j)
{
	return (size_t)(b / 2) * quant_r16_pair_bytes(t) + (size_t)(b % 2) * 32 + (size_t)j * 2;
}

/* Row j's unsigned quant e of the block whose quants start at q. */
static uint8_t tile_quant(enum qtype t, const uint8_t *q, int j, int e)
{
	if (t == QTYPE_Q8_0)
		return q[(e / 4) * 64 + 4 * j + e % 4];
	const int k = e / 4, v = k % 4; /* quad vector k: nibbles of vector v */
	const uint8_t nib = q[v * 64 + 4 * j + e % 4];
	const uint8_t lo = k < 4 ? nib & 15 : nib >> 4;
	const uint8_t planes = q[256 + 4 * j + e % 4]; /* bit k: quad vector k's fifth bit */
	return (uint8_t)(lo | ((planes >> k) & 1) << 4);
}

/* Stores row j's block blk (a block_q8_0 or block_q5_0; NULL: a padding
 * row, all quants 0) into the block whose quants start at q (zeroed
 * before the first row): 4 bytes at a time, the quad layout of quant.h. */
static void block_put(enum qtype t, uint8_t *q, int j, const void *blk)
{
	if (t == QTYPE_Q8_0) {
		const struct block_q8_0 *b = blk;
		for (int k = 0; k < QK / 4; k++) {
			uint32_t v = 0;
			if (b)
				memcpy(&v, b->qs + 4 * k, sizeof v);
			v ^= 0x80808080u; /* u = q + 128 */
			memcpy(q + 64 * k + 4 * j, &v, sizeof v);
		}
		return;
	}
	/* Q5_0: nibble vector v takes the row's qs bytes 4v .. 4v+3 as they
	 * are; bit k of mask byte 4j + e is bit 4k + e of qh */
	const struct block_q5_0 *b = blk;
	uint32_t qh = 0xffffffffu; /* padding: u = 16, q = 0 */
	if (b) {
		for (int v = 0; v < 4; v++)
			memcpy(q + 64 * v + 4 * j, b->qs + 4 * v, 4);
		memcpy(&qh, b->qh, sizeof qh);
	}
	for (int k = 0; k < QK / 4; k++)
		for (int e = 0; e < 4; e++)
			q[256 + 4 * j + e] |= (uint8_t)(((qh >> (4 * k + e)) & 1) << k);
}

void quant_r16_pack(enum qtype t, const void *w, int64_t n, int64_t rows, void *dst)
{
	if (quant_r16_k_type(t)) {
		quant_r16k_pack(t, w, n, rows, dst);
		return;
	}
	const int64_t nb = n / QK;
	const size_t tile_bytes = quant_r16_tile_bytes(t, n), block_bytes = qtype_traits(t)->block_bytes;
	const int64_t tiles = (rows + QUANT_R16_ROWS - 1) / QUANT_R16_ROWS;
	for (int64_t ti = 0; ti < tiles; ti++) {
		uint8_t *tile = (uint8_t *)dst + (size_t)ti * tile_bytes;
		memset(tile, 0, tile_bytes);
		for (int j = 0; j < QUANT_R16_ROWS; j++) {
			const int64_t r = ti * QUANT_R16_ROWS + j;
			const uint8_t *row = r < rows ? (const uint8_t *)w + (size_t)r * (size_t)nb * block_bytes
						      : NULL;
			for (int64_t b = 0; b < nb; b++) {
				const void *blk = row ? row + (size_t)b * block_bytes : NULL;
				uint16_t d = 0; /* padding: scale 0 */
				if (blk)
					memcpy(&d, blk, sizeof d); /* both blocks start with d */
				block_put(t, tile + block_offset(t, b), j, blk);
				memcpy(tile + scale_offset(t, b, j), &d, sizeof d);
			}
		}
	}
}

/* Block b of row `row` of the packed matrix p back in its plain format
 * into dst (one block_q8_0 or block_q5_0). */
static void block_unpack(enum qtype t, const void *p, int64_t n, int64_t row, int64_t b, void *dst)
{
	const uint8_t *tile =
		(const uint8_t *)p + (size_t)(row / QUANT_R16_ROWS) * quant_r16_tile_bytes(t, n);
	const int j = (int)(row % QUANT_R16_ROWS);
	uint8_t u[QK];
	for (int e = 0; e < QK; e++)
		u[e] = tile_quant(t, tile + block_offset(t, b), j, e);
	uint16_t d;
	memcpy(&d, tile + scale_offset(t, b, j), sizeof d);
	if (t == QTYPE_Q8_0) {
		struct block_q8_0 *out = dst;
		out->d = d;
		for (int e = 0; e < QK; e++)
			out->qs[e] = (int8_t)(u[e] ^ 0x80);
		return;
	}
	struct block_q5_0 *out = dst;
	uint32_t qh = 0;
	out->d = d;
	for (int e = 0; e < QK / 2; e++)
		out->qs[e] = (uint8_t)((u[e] & 15) | (u[e + 16] & 15) << 4);
	for (int e = 0; e < QK; e++)
		qh |= (uint32_t)(u[e] >> 4 & 1) << e;
	memcpy(out->qh, &qh, sizeof qh);
}

void quant_r16_unpack_row(enum qtype t, const void *p, int64_t n, int64_t row, void *dst)
{
	if (quant_r16_k_type(t)) {
		quant_r16k_unpack_row(t, p, n, row, dst);
		return;
	}
	const int64_t nb = n / QK;
	for (int64_t b = 0; b < nb; b++)
		block_unpack(t, p, n, row, b, (uint8_t *)dst + (size_t)b * qtype_traits(t)->block_bytes);
}

void quant_r16_dequantize_row(enum qtype t, const void *p, int64_t n, int64_t row, float *dst)
{
	if (quant_r16_k_type(t)) { /* a super-block at a time */
		uint8_t sb[sizeof(struct block_q6_K)]; /* the larger of the two */
		const size_t sb_bytes = quant_r16k_sb_bytes(t);
		const uint8_t *tile = (const uint8_t *)p + (size_t)(row / QUANT_R16_ROWS) *
								   quant_r16_tile_bytes(t, n);
		for (int64_t b = 0; b < n / QK_K; b++) {
			quant_r16k_unpack_sb(t, tile + (size_t)b * sb_bytes, (int)(row % QUANT_R16_ROWS), sb);
			quant_dequantize_ref(t, sb, dst + b * QK_K, QK_K);
		}
		return;
	}
	uint8_t blk[sizeof(struct block_q8_0)]; /* the larger of the two blocks */
	for (int64_t b = 0; b < n / QK; b++) {
		block_unpack(t, p, n, row, b, blk);
		quant_dequantize_ref(t, blk, dst + b * QK, QK);
	}
}


/* One output: row j of tile `tile` against the Q8_0 activation row a. */
static float r16_dot_ref(enum qtype t, const uint8_t *tile, int64_t nb, int j,
			 const struct block_q8_0 *a)
{
	const int32_t off = t == QTYPE_Q8_0 ? 128 : 16;
	float acc = 0.0f;
	for (int64_t b = 0; b < nb; b++) {
		int32_t usum = 0, asum = 0;
		for (int e = 0; e < QK; e++) {
			usum += (int32_t)tile_quant(t, tile + block_offset(t, b), j, e) * a[b].qs[e];
			asum += a[b].qs[e];
		}
		uint16_t dw;
		memcpy(&dw, tile + scale_offset(t, b, j), sizeof dw);
		const float d = fp16_to_f32(dw) * fp16_to_f32(a[b].d);
		acc = fmaf(d, (float)(usum - off * asum), acc);
	}
	return acc;
}

void quant_gemm_r16_ref(enum qtype t, int64_t n, const void *w, size_t w_stride, int64_t r0,
			int64_t r1, const void *a, size_t a_stride, const void *packed, int64_t T,
			float *y, int64_t y_stride)
{
	(void)w_stride;
	(void)packed;
	const bool kt = quant_r16_k_type(t);
	const int64_t nb = n / (kt ? QK_K : QK); /* blocks or super-blocks */
	const size_t tile_bytes = quant_r16_tile_bytes(t, n);
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *tile = (const uint8_t *)w + (size_t)(r / QUANT_R16_ROWS) * tile_bytes;
		const int j = (int)(r % QUANT_R16_ROWS);
		for (int64_t tk = 0; tk < T; tk++) {
			const void *at = (const uint8_t *)a + (size_t)tk * a_stride;
			y[tk * y_stride + r] = kt ? quant_r16k_dot_ref(t, tile, nb, j, at)
						  : r16_dot_ref(t, tile, nb, j, at);
		}
	}
}
