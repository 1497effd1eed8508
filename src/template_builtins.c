/* template_builtins.c — what templates can call: the globals (range,
 * dict, namespace, cycler, joiner, and HF's raise_exception and
 * strftime_now), the methods of strings, dicts and lists, the loop object
 * (loop.index, loop.cycle(), ...) and the clock.
 *
 * The environment is jinja2's ImmutableSandboxedEnvironment: methods that
 * would change a list or dict (append, pop, update, ...) exist but fail
 * when called, with jinja2's SecurityError message; range() is capped at
 * 100000 items (the sandbox's MAX_RANGE). */
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "template_int.h"

#define MAX_RANGE 100000

/* -------------------------------------------------------------- methods */

enum tpl_method {
	M_UNSAFE,
	M_STRIP, M_LSTRIP, M_RSTRIP, M_SPLIT, M_RSPLIT, M_SPLITLINES, M_STARTSWITH, M_ENDSWITH,
	M_UPPER, M_LOWER, M_TITLE, M_CAPITALIZE, M_SWAPCASE, M_REPLACE, M_FIND, M_RFIND,
	M_INDEX, M_RINDEX, M_COUNT, M_JOIN, M_FORMAT, M_ISDIGIT, M_ISALPHA, M_ISALNUM,
	M_ISSPACE, M_ISUPPER, M_ISLOWER, M_CENTER, M_LJUST, M_RJUST, M_ZFILL,
	M_REMOVEPREFIX, M_REMOVESUFFIX, M_PARTITION, M_RPARTITION,
	M_KEYS, M_VALUES, M_ITEMS, M_GET, M_COPY,
	M_NEXT, M_RESET, M_CYCLE, M_CHANGED,
};

enum { K_STR = 1, K_DICT = 2, K_LIST = 4, K_CYCLER = 8, K_LOOP = 16 };

static const struct mdef {
	const char *name;
	uint8_t id, kinds;
} methods[] = {
	{ "strip", M_STRIP, K_STR }, { "lstrip", M_LSTRIP, K_STR }, { "rstrip", M_RSTRIP, K_STR },
	{ "split", M_SPLIT, K_STR }, { "rsplit", M_RSPLIT, K_STR },
	{ "splitlines", M_SPLITLINES, K_STR }, { "startswith", M_STARTSWITH, K_STR },
	{ "endswith", M_ENDSWITH, K_STR }, { "upper", M_UPPER, K_STR }, { "lower", M_LOWER, K_STR },
	{ "casefold", M_LOWER, K_STR }, { "title", M_TITLE, K_STR },
	{ "capitalize", M_CAPITALIZE, K_STR }, { "swapcase", M_SWAPCASE, K_STR },
	{ "replace", M_REPLACE, K_STR }, { "find", M_FIND, K_STR }, { "rfind", M_RFIND, K_STR },
	{ "index", M_INDEX, K_STR | K_LIST }, { "rindex", M_RINDEX, K_STR },
	{ "count", M_COUNT, K_STR | K_LIST }, { "join", M_JOIN, K_STR },
	{ "format", M_FORMAT, K_STR }, { "isdigit", M_ISDIGIT, K_STR },
	{ "isnumeric", M_ISDIGIT, K_STR }, { "isdecimal", M_ISDIGIT, K_STR },
	{ "isalpha", M_ISALPHA, K_STR }, { "isalnum", M_ISALNUM, K_STR },
	{ "isspace", M_ISSPACE, K_STR }, { "isupper", M_ISUPPER, K_STR },
	{ "islower", M_ISLOWER, K_STR }, { "center", M_CENTER, K_STR }, { "ljust", M_LJUST, K_STR },
	{ "rjust", M_RJUST, K_STR }, { "zfill", M_ZFILL, K_STR },
	{ "removeprefix", M_REMOVEPREFIX, K_STR }, { "removesuffix", M_REMOVESUFFIX, K_STR },
	{ "partition", M_PARTITION, K_STR }, { "rpartition", M_RPARTITION, K_STR },
	{ "keys", M_KEYS, K_DICT }, { "values", M_VALUES, K_DICT }, { "items", M_ITEMS, K_DICT },
	{ "get", M_GET, K_DICT }, { "copy", M_COPY, K_DICT | K_LIST },
	{ "next", M_NEXT, K_CYCLER }, { "reset", M_RESET, K_CYCLER },
	{ "cycle", M_CYCLE, K_LOOP }, { "changed", M_CHANGED, K_LOOP },
	/* present but refused by the immutable sandbox */
	{ "append", M_UNSAFE, K_LIST }, { "extend", M_UNSAFE, K_LIST },
	{ "insert", M_UNSAFE, K_LIST }, { "pop", M_UNSAFE, K_LIST | K_DICT },
	{ "remove", M_UNSAFE, K_LIST }, { "reverse", M_UNSAFE, K_LIST },
	{ "sort", M_UNSAFE, K_LIST }, { "clear", M_UNSAFE, K_LIST | K_DICT },
	{ "popitem", M_UNSAFE, K_DICT }, { "update", M_UNSAFE, K_DICT },
	{ "setdefault", M_UNSAFE, K_DICT },
};

