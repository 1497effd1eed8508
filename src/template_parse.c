/* template_parse.c — tokens to syntax tree, following jinja2's parser
 * (jinja2/parser.py) rule for rule so that precedence and the odd corners
 * (filters binding tighter than +, "not x is defined", tests taking one
 * unparenthesized argument, chained comparisons) come out the same.
 *
 * Expression precedence, loosest first:
 *   x if c else y  >  or  >  and  >  not  >  == != < <= > >= in not-in
 *   >  + -  >  ~  >  * / // %  >  **  >  unary - +  >  |filter, is test,
 *   call  >  primary with .attr [item] (call)
 *
 * Every node is allocated in the template's arena, so an error anywhere
 * just returns: template_free() releases what was built. The tree's depth
 * is bounded (TPL_AST_DEPTH_MAX) so that evaluating it cannot exhaust the
 * C stack. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mem.h"
#include "template_int.h"

#define PARSE_NEST_MAX 200

struct parser {
	struct tpl_token *tk;
	size_t n, pos;
	struct tpl_arena *a;
	ing_err *err;
	int nest;            /* recursion depth of the parser itself */
	int loops;           /* enclosing for bodies: break/continue allowed */
	struct tnode *macro; /* macro whose body is being parsed */
};

/* Growable node array in the arena (old arrays are abandoned there). */
struct nlist {
	struct tnode **v;
	int n, cap;
};

static struct tpl_token *cur(struct parser *P) { return &P->tk[P->pos]; }

static struct tpl_token *peek(struct parser *P, int k)
{
	size_t i = P->pos + (size_t)k;
	return &P->tk[i < P->n ? i : P->n - 1];
}

static void advance(struct parser *P)
{
	if (P->pos + 1 < P->n)
		P->pos++;
}

