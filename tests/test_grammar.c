/* test_grammar.c — JSON schema grammars: texts accepted and rejected byte
 * by byte, schemas refused with the construct named, token masks checked
 * against a brute-force scan of a synthetic vocabulary on random walks,
 * and (with the default model installed) the mask cost on Gemma's 262k
 * vocabulary. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "grammar.h"
#include "grammar_int.h"
#include "mem.h"
#include "sample.h"
#include "tokenizer.h"

static struct grammar *compile(const char *schema)
{
	struct grammar *g = NULL;
	ing_err err = { 0 };
	int rc = schema ? grammar_from_json_schema(schema, strlen(schema), &g, &err)
			: grammar_json_object(&g, &err);
	CHECK(rc == ING_OK, "schema compiles: %s: %s", schema ? schema : "json_object", err.msg);
	return g;
}

/* text is a complete sentence of g */
static bool accepts(struct grammar *g, const char *text)
{
	struct grammar_matcher *m;
	ing_err err = { 0 };
	if (grammar_matcher_create(g, NULL, &m, &err))
		return false;
	bool ok = grammar_matcher_accept_bytes(m, text, strlen(text)) && grammar_matcher_can_end(m);
	/* byte by byte agrees with all at once */
	struct grammar_matcher *m2;
	if (grammar_matcher_create(g, NULL, &m2, &err) == ING_OK) {
		bool ok2 = true;
		for (size_t i = 0; text[i] && ok2; i++)
			ok2 = grammar_matcher_accept_bytes(m2, text + i, 1);
		ok2 = ok2 && grammar_matcher_can_end(m2);
		CHECK(ok == ok2, "byte by byte agrees on %s", text);
		grammar_matcher_free(m2);
	}
	grammar_matcher_free(m);
	return ok;
}

struct case_ {
	const char *schema;
	const char *yes[8];
	const char *no[10];
};

static const struct case_ cases[] = {
	{ NULL,
	  { "{}", " {}", "\n{}", "{\"a\": [1, 2.5e3, \"x\", true, null, {\"b\": {}}]}", "{\n  \"k\": \"\\u00e9\\n\"\n}",
	    "{\"\xc3\xa9\": -0.5}" },
	  { "", "[]", "{", "{} ", "  {}", "{\"a\" 1}", "{\"a\": 01}", "{\"a\": \"\\x\"}",
	    "{\"a\": \"\xc3\"}", "{\"a\": \"\\ud800\"}" } },
	{ "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
	  "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150}},"
	  "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
	  { "{\"name\": \"Bo\", \"age\": 42}", "{\"name\":\"\",\"age\":0}", "{\"name\": \"x\", \"age\": 150}" },
	  { "{\"age\": 42, \"name\": \"Bo\"}", "{\"name\": \"Bo\"}", "{\"name\": \"Bo\", \"age\": 151}",
	    "{\"name\": \"Bo\", \"age\": -1}", "{\"name\": \"Bo\", \"age\": 042}",
	    "{\"name\": \"Bo\", \"age\": 4.5}", "{\"name\": \"Bo\", \"age\": 42, \"x\": 1}" } },
	{ "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"type\":\"null\"},"
	  "\"c\":{\"enum\":[\"red\",1,null]}},\"required\":[\"b\"]}",
	  { "{\"b\": null}", "{\"a\": true, \"b\": null}", "{\"b\": null, \"c\": \"red\"}",
	    "{\"a\": false, \"b\": null, \"c\": 1}" },
	  { "{}", "{\"a\": true}", "{\"b\": null, \"c\": \"blue\"}", "{\"b\": null,}", "{,\"b\": null}" } },
	{ "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":12},"
	  "\"minItems\":2,\"maxItems\":3}",
	  { "[1, 2]", "[-5,12,0]", "[ 3 , 4 ]" },
	  { "[]", "[1]", "[1,2,3,4]", "[13, 1]", "[-6, 1]", "[-0, 1]", "[1, 2,]" } },
	{ "{\"type\":\"array\",\"prefixItems\":[{\"const\":\"x\"},{\"type\":\"number\"}],\"items\":false}",
	  { "[]", "[\"x\"]", "[\"x\", 1.5]" }, { "[\"y\"]", "[\"x\", 1, 2]" } },
	{ "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":3},{\"type\":\"number\",\"minimum\":10,"
	  "\"exclusiveMaximum\":20}]}",
	  { "\"abc\"", "\"\"", "\"\xe2\x82\xac\xe2\x82\xac\"", "10", "18.999999", "15.5", "19" },
	  { "\"abcd\"", "9.5", "20", "19.5", "1e1", "-10" } },
	{ "{\"type\":\"number\",\"minimum\":-3,\"maximum\":-1}",
	  { "-3", "-1", "-2.5", "-1.0", "-2" }, { "0", "-0.5", "-3.5", "-4" } },
	{ "{\"type\":\"string\",\"format\":\"date\"}",
	  { "\"2024-02-28\"", "\"1999-12-31\"", "\"2000-04-30\"" },
	  { "\"2024-02-30\"", "\"2024-04-31\"", "\"2024-13-01\"", "\"2024-00-10\"", "\"24-01-01\"" } },
	{ "{\"type\":\"string\",\"format\":\"date-time\"}",
	  { "\"2024-02-28T12:30:00Z\"", "\"2024-02-28T23:59:59.123+05:30\"" },
	  { "\"2024-02-28T24:00:00Z\"", "\"2024-02-28 12:30:00Z\"", "\"2024-02-28T12:30:00\"" } },
	{ "{\"type\":\"string\",\"format\":\"uuid\"}",
	  { "\"123e4567-e89b-12d3-a456-426614174000\"" }, { "\"123e4567e89b12d3a456426614174000\"" } },
	{ "{\"type\":\"string\",\"format\":\"ipv4\"}",
	  { "\"192.168.0.1\"", "\"0.0.0.0\"", "\"255.255.255.255\"" },
	  { "\"256.1.1.1\"", "\"01.1.1.1\"", "\"1.1.1\"" } },
	{ "{\"type\":\"string\",\"format\":\"email\"}", { "\"a.b+c@example.com\"" }, { "\"a@b\"", "\"@x.com\"" } },
	/* pattern: anchored or padded; what JSON escapes only where the pattern
	 * names it (a class leaves '"' out) */
	{ "{\"type\":\"string\",\"pattern\":\"^[a-c]+$\"}",
	  { "\"abc\"", "\"a\"" },
	  { "\"\"", "\"abd\"", "\"ab\\\"\"", "\"abc\" " } },
	{ "{\"type\":\"string\",\"pattern\":\"\\\\d{3}\"}",
	  { "\"x123y\"", "\"123\"", "\"1234\"" },
	  { "\"12\"", "\"a1b2c3\"" } },
	{ "{\"type\":\"string\",\"pattern\":\"^ab\"}",
	  { "\"abzz\"", "\"ab\"" },
	  { "\"zab\"" } },
	{ "{\"type\":\"string\",\"pattern\":\"c$\"}",
	  { "\"abc\"", "\"c\"" },
	  { "\"ca\"" } },
	{ "{\"pattern\":\"^a\\\"b\\\\\\\\c\\\\n$\"}",
	  { "\"a\\\"b\\\\c\\n\"" },
	  { "\"a\"b\\\\c\\n\"", "\"a\\u0022b\\\\c\\n\"" } },
	{ "{\"type\":\"string\",\"pattern\":\"^[^x]+$\"}",
	  { "\"ab\"", "\"é\"" },
	  { "\"a\\\"\"", "\"ax\"" } },
	{ "{\"type\":\"string\",\"pattern\":\"^(cat|dog)s?$\"}",
	  { "\"cats\"", "\"dog\"" },
	  { "\"cow\"", "\"catss\"" } },
	{ "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
	  "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
	  "\"required\":[\"v\",\"next\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}",
	  { "{\"v\": 1, \"next\": null}", "{\"v\": 1, \"next\": {\"v\": 2, \"next\": null}}" },
	  { "{\"v\": 1}", "{\"v\": 1, \"next\": {\"v\": 2}}" } },
	{ "{\"type\":[\"string\",\"null\"]}", { "\"x\"", "null" }, { "1", "{}" } },
	{ "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
	  { "{}", "{\"a\": 1, \"b\": -2}" }, { "{\"a\": \"x\"}" } },
	{ "{}", { "1", "\"s\"", "[]", "{\"a\":[null]}" }, { "nul", "tru" } },
	{ "{\"const\":{\"a\":[1,\"\xc3\xa9\"]}}", { "{\"a\":[1,\"\xc3\xa9\"]}" }, { "{\"a\": [1,\"\xc3\xa9\"]}" } },
	{ "{\"type\":\"string\",\"minLength\":2,\"maxLength\":2}", { "\"ab\"", "\"\\n\\u0041\"" }, { "\"a\"", "\"abc\"" } },
	{ "{\"type\":\"integer\",\"exclusiveMinimum\":99,\"maximum\":1000}",
	  { "100", "999", "1000" }, { "99", "1001", "100.5" } },
	{ "{\"type\":\"string\",\"maxLength\":25}",
	  { "\"" "0123456789" "0123456789" "01234" "\"" }, { "\"" "0123456789" "0123456789" "012345" "\"" } },
};

