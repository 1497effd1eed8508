/* sanitize.h — sanitizer annotations for memory that uninstrumented code
 * touches.
 *
 * The quant kernels read every weight of the model each step; checked load
 * by load they make the model's tests crawl (a step of the 270M model took
 * seconds under TSan; under ASan test_engine took 193 s against 34
 * released, three quarters of it inside the kernels). So:
 * - a TSan build (make tsan) compiles src/quant_*.c without
 *   instrumentation;
 * - an ASan build links the model's tests (test_engine, test_runner,
 *   test_kv; see the Makefile) with the SIMD kernels (quant_avx2.c,
 *   quant_gemm_*.c) built without ASan and UBSan. The other tests,
 *   test_quant among them, keep every load of the kernels checked.
 * The weights are read-only mappings, which neither sanitizer could check
 * or see race; what the kernels read and write in the heap (the
 * activations, shared between the compute workers) their callers (ops.c)
 * declare here, a range per row at most, and the sanitizer checks it as
 * if the kernels were instrumented: TSan for races, ASan that every byte
 * of the range is addressable (a region past its allocation or freed is
 * reported as an access of it, and stops the test).
 * SAN_IGNORE_BEGIN/END bracket code whose accesses TSan should not
 * track at all (bulk copies of the read-only weights).
 * Outside those builds, and inside code built without the sanitizer,
 * these are no-ops. */
#ifndef INGOT_SANITIZE_H
#define INGOT_SANITIZE_H

#include <stddef.h>

#if defined(__SANITIZE_THREAD__)
#define INGOT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define INGOT_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define INGOT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define INGOT_ASAN 1
#endif
#endif

#ifdef INGOT_TSAN
/* the TSan runtime's entry points (compiler-rt tsan_interface.h) */
void __tsan_read_range(void *addr, unsigned long size);
void __tsan_write_range(void *addr, unsigned long size);
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define SAN_READ(p, n) __tsan_read_range((void *)(p), (unsigned long)(n))
#define SAN_WRITE(p, n) __tsan_write_range((void *)(p), (unsigned long)(n))
#define SAN_IGNORE_BEGIN() \
	(AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define SAN_IGNORE_END() \
	(AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#elif defined(INGOT_ASAN)
#include <sanitizer/asan_interface.h>
#include <stdbool.h>
/* Touches the first unaddressable byte of [p, p + n), if any, from this
 * instrumented code: ASan reports that access (with the region's
 * allocation and the caller's stack) and ends the process before it
 * lands. */
static inline void san_asan_check(const void *p, size_t n, bool write)
{
	volatile char *bad = (volatile char *)__asan_region_is_poisoned((void *)p, n);
	if (!bad)
		return;
	if (write)
		*bad = 0;
	else
		(void)*bad;
}
#define SAN_READ(p, n) san_asan_check((p), (size_t)(n), false)
#define SAN_WRITE(p, n) san_asan_check((p), (size_t)(n), true)
#else
#define SAN_READ(p, n) ((void)sizeof(p), (void)sizeof(n)) /* evaluates nothing */
#define SAN_WRITE(p, n) ((void)sizeof(p), (void)sizeof(n))
#endif
#ifndef INGOT_TSAN
#define SAN_IGNORE_BEGIN() ((void)0)
#define SAN_IGNORE_END() ((void)0)
#endif

#endif
