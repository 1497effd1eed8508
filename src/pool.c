/* pool.c — spin-then-futex thread pool (see pool.h).
 *
 * Protocol: the caller publishes (fn, ctx), sets `pending` to the number of
 * workers and bumps `gen` (release). Workers wait for gen to change
 * (acquire), run their share, and decrement `pending`; the caller runs share
 * 0 and then spins until pending reaches 0. Workers that see no new job for
 * SPIN_LIMIT polls sleep in futex_wait on gen; pool_run wakes them only when
 * some are asleep (`sleepers`). Long waits yield the CPU at each poll
 * (pool_spins). */
#include "pool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mem.h"

#define SPIN_LIMIT (1 << 16)

/* What a worker's yield (pool_wait_poll, past POOL_SPINS_BEFORE_YIELD)
 * counts toward SPIN_LIMIT, so that it still sleeps within ~1-3 ms */
#define POOL_YIELD_POLLS 16

struct worker {
	struct pool *pool;
	pthread_t thread;
	int ith;
	int started;
};

struct pool {
	int n;
	long spins; /* pool_spins */
	struct worker *workers; /* [n], index 0 unused (the caller) */
	pool_fn fn;
	void *ctx;
	_Alignas(64) atomic_uint gen;
	_Alignas(64) atomic_int pending;
	_Alignas(64) atomic_int sleepers;
	atomic_int quit;
};

static void futex_wait(atomic_uint *addr, unsigned val)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(atomic_uint *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

static unsigned wait_new_gen(struct pool *p, unsigned seen)
{
	for (long i = 0;; i++) {
		unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
		if (g != seen)
			return g;
		if (i < SPIN_LIMIT) {
			if (pool_wait_poll(i, p->spins))
				i += POOL_YIELD_POLLS - 1;
			continue;
		}
		atomic_fetch_add(&p->sleepers, 1);
		/* re-check after announcing ourselves, so a bump between the
		 * load and the wait is never missed (futex_wait compares) */
		futex_wait(&p->gen, seen);
		atomic_fetch_sub(&p->sleepers, 1);
		i = 0;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->pool;
	unsigned seen = 0;
	for (;;) {
		seen = wait_new_gen(p, seen);
		if (atomic_load_explicit(&p->quit, memory_order_acquire))
			return NULL;
		p->fn(p->ctx, w->ith, p->n);
		atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
	}
}

int pool_cpu_count(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0) {
		int n = CPU_COUNT(&set);
		return n > 0 ? n : 1;
	}
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

static int pin_to_cpu(pthread_t t, int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(t, sizeof set, &set);
}

int pool_create(int n_threads, int pin, struct pool **out, ing_err *err)
{
	*out = NULL;
	if (n_threads < 1 || n_threads > 1024)
		return ing_err_set(err, ING_ERR_INVALID, "thread count %d out of range 1..1024", n_threads);
	struct pool *p = ing_calloc(1, sizeof *p);
	if (!p)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	p->n = n_threads;
	p->workers = ing_calloc((size_t)n_threads, sizeof *p->workers);
	if (!p->workers) {
		ing_free(p);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	int ncpu = pool_cpu_count();
	p->spins = n_threads <= ncpu ? POOL_SPINS_BEFORE_YIELD : 0;
	int pin_failed = 0;
	for (int i = 1; i < n_threads; i++) {
		struct worker *w = &p->workers[i];
		w->pool = p;
		w->ith = i;
		if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
			pool_destroy(p);
			return ing_err_set(err, ING_ERR_NOMEM, "cannot create thread %d", i);
		}
		w->started = 1;
		if (pin && n_threads <= ncpu && pin_to_cpu(w->thread, i) != 0)
			pin_failed = 1;
	}
	if (pin && n_threads <= ncpu && pin_to_cpu(pthread_self(), 0) != 0)
		pin_failed = 1;
	if (pin_failed)
		ing_err_set(err, ING_OK, "could not pin threads to CPUs; running unpinned");
	*out = p;
	return ING_OK;
}

void pool_destroy(struct pool *p)
{
	if (!p)
		return;
	atomic_store_explicit(&p->quit, 1, memory_order_release);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	futex_wake_all(&p->gen);
	for (int i = 1; i < p->n; i++)
		if (p->workers[i].started)
			pthread_join(p->workers[i].thread, NULL);
	ing_free(p->workers);
	ing_free(p);
}

int pool_threads(const struct pool *p) { return p->n; }

long pool_spins(const struct pool *p) { return p->spins; }

void pool_run(struct pool *p, pool_fn fn, void *ctx)
{
	if (p->n == 1) {
		fn(ctx, 0, 1);
		return;
	}
	p->fn = fn;
	p->ctx = ctx;
	atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
	atomic_fetch_add(&p->gen, 1); /* seq_cst: pairs with sleepers */
	if (atomic_load(&p->sleepers) > 0)
		futex_wake_all(&p->gen);
	fn(ctx, 0, p->n);
	for (long i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++)
		pool_wait_poll(i, p->spins);
}

/* Physical cores among the CPUs we may run on: distinct (package, core)
 * pairs from sysfs; falls back to the CPU count. */
int pool_physical_cores(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return pool_cpu_count();
	long seen[1024];
	int n = 0;
	for (int cpu = 0; cpu < CPU_SETSIZE && n < 1024; cpu++) {
		if (!CPU_ISSET(cpu, &set))
			continue;
		char path[128];
		long pkg = 0, core = cpu;
		snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
		FILE *f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%ld", &core) != 1)
				core = cpu;
			fclose(f);
		}
		snprintf(path, sizeof path,
			 "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%ld", &pkg) != 1)
				pkg = 0;
			fclose(f);
		}
		long key = pkg * 100000 + core;
		int dup = 0;
		for (int i = 0; i < n && !dup; i++)
			dup = seen[i] == key;
		if (!dup)
			seen[n++] = key;
	}
	return n > 0 ? n : pool_cpu_count();
}
