/* test_act_simde.c — the AVX-512 activation quantizers (src/
 * quant_act_avx512.c: Q8_0 and Q8_K) compiled here through SIMDe's
 * portable emulation and compared, byte for byte, with the reference
 * rules (quant_quantize_ref), so that they are checked on CPUs without
 * AVX-512 too (test_quant checks the native build where the CPU has it).
 * Rows: random activations at scales from 1e-9 to 1e6 (F16 scales
 * subnormal and past 65504), exact rounding ties after scaling, all-zero
 * blocks, blocks whose largest magnitude comes three times with either
 * sign (Q8_K takes the first's sign), and an odd number of Q8_0 blocks (the
 * pairs' odd one out). */
#include <immintrin.h> /* before SIMDe, whose aliases would clash */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "quant.h"
#include "quant_fill.h"
#include "quant_int.h"

#include "simde_avx512.h"

#ifdef INGOT_SIMDE_AVX512
#define quant_act_avx512_register emu_act_avx512_register
#include "quant_act_avx512.c"

enum { N = 4096 };

/* Row `round` of the cases above into x (N floats). */
static void fill_round(float *x, int round, uint64_t *state)
{
	quant_fill_activations(x, N, state);
	switch (round) {
	case 1: /* ties: x * (127 / amax) lands on .5 */
		for (int i = 0; i < N; i++)
			x[i] = i % 256 == 0 ? -127.0f : (float)(i % 61) - 30.5f;
		break;
	case 2: /* zero blocks, a -0 among them */
		memset(x + 256, 0, 512 * sizeof *x);
		x[300] = -0.0f;
		break;
	case 3:
		for (int i = 0; i < N; i++)
			x[i] *= powf(10.0f, (float)((i / 32) % 16) - 9.0f);
		break;
	case 4: /* the largest magnitude three times in a block, signs
		 * either way: twice in one vector of 16, once in a later one */
		for (int b = 0; b < N / 256; b++) {
			x[256 * b + 33 + b % 4] = b % 2 ? 3.0f : -3.0f;
			x[256 * b + 44 - b % 4] = b % 2 ? -3.0f : 3.0f;
			x[256 * b + 200 - b] = b % 2 ? -3.0f : 3.0f;
		}
		break;
	}
}

static void check_type(const struct quant_kernels *k, enum qtype t, int64_t n)
{
	uint64_t bytes = 0;
	qtype_row_bytes(t, (uint64_t)n, &bytes);
	float *x = malloc(N * sizeof *x);
	uint8_t *want = malloc(bytes), *got = malloc(bytes);
	uint64_t state = 7;
	int bad = 0;
	for (int round = 0; round < 5; round++) {
		fill_round(x, round, &state);
		memset(want, 0x55, bytes);
		memset(got, 0xaa, bytes);
		quant_quantize_ref(t, x, want, n);
		k->quantize_act[t](x, got, n);
		bad += memcmp(want, got, bytes) != 0;
	}
	CHECK(bad == 0, "%s of %lld (AVX-512 under SIMDe) equals the reference: %d of 5 differ",
	      qtype_traits(t)->name, (long long)n, bad);
	free(x), free(want), free(got);
}
#endif

int main(void)
{
#ifdef INGOT_SIMDE_AVX512
	struct quant_kernels k = *quant_kernels_get(QUANT_ISA_SCALAR);
	emu_act_avx512_register(&k);
	check_type(&k, QTYPE_Q8_K, N);
	check_type(&k, QTYPE_Q8_K, 256);
	check_type(&k, QTYPE_Q8_0, N);
	check_type(&k, QTYPE_Q8_0, N - 32); /* an odd number of blocks */
	check_type(&k, QTYPE_Q8_0, 32);
#else
	printf("SKIP: SIMDe headers not installed (apt-get install libsimde-dev)\n");
#endif
	return check_summary("test_act_simde");
}
