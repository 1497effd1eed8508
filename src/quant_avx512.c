/* quant_avx512.c — AVX-512 kernels (placeholder). */
#include "quant_int.h"

void quant_avx512_register(struct quant_kernels *k)
{
	(void)k;
}
