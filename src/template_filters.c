/* template_filters.c — jinja2's built-in filters (the ones chat templates
 * use, with jinja2 3.1's arguments and results) and HF's tojson.
 *
 * Filters that are generators in jinja2 (map, select, reject, selectattr,
 * rejectattr, unique, batch, reverse, items) return a list flagged TL_GEN:
 * it iterates and converts with |list like a generator, and refuses what
 * a generator refuses (|length, |tojson, indexing), as the reference does.
 * The tests ("is ...") live in template_tests.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "template_int.h"

/* ------------------------------------------------------------ arguments */

int tpl_args_bind(struct tpl_run *R, const char *who, struct tpl_args *a,
		  const char *const *names, int n, int nreq, struct tv *slot)
{
	unsigned given = 0;
	for (int i = 0; i < n; i++)
		slot[i] = tv_undef(NULL);
	if (a->npos > n)
		return tpl_fail(R, ING_ERR_FORMAT, "%s() takes at most %d argument(s) (%d given)", who, n,
				a->npos);
	for (int i = 0; i < a->npos; i++) {
		slot[i] = a->pos[i];
		given |= 1u << i;
	}
	for (int k = 0; k < a->nkw; k++) {
		int i = 0;
		while (i < n && !tstr_eq_c(a->kwn[k], names[i]))
			i++;
		if (i == n)
			return tpl_fail(R, ING_ERR_FORMAT, "%s() got an unexpected keyword argument '%s'", who,
					a->kwn[k]->s);
		if (given & (1u << i))
			return tpl_fail(R, ING_ERR_FORMAT, "%s() got multiple values for argument '%s'", who,
					names[i]);
		slot[i] = a->kwv[k];
		given |= 1u << i;
	}
	for (int i = 0; i < nreq; i++)
		if (!(given & (1u << i)))
			return tpl_fail(R, ING_ERR_FORMAT, "%s() missing required argument '%s'", who,
					names[i]);
	return 0;
}

int tpl_arg_int(struct tpl_run *R, const char *who, struct tv v, int64_t def, int64_t *out)
{
	if (v.kind == TV_UNDEF || v.kind == TV_NONE) {
		*out = def;
		return 0;
	}
	if (v.kind == TV_INT || v.kind == TV_BOOL) {
		*out = v.i;
		return 0;
	}
	if (v.kind == TV_FLOAT && v.f == floor(v.f) && fabs(v.f) < 9e18) {
		*out = (int64_t)v.f;
		return 0;
	}
	return tpl_fail(R, ING_ERR_FORMAT, "%s(): expected an integer, got %s", who, tv_type_name(v));
}

int tpl_arg_bool(struct tv v, int def)
{
	return v.kind == TV_UNDEF ? def : tv_truthy(v);
}

int tpl_arg_str(struct tpl_run *R, const char *who, struct tv v, struct tstr **out)
{
	if (v.kind != TV_STR)
		return tpl_fail(R, ING_ERR_FORMAT, "%s(): expected a string, got %s", who, tv_type_name(v));
	*out = v.s;
	return 0;
}

#define BIND(who, names, nreq, slot)                                                   \
	tpl_args_bind(R, who, a, names, (int)(sizeof names / sizeof names[0]), nreq, slot)

static struct tv as_gen(struct tlist *l)
{
	l->h.flags |= TL_GEN;
	return tv_list_v(l);
}

/* Applies str() and hands the string to f. */
static int with_str(struct tpl_run *R, struct tv in, struct tv *s)
{
	if (in.kind == TV_UNDEF) {
		return tpl_str_v(R, "", 0, s);
	}
	return tpl_to_str(R, in, s);
}

/* ------------------------------------------------------- string filters */

static int f_case(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out, int how)
{
	struct tv s;
	if (a->npos || a->nkw)
		return tpl_fail(R, ING_ERR_FORMAT, "filter takes no arguments");
	if (with_str(R, in, &s))
		return -1;
	int rc = tpl_str_case(R, s.s, how, out) ||
		 tpl_keep_safe(R, how != CASE_JTITLE && tv_is_safe(in), out);
	tv_release(s);
	return rc ? -1 : 0;
}

static int f_upper(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out) { return f_case(R, in, a, out, CASE_UPPER); }
static int f_lower(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out) { return f_case(R, in, a, out, CASE_LOWER); }
static int f_title(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out) { return f_case(R, in, a, out, CASE_JTITLE); }
static int f_capitalize(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out) { return f_case(R, in, a, out, CASE_CAPITALIZE); }

static int f_trim(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "chars" };
	struct tv slot[1], s;
	if (BIND("trim", names, 0, slot) || with_str(R, in, &s))
		return -1;
	struct tstr *chars = slot[0].kind == TV_STR ? slot[0].s : NULL;
	int rc = tpl_str_strip(R, s.s, chars, STRIP_BOTH, out) || tpl_keep_safe(R, tv_is_safe(in), out);
	tv_release(s);
	return rc ? -1 : 0;
}

static int f_string(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	return with_str(R, in, out);
}

static int f_replace(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "old", "new", "count" };
	struct tv slot[3], s, o, nw;
	int64_t count;
	if (BIND("replace", names, 2, slot) || tpl_arg_int(R, "replace", slot[2], -1, &count))
		return -1;
	if (with_str(R, in, &s))
		return -1;
	int rc = -1;
	if (!with_str(R, slot[0], &o)) {
		if (!with_str(R, slot[1], &nw)) {
			rc = tpl_str_replace(R, s.s, o.s, nw.s, count, out);
			tv_release(nw);
		}
		tv_release(o);
	}
	tv_release(s);
	return rc;
}

static int f_escape(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	return tpl_html_escape(R, in, 0, out);
}

static int f_forceescape(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	return tpl_html_escape(R, in, 1, out);
}

static int f_safe(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	return with_str(R, in, out) || tpl_keep_safe(R, 1, out) ? -1 : 0;
}