static int kind_bit(struct tv v)
{
	switch (v.kind) {
	case TV_STR: return K_STR;
	case TV_DICT: return K_DICT;
	case TV_LIST: return v.l->h.flags & TL_GEN ? 0 : K_LIST;
	case TV_CYCLER: return K_CYCLER;
	case TV_LOOP: return K_LOOP;
	default: return 0;
	}
}

int tpl_method_bind(struct tpl_run *R, struct tv obj, struct tstr *name, struct tv *out)
{
	*out = tv_undef(NULL);
	int bit = kind_bit(obj);
	if (!bit)
		return 0;
	for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
		if (!(methods[i].kinds & bit) || !tstr_eq_c(name, methods[i].name))
			continue;
		struct tmethod *m = tpl_obj_new(R, sizeof *m, TO_METHOD);
		if (!m)
			return -1;
		if (obj.kind >= TV_LIST && obj.o->depth >= TPL_VALUE_DEPTH_MAX) {
			ing_free(m);
			return tpl_fail(R, ING_ERR_RANGE, "values nested too deeply");
		}
		m->h.depth = (uint16_t)(1 + (obj.kind >= TV_LIST ? obj.o->depth : 0));
		tv_retain(obj);
		m->self = obj;
		m->id = methods[i].id;
		m->name = methods[i].name;
		out->kind = TV_METHOD;
		out->mt = m;
		return 0;
	}
	return 0;
}

#define BIND(who, names, nreq, slot)                                                   \
	tpl_args_bind(R, who, a, names, (int)(sizeof names / sizeof names[0]), nreq, slot)

static int str_pred(struct tstr *s, int id)
{
	if (!s->len)
		return 0;
	int cased = 0;
	for (size_t i = 0; i < s->len;) {
		uint32_t cp = utf8_next(s->s, s->len, &i);
		int ok = 1;
		switch (id) {
		case M_ISDIGIT: ok = cp_isdigit(cp); break;
		case M_ISALPHA: ok = cp_isalpha(cp); break;
		case M_ISALNUM: ok = cp_isalpha(cp) || cp_isdigit(cp); break;
		case M_ISSPACE: ok = cp_isspace(cp); break;
		case M_ISUPPER: case M_ISLOWER:
			if (cp_upper(cp) != cp || cp_lower(cp) != cp) {
				cased = 1;
				ok = id == M_ISUPPER ? cp_upper(cp) == cp : cp_lower(cp) == cp;
			}
			break;
		}
		if (!ok)
			return 0;
	}
	return id == M_ISUPPER || id == M_ISLOWER ? cased : 1;
}

static int affix(struct tpl_run *R, struct tstr *s, struct tv arg, int end, int *out)
{
	struct tv *v = &arg;
	size_t n = 1;
	if (arg.kind == TV_LIST && (arg.l->h.flags & TL_TUPLE)) {
		v = arg.l->v;
		n = arg.l->n;
	}
	*out = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].kind != TV_STR)
			return tpl_fail(R, ING_ERR_FORMAT, "%s first arg must be str or a tuple of str, not %s",
					end ? "endswith" : "startswith", tv_type_name(v[i]));
		struct tstr *p = v[i].s;
		if (p->len <= s->len && !memcmp(end ? s->s + s->len - p->len : s->s, p->s, p->len))
			*out = 1;
	}
	return 0;
}

static int pad(struct tpl_run *R, struct tstr *s, int64_t width, struct tv fill, int id,
	       struct tv *out)
{
	const char *f = " ";
	size_t flen = 1;
	if (fill.kind == TV_STR) {
		if (tstr_ncp(fill.s) != 1)
			return tpl_fail(R, ING_ERR_FORMAT, "The fill character must be exactly one character long");
		f = fill.s->s;
		flen = fill.s->len;
	}
	int64_t n = tstr_ncp(s), p = width > n ? width - n : 0;
	if (p > (int64_t)R->max_output)
		return tpl_fail(R, ING_ERR_RANGE, "padding exceeds the output limit");
	int64_t left = id == M_RJUST ? p : id == M_LJUST ? 0 : p / 2 + (p & width & 1);
	struct tbuf b = { 0 };
	int rc = 0;
	for (int64_t i = 0; i < left && !rc; i++)
		rc = tpl_buf_put(R, &b, f, flen);
	if (!rc)
		rc = tpl_buf_put(R, &b, s->s, s->len);
	for (int64_t i = left; i < p && !rc; i++)
		rc = tpl_buf_put(R, &b, f, flen);
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	return rc;
}