/* Integer bounds: every probe value accepted exactly when it lies within
 * them (an unbounded side stops at 16 digits), and a one-sided bound
 * builds a small grammar (its 16-digit ranges once split into 2^16
 * branches: half a second and a quarter of a gigabyte per schema). */
static void test_int_ranges(void)
{
	const long long none = LLONG_MIN, lim = 9999999999999999ll;
	static const long long bounds[][2] = {
		{ 0, 150 },   { -5, 12 },  { 7, 7 },       { -1000, -999 }, { 99, 1000 },
		{ 100, 999 }, { 1, 9 },    { 10, 99 },     { -3, -1 },      { -987654321, 1234567 },
		{ 0, LLONG_MIN },  { -5, LLONG_MIN },  { 123, LLONG_MIN },
		{ LLONG_MIN, 5 },  { LLONG_MIN, -20 }, { LLONG_MIN, 1000000 },
	};
	long long probes[2300 + 4 * 17 + 8];
	int np = 0;
	for (long long v = -1100; v <= 1100; v++)
		probes[np++] = v;
	for (long long p = 10; p <= 10000000000000000ll; p *= 10) {
		probes[np++] = p - 1, probes[np++] = p;
		probes[np++] = 1 - p, probes[np++] = -p;
	}
	probes[np++] = 1234567, probes[np++] = 1234568, probes[np++] = -987654321;
	probes[np++] = -987654322;
	for (size_t i = 0; i < sizeof bounds / sizeof *bounds; i++) {
		const long long lo = bounds[i][0], hi = bounds[i][1];
		char schema[160], num[32];
		int k = snprintf(schema, sizeof schema, "{\"type\":\"integer\"");
		if (lo != none)
			k += snprintf(schema + k, sizeof schema - (size_t)k, ",\"minimum\":%lld", lo);
		if (hi != none)
			k += snprintf(schema + k, sizeof schema - (size_t)k, ",\"maximum\":%lld", hi);
		snprintf(schema + k, sizeof schema - (size_t)k, "}");
		size_t live = ing_mem_live();
		struct grammar *g = compile(schema);
		if (!g)
			continue;
		CHECK(ing_mem_live() - live < (1u << 20), "%s: %zu bytes of grammar", schema,
		      ing_mem_live() - live);
		int bad = 0;
		for (int j = 0; j < np; j++) {
			const long long v = probes[j];
			const bool want = (lo == none ? v >= -lim : v >= lo) && (hi == none ? v <= lim : v <= hi);
			snprintf(num, sizeof num, "%lld", v);
			if (accepts(g, num) != want && bad++ < 3)
				CHECK(false, "%s: %s %s", schema, num, want ? "refused" : "accepted");
		}
		grammar_free(g);
	}
}

