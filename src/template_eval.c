/* template_eval.c — evaluation of expressions: names, attribute and item
 * access as jinja2's sandboxed environment does them, calls, operators
 * with Python's semantics, and the undefined value.
 *
 * jinja2's rules reproduced here:
 *   a.b    tries the attribute (a method of str/dict/list) first, then the
 *          item a["b"]; a[b] tries the item first, then the attribute;
 *          a miss on any defined object is Undefined, on Undefined an error.
 *   Undefined prints as "", is false, iterates as empty and equals only
 *   Undefined; arithmetic, ordering, attribute access and calls on it fail.
 *   and/or return an operand, not a bool; comparisons chain.
 * Every evaluation step counts against the render's depth limit. */
#include <math.h>
#include <string.h>

#include "mem.h"
#include "template_int.h"

/* ---------------------------------------------------------------- names */

int tpl_lookup(struct tpl_run *R, struct tstr *name, struct tv *out)
{
	for (struct tscope *s = R->scope; s; s = s->parent) {
		struct tv *v = s->vars ? tpl_dict_get_str(s->vars, name) : NULL;
		if (v) {
			tv_retain(*v);
			*out = *v;
			return 0;
		}
	}
	struct tv *v = tpl_dict_get_str(R->ctx, name);
	if (v) {
		tv_retain(*v);
		*out = *v;
		return 0;
	}
	const struct tpl_func *fn = tpl_global_find(name->s);
	if (fn && strlen(name->s) == name->len) {
		*out = (struct tv){ .kind = TV_FUNC };
		out->fn = fn;
		return 0;
	}
	*out = tv_undef(R->at);
	return 0;
}

int tpl_fail_undef(struct tpl_run *R, struct tv v)
{
	const struct tnode *u = v.u;
	if (u && u->kind == N_NAME)
		return tpl_fail(R, ING_ERR_FORMAT, "'%s' is undefined", u->name->s);
	if (u && u->kind == N_ATTR) {
		if (v.aux == TV_NONE)
			return tpl_fail(R, ING_ERR_FORMAT, "'None' has no attribute '%s'", u->name->s);
		struct tv o = { .kind = v.aux };
		if (v.aux == TV_LIST) /* the kind alone does not say list or tuple */
			return tpl_fail(R, ING_ERR_FORMAT, "'list object' has no attribute '%s'",
					u->name->s);
		return tpl_fail(R, ING_ERR_FORMAT, "'%s object' has no attribute '%s'",
				v.aux == TV_DICT ? "dict" : v.aux == TV_STR ? "str" : tv_type_name(o),
				u->name->s);
	}
	if (u && u->kind == N_ITEM && u->b->kind == N_CONST && u->b->val.kind == TV_STR)
		return tpl_fail(R, ING_ERR_FORMAT, "'%s object' has no attribute '%s'",
				v.aux == TV_DICT ? "dict" : "object", u->b->val.s->s);
	if (u && u->kind == N_ITEM)
		return tpl_fail(R, ING_ERR_FORMAT, "index or key out of range (value is undefined)");
	return tpl_fail(R, ING_ERR_FORMAT, "value is undefined");
}

static struct tv undef_of(const struct tnode *at, struct tv obj)
{
	struct tv u = tv_undef(at);
	u.aux = obj.kind;
	return u;
}

/* ------------------------------------------------ attributes and items */

int tpl_getattr(struct tpl_run *R, struct tv obj, struct tstr *name, const struct tnode *at,
		struct tv *out)
{
	switch (obj.kind) {
	case TV_UNDEF:
		return tpl_fail_undef(R, obj);
	case TV_LOOP:
		return tpl_loop_attr(R, obj.lp, name, out);
	case TV_CYCLER: case TV_JOINER:
		return tpl_cycler_attr(R, obj, name, out);
	case TV_NS: {
		struct tv *v = tpl_dict_get_str(obj.d, name);
		if (v) {
			tv_retain(*v);
			*out = *v;
		} else {
			*out = undef_of(at, obj);
		}
		return 0;
	}
	default:
		break;
	}
	if (tpl_method_bind(R, obj, name, out))
		return -1;
	if (out->kind != TV_UNDEF)
		return 0;
	if (obj.kind == TV_DICT) {
		struct tv *v = tpl_dict_get_str(obj.d, name);
		if (v) {
			tv_retain(*v);
			*out = *v;
			return 0;
		}
	}
	*out = undef_of(at, obj);
	return 0;
}