static int partition(struct tpl_run *R, struct tstr *s, struct tv sepv, int rev, struct tv *out)
{
	struct tstr *sep;
	if (tpl_arg_str(R, "partition", sepv, &sep))
		return -1;
	if (!sep->len)
		return tpl_fail(R, ING_ERR_FORMAT, "empty separator");
	struct tv parts;
	if (tpl_str_split(R, s, sep, 1, rev, &parts))
		return -1;
	struct tlist *t, *p = parts.l;
	int rc = tpl_list_new(R, 3, &t);
	if (!rc) {
		t->h.flags |= TL_TUPLE;
		struct tv empty, sepval = tv_str_v(sep);
		int found = p->n == 2;
		rc = tpl_str_v(R, "", 0, &empty);
		struct tv v0 = found ? p->v[0] : rev ? empty : p->v[0];
		struct tv v1 = found ? sepval : empty;
		struct tv v2 = found ? p->v[1] : rev ? p->v[0] : empty;
		if (!rc) {
			tv_retain(v0); tv_retain(v1); tv_retain(v2);
			rc = tpl_list_push(R, t, v0) || tpl_list_push(R, t, v1) || tpl_list_push(R, t, v2);
			tv_release(empty);
		}
		if (rc)
			tobj_release(&t->h);
		else
			*out = tv_list_v(t);
	}
	tv_release(parts);
	return rc ? -1 : 0;
}

static int str_join(struct tpl_run *R, struct tstr *sep, struct tv it, struct tv *out)
{
	struct tlist *l;
	if (tpl_iterate(R, it, &l))
		return -1;
	struct tbuf b = { 0 };
	int rc = 0;
	for (size_t i = 0; i < l->n && !rc; i++) {
		if (l->v[i].kind != TV_STR) {
			rc = tpl_fail(R, ING_ERR_FORMAT, "sequence item %zu: expected str instance, %s found",
				      i, tv_type_name(l->v[i]));
			break;
		}
		rc = (i && tpl_buf_put(R, &b, sep->s, sep->len)) ||
		     tpl_buf_put(R, &b, l->v[i].s->s, l->v[i].s->len);
	}
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	tobj_release(&l->h);
	return rc ? -1 : 0;
}

static int str_find(struct tpl_run *R, struct tstr *s, struct tpl_args *a, int id, struct tv *out)
{
	static const char *const names[] = { "sub", "start", "end" };
	struct tv slot[3];
	struct tstr *sub;
	int64_t start, end;
	if (BIND("find", names, 1, slot) || tpl_arg_str(R, "find", slot[0], &sub) ||
	    tpl_arg_int(R, "find", slot[1], 0, &start) ||
	    tpl_arg_int(R, "find", slot[2], INT32_MAX, &end))
		return -1;
	int64_t k = tpl_str_find(s, sub, start, end, id == M_RFIND || id == M_RINDEX);
	if (k < 0 && (id == M_INDEX || id == M_RINDEX))
		return tpl_fail(R, ING_ERR_FORMAT, "substring not found");
	*out = tv_int(k);
	return 0;
}

