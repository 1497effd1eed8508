/* runner.c — runner handles: creation, kind names, the step entry point. */
#include <string.h>

#include "mem.h"
#include "runner_int.h"

int runner_kind_parse(const char *name)
{
	if (!strcmp(name, "graph"))
		return RUNNER_GRAPH;
	if (!strcmp(name, "mega"))
		return RUNNER_MEGA;
	return -1;
}

const char *runner_kind_name(enum runner_kind kind)
{
	return kind == RUNNER_MEGA ? "mega" : "graph";
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
	if (kind == RUNNER_MEGA) {
		int rc = runner_mega_init(r, err);
		if (rc) {
			ing_free(r);
			return rc;
		}
	}
	*out = r;
	return ING_OK;
}

void runner_destroy(struct runner *r)
{
	if (!r)
		return;
	runner_mega_free(r);
	ing_free(r);
}

int runner_step(struct runner *r, const struct fwd_batch *b, ing_err *err)
{
	int rc = fwd_plan(r->f, b, err);
	if (rc)
		return rc;
	return r->kind == RUNNER_MEGA ? runner_mega_step(r, err) : runner_graph_step(r, err);
}
