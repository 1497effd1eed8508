/* test_ops_simde.c — the AVX-512 attention loops (src/ops_avx512.c)
 * compiled here through SIMDe's portable emulation and compared, bit for
 * bit, with the AVX2 loops of the library (ops_avx2.c), and its argmax
 * scan and sums of squares with the scalar rules (best_rows.h,
 * sumsq_rows.h), so that they are
 * checked on CPUs without AVX-512 too: the kind of machine a checkout is
 * tested on changes (test_ops checks them natively where the CPU has
 * them). Every KV type, 1 to 4 queries, key counts around the kernels'
 * blocks of 4, and head dims the AVX-512 loops take (multiples of 32 for
 * Q.K, of 16 for P.V) as well as others, which they hand to the AVX2
 * loops.
 *
 * SIMDe 0.7's AVX-512 lacks a few of the intrinsics the file uses, and its
 * FMA fallback rounds twice: simde_avx512.h supplies those. */
#include <immintrin.h> /* before SIMDe, whose aliases would clash */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops_int.h"
#include "quant.h"

#include "simde_avx512.h"

#ifdef INGOT_SIMDE_AVX512
/* the emulated copies under names of their own (the library has the real
 * ones) */
#define ops_qk_avx512 emu_qk_avx512
#define ops_qk_f16_avx512 emu_qk_f16_avx512
#define ops_qk_q8_avx512 emu_qk_q8_avx512
#define ops_pv_avx512 emu_pv_avx512
#define ops_pv_f16_avx512 emu_pv_f16_avx512
#define ops_pv_q8_avx512 emu_pv_q8_avx512
#define ops_best_scan_avx512 emu_best_scan_avx512
#define ops_sumsq_rows_avx512 emu_sumsq_rows_avx512
#include "ops_avx512.c"

#include "best_rows.h"
#include "sumsq_rows.h"

typedef void (*qk_fn)(const float *const *, int, const void *const *, int64_t, int64_t, float *,
		      int64_t);
typedef void (*pv_fn)(float *const *, const float *const *, int, const void *const *, int64_t,
		      int64_t);

static float frand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return ((float)(*s >> 8) / (float)(1u << 24)) * 2.0f - 1.0f;
}

enum { NK = 70, DMAX = 256 };

/* Q.K and P.V of the emulated loops against the AVX2 ones over rows of
 * KV type kt: every bit of every score and output. */
static void check_kind(enum ops_kv_type kt, qk_fn qk_ref, qk_fn qk_emu, pv_fn pv_ref,
		       pv_fn pv_emu, const char *name)
{
	unsigned seed = 5 + (unsigned)kt;
	const size_t row = ops_kv_row_bytes(kt, DMAX);
	unsigned char *rows = malloc(row * NK);
	float *q = malloc(sizeof(float) * 4 * DMAX), *p = malloc(sizeof(float) * 4 * NK);
	float *o_ref = malloc(sizeof(float) * 4 * DMAX), *o_emu = malloc(sizeof(float) * 4 * DMAX);
	float src[DMAX], s_ref[4 * NK], s_emu[4 * NK];
	const void *R[NK];
	for (int j = 0; j < NK; j++) {
		for (int i = 0; i < DMAX; i++)
			src[i] = 4 * frand(&seed);
		ops_kv_store(rows + j * row, src, DMAX, kt);
		R[(j * 11) % NK] = rows + j * row; /* scattered, like KV blocks */
	}
	for (int i = 0; i < 4 * DMAX; i++)
		q[i] = 3 * frand(&seed);
	for (int i = 0; i < 4 * NK; i++)
		p[i] = frand(&seed);
	/* head dims: multiples of 32, which both loops take here (96: P.V's
	 * 64 columns, then 16 at a time), and others, which go to the AVX2
	 * loops; Q8_0 rows hold whole blocks of 32 */
	static const int dims[] = { 256, 64, 32, 96, 100, 8, 44, 72, 24 };
	static const int nks[] = { 1, 2, 3, 4, 5, 7, 13, 64, NK };
	int bad_qk = 0, bad_pv = 0, cases = 0;
	for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
		const int n = dims[di];
		if (kt == OPS_KV_Q8_0 && n % 32)
			continue;
		for (int nq = 1; nq <= 4; nq++)
			for (size_t ki = 0; ki < sizeof nks / sizeof *nks; ki++, cases++) {
				const int nk = nks[ki];
				const float *qs[4];
				float *outr[4], *oute[4];
				const float *ps[4];
				for (int a = 0; a < nq; a++) {
					qs[a] = q + a * DMAX;
					ps[a] = p + a * NK;
					outr[a] = o_ref + a * DMAX;
					oute[a] = o_emu + a * DMAX;
				}
				memset(s_ref, 0, sizeof s_ref);
				memset(s_emu, 0, sizeof s_emu);
				qk_ref(qs, nq, R, nk, n, s_ref, NK);
				qk_emu(qs, nq, R, nk, n, s_emu, NK);
				bad_qk += memcmp(s_ref, s_emu, sizeof s_ref) != 0;
				for (int i = 0; i < 4 * DMAX; i++)
					o_ref[i] = o_emu[i] = frand(&seed); /* P.V adds to the outputs */
				pv_ref(outr, ps, nq, R, nk, n);
				pv_emu(oute, ps, nq, R, nk, n);
				bad_pv += memcmp(o_ref, o_emu, sizeof(float) * 4 * DMAX) != 0;
			}
	}
	CHECK(bad_qk == 0, "%s Q.K (AVX-512 under SIMDe) equals AVX2: %d of %d differ", name, bad_qk,
	      cases);
	CHECK(bad_pv == 0, "%s P.V (AVX-512 under SIMDe) equals AVX2: %d of %d differ", name, bad_pv,
	      cases);
	free(rows);
	free(q);
	free(p);
	free(o_ref);
	free(o_emu);
}
#endif

int main(void)
{
#ifdef INGOT_SIMDE_AVX512
	if (quant_isa_detect() < QUANT_ISA_AVX2) {
		printf("SKIP: the AVX2 loops (the reference here) need AVX2/FMA/F16C\n");
		return check_summary("test_ops_simde");
	}
	check_kind(OPS_KV_F32, ops_qk_avx2, emu_qk_avx512, ops_pv_avx2, emu_pv_avx512, "F32");
	check_kind(OPS_KV_F16, ops_qk_f16_avx2, emu_qk_f16_avx512, ops_pv_f16_avx2,
		   emu_pv_f16_avx512, "F16");
	check_kind(OPS_KV_Q8_0, ops_qk_q8_avx2, emu_qk_q8_avx512, ops_pv_q8_avx2, emu_pv_q8_avx512,
		   "Q8_0");
	CHECK(best_rows_mismatches(emu_best_scan_avx512, 3000) == 0,
	      "the argmax scan (AVX-512 under SIMDe) equals the scalar rule");
	CHECK(sumsq_mismatches(emu_sumsq_rows_avx512) == 0,
	      "RMSNorm's sums of squares (AVX-512 under SIMDe) equal the scalar rule");
#else
	printf("SKIP: SIMDe headers not installed (apt-get install libsimde-dev)\n");
#endif
	return check_summary("test_ops_simde");
}
