/* template_value.c — the template value type: reference counting, strings,
 * lists, ordered dicts, truthiness, equality, ordering and hashing with
 * Python's semantics, and the output buffers.
 *
 * Every allocation a render makes is charged to its byte budget
 * (tpl_charge) so that a hostile template cannot exhaust memory, and every
 * container records its nesting depth so that recursive operations (free,
 * ==, <, hash) stay within TPL_VALUE_DEPTH_MAX frames. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "mem.h"
#include "template_int.h"

/* ------------------------------------------------- reference counting */

void tv_retain(struct tv v)
{
	if (tv_is_heap(v) && v.o->refs >= 0)
		v.o->refs++;
}

void tv_release(struct tv v)
{
	if (tv_is_heap(v))
		tobj_release(v.o);
}

void tv_release_n(struct tv *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tv_release(v[i]);
}

static void dict_free(struct tdict *d)
{
	tpl_dict_clear(d);
	ing_free(d->e);
	ing_free(d->idx);
	ing_free(d);
}

void tobj_release(struct tobj *o)
{
	if (!o || o->refs < 0 || --o->refs > 0)
		return;
	switch (o->type) {
	case TO_STR:
		break;
	case TO_LIST: {
		struct tlist *l = (struct tlist *)o;
		tv_release_n(l->v, l->n);
		ing_free(l->v);
		break;
	}
	case TO_DICT:
		dict_free((struct tdict *)o);
		return;
	case TO_MACRO:
		tobj_release(&((struct tmacro *)o)->scope->h);
		break;
	case TO_METHOD:
		tv_release(((struct tmethod *)o)->self);
		break;
	case TO_LOOP: {
		struct tloop *lp = (struct tloop *)o;
		tobj_release(&lp->items->h);
		tv_release(lp->changed);
		if (lp->outer)
			tobj_release(&lp->outer->h);
		break;
	}
	case TO_SCOPE: {
		struct tscope *s = (struct tscope *)o;
		if (s->vars)
			tobj_release(&s->vars->h);
		if (s->parent)
			tobj_release(&s->parent->h);
		break;
	}
	case TO_CYCLER:
		tobj_release(&((struct tcycler *)o)->items->h);
		break;
	}
	ing_free(o);
}

struct tv tv_str_v(struct tstr *s)
{
	struct tv v = { .kind = TV_STR };
	v.s = s;
	return v;
}

struct tv tv_list_v(struct tlist *l)
{
	struct tv v = { .kind = TV_LIST };
	v.l = l;
	return v;
}

struct tv tv_dict_v(struct tdict *d)
{
	struct tv v = { .kind = TV_DICT };
	v.d = d;
	return v;
}

/* ------------------------------------------------------------ strings */

int tpl_str_new(struct tpl_run *R, const char *s, size_t n, struct tstr **out)
{
	*out = NULL;
	if (n > R->max_output)
		return tpl_fail(R, ING_ERR_RANGE, "string of %zu bytes exceeds the output limit of %zu",
				n, R->max_output);
	if (tpl_charge(R, n + sizeof(struct tstr)))
		return -1;
	struct tstr *t = ing_malloc(sizeof *t + n + 1);
	if (!t)
		return tpl_fail_nomem(R);
	t->h = (struct tobj){ .refs = 1, .type = TO_STR };
	t->hash = 0;
	t->ncp = -1;
	t->len = n;
	if (n && s)
		memcpy(t->s, s, n);
	t->s[n] = 0;
	*out = t;
	return 0;
}

int tpl_str_v(struct tpl_run *R, const char *s, size_t n, struct tv *out)
{
	struct tstr *t;
	if (tpl_str_new(R, s, n, &t))
		return -1;
	*out = tv_str_v(t);
	return 0;
}

int tpl_str_cat(struct tpl_run *R, const struct tstr *a, const struct tstr *b, struct tv *out)
{
	struct tstr *t;
	if (tpl_str_new(R, NULL, a->len + b->len, &t))
		return -1;
	memcpy(t->s, a->s, a->len);
	memcpy(t->s + a->len, b->s, b->len);
	*out = tv_str_v(t);
	return 0;
}

