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

/* Live bytes currently allocated through this wrapper. */
size_t ing_mem_live(void);

/* Fault injection: make the nth allocation from now on (1-based) and every
 * one after it fail when `sticky`, or only that one otherwise. 0 disables. */
void ing_mem_fail_at(long nth, int sticky);

/* Number of allocations attempted since the last ing_mem_fail_at(). */
long ing_mem_count(void);

#endif
