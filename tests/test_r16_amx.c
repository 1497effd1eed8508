/* test_r16_amx.c — the AMX repacked kernels (src/quant_gemm_r16_amx.c)
 * compiled here over an emulation of the tile instructions (amx_emu.h,
 * from their specification) and SIMDe's AVX-512, and compared bit for bit
 * with the scalar reference quant_gemm_r16_ref: most hosts do not expose
 * AMX (where one does, test_quant runs the kernels natively as well).
 *
 * The kernels' fallback (the AVX-512 entries in the library) is the
 * reference here, counting the tokens it is given: a case passes only if
 * the outputs match, the emulation saw no fault (a configuration or a
 * product shape the hardware would refuse), and every token the tiles
 * take went through them (calls of amx_min_tokens or more; the tokens
 * past the last full 16 of a call of 16 or more go to the fallback).
 * Every repacked type (Q8_0, Q5_0, Q4_K, Q6_K), rows of an even and an
 * odd number of blocks, the longest row the tiles take and one block
 * more, T from one token (no packed groups: all fallback) through 80
 * (five groups of 16: two chunks of tokens on 640-wide rows), tiles of 9
 * to 15 token rows, leftovers of 1 to 15 tokens, row ranges cutting tiles at both ends
 * and the padded last tile, with and without a next range (r_pf). Built
 * like test_r16_simde (-O0 in release, where SIMDe's 512-bit emulation
 * compiles slowly optimized; -O1 under ASan). The registration's own self-check runs first, against the
 * reference. */
#include <immintrin.h> /* before SIMDe and the emulation, which replace parts of it */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "quant.h"
#include "quant_fill.h"
#include "quant_int.h"

#include "simde_avx512.h"

#ifdef INGOT_SIMDE_AVX512
#include "amx_emu.h"

/* the emulated kernels under a name of their own (the library has the
 * real ones) */
#define QUANT_GEMM_R16_AMX_REGISTER emu_amx_register
#include "quant_gemm_r16_amx.c"

static uint64_t rng = 0x853c49e6748fea9bull; /* quant_fill.h's stream */
static int64_t fallback_tokens;              /* tokens the fallback was given */

#define REF_WRAPPER(name, type)                                                                   \
	static void name(int64_t n, const void *w, size_t w_stride, int64_t r0, int64_t r1,         \
			 const void *a, size_t a_stride, const void *packed, int64_t T, float *y,  \
			 int64_t y_stride, int64_t r_pf)                                            \
	{                                                                                          \
		fallback_tokens += T;                                                              \
		quant_gemm_r16_ref(type, n, w, w_stride, r0, r1, a, a_stride, packed, T, y,        \
				   y_stride);                                                      \
	}
REF_WRAPPER(ref_q8_0, QTYPE_Q8_0)
REF_WRAPPER(ref_q5_0, QTYPE_Q5_0)
REF_WRAPPER(ref_q4_K, QTYPE_Q4_K)
REF_WRAPPER(ref_q6_K, QTYPE_Q6_K)

enum { ROWS = 40, T_MAX = 80 };

/* After each kernel call of quant_fill_r16_cases: no tile fault, and every
 * token the tiles take went through them: from amx_min_tokens on, all of
 * a call of fewer than 16, else all but the last T % 16. */
static void after_call(void *ctx, int64_t T)
{
	const struct quant_fill_r16 *c = ctx;
	const bool tiles = T >= amx_min_tokens(c->t) && c->n <= AMX_MAX_BLOCKS * QK;
	const int64_t want = !tiles ? T : T < AMX_TOKENS ? 0 : T % AMX_TOKENS;
	CHECK(amx_emu_faults == 0, "%s n=%lld T=%lld: %d tile faults", qtype_traits(c->t)->name,
	      (long long)c->n, (long long)T, amx_emu_faults);
	CHECK(fallback_tokens == want, "%s n=%lld T=%lld: %lld tokens to the fallback, not %lld",
	      qtype_traits(c->t)->name, (long long)c->n, (long long)T, (long long)fallback_tokens,
	      (long long)want);
	amx_emu_faults = 0;
	fallback_tokens = 0;
}

