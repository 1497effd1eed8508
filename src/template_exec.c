/* template_exec.c — running statements: output, if, for (with loop
 * objects, else, filters, recursion), set (names, tuples, namespace
 * attributes, blocks), macros and {% call %}, filter blocks, with; plus
 * scopes, the render entry points and the budgets.
 *
 * Scoping follows jinja2: a for body starts afresh on every iteration and
 * what it sets is gone after the loop (hence namespace()); if does not
 * open a scope; a macro runs in a scope under the one it was defined in,
 * so it sees later top-level assignments. Macro and caller bodies render
 * into their own buffer and return it as a string. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mem.h"
#include "template_int.h"

#define DEFAULT_MAX_OUTPUT ((size_t)32 << 20)
#define DEFAULT_MAX_BYTES ((uint64_t)512 << 20)
#define DEFAULT_MAX_STEPS 1000000L
#define DEFAULT_MAX_DEPTH 1000

/* ---------------------------------------------------- errors, budgets */

static int fail_v(struct tpl_run *R, int code, const char *fmt, va_list ap)
{
	if (R->failed)
		return -1;
	R->failed = 1;
	char msg[400];
	vsnprintf(msg, sizeof msg, fmt, ap);
	if (R->at)
		ing_err_set(R->err, code, "line %d, column %d: %s", R->at->line, R->at->col, msg);
	else
		ing_err_set(R->err, code, "%s", msg);
	return -1;
}

int tpl_fail(struct tpl_run *R, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fail_v(R, code, fmt, ap);
	va_end(ap);
	return -1;
}

int tpl_fail_raw(struct tpl_run *R, int code, const char *msg, size_t n)
{
	if (R->failed)
		return -1;
	R->failed = 1;
	ing_err_set(R->err, code, "%.*s", (int)(n < ING_ERR_MSG_MAX ? n : ING_ERR_MSG_MAX), msg);
	return -1;
}

int tpl_fail_nomem(struct tpl_run *R)
{
	return tpl_fail(R, ING_ERR_NOMEM, "out of memory");
}

int tpl_enter(struct tpl_run *R)
{
	char here;
	size_t used = R->stack_base > &here ? (size_t)(R->stack_base - &here)
					   : (size_t)(&here - R->stack_base);
	if (R->depth >= R->max_depth)
		return tpl_fail(R, ING_ERR_RANGE, "evaluation nested more than %d deep", R->max_depth);
	if (used > R->stack_budget)
		return tpl_fail(R, ING_ERR_RANGE, "evaluation nested too deeply for this thread's stack "
				"(%zu bytes used)", used);
	R->depth++;
	return 0;
}

/* Bytes of stack below the caller that a render may use: three quarters
 * of what is left of this thread's stack, less a margin for the C library
 * and sanitizers. Threads with tiny stacks get a tiny budget, not a crash. */
static size_t stack_budget(const char *base)
{
	pthread_attr_t a;
	void *lo = NULL;
	size_t size = 0, room = (size_t)1 << 20;
	if (!pthread_getattr_np(pthread_self(), &a)) {
		if (!pthread_attr_getstack(&a, &lo, &size) && lo && base > (const char *)lo &&
		    base < (const char *)lo + size)
			room = (size_t)(base - (const char *)lo);
		pthread_attr_destroy(&a);
	}
	size_t margin = 64 << 10;
	return room > margin ? (room - margin) / 4 * 3 : 0;
}

int tpl_step(struct tpl_run *R)
{
	if (++R->steps > R->max_steps)
		return tpl_fail(R, ING_ERR_RANGE, "more than %ld loop iterations and macro calls",
				R->max_steps);
	return 0;
}

int tpl_charge(struct tpl_run *R, size_t n)
{
	R->bytes += n;
	if (R->bytes > R->max_bytes)
		return tpl_fail(R, ING_ERR_RANGE, "the template built more than %llu bytes of values",
				(unsigned long long)R->max_bytes);
	return 0;
}

void *tpl_obj_new(struct tpl_run *R, size_t size, int type)
{
	if (tpl_charge(R, size))
		return NULL;
	struct tobj *o = ing_calloc(1, size);
	if (!o) {
		tpl_fail_nomem(R);
		return NULL;
	}
	o->refs = 1;
	o->type = (uint8_t)type;
	o->depth = 1;
	return o;
}