int tpl_getitem(struct tpl_run *R, struct tv obj, struct tv key, const struct tnode *at,
		struct tv *out)
{
	if (obj.kind == TV_UNDEF)
		return tpl_fail_undef(R, obj);
	int int_key = key.kind == TV_INT || key.kind == TV_BOOL;
	if (obj.kind == TV_DICT) {
		struct tv *v = tpl_dict_get(obj.d, key);
		if (v) {
			tv_retain(*v);
			*out = *v;
			return 0;
		}
	} else if (tv_is_seq(obj) && int_key) {
		int64_t i = key.i < 0 ? key.i + (int64_t)obj.l->n : key.i;
		if (i >= 0 && i < (int64_t)obj.l->n) {
			tv_retain(obj.l->v[i]);
			*out = obj.l->v[i];
			return 0;
		}
	} else if (obj.kind == TV_STR && int_key) {
		int64_t n = tstr_ncp(obj.s), i = key.i < 0 ? key.i + n : key.i;
		if (i >= 0 && i < n) {
			size_t b = tstr_cp_off(obj.s, i), e = tstr_cp_off(obj.s, i + 1);
			return tpl_str_v(R, obj.s->s + b, e - b, out) ||
			       tpl_keep_safe(R, tv_is_safe(obj), out) ? -1 : 0;
		}
	}
	if (key.kind == TV_STR && obj.kind != TV_LIST && obj.kind != TV_STR && obj.kind != TV_DICT)
		return tpl_getattr(R, obj, key.s, at, out);
	if (key.kind == TV_STR) {
		if (tpl_method_bind(R, obj, key.s, out))
			return -1;
		if (out->kind != TV_UNDEF)
			return 0;
	}
	*out = undef_of(at, obj);
	return 0;
}

int tpl_get_path(struct tpl_run *R, struct tv obj, struct tstr *path, struct tv *out)
{
	tv_retain(obj);
	struct tv cur = obj;
	const char *p = path->s, *end = path->s + path->len;
	for (;;) {
		const char *dot = memchr(p, '.', (size_t)(end - p));
		const char *e = dot ? dot : end;
		struct tv key, next;
		int digits = e > p;
		for (const char *q = p; q < e; q++)
			digits &= *q >= '0' && *q <= '9';
		if (digits && e - p < 18) {
			int64_t k = 0;
			for (const char *q = p; q < e; q++)
				k = k * 10 + (*q - '0');
			key = tv_int(k);
		} else if (tpl_str_v(R, p, (size_t)(e - p), &key)) {
			tv_release(cur);
			return -1;
		}
		int rc = tpl_getitem(R, cur, key, NULL, &next);
		tv_release(key);
		tv_release(cur);
		if (rc)
			return -1;
		cur = next;
		if (!dot)
			break;
		p = dot + 1;
	}
	*out = cur;
	return 0;
}

/* ---------------------------------------------------------- iteration */

int tpl_iterate(struct tpl_run *R, struct tv v, struct tlist **out)
{
	struct tlist *l;
	switch (v.kind) {
	case TV_LIST:
		tv_retain(v);
		*out = v.l;
		return 0;
	case TV_UNDEF:
		return tpl_list_new(R, 0, out);
	case TV_DICT:
		if (tpl_list_new(R, v.d->n, &l))
			return -1;
		for (size_t i = 0; i < v.d->n; i++) {
			tv_retain(v.d->e[i].k);
			if (tpl_list_push(R, l, v.d->e[i].k)) {
				tobj_release(&l->h);
				return -1;
			}
		}
		*out = l;
		return 0;
	case TV_STR:
		if (tpl_list_new(R, (size_t)tstr_ncp(v.s), &l))
			return -1;
		for (size_t i = 0; i < v.s->len;) {
			size_t b = i;
			utf8_next(v.s->s, v.s->len, &i);
			struct tv c;
			if (tpl_str_v(R, v.s->s + b, i - b, &c) || tpl_list_push(R, l, c)) {
				tobj_release(&l->h);
				return -1;
			}
		}
		*out = l;
		return 0;
	default:
		return tpl_fail(R, ING_ERR_FORMAT, "'%s' object is not iterable", tv_type_name(v));
	}
}

