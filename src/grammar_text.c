/* grammar_text.c — grammars written as text: GBNF (llama.cpp's notation)
 * and regular expressions, compiled to the same byte rules as schemas.
 *
 * GBNF: rules `name ::= alternatives`, the start rule is `root`; a rule
 * runs until the next `name ::=` (so alternatives may span lines);
 * elements are "literals", [character classes] (^ negates, a-b ranges),
 * `.` (any character), rule names and ( groups ), each optionally followed
 * by *, +, ?, {m}, {m,} or {m,n}; # starts a comment. Escapes in literals
 * and classes: \n \r \t \\ \" \] \[ \- \xHH \uHHHH \UHHHHHHHH.
 *
 * Regex: the whole pattern must match (a leading ^ and trailing $ are
 * accepted and mean nothing more); literals, classes, `.` (not newline),
 * groups (also (?:...)), |, the quantifiers above (a lazy ? suffix is
 * accepted and ignored), \d \w \s and their negations, escaped
 * punctuation. Backreferences, lookaround and anchors elsewhere are
 * refused.
 *
 * Characters are Unicode code points: a class becomes alternatives of
 * UTF-8 byte sequences (surrogates excluded), splitting each code point
 * range where its encodings stop sharing byte prefixes.
 *
 * A regex may also be compiled into a caller's rules as the inside of a
 * JSON string (gt_regex_sym, for JSON Schema's pattern): the characters a
 * JSON string escapes come out as their escapes where the pattern names
 * them, and classes and . leave them out (a subset of the strings that
 * match, all of them valid JSON). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_int.h"
#include "hash.h"
#include "mem.h"

#define GT_MAX_NEST 100
#define GT_MAX_REPEAT 10000
#define GT_MAX_RANGES 256

struct gt_name {
	char *name;
	size_t len;
	uint32_t hash;
	int rule;
	bool defined;
};

struct gt {
	const char *start, *p, *end;
	struct gbuild *b;          /* the rules being built (own, or a caller's) */
	struct gbuild own;
	bool regex;
	bool json_str;             /* regex inside a JSON string (gt_regex_sym) */
	int depth;
	int rc;
	ing_err *err;
	struct gt_name *names;
	int n_names, cap_names;
	int *slots; /* [cap_slots] open addressing of name indices, -1 empty */
	int cap_slots;
};

struct cp_range {
	uint32_t lo, hi;
};

static uint32_t gt_fail(struct gt *t, int code, const char *what)
{
	if (!t->rc)
		t->rc = ing_err_set(t->err, code, "%s at offset %td", what, t->p - t->start);
	return 0;
}

/* ---- UTF-8 sequences of code point ranges ---- */