/* Python's str.splitlines() line boundaries; pieces exclude them. */
int tpl_splitlines(struct tpl_run *R, struct tstr *s, int keepends, struct tlist **out)
{
	struct tlist *l;
	if (tpl_list_new(R, 4, &l))
		return -1;
	size_t b = 0, i = 0;
	while (i < s->len) {
		size_t at = i;
		uint32_t cp = utf8_next(s->s, s->len, &i);
		int brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) ||
			  cp == 0x85 || cp == 0x2028 || cp == 0x2029;
		if (!brk)
			continue;
		if (cp == '\r' && i < s->len && s->s[i] == '\n')
			i++;
		struct tv v;
		if (tpl_str_v(R, s->s + b, (keepends ? i : at) - b, &v) || tpl_list_push(R, l, v)) {
			tobj_release(&l->h);
			return -1;
		}
		b = i;
	}
	if (b < s->len) {
		struct tv v;
		if (tpl_str_v(R, s->s + b, s->len - b, &v) || tpl_list_push(R, l, v)) {
			tobj_release(&l->h);
			return -1;
		}
	}
	*out = l;
	return 0;
}

static int indent_lines(struct tpl_run *R, struct tlist *lines, struct tstr *ind, int first,
			int blank, struct tbuf *b)
{
	for (size_t i = 0; i < lines->n; i++) {
		struct tstr *ln = lines->v[i].s;
		if (i && tpl_buf_putc(R, b, '\n'))
			return -1;
		int pad = i ? (blank || ln->len) : first;
		if ((pad && tpl_buf_put(R, b, ind->s, ind->len)) || tpl_buf_put(R, b, ln->s, ln->len))
			return -1;
	}
	return 0;
}

static int f_indent(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	if (in.kind == TV_UNDEF) /* jinja2: these use the value itself */
		return tpl_fail_undef(R, in);
	if (in.kind != TV_STR) /* jinja2 appends "\n" to the value itself */
		return tpl_fail(R, ING_ERR_FORMAT, "indent: expected a string, got %s", tv_type_name(in));
	static const char *const names[] = { "width", "first", "blank" };
	struct tv slot[3], s, ind;
	int64_t w = 4;
	if (BIND("indent", names, 0, slot))
		return -1;
	if (slot[0].kind == TV_STR) {
		tv_retain(slot[0]);
		ind = slot[0];
	} else {
		if (tpl_arg_int(R, "indent", slot[0], 4, &w))
			return -1;
		struct tv sp;
		if (tpl_str_v(R, " ", 1, &sp))
			return -1;
		int rc = tpl_binop(R, OP_MUL, sp, tv_int(w), &ind);
		tv_release(sp);
		if (rc)
			return -1;
	}
	struct tlist *lines = NULL;
	int rc = with_str(R, in, &s);
	if (!rc) {
		/* jinja appends a newline first so that a trailing one survives */
		struct tv nl, s2;
		rc = tpl_str_v(R, "\n", 1, &nl) || tpl_str_cat(R, s.s, nl.s, &s2);
		if (nl.kind == TV_STR && !rc)
			tv_release(nl);
		if (!rc) {
			rc = tpl_splitlines(R, s2.s, 0, &lines);
			tv_release(s2);
		}
		tv_release(s);
	}
	struct tbuf b = { 0 };
	if (!rc)
		rc = indent_lines(R, lines, ind.s, tpl_arg_bool(slot[1], 0), tpl_arg_bool(slot[2], 0), &b);
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	if (lines)
		tobj_release(&lines->h);
	tv_release(ind);
	return rc;
}

static int f_center(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "width" };
	struct tv slot[1], s;
	int64_t w;
	if (BIND("center", names, 0, slot) || tpl_arg_int(R, "center", slot[0], 80, &w) ||
	    with_str(R, in, &s))
		return -1;
	int64_t n = tstr_ncp(s.s), pad = w > n ? w - n : 0;
	int64_t left = pad / 2 + (pad & w & 1);
	struct tbuf b = { 0 };
	int rc = 0;
	if (pad > (int64_t)R->max_output)
		rc = tpl_fail(R, ING_ERR_RANGE, "center(): width too large");
	for (int64_t i = 0; i < pad && !rc; i++) {
		if (i == left)
			rc = tpl_buf_put(R, &b, s.s->s, s.s->len);
		if (!rc)
			rc = tpl_buf_putc(R, &b, ' ');
	}
	if (!rc && left >= pad)
		rc = tpl_buf_put(R, &b, s.s->s, s.s->len);
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	tv_release(s);
	return rc;
}

static int f_truncate(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "length", "killwords", "end", "leeway" };
	struct tv slot[4], s, end;
	int64_t length, leeway;
	if (BIND("truncate", names, 0, slot) || tpl_arg_int(R, "truncate", slot[0], 255, &length) ||
	    tpl_arg_int(R, "truncate", slot[3], 5, &leeway))
		return -1;
	if (in.kind != TV_STR) { /* jinja2 measures the value itself */
		int64_t n = in.kind == TV_UNDEF ? 0 : tv_is_seq(in) ? (int64_t)in.l->n
			: in.kind == TV_DICT ? (int64_t)in.d->n : -1;
		if (n < 0 || n > length + leeway)
			return tpl_fail(R, ING_ERR_FORMAT, "truncate: object of type '%s' cannot be truncated",
					tv_type_name(in));
		tv_retain(in);
		*out = in;
		return 0;
	}
	if (slot[2].kind == TV_UNDEF) {
		if (tpl_str_v(R, "...", 3, &end))
			return -1;
	} else if (with_str(R, slot[2], &end)) {
		return -1;
	}
	if (with_str(R, in, &s)) {
		tv_release(end);
		return -1;
	}
	int64_t n = tstr_ncp(s.s), keep = length - tstr_ncp(end.s);
	int rc = 0;
	if (keep < 0 || leeway < 0) {
		rc = tpl_fail(R, ING_ERR_FORMAT, "truncate(): expected length >= len(end), leeway >= 0");
	} else if (n <= length + leeway) {
		tv_retain(s);
		*out = s;
	} else {
		size_t cut = tstr_cp_off(s.s, keep);
		if (!tpl_arg_bool(slot[1], 0)) {
			const char *sp = NULL;
			for (size_t i = cut; i-- > 0;)
				if (s.s->s[i] == ' ') {
					sp = s.s->s + i;
					break;
				}
			if (sp)
				cut = (size_t)(sp - s.s->s);
		}
		struct tv head;
		if (!(rc = tpl_str_v(R, s.s->s, cut, &head))) {
			rc = tpl_str_cat(R, head.s, end.s, out);
			tv_release(head);
		}
	}
	tv_release(s);
	tv_release(end);
	return rc;
}

