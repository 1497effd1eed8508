/* mem.c — counting, fault-injecting allocator wrapper (see mem.h).
 *
 * Every block is 64-byte aligned (a cache line: structs with _Alignas(64)
 * counters and SIMD buffers rely on it) and carries a 64-byte header holding
 * its size so that ing_free can keep the live-byte count exact. Counters are
 * atomics: the wrapper is used from worker and server threads alike. */
#include "mem.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HDR 64

static atomic_size_t live_bytes;
static atomic_long alloc_count;
static atomic_long fail_nth;
static atomic_int fail_sticky;

static int should_fail(void)
{
	long n = atomic_fetch_add(&alloc_count, 1) + 1;
	long f = atomic_load(&fail_nth);
	if (f <= 0)
		return 0;
	return atomic_load(&fail_sticky) ? n >= f : n == f;
}

void *ing_malloc(size_t size)
{
	if (size > SIZE_MAX - HDR || should_fail())
		return NULL;
	void *raw;
	if (posix_memalign(&raw, HDR, size + HDR) != 0)
		return NULL;
	unsigned char *p = raw;
	memcpy(p, &size, sizeof size);
	atomic_fetch_add(&live_bytes, size);
	return p + HDR;
}

void *ing_malloc_array(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return ing_malloc(n * size);
}

void *ing_calloc(size_t n, size_t size)
{
	void *p = ing_malloc_array(n, size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

void *ing_realloc(void *ptr, size_t size)
{
	if (!ptr)
		return ing_malloc(size);
	size_t old;
	memcpy(&old, (unsigned char *)ptr - HDR, sizeof old);
	void *p = ing_malloc(size); /* no aligned realloc in libc: copy */
	if (!p)
		return NULL;
	memcpy(p, ptr, old < size ? old : size);
	ing_free(ptr);
	return p;
}

void ing_free(void *ptr)
{
	if (!ptr)
		return;
	unsigned char *base = (unsigned char *)ptr - HDR;
	size_t size;
	memcpy(&size, base, sizeof size);
	atomic_fetch_sub(&live_bytes, size);
	free(base);
}

char *ing_strndup(const char *s, size_t n)
{
	char *p = ing_malloc(n + 1);
	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

void *ing_pages_alloc(size_t bytes)
{
	if (bytes == 0)
		return NULL;
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	madvise(p, bytes, MADV_HUGEPAGE); /* advice: without it, 4 KB pages */
#endif
	return p;
}

void ing_pages_free(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}

size_t ing_mem_live(void) { return atomic_load(&live_bytes); }
long ing_mem_count(void) { return atomic_load(&alloc_count); }

void ing_mem_fail_at(long nth, int sticky)
{
	atomic_store(&alloc_count, 0);
	atomic_store(&fail_sticky, sticky);
	atomic_store(&fail_nth, nth);
}