static int utf8_encode(uint32_t c, unsigned char *o)
{
	if (c < 0x80) {
		o[0] = (unsigned char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (unsigned char)(0xc0 | c >> 6);
		o[1] = (unsigned char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (unsigned char)(0xe0 | c >> 12);
		o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
		o[2] = (unsigned char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | c >> 18);
	o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
	o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
	o[3] = (unsigned char)(0x80 | (c & 0x3f));
	return 4;
}

struct symlist {
	uint32_t s[512];
	int n;
	bool full;
};

static void sl_push(struct symlist *l, uint32_t s)
{
	if (l->n < (int)(sizeof l->s / sizeof *l->s))
		l->s[l->n++] = s;
	else
		l->full = true;
}

/* lo..hi all encode to the same number of bytes (> 1): split until every
 * byte position spans a plain range, then emit the byte-range sequence. */
static void utf8_split(struct gbuild *b, uint32_t lo, uint32_t hi, struct symlist *out)
{
	unsigned char a[4], z[4];
	int n = utf8_encode(lo, a);
	for (int i = 1; i < n; i++) {
		uint32_t m = (1u << (6 * i)) - 1;
		if ((lo & ~m) != (hi & ~m)) {
			if ((lo & m) != 0) {
				utf8_split(b, lo, lo | m, out);
				utf8_split(b, (lo | m) + 1, hi, out);
				return;
			}
			if ((hi & m) != m) {
				utf8_split(b, lo, (hi & ~m) - 1, out);
				utf8_split(b, hi & ~m, hi, out);
				return;
			}
		}
	}
	utf8_encode(hi, z);
	uint32_t seq[4];
	for (int i = 0; i < n; i++)
		seq[i] = gb_range(b, a[i], z[i]);
	sl_push(out, gb_seqv(b, seq, n));
}

/* One symbol matching any code point in the (sorted, disjoint) ranges. */
static uint32_t ranges_sym(struct gbuild *b, const struct cp_range *r, int n)
{
	struct symlist l = { .n = 0 };
	struct gclass ascii = { { 0 } };
	bool any_ascii = false;
	static const uint32_t bounds[][2] = { { 0, 0x7f }, { 0x80, 0x7ff }, { 0x800, 0xd7ff },
					      { 0xe000, 0xffff }, { 0x10000, 0x10ffff } };
	for (int i = 0; i < n; i++)
		for (int k = 0; k < 5; k++) {
			uint32_t lo = r[i].lo > bounds[k][0] ? r[i].lo : bounds[k][0];
			uint32_t hi = r[i].hi < bounds[k][1] ? r[i].hi : bounds[k][1];
			if (lo > hi)
				continue;
			if (k == 0) {
				for (uint32_t c = lo; c <= hi; c++)
					ascii.w[c >> 5] |= 1u << (c & 31);
				any_ascii = true;
			} else {
				utf8_split(b, lo, hi, &l);
			}
		}
	if (any_ascii)
		sl_push(&l, gb_class(b, &ascii));
	if (l.full) {
		b->failed = ING_ERR_UNSUPPORTED;
		return 0;
	}
	return l.n ? gb_altv(b, l.s, l.n) : gb_nothing(b);
}

static int range_cmp(const void *x, const void *y)
{
	const struct cp_range *a = x, *b = y;
	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Sorts and merges r[0..n); with negate, replaces it by its complement
 * over all code points. Returns the new count. */
static int ranges_normalize(struct cp_range *r, int n, bool negate)
{
	qsort(r, (size_t)n, sizeof *r, range_cmp);
	int m = 0;
	for (int i = 0; i < n; i++) {
		if (m && r[i].lo <= r[m - 1].hi + 1) {
			if (r[i].hi > r[m - 1].hi)
				r[m - 1].hi = r[i].hi;
		} else {
			r[m++] = r[i];
		}
	}
	if (!negate)
		return m;
	struct cp_range c[GT_MAX_RANGES + 1];
	int k = 0;
	uint32_t next = 0;
	for (int i = 0; i < m; i++) {
		if (r[i].lo > next)
			c[k++] = (struct cp_range){ next, r[i].lo - 1 };
		next = r[i].hi + 1;
	}
	if (next <= 0x10ffff)
		c[k++] = (struct cp_range){ next, 0x10ffff };
	memcpy(r, c, (size_t)k * sizeof *r);
	return k;
}

/* Removes from the sorted, disjoint ranges r[0..n) the code points a JSON
 * string cannot hold unescaped (controls, '"', '\\'); returns the count. */
static int ranges_json(struct cp_range *r, int n)
{
	static const struct cp_range cut[] = { { 0, 0x1f }, { '"', '"' }, { '\\', '\\' } };
	struct cp_range o[GT_MAX_RANGES + 4];
	int m = 0;
	for (int i = 0; i < n; i++) {
		uint32_t lo = r[i].lo;
		for (size_t k = 0; k < sizeof cut / sizeof *cut && lo <= r[i].hi; k++) {
			if (cut[k].hi < lo || cut[k].lo > r[i].hi)
				continue;
			if (cut[k].lo > lo)
				o[m++] = (struct cp_range){ lo, cut[k].lo - 1 };
			lo = cut[k].hi + 1;
		}
		if (lo <= r[i].hi)
			o[m++] = (struct cp_range){ lo, r[i].hi };
	}
	memcpy(r, o, (size_t)m * sizeof *r);
	return m;
}

/* The symbol of a character class (ranges sorted, disjoint); inside a
 * JSON string only the characters that need no escape. */
static uint32_t class_sym(struct gt *t, struct cp_range *r, int n)
{
	if (t->json_str)
		n = ranges_json(r, n);
	return ranges_sym(t->b, r, n);
}

/* ---- lexing ---- */

static void skip_space(struct gt *t)
{
	while (t->p < t->end) {
		if (*t->p == '#' && !t->regex) {
			while (t->p < t->end && *t->p != '\n')
				t->p++;
		} else if (!t->regex && (*t->p == ' ' || *t->p == '\t' || *t->p == '\n' ||
					 *t->p == '\r')) {
			t->p++;
		} else {
			break;
		}
	}
}

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
	       c == '_';
}

/* Decodes one UTF-8 character at t->p (invalid bytes stand for themselves). */
static uint32_t next_char(struct gt *t)
{
	const unsigned char *p = (const unsigned char *)t->p;
	size_t left = (size_t)(t->end - t->p);
	uint32_t c = p[0];
	int n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
	if ((size_t)n > left)
		n = 1;
	if (n > 1) {
		c &= 0x3fu >> (n - 1);
		for (int i = 1; i < n; i++)
			c = c << 6 | (p[i] & 0x3f);
	}
	t->p += n;
	return c > 0x10ffff ? 0xfffd : c;
}

static uint32_t hex_escape(struct gt *t, int digits)
{
	uint32_t v = 0;
	for (int i = 0; i < digits; i++) {
		if (t->p >= t->end)
			return gt_fail(t, ING_ERR_INVALID, "short hex escape");
		char c = *t->p++;
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return gt_fail(t, ING_ERR_INVALID, "bad hex escape");
		v = v << 4 | (uint32_t)d;
	}
	return v > 0x10ffff ? gt_fail(t, ING_ERR_INVALID, "code point out of range") : v;
}

/* A character, escapes resolved (after the backslash for \x.., \u..). */
static uint32_t char_or_escape(struct gt *t)
{
	if (*t->p != '\\')
		return next_char(t);
	t->p++;
	if (t->p >= t->end)
		return gt_fail(t, ING_ERR_INVALID, "dangling backslash");
	char c = *t->p++;
	switch (c) {
	case 'n': return '\n';
	case 'r': return '\r';
	case 't': return '\t';
	case 'f': return '\f';
	case 'v': return '\v';
	case '0': return 0;
	case 'x': return hex_escape(t, 2);
	case 'u': return hex_escape(t, 4);
	case 'U': return hex_escape(t, 8);
	default:
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
			return gt_fail(t, ING_ERR_UNSUPPORTED, "unsupported escape");
		return (unsigned char)c;
	}
}

/* \d \w \s and negations (regex, also inside classes): appends ranges. */
static bool class_escape(struct gt *t, struct cp_range *r, int *n, bool *negate_all)
{
	if (t->end - t->p < 2 || t->p[0] != '\\')
		return false;
	static const struct cp_range d[] = { { '0', '9' } };
	static const struct cp_range w[] = { { '0', '9' }, { 'A', 'Z' }, { '_', '_' }, { 'a', 'z' } };
	static const struct cp_range s[] = { { '\t', '\r' }, { ' ', ' ' } };
	const struct cp_range *set;
	int k;
	switch (t->p[1] | 0x20) {
	case 'd': set = d, k = 1; break;
	case 'w': set = w, k = 4; break;
	case 's': set = s, k = 2; break;
	default: return false;
	}
	if ((t->p[1] & 0x20) == 0) { /* \D \W \S: only alone, as a whole class */
		if (!negate_all)
			return gt_fail(t, ING_ERR_UNSUPPORTED, "\\D, \\W or \\S inside a class"), true;
		*negate_all = true;
	}
	t->p += 2;
	for (int i = 0; i < k && *n < GT_MAX_RANGES; i++)
		r[(*n)++] = set[i];
	return true;
}

/* ---- elements ---- */

static uint32_t alternatives(struct gt *t);

static uint32_t char_class(struct gt *t)
{
	t->p++; /* [ */
	struct cp_range r[GT_MAX_RANGES + 4]; /* + what class_sym may split off */
	int n = 0;
	bool negate = t->p < t->end && *t->p == '^';
	if (negate)
		t->p++;
	while (t->p < t->end && *t->p != ']' && !t->rc) {
		if (n >= GT_MAX_RANGES)
			return gt_fail(t, ING_ERR_UNSUPPORTED, "character class too large");
		if (t->regex && class_escape(t, r, &n, NULL))
			continue;
		uint32_t lo = char_or_escape(t), hi = lo;
		if (t->end - t->p >= 2 && t->p[0] == '-' && t->p[1] != ']') {
			t->p++;
			hi = char_or_escape(t);
		}
		if (hi < lo)
			return gt_fail(t, ING_ERR_INVALID, "reversed range in a class");
		r[n++] = (struct cp_range){ lo, hi };
	}
	if (t->p >= t->end)
		return gt_fail(t, ING_ERR_INVALID, "unterminated character class");
	t->p++; /* ] */
	n = ranges_normalize(r, n, negate);
	return class_sym(t, r, n);
}

static uint32_t literal(struct gt *t)
{
	t->p++; /* " */
	unsigned char buf[1024];
	size_t n = 0;
	while (t->p < t->end && *t->p != '"' && !t->rc) {
		uint32_t c = char_or_escape(t);
		if (n + 4 > sizeof buf)
			return gt_fail(t, ING_ERR_UNSUPPORTED, "literal longer than 1000 bytes");
		n += (size_t)utf8_encode(c, buf + n);
	}
	if (t->p >= t->end)
		return gt_fail(t, ING_ERR_INVALID, "unterminated literal");
	t->p++;
	if (n == 0) {
		int r = gb_rule_new(t->b);
		gb_rule_add(t->b, r, NULL, 0);
		return (uint32_t)r;
	}
	return gb_lit(t->b, (const char *)buf, n);
}

/* Room in the name table for one more name, kept at most half full (a
 * hash table: looking names up one by one made a GBNF of 20,000 rules take
 * seconds). */
static bool slots_reserve(struct gt *t)
{
	if ((t->n_names + 1) * 2 <= t->cap_slots)
		return true;
	int cap = t->cap_slots ? 2 * t->cap_slots : 64;
	int *sl = ing_malloc_array((size_t)cap, sizeof *sl);
	if (!sl)
		return false;
	for (int i = 0; i < cap; i++)
		sl[i] = -1;
	for (int i = 0; i < t->n_names; i++) {
		uint32_t h = t->names[i].hash & (uint32_t)(cap - 1);
		while (sl[h] >= 0)
			h = (h + 1) & (uint32_t)(cap - 1);
		sl[h] = i;
	}
	ing_free(t->slots);
	t->slots = sl;
	t->cap_slots = cap;
	return true;
}

static int name_find(struct gt *t, const char *s, size_t n, bool define)
{
	if (!slots_reserve(t))
		return gt_fail(t, ING_ERR_NOMEM, "out of memory"), -1;
	const uint32_t hash = hash_fnv1a32(s, n), mask = (uint32_t)(t->cap_slots - 1);
	uint32_t h = hash & mask;
	for (; t->slots[h] >= 0; h = (h + 1) & mask) {
		struct gt_name *nm = &t->names[t->slots[h]];
		if (nm->hash != hash || nm->len != n || memcmp(nm->name, s, n))
			continue;
		if (define && nm->defined)
			return gt_fail(t, ING_ERR_INVALID, "rule defined twice"), -1;
		nm->defined |= define;
		return nm->rule;
	}
	if (t->n_names == t->cap_names) {
		int cap = t->cap_names ? 2 * t->cap_names : 16;
		struct gt_name *p = ing_realloc(t->names, (size_t)cap * sizeof *p);
		if (!p)
			return gt_fail(t, ING_ERR_NOMEM, "out of memory"), -1;
		t->names = p;
		t->cap_names = cap;
	}
	char *copy = ing_strndup(s, n);
	if (!copy)
		return gt_fail(t, ING_ERR_NOMEM, "out of memory"), -1;
	int r = gb_rule_new(t->b);
	t->slots[h] = t->n_names;
	t->names[t->n_names++] = (struct gt_name){ copy, n, hash, r, define };
	return r;
}

/* A GBNF rule definition starts here: name ws "::=". */
static bool at_definition(const struct gt *t)
{
	const char *p = t->p;
	while (p < t->end && is_name_char(*p))
		p++;
	if (p == t->p)
		return false;
	while (p < t->end && (*p == ' ' || *p == '\t'))
		p++;
	return t->end - p >= 3 && !memcmp(p, "::=", 3);
}

static uint32_t any_char(struct gt *t)
{
	t->p++;
	struct cp_range r[2 + 4] = { { 0, 0x10ffff } };
	int n = 1;
	if (t->regex) /* . is not a newline */
		r[0] = (struct cp_range){ 0, '\n' - 1 }, r[1] = (struct cp_range){ '\n' + 1, 0x10ffff }, n = 2;
	return class_sym(t, r, n);
}

static uint32_t group(struct gt *t)
{
	t->p++;
	if (t->regex && t->end - t->p >= 2 && t->p[0] == '?') {
		if (t->p[1] != ':')
			return gt_fail(t, ING_ERR_UNSUPPORTED, "lookaround or group flags");
		t->p += 2;
	}
	uint32_t s = alternatives(t);
	skip_space(t);
	if (t->p >= t->end || *t->p != ')')
		return gt_fail(t, ING_ERR_INVALID, "missing )");
	t->p++;
	return s;
}

/* A character JSON strings must escape (a control, '"', '\\'), as JSON
 * writes it, for a pattern inside a JSON string. */
static uint32_t json_escaped(struct gt *t, uint32_t cp)
{
	char buf[8];
	int k = cp == '"' || cp == '\\' ? snprintf(buf, sizeof buf, "\\%c", (int)cp)
		: cp == '\n'		   ? snprintf(buf, sizeof buf, "\\n")
		: cp == '\t'		   ? snprintf(buf, sizeof buf, "\\t")
		: cp == '\r'		   ? snprintf(buf, sizeof buf, "\\r")
					   : snprintf(buf, sizeof buf, "\\u%04x", (unsigned)cp);
	return gb_lit(t->b, buf, (size_t)k);
}

static uint32_t primary(struct gt *t)
{
	char c = *t->p;
	if (c == '(')
		return group(t);
	if (c == '[')
		return char_class(t);
	if (c == '.')
		return any_char(t);
	if (!t->regex) {
		if (c == '"')
			return literal(t);
		if (is_name_char(c)) {
			const char *s = t->p;
			while (t->p < t->end && is_name_char(*t->p))
				t->p++;
			int r = name_find(t, s, (size_t)(t->p - s), false);
			return r < 0 ? 0 : (uint32_t)r;
		}
		return gt_fail(t, ING_ERR_INVALID, "unexpected character");
	}
	struct cp_range r[8 + 4];
	int n = 0;
	bool neg = false;
	if (class_escape(t, r, &n, &neg)) {
		n = ranges_normalize(r, n, neg);
		return class_sym(t, r, n);
	}
	if (c == '^' || c == '$' || (c == '\\' && t->end - t->p >= 2 && (t->p[1] == 'b' ||
	    t->p[1] == 'B' || (t->p[1] >= '1' && t->p[1] <= '9'))))
		return gt_fail(t, ING_ERR_UNSUPPORTED, "anchor or backreference inside the pattern");
	if (c == '*' || c == '+' || c == '?' || c == '{' || c == ')')
		return gt_fail(t, ING_ERR_INVALID, "misplaced quantifier or parenthesis");
	unsigned char buf[4];
	uint32_t cp = char_or_escape(t);
	if (t->json_str && (cp < 0x20 || cp == '"' || cp == '\\'))
		return json_escaped(t, cp);
	return gb_lit(t->b, (const char *)buf, (size_t)utf8_encode(cp, buf));
}

static bool read_count(struct gt *t, int *v)
{
	if (t->p >= t->end || *t->p < '0' || *t->p > '9')
		return false;
	long x = 0;
	while (t->p < t->end && *t->p >= '0' && *t->p <= '9' && x <= GT_MAX_REPEAT)
		x = x * 10 + (*t->p++ - '0');
	*v = (int)x;
	return true;
}

/* x followed by an optional quantifier. */
static uint32_t quantified(struct gt *t, uint32_t x)
{
	if (t->p >= t->end)
		return x;
	int min = -1, max = -1;
	switch (*t->p) {
	case '*': min = 0; break;
	case '+': min = 1; break;
	case '?': min = 0, max = 1; break;
	case '{': {
		const char *save = t->p++;
		if (!read_count(t, &min)) {
			t->p = save;
			if (t->regex)
				return gt_fail(t, ING_ERR_INVALID, "bad {m,n}");
			return x;
		}
		max = min;
		if (t->p < t->end && *t->p == ',') {
			t->p++;
			if (!read_count(t, &max))
				max = -1;
		}
		if (t->p >= t->end || *t->p != '}')
			return gt_fail(t, ING_ERR_INVALID, "bad {m,n}");
		if (min > GT_MAX_REPEAT || max > GT_MAX_REPEAT || (max >= 0 && max < min))
			return gt_fail(t, ING_ERR_UNSUPPORTED, "repetition count over 10000 or reversed");
		break;
	}
	default:
		return x;
	}
	t->p++;
	if (t->regex && t->p < t->end && *t->p == '?') /* lazy: same language */
		t->p++;
	return gb_repeat(t->b, x, min, max);
}

static bool seq_ends(struct gt *t)
{
	return t->p >= t->end || *t->p == '|' || *t->p == ')' || (!t->regex && at_definition(t));
}

static uint32_t sequence(struct gt *t)
{
	uint32_t syms[256];
	int n = 0;
	for (skip_space(t); !seq_ends(t) && !t->rc; skip_space(t)) {
		if (t->regex && *t->p == '$' && t->p + 1 == t->end) {
			t->p++;
			break;
		}
		if (n == 256) /* fold what we have into one symbol */
			syms[0] = gb_seqv(t->b, syms, n), n = 1;
		syms[n++] = quantified(t, primary(t));
	}
	if (n == 0) {
		int r = gb_rule_new(t->b);
		gb_rule_add(t->b, r, NULL, 0);
		return (uint32_t)r;
	}
	return gb_seqv(t->b, syms, n);
}

static uint32_t alternatives(struct gt *t)
{
	if (++t->depth > GT_MAX_NEST)
		return gt_fail(t, ING_ERR_UNSUPPORTED, "nested too deeply");
	int r = gb_rule_new(t->b);
	for (;;) {
		uint32_t s = sequence(t);
		gb_rule_add(t->b, r, &s, 1);
		skip_space(t);
		if (t->rc || t->p >= t->end || *t->p != '|')
			break;
		t->p++;
	}
	t->depth--;
	return (uint32_t)r;
}

/* ---- entry points ---- */

static int gt_finish(struct gt *t, uint32_t root, struct grammar **out)
{
	for (int i = 0; i < t->n_names; i++) {
		if (!t->names[i].defined && !t->rc) {
			char msg[160];
			snprintf(msg, sizeof msg, "undefined rule '%.100s'", t->names[i].name);
			t->rc = ing_err_set(t->err, ING_ERR_INVALID, "%s", msg);
		}
		ing_free(t->names[i].name);
	}
	ing_free(t->names);
	ing_free(t->slots);
	if (t->rc) {
		gb_free(t->b);
		return t->rc;
	}
	return gb_finish(t->b, root, out, t->err);
}

int grammar_from_gbnf(const char *text, size_t len, struct grammar **out, ing_err *err)
{
	*out = NULL;
	struct gt t = { .start = text, .p = text, .end = text + len, .err = err };
	t.b = &t.own;
	for (skip_space(&t); t.p < t.end && !t.rc; skip_space(&t)) {
		if (!at_definition(&t)) {
			gt_fail(&t, ING_ERR_INVALID, "expected 'name ::='");
			break;
		}
		const char *s = t.p;
		while (is_name_char(*t.p))
			t.p++;
		int r = name_find(&t, s, (size_t)(t.p - s), true);
		while (*t.p != ':')
			t.p++;
		t.p += 3;
		uint32_t body = alternatives(&t);
		if (r >= 0)
			gb_rule_add(t.b, r, &body, 1);
	}
	int root = t.rc ? -1 : name_find(&t, "root", 4, false);
	return gt_finish(&t, root < 0 ? 0 : (uint32_t)root, out);
}

int grammar_from_regex(const char *pattern, size_t len, struct grammar **out, ing_err *err)
{
	*out = NULL;
	struct gt t = { .start = pattern, .p = pattern, .end = pattern + len, .regex = true,
			.err = err };
	t.b = &t.own;
	if (t.p < t.end && *t.p == '^')
		t.p++;
	uint32_t root = alternatives(&t);
	if (!t.rc && t.p < t.end)
		gt_fail(&t, ING_ERR_INVALID, "unbalanced )");
	return gt_finish(&t, root, out);
}

uint32_t gt_regex_sym(struct gbuild *b, const char *pattern, size_t len, bool *anchored_start,
		      bool *anchored_end, int *rc, ing_err *err)
{
	struct gt t = { .start = pattern, .p = pattern, .end = pattern + len, .regex = true,
			.json_str = true, .err = err, .b = b };
	*anchored_start = t.p < t.end && *t.p == '^';
	if (*anchored_start)
		t.p++;
	/* a final $ not escaped by an odd run of backslashes */
	size_t bs = 0;
	while (len >= 2 + bs && pattern[len - 2 - bs] == '\\')
		bs++;
	*anchored_end = len > (size_t)*anchored_start && pattern[len - 1] == '$' && bs % 2 == 0;
	uint32_t root = alternatives(&t); /* a regex names no rules: nothing to free */
	if (!t.rc && t.p < t.end)
		gt_fail(&t, ING_ERR_INVALID, "unbalanced )");
	*rc = t.rc;
	return t.rc ? 0 : root;
}
