/* runner_graph.c — the baseline runner: one pool dispatch per op.
 *
 * Units of each op are split contiguously and evenly across the threads;
 * pool_run returns only when every thread is done, which is the barrier
 * between ops. */
#include <string.h>

#include "mem.h"
#include "runner.h"

struct runner {
	enum runner_kind kind;
	struct fwd *f;
	struct pool *pool;
	const struct fwd_op *op; /* op being dispatched */
};

int runner_kind_parse(const char *name)
{
	if (!strcmp(name, "graph"))
		return RUNNER_GRAPH;
	return -1;
}

int runner_create(enum runner_kind kind, struct fwd *f, struct pool *pool, struct runner **out,
		  ing_err *err)
{
	*out = NULL;
	struct runner *r = ing_calloc(1, sizeof *r);
	if (!r)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	r->kind = kind;
	r->f = f;
	r->pool = pool;
	*out = r;
	return ING_OK;
}

void runner_destroy(struct runner *r) { ing_free(r); }

static void graph_thread(void *ctx, int ith, int nth)
{
	struct runner *r = ctx;
	long u0, u1;
	pool_split((long)r->op->n_units, ith, nth, &u0, &u1);
	if (u0 < u1)
		fwd_op_exec(r->f, r->op, u0, u1, ith);
}

int runner_step(struct runner *r, const struct fwd_batch *b, ing_err *err)
{
	int rc = fwd_plan(r->f, b, err);
	if (rc)
		return rc;
	int n;
	const struct fwd_op *ops = fwd_ops(r->f, &n);
	for (int i = 0; i < n; i++) {
		r->op = &ops[i];
		pool_run(r->pool, graph_thread, r);
	}
	return ING_OK;
}