/* ------------------------------------------------------------- scopes */

int tpl_scope_push(struct tpl_run *R, struct tscope *parent, struct tscope **saved)
{
	struct tscope *s = tpl_obj_new(R, sizeof *s, TO_SCOPE);
	if (!s)
		return -1;
	if (parent)
		parent->h.refs++;
	s->parent = parent;
	*saved = R->scope;
	R->scope = s;
	return 0;
}

void tpl_scope_pop(struct tpl_run *R, struct tscope *saved)
{
	struct tscope *s = R->scope;
	if (s->vars)
		tpl_dict_clear(s->vars);
	R->scope = saved;
	tobj_release(&s->h);
}

int tpl_scope_set(struct tpl_run *R, struct tscope *s, struct tstr *name, struct tv v)
{
	if (!s->vars && tpl_dict_new(R, &s->vars))
		return -1;
	tv_retain(v);
	tv_retain(tv_str_v(name));
	return tpl_dict_set(R, s->vars, tv_str_v(name), v);
}

/* --------------------------------------------------------- assignment */

static int assign(struct tpl_run *R, const struct tnode *t, struct tv v)
{
	if (t->kind == N_NAME)
		return tpl_scope_set(R, R->scope, t->name, v);
	if (t->kind == N_ATTR) {
		struct tv ns;
		if (tpl_lookup(R, t->a->name, &ns))
			return -1;
		int rc;
		if (ns.kind != TV_NS) {
			rc = tpl_fail(R, ING_ERR_FORMAT, "cannot assign attribute on non-namespace object");
		} else {
			tv_retain(v);
			rc = tpl_dict_set(R, ns.d, tv_str_v(t->name), v);
		}
		tv_release(ns);
		return rc;
	}
	struct tlist *l; /* tuple target */
	if (tpl_iterate(R, v, &l))
		return -1;
	int rc = 0;
	if (l->n != (size_t)t->nkids)
		rc = l->n > (size_t)t->nkids
			? tpl_fail(R, ING_ERR_FORMAT, "too many values to unpack (expected %d)", t->nkids)
			: tpl_fail(R, ING_ERR_FORMAT, "not enough values to unpack (expected %d, got %zu)",
				   t->nkids, l->n);
	for (int i = 0; !rc && i < t->nkids; i++)
		rc = assign(R, t->kids[i], l->v[i]);
	tobj_release(&l->h);
	return rc;
}

/* Runs kids in a scope of their own (what they set stays inside). */
static int exec_scoped(struct tpl_run *R, struct tnode **kids, int n)
{
	struct tscope *saved;
	if (tpl_scope_push(R, R->scope, &saved))
		return -1;
	int rc = tpl_exec_body(R, kids, n);
	tpl_scope_pop(R, saved);
	return rc;
}

/* Runs kids with output going to a fresh buffer, returned as a string.
 * scoped: in a scope of their own ({% set %} and {% filter %} blocks). */
static int capture(struct tpl_run *R, struct tnode **kids, int n, int scoped, struct tv *out)
{
	struct tbuf saved = R->out;
	R->out = (struct tbuf){ 0 };
	int rc = scoped ? exec_scoped(R, kids, n) : tpl_exec_body(R, kids, n);
	struct tbuf got = R->out;
	R->out = saved;
	if (!rc)
		rc = tpl_buf_take(R, &got, out);
	tpl_buf_free(&got);
	return rc;
}

static int output(struct tpl_run *R, struct tv v)
{
	return tpl_value_str(R, &R->out, v);
}

/* -------------------------------------------------------------- loops */

/* The items of xs for which the loop's condition holds. */
static int loop_filter(struct tpl_run *R, const struct tnode *n, struct tlist *xs,
		       struct tlist **out)
{
	struct tlist *l;
	struct tscope *saved;
	if (tpl_list_new(R, 0, &l))
		return -1;
	if (tpl_scope_push(R, R->scope, &saved)) {
		tobj_release(&l->h);
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < xs->n && !rc; i++) {
		struct tv c;
		if ((rc = tpl_step(R)) || (rc = assign(R, n->b, xs->v[i])) || (rc = tpl_eval(R, n->c, &c)))
			break;
		if (tv_truthy(c)) {
			tv_retain(xs->v[i]);
			rc = tpl_list_push(R, l, xs->v[i]);
		}
		tv_release(c);
	}
	tpl_scope_pop(R, saved);
	if (rc) {
		tobj_release(&l->h);
		return -1;
	}
	*out = l;
	return 0;
}