static int str_method(struct tpl_run *R, struct tstr *s, int id, struct tpl_args *a, struct tv *out)
{
	static const char *const n_chars[] = { "chars" };
	static const char *const n_split[] = { "sep", "maxsplit" };
	static const char *const n_keep[] = { "keepends" };
	static const char *const n_affix[] = { "prefix", "start", "end" };
	static const char *const n_repl[] = { "old", "new", "count" };
	static const char *const n_one[] = { "value" };
	static const char *const n_pad[] = { "width", "fillchar" };
	struct tv slot[3];
	int64_t k;
	int r;
	switch (id) {
	case M_STRIP: case M_LSTRIP: case M_RSTRIP:
		if (BIND("strip", n_chars, 0, slot))
			return -1;
		return tpl_str_strip(R, s, slot[0].kind == TV_STR ? slot[0].s : NULL,
				     id == M_STRIP ? STRIP_BOTH : id == M_LSTRIP ? STRIP_LEFT : STRIP_RIGHT, out);
	case M_SPLIT: case M_RSPLIT:
		if (BIND("split", n_split, 0, slot) || tpl_arg_int(R, "split", slot[1], -1, &k))
			return -1;
		if (slot[0].kind != TV_UNDEF && slot[0].kind != TV_NONE && slot[0].kind != TV_STR)
			return tpl_fail(R, ING_ERR_FORMAT, "must be str or None, not %s", tv_type_name(slot[0]));
		return tpl_str_split(R, s, slot[0].kind == TV_STR ? slot[0].s : NULL, k, id == M_RSPLIT, out);
	case M_SPLITLINES: {
		struct tlist *l;
		if (BIND("splitlines", n_keep, 0, slot) ||
		    tpl_splitlines(R, s, tpl_arg_bool(slot[0], 0), &l))
			return -1;
		*out = tv_list_v(l);
		return 0;
	}
	case M_STARTSWITH: case M_ENDSWITH:
		if (BIND("startswith", n_affix, 1, slot) || affix(R, s, slot[0], id == M_ENDSWITH, &r))
			return -1;
		*out = tv_bool(r);
		return 0;
	case M_UPPER: case M_LOWER: case M_TITLE: case M_CAPITALIZE: case M_SWAPCASE:
		return tpl_str_case(R, s, id == M_UPPER ? CASE_UPPER : id == M_LOWER ? CASE_LOWER
				    : id == M_TITLE ? CASE_TITLE : id == M_CAPITALIZE ? CASE_CAPITALIZE
				    : CASE_SWAP, out);
	case M_REPLACE: {
		struct tstr *o, *nw;
		if (BIND("replace", n_repl, 2, slot) || tpl_arg_str(R, "replace", slot[0], &o) ||
		    tpl_arg_str(R, "replace", slot[1], &nw) || tpl_arg_int(R, "replace", slot[2], -1, &k))
			return -1;
		return tpl_str_replace(R, s, o, nw, k, out);
	}
	case M_FIND: case M_RFIND: case M_INDEX: case M_RINDEX:
		return str_find(R, s, a, id, out);
	case M_COUNT: {
		struct tstr *sub;
		if (BIND("count", n_one, 1, slot) || tpl_arg_str(R, "count", slot[0], &sub))
			return -1;
		*out = tv_int(tpl_str_count(s, sub));
		return 0;
	}
	case M_JOIN:
		if (BIND("join", n_one, 1, slot))
			return -1;
		return str_join(R, s, slot[0], out);
	case M_FORMAT:
		return tpl_str_format(R, s, a, out);
	case M_ISDIGIT: case M_ISALPHA: case M_ISALNUM: case M_ISSPACE: case M_ISUPPER: case M_ISLOWER:
		*out = tv_bool(str_pred(s, id));
		return 0;
	case M_CENTER: case M_LJUST: case M_RJUST:
		if (BIND("center", n_pad, 1, slot) || tpl_arg_int(R, "center", slot[0], 0, &k))
			return -1;
		return pad(R, s, k, slot[1], id, out);
	case M_ZFILL: {
		if (BIND("zfill", n_one, 1, slot) || tpl_arg_int(R, "zfill", slot[0], 0, &k))
			return -1;
		struct tv zero;
		int sign = s->len && (s->s[0] == '-' || s->s[0] == '+');
		if (tpl_str_v(R, "0", 1, &zero))
			return -1;
		int rc;
		if (!sign) {
			rc = pad(R, s, k, zero, M_RJUST, out);
		} else {
			struct tv rest, padded;
			rc = tpl_str_v(R, s->s + 1, s->len - 1, &rest);
			if (!rc) {
				rc = pad(R, rest.s, k - 1, zero, M_RJUST, &padded);
				tv_release(rest);
			}
			if (!rc) {
				struct tv sg;
				rc = tpl_str_v(R, s->s, 1, &sg);
				if (!rc) {
					rc = tpl_str_cat(R, sg.s, padded.s, out);
					tv_release(sg);
				}
				tv_release(padded);
			}
		}
		tv_release(zero);
		return rc;
	}
	case M_REMOVEPREFIX: case M_REMOVESUFFIX: {
		struct tstr *p;
		if (BIND("removeprefix", n_one, 1, slot) || tpl_arg_str(R, "removeprefix", slot[0], &p) ||
		    affix(R, s, slot[0], id == M_REMOVESUFFIX, &r))
			return -1;
		size_t cut = r ? p->len : 0;
		return tpl_str_v(R, id == M_REMOVEPREFIX ? s->s + cut : s->s, s->len - cut, out);
	}
	case M_PARTITION: case M_RPARTITION:
		if (BIND("partition", n_one, 1, slot))
			return -1;
		return partition(R, s, slot[0], id == M_RPARTITION, out);
	}
	return tpl_fail(R, ING_ERR_FORMAT, "unsupported str method");
}