static int fail_at(struct parser *P, const struct tpl_token *t, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail_at(struct parser *P, const struct tpl_token *t, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return ing_err_set(P->err, ING_ERR_FORMAT, "line %d, column %d: %s", t->line, t->col, msg);
}

static int nomem(struct parser *P)
{
	return ing_err_set(P->err, ING_ERR_NOMEM, "out of memory");
}

static const char *tok_desc(const struct tpl_token *t)
{
	switch (t->type) {
	case TK_EOF: return "end of template";
	case TK_DATA: return "template data";
	case TK_VAR_BEGIN: return "'{{'";
	case TK_VAR_END: return "'}}'";
	case TK_BLOCK_BEGIN: return "'{%'";
	case TK_BLOCK_END: return "'%}'";
	case TK_NAME: case TK_STRING: return t->str->s;
	case TK_INT: return "integer";
	case TK_FLOAT: return "float";
	default: return tpl_op_text(t->op);
	}
}

static int is_op(struct parser *P, int op) { return cur(P)->type == TK_OP && cur(P)->op == op; }

static int is_name(const struct tpl_token *t, const char *name)
{
	return t->type == TK_NAME && tstr_eq_c(t->str, name);
}

static int expect_op(struct parser *P, int op)
{
	if (is_op(P, op)) {
		advance(P);
		return 0;
	}
	return fail_at(P, cur(P), "expected '%s', got %s", tpl_op_text(op), tok_desc(cur(P)));
}

static int expect_type(struct parser *P, int type, const char *what)
{
	if (cur(P)->type == type) {
		advance(P);
		return 0;
	}
	return fail_at(P, cur(P), "expected %s, got %s", what, tok_desc(cur(P)));
}

static int expect_name(struct parser *P, const char *name)
{
	if (is_name(cur(P), name)) {
		advance(P);
		return 0;
	}
	return fail_at(P, cur(P), "expected '%s', got %s", name, tok_desc(cur(P)));
}

static struct tnode *node_new(struct parser *P, int kind, const struct tpl_token *at)
{
	struct tnode *n = tpl_arena_alloc(P->a, sizeof *n);
	if (!n) {
		nomem(P);
		return NULL;
	}
	n->kind = (uint8_t)kind;
	n->line = at->line;
	n->col = at->col;
	return n;
}

static int kid_depth(const struct tnode *k) { return k ? k->depth : 0; }

/* Sets n->depth from its children; fails when the tree gets too deep. */
static struct tnode *finish(struct parser *P, struct tnode *n)
{
	int d = 0;
#define D(x) do { int kd_ = kid_depth(x); if (kd_ > d) d = kd_; } while (0)
	D(n->a); D(n->b); D(n->c);
	for (int i = 0; i < n->nkids; i++) D(n->kids[i]);
	for (int i = 0; i < n->nelse; i++) D(n->else_kids[i]);
	if (n->args) {
		for (int i = 0; i < n->args->npos; i++) D(n->args->pos[i]);
		for (int i = 0; i < n->args->nkw; i++) D(n->args->kwv[i]);
		D(n->args->star); D(n->args->dstar);
	}
	if (n->params)
		for (int i = 0; i < n->params->n; i++) D(n->params->defs[i]);
#undef D
	if (d + 1 > TPL_AST_DEPTH_MAX) {
		ing_err_set(P->err, ING_ERR_FORMAT, "line %d, column %d: template nested too deeply "
			    "(more than %d levels)", n->line, n->col, TPL_AST_DEPTH_MAX);
		return NULL;
	}
	n->depth = (uint16_t)(d + 1);
	return n;
}

static int nl_push(struct parser *P, struct nlist *l, struct tnode *x)
{
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 8;
		struct tnode **v = tpl_arena_alloc(P->a, (size_t)cap * sizeof *v);
		if (!v)
			return nomem(P);
		if (l->n)
			memcpy(v, l->v, (size_t)l->n * sizeof *v);
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = x;
	return 0;
}

static int enter(struct parser *P)
{
	if (++P->nest > PARSE_NEST_MAX)
		return fail_at(P, cur(P), "template nested too deeply");
	return 0;
}

static struct tnode *leave(struct parser *P, struct tnode *n)
{
	P->nest--;
	return n;
}

static struct tnode *parse_expression(struct parser *P, int with_condexpr);
static struct tnode *parse_tuple(struct parser *P, int simplified, int with_condexpr,
				 const char *extra_end, int explicit_parens);
static struct tnode *parse_unary(struct parser *P, int with_filter);
static struct tnode *parse_postfix(struct parser *P, struct tnode *node);
static struct tnode *parse_primary(struct parser *P);

/* -------------------------------------------------------- call arguments */

static struct tcallargs *parse_call_args(struct parser *P)
{
	struct tcallargs *A = tpl_arena_alloc(P->a, sizeof *A);
	struct nlist pos = { 0 }, kwv = { 0 }, kwn = { 0 };
	if (!A || expect_op(P, OP_LPAREN)) {
		if (!A)
			nomem(P);
		return NULL;
	}
	int first = 1;
	while (!is_op(P, OP_RPAREN)) {
		if (!first) {
			if (expect_op(P, OP_COMMA))
				return NULL;
			if (is_op(P, OP_RPAREN))
				break;
		}
		first = 0;
		struct tnode *e;
		if (is_op(P, OP_MUL) || is_op(P, OP_POW)) {
			int dstar = is_op(P, OP_POW);
			advance(P);
			if (!(e = parse_expression(P, 1)))
				return NULL;
			*(dstar ? &A->dstar : &A->star) = e;
			continue;
		}
		if (cur(P)->type == TK_NAME && peek(P, 1)->type == TK_OP && peek(P, 1)->op == OP_ASSIGN) {
			struct tpl_token *name = cur(P);
			advance(P);
			advance(P);
			if (!(e = parse_expression(P, 1)) || nl_push(P, &kwv, e) ||
			    nl_push(P, &kwn, (struct tnode *)name->str))
				return NULL;
			continue;
		}
		if (kwv.n || A->star || A->dstar) {
			fail_at(P, cur(P), "positional argument follows keyword argument");
			return NULL;
		}
		if (!(e = parse_expression(P, 1)) || nl_push(P, &pos, e))
			return NULL;
	}
	advance(P);
	A->pos = pos.v;
	A->npos = pos.n;
	A->kwv = kwv.v;
	A->kwn = (struct tstr **)kwn.v;
	A->nkw = kwv.n;
	return A;
}

/* -------------------------------------------------------- filters, tests */

/* Dotted name after | or is. */
static struct tstr *parse_dotted(struct parser *P)
{
	struct tpl_token *t = cur(P);
	if (expect_type(P, TK_NAME, "a name"))
		return NULL;
	if (!is_op(P, OP_DOT))
		return t->str;
	char buf[256];
	size_t o = (size_t)snprintf(buf, sizeof buf, "%s", t->str->s);
	while (is_op(P, OP_DOT)) {
		advance(P);
		struct tpl_token *x = cur(P);
		if (expect_type(P, TK_NAME, "a name"))
			return NULL;
		o += (size_t)snprintf(buf + o, o < sizeof buf ? sizeof buf - o : 0, ".%s", x->str->s);
	}
	struct tstr *s = tpl_arena_str(P->a, buf, o < sizeof buf ? o : sizeof buf - 1);
	if (!s)
		nomem(P);
	return s;
}

/* node | f1(args) | f2 ...; node NULL for filter blocks. start_inline:
 * the first name comes without a '|'. */
static struct tnode *parse_filter(struct parser *P, struct tnode *node, int start_inline)
{
	while (is_op(P, OP_PIPE) || start_inline) {
		if (!start_inline)
			advance(P);
		start_inline = 0;
		struct tpl_token *at = cur(P);
		struct tnode *f = node_new(P, N_FILTER, at);
		if (!f || !(f->name = parse_dotted(P)))
			return NULL;
		f->a = node;
		f->filter = tpl_filter_find(f->name->s);
		if (is_op(P, OP_LPAREN) && !(f->args = parse_call_args(P)))
			return NULL;
		if (!(node = finish(P, f)))
			return NULL;
	}
	return node;
}

static struct tnode *parse_test(struct parser *P, struct tnode *node)
{
	struct tpl_token *is = cur(P);
	advance(P);
	int negated = 0;
	if (is_name(cur(P), "not")) {
		negated = 1;
		advance(P);
	}
	struct tnode *t = node_new(P, N_TEST, is);
	if (!t || !(t->name = parse_dotted(P)))
		return NULL;
	t->a = node;
	t->test = tpl_test_find(t->name->s);
	struct tpl_token *c = cur(P);
	if (is_op(P, OP_LPAREN)) {
		if (!(t->args = parse_call_args(P)))
			return NULL;
	} else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT ||
		    c->type == TK_FLOAT || (c->type == TK_OP && (c->op == OP_LBRACKET || c->op == OP_LBRACE))) &&
		   !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
		if (is_name(c, "is")) {
			fail_at(P, c, "You cannot chain multiple tests with is");
			return NULL;
		}
		struct tnode *arg = parse_primary(P);
		if (!arg || !(arg = parse_postfix(P, arg)))
			return NULL;
		struct tcallargs *A = tpl_arena_alloc(P->a, sizeof *A);
		struct tnode **v = tpl_arena_alloc(P->a, sizeof *v);
		if (!A || !v) {
			nomem(P);
			return NULL;
		}
		v[0] = arg;
		A->pos = v;
		A->npos = 1;
		t->args = A;
	}
	if (!finish(P, t))
		return NULL;
	if (!negated)
		return t;
	struct tnode *n = node_new(P, N_UNARY, is);
	if (!n)
		return NULL;
	n->op = OP_NOT;
	n->a = t;
	return finish(P, n);
}

