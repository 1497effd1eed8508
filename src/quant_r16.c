/* quant_r16.c — Q8_0 matrices repacked 16 rows to a tile (layout in
 * quant.h): the packing done once at load, its inverse for tests, and the
 * scalar reference of the tile kernel (quant_gemm_r16_avx512.c).
 *
 * Why the copy: the LM head of the default model (262144 x 640 Q8_0, half
 * of a batched decode step) is compute-bound from 8 tokens on, and the
 * row-major kernels spend a third of their vector operations on the
 * unsigned offset (one vpxor per broadcast weight quad) and on the float
 * step of 4-row tiles; with the rows in the lanes the quants are offset
 * once here and each weight vector serves every token. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"
#include "quant_int.h"

size_t quant_r16_tile_bytes(int64_t n)
{
	const size_t nb = (size_t)(n / QK);
	return nb / 2 * QUANT_R16_PAIR_BYTES + nb % 2 * (64 + QUANT_R16_ROWS * QK);
}

size_t quant_r16_bytes(int64_t n, int64_t rows)
{
	if (n <= 0 || rows < 0 || n % QK || n / QK > QUANT_R16_MAX_BLOCKS)
		return 0;
	const size_t tiles = (size_t)((rows + QUANT_R16_ROWS - 1) / QUANT_R16_ROWS);
	const size_t tile = quant_r16_tile_bytes(n);
	if (tiles && tile > SIZE_MAX / tiles)
		return 0;
	return tiles * tile;
}

/* Where row j's quad k of block b, and its scale of block b, live in a
 * tile: block pairs of QUANT_R16_PAIR_BYTES, each the two blocks' scales
 * in one line, then their quads. */
static size_t quad_offset(int64_t b, int k, int j)
{
	return (size_t)(b / 2) * QUANT_R16_PAIR_BYTES + 64 + (size_t)(b % 2) * (QUANT_R16_ROWS * QK) +
	       (size_t)k * 64 + (size_t)j * 4;
}

static size_t scale_offset(int64_t b, int j)
{
	return (size_t)(b / 2) * QUANT_R16_PAIR_BYTES + (size_t)(b % 2) * (QUANT_R16_ROWS * 2) +
	       (size_t)j * 2;
}

void quant_r16_pack(const void *w, int64_t n, int64_t rows, void *dst)
{
	const int64_t nb = n / QK;
	const size_t tile_bytes = quant_r16_tile_bytes(n);
	const struct block_q8_0 *src = w;
	uint8_t *out = dst;
	const int64_t tiles = (rows + QUANT_R16_ROWS - 1) / QUANT_R16_ROWS;
	for (int64_t ti = 0; ti < tiles; ti++) {
		uint8_t *tile = out + (size_t)ti * tile_bytes;
		memset(tile, 0, tile_bytes);
		for (int j = 0; j < QUANT_R16_ROWS; j++) {
			const int64_t r = ti * QUANT_R16_ROWS + j;
			for (int64_t b = 0; b < nb; b++) {
				/* padding rows: quants 0 (128 offset), scale 0 */
				const struct block_q8_0 *blk = r < rows ? &src[r * nb + b] : NULL;
				for (int k = 0; k < QK / 4; k++)
					for (int e = 0; e < 4; e++)
						tile[quad_offset(b, k, j) + (size_t)e] =
							(uint8_t)((blk ? blk->qs[4 * k + e] : 0) ^ 0x80);
				uint16_t d = blk ? blk->d : 0;
				memcpy(tile + scale_offset(b, j), &d, sizeof d);
			}
		}
	}
}

void quant_r16_unpack_row(const void *p, int64_t n, int64_t row, void *dst)
{
	const int64_t nb = n / QK;
	const uint8_t *tile = (const uint8_t *)p + (size_t)(row / QUANT_R16_ROWS) * quant_r16_tile_bytes(n);
	const int j = (int)(row % QUANT_R16_ROWS);
	struct block_q8_0 *out = dst;
	for (int64_t b = 0; b < nb; b++) {
		for (int k = 0; k < QK / 4; k++)
			for (int e = 0; e < 4; e++)
				out[b].qs[4 * k + e] = (int8_t)(tile[quad_offset(b, k, j) + (size_t)e] ^ 0x80);
		memcpy(&out[b].d, tile + scale_offset(b, j), sizeof out[b].d);
	}
}

/* One output: row j of tile `tile` against the Q8_0 activation row a. */
static float r16_dot_ref(const uint8_t *tile, int64_t nb, int j, const struct block_q8_0 *a)
{
	float acc = 0.0f;
	for (int64_t b = 0; b < nb; b++) {
		int32_t usum = 0, asum = 0;
		for (int k = 0; k < QK / 4; k++)
			for (int e = 0; e < 4; e++) {
				const int32_t x = a[b].qs[4 * k + e];
				usum += (int32_t)tile[quad_offset(b, k, j) + (size_t)e] * x;
				asum += x;
			}
		uint16_t dw;
		memcpy(&dw, tile + scale_offset(b, j), sizeof dw);
		const float d = fp16_to_f32(dw) * fp16_to_f32(a[b].d);
		acc = fmaf(d, (float)(usum - 128 * asum), acc);
	}
	return acc;
}

void quant_gemm_q8_0_r16_ref(int64_t n, const void *w, size_t w_stride, int64_t r0, int64_t r1,
			     const void *a, size_t a_stride, const void *packed, int64_t T,
			     float *y, int64_t y_stride)
{
	(void)w_stride;
	(void)packed;
	const int64_t nb = n / QK;
	const size_t tile_bytes = quant_r16_tile_bytes(n);
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *tile = (const uint8_t *)w + (size_t)(r / QUANT_R16_ROWS) * tile_bytes;
		for (int64_t t = 0; t < T; t++)
			y[t * y_stride + r] = r16_dot_ref(tile, nb, (int)(r % QUANT_R16_ROWS),
							  (const void *)((const uint8_t *)a + (size_t)t * a_stride));
	}
}