int tpl_contains(struct tpl_run *R, struct tv c, struct tv item, int *out)
{
	switch (c.kind) {
	case TV_UNDEF:
		*out = 0;
		return 0;
	case TV_STR:
		if (item.kind != TV_STR)
			return tpl_fail(R, ING_ERR_FORMAT, "'in <string>' requires string as left "
					"operand, not %s", tv_type_name(item));
		*out = item.s->len == 0 || memmem(c.s->s, c.s->len, item.s->s, item.s->len) != NULL;
		return 0;
	case TV_LIST:
		*out = 0;
		for (size_t i = 0; i < c.l->n && !*out; i++)
			*out = tv_eq(c.l->v[i], item);
		return 0;
	case TV_DICT:
		if (!tv_hashable(item))
			return tpl_fail(R, ING_ERR_FORMAT, "unhashable type: '%s'", tv_type_name(item));
		*out = tpl_dict_get(c.d, item) != NULL;
		return 0;
	default:
		return tpl_fail(R, ING_ERR_FORMAT, "argument of type '%s' is not iterable",
				tv_type_name(c));
	}
}

/* ----------------------------------------------------------- operators */

static int type_error(struct tpl_run *R, int op, struct tv a, struct tv b)
{
	const char *ta = tv_type_name(a), *tb = tv_type_name(b);
	if (op == OP_ADD && ((a.kind == TV_STR && !tv_is_safe(a)) || tv_is_seq(a)))
		return tpl_fail(R, ING_ERR_FORMAT, "can only concatenate %s (not \"%s\") to %s", ta, tb,
				ta);
	return tpl_fail(R, ING_ERR_FORMAT, "unsupported operand type(s) for %s: '%s' and '%s'",
			op == OP_POW ? "** or pow()" : tpl_op_text(op), ta, tb);
}

static int overflow(struct tpl_run *R)
{
	return tpl_fail(R, ING_ERR_RANGE, "integer result out of the 64-bit range");
}

static int int_pow(struct tpl_run *R, int64_t b, int64_t e, struct tv *out)
{
	int64_t r = 1;
	while (e > 0) {
		if ((e & 1) && __builtin_mul_overflow(r, b, &r))
			return overflow(R);
		e >>= 1;
		if (e && __builtin_mul_overflow(b, b, &b))
			return overflow(R);
	}
	*out = tv_int(r);
	return 0;
}

static int int_op(struct tpl_run *R, int op, int64_t a, int64_t b, struct tv *out)
{
	int64_t r;
	switch (op) {
	case OP_ADD:
		if (__builtin_add_overflow(a, b, &r))
			return overflow(R);
		break;
	case OP_SUB:
		if (__builtin_sub_overflow(a, b, &r))
			return overflow(R);
		break;
	case OP_MUL:
		if (__builtin_mul_overflow(a, b, &r))
			return overflow(R);
		break;
	case OP_FLOORDIV: case OP_MOD:
		if (b == 0)
			return tpl_fail(R, ING_ERR_FORMAT, "integer division or modulo by zero");
		if (a == INT64_MIN && b == -1)
			return overflow(R);
		r = op == OP_MOD ? a % b : a / b;
		if (op == OP_MOD && r && ((r < 0) != (b < 0)))
			r += b;
		if (op == OP_FLOORDIV && (a % b) && ((a < 0) != (b < 0)))
			r -= 1;
		break;
	case OP_DIV:
		if (b == 0)
			return tpl_fail(R, ING_ERR_FORMAT, "division by zero");
		*out = tv_float((double)a / (double)b);
		return 0;
	case OP_POW:
		if (b < 0) {
			if (a == 0)
				return tpl_fail(R, ING_ERR_FORMAT, "0.0 cannot be raised to a negative power");
			*out = tv_float(pow((double)a, (double)b));
			return 0;
		}
		return int_pow(R, a, b, out);
	default:
		return tpl_fail(R, ING_ERR_FORMAT, "bad operator");
	}
	*out = tv_int(r);
	return 0;
}

