/* quant_fill.h — deterministic random data for the quant kernel tests and
 * benchmarks (test_r16_simde, tools/quant_bench): a xorshift stream, and
 * weight rows of random quant bits whose scales are small finite fp16
 * values (the scale fields are the only place random bits could make inf
 * or NaN). The caller owns the state, so each program's sequence is its
 * own. */
#ifndef INGOT_QUANT_FILL_H
#define INGOT_QUANT_FILL_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"

/* The next 32 random bits of *state (nonzero). */
uint32_t quant_fill_u32(uint64_t *state);

/* bytes bytes of type t rows (whole blocks) at w: random quants, each
 * block's scales set to 0.001 (and a K block's dmin to 0.0005). */
void quant_fill_weights(enum qtype t, uint8_t *w, size_t bytes, uint64_t *state);

/* n activations at x, uniform in [-1, 1] in steps of 0.001. */
void quant_fill_activations(float *x, int64_t n, uint64_t *state);

#endif