/* One run of the for statement n over items, in a scope under outer. */
static int loop_run(struct tpl_run *R, const struct tnode *n, struct tlist *items, int64_t depth0,
		    struct tscope *outer)
{
	if (!items->n)
		return tpl_exec_body(R, n->else_kids, n->nelse);
	struct tloop *lp = tpl_obj_new(R, sizeof *lp, TO_LOOP);
	if (!lp)
		return -1;
	items->h.refs++;
	lp->items = items;
	lp->h.depth = (uint16_t)(items->h.depth + 1);
	lp->depth0 = depth0;
	lp->node = n;
	lp->outer = outer;
	outer->h.refs++;
	lp->changed = tv_undef(NULL);
	struct tv lv = { .kind = TV_LOOP };
	lv.lp = lp;
	struct tscope *saved;
	if (tpl_scope_push(R, outer, &saved)) {
		tobj_release(&lp->h);
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < items->n; i++) {
		if ((rc = tpl_step(R)))
			break;
		if (R->scope->vars)
			tpl_dict_clear(R->scope->vars);
		lp->i = (int64_t)i;
		if ((rc = assign(R, n->b, items->v[i])) ||
		    (rc = tpl_scope_set(R, R->scope, R->t->n_loop, lv)))
			break;
		rc = tpl_exec_body(R, n->kids, n->nkids);
		if (rc == TPL_CONTINUE)
			rc = 0;
		if (rc == TPL_BREAK) {
			rc = 0;
			break;
		}
		if (rc)
			break;
	}
	tpl_scope_pop(R, saved);
	tobj_release(&lp->h);
	return rc;
}

static int loop_items(struct tpl_run *R, const struct tnode *n, struct tv it, struct tlist **out)
{
	struct tlist *all;
	if (tpl_iterate(R, it, &all))
		return -1;
	if (!n->c) {
		*out = all;
		return 0;
	}
	int rc = loop_filter(R, n, all, out);
	tobj_release(&all->h);
	return rc;
}

static int exec_for(struct tpl_run *R, const struct tnode *n)
{
	struct tv it;
	struct tlist *items;
	if (tpl_eval(R, n->a, &it))
		return -1;
	R->at = n;
	int rc = loop_items(R, n, it, &items);
	tv_release(it);
	if (rc)
		return -1;
	rc = loop_run(R, n, items, 0, R->scope);
	tobj_release(&items->h);
	return rc;
}

int tpl_loop_call(struct tpl_run *R, struct tloop *lp, struct tpl_args *a, struct tv *out)
{
	if (!(lp->node->flags & TN_RECURSIVE))
		return tpl_fail(R, ING_ERR_FORMAT, "Tried to call non recursive loop. Maybe you forgot "
				"the 'recursive' modifier.");
	if (a->npos != 1 || a->nkw)
		return tpl_fail(R, ING_ERR_FORMAT, "loop() takes exactly one argument");
	struct tlist *items;
	if (loop_items(R, lp->node, a->pos[0], &items))
		return -1;
	struct tbuf saved = R->out;
	R->out = (struct tbuf){ 0 };
	int rc = loop_run(R, lp->node, items, lp->depth0 + 1, lp->outer);
	struct tbuf got = R->out;
	R->out = saved;
	if (!rc)
		rc = tpl_buf_take(R, &got, out);
	tpl_buf_free(&got);
	tobj_release(&items->h);
	return rc < 0 ? -1 : 0;
}

/* ------------------------------------------------------------- macros */

static int macro_new(struct tpl_run *R, const struct tnode *def, struct tv *out)
{
	struct tmacro *m = tpl_obj_new(R, sizeof *m, TO_MACRO);
	if (!m)
		return -1;
	m->def = def;
	m->scope = R->scope;
	R->scope->h.refs++;
	*out = (struct tv){ .kind = TV_MACRO };
	out->m = m;
	return 0;
}

static int find_param(const struct tparams *p, const struct tstr *name)
{
	for (int i = 0; i < p->n; i++)
		if (p->names[i]->len == name->len && !memcmp(p->names[i]->s, name->s, name->len))
			return i;
	return -1;
}

