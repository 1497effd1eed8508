/* quant_gemm_k_avxvnni.c — quant_gemm_k_avx2.c's K-quant kernels (Q4_K,
 * Q6_K) built for CPUs with AVX-VNNI (the VEX form of vpdpbusd): as
 * quant_gemm_k_avx512.c, the AVX2 table's results bit for bit. */
#define QUANT_GEMM_VNNI QUANT_GEMM_VNNI_VEX
#define QUANT_GEMM_K_REGISTER quant_gemm_k_avxvnni_register
#include "quant_gemm_k_avx2.c"
