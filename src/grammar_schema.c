/* grammar_schema.c — JSON schema (and JSON mode) compiled into grammar
 * rules.
 *
 * The grammar generates a subset of what the schema accepts, chosen so
 * that everything it generates validates: properties come in the order of
 * "properties" (required ones always, optional ones may be skipped),
 * additional properties are never generated next to declared ones, numbers
 * under bounds have no exponent and at most 6 fraction digits, exclusive
 * bounds of non-integer "number"s are tightened to the next integer, and
 * unbounded integers have at most 16 digits. Anything whose validity we
 * cannot guarantee (oneOf, multipleOf, uniqueItems, ...) is refused with
 * ING_ERR_UNSUPPORTED naming the keyword and where it is.
 *
 * Compilation is one recursive pass over the schema. $ref targets become
 * rules of their own, created on first use and memoized by reference
 * string, so recursive schemas give recursive grammars. Errors are sticky
 * (c->rc); after one, the pass unwinds returning dummy symbols. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "grammar_int.h"
#include "mem.h"

#define SC_NONE GSYM_END        /* "not built yet" for cached symbols */
#define SC_MAX_NEST 64          /* schema nesting depth */
#define SC_MAX_REPEAT 10000     /* maxLength / maxItems we expand */
#define SC_INT_DIGITS 16        /* digits of an unbounded integer */
#define SC_FRAC_DIGITS 15       /* fraction digits of an unbounded number */
#define SC_BOUND_FRAC 6         /* fraction digits of a bounded number */

struct sc_ref {
	char *ref;
	uint32_t rule;
};

struct sc {
	struct gbuild b;
	const cJSON *root;
	ing_err *err;
	int rc;
	struct sc_ref *refs;
	int n_refs, cap_refs;
	uint32_t ws, chr, string, integer, number, value, object;
	char path[512];
	int depth;
};

static uint32_t fail(struct sc *c, int code, const char *fmt, const char *what)
{
	if (!c->rc) {
		char msg[256];
		snprintf(msg, sizeof msg, fmt, what);
		c->rc = ing_err_set(c->err, code, "%s at #%s", msg, c->path);
	}
	return 0;
}

/* ---- JSON primitives ---- */

/* Between JSON tokens: nothing, one space, or one newline and an
 * indentation, so that compact and pretty-printed JSON both fit but a
 * model cannot wander off into blank lines. */
static uint32_t ws(struct sc *c)
{
	if (c->ws == SC_NONE) {
		struct gbuild *b = &c->b;
		uint32_t indent = gb_repeat(b, gb_set(b, " \t"), 0, GRAMMAR_JSON_MAX_WS - 1);
		uint32_t nl = GB_SEQ(b, gb_byte(b, '\n'), indent);
		c->ws = gb_repeat(b, GB_ALT(b, gb_byte(b, ' '), nl), 0, 1);
	}
	return c->ws;
}

static uint32_t lit(struct sc *c, const char *s) { return gb_lit(&c->b, s, strlen(s)); }

/* One character of a JSON string (one code point): printable ASCII but
 * '"' and '\\', a well-formed UTF-8 sequence, or an escape (\u escapes
 * of surrogates excluded). */
static uint32_t chr(struct sc *c)
{
	if (c->chr != SC_NONE)
		return c->chr;
	struct gbuild *b = &c->b;
	struct gclass ascii = { { 0 } };
	for (unsigned x = 0x20; x < 0x80; x++)
		if (x != '"' && x != '\\')
			ascii.w[x >> 5] |= 1u << (x & 31);
	uint32_t cont = gb_range(b, 0x80, 0xbf), hex = gb_set(b, "0123456789abcdefABCDEF");
	uint32_t u = GB_ALT(b, GB_SEQ(b, gb_set(b, "0123456789abcABC"), hex, hex, hex),
			    GB_SEQ(b, gb_set(b, "dD"), gb_range(b, '0', '7'), hex, hex),
			    GB_SEQ(b, gb_set(b, "eEfF"), hex, hex, hex));
	uint32_t esc = GB_SEQ(b, gb_byte(b, '\\'),
			      GB_ALT(b, gb_set(b, "\"\\/bfnrt"), GB_SEQ(b, gb_byte(b, 'u'), u)));
	struct gclass e1 = { { 0 } };
	for (unsigned x = 0xe1; x <= 0xef; x++)
		if (x != 0xed)
			e1.w[x >> 5] |= 1u << (x & 31);
	c->chr = GB_ALT(b, gb_class(b, &ascii), esc,
			GB_SEQ(b, gb_range(b, 0xc2, 0xdf), cont),
			GB_SEQ(b, gb_byte(b, 0xe0), gb_range(b, 0xa0, 0xbf), cont),
			GB_SEQ(b, gb_class(b, &e1), cont, cont),
			GB_SEQ(b, gb_byte(b, 0xed), gb_range(b, 0x80, 0x9f), cont),
			GB_SEQ(b, gb_byte(b, 0xf0), gb_range(b, 0x90, 0xbf), cont, cont),
			GB_SEQ(b, gb_range(b, 0xf1, 0xf3), cont, cont, cont),
			GB_SEQ(b, gb_byte(b, 0xf4), gb_range(b, 0x80, 0x8f), cont, cont));
	return c->chr;
}

static uint32_t string_n(struct sc *c, int min, int max)
{
	uint32_t q = gb_byte(&c->b, '"');
	return GB_SEQ(&c->b, q, gb_repeat(&c->b, chr(c), min, max), q);
}

static uint32_t string(struct sc *c)
{
	if (c->string == SC_NONE)
		c->string = string_n(c, 0, -1);
	return c->string;
}

static uint32_t digits(struct sc *c, int min, int max)
{
	return gb_repeat(&c->b, gb_range(&c->b, '0', '9'), min, max);
}

static uint32_t integer(struct sc *c)
{
	if (c->integer == SC_NONE) {
		struct gbuild *b = &c->b;
		uint32_t mag = GB_ALT(b, gb_byte(b, '0'),
				      GB_SEQ(b, gb_range(b, '1', '9'), digits(c, 0, SC_INT_DIGITS - 1)));
		c->integer = GB_SEQ(b, gb_repeat(b, gb_byte(b, '-'), 0, 1), mag);
	}
	return c->integer;
}