/* Large grammars: thousands of GBNF rules (names found through a hash
 * table), of required properties (found by binary search) and of anyOf
 * branches compile and mean what they say. (Each had a step quadratic in
 * its size; these sizes would still pass slowly, so the tests check the
 * lookups' answers, not the time.) */
static void test_large(void)
{
	enum { RULES = 3000, PROPS = 300 };
	struct sbuf { char *p; size_t n, cap; } t = { 0 };
#define PUT(...)                                                                        \
	do {                                                                            \
		char tmp_[128];                                                         \
		int k_ = snprintf(tmp_, sizeof tmp_, __VA_ARGS__);                      \
		if (t.n + (size_t)k_ + 1 > t.cap) {                                     \
			t.cap = 2 * t.cap + (size_t)k_ + 1;                             \
			t.p = realloc(t.p, t.cap);                                      \
		}                                                                       \
		memcpy(t.p + t.n, tmp_, (size_t)k_ + 1);                                \
		t.n += (size_t)k_;                                                      \
	} while (0)
	/* root ::= r0; r_i ::= ("x" r_{i+1}) | "y" (its rules defined last
	 * first, so every reference but one comes before its definition) */
	PUT("root ::= rule0\n");
	for (int i = RULES - 1; i >= 0; i--) {
		if (i + 1 < RULES)
			PUT("rule%d ::= \"x\" rule%d | \"y\"\n", i, i + 1);
		else
			PUT("rule%d ::= \"y\"\n", i);
	}
	struct grammar *g = NULL;
	ing_err err = { 0 };
	CHECK(grammar_from_gbnf(t.p, t.n, &g, &err) == ING_OK, "%d rules: %s", RULES, err.msg);
	if (g) {
		CHECK(accepts(g, "y") && accepts(g, "xxxy") && !accepts(g, "xxx") && !accepts(g, "yx"),
		      "%d rules: language", RULES);
		grammar_free(g);
	}
	PUT("rule1234 ::= \"z\"\n");
	g = NULL;
	CHECK(grammar_from_gbnf(t.p, t.n, &g, &err) != ING_OK && !g && strstr(err.msg, "defined twice"),
	      "a name among %d defined twice: %s", RULES, err.msg);
	/* properties p0..p299 in order, every third required */
	t.n = 0;
	PUT("{\"type\":\"object\",\"properties\":{");
	for (int i = 0; i < PROPS; i++)
		PUT("%s\"p%d\":{\"const\":%d}", i ? "," : "", i, i);
	PUT("},\"required\":[");
	for (int i = PROPS - 3; i >= 0; i -= 3) /* listed backwards */
		PUT("%s\"p%d\"", i == PROPS - 3 ? "" : ",", i);
	PUT("],\"additionalProperties\":false}");
	g = compile(t.p);
	if (g) {
		char *doc = malloc(16 * PROPS + 16);
		for (int skip = -1; skip <= 4; skip++) {
			size_t n = 0;
			n += (size_t)sprintf(doc + n, "{");
			for (int i = 0, first = 1; i < PROPS; i++)
				if (i != skip && (i % 3 == 0 || i % 7 == 0)) {
					n += (size_t)sprintf(doc + n, "%s\"p%d\":%d", first ? "" : ",", i, i);
					first = 0;
				}
			sprintf(doc + n, "}");
			/* skipping p0 or p3 (required) fails, p4 (not present) or
			 * none passes; p1, p2 were never there */
			const bool want = skip != 0 && skip != 3;
			CHECK(accepts(g, doc) == want, "%d properties, skipping p%d: %s", PROPS, skip,
			      want ? "refused" : "accepted");
		}
		free(doc);
		grammar_free(g);
	}
	t.n = 0;
	PUT("{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},\"required\":[\"b\",\"zz\",\"a\"]}");
	g = NULL;
	CHECK(grammar_from_json_schema(t.p, t.n, &g, &err) == ING_ERR_UNSUPPORTED && !g &&
		      strstr(err.msg, "'zz' is not in"),
	      "a missing required property among others: %s", err.msg);
	/* anyOf of PROPS constants */
	t.n = 0;
	PUT("{\"anyOf\":[");
	for (int i = 0; i < PROPS; i++)
		PUT("%s{\"const\":\"v%d\"}", i ? "," : "", i);
	PUT("]}");
	g = compile(t.p);
	if (g) {
		CHECK(accepts(g, "\"v0\"") && accepts(g, "\"v299\"") && accepts(g, "\"v150\"") &&
			      !accepts(g, "\"v300\"") && !accepts(g, "\"v\""),
		      "anyOf of %d constants", PROPS);
		grammar_free(g);
	}
#undef PUT
	free(t.p);
}

static void test_accept_reject(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct grammar *g = compile(cases[i].schema);
		if (!g)
			continue;
		for (int j = 0; j < 8 && cases[i].yes[j]; j++)
			CHECK(accepts(g, cases[i].yes[j]), "schema %zu accepts %s", i, cases[i].yes[j]);
		for (int j = 0; j < 10 && cases[i].no[j]; j++)
			CHECK(!accepts(g, cases[i].no[j]), "schema %zu rejects %s", i, cases[i].no[j]);
		grammar_free(g);
	}
}

