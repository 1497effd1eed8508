/* test_steal.c — the work ranges of steal.h.
 *
 *   1. steal_split cuts [0, n) into contiguous ranges on the chunk grid;
 *   2. one thread: front and back takes give grid pieces, disjoint, that
 *      cover the range, and nothing once it is empty;
 *   3. the owner's parts: each 1/div of what is left, rounded up to the
 *      grid and at least a chunk, the last ones a chunk each;
 *   4. a slow owner: a thread that finished its own range takes every
 *      chunk of another's before the owner starts, and the owner then
 *      finds nothing (deterministic: the owner waits for the thief);
 *   5. threads racing: owners from the front (by chunks or by parts),
 *      everyone from the backs, every unit taken exactly once (also run under ThreadSanitizer).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "steal.h"

static bool on_grid(const struct steal_range *r, uint32_t u)
{
	return u == r->hi || (u - r->lo) % r->chunk == 0;
}

static void test_split(void)
{
	const uint32_t ns[] = { 0, 1, 5, 16, 17, 100, 640, 1536, 262144 };
	const uint32_t chunks[] = { 1, 3, 16, 64, 8192 };
	for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
		for (size_t b = 0; b < sizeof chunks / sizeof chunks[0]; b++)
			for (int nth = 1; nth <= 5; nth++) {
				uint32_t prev = 0;
				int ok = 1;
				for (int i = 0; i < nth; i++) {
					uint32_t lo, hi;
					steal_split(ns[a], chunks[b], i, nth, &lo, &hi);
					ok &= lo == prev && hi >= lo && hi <= ns[a];
					ok &= lo % chunks[b] == 0 && (hi % chunks[b] == 0 || hi == ns[a]);
					prev = hi;
				}
				ok &= prev == ns[a];
				CHECK(ok, "steal_split n %u chunk %u nth %d: not a cover on the grid",
				      ns[a], chunks[b], nth);
			}
}

static void test_one_thread(void)
{
	struct steal_range r;
	const uint32_t lo = 48, hi = 1000, chunk = 16;
	steal_range_init(&r, lo, hi, chunk);
	unsigned char *seen = calloc(hi, 1);
	uint32_t u0, u1, wants[] = { 1, 40, 16, 0, 100 };
	int i = 0, ok = 1;
	/* front and back in turn, fronts of several sizes */
	for (bool more = true; more; i++) {
		const bool front = i % 2 == 0;
		more = front ? steal_take_front(&r, wants[i / 2 % 5], &u0, &u1)
			     : steal_take_back(&r, &u0, &u1);
		if (!more && front) /* the back may still answer once */
			more = steal_take_back(&r, &u0, &u1);
		if (!more)
			break;
		ok &= u0 < u1 && u0 >= lo && u1 <= hi && on_grid(&r, u0) && on_grid(&r, u1);
		ok &= front || u1 - u0 <= chunk;
		for (uint32_t u = u0; u < u1; u++)
			ok &= seen[u]++ == 0;
	}
	for (uint32_t u = 0; u < hi; u++)
		ok &= seen[u] == (u >= lo);
	CHECK(ok, "one thread: pieces off the grid, overlapping or not covering [%u, %u)", lo, hi);
	CHECK(!steal_take_front(&r, 16, &u0, &u1) && !steal_take_back(&r, &u0, &u1),
	      "an empty range still gave units");
	steal_range_init(&r, 7, 7, 4);
	CHECK(!steal_take_front(&r, 4, &u0, &u1) && !steal_take_back(&r, &u0, &u1),
	      "a range set empty gave units");
	free(seen);
}

static void test_front_part(void)
{
	const uint32_t lo = 48, chunk = 16, divs[] = { 2, 3, 0 };
	const uint32_t his[] = { 48 + 16 * 37, 48 + 16 * 37 - 5, 49, 1000 };
	for (size_t a = 0; a < sizeof divs / sizeof divs[0]; a++)
		for (size_t b = 0; b < sizeof his / sizeof his[0]; b++) {
			struct steal_range r;
			steal_range_init(&r, lo, his[b], chunk);
			const uint32_t div = divs[a] ? divs[a] : 1;
			uint32_t u0, u1, next = lo, pieces = 0;
			int ok = 1;
			while (steal_take_front_part(&r, divs[a], &u0, &u1)) {
				const uint32_t left = his[b] - next;
				uint32_t want = (left + div - 1) / div;
				want = (want + chunk - 1) / chunk * chunk;
				want = want > left ? left : want;
				ok &= u0 == next && u1 - u0 == want;
				next = u1;
				pieces++;
			}
			CHECK(ok && next == his[b],
			      "front parts of [%u, %u) by 1/%u: a piece not 1/div of what was "
			      "left on the grid, or not covering",
			      lo, his[b], divs[a]);
			/* halves of 37 chunks: 19, 9, 5, 2, 1, 1 chunks */
			if (divs[a] == 2 && b == 0)
				CHECK(pieces == 6, "halves of 37 chunks in %u pieces, want 6",
				      pieces);
			if (divs[a] == 0)
				CHECK(pieces == 1, "div 0 took %u pieces, want 1 (the whole range)",
				      pieces);
		}
}