static int dict_method(struct tpl_run *R, struct tdict *d, int id, struct tpl_args *a, struct tv *out)
{
	static const char *const n_get[] = { "key", "default" };
	struct tv slot[2];
	if (id == M_GET) {
		if (BIND("get", n_get, 1, slot))
			return -1;
		struct tv *v = tpl_dict_get(d, slot[0]);
		*out = v ? *v : slot[1].kind == TV_UNDEF ? tv_none() : slot[1];
		tv_retain(*out);
		return 0;
	}
	if (a->npos || a->nkw)
		return tpl_fail(R, ING_ERR_FORMAT, "dict method takes no arguments");
	if (id == M_COPY) {
		struct tdict *c;
		if (tpl_dict_new(R, &c))
			return -1;
		for (size_t i = 0; i < d->n; i++) {
			tv_retain(d->e[i].k);
			tv_retain(d->e[i].v);
			if (tpl_dict_set(R, c, d->e[i].k, d->e[i].v)) {
				tobj_release(&c->h);
				return -1;
			}
		}
		*out = tv_dict_v(c);
		return 0;
	}
	struct tlist *l;
	if (tpl_list_new(R, d->n, &l))
		return -1;
	for (size_t i = 0; i < d->n; i++) {
		struct tv v;
		if (id == M_ITEMS) {
			struct tlist *t;
			if (tpl_list_new(R, 2, &t)) {
				tobj_release(&l->h);
				return -1;
			}
			t->h.flags |= TL_TUPLE;
			tv_retain(d->e[i].k);
			tv_retain(d->e[i].v);
			v = tv_list_v(t);
			if (tpl_list_push(R, t, d->e[i].k) || tpl_list_push(R, t, d->e[i].v)) {
				tv_release(v);
				tobj_release(&l->h);
				return -1;
			}
		} else {
			v = id == M_KEYS ? d->e[i].k : d->e[i].v;
			tv_retain(v);
		}
		if (tpl_list_push(R, l, v)) {
			tobj_release(&l->h);
			return -1;
		}
	}
	*out = tv_list_v(l);
	return 0;
}

static int list_method(struct tpl_run *R, struct tlist *l, int id, struct tpl_args *a, struct tv *out)
{
	static const char *const n_one[] = { "value" };
	struct tv slot[1];
	if (id == M_COPY) {
		struct tlist *c;
		if (tpl_list_new(R, l->n, &c))
			return -1;
		c->h.flags = l->h.flags;
		for (size_t i = 0; i < l->n; i++) {
			tv_retain(l->v[i]);
			if (tpl_list_push(R, c, l->v[i])) {
				tobj_release(&c->h);
				return -1;
			}
		}
		*out = tv_list_v(c);
		return 0;
	}
	if (BIND(id == M_INDEX ? "index" : "count", n_one, 1, slot))
		return -1;
	int64_t k = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (!tv_eq(l->v[i], slot[0]))
			continue;
		if (id == M_INDEX) {
			*out = tv_int((int64_t)i);
			return 0;
		}
		k++;
	}
	if (id == M_INDEX)
		return tpl_fail(R, ING_ERR_FORMAT, "value is not in list");
	*out = tv_int(k);
	return 0;
}

static int loop_method(struct tpl_run *R, struct tloop *lp, int id, struct tpl_args *a,
		       struct tv *out)
{
	if (a->nkw)
		return tpl_fail(R, ING_ERR_FORMAT, "loop.%s() takes no keyword arguments",
				id == M_CYCLE ? "cycle" : "changed");
	if (id == M_CYCLE) {
		if (!a->npos)
			return tpl_fail(R, ING_ERR_FORMAT, "no items for cycling given");
		*out = a->pos[lp->i % a->npos];
		tv_retain(*out);
		return 0;
	}
	struct tlist *t;
	if (tpl_list_new(R, (size_t)a->npos, &t))
		return -1;
	for (int i = 0; i < a->npos; i++) {
		tv_retain(a->pos[i]);
		if (tpl_list_push(R, t, a->pos[i])) {
			tobj_release(&t->h);
			return -1;
		}
	}
	struct tv now = tv_list_v(t);
	int changed = lp->changed.kind == TV_UNDEF || !tv_eq(lp->changed, now);
	if (changed) {
		tv_release(lp->changed);
		lp->changed = now;
	} else {
		tv_release(now);
	}
	*out = tv_bool(changed);
	return 0;
}

