/* ops_int.h — private to ops.c and its ISA-specific files. */
#ifndef INGOT_OPS_INT_H
#define INGOT_OPS_INT_H

#include <stdint.h>

float ops_dot_avx2(const float *a, const float *b, int64_t n);
void ops_axpy_avx2(float *y, float p, const float *x, int64_t n);

/* ops_dot_avx2(a0, b) and ops_dot_avx2(a1, b), bit for bit, in one pass
 * over b: two independent chains keep both FMA pipes busy. */
void ops_dot2_avx2(const float *a0, const float *a1, const float *b, int64_t n, float *r0,
		   float *r1);

/* out = sum over j < n of p[j] * V[j], bit for bit what zeroing out and
 * calling ops_axpy_avx2(out, p[j], V[j], Dv) for j in order gives (one fma
 * per element and row, from 0), but with out held in registers. */
void ops_pv_avx2(float *out, const float *p, const float *const *V, int64_t n, int64_t Dv);

#endif
