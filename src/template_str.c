/* template_str.c — Python string semantics over UTF-8: code point
 * indexing, whitespace and case as Python's str knows them, strip, split,
 * replace, find, slicing, and the two formatting languages templates use
 * ("%s" % x and "{}".format(x)).
 *
 * Strings are UTF-8 bytes; indexes and lengths are in code points as in
 * Python. Invalid UTF-8 never fails: each bad byte counts as one code
 * point. Case mapping beyond ASCII uses the C.UTF-8 locale's simple
 * mappings (towupper), which covers what chat templates meet. */
#include <ctype.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

#include "mem.h"
#include "template_int.h"

/* ---------------------------------------------------------------- UTF-8 */

uint32_t utf8_next(const char *s, size_t n, size_t *i)
{
	const uint8_t *p = (const uint8_t *)s + *i;
	size_t left = n - *i;
	uint32_t c = p[0];
	int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
	if (len == 1 || len == 0 || (size_t)len > left) {
		(*i)++;
		return c;
	}
	uint32_t cp = c & (0x7f >> len);
	for (int k = 1; k < len; k++) {
		if ((p[k] & 0xc0) != 0x80) {
			(*i)++;
			return c;
		}
		cp = (cp << 6) | (p[k] & 0x3f);
	}
	*i += (size_t)len;
	return cp;
}

