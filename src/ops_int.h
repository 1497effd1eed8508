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

#endif
