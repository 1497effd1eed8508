/* quant_fill.h — deterministic random data for the quant kernel tests and
 * benchmarks (test_r16_simde, tools/quant_bench): a xorshift stream, and
 * weight rows of random quant bits whose scales are small finite fp16
 * values (the scale fields are the only place random bits could make inf
 * or NaN). The caller owns the state, so each program's sequence is its
 * own. And the report of a kernel's outputs against the reference's. */
#ifndef INGOT_QUANT_FILL_H
#define INGOT_QUANT_FILL_H

#include <stdbool.h>
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

/* Whether T tokens' outputs y (token t's row r at t * rows + r) are
 * y_ref's bit for bit; if not and what is not NULL, the first difference
 * to stderr after what. */
bool quant_fill_outputs_same(const float *y, const float *y_ref, int64_t rows, int64_t T,
			     const char *what);

/* A repacked matrix (quant_r16_pack of `rows` >= 40 rows of type t, n
 * elements each, the plain rows w_stride bytes apart) and activation rows
 * (plain, a_stride apart, and packed) for a gemm_r16 kernel, with room
 * for rows x T outputs in y and y_ref. */
struct quant_fill_r16 {
	enum qtype t;
	int64_t n, rows;
	const void *w16;
	size_t w_stride;
	const void *a, *packed;
	size_t a_stride;
	float *y, *y_ref;
};

/* The kernel over every T of Ts[0 .. nT) and five row ranges (whole,
 * cutting tiles at both ends, one tile, one row, the padded last tile;
 * with and without a next range r_pf), each against quant_gemm_r16_ref on
 * outputs preset to a sentinel, so nothing outside the range may be
 * written. after (NULL: none) is called after each kernel call with ctx and
 * T. Returns the number of cases that differ (the first three reported
 * on stderr); *cases gets the number run. */
int quant_fill_r16_cases(quant_gemm_fn kernel, const struct quant_fill_r16 *c, const int64_t *Ts,
			 size_t nT, void (*after)(void *ctx, int64_t T), void *ctx, int *cases);

#endif