static uint32_t number(struct sc *c)
{
	if (c->number == SC_NONE) {
		struct gbuild *b = &c->b;
		uint32_t frac = GB_SEQ(b, gb_byte(b, '.'), digits(c, 1, SC_FRAC_DIGITS));
		uint32_t exp = GB_SEQ(b, gb_set(b, "eE"), gb_repeat(b, gb_set(b, "+-"), 0, 1),
				      digits(c, 1, 2));
		c->number = GB_SEQ(b, integer(c), gb_repeat(b, frac, 0, 1), gb_repeat(b, exp, 0, 1));
	}
	return c->number;
}

/* "{" ws ( "}" | kv (ws "," ws kv)* ws "}" ), kv: string ws ":" ws value */
static uint32_t map_of(struct sc *c, uint32_t value)
{
	struct gbuild *b = &c->b;
	uint32_t kv = GB_SEQ(b, string(c), ws(c), gb_byte(b, ':'), ws(c), value);
	uint32_t more = gb_repeat(b, GB_SEQ(b, ws(c), gb_byte(b, ','), ws(c), kv), 0, -1);
	return GB_SEQ(b, gb_byte(b, '{'), ws(c),
		      GB_ALT(b, gb_byte(b, '}'), GB_SEQ(b, kv, more, ws(c), gb_byte(b, '}'))));
}

static uint32_t list_of(struct sc *c, uint32_t value)
{
	struct gbuild *b = &c->b;
	uint32_t more = gb_repeat(b, GB_SEQ(b, ws(c), gb_byte(b, ','), ws(c), value), 0, -1);
	return GB_SEQ(b, gb_byte(b, '['), ws(c),
		      GB_ALT(b, gb_byte(b, ']'), GB_SEQ(b, value, more, ws(c), gb_byte(b, ']'))));
}

/* Any JSON value (recursive). */
static uint32_t value(struct sc *c)
{
	if (c->value != SC_NONE)
		return c->value;
	int r = gb_rule_new(&c->b);
	c->value = (uint32_t)r;
	uint32_t obj = map_of(c, (uint32_t)r);
	c->object = obj;
	uint32_t alts[] = { obj, list_of(c, (uint32_t)r), string(c), number(c),
			    lit(c, "true"), lit(c, "false"), lit(c, "null") };
	for (size_t i = 0; i < sizeof alts / sizeof *alts; i++)
		gb_rule_add(&c->b, r, &alts[i], 1);
	return c->value;
}

/* ---- string formats ---- */

static uint32_t two(struct sc *c, const char *first, unsigned lo, unsigned hi)
{
	return GB_SEQ(&c->b, gb_set(&c->b, first), gb_range(&c->b, lo, hi));
}

/* YYYY-MM-DD with a day that exists in every year (February to 28). */
static uint32_t fmt_date(struct sc *c)
{
	struct gbuild *b = &c->b;
	uint32_t d09 = gb_range(b, '0', '9');
	uint32_t year = GB_SEQ(b, gb_range(b, '1', '2'), d09, d09, d09);
	uint32_t d01_28 = GB_ALT(b, two(c, "0", '1', '9'), two(c, "1", '0', '9'), two(c, "2", '0', '8'));
	uint32_t d29_30 = GB_ALT(b, lit(c, "29"), lit(c, "30"));
	uint32_t m31 = GB_ALT(b, GB_SEQ(b, gb_byte(b, '0'), gb_set(b, "13578")),
			      GB_SEQ(b, gb_byte(b, '1'), gb_set(b, "02")));
	uint32_t m30 = GB_ALT(b, GB_SEQ(b, gb_byte(b, '0'), gb_set(b, "469")), lit(c, "11"));
	uint32_t dash = gb_byte(b, '-');
	uint32_t md = GB_ALT(b, GB_SEQ(b, m31, dash, GB_ALT(b, d01_28, d29_30, lit(c, "31"))),
			     GB_SEQ(b, m30, dash, GB_ALT(b, d01_28, d29_30)),
			     GB_SEQ(b, lit(c, "02-"), d01_28));
	return GB_SEQ(b, year, dash, md);
}

/* HH:MM:SS(.frac)?(Z|+HH:MM|-HH:MM) (RFC 3339 full-time) */
static uint32_t fmt_time(struct sc *c)
{
	struct gbuild *b = &c->b;
	uint32_t hh = GB_ALT(b, two(c, "01", '0', '9'), two(c, "2", '0', '3'));
	uint32_t mm = two(c, "012345", '0', '9');
	uint32_t colon = gb_byte(b, ':');
	uint32_t frac = gb_repeat(b, GB_SEQ(b, gb_byte(b, '.'), digits(c, 1, 6)), 0, 1);
	uint32_t off = GB_ALT(b, gb_byte(b, 'Z'), GB_SEQ(b, gb_set(b, "+-"), hh, colon, mm));
	return GB_SEQ(b, hh, colon, mm, colon, mm, frac, off);
}

