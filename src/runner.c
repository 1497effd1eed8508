/* runner.c — runner handles: creation, kind names, the step entry point,
 * and the profile both runners fill (runner_set_profile). */
#include <string.h>

#include "clock.h"
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
	r->work = ing_calloc((size_t)pool_threads(pool), sizeof *r->work);
	if (!r->work) {
		ing_free(r);
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	}
	if (kind == RUNNER_MEGA) {
		int rc = runner_mega_init(r, err);
		if (rc) {
			ing_free(r->work);
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
	ing_free(r->work);
	ing_free(r);
}

void runner_set_profile(struct runner *r, struct runner_profile *p)
{
	r->profile = p;
	if (p)
		p->threads = pool_threads(r->pool);
}

double runner_time_add(struct runner *r, int ith, enum op_kind k, double t0)
{
	const double now = clock_now_s();
	r->work[ith].s[k] += now - t0;
	return now;
}

void runner_op_exec(struct runner *r, const struct fwd_op *op, int64_t u0, int64_t u1,
		    int64_t u_pf, int ith)
{
	const double t0 = r->profile ? clock_now_s() : 0;
	fwd_op_exec(r->f, op, u0, u1, u_pf, ith);
	if (r->profile)
		runner_time_add(r, ith, op->kind, t0);
}

void runner_profile_fold(struct runner *r, double wall)
{
	struct runner_profile *p = r->profile;
	const int nth = pool_threads(r->pool);
	for (int i = 0; i < nth; i++) {
		for (int k = 0; k < OP_KIND_COUNT; k++)
			p->work[k] += r->work[i].s[k];
		p->wait += r->work[i].s[OP_KIND_COUNT];
		memset(r->work[i].s, 0, sizeof r->work[i].s);
	}
	p->wall += wall;
	p->steps++;
}

int runner_step(struct runner *r, const struct fwd_batch *b, ing_err *err)
{
	int rc = fwd_plan(r->f, b, err);
	if (rc)
		return rc;
	return r->kind == RUNNER_MEGA ? runner_mega_step(r, err) : runner_graph_step(r, err);
}
