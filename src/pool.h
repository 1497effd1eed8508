/* pool.h — a persistent pool of compute threads.
 *
 * pool_run(p, fn, ctx) calls fn(ctx, ith, nth) once on each of the nth
 * threads (the caller is thread 0) and returns when all have finished. The
 * workers spin briefly waiting for the next job, then sleep on a futex, so
 * back-to-back jobs inside a step cost about a cache-line round trip while
 * an idle pool costs nothing. Thread ownership: only the thread that created
 * the pool may call pool_run / pool_destroy. */
#ifndef INGOT_POOL_H
#define INGOT_POOL_H

#include "err.h"

struct pool;

typedef void (*pool_fn)(void *ctx, int ith, int nth);

/* Creates a pool of n_threads (>= 1) including the caller. With pin != 0
 * threads are pinned to CPUs 0..n-1; pinning failures are reported in err's
 * message but are not fatal (err->code stays ING_OK). */
int pool_create(int n_threads, int pin, struct pool **out, ing_err *err);
void pool_destroy(struct pool *p);
int pool_threads(const struct pool *p);
void pool_run(struct pool *p, pool_fn fn, void *ctx);

/* Number of CPUs this process may run on (affinity mask), >= 1. */
int pool_cpu_count(void);

/* Physical cores we may run on (hyperthreads counted once), >= 1. */
int pool_physical_cores(void);

/* [*begin, *end) of n units for thread ith of nth (contiguous split). */
static inline void pool_split(long n, int ith, int nth, long *begin, long *end)
{
	*begin = n * ith / nth;
	*end = n * (ith + 1) / nth;
}

#endif