static int f_wordcount(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	struct tv s;
	if (with_str(R, in, &s))
		return -1;
	int64_t k = 0;
	int inword = 0;
	for (size_t i = 0; i < s.s->len;) {
		uint32_t cp = utf8_next(s.s->s, s.s->len, &i);
		int w = cp == '_' || cp_isalpha(cp) || cp_isdigit(cp);
		k += w && !inword;
		inword = w;
	}
	tv_release(s);
	*out = tv_int(k);
	return 0;
}

static int f_format(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	struct tv s;
	if (a->npos && a->nkw)
		return tpl_fail(R, ING_ERR_FORMAT, "can't handle positional and keyword arguments at the "
				"same time");
	if (with_str(R, in, &s))
		return -1;
	int rc;
	if (a->nkw) {
		struct tdict *d;
		if ((rc = tpl_dict_new(R, &d)) == 0) {
			for (int i = 0; i < a->nkw && !rc; i++) {
				tv_retain(tv_str_v(a->kwn[i]));
				tv_retain(a->kwv[i]);
				rc = tpl_dict_set(R, d, tv_str_v(a->kwn[i]), a->kwv[i]);
			}
			if (!rc)
				rc = tpl_str_percent(R, s.s, tv_dict_v(d), out);
			tobj_release(&d->h);
		}
	} else {
		struct tlist *t;
		if ((rc = tpl_list_new(R, (size_t)a->npos, &t)) == 0) {
			t->h.flags |= TL_TUPLE;
			for (int i = 0; i < a->npos && !rc; i++) {
				tv_retain(a->pos[i]);
				rc = tpl_list_push(R, t, a->pos[i]);
			}
			if (!rc)
				rc = tpl_str_percent(R, s.s, tv_list_v(t), out);
			tobj_release(&t->h);
		}
	}
	tv_release(s);
	return rc;
}

/* ------------------------------------------------------- number filters */

static int f_int(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	if (in.kind == TV_UNDEF) /* jinja2: these use the value itself */
		return tpl_fail_undef(R, in);
	static const char *const names[] = { "default", "base" };
	struct tv slot[2];
	int64_t def, base;
	if (BIND("int", names, 0, slot) || tpl_arg_int(R, "int", slot[0], 0, &def) ||
	    tpl_arg_int(R, "int", slot[1], 10, &base))
		return -1;
	*out = tv_int(def);
	if (in.kind == TV_INT || in.kind == TV_BOOL) {
		*out = tv_int(in.i);
	} else if (in.kind == TV_FLOAT) {
		if (isnan(in.f) || fabs(in.f) >= 9.2e18)
			return tpl_fail(R, ING_ERR_FORMAT, "cannot convert float %s to integer",
					isnan(in.f) ? "NaN" : "infinity");
		*out = tv_int((int64_t)in.f);
	} else if (in.kind == TV_STR && in.s->len < 80) {
		char buf[80], *p = buf, *end;
		size_t o = 0;
		for (size_t i = 0; i < in.s->len; i++)
			if (in.s->s[i] != '_')
				buf[o++] = in.s->s[i];
		while (o && (buf[o - 1] == ' ' || (buf[o - 1] >= '\t' && buf[o - 1] <= '\r')))
			o--;
		buf[o] = 0;
		while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
			p++;
		errno = 0;
		long long v = strtoll(p, &end, (int)(base >= 2 && base <= 36 ? base : 10));
		if (end != p && !*end && !errno) {
			*out = tv_int(v);
		} else {
			double d = strtod(p, &end);
			if (end != p && !*end && isfinite(d) && fabs(d) < 9.2e18)
				*out = tv_int((int64_t)d);
		}
	}
	return 0;
}

static int f_float(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	if (in.kind == TV_UNDEF) /* jinja2: these use the value itself */
		return tpl_fail_undef(R, in);
	static const char *const names[] = { "default" };
	struct tv slot[1];
	if (BIND("float", names, 0, slot))
		return -1;
	if (slot[0].kind == TV_UNDEF)
		*out = tv_float(0.0);
	else {
		tv_retain(slot[0]);
		*out = slot[0];
	}
	if (tv_is_num(in)) {
		tv_release(*out);
		*out = tv_float(in.kind == TV_FLOAT ? in.f : (double)in.i);
	} else if (in.kind == TV_STR) {
		char *end;
		double d = strtod(in.s->s, &end);
		while (*end == ' ' || (*end >= '\t' && *end <= '\r'))
			end++;
		if (end != in.s->s && !*end) {
			tv_release(*out);
			*out = tv_float(d);
		}
	}
	return 0;
}

static int f_abs(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	if (in.kind == TV_FLOAT)
		*out = tv_float(fabs(in.f));
	else if (in.kind == TV_INT || in.kind == TV_BOOL)
		*out = in.i == INT64_MIN ? tv_float(9.223372036854775808e18) : tv_int(in.i < 0 ? -in.i : in.i);
	else
		return tpl_fail(R, ING_ERR_FORMAT, "bad operand type for abs(): '%s'", tv_type_name(in));
	return 0;
}

