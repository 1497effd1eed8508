/* quant_gemm_avxvnni.c — quant_gemm_avx2.c's legacy-type kernels (Q4_0,
 * Q5_0, Q8_0: dot and gemm) built for CPUs with AVX-VNNI (the VEX form of
 * vpdpbusd, on 256-bit registers): Alder Lake and later Intel cores, Zen 5,
 * many of them without AVX-512. See "VNNI builds" in quant_gemm_avx2.c;
 * the results are the AVX2 table's, bit for bit. */
#define QUANT_GEMM_VNNI QUANT_GEMM_VNNI_VEX
#define QUANT_GEMM_REGISTER quant_gemm_avxvnni_register
#include "quant_gemm_avx2.c"
