/* runner_graph.c — the baseline runner: one pool dispatch per op.
 *
 * Units of each op are split contiguously and evenly across the threads;
 * pool_run returns only when every thread is done, which is the barrier
 * between ops. With a profile set, each dispatch is timed, and each
 * thread's work in it (runner_set_profile). */
#include "clock.h"
#include "runner_int.h"

static void graph_thread(void *ctx, int ith, int nth)
{
	struct runner *r = ctx;
	long u0, u1;
	pool_split((long)r->op->n_units, ith, nth, &u0, &u1);
	if (u0 < u1)
		runner_op_exec(r, r->op, u0, u1, u1, ith);
}

int runner_graph_step(struct runner *r, ing_err *err)
{
	(void)err;
	int n;
	const struct fwd_op *ops = fwd_ops(r->f, &n);
	double wall = 0;
	for (int i = 0; i < n; i++) {
		r->op = &ops[i];
		const double t0 = r->profile ? clock_now_s() : 0;
		pool_run(r->pool, graph_thread, r);
		if (r->profile) {
			const double t = clock_now_s() - t0;
			r->profile->op_wall[ops[i].kind] += t;
			wall += t;
		}
	}
	if (r->profile)
		runner_profile_fold(r, wall);
	return ING_OK;
}
