/* test_template.c — the chat-template module through its C API.
 *
 *   conformance   every case of every template in
 *                 ../shared/testdata/templates (rendered by jinja2 as HF
 *                 does), through template_render_json and
 *                 template_render_cjson, parsing each template once;
 *   golden        language features against outputs recorded from jinja2
 *                 3.1.6 configured as HF does (tests/test_template_cli.py
 *                 re-checks a similar list live when jinja2 is installed);
 *   errors        syntax errors name their line, runtime errors their
 *                 line and cause, raise_exception its exact message;
 *   limits        hostile templates (deep nesting, runaway loops and
 *                 recursion, huge output, exponential strings, cycles)
 *                 end in errors, never crashes or leaks;
 *   fault         every allocation of a parse + render failing in turn;
 *   threads       one parsed template rendered from several threads.
 * Every test leaves ing_mem_live() where it found it. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "mem.h"
#include "template.h"

static struct tm fixed_now(void)
{
	struct tm tm = { 0 };
	tm.tm_year = 2026 - 1900;
	tm.tm_mon = 6;
	tm.tm_mday = 26;
	tm.tm_hour = 9;
	tm.tm_min = 30;
	return tm;
}

/* Parses src and renders it with ctx (JSON text) under opts; returns the
 * status, *out (ing_free) on success, the error in *err. */
static int render_with(const char *src, const char *ctx, const struct template_opts *opts,
		       char **out, ing_err *err)
{
	struct template *t = NULL;
	size_t n = 0;
	*out = NULL;
	int rc = template_parse(src, strlen(src), &t, err);
	if (!rc)
		rc = template_render_json(t, ctx, strlen(ctx), opts, out, &n, err);
	template_free(t);
	return rc;
}

static int render(const char *src, const char *ctx, char **out, ing_err *err)
{
	struct tm now = fixed_now();
	struct template_opts o = { .now = &now };
	return render_with(src, ctx, &o, out, err);
}

/* ------------------------------------------------------------ conformance */

struct case_result {
	int passed, total;
};

static int case_ok(const cJSON *c, int rc, const char *out, const ing_err *err, const char *how,
		   const char *tname)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
	const cJSON *exp = cJSON_GetObjectItemCaseSensitive(c, "expected");
	const cJSON *exp_err = cJSON_GetObjectItemCaseSensitive(c, "expected_error");
	const char *cname = cJSON_IsString(name) ? name->valuestring : "?";
	int ok;
	if (cJSON_IsString(exp)) {
		ok = rc == ING_OK && out && !strcmp(out, exp->valuestring);
		CHECK(ok, "%s/%s (%s): rc %d %s\n  want %s\n  got  %s", tname, cname, how, rc, err->msg,
		      exp->valuestring, out ? out : "(null)");
	} else if (cJSON_IsString(exp_err)) {
		ok = rc == ING_ERR_INVALID && !strcmp(err->msg, exp_err->valuestring) && !out;
		CHECK(ok, "%s/%s (%s): want raise_exception(%s), got rc %d: %s", tname, cname, how,
		      exp_err->valuestring, rc, err->msg);
	} else {
		ok = rc == ING_ERR_FORMAT && err->msg[0] && !out;
		CHECK(ok, "%s/%s (%s): want a template error, got rc %d: %s", tname, cname, how, rc,
		      err->msg);
	}
	return ok;
}

static void run_cases(const char *dir, const char *cases_file)
{
	char path[4096];
	size_t len;
	snprintf(path, sizeof path, "%.2000s/%.1000s", dir, cases_file);
	char *text = check_read_file(path, &len);
	cJSON *spec = text ? cJSON_Parse(text) : NULL;
	free(text);
	CHECK(spec != NULL, "cannot read %s", path);
	if (!spec)
		return;
	const cJSON *tname = cJSON_GetObjectItemCaseSensitive(spec, "template");
	snprintf(path, sizeof path, "%.2000s/%.1000s", dir,
		 cJSON_IsString(tname) ? tname->valuestring : "?");
	char *src = check_read_file(path, &len);
	struct template *t = NULL;
	ing_err err = { 0 };
	CHECK(src && template_parse(src, len, &t, &err) == ING_OK, "parse %s: %s", path, err.msg);
	struct tm now = fixed_now();
	struct template_opts o = { .now = &now };
	int passed = 0, total = 0;
	const cJSON *c;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, "cases")) {
		const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(c, "context");
		char *ctx_text = cJSON_PrintUnformatted(ctx);
		char *out = NULL;
		size_t n = 0;
		int ok = 1;
		for (int api = 0; api < 2 && t; api++) {
			ing_err e = { 0 };
			int rc = api ? template_render_cjson(t, ctx, &o, &out, &n, &e)
				     : template_render_json(t, ctx_text, strlen(ctx_text), &o, &out, &n, &e);
			ok &= case_ok(c, rc, out, &e, api ? "cjson" : "json", tname->valuestring);
			if (!rc)
				CHECK(n == strlen(out), "output length %zu vs %zu", n, strlen(out));
			ing_free(out);
			out = NULL;
		}
		free(ctx_text);
		passed += ok && t;
		total++;
	}
	printf("  %-58s %d/%d\n", tname->valuestring, passed, total);
	template_free(t);
	free(src);
	cJSON_Delete(spec);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_conformance(void)
{
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/templates", check_testdata_dir());
	DIR *d = opendir(dir);
	CHECK(d != NULL, "no template test data at %s", dir);
	if (!d)
		return;
	char *names[256];
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) && n < 256;) {
		size_t l = strlen(e->d_name);
		if (l > 11 && !strcmp(e->d_name + l - 11, ".cases.json"))
			names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof names[0], name_cmp);
	CHECK(n > 0, "no *.cases.json in %s", dir);
	for (int i = 0; i < n; i++) {
		run_cases(dir, names[i]);
		free(names[i]);
	}
}

