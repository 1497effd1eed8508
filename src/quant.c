/* quant.c — run-time kernel selection for the quant module.
 *
 * quant_isa_detect() asks cpuid what the CPU implements and xgetbv whether
 * the OS saves the matching register state (an AVX-512 CPU under an OS or
 * hypervisor that does not enable ZMM state must not run AVX-512 code).
 * AMX asks one thing more: Linux keeps the tile data out of a process's
 * saved state until it asks for it (arch_prctl(ARCH_REQ_XCOMP_PERM)), and
 * a tile instruction before that kills the process; the request is made
 * once, by the first detection, and the amx table is offered only after
 * its kernels passed their self-check (quant_gemm_r16_amx_register).
 * Kernel tables are built once, on first use, under pthread_once: every
 * entry starts as a thin wrapper over the scalar reference and the ISA file
 * then overwrites the entries it implements. Tables are immutable after
 * that, so callers may share the returned pointers across threads.
 * dot_multi entries start NULL (quant_dot_multi then calls dot per row);
 * an ISA file that replaces a dot entry also sets or clears its dot_multi
 * entry, so the two never come from different ISAs. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define QUANT_X86 1
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define QUANT_AMX_LINUX 1
#endif

#include "quant.h"
#include "quant_int.h"

/* ---- CPU feature detection ---- */

struct cpu_features {
	int avx2;    /* AVX2 + FMA + F16C, YMM state enabled */
	int avxvnni; /* avx2 + AVX-VNNI */
	int avx512;  /* avx2 + AVX-512 F + BW + VL + DQ + VNNI, ZMM and opmask state enabled */
	int amx_cpu; /* AMX-TILE + AMX-INT8 in CPUID */
	int amx;     /* avx512 + amx_cpu, tile state enabled (XCR0 bits 17, 18) */
};

#ifdef QUANT_X86
static uint64_t xcr0_read(void)
{
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (uint64_t)hi << 32 | lo;
}

static struct cpu_features cpu_features_probe(void)
{
	struct cpu_features f = { 0, 0, 0, 0, 0 };
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return f;
	int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
	int fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
	if (!osxsave || !avx)
		return f;
	uint64_t xcr0 = xcr0_read();
	int ymm_os = (xcr0 & 0x6) == 0x6;         /* XMM | YMM */
	int zmm_os = (xcr0 & 0xe6) == 0xe6;       /* + opmask, ZMM_Hi256, Hi16_ZMM */
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return f;
	int avx2 = (b >> 5) & 1;
	int f512 = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
	int vnni = (c >> 11) & 1;
	int tile_os = (xcr0 & 0x60000) == 0x60000; /* XTILECFG | XTILEDATA */
	f.amx_cpu = ((d >> 24) & 1) && ((d >> 25) & 1);
	f.avx2 = ymm_os && avx2 && fma && f16c;
	f.avx512 = f.avx2 && zmm_os && f512 && dq && bw && vl && vnni;
	f.amx = f.avx512 && f.amx_cpu && tile_os;
	if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d))
		f.avxvnni = f.avx2 && ((a >> 4) & 1);
	return f;
}
#else
static struct cpu_features cpu_features_probe(void)
{
	struct cpu_features f = { 0, 0, 0, 0, 0 };
	return f;
}
#endif

/* ---- AMX: the process's permission, asked once ---- */

static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_permitted;
static char amx_why[96] = "not probed";

static void amx_probe(void)
{
	struct cpu_features f = cpu_features_probe();
	amx_permitted = 0;
	if (!f.avx512) {
		snprintf(amx_why, sizeof amx_why, "no AVX-512 (the amx table builds on it)");
		return;
	}
	if (!f.amx_cpu) {
		snprintf(amx_why, sizeof amx_why, "no AMX-TILE / AMX-INT8 in CPUID");
		return;
	}
	if (!f.amx) {
		snprintf(amx_why, sizeof amx_why, "the OS does not enable tile state (XCR0)");
		return;
	}
#ifdef QUANT_AMX_LINUX
	const long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
	if (syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) != 0) {
		snprintf(amx_why, sizeof amx_why, "arch_prctl(ARCH_REQ_XCOMP_PERM): %s", strerror(errno));
		return;
	}
	amx_permitted = 1;
	snprintf(amx_why, sizeof amx_why, "available");