/* One type and row length: every T and range below, the emulated kernel
 * against the reference, a sentinel outside the range untouched. */
static void check_case(const struct quant_kernels *k, enum qtype t, int64_t n)
{
	const struct qtype_traits *tr = qtype_traits(t);
	const enum qtype at = tr->act_type;
	const int64_t nb = n / tr->block_elems;
	const size_t w_stride = (size_t)nb * tr->block_bytes;
	uint64_t a_row = 0;
	qtype_row_bytes(at, (uint64_t)n, &a_row);
	const size_t a_stride = (size_t)a_row;
	uint8_t *w = malloc(w_stride * ROWS), *a = malloc(a_stride * T_MAX);
	void *w16 = malloc(quant_r16_bytes(t, n, ROWS));
	void *packed = malloc(quant_gemm_pack_bytes(at, n, T_MAX));
	float *x = malloc(sizeof(float) * (size_t)n);
	float *y = malloc(sizeof(float) * ROWS * T_MAX), *y_ref = malloc(sizeof(float) * ROWS * T_MAX);
	CHECK(w && a && w16 && packed && x && y && y_ref, "out of memory");
	if (!(w && a && w16 && packed && x && y && y_ref))
		goto out;
	quant_fill_weights(t, w, w_stride * ROWS, &rng);
	/* scales that differ by row and block (Q4_K: d and dmin first; Q6_K: d last) */
	const size_t d_at = t == QTYPE_Q6_K ? offsetof(struct block_q6_K, d) : 0;
	for (int64_t i = 0; i < ROWS * nb; i++) {
		const uint16_t d[2] = { f32_to_fp16(0.0005f + 0.0001f * (float)(quant_fill_u32(&rng) % 32)),
					f32_to_fp16(0.0002f + 0.0001f * (float)(quant_fill_u32(&rng) % 8)) };
		memcpy(w + (size_t)i * tr->block_bytes + d_at, d, t == QTYPE_Q4_K ? sizeof d : sizeof d[0]);
	}
	quant_r16_pack(t, w, n, ROWS, w16);
	for (int64_t tk = 0; tk < T_MAX; tk++) {
		quant_fill_activations(x, n, &rng);
		quant_quantize_ref(at, x, a + (size_t)tk * a_stride, n);
		quant_gemm_pack_row(at, a + (size_t)tk * a_stride, n, tk, packed);
	}
	static const int64_t Ts[] = { 1, 3, 4, 8, 9, 10, 11, 12, 15, 16, 17, 20, 24, 27, 31, 32, 33, 40, 48, 64, 80 };
	const struct quant_fill_r16 c = { t, n, ROWS, w16, w_stride, a, packed, a_stride, y, y_ref };
	int cases;
	amx_emu_faults = 0;
	fallback_tokens = 0;
	const int bad = quant_fill_r16_cases(k->gemm_r16[t], &c, Ts, sizeof Ts / sizeof Ts[0], after_call,
					     (void *)&c, &cases);
	CHECK(bad == 0, "%s n=%lld: %d of %d cases differ from the reference", tr->name, (long long)n,
	      bad, cases);
	printf("  %s n=%lld: %d cases\n", tr->name, (long long)n, cases);
out:
	free(w), free(a), free(w16), free(packed), free(x), free(y), free(y_ref);
}

/* The emulation itself on a hand-sized product: 2 x 2 tokens, K = 8
 * (two quads), one with the sign and the unsigned high bit in play. */