int tpl_keep_safe(struct tpl_run *R, int safe, struct tv *v)
{
	if (!safe || v->kind != TV_STR || (v->s->h.flags & TS_SAFE))
		return 0;
	if (v->s->h.refs != 1) { /* shared or immortal: mark a copy */
		struct tv c;
		if (tpl_str_v(R, v->s->s, v->s->len, &c))
			return -1;
		tv_release(*v);
		*v = c;
	}
	v->s->h.flags |= TS_SAFE;
	return 0;
}

int tpl_html_escape(struct tpl_run *R, struct tv v, int force, struct tv *out)
{
	if (tv_is_safe(v) && !force) {
		tv_retain(v);
		*out = v;
		return 0;
	}
	struct tbuf b = { 0 }, s = { 0 };
	int rc = v.kind == TV_UNDEF ? 0 : tpl_value_str(R, &s, v);
	for (size_t i = 0; i < s.n && !rc; i++) {
		char c = s.p[i];
		const char *e = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;"
			: c == '"' ? "&#34;" : c == '\'' ? "&#39;" : NULL;
		rc = e ? tpl_buf_put(R, &b, e, strlen(e)) : tpl_buf_putc(R, &b, c);
	}
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	tpl_buf_free(&s);
	if (!rc)
		out->s->h.flags |= TS_SAFE;
	return rc;
}

static uint32_t hash_bytes(const char *s, size_t n)
{
	uint32_t h = hash_fnv1a32(s, n);
	return h ? h : 1; /* 0 means "not computed yet" */
}

uint32_t tstr_hash(struct tstr *s)
{
	if (!s->hash)
		s->hash = hash_bytes(s->s, s->len);
	return s->hash;
}

int tstr_eq_c(const struct tstr *s, const char *c)
{
	size_t n = strlen(c);
	return s->len == n && !memcmp(s->s, c, n);
}

/* -------------------------------------------------------------- lists */

static uint16_t tv_depth(struct tv v)
{
	switch (v.kind) {
	case TV_LIST: case TV_DICT: case TV_METHOD: case TV_LOOP: case TV_CYCLER: case TV_JOINER:
		return v.o->depth;
	default:
		return 0;
	}
}

static int depth_note(struct tpl_run *R, struct tobj *o, struct tv child)
{
	unsigned d = 1u + tv_depth(child);
	if (d > TPL_VALUE_DEPTH_MAX)
		return tpl_fail(R, ING_ERR_RANGE, "values nested more than %d deep",
				TPL_VALUE_DEPTH_MAX);
	if (d > o->depth)
		o->depth = (uint16_t)d;
	return 0;
}

int tpl_list_new(struct tpl_run *R, size_t cap, struct tlist **out)
{
	*out = NULL;
	if (cap > ((size_t)1 << 28) || tpl_charge(R, sizeof(struct tlist) + cap * sizeof(struct tv)))
		return R->failed ? -1 : tpl_fail(R, ING_ERR_RANGE, "list too long");
	struct tlist *l = ing_calloc(1, sizeof *l);
	if (!l)
		return tpl_fail_nomem(R);
	l->h = (struct tobj){ .refs = 1, .type = TO_LIST, .depth = 1 };
	if (cap && !(l->v = ing_malloc_array(cap, sizeof *l->v))) {
		ing_free(l);
		return tpl_fail_nomem(R);
	}
	l->cap = cap;
	*out = l;
	return 0;
}

int tpl_list_push(struct tpl_run *R, struct tlist *l, struct tv v)
{
	if (depth_note(R, &l->h, v))
		goto fail;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		if (tpl_charge(R, (cap - l->cap) * sizeof(struct tv)))
			goto fail;
		struct tv *nv = ing_realloc(l->v, cap * sizeof *nv);
		if (!nv) {
			tpl_fail_nomem(R);
			goto fail;
		}
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
	return 0;
fail:
	tv_release(v);
	return -1;
}

/* -------------------------------------------------------------- dicts */

