/* template_int.h — internals shared by the template_*.c files.
 *
 * Pipeline: template_lex.c turns the source into tokens (applying
 * trim_blocks / lstrip_blocks / {%- -%}), template_parse.c builds the syntax
 * tree (struct tnode, allocated in the template's arena and immutable after
 * parsing), template_exec.c (statements, scopes, render entry points) and
 * template_eval.c (expressions) walk it with a per-render state (struct
 * tpl_run) over the value type below. Around them: template_value.c (the
 * values), template_str.c (Python string semantics), template_json.c (JSON
 * in, tojson out), template_filters.c, template_tests.c ("is" tests) and
 * template_builtins.c (globals, methods, loop object, clock).
 *
 * Values (struct tv) are small tagged unions passed by value. Strings,
 * lists, dicts, namespaces, macros, bound methods, loop objects and scopes
 * are reference-counted heap objects (struct tobj header). Ownership rule:
 * a function that produces a value through an out-parameter hands over one
 * reference; arguments are borrowed. Objects made by the parser (string
 * constants, names) are immortal (refs < 0) so that concurrent renders
 * never write to the shared tree.
 *
 * The only mutable containers are namespaces and scopes, so only they can
 * close reference cycles: scopes are emptied when their block ends and
 * every namespace is emptied when the render ends (tpl_run.namespaces). */
#ifndef INGOT_TEMPLATE_INT_H
#define INGOT_TEMPLATE_INT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "err.h"
#include "template.h"

/* ---------------------------------------------------------------- values */

enum tv_kind {
	TV_UNDEF,  /* jinja2 Undefined; u = node that produced it (or NULL) */
	TV_NONE,
	TV_BOOL,   /* i = 0 or 1 */
	TV_INT,    /* i */
	TV_FLOAT,  /* f */
	TV_STR,    /* s */
	TV_LIST,   /* l: list, tuple or generator (tlist.flags) */
	TV_DICT,   /* d */
	TV_NS,     /* d: namespace() attributes */
	TV_MACRO,  /* m: macro or {% call %} caller */
	TV_FUNC,   /* fn: global function (range, namespace, ...) */
	TV_METHOD, /* mt: method bound to a value ("a b".split) */
	TV_LOOP,   /* lp: the loop variable of a for loop */
	TV_CYCLER, /* cy: cycler(...) */
	TV_JOINER, /* cy: joiner(sep) */
};

enum tobj_type { TO_STR, TO_LIST, TO_DICT, TO_MACRO, TO_METHOD, TO_LOOP, TO_SCOPE, TO_CYCLER };

#define TOBJ_IMMORTAL (-1)
/* Deepest nesting of lists/dicts a render may build (JSON input nests at
 * most 1000 deep in cJSON). Recursive value operations stop there too. */
#define TPL_VALUE_DEPTH_MAX 1100

struct tobj {
	int32_t refs;   /* < 0: immortal (owned by a template) */
	uint8_t type;   /* enum tobj_type */
	uint8_t flags;
	uint16_t depth; /* 1 + deepest contained container (lists, dicts) */
};

struct tnode;
struct tpl_run;
struct tpl_args;
struct tv;

/* A global function; call() gets borrowed arguments and returns an owned
 * value in *out, or -1 with the error recorded on R. */
struct tpl_func {
	const char *name;
	int (*call)(struct tpl_run *R, struct tpl_args *a, struct tv *out);
};

struct tv {
	uint8_t kind; /* enum tv_kind */
	uint8_t aux;  /* TV_UNDEF: kind of the object that lacked the
			 attribute/item (TV_UNDEF when a plain name) */
	union {
		int64_t i;
		double f;
		struct tobj *o;
		struct tstr *s;
		struct tlist *l;
		struct tdict *d;
		struct tmacro *m;
		struct tmethod *mt;
		struct tloop *lp;
		struct tcycler *cy;
		const struct tpl_func *fn;
		const struct tnode *u;
	};
};