static int f_round(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	if (in.kind == TV_UNDEF) /* jinja2: these use the value itself */
		return tpl_fail_undef(R, in);
	static const char *const names[] = { "precision", "method" };
	struct tv slot[2];
	int64_t prec;
	if (BIND("round", names, 0, slot) || tpl_arg_int(R, "round", slot[0], 0, &prec))
		return -1;
	const char *method = slot[1].kind == TV_STR ? slot[1].s->s : "common";
	if (strcmp(method, "common") && strcmp(method, "ceil") && strcmp(method, "floor"))
		return tpl_fail(R, ING_ERR_FORMAT, "method must be common, ceil or floor");
	if (!tv_is_num(in))
		return tpl_fail(R, ING_ERR_FORMAT, "type %s doesn't define __round__ method",
				tv_type_name(in));
	if (prec > 300)
		prec = 300;
	if (prec < -300)
		prec = -300;
	if (method[0] == 'c' && method[1] == 'o' && in.kind != TV_FLOAT) {
		*out = tv_int(in.i); /* round(int, n) stays an int */
		return 0;
	}
	double x = in.kind == TV_FLOAT ? in.f : (double)in.i;
	if (method[0] == 'c' && method[1] == 'o') {
		if (prec >= 0) {
			char buf[400];
			snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
			*out = tv_float(strtod(buf, NULL));
		} else {
			double p = pow(10.0, (double)-prec);
			*out = tv_float(rint(x / p) * p);
		}
		return 0;
	}
	double p = pow(10.0, (double)prec);
	*out = tv_float((method[1] == 'e' ? ceil(x * p) : floor(x * p)) / p);
	return 0;
}

/* -------------------------------------------------- sequence filters */

static int f_length(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	switch (in.kind) {
	case TV_UNDEF: *out = tv_int(0); return 0;
	case TV_STR: *out = tv_int(tstr_ncp(in.s)); return 0;
	case TV_DICT: *out = tv_int((int64_t)in.d->n); return 0;
	case TV_LIST:
		if (!(in.l->h.flags & TL_GEN)) {
			*out = tv_int((int64_t)in.l->n);
			return 0;
		}
		/* fallthrough */
	default:
		return tpl_fail(R, ING_ERR_FORMAT, "object of type '%s' has no len()", tv_type_name(in));
	}
}

static int f_list(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	struct tlist *src, *l;
	if (tpl_iterate(R, in, &src))
		return -1;
	if (tpl_list_new(R, src->n, &l)) {
		tobj_release(&src->h);
		return -1;
	}
	for (size_t i = 0; i < src->n; i++) {
		tv_retain(src->v[i]);
		if (tpl_list_push(R, l, src->v[i])) {
			tobj_release(&l->h);
			tobj_release(&src->h);
			return -1;
		}
	}
	tobj_release(&src->h);
	*out = tv_list_v(l);
	return 0;
}

static int f_first(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	struct tlist *l;
	if (tpl_iterate(R, in, &l))
		return -1;
	*out = l->n ? l->v[0] : tv_undef(NULL);
	tv_retain(*out);
	tobj_release(&l->h);
	return 0;
}

static int f_last(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	if (in.kind == TV_LIST && (in.l->h.flags & TL_GEN))
		return tpl_fail(R, ING_ERR_FORMAT, "'generator' object is not reversible");
	struct tlist *l;
	if (tpl_iterate(R, in, &l))
		return -1;
	*out = l->n ? l->v[l->n - 1] : tv_undef(NULL);
	tv_retain(*out);
	tobj_release(&l->h);
	return 0;
}

static int f_reverse(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	if (in.kind == TV_STR)
		return tpl_slice(R, in, tv_undef(NULL), tv_undef(NULL), tv_int(-1), out);
	struct tlist *src, *l;
	if (tpl_iterate(R, in, &src))
		return -1;
	if (tpl_list_new(R, src->n, &l)) {
		tobj_release(&src->h);
		return -1;
	}
	for (size_t i = src->n; i-- > 0;) {
		tv_retain(src->v[i]);
		if (tpl_list_push(R, l, src->v[i])) {
			tobj_release(&l->h);
			tobj_release(&src->h);
			return -1;
		}
	}
	int was_gen = in.kind == TV_LIST && (in.l->h.flags & TL_GEN);
	tobj_release(&src->h);
	*out = was_gen ? tv_list_v(l) : as_gen(l); /* reversed(seq) is an iterator */
	return 0;
}

/* Item keys for sort, unique, min, max: attribute paths ("a.b", or
 * several separated by commas for sort) and case folding. */
static int item_key(struct tpl_run *R, struct tv item, struct tstr *attr, int multi, int fold,
		    struct tv *out)
{
	struct tv k;
	if (!attr) {
		tv_retain(item);
		k = item;
	} else if (multi && memchr(attr->s, ',', attr->len)) {
		struct tlist *t;
		if (tpl_list_new(R, 2, &t))
			return -1;
		t->h.flags |= TL_TUPLE;
		const char *p = attr->s, *end = attr->s + attr->len;
		while (p <= end) {
			const char *c = memchr(p, ',', (size_t)(end - p));
			if (!c)
				c = end;
			struct tstr *part;
			struct tv v;
			if (tpl_str_new(R, p, (size_t)(c - p), &part) ||
			    tpl_get_path(R, item, part, &v)) {
				if (part)
					tobj_release(&part->h);
				tobj_release(&t->h);
				return -1;
			}
			tobj_release(&part->h);
			if (fold && v.kind == TV_STR) {
				struct tv low;
				int rc = tpl_str_case(R, v.s, CASE_LOWER, &low);
				tv_release(v);
				if (rc) {
					tobj_release(&t->h);
					return -1;
				}
				v = low;
			}
			if (tpl_list_push(R, t, v)) {
				tobj_release(&t->h);
				return -1;
			}
			p = c + 1;
		}
		*out = tv_list_v(t);
		return 0;
	} else if (tpl_get_path(R, item, attr, &k)) {
		return -1;
	}
	if (fold && k.kind == TV_STR) {
		struct tv low;
		int rc = tpl_str_case(R, k.s, CASE_LOWER, &low);
		tv_release(k);
		if (rc)
			return -1;
		k = low;
	}
	*out = k;
	return 0;
}