/* ---- threads ---- */

enum { NTH = 4, N_MAX = 5000 };

struct race {
	struct steal_range ranges[NTH];
	atomic_int taken[N_MAX];
	atomic_int thief_done;
	int nth;
	bool owner_waits; /* thread 0 starts only after thread 1 is done */
	bool parts;       /* owners take halves of what is left, not chunks */
	long stolen[NTH];
};

struct worker {
	struct race *r;
	int ith;
};

static void *work(void *p)
{
	const struct worker *w = p;
	struct race *r = w->r;
	uint32_t u0, u1;
	if (r->owner_waits && w->ith == 0)
		while (!atomic_load(&r->thief_done))
			;
	struct steal_range *own = &r->ranges[w->ith];
	while (r->parts ? steal_take_front_part(own, 2, &u0, &u1)
			: steal_take_front(own, own->chunk, &u0, &u1))
		for (uint32_t u = u0; u < u1; u++)
			atomic_fetch_add_explicit(&r->taken[u], 1, memory_order_relaxed);
	for (int k = 1; k < r->nth; k++)
		while (steal_take_back(&r->ranges[(w->ith + k) % r->nth], &u0, &u1)) {
			r->stolen[w->ith]++;
			for (uint32_t u = u0; u < u1; u++)
				atomic_fetch_add_explicit(&r->taken[u], 1, memory_order_relaxed);
		}
	if (w->ith == 1)
		atomic_store(&r->thief_done, 1);
	return NULL;
}

/* Runs nth threads over n units in chunks; returns whether every unit was
 * taken exactly once. */
static bool race_run(struct race *r, uint32_t n, uint32_t chunk, int nth, bool owner_waits,
		     bool parts)
{
	memset(r, 0, sizeof *r);
	r->nth = nth;
	r->owner_waits = owner_waits;
	r->parts = parts;
	for (int i = 0; i < nth; i++) {
		uint32_t lo, hi;
		steal_split(n, chunk, i, nth, &lo, &hi);
		steal_range_init(&r->ranges[i], lo, hi, chunk);
	}
	pthread_t th[NTH];
	struct worker w[NTH];
	int started = 0;
	for (int i = 0; i < nth; i++) {
		w[i] = (struct worker){ r, i };
		if (pthread_create(&th[i], NULL, work, &w[i]) != 0)
			break;
		started++;
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (started < nth)
		return false;
	bool once = true;
	for (uint32_t u = 0; u < n; u++)
		once &= atomic_load(&r->taken[u]) == 1;
	return once;
}

static void test_slow_owner(struct race *r)
{
	CHECK(race_run(r, 1000, 16, 2, true, false), "slow owner: a unit taken twice or never");
	/* thread 1 took every chunk of thread 0's range */
	const long want = (long)((r->ranges[0].hi - r->ranges[0].lo + 15) / 16);
	CHECK(want > 1 && r->stolen[1] == want && r->stolen[0] == 0,
	      "slow owner: thread 1 stole %ld chunks (want %ld), thread 0 %ld (want 0)", r->stolen[1],
	      want, r->stolen[0]);
}

static void test_race(struct race *r)
{
	const uint32_t ns[] = { 1, 37, 640, 4096, N_MAX };
	const uint32_t chunks[] = { 1, 16, 100 };
	int bad = 0;
	for (int round = 0; round < 20; round++)
		for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
			for (size_t b = 0; b < sizeof chunks / sizeof chunks[0]; b++)
				bad += !race_run(r, ns[a], chunks[b], 2 + round % 3, false,
						 round % 2);
	CHECK(bad == 0, "racing threads: %d runs took a unit twice or never", bad);
}

static struct race race; /* static: its ranges are cache-line aligned */

int main(void)
{
	test_split();
	test_one_thread();
	test_front_part();
	test_slow_owner(&race);
	test_race(&race);
	return check_summary("test_steal");
}