static struct tnode *parse_filter_expr(struct parser *P, struct tnode *node)
{
	for (;;) {
		if (is_op(P, OP_PIPE))
			node = parse_filter(P, node, 0);
		else if (is_name(cur(P), "is"))
			node = parse_test(P, node);
		else if (is_op(P, OP_LPAREN)) {
			struct tnode *c = node_new(P, N_CALL, cur(P));
			if (!c || !(c->args = parse_call_args(P)))
				return NULL;
			c->a = node;
			node = finish(P, c);
		} else
			return node;
		if (!node)
			return NULL;
	}
}

/* ------------------------------------------------------- postfix, primary */

static struct tnode *parse_subscribed(struct parser *P)
{
	struct tpl_token *at = cur(P);
	struct tnode *parts[3] = { NULL, NULL, NULL };
	if (is_op(P, OP_COLON)) {
		advance(P);
	} else {
		struct tnode *e = parse_expression(P, 1);
		if (!e || !is_op(P, OP_COLON))
			return e;
		advance(P);
		parts[0] = e;
	}
	if (!is_op(P, OP_COLON) && !is_op(P, OP_RBRACKET) && !is_op(P, OP_COMMA) &&
	    !(parts[1] = parse_expression(P, 1)))
		return NULL;
	if (is_op(P, OP_COLON)) {
		advance(P);
		if (!is_op(P, OP_RBRACKET) && !is_op(P, OP_COMMA) && !(parts[2] = parse_expression(P, 1)))
			return NULL;
	}
	struct tnode *s = node_new(P, N_SLICE, at);
	struct tnode **k = tpl_arena_alloc(P->a, 3 * sizeof *k);
	if (!s || !k) {
		nomem(P);
		return NULL;
	}
	memcpy(k, parts, sizeof parts);
	s->kids = k;
	s->nkids = 3;
	return s;
}

static struct tnode *parse_subscript(struct parser *P, struct tnode *node)
{
	struct tpl_token *at = cur(P);
	if (is_op(P, OP_DOT)) {
		advance(P);
		struct tpl_token *t = cur(P);
		if (t->type == TK_NAME) {
			advance(P);
			struct tnode *n = node_new(P, N_ATTR, t);
			if (!n)
				return NULL;
			n->a = node;
			n->name = t->str;
			return finish(P, n);
		}
		if (t->type == TK_INT) {
			advance(P);
			struct tnode *n = node_new(P, N_ITEM, t), *k = node_new(P, N_CONST, t);
			if (!n || !k)
				return NULL;
			k->val = tv_int(t->i);
			n->a = node;
			n->b = finish(P, k);
			return finish(P, n);
		}
		fail_at(P, t, "expected a name or number after '.', got %s", tok_desc(t));
		return NULL;
	}
	advance(P); /* [ */
	struct nlist args = { 0 };
	while (!is_op(P, OP_RBRACKET)) {
		if (args.n && expect_op(P, OP_COMMA))
			return NULL;
		if (args.n && is_op(P, OP_RBRACKET))
			break;
		struct tnode *e = parse_subscribed(P);
		if (!e || nl_push(P, &args, e))
			return NULL;
	}
	if (expect_op(P, OP_RBRACKET))
		return NULL;
	if (args.n != 1) {
		fail_at(P, at, "%s", args.n ? "tuple subscripts are not supported" : "empty subscript");
		return NULL;
	}
	struct tnode *arg = args.v[0];
	if (arg->kind == N_SLICE) {
		arg->a = node;
		return finish(P, arg);
	}
	struct tnode *n = node_new(P, N_ITEM, at);
	if (!n)
		return NULL;
	n->a = node;
	n->b = arg;
	return finish(P, n);
}

static struct tnode *parse_postfix(struct parser *P, struct tnode *node)
{
	while (node) {
		if (is_op(P, OP_DOT) || is_op(P, OP_LBRACKET)) {
			node = parse_subscript(P, node);
		} else if (is_op(P, OP_LPAREN)) {
			struct tnode *c = node_new(P, N_CALL, cur(P));
			if (!c || !(c->args = parse_call_args(P)))
				return NULL;
			c->a = node;
			node = finish(P, c);
		} else {
			break;
		}
	}
	return node;
}

static struct tnode *parse_list_or_dict(struct parser *P, int dict)
{
	struct tpl_token *at = cur(P);
	advance(P);
	int close = dict ? OP_RBRACE : OP_RBRACKET;
	struct nlist items = { 0 };
	while (!is_op(P, close)) {
		if (items.n && expect_op(P, OP_COMMA))
			return NULL;
		if (is_op(P, close))
			break;
		struct tnode *k = parse_expression(P, 1);
		if (!k || nl_push(P, &items, k))
			return NULL;
		if (dict) {
			struct tnode *v;
			if (expect_op(P, OP_COLON) || !(v = parse_expression(P, 1)) ||
			    nl_push(P, &items, v))
				return NULL;
		}
	}
	advance(P);
	struct tnode *n = node_new(P, dict ? N_DICT : N_LIST, at);
	if (!n)
		return NULL;
	n->kids = items.v;
	n->nkids = items.n;
	return finish(P, n);
}

