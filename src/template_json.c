/* template_json.c — JSON in and out of template values.
 *
 * In: cJSON parses the context; since it keeps every number as a double,
 * the JSON text is scanned once more for its number tokens (in document
 * order, the order of a pre-order walk of the cJSON tree) so that "1"
 * stays an int and "1.0" a float, and large ints keep their digits, as
 * Python's json module reads them.
 *
 * Out: tojson is HF's json.dumps(x, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False): ", " and ": " without indent, ","
 * and ": " with it, keys in insertion order, floats as Python's repr,
 * NaN/Infinity spelled as Python does. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "mem.h"
#include "template_int.h"

/* ---------------------------------------------------------- numbers */

struct jnum {
	uint8_t is_float, is_big;
	int64_t i;
};

struct numscan {
	struct jnum *v;
	size_t n, next;
};

static int scan_numbers(struct tpl_run *R, const char *s, size_t len, struct numscan *ns)
{
	size_t cap = 0;
	*ns = (struct numscan){ 0 };
	for (size_t i = 0; i < len;) {
		char c = s[i];
		if (c == '"') {
			for (i++; i < len && s[i] != '"'; i += s[i] == '\\' ? 2 : 1)
				;
			i++;
			continue;
		}
		if (c != '-' && (c < '0' || c > '9')) {
			i++;
			continue;
		}
		size_t b = i;
		struct jnum num = { 0 };
		while (i < len && strchr("+-0123456789.eE", s[i]) && s[i]) {
			if (s[i] == '.' || s[i] == 'e' || s[i] == 'E')
				num.is_float = 1;
			i++;
		}
		if (!num.is_float) {
			char buf[32];
			size_t k = i - b < sizeof buf - 1 ? i - b : sizeof buf - 1;
			memcpy(buf, s + b, k);
			buf[k] = 0;
			errno = 0;
			num.i = strtoll(buf, NULL, 10);
			num.is_big = errno == ERANGE || i - b >= sizeof buf - 1;
		}
		if (ns->n == cap) {
			cap = cap ? cap * 2 : 64;
			struct jnum *v = ing_realloc(ns->v, cap * sizeof *v);
			if (!v)
				return tpl_fail_nomem(R);
			ns->v = v;
		}
		ns->v[ns->n++] = num;
	}
	return 0;
}

static struct tv number_of(const cJSON *j, struct numscan *ns)
{
	if (ns && ns->next < ns->n) {
		struct jnum *num = &ns->v[ns->next++];
		if (!num->is_float && !num->is_big)
			return tv_int(num->i);
		return tv_float(j->valuedouble);
	}
	double d = j->valuedouble;
	if (d == floor(d) && fabs(d) <= 9007199254740992.0)
		return tv_int((int64_t)d);
	return tv_float(d);
}

/* ------------------------------------------------------- cJSON -> tv */

static int from_cjson(struct tpl_run *R, const cJSON *j, struct numscan *ns, struct tv *out)
{
	if (cJSON_IsNull(j)) {
		*out = tv_none();
	} else if (cJSON_IsFalse(j) || cJSON_IsTrue(j)) {
		*out = tv_bool(cJSON_IsTrue(j));
	} else if (cJSON_IsNumber(j)) {
		*out = number_of(j, ns);
	} else if (cJSON_IsString(j)) {
		const char *s = j->valuestring ? j->valuestring : "";
		return tpl_str_v(R, s, strlen(s), out);
	} else if (cJSON_IsArray(j)) {
		struct tlist *l;
		if (tpl_list_new(R, (size_t)cJSON_GetArraySize(j), &l))
			return -1;
		for (const cJSON *c = j->child; c; c = c->next) {
			struct tv v;
			if (from_cjson(R, c, ns, &v) || tpl_list_push(R, l, v)) {
				tobj_release(&l->h);
				return -1;
			}
		}
		*out = tv_list_v(l);
	} else if (cJSON_IsObject(j)) {
		struct tdict *d;
		if (tpl_dict_new(R, &d))
			return -1;
		for (const cJSON *c = j->child; c; c = c->next) {
			struct tv k, v;
			const char *key = c->string ? c->string : "";
			if (tpl_str_v(R, key, strlen(key), &k))
				goto fail;
			if (from_cjson(R, c, ns, &v)) {
				tv_release(k);
				goto fail;
			}
			if (tpl_dict_set(R, d, k, v))
				goto fail;
			continue;
fail:
			tobj_release(&d->h);
			return -1;
		}
		*out = tv_dict_v(d);
	} else {
		return tpl_fail(R, ING_ERR_INVALID, "unsupported JSON value in the context");
	}
	return 0;
}