/* Stable merge sort of idx[0..n) by keys; reverse keeps stability. Equal
 * keys are never ordered with <, as jinja2's sort compares key lists
 * (so a list of Undefined keys sorts). */
static int sort_idx(struct tpl_run *R, struct tv *keys, size_t *idx, size_t n, int reverse)
{
	size_t *tmp = ing_malloc_array(n ? n : 1, sizeof *tmp);
	if (!tmp)
		return tpl_fail_nomem(R);
	int rc = 0;
	for (size_t w = 1; w < n && !rc; w *= 2) {
		for (size_t lo = 0; lo < n && !rc; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi && !rc) {
				int c = 0;
				if (!tv_eq(keys[idx[j]], keys[idx[i]]))
					rc = tpl_compare(R, keys[idx[j]], keys[idx[i]], "<", &c);
				if (reverse)
					c = -c;
				tmp[k++] = c < 0 ? idx[j++] : idx[i++];
			}
			while (i < mid)
				tmp[k++] = idx[i++];
			while (j < hi)
				tmp[k++] = idx[j++];
			memcpy(idx + lo, tmp + lo, (hi - lo) * sizeof *idx);
		}
	}
	ing_free(tmp);
	return rc;
}

/* Sorted order of the items of in: *items (owned) and *idx (ing_free). */
static int sorted(struct tpl_run *R, struct tv in, struct tstr *attr, int case_sensitive,
		  int reverse, struct tlist **items, size_t **idx)
{
	if (tpl_iterate(R, in, items))
		return -1;
	size_t n = (*items)->n;
	struct tv *keys = ing_calloc(n ? n : 1, sizeof *keys);
	*idx = ing_malloc_array(n ? n : 1, sizeof **idx);
	int rc = keys && *idx ? 0 : tpl_fail_nomem(R);
	size_t made = 0;
	for (; made < n && !rc; made++)
		rc = item_key(R, (*items)->v[made], attr, 1, !case_sensitive, &keys[made]);
	for (size_t i = 0; i < n && *idx; i++)
		(*idx)[i] = i;
	if (!rc)
		rc = sort_idx(R, keys, *idx, n, reverse);
	if (keys)
		tv_release_n(keys, n); /* calloc: unset keys are TV_UNDEF */
	ing_free(keys);
	if (rc) {
		ing_free(*idx);
		*idx = NULL;
		tobj_release(&(*items)->h);
		*items = NULL;
	}
	return rc;
}

static int f_sort(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "reverse", "case_sensitive", "attribute" };
	struct tv slot[3];
	struct tlist *items, *l;
	size_t *idx;
	if (BIND("sort", names, 0, slot))
		return -1;
	struct tstr *attr = NULL;
	struct tv attr_s = tv_undef(NULL);
	if (slot[2].kind != TV_UNDEF && slot[2].kind != TV_NONE) {
		if (tpl_to_str(R, slot[2], &attr_s))
			return -1;
		attr = attr_s.s;
	}
	int rc = sorted(R, in, attr, tpl_arg_bool(slot[1], 0), tpl_arg_bool(slot[0], 0), &items, &idx);
	tv_release(attr_s);
	if (rc)
		return -1;
	if (tpl_list_new(R, items->n, &l))
		rc = -1;
	for (size_t i = 0; !rc && i < items->n; i++) {
		tv_retain(items->v[idx[i]]);
		rc = tpl_list_push(R, l, items->v[idx[i]]);
	}
	ing_free(idx);
	tobj_release(&items->h);
	if (rc) {
		if (l)
			tobj_release(&l->h);
		return -1;
	}
	*out = tv_list_v(l);
	return 0;
}

static int f_dictsort(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "case_sensitive", "by", "reverse" };
	struct tv slot[3];
	if (BIND("dictsort", names, 0, slot))
		return -1;
	if (in.kind != TV_DICT)
		return tpl_fail(R, ING_ERR_FORMAT, "dictsort: expected a mapping, got %s",
				tv_type_name(in));
	const char *by = slot[1].kind == TV_STR ? slot[1].s->s : "key";
	if (strcmp(by, "key") && strcmp(by, "value"))
		return tpl_fail(R, ING_ERR_FORMAT, "You can only sort by either \"key\" or \"value\"");
	struct tlist *pairs;
	if (tpl_list_new(R, in.d->n, &pairs))
		return -1;
	for (size_t i = 0; i < in.d->n; i++) {
		struct tlist *t;
		if (tpl_list_new(R, 2, &t) || (t->h.flags |= TL_TUPLE, 0)) {
			tobj_release(&pairs->h);
			return -1;
		}
		tv_retain(in.d->e[i].k);
		tv_retain(in.d->e[i].v);
		if (tpl_list_push(R, t, in.d->e[i].k) || tpl_list_push(R, t, in.d->e[i].v) ||
		    tpl_list_push(R, pairs, tv_list_v(t))) {
			tobj_release(&pairs->h);
			return -1;
		}
	}
	/* sort the pairs by element 0 or 1 */
	struct tstr *attr;
	if (tpl_str_new(R, by[0] == 'k' ? "0" : "1", 1, &attr)) {
		tobj_release(&pairs->h);
		return -1;
	}
	struct tlist *items;
	size_t *idx;
	int rc = sorted(R, tv_list_v(pairs), attr, tpl_arg_bool(slot[0], 0), tpl_arg_bool(slot[2], 0),
			&items, &idx);
	tobj_release(&attr->h);
	tobj_release(&pairs->h);
	if (rc)
		return -1;
	struct tlist *l = NULL;
	rc = tpl_list_new(R, items->n, &l);
	for (size_t i = 0; !rc && i < items->n; i++) {
		tv_retain(items->v[idx[i]]);
		rc = tpl_list_push(R, l, items->v[idx[i]]);
	}
	ing_free(idx);
	tobj_release(&items->h);
	if (rc) {
		if (l)
			tobj_release(&l->h);
		return -1;
	}
	*out = tv_list_v(l);
	return 0;
}