static struct tnode *parse_name_or_const(struct parser *P, struct tpl_token *t)
{
	struct tnode *n = node_new(P, N_CONST, t);
	if (!n)
		return NULL;
	const char *s = t->str->s;
	if (!strcmp(s, "true") || !strcmp(s, "True"))
		n->val = tv_bool(1);
	else if (!strcmp(s, "false") || !strcmp(s, "False"))
		n->val = tv_bool(0);
	else if (!strcmp(s, "none") || !strcmp(s, "None"))
		n->val = tv_none();
	else {
		n->kind = N_NAME;
		n->name = t->str;
		if (P->macro) {
			if (!strcmp(s, "caller"))
				P->macro->flags |= TN_USES_CALLER;
			else if (!strcmp(s, "varargs"))
				P->macro->flags |= TN_USES_VARARGS;
			else if (!strcmp(s, "kwargs"))
				P->macro->flags |= TN_USES_KWARGS;
		}
	}
	return finish(P, n);
}

static struct tnode *parse_primary(struct parser *P)
{
	struct tpl_token *t = cur(P);
	if (enter(P))
		return NULL;
	struct tnode *n = NULL;
	switch (t->type) {
	case TK_NAME:
		advance(P);
		n = parse_name_or_const(P, t);
		break;
	case TK_STRING: {
		advance(P);
		struct tstr *s = t->str;
		while (cur(P)->type == TK_STRING) { /* "a" "b" concatenate */
			struct tstr *b = cur(P)->str;
			char *tmp = ing_malloc(s->len + b->len + 1);
			if (!tmp) {
				nomem(P);
				return NULL;
			}
			memcpy(tmp, s->s, s->len);
			memcpy(tmp + s->len, b->s, b->len);
			s = tpl_arena_str(P->a, tmp, s->len + b->len);
			ing_free(tmp);
			if (!s) {
				nomem(P);
				return NULL;
			}
			advance(P);
		}
		if ((n = node_new(P, N_CONST, t))) {
			n->val = tv_str_v(s);
			n = finish(P, n);
		}
		break;
	}
	case TK_INT: case TK_FLOAT:
		advance(P);
		if ((n = node_new(P, N_CONST, t))) {
			n->val = t->type == TK_INT ? tv_int(t->i) : tv_float(t->f);
			n = finish(P, n);
		}
		break;
	case TK_OP:
		if (t->op == OP_LPAREN) {
			advance(P);
			n = parse_tuple(P, 0, 1, NULL, 1);
			if (n && expect_op(P, OP_RPAREN))
				n = NULL;
			break;
		}
		if (t->op == OP_LBRACKET || t->op == OP_LBRACE) {
			n = parse_list_or_dict(P, t->op == OP_LBRACE);
			break;
		}
		/* fallthrough */
	default:
		fail_at(P, t, "unexpected %s", tok_desc(t));
	}
	return leave(P, n);
}

/* --------------------------------------------------------- operators */

static struct tnode *binary(struct parser *P, int kind, int op, const struct tpl_token *at,
			    struct tnode *a, struct tnode *b)
{
	if (!a || !b)
		return NULL;
	struct tnode *n = node_new(P, kind, at);
	if (!n)
		return NULL;
	n->op = (uint8_t)op;
	n->a = a;
	n->b = b;
	return finish(P, n);
}

static struct tnode *parse_unary(struct parser *P, int with_filter)
{
	struct tpl_token *t = cur(P);
	if (enter(P))
		return NULL;
	struct tnode *node;
	if (is_op(P, OP_SUB) || is_op(P, OP_ADD)) {
		advance(P);
		struct tnode *x = parse_unary(P, 0);
		node = x ? node_new(P, N_UNARY, t) : NULL;
		if (node) {
			node->op = t->op == OP_SUB ? OP_NEG : OP_POS;
			node->a = x;
			node = finish(P, node);
		}
	} else {
		node = parse_primary(P);
	}
	node = parse_postfix(P, node);
	if (node && with_filter)
		node = parse_filter_expr(P, node);
	return leave(P, node);
}

static struct tnode *parse_pow(struct parser *P)
{
	struct tnode *left = parse_unary(P, 1);
	while (left && is_op(P, OP_POW)) {
		struct tpl_token *at = cur(P);
		advance(P);
		left = binary(P, N_BINARY, OP_POW, at, left, parse_unary(P, 1));
	}
	return left;
}

static struct tnode *parse_math2(struct parser *P)
{
	struct tnode *left = parse_pow(P);
	while (left && (is_op(P, OP_MUL) || is_op(P, OP_DIV) || is_op(P, OP_FLOORDIV) ||
			is_op(P, OP_MOD))) {
		struct tpl_token *at = cur(P);
		advance(P);
		left = binary(P, N_BINARY, at->op, at, left, parse_pow(P));
	}
	return left;
}

static struct tnode *parse_concat(struct parser *P)
{
	struct tpl_token *at = cur(P);
	struct tnode *first = parse_math2(P);
	if (!first || !is_op(P, OP_TILDE))
		return first;
	struct nlist parts = { 0 };
	if (nl_push(P, &parts, first))
		return NULL;
	while (is_op(P, OP_TILDE)) {
		advance(P);
		struct tnode *e = parse_math2(P);
		if (!e || nl_push(P, &parts, e))
			return NULL;
	}
	struct tnode *n = node_new(P, N_CONCAT, at);
	if (!n)
		return NULL;
	n->kids = parts.v;
	n->nkids = parts.n;
	return finish(P, n);
}