/* Immutable UTF-8 string, NUL-terminated (may also contain NULs).
 * h.flags & TS_SAFE marks jinja2's Markup (made by |safe and |escape):
 * adding a plain string to it escapes that string first. */
enum { TS_SAFE = 1 };
struct tstr {
	struct tobj h;
	uint32_t hash;  /* 0 = not computed yet */
	int32_t ncp;    /* code points, -1 = not counted yet */
	size_t len;
	char s[];
};

enum { TL_TUPLE = 1, TL_GEN = 2 };

/* list / tuple / generator (flags): v[0..n). Lists are never changed once
 * handed out (the environment is immutable). */
struct tlist {
	struct tobj h;
	size_t n, cap;
	struct tv *v;
};

struct tdent {
	struct tv k, v;
	uint32_t hash;
};

/* Ordered dict: e[0..n) in insertion order, hash index idx (entry + 1, 0
 * = empty slot) once n > 8. */
struct tdict {
	struct tobj h;
	size_t n, cap;
	struct tdent *e;
	uint32_t *idx;
	size_t idx_cap; /* power of two or 0 */
};

struct tscope {
	struct tobj h;
	struct tscope *parent; /* owned reference */
	struct tdict *vars;    /* NULL until the first assignment */
};

/* A macro, or the caller of a {% call %} block (def->kind tells which). */
struct tmacro {
	struct tobj h;
	const struct tnode *def;
	struct tscope *scope; /* scope it was defined in (owned) */
};

struct tmethod {
	struct tobj h;
	struct tv self; /* owned */
	int id;         /* enum tpl_method */
	const char *name;
};

struct tloop {
	struct tobj h;
	struct tlist *items; /* owned */
	int64_t i;           /* index0 */
	int64_t depth0;
	struct tv changed;   /* last loop.changed() arguments (owned list) */
	const struct tnode *node; /* the for statement (recursive loops) */
	struct tscope *outer;     /* scope the loop runs in (owned) */
};

/* cycler(items...) and joiner(sep): items / sep plus a position. */
struct tcycler {
	struct tobj h;
	struct tlist *items; /* cycler items, or [sep] for a joiner */
	int64_t pos;
};

/* Call arguments (borrowed values): positional then keyword. */
struct tpl_args {
	struct tv *pos;
	int npos;
	struct tstr **kwn;
	struct tv *kwv;
	int nkw;
};

static inline struct tv tv_undef(const struct tnode *u) { struct tv v = { .kind = TV_UNDEF }; v.u = u; return v; }
static inline struct tv tv_none(void) { struct tv v = { .kind = TV_NONE }; return v; }
static inline struct tv tv_bool(int b) { struct tv v = { .kind = TV_BOOL }; v.i = !!b; return v; }
static inline struct tv tv_int(int64_t i) { struct tv v = { .kind = TV_INT }; v.i = i; return v; }
static inline struct tv tv_float(double f) { struct tv v = { .kind = TV_FLOAT }; v.f = f; return v; }
static inline int tv_is_heap(struct tv v) { return v.kind >= TV_STR && v.kind != TV_FUNC; }
static inline int tv_is_num(struct tv v) { return v.kind == TV_BOOL || v.kind == TV_INT || v.kind == TV_FLOAT; }
static inline int tv_is_seq(struct tv v) { return v.kind == TV_LIST && !(v.l->h.flags & TL_GEN); }

/* template_value.c: reference counting, containers, comparisons. */
void tv_retain(struct tv v);
void tv_release(struct tv v);
void tv_release_n(struct tv *v, size_t n);
void tobj_release(struct tobj *o);
struct tv tv_str_v(struct tstr *s);
struct tv tv_list_v(struct tlist *l);
struct tv tv_dict_v(struct tdict *d);

/* New string of n bytes copied from s (left for the caller to fill when s
 * is NULL); charged to the budget. */