int tpl_dict_new(struct tpl_run *R, struct tdict **out)
{
	*out = NULL;
	if (tpl_charge(R, sizeof(struct tdict)))
		return -1;
	struct tdict *d = ing_calloc(1, sizeof *d);
	if (!d)
		return tpl_fail_nomem(R);
	d->h = (struct tobj){ .refs = 1, .type = TO_DICT, .depth = 1 };
	*out = d;
	return 0;
}

void tpl_dict_clear(struct tdict *d)
{
	/* Detach first: releasing a value may reach this dict again. */
	struct tdent *e = d->e;
	size_t n = d->n;
	d->e = NULL;
	d->n = d->cap = 0;
	ing_free(d->idx);
	d->idx = NULL;
	d->idx_cap = 0;
	for (size_t i = 0; i < n; i++) {
		tv_release(e[i].k);
		tv_release(e[i].v);
	}
	ing_free(e);
}

static struct tdent *dict_find(struct tdict *d, struct tv k, uint32_t h)
{
	if (!d->idx) {
		for (size_t i = 0; i < d->n; i++)
			if (d->e[i].hash == h && tv_eq(d->e[i].k, k))
				return &d->e[i];
		return NULL;
	}
	size_t mask = d->idx_cap - 1;
	for (size_t p = h & mask;; p = (p + 1) & mask) {
		uint32_t j = d->idx[p];
		if (!j)
			return NULL;
		struct tdent *e = &d->e[j - 1];
		if (e->hash == h && tv_eq(e->k, k))
			return e;
	}
}

static int dict_reindex(struct tpl_run *R, struct tdict *d)
{
	size_t cap = 16;
	while (cap < d->n * 2 + 2)
		cap *= 2;
	if (tpl_charge(R, cap * sizeof(uint32_t)))
		return -1;
	uint32_t *idx = ing_calloc(cap, sizeof *idx);
	if (!idx)
		return tpl_fail_nomem(R);
	for (size_t i = 0; i < d->n; i++) {
		size_t p = d->e[i].hash & (cap - 1);
		while (idx[p])
			p = (p + 1) & (cap - 1);
		idx[p] = (uint32_t)(i + 1);
	}
	ing_free(d->idx);
	d->idx = idx;
	d->idx_cap = cap;
	return 0;
}

int tpl_dict_set(struct tpl_run *R, struct tdict *d, struct tv k, struct tv v)
{
	if (!tv_hashable(k)) {
		tpl_fail(R, ING_ERR_FORMAT, "unhashable type: '%s'", tv_type_name(k));
		goto fail;
	}
	if (depth_note(R, &d->h, v) || depth_note(R, &d->h, k))
		goto fail;
	uint32_t h = tv_hash(k);
	struct tdent *e = dict_find(d, k, h);
	if (e) {
		tv_release(e->v);
		e->v = v;
		tv_release(k);
		return 0;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 4;
		if (cap > ((size_t)1 << 28) || tpl_charge(R, (cap - d->cap) * sizeof(struct tdent)))
			goto fail;
		struct tdent *ne = ing_realloc(d->e, cap * sizeof *ne);
		if (!ne) {
			tpl_fail_nomem(R);
			goto fail;
		}
		d->e = ne;
		d->cap = cap;
	}
	d->e[d->n++] = (struct tdent){ .k = k, .v = v, .hash = h };
	if (d->n > 8 && d->n * 2 > d->idx_cap) {
		if (dict_reindex(R, d)) {
			d->n--;
			goto fail;
		}
	} else if (d->idx) {
		size_t p = h & (d->idx_cap - 1);
		while (d->idx[p])
			p = (p + 1) & (d->idx_cap - 1);
		d->idx[p] = (uint32_t)d->n;
	}
	return 0;
fail:
	tv_release(k);
	tv_release(v);
	return -1;
}

struct tv *tpl_dict_get(struct tdict *d, struct tv k)
{
	if (!d->n || !tv_hashable(k))
		return NULL;
	struct tdent *e = dict_find(d, k, tv_hash(k));
	return e ? &e->v : NULL;
}

struct tv *tpl_dict_get_str(struct tdict *d, struct tstr *k)
{
	return tpl_dict_get(d, tv_str_v(k));
}