static struct tnode *parse_math1(struct parser *P)
{
	struct tnode *left = parse_concat(P);
	while (left && (is_op(P, OP_ADD) || is_op(P, OP_SUB))) {
		struct tpl_token *at = cur(P);
		advance(P);
		left = binary(P, N_BINARY, at->op, at, left, parse_concat(P));
	}
	return left;
}

static int compare_op(struct parser *P, int *op)
{
	struct tpl_token *t = cur(P);
	if (t->type == TK_OP && t->op >= OP_EQ && t->op <= OP_GE) {
		*op = t->op;
		advance(P);
		return 1;
	}
	if (is_name(t, "in")) {
		*op = OP_IN;
		advance(P);
		return 1;
	}
	if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
		*op = OP_NOTIN;
		advance(P);
		advance(P);
		return 1;
	}
	return 0;
}

static struct tnode *parse_compare(struct parser *P)
{
	struct tpl_token *at = cur(P);
	struct tnode *expr = parse_math1(P);
	if (!expr)
		return NULL;
	struct nlist operands = { 0 };
	uint8_t ops[64];
	int op;
	while (compare_op(P, &op)) {
		if (operands.n >= (int)sizeof ops) {
			fail_at(P, cur(P), "too many chained comparisons");
			return NULL;
		}
		ops[operands.n] = (uint8_t)op;
		struct tnode *e = parse_math1(P);
		if (!e || nl_push(P, &operands, e))
			return NULL;
	}
	if (!operands.n)
		return expr;
	struct tnode *n = node_new(P, N_COMPARE, at);
	uint8_t *o = tpl_arena_alloc(P->a, (size_t)operands.n);
	if (!n || !o) {
		nomem(P);
		return NULL;
	}
	memcpy(o, ops, (size_t)operands.n);
	n->a = expr;
	n->kids = operands.v;
	n->nkids = operands.n;
	n->ops = o;
	return finish(P, n);
}

static struct tnode *parse_not(struct parser *P)
{
	struct tpl_token *t = cur(P);
	if (!is_name(t, "not"))
		return parse_compare(P);
	if (enter(P))
		return NULL;
	advance(P);
	struct tnode *x = parse_not(P);
	struct tnode *n = x ? node_new(P, N_UNARY, t) : NULL;
	if (n) {
		n->op = OP_NOT;
		n->a = x;
		n = finish(P, n);
	}
	return leave(P, n);
}

static struct tnode *parse_and(struct parser *P)
{
	struct tnode *left = parse_not(P);
	while (left && is_name(cur(P), "and")) {
		struct tpl_token *at = cur(P);
		advance(P);
		left = binary(P, N_AND, 0, at, left, parse_not(P));
	}
	return left;
}

static struct tnode *parse_or(struct parser *P)
{
	struct tnode *left = parse_and(P);
	while (left && is_name(cur(P), "or")) {
		struct tpl_token *at = cur(P);
		advance(P);
		left = binary(P, N_OR, 0, at, left, parse_and(P));
	}
	return left;
}

static struct tnode *parse_condexpr(struct parser *P)
{
	struct tnode *expr = parse_or(P);
	while (expr && is_name(cur(P), "if")) {
		struct tpl_token *at = cur(P);
		advance(P);
		struct tnode *n = node_new(P, N_COND, at);
		if (!n || !(n->b = parse_or(P)))
			return NULL;
		n->a = expr;
		if (is_name(cur(P), "else")) {
			advance(P);
			if (enter(P) || !(n->c = parse_condexpr(P)))
				return NULL;
			P->nest--;
		}
		expr = finish(P, n);
	}
	return expr;
}

static struct tnode *parse_expression(struct parser *P, int with_condexpr)
{
	if (enter(P))
		return NULL;
	return leave(P, with_condexpr ? parse_condexpr(P) : parse_or(P));
}

static int tuple_end(struct parser *P, const char *extra_end)
{
	struct tpl_token *t = cur(P);
	if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || t->type == TK_EOF ||
	    (t->type == TK_OP && t->op == OP_RPAREN))
		return 1;
	return extra_end && is_name(t, extra_end);
}

/* Comma-separated expressions; one without a comma is returned as is.
 * simplified: only primaries (assignment targets). */
static struct tnode *parse_tuple(struct parser *P, int simplified, int with_condexpr,
				 const char *extra_end, int explicit_parens)
{
	struct tpl_token *at = cur(P);
	struct nlist args = { 0 };
	int is_tuple = 0;
	for (;;) {
		if (args.n && expect_op(P, OP_COMMA))
			return NULL;
		if (tuple_end(P, extra_end))
			break;
		struct tnode *e = simplified ? parse_primary(P) : parse_expression(P, with_condexpr);
		if (!e || nl_push(P, &args, e))
			return NULL;
		if (is_op(P, OP_COMMA))
			is_tuple = 1;
		else
			break;
	}
	if (!is_tuple) {
		if (args.n)
			return args.v[0];
		if (!explicit_parens) {
			fail_at(P, cur(P), "expected an expression, got %s", tok_desc(cur(P)));
			return NULL;
		}
	}
	struct tnode *n = node_new(P, N_TUPLE, at);
	if (!n)
		return NULL;
	n->kids = args.v;
	n->nkids = args.n;
	return finish(P, n);
}

