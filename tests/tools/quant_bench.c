/* quant_bench.c — single-thread matrix-vector throughput of the quant dot
 * kernels, in GB/s of weight bytes streamed, next to the machine's plain
 * read bandwidth measured in the same run.
 *
 *   quant_bench [--quick] [--gemm T,T,...]
 *
 * --gemm: only the matrix kernels (below), at these token counts (1 ..
 * 512) instead of 1, 2, 8, 32, 128; each row then also gives the time
 * against the AVX-512 table's as a ratio, when both ran (how the AMX
 * kernels' amx_min_tokens was chosen).
 *
 * Shapes are the default model's (Gemma 3 270M Q4_K_M): the Q8_0 LM head
 * (262144 rows of 640) and the per-layer Q5_0 ffn_gate (2048 x 640), Q4_K
 * and Q6_K ffn_down (640 rows of 2048). Each is timed twice: "hot" (the
 * same matrix, or its first HOT_BYTES of rows, again and again: cache-
 * resident, measures the kernel) and "stream" (copies spanning STREAM_BYTES,
 * or the whole LM head, read once each: what a decode step sees, as the
 * whole model does not fit in cache). Every ISA the
 * CPU runs is measured; results of the ISAs are cross-checked against the
 * scalar reference so a broken kernel cannot post a good number.
 *
 * The "x4" columns time the same matrices through quant_dot_multi with
 * QUANT_MULTI_MAX = 4 activation rows (prefill and batched decode): GB/s of
 * weight bytes streamed, each byte now serving 4 rows, and the gain over 4
 * single-row passes over the same rows (4 x single time / multi time, hot).
 * Their results must be bit-identical to the single-row dots ("NOT
 * IDENTICAL" otherwise).
 * Then the matrix kernels (the gemm entries: decode, batched decode and
 * prefill) on a cache-resident slice of each matrix against 1, 2, 8, 32
 * and 128 tokens, in G multiply-adds a second (T = 1 and 2 also in GB/s
 * of weights: their rows8 path is what a batch-1 decode step runs, where
 * the columns above time the single-row dot entries); every SIMD table must give the same bits
 * ("NOT IDENTICAL" otherwise: they share one float contract, the VNNI ones
 * differing from AVX2 only in how integer sums are formed). Q8_0 also
 * through a table's narrow twin ("/narrow": the kernel a model whose
 * Q8_0 weights hold no quant of -128 runs, as the default model's LM
 * head does on AVX2; the bench's weights hold none).
 * Deterministic data; figures vary with the machine's load (quote ratios to
 * the read bandwidth of the same run, not absolute numbers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "clock.h"
#include "quant.h"
#include "quant_int.h"
#include "quant_fill.h"

#define STREAM_BYTES (256ull << 20)
#define HOT_BYTES (2ull << 20) /* a slice of a big matrix that stays in L2/L3 */

struct bench_case {
	const char *name;
	enum qtype type;
	int64_t n;    /* row length */
	int64_t rows;
};

static const struct bench_case cases[] = {
	{ "lm_head", QTYPE_Q8_0, 640, 262144 },
	{ "ffn_gate", QTYPE_Q5_0, 640, 2048 },
	{ "ffn_down", QTYPE_Q4_K, 2048, 640 },
	{ "ffn_down", QTYPE_Q6_K, 2048, 640 },
};

static uint64_t rng = 0x2545f4914f6cdd1dull; /* quant_fill.h's stream */

#define MULTI QUANT_MULTI_MAX /* activation rows of the x4 runs */

/* y[r] = dot(row r of w, a) for rows rows. */
static void matvec(const struct quant_kernels *k, enum qtype t, const uint8_t *w, int64_t n,
		   int64_t rows, const void *a, float *y)
{
	size_t rb = (size_t)(n / qtype_traits(t)->block_elems) * qtype_traits(t)->block_bytes;
	quant_dot_fn dot = k->dot[t];
	for (int64_t r = 0; r < rows; r++)
		dot(n, &y[r], w + (size_t)r * rb, a);
}

/* y[MULTI r + c] = dot(row r of w, activation row c), c < MULTI, the
 * activation rows a_stride bytes apart. */
