/* runner_int.h — what the runner implementations share (private). */
#ifndef INGOT_RUNNER_INT_H
#define INGOT_RUNNER_INT_H

#include "runner.h"

struct mega;

struct runner {
	enum runner_kind kind;
	struct fwd *f;
	struct pool *pool;
	const struct fwd_op *op; /* graph: op being dispatched */
	struct mega *mega;       /* megakernel state */
	struct runner_profile *profile; /* or NULL: runner_set_profile */
	struct runner_thread_work *work; /* [threads]: this step's work, while profiling */
};

/* One thread's work seconds by op kind within a step, on cache lines of
 * its own; folded into the profile after the step (runner_profile_fold). */
struct runner_thread_work {
	_Alignas(64) double s[OP_KIND_COUNT + 1]; /* [OP_KIND_COUNT]: mega's counter waits */
};

/* fwd_op_exec on thread ith, its time added to the thread's work on the
 * op's kind while profiling. */
void runner_op_exec(struct runner *r, const struct fwd_op *op, int64_t u0, int64_t u1,
		    int64_t u_pf, int ith);
/* Adds thread ith's seconds since t0 to its work on op kind k (k ==
 * OP_KIND_COUNT: to its waits); returns now. Call only while profiling. */
double runner_time_add(struct runner *r, int ith, enum op_kind k, double t0);
/* After a step of `wall` seconds: adds the threads' work to the profile. */
void runner_profile_fold(struct runner *r, double wall);

int runner_graph_step(struct runner *r, ing_err *err);

int runner_mega_init(struct runner *r, ing_err *err);
void runner_mega_free(struct runner *r);
int runner_mega_step(struct runner *r, ing_err *err);

#endif