int tpl_str_new(struct tpl_run *R, const char *s, size_t n, struct tstr **out);
int tpl_str_v(struct tpl_run *R, const char *s, size_t n, struct tv *out);
int tpl_str_cat(struct tpl_run *R, const struct tstr *a, const struct tstr *b, struct tv *out);
uint32_t tstr_hash(struct tstr *s);
static inline int tv_is_safe(struct tv v) { return v.kind == TV_STR && (v.s->h.flags & TS_SAFE); }
/* Marks the string *v as Markup when safe is set (copying it when shared). */
int tpl_keep_safe(struct tpl_run *R, int safe, struct tv *v);
/* markupsafe.escape(): Markup of str(v) with & < > " ' escaped; Markup
 * passes unchanged unless force. */
int tpl_html_escape(struct tpl_run *R, struct tv v, int force, struct tv *out);
int tstr_eq_c(const struct tstr *s, const char *c);

int tpl_list_new(struct tpl_run *R, size_t cap, struct tlist **out);
/* Appends v, taking over its reference (released on failure). */
int tpl_list_push(struct tpl_run *R, struct tlist *l, struct tv v);

int tpl_dict_new(struct tpl_run *R, struct tdict **out);
/* Sets k = v taking over both references (released on failure); keeps the
 * position of an existing key. Fails on unhashable keys. */
int tpl_dict_set(struct tpl_run *R, struct tdict *d, struct tv k, struct tv v);
/* Borrowed value for key k, or NULL. */
struct tv *tpl_dict_get(struct tdict *d, struct tv k);
struct tv *tpl_dict_get_str(struct tdict *d, struct tstr *k);
struct tv *tpl_dict_get_c(struct tdict *d, const char *k);
void tpl_dict_clear(struct tdict *d);

int tv_truthy(struct tv v);
/* Python ==; recursive, bounded by the value depth. */
int tv_eq(struct tv a, struct tv b);
/* Python <, ==, > as -1/0/1 into *cmp; -1 with a TypeError on R when the
 * types do not order. */
int tpl_compare(struct tpl_run *R, struct tv a, struct tv b, const char *op, int *cmp);
const char *tv_type_name(struct tv v);
int tv_hashable(struct tv v);
uint32_t tv_hash(struct tv v);

/* ------------------------------------------------------ output buffers */

struct tbuf {
	char *p;
	size_t n, cap;
};

int tpl_buf_put(struct tpl_run *R, struct tbuf *b, const char *s, size_t n);
int tpl_buf_putc(struct tpl_run *R, struct tbuf *b, char c);
int tpl_buf_printf(struct tpl_run *R, struct tbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Moves b's contents into a new string value; b is emptied. */
int tpl_buf_take(struct tpl_run *R, struct tbuf *b, struct tv *out);
void tpl_buf_free(struct tbuf *b);

/* str(v) and repr(v) as Python prints them, appended to b. */
int tpl_value_str(struct tpl_run *R, struct tbuf *b, struct tv v);
int tpl_value_repr(struct tpl_run *R, struct tbuf *b, struct tv v, int depth);
/* str(v) as a string value (a new reference to v itself for strings). */
int tpl_to_str(struct tpl_run *R, struct tv v, struct tv *out);
/* Python repr of a float ("1.0", "1e+16", "inf"). */
void tpl_float_repr(double f, char *buf, size_t cap);

/* ---------------------------------------------------- template_str.c */

/* Decodes one code point at s[*i] (advancing *i); invalid bytes decode as
 * themselves. */
uint32_t utf8_next(const char *s, size_t n, size_t *i);
int utf8_put(uint32_t cp, char *out);
int32_t tstr_ncp(struct tstr *s);
/* Byte offset of code point k (0 <= k <= ncp). */
size_t tstr_cp_off(struct tstr *s, int64_t k);
int cp_isspace(uint32_t cp);
uint32_t cp_upper(uint32_t cp);
uint32_t cp_lower(uint32_t cp);
int cp_isalpha(uint32_t cp);
int cp_isdigit(uint32_t cp);

enum { STRIP_LEFT = 1, STRIP_RIGHT = 2, STRIP_BOTH = 3 };
/* s stripped of whitespace (chars NULL) or of the code points in chars. */
int tpl_str_strip(struct tpl_run *R, struct tstr *s, struct tstr *chars, int how, struct tv *out);
/* CASE_TITLE is str.title(); CASE_JTITLE the |title filter (words split
 * at whitespace, '-', '(', '{', '[', '<'). */
enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_JTITLE, CASE_CAPITALIZE, CASE_SWAP };
int tpl_str_case(struct tpl_run *R, struct tstr *s, int how, struct tv *out);
/* s.split(sep, maxsplit) / rsplit: sep NULL splits on whitespace runs. */
int tpl_str_split(struct tpl_run *R, struct tstr *s, struct tstr *sep, int64_t maxsplit,
		  int from_right, struct tv *out);