static uint32_t fmt_email(struct sc *c)
{
	struct gbuild *b = &c->b;
	uint32_t alnum = gb_set(b, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
	uint32_t local = GB_SEQ(b, alnum, gb_repeat(b, GB_ALT(b, alnum, gb_set(b, "._+-")), 0, 39));
	uint32_t label = GB_SEQ(b, alnum, gb_repeat(b, GB_ALT(b, alnum, gb_byte(b, '-')), 0, 39));
	uint32_t tld = gb_repeat(b, gb_set(b, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"), 2, 10);
	uint32_t dot = gb_byte(b, '.');
	return GB_SEQ(b, local, gb_byte(b, '@'), label,
		      gb_repeat(b, GB_SEQ(b, dot, label), 0, 2), dot, tld);
}

static uint32_t fmt_uuid(struct sc *c)
{
	struct gbuild *b = &c->b;
	uint32_t h = gb_set(b, "0123456789abcdef"), dash = gb_byte(b, '-');
	return GB_SEQ(b, gb_repeat(b, h, 8, 8), dash, gb_repeat(b, h, 4, 4), dash,
		      gb_repeat(b, h, 4, 4), dash, gb_repeat(b, h, 4, 4), dash,
		      gb_repeat(b, h, 12, 12));
}

static uint32_t fmt_ipv4(struct sc *c)
{
	struct gbuild *b = &c->b;
	uint32_t d09 = gb_range(b, '0', '9');
	uint32_t octet = GB_ALT(b, GB_SEQ(b, lit(c, "25"), gb_range(b, '0', '5')),
				GB_SEQ(b, gb_byte(b, '2'), gb_range(b, '0', '4'), d09),
				GB_SEQ(b, gb_byte(b, '1'), d09, d09),
				GB_SEQ(b, gb_range(b, '1', '9'), d09), d09);
	uint32_t dot = gb_byte(b, '.');
	return GB_SEQ(b, octet, dot, octet, dot, octet, dot, octet);
}

static uint32_t string_format(struct sc *c, const char *f)
{
	uint32_t body;
	if (!strcmp(f, "date"))
		body = fmt_date(c);
	else if (!strcmp(f, "time"))
		body = fmt_time(c);
	else if (!strcmp(f, "date-time"))
		body = GB_SEQ(&c->b, fmt_date(c), gb_byte(&c->b, 'T'), fmt_time(c));
	else if (!strcmp(f, "email"))
		body = fmt_email(c);
	else if (!strcmp(f, "uuid"))
		body = fmt_uuid(c);
	else if (!strcmp(f, "ipv4"))
		body = fmt_ipv4(c);
	else
		return fail(c, ING_ERR_UNSUPPORTED, "unsupported JSON schema string format '%.64s'", f);
	uint32_t q = gb_byte(&c->b, '"');
	return GB_SEQ(&c->b, q, body, q);
}

/* ---- integer ranges ---- */

static bool all_digit(const char *s, int n, char d)
{
	for (int i = 0; i < n; i++)
		if (s[i] != d)
			return false;
	return true;
}

/* Decimal strings of equal length n from lo to hi (lo <= hi). Where the
 * first digits differ, the strings split into lo[0] then (lo's tail ..
 * 9...9), the digits between with any tail, and hi[0] then (0...0 .. hi's
 * tail); a tail of all zeros (all nines) on lo's (hi's) side puts its
 * first digit with the free ones instead, so each side recurses down one
 * chain and a range costs O(n^2) symbols, not 2^n (the whole n-digit range
 * from 10...0 to 9...9 had split into both sides at every digit). */
static uint32_t same_len(struct sc *c, const char *lo, const char *hi, int n)
{
	struct gbuild *b = &c->b;
	if (n <= 1) /* callers never go below one digit */
		return gb_range(b, (unsigned char)lo[0], (unsigned char)hi[0]);
	if (lo[0] == hi[0])
		return GB_SEQ(b, gb_byte(b, (unsigned char)lo[0]), same_len(c, lo + 1, hi + 1, n - 1));
	char nines[24], zeros[24];
	memset(nines, '9', (size_t)n);
	memset(zeros, '0', (size_t)n);
	const bool lo_free = all_digit(lo + 1, n - 1, '0'), hi_free = all_digit(hi + 1, n - 1, '9');
	const unsigned mid_lo = (unsigned char)lo[0] + !lo_free, mid_hi = (unsigned char)hi[0] - !hi_free;
	uint32_t alts[3];
	int k = 0;
	if (!lo_free)
		alts[k++] = GB_SEQ(b, gb_byte(b, (unsigned char)lo[0]), same_len(c, lo + 1, nines, n - 1));
	if (mid_lo <= mid_hi)
		alts[k++] = GB_SEQ(b, gb_range(b, mid_lo, mid_hi), digits(c, n - 1, n - 1));
	if (!hi_free)
		alts[k++] = GB_SEQ(b, gb_byte(b, (unsigned char)hi[0]), same_len(c, zeros, hi + 1, n - 1));
	return gb_altv(b, alts, k);
}

static long long pow10ll(int d)
{
	long long p = 1;
	while (d-- > 0)
		p *= 10;
	return p;
}

/* Non-negative integers lo..hi without leading zeros. */
static uint32_t nonneg_range(struct sc *c, long long lo, long long hi)
{
	uint32_t alts[20];
	int k = 0;
	for (int d = 1; d <= SC_INT_DIGITS && k < 20; d++) {
		long long a = d == 1 ? 0 : pow10ll(d - 1), z = pow10ll(d) - 1;
		if (a < lo)
			a = lo;
		if (z > hi)
			z = hi;
		if (a > z)
			continue;
		char sa[24], sz[24];
		snprintf(sa, sizeof sa, "%lld", a);
		snprintf(sz, sizeof sz, "%lld", z);
		alts[k++] = same_len(c, sa, sz, d);
	}
	return k ? gb_altv(&c->b, alts, k) : gb_nothing(&c->b);
}

/* Integers lo..hi (lo <= hi, both within +-(10^16 - 1)). */
static uint32_t int_range(struct sc *c, long long lo, long long hi)
{
	uint32_t alts[2];
	int k = 0;
	if (lo < 0) { /* "-" then magnitudes -min(hi,-1) .. -lo */
		long long top = hi < -1 ? hi : -1;
		alts[k++] = GB_SEQ(&c->b, gb_byte(&c->b, '-'), nonneg_range(c, -top, -lo));
	}
	if (hi >= 0)
		alts[k++] = nonneg_range(c, lo > 0 ? lo : 0, hi);
	return gb_altv(&c->b, alts, k);
}

/* ---- keywords ---- */

static const cJSON *kw(const cJSON *s, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(s, key);
}

static const char *const unsupported_kw[] = {
	"oneOf", "not", "if", "then", "else", "patternProperties", "multipleOf",
	"minProperties", "maxProperties", "contains", "minContains", "maxContains",
	"propertyNames", "dependentRequired", "dependentSchemas", "dependencies",
	"unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef",
	"contentSchema",
};

/* Keywords that constrain values; annotations are everything else. */
static const char *const validation_kw[] = {
	"type", "properties", "required", "additionalProperties", "items", "prefixItems",
	"minItems", "maxItems", "enum", "const", "anyOf", "allOf", "$ref", "minLength",
	"maxLength", "format", "pattern", "minimum", "maximum", "exclusiveMinimum",
	"exclusiveMaximum", "uniqueItems", "additionalItems",
};

static bool check_unsupported(struct sc *c, const cJSON *s)
{
	for (size_t i = 0; i < sizeof unsupported_kw / sizeof *unsupported_kw; i++)
		if (kw(s, unsupported_kw[i])) {
			fail(c, ING_ERR_UNSUPPORTED, "unsupported JSON schema keyword '%s'",
			     unsupported_kw[i]);
			return false;
		}
	const cJSON *u = kw(s, "uniqueItems");
	if (u && cJSON_IsTrue(u)) {
		fail(c, ING_ERR_UNSUPPORTED, "unsupported JSON schema keyword '%s' (true)",
		     "uniqueItems");
		return false;
	}
	const cJSON *ai = kw(s, "additionalItems");
	if (ai && !cJSON_IsBool(ai)) {
		fail(c, ING_ERR_UNSUPPORTED, "unsupported JSON schema keyword '%s' with a schema",
		     "additionalItems");
		return false;
	}
	return true;
}

/* The validation keyword of s other than `except`, if any. */
static const char *other_validation(const cJSON *s, const char *except, const char *except2)
{
	for (size_t i = 0; i < sizeof validation_kw / sizeof *validation_kw; i++) {
		const char *k = validation_kw[i];
		if (strcmp(k, except) && strcmp(k, except2) && kw(s, k))
			return k;
	}
	return NULL;
}

/* ---- paths for messages ---- */

static size_t path_push(struct sc *c, const char *a, const char *b)
{
	size_t n = strlen(c->path);
	snprintf(c->path + n, sizeof c->path - n, "/%s%s%.80s", a, b ? "/" : "", b ? b : "");
	return n;
}

static size_t path_push_i(struct sc *c, const char *a, int i)
{
	char num[16];
	snprintf(num, sizeof num, "%d", i);
	return path_push(c, a, num);
}

static void path_pop(struct sc *c, size_t n) { c->path[n] = 0; }

/* ---- the compiler ---- */

static uint32_t schema(struct sc *c, const cJSON *s);

static uint32_t sub(struct sc *c, const cJSON *s, const char *a, const char *b)
{
	size_t n = path_push(c, a, b);
	uint32_t r = schema(c, s);
	path_pop(c, n);
	return r;
}

static uint32_t sub_i(struct sc *c, const cJSON *s, const char *a, int i)
{
	size_t n = path_push_i(c, a, i);
	uint32_t r = schema(c, s);
	path_pop(c, n);
	return r;
}

/* The schema a "#/..." JSON pointer names, or NULL. */
static const cJSON *resolve(const cJSON *root, const char *ref)
{
	if (ref[0] != '#')
		return NULL;
	const cJSON *at = root;
	const char *p = ref + 1;
	while (*p == '/' && at) {
		p++;
		char tok[256];
		size_t n = 0;
		for (; *p && *p != '/' && n + 1 < sizeof tok; p++) {
			if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
				tok[n++] = p[1] == '0' ? '~' : '/';
				p++;
			} else {
				tok[n++] = *p;
			}
		}
		tok[n] = 0;
		if (cJSON_IsArray(at)) {
			char *end;
			long i = strtol(tok, &end, 10);
			at = *end || !n ? NULL : cJSON_GetArrayItem(at, (int)i);
		} else {
			at = cJSON_IsObject(at) ? cJSON_GetObjectItemCaseSensitive(at, tok) : NULL;
		}
	}
	return *p ? NULL : at;
}

static uint32_t ref(struct sc *c, const char *r)
{
	for (int i = 0; i < c->n_refs; i++)
		if (!strcmp(c->refs[i].ref, r))
			return c->refs[i].rule;
	const cJSON *target = resolve(c->root, r);
	if (!target)
		return fail(c, ING_ERR_UNSUPPORTED, "unresolvable or external $ref '%.200s'", r);
	if (c->n_refs == c->cap_refs) {
		int cap = c->cap_refs ? 2 * c->cap_refs : 8;
		struct sc_ref *p = ing_realloc(c->refs, (size_t)cap * sizeof *p);
		if (!p)
			return fail(c, ING_ERR_NOMEM, "%s", "out of memory");
		c->refs = p;
		c->cap_refs = cap;
	}
	char *copy = ing_strndup(r, strlen(r));
	if (!copy)
		return fail(c, ING_ERR_NOMEM, "%s", "out of memory");
	int rule = gb_rule_new(&c->b);
	c->refs[c->n_refs++] = (struct sc_ref){ copy, (uint32_t)rule };
	char saved[sizeof c->path];
	memcpy(saved, c->path, sizeof saved);
	snprintf(c->path, sizeof c->path, "%.500s", r + 1);
	uint32_t body = schema(c, target);
	memcpy(c->path, saved, sizeof saved);
	gb_rule_add(&c->b, rule, &body, 1);
	return (uint32_t)rule;
}

/* "name" ws ":" ws value */
static uint32_t member(struct sc *c, const char *name, uint32_t v)
{
	cJSON *str = cJSON_CreateString(name);
	char *key = str ? cJSON_PrintUnformatted(str) : NULL;
	cJSON_Delete(str);
	if (!key)
		return fail(c, ING_ERR_NOMEM, "%s", "out of memory");
	uint32_t k = lit(c, key);
	cJSON_free(key);
	return GB_SEQ(&c->b, k, ws(c), gb_byte(&c->b, ':'), ws(c), v);
}

static int name_cmp(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* The keys of object list (keys) or the strings of array list, sorted for
 * bsearch into *out (the caller frees it; may be NULL when *n == 0). Looked
 * up one by one, a schema with thousands of required properties took
 * seconds. ING_ERR_NOMEM on allocation failure. */
static int names_sorted(const cJSON *list, bool keys, const char ***out, int *n)
{
	*out = NULL;
	*n = 0;
	int cap = cJSON_GetArraySize(list);
	if (cap == 0)
		return ING_OK;
	const char **v = ing_malloc_array((size_t)cap, sizeof *v);
	if (!v)
		return ING_ERR_NOMEM;
	const cJSON *e;
	cJSON_ArrayForEach(e, list) {
		const char *name = keys ? e->string : cJSON_IsString(e) ? e->valuestring : NULL;
		if (name && *n < cap)
			v[(*n)++] = name;
	}
	qsort(v, (size_t)*n, sizeof *v, name_cmp);
	*out = v;
	return ING_OK;
}

static bool names_have(const char *const *names, int n, const char *name)
{
	return n > 0 && bsearch(&name, names, (size_t)n, sizeof *names, name_cmp) != NULL;
}

/* Declared properties in order: first(i) emits the first present
 * property from i on, after(i) the rest once one was emitted; optional
 * properties have a skip alternative. */
static uint32_t declared_object(struct sc *c, const cJSON *props, const char *const *req,
				int n_req)
{
	struct gbuild *b = &c->b;
	int n = cJSON_GetArraySize(props);
	uint32_t after = (uint32_t)gb_rule_new(b), first = gb_nothing(b);
	gb_rule_add(b, (int)after, NULL, 0);
	bool all_optional = true;
	/* build from the last property back; cJSON lists are forward only,
	 * so collect them first */
	const cJSON **items = ing_malloc_array((size_t)n + 1, sizeof *items);
	if (!items)
		return fail(c, ING_ERR_NOMEM, "%s", "out of memory");
	int k = 0;
	const cJSON *p;
	cJSON_ArrayForEach(p, props)
		items[k++] = p;
	for (int i = n - 1; i >= 0 && !c->rc; i--) {
		const cJSON *pi = items[i];
		bool required = names_have(req, n_req, pi->string);
		all_optional &= !required;
		uint32_t kv = member(c, pi->string, sub(c, pi, "properties", pi->string));
		int a = gb_rule_new(b), f = gb_rule_new(b);
		uint32_t sa[] = { ws(c), gb_byte(b, ','), ws(c), kv, after };
		gb_rule_add(b, a, sa, 5);
		uint32_t sf[] = { kv, after };
		gb_rule_add(b, f, sf, 2);
		if (!required) {
			gb_rule_add(b, a, &after, 1);
			gb_rule_add(b, f, &first, 1);
		}
		after = (uint32_t)a;
		first = (uint32_t)f;
	}
	ing_free(items);
	uint32_t open = gb_byte(b, '{'), close = gb_byte(b, '}');
	uint32_t full = GB_SEQ(b, open, ws(c), first, ws(c), close);
	return all_optional ? GB_ALT(b, full, GB_SEQ(b, open, ws(c), close)) : full;
}

static uint32_t object(struct sc *c, const cJSON *s)
{
	const cJSON *props = kw(s, "properties"), *req = kw(s, "required");
	const cJSON *addl = kw(s, "additionalProperties");
	if (props && !cJSON_IsObject(props))
		return fail(c, ING_ERR_INVALID, "'%s' must be an object", "properties");
	if (req && !cJSON_IsArray(req))
		return fail(c, ING_ERR_INVALID, "'%s' must be an array", "required");
	const cJSON *r;
	cJSON_ArrayForEach(r, req)
		if (!cJSON_IsString(r))
			return fail(c, ING_ERR_INVALID, "'%s' must list property names", "required");
	const char **pnames, **rnames;
	int n_props, n_req;
	if (names_sorted(props, true, &pnames, &n_props))
		return fail(c, ING_ERR_NOMEM, "%s", "out of memory");
	if (names_sorted(req, false, &rnames, &n_req)) {
		ing_free(pnames);
		return fail(c, ING_ERR_NOMEM, "%s", "out of memory");
	}
	uint32_t out = SC_NONE;
	for (int i = 0; i < n_req && out == SC_NONE; i++)
		if (!names_have(pnames, n_props, rnames[i]))
			out = fail(c, ING_ERR_UNSUPPORTED,
				   "required property '%.100s' is not in 'properties'", rnames[i]);
	if (out == SC_NONE && n_props > 0)
		out = declared_object(c, props, rnames, n_req);
	ing_free(pnames);
	ing_free(rnames);
	if (out != SC_NONE)
		return out;
	if (addl && cJSON_IsFalse(addl))
		return GB_SEQ(&c->b, gb_byte(&c->b, '{'), ws(c), gb_byte(&c->b, '}'));
	if (addl && !cJSON_IsTrue(addl))
		return map_of(c, sub(c, addl, "additionalProperties", NULL));
	return map_of(c, value(c));
}

static int get_count(struct sc *c, const cJSON *s, const char *key, int dflt)
{
	const cJSON *v = kw(s, key);
	if (!v)
		return dflt;
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble)) {
		fail(c, ING_ERR_INVALID, "'%s' must be a non-negative integer", key);
		return dflt;
	}
	if (v->valuedouble > SC_MAX_REPEAT) {
		fail(c, ING_ERR_UNSUPPORTED, "'%s' above 10000 is not supported", key);
		return dflt;
	}
	return (int)v->valuedouble;
}

/* Element syms of an array: prefix items, then the items schema. */
struct arr {
	uint32_t *pre;
	int k;
	uint32_t item;   /* SC_NONE: no further items allowed */
};

static uint32_t arr_elem(const struct arr *a, int i) { return i < a->k ? a->pre[i] : a->item; }

/* tail(i) ::= ("" if i >= min) | ws "," ws elem(i) tail(i+1) (if i < max);
 * from R = max(prefix count, min, 1) on, elements are all the items
 * schema: a bounded repeat or a star. max < 0: unbounded. */
static uint32_t array_tail(struct sc *c, const struct arr *a, int min, int max)
{
	struct gbuild *b = &c->b;
	int R = a->k > min ? a->k : min;
	if (R < 1)
		R = 1;
	if (max >= 0 && R > max)
		R = max;
	uint32_t tail;
	if (a->item == SC_NONE || (max >= 0 && R >= max)) {
		tail = (uint32_t)gb_rule_new(b);
		gb_rule_add(b, (int)tail, NULL, 0);
	} else {
		uint32_t one = GB_SEQ(b, ws(c), gb_byte(b, ','), ws(c), a->item);
		tail = gb_repeat(b, one, 0, max < 0 ? -1 : max - R);
	}
	for (int i = R - 1; i >= 1; i--) {
		int r = gb_rule_new(b);
		if (i >= min)
			gb_rule_add(b, r, NULL, 0);
		uint32_t e = arr_elem(a, i);
		if (e != SC_NONE && (max < 0 || i < max)) {
			uint32_t seq[] = { ws(c), gb_byte(b, ','), ws(c), e, tail };
			gb_rule_add(b, r, seq, 5);
		}
		tail = (uint32_t)r;
	}
	return tail;
}

static uint32_t array(struct sc *c, const cJSON *s)
{
	struct gbuild *b = &c->b;
	const cJSON *items = kw(s, "items"), *prefix = kw(s, "prefixItems");
	if (cJSON_IsArray(items)) { /* draft 4 tuple form */
		prefix = items;
		const cJSON *ai = kw(s, "additionalItems");
		items = ai ? ai : NULL;
	}
	if (prefix && !cJSON_IsArray(prefix))
		return fail(c, ING_ERR_INVALID, "'%s' must be an array", "prefixItems");
	int min = get_count(c, s, "minItems", 0), max = get_count(c, s, "maxItems", -1);
	struct arr a = { .k = prefix ? cJSON_GetArraySize(prefix) : 0, .item = SC_NONE };
	if (a.k > SC_MAX_REPEAT)
		return fail(c, ING_ERR_UNSUPPORTED, "%s with over 10000 entries", "prefixItems");
	a.pre = ing_malloc_array((size_t)a.k + 1, sizeof *a.pre);
	if (!a.pre)
		return fail(c, ING_ERR_NOMEM, "%s", "out of memory");
	int i = 0; /* cJSON_GetArrayItem walks the list: by index, quadratic */
	const cJSON *e;
	cJSON_ArrayForEach(e, prefix) {
		a.pre[i] = sub_i(c, e, "prefixItems", i);
		i++;
	}
	if (!items || cJSON_IsTrue(items))
		a.item = value(c);
	else if (!cJSON_IsFalse(items))
		a.item = sub(c, items, "items", NULL);
	int cap = a.item == SC_NONE ? a.k : -1;
	if (cap >= 0 && (max < 0 || max > cap))
		max = cap;
	uint32_t res = 0;
	if (max >= 0 && min > max) {
		res = fail(c, ING_ERR_UNSUPPORTED, "%s", "minItems cannot be met (items/maxItems)");
	} else {
		uint32_t open = gb_byte(b, '['), close = gb_byte(b, ']');
		uint32_t empty = GB_SEQ(b, open, ws(c), close);
		if (max == 0) {
			res = empty;
		} else {
			uint32_t full = GB_SEQ(b, open, ws(c), arr_elem(&a, 0), array_tail(c, &a, min, max),
					       ws(c), close);
			res = min == 0 ? GB_ALT(b, empty, full) : full;
		}
	}
	ing_free(a.pre);
	return res;
}

/* A string whose value matches the regular expression p (JSON Schema's
 * pattern: ECMAScript syntax, matched anywhere in the value unless
 * anchored; grammar_text.c takes the common subset): the pattern's own
 * text, padded with any characters at an end it leaves open. */
static uint32_t string_pattern(struct sc *c, const char *p)
{
	bool a0, a1;
	int rc = 0;
	ing_err err = { 0 };
	uint32_t re = gt_regex_sym(&c->b, p, strlen(p), &a0, &a1, &rc, &err);
	if (rc)
		return fail(c, rc, "JSON schema pattern: %.200s", err.msg);
	struct gbuild *b = &c->b;
	uint32_t q = gb_byte(b, '"'), any = gb_repeat(b, chr(c), 0, -1);
	uint32_t body = a0 && a1 ? re : a0 ? GB_SEQ(b, re, any) : a1 ? GB_SEQ(b, any, re)
				   : GB_SEQ(b, any, re, any);
	return GB_SEQ(b, q, body, q);
}

static uint32_t string_schema(struct sc *c, const cJSON *s)
{
	const cJSON *pat = kw(s, "pattern");
	if (pat) {
		if (!cJSON_IsString(pat))
			return fail(c, ING_ERR_INVALID, "'%s' must be a string", "pattern");
		if (kw(s, "format") || kw(s, "minLength") || kw(s, "maxLength"))
			return fail(c, ING_ERR_UNSUPPORTED, "%s",
				    "pattern together with format, minLength or maxLength");
		return string_pattern(c, pat->valuestring);
	}
	const cJSON *f = kw(s, "format");
	if (f) {
		if (!cJSON_IsString(f))
			return fail(c, ING_ERR_INVALID, "'%s' must be a string", "format");
		return string_format(c, f->valuestring);
	}
	int min = get_count(c, s, "minLength", 0), max = get_count(c, s, "maxLength", -1);
	if (max >= 0 && min > max)
		return fail(c, ING_ERR_UNSUPPORTED, "%s", "minLength is above maxLength");
	return min == 0 && max < 0 ? string(c) : string_n(c, min, max);
}

#define SC_BIG 9999999999999999LL /* 10^16 - 1 */

/* Reads one bound into *v; false when absent. */
static bool bound(struct sc *c, const cJSON *s, const char *key, double *v)
{
	const cJSON *x = kw(s, key);
	if (!x || cJSON_IsBool(x)) /* draft 4 boolean exclusives are read below */
		return false;
	if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble)) {
		fail(c, ING_ERR_INVALID, "'%s' must be a number", key);
		return false;
	}
	*v = x->valuedouble;
	return true;
}

