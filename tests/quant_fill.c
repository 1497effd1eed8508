/* quant_fill.c — deterministic random weights and activations for the
 * quant kernel tests and benchmarks (quant_fill.h). */
#include "quant_fill.h"

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
