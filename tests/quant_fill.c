/* quant_fill.c — deterministic random weights and activations for the
 * quant kernel tests and benchmarks, and the repacked kernels' cases
 * against the reference (quant_fill.h). */
#include "quant_fill.h"

#include <stdio.h>
#include <string.h>

#include "quant_int.h"

uint32_t quant_fill_u32(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (uint32_t)(*state >> 16);
}

void quant_fill_weights(enum qtype t, uint8_t *w, size_t bytes, uint64_t *state)
{
	for (size_t i = 0; i < bytes; i += 4) {
		const uint32_t r = quant_fill_u32(state);
		memcpy(w + i, &r, bytes - i < 4 ? bytes - i : 4);
	}
	const size_t bb = qtype_traits(t)->block_bytes;
	const uint16_t d = f32_to_fp16(0.001f), dmin = f32_to_fp16(0.0005f);
	for (size_t off = 0; off + bb <= bytes; off += bb) {
		uint8_t *b = w + off;
		if (t == QTYPE_Q6_K)
			memcpy(b + offsetof(struct block_q6_K, d), &d, 2);
		else if (t == QTYPE_Q4_K)
			memcpy(b, &d, 2), memcpy(b + 2, &dmin, 2);
		else
			memcpy(b, &d, 2); /* Q8_0, Q5_0 and the other legacy types: d first */
	}
}

void quant_fill_activations(float *x, int64_t n, uint64_t *state)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)((int)(quant_fill_u32(state) % 2001) - 1000) / 1000.0f;
}

bool quant_fill_outputs_same(const float *y, const float *y_ref, int64_t rows, int64_t T,
			     const char *what)
{
	if (memcmp(y, y_ref, sizeof(float) * (size_t)(rows * T)) == 0)
		return true;
	for (int64_t i = 0; what && i < rows * T; i++)
		if (memcmp(&y[i], &y_ref[i], sizeof y[i]) != 0) {
			fprintf(stderr, "%s: token %lld row %lld: %.9g, reference %.9g\n", what,
				(long long)(i / rows), (long long)(i % rows), y[i], y_ref[i]);
			break;
		}
	return false;
}

int quant_fill_r16_cases(quant_gemm_fn kernel, const struct quant_fill_r16 *c, const int64_t *Ts,
			 size_t nT, void (*after)(void *ctx, int64_t T), void *ctx, int *cases)
{
	const int64_t R = c->rows;
	const int64_t ranges[][3] = { /* r0, r1, r_pf */
		{ 0, R, R }, { 3, R - 3, R }, { 16, 32, 0 }, { 5, 6, 21 }, { 33, R, R }
	};
	int bad = 0;
	*cases = 0;
	for (size_t ti = 0; ti < nT; ti++) {
		const int64_t T = Ts[ti];
		const void *pk = T >= QUANT_GEMM_PACK_MIN ? c->packed : NULL;
		for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++) {
			const int64_t r0 = ranges[ri][0], r1 = ranges[ri][1], r_pf = ranges[ri][2];
			for (int64_t i = 0; i < R * T; i++)
				c->y[i] = c->y_ref[i] = -7.25f; /* the sentinel */
			kernel(c->n, c->w16, c->w_stride, r0, r1, c->a, c->a_stride, pk, T, c->y, R, r_pf);
			if (after)
				after(ctx, T);
			quant_gemm_r16_ref(c->t, c->n, c->w16, c->w_stride, r0, r1, c->a, c->a_stride, pk, T,
					   c->y_ref, R);
			++*cases;
			char what[96];
			snprintf(what, sizeof what, "%s n=%lld T=%lld rows [%lld, %lld)",
				 qtype_traits(c->t)->name, (long long)c->n, (long long)T, (long long)r0,
				 (long long)r1);
			bad += !quant_fill_outputs_same(c->y, c->y_ref, R, T, bad < 3 ? what : NULL);
		}
	}
	return bad;
}