static long long clamp_ll(double v)
{
	return v < -(double)SC_BIG ? -SC_BIG : v > (double)SC_BIG ? SC_BIG : (long long)v;
}

/* Integer bounds [*lo, *hi] of s; for "number"s (integral == false) the
 * bounds must be integers and exclusive ones are tightened by one. */
static bool int_bounds(struct sc *c, const cJSON *s, bool integral, long long *lo, long long *hi)
{
	double v;
	*lo = -SC_BIG;
	*hi = SC_BIG;
	bool any = false;
	bool xmin4 = cJSON_IsTrue(kw(s, "exclusiveMinimum")), xmax4 = cJSON_IsTrue(kw(s, "exclusiveMaximum"));
	const char *keys[] = { "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum" };
	for (int i = 0; i < 4; i++) {
		if (!bound(c, s, keys[i], &v))
			continue;
		any = true;
		bool excl = i >= 2 || (i == 0 && xmin4) || (i == 1 && xmax4);
		if (!integral && v != floor(v)) {
			fail(c, ING_ERR_UNSUPPORTED, "non-integer '%s' of a number is not supported",
			     keys[i]);
			return false;
		}
		if (i % 2 == 0) {
			long long b = clamp_ll(excl ? floor(v) + 1 : ceil(v));
			*lo = b > *lo ? b : *lo;
		} else {
			long long b = clamp_ll(excl ? ceil(v) - 1 : floor(v));
			*hi = b < *hi ? b : *hi;
		}
	}
	if (*lo > *hi) {
		fail(c, ING_ERR_UNSUPPORTED, "%s", "the numeric bounds admit no value");
		return false;
	}
	return any;
}