struct tv *tpl_dict_get_c(struct tdict *d, const char *k)
{
	size_t n = strlen(k);
	for (size_t i = 0; i < d->n; i++) {
		struct tv *ek = &d->e[i].k;
		if (ek->kind == TV_STR && ek->s->len == n && !memcmp(ek->s->s, k, n))
			return &d->e[i].v;
	}
	return NULL;
}

/* -------------------------------------------- truth, equality, order */

int tv_truthy(struct tv v)
{
	switch (v.kind) {
	case TV_UNDEF: case TV_NONE: return 0;
	case TV_BOOL: case TV_INT: return v.i != 0;
	case TV_FLOAT: return v.f != 0.0;
	case TV_STR: return v.s->len > 0;
	case TV_LIST: return (v.l->h.flags & TL_GEN) || v.l->n > 0;
	case TV_DICT: return v.d->n > 0;
	default: return 1;
	}
}

static int num_eq(struct tv a, struct tv b)
{
	if (a.kind == TV_FLOAT || b.kind == TV_FLOAT) {
		double x = a.kind == TV_FLOAT ? a.f : (double)a.i;
		double y = b.kind == TV_FLOAT ? b.f : (double)b.i;
		return x == y;
	}
	return a.i == b.i;
}

static int dict_eq(struct tdict *a, struct tdict *b)
{
	if (a->n != b->n)
		return 0;
	for (size_t i = 0; i < a->n; i++) {
		struct tv *v = tpl_dict_get(b, a->e[i].k);
		if (!v || !tv_eq(a->e[i].v, *v))
			return 0;
	}
	return 1;
}

int tv_eq(struct tv a, struct tv b)
{
	if (tv_is_num(a) && tv_is_num(b))
		return num_eq(a, b);
	if (a.kind != b.kind)
		return 0;
	switch (a.kind) {
	case TV_UNDEF: case TV_NONE:
		return 1;
	case TV_STR:
		return a.s == b.s || (a.s->len == b.s->len && !memcmp(a.s->s, b.s->s, a.s->len));
	case TV_LIST:
		if (a.l == b.l)
			return 1;
		if ((a.l->h.flags | b.l->h.flags) & TL_GEN ||
		    (a.l->h.flags & TL_TUPLE) != (b.l->h.flags & TL_TUPLE) || a.l->n != b.l->n)
			return 0;
		for (size_t i = 0; i < a.l->n; i++)
			if (!tv_eq(a.l->v[i], b.l->v[i]))
				return 0;
		return 1;
	case TV_DICT:
		return a.d == b.d || dict_eq(a.d, b.d);
	case TV_FUNC:
		return a.fn == b.fn;
	case TV_METHOD:
		return a.mt->id == b.mt->id && tv_eq(a.mt->self, b.mt->self);
	default:
		return a.o == b.o;
	}
}

static int cmp3(double x, double y)
{
	return x < y ? -1 : x > y ? 1 : 0;
}

int tpl_compare(struct tpl_run *R, struct tv a, struct tv b, const char *op, int *cmp)
{
	if (a.kind == TV_UNDEF || b.kind == TV_UNDEF)
		return tpl_fail_undef(R, a.kind == TV_UNDEF ? a : b);
	if (tv_is_num(a) && tv_is_num(b)) {
		if (a.kind != TV_FLOAT && b.kind != TV_FLOAT)
			*cmp = a.i < b.i ? -1 : a.i > b.i;
		else
			*cmp = cmp3(a.kind == TV_FLOAT ? a.f : (double)a.i,
				    b.kind == TV_FLOAT ? b.f : (double)b.i);
		return 0;
	}
	if (a.kind == TV_STR && b.kind == TV_STR) {
		size_t n = a.s->len < b.s->len ? a.s->len : b.s->len;
		int c = memcmp(a.s->s, b.s->s, n);
		*cmp = c < 0 ? -1 : c > 0 ? 1 : cmp3((double)a.s->len, (double)b.s->len);
		return 0;
	}
	if (a.kind == TV_LIST && b.kind == TV_LIST && !((a.l->h.flags | b.l->h.flags) & TL_GEN) &&
	    (a.l->h.flags & TL_TUPLE) == (b.l->h.flags & TL_TUPLE)) {
		for (size_t i = 0; i < a.l->n && i < b.l->n; i++)
			if (!tv_eq(a.l->v[i], b.l->v[i]))
				return tpl_compare(R, a.l->v[i], b.l->v[i], op, cmp);
		*cmp = cmp3((double)a.l->n, (double)b.l->n);
		return 0;
	}
	return tpl_fail(R, ING_ERR_FORMAT, "'%s' not supported between instances of '%s' and '%s'",
			op, tv_type_name(a), tv_type_name(b));
}