static int float_op(struct tpl_run *R, int op, double a, double b, struct tv *out)
{
	double r;
	switch (op) {
	case OP_ADD: r = a + b; break;
	case OP_SUB: r = a - b; break;
	case OP_MUL: r = a * b; break;
	case OP_DIV: case OP_FLOORDIV: case OP_MOD:
		if (b == 0)
			return tpl_fail(R, ING_ERR_FORMAT, "float division by zero");
		if (op == OP_DIV) {
			r = a / b;
		} else {
			double m = fmod(a, b);
			if (m != 0 && ((m < 0) != (b < 0)))
				m += b;
			r = op == OP_MOD ? m : floor((a - m) / b + 0.5);
		}
		break;
	case OP_POW:
		if (a == 0 && b < 0)
			return tpl_fail(R, ING_ERR_FORMAT, "0.0 cannot be raised to a negative power");
		r = pow(a, b);
		break;
	default:
		return tpl_fail(R, ING_ERR_FORMAT, "bad operator");
	}
	*out = tv_float(r);
	return 0;
}

static int repeat(struct tpl_run *R, struct tv seq, int64_t k, struct tv *out)
{
	if (k < 0)
		k = 0;
	if (seq.kind == TV_STR) {
		if (seq.s->len && (uint64_t)k > R->max_output / seq.s->len)
			return tpl_fail(R, ING_ERR_RANGE, "string repetition exceeds the output limit");
		struct tstr *t;
		if (tpl_str_new(R, NULL, seq.s->len * (size_t)k, &t))
			return -1;
		for (int64_t i = 0; i < k; i++)
			memcpy(t->s + (size_t)i * seq.s->len, seq.s->s, seq.s->len);
		*out = tv_str_v(t);
		return 0;
	}
	if (seq.l->n && (uint64_t)k > ((uint64_t)1 << 24) / seq.l->n)
		return tpl_fail(R, ING_ERR_RANGE, "list repetition too large");
	struct tlist *l;
	if (tpl_list_new(R, seq.l->n * (size_t)k, &l))
		return -1;
	l->h.flags = seq.l->h.flags & TL_TUPLE;
	for (int64_t i = 0; i < k; i++)
		for (size_t j = 0; j < seq.l->n; j++) {
			tv_retain(seq.l->v[j]);
			if (tpl_list_push(R, l, seq.l->v[j])) {
				tobj_release(&l->h);
				return -1;
			}
		}
	*out = tv_list_v(l);
	return 0;
}

static int seq_concat(struct tpl_run *R, struct tv a, struct tv b, struct tv *out)
{
	struct tlist *l;
	if (tpl_list_new(R, a.l->n + b.l->n, &l))
		return -1;
	l->h.flags = a.l->h.flags & TL_TUPLE;
	for (int k = 0; k < 2; k++) {
		struct tlist *src = k ? b.l : a.l;
		for (size_t i = 0; i < src->n; i++) {
			tv_retain(src->v[i]);
			if (tpl_list_push(R, l, src->v[i])) {
				tobj_release(&l->h);
				return -1;
			}
		}
	}
	*out = tv_list_v(l);
	return 0;
}

/* Markup % args: string arguments are escaped first (markupsafe). */
static int markup_percent(struct tpl_run *R, struct tv fmt, struct tv args, struct tv *out)
{
	struct tv esc = tv_undef(NULL);
	int rc = 0;
	if (args.kind == TV_STR) {
		rc = tpl_html_escape(R, args, 0, &esc);
	} else if (args.kind == TV_LIST && (args.l->h.flags & TL_TUPLE)) {
		struct tlist *t;
		if (!(rc = tpl_list_new(R, args.l->n, &t))) {
			t->h.flags |= TL_TUPLE;
			esc = tv_list_v(t);
			for (size_t i = 0; i < args.l->n && !rc; i++) {
				struct tv e = args.l->v[i];
				if (e.kind == TV_STR)
					rc = tpl_html_escape(R, args.l->v[i], 0, &e);
				else
					tv_retain(e);
				rc = rc ? rc : tpl_list_push(R, t, e);
			}
		}
	} else {
		tv_retain(args);
		esc = args;
	}
	if (!rc)
		rc = tpl_str_percent(R, fmt.s, esc, out) || tpl_keep_safe(R, 1, out);
	tv_release(esc);
	return rc ? -1 : 0;
}