static int f_unique(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "case_sensitive", "attribute" };
	struct tv slot[2];
	struct tlist *items, *l = NULL;
	struct tdict *seen = NULL;
	if (BIND("unique", names, 0, slot) || tpl_iterate(R, in, &items))
		return -1;
	struct tstr *attr = slot[1].kind == TV_STR ? slot[1].s : NULL;
	int rc = tpl_list_new(R, 0, &l) || tpl_dict_new(R, &seen);
	for (size_t i = 0; !rc && i < items->n; i++) {
		struct tv k;
		if ((rc = item_key(R, items->v[i], attr, 0, !tpl_arg_bool(slot[0], 0), &k)))
			break;
		if (tpl_dict_get(seen, k) || (!tv_hashable(k) && (rc = tpl_fail(R, ING_ERR_FORMAT,
				"unhashable type: '%s'", tv_type_name(k))))) {
			tv_release(k);
			continue;
		}
		if ((rc = tpl_dict_set(R, seen, k, tv_none())))
			break;
		tv_retain(items->v[i]);
		rc = tpl_list_push(R, l, items->v[i]);
	}
	if (seen)
		tobj_release(&seen->h);
	tobj_release(&items->h);
	if (rc) {
		if (l)
			tobj_release(&l->h);
		return -1;
	}
	*out = as_gen(l);
	return 0;
}

static int f_minmax(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out, int max)
{
	static const char *const names[] = { "case_sensitive", "attribute" };
	struct tv slot[2];
	struct tlist *items;
	size_t *idx;
	if (BIND(max ? "max" : "min", names, 0, slot))
		return -1;
	struct tstr *attr = slot[1].kind == TV_STR ? slot[1].s : NULL;
	if (sorted(R, in, attr, tpl_arg_bool(slot[0], 0), 0, &items, &idx))
		return -1;
	*out = tv_undef(NULL);
	if (items->n) {
		/* Python's max keeps the first of equal maxima: scan from the
		 * end of the stable order back over equal keys. */
		size_t pick = idx[0];
		if (max) {
			pick = idx[items->n - 1];
			struct tv kp, kq;
			for (size_t j = items->n - 1; j-- > 0;) {
				if (item_key(R, items->v[pick], attr, 0, !tpl_arg_bool(slot[0], 0), &kp))
					break;
				if (item_key(R, items->v[idx[j]], attr, 0, !tpl_arg_bool(slot[0], 0), &kq)) {
					tv_release(kp);
					break;
				}
				int eq = tv_eq(kp, kq);
				tv_release(kp);
				tv_release(kq);
				if (!eq)
					break;
				pick = idx[j];
			}
		}
		*out = items->v[pick];
		tv_retain(*out);
	}
	ing_free(idx);
	tobj_release(&items->h);
	return R->failed ? -1 : 0;
}

static int f_max(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out) { return f_minmax(R, in, a, out, 1); }
static int f_min(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out) { return f_minmax(R, in, a, out, 0); }

static int f_join(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "d", "attribute" };
	struct tv slot[2];
	struct tlist *items;
	if (BIND("join", names, 0, slot) || tpl_iterate(R, in, &items))
		return -1;
	struct tv sep = tv_undef(NULL);
	int rc = slot[0].kind == TV_UNDEF ? tpl_str_v(R, "", 0, &sep) : with_str(R, slot[0], &sep);
	struct tstr *attr = slot[1].kind == TV_STR ? slot[1].s : NULL;
	struct tbuf b = { 0 };
	for (size_t i = 0; !rc && i < items->n; i++) {
		struct tv v;
		if (i && (rc = tpl_buf_put(R, &b, sep.s->s, sep.s->len)))
			break;
		if ((rc = item_key(R, items->v[i], attr, 0, 0, &v)))
			break;
		rc = tpl_value_str(R, &b, v);
		tv_release(v);
	}
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	tv_release(sep);
	tobj_release(&items->h);
	return rc;
}

static int f_sum(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "attribute", "start" };
	struct tv slot[2];
	struct tlist *items;
	if (BIND("sum", names, 0, slot) || tpl_iterate(R, in, &items))
		return -1;
	struct tstr *attr = slot[0].kind == TV_STR ? slot[0].s : NULL;
	struct tv acc = slot[1].kind == TV_UNDEF ? tv_int(0) : slot[1];
	tv_retain(acc);
	int rc = 0;
	for (size_t i = 0; !rc && i < items->n; i++) {
		struct tv v, s;
		if ((rc = item_key(R, items->v[i], attr, 0, 0, &v)))
			break;
		rc = tpl_binop(R, OP_ADD, acc, v, &s);
		tv_release(v);
		if (!rc) {
			tv_release(acc);
			acc = s;
		}
	}
	tobj_release(&items->h);
	if (rc) {
		tv_release(acc);
		return -1;
	}
	*out = acc;
	return 0;
}

static int f_items(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	struct tlist *l;
	if (in.kind != TV_UNDEF && in.kind != TV_DICT)
		return tpl_fail(R, ING_ERR_FORMAT, "Can only get item pairs from a mapping.");
	if (tpl_list_new(R, in.kind == TV_DICT ? in.d->n : 0, &l))
		return -1;
	for (size_t i = 0; in.kind == TV_DICT && i < in.d->n; i++) {
		struct tlist *t;
		if (tpl_list_new(R, 2, &t)) {
			tobj_release(&l->h);
			return -1;
		}
		t->h.flags |= TL_TUPLE;
		tv_retain(in.d->e[i].k);
		tv_retain(in.d->e[i].v);
		if (tpl_list_push(R, t, in.d->e[i].k) || tpl_list_push(R, t, in.d->e[i].v) ||
		    tpl_list_push(R, l, tv_list_v(t))) {
			tobj_release(&l->h);
			return -1;
		}
	}
	*out = as_gen(l);
	return 0;
}

