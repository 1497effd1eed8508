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
	double *profile;         /* graph: seconds per op kind, or NULL */
};

int runner_graph_step(struct runner *r, ing_err *err);

int runner_mega_init(struct runner *r, ing_err *err);
void runner_mega_free(struct runner *r);
int runner_mega_step(struct runner *r, ing_err *err);

#endif