static int cycler_method(struct tpl_run *R, struct tcycler *c, int id, struct tv *out)
{
	if (id == M_RESET) {
		c->pos = 0;
		*out = tv_none();
		return 0;
	}
	if (!c->items->n)
		return tpl_fail(R, ING_ERR_FORMAT, "cycler has no items");
	*out = c->items->v[c->pos % (int64_t)c->items->n];
	tv_retain(*out);
	c->pos = (c->pos + 1) % (int64_t)c->items->n;
	return 0;
}

/* The str methods whose result markupsafe makes a Markup again. */
static int keeps_markup(int id)
{
	switch (id) {
	case M_STRIP: case M_LSTRIP: case M_RSTRIP: case M_UPPER: case M_LOWER: case M_TITLE:
	case M_CAPITALIZE: case M_SWAPCASE: case M_REPLACE: case M_CENTER: case M_LJUST:
	case M_RJUST: case M_ZFILL: case M_REMOVEPREFIX: case M_REMOVESUFFIX:
		return 1;
	default:
		return 0;
	}
}

int tpl_method_call(struct tpl_run *R, struct tmethod *m, struct tpl_args *a, struct tv *out)
{
	struct tv self = m->self;
	if (m->id == M_UNSAFE)
		return tpl_fail(R, ING_ERR_FORMAT, "access to attribute '%s' of '%s' object is unsafe.",
				m->name, tv_type_name(self));
	switch (self.kind) {
	case TV_STR: {
		/* markupsafe: methods of a Markup return Markup (pieces too) */
		int safe = tv_is_safe(self), pieces = m->id == M_SPLIT || m->id == M_RSPLIT ||
			m->id == M_SPLITLINES || m->id == M_PARTITION || m->id == M_RPARTITION;
		if (str_method(R, self.s, m->id, a, out) || tpl_keep_safe(R, safe && keeps_markup(m->id), out))
			return -1;
		if (safe && pieces && out->kind == TV_LIST)
			for (size_t i = 0; i < out->l->n; i++)
				if (tpl_keep_safe(R, 1, &out->l->v[i]))
					return -1;
		return 0;
	}
	case TV_DICT: return dict_method(R, self.d, m->id, a, out);
	case TV_LIST: return list_method(R, self.l, m->id, a, out);
	case TV_LOOP: return loop_method(R, self.lp, m->id, a, out);
	case TV_CYCLER: return cycler_method(R, self.cy, m->id, out);
	default: return tpl_fail(R, ING_ERR_FORMAT, "bad method");
	}
}

/* ----------------------------------------------------- loop and cycler */

int tpl_loop_attr(struct tpl_run *R, struct tloop *lp, struct tstr *name, struct tv *out)
{
	int64_t i = lp->i, n = (int64_t)lp->items->n;
	const char *s = name->s;
	if (!strcmp(s, "index")) *out = tv_int(i + 1);
	else if (!strcmp(s, "index0")) *out = tv_int(i);
	else if (!strcmp(s, "revindex")) *out = tv_int(n - i);
	else if (!strcmp(s, "revindex0")) *out = tv_int(n - i - 1);
	else if (!strcmp(s, "first")) *out = tv_bool(i == 0);
	else if (!strcmp(s, "last")) *out = tv_bool(i == n - 1);
	else if (!strcmp(s, "length")) *out = tv_int(n);
	else if (!strcmp(s, "depth")) *out = tv_int(lp->depth0 + 1);
	else if (!strcmp(s, "depth0")) *out = tv_int(lp->depth0);
	else if (!strcmp(s, "previtem") || !strcmp(s, "nextitem")) {
		int64_t j = s[0] == 'p' ? i - 1 : i + 1;
		if (j < 0 || j >= n) {
			*out = tv_undef(NULL);
		} else {
			*out = lp->items->v[j];
			tv_retain(*out);
		}
	} else {
		struct tv self = { .kind = TV_LOOP };
		self.lp = lp;
		return tpl_method_bind(R, self, name, out);
	}
	return 0;
}

int tpl_cycler_attr(struct tpl_run *R, struct tv obj, struct tstr *name, struct tv *out)
{
	*out = tv_undef(NULL);
	if (obj.kind == TV_CYCLER && tstr_eq_c(name, "current")) {
		struct tcycler *c = obj.cy;
		if (c->items->n) {
			*out = c->items->v[c->pos % (int64_t)c->items->n];
			tv_retain(*out);
		}
		return 0;
	}
	if (obj.kind == TV_CYCLER)
		return tpl_method_bind(R, obj, name, out);
	return 0;
}

/* -------------------------------------------------------------- globals */