static uint32_t integer_schema(struct sc *c, const cJSON *s)
{
	long long lo, hi;
	if (!int_bounds(c, s, true, &lo, &hi))
		return c->rc ? 0 : integer(c);
	return int_range(c, lo, hi);
}

/* A bounded number: an integer in range, or k.frac with k such that the
 * value stays within [lo, hi] for any fraction. */
static uint32_t number_schema(struct sc *c, const cJSON *s)
{
	struct gbuild *b = &c->b;
	long long lo, hi;
	if (!int_bounds(c, s, false, &lo, &hi))
		return c->rc ? 0 : number(c);
	uint32_t frac = GB_SEQ(b, gb_byte(b, '.'), digits(c, 1, SC_BOUND_FRAC));
	uint32_t alts[3];
	int k = 0;
	alts[k++] = int_range(c, lo, hi);
	long long plo = lo > 0 ? lo : 0, phi = hi - 1; /* positive: k + f <= hi */
	if (plo <= phi)
		alts[k++] = GB_SEQ(b, nonneg_range(c, plo, phi), frac);
	long long nlo = hi < 0 ? -hi : 0, nhi = -lo - 1; /* negative: -(k + f) >= lo */
	if (lo < 0 && nlo <= nhi)
		alts[k++] = GB_SEQ(b, gb_byte(b, '-'), nonneg_range(c, nlo, nhi), frac);
	return gb_altv(b, alts, k);
}

