/* quant_gemm_k_avx512.c — quant_gemm_k_avx2.c's K-quant kernels (Q4_K,
 * Q6_K) built for CPUs with AVX512-VNNI + VL: the matrix kernel's
 * integer sums by vpdpbusd in its EVEX form, two groups of tokens per
 * broadcast weight quad (tok8_sums_vnni); 256-bit vectors and the AVX2
 * table's lanes, so every result is that table's, bit for bit. */
#define QUANT_GEMM_VNNI QUANT_GEMM_VNNI_EVEX
#define QUANT_GEMM_K_REGISTER quant_gemm_k_avx512_register
#include "quant_gemm_k_avx2.c"
