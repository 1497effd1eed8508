/* sanitize.h — ThreadSanitizer annotations for memory that uninstrumented
 * code touches.
 *
 * A TSan build (make tsan) compiles the quant kernels (src/quant_*.c: the
 * reference, the SIMD dot and gemm kernels) without instrumentation: they
 * read every weight of the model each step, and checking each of those
 * loads made a step of the 270M model take seconds, so test_engine could
 * not run under TSan in CI. The weights are a read-only mapping and cannot
 * race; the activations the kernels read and write are shared between the
 * compute workers, so the kernels' callers (ops.c) declare those accesses
 * here, a range per row at most, and TSan checks them as if the kernels
 * were instrumented.
 * SAN_IGNORE_BEGIN/END bracket code whose accesses TSan should not
 * track at all (bulk copies of the read-only weights).
 * Outside a TSan build these are no-ops. */
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
#else
#define SAN_IGNORE_BEGIN() ((void)0)
#define SAN_IGNORE_END() ((void)0)
#define SAN_READ(p, n) ((void)sizeof(p), (void)sizeof(n)) /* evaluates nothing */
#define SAN_WRITE(p, n) ((void)sizeof(p), (void)sizeof(n))
#endif

#endif