/* A JSON literal (enum member, const). */
static uint32_t literal(struct sc *c, const cJSON *v)
{
	char *text = cJSON_PrintUnformatted(v);
	if (!text)
		return fail(c, ING_ERR_NOMEM, "%s", "out of memory");
	uint32_t r = lit(c, text);
	cJSON_free(text);
	return r;
}

static bool type_matches(const cJSON *v, const char *t)
{
	if (!strcmp(t, "string"))
		return cJSON_IsString(v);
	if (!strcmp(t, "number"))
		return cJSON_IsNumber(v);
	if (!strcmp(t, "integer"))
		return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
	if (!strcmp(t, "boolean"))
		return cJSON_IsBool(v);
	if (!strcmp(t, "null"))
		return cJSON_IsNull(v);
	if (!strcmp(t, "object"))
		return cJSON_IsObject(v);
	if (!strcmp(t, "array"))
		return cJSON_IsArray(v);
	return false;
}

static bool type_allows(const cJSON *type, const cJSON *v)
{
	if (!type)
		return true;
	if (cJSON_IsString(type))
		return type_matches(v, type->valuestring);
	const cJSON *t;
	cJSON_ArrayForEach(t, type)
		if (cJSON_IsString(t) && type_matches(v, t->valuestring))
			return true;
	return false;
}