static void test_whitespace_bounded(void)
{
	struct grammar *g = compile(NULL);
	char text[64] = "{\n";
	memset(text + 2, ' ', GRAMMAR_JSON_MAX_WS - 1);
	strcpy(text + 1 + GRAMMAR_JSON_MAX_WS, "}");
	CHECK(accepts(g, text), "newline and %d spaces allowed", GRAMMAR_JSON_MAX_WS - 1);
	text[1 + GRAMMAR_JSON_MAX_WS] = ' ';
	strcpy(text + 2 + GRAMMAR_JSON_MAX_WS, "}");
	CHECK(!accepts(g, text), "newline and %d spaces refused", GRAMMAR_JSON_MAX_WS);
	CHECK(!accepts(g, "{\n\n}"), "blank lines refused");
	CHECK(!accepts(g, "{  }"), "two spaces refused");
	CHECK(accepts(g, "{\"a\" : [ 1 ,\n\t2 ]\n}"), "one space or newline+indent per gap");
	grammar_free(g);
}

static void test_rejected_schemas(void)
{
	static const struct {
		const char *schema;
		int code;
		const char *needle;
	} bad[] = {
		{ "{\"oneOf\":[{\"type\":\"string\"}]}", ING_ERR_UNSUPPORTED, "'oneOf' at #" },
		{ "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\",\"pattern\":\"(?=a)\"}}}",
		  ING_ERR_UNSUPPORTED, "at #/properties/x" },
		{ "{\"type\":\"string\",\"pattern\":\"^a+$\",\"maxLength\":3}", ING_ERR_UNSUPPORTED,
		  "pattern together with" },
		{ "{\"type\":\"string\",\"pattern\":\"a(b\"}", ING_ERR_INVALID, "missing )" },
		{ "{\"type\":\"string\",\"pattern\":5}", ING_ERR_INVALID, "'pattern' must be a string" },
		{ "{\"type\":\"string\",\"format\":\"uri\"}", ING_ERR_UNSUPPORTED, "format 'uri'" },
		{ "{\"type\":\"array\",\"uniqueItems\":true}", ING_ERR_UNSUPPORTED, "uniqueItems" },
		{ "{\"type\":\"number\",\"minimum\":0.5}", ING_ERR_UNSUPPORTED, "non-integer 'minimum'" },
		{ "{\"$ref\":\"http://x/y\"}", ING_ERR_UNSUPPORTED, "$ref" },
		{ "{\"$ref\":\"#/$defs/missing\"}", ING_ERR_UNSUPPORTED, "#/$defs/missing" },
		{ "{\"type\":\"object\",\"required\":[\"a\"]}", ING_ERR_UNSUPPORTED, "'a' is not in" },
		{ "{\"type\":\"wat\"}", ING_ERR_INVALID, "'wat'" },
		{ "[1]", ING_ERR_INVALID, "object or a boolean" },
		{ "{\"type\":", ING_ERR_INVALID, "not valid JSON" },
		{ "false", ING_ERR_UNSUPPORTED, "accepts nothing" },
		{ "{\"allOf\":[{},{}]}", ING_ERR_UNSUPPORTED, "allOf" },
		/* an object that must hold itself: no finite value */
		{ "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":"
		  "\"#/$defs/n\"}},\"required\":[\"next\"]}},\"$ref\":\"#/$defs/n\"}",
		  ING_ERR_UNSUPPORTED, "matches no string" },
		{ "{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", ING_ERR_UNSUPPORTED, "no value" },
		{ "{\"type\":\"object\",\"minProperties\":1}", ING_ERR_UNSUPPORTED, "minProperties" },
		{ "{\"type\":\"string\",\"maxLength\":100000}", ING_ERR_UNSUPPORTED, "maxLength" },
		{ "{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", ING_ERR_UNSUPPORTED,
		  "left-recursive" },
		{ "{\"$defs\":{\"a\":{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/b\"}]},"
		  "\"b\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", ING_ERR_UNSUPPORTED, "left-recursive" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct grammar *g = NULL;
		ing_err err = { 0 };
		int rc = grammar_from_json_schema(bad[i].schema, strlen(bad[i].schema), &g, &err);
		CHECK(rc == bad[i].code && g == NULL && strstr(err.msg, bad[i].needle),
		      "%s refused (%d, want %d): %s", bad[i].schema, rc, bad[i].code, err.msg);
		grammar_free(g);
	}
}

struct text_case {
	bool regex;
	const char *src;
	const char *yes[6];
	const char *no[6];
};

static const struct text_case text_cases[] = {
	{ false, "root ::= \"a\" b* | \"x\"\nb ::= [0-9] # digits\n",
	  { "a", "a123", "x" }, { "", "ab", "xa", "a1x" } },
	{ false, "root ::= greet \" \" name\ngreet ::= (\"hi\" | \"hello\")\n"
		 "  # a comment\nname ::= [A-Z] [a-z]{1,3}",
	  { "hi Bo", "hello Anna" }, { "hi bo", "hello Annabel", "hi B" } },
	{ false, "root ::= [^\"\\\\\\n]+ \"\\n\"", { "abc\n", "\xc3\xa9\xe2\x82\xac\n" }, { "a\"b\n", "\n", "a" } },
	{ false, "root ::= [\\u00e0-\\u00ff\\U0001F600-\\U0001F64F]+",
	  { "\xc3\xa0\xc3\xbf", "\xf0\x9f\x98\x80" }, { "\xc3\x9f", "a", "\xf0\x9f\x99\x90" } },
	{ false, "root ::= .? \"!\"", { "!", "\xe4\xb8\xad!", "\n!" }, { "ab!", "\xe4!" } },
	{ true, "^[a-z]+@[a-z]+\\.(com|org)$", { "bob@example.com", "a@b.org" }, { "bob@example.net", "@a.com", "Bob@a.com" } },
	{ true, "\\d{3}-\\d{4}", { "555-1234" }, { "55-1234", "555-12345", "abc-defg" } },
	{ true, "(?:ab|c)*?x\\.\\w\\s?", { "x.a", "ababcx.Z ", "cx._" }, { "x", "abx.", "x.-" } },
	{ true, "[^a-c]{2}", { "dd", "z\xc3\xa9" }, { "ad", "d", "ddd" } },
};

static void test_text_grammars(void)
{
	for (size_t i = 0; i < sizeof text_cases / sizeof *text_cases; i++) {
		const struct text_case *c = &text_cases[i];
		struct grammar *g = NULL;
		ing_err err = { 0 };
		int rc = c->regex ? grammar_from_regex(c->src, strlen(c->src), &g, &err)
				  : grammar_from_gbnf(c->src, strlen(c->src), &g, &err);
		CHECK(rc == ING_OK, "%s compiles: %s", c->src, err.msg);
		if (!g)
			continue;
		for (int j = 0; j < 6 && c->yes[j]; j++)
			CHECK(accepts(g, c->yes[j]), "%s accepts '%s'", c->src, c->yes[j]);
		for (int j = 0; j < 6 && c->no[j]; j++)
			CHECK(!accepts(g, c->no[j]), "%s rejects '%s'", c->src, c->no[j]);
		grammar_free(g);
	}
	static const struct {
		bool regex;
		const char *src, *needle;
	} bad[] = {
		{ false, "root ::= foo", "undefined rule 'foo'" },
		{ false, "start ::= \"a\"", "undefined rule 'root'" },
		{ false, "root ::= \"a\"\nroot ::= \"b\"", "defined twice" },
		{ false, "root ::= [a-", "unterminated" },
		{ false, "root ::= \"abc", "unterminated literal" },
		{ false, "root ::= root \"a\" | \"b\"", "left-recursive" },
		{ false, "x", "expected 'name ::='" },
		{ true, "a(?=b)", "lookaround" },
		{ true, "(a)\\1", "backreference" },
		{ true, "a{3,1}", "reversed" },
		{ true, "(ab", "missing )" },
		{ true, "ab)", "unbalanced" },
		{ true, "*a", "misplaced" },
		/* empty languages: an empty class, a rule with no way out, an
		 * empty class reached only after a byte */
		{ false, "root ::= []", "matches no string" },
		{ false, "root ::= [^\\x00-\\U0010FFFF]", "matches no string" },
		{ false, "root ::= \"a\" x\nx ::= \"b\" x", "matches no string" },
		{ false, "root ::= \"a\" [] | x\nx ::= \"b\" x", "matches no string" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct grammar *g = NULL;
		ing_err err = { 0 };
		int rc = bad[i].regex ? grammar_from_regex(bad[i].src, strlen(bad[i].src), &g, &err)
				      : grammar_from_gbnf(bad[i].src, strlen(bad[i].src), &g, &err);
		CHECK(rc != ING_OK && !g && strstr(err.msg, bad[i].needle), "'%s' refused: %s", bad[i].src,
		      err.msg);
		grammar_free(g);
	}
}

/* prefix + schema + suffix, repeated, as tool calls use it */
static void test_alts(void)
{
	cJSON *s1 = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
				"\"required\":[\"city\"]}");
	struct grammar_alt alts[] = {
		{ "<tool_call>{\"name\": \"weather\", \"arguments\": ", s1, "}</tool_call>" },
		{ "<tool_call>{\"name\": \"now\", \"arguments\": ", NULL, "}</tool_call>" },
	};
	struct grammar *g = NULL;
	ing_err err = { 0 };
	int rc = grammar_from_alts(alts, 2, 1, 2, "\n", &g, &err);
	CHECK(rc == ING_OK, "alts compile: %s", err.msg);
	if (g) {
		CHECK(accepts(g, "<tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>"),
		      "one call");
		CHECK(accepts(g, "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>\n"
				 "<tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"\"}}</tool_call>"),
		      "two calls");
		CHECK(!accepts(g, "<tool_call>{\"name\": \"weather\", \"arguments\": {}}</tool_call>"),
		      "required argument");
		CHECK(!accepts(g, ""), "at least one call");
	}
	grammar_free(g);
	cJSON_Delete(s1);
}

/* ---- tokens: a synthetic SentencePiece vocabulary ---- */

static const char *extra_pieces[] = {
	"{", "}", "[", "]", "\"", ",", ":", " ", "\n", "  ", "\n  ", "{\"", "\":", "\": ", "\",",
	", \"", "\"}", "}}", "]}", "true", "false", "null", "nul", "1", "12", "0", "00", "-",
	"-1", ".", ".5", "e", "E+", "name", "age", "\xe2\x96\x81name", "ab", "a\"", "\\", "\\n",
	"\\u00", "\xc3\xa9", "\xc3", "x\"}", "1,", "10", "\"\"", "<|ctl|>",
};
#define N_EXTRA ((int)(sizeof extra_pieces / sizeof *extra_pieces))
#define TV (3 + 256 + N_EXTRA)

static struct tokenizer *synthetic_vocab(void)
{
	static char bytes[256][7];
	const char *toks[TV];
	int32_t types[TV];
	float scores[TV];
	const char *head[] = { "<unk>", "<s>", "</s>" };
	const int32_t head_type[] = { 2, 3, 3 };
	for (int i = 0; i < 3; i++) {
		toks[i] = head[i];
		types[i] = head_type[i];
	}
	for (int b = 0; b < 256; b++) {
		snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
		toks[3 + b] = bytes[b];
		types[3 + b] = TOKEN_TYPE_BYTE;
	}
	for (int i = 0; i < N_EXTRA; i++) {
		toks[259 + i] = extra_pieces[i];
		types[259 + i] = strcmp(extra_pieces[i], "<|ctl|>") ? 1 : 3;
	}
	for (int i = 0; i < TV; i++)
		scores[i] = -(float)i;
	struct gguf_writer w;
	gguf_writer_init(&w, 3);
	gguf_writer_kv_str(&w, "tokenizer.ggml.model", "llama");
	gguf_writer_kv_bool(&w, "tokenizer.ggml.add_space_prefix", false);
	gguf_writer_kv_arr_str(&w, "tokenizer.ggml.tokens", TV, toks);
	gguf_writer_kv_arr_i32(&w, "tokenizer.ggml.token_type", TV, types);
	gguf_writer_kv_arr_f32(&w, "tokenizer.ggml.scores", TV, scores);
	gguf_writer_kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
	uint8_t *buf;
	size_t size;
	struct gguf *gg;
	gguf_writer_finish(&w, &buf, &size);
	ing_err err = { 0 };
	struct tokenizer *tk = NULL;
	if (gguf_open_memory(buf, size, &gg, &err) == ING_OK) {
		CHECK(tokenizer_open(gg, &tk, &err) == ING_OK, "synthetic vocab: %s", err.msg);
		gguf_close(gg);
	}
	free(buf);
	gguf_writer_free(&w);
	return tk;
}

/* Whether tok may follow text: a fresh matcher replays text, then tok. */
static bool brute_allowed(struct grammar *g, const struct grammar_vocab *v, const char *text,
			  size_t n, int32_t tok)
{
	struct grammar_matcher *m;
	ing_err err = { 0 };
	if (grammar_matcher_create(g, v, &m, &err))
		return false;
	bool ok = grammar_matcher_accept_bytes(m, text, n) && grammar_matcher_accept_token(m, tok);
	grammar_matcher_free(m);
	return ok;
}

static void random_walks(struct grammar *g, const struct grammar_vocab *v,
			 const struct tokenizer *tk, unsigned seed, const char *what)
{
	srand(seed);
	for (int walk = 0; walk < 6; walk++) {
		struct grammar_matcher *m;
		ing_err err = { 0 };
		if (grammar_matcher_create(g, v, &m, &err))
			return;
		char text[4096];
		size_t n = 0;
		float logits[TV];
		for (int stepno = 0; stepno < 60; stepno++) {
			for (int i = 0; i < TV; i++)
				logits[i] = 0;
			int64_t allowed = grammar_matcher_mask(m, logits, NULL);
			int64_t count = 0, mismatches = 0;
			int32_t pick[TV];
			for (int32_t t = 0; t < TV; t++) {
				bool a = logits[t] == 0;
				count += a;
				if (a != brute_allowed(g, v, text, n, t))
					mismatches++;
				if (a)
					pick[count - 1] = t;
			}
			CHECK(mismatches == 0 && allowed == count,
			      "%s walk %d step %d: mask matches brute force (%lld mismatches, %lld vs %lld) after '%.*s'",
			      what, walk, stepno, (long long)mismatches, (long long)allowed,
			      (long long)count, (int)n, text);
			if (count == 0)
				break;
			int32_t t = pick[rand() % count];
			if (tokenizer_is_eog(tk, t)) {
				CHECK(grammar_matcher_can_end(m), "EOS only when complete");
				break;
			}
			size_t len;
			const char *p = tokenizer_piece(tk, t, 0, &len);
			if (n + len >= sizeof text)
				break;
			CHECK(grammar_matcher_accept_token(m, t), "allowed token accepted");
			memcpy(text + n, p, len);
			n += len;
			if (grammar_matcher_done(m)) {
				for (int i = 0; i < TV; i++)
					logits[i] = 0;
				CHECK(grammar_matcher_mask(m, logits, NULL) == 1 && logits[2] == 0,
				      "done: only EOS");
				break;
			}
		}
		grammar_matcher_free(m);
	}
}

static void test_token_masks(void)
{
	struct tokenizer *tk = synthetic_vocab();
	if (!tk)
		return;
	struct grammar_vocab *v = NULL;
	ing_err err = { 0 };
	CHECK(grammar_vocab_create(tk, &v, &err) == ING_OK, "vocab: %s", err.msg);
	const char *schemas[] = {
		NULL,
		"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":4},"
		"\"age\":{\"type\":\"integer\",\"minimum\":-1,\"maximum\":12}},\"required\":[\"name\"]}",
		"{\"type\":\"array\",\"items\":{\"enum\":[\"ab\",null,true,1.5]},\"maxItems\":4}",
	};
	for (unsigned i = 0; i < sizeof schemas / sizeof *schemas && v; i++) {
		struct grammar *g = compile(schemas[i]);
		if (g)
			random_walks(g, v, tk, 1234 + i, schemas[i] ? schemas[i] : "json_object");
		grammar_free(g);
	}
	/* control tokens never; EOS at the start of an object grammar never */
	struct grammar *g = compile(NULL);
	struct grammar_matcher *m = NULL;
	if (g && v && grammar_matcher_create(g, v, &m, &err) == ING_OK) {
		CHECK(!grammar_matcher_accept_token(m, 2), "EOS refused at the start");
		CHECK(!grammar_matcher_accept_token(m, TV - 1), "control token refused");
		CHECK(!grammar_matcher_accept_token(m, 1), "BOS refused");
		CHECK(grammar_matcher_accept_token(m, 259 + 11), "{\" accepted");
	}
	grammar_matcher_free(m);
	grammar_free(g);
	grammar_vocab_free(v);
	tokenizer_close(tk);
}

