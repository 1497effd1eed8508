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

#include <sched.h>
#include <stdbool.h>

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

/* Polls of a spinning wait (the pool's, the megakernel's) before each
 * further poll yields the CPU instead: ~0.1-1 ms of pause instructions
 * (a pause takes ~10-140 cycles by CPU), far longer than the gaps between
 * a step's ops or any op's imbalance on an idle machine, short against a
 * scheduler time slice. A wait that long means the thread awaited is not
 * running (another tenant on the machine), and spinning through the time
 * slice would keep it off the core. */
#define POOL_SPINS_BEFORE_YIELD 20000

/* The polls of p's waits before they yield: POOL_SPINS_BEFORE_YIELD, or 0
 * when p has more threads than the CPUs it may run on (as the tests make
 * pools of 3 on 2 cores): there some thread is always off a core, and
 * each wait that spun its polls first made a step of the default model
 * take ~9x as long. */
long pool_spins(const struct pool *p);

/* Poll i (0, 1, ...) of a spinning wait: a pause, or from `spins` on
 * (pool_spins) a yield of the CPU. Returns whether it yielded. */
static inline bool pool_wait_poll(long i, long spins)
{
	if (i >= spins) {
		sched_yield();
		return true;
	}
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
	return false;
}

/* [*begin, *end) of n units for thread ith of nth (contiguous split). */
static inline void pool_split(long n, int ith, int nth, long *begin, long *end)
{
	*begin = n * ith / nth;
	*end = n * (ith + 1) / nth;
}

#endif