int tpl_str_replace(struct tpl_run *R, struct tstr *s, struct tstr *old, struct tstr *new_,
		    int64_t count, struct tv *out);
/* Index of needle in s[start..end) in code points, -1 when absent. */
int64_t tpl_str_find(struct tstr *s, struct tstr *needle, int64_t start, int64_t end, int rev);
int64_t tpl_str_count(struct tstr *s, struct tstr *needle);
/* str.splitlines(keepends) with Python's line boundaries. */
int tpl_splitlines(struct tpl_run *R, struct tstr *s, int keepends, struct tlist **out);
/* Python's "fmt % args" and "fmt".format(*args, **kwargs). */
int tpl_str_percent(struct tpl_run *R, struct tstr *fmt, struct tv args, struct tv *out);
int tpl_str_format(struct tpl_run *R, struct tstr *fmt, struct tpl_args *a, struct tv *out);
/* Python format(value, spec) for one value. */
int tpl_format_spec(struct tpl_run *R, struct tbuf *b, struct tv v, const char *spec, size_t n);
/* Slices s/list per Python s[start:stop:step] (UNDEF/NONE = omitted). */
int tpl_slice(struct tpl_run *R, struct tv obj, struct tv start, struct tv stop, struct tv step,
	      struct tv *out);

/* --------------------------------------------------------------- tokens */

enum tpl_tok {
	TK_EOF,
	TK_DATA,        /* str: literal text */
	TK_VAR_BEGIN,   /* {{ */
	TK_VAR_END,     /* }} */
	TK_BLOCK_BEGIN, /* {% */
	TK_BLOCK_END,   /* %} */
	TK_NAME,        /* str */
	TK_STRING,      /* str (decoded) */
	TK_INT,         /* i */
	TK_FLOAT,       /* f */
	TK_OP,          /* op */
};

enum tpl_op {
	OP_NONE, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_TILDE,
	OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
	OP_ASSIGN, OP_LPAREN, OP_RPAREN, OP_LBRACKET, OP_RBRACKET, OP_LBRACE, OP_RBRACE,
	OP_COMMA, OP_DOT, OP_COLON, OP_PIPE, OP_SEMICOLON,
	OP_NOT, OP_NEG, OP_POS, /* unary, parser only */
};

struct tpl_token {
	uint8_t type;
	uint8_t op;
	int line, col;
	size_t off;       /* byte offset in the normalized source */
	struct tstr *str; /* immortal, arena */
	int64_t i;
	double f;
};

struct tpl_arena {
	struct tpl_chunk *head;
};

void *tpl_arena_alloc(struct tpl_arena *a, size_t n);
void tpl_arena_free(struct tpl_arena *a);
/* Immortal string in the arena. */
struct tstr *tpl_arena_str(struct tpl_arena *a, const char *s, size_t n);