/* Bytes that no class of the grammar tells apart share a group, and one
 * closure fills the transitions of the whole group. */
static void test_byte_classes(void)
{
	struct grammar *g = NULL;
	ing_err err = { 0 };
	CHECK(grammar_from_regex("[a-c]x|b", 8, &g, &err) == ING_OK, "[a-c]x|b: %s", err.msg);
	if (!g)
		return;
	const uint8_t *bc = g->byte_class;
	CHECK(bc['a'] == bc['c'] && bc['a'] != bc['b'] && bc['a'] != bc['x'] && bc['b'] != bc['x'],
	      "a and c share a group, b and x have their own");
	bool rest = true;
	for (unsigned c = 0; c < 256; c++)
		if (c != 'a' && c != 'b' && c != 'c' && c != 'x')
			rest = rest && bc[c] == bc[0];
	CHECK(rest && bc[0] != bc['a'] && bc[0] != bc['b'] && bc[0] != bc['x'],
	      "every other byte in one group");
	/* a transition computed for 'a' serves 'c' without being recomputed */
	struct grammar_matcher *m = NULL;
	if (grammar_matcher_create(g, NULL, &m, &err) == ING_OK) {
		CHECK(grammar_matcher_accept_bytes(m, "a", 1), "a accepted");
		const int32_t *t = g->dfa.st[0].trans; /* the start state: interned first */
		CHECK(t && t['a'] >= 0 && t['c'] == t['a'] && t['b'] == GDFA_UNKNOWN &&
			      t['z'] == GDFA_UNKNOWN,
		      "a's step filled c's entry, not b's or z's");
		CHECK(!grammar_matcher_accept_bytes(m, "c", 1) &&
			      grammar_matcher_accept_bytes(m, "x", 1) && grammar_matcher_done(m),
		      "then only x");
	}
	grammar_matcher_free(m);
	grammar_free(g);
}