#else
	snprintf(amx_why, sizeof amx_why, "tile permission is only asked for on Linux");
#endif
}

const char *quant_amx_status(void)
{
	(void)quant_kernels_get(QUANT_ISA_AMX); /* the probe, then the self-check */
	return amx_why;
}

static int isa_supported(enum quant_isa isa)
{
	struct cpu_features f = cpu_features_probe();
	switch (isa) {
	case QUANT_ISA_SCALAR:
		return 1;
	case QUANT_ISA_AVX2:
		return f.avx2;
	case QUANT_ISA_AVXVNNI:
		return f.avxvnni;
	case QUANT_ISA_AVX512:
		return f.avx512;
	case QUANT_ISA_AMX:
		pthread_once(&amx_once, amx_probe);
		return amx_permitted;
	default:
		return 0;
	}
}

static const char *const isa_names[QUANT_ISA_COUNT] = { "scalar", "avx2", "avxvnni", "avx512", "amx" };

const char *quant_isa_name(enum quant_isa isa)
{
	return (unsigned)isa < QUANT_ISA_COUNT ? isa_names[isa] : "unknown";
}

/* The last ISA of the enum whose table was built (the CPU runs it; the
 * amx table also passed its self-check; every table gives the same
 * results, the later ones only differ in speed). INGOT_ISA=scalar|avx2|
 * avxvnni|avx512|amx picks another of those; unknown values, and ISAs the
 * CPU lacks, are ignored. */
enum quant_isa quant_isa_detect(void)
{
	enum quant_isa best = QUANT_ISA_SCALAR;
	for (int i = QUANT_ISA_COUNT - 1; i > 0; i--) {
		if (quant_kernels_get((enum quant_isa)i)) {
			best = (enum quant_isa)i;
			break;
		}
	}
	const char *env = getenv("INGOT_ISA");
	for (int i = 0; env && i < QUANT_ISA_COUNT; i++) {
		if (strcmp(env, isa_names[i]) == 0 && quant_kernels_get((enum quant_isa)i))
			best = (enum quant_isa)i;
	}
	return best;
}

/* ---- reference wrappers with the kernel-table signatures ---- */