static int f_batch(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "linecount", "fill_with" };
	struct tv slot[2];
	int64_t k;
	struct tlist *items, *l, *row = NULL;
	if (BIND("batch", names, 1, slot) || tpl_arg_int(R, "batch", slot[0], 1, &k))
		return -1;
	if (k <= 0)
		return tpl_fail(R, ING_ERR_FORMAT, "batch(): linecount must be positive");
	if (tpl_iterate(R, in, &items))
		return -1;
	int rc = tpl_list_new(R, 0, &l);
	for (size_t i = 0; !rc && i < items->n; i++) {
		if (!row && (rc = tpl_list_new(R, (size_t)k, &row)))
			break;
		tv_retain(items->v[i]);
		if ((rc = tpl_list_push(R, row, items->v[i])))
			break;
		if ((int64_t)row->n == k) {
			rc = tpl_list_push(R, l, tv_list_v(row));
			row = NULL;
		}
	}
	if (!rc && row) {
		while (!rc && slot[1].kind != TV_UNDEF && (int64_t)row->n < k) {
			tv_retain(slot[1]);
			rc = tpl_list_push(R, row, slot[1]);
		}
		if (!rc)
			rc = tpl_list_push(R, l, tv_list_v(row));
		row = NULL;
	}
	if (row)
		tobj_release(&row->h);
	tobj_release(&items->h);
	if (rc) {
		if (l)
			tobj_release(&l->h);
		return -1;
	}
	*out = as_gen(l);
	return 0;
}

static int f_default(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "default_value", "boolean" };
	struct tv slot[2];
	if (BIND("default", names, 0, slot))
		return -1;
	int use = in.kind == TV_UNDEF || (tpl_arg_bool(slot[1], 0) && !tv_truthy(in));
	if (!use) {
		tv_retain(in);
		*out = in;
		return 0;
	}
	if (!a->npos && !a->nkw) /* default_value defaults to "" */
		return tpl_str_v(R, "", 0, out);
	tv_retain(slot[0]);
	*out = slot[0];
	return 0;
}

static int f_attr(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	if (in.kind == TV_UNDEF) /* jinja2: these use the value itself */
		return tpl_fail_undef(R, in);
	static const char *const names[] = { "name" };
	struct tv slot[1], s;
	if (BIND("attr", names, 1, slot) || with_str(R, slot[0], &s))
		return -1;
	int rc = 0;
	*out = tv_undef(NULL);
	if (in.kind == TV_NS || in.kind == TV_LOOP || in.kind == TV_CYCLER)
		rc = tpl_getattr(R, in, s.s, NULL, out);
	else if (in.kind != TV_UNDEF)
		rc = tpl_method_bind(R, in, s.s, out);
	tv_release(s);
	return rc;
}

/* ------------------------------------------- map / select / reject */

/* map('filter', args...) or map(attribute='a', default=x) */
static int f_map(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	struct tlist *items, *l;
	struct tstr *attr = NULL;
	struct tv def = tv_undef(NULL);
	const struct tpl_filter *f = NULL;
	struct tpl_args rest = *a;
	if (a->npos == 0) {
		for (int k = 0; k < a->nkw; k++) {
			if (tstr_eq_c(a->kwn[k], "attribute") && a->kwv[k].kind == TV_STR)
				attr = a->kwv[k].s;
			else if (tstr_eq_c(a->kwn[k], "default"))
				def = a->kwv[k];
			else
				return tpl_fail(R, ING_ERR_FORMAT, "Unexpected keyword argument '%s'",
						a->kwn[k]->s);
		}
		if (!attr)
			return tpl_fail(R, ING_ERR_FORMAT, "map requires a filter argument");
	} else {
		if (a->pos[0].kind != TV_STR)
			return tpl_fail(R, ING_ERR_FORMAT, "map(): the filter name must be a string");
		if (!(f = tpl_filter_find(a->pos[0].s->s)))
			return tpl_fail(R, ING_ERR_FORMAT, "No filter named '%s'", a->pos[0].s->s);
		rest.pos++;
		rest.npos--;
	}
	if (!tv_truthy(in)) /* jinja: "if value:" before iterating */
		return tpl_list_new(R, 0, &l) ? -1 : (*out = as_gen(l), 0);
	if (tpl_iterate(R, in, &items))
		return -1;
	int rc = tpl_list_new(R, items->n, &l);
	for (size_t i = 0; !rc && i < items->n; i++) {
		struct tv v;
		if (f) {
			rc = tpl_apply_filter(R, f, items->v[i], &rest, &v);
		} else if (!(rc = tpl_get_path(R, items->v[i], attr, &v)) && v.kind == TV_UNDEF &&
			   def.kind != TV_UNDEF) {
			tv_retain(def);
			v = def;
		}
		if (!rc)
			rc = tpl_list_push(R, l, v);
	}
	tobj_release(&items->h);
	if (rc) {
		if (l)
			tobj_release(&l->h);
		return -1;
	}
	*out = as_gen(l);
	return 0;
}