/* A mask that needs more automaton work than the budget fails with
 * ING_ERR_UNSUPPORTED and a message saying why, logits untouched; the
 * matcher stays usable, and with the budget back the same mask comes out
 * right (the states built before the failure stayed cached). */
static void test_work_budget(void)
{
	struct tokenizer *tk = synthetic_vocab();
	struct grammar_vocab *v = NULL;
	struct grammar *g = NULL;
	struct grammar_matcher *m = NULL;
	ing_err err = { 0 };
	const char *re = "x(.*[a-m].{12}y)", *text = "xabcdefgh";
	if (tk && grammar_vocab_create(tk, &v, &err) == ING_OK &&
	    grammar_from_regex(re, strlen(re), &g, &err) == ING_OK &&
	    grammar_matcher_create(g, v, &m, &err) == ING_OK) {
		CHECK(grammar_matcher_accept_bytes(m, text, strlen(text)), "%s accepted", text);
		float logits[TV] = { 0 };
		g->dfa.max_work = 10;
		int64_t n = grammar_matcher_mask(m, logits, &err);
		bool untouched = true;
		for (int t = 0; t < TV; t++)
			untouched = untouched && logits[t] == 0;
		CHECK(n == -1 && err.code == ING_ERR_UNSUPPORTED &&
			      strstr(err.msg, "too complex") && untouched,
		      "over the budget: refused (%lld, %s), logits untouched", (long long)n,
		      err.msg);
		g->dfa.max_work = GRAMMAR_MAX_WORK;
		n = grammar_matcher_mask(m, logits, &err);
		int64_t count = 0, mismatches = 0;
		for (int32_t t = 0; t < TV; t++) {
			count += logits[t] == 0;
			bool brute = brute_allowed(g, v, text, strlen(text), t);
			mismatches += (logits[t] == 0) != brute;
		}
		CHECK(n > 0 && n == count && mismatches == 0,
		      "within the budget: the mask is right (%lld allowed, %lld mismatches)",
		      (long long)n, (long long)mismatches);
	}
	CHECK(m != NULL, "set up: %s", err.msg);
	grammar_matcher_free(m);
	grammar_free(g);
	/* a matcher's masks over its life: the same, with its own message */
	g = NULL;
	m = NULL;
	if (v && grammar_from_regex(re, strlen(re), &g, &err) == ING_OK &&
	    grammar_matcher_create(g, v, &m, &err) == ING_OK) {
		float logits[TV] = { 0 };
		int64_t n = grammar_matcher_mask(m, logits, &err);
		CHECK(n > 0, "the start's mask: %s", err.msg);
		g->dfa.max_work_total = 10; /* less than the start's mask took */
		grammar_matcher_accept_bytes(m, text, strlen(text));
		n = grammar_matcher_mask(m, logits, &err);
		CHECK(n == -1 && err.code == ING_ERR_UNSUPPORTED &&
			      strstr(err.msg, "over the output so far"),
		      "over the matcher's budget: refused (%lld, %s)", (long long)n, err.msg);
		g->dfa.max_work_total = GRAMMAR_MAX_WORK_TOTAL;
		CHECK(grammar_matcher_mask(m, logits, &err) > 0, "within it again: %s", err.msg);
	}
	grammar_matcher_free(m);
	grammar_free(g);
	grammar_vocab_free(v);
	tokenizer_close(tk);
}