/* ------------------------------------------------------------ statements */

static struct tnode *subparse(struct parser *P, const char *const *ends);

static int at_end_tag(struct parser *P, const char *const *ends)
{
	for (int i = 0; ends && ends[i]; i++)
		if (is_name(cur(P), ends[i]))
			return 1;
	return 0;
}

/* The body of a statement: "%}" then statements up to one of ends. With
 * drop_needle the end tag's name is consumed (its %} is left). */
static struct tnode *parse_statements(struct parser *P, const char *const *ends, int drop_needle)
{
	if (expect_type(P, TK_BLOCK_END, "'%}'"))
		return NULL;
	struct tnode *body = subparse(P, ends);
	if (body && drop_needle)
		advance(P);
	return body;
}

static int is_assignable(const struct tnode *t)
{
	if (t->kind == N_NAME)
		return 1;
	if (t->kind != N_TUPLE)
		return 0;
	for (int i = 0; i < t->nkids; i++)
		if (!is_assignable(t->kids[i]))
			return 0;
	return 1;
}

static struct tnode *parse_assign_target(struct parser *P, const char *extra_end, int with_ns)
{
	struct tpl_token *t = cur(P);
	if (with_ns && t->type == TK_NAME && peek(P, 1)->type == TK_OP && peek(P, 1)->op == OP_DOT) {
		advance(P);
		advance(P);
		struct tpl_token *attr = cur(P);
		if (expect_type(P, TK_NAME, "an attribute name"))
			return NULL;
		struct tnode *ns = node_new(P, N_NAME, t), *n = node_new(P, N_ATTR, attr);
		if (!ns || !n)
			return NULL;
		ns->name = t->str;
		n->a = finish(P, ns);
		n->name = attr->str;
		return finish(P, n);
	}
	struct tnode *target = parse_tuple(P, 1, 0, extra_end, 0);
	if (target && !is_assignable(target)) {
		fail_at(P, t, "can't assign to %s", tok_desc(t));
		return NULL;
	}
	return target;
}

static struct tnode *parse_if(struct parser *P)
{
	static const char *const ends[] = { "elif", "else", "endif", NULL };
	static const char *const endif[] = { "endif", NULL };
	struct tnode *result = node_new(P, S_IF, cur(P)), *node = result;
	advance(P);
	if (!node)
		return NULL;
	struct tnode *elifs[256];
	int nelif = 0;
	for (;;) {
		struct tnode *body;
		if (!(node->a = parse_tuple(P, 0, 0, NULL, 0)) || !(body = parse_statements(P, ends, 0)))
			return NULL;
		node->kids = body->kids;
		node->nkids = body->nkids;
		struct tpl_token *t = cur(P);
		advance(P);
		if (is_name(t, "elif")) {
			if (nelif == 256) {
				fail_at(P, t, "too many elif branches");
				return NULL;
			}
			elifs[nelif++] = node;
			struct tnode *next = node_new(P, S_IF, t);
			struct tnode **slot = tpl_arena_alloc(P->a, sizeof *slot);
			if (!next || !slot)
				return NULL;
			slot[0] = next;
			node->else_kids = slot;
			node->nelse = 1;
			node = next;
			continue;
		}
		if (is_name(t, "else")) {
			struct tnode *eb = parse_statements(P, endif, 1);
			if (!eb)
				return NULL;
			node->else_kids = eb->kids;
			node->nelse = eb->nkids;
		}
		break;
	}
	/* Depths bottom-up along the elif chain. */
	if (!finish(P, node))
		return NULL;
	while (nelif--)
		if (!finish(P, elifs[nelif]))
			return NULL;
	return result;
}

static struct tnode *parse_for(struct parser *P)
{
	static const char *const ends[] = { "endfor", "else", NULL };
	static const char *const endfor[] = { "endfor", NULL };
	struct tnode *n = node_new(P, S_FOR, cur(P));
	advance(P);
	if (!n || !(n->b = parse_assign_target(P, "in", 0)) || expect_name(P, "in") ||
	    !(n->a = parse_tuple(P, 0, 0, "recursive", 0)))
		return NULL;
	if (is_name(cur(P), "if")) {
		advance(P);
		if (!(n->c = parse_expression(P, 1)))
			return NULL;
	}
	if (is_name(cur(P), "recursive")) {
		advance(P);
		n->flags |= TN_RECURSIVE;
	}
	P->loops++;
	struct tnode *body = parse_statements(P, ends, 0);
	P->loops--;
	if (!body)
		return NULL;
	n->kids = body->kids;
	n->nkids = body->nkids;
	struct tpl_token *t = cur(P);
	advance(P);
	if (is_name(t, "else")) {
		struct tnode *eb = parse_statements(P, endfor, 1);
		if (!eb)
			return NULL;
		n->else_kids = eb->kids;
		n->nelse = eb->nkids;
	}
	return finish(P, n);
}

static struct tnode *parse_set(struct parser *P)
{
	static const char *const ends[] = { "endset", NULL };
	struct tnode *n = node_new(P, S_SET, cur(P));
	advance(P);
	if (!n || !(n->b = parse_assign_target(P, NULL, 1)))
		return NULL;
	if (is_op(P, OP_ASSIGN)) {
		advance(P);
		if (!(n->a = parse_tuple(P, 0, 1, NULL, 0)))
			return NULL;
		return finish(P, n);
	}
	n->kind = S_SET_BLOCK;
	if (is_op(P, OP_PIPE) && !(n->c = parse_filter(P, NULL, 0)))
		return NULL;
	struct tnode *body = parse_statements(P, ends, 1);
	if (!body)
		return NULL;
	n->kids = body->kids;
	n->nkids = body->nkids;
	return finish(P, n);
}