/* ----------------------------------------------------------------- golden */

static const struct golden {
	const char *name, *src, *ctx, *want;
} golden[] = {
	{ "trim_lstrip",
	  "a\n  {% if true %}\n    x\n  {% endif %}\nb\n",
	  "{}",
	  "a\n    x\nb" },
	{ "ws_control",
	  "{%- for x in xs -%}\n  [{{- x -}}]\n{%- endfor %}\n{# c #}\n  {#- d -#}  y",
	  "{\"xs\": [1, 2]}",
	  "[1][2]y" },
	{ "plus_keeps",
	  "  {{ 1 }}  {% if true %}  y {%+ if true %}z{% endif %}{% endif %}\n{% if 1 +%}\nq{% endif %}",
	  "{}",
	  "  1    y z\nq" },
	{ "raw",
	  "{% raw %}{{ x }}{% if %}{% endraw %}",
	  "{}",
	  "{{ x }}{% if %}" },
	{ "newlines",
	  "a\r\nb\rc\n",
	  "{}",
	  "a\nb\nc" },
	{ "loop_vars",
	  "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('a','b') }}{{ loop.previtem }}/{{ loop.nextitem }};{% endfor %}",
	  "{\"xs\": [1, 2, 3]}",
	  "1032TrueFalse3a/2;2121FalseFalse3b1/3;3210FalseTrue3a2/;" },
	{ "loop_filter_else",
	  "{% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}{% for x in [] %}{% else %}empty{% endfor %}",
	  "{\"xs\": [1, 2, 3]}",
	  "1/2 2/2 empty" },
	{ "loop_dict_items",
	  "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for a, b in d.items() %}{{ a }}{% endfor %}",
	  "{\"d\": {\"b\": 1, \"a\": [1, 2]}}",
	  "b=1;a=[1, 2];baba" },
	{ "break_continue",
	  "{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
	  "{\"xs\": [1, 2, 3, 4, 5]}",
	  "13" },
	{ "loop_scope",
	  "{% set x = 5 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}{% if true %}{% set y = 1 %}{% endif %}{{ y }}",
	  "{}",
	  "[5][5]51" },
	{ "namespace",
	  "{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}",
	  "{}",
	  "6 0123" },
	{ "tuples",
	  "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1,) %}{{ t }}{{ () }}{{ (1, 'a') }}",
	  "{}",
	  "12(1,)()(1, 'a')" },
	{ "set_block",
	  "{% set x %}  hi {{ 1 }} {% endset %}[{{ x }}]{% set y | upper %}ab{% endset %}{{ y }}",
	  "{}",
	  "[  hi 1 ]AB" },
	{ "macro_args",
	  "{% macro f(a, b=2) %}{{ a }}-{{ b }}-{{ varargs }}-{{ kwargs }}{% endmacro %}{{ f(1) }}|{{ f(1, 3, 4, z=5) }}|{{ f(b=7, a=0) }}",
	  "{}",
	  "1-2-()-{}|1-3-(4,)-{'z': 5}|0-7-()-{}" },
	{ "macro_caller",
	  "{% macro f(a) %}<{{ caller(a) }}>{% endmacro %}{% call(q) f(7) %}[{{ q }}]{% endcall %}",
	  "{}",
	  "<[7]>" },
	{ "macro_recursive",
	  "{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
	  "{}",
	  "54321" },
	{ "macro_late_binding",
	  "{% set x = 0 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}",
	  "{}",
	  "1" },
	{ "filter_block_with",
	  "{% filter upper %}abc {{ 'd' }}{% endfilter %}{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]",
	  "{}",
	  "ABC D3[]" },
	{ "arith",
	  "{{ 1/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 2**10 }} {{ 2**-1 }} {{ 1e3 }} {{ 1_000 }} {{ 0.1+0.2 }} {{ 7.0 // 2 }} {{ -2**2 }} {{ 10 % 3.5 }} {{ 3 * 1.5 }}",
	  "{}",
	  "0.5 3 -4 2 1024 0.5 1000.0 1000 0.30000000000000004 3.0 4 3.0 4.5" },
	{ "str_ops",
	  "{{ 'abc' * 2 }}{{ [1] * 2 }}{{ 1 + 1.5 }}{{ 'a' ~ 1 ~ none ~ true }}{{ 'a' + 'b' }}{{ [1] + [2] }}",
	  "{}",
	  "abcabc[1, 1]2.5a1NoneTrueab[1, 2]" },
	{ "compare",
	  "{{ [1, 2] == [1, 2] }}{{ 1 == 1.0 }}{{ 1 == true }}{{ none == none }}{{ (1, 2) == [1, 2] }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'b' > 'a' }}{{ [1, 2] < [1, 3] }}{{ 1 != 2 }}",
	  "{}",
	  "TrueTrueTrueTrueFalseTrueFalseTrueTrueTrue" },
	{ "contains",
	  "{{ 'a' in 'cat' }}{{ 2 in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 3 not in [1] }}{{ 'x' in u }}",
	  "{}",
	  "TrueTrueTrueTrueFalse" },
	{ "and_or",
	  "{{ none or 'x' }}|{{ 0 and 1 }}|{{ [] or {} }}|{{ 'a' and 'b' }}|{{ not none }}|{{ not 1 }}",
	  "{}",
	  "x|0|{}|b|True|False" },
	{ "cond_expr",
	  "{{ 'y' if true }}|{{ 'y' if false }}|{{ 1 if 0 else 2 if 0 else 3 }}",
	  "{}",
	  "y||3" },
	{ "repr",
	  "{{ [1, 'a', none, true, 1.0, {'k': \"it's\"}, (1, 2), 'q\"\\'', '\\n'] }}",
	  "{}",
	  "[1, 'a', None, True, 1.0, {'k': \"it's\"}, (1, 2), 'q\"\\'', '\\n']" },
	{ "floats",
	  "{{ 1.0 }} {{ 1e16 }} {{ 1e15 }} {{ 1.5e-7 }} {{ 0.0001 }} {{ 123456789.123 }} {{ -0.0 }} {{ 3.14159 }} {{ 1e100 }} {{ 2.5e-5 }} {{ 1/3 }}",
	  "{}",
	  "1.0 1e+16 1000000000000000.0 1.5e-07 0.0001 123456789.123 -0.0 3.14159 1e+100 2.5e-05 0.3333333333333333" },
	{ "str_methods1",
	  "{{ s.split() }} {{ s.split('o', 1) }} {{ s.rsplit('o', 1) }} {{ s.strip('Hd') }} {{ s.lstrip('H') }} {{ s.startswith('He') }} {{ s.endswith(('x', 'ld')) }}",
	  "{\"s\": \"Hello World\"}",
	  "['Hello', 'World'] ['Hell', ' World'] ['Hello W', 'rld'] ello Worl ello World True True" },
	{ "str_methods2",
	  "{{ s.upper() }} {{ s.lower() }} {{ s.title() }} {{ s.capitalize() }} {{ s.swapcase() }} {{ s.replace('l', 'L', 2) }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.count('l') }}",
	  "{\"s\": \"heLLo wOrld it's\"}",
	  "HELLO WORLD IT'S hello world it's Hello World It'S Hello world it's HEllO WoRLD IT'S heLLo wOrLd it's 4 4 1" },
	{ "str_methods3",
	  "{{ '-'.join(['a', 'b']) }} {{ '{} {}'.format('a', 2) }} {{ '{0}{name}'.format(1, name='n') }} {{ '%s-%d-%.2f' % ('a', 3, 1.5) }} {{ '%(k)s' % {'k': 'v'} }} {{ 'x'.center(5, '*') }}",
	  "{}",
	  "a-b a 2 1n a-3-1.50 v **x**" },
	{ "str_methods4",
	  "{{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'abc'.removeprefix('a') }} {{ 'a=b=c'.partition('=') }} {{ '42'.isdigit() }} {{ 'ab'.isalpha() }} {{ '5'.zfill(3) }} {{ '  x '.rstrip() }}|",
	  "{}",
	  "['a', 'b', 'c'] bc ('a', '=', 'b=c') True True 005   x|" },
	{ "slicing",
	  "{{ s[1:] }} {{ s[::-1] }} {{ s[0] }} {{ s[-1] }} {{ s[100] }}|{{ xs[1:] }} {{ xs[::-2] }} {{ xs[-1] }} {{ xs[10] }}|{{ xs[:-1] }}",
	  "{\"s\": \"h\303\251llo\", \"xs\": [1, 2, 3]}",
	  "\303\251llo oll\303\251h h o |[2, 3] [3, 1] 3 |[1, 2]" },
	{ "dict_access",
	  "{{ d.a }} {{ d['b'] }} {{ d.get('c', 'z') }} {{ d.get('a') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.c is defined }} {{ d['items'] is defined }}",
	  "{\"d\": {\"a\": 1, \"b\": [1, 2]}}",
	  "1 [1, 2] z 1 ['a', 'b'] [1, [1, 2]] [('a', 1), ('b', [1, 2])] False True" },
	{ "undefined",
	  "{{ n.x }}|{{ n.x is defined }}|{{ u }}|{{ u|length }}|{{ u == u }}|{{ u is none }}|{{ u|default('d') }}|{% for x in u %}no{% endfor %}|{{ u|list }}",
	  "{\"n\": null}",
	  "|False||0|True|False|d||[]" },
	{ "filters_str",
	  "{{ xs|length }}{{ 'h\303\251llo'|length }}{{ 'h\303\251llo'|upper }}{{ 'ab cd-ef'|title }}{{ 'aB'|capitalize }}{{ '  a  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'abc'|replace('b', 'B') }}",
	  "{\"xs\": [1, 2, 3]}",
	  "35H\303\211LLOAb Cd-EfAba|a|aBc" },
	{ "filter_indent",
	  "{{ 'a\\nb'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb\\n'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}",
	  "{}",
	  "a\n  b|  a\n  b|a\n  \n  b\n  |a\n> b" },
	{ "filters_num",
	  "{{ 1.5|round }}|{{ 2.5|round }}|{{ 2.567|round(2) }}|{{ 2.5|round(0, 'floor') }}|{{ 2.1|round(0, 'ceil') }}|{{ 5|round }}|{{ '3.7'|int }}|{{ 'x'|int }}|{{ '4'|float }}|{{ -3|abs }}|{{ ' 12 '|int }}|{{ 3|float }}",
	  "{}",
	  "2.0|2.0|2.57|2.0|3.0|5|3|0|4.0|3|12|3.0" },
	{ "filters_seq",
	  "{{ xs|join }}|{{ xs|join(', ') }}|{{ xs|first }}{{ xs|last }}{{ xs|sum }}{{ xs|max }}{{ xs|min }}{{ xs|reverse|list }}{{ 'abc'|reverse }}{{ [3, 1, 2]|sort }}{{ ['b', 'A', 'a']|unique|list }}{{ [3, 1, 2]|sort(reverse=true) }}",
	  "{\"xs\": [1, 2, 3]}",
	  "123|1, 2, 3|13631[3, 2, 1]cba[1, 2, 3]['b', 'A'][3, 2, 1]" },
	{ "filters_attr",
	  "{{ users|map(attribute='name')|join(',') }}|{{ users|selectattr('admin')|map(attribute='name')|list }}|{{ users|rejectattr('admin')|list|length }}|{{ users|sort(attribute='age')|map(attribute='name')|list }}|{{ users|selectattr('age', 'gt', 30)|list|length }}|{{ users|map(attribute='zz', default='-')|list }}",
	  "{\"users\": [{\"name\": \"b\", \"age\": 40, \"admin\": true}, {\"name\": \"a\", \"age\": 20, \"admin\": false}]}",
	  "b,a|['b']|1|['a', 'b']|1|['-', '-']" },
	{ "filters_select",
	  "{{ xs|select('odd')|list }}{{ xs|reject('odd')|list }}{{ xs|map('string')|join('+') }}{{ ['a', 'B']|map('upper')|list }}{{ xs|select('equalto', 2)|list }}{{ xs|select|list }}",
	  "{\"xs\": [0, 1, 2, 3]}",
	  "[1, 3][0, 2]0+1+2+3['A', 'B'][2][1, 2, 3]" },
	{ "tojson",
	  "{{ d|tojson }} {{ d|tojson(indent=2) }} {{ [1.0, 1e20, 1e-7, '\303\274<>&\\'\"\\n', none, true]|tojson }} {{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} {{ [1, [2]]|tojson(indent=0) }} {{ {}|tojson(indent=2) }} {{ [1, {'a': 2}]|tojson(separators=(',', ':')) }}",
	  "{\"d\": {\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": null}}}",
	  "{\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": null}} {\n  \"a\": 1,\n  \"b\": [\n    1,\n    2\n  ],\n  \"c\": {\n    \"x\": null\n  }\n} [1.0, 1e+20, 1e-07, \"\303\274<>&'\\\"\\n\", null, true] {\"a\": 2, \"b\": 1} [\n1,\n[\n2\n]\n] {} [1,{\"a\":2}]" },
	{ "tojson_ascii",
	  "{{ '\303\251\360\237\230\200'|tojson(ensure_ascii=true) }} {{ 'x'|tojson(indent='\\t') }} {{ [[]]|tojson(indent=1) }}",
	  "{}",
	  "\"\\u00e9\\ud83d\\ude00\" \"x\" [\n []\n]" },
	{ "tests",
	  "{{ 3 is odd }}{{ 3 is divisibleby 3 }}{{ xs is sequence }}{{ d is mapping }}{{ s is iterable }}{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1.0 is float }}{{ s is string }}{{ none is none }}{{ u is undefined }}{{ 2 is even }}{{ d is sequence }}{{ 5 is gt 3 }}{{ 'a' is in 'abc' }}{{ true is true }}{{ 1 is true }}{{ 'AB' is upper }}{{ xs is iterable }}",
	  "{\"xs\": [1], \"d\": {}, \"s\": \"x\"}",
	  "TrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrue" },
	{ "not_is",
	  "{{ x is not none }}{{ not x is defined }}{{ x is defined and x }}{{ y is not defined }}",
	  "{\"x\": 0}",
	  "TrueFalse0True" },
	{ "range_dict",
	  "{{ range(3)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}{{ dict(a=1, b=2) }}{{ namespace(a=1).a }}",
	  "{}",
	  "[0, 1, 2][1, 4, 7][5, 3, 1]{'a': 1, 'b': 2}1" },
	{ "cycler_joiner",
	  "{% set c = cycler('x', 'y') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}{% set j = joiner('|') %}{% for i in [1, 2, 3] %}{{ j() }}{{ i }}{% endfor %}",
	  "{}",
	  "xyxy1|2|3" },
	{ "object_str", /* jinja2 adds each object's address; a rendering must not */
	  "{{ joiner() }}|{{ cycler(1) ~ '' }}|{{ [1, 2]|select|string }}|{{ 'x' ~ range }}",
	  "{}",
	  "<Joiner object>|<Cycler object>|<generator object>|x<function range>" },
	{ "loop_changed",
	  "{% for x in xs %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}",
	  "{\"xs\": [1, 1, 2, 2, 1]}",
	  "121" },
	{ "loop_recursive",
	  "{% for x in tree recursive %}[{{ x.n }}{{ loop.depth }}{% if x.c %}:{{ loop(x.c) }}{% endif %}]{% endfor %}",
	  "{\"tree\": [{\"n\": 1, \"c\": [{\"n\": 2, \"c\": []}, {\"n\": 3}]}, {\"n\": 4}]}",
	  "[11:[22][32]][41]" },
	{ "percent_fmt",
	  "{{ '%05.1f|%-4s|%x|%r' % (3.14159, 'ab', 255, 'q') }}",
	  "{}",
	  "003.1|ab  |ff|'q'" },
	{ "literals",
	  "{{ 'a' 'b' }}{{ \"q\\\"\" }}{{ '\\u00e9\\x41\\n' }}{{ {'a': {'b': 1}} }}{{ True }}{{ None }}",
	  "{}",
	  "abq\"\303\251A\n{'a': {'b': 1}}TrueNone" },
	{ "postfix",
	  "{{ xs.0 }}{{ d['a'].b }}{{ d.a['b'] }}{{ (xs|list)[0] }}",
	  "{\"xs\": [5], \"d\": {\"a\": {\"b\": 7}}}",
	  "5775" },
	{ "batch_dictsort",
	  "{{ 'abc'|batch(2)|list }}{{ [1, 2, 3]|batch(2, 0)|list }}{{ {'b': 2, 'a': 1}|dictsort }}{{ {'b': 2, 'a': 1}|dictsort(by='value', reverse=true) }}",
	  "{}",
	  "[['a', 'b'], ['c']][[1, 2], [3, 0]][('a', 1), ('b', 2)][('b', 2), ('a', 1)]" },
	{ "text_filters",
	  "{{ 'a b  c'|wordcount }}{{ 'hello world foo'|truncate(9) }}|{{ 'hello world foo'|truncate(9, true) }}|{{ 'abcdef'|truncate(3, leeway=0) }}|{{ '%s and %s'|format('a', 'b') }}{{ '<a & \"b\">'|e }}{{ 'x'|safe }}{{ [1]|string }}",
	  "{}",
	  "3hello...|hello ...|...|a and b&lt;a &amp; &#34;b&#34;&gt;x[1]" },
	{ "markup",
	  "{{ ('a'|safe) + '<b>' }}|{{ '<x>' + ('a'|safe) }}|{{ ('<a>'|safe)|upper + '<' }}|{{ ('a'|safe ~ '<') + '<' }}|{{ ('a'|e) + '<' }}|{{ ('<'|e)|e }}",
	  "{}",
	  "a&lt;b&gt;|&lt;x&gt;a|<A>&lt;|a<<|a&lt;|&lt;" },
	{ "think_split",
	  "{{ messages[0]['content'].split('</think>')[-1].lstrip() }}",
	  "{\"messages\": [{\"content\": \"<think>x</think>  answer\"}]}",
	  "answer" },
	{ "unicode_case",
	  "{{ '\303\251\303\237'|upper }}{{ '\303\200\303\211'|lower }}{{ '  \343\200\200x\302\240'|trim }}",
	  "{}",
	  "\303\211SS\303\240\303\251x" },
	{ "defaults",
	  "{{ x|default('d') }}{{ y|default('d') }}{{ ''|default('d', true) }}{{ 0|d(5) }}",
	  "{\"y\": null}",
	  "dNoned0" },
	{ "generation_block",
	  "{% generation %}gen{% endgeneration %}{% block b %}blk{% endblock %}",
	  "{}",
	  "genblk" },
	{ "strftime",
	  "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M:%S %A %j') }}",
	  "{}",
	  "26 Jul 2026 2026-07-26 09:30:00 Sunday 207" },
	{ "fuzz_found",
	  "{{ 'a' % u }}|{{ '%s' % [1] }}|{{ [('x'|safe), 1] }}|{{ [1, 2] is lower }}|{{ [3, 1]|sort(attribute='age') }}|{{ 'ab'|e|capitalize + '<' }}",
	  "{}",
	  "a|[1]|[Markup('x'), 1]|False|[3, 1]|Ab&lt;" },
	{ "markup_methods",
	  "{{ ('<a>'|safe).upper() + '&' }}|{{ ('x'|safe).split('x') }}|{{ ('%s'|safe) % '<' }}",
	  "{}",
	  "<A>&amp;|[Markup(''), Markup('')]|&lt;" },
	{ "json_numbers",
	  "{{ a }} {{ b }} {{ c }} {{ d }} {{ e|tojson }} {{ a is float }} {{ b is integer }}",
	  "{\"a\": 1.0, \"b\": 1, \"c\": 1e2, \"d\": 12345678901234567, \"e\": [1.5, -0.0, 2]}",
	  "1.0 1 100.0 12345678901234567 [1.5, -0.0, 2] True True" },
};