int tpl_binop(struct tpl_run *R, int op, struct tv a, struct tv b, struct tv *out)
{
	if (op == OP_MOD && a.kind == TV_STR) /* str % x runs before x can object */
		return tv_is_safe(a) ? markup_percent(R, a, b, out) : tpl_str_percent(R, a.s, b, out);
	if (a.kind == TV_UNDEF || b.kind == TV_UNDEF)
		return tpl_fail_undef(R, a.kind == TV_UNDEF ? a : b);
	if (tv_is_num(a) && tv_is_num(b)) {
		if (a.kind != TV_FLOAT && b.kind != TV_FLOAT)
			return int_op(R, op, a.i, b.i, out);
		return float_op(R, op, a.kind == TV_FLOAT ? a.f : (double)a.i,
				b.kind == TV_FLOAT ? b.f : (double)b.i, out);
	}
	if (op == OP_ADD && a.kind == TV_STR && b.kind == TV_STR) {
		if (!tv_is_safe(a) && !tv_is_safe(b))
			return tpl_str_cat(R, a.s, b.s, out);
		struct tv ea, eb; /* Markup + str escapes the str */
		if (tpl_html_escape(R, a, 0, &ea))
			return -1;
		if (tpl_html_escape(R, b, 0, &eb)) {
			tv_release(ea);
			return -1;
		}
		int rc = tpl_str_cat(R, ea.s, eb.s, out);
		tv_release(ea);
		tv_release(eb);
		return rc || tpl_keep_safe(R, 1, out) ? -1 : 0;
	}
	if (op == OP_ADD && tv_is_seq(a) && tv_is_seq(b) &&
	    (a.l->h.flags & TL_TUPLE) == (b.l->h.flags & TL_TUPLE))
		return seq_concat(R, a, b, out);
	if (op == OP_MUL && (a.kind == TV_STR || tv_is_seq(a)) && (b.kind == TV_INT || b.kind == TV_BOOL))
		return repeat(R, a, b.i, out) || tpl_keep_safe(R, tv_is_safe(a), out) ? -1 : 0;
	if (op == OP_MUL && (b.kind == TV_STR || tv_is_seq(b)) && (a.kind == TV_INT || a.kind == TV_BOOL))
		return repeat(R, b, a.i, out);
	if (op == OP_MOD && a.kind == TV_STR)
		return tpl_str_percent(R, a.s, b, out);
	return type_error(R, op, a, b);
}

/* ----------------------------------------------------------- arguments */

static void args_free(struct tpl_args *a)
{
	tv_release_n(a->pos, (size_t)a->npos);
	tv_release_n(a->kwv, (size_t)a->nkw);
	for (int i = 0; i < a->nkw; i++)
		tobj_release(&a->kwn[i]->h);
	ing_free(a->pos);
	ing_free(a->kwv);
	ing_free(a->kwn);
	*a = (struct tpl_args){ 0 };
}

static int args_reserve(struct tpl_run *R, struct tpl_args *a, int npos, int nkw)
{
	a->pos = ing_malloc_array((size_t)npos + 1, sizeof *a->pos);
	a->kwv = ing_malloc_array((size_t)nkw + 1, sizeof *a->kwv);
	a->kwn = ing_malloc_array((size_t)nkw + 1, sizeof *a->kwn);
	return a->pos && a->kwv && a->kwn ? 0 : tpl_fail_nomem(R);
}

/* Evaluates parsed arguments into a (owned values; args_free). extra
 * names one more keyword argument (caller of {% call %}), or NULL. */