static int bind_keywords(struct tpl_run *R, const struct tnode *d, const char *who,
			 struct tpl_args *a, struct tdict *kwargs)
{
	const struct tparams *p = d->params;
	for (int k = 0; k < a->nkw; k++) {
		struct tstr *kn = a->kwn[k];
		int i = find_param(p, kn);
		if (i >= 0 && i < a->npos)
			return tpl_fail(R, ING_ERR_FORMAT, "macro '%s' got multiple values for argument '%s'",
					who, kn->s);
		if (i >= 0 || (d->kind == S_MACRO && tstr_eq_c(kn, "caller"))) {
			if (tpl_scope_set(R, R->scope, kn, a->kwv[k]))
				return -1;
		} else if (d->flags & TN_USES_KWARGS) {
			tv_retain(tv_str_v(kn));
			tv_retain(a->kwv[k]);
			if (tpl_dict_set(R, kwargs, tv_str_v(kn), a->kwv[k]))
				return -1;
		} else {
			return tpl_fail(R, ING_ERR_FORMAT, "macro '%s' takes no keyword argument '%s'", who,
					kn->s);
		}
	}
	return 0;
}

/* Binds a to the macro's parameters in the (new) innermost scope. */
static int bind_params(struct tpl_run *R, const struct tnode *d, const char *who,
		       struct tpl_args *a, struct tlist *varargs, struct tdict *kwargs)
{
	const struct tparams *p = d->params;
	for (int i = 0; i < a->npos; i++) {
		if (i < p->n) {
			if (tpl_scope_set(R, R->scope, p->names[i], a->pos[i]))
				return -1;
		} else if (d->flags & TN_USES_VARARGS) {
			tv_retain(a->pos[i]);
			if (tpl_list_push(R, varargs, a->pos[i]))
				return -1;
		} else {
			return tpl_fail(R, ING_ERR_FORMAT, "macro '%s' takes not more than %d argument(s)",
					who, p->n);
		}
	}
	if (bind_keywords(R, d, who, a, kwargs))
		return -1;
	for (int i = 0; i < p->n; i++) {
		if (tpl_dict_get_str(R->scope->vars, p->names[i]))
			continue;
		struct tv v = tv_undef(NULL);
		if (p->defs[i] && tpl_eval(R, p->defs[i], &v))
			return -1;
		int rc = tpl_scope_set(R, R->scope, p->names[i], v);
		tv_release(v);
		if (rc)
			return -1;
	}
	struct tv vv = tv_list_v(varargs), kv = tv_dict_v(kwargs);
	if ((d->flags & TN_USES_VARARGS) && tpl_scope_set(R, R->scope, R->t->n_varargs, vv))
		return -1;
	if ((d->flags & TN_USES_KWARGS) && tpl_scope_set(R, R->scope, R->t->n_kwargs, kv))
		return -1;
	if (d->kind == S_MACRO && (d->flags & TN_USES_CALLER) &&
	    !tpl_dict_get_str(R->scope->vars, R->t->n_caller) &&
	    tpl_scope_set(R, R->scope, R->t->n_caller, tv_undef(NULL)))
		return -1;
	return 0;
}

int tpl_macro_call(struct tpl_run *R, struct tmacro *m, struct tpl_args *a, struct tv *out)
{
	const struct tnode *d = m->def;
	const char *who = d->kind == S_MACRO ? d->name->s : "caller";
	struct tscope *saved;
	struct tlist *varargs = NULL;
	struct tdict *kwargs = NULL;
	if (tpl_step(R) || tpl_scope_push(R, m->scope, &saved))
		return -1;
	int rc = -1;
	if (tpl_list_new(R, 0, &varargs) || tpl_dict_new(R, &kwargs) ||
	    tpl_dict_new(R, &R->scope->vars))
		goto out;
	varargs->h.flags |= TL_TUPLE;
	const struct tnode *at = R->at;
	R->at = d;
	rc = bind_params(R, d, who, a, varargs, kwargs);
	if (!rc)
		rc = capture(R, d->kids, d->nkids, 0, out);
	R->at = at;
out:
	if (varargs)
		tobj_release(&varargs->h);
	if (kwargs)
		tobj_release(&kwargs->h);
	tpl_scope_pop(R, saved);
	return rc ? -1 : 0;
}