static void test_golden(void)
{
	for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
		const struct golden *g = &golden[i];
		char *out;
		ing_err err = { 0 };
		int rc = render(g->src, g->ctx, &out, &err);
		CHECK(rc == ING_OK && !strcmp(out, g->want), "golden %s: rc %d %s\n  want %s\n  got  %s",
		      g->name, rc, err.msg, g->want, out ? out : "(null)");
		ing_free(out);
	}
}

/* ----------------------------------------------------------------- errors */

static void expect_error(const char *src, const char *ctx, int code, const char *needle)
{
	char *out;
	ing_err err = { 0 };
	int rc = render(src, ctx, &out, &err);
	CHECK(rc == code && !out && strstr(err.msg, needle), "%s: want code %d with \"%s\", got %d \"%s\"",
	      src, code, needle, rc, err.msg);
	ing_free(out);
}

static void test_errors(void)
{
	/* syntax errors carry the line */
	expect_error("{% if x %}\n{% endfor %}", "{}", ING_ERR_FORMAT, "line 2, column 4");
	expect_error("a\nb\n{{ 1 + }}", "{}", ING_ERR_FORMAT, "line 3");
	expect_error("{% for x in %}{% endfor %}", "{}", ING_ERR_FORMAT, "line 1");
	expect_error("x\n{{ 'unterminated }}", "{}", ING_ERR_FORMAT, "line 2, column 4: unterminated string");
	expect_error("{% if true %}never closed", "{}", ING_ERR_FORMAT, "expected 'elif' or 'else' or 'endif'");
	expect_error("{{ x }", "{}", ING_ERR_FORMAT, "line 1");
	expect_error("{{ x ", "{}", ING_ERR_FORMAT, "missing }}");
	expect_error("{% break %}", "{}", ING_ERR_FORMAT, "outside of a loop");
	expect_error("{% macro f(a=1, b) %}{% endmacro %}", "{}", ING_ERR_FORMAT, "non-default argument");
	expect_error("{% include 'x' %}", "{}", ING_ERR_FORMAT, "not supported");
	expect_error("{{ ) }}", "{}", ING_ERR_FORMAT, "unexpected closing bracket");
	expect_error("{% do x %}", "{}", ING_ERR_FORMAT, "unknown tag 'do'");
	expect_error("{{ 1 is defined is defined }}", "{}", ING_ERR_FORMAT, "line 1");
	expect_error("{# open comment", "{}", ING_ERR_FORMAT, "unclosed comment");
	expect_error("{% raw %}x", "{}", ING_ERR_FORMAT, "endraw");
	expect_error("{{ '\\xZZ' }}", "{}", ING_ERR_FORMAT, "invalid escape");
	/* runtime errors carry the line and the cause */
	expect_error("ok\n{{ x.y.z }}", "{\"x\": {}}", ING_ERR_FORMAT, "line 2");
	expect_error("{{ x.y.z }}", "{\"x\": {}}", ING_ERR_FORMAT, "'dict object' has no attribute 'y'");
	expect_error("{{ nope.z }}", "{}", ING_ERR_FORMAT, "'nope' is undefined");
	expect_error("{{ 1 + 'a' }}", "{}", ING_ERR_FORMAT, "unsupported operand type(s) for +: 'int' and 'str'");
	expect_error("{{ 'a' + {} }}", "{}", ING_ERR_FORMAT, "can only concatenate str (not \"dict\") to str");
	expect_error("{{ 1 < 'a' }}", "{}", ING_ERR_FORMAT, "'<' not supported between instances of 'int' and 'str'");
	expect_error("{{ xs.append(1) }}", "{\"xs\": []}", ING_ERR_FORMAT, "access to attribute 'append' of 'list' object is unsafe.");
	expect_error("{{ [1]|map('upper')|tojson }}", "{}", ING_ERR_FORMAT, "Object of type generator is not JSON serializable");
	expect_error("{{ u|tojson }}", "{}", ING_ERR_FORMAT, "Object of type Undefined");
	expect_error("{{ x|nosuchfilter }}", "{}", ING_ERR_FORMAT, "No filter named 'nosuchfilter'");
	expect_error("{{ x is nosuchtest }}", "{}", ING_ERR_FORMAT, "No test named 'nosuchtest'");
	expect_error("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}", "{}", ING_ERR_FORMAT, "takes not more than 1 argument(s)");
	expect_error("{% set x = 1 %}{% set x.y = 2 %}", "{}", ING_ERR_FORMAT, "non-namespace object");
	expect_error("{% set a, b = [1] %}", "{}", ING_ERR_FORMAT, "not enough values to unpack");
	expect_error("{{ 1 // 0 }}", "{}", ING_ERR_FORMAT, "division or modulo by zero");
	expect_error("{{ 1 / 0.0 }}", "{}", ING_ERR_FORMAT, "division by zero");
	expect_error("{{ 9223372036854775807 + 1 }}", "{}", ING_ERR_RANGE, "64-bit");
	expect_error("{{ none() }}", "{}", ING_ERR_FORMAT, "'NoneType' object is not callable");
	expect_error("{% for x in 5 %}{% endfor %}", "{}", ING_ERR_FORMAT, "'int' object is not iterable");
	expect_error("{{ u|int }}", "{}", ING_ERR_FORMAT, "'u' is undefined");
	expect_error("{{ u|indent }}", "{}", ING_ERR_FORMAT, "'u' is undefined");
	expect_error("{{ [1]|indent }}", "{}", ING_ERR_FORMAT, "expected a string");
	expect_error("{{ 5|truncate(3) }}", "{}", ING_ERR_FORMAT, "cannot be truncated");
	/* raise_exception: exactly its message, ING_ERR_INVALID */
	char *out;
	ing_err err = { 0 };
	int rc = render("a{{ raise_exception('Roles must alternate: ' ~ n) }}b", "{\"n\": 3}", &out, &err);
	CHECK(rc == ING_ERR_INVALID && !strcmp(err.msg, "Roles must alternate: 3") && !out,
	      "raise_exception: %d %s", rc, err.msg);
	/* contexts: not an object, not JSON */
	expect_error("x", "[1, 2]", ING_ERR_INVALID, "must be a JSON object");
	expect_error("x", "{\"a\": ", ING_ERR_INVALID, "not valid JSON");
	expect_error("x", "{} {}", ING_ERR_INVALID, "unexpected data");
	/* API misuse */
	size_t n;
	CHECK(template_render_json(NULL, "{}", 2, NULL, &out, &n, &err) == ING_ERR_INVALID, "NULL template");
	CHECK(template_parse(NULL, 0, NULL, &err) == ING_ERR_INVALID, "NULL output");
	template_free(NULL);
}