/* ---- the real vocabulary: mask cost ---- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the machine may be shared */
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Feeds text byte by byte through two matchers of g in turn (the second
 * finds the masks the first built) and prints the mask cost per step. */
static void bench_text(struct grammar *g, const struct grammar_vocab *v, int64_t V,
		       const char *label, const char *text)
{
	float *logits = malloc((size_t)V * sizeof *logits);
	double first = 0, cached = 0, worst_first = 0, worst_cached = 0;
	int steps = 0;
	ing_err err = { 0 };
	for (int pass = 0; pass < 2 && logits; pass++) {
		struct grammar_matcher *mm = NULL;
		grammar_matcher_create(g, v, &mm, &err);
		for (size_t i = 0; text[i] && mm; i++) {
			for (int64_t k = 0; k < V; k++)
				logits[k] = 0;
			double t = now_s();
			int64_t n = grammar_matcher_mask(mm, logits, NULL);
			t = now_s() - t;
			CHECK(n > 0, "%s: tokens allowed at %zu", label, i);
			if (pass == 0 && getenv("GRAMMAR_TRACE"))
				fprintf(stderr, "  %zu %.3f ms\n", i, t * 1e3);
			if (pass == 0) {
				first += t;
				worst_first = t > worst_first ? t : worst_first;
				steps++;
			} else {
				cached += t;
				worst_cached = t > worst_cached ? t : worst_cached;
			}
			CHECK(grammar_matcher_accept_bytes(mm, text + i, 1), "%s: byte %zu", label, i);
		}
		if (mm)
			CHECK(grammar_matcher_done(mm), "%s: complete", label);
		grammar_matcher_free(mm);
	}
	fprintf(stderr, "grammar bench (%s): mask per step over %d steps: first visit mean %.3f ms "
			"(worst %.2f ms), cached mean %.3f ms (worst %.3f ms)\n",
		label, steps, first / steps * 1e3, worst_first * 1e3, cached / steps * 1e3,
		worst_cached * 1e3);
	free(logits);
}