static uint32_t enum_schema(struct sc *c, const cJSON *s, const cJSON *e)
{
	if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) == 0)
		return fail(c, ING_ERR_INVALID, "'%s' must be a non-empty array", "enum");
	int n = cJSON_GetArraySize(e), k = 0;
	uint32_t *alts = ing_malloc_array((size_t)n, sizeof *alts);
	if (!alts)
		return fail(c, ING_ERR_NOMEM, "%s", "out of memory");
	const cJSON *v;
	cJSON_ArrayForEach(v, e)
		if (type_allows(kw(s, "type"), v))
			alts[k++] = literal(c, v);
	uint32_t r = k ? gb_altv(&c->b, alts, k)
		       : fail(c, ING_ERR_UNSUPPORTED, "%s", "no 'enum' value has the schema's type");
	ing_free(alts);
	return r;
}

static uint32_t typed(struct sc *c, const cJSON *s, const char *t)
{
	if (!strcmp(t, "object"))
		return object(c, s);
	if (!strcmp(t, "array"))
		return array(c, s);
	if (!strcmp(t, "string"))
		return string_schema(c, s);
	if (!strcmp(t, "integer"))
		return integer_schema(c, s);
	if (!strcmp(t, "number"))
		return number_schema(c, s);
	if (!strcmp(t, "boolean"))
		return GB_ALT(&c->b, lit(c, "true"), lit(c, "false"));
	if (!strcmp(t, "null"))
		return lit(c, "null");
	return fail(c, ING_ERR_INVALID, "unknown JSON schema type '%.64s'", t);
}

/* The type implied by the keywords of an untyped schema, or NULL. */
static const char *implied_type(const cJSON *s)
{
	if (kw(s, "properties") || kw(s, "required") || kw(s, "additionalProperties"))
		return "object";
	if (kw(s, "items") || kw(s, "prefixItems") || kw(s, "minItems") || kw(s, "maxItems"))
		return "array";
	if (kw(s, "minLength") || kw(s, "maxLength") || kw(s, "format") || kw(s, "pattern"))
		return "string";
	if (kw(s, "minimum") || kw(s, "maximum") || kw(s, "exclusiveMinimum") ||
	    kw(s, "exclusiveMaximum"))
		return "number";
	return NULL;
}

static uint32_t by_type(struct sc *c, const cJSON *s)
{
	const cJSON *type = kw(s, "type");
	if (!type) {
		const char *t = implied_type(s);
		return t ? typed(c, s, t) : value(c);
	}
	if (cJSON_IsString(type))
		return typed(c, s, type->valuestring);
	if (!cJSON_IsArray(type) || cJSON_GetArraySize(type) == 0)
		return fail(c, ING_ERR_INVALID, "'%s' must be a string or a non-empty array", "type");
	int n = cJSON_GetArraySize(type), k = 0;
	uint32_t alts[8];
	const cJSON *t;
	cJSON_ArrayForEach(t, type) {
		if (!cJSON_IsString(t) || k == 8)
			return fail(c, ING_ERR_INVALID, "'%s' must list type names", "type");
		alts[k++] = typed(c, s, t->valuestring);
	}
	(void)n;
	return gb_altv(&c->b, alts, k);
}

static uint32_t any_of(struct sc *c, const cJSON *list)
{
	if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
		return fail(c, ING_ERR_INVALID, "'%s' must be a non-empty array", "anyOf");
	int n = cJSON_GetArraySize(list);
	uint32_t *alts = ing_malloc_array((size_t)n, sizeof *alts);
	if (!alts)
		return fail(c, ING_ERR_NOMEM, "%s", "out of memory");
	int i = 0; /* cJSON_GetArrayItem walks the list: by index, quadratic */
	const cJSON *e;
	cJSON_ArrayForEach(e, list) {
		alts[i] = sub_i(c, e, "anyOf", i);
		i++;
	}
	uint32_t r = gb_altv(&c->b, alts, n);
	ing_free(alts);
	return r;
}