/* Tokenizes src (after newline normalization) into *toks (ing_free) with
 * strings in arena a; on error returns ING_ERR_FORMAT/NOMEM with err set. */
int tpl_lex(const char *src, size_t len, struct tpl_arena *a, struct tpl_token **toks,
	    size_t *ntoks, ing_err *err);
const char *tpl_op_text(int op);

/* ------------------------------------------------------------------ AST */

enum tn_kind {
	/* expressions */
	N_CONST,   /* val */
	N_NAME,    /* name */
	N_ATTR,    /* a.name */
	N_ITEM,    /* a[b] */
	N_SLICE,   /* a[b:c:d] (NULL = omitted) in a, kids[0..3) */
	N_CALL,    /* a(args) */
	N_FILTER,  /* a | name(args); a NULL in filter chains of blocks */
	N_TEST,    /* a is name(args) */
	N_UNARY,   /* op a: OP_NOT, OP_NEG, OP_POS */
	N_BINARY,  /* a op b: arithmetic */
	N_AND,     /* a and b */
	N_OR,      /* a or b */
	N_COMPARE, /* a ops[0] kids[0] ops[1] kids[1] ... */
	N_CONCAT,  /* kids joined by ~ */
	N_COND,    /* a if b else c (c may be NULL) */
	N_LIST,    /* kids */
	N_TUPLE,   /* kids */
	N_DICT,    /* kids = k0, v0, k1, v1, ... */
	/* statements (bodies: kids / else_kids) */
	S_BODY,    /* kids */
	S_DATA,    /* val (string) */
	S_OUTPUT,  /* a */
	S_IF,      /* if a: kids else else_kids (elif = S_IF in else_kids) */
	S_FOR,     /* for b in a [if c]: kids else else_kids; flags & TN_RECURSIVE */
	S_SET,     /* b = a (b: N_NAME, N_ATTR on a name, N_TUPLE of names) */
	S_SET_BLOCK, /* b = body kids, filtered by c (N_FILTER chain or NULL) */
	S_MACRO,   /* name(params): kids */
	S_CALL_BLOCK, /* call(params) a: kids */
	S_FILTER_BLOCK, /* kids filtered by c */
	S_WITH,    /* params = values; kids */
	S_BREAK,
	S_CONTINUE,
	S_BLOCK,   /* {% block %} / {% generation %}: kids */
};

enum {
	TN_RECURSIVE = 1,     /* for ... recursive */
	TN_USES_CALLER = 2,   /* macro body names caller */
	TN_USES_VARARGS = 4,
	TN_USES_KWARGS = 8,
};

/* Parsed call arguments: positional, keyword, *star and **dstar. */
struct tcallargs {
	struct tnode **pos;
	int npos;
	struct tstr **kwn;
	struct tnode **kwv;
	int nkw;
	struct tnode *star, *dstar;
};

/* Macro / caller / with parameters: names and default expressions (NULL
 * = required). */
struct tparams {
	struct tstr **names;
	struct tnode **defs;
	int n;
};

struct tpl_filter;
struct tpl_test;

struct tnode {
	uint8_t kind;
	uint8_t op;
	uint8_t flags;
	uint16_t depth;
	int line, col;
	struct tnode *a, *b, *c;
	struct tnode **kids;
	int nkids;
	struct tnode **else_kids;
	int nelse;
	uint8_t *ops;           /* N_COMPARE: operator per kid */
	struct tstr *name;
	struct tv val;          /* N_CONST, S_DATA */
	struct tcallargs *args; /* N_CALL, N_FILTER, N_TEST */
	struct tparams *params; /* S_MACRO, S_CALL_BLOCK, S_WITH */
	const struct tpl_filter *filter; /* N_FILTER, resolved when known */
	const struct tpl_test *test;     /* N_TEST */
};

/* Deepest syntax tree the parser accepts (bounds evaluation recursion). */
#define TPL_AST_DEPTH_MAX 250