static int exec_call_block(struct tpl_run *R, const struct tnode *n)
{
	struct tv caller, res;
	if (macro_new(R, n, &caller))
		return -1;
	int rc = tpl_eval_call(R, n->a, R->t->n_caller, caller, &res);
	tv_release(caller);
	if (rc)
		return -1;
	rc = output(R, res);
	tv_release(res);
	return rc;
}

/* --------------------------------------------------------- statements */

static int exec_if(struct tpl_run *R, const struct tnode *n)
{
	for (;;) {
		struct tv c;
		if (tpl_eval(R, n->a, &c))
			return -1;
		int t = tv_truthy(c);
		tv_release(c);
		if (t)
			return tpl_exec_body(R, n->kids, n->nkids);
		if (n->nelse == 1 && n->else_kids[0]->kind == S_IF) {
			n = n->else_kids[0]; /* elif: iterate, not recurse */
			R->at = n;
			continue;
		}
		return tpl_exec_body(R, n->else_kids, n->nelse);
	}
}

static int exec_set_block(struct tpl_run *R, const struct tnode *n)
{
	struct tv body, v;
	int rc = capture(R, n->kids, n->nkids, 1, &body);
	if (rc)
		return rc;
	if (n->c) {
		rc = tpl_eval_filter_chain(R, n->c, body, &v);
		tv_release(body);
		if (rc)
			return -1;
	} else {
		v = body;
	}
	R->at = n;
	rc = assign(R, n->b, v);
	tv_release(v);
	return rc;
}

static int exec_filter_block(struct tpl_run *R, const struct tnode *n)
{
	struct tv body, v;
	int rc = capture(R, n->kids, n->nkids, 1, &body);
	if (rc)
		return rc;
	rc = tpl_eval_filter_chain(R, n->c, body, &v);
	tv_release(body);
	if (rc)
		return -1;
	rc = output(R, v);
	tv_release(v);
	return rc;
}

static int exec_with(struct tpl_run *R, const struct tnode *n)
{
	const struct tparams *p = n->params;
	struct tv *vals = ing_calloc((size_t)p->n + 1, sizeof *vals);
	if (!vals)
		return tpl_fail_nomem(R);
	int rc = 0, got = 0;
	for (; got < p->n && !rc; got++)
		rc = tpl_eval(R, p->defs[got], &vals[got]);
	struct tscope *saved;
	if (!rc && !(rc = tpl_scope_push(R, R->scope, &saved))) {
		for (int i = 0; i < p->n && !rc; i++)
			rc = tpl_scope_set(R, R->scope, p->names[i], vals[i]);
		if (!rc)
			rc = tpl_exec_body(R, n->kids, n->nkids);
		tpl_scope_pop(R, saved);
	}
	tv_release_n(vals, (size_t)got);
	ing_free(vals);
	return rc;
}

static int exec_stmt(struct tpl_run *R, const struct tnode *n)
{
	struct tv v;
	int rc;
	switch (n->kind) {
	case S_DATA:
		return tpl_buf_put(R, &R->out, n->val.s->s, n->val.s->len);
	case S_OUTPUT:
		if (tpl_eval(R, n->a, &v))
			return -1;
		rc = output(R, v);
		tv_release(v);
		return rc;
	case S_IF: return exec_if(R, n);
	case S_FOR: return exec_for(R, n);
	case S_SET:
		if (tpl_eval(R, n->a, &v))
			return -1;
		R->at = n;
		rc = assign(R, n->b, v);
		tv_release(v);
		return rc;
	case S_SET_BLOCK: return exec_set_block(R, n);
	case S_MACRO:
		if (macro_new(R, n, &v))
			return -1;
		rc = tpl_scope_set(R, R->scope, n->name, v);
		tv_release(v);
		return rc;
	case S_CALL_BLOCK: return exec_call_block(R, n);
	case S_FILTER_BLOCK: return exec_filter_block(R, n);
	case S_WITH: return exec_with(R, n);
	case S_BREAK: return TPL_BREAK;
	case S_CONTINUE: return TPL_CONTINUE;
	case S_BLOCK: return exec_scoped(R, n->kids, n->nkids);
	case S_BODY: return tpl_exec_body(R, n->kids, n->nkids);
	default:
		return tpl_fail(R, ING_ERR_FORMAT, "internal error: not a statement");
	}
}

