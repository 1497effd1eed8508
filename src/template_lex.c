/* template_lex.c — source text to tokens, as jinja2's lexer does it with
 * trim_blocks and lstrip_blocks on.
 *
 * Newlines (\r\n, \r, \n) become \n and one trailing newline is dropped
 * (keep_trailing_newline off). Whitespace control happens here, on the
 * text between tags:
 *   {%- / {{- / {#-    strip all whitespace before the tag;
 *   -%} / -}} / -#}    strip all whitespace after it;
 *   lstrip_blocks      spaces/tabs between a line start and {% or {# go,
 *                      unless the tag is written {%+ / {#+;
 *   trim_blocks        the first newline after %} or #} goes, unless +%}.
 * Inside a tag, }} and %} only end it when brackets are balanced (so that
 * {{ {'a': {'b': 1}} }} works). Comments are dropped; {% raw %} bodies
 * become data. Strings are decoded with Python's escapes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "template_int.h"

/* ---------------------------------------------------------------- arena */

struct tpl_chunk {
	struct tpl_chunk *next;
	size_t used, cap;
	_Alignas(16) unsigned char data[];
};

void *tpl_arena_alloc(struct tpl_arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	struct tpl_chunk *c = a->head;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > 16384 ? n : 16384;
		c = ing_malloc(sizeof *c + cap);
		if (!c)
			return NULL;
		c->next = a->head;
		c->used = 0;
		c->cap = cap;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += n;
	memset(p, 0, n);
	return p;
}

void tpl_arena_free(struct tpl_arena *a)
{
	for (struct tpl_chunk *c = a->head, *nx; c; c = nx) {
		nx = c->next;
		ing_free(c);
	}
	a->head = NULL;
}

struct tstr *tpl_arena_str(struct tpl_arena *a, const char *s, size_t n)
{
	struct tstr *t = tpl_arena_alloc(a, sizeof *t + n + 1);
	if (!t)
		return NULL;
	t->h = (struct tobj){ .refs = TOBJ_IMMORTAL, .type = TO_STR };
	t->len = n;
	if (n)
		memcpy(t->s, s, n);
	t->s[n] = 0;
	/* Computed now: renders running in parallel never write to it. */
	t->hash = 0;
	tstr_hash(t);
	t->ncp = -1;
	tstr_ncp(t);
	return t;
}

/* ---------------------------------------------------------------- lexer */

struct lexer {
	const char *s; /* normalized source */
	size_t n, pos;
	struct tpl_arena *a;
	struct tpl_token *tk;
	size_t ntk, cap;
	ing_err *err;
	int line_starting;
	int depth;     /* open brackets inside the current tag */
	char stack[64]; /* their kinds, for matching */
};

static void where(const struct lexer *L, size_t pos, int *line, int *col)
{
	int ln = 1;
	size_t ls = 0;
	for (size_t i = 0; i < pos && i < L->n; i++)
		if (L->s[i] == '\n') {
			ln++;
			ls = i + 1;
		}
	*line = ln;
	*col = (int)(pos - ls) + 1;
}

static int lex_fail(struct lexer *L, size_t pos, const char *msg)
{
	int line, col;
	where(L, pos, &line, &col);
	return ing_err_set(L->err, ING_ERR_FORMAT, "line %d, column %d: %s", line, col, msg);
}

static struct tpl_token *emit(struct lexer *L, int type, size_t pos)
{
	if (L->ntk == L->cap) {
		size_t cap = L->cap ? L->cap * 2 : 256;
		struct tpl_token *t = ing_realloc(L->tk, cap * sizeof *t);
		if (!t) {
			ing_err_set(L->err, ING_ERR_NOMEM, "out of memory");
			return NULL;
		}
		L->tk = t;
		L->cap = cap;
	}
	struct tpl_token *t = &L->tk[L->ntk++];
	/* The offset becomes line/column once lexing is done. */
	*t = (struct tpl_token){ .type = (uint8_t)type, .off = pos };
	return t;
}

static int is_ws_at(const struct lexer *L, size_t i, size_t *next)
{
	size_t j = i;
	uint32_t cp = utf8_next(L->s, L->n, &j);
	*next = j;
	return cp_isspace(cp);
}

