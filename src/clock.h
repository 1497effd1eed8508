/* clock.h — the monotonic clock in seconds, for timing decode steps,
 * requests and benchmarks: one definition for the engine, its commands,
 * tests and tools, rather than a copy in each file. */
#ifndef INGOT_CLOCK_H
#define INGOT_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC from an unspecified origin: only differences
 * mean anything. Never fails on Linux (the clock always exists). */
static inline double clock_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
