/* steal.c — work ranges taken from the front by their owner and from the
 * back by others (see steal.h). */
#include "steal.h"

static uint64_t pack(uint32_t front, uint32_t back)
{
	return (uint64_t)front << 32 | back;
}

void steal_range_init(struct steal_range *r, uint32_t lo, uint32_t hi, uint32_t chunk)
{
	r->lo = lo;
	r->hi = hi > lo ? hi : lo;
	r->chunk = chunk ? chunk : 1;
	atomic_store_explicit(&r->fb, pack(lo, r->hi), memory_order_relaxed);
}

/* Takes from the front: `want` units (div 0) or 1/div of what is left,
 * rounded up to the grid, at least one grid chunk. */
static bool take_front(struct steal_range *r, uint32_t want, uint32_t div, uint32_t *u0,
		       uint32_t *u1)
{
	uint64_t fb = atomic_load_explicit(&r->fb, memory_order_relaxed);
	for (;;) {
		const uint32_t front = (uint32_t)(fb >> 32), back = (uint32_t)fb;
		if (front >= back)
			return false;
		uint32_t n = div ? (back - front + div - 1) / div : want;
		/* front is on the grid: end on it too, or at back */
		n = n < r->chunk ? r->chunk
				 : (uint32_t)(((uint64_t)n + r->chunk - 1) / r->chunk * r->chunk);
		const uint32_t end = back - front > n ? front + n : back;
		if (atomic_compare_exchange_weak_explicit(&r->fb, &fb, pack(end, back), memory_order_relaxed,
							  memory_order_relaxed)) {
			*u0 = front;
			*u1 = end;
			return true;
		}
	}
}

bool steal_take_front(struct steal_range *r, uint32_t want, uint32_t *u0, uint32_t *u1)
{
	return take_front(r, want, 0, u0, u1);
}

bool steal_take_front_part(struct steal_range *r, uint32_t div, uint32_t *u0, uint32_t *u1)
{
	return take_front(r, 0, div ? div : 1, u0, u1);
}

bool steal_take_back(struct steal_range *r, uint32_t *u0, uint32_t *u1)
{
	uint64_t fb = atomic_load_explicit(&r->fb, memory_order_relaxed);
	for (;;) {
		const uint32_t front = (uint32_t)(fb >> 32), back = (uint32_t)fb;
		if (front >= back)
			return false;
		/* the last grid point below back; front is a grid point below
		 * back too, so start >= front */
		const uint32_t start = r->lo + (back - 1 - r->lo) / r->chunk * r->chunk;
		if (atomic_compare_exchange_weak_explicit(&r->fb, &fb, pack(front, start),
							  memory_order_relaxed, memory_order_relaxed)) {
			*u0 = start;
			*u1 = back;
			return true;
		}
	}
}

void steal_split(uint32_t n, uint32_t chunk, int ith, int nth, uint32_t *lo, uint32_t *hi)
{
	if (chunk == 0)
		chunk = 1;
	const uint64_t chunks = ((uint64_t)n + chunk - 1) / chunk;
	const uint64_t c0 = chunks * (uint64_t)ith / (uint64_t)nth;
	const uint64_t c1 = chunks * (uint64_t)(ith + 1) / (uint64_t)nth;
	*lo = (uint32_t)(c0 * chunk < n ? c0 * chunk : n);
	*hi = (uint32_t)(c1 * chunk < n ? c1 * chunk : n);
}