/* The whole per-step cost a grammar adds on the engine thread: mask plus
 * sampling of the masked logits, against sampling unmasked logits, with
 * the OpenAI default sampling (temperature 1, no truncation) and with
 * top-k 40 / top-p 0.95, over the states of text. */
static void bench_step(struct grammar *g, const struct grammar_vocab *v, int64_t V,
		       const char *text)
{
	float *base = malloc((size_t)V * sizeof *base), *x = malloc((size_t)V * sizeof *x);
	struct sample_params sp[2] = { sample_params_default(), sample_params_default() };
	sp[0].temperature = 1.0f, sp[0].top_k = 0, sp[0].top_p = 1.0f, sp[0].min_p = 0.0f;
	ing_err err = { 0 };
	srand(7);
	for (int64_t i = 0; base && i < V; i++)
		base[i] = (float)rand() / (float)RAND_MAX * 20.0f - 10.0f;
	for (int k = 0; k < 2 && base && x; k++) {
		struct sampler *smp = NULL;
		struct grammar_matcher *m = NULL;
		if (sampler_create(&sp[k], V, &smp, &err) || grammar_matcher_create(g, v, &m, &err)) {
			sampler_free(smp);
			break;
		}
		double with = 0, without = 0;
		int steps = 0;
		for (size_t i = 0; text[i]; i++, steps++) {
			memcpy(x, base, (size_t)V * sizeof *x);
			double t = now_s();
			sampler_sample(smp, x);
			without += now_s() - t;
			memcpy(x, base, (size_t)V * sizeof *x);
			t = now_s();
			grammar_matcher_mask(m, x, NULL);
			sampler_sample(smp, x);
			with += now_s() - t;
			grammar_matcher_accept_bytes(m, text + i, 1);
		}
		fprintf(stderr, "grammar bench (step, %s): mask + sample %.3f ms vs sample alone %.3f ms "
				"per step (difference %+.3f ms)\n",
			k ? "top-k 40, top-p 0.95" : "temperature 1, no truncation", with / steps * 1e3,
			without / steps * 1e3, (with - without) / steps * 1e3);
		grammar_matcher_free(m);
		sampler_free(smp);
	}
	free(base);
	free(x);
}

static void test_model_vocab(void)
{
	const char *path = check_default_model();
	if (!path)
		return;
	struct gguf *gg;
	struct tokenizer *tk = NULL;
	ing_err err = { 0 };
	if (gguf_open(path, &gg, &err))
		return;
	tokenizer_open(gg, &tk, &err);
	gguf_close(gg);
	if (!tk)
		return;
	struct grammar_vocab *v = NULL;
	double t0 = now_s();
	CHECK(grammar_vocab_create(tk, &v, &err) == ING_OK, "model vocab: %s", err.msg);
	fprintf(stderr, "grammar bench: token trie of %d tokens built in %.0f ms\n",
		tokenizer_n_vocab(tk), (now_s() - t0) * 1e3);
	struct grammar *g = compile("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
				    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
				    "\"n\":{\"type\":\"integer\"}},\"required\":[\"name\",\"tags\",\"n\"]}");
	struct grammar *jo = compile(NULL);
	if (v && g)
		bench_text(g, v, tokenizer_n_vocab(tk), "schema",
			   "{\"name\": \"Alice in Wonderland\", \"tags\": [\"a\", \"bc\"], \"n\": 12}");
	struct grammar *bounded = compile("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
					  "\"string\",\"maxLength\":24}},\"required\":[\"name\"]}");
	if (v && bounded)
		bench_text(bounded, v, tokenizer_n_vocab(tk), "maxLength 24",
			   "{\"name\": \"Alice in Wonderland\"}");
	grammar_free(bounded);
	if (v && jo)
		bench_text(jo, v, tokenizer_n_vocab(tk), "json_object",
			   "{\n  \"device\": {\n    \"name\": \"tesla\",\n    \"spec\": [\"a b\", {\"x\": "
			   "[1.5, -2, true, null]}],\n    \"caf\xc3\xa9\": \"\\u00e9\\n\"\n  },\n  \"ok\": false\n}");
	if (v && jo)
		bench_step(jo, v, tokenizer_n_vocab(tk),
			   "{\"a\": [1, 2, {\"b\": \"some text here\"}], \"c\": null}");
	grammar_free(g);
	grammar_free(jo);
	grammar_vocab_free(v);
	tokenizer_close(tk);
}

int main(void)
{
	test_accept_reject();
	test_int_ranges();
	test_large();
	test_whitespace_bounded();
	test_rejected_schemas();
	test_alts();
	test_text_grammars();
	test_token_masks();
	test_byte_classes();
	test_work_budget();
	test_model_vocab();
	CHECK(ing_mem_live() == 0, "no leaks: %zu bytes live", ing_mem_live());
	return check_summary("grammar");
}