static int args_eval(struct tpl_run *R, const struct tcallargs *ca, struct tstr *extra_name,
		     struct tv extra, struct tpl_args *a)
{
	*a = (struct tpl_args){ 0 };
	struct tv star = tv_undef(NULL), dstar = tv_undef(NULL);
	if (ca && ca->star && tpl_eval(R, ca->star, &star))
		return -1;
	if (ca && ca->dstar && tpl_eval(R, ca->dstar, &dstar)) {
		tv_release(star);
		return -1;
	}
	struct tlist *sl = NULL;
	int rc = -1;
	if (star.kind != TV_UNDEF && tpl_iterate(R, star, &sl))
		goto out;
	if (dstar.kind != TV_UNDEF && dstar.kind != TV_DICT) {
		tpl_fail(R, ING_ERR_FORMAT, "argument after ** must be a mapping, not %s",
			 tv_type_name(dstar));
		goto out;
	}
	int npos = (ca ? ca->npos : 0) + (sl ? (int)sl->n : 0);
	int nkw = (ca ? ca->nkw : 0) + (dstar.kind == TV_DICT ? (int)dstar.d->n : 0) + !!extra_name;
	if (args_reserve(R, a, npos, nkw))
		goto out;
	for (int i = 0; ca && i < ca->npos; i++, a->npos++)
		if (tpl_eval(R, ca->pos[i], &a->pos[a->npos]))
			goto out;
	for (size_t i = 0; sl && i < sl->n; i++) {
		tv_retain(sl->v[i]);
		a->pos[a->npos++] = sl->v[i];
	}
	for (int i = 0; ca && i < ca->nkw; i++) {
		if (tpl_eval(R, ca->kwv[i], &a->kwv[a->nkw]))
			goto out;
		a->kwn[a->nkw++] = ca->kwn[i];
	}
	for (size_t i = 0; dstar.kind == TV_DICT && i < dstar.d->n; i++) {
		struct tdent *e = &dstar.d->e[i];
		if (e->k.kind != TV_STR) {
			tpl_fail(R, ING_ERR_FORMAT, "keywords must be strings");
			goto out;
		}
		tv_retain(e->k);
		tv_retain(e->v);
		a->kwn[a->nkw] = e->k.s;
		a->kwv[a->nkw++] = e->v;
	}
	if (extra_name) {
		tv_retain(extra);
		a->kwn[a->nkw] = extra_name;
		a->kwv[a->nkw++] = extra;
	}
	rc = 0;
out:
	if (sl)
		tobj_release(&sl->h);
	tv_release(star);
	tv_release(dstar);
	if (rc)
		args_free(a);
	return rc;
}

int tpl_call(struct tpl_run *R, struct tv fn, struct tpl_args *a, struct tv *out)
{
	switch (fn.kind) {
	case TV_MACRO: return tpl_macro_call(R, fn.m, a, out);
	case TV_FUNC: return fn.fn->call(R, a, out);
	case TV_METHOD: return tpl_method_call(R, fn.mt, a, out);
	case TV_LOOP: return tpl_loop_call(R, fn.lp, a, out);
	case TV_JOINER: {
		struct tcycler *j = fn.cy;
		if (!j->pos++)
			return tpl_str_v(R, "", 0, out);
		tv_retain(j->items->v[0]);
		*out = j->items->v[0];
		return 0;
	}
	case TV_UNDEF: return tpl_fail_undef(R, fn);
	default:
		return tpl_fail(R, ING_ERR_FORMAT, "'%s' object is not callable", tv_type_name(fn));
	}
}

/* Calls node->a with node->args, plus an extra keyword argument. */
int tpl_eval_call(struct tpl_run *R, const struct tnode *n, struct tstr *extra_name,
		  struct tv extra, struct tv *out)
{
	struct tv fn;
	if (tpl_eval(R, n->a, &fn))
		return -1;
	struct tpl_args a;
	if (args_eval(R, n->args, extra_name, extra, &a)) {
		tv_release(fn);
		return -1;
	}
	const struct tnode *saved = R->at;
	R->at = n;
	int rc = tpl_call(R, fn, &a, out);
	R->at = saved;
	args_free(&a);
	tv_release(fn);
	return rc;
}

/* ------------------------------------------------------- node kinds */

static int eval_filter(struct tpl_run *R, const struct tnode *n, struct tv in, struct tv *out)
{
	if (!n->filter)
		return tpl_fail(R, ING_ERR_FORMAT, "No filter named '%s'", n->name->s);
	struct tpl_args a;
	if (args_eval(R, n->args, NULL, tv_undef(NULL), &a))
		return -1;
	R->at = n;
	int rc = tpl_apply_filter(R, n->filter, in, &a, out);
	args_free(&a);
	return rc;
}