static uint32_t schema_body(struct sc *c, const cJSON *s)
{
	const cJSON *x;
	const char *other;
	if ((x = kw(s, "$ref"))) {
		if (!cJSON_IsString(x))
			return fail(c, ING_ERR_INVALID, "'%s' must be a string", "$ref");
		if ((other = other_validation(s, "$ref", "$ref")))
			return fail(c, ING_ERR_UNSUPPORTED, "'%s' next to '$ref' is not supported", other);
		return ref(c, x->valuestring);
	}
	if ((x = kw(s, "allOf"))) {
		if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) != 1)
			return fail(c, ING_ERR_UNSUPPORTED, "'%s' with other than one schema", "allOf");
		if ((other = other_validation(s, "allOf", "allOf")))
			return fail(c, ING_ERR_UNSUPPORTED, "'%s' next to 'allOf' is not supported", other);
		return sub_i(c, cJSON_GetArrayItem(x, 0), "allOf", 0);
	}
	if ((x = kw(s, "anyOf"))) {
		if ((other = other_validation(s, "anyOf", "anyOf")))
			return fail(c, ING_ERR_UNSUPPORTED, "'%s' next to 'anyOf' is not supported", other);
		return any_of(c, x);
	}
	if ((x = kw(s, "const"))) {
		if (!type_allows(kw(s, "type"), x))
			return fail(c, ING_ERR_UNSUPPORTED, "%s", "'const' does not have the schema's type");
		return literal(c, x);
	}
	if ((x = kw(s, "enum")))
		return enum_schema(c, s, x);
	return by_type(c, s);
}

static uint32_t schema(struct sc *c, const cJSON *s)
{
	if (c->rc)
		return 0;
	if (cJSON_IsTrue(s))
		return value(c);
	if (cJSON_IsFalse(s))
		return fail(c, ING_ERR_UNSUPPORTED, "%s", "the schema 'false' accepts nothing");
	if (!cJSON_IsObject(s))
		return fail(c, ING_ERR_INVALID, "%s", "a schema must be an object or a boolean");
	if (++c->depth > SC_MAX_NEST) {
		c->depth--;
		return fail(c, ING_ERR_UNSUPPORTED, "%s", "schema nested too deeply");
	}
	uint32_t r = check_unsupported(c, s) ? schema_body(c, s) : 0;
	const cJSON *nullable = kw(s, "nullable"); /* OpenAPI */
	if (!c->rc && cJSON_IsTrue(nullable))
		r = GB_ALT(&c->b, r, lit(c, "null"));
	c->depth--;
	return r;
}

/* ---- entry points ---- */

static void sc_init(struct sc *c, ing_err *err)
{
	*c = (struct sc){ .err = err, .ws = SC_NONE, .chr = SC_NONE, .string = SC_NONE,
			  .integer = SC_NONE, .number = SC_NONE, .value = SC_NONE,
			  .object = SC_NONE };
}

static int sc_finish(struct sc *c, uint32_t root, struct grammar **out)
{
	for (int i = 0; i < c->n_refs; i++)
		ing_free(c->refs[i].ref);
	ing_free(c->refs);
	if (c->rc) {
		gb_free(&c->b);
		return c->rc;
	}
	return gb_finish(&c->b, root, out, c->err);
}

int grammar_json_object(struct grammar **out, ing_err *err)
{
	struct sc c;
	sc_init(&c, err);
	value(&c);
	return sc_finish(&c, GB_SEQ(&c.b, ws(&c), c.object), out);
}

int grammar_from_alts(const struct grammar_alt *alts, int n, int min_count, int max_count,
		      const char *sep, struct grammar **out, ing_err *err)
{
	*out = NULL;
	if (n < 1 || n > 4096 || min_count < 0 || max_count < 1 || max_count < min_count ||
	    max_count > SC_MAX_REPEAT)
		return ing_err_set(err, ING_ERR_INVALID, "grammar_from_alts: bad counts");
	struct sc c;
	sc_init(&c, err);
	uint32_t *syms = ing_malloc_array((size_t)n, sizeof *syms);
	if (!syms)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	for (int i = 0; i < n && !c.rc; i++) {
		c.root = alts[i].schema;
		c.path[0] = 0;
		uint32_t v = alts[i].schema ? schema(&c, alts[i].schema) : value(&c);
		uint32_t seq[3];
		int k = 0;
		if (alts[i].prefix && alts[i].prefix[0])
			seq[k++] = lit(&c, alts[i].prefix);
		else /* models often start with a space or a newline */
			seq[k++] = ws(&c);
		seq[k++] = v;
		if (alts[i].suffix && alts[i].suffix[0])
			seq[k++] = lit(&c, alts[i].suffix);
		syms[i] = gb_seqv(&c.b, seq, k);
		/* $refs are relative to each alternative's own root */
		for (int r = 0; r < c.n_refs; r++)
			ing_free(c.refs[r].ref);
		c.n_refs = 0;
	}
	uint32_t one = gb_altv(&c.b, syms, n);
	ing_free(syms);
	uint32_t root = one;
	if (max_count > 1) {
		uint32_t next = one;
		if (sep && sep[0])
			next = GB_SEQ(&c.b, lit(&c, sep), one);
		root = min_count == 0
			       ? gb_repeat(&c.b, GB_SEQ(&c.b, one, gb_repeat(&c.b, next, 0, max_count - 1)), 0, 1)
			       : GB_SEQ(&c.b, one, gb_repeat(&c.b, next, min_count - 1, max_count - 1));
	} else if (min_count == 0) {
		root = gb_repeat(&c.b, one, 0, 1);
	}
	return sc_finish(&c, root, out);
}

int grammar_from_json_schema(const char *json, size_t len, struct grammar **out, ing_err *err)
{
	*out = NULL;
	cJSON *s = cJSON_ParseWithLength(json, len);
	if (!s)
		return ing_err_set(err, ING_ERR_INVALID, "the JSON schema is not valid JSON");
	struct grammar_alt a = { .schema = s };
	int rc = grammar_from_alts(&a, 1, 1, 1, NULL, out, err);
	cJSON_Delete(s);
	return rc;
}
