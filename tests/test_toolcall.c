/* test_toolcall.c — function calls parsed out of model text, per family:
 * the format each shared chat template teaches is detected from its
 * source; replies in each format (one call, several, content before,
 * missing closing tags, malformed ones that must stay content) parse into
 * name + JSON arguments; the streaming content prefix stops before a
 * marker, even a partial one; forced-call frames parse back. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mem.h"
#include "toolcall.h"

#define DS_CALLS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>"

static void test_detect(void)
{
	static const struct {
		const char *file;
		enum toolcall_format f;
	} cases[] = {
		{ "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", TOOLCALL_HERMES },
		{ "Qwen-Qwen2.5-7B-Instruct", TOOLCALL_HERMES },
		{ "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", TOOLCALL_DEEPSEEK_R1 },
		{ "llama-cpp-deepseek-r1", TOOLCALL_DEEPSEEK_R1 },
		{ "meetkai-functionary-medium-v3.1", TOOLCALL_FUNCTIONARY },
		{ "meta-llama-Llama-3.1-8B-Instruct", TOOLCALL_LLAMA3 },
		{ "meta-llama-Llama-3.2-3B-Instruct", TOOLCALL_LLAMA3 },
		{ "google-gemma-2-2b-it", TOOLCALL_HERMES },
		{ "microsoft-Phi-3.5-mini-instruct", TOOLCALL_HERMES },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char path[512];
		size_t n = 0;
		snprintf(path, sizeof path, "%s/templates/%s.jinja", check_testdata_dir(),
			 cases[i].file);
		char *src = check_read_file(path, &n);
		CHECK(src, "cannot read %s", path);
		if (!src)
			continue;
		enum toolcall_format f = toolcall_format_detect(src, n);
		CHECK(f == cases[i].f, "%s: detected %s", cases[i].file, toolcall_format_name(f));
		free(src);
	}
	static const char mistral[] = "{%- if message.tool_calls %}[TOOL_CALLS] [{% endif %}";
	CHECK(toolcall_format_detect(mistral, sizeof mistral - 1) == TOOLCALL_MISTRAL, "mistral");
}

/* Parses text and compares: content, then name/arguments pairs (NULL
 * ends). */
static void expect(enum toolcall_format f, const char *text, const char *content, ...)
{
	struct toolcall_list l;
	ing_err err;
	int rc = toolcall_parse(f, text, strlen(text), &l, &err);
	CHECK(rc == ING_OK, "%s: rc %d", text, rc);
	CHECK(l.content_len == strlen(content) && !memcmp(text, content, l.content_len),
	      "[%s] %s: content '%.*s', want '%s'", toolcall_format_name(f), text,
	      (int)l.content_len, text, content);
	va_list ap;
	va_start(ap, content);
	int i = 0;
	for (const char *name; (name = va_arg(ap, const char *)); i++) {
		const char *args = va_arg(ap, const char *);
		CHECK(i < l.n, "[%s] %s: call %d missing", toolcall_format_name(f), text, i);
		if (i >= l.n)
			continue;
		CHECK(!strcmp(l.v[i].name, name), "call %d name '%s', want '%s'", i, l.v[i].name, name);
		CHECK(!strcmp(l.v[i].arguments, args), "call %d args '%s', want '%s'", i,
		      l.v[i].arguments, args);
	}
	va_end(ap);
	CHECK(l.n == i, "[%s] %s: %d calls, want %d", toolcall_format_name(f), text, l.n, i);
	toolcall_list_free(&l);
}