#define REF_WRAPPERS(T)                                                            \
	static void ref_dot_##T(int64_t n, float *out, const void *w, const void *a)  \
	{                                                                          \
		*out = quant_dot_ref(QTYPE_##T, w, a, n);                          \
	}                                                                          \
	static void ref_quantize_##T(const float *x, void *dst, int64_t n)         \
	{                                                                          \
		quant_quantize_ref(QTYPE_##T, x, dst, n);                          \
	}

REF_WRAPPERS(F32)
REF_WRAPPERS(F16)
REF_WRAPPERS(BF16)
REF_WRAPPERS(Q4_0)
REF_WRAPPERS(Q4_1)
REF_WRAPPERS(Q5_0)
REF_WRAPPERS(Q5_1)
REF_WRAPPERS(Q8_0)
REF_WRAPPERS(Q8_1)
REF_WRAPPERS(Q2_K)
REF_WRAPPERS(Q3_K)
REF_WRAPPERS(Q4_K)
REF_WRAPPERS(Q5_K)
REF_WRAPPERS(Q6_K)
REF_WRAPPERS(Q8_K)

#define REF_ENTRY(T)                                      \
	do {                                              \
		k->dot[QTYPE_##T] = ref_dot_##T;           \
		k->quantize_act[QTYPE_##T] = ref_quantize_##T; \
	} while (0)

static void kernels_fill_ref(struct quant_kernels *k)
{
	REF_ENTRY(F32);
	REF_ENTRY(F16);
	REF_ENTRY(BF16);
	REF_ENTRY(Q4_0);
	REF_ENTRY(Q4_1);
	REF_ENTRY(Q5_0);
	REF_ENTRY(Q5_1);
	REF_ENTRY(Q8_0);
	REF_ENTRY(Q8_1);
	REF_ENTRY(Q2_K);
	REF_ENTRY(Q3_K);
	REF_ENTRY(Q4_K);
	REF_ENTRY(Q5_K);
	REF_ENTRY(Q6_K);
	REF_ENTRY(Q8_K);
}

/* ---- tables ---- */

static struct quant_kernels tables[QUANT_ISA_COUNT];
static struct quant_kernels tables_narrow[QUANT_ISA_COUNT]; /* quant_kernels_narrow */
static int table_ok[QUANT_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_build(void)
{
	for (int i = 0; i < QUANT_ISA_COUNT; i++) {
		struct quant_kernels *k = &tables[i];
		memset(k, 0, sizeof *k);
		k->isa = (enum quant_isa)i;
		table_ok[i] = isa_supported((enum quant_isa)i);
		if (!table_ok[i])
			continue;
		kernels_fill_ref(k);
#ifdef QUANT_X86
		/* every SIMD table: the AVX2 kernels, then the legacy types'
		 * build for the ISA */
		const bool avx512 = i == QUANT_ISA_AVX512 || i == QUANT_ISA_AMX;
		void (*legacy)(struct quant_kernels *, bool) =
			avx512                   ? quant_gemm_avx512_register
			: i == QUANT_ISA_AVXVNNI ? quant_gemm_avxvnni_register
			: i == QUANT_ISA_AVX2    ? quant_gemm_avx2_register
						 : NULL;
		if (legacy) {
			quant_avx2_register(k);
			(avx512                   ? quant_gemm_k_avx512_register
			 : i == QUANT_ISA_AVXVNNI ? quant_gemm_k_avxvnni_register
						  : quant_gemm_k_avx2_register)(k);
		}
		if (avx512) {
			quant_gemm_r16_avx512_register(k);
			quant_act_avx512_register(k);
		}
		if (i == QUANT_ISA_AMX && quant_gemm_r16_amx_register(k) != 0) {
			snprintf(amx_why, sizeof amx_why, "AMX kernels failed their self-check");
			table_ok[i] = 0;
			continue;
		}
		if (i == QUANT_ISA_AVX2)
			quant_gemm_r16_avx2_register(k);
		tables_narrow[i] = *k;
		if (legacy) {
			legacy(k, false);
			legacy(&tables_narrow[i], true);
		}
#else
		tables_narrow[i] = *k;
#endif
	}
}

const struct quant_kernels *quant_kernels_get(enum quant_isa isa)
{
	if ((unsigned)isa >= QUANT_ISA_COUNT)
		return NULL;
	pthread_once(&tables_once, tables_build);
	return table_ok[isa] ? &tables[isa] : NULL;
}

const struct quant_kernels *quant_kernels_best(void)
{
	const struct quant_kernels *k = quant_kernels_get(quant_isa_detect());
	return k ? k : quant_kernels_get(QUANT_ISA_SCALAR);
}

const struct quant_kernels *quant_kernels_narrow(const struct quant_kernels *k)
{
	pthread_once(&tables_once, tables_build);
	if (k != &tables[k->isa])
		return k;
	/* the twin differs in gemm entries only; where none does (the VNNI
	 * tables), the table is its own twin */
	const struct quant_kernels *nk = &tables_narrow[k->isa];
	return memcmp(nk->gemm, k->gemm, sizeof k->gemm) == 0 ? k : nk;
}

/* Whether any of the 8 bytes of x is 0x80: exact (the classic zero-byte
 * test on x ^ 0x80..., whose per-byte sums never carry). */
static bool word_has_0x80(uint64_t x)
{
	const uint64_t hi = 0x8080808080808080ull, lo7 = 0x7f7f7f7f7f7f7f7full;
	const uint64_t z = x ^ hi; /* a byte of z is 0 where x's is 0x80 */
	return (~(((z & lo7) + lo7) | z) & hi) != 0;
}

bool quant_weights_narrow(enum qtype t, const void *w, uint64_t nbytes)
{
	if (t != QTYPE_Q8_0)
		return true;
	const struct block_q8_0 *b = w;
	for (uint64_t i = 0; i < nbytes / sizeof *b; i++) {
		uint64_t q[QK / 8];
		memcpy(q, b[i].qs, sizeof q);
		if (word_has_0x80(q[0]) || word_has_0x80(q[1]) || word_has_0x80(q[2]) ||
		    word_has_0x80(q[3]))
			return false;
	}
	return true;
}

/* ---- packed activation groups ---- */

int64_t quant_gemm_rows_trim(int64_t T)
{
	int64_t left = T % QUANT_GEMM_GROUP;
	return T > QUANT_GEMM_GROUP && left < QUANT_GEMM_PACK_MIN ? T - left : T;
}

size_t quant_gemm_pack_bytes(enum qtype act, int64_t n, int64_t rows)
{
	size_t block;
	uint64_t elems;
	switch (act) {
	case QTYPE_Q8_0: block = sizeof(struct quant_gemm_block), elems = QK; break;
	case QTYPE_Q8_K: block = sizeof(struct quant_gemm_kblock), elems = QK_K; break;
	default: return 0;
	}
	if (n <= 0 || rows < 0 || (uint64_t)n % elems != 0)
		return 0;
	uint64_t groups = ((uint64_t)rows + QUANT_GEMM_GROUP - 1) / QUANT_GEMM_GROUP;
	uint64_t blocks = (uint64_t)n / elems;
	if (groups != 0 && blocks > SIZE_MAX / block / groups)
		return 0;
	return (size_t)(groups * blocks * block);
}

/* Two int8 (or int16) values as the int16 pair of one int32, low first. */
static int32_t pair16(int lo, int hi)
{
	return (int32_t)((uint32_t)(uint16_t)(int16_t)lo | (uint32_t)(uint16_t)(int16_t)hi << 16);
}

static void pack_row_q8_0(const struct block_q8_0 *a, int64_t n, int64_t t, void *packed)
{
	const int64_t nb = n / QK;
	struct quant_gemm_block *g = (struct quant_gemm_block *)packed + (t / QUANT_GEMM_GROUP) * nb;
	const int l = (int)(t % QUANT_GEMM_GROUP);
	for (int64_t b = 0; b < nb; b++) {
		int32_t sum = 0;
		for (int k = 0; k < QK / 4; k++)
			memcpy(&g[b].quads[k][l], a[b].qs + 4 * k, 4);
		for (int e = 0; e < QK; e++)
			sum += a[b].qs[e];
		g[b].sums[l] = sum;
		g[b].d[l] = fp16_to_f32(a[b].d);
	}
}

static void pack_row_q8_K(const struct block_q8_K *a, int64_t n, int64_t t, void *packed)
{
	const int64_t nb = n / QK_K;
	struct quant_gemm_kblock *g = (struct quant_gemm_kblock *)packed + (t / QUANT_GEMM_GROUP) * nb;
	const int l = (int)(t % QUANT_GEMM_GROUP);
	for (int64_t b = 0; b < nb; b++) {
		for (int k = 0; k < QK_K / 4; k++)
			memcpy(&g[b].quads[k][l], a[b].qs + 4 * k, 4);
		for (int j = 0; j < QK_K / 32; j++)
			g[b].bsum_pairs[j][l] = pair16(a[b].bsums[2 * j], a[b].bsums[2 * j + 1]);
		g[b].d[l] = a[b].d;
	}
}

void quant_gemm_pack_row(enum qtype act, const void *row, int64_t n, int64_t t, void *packed)
{
	if (act == QTYPE_Q8_K)
		pack_row_q8_K(row, n, t, packed);
	else
		pack_row_q8_0(row, n, t, packed);
}

/* ---- multi-row dot ---- */

void quant_dot_multi(const struct quant_kernels *k, enum qtype t, int64_t n, float *out,
		     const void *w, const void *a, size_t a_stride, int ncols)
{
	const uint8_t *row = a;
	quant_dot_multi_fn multi = k->dot_multi[t];
	quant_dot_fn dot = k->dot[t];
	for (int c = 0; c < ncols;) {
		int m = ncols - c < QUANT_MULTI_MAX ? ncols - c : QUANT_MULTI_MAX;
		if (multi)
			multi(n, out + c, w, row, a_stride, m);
		else if (dot)
			for (int j = 0; j < m; j++)
				dot(n, out + c + j, w, row + (size_t)j * a_stride);
		else
			for (int j = 0; j < m; j++)
				out[c + j] = quant_dot_ref(t, w, row + (size_t)j * a_stride, n);
		c += m;
		row += (size_t)m * a_stride;
	}
}