static void matmul_multi(const struct quant_kernels *k, enum qtype t, const uint8_t *w, int64_t n,
			 int64_t rows, const void *a, size_t a_stride, float *y)
{
	size_t rb = (size_t)(n / qtype_traits(t)->block_elems) * qtype_traits(t)->block_bytes;
	for (int64_t r = 0; r < rows; r++)
		quant_dot_multi(k, t, n, &y[MULTI * r], w + (size_t)r * rb, a, a_stride, MULTI);
}

/* Best time of several runs of matvec (a_stride 0) or matmul_multi over
 * `rows` rows of copies [0, copies) of the matrix; runs at least min_s in
 * total. y holds MULTI floats per row. */
static double matvec_time(const struct quant_kernels *k, const struct bench_case *c,
			  const uint8_t *w, size_t mat_bytes, int copies, int64_t rows,
			  const void *a, size_t a_stride, float *y, double min_s)
{
	double best = INFINITY, start = clock_now_s();
	int runs = 0;
	do {
		double t0 = clock_now_s();
		for (int i = 0; i < copies; i++) {
			const uint8_t *wi = w + (size_t)i * mat_bytes;
			if (a_stride)
				matmul_multi(k, c->type, wi, c->n, rows, a, a_stride, y);
			else
				matvec(k, c->type, wi, c->n, rows, a, y);
		}
		double t = clock_now_s() - t0;
		best = t < best ? t : best;
		runs++;
	} while (clock_now_s() - start < min_s || runs < 2);
	return best;
}