/* Emits the text s[b..e) as data, applying the strip rules of the tag that
 * follows: sign '-' strips all trailing whitespace, lstrip removes a line's
 * indentation before a block or comment tag. */
static int emit_data(struct lexer *L, size_t b, size_t e, char sign, int lstrip)
{
	if (sign == '-') {
		size_t k = b, last = b; /* end of the last non-space code point */
		while (k < e) {
			size_t nx;
			if (!is_ws_at(L, k, &nx))
				last = nx;
			k = nx;
		}
		e = last;
	} else if (sign != '+' && lstrip) {
		size_t lpos = e;
		while (lpos > b && L->s[lpos - 1] != '\n')
			lpos--;
		if (lpos > b || L->line_starting) {
			size_t k = lpos;
			while (k < e && (L->s[k] == ' ' || L->s[k] == '\t'))
				k++;
			if (k == e)
				e = lpos;
		}
	}
	if (e <= b)
		return 0;
	struct tpl_token *t = emit(L, TK_DATA, b);
	if (!t)
		return -1;
	if (!(t->str = tpl_arena_str(L->a, L->s + b, e - b)))
		return ing_err_set(L->err, ING_ERR_NOMEM, "out of memory");
	return 0;
}

/* After a tag end: '-' eats all whitespace, trim eats one newline. */
static void after_tag(struct lexer *L, char sign, int trim)
{
	if (sign == '-') {
		size_t nx;
		while (L->pos < L->n && is_ws_at(L, L->pos, &nx))
			L->pos = nx;
	} else if (trim && sign != '+' && L->pos < L->n && L->s[L->pos] == '\n') {
		L->pos++;
	}
	L->line_starting = L->pos > 0 && L->s[L->pos - 1] == '\n';
}

/* Python string literal escapes ("unicode-escape" codec). */
static int decode_string(struct lexer *L, size_t b, size_t e, struct tstr **out)
{
	char *buf = ing_malloc(e - b + 1);
	if (!buf)
		return ing_err_set(L->err, ING_ERR_NOMEM, "out of memory");
	size_t o = 0;
	for (size_t i = b; i < e;) {
		char c = L->s[i];
		if (c != '\\' || i + 1 >= e) {
			buf[o++] = c;
			i++;
			continue;
		}
		char x = L->s[i + 1];
		const char *simple = strchr("\\'\"abfnrtv\n", x);
		if (simple && x) {
			static const char map[] = "\\'\"\a\b\f\n\r\t\v";
			if (x != '\n')
				buf[o++] = map[simple - "\\'\"abfnrtv\n"];
			i += 2;
			continue;
		}
		int ndig = x == 'x' ? 2 : x == 'u' ? 4 : x == 'U' ? 8 : 0;
		if (ndig) {
			uint32_t cp = 0;
			if (i + 2 + (size_t)ndig > e)
				goto bad;
			for (int k = 0; k < ndig; k++) {
				char h = L->s[i + 2 + (size_t)k];
				int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
					: h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
				if (v < 0)
					goto bad;
				cp = cp * 16 + (uint32_t)v;
			}
			if (cp > 0x10ffff)
				goto bad;
			o += (size_t)utf8_put(cp, buf + o); /* never longer than the escape */
			i += 2 + (size_t)ndig;
			continue;
		}
		if (x >= '0' && x <= '7') {
			uint32_t cp = 0;
			size_t k = i + 1;
			for (int d = 0; d < 3 && k < e && L->s[k] >= '0' && L->s[k] <= '7'; d++, k++)
				cp = cp * 8 + (uint32_t)(L->s[k] - '0');
			o += (size_t)utf8_put(cp, buf + o);
			i = k;
			continue;
		}
		buf[o++] = c; /* unknown escape: kept as written */
		i++;
	}
	*out = tpl_arena_str(L->a, buf, o);
	ing_free(buf);
	return *out ? 0 : ing_err_set(L->err, ING_ERR_NOMEM, "out of memory");
bad:
	ing_free(buf);
	return lex_fail(L, b, "invalid escape in string literal");
}