const char *tv_type_name(struct tv v)
{
	switch (v.kind) {
	case TV_UNDEF: return "Undefined";
	case TV_NONE: return "NoneType";
	case TV_BOOL: return "bool";
	case TV_INT: return "int";
	case TV_FLOAT: return "float";
	case TV_STR: return v.s->h.flags & TS_SAFE ? "Markup" : "str";
	case TV_LIST:
		return v.l->h.flags & TL_GEN ? "generator" : v.l->h.flags & TL_TUPLE ? "tuple" : "list";
	case TV_DICT: return "dict";
	case TV_NS: return "Namespace";
	case TV_MACRO: return "Macro";
	case TV_FUNC: return "function";
	case TV_METHOD: return "builtin_function_or_method";
	case TV_LOOP: return "LoopContext";
	case TV_CYCLER: return "Cycler";
	case TV_JOINER: return "Joiner";
	}
	return "object";
}

int tv_hashable(struct tv v)
{
	switch (v.kind) {
	case TV_LIST:
		if (!(v.l->h.flags & TL_TUPLE))
			return v.l->h.flags & TL_GEN ? 1 : 0;
		for (size_t i = 0; i < v.l->n; i++)
			if (!tv_hashable(v.l->v[i]))
				return 0;
		return 1;
	case TV_DICT:
		return 0;
	default:
		return 1;
	}
}

static uint32_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)x;
}

uint32_t tv_hash(struct tv v)
{
	switch (v.kind) {
	case TV_NONE: case TV_UNDEF:
		return 0x9e3779b9u;
	case TV_BOOL: case TV_INT:
		return mix64((uint64_t)v.i);
	case TV_FLOAT:
		if (v.f == floor(v.f) && fabs(v.f) < 9.2e18)
			return mix64((uint64_t)(int64_t)v.f);
		{
			uint64_t bits;
			memcpy(&bits, &v.f, sizeof bits);
			return mix64(bits);
		}
	case TV_STR:
		return tstr_hash(v.s);
	case TV_LIST:
		if (v.l->h.flags & TL_TUPLE) {
			uint32_t h = 0x345678u;
			for (size_t i = 0; i < v.l->n; i++)
				h = (h ^ tv_hash(v.l->v[i])) * 1000003u;
			return h;
		}
		return mix64((uint64_t)(uintptr_t)v.o); /* generators: identity */
	default:
		return mix64((uint64_t)(uintptr_t)v.o);
	}
}

/* ------------------------------------------------------------ buffers */

int tpl_buf_put(struct tpl_run *R, struct tbuf *b, const char *s, size_t n)
{
	if (n > R->max_output || b->n + n > R->max_output)
		return tpl_fail(R, ING_ERR_RANGE, "output exceeds the limit of %zu bytes",
				R->max_output);
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *p = ing_realloc(b->p, cap);
		if (!p)
			return tpl_fail_nomem(R);
		b->p = p;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
	return 0;
}

int tpl_buf_putc(struct tpl_run *R, struct tbuf *b, char c)
{
	return tpl_buf_put(R, b, &c, 1);
}