/* Sums 32-byte words of p (a plain streaming read, auto-vectorizable). */
static uint64_t read_pass_plain(const uint8_t *p, size_t bytes)
{
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	for (size_t i = 0; i + 32 <= bytes; i += 32) {
		uint64_t v[4];
		memcpy(v, p + i, 32);
		s0 += v[0], s1 += v[1], s2 += v[2], s3 += v[3];
	}
	return s0 + s1 + s2 + s3;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* The same with 256-bit loads, four independent accumulators. */
__attribute__((target("avx2"))) static uint64_t read_pass_avx2(const uint8_t *p, size_t bytes)
{
	__m256i s[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
			 _mm256_setzero_si256() };
	for (size_t i = 0; i + 128 <= bytes; i += 128)
		for (int k = 0; k < 4; k++)
			s[k] = _mm256_add_epi64(s[k], _mm256_loadu_si256((const __m256i *)(p + i + 32 * k)));
	__m256i t = _mm256_add_epi64(_mm256_add_epi64(s[0], s[1]), _mm256_add_epi64(s[2], s[3]));
	return (uint64_t)_mm256_extract_epi64(t, 0) + (uint64_t)_mm256_extract_epi64(t, 3);
}
#endif

/* Plain read bandwidth over bytes at p (GB/s): best of a few passes,
 * alternating the plain loop and (where the CPU has it) 256-bit loads. */
static double read_bandwidth(const uint8_t *p, size_t bytes, double min_s)
{
	volatile uint64_t sink = 0;
	double best = INFINITY, start = clock_now_s();
	int pass = 0;
	do {
		double t0 = clock_now_s();
#if defined(__x86_64__) && defined(__GNUC__)
		if (pass++ % 2 && __builtin_cpu_supports("avx2"))
			sink += read_pass_avx2(p, bytes);
		else
#endif
			sink += read_pass_plain(p, bytes);
		(void)pass;
		double t = clock_now_s() - t0;
		best = t < best ? t : best;
	} while (clock_now_s() - start < min_s);
	(void)sink;
	return (double)bytes / best / 1e9;
}

static float max_rel_diff(const float *y, const float *ref, int64_t rows)
{
	double num = 0.0, den = 0.0;
	for (int64_t r = 0; r < rows; r++) {
		num = fmax(num, fabs((double)y[r] - ref[r]));
		den = fmax(den, fabs((double)ref[r]));
	}
	return den > 0 ? (float)(num / den) : (float)num;
}

static int bench_case_run(const struct bench_case *c, double min_s, double bw_stream)
{
	const struct qtype_traits *tr = qtype_traits(c->type);
	size_t mat_bytes = (size_t)(c->n / tr->block_elems) * tr->block_bytes * (size_t)c->rows;
	int copies = mat_bytes >= STREAM_BYTES ? 1 : (int)(STREAM_BYTES / mat_bytes);
	/* hot runs use at most HOT_BYTES of rows, so they stay in cache */
	size_t row_bytes = mat_bytes / (size_t)c->rows;
	int64_t hot_rows = mat_bytes <= HOT_BYTES ? c->rows : (int64_t)(HOT_BYTES / row_bytes);
	size_t hot_bytes = (size_t)hot_rows * row_bytes;
	uint8_t *w = malloc(mat_bytes * (size_t)copies);
	float *x = malloc((size_t)c->n * sizeof *x);
	float *y = malloc((size_t)c->rows * MULTI * sizeof *y), *yref = malloc((size_t)c->rows * sizeof *y);
	float *y1 = malloc((size_t)c->rows * MULTI * sizeof *y1);
	uint64_t a_row = 0;
	qtype_row_bytes(tr->act_type, (uint64_t)c->n, &a_row);
	size_t a_stride = (size_t)(a_row + 63) / 64 * 64;
	uint8_t *a = malloc(a_stride * MULTI);
	if (!w || !x || !y || !yref || !y1 || !a) {
		fprintf(stderr, "quant_bench: out of memory\n");
		return -1;
	}
	quant_fill_weights(c->type, w, mat_bytes * (size_t)copies, &rng);
	for (int j = 0; j < MULTI; j++) { /* row 0 is the one the single-row runs use */
		quant_fill_activations(x, c->n, &rng);
		quant_quantize_ref(tr->act_type, x, a + (size_t)j * a_stride, c->n);
	}
	matvec(quant_kernels_get(QUANT_ISA_SCALAR), c->type, w, c->n, c->rows, a, yref);
	int bad = 0;
	for (int isa = 0; isa < QUANT_ISA_COUNT; isa++) {
		const struct quant_kernels *k = quant_kernels_get((enum quant_isa)isa);
		if (!k)
			continue;
		matvec(k, c->type, w, c->n, c->rows, a, y);
		float diff = max_rel_diff(y, yref, c->rows);
		bad |= diff > 1e-4f;
		/* multi results against single-row dots of each activation row */
		int64_t check_rows = c->rows < 4096 ? c->rows : 4096;
		matmul_multi(k, c->type, w, c->n, check_rows, a, a_stride, y);
		int same = 1;
		for (int j = 0; j < MULTI; j++) {
			matvec(k, c->type, w, c->n, check_rows, a + (size_t)j * a_stride, y1);
			for (int64_t r = 0; r < check_rows; r++)
				same &= memcmp(&y1[r], &y[MULTI * r + j], sizeof *y) == 0;
		}
		bad |= !same;
		double t_hot = matvec_time(k, c, w, mat_bytes, 1, hot_rows, a, 0, y, min_s);
		double t_str = matvec_time(k, c, w, mat_bytes, copies, c->rows, a, 0, y, min_s);
		double t_hot4 = matvec_time(k, c, w, mat_bytes, 1, hot_rows, a, a_stride, y, min_s);
		double t_str4 = matvec_time(k, c, w, mat_bytes, copies, c->rows, a, a_stride, y, min_s);
		double gb_str = (double)mat_bytes * copies / t_str / 1e9;
		double gb_str4 = (double)mat_bytes * copies / t_str4 / 1e9;
		printf("%-4s %-9s %4lldx%-7lld %-7s %8.2f %8.2f   %5.1f%%  %8.2f %8.2f   %4.2fx   %.1e%s%s\n",
		       tr->name, c->name, (long long)c->n, (long long)c->rows, quant_isa_name(k->isa),
		       (double)hot_bytes / t_hot / 1e9, gb_str, 100.0 * gb_str / bw_stream,
		       (double)hot_bytes / t_hot4 / 1e9, gb_str4, MULTI * t_hot / t_hot4, diff,
		       diff > 1e-4f ? "  MISMATCH" : "", same ? "" : "  NOT IDENTICAL");
	}
	free(w), free(x), free(y), free(yref), free(y1), free(a);
	return bad ? -1 : 0;
}

/* ---- matrix kernels (batched decode, prefill) ---- */

#define GEMM_T_MAX 512

/* The gemm entry of every table that has one, on GEMM_ROWS rows of the
 * case's matrix (hot: about 1 MB or less) against Ts[0 .. nT) tokens:
 * G multiply-adds a second, one thread. The SIMD tables share one float
 * contract, so their results must agree bit for bit ("NOT IDENTICAL").
 * Packed groups from QUANT_GEMM_PACK_MIN tokens on, as the runners pass
 * them. */
/* Table k's narrow twin, where it runs another kernel for type t than k
 * does and the weights w allow it; else NULL. */
static const struct quant_kernels *narrow_twin(const struct quant_kernels *k, enum qtype t,
					       const uint8_t *w, size_t bytes)
{
	const struct quant_kernels *nk = quant_kernels_narrow(k);
	if (nk == k || nk->gemm[t] == k->gemm[t] || !quant_weights_narrow(t, w, bytes))
		return NULL;
	return nk;
}

static int bench_gemm_case(const struct bench_case *c, double min_s, const int *Ts, size_t nT)
{
	const struct qtype_traits *tr = qtype_traits(c->type);
	const size_t row_bytes = (size_t)(c->n / tr->block_elems) * tr->block_bytes;
	int64_t rows = (int64_t)((1u << 20) / row_bytes) / 8 * 8;
	rows = rows > c->rows ? c->rows : rows;
	uint64_t a_row = 0;
	qtype_row_bytes(tr->act_type, (uint64_t)c->n, &a_row);
	uint8_t *w = malloc(row_bytes * (size_t)rows), *a = malloc((size_t)a_row * GEMM_T_MAX);
	void *packed = malloc(quant_gemm_pack_bytes(tr->act_type, c->n, GEMM_T_MAX));
	float *x = malloc((size_t)c->n * sizeof *x);
	float *y = malloc((size_t)rows * GEMM_T_MAX * sizeof *y);
	float *y0 = malloc((size_t)rows * GEMM_T_MAX * sizeof *y0);
	if (!w || !a || !packed || !x || !y || !y0) {
		fprintf(stderr, "quant_bench: out of memory\n");
		free(w), free(a), free(packed), free(x), free(y), free(y0);
		return -1;
	}
	quant_fill_weights(c->type, w, row_bytes * (size_t)rows, &rng);
	/* no Q8_0 quant of -128, as every quantizer writes (and a real model's
	 * LM head holds): the narrow twin's kernel runs too */
	if (c->type == QTYPE_Q8_0)
		for (size_t i = 0; i < row_bytes * (size_t)rows; i++)
			if (i % sizeof(struct block_q8_0) >= offsetof(struct block_q8_0, qs) &&
			    w[i] == 0x80)
				w[i] = 0x81;
	/* Q8_0, Q5_0, Q4_K, Q6_K: the rows repacked 16 to a tile too, for the
	 * tables' r16 kernels */
	void *w16 = quant_r16_type(c->type) ? malloc(quant_r16_bytes(c->type, c->n, rows)) : NULL;
	if (w16)
		quant_r16_pack(c->type, w, c->n, rows, w16);
	for (int64_t t = 0; t < GEMM_T_MAX; t++) {
		quant_fill_activations(x, c->n, &rng);
		quant_quantize_ref(tr->act_type, x, a + (size_t)t * a_row, c->n);
		quant_gemm_pack_row(tr->act_type, a + (size_t)t * a_row, c->n, t, packed);
	}
	int bad = 0;
	for (size_t ti = 0; ti < nT; ti++) {
		const int64_t T = Ts[ti];
		int have_y0 = 0;
		double avx512_r16 = 0; /* the AVX-512 table's r16 time, for the ratio */
		for (int kind = 0; kind < 3 * QUANT_ISA_COUNT; kind++) {
			/* kind < QUANT_ISA_COUNT: table kind's gemm entry on the
			 * rows; then table kind % QUANT_ISA_COUNT's r16 entry on
			 * the repacked rows; then its narrow twin's gemm entry
			 * (the one a model's Q8_0 weights get when no quant is
			 * -128), where it has one and the weights allow it */
			const int r16 = kind / QUANT_ISA_COUNT == 1;
			const int narrow = kind / QUANT_ISA_COUNT == 2;
			const struct quant_kernels *k =
				quant_kernels_get((enum quant_isa)(kind % QUANT_ISA_COUNT));
			if (k && narrow)
				k = narrow_twin(k, c->type, w, row_bytes * (size_t)rows);
			quant_gemm_fn fn = !k ? NULL : r16 ? (w16 ? k->gemm_r16[c->type] : NULL) : k->gemm[c->type];
			if (!fn)
				continue;
			const void *wk = r16 ? w16 : w;
			double best = 1e30, spent = 0;
			while (spent < min_s) {
				double t0 = clock_now_s();
				fn(c->n, wk, row_bytes, 0, rows, a, (size_t)a_row,
				   T >= QUANT_GEMM_PACK_MIN ? packed : NULL, T, y, rows, rows);
				double dt = clock_now_s() - t0;
				spent += dt;
				best = dt < best ? dt : best;
			}
			int same = 1;
			if (have_y0)
				same = memcmp(y, y0, (size_t)(rows * T) * sizeof *y) == 0;
			else
				memcpy(y0, y, (size_t)(rows * T) * sizeof *y), have_y0 = 1;
			bad |= !same;
			char gbs[48] = "", isa[24];
			if (T <= 2)
				snprintf(gbs, sizeof gbs, "  (%.1f GB/s of weights)",
					 (double)row_bytes * (double)rows / best / 1e9);
			if (r16 && k->isa == QUANT_ISA_AVX512)
				avx512_r16 = best;
			else if (r16 && k->isa == QUANT_ISA_AMX && avx512_r16 > 0)
				snprintf(gbs + strlen(gbs), sizeof gbs - strlen(gbs), "  (%.2fx avx512/r16)",
					 avx512_r16 / best);
			snprintf(isa, sizeof isa, "%s%s", quant_isa_name(k->isa),
				 r16 ? "/r16" : narrow ? "/narrow" : "");
			printf("%-4s %-9s %4lldx%-7lld T=%-4lld %-10s %8.1f G multiply-adds/s%s%s\n", tr->name,
			       c->name, (long long)c->n, (long long)rows, (long long)T, isa,
			       (double)c->n * (double)rows * (double)T / best / 1e9, gbs,
			       same ? "" : "  NOT IDENTICAL");
		}
	}
	free(w), free(w16), free(a), free(packed), free(x), free(y), free(y0);
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	double min_s = 0.3;
	int Ts[16] = { 1, 2, 8, 32, 128 };
	size_t nT = 5;
	bool gemm_only = false;
	for (int i = 1, n; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			min_s = 0.05;
		} else if (strcmp(argv[i], "--gemm") == 0 && i + 1 < argc &&
			   (n = cli_parse_ints(argv[i + 1], Ts, (int)(sizeof Ts / sizeof Ts[0]), 1, GEMM_T_MAX)) > 0) {
			nT = (size_t)n, gemm_only = true, i++;
		} else {
			fprintf(stderr, "usage: quant_bench [--quick] [--gemm T,T,... (1..%d, at most 16)]\n",
				GEMM_T_MAX);
			return 2;
		}
	}
	if (gemm_only) {
		int rc = 0;
		printf("matrix kernels, one thread, about 1 MB of rows (cache-resident):\n");
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
			rc |= bench_gemm_case(&cases[i], min_s, Ts, nT);
		return rc ? 1 : 0;
	}
	uint8_t *buf = malloc(STREAM_BYTES);
	if (!buf)
		return 1;
	memset(buf, 1, STREAM_BYTES);
	double bw_stream = read_bandwidth(buf, STREAM_BYTES, min_s * 3);
	double bw_hot = read_bandwidth(buf, 1 << 20, min_s);
	free(buf);
	printf("single thread; best ISA here: %s\n", quant_isa_name(quant_isa_detect()));
	printf("plain read bandwidth: %.2f GB/s streaming %llu MiB, %.2f GB/s over 1 MiB (cached)\n\n",
	       bw_stream, STREAM_BYTES >> 20, bw_hot);
	printf("%52s  ------ x%d rows ------\n", "", MULTI);
	printf("type kernel    n x rows      isa     hot GB/s stream GB/s  %%of read   hot GB/s stream GB/s  gain"
	       "   rel.diff vs scalar\n");
	int rc = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		rc |= bench_case_run(&cases[i], min_s, bw_stream);
	printf("\nmatrix kernels, one thread, about 1 MB of rows (cache-resident):\n");
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		rc |= bench_gemm_case(&cases[i], min_s, Ts, nT);
	for (int isa = 0; isa < QUANT_ISA_COUNT; isa++)
		if (!quant_kernels_get((enum quant_isa)isa))
			printf("(%s not measured: the CPU lacks it)\n", quant_isa_name((enum quant_isa)isa));
	return rc ? 1 : 0;
}
