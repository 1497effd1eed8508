/* ops_int.h — private to ops.c and its ISA-specific files. */
#ifndef INGOT_OPS_INT_H
#define INGOT_OPS_INT_H

#include <stdint.h>

float ops_dot_avx2(const float *a, const float *b, int64_t n);
void ops_axpy_avx2(float *y, float p, const float *x, int64_t n);

#endif
