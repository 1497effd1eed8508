/* steal.h — a range of work units that its owner takes from the front
 * while threads out of work take chunks from its back.
 *
 * The megakernel gives each thread a contiguous range of an op's units
 * (matrix rows, attention tiles), so that the weights a thread will read
 * are known ahead and prefetched while it waits. A static split finishes
 * when its slowest thread does, and on a shared machine one core is often
 * slower than the other by 5-50% for seconds at a time. With these ranges
 * the owner still walks its range front to back (the stream its prefetches
 * expect), and a thread done early takes chunks off the far end of a
 * slower thread's range instead of waiting.
 *
 * Units are taken on a grid: every piece starts at lo + k * chunk (or at
 * the front), so pieces of matrix rows stay whole tiles when lo and chunk
 * are multiples of the tile. The state is one 64-bit word (front, back),
 * changed by compare-and-swap: a unit is taken by exactly one thread.
 * steal_range_init is not concurrent with the takes (the runner sets the
 * ranges before it dispatches a step). */
#ifndef INGOT_STEAL_H
#define INGOT_STEAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct steal_range {
	_Alignas(64) atomic_uint_fast64_t fb; /* front << 32 | back: [front, back) untaken */
	uint32_t lo, hi, chunk;               /* as set; the grid */
	char pad[64 - 3 * sizeof(uint32_t)];
};

/* Units [lo, hi) untaken, on the grid lo + k * chunk (chunk >= 1). */
void steal_range_init(struct steal_range *r, uint32_t lo, uint32_t hi, uint32_t chunk);

/* The owner: takes [*u0, *u1), up to `want` units (rounded up to the grid)
 * from the front. False when nothing is left. */
bool steal_take_front(struct steal_range *r, uint32_t want, uint32_t *u0, uint32_t *u1);

/* The owner: takes 1/div of what is left (div >= 1; 0 is taken as 1)
 * from the front, rounded up to the grid, at least one grid chunk: pieces
 * that shrink as the range does, few calls while much is left and a
 * grid chunk's imbalance at the end. False when nothing is left. */
bool steal_take_front_part(struct steal_range *r, uint32_t div, uint32_t *u0, uint32_t *u1);

/* Any other thread: takes the last grid chunk left, [*u0, *u1). False when
 * nothing is left. */
bool steal_take_back(struct steal_range *r, uint32_t *u0, uint32_t *u1);

/* Thread ith's range of n units split among nth threads on a grid of chunk
 * units from 0: whole chunks, as even as they go ([*lo, *hi) may be empty
 * when there are fewer chunks than threads). */
void steal_split(uint32_t n, uint32_t chunk, int ith, int nth, uint32_t *lo, uint32_t *hi);

#endif