int utf8_put(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static int32_t count_cp(const char *s, size_t n)
{
	int32_t k = 0;
	for (size_t i = 0; i < n; k++)
		utf8_next(s, n, &i);
	return k;
}

int32_t tstr_ncp(struct tstr *s)
{
	if (s->ncp < 0)
		s->ncp = count_cp(s->s, s->len);
	return s->ncp;
}

size_t tstr_cp_off(struct tstr *s, int64_t k)
{
	if ((size_t)tstr_ncp(s) == s->len)
		return (size_t)k;
	size_t i = 0;
	for (int64_t j = 0; j < k && i < s->len; j++)
		utf8_next(s->s, s->len, &i);
	return i;
}

/* ------------------------------------------------- code point classes */

int cp_isspace(uint32_t cp)
{
	if (cp < 0x80)
		return cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f);
	return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
	       cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_locale_init(void)
{
	utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

static locale_t uloc(void)
{
	pthread_once(&utf8_once, utf8_locale_init);
	return utf8_locale;
}

uint32_t cp_upper(uint32_t cp)
{
	if (cp < 0x80)
		return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
	return uloc() ? (uint32_t)towupper_l((wint_t)cp, uloc()) : cp;
}

uint32_t cp_lower(uint32_t cp)
{
	if (cp < 0x80)
		return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
	return uloc() ? (uint32_t)towlower_l((wint_t)cp, uloc()) : cp;
}

int cp_isalpha(uint32_t cp)
{
	if (cp < 0x80)
		return isalpha((int)cp);
	return uloc() ? iswalpha_l((wint_t)cp, uloc()) != 0 : 0;
}

int cp_isdigit(uint32_t cp)
{
	return cp >= '0' && cp <= '9';
}

static int cp_iscased(uint32_t cp)
{
	return cp_upper(cp) != cp || cp_lower(cp) != cp;
}

/* --------------------------------------------------------------- strip */

static int in_chars(struct tstr *chars, uint32_t cp)
{
	for (size_t i = 0; i < chars->len;)
		if (utf8_next(chars->s, chars->len, &i) == cp)
			return 1;
	return 0;
}

int tpl_str_strip(struct tpl_run *R, struct tstr *s, struct tstr *chars, int how, struct tv *out)
{
	size_t b = 0, e = s->len;
	if (how & STRIP_LEFT) {
		while (b < e) {
			size_t i = b;
			uint32_t cp = utf8_next(s->s, e, &i);
			if (chars ? !in_chars(chars, cp) : !cp_isspace(cp))
				break;
			b = i;
		}
	}
	if (how & STRIP_RIGHT) {
		while (e > b) {
			size_t st = e - 1;
			while (st > b && ((uint8_t)s->s[st] & 0xc0) == 0x80 && e - st < 4)
				st--;
			size_t i = st;
			uint32_t cp = utf8_next(s->s, e, &i);
			if (i != e) { /* not a whole sequence: a lone byte */
				st = e - 1;
				cp = (uint8_t)s->s[st];
			}
			if (chars ? !in_chars(chars, cp) : !cp_isspace(cp))
				break;
			e = st;
		}
	}
	if (b == 0 && e == s->len) {
		tv_retain(tv_str_v(s));
		*out = tv_str_v(s);
		return 0;
	}
	return tpl_str_v(R, s->s + b, e - b, out);
}

/* ---------------------------------------------------------------- case */

static int jinja_title_break(uint32_t cp)
{
	return cp_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
}

/* Whether code point number k of a string gets upper case under how;
 * *prev_cased carries the word state of the title cases. */
static int case_upper_at(int how, uint32_t cp, int first, int *prev_cased)
{
	int up = 0;
	switch (how) {
	case CASE_UPPER: return 1;
	case CASE_LOWER: return 0;
	case CASE_SWAP: return cp_upper(cp) != cp || cp == 0xdf;
	case CASE_CAPITALIZE: return first;
	case CASE_TITLE:
		up = !*prev_cased;
		*prev_cased = cp_iscased(cp);
		return up;
	default: /* CASE_JTITLE */
		up = !*prev_cased;
		*prev_cased = !jinja_title_break(cp);
		return up;
	}
}

int tpl_str_case(struct tpl_run *R, struct tstr *s, int how, struct tv *out)
{
	struct tstr *t;
	/* Simple mappings grow a code point's UTF-8 form by at most half. */
	size_t cap = s->len + s->len / 2 + 4;
	if (tpl_str_new(R, NULL, cap, &t))
		return -1;
	size_t o = 0;
	int prev_cased = 0, first = 1;
	for (size_t i = 0; i < s->len;) {
		uint32_t cp = utf8_next(s->s, s->len, &i);
		int up = case_upper_at(how, cp, first, &prev_cased);
		char enc[4];
		int k;
		if (cp == 0xdf && up) { /* Python's full mapping: "SS", or "Ss" in titles */
			enc[0] = 'S';
			enc[1] = how == CASE_UPPER || how == CASE_SWAP ? 'S' : 's';
			k = 2;
		} else {
			k = utf8_put(up ? cp_upper(cp) : cp_lower(cp), enc);
		}
		first = 0;
		if (o + (size_t)k > cap) {
			tobj_release(&t->h);
			return tpl_fail(R, ING_ERR_FORMAT, "case mapping grew the string unexpectedly");
		}
		memcpy(t->s + o, enc, (size_t)k);
		o += (size_t)k;
	}
	t->len = o;
	t->s[o] = 0;
	*out = tv_str_v(t);
	return 0;
}

/* --------------------------------------------------------------- split */

static int push_piece(struct tpl_run *R, struct tlist *l, const char *s, size_t n)
{
	struct tv v;
	return tpl_str_v(R, s, n, &v) || tpl_list_push(R, l, v);
}

static int split_ws(struct tpl_run *R, struct tstr *s, int64_t maxsplit, struct tlist *l)
{
	size_t i = 0, n = s->len;
	for (;;) {
		while (i < n) { /* skip whitespace */
			size_t j = i;
			if (!cp_isspace(utf8_next(s->s, n, &j)))
				break;
			i = j;
		}
		if (i >= n)
			return 0;
		if (maxsplit >= 0 && (int64_t)l->n >= maxsplit) {
			size_t e = n; /* the rest, right-stripped */
			while (e > i && cp_isspace((uint8_t)s->s[e - 1]))
				e--;
			return push_piece(R, l, s->s + i, e - i);
		}
		size_t st = i;
		while (i < n) {
			size_t j = i;
			if (cp_isspace(utf8_next(s->s, n, &j)))
				break;
			i = j;
		}
		if (push_piece(R, l, s->s + st, i - st))
			return -1;
	}
}

static int rsplit_ws(struct tpl_run *R, struct tstr *s, int64_t maxsplit, struct tlist *l)
{
	/* Pieces from the right, reversed at the end. ASCII whitespace only
	 * is scanned backwards byte-wise; others count as word bytes. */
	size_t e = s->len;
	for (;;) {
		while (e > 0 && cp_isspace((uint8_t)s->s[e - 1]))
			e--;
		if (e == 0)
			break;
		if (maxsplit >= 0 && (int64_t)l->n >= maxsplit) {
			size_t b = 0;
			while (b < e && cp_isspace((uint8_t)s->s[b]))
				b++;
			if (push_piece(R, l, s->s + b, e - b))
				return -1;
			break;
		}
		size_t b = e;
		while (b > 0 && !cp_isspace((uint8_t)s->s[b - 1]))
			b--;
		if (push_piece(R, l, s->s + b, e - b))
			return -1;
		e = b;
	}
	for (size_t i = 0; i < l->n / 2; i++) {
		struct tv t = l->v[i];
		l->v[i] = l->v[l->n - 1 - i];
		l->v[l->n - 1 - i] = t;
	}
	return 0;
}

static const char *mem_rfind(const char *h, size_t hn, const char *nd, size_t nn)
{
	if (nn > hn)
		return NULL;
	for (size_t i = hn - nn + 1; i-- > 0;)
		if (!memcmp(h + i, nd, nn))
			return h + i;
	return NULL;
}

static int split_sep(struct tpl_run *R, struct tstr *s, struct tstr *sep, int64_t maxsplit,
		     int rev, struct tlist *l)
{
	if (!rev) {
		const char *p = s->s, *end = s->s + s->len;
		for (;;) {
			const char *q = (maxsplit < 0 || (int64_t)l->n < maxsplit)
				? memmem(p, (size_t)(end - p), sep->s, sep->len) : NULL;
			if (!q)
				return push_piece(R, l, p, (size_t)(end - p));
			if (push_piece(R, l, p, (size_t)(q - p)))
				return -1;
			p = q + sep->len;
		}
	}
	size_t e = s->len;
	for (;;) {
		const char *q = (maxsplit < 0 || (int64_t)l->n < maxsplit)
			? mem_rfind(s->s, e, sep->s, sep->len) : NULL;
		if (!q) {
			if (push_piece(R, l, s->s, e))
				return -1;
			break;
		}
		size_t at = (size_t)(q - s->s);
		if (push_piece(R, l, q + sep->len, e - at - sep->len))
			return -1;
		e = at;
	}
	for (size_t i = 0; i < l->n / 2; i++) {
		struct tv t = l->v[i];
		l->v[i] = l->v[l->n - 1 - i];
		l->v[l->n - 1 - i] = t;
	}
	return 0;
}

int tpl_str_split(struct tpl_run *R, struct tstr *s, struct tstr *sep, int64_t maxsplit,
		  int from_right, struct tv *out)
{
	if (sep && sep->len == 0)
		return tpl_fail(R, ING_ERR_FORMAT, "empty separator");
	struct tlist *l;
	if (tpl_list_new(R, 4, &l))
		return -1;
	int rc = !sep ? (from_right ? rsplit_ws(R, s, maxsplit, l) : split_ws(R, s, maxsplit, l))
		      : split_sep(R, s, sep, maxsplit, from_right, l);
	if (rc) {
		tobj_release(&l->h);
		return -1;
	}
	*out = tv_list_v(l);
	return 0;
}

/* ------------------------------------------------ replace, find, count */

int tpl_str_replace(struct tpl_run *R, struct tstr *s, struct tstr *old, struct tstr *new_,
		    int64_t count, struct tv *out)
{
	struct tbuf b = { 0 };
	int rc = 0;
	int64_t done = 0;
	if (old->len == 0) { /* insert new_ before every code point and at the end */
		for (size_t i = 0; i <= s->len && !rc;) {
			if (count < 0 || done < count) {
				rc = tpl_buf_put(R, &b, new_->s, new_->len);
				done++;
			}
			if (i == s->len)
				break;
			size_t j = i;
			utf8_next(s->s, s->len, &j);
			rc = rc ? rc : tpl_buf_put(R, &b, s->s + i, j - i);
			i = j;
		}
	} else {
		const char *p = s->s, *end = s->s + s->len;
		while (!rc) {
			const char *q = (count < 0 || done < count)
				? memmem(p, (size_t)(end - p), old->s, old->len) : NULL;
			if (!q) {
				rc = tpl_buf_put(R, &b, p, (size_t)(end - p));
				break;
			}
			rc = tpl_buf_put(R, &b, p, (size_t)(q - p)) ||
			     tpl_buf_put(R, &b, new_->s, new_->len);
			p = q + old->len;
			done++;
		}
	}
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	return rc;
}

int64_t tpl_str_find(struct tstr *s, struct tstr *needle, int64_t start, int64_t end, int rev)
{
	int64_t n = tstr_ncp(s);
	if (start < 0)
		start = start + n < 0 ? 0 : start + n;
	if (end < 0)
		end = end + n < 0 ? 0 : end + n;
	if (end > n)
		end = n;
	if (start > end)
		return -1;
	size_t b = tstr_cp_off(s, start), e = tstr_cp_off(s, end);
	const char *q = rev ? mem_rfind(s->s + b, e - b, needle->s, needle->len)
			    : memmem(s->s + b, e - b, needle->s, needle->len);
	if (!q)
		return -1;
	return start + count_cp(s->s + b, (size_t)(q - (s->s + b)));
}

int64_t tpl_str_count(struct tstr *s, struct tstr *needle)
{
	if (needle->len == 0)
		return tstr_ncp(s) + 1;
	int64_t k = 0;
	const char *p = s->s, *end = s->s + s->len, *q;
	while ((q = memmem(p, (size_t)(end - p), needle->s, needle->len))) {
		k++;
		p = q + needle->len;
	}
	return k;
}

/* ------------------------------------------------------------- slicing */

static int slice_index(struct tpl_run *R, struct tv v, int64_t *out, int *given)
{
	*given = 0;
	if (v.kind == TV_UNDEF || v.kind == TV_NONE)
		return 0;
	if (v.kind != TV_INT && v.kind != TV_BOOL)
		return tpl_fail(R, ING_ERR_FORMAT, "slice indices must be integers or None");
	*out = v.i;
	*given = 1;
	return 0;
}

static void slice_adjust(int64_t len, int64_t step, int64_t *start, int gs, int64_t *stop, int gt)
{
	if (step > 0) {
		if (!gs) *start = 0;
		if (!gt) *stop = len;
	} else {
		if (!gs) *start = len - 1;
		if (!gt) *stop = -1 - len; /* becomes -1 below */
	}
	for (int k = 0; k < 2; k++) {
		int64_t *p = k ? stop : start;
		if (*p < 0) {
			*p += len;
			if (*p < 0)
				*p = step < 0 ? -1 : 0;
		} else if (*p >= len) {
			*p = step < 0 ? len - 1 : len;
		}
	}
}

static int slice_str(struct tpl_run *R, struct tstr *s, int64_t start, int64_t stop, int64_t step,
		     struct tv *out)
{
	int64_t n = tstr_ncp(s);
	if (step == 1) {
		if (stop < start)
			stop = start;
		size_t b = tstr_cp_off(s, start), e = tstr_cp_off(s, stop);
		return tpl_str_v(R, s->s + b, e - b, out);
	}
	size_t *off = ing_malloc_array((size_t)n + 1, sizeof *off);
	if (!off)
		return tpl_fail_nomem(R);
	size_t i = 0;
	for (int64_t k = 0; k < n; k++) {
		off[k] = i;
		utf8_next(s->s, s->len, &i);
	}
	off[n] = s->len;
	struct tbuf b = { 0 };
	int rc = 0;
	for (int64_t k = start; !rc && (step > 0 ? k < stop : k > stop); k += step)
		rc = tpl_buf_put(R, &b, s->s + off[k], off[k + 1] - off[k]);
	ing_free(off);
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	return rc;
}

int tpl_slice(struct tpl_run *R, struct tv obj, struct tv vstart, struct tv vstop, struct tv vstep,
	      struct tv *out)
{
	int64_t start = 0, stop = 0, step = 1;
	int gs, gt, gp;
	if (slice_index(R, vstart, &start, &gs) || slice_index(R, vstop, &stop, &gt) ||
	    slice_index(R, vstep, &step, &gp))
		return -1;
	if (step == 0)
		return tpl_fail(R, ING_ERR_FORMAT, "slice step cannot be zero");
	if (obj.kind == TV_STR) {
		slice_adjust(tstr_ncp(obj.s), step, &start, gs, &stop, gt);
		return slice_str(R, obj.s, start, stop, step, out);
	}
	if (!tv_is_seq(obj)) {
		*out = tv_undef(NULL);
		return 0;
	}
	slice_adjust((int64_t)obj.l->n, step, &start, gs, &stop, gt);
	struct tlist *l;
	if (tpl_list_new(R, 0, &l))
		return -1;
	l->h.flags = obj.l->h.flags;
	for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
		tv_retain(obj.l->v[k]);
		if (tpl_list_push(R, l, obj.l->v[k])) {
			tobj_release(&l->h);
			return -1;
		}
	}
	*out = tv_list_v(l);
	return 0;
}

/* ---------------------------------------------------------- formatting */

/* Pads text t (n bytes) to width code points. align: '<', '>', '^', '='. */
static int put_padded(struct tpl_run *R, struct tbuf *b, const char *t, size_t n, int64_t width,
		      char align, const char *fill, size_t fill_len)
{
	int64_t w = count_cp(t, n), pad = width > w ? width - w : 0;
	int64_t left = align == '>' ? pad : align == '^' ? pad / 2 : 0;
	for (int64_t i = 0; i < left; i++)
		if (tpl_buf_put(R, b, fill, fill_len))
			return -1;
	if (tpl_buf_put(R, b, t, n))
		return -1;
	for (int64_t i = left; i < pad; i++)
		if (tpl_buf_put(R, b, fill, fill_len))
			return -1;
	return 0;
}

struct fspec {
	char fill[5];
	size_t fill_len;
	char align, sign, type;
	int alt, zero, comma;
	int64_t width, prec; /* -1 = none */
};

static int fspec_parse(struct tpl_run *R, const char *s, size_t n, struct fspec *f)
{
	*f = (struct fspec){ .fill = " ", .fill_len = 1, .width = -1, .prec = -1 };
	size_t i = 0;
	size_t j = 0;
	if (n) {
		utf8_next(s, n, &j);
		if (j < n && strchr("<>^=", s[j])) {
			memcpy(f->fill, s, j);
			f->fill[j] = 0;
			f->fill_len = j;
			f->align = s[j];
			i = j + 1;
		} else if (strchr("<>^=", s[0])) {
			f->align = s[0];
			i = 1;
		}
	}
	if (i < n && strchr("+- ", s[i]))
		f->sign = s[i++];
	if (i < n && s[i] == '#')
		f->alt = 1, i++;
	if (i < n && s[i] == '0')
		f->zero = 1, i++;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
		f->width = (f->width < 0 ? 0 : f->width) * 10 + (s[i] - '0');
	if (i < n && (s[i] == ',' || s[i] == '_'))
		f->comma = 1, i++;
	if (i < n && s[i] == '.') {
		f->prec = 0;
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			f->prec = f->prec * 10 + (s[i] - '0');
	}
	if (i < n)
		f->type = s[i++];
	if (i != n || f->width > 100000 || f->prec > 1000)
		return tpl_fail(R, ING_ERR_FORMAT, "invalid format specifier");
	if (f->zero && !f->align) {
		f->align = '=';
		f->fill[0] = '0';
		f->fill[1] = 0;
		f->fill_len = 1;
	}
	return 0;
}

/* Formats a number per f into t (at least 512 bytes). */
static int fmt_number(struct tpl_run *R, struct tv v, struct fspec *f, char *t, size_t cap)
{
	char type = f->type;
	int is_int = v.kind != TV_FLOAT;
	if (is_int && (!type || type == 'd' || type == 'n'))
		return snprintf(t, cap, "%lld", (long long)v.i);
	if (is_int && strchr("xXob", type)) {
		unsigned long long u = (unsigned long long)(v.i < 0 ? -v.i : v.i);
		char tmp[80];
		int k = 0;
		if (type == 'b') {
			do tmp[k++] = (char)('0' + (u & 1)); while (u >>= 1);
		} else {
			int base = type == 'o' ? 8 : 16;
			const char *dg = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
			do tmp[k++] = dg[u % (unsigned)base]; while (u /= (unsigned)base);
		}
		int o = 0;
		if (v.i < 0)
			t[o++] = '-';
		if (f->alt) {
			t[o++] = '0';
			t[o++] = type == 'X' ? 'X' : type;
		}
		while (k)
			t[o++] = tmp[--k];
		t[o] = 0;
		return o;
	}
	if (is_int && type == 'c') {
		int k = utf8_put((uint32_t)v.i, t);
		t[k] = 0;
		return k;
	}
	double x = is_int ? (double)v.i : v.f;
	int prec = f->prec < 0 ? 6 : (int)f->prec;
	switch (type) {
	case 0:
		if (f->prec < 0) {
			tpl_float_repr(x, t, cap);
			return (int)strlen(t);
		}
		return snprintf(t, cap, "%.*g", prec ? prec : 1, x);
	case 'f': case 'F': return snprintf(t, cap, type == 'f' ? "%.*f" : "%.*F", prec, x);
	case 'e': case 'E': return snprintf(t, cap, type == 'e' ? "%.*e" : "%.*E", prec, x);
	case 'g': case 'G': return snprintf(t, cap, type == 'g' ? "%.*g" : "%.*G", prec ? prec : 1, x);
	case '%': {
		int k = snprintf(t, cap, "%.*f%%", prec, x * 100);
		return k;
	}
	}
	return tpl_fail(R, ING_ERR_FORMAT, "unknown format code '%c' for object of type '%s'", type,
			tv_type_name(v));
}

int tpl_format_spec(struct tpl_run *R, struct tbuf *b, struct tv v, const char *spec, size_t n)
{
	struct fspec f;
	if (fspec_parse(R, spec, n, &f))
		return -1;
	if (v.kind == TV_STR || (!tv_is_num(v) && !n) || (v.kind == TV_BOOL && !f.type)) {
		if (v.kind != TV_STR && v.kind != TV_BOOL && n)
			return tpl_fail(R, ING_ERR_FORMAT, "unsupported format string passed to %s.__format__",
					tv_type_name(v));
		if (f.type && f.type != 's')
			return tpl_fail(R, ING_ERR_FORMAT, "unknown format code '%c' for object of type 'str'",
					f.type);
		struct tv s;
		if (tpl_to_str(R, v, &s))
			return -1;
		size_t len = s.s->len;
		if (f.prec >= 0 && f.prec < tstr_ncp(s.s))
			len = tstr_cp_off(s.s, f.prec);
		int rc = put_padded(R, b, s.s->s, len, f.width, f.align ? f.align : '<', f.fill,
				    f.fill_len);
		tv_release(s);
		return rc;
	}
	if (!tv_is_num(v))
		return tpl_fail(R, ING_ERR_FORMAT, "unsupported format string passed to %s.__format__",
				tv_type_name(v));
	char t[600];
	int k = fmt_number(R, v, &f, t + 1, sizeof t - 1);
	if (k < 0)
		return -1;
	char *p = t + 1;
	if (p[0] != '-' && f.sign && f.sign != '-') {
		*--p = f.sign;
		k++;
	}
	char align = f.align ? f.align : '>';
	if (align == '=' && (p[0] == '-' || p[0] == '+' || p[0] == ' ')) {
		if (tpl_buf_putc(R, b, p[0]))
			return -1;
		return put_padded(R, b, p + 1, (size_t)k - 1, f.width - 1, '>', f.fill, f.fill_len);
	}
	return put_padded(R, b, p, (size_t)k, f.width, align == '=' ? '>' : align, f.fill, f.fill_len);
}

/* One "%..." conversion of the printf-style operator. */
static int percent_one(struct tpl_run *R, struct tbuf *b, char type, const char *flags, int width,
		       int prec, struct tv v)
{
	char t[600];
	int left = strchr(flags, '-') != NULL, zero = strchr(flags, '0') != NULL;
	if (type == 's' || type == 'r' || type == 'a') {
		struct tbuf s = { 0 };
		int rc = type == 's' ? tpl_value_str(R, &s, v) : tpl_value_repr(R, &s, v, 0);
		size_t len = s.n;
		if (!rc && prec >= 0) {
			size_t i = 0;
			for (int k = 0; k < prec && i < s.n; k++)
				utf8_next(s.p, s.n, &i);
			len = i;
		}
		if (!rc)
			rc = put_padded(R, b, s.p ? s.p : "", len, width, left ? '<' : '>', " ", 1);
		tpl_buf_free(&s);
		return rc;
	}
	if (!tv_is_num(v))
		return tpl_fail(R, ING_ERR_FORMAT, "%%%c format: a real number is required, not %s", type,
				tv_type_name(v));
	char f[32];
	int fo = 0;
	f[fo++] = '%';
	for (const char *q = flags; *q && fo < 10; q++)
		f[fo++] = *q;
	if (width >= 0)
		fo += snprintf(f + fo, sizeof f - (size_t)fo, "%d", width);
	if (prec >= 0)
		fo += snprintf(f + fo, sizeof f - (size_t)fo, ".%d", prec);
	int k;
	if (strchr("diu", type)) {
		long long x = v.kind == TV_FLOAT ? (long long)v.f : (long long)v.i;
		snprintf(f + fo, sizeof f - (size_t)fo, "lld");
		k = snprintf(t, sizeof t, f, x);
	} else if (strchr("xXo", type)) {
		long long x = v.kind == TV_FLOAT ? (long long)v.f : (long long)v.i;
		snprintf(f + fo, sizeof f - (size_t)fo, "ll%c", type);
		k = snprintf(t, sizeof t, f, x);
	} else if (type == 'c') {
		k = utf8_put((uint32_t)(v.kind == TV_FLOAT ? 0 : v.i), t);
	} else {
		double x = v.kind == TV_FLOAT ? v.f : (double)v.i;
		f[fo] = type;
		f[fo + 1] = 0;
		k = snprintf(t, sizeof t, f, x);
	}
	(void)zero;
	return tpl_buf_put(R, b, t, k < 0 ? 0 : (size_t)k < sizeof t ? (size_t)k : sizeof t - 1);
}

int tpl_str_percent(struct tpl_run *R, struct tstr *fmt, struct tv args, struct tv *out)
{
	struct tv *vals = &args;
	size_t nvals = 1, next = 0;
	if (args.kind == TV_LIST && (args.l->h.flags & TL_TUPLE)) {
		vals = args.l->v;
		nvals = args.l->n;
	}
	struct tbuf b = { 0 };
	const char *s = fmt->s, *end = fmt->s + fmt->len;
	int rc = 0, used_map = 0;
	while (s < end && !rc) {
		const char *pc = memchr(s, '%', (size_t)(end - s));
		if (!pc) {
			rc = tpl_buf_put(R, &b, s, (size_t)(end - s));
			break;
		}
		if ((rc = tpl_buf_put(R, &b, s, (size_t)(pc - s))))
			break;
		s = pc + 1;
		struct tv v = tv_none(), *key_v = NULL;
		if (s < end && *s == '(') {
			const char *ke = memchr(s, ')', (size_t)(end - s));
			if (!ke || args.kind != TV_DICT) {
				rc = tpl_fail(R, ING_ERR_FORMAT, "format requires a mapping");
				break;
			}
			struct tv k;
			if ((rc = tpl_str_v(R, s + 1, (size_t)(ke - s - 1), &k)))
				break;
			key_v = tpl_dict_get(args.d, k);
			tv_release(k);
			if (!key_v) {
				rc = tpl_fail(R, ING_ERR_FORMAT, "format key not found");
				break;
			}
			used_map = 1;
			s = ke + 1;
		}
		char flags[8] = { 0 };
		int nf = 0, width = -1, prec = -1;
		while (s < end && strchr("-+ #0", *s) && nf < 7)
			flags[nf++] = *s++;
		for (; s < end && *s >= '0' && *s <= '9' && width < 100000; s++)
			width = (width < 0 ? 0 : width * 10) + (*s - '0');
		if (s < end && *s == '.')
			for (prec = 0, s++; s < end && *s >= '0' && *s <= '9' && prec < 1000; s++)
				prec = prec * 10 + (*s - '0');
		while (s < end && strchr("hlL", *s))
			s++;
		if (s >= end) {
			rc = tpl_fail(R, ING_ERR_FORMAT, "incomplete format");
			break;
		}
		char type = *s++;
		if (type == '%') {
			rc = tpl_buf_putc(R, &b, '%');
			continue;
		}
		if (!strchr("sradiuxXoeEfFgGc", type)) {
			rc = tpl_fail(R, ING_ERR_FORMAT, "unsupported format character '%c'", type);
			break;
		}
		if (key_v) {
			v = *key_v;
		} else if (args.kind == TV_DICT && !(args.l->h.flags & TL_TUPLE) && nvals == 1 &&
			   used_map) {
			v = args;
		} else {
			if (next >= nvals) {
				rc = tpl_fail(R, ING_ERR_FORMAT, "not enough arguments for format string");
				break;
			}
			v = vals[next++];
		}
		rc = percent_one(R, &b, type, flags, width, prec, v);
	}
	/* CPython: a mapping-like right operand (dict or list, not a tuple)
	 * never leaves arguments "not converted". */
	int mapping = args.kind == TV_DICT || args.kind == TV_UNDEF ||
		      (args.kind == TV_LIST && !(args.l->h.flags & TL_TUPLE));
	if (!rc && !used_map && next < nvals && !mapping)
		rc = tpl_fail(R, ING_ERR_FORMAT, "not all arguments converted during string formatting");
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	return rc;
}

/* Value of replacement field name f[0..n) ("", "0", "name"). */
static int format_field(struct tpl_run *R, struct tpl_args *a, const char *f, size_t n,
			int *auto_idx, struct tv *out)
{
	if (n == 0 || (f[0] >= '0' && f[0] <= '9')) {
		long k = n ? strtol(f, NULL, 10) : (*auto_idx)++;
		if (k < 0 || k >= a->npos)
			return tpl_fail(R, ING_ERR_FORMAT, "Replacement index %ld out of range for "
					"positional args tuple", k);
		*out = a->pos[k];
		return 0;
	}
	for (int i = 0; i < a->nkw; i++)
		if (a->kwn[i]->len == n && !memcmp(a->kwn[i]->s, f, n)) {
			*out = a->kwv[i];
			return 0;
		}
	return tpl_fail(R, ING_ERR_FORMAT, "KeyError: '%.*s'", (int)n, f);
}

int tpl_str_format(struct tpl_run *R, struct tstr *fmt, struct tpl_args *a, struct tv *out)
{
	struct tbuf b = { 0 };
	const char *s = fmt->s, *end = s + fmt->len;
	int rc = 0, auto_idx = 0;
	while (s < end && !rc) {
		if (*s == '{' && s + 1 < end && s[1] == '{') {
			rc = tpl_buf_putc(R, &b, '{');
			s += 2;
		} else if (*s == '}' && s + 1 < end && s[1] == '}') {
			rc = tpl_buf_putc(R, &b, '}');
			s += 2;
		} else if (*s == '}') {
			rc = tpl_fail(R, ING_ERR_FORMAT, "Single '}' encountered in format string");
		} else if (*s == '{') {
			const char *e = memchr(s, '}', (size_t)(end - s));
			if (!e) {
				rc = tpl_fail(R, ING_ERR_FORMAT, "Single '{' encountered in format string");
				break;
			}
			const char *f = s + 1, *colon = memchr(f, ':', (size_t)(e - f));
			const char *bang = memchr(f, '!', (size_t)((colon ? colon : e) - f));
			const char *fe = bang ? bang : colon ? colon : e;
			struct tv v;
			rc = format_field(R, a, f, (size_t)(fe - f), &auto_idx, &v);
			if (!rc && bang && bang + 1 < e && bang[1] == 'r') {
				struct tbuf rb = { 0 };
				rc = tpl_value_repr(R, &rb, v, 0);
				struct tv rs;
				if (!rc && !(rc = tpl_buf_take(R, &rb, &rs))) {
					rc = colon ? tpl_format_spec(R, &b, rs, colon + 1, (size_t)(e - colon - 1))
						   : tpl_buf_put(R, &b, rs.s->s, rs.s->len);
					tv_release(rs);
				}
				tpl_buf_free(&rb);
			} else if (!rc) {
				rc = colon ? tpl_format_spec(R, &b, v, colon + 1, (size_t)(e - colon - 1))
					   : tpl_value_str(R, &b, v);
			}
			s = e + 1;
		} else {
			const char *q = s;
			while (q < end && *q != '{' && *q != '}')
				q++;
			rc = tpl_buf_put(R, &b, s, (size_t)(q - s));
			s = q;
		}
	}
	if (!rc)
		rc = tpl_buf_take(R, &b, out);
	tpl_buf_free(&b);
	return rc;
}
