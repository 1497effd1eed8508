/* quant_gemm_avx512.c — quant_gemm_avx2.c's legacy-type kernels (Q4_0,
 * Q5_0, Q8_0: dot and gemm) built for CPUs with AVX512-VNNI + VL (Ice Lake,
 * Cascade Lake, Sapphire Rapids and later Xeons, Zen 4, Zen 5): vpdpbusd
 * in its EVEX form forms the integer sums (see "VNNI builds" there).
 *
 * The vectors stay 256 bits wide. The lanes are the same as the AVX2
 * kernels' (8 tokens of a group, or 8 rows), which keeps every output's
 * float operations, and so its bits, those of the AVX2 table, and lets one
 * source serve all three builds. Whether 512-bit tiles would pay more is
 * not measured: no AVX-512 CPU was at hand. */
#define QUANT_GEMM_VNNI QUANT_GEMM_VNNI_EVEX
#define QUANT_GEMM_REGISTER quant_gemm_avx512_register
#include "quant_gemm_avx2.c"