static int lex_string(struct lexer *L)
{
	size_t b = L->pos;
	char q = L->s[b];
	size_t i = b + 1;
	while (i < L->n && L->s[i] != q)
		i += L->s[i] == '\\' ? 2 : 1;
	if (i >= L->n)
		return lex_fail(L, b, "unterminated string");
	struct tpl_token *t = emit(L, TK_STRING, b);
	if (!t || decode_string(L, b + 1, i, &t->str))
		return -1;
	L->pos = i + 1;
	return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_name0(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Digits with single underscores between them; returns the end. */
static size_t scan_digits(const char *s, size_t n, size_t i)
{
	if (i >= n || !is_digit(s[i]))
		return i;
	while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1]))))
		i++;
	return i;
}

static int lex_number(struct lexer *L)
{
	const char *s = L->s;
	size_t b = L->pos, i = scan_digits(s, L->n, b);
	int is_float = 0;
	int after_dot = b > 0 && s[b - 1] == '.';
	if (!after_dot && i + 1 < L->n && s[i] == '.' && is_digit(s[i + 1])) {
		i = scan_digits(s, L->n, i + 1);
		is_float = 1;
	}
	if (!after_dot && i < L->n && (s[i] == 'e' || s[i] == 'E')) {
		size_t j = i + 1;
		if (j < L->n && (s[j] == '+' || s[j] == '-'))
			j++;
		if (j < L->n && is_digit(s[j])) {
			i = scan_digits(s, L->n, j);
			is_float = 1;
		}
	}
	char buf[64];
	size_t o = 0;
	for (size_t k = b; k < i && o < sizeof buf - 1; k++)
		if (s[k] != '_')
			buf[o++] = s[k];
	buf[o] = 0;
	struct tpl_token *t = emit(L, is_float ? TK_FLOAT : TK_INT, b);
	if (!t)
		return -1;
	if (is_float) {
		t->f = strtod(buf, NULL);
	} else {
		char *end;
		errno = 0;
		long long v = strtoll(buf, &end, 10);
		if (errno || i - b >= sizeof buf - 1)
			return lex_fail(L, b, "integer literal too large");
		t->i = v;
	}
	L->pos = i;
	return 0;
}

static const struct { const char *s; int op; } ops2[] = {
	{ "//", OP_FLOORDIV }, { "**", OP_POW }, { "==", OP_EQ }, { "!=", OP_NE },
	{ "<=", OP_LE }, { ">=", OP_GE },
};
static const char ops1[] = "+-*/%~<>=()[]{},.:|;";
static const int ops1_op[] = {
	OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_TILDE, OP_LT, OP_GT, OP_ASSIGN,
	OP_LPAREN, OP_RPAREN, OP_LBRACKET, OP_RBRACKET, OP_LBRACE, OP_RBRACE,
	OP_COMMA, OP_DOT, OP_COLON, OP_PIPE, OP_SEMICOLON,
};

const char *tpl_op_text(int op)
{
	for (size_t i = 0; i < sizeof ops2 / sizeof ops2[0]; i++)
		if (ops2[i].op == op)
			return ops2[i].s;
	static const char *one[] = { "+", "-", "*", "/", "%", "~", "<", ">", "=", "(", ")", "[",
				     "]", "{", "}", ",", ".", ":", "|", ";" };
	for (size_t i = 0; i < sizeof ops1_op / sizeof ops1_op[0]; i++)
		if (ops1_op[i] == op)
			return one[i];
	return op == OP_IN ? "in" : op == OP_NOTIN ? "not in" : op == OP_NOT ? "not" : "?";
}