int tpl_eval_filter_chain(struct tpl_run *R, const struct tnode *n, struct tv in, struct tv *out)
{
	if (!n->a)
		return eval_filter(R, n, in, out);
	struct tv mid;
	if (tpl_eval_filter_chain(R, n->a, in, &mid))
		return -1;
	int rc = eval_filter(R, n, mid, out);
	tv_release(mid);
	return rc;
}

static int eval_test(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	if (!n->test)
		return tpl_fail(R, ING_ERR_FORMAT, "No test named '%s'", n->name->s);
	struct tv in;
	if (tpl_eval(R, n->a, &in))
		return -1;
	struct tpl_args a;
	if (args_eval(R, n->args, NULL, tv_undef(NULL), &a)) {
		tv_release(in);
		return -1;
	}
	R->at = n;
	int r = 0, rc = tpl_apply_test(R, n->test, in, &a, &r);
	args_free(&a);
	tv_release(in);
	*out = tv_bool(r);
	return rc;
}

static int eval_unary(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	struct tv x;
	if (tpl_eval(R, n->a, &x))
		return -1;
	int rc = 0;
	if (n->op == OP_NOT) {
		*out = tv_bool(!tv_truthy(x));
	} else if (x.kind == TV_INT || x.kind == TV_BOOL) {
		if (n->op == OP_NEG && x.i == INT64_MIN)
			rc = overflow(R);
		else
			*out = tv_int(n->op == OP_NEG ? -x.i : x.i);
	} else if (x.kind == TV_FLOAT) {
		*out = tv_float(n->op == OP_NEG ? -x.f : x.f);
	} else if (x.kind == TV_UNDEF) {
		rc = tpl_fail_undef(R, x);
	} else {
		rc = tpl_fail(R, ING_ERR_FORMAT, "bad operand type for unary %s: '%s'",
			      n->op == OP_NEG ? "-" : "+", tv_type_name(x));
	}
	tv_release(x);
	return rc;
}

static int eval_binary(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	struct tv a, b;
	if (tpl_eval(R, n->a, &a))
		return -1;
	if (tpl_eval(R, n->b, &b)) {
		tv_release(a);
		return -1;
	}
	R->at = n;
	int rc = tpl_binop(R, n->op, a, b, out);
	tv_release(a);
	tv_release(b);
	return rc;
}

static int eval_andor(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	struct tv a;
	if (tpl_eval(R, n->a, &a))
		return -1;
	int t = tv_truthy(a);
	if ((n->kind == N_OR) == (t != 0)) {
		*out = a;
		return 0;
	}
	tv_release(a);
	return tpl_eval(R, n->b, out);
}

static int compare_one(struct tpl_run *R, int op, struct tv a, struct tv b, int *r)
{
	int c;
	switch (op) {
	case OP_EQ: *r = tv_eq(a, b); return 0;
	case OP_NE: *r = !tv_eq(a, b); return 0;
	case OP_IN: return tpl_contains(R, b, a, r);
	case OP_NOTIN:
		if (tpl_contains(R, b, a, r))
			return -1;
		*r = !*r;
		return 0;
	default:
		if (tpl_compare(R, a, b, tpl_op_text(op), &c))
			return -1;
		*r = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
		return 0;
	}
}

static int eval_compare(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	struct tv left;
	if (tpl_eval(R, n->a, &left))
		return -1;
	int r = 1;
	for (int i = 0; i < n->nkids && r; i++) {
		struct tv right;
		if (tpl_eval(R, n->kids[i], &right)) {
			tv_release(left);
			return -1;
		}
		R->at = n;
		int rc = compare_one(R, n->ops[i], left, right, &r);
		tv_release(left);
		left = right;
		if (rc) {
			tv_release(left);
			return -1;
		}
	}
	tv_release(left);
	*out = tv_bool(r);
	return 0;
}

static int eval_concat(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	struct tbuf b = { 0 };
	int rc = 0;
	for (int i = 0; i < n->nkids && !rc; i++) {
		struct tv x;
		if ((rc = tpl_eval(R, n->kids[i], &x)))
			break;
		rc = tpl_value_str(R, &b, x);
		tv_release(x);
	}
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	return rc;
}