/* ----------------------------------------------------------------- limits */

/* Builds prefix + piece * n + suffix. */
static char *repeat(const char *prefix, const char *piece, int n, const char *suffix)
{
	size_t lp = strlen(prefix), lpc = strlen(piece), ls = strlen(suffix);
	char *s = ing_malloc(lp + lpc * (size_t)n + ls + 1), *o = s;
	memcpy(o, prefix, lp);
	o += lp;
	for (int i = 0; i < n; i++, o += lpc)
		memcpy(o, piece, lpc);
	memcpy(o, suffix, ls + 1);
	return s;
}

static void expect_fails(char *src, const char *ctx, const struct template_opts *o, const char *what)
{
	char *out;
	ing_err err = { 0 };
	int rc = render_with(src, ctx, o, &out, &err);
	CHECK(rc != ING_OK && !out && err.msg[0], "%s: rc %d %s", what, rc, err.msg);
	ing_free(out);
	ing_free(src);
}

static char *dup(const char *s)
{
	return ing_strndup(s, strlen(s));
}

static void test_limits(void)
{
	struct tm now = fixed_now();
	struct template_opts o = { .now = &now };
	expect_fails(repeat("{{ ", "(", 20000, "1 }}"), "{}", &o, "20000 open parentheses");
	expect_fails(repeat("{{ ", "[", 5000, "]"), "{}", &o, "5000 nested lists");
	expect_fails(repeat("{{ 1", " + 1", 100000, " }}"), "{}", &o, "100000-term sum");
	expect_fails(repeat("{{ ", "not ", 50000, "x }}"), "{}", &o, "50000 nots");
	expect_fails(repeat("{{ ", "-", 50000, "1 }}"), "{}", &o, "50000 unary minus");
	expect_fails(repeat("{{ x", "|trim", 50000, " }}"), "{}", &o, "50000 filters");
	expect_fails(repeat("{{ x", ".a", 50000, " }}"), "{}", &o, "50000 attributes");
	expect_fails(repeat("", "{% if true %}", 5000, "x"), "{}", &o, "5000 nested ifs");
	expect_fails(repeat("{{ 1 if x ", "else 1 if x ", 5000, "else 2 }}"), "{}", &o, "conditional chain");
	expect_fails(dup("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "{}", &o, "unbounded recursion");
	expect_fails(dup("{% for x in xs recursive %}{{ loop(xs) }}{% endfor %}"), "{\"xs\": [1]}", &o,
		     "unbounded recursive loop");
	expect_fails(dup("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
		     "{}", &o, "10^10 loop steps");
	expect_fails(dup("{{ range(1000000)|length }}"), "{}", &o, "range over MAX_RANGE");
	expect_fails(dup("{{ 'x' * 10000000000 }}"), "{}", &o, "huge repetition");
	expect_fails(dup("{{ [1, 2] * 100000000 }}"), "{}", &o, "huge list repetition");
	expect_fails(dup("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
			 "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"), "{}", &o, "exponential string");
	expect_fails(dup("{% set ns = namespace(s='x' * 1000) %}{% for i in range(100000) %}"
			 "{% set ns.s = ns.s ~ 'y' * 1000 %}{% endfor %}"), "{}", &o, "quadratic string");
	expect_fails(dup("{% set ns = namespace(x=[]) %}{% for i in range(3000) %}"
			 "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|length }}"), "{}", &o, "deep list");
	expect_fails(dup("{% set ns = namespace(x={}) %}{% for i in range(3000) %}"
			 "{% set ns.x = {'a': ns.x} %}{% endfor %}{{ ns.x|tojson }}"), "{}", &o, "deep dict");
	expect_fails(dup("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), "{}", &o,
		     "self-containing namespace printed");
	char *deep_ctx = repeat("{\"a\": ", "[", 3000, "1");
	expect_fails(dup("{{ a }}"), deep_ctx, &o, "context nested 3000 deep");
	ing_free(deep_ctx);
	struct template_opts small = { .now = &now, .max_output = 1 << 20 };
	expect_fails(dup("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"), "{}", &small,
		     "output over max_output");
	struct template_opts steps = { .now = &now, .max_steps = 10 };
	expect_fails(dup("{% for i in range(11) %}{% endfor %}"), "{}", &steps, "max_steps");
	struct template_opts depth = { .now = &now, .max_depth = 20 };
	expect_fails(dup("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(50) }}"),
		     "{}", &depth, "max_depth");

	/* within the limits these work, and cycles do not leak */
	char *out;
	ing_err err = { 0 };
	int rc = render("{% set ns = namespace() %}{% set ns.me = ns %}{% set ns.l = [ns, ns] %}"
			"{% macro m() %}{{ ns.l|length }}{% endmacro %}{% set ns.m = m %}{{ ns.m() }}",
			"{}", &out, &err);
	CHECK(rc == ING_OK && !strcmp(out, "2"), "namespace cycles: %d %s", rc, err.msg);
	ing_free(out);
	rc = render("{% set ns = namespace() %}{% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}"
		    "{% set ns.f = m %}{% endfor %}[{{ ns.f() }}]", "{}", &out, &err);
	CHECK(rc == ING_OK, "macro escaping its loop: %d %s", rc, err.msg);
	ing_free(out);
	char *deep = repeat("{\"a\": ", "[", 900, "1");
	char *ctx = repeat(deep, "]", 900, "}");
	rc = render("{{ a|tojson|length }}", ctx, &out, &err);
	CHECK(rc == ING_OK && !strcmp(out, "1801"), "context nested 900 deep: %d %s %s", rc, err.msg, out);
	ing_free(out);
	ing_free(ctx);
	ing_free(deep);
	char *open_ifs = repeat("", "{% if true %}", 60, "x");
	char *nest = repeat(open_ifs, "{% endif %}", 60, "");
	ing_free(open_ifs);
	rc = render(nest, "{}", &out, &err);
	CHECK(rc == ING_OK && !strcmp(out, "x"), "60 nested ifs: %d %s", rc, err.msg);
	ing_free(out);
	ing_free(nest);
}

/* ------------------------------------------------------------ the clock */

static void test_clock(void)
{
	char *out;
	ing_err err = { 0 };
	setenv("INGOT_TEMPLATE_NOW", "2001-02-03 04:05:06", 1);
	int rc = render_with("{{ strftime_now('%Y-%m-%d %H:%M:%S %a') }}", "{}", NULL, &out, &err);
	CHECK(rc == ING_OK && !strcmp(out, "2001-02-03 04:05:06 Sat"), "env clock: %d %s %s", rc,
	      err.msg, out ? out : "");
	ing_free(out);
	setenv("INGOT_TEMPLATE_NOW", "yesterday", 1);
	rc = render_with("{{ strftime_now('%Y') }}", "{}", NULL, &out, &err);
	CHECK(rc == ING_ERR_INVALID && strstr(err.msg, "INGOT_TEMPLATE_NOW"), "bad env clock: %d %s", rc,
	      err.msg);
	ing_free(out);
	unsetenv("INGOT_TEMPLATE_NOW");
	rc = render_with("{{ strftime_now('%Y') }}", "{}", NULL, &out, &err);
	time_t t = time(NULL);
	struct tm lt;
	localtime_r(&t, &lt);
	char year[16];
	snprintf(year, sizeof year, "%d", lt.tm_year + 1900);
	CHECK(rc == ING_OK && !strcmp(out, year), "real clock: %s vs %s", out ? out : "", year);
	ing_free(out);
}

/* -------------------------------------------------------- fault injection */

static const char *fault_src =
	"{%- set ns = namespace(n=0) -%}{%- macro m(x, y=2) -%}[{{ x ~ y }}]{%- endmacro -%}"
	"{%- for msg in messages if msg.role != 'x' -%}{% set ns.n = ns.n + 1 %}"
	"{{ m(msg.content|trim|upper, loop.index) }}{{ msg|tojson(indent=1) }}"
	"{{ msg.content.split(' ')|map('lower')|join('-') }}{{ (msg|items|list)[0] }}"
	"{%- endfor -%}{{ ns.n }}{{ tools|selectattr('type', 'equalto', 'function')|list|length }}"
	"{{ '%s/%d' % ('a', 1) }}{{ {'a': [1, 2.5]}|dictsort }}{{ 'x' if add_generation_prompt }}";
static const char *fault_ctx =
	"{\"messages\": [{\"role\": \"user\", \"content\": \" Hello There \"},"
	"{\"role\": \"assistant\", \"content\": \"Hi ü\"}], \"tools\": [{\"type\": \"function\"}],"
	"\"add_generation_prompt\": true}";

static void test_fault_injection(void)
{
	char *want = NULL, *out;
	ing_err err = { 0 };
	ing_mem_fail_at(0, 0);
	CHECK(render(fault_src, fault_ctx, &want, &err) == ING_OK, "fault template: %s", err.msg);
	long total = ing_mem_count();
	if (!want)
		return;
	for (long nth = 1; nth <= total; nth++) {
		for (int sticky = 1; sticky >= 0; sticky--) {
			size_t live = ing_mem_live();
			ing_mem_fail_at(nth, sticky);
			int rc = render(fault_src, fault_ctx, &out, &err);
			ing_mem_fail_at(0, 0);
			if (rc == ING_OK)
				CHECK(!sticky && !strcmp(out, want), "allocation %ld (sticky %d) failed, yet "
				      "rendered: %s", nth, sticky, out);
			else
				CHECK(rc == ING_ERR_NOMEM && !out, "allocation %ld (sticky %d): rc %d %s", nth,
				      sticky, rc, err.msg);
			ing_free(out);
			CHECK(ing_mem_live() == live, "leak after failing allocation %ld (sticky %d)", nth,
			      sticky);
		}
	}
	printf("fault injection: each of %ld allocations failed in turn\n", total);
	ing_free(want);
}

/* ---------------------------------------------------------------- threads */

struct thread_arg {
	const struct template *t;
	const char *ctx, *want;
	int bad;
};

static void *render_thread(void *p)
{
	struct thread_arg *a = p;
	struct tm now = fixed_now();
	struct template_opts o = { .now = &now };
	for (int i = 0; i < 50; i++) {
		char *out;
		size_t n;
		ing_err err = { 0 };
		if (template_render_json(a->t, a->ctx, strlen(a->ctx), &o, &out, &n, &err) ||
		    strcmp(out, a->want))
			a->bad++;
		ing_free(out);
	}
	return NULL;
}

static void test_threads(void)
{
	struct template *t;
	ing_err err = { 0 };
	char *want;
	CHECK(render(fault_src, fault_ctx, &want, &err) == ING_OK, "%s", err.msg);
	CHECK(template_parse(fault_src, strlen(fault_src), &t, &err) == ING_OK, "%s", err.msg);
	pthread_t th[4];
	struct thread_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (struct thread_arg){ .t = t, .ctx = fault_ctx, .want = want };
		pthread_create(&th[i], NULL, render_thread, &args[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK(args[i].bad == 0, "thread %d: %d bad renders", i, args[i].bad);
	}
	template_free(t);
	ing_free(want);
}

/* A render on a thread with a small stack fails cleanly when a template
 * recurses, instead of overflowing the stack. */
static void *deep_thread(void *p)
{
	ing_err *err = p;
	char *out = NULL;
	render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{}", &out, err);
	ing_free(out);
	return NULL;
}

static void test_small_stack(void)
{
	pthread_attr_t a;
	pthread_t th;
	ing_err err = { 0 };
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 160 << 10);
	CHECK(pthread_create(&th, &a, deep_thread, &err) == 0, "pthread_create");
	pthread_join(th, NULL);
	pthread_attr_destroy(&a);
	CHECK(err.code == ING_ERR_RANGE && strstr(err.msg, "nested"), "small stack: %d %s", err.code,
	      err.msg);
}

int main(void)
{
	size_t live = ing_mem_live();
	printf("conformance (../shared/testdata/templates):\n");
	test_conformance();
	CHECK(ing_mem_live() == live, "conformance leaked %zu bytes", ing_mem_live() - live);
	test_golden();
	CHECK(ing_mem_live() == live, "golden leaked %zu bytes", ing_mem_live() - live);
	test_errors();
	CHECK(ing_mem_live() == live, "errors leaked %zu bytes", ing_mem_live() - live);
	test_limits();
	CHECK(ing_mem_live() == live, "limits leaked %zu bytes", ing_mem_live() - live);
	test_clock();
	test_fault_injection();
	test_threads();
	test_small_stack();
	CHECK(ing_mem_live() == live, "leaked %zu bytes", ing_mem_live() - live);
	return check_summary("test_template");
}