static struct tparams *parse_signature(struct parser *P)
{
	struct tparams *p = tpl_arena_alloc(P->a, sizeof *p);
	struct nlist names = { 0 }, defs = { 0 };
	if (!p) {
		nomem(P);
		return NULL;
	}
	if (expect_op(P, OP_LPAREN))
		return NULL;
	int have_default = 0;
	while (!is_op(P, OP_RPAREN)) {
		if (names.n && expect_op(P, OP_COMMA))
			return NULL;
		struct tpl_token *t = cur(P);
		if (expect_type(P, TK_NAME, "a parameter name"))
			return NULL;
		struct tnode *def = NULL;
		if (is_op(P, OP_ASSIGN)) {
			advance(P);
			if (!(def = parse_expression(P, 1)))
				return NULL;
			have_default = 1;
		} else if (have_default) {
			fail_at(P, t, "non-default argument follows default argument");
			return NULL;
		}
		if (nl_push(P, &names, (struct tnode *)t->str) || nl_push(P, &defs, def))
			return NULL;
	}
	advance(P);
	p->names = (struct tstr **)names.v;
	p->defs = defs.v;
	p->n = names.n;
	return p;
}

static struct tnode *parse_macro(struct parser *P)
{
	static const char *const ends[] = { "endmacro", NULL };
	struct tnode *n = node_new(P, S_MACRO, cur(P));
	advance(P);
	struct tpl_token *name = cur(P);
	if (!n || expect_type(P, TK_NAME, "a macro name") || !(n->params = parse_signature(P)))
		return NULL;
	n->name = name->str;
	struct tnode *outer = P->macro;
	int loops = P->loops;
	P->macro = n;
	P->loops = 0;
	struct tnode *body = parse_statements(P, ends, 1);
	P->macro = outer;
	P->loops = loops;
	if (!body)
		return NULL;
	n->kids = body->kids;
	n->nkids = body->nkids;
	return finish(P, n);
}

static struct tnode *parse_call_block(struct parser *P)
{
	static const char *const ends[] = { "endcall", NULL };
	struct tpl_token *at = cur(P);
	struct tnode *n = node_new(P, S_CALL_BLOCK, at);
	advance(P);
	if (!n)
		return NULL;
	if (is_op(P, OP_LPAREN)) {
		if (!(n->params = parse_signature(P)))
			return NULL;
	} else if (!(n->params = tpl_arena_alloc(P->a, sizeof *n->params))) {
		nomem(P);
		return NULL;
	}
	if (!(n->a = parse_expression(P, 1)))
		return NULL;
	if (n->a->kind != N_CALL) {
		fail_at(P, at, "expected call");
		return NULL;
	}
	struct tnode *outer = P->macro;
	int loops = P->loops;
	P->macro = n;
	P->loops = 0;
	struct tnode *body = parse_statements(P, ends, 1);
	P->macro = outer;
	P->loops = loops;
	if (!body)
		return NULL;
	n->kids = body->kids;
	n->nkids = body->nkids;
	return finish(P, n);
}

static struct tnode *parse_filter_block(struct parser *P)
{
	static const char *const ends[] = { "endfilter", NULL };
	struct tnode *n = node_new(P, S_FILTER_BLOCK, cur(P));
	advance(P);
	if (!n || !(n->c = parse_filter(P, NULL, 1)))
		return NULL;
	struct tnode *body = parse_statements(P, ends, 1);
	if (!body)
		return NULL;
	n->kids = body->kids;
	n->nkids = body->nkids;
	return finish(P, n);
}

static struct tnode *parse_with(struct parser *P)
{
	static const char *const ends[] = { "endwith", NULL };
	struct tnode *n = node_new(P, S_WITH, cur(P));
	struct tparams *p = tpl_arena_alloc(P->a, sizeof *p);
	struct nlist names = { 0 }, vals = { 0 };
	advance(P);
	if (!n || !p) {
		nomem(P);
		return NULL;
	}
	while (cur(P)->type != TK_BLOCK_END) {
		if (names.n && expect_op(P, OP_COMMA))
			return NULL;
		struct tpl_token *t = cur(P);
		struct tnode *v;
		if (expect_type(P, TK_NAME, "a name") || expect_op(P, OP_ASSIGN) ||
		    !(v = parse_expression(P, 1)) || nl_push(P, &names, (struct tnode *)t->str) ||
		    nl_push(P, &vals, v))
			return NULL;
	}
	p->names = (struct tstr **)names.v;
	p->defs = vals.v;
	p->n = names.n;
	n->params = p;
	struct tnode *body = parse_statements(P, ends, 1);
	if (!body)
		return NULL;
	n->kids = body->kids;
	n->nkids = body->nkids;
	return finish(P, n);
}

/* {% block name %} and {% generation %}: the body, rendered in place. */
static struct tnode *parse_block(struct parser *P, const char *end, int named)
{
	const char *ends[] = { end, NULL };
	struct tnode *n = node_new(P, S_BLOCK, cur(P));
	advance(P);
	if (!n)
		return NULL;
	if (named) {
		n->name = cur(P)->str;
		if (expect_type(P, TK_NAME, "a block name"))
			return NULL;
		if (is_name(cur(P), "scoped") || is_name(cur(P), "required"))
			advance(P);
	}
	struct tnode *body = parse_statements(P, ends, 1);
	if (!body)
		return NULL;
	if (named && cur(P)->type == TK_NAME)
		advance(P); /* {% endblock name %} */
	n->kids = body->kids;
	n->nkids = body->nkids;
	return finish(P, n);
}

