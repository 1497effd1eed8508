/* quant_avx2.c — AVX2 + FMA + F16C kernels (placeholder). */
#include "quant_int.h"

void quant_avx2_register(struct quant_kernels *k)
{
	(void)k;
}