int tpl_exec_body(struct tpl_run *R, struct tnode **kids, int n)
{
	if (tpl_enter(R))
		return -1;
	const struct tnode *saved = R->at;
	int rc = 0;
	for (int i = 0; i < n && !rc; i++) {
		R->at = kids[i];
		rc = exec_stmt(R, kids[i]);
	}
	R->at = saved;
	tpl_leave(R);
	return rc;
}

/* ------------------------------------------------------------- render */

typedef int (*ctx_loader)(struct tpl_run *R, const void *arg, size_t len, struct tv *out);

static void run_init(struct tpl_run *R, const struct template *t, const struct template_opts *o,
		     ing_err *err)
{
	*R = (struct tpl_run){ .t = t, .err = err };
	R->max_output = o && o->max_output ? o->max_output : DEFAULT_MAX_OUTPUT;
	R->max_bytes = o && o->max_bytes ? o->max_bytes : DEFAULT_MAX_BYTES;
	R->max_steps = o && o->max_steps > 0 ? o->max_steps : DEFAULT_MAX_STEPS;
	R->max_depth = o && o->max_depth > 0 ? o->max_depth : DEFAULT_MAX_DEPTH;
	char here;
	R->stack_base = &here;
	R->stack_budget = stack_budget(&here);
}

/* Empties every namespace (they alone can hold cycles), then drops them. */
static void run_release_namespaces(struct tpl_run *R)
{
	if (!R->namespaces)
		return;
	for (size_t i = 0; i < R->namespaces->n; i++)
		tpl_dict_clear(R->namespaces->v[i].d);
	tobj_release(&R->namespaces->h);
	R->namespaces = NULL;
}

static int render(const struct template *t, ctx_loader load, const void *arg, size_t len,
		  const struct template_opts *o, char **out, size_t *out_len, ing_err *err)
{
	struct tpl_run R;
	struct tv ctx = tv_undef(NULL);
	struct tscope *saved = NULL;
	int pushed = 0, rc;
	if (!out || !out_len)
		return ing_err_set(err, ING_ERR_INVALID, "template_render: no output pointer");
	*out = NULL;
	*out_len = 0;
	if (!t)
		return ing_err_set(err, ING_ERR_INVALID, "template_render: no template");
	ing_err_clear(err);
	run_init(&R, t, o, err);
	rc = tpl_clock_init(&R, o ? o->now : NULL) || tpl_list_new(&R, 0, &R.namespaces) ||
	     load(&R, arg, len, &ctx);
	if (!rc && ctx.kind != TV_DICT)
		rc = tpl_fail(&R, ING_ERR_INVALID, "the template context must be a JSON object");
	if (!rc) {
		R.ctx = ctx.d;
		rc = tpl_scope_push(&R, NULL, &saved);
		pushed = !rc;
	}
	if (!rc)
		rc = tpl_exec_body(&R, t->root->kids, t->root->nkids);
	if (pushed)
		tpl_scope_pop(&R, saved);
	tv_release(ctx);
	run_release_namespaces(&R);
	if (!rc && !R.out.p && tpl_buf_put(&R, &R.out, "", 0))
		rc = -1;
	if (rc) {
		tpl_buf_free(&R.out);
		if (!err->code)
			ing_err_set(err, ING_ERR_FORMAT, "template rendering failed");
		return err->code;
	}
	*out = R.out.p;
	*out_len = R.out.n;
	return ING_OK;
}

static int load_json_text(struct tpl_run *R, const void *arg, size_t len, struct tv *out)
{
	return tpl_from_json_text(R, arg, len, out);
}

static int load_cjson(struct tpl_run *R, const void *arg, size_t len, struct tv *out)
{
	(void)len;
	if (!arg)
		return tpl_fail(R, ING_ERR_INVALID, "no template context");
	return tpl_from_cjson(R, arg, out);
}

int template_render_json(const struct template *t, const char *json, size_t len,
			 const struct template_opts *opts, char **out, size_t *out_len,
			 ing_err *err)
{
	if (!json)
		return ing_err_set(err, ING_ERR_INVALID, "template_render_json: no context");
	return render(t, load_json_text, json, len, opts, out, out_len, err);
}

int template_render_cjson(const struct template *t, const struct cJSON *ctx,
			  const struct template_opts *opts, char **out, size_t *out_len,
			  ing_err *err)
{
	return render(t, load_cjson, ctx, 0, opts, out, out_len, err);
}
