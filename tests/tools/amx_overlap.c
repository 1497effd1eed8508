/* amx_overlap.c — whether a core runs AMX's tile work and AVX-512's
 * vector work at the same time: what bounds the AMX kernels
 * (quant_gemm_r16_amx.c), whose every tile product of one block's 32
 * elements is followed by a float step on the vector units (a per-block
 * scale pair keeps the integer sums of two blocks apart).
 *
 *   amx_overlap [--rounds R]
 *
 * Times, in ns per tile product (16 tokens x 16 rows x 32 int8 elements,
 * 8192 multiply-adds), three loops shaped as amx_tokens' stages (two
 * products a stage):
 *   tiles   the tile work alone: load A and B, zero C, TDPBSSD, store C;
 *   floats  the vector work alone: each of 16 tokens' stored C row
 *           converted, scaled (dw * da) and added (cvt, mul, fma);
 *   both    the two interleaved, the products of one stage finished
 *           while the tiles compute the next, as the kernels do.
 * If the core overlapped them, `both` would take about the longer of the
 * two; on the Sapphire Rapids-class host it takes their sum. Each round
 * prints all three and the sum of the first two. The data is arbitrary
 * (zeros): the tile unit's and the vector units' timings do not depend
 * on it. Needs the amx table (quant_kernels_get(QUANT_ISA_AMX): CPUID,
 * the OS and the tile permission); exits 2 without it. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "quant.h"

#define AMX_FNS __attribute__((target("avx512f,avx512bw,avx512vl,fma,amx-tile,amx-int8"), noinline))

enum { TOKENS = 16, ROWS = 16, K = 32, RUNS = 20, STAGES_A_ROUND = 4000000 };

enum loop_kind { LOOP_TILES, LOOP_FLOATS, LOOP_BOTH, LOOP_COUNT };
static const char *const loop_names[LOOP_COUNT] = { "tiles", "floats", "both" };

/* A (tokens x K), B (K / 4 rows of 16 columns of 4 bytes), C (tokens x
 * rows int32) for RUNS runs; each run's 16 rows' scales and tokens'
 * scales. */
static uint8_t run_a[RUNS][TOKENS * K] __attribute__((aligned(64)));
static uint8_t run_b[RUNS][K / 4 * 64] __attribute__((aligned(64)));
static int32_t run_c[2][TOKENS][ROWS] __attribute__((aligned(64)));
static float run_dw[RUNS][ROWS] __attribute__((aligned(64)));
static float run_da[RUNS][TOKENS];
static volatile float sink; /* the loops' results go here, so they run */

struct tilecfg {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

/* Tiles 0, 1: A; 2, 3: B; 4, 5: C, as amx_configure sets them. */
AMX_FNS static void tiles_configure(void)
{
	static struct tilecfg cfg __attribute__((aligned(64)));
	memset(&cfg, 0, sizeof cfg);
	cfg.palette = 1;
	for (int i = 0; i < 2; i++) {
		cfg.colsb[0 + i] = K, cfg.rows[0 + i] = TOKENS;
		cfg.colsb[2 + i] = 64, cfg.rows[2 + i] = K / 4;
		cfg.colsb[4 + i] = 64, cfg.rows[4 + i] = TOKENS;
	}
	_tile_loadconfig(&cfg);
}

/* acc[i] += dw * da_i * (float)C[i], the float step of one run's product. */
#define FINISH(c, r)                                                                          \
	do {                                                                                  \
		const __m512 dw = _mm512_load_ps(run_dw[r]);                                  \
		_Pragma("GCC unroll 16") for (int i = 0; i < TOKENS; i++) acc[i] =            \
			_mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(run_da[r][i])),       \
					_mm512_cvtepi32_ps(_mm512_load_si512((c)[i])), acc[i]); \
	} while (0)

/* Runs `stages` stages of the loop kind (two products a stage); returns a
 * float to keep the vector work alive. */
AMX_FNS static float loop_run(enum loop_kind kind, long stages)
{
	__m512 acc[TOKENS];
	for (int i = 0; i < TOKENS; i++)
		acc[i] = _mm512_setzero_ps();
	const int tiles = kind != LOOP_FLOATS, floats = kind != LOOP_TILES;
	for (long s = 0; s < stages; s++) {
		const int r = (int)(s % (RUNS / 2)) * 2;
		if (tiles) {
			_tile_stored(4, run_c[0], 64);
			_tile_stored(5, run_c[1], 64);
			_tile_loadd(0, run_a[r], K);
			_tile_loadd(2, run_b[r], 64);
			_tile_zero(4);
			_tile_dpbssd(4, 0, 2);
			_tile_loadd(1, run_a[r + 1], K);
			_tile_loadd(3, run_b[r + 1], 64);
			_tile_zero(5);
			_tile_dpbssd(5, 1, 3);
		}
		if (floats) {
			FINISH(run_c[0], r);
			FINISH(run_c[1], r + 1);
		}
	}
	__m512 sum = acc[0];
	for (int i = 1; i < TOKENS; i++)
		sum = _mm512_add_ps(sum, acc[i]);
	return _mm512_reduce_add_ps(sum);
}

AMX_FNS static void tiles_release(void)
{
	_tile_release();
}

int main(int argc, char **argv)
{
	int rounds = 5;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
			rounds = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: amx_overlap [--rounds R]\n");
			return 2;
		}
	}
	/* the table's first build asks Linux for the tile state */
	if (!quant_kernels_get(QUANT_ISA_AMX)) {
		fprintf(stderr, "amx_overlap: no amx kernels here (%s)\n", quant_amx_status());
		return 2;
	}
	tiles_configure();
	printf("ns per tile product (16 x 16 x %d int8), %d products a round\n", K, 2 * STAGES_A_ROUND);
	for (int rd = 0; rd < rounds; rd++) {
		double ns[LOOP_COUNT];
		for (int k = 0; k < LOOP_COUNT; k++) {
			const double t0 = clock_now_s();
			sink += loop_run((enum loop_kind)k, STAGES_A_ROUND);
			ns[k] = (clock_now_s() - t0) / (2.0 * STAGES_A_ROUND) * 1e9;
		}
		printf("round %d: %s %.2f  %s %.2f  %s %.2f  (tiles + floats %.2f)\n", rd + 1, loop_names[0],
		       ns[0], loop_names[1], ns[1], loop_names[2], ns[2], ns[0] + ns[1]);
	}
	tiles_release();
	return 0;
}