static int g_range(struct tpl_run *R, struct tpl_args *a, struct tv *out)
{
	int64_t v[3] = { 0, 0, 1 };
	if (a->nkw || a->npos < 1 || a->npos > 3)
		return tpl_fail(R, ING_ERR_FORMAT, "range expected 1 to 3 positional arguments");
	for (int i = 0; i < a->npos; i++)
		if (tpl_arg_int(R, "range", a->pos[i], 0, &v[a->npos == 1 ? 1 : i]))
			return -1;
	if (!v[2])
		return tpl_fail(R, ING_ERR_FORMAT, "range() arg 3 must not be zero");
	int64_t n = v[2] > 0 ? (v[1] > v[0] ? (v[1] - v[0] + v[2] - 1) / v[2] : 0)
			     : (v[0] > v[1] ? (v[0] - v[1] - v[2] - 1) / -v[2] : 0);
	if (n > MAX_RANGE)
		return tpl_fail(R, ING_ERR_RANGE, "Range too big. The sandbox blocks ranges larger than "
				"MAX_RANGE (%d).", MAX_RANGE);
	struct tlist *l;
	if (tpl_list_new(R, (size_t)n, &l))
		return -1;
	for (int64_t i = 0; i < n; i++)
		l->v[l->n++] = tv_int(v[0] + i * v[2]);
	*out = tv_list_v(l);
	return 0;
}

/* dict(mapping or pairs, **kwargs) into d. */
static int dict_fill(struct tpl_run *R, struct tdict *d, struct tpl_args *a)
{
	if (a->npos > 1)
		return tpl_fail(R, ING_ERR_FORMAT, "dict expected at most 1 argument, got %d", a->npos);
	if (a->npos) {
		struct tv src = a->pos[0];
		if (src.kind == TV_DICT || src.kind == TV_NS) {
			for (size_t i = 0; i < src.d->n; i++) {
				tv_retain(src.d->e[i].k);
				tv_retain(src.d->e[i].v);
				if (tpl_dict_set(R, d, src.d->e[i].k, src.d->e[i].v))
					return -1;
			}
		} else {
			struct tlist *l;
			if (tpl_iterate(R, src, &l))
				return -1;
			for (size_t i = 0; i < l->n; i++) {
				struct tv p = l->v[i];
				if (!tv_is_seq(p) || p.l->n != 2) {
					tobj_release(&l->h);
					return tpl_fail(R, ING_ERR_FORMAT, "dictionary update sequence element "
							"#%zu has the wrong length", i);
				}
				tv_retain(p.l->v[0]);
				tv_retain(p.l->v[1]);
				if (tpl_dict_set(R, d, p.l->v[0], p.l->v[1])) {
					tobj_release(&l->h);
					return -1;
				}
			}
			tobj_release(&l->h);
		}
	}
	for (int k = 0; k < a->nkw; k++) {
		tv_retain(tv_str_v(a->kwn[k]));
		tv_retain(a->kwv[k]);
		if (tpl_dict_set(R, d, tv_str_v(a->kwn[k]), a->kwv[k]))
			return -1;
	}
	return 0;
}

static int g_dict(struct tpl_run *R, struct tpl_args *a, struct tv *out)
{
	struct tdict *d;
	if (tpl_dict_new(R, &d))
		return -1;
	if (dict_fill(R, d, a)) {
		tobj_release(&d->h);
		return -1;
	}
	*out = tv_dict_v(d);
	return 0;
}

static int g_namespace(struct tpl_run *R, struct tpl_args *a, struct tv *out)
{
	struct tdict *d;
	if (tpl_dict_new(R, &d))
		return -1;
	struct tv v = { .kind = TV_NS };
	v.d = d;
	/* Registered first: the render empties every namespace at its end. */
	d->h.refs++;
	if (tpl_list_push(R, R->namespaces, v)) {
		tobj_release(&d->h);
		return -1;
	}
	if (dict_fill(R, d, a)) {
		tobj_release(&d->h);
		return -1;
	}
	*out = v;
	return 0;
}