int tpl_buf_printf(struct tpl_run *R, struct tbuf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n < 0)
		return tpl_fail(R, ING_ERR_FORMAT, "formatting failed");
	return tpl_buf_put(R, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

int tpl_buf_take(struct tpl_run *R, struct tbuf *b, struct tv *out)
{
	int rc = tpl_str_v(R, b->p ? b->p : "", b->n, out);
	b->n = 0;
	return rc;
}

void tpl_buf_free(struct tbuf *b)
{
	ing_free(b->p);
	*b = (struct tbuf){ 0 };
}

/* ---------------------------------------------------- str() and repr() */

void tpl_float_repr(double f, char *buf, size_t cap)
{
	if (isnan(f)) {
		snprintf(buf, cap, "nan");
		return;
	}
	if (isinf(f)) {
		snprintf(buf, cap, f < 0 ? "-inf" : "inf");
		return;
	}
	char e[40];
	int prec = 1;
	for (; prec < 17; prec++) {
		snprintf(e, sizeof e, "%.*e", prec - 1, f);
		if (strtod(e, NULL) == f)
			break;
	}
	snprintf(e, sizeof e, "%.*e", prec - 1, f);
	/* e = [-]d[.ddd]e[+-]XX: collect the digits and the exponent. */
	char digits[24];
	int nd = 0, neg = e[0] == '-';
	const char *p = e + neg;
	for (; *p && *p != 'e'; p++)
		if (*p >= '0' && *p <= '9')
			digits[nd++] = *p;
	int exp10 = atoi(p + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	char *o = buf, *end = buf + cap - 1;
#define PUT(c) do { if (o < end) *o++ = (c); } while (0)
	if (neg)
		PUT('-');
	if (exp10 >= -4 && exp10 < 16) {
		if (exp10 < 0) {
			PUT('0');
			PUT('.');
			for (int i = 0; i < -exp10 - 1; i++)
				PUT('0');
			for (int i = 0; i < nd; i++)
				PUT(digits[i]);
		} else {
			for (int i = 0; i <= exp10; i++)
				PUT(i < nd ? digits[i] : '0');
			PUT('.');
			if (nd > exp10 + 1)
				for (int i = exp10 + 1; i < nd; i++)
					PUT(digits[i]);
			else
				PUT('0');
		}
	} else {
		PUT(digits[0]);
		if (nd > 1) {
			PUT('.');
			for (int i = 1; i < nd; i++)
				PUT(digits[i]);
		}
		char ex[16];
		snprintf(ex, sizeof ex, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
		for (char *q = ex; *q; q++)
			PUT(*q);
	}
#undef PUT
	*o = 0;
}

/* Python repr of a string: quotes and escapes. */
static int str_repr(struct tpl_run *R, struct tbuf *b, struct tstr *s)
{
	int has_sq = memchr(s->s, '\'', s->len) != NULL;
	int has_dq = memchr(s->s, '"', s->len) != NULL;
	char q = has_sq && !has_dq ? '"' : '\'';
	if (tpl_buf_putc(R, b, q))
		return -1;
	for (size_t i = 0; i < s->len;) {
		size_t at = i;
		uint32_t cp = utf8_next(s->s, s->len, &i);
		int rc;
		if (cp == (uint32_t)q || cp == '\\')
			rc = tpl_buf_printf(R, b, "\\%c", (char)cp);
		else if (cp == '\n')
			rc = tpl_buf_put(R, b, "\\n", 2);
		else if (cp == '\r')
			rc = tpl_buf_put(R, b, "\\r", 2);
		else if (cp == '\t')
			rc = tpl_buf_put(R, b, "\\t", 2);
		else if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad)
			rc = tpl_buf_printf(R, b, "\\x%02x", cp);
		else if (cp == 0x2028 || cp == 0x2029 || (cp >= 0x200b && cp <= 0x200f) || cp == 0xfeff)
			rc = tpl_buf_printf(R, b, "\\u%04x", cp);
		else
			rc = tpl_buf_put(R, b, s->s + at, i - at);
		if (rc)
			return -1;
	}
	return tpl_buf_putc(R, b, q);
}

static int seq_repr(struct tpl_run *R, struct tbuf *b, struct tlist *l, int depth)
{
	int tuple = l->h.flags & TL_TUPLE;
	if (tpl_buf_putc(R, b, tuple ? '(' : '['))
		return -1;
	for (size_t i = 0; i < l->n; i++) {
		if ((i && tpl_buf_put(R, b, ", ", 2)) || tpl_value_repr(R, b, l->v[i], depth + 1))
			return -1;
	}
	if (tuple && l->n == 1 && tpl_buf_putc(R, b, ','))
		return -1;
	return tpl_buf_putc(R, b, tuple ? ')' : ']');
}

static int dict_repr(struct tpl_run *R, struct tbuf *b, struct tdict *d, int depth)
{
	if (tpl_buf_putc(R, b, '{'))
		return -1;
	for (size_t i = 0; i < d->n; i++) {
		if ((i && tpl_buf_put(R, b, ", ", 2)) || tpl_value_repr(R, b, d->e[i].k, depth + 1) ||
		    tpl_buf_put(R, b, ": ", 2) || tpl_value_repr(R, b, d->e[i].v, depth + 1))
			return -1;
	}
	return tpl_buf_putc(R, b, '}');
}

static int obj_str(struct tpl_run *R, struct tbuf *b, struct tv v, int depth)
{
	char num[64];
	switch (v.kind) {
	case TV_UNDEF: return 0;
	case TV_NONE: return tpl_buf_put(R, b, "None", 4);
	case TV_BOOL: return v.i ? tpl_buf_put(R, b, "True", 4) : tpl_buf_put(R, b, "False", 5);
	case TV_INT: return tpl_buf_printf(R, b, "%lld", (long long)v.i);
	case TV_FLOAT:
		tpl_float_repr(v.f, num, sizeof num);
		return tpl_buf_put(R, b, num, strlen(num));
	case TV_STR: return tpl_buf_put(R, b, v.s->s, v.s->len);
	case TV_LIST:
		if (v.l->h.flags & TL_GEN)
			return tpl_buf_put(R, b, "<generator object>", 18);
		return seq_repr(R, b, v.l, depth);
	case TV_DICT: return dict_repr(R, b, v.d, depth);
	case TV_NS:
		return tpl_buf_put(R, b, "<Namespace ", 11) || dict_repr(R, b, v.d, depth) ||
		       tpl_buf_putc(R, b, '>');
	case TV_MACRO:
		return tpl_buf_printf(R, b, "<Macro '%s'>",
				      v.m->def->name ? v.m->def->name->s : "caller");
	case TV_FUNC: return tpl_buf_printf(R, b, "<function %s>", v.fn->name);
	case TV_METHOD:
		return tpl_buf_printf(R, b, "<built-in method %s of %s object>", v.mt->name,
				      tv_type_name(v.mt->self));
	case TV_LOOP:
		return tpl_buf_printf(R, b, "<LoopContext %lld/%zu>", (long long)v.lp->i + 1,
				      v.lp->items->n);
	default: /* Python adds the address; a rendering must not depend on it
		  * (the same prompt each time, and no heap address in a prompt) */
		return tpl_buf_printf(R, b, "<%s object>", tv_type_name(v));
	}
}

int tpl_value_repr(struct tpl_run *R, struct tbuf *b, struct tv v, int depth)
{
	if (depth > TPL_VALUE_DEPTH_MAX)
		return tpl_fail(R, ING_ERR_RANGE, "values nested more than %d deep",
				TPL_VALUE_DEPTH_MAX);
	if (tv_is_safe(v))
		return tpl_buf_put(R, b, "Markup(", 7) || str_repr(R, b, v.s) || tpl_buf_putc(R, b, ')');
	if (v.kind == TV_STR)
		return str_repr(R, b, v.s);
	if (v.kind == TV_UNDEF)
		return tpl_buf_put(R, b, "Undefined", 9);
	return obj_str(R, b, v, depth);
}

int tpl_value_str(struct tpl_run *R, struct tbuf *b, struct tv v)
{
	return obj_str(R, b, v, 0);
}

int tpl_to_str(struct tpl_run *R, struct tv v, struct tv *out)
{
	if (v.kind == TV_STR) {
		tv_retain(v);
		*out = v;
		return 0;
	}
	struct tbuf b = { 0 };
	int rc = tpl_value_str(R, &b, v);
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	return rc;
}