struct template {
	struct tpl_arena arena;
	struct tnode *root; /* S_BODY */
	/* Names the evaluator binds itself (immortal, in the arena). */
	struct tstr *n_loop, *n_caller, *n_varargs, *n_kwargs;
};

int tpl_parse(struct template *t, struct tpl_token *toks, size_t n, ing_err *err);

/* ------------------------------------------------------------ rendering */

struct tpl_run {
	const struct template *t;
	ing_err *err;
	struct tbuf out;          /* current output (swapped for captures) */
	struct tscope *scope;     /* innermost scope (owned) */
	struct tdict *ctx;        /* the render variables */
	const struct tnode *at;   /* node being evaluated, for messages */
	struct tlist *namespaces; /* every namespace made: emptied at the end */
	int depth, max_depth;
	const char *stack_base; /* stack position when the render started */
	size_t stack_budget;    /* bytes of C stack the render may use */
	long steps, max_steps;
	size_t max_output;
	uint64_t bytes, max_bytes;
	struct tm now;
	int failed;
};

/* Records an error (the first one wins) positioned at R->at; returns -1. */
int tpl_fail(struct tpl_run *R, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int tpl_fail_nomem(struct tpl_run *R);
/* Records msg verbatim (raise_exception). */
int tpl_fail_raw(struct tpl_run *R, int code, const char *msg, size_t n);
/* A zeroed heap object of size bytes (refs 1), charged to the budget;
 * NULL with the error recorded. */
void *tpl_obj_new(struct tpl_run *R, size_t size, int type);
/* The UndefinedError for using undefined value v. */
int tpl_fail_undef(struct tpl_run *R, struct tv v);
/* Enters one level of evaluation: fails past max_depth or when the C
 * stack of this thread runs low (tpl_leave undoes it). */
int tpl_enter(struct tpl_run *R);
static inline void tpl_leave(struct tpl_run *R) { R->depth--; }
/* Counts one loop step / macro call against the budget. */
int tpl_step(struct tpl_run *R);
/* Charges n bytes of new strings against the budget. */
int tpl_charge(struct tpl_run *R, size_t n);

/* template_eval.c */
int tpl_eval(struct tpl_run *R, const struct tnode *n, struct tv *out);
int tpl_lookup(struct tpl_run *R, struct tstr *name, struct tv *out);
int tpl_getattr(struct tpl_run *R, struct tv obj, struct tstr *name, const struct tnode *at,
		struct tv *out);
int tpl_getitem(struct tpl_run *R, struct tv obj, struct tv key, const struct tnode *at,
		struct tv *out);
/* jinja's attribute getter for filters: "a.b.0" item-then-attribute. */
int tpl_get_path(struct tpl_run *R, struct tv obj, struct tstr *path, struct tv *out);
int tpl_call(struct tpl_run *R, struct tv fn, struct tpl_args *a, struct tv *out);
/* Evaluates the N_CALL node n, passing one more keyword argument when
 * extra_name is non-NULL ({% call %} passes caller=). */
int tpl_eval_call(struct tpl_run *R, const struct tnode *n, struct tstr *extra_name,
		  struct tv extra, struct tv *out);
/* Applies the filter chain n (innermost input NULL) to in. */
int tpl_eval_filter_chain(struct tpl_run *R, const struct tnode *n, struct tv in, struct tv *out);
int tpl_binop(struct tpl_run *R, int op, struct tv a, struct tv b, struct tv *out);
int tpl_contains(struct tpl_run *R, struct tv container, struct tv item, int *out);
/* Materializes any iterable as a list (a new reference); dicts give keys,
 * strings characters, undefined nothing. */
int tpl_iterate(struct tpl_run *R, struct tv v, struct tlist **out);

/* template_exec.c. Statements return 0, -1 on error, or one of: */
enum { TPL_BREAK = 1, TPL_CONTINUE = 2 };
int tpl_exec_body(struct tpl_run *R, struct tnode **kids, int n);
int tpl_macro_call(struct tpl_run *R, struct tmacro *m, struct tpl_args *a, struct tv *out);
int tpl_loop_call(struct tpl_run *R, struct tloop *lp, struct tpl_args *a, struct tv *out);
/* Makes a new innermost scope under parent; *saved keeps the previous one
 * for tpl_scope_pop, which empties the scope (its variables go now, even
 * if a macro still holds the scope) and restores *saved. */
int tpl_scope_push(struct tpl_run *R, struct tscope *parent, struct tscope **saved);
void tpl_scope_pop(struct tpl_run *R, struct tscope *saved);
/* name = v in scope s (v is retained). */
int tpl_scope_set(struct tpl_run *R, struct tscope *s, struct tstr *name, struct tv v);

/* template_json.c */
struct cJSON;
/* *out = the value of a cJSON item (integral numbers within 2^53 as ints),
 * or of the JSON text (ints and floats as written, as Python reads them). */
int tpl_from_cjson(struct tpl_run *R, const struct cJSON *j, struct tv *out);
int tpl_from_json_text(struct tpl_run *R, const char *text, size_t len, struct tv *out);
struct tojson_opts {
	const char *indent;   /* NULL = single line */
	size_t indent_len;
	const char *item_sep, *key_sep;
	size_t item_sep_len, key_sep_len;
	int sort_keys, ensure_ascii;
};
int tpl_tojson(struct tpl_run *R, struct tbuf *b, struct tv v, const struct tojson_opts *o);

/* template_filters.c / template_tests.c */
struct tpl_filter {
	const char *name;
	int (*fn)(struct tpl_run *R, struct tv in, struct tpl_args *a, struct tv *out);
};
struct tpl_test {
	const char *name;
	int (*fn)(struct tpl_run *R, struct tv in, struct tpl_args *a, int *out);
};
const struct tpl_filter *tpl_filter_find(const char *name);
const struct tpl_test *tpl_test_find(const char *name);
int tpl_apply_filter(struct tpl_run *R, const struct tpl_filter *f, struct tv in,
		     struct tpl_args *a, struct tv *out);
int tpl_apply_test(struct tpl_run *R, const struct tpl_test *t, struct tv in, struct tpl_args *a,
		   int *out);

/* Binds call arguments to parameter names: slot[i] gets a borrowed value or
 * TV_UNDEF; fails on unknown keywords, too many arguments or a missing
 * one among the first nreq. */
int tpl_args_bind(struct tpl_run *R, const char *who, struct tpl_args *a,
		  const char *const *names, int n, int nreq, struct tv *slot);
/* Typed helpers for bound arguments (UNDEF = default). */
int tpl_arg_int(struct tpl_run *R, const char *who, struct tv v, int64_t def, int64_t *out);
int tpl_arg_bool(struct tv v, int def);
int tpl_arg_str(struct tpl_run *R, const char *who, struct tv v, struct tstr **out);

/* template_builtins.c: globals and methods */
const struct tpl_func *tpl_global_find(const char *name);
/* Method `name` of obj as a bound method in *out; 0 and TV_UNDEF when obj
 * has no such method. */
int tpl_method_bind(struct tpl_run *R, struct tv obj, struct tstr *name, struct tv *out);
int tpl_method_call(struct tpl_run *R, struct tmethod *m, struct tpl_args *a, struct tv *out);
int tpl_loop_attr(struct tpl_run *R, struct tloop *lp, struct tstr *name, struct tv *out);
int tpl_cycler_attr(struct tpl_run *R, struct tv obj, struct tstr *name, struct tv *out);
int tpl_strftime(struct tpl_run *R, struct tstr *fmt, struct tv *out);
int tpl_clock_init(struct tpl_run *R, const struct tm *fixed);

#endif
