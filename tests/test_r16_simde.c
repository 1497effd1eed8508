/* test_r16_simde.c — the AVX-512 repacked kernels (src/quant_gemm_r16_avx512.c)
 * compiled here through SIMDe's portable emulation and compared, bit for
 * bit, with the scalar reference quant_gemm_r16_ref (which test_quant
 * ties to the SIMD tables' dot entries), so that a change to the tile
 * layout or to those kernels is checked on CPUs without AVX-512 too: the
 * kind of machine a checkout is developed and tested on changes, and
 * test_quant checks them natively only where the CPU has them.
 *
 * Every repacked type (Q8_0, Q5_0, Q4_K, Q6_K), rows of an even and an odd
 * number of blocks, T from plain rows only through packed groups with a
 * partial last one, row ranges that cut tiles at both ends and the padded
 * last tile, a next range (r_pf), and rows long enough that the groups go
 * in two chunks; nothing outside the range written.
 *
 * Built at -O0 in release (Makefile): SIMDe's 512-bit emulation inside
 * these always-inline kernels took GCC 2.5 minutes at -O1 and over 13 at
 * -O2, against seconds here. Under ASan it keeps ASan's -O1, which there
 * compiles faster than -O0. What SIMDe 0.7 lacks (a few intrinsics, a fused
 * FMA) comes from simde_avx512.h. */
#include <immintrin.h> /* before SIMDe, whose aliases would clash */
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
/* the emulated kernels under a name of their own (the library has the
 * real ones) */
#define quant_gemm_r16_avx512_register emu_r16_register
#include "quant_gemm_r16_avx512.c"

static uint64_t rng = 0x9e3779b97f4a7c15ull; /* quant_fill.h's stream */

enum { ROWS = 40, T_MAX = 40 };

/* One type and row length: every T and range below, the emulated kernel
 * against the reference, and a sentinel outside the range untouched. */
static void check_case(const struct quant_kernels *k, enum qtype t, int64_t n, int64_t t_max)
{
	const struct qtype_traits *tr = qtype_traits(t);
	const size_t w_stride = (size_t)(n / tr->block_elems) * tr->block_bytes;
	uint64_t a_stride = 0;
	qtype_row_bytes(tr->act_type, (uint64_t)n, &a_stride);
	uint8_t *w = malloc(w_stride * ROWS), *a = malloc((size_t)a_stride * (size_t)t_max);
	void *w16 = malloc(quant_r16_bytes(t, n, ROWS));
	void *packed = malloc(quant_gemm_pack_bytes(tr->act_type, n, t_max));
	float *x = malloc(sizeof(float) * (size_t)n);
	float *y = malloc(sizeof(float) * ROWS * (size_t)t_max);
	float *y_ref = malloc(sizeof(float) * ROWS * (size_t)t_max);
	CHECK(w && a && w16 && packed && x && y && y_ref, "out of memory");
	if (!(w && a && w16 && packed && x && y && y_ref))
		goto out;
	quant_fill_weights(t, w, w_stride * ROWS, &rng);
	quant_r16_pack(t, w, n, ROWS, w16);
	for (int64_t tk = 0; tk < t_max; tk++) {
		quant_fill_activations(x, n, &rng);
		quant_quantize_ref(tr->act_type, x, a + (size_t)tk * a_stride, n);
		quant_gemm_pack_row(tr->act_type, a + (size_t)tk * a_stride, n, tk, packed);
	}
	static const int64_t Ts[] = { 1, 2, 3, 4, 5, 8, 9, 12, 16, 17, 21, 33, 40 };
	size_t nT = 0;
	while (nT < sizeof Ts / sizeof Ts[0] && Ts[nT] <= t_max)
		nT++;
	const struct quant_fill_r16 c = { t, n, ROWS, w16, w_stride, a, packed, (size_t)a_stride, y, y_ref };
	int cases;
	const int bad = quant_fill_r16_cases(k->gemm_r16[t], &c, Ts, nT, NULL, NULL, &cases);
	CHECK(bad == 0, "%s n=%lld: %d of %d cases differ from the reference", tr->name, (long long)n,
	      bad, cases);
	printf("  %s n=%lld: %d cases\n", tr->name, (long long)n, cases);
out:
	free(w), free(a), free(w16), free(packed), free(x), free(y), free(y_ref);
}
#endif

int main(void)
{
#ifdef INGOT_SIMDE_AVX512
	struct quant_kernels k;
	memset(&k, 0, sizeof k);
	emu_r16_register(&k);
	static const enum qtype types[] = { QTYPE_Q8_0, QTYPE_Q5_0, QTYPE_Q4_K, QTYPE_Q6_K };
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		const enum qtype t = types[i];
		CHECK(k.gemm_r16[t] != NULL, "no emulated AVX-512 repacked kernel for %s",
		      qtype_traits(t)->name);
		if (!k.gemm_r16[t])
			continue;
		const bool kt = quant_r16_k_type(t);
		check_case(&k, t, kt ? 512 : 640, T_MAX);  /* an even number of blocks */
		check_case(&k, t, kt ? 768 : 608, T_MAX);  /* odd: a pair of one last */
	}
	/* the longest rows: 2 groups to a chunk of activations, so T = 21 (3
	 * groups) takes two chunks */
	check_case(&k, QTYPE_Q8_0, QK * QUANT_R16_MAX_BLOCKS, 21);
#else
	printf("SKIP: SIMDe headers not installed (apt-get install libsimde-dev)\n");
#endif
	return check_summary("test_r16_simde");
}