static int lex_op(struct lexer *L)
{
	const char *s = L->s + L->pos;
	int op = 0;
	size_t len = 1;
	for (size_t i = 0; i < sizeof ops2 / sizeof ops2[0]; i++)
		if (L->pos + 1 < L->n && s[0] == ops2[i].s[0] && s[1] == ops2[i].s[1]) {
			op = ops2[i].op;
			len = 2;
		}
	if (!op) {
		const char *p = strchr(ops1, s[0]);
		if (!p || !s[0])
			return lex_fail(L, L->pos, "unexpected character in tag");
		op = ops1_op[p - ops1];
	}
	if (op == OP_LPAREN || op == OP_LBRACKET || op == OP_LBRACE) {
		if (L->depth >= (int)sizeof L->stack)
			return lex_fail(L, L->pos, "brackets nested too deeply");
		L->stack[L->depth++] = s[0];
	} else if (op == OP_RPAREN || op == OP_RBRACKET || op == OP_RBRACE) {
		char want = op == OP_RPAREN ? '(' : op == OP_RBRACKET ? '[' : '{';
		if (!L->depth || L->stack[L->depth - 1] != want)
			return lex_fail(L, L->pos, L->depth ? "mismatched closing bracket"
							    : "unexpected closing bracket");
		L->depth--;
	}
	struct tpl_token *t = emit(L, TK_OP, L->pos);
	if (!t)
		return -1;
	t->op = (uint8_t)op;
	L->pos += len;
	return 0;
}

/* Tokens of one {% %} or {{ }} tag, up to and including its end. */
static int lex_tag(struct lexer *L, int block)
{
	size_t start = L->pos;
	L->depth = 0;
	for (;;) {
		size_t nx;
		while (L->pos < L->n && is_ws_at(L, L->pos, &nx))
			L->pos = nx;
		if (L->pos >= L->n)
			return lex_fail(L, start, block ? "unclosed block tag: missing %}"
							 : "unclosed variable tag: missing }}");
		const char *s = L->s + L->pos;
		size_t left = L->n - L->pos;
		if (!L->depth) {
			char sign = 0;
			size_t k = 0;
			if (left >= 3 && (s[0] == '-' || (block && s[0] == '+')) &&
			    s[1] == (block ? '%' : '}') && s[2] == '}') {
				sign = s[0];
				k = 1;
			}
			if (left >= k + 2 && s[k] == (block ? '%' : '}') && s[k + 1] == '}') {
				if (!emit(L, block ? TK_BLOCK_END : TK_VAR_END, L->pos))
					return -1;
				L->pos += k + 2;
				after_tag(L, sign, block);
				return 0;
			}
		}
		int rc;
		if (is_digit(s[0]))
			rc = lex_number(L);
		else if (is_name0(s[0])) {
			size_t e = L->pos;
			while (e < L->n && (is_name0(L->s[e]) || is_digit(L->s[e])))
				e++;
			struct tpl_token *t = emit(L, TK_NAME, L->pos);
			if (!t || !(t->str = tpl_arena_str(L->a, s, e - L->pos)))
				return t ? ing_err_set(L->err, ING_ERR_NOMEM, "out of memory") : -1;
			L->pos = e;
			rc = 0;
		} else if (s[0] == '\'' || s[0] == '"')
			rc = lex_string(L);
		else
			rc = lex_op(L);
		if (rc)
			return -1;
	}
}

/* Finds the next "{{", "{%" or "{#" at or after pos; n when none. */
static size_t find_open(const struct lexer *L, size_t pos)
{
	for (size_t i = pos; i + 1 < L->n; i++) {
		const char *p = memchr(L->s + i, '{', L->n - i - 1);
		if (!p)
			return L->n;
		i = (size_t)(p - L->s);
		if (p[1] == '{' || p[1] == '%' || p[1] == '#')
			return i;
	}
	return L->n;
}

/* Matches "{%[-+]? raw [-+]?%}" (or endraw) at pos: returns its length, 0
 * when it is not one; *so and *sc get the whitespace-control signs. */
static size_t match_raw(const struct lexer *L, size_t pos, const char *word, char *so, char *sc)
{
	const char *s = L->s;
	size_t i = pos + 2, n = L->n;
	*so = *sc = 0;
	if (i < n && (s[i] == '-' || s[i] == '+'))
		*so = s[i++];
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	size_t wl = strlen(word);
	if (i + wl > n || memcmp(s + i, word, wl))
		return 0;
	i += wl;
	if (i < n && (is_name0(s[i]) || is_digit(s[i])))
		return 0;
	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
		i++;
	if (i < n && (s[i] == '-' || s[i] == '+'))
		*sc = s[i++];
	if (i + 2 > n || s[i] != '%' || s[i + 1] != '}')
		return 0;
	return i + 2 - pos;
}

