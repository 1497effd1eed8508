/* mem.h — the one allocator wrapper.
 *
 * Every heap allocation in ingot goes through these functions so that we can
 * count live bytes (leak checks in tests) and fail the Nth allocation on
 * purpose (fault-injection tests walk N over load and request paths).
 * Semantics match malloc/calloc/realloc/free; ing_calloc and
 * ing_malloc_array check n*size for overflow and return NULL on it. */
#ifndef INGOT_MEM_H
#define INGOT_MEM_H

#include <stddef.h>

void *ing_malloc(size_t size);
void *ing_calloc(size_t n, size_t size);
void *ing_malloc_array(size_t n, size_t size);
void *ing_realloc(void *p, size_t size);
void ing_free(void *p);
char *ing_strndup(const char *s, size_t n);

/* Pages for long linear streams (the repacked weights, the bandwidth
 * probe that is measured against them): anonymous, private, read-write,
 * with transparent huge pages asked for (madvise) where the kernel offers
 * them, so that a probe and the weights read memory mapped the same way.
 * On the Sapphire Rapids-class host a 2-thread read of 246 MB streamed
 * 34-37 GB/s from huge pages and 25-27 from 4 KB ones. NULL when bytes is 0
 * or the mapping fails; the caller frees with ing_pages_free(p, bytes)
 * (NULL is fine). Not heap: outside the live-byte count and the fault
 * injection. */
void *ing_pages_alloc(size_t bytes);
void ing_pages_free(void *p, size_t bytes);

/* Live bytes currently allocated through this wrapper. */
size_t ing_mem_live(void);

/* Fault injection: make the nth allocation from now on (1-based) and every
 * one after it fail when `sticky`, or only that one otherwise. 0 disables. */
void ing_mem_fail_at(long nth, int sticky);

/* Number of allocations attempted since the last ing_mem_fail_at(). */
long ing_mem_count(void);

#endif