static int eval_seq(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	struct tlist *l;
	if (tpl_list_new(R, (size_t)n->nkids, &l))
		return -1;
	if (n->kind == N_TUPLE)
		l->h.flags |= TL_TUPLE;
	for (int i = 0; i < n->nkids; i++) {
		struct tv x;
		if (tpl_eval(R, n->kids[i], &x) || tpl_list_push(R, l, x)) {
			tobj_release(&l->h);
			return -1;
		}
	}
	*out = tv_list_v(l);
	return 0;
}

static int eval_dict(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	struct tdict *d;
	if (tpl_dict_new(R, &d))
		return -1;
	for (int i = 0; i + 1 < n->nkids; i += 2) {
		struct tv k, v;
		if (tpl_eval(R, n->kids[i], &k))
			goto fail;
		if (tpl_eval(R, n->kids[i + 1], &v)) {
			tv_release(k);
			goto fail;
		}
		R->at = n;
		if (tpl_dict_set(R, d, k, v))
			goto fail;
	}
	*out = tv_dict_v(d);
	return 0;
fail:
	tobj_release(&d->h);
	return -1;
}

static int eval_access(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	struct tv obj, key = tv_undef(NULL);
	if (tpl_eval(R, n->a, &obj))
		return -1;
	int rc;
	if (n->kind == N_ATTR) {
		R->at = n;
		rc = tpl_getattr(R, obj, n->name, n, out);
	} else if (!(rc = tpl_eval(R, n->b, &key))) {
		R->at = n;
		rc = tpl_getitem(R, obj, key, n, out);
	}
	tv_release(obj);
	tv_release(key);
	return rc;
}

static int eval_slice(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	struct tv obj, p[3] = { tv_undef(NULL), tv_undef(NULL), tv_undef(NULL) };
	if (tpl_eval(R, n->a, &obj))
		return -1;
	int rc = 0;
	for (int i = 0; i < 3 && !rc; i++)
		if (n->kids[i])
			rc = tpl_eval(R, n->kids[i], &p[i]);
	R->at = n;
	if (!rc && obj.kind == TV_UNDEF)
		rc = tpl_fail_undef(R, obj);
	if (!rc)
		rc = tpl_slice(R, obj, p[0], p[1], p[2], out) || tpl_keep_safe(R, tv_is_safe(obj), out);
	tv_release(obj);
	tv_release_n(p, 3);
	return rc;
}

static int eval_node(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	switch (n->kind) {
	case N_CONST:
		tv_retain(n->val);
		*out = n->val;
		return 0;
	case N_NAME:
		return tpl_lookup(R, n->name, out);
	case N_ATTR: case N_ITEM:
		return eval_access(R, n, out);
	case N_SLICE:
		return eval_slice(R, n, out);
	case N_CALL:
		return tpl_eval_call(R, n, NULL, tv_undef(NULL), out);
	case N_FILTER: {
		struct tv in;
		if (tpl_eval(R, n->a, &in))
			return -1;
		int rc = eval_filter(R, n, in, out);
		tv_release(in);
		return rc;
	}
	case N_TEST: return eval_test(R, n, out);
	case N_UNARY: return eval_unary(R, n, out);
	case N_BINARY: return eval_binary(R, n, out);
	case N_AND: case N_OR: return eval_andor(R, n, out);
	case N_COMPARE: return eval_compare(R, n, out);
	case N_CONCAT: return eval_concat(R, n, out);
	case N_COND: {
		struct tv c;
		if (tpl_eval(R, n->b, &c))
			return -1;
		int t = tv_truthy(c);
		tv_release(c);
		if (t)
			return tpl_eval(R, n->a, out);
		if (n->c)
			return tpl_eval(R, n->c, out);
		*out = tv_undef(n);
		return 0;
	}
	case N_LIST: case N_TUPLE: return eval_seq(R, n, out);
	case N_DICT: return eval_dict(R, n, out);
	default:
		return tpl_fail(R, ING_ERR_FORMAT, "internal error: not an expression");
	}
}

int tpl_eval(struct tpl_run *R, const struct tnode *n, struct tv *out)
{
	*out = tv_undef(NULL);
	if (tpl_enter(R))
		return -1;
	const struct tnode *saved = R->at;
	R->at = n;
	int rc = eval_node(R, n, out);
	R->at = saved;
	tpl_leave(R);
	return rc;
}
