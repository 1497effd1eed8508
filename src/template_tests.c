/* template_tests.c — jinja2's tests ("x is defined", "x is divisibleby 3",
 * select('equalto', y), ...) with jinja2 3.1's meanings: number includes
 * bool, integer excludes it, sequence is anything with a length and
 * items (str, list, dict, even Undefined), iterable includes Undefined and
 * generators. */
#include <math.h>
#include <string.h>

#include "template_int.h"

#define BIND(who, names, nreq, slot)                                                   \
	tpl_args_bind(R, who, a, names, (int)(sizeof names / sizeof names[0]), nreq, slot)

static int no_args(struct tpl_run *R, const char *who, struct tpl_args *a)
{
	if (a->npos || a->nkw)
		return tpl_fail(R, ING_ERR_FORMAT, "test '%s' takes no arguments", who);
	return 0;
}

/* A test without arguments: t_NAME returns expr. */
#define SIMPLE_TEST(name, expr)                                                         \
	static int t_##name(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out) \
	{                                                                               \
		if (no_args(R, #name, a))                                               \
			return -1;                                                      \
		*out = (expr);                                                          \
		return 0;                                                               \
	}

SIMPLE_TEST(defined, v.kind != TV_UNDEF)
SIMPLE_TEST(undefined, v.kind == TV_UNDEF)
SIMPLE_TEST(none, v.kind == TV_NONE)
SIMPLE_TEST(boolean, v.kind == TV_BOOL)
SIMPLE_TEST(true, v.kind == TV_BOOL && v.i)
SIMPLE_TEST(false, v.kind == TV_BOOL && !v.i)
SIMPLE_TEST(integer, v.kind == TV_INT)
SIMPLE_TEST(float, v.kind == TV_FLOAT)
SIMPLE_TEST(number, tv_is_num(v))
SIMPLE_TEST(string, v.kind == TV_STR)
SIMPLE_TEST(mapping, v.kind == TV_DICT)
SIMPLE_TEST(iterable, v.kind == TV_UNDEF || v.kind == TV_STR || v.kind == TV_LIST ||
			v.kind == TV_DICT)
SIMPLE_TEST(sequence, v.kind == TV_UNDEF || v.kind == TV_STR || tv_is_seq(v) ||
			v.kind == TV_DICT)
SIMPLE_TEST(callable, v.kind == TV_UNDEF || v.kind == TV_MACRO || v.kind == TV_FUNC || v.kind == TV_METHOD ||
			v.kind == TV_JOINER || v.kind == TV_LOOP)
SIMPLE_TEST(escaped, 0)

static int parity(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out, int odd)
{
	if (no_args(R, odd ? "odd" : "even", a))
		return -1;
	if (v.kind == TV_INT || v.kind == TV_BOOL) {
		*out = (v.i & 1) == odd;
		return 0;
	}
	if (v.kind == TV_FLOAT) {
		double m = fmod(v.f, 2.0);
		if (m < 0)
			m += 2.0;
		*out = odd ? m == 1.0 : m == 0.0;
		return 0;
	}
	if (v.kind == TV_UNDEF)
		return tpl_fail_undef(R, v);
	return tpl_fail(R, ING_ERR_FORMAT, "unsupported operand type(s) for %%: '%s' and 'int'",
			tv_type_name(v));
}

static int t_odd(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out) { return parity(R, v, a, out, 1); }
static int t_even(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out) { return parity(R, v, a, out, 0); }

static int t_divisibleby(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out)
{
	static const char *const names[] = { "num" };
	struct tv slot[1], m;
	if (BIND("divisibleby", names, 1, slot) || tpl_binop(R, OP_MOD, v, slot[0], &m))
		return -1;
	*out = tv_is_num(m) && !tv_truthy(m);
	tv_release(m);
	return 0;
}

static int compare_test(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out, int op)
{
	static const char *const names[] = { "other" };
	struct tv slot[1];
	int c;
	if (BIND("compare", names, 1, slot))
		return -1;
	if (op == OP_EQ || op == OP_NE) {
		*out = tv_eq(v, slot[0]) == (op == OP_EQ);
		return 0;
	}
	if (tpl_compare(R, v, slot[0], tpl_op_text(op), &c))
		return -1;
	*out = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
	return 0;
}

static int t_eq(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out) { return compare_test(R, v, a, out, OP_EQ); }
static int t_ne(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out) { return compare_test(R, v, a, out, OP_NE); }
static int t_lt(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out) { return compare_test(R, v, a, out, OP_LT); }
static int t_le(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out) { return compare_test(R, v, a, out, OP_LE); }
static int t_gt(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out) { return compare_test(R, v, a, out, OP_GT); }
static int t_ge(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out) { return compare_test(R, v, a, out, OP_GE); }

static int t_in(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out)
{
	static const char *const names[] = { "seq" };
	struct tv slot[1];
	if (BIND("in", names, 1, slot))
		return -1;
	return tpl_contains(R, slot[0], v, out);
}

static int t_sameas(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out)
{
	static const char *const names[] = { "other" };
	struct tv slot[1];
	if (BIND("sameas", names, 1, slot))
		return -1;
	struct tv o = slot[0];
	if (v.kind != o.kind)
		*out = 0;
	else if (tv_is_heap(v))
		*out = v.o == o.o;
	else
		*out = tv_eq(v, o);
	return 0;
}

/* jinja2 tests str(value).islower() / .isupper(). */
static int case_test(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out, int upper)
{
	struct tv s;
	if (no_args(R, upper ? "upper" : "lower", a) || tpl_to_str(R, v, &s))
		return -1;
	int cased = 0, ok = 1;
	for (size_t i = 0; i < s.s->len && ok;) {
		uint32_t cp = utf8_next(s.s->s, s.s->len, &i);
		if (cp_upper(cp) != cp || cp_lower(cp) != cp) {
			cased = 1;
			ok = upper ? cp_upper(cp) == cp : cp_lower(cp) == cp;
		}
	}
	tv_release(s);
	*out = cased && ok;
	return 0;
}

static int t_lower(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out) { return case_test(R, v, a, out, 0); }
static int t_upper(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out) { return case_test(R, v, a, out, 1); }

static int t_filter(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out)
{
	*out = v.kind == TV_STR && tpl_filter_find(v.s->s) != NULL;
	return no_args(R, "filter", a);
}

static int t_test(struct tpl_run *R, struct tv v, struct tpl_args *a, int *out)
{
	*out = v.kind == TV_STR && tpl_test_find(v.s->s) != NULL;
	return no_args(R, "test", a);
}

static const struct tpl_test tests[] = {
	{ "!=", t_ne }, { "<", t_lt }, { "<=", t_le }, { "==", t_eq }, { ">", t_gt }, { ">=", t_ge },
	{ "boolean", t_boolean }, { "callable", t_callable }, { "defined", t_defined },
	{ "divisibleby", t_divisibleby }, { "eq", t_eq }, { "equalto", t_eq },
	{ "escaped", t_escaped }, { "even", t_even }, { "false", t_false }, { "filter", t_filter },
	{ "float", t_float }, { "ge", t_ge }, { "greaterthan", t_gt }, { "gt", t_gt }, { "in", t_in },
	{ "integer", t_integer }, { "iterable", t_iterable }, { "le", t_le }, { "lessthan", t_lt },
	{ "lower", t_lower }, { "lt", t_lt }, { "mapping", t_mapping }, { "ne", t_ne },
	{ "none", t_none }, { "number", t_number }, { "odd", t_odd }, { "sameas", t_sameas },
	{ "sequence", t_sequence }, { "string", t_string }, { "test", t_test }, { "true", t_true },
	{ "undefined", t_undefined }, { "upper", t_upper },
};

const struct tpl_test *tpl_test_find(const char *name)
{
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
		if (!strcmp(tests[i].name, name))
			return &tests[i];
	return NULL;
}

int tpl_apply_test(struct tpl_run *R, const struct tpl_test *t, struct tv in, struct tpl_args *a,
		   int *out)
{
	*out = 0;
	return t->fn(R, in, a, out);
}