int tpl_from_cjson(struct tpl_run *R, const struct cJSON *j, struct tv *out)
{
	return from_cjson(R, j, NULL, out);
}

int tpl_from_json_text(struct tpl_run *R, const char *text, size_t len, struct tv *out)
{
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!j) {
		size_t at = end && end >= text ? (size_t)(end - text) : 0;
		return tpl_fail(R, ING_ERR_INVALID, "context is not valid JSON (near byte %zu)", at);
	}
	while (end && end < text + len && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t'))
		end++;
	if (end && end < text + len && *end) {
		cJSON_Delete(j);
		return tpl_fail(R, ING_ERR_INVALID, "context: unexpected data after the JSON value");
	}
	struct numscan ns;
	int rc = scan_numbers(R, text, len, &ns);
	if (!rc)
		rc = from_cjson(R, j, &ns, out);
	ing_free(ns.v);
	cJSON_Delete(j);
	return rc;
}

/* ------------------------------------------------------- tv -> JSON */

static int json_string(struct tpl_run *R, struct tbuf *b, const char *s, size_t n, int ascii)
{
	if (tpl_buf_putc(R, b, '"'))
		return -1;
	size_t run = 0; /* start of the pending unescaped bytes */
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = NULL;
		char tmp[16];
		size_t at = i;
		if (c == '"') esc = "\\\"";
		else if (c == '\\') esc = "\\\\";
		else if (c == '\n') esc = "\\n";
		else if (c == '\r') esc = "\\r";
		else if (c == '\t') esc = "\\t";
		else if (c == '\b') esc = "\\b";
		else if (c == '\f') esc = "\\f";
		else if (c < 0x20) {
			snprintf(tmp, sizeof tmp, "\\u%04x", c);
			esc = tmp;
		} else if (c >= 0x80 && ascii) {
			uint32_t cp = utf8_next(s, n, &i);
			if (cp >= 0x10000) {
				cp -= 0x10000;
				snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 + (cp >> 10),
					 0xdc00 + (cp & 0x3ff));
			} else {
				snprintf(tmp, sizeof tmp, "\\u%04x", cp);
			}
			if (tpl_buf_put(R, b, s + run, at - run) || tpl_buf_put(R, b, tmp, strlen(tmp)))
				return -1;
			run = i;
			continue;
		}
		i++;
		if (!esc)
			continue;
		if (tpl_buf_put(R, b, s + run, at - run) || tpl_buf_put(R, b, esc, strlen(esc)))
			return -1;
		run = i;
	}
	if (tpl_buf_put(R, b, s + run, n - run))
		return -1;
	return tpl_buf_putc(R, b, '"');
}

static int json_float(struct tpl_run *R, struct tbuf *b, double f)
{
	char num[64];
	if (isnan(f))
		return tpl_buf_put(R, b, "NaN", 3);
	if (isinf(f))
		return f > 0 ? tpl_buf_put(R, b, "Infinity", 8) : tpl_buf_put(R, b, "-Infinity", 9);
	tpl_float_repr(f, num, sizeof num);
	return tpl_buf_put(R, b, num, strlen(num));
}

static int newline_indent(struct tpl_run *R, struct tbuf *b, const struct tojson_opts *o, int level)
{
	if (!o->indent)
		return 0;
	if (tpl_buf_putc(R, b, '\n'))
		return -1;
	for (int i = 0; i < level; i++)
		if (tpl_buf_put(R, b, o->indent, o->indent_len))
			return -1;
	return 0;
}

static int json_value(struct tpl_run *R, struct tbuf *b, struct tv v, const struct tojson_opts *o,
		      int level);