static struct tnode *parse_statement(struct parser *P)
{
	struct tpl_token *t = cur(P);
	if (t->type != TK_NAME) {
		fail_at(P, t, "tag name expected, got %s", tok_desc(t));
		return NULL;
	}
	if (enter(P))
		return NULL;
	const char *s = t->str->s;
	struct tnode *n = NULL;
	if (!strcmp(s, "if"))
		n = parse_if(P);
	else if (!strcmp(s, "for"))
		n = parse_for(P);
	else if (!strcmp(s, "set"))
		n = parse_set(P);
	else if (!strcmp(s, "macro"))
		n = parse_macro(P);
	else if (!strcmp(s, "call"))
		n = parse_call_block(P);
	else if (!strcmp(s, "filter"))
		n = parse_filter_block(P);
	else if (!strcmp(s, "with"))
		n = parse_with(P);
	else if (!strcmp(s, "block"))
		n = parse_block(P, "endblock", 1);
	else if (!strcmp(s, "generation"))
		n = parse_block(P, "endgeneration", 0);
	else if (!strcmp(s, "break") || !strcmp(s, "continue")) {
		if (!P->loops) {
			fail_at(P, t, "'%s' outside of a loop", s);
		} else if ((n = node_new(P, s[0] == 'b' ? S_BREAK : S_CONTINUE, t))) {
			advance(P);
			n = finish(P, n);
		}
	} else if (!strcmp(s, "include") || !strcmp(s, "import") || !strcmp(s, "from") ||
		   !strcmp(s, "extends")) {
		fail_at(P, t, "'%s' is not supported: chat templates cannot load other templates", s);
	} else {
		fail_at(P, t, "Encountered unknown tag '%s'", s);
	}
	return leave(P, n);
}

static struct tnode *subparse(struct parser *P, const char *const *ends)
{
	struct tnode *body = node_new(P, S_BODY, cur(P));
	struct nlist kids = { 0 };
	if (!body || enter(P))
		return NULL;
	for (;;) {
		struct tpl_token *t = cur(P);
		struct tnode *n = NULL;
		if (t->type == TK_DATA) {
			if ((n = node_new(P, S_DATA, t))) {
				n->val = tv_str_v(t->str);
				n = finish(P, n);
			}
			advance(P);
		} else if (t->type == TK_VAR_BEGIN) {
			advance(P);
			if ((n = node_new(P, S_OUTPUT, t)) && (n->a = parse_tuple(P, 0, 1, NULL, 0)) &&
			    !expect_type(P, TK_VAR_END, "'}}'"))
				n = finish(P, n);
			else
				n = NULL;
		} else if (t->type == TK_BLOCK_BEGIN) {
			advance(P);
			if (ends && at_end_tag(P, ends))
				break;
			if (!(n = parse_statement(P)) || expect_type(P, TK_BLOCK_END, "'%}'"))
				n = NULL;
		} else if (t->type == TK_EOF) {
			if (ends) {
				char want[120] = "";
				for (int i = 0; ends[i]; i++)
					snprintf(want + strlen(want), sizeof want - strlen(want), "%s'%s'",
						 i ? " or " : "", ends[i]);
				fail_at(P, t, "unexpected end of template, expected %s", want);
				return NULL;
			}
			break;
		} else {
			fail_at(P, t, "unexpected %s", tok_desc(t));
			return NULL;
		}
		if (!n || nl_push(P, &kids, n))
			return NULL;
	}
	body->kids = kids.v;
	body->nkids = kids.n;
	P->nest--;
	return finish(P, body);
}

int tpl_parse(struct template *t, struct tpl_token *toks, size_t n, ing_err *err)
{
	struct parser P = { .tk = toks, .n = n, .a = &t->arena, .err = err };
	t->root = subparse(&P, NULL);
	if (!t->root)
		return err->code ? err->code : ING_ERR_FORMAT;
	return 0;
}

/* ------------------------------------------------------------ public */

void template_free(struct template *t)
{
	if (!t)
		return;
	tpl_arena_free(&t->arena);
	ing_free(t);
}

int template_parse(const char *src, size_t len, struct template **out, ing_err *err)
{
	struct tpl_token *toks = NULL;
	size_t n = 0;
	if (!out)
		return ing_err_set(err, ING_ERR_INVALID, "template_parse: no output pointer");
	*out = NULL;
	if (!src)
		return ing_err_set(err, ING_ERR_INVALID, "template_parse: no template text");
	ing_err_clear(err);
	struct template *t = ing_calloc(1, sizeof *t);
	if (!t)
		return ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	int rc = tpl_lex(src, len, &t->arena, &toks, &n, err);
	if (!rc)
		rc = tpl_parse(t, toks, n, err);
	ing_free(toks);
	if (!rc && (!(t->n_loop = tpl_arena_str(&t->arena, "loop", 4)) ||
		    !(t->n_caller = tpl_arena_str(&t->arena, "caller", 6)) ||
		    !(t->n_varargs = tpl_arena_str(&t->arena, "varargs", 7)) ||
		    !(t->n_kwargs = tpl_arena_str(&t->arena, "kwargs", 6))))
		rc = ing_err_set(err, ING_ERR_NOMEM, "out of memory");
	if (rc) {
		template_free(t);
		return rc;
	}
	*out = t;
	return ING_OK;
}