/* select/reject (attr NULL) and selectattr/rejectattr. */
static int select_common(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out,
			 int want, int by_attr)
{
	struct tlist *items, *l;
	struct tstr *attr = NULL;
	const struct tpl_test *t = NULL;
	struct tpl_args rest = *a;
	if (a->nkw)
		return tpl_fail(R, ING_ERR_FORMAT, "select filters take no keyword arguments");
	if (by_attr) {
		if (!rest.npos || rest.pos[0].kind != TV_STR)
			return tpl_fail(R, ING_ERR_FORMAT, "Missing parameter for attribute name");
		attr = rest.pos[0].s;
		rest.pos++;
		rest.npos--;
	}
	if (rest.npos) {
		if (rest.pos[0].kind != TV_STR || !(t = tpl_test_find(rest.pos[0].s->s)))
			return tpl_fail(R, ING_ERR_FORMAT, "No test named '%s'",
					rest.pos[0].kind == TV_STR ? rest.pos[0].s->s : "?");
		rest.pos++;
		rest.npos--;
	}
	if (!tv_truthy(in)) /* jinja: "if value:" before iterating */
		return tpl_list_new(R, 0, &l) ? -1 : (*out = as_gen(l), 0);
	if (tpl_iterate(R, in, &items))
		return -1;
	int rc = tpl_list_new(R, 0, &l);
	for (size_t i = 0; !rc && i < items->n; i++) {
		struct tv v;
		int r = 0;
		if (attr) {
			if ((rc = tpl_get_path(R, items->v[i], attr, &v)))
				break;
		} else {
			v = items->v[i];
			tv_retain(v);
		}
		if (t)
			rc = tpl_apply_test(R, t, v, &rest, &r);
		else
			r = tv_truthy(v);
		tv_release(v);
		if (!rc && (r != 0) == want) {
			tv_retain(items->v[i]);
			rc = tpl_list_push(R, l, items->v[i]);
		}
	}
	tobj_release(&items->h);
	if (rc) {
		if (l)
			tobj_release(&l->h);
		return -1;
	}
	*out = as_gen(l);
	return 0;
}

static int f_select(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out) { return select_common(R, in, a, out, 1, 0); }
static int f_reject(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out) { return select_common(R, in, a, out, 0, 0); }
static int f_selectattr(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out) { return select_common(R, in, a, out, 1, 1); }
static int f_rejectattr(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out) { return select_common(R, in, a, out, 0, 1); }

/* ---------------------------------------------------------------- tojson */

static int f_tojson(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	static const char *const names[] = { "ensure_ascii", "indent", "separators", "sort_keys" };
	struct tv slot[4], ind = tv_undef(NULL);
	if (BIND("tojson", names, 0, slot))
		return -1;
	struct tojson_opts o = { .ensure_ascii = tpl_arg_bool(slot[0], 0),
				 .sort_keys = tpl_arg_bool(slot[3], 0) };
	if (slot[1].kind == TV_STR) {
		tv_retain(slot[1]);
		ind = slot[1];
	} else if (slot[1].kind == TV_INT || slot[1].kind == TV_BOOL) {
		struct tv sp;
		if (tpl_str_v(R, " ", 1, &sp))
			return -1;
		int rc = tpl_binop(R, OP_MUL, sp, tv_int(slot[1].i), &ind);
		tv_release(sp);
		if (rc)
			return -1;
	} else if (slot[1].kind != TV_UNDEF && slot[1].kind != TV_NONE) {
		return tpl_fail(R, ING_ERR_FORMAT, "tojson(): indent must be an int or a string");
	}
	if (ind.kind == TV_STR) {
		o.indent = ind.s->s;
		o.indent_len = ind.s->len;
	}
	o.item_sep = o.indent ? "," : ", ";
	o.key_sep = ": ";
	struct tv sep = slot[2];
	if (sep.kind == TV_LIST && !(sep.l->h.flags & TL_GEN)) {
		if (sep.l->n != 2 || sep.l->v[0].kind != TV_STR || sep.l->v[1].kind != TV_STR) {
			tv_release(ind);
			return tpl_fail(R, ING_ERR_FORMAT, "tojson(): separators must be two strings");
		}
		o.item_sep = sep.l->v[0].s->s;
		o.item_sep_len = sep.l->v[0].s->len;
		o.key_sep = sep.l->v[1].s->s;
		o.key_sep_len = sep.l->v[1].s->len;
	} else {
		o.item_sep_len = strlen(o.item_sep);
		o.key_sep_len = strlen(o.key_sep);
	}
	struct tbuf b = { 0 };
	int rc = tpl_tojson(R, &b, in, &o);
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	tv_release(ind);
	return rc;
}

static int f_pprint(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out)
{
	struct tbuf b = { 0 };
	int rc = tpl_value_repr(R, &b, in, 0);
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	return rc;
}

/* ------------------------------------------------------------- tables */

static const struct tpl_filter filters[] = {
	{ "abs", f_abs }, { "attr", f_attr }, { "batch", f_batch },
	{ "capitalize", f_capitalize }, { "center", f_center }, { "count", f_length },
	{ "d", f_default }, { "default", f_default }, { "dictsort", f_dictsort },
	{ "e", f_escape }, { "escape", f_escape }, { "first", f_first }, { "float", f_float },
	{ "forceescape", f_forceescape }, { "format", f_format }, { "indent", f_indent },
	{ "int", f_int }, { "items", f_items }, { "join", f_join }, { "last", f_last },
	{ "length", f_length }, { "list", f_list }, { "lower", f_lower }, { "map", f_map },
	{ "max", f_max }, { "min", f_min }, { "pprint", f_pprint }, { "reject", f_reject },
	{ "rejectattr", f_rejectattr }, { "replace", f_replace }, { "reverse", f_reverse },
	{ "round", f_round }, { "safe", f_safe }, { "select", f_select },
	{ "selectattr", f_selectattr }, { "sort", f_sort }, { "string", f_string },
	{ "sum", f_sum }, { "title", f_title }, { "tojson", f_tojson }, { "trim", f_trim },
	{ "truncate", f_truncate }, { "unique", f_unique }, { "upper", f_upper },
	{ "wordcount", f_wordcount },
};

const struct tpl_filter *tpl_filter_find(const char *name)
{
	for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
		if (!strcmp(filters[i].name, name))
			return &filters[i];
	return NULL;
}

int tpl_apply_filter(struct tpl_run *R, const struct tpl_filter *f, struct tv in,
		     struct tpl_args *a, struct tv *out)
{
	*out = tv_undef(NULL);
	/* Filters other than the ones that handle Undefined see its str(). */
	return f->fn(R, in, a, out);
}