static int json_key(struct tpl_run *R, struct tbuf *b, struct tv k, const struct tojson_opts *o)
{
	char num[64];
	switch (k.kind) {
	case TV_STR: return json_string(R, b, k.s->s, k.s->len, o->ensure_ascii);
	case TV_BOOL: return json_string(R, b, k.i ? "true" : "false", k.i ? 4 : 5, 0);
	case TV_NONE: return json_string(R, b, "null", 4, 0);
	case TV_INT:
		snprintf(num, sizeof num, "%lld", (long long)k.i);
		return json_string(R, b, num, strlen(num), 0);
	case TV_FLOAT:
		if (isnan(k.f) || isinf(k.f))
			snprintf(num, sizeof num, "%s", isnan(k.f) ? "NaN" : k.f > 0 ? "Infinity" : "-Infinity");
		else
			tpl_float_repr(k.f, num, sizeof num);
		return json_string(R, b, num, strlen(num), 0);
	default:
		return tpl_fail(R, ING_ERR_FORMAT, "keys must be str, int, float, bool or None, not %s",
				tv_type_name(k));
	}
}

/* Entry order for sort_keys: a merge sort of indexes by key. */
static int sort_entries(struct tpl_run *R, struct tdict *d, size_t *idx)
{
	size_t n = d->n;
	size_t *tmp = ing_malloc_array(n ? n : 1, sizeof *tmp);
	if (!tmp)
		return tpl_fail_nomem(R);
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	int rc = 0;
	for (size_t w = 1; w < n && !rc; w *= 2) {
		for (size_t lo = 0; lo < n && !rc; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi && !rc) {
				int c = 0;
				rc = tpl_compare(R, d->e[idx[j]].k, d->e[idx[i]].k, "<", &c);
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

static int json_object(struct tpl_run *R, struct tbuf *b, struct tdict *d,
		       const struct tojson_opts *o, int level)
{
	if (!d->n)
		return tpl_buf_put(R, b, "{}", 2);
	size_t *idx = NULL;
	if (o->sort_keys) {
		if (!(idx = ing_malloc_array(d->n, sizeof *idx)))
			return tpl_fail_nomem(R);
		if (sort_entries(R, d, idx)) {
			ing_free(idx);
			return -1;
		}
	}
	int rc = tpl_buf_putc(R, b, '{');
	for (size_t i = 0; i < d->n && !rc; i++) {
		struct tdent *e = &d->e[idx ? idx[i] : i];
		rc = (i && tpl_buf_put(R, b, o->item_sep, o->item_sep_len)) ||
		     newline_indent(R, b, o, level + 1) || json_key(R, b, e->k, o) ||
		     tpl_buf_put(R, b, o->key_sep, o->key_sep_len) ||
		     json_value(R, b, e->v, o, level + 1);
	}
	ing_free(idx);
	return rc || newline_indent(R, b, o, level) || tpl_buf_putc(R, b, '}') ? -1 : 0;
}

static int json_value(struct tpl_run *R, struct tbuf *b, struct tv v, const struct tojson_opts *o,
		      int level)
{
	if (level > TPL_VALUE_DEPTH_MAX)
		return tpl_fail(R, ING_ERR_RANGE, "tojson: values nested too deeply");
	switch (v.kind) {
	case TV_NONE: return tpl_buf_put(R, b, "null", 4);
	case TV_BOOL: return v.i ? tpl_buf_put(R, b, "true", 4) : tpl_buf_put(R, b, "false", 5);
	case TV_INT: return tpl_buf_printf(R, b, "%lld", (long long)v.i);
	case TV_FLOAT: return json_float(R, b, v.f);
	case TV_STR: return json_string(R, b, v.s->s, v.s->len, o->ensure_ascii);
	case TV_DICT: return json_object(R, b, v.d, o, level);
	case TV_LIST:
		if (v.l->h.flags & TL_GEN)
			break;
		if (!v.l->n)
			return tpl_buf_put(R, b, "[]", 2);
		if (tpl_buf_putc(R, b, '['))
			return -1;
		for (size_t i = 0; i < v.l->n; i++)
			if ((i && tpl_buf_put(R, b, o->item_sep, o->item_sep_len)) ||
			    newline_indent(R, b, o, level + 1) || json_value(R, b, v.l->v[i], o, level + 1))
				return -1;
		return newline_indent(R, b, o, level) || tpl_buf_putc(R, b, ']') ? -1 : 0;
	default:
		break;
	}
	return tpl_fail(R, ING_ERR_FORMAT, "Object of type %s is not JSON serializable",
			tv_type_name(v));
}

int tpl_tojson(struct tpl_run *R, struct tbuf *b, struct tv v, const struct tojson_opts *o)
{
	return json_value(R, b, v, o, 0);
}