static int g_cycler(struct tpl_run *R, struct tpl_args *a, struct tv *out, int joiner)
{
	static const char *const names[] = { "sep" };
	struct tv slot[1];
	struct tlist *l;
	if (joiner && tpl_args_bind(R, "joiner", a, names, 1, 0, slot))
		return -1;
	if (!joiner && a->nkw)
		return tpl_fail(R, ING_ERR_FORMAT, "cycler() takes no keyword arguments");
	if (tpl_list_new(R, (size_t)a->npos + 1, &l))
		return -1;
	int rc = 0;
	if (joiner) {
		struct tv sep = slot[0];
		if (sep.kind == TV_UNDEF)
			rc = tpl_str_v(R, ", ", 2, &sep);
		else
			tv_retain(sep);
		if (!rc)
			rc = tpl_list_push(R, l, sep);
	} else {
		for (int i = 0; i < a->npos && !rc; i++) {
			tv_retain(a->pos[i]);
			rc = tpl_list_push(R, l, a->pos[i]);
		}
	}
	struct tcycler *c = rc ? NULL : tpl_obj_new(R, sizeof *c, TO_CYCLER);
	if (!c) {
		tobj_release(&l->h);
		return -1;
	}
	c->items = l;
	c->h.depth = (uint16_t)(l->h.depth + 1);
	*out = (struct tv){ .kind = (uint8_t)(joiner ? TV_JOINER : TV_CYCLER) };
	out->cy = c;
	return 0;
}

static int g_cycler_new(struct tpl_run *R, struct tpl_args *a, struct tv *out) { return g_cycler(R, a, out, 0); }
static int g_joiner_new(struct tpl_run *R, struct tpl_args *a, struct tv *out) { return g_cycler(R, a, out, 1); }

static int g_raise_exception(struct tpl_run *R, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "message" };
	struct tv slot[1], s;
	if (BIND("raise_exception", names, 1, slot) || tpl_to_str(R, slot[0], &s))
		return -1;
	tpl_fail_raw(R, ING_ERR_INVALID, s.s->s, s.s->len);
	tv_release(s);
	return -1;
}

static int g_strftime_now(struct tpl_run *R, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "format" };
	struct tv slot[1];
	struct tstr *fmt;
	if (BIND("strftime_now", names, 1, slot) || tpl_arg_str(R, "strftime_now", slot[0], &fmt))
		return -1;
	return tpl_strftime(R, fmt, out);
}

static const struct tpl_func globals[] = {
	{ "range", g_range }, { "dict", g_dict }, { "namespace", g_namespace },
	{ "cycler", g_cycler_new }, { "joiner", g_joiner_new },
	{ "raise_exception", g_raise_exception }, { "strftime_now", g_strftime_now },
};

const struct tpl_func *tpl_global_find(const char *name)
{
	for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
		if (!strcmp(globals[i].name, name))
			return &globals[i];
	return NULL;
}

/* ---------------------------------------------------------------- clock */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_init(void)
{
	c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

/* Fills tm_wday/tm_yday of a broken-down time without time zones. */
static void tm_normalize(struct tm *tm)
{
	struct tm t = *tm;
	t.tm_isdst = 0;
	time_t s = timegm(&t);
	struct tm g;
	if (gmtime_r(&s, &g))
		*tm = g;
}

int tpl_clock_init(struct tpl_run *R, const struct tm *fixed)
{
	if (fixed) {
		R->now = *fixed;
		tm_normalize(&R->now);
		return 0;
	}
	const char *env = getenv("INGOT_TEMPLATE_NOW");
	if (env && *env) {
		struct tm tm = { 0 };
		int n = sscanf(env, "%d-%d-%d%*[ T]%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			       &tm.tm_hour, &tm.tm_min, &tm.tm_sec);
		if (n < 3 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31)
			return tpl_fail(R, ING_ERR_INVALID, "INGOT_TEMPLATE_NOW: expected "
					"\"YYYY-MM-DD HH:MM:SS\", got \"%.40s\"", env);
		tm.tm_year -= 1900;
		tm.tm_mon -= 1;
		R->now = tm;
		tm_normalize(&R->now);
		return 0;
	}
	time_t t = time(NULL);
	if (!localtime_r(&t, &R->now))
		return tpl_fail(R, ING_ERR_IO, "cannot read the clock");
	return 0;
}

int tpl_strftime(struct tpl_run *R, struct tstr *fmt, struct tv *out)
{
	pthread_once(&c_locale_once, c_locale_init);
	if (!fmt->len)
		return tpl_str_v(R, "", 0, out);
	for (size_t cap = 256; cap <= 65536; cap *= 4) {
		char *buf = ing_malloc(cap);
		if (!buf)
			return tpl_fail_nomem(R);
		size_t n = c_locale ? strftime_l(buf, cap, fmt->s, &R->now, c_locale)
				    : strftime(buf, cap, fmt->s, &R->now);
		if (n > 0 || cap * 4 > 65536) {
			int rc = tpl_str_v(R, buf, n, out);
			ing_free(buf);
			return rc;
		}
		ing_free(buf);
	}
	return tpl_str_v(R, "", 0, out);
}
