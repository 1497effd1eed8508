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

/* Graph runner only (its ops are separate dispatches, so each one's wall
 * time is its own): from now on, adds the seconds every op of a step takes
 * to seconds[op kind]; NULL stops. The caller owns the OP_KIND_COUNT
 * doubles. For `ingot bench --profile`. */
void runner_graph_set_profile(struct runner *r, double *seconds);

#endif