static void test_hermes(void)
{
	enum toolcall_format f = TOOLCALL_HERMES;
	expect(f, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\xc3\xbcrich\"}}\n</tool_call>",
	       "", "get_weather", "{\"city\":\"Z\xc3\xbcrich\"}", NULL);
	expect(f, "Let me check.\n<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n"
		  "<tool_call>{\"name\": \"b\", \"arguments\": {\"x\": [1, 2]}}</tool_call>",
	       "Let me check.", "a", "{}", "b", "{\"x\":[1,2]}", NULL);
	/* stopped at the closing tag; arguments given as a JSON string */
	expect(f, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"k\\\": 1}\"}",
	       "", "f", "{\"k\": 1}", NULL);
	/* no arguments at all */
	expect(f, "<tool_call>{\"name\": \"now\"}</tool_call>", "", "now", "{}", NULL);
	/* malformed: all content */
	expect(f, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": </tool_call>",
	       "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": </tool_call>", NULL);
	expect(f, "<tool_call>{\"arguments\": {}}</tool_call>",
	       "<tool_call>{\"arguments\": {}}</tool_call>", NULL);
	expect(f, "<tool_call>{\"name\": \"f\"} junk", "<tool_call>{\"name\": \"f\"} junk", NULL);
	expect(f, "plain answer", "plain answer", NULL);
	expect(f, "", "", NULL);
}

static void test_llama3(void)
{
	enum toolcall_format f = TOOLCALL_LLAMA3;
	expect(f, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "",
	       "get_weather", "{\"city\":\"Paris\"}", NULL);
	expect(f, "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", "
		  "\"parameters\": {\"n\": 1}}<|eom_id|>",
	       "", "a", "{}", "b", "{\"n\":1}", NULL);
	expect(f, "  {\"name\": \"a\", \"arguments\": {\"q\": \"x\"}}", "", "a", "{\"q\":\"x\"}", NULL);
	expect(f, "The answer is {\"name\": \"a\"}", "The answer is {\"name\": \"a\"}", NULL);
	expect(f, "{\"not\": \"a call\"}", "{\"not\": \"a call\"}", NULL);
	expect(f, "{\"name\": \"a\", \"parameters\": {}} and more",
	       "{\"name\": \"a\", \"parameters\": {}} and more", NULL);
}

static void test_functionary(void)
{
	enum toolcall_format f = TOOLCALL_FUNCTIONARY;
	expect(f, "<function=get_weather>{\"city\": \"Paris\"}</function>", "", "get_weather",
	       "{\"city\":\"Paris\"}", NULL);
	expect(f, "Sure. <function=a>{}</function><function=b>{\"x\": true}</function><|eom_id|>",
	       "Sure.", "a", "{}", "b", "{\"x\":true}", NULL);
	expect(f, "<|python_tag|>print(1 + 1)", "", "python", "{\"code\":\"print(1 + 1)\"}", NULL);
	expect(f, "<function=a>not json</function>", "<function=a>not json</function>", NULL);
	expect(f, "<function=>{}</function>", "<function=>{}</function>", NULL);
}

static void test_deepseek(void)
{
	enum toolcall_format f = TOOLCALL_DEEPSEEK_R1;
	expect(f, "<think>\nneed weather\n</think>\n\n" DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP
		  "get_weather\n```json\n{\"city\": \"Paris\"}\n```" DS_CALL_END DS_CALLS_END,
	       "<think>\nneed weather\n</think>", "get_weather", "{\"city\":\"Paris\"}", NULL);
	expect(f, DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "a\n```json\n{}\n```" DS_CALL_END
		  "\n" DS_CALL_BEGIN "function" DS_SEP "b\n```json\n{\"k\": 2}\n```" DS_CALL_END
		  DS_CALLS_END,
	       "", "a", "{}", "b", "{\"k\":2}", NULL);
	/* no fence, no outer markers, stopped before the end */
	expect(f, DS_CALL_BEGIN "function" DS_SEP "a\n{\"k\": 1}", "", "a", "{\"k\":1}", NULL);
	expect(f, DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "a\n```json\n{oops\n```",
	       DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "a\n```json\n{oops\n```", NULL);
}

static void test_mistral(void)
{
	enum toolcall_format f = TOOLCALL_MISTRAL;
	expect(f, "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
		  "\"id\": \"abcdefghi\"}, {\"name\": \"b\", \"arguments\": {}}]",
	       "", "get_weather", "{\"city\":\"Paris\"}", "b", "{}", NULL);
	expect(f, "ok [TOOL_CALLS]{\"name\": \"a\", \"arguments\": {}}", "ok", "a", "{}", NULL);
	expect(f, "[TOOL_CALLS] []", "[TOOL_CALLS] []", NULL);
	expect(f, "[TOOL_CALLS] [{\"name\": 3}]", "[TOOL_CALLS] [{\"name\": 3}]", NULL);
}

static size_t prefix(enum toolcall_format f, const char *s)
{
	return toolcall_content_prefix(f, s, strlen(s));
}

static void test_content_prefix(void)
{
	CHECK(prefix(TOOLCALL_HERMES, "hello") == 5, "plain");
	CHECK(prefix(TOOLCALL_HERMES, "hello <tool") == 6, "partial marker held");
	CHECK(prefix(TOOLCALL_HERMES, "hello <tool_call>{") == 6, "marker");
	CHECK(prefix(TOOLCALL_HERMES, "a < b") == 5, "a '<' that cannot start a marker any more");
	CHECK(prefix(TOOLCALL_HERMES, "a <") == 2, "a '<' at the end");
	CHECK(prefix(TOOLCALL_LLAMA3, "  ") == 0, "llama3: leading space held");
	CHECK(prefix(TOOLCALL_LLAMA3, " {\"na") == 0, "llama3: object");
	CHECK(prefix(TOOLCALL_LLAMA3, "<|pyt") == 0, "llama3: python tag");
	CHECK(prefix(TOOLCALL_LLAMA3, "Hi") == 2, "llama3: text");
	CHECK(prefix(TOOLCALL_FUNCTIONARY, "x<function") == 1, "functionary");
	CHECK(prefix(TOOLCALL_MISTRAL, "x[TOOL") == 1, "mistral");
	CHECK(prefix(TOOLCALL_DEEPSEEK_R1, "x" DS_CALLS_BEGIN) == 1, "deepseek");
	CHECK(prefix(TOOLCALL_DEEPSEEK_R1, "x<\xef\xbd") == 1, "deepseek partial");
}

static size_t complete(enum toolcall_format f, const char *s)
{
	return toolcall_complete_prefix(f, s, strlen(s));
}

/* Output cut off in a later call: the text up to the last call that closed. */
static void test_complete_prefix(void)
{
	const char *one = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>";
	char two[256];
	snprintf(two, sizeof two, "%s\n<tool_call>\n{\"name\": \"b\", \"argu", one);
	CHECK(complete(TOOLCALL_HERMES, two) == strlen(one), "hermes: up to the closed call");
	CHECK(complete(TOOLCALL_HERMES, one) == strlen(one), "hermes: all closed");
	CHECK(complete(TOOLCALL_HERMES, "<tool_call>\n{\"name\": \"a\"") == 0, "hermes: none closed");
	expect(TOOLCALL_HERMES, one, "", "a", "{}", NULL);
	CHECK(complete(TOOLCALL_FUNCTIONARY, "<function=a>{}</function><function=b>{\"x") ==
		      strlen("<function=a>{}</function>"),
	      "functionary");
	CHECK(complete(TOOLCALL_MISTRAL, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {") == 0,
	      "mistral: one frame for all calls");
	CHECK(complete(TOOLCALL_HERMES, "") == 0, "empty");
}

static void test_frames(void)
{
	for (int f = TOOLCALL_HERMES; f <= TOOLCALL_MISTRAL; f++) {
		struct sbuf pre = { 0 }, suf = { 0 }, all = { 0 };
		CHECK(toolcall_frame((enum toolcall_format)f, "get_weather", &pre, &suf) == 0, "frame");
		sbuf_puts(&all, pre.p);
		sbuf_puts(&all, "{\"city\": \"Oslo\"}");
		sbuf_puts(&all, suf.p);
		expect((enum toolcall_format)f, all.p, "", "get_weather", "{\"city\":\"Oslo\"}", NULL);
		CHECK(toolcall_content_prefix((enum toolcall_format)f, pre.p, pre.len) == 0,
		      "%s: frame starts a call", toolcall_format_name((enum toolcall_format)f));
		sbuf_free(&pre);
		sbuf_free(&suf);
		sbuf_free(&all);
	}
}

int main(void)
{
	test_detect();
	test_hermes();
	test_llama3();
	test_functionary();
	test_deepseek();
	test_mistral();
	test_content_prefix();
	test_complete_prefix();
	test_frames();
	return check_summary("test_toolcall");
}