static void check_emulation(void)
{
	static const struct amx_tilecfg cfg __attribute__((aligned(64))) = {
		.palette = 1, .colsb = { 8, 8, 8 }, .rows = { 2, 2, 2 }
	};
	const int8_t A[2][8] = { { 1, -2, 3, -4, 5, -6, 7, -8 }, { -128, 127, 0, 1, 2, 3, 4, 5 } };
	/* B in the quad layout: row k holds column n's quad k at 4n */
	const uint8_t B[2][8] = { { 1, 2, 3, 4, 255, 0, 128, 1 }, { 5, 6, 7, 8, 9, 10, 11, 12 } };
	int32_t C[2][2], want[2][2];
	for (int m = 0; m < 2; m++)
		for (int c = 0; c < 2; c++) {
			want[m][c] = 0;
			for (int kk = 0; kk < 8; kk++)
				want[m][c] += A[m][kk] * B[kk / 4][4 * c + kk % 4];
		}
	const int faults = amx_emu_faults;
	_tile_loadconfig(&cfg);
	_tile_loadd(0, A, 8);
	_tile_loadd(1, B, 8);
	_tile_zero(2);
	_tile_dpbsud(2, 0, 1);
	_tile_stored(2, C, 8);
	_tile_release();
	CHECK(amx_emu_faults == faults && memcmp(C, want, sizeof C) == 0,
	      "emulated TDPBSUD: %d %d %d %d, want %d %d %d %d", C[0][0], C[0][1], C[1][0], C[1][1],
	      want[0][0], want[0][1], want[1][0], want[1][1]);
	/* and a shape that does not chain faults */
	static const struct amx_tilecfg bad_cfg __attribute__((aligned(64))) = {
		.palette = 1, .colsb = { 8, 8, 8 }, .rows = { 2, 3, 2 }
	};
	amx_emu_quiet = 1;
	_tile_loadconfig(&bad_cfg);
	_tile_dpbsud(2, 0, 1);
	_tile_release();
	amx_emu_quiet = 0;
	CHECK(amx_emu_faults == faults + 1, "a product of unchained shapes did not fault");
	amx_emu_faults = faults;
}
#endif

int main(void)
{
#ifdef INGOT_SIMDE_AVX512
	check_emulation();
	struct quant_kernels k;
	memset(&k, 0, sizeof k);
	k.gemm_r16[QTYPE_Q8_0] = ref_q8_0;
	k.gemm_r16[QTYPE_Q5_0] = ref_q5_0;
	k.gemm_r16[QTYPE_Q4_K] = ref_q4_K;
	k.gemm_r16[QTYPE_Q6_K] = ref_q6_K;
	CHECK(emu_amx_register(&k) == 0, "the AMX kernels' self-check failed");
	CHECK(k.gemm_r16[QTYPE_Q8_0] != ref_q8_0 && k.gemm_r16[QTYPE_Q5_0] != ref_q5_0 &&
		      k.gemm_r16[QTYPE_Q4_K] != ref_q4_K && k.gemm_r16[QTYPE_Q6_K] != ref_q6_K,
	      "registration did not install the AMX entries");
	CHECK(amx_emu_faults == 0, "%d tile faults in the self-check", amx_emu_faults);
	static const enum qtype types[] = { QTYPE_Q8_0, QTYPE_Q5_0, QTYPE_Q4_K, QTYPE_Q6_K };
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		const int64_t bs = qtype_traits(types[i])->block_elems;
		check_case(&k, types[i], bs == QK ? 640 : 512);       /* an even number of blocks */
		check_case(&k, types[i], bs == QK ? 608 : 768);       /* odd (Q8_0, Q5_0: a pair of one last) */
		check_case(&k, types[i], QK * AMX_MAX_BLOCKS);        /* the longest the tiles take */
		check_case(&k, types[i], QK * AMX_MAX_BLOCKS + bs);   /* all to the fallback */
	}
#else
	printf("SKIP: SIMDe headers not installed (apt-get install libsimde-dev)\n");
#endif
	return check_summary("test_r16_amx");
}