static int lex_raw(struct lexer *L, size_t open, size_t len, char sc)
{
	L->pos = open + len;
	after_tag(L, sc, 0); /* jinja2 keeps the newline after {% raw %} */
	for (size_t i = L->pos;; i++) {
		i = find_open(L, i);
		if (i >= L->n)
			return lex_fail(L, open, "missing {% endraw %}");
		char so2, sc2;
		size_t el;
		if (L->s[i + 1] == '%' && (el = match_raw(L, i, "endraw", &so2, &sc2))) {
			if (emit_data(L, L->pos, i, so2, 1))
				return -1;
			L->pos = i + el;
			after_tag(L, sc2, 1);
			return 0;
		}
	}
}

static int lex_comment(struct lexer *L, size_t open)
{
	size_t i = open + 2;
	if (i < L->n && (L->s[i] == '-' || L->s[i] == '+'))
		i++;
	for (; i + 1 < L->n; i++) {
		if (L->s[i] == '#' && L->s[i + 1] == '}') {
			char sign = i > open + 2 && (L->s[i - 1] == '-' || L->s[i - 1] == '+')
				? L->s[i - 1] : 0;
			L->pos = i + 2;
			after_tag(L, sign, 1);
			return 0;
		}
	}
	return lex_fail(L, open, "unclosed comment: missing #}");
}

static int lex_root(struct lexer *L)
{
	while (L->pos < L->n) {
		size_t open = find_open(L, L->pos);
		if (open >= L->n)
			return emit_data(L, L->pos, L->n, 0, 0);
		char kind = L->s[open + 1];
		char sign = open + 2 < L->n && (L->s[open + 2] == '-' || L->s[open + 2] == '+')
			? L->s[open + 2] : 0;
		char so = 0, sc = 0;
		size_t rl = kind == '%' ? match_raw(L, open, "raw", &so, &sc) : 0;
		if (sc == '+') /* jinja2 has no {% raw +%}: an unknown tag then */
			rl = 0;
		if (emit_data(L, L->pos, open, sign, kind != '{'))
			return -1;
		L->line_starting = 0;
		if (rl) {
			if (lex_raw(L, open, rl, sc))
				return -1;
			continue;
		}
		if (kind == '#') {
			if (lex_comment(L, open))
				return -1;
			continue;
		}
		if (!emit(L, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, open))
			return -1;
		L->pos = open + 2 + (sign ? 1 : 0);
		if (lex_tag(L, kind == '%'))
			return -1;
	}
	return 0;
}

/* \r\n and \r become \n; one trailing newline is dropped. */
static char *normalize(const char *src, size_t len, size_t *out_len)
{
	char *s = ing_malloc(len + 1);
	if (!s)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (src[i] == '\r') {
			s[o++] = '\n';
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
		} else {
			s[o++] = src[i];
		}
	}
	if (o && s[o - 1] == '\n')
		o--;
	s[o] = 0;
	*out_len = o;
	return s;
}

int tpl_lex(const char *src, size_t len, struct tpl_arena *a, struct tpl_token **toks,
	    size_t *ntoks, ing_err *err)
{
	struct lexer L = { .a = a, .err = err, .line_starting = 1 };
	char *s = normalize(src, len, &L.n);
	if (!s)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	L.s = s;
	int rc = lex_root(&L);
	struct tpl_token *eof = rc ? NULL : emit(&L, TK_EOF, L.n);
	if (!rc && !eof)
		rc = -1;
	if (!rc) {
		/* Offsets to line/column in one pass. */
		int line = 1;
		size_t ls = 0, at = 0;
		for (size_t k = 0; k < L.ntk; k++) {
			struct tpl_token *t = &L.tk[k];
			for (; at < t->off && at < L.n; at++)
				if (s[at] == '\n') {
					line++;
					ls = at + 1;
				}
			t->line = line;
			t->col = (int)(t->off - ls) + 1;
		}
	}
	ing_free(s);
	if (rc) {
		ing_free(L.tk);
		return err->code ? err->code : ING_ERR_FORMAT;
	}
	*toks = L.tk;
	*ntoks = L.ntk;
	return 0;
}
