/* runner.h — executes forward plans on a thread pool.
 *
 * A runner owns the schedule, never the math: it calls fwd_op_exec() on
 * unit ranges of the ops fwd_plan() produced.
 *   RUNNER_GRAPH  one parallel dispatch per op, a barrier after each (the
 *                 baseline every engine starts from).
 *   RUNNER_MEGA   one dispatch per step: threads run the whole plan, wait
 *                 on per-op counters and prefetch weights while waiting
 *                 (runner_mega.c).
 * Both produce bit-identical logits: each unit is computed by the same code
 * whichever thread runs it. */
#ifndef INGOT_RUNNER_H
#define INGOT_RUNNER_H

#include "err.h"
#include "forward.h"
#include "pool.h"

enum runner_kind { RUNNER_GRAPH, RUNNER_MEGA };

struct runner;

/* The runner borrows f and pool (caller keeps ownership of both). */
int runner_create(enum runner_kind kind, struct fwd *f, struct pool *pool, struct runner **out,
		  ing_err *err);
void runner_destroy(struct runner *r);

/* Plans and runs one step; logits via fwd_logits(). */
int runner_step(struct runner *r, const struct fwd_batch *b, ing_err *err);

/* "graph" / "mega" -> kind; -1 when unknown. */
int runner_kind_parse(const char *name);
const char *runner_kind_name(enum runner_kind kind);

/* Megakernel only: weight prefetch while waiting on/off (bench). */
void runner_mega_set_prefetch(struct runner *r, int on);

/* Where a runner's steps spend their time (`ingot bench --profile`):
 * seconds summed over the steps, and for work over the threads too. A
 * thread's step is its work (its time inside fwd_op_exec, by op kind: its
 * shares of the parallel ops and the epilogues it ran) and the rest, its
 * idle time: the dispatch, the waits on other threads (the graph runner's
 * barriers, the megakernel's counters) and the end of the step. (The
 * megakernel's taking of chunks counts as work.) So wall * threads -
 * sum(work) is the time a schedule could still recover with the same
 * kernels. */
struct runner_profile {
	double op_wall[OP_KIND_COUNT]; /* graph: each op kind's dispatches, wall seconds */
	double work[OP_KIND_COUNT];    /* thread-seconds computing each op kind */
	double wait;                   /* mega: thread-seconds waiting on its counters (idle) */
	double wall;                   /* the steps' wall seconds */
	long steps;
	int threads;
};

/* From now on adds every step's times to *p (the caller owns it and zeroes
 * it first); NULL stops. Timing costs two clock reads (~35 ns each on the
 * Zen 3 host) a thread for each op it takes part in: ~7 us of a 10 ms
 * batch-1 step of the default model. A runner without a profile reads no
 * clock. */
void runner_set_profile(struct runner *r, struct runner_profile *p);

#endif
