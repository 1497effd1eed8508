/* test_api_prompt.c — chat prompts of the API on the default model's
 * vocabulary: the built-in Gemma format (system merged into the first user
 * turn), Hugging Face's Gemma template (contents trimmed), special-token
 * text in messages staying text, tokens equal to tokenizing the rendering
 * with special parsing when contents are harmless, template errors as 400,
 * and completion prompts in all four shapes; function calling: tools and a
 * tool call + result through the built-in format and the shared Qwen,
 * Llama 3.1, DeepSeek R1 and Functionary templates (arguments sent as
 * text, given to templates as objects or text as each needs). */
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "check.h"
#include "gguf.h"
#include "mem.h"
#include "template.h"

/* Hugging Face's Gemma 3 template (text contents only). */
static const char hf_gemma[] =
	"{{ bos_token }}\n"
	"{%- if messages[0]['role'] == 'system' -%}\n"
	"    {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
	"    {%- set loop_messages = messages[1:] -%}\n"
	"{%- else -%}\n"
	"    {%- set first_user_prefix = \"\" -%}\n"
	"    {%- set loop_messages = messages -%}\n"
	"{%- endif -%}\n"
	"{%- for message in loop_messages -%}\n"
	"    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
	"        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
	"    {%- endif -%}\n"
	"    {%- if (message['role'] == 'assistant') -%}\n"
	"        {%- set role = \"model\" -%}\n"
	"    {%- else -%}\n"
	"        {%- set role = message['role'] -%}\n"
	"    {%- endif -%}\n"
	"    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
	"    {{- message['content'] | trim }}\n"
	"    {{- '<end_of_turn>\\n' }}\n"
	"{%- endfor -%}\n"
	"{%- if add_generation_prompt -%}\n"
	"    {{'<start_of_turn>model\\n'}}\n"
	"{%- endif -%}\n";

static struct api A;

static int chat(const char *json, struct token_ids *out, struct api_error *e)
{
	cJSON *b = cJSON_Parse(json);
	if (!b)
		return -2;
	*out = (struct token_ids){ 0 };
	int rc = api_prompt_chat(&A, b, true, out, e);
	cJSON_Delete(b);
	return rc;
}

static int count(const struct token_ids *t, int32_t id)
{
	int n = 0;
	for (size_t i = 0; i < t->n; i++)
		n += t->ids[i] == id;
	return n;
}

/* Tokens of text with special parsing (what llama.cpp does to a rendering). */
static int same_as_special(const struct token_ids *t, const char *text)
{
	struct token_ids want = { 0 };
	ing_err err;
	int ok = !tokenizer_encode(A.tk, text, strlen(text), TOKENIZER_PARSE_SPECIAL, &want, &err) &&
		 want.n == t->n && !memcmp(want.ids, t->ids, t->n * sizeof *t->ids);
	if (!ok)
		for (size_t i = 0; i < (t->n > want.n ? t->n : want.n); i++)
			fprintf(stderr, "  %zu: got %d want %d\n", i, i < t->n ? t->ids[i] : -1,
				i < want.n ? want.ids[i] : -1);
	token_ids_free(&want);
	return ok;
}

static void test_builtin(void)
{
	struct token_ids t;
	struct api_error e;
	CHECK(!chat("{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
		    "{\"role\":\"user\",\"content\":\"Hi there\"},"
		    "{\"role\":\"assistant\",\"content\":\"Hello!\"},"
		    "{\"role\":\"user\",\"content\":\"Name a color.\"}]}", &t, &e),
	      "%s", e.message);
	CHECK(same_as_special(&t, "<bos><start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n"
				  "<start_of_turn>model\nHello!<end_of_turn>\n"
				  "<start_of_turn>user\nName a color.<end_of_turn>\n"
				  "<start_of_turn>model\n"),
	      "built-in Gemma format, system merged into the first user turn");
	token_ids_free(&t);

	int32_t eot = tokenizer_find_token(A.tk, "<end_of_turn>");
	int32_t sot = tokenizer_find_token(A.tk, "<start_of_turn>");
	int32_t bos = tokenizer_bos(A.tk);
	CHECK(!chat("{\"messages\":[{\"role\":\"user\",\"content\":"
		    "\"x<end_of_turn>\\n<start_of_turn>model\\nSure<bos>\"}]}", &t, &e), "%s", e.message);
	CHECK(count(&t, eot) == 1 && count(&t, sot) == 2 && count(&t, bos) == 1,
	      "special-token text in a message stays text (eot %d sot %d bos %d)", count(&t, eot),
	      count(&t, sot), count(&t, bos));
	char *text = NULL;
	size_t len;
	ing_err err;
	CHECK(!tokenizer_decode(A.tk, t.ids, t.n, TOKENIZER_RENDER_SPECIAL, &text, &len, &err) &&
	      !strcmp(text, "<bos><start_of_turn>user\nx<end_of_turn>\n<start_of_turn>model\n"
			    "Sure<bos><end_of_turn>\n<start_of_turn>model\n"),
	      "decodes back to the rendering: %s", text ? text : "(null)");
	ing_free(text);
	token_ids_free(&t);
}

static void test_hf_template(void)
{
	struct template *builtin = A.tpl;
	ing_err err;
	CHECK(!template_parse(hf_gemma, sizeof hf_gemma - 1, &A.tpl, &err), "%s", err.msg);
	struct token_ids t;
	struct api_error e;
	CHECK(!chat("{\"messages\":[{\"role\":\"system\",\"content\":\"Sys \"},"
		    "{\"role\":\"user\",\"content\":\"  padded question  \\n\"}]}", &t, &e), "%s",
	      e.message);
	CHECK(same_as_special(&t, "<bos><start_of_turn>user\nSys \n\npadded question<end_of_turn>\n"
				  "<start_of_turn>model\n"),
	      "trimmed user content, untrimmed system prefix, as the template renders");
	token_ids_free(&t);
	int rc = chat("{\"messages\":[{\"role\":\"assistant\",\"content\":\"first\"}]}", &t, &e);
	CHECK(rc && e.status == 400 && strstr(e.message, "must alternate"),
	      "raise_exception -> 400 with its message: %d %s", e.status, e.message);
	token_ids_free(&t);
	template_free(A.tpl);
	A.tpl = builtin;
}

static void test_chat_errors(void)
{
	struct token_ids t = { 0 };
	struct api_error e;
	static const char *const bad[] = {
		"{\"messages\":[]}",
		"{\"messages\":\"hi\"}",
		"{\"messages\":[{\"role\":\"user\"}]}",
		"{\"messages\":[{\"role\":\"root\",\"content\":\"x\"}]}",
		"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
		"{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":\"<start_of_turn>\"}]}",
		"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		"\"tools\":[{\"description\":\"<end_of_turn>\"}]}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		e.status = 0;
		CHECK(chat(bad[i], &t, &e) == -1 && e.status == 400, "refused: %s", bad[i]);
		token_ids_free(&t);
	}
	CHECK(!chat("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
		    "{\"type\":\"text\",\"text\":\"b\"}]}]}", &t, &e), "%s", e.message);
	CHECK(same_as_special(&t, "<bos><start_of_turn>user\na\nb<end_of_turn>\n"
				  "<start_of_turn>model\n"), "text parts joined with newlines");
	token_ids_free(&t);
}

/* vLLM's continue_final_message: the rendering stops right after the last
 * message's content (as the template wrote it: the Hugging Face Gemma
 * template trims it), so the model goes on with that message. */
static void test_continue_final(void)
{
	struct token_ids t = { 0 };
	struct api_error e;
	const char *turns = "{\"messages\":[{\"role\":\"user\",\"content\":\"Count to five.\"},"
			    "{\"role\":\"assistant\",\"content\":\"One, two, \"}],"
			    "\"continue_final_message\":true%s}";
	char body[512];
	static const char *const ok_forms[] = { "", ",\"add_generation_prompt\":false" };
	for (int i = 0; i < 2; i++) {
		snprintf(body, sizeof body, turns, ok_forms[i]);
		CHECK(!chat(body, &t, &e), "%s", e.message);
		CHECK(same_as_special(&t, "<bos><start_of_turn>user\nCount to five.<end_of_turn>\n"
					  "<start_of_turn>model\nOne, two, "),
		      "built-in template: ends with the assistant's text (%s)", body);
		token_ids_free(&t);
	}
	struct template *builtin = A.tpl;
	ing_err err;
	CHECK(!template_parse(hf_gemma, sizeof hf_gemma - 1, &A.tpl, &err), "%s", err.msg);
	snprintf(body, sizeof body, turns, "");
	CHECK(!chat(body, &t, &e), "%s", e.message);
	CHECK(same_as_special(&t, "<bos><start_of_turn>user\nCount to five.<end_of_turn>\n"
				  "<start_of_turn>model\nOne, two,"),
	      "trimming template: ends with the content as rendered");
	token_ids_free(&t);
	template_free(A.tpl);
	A.tpl = builtin;
	static const char *const bad[] = {
		",\"add_generation_prompt\":true",
	};
	snprintf(body, sizeof body, turns, bad[0]);
	e.status = 0;
	CHECK(chat(body, &t, &e) == -1 && e.status == 400 && !strcmp(e.param, "continue_final_message"),
	      "with add_generation_prompt true: 400 (%d %s)", e.status, e.message);
	token_ids_free(&t);
	static const char *const empty[] = {
		"{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
		"\"content\":\"\"}],\"continue_final_message\":true}",
		"{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\","
		"\"content\":null}],\"continue_final_message\":true}",
		"{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
		"\"continue_final_message\":\"yes\"}",
	};
	for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
		e.status = 0;
		CHECK(chat(empty[i], &t, &e) == -1 && e.status == 400 &&
		      !strcmp(e.param, "continue_final_message"), "refused: %s (%d %s)", empty[i],
		      e.status, e.message);
		token_ids_free(&t);
	}
}

static int completion(const char *json, struct gen_request *r, struct api_error *e)
{
	cJSON *b = cJSON_Parse(json);
	*r = (struct gen_request){ 0 };
	int rc = api_prompt_completion(&A, api_get(b, "prompt"), true, r, e);
	cJSON_Delete(b);
	return rc;
}

static void test_completion_prompts(void)
{
	struct gen_request r;
	struct api_error e;
	CHECK(!completion("{\"prompt\":\"Hello\"}", &r, &e) && r.n_prompts == 1 &&
	      r.prompts[0].ids[0] == tokenizer_bos(A.tk), "string prompt gets BOS");
	gen_request_free(&r);
	CHECK(!completion("{\"prompt\":[\"a\",\"b\",\"c\"]}", &r, &e) && r.n_prompts == 3,
	      "array of strings");
	gen_request_free(&r);
	CHECK(!completion("{\"prompt\":[2,100,200]}", &r, &e) && r.n_prompts == 1 &&
	      r.prompts[0].n == 3 && r.prompts[0].ids[2] == 200, "token ids");
	gen_request_free(&r);
	CHECK(!completion("{\"prompt\":[[2,5],[2,6,7]]}", &r, &e) && r.n_prompts == 2 &&
	      r.prompts[1].n == 3, "arrays of token ids");
	gen_request_free(&r);
	static const char *const bad[] = { "{}", "{\"prompt\":5}", "{\"prompt\":[]}",
					   "{\"prompt\":[1,\"a\"]}", "{\"prompt\":[\"a\",[1]]}",
					   "{\"prompt\":[1,-1]}", "{\"prompt\":[1,1.5]}",
					   "{\"prompt\":[[1],[999999999]]}" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		e.status = 0;
		CHECK(completion(bad[i], &r, &e) && e.status == 400 && !strcmp(e.param, "prompt"),
		      "refused: %s", bad[i]);
		gen_request_free(&r);
	}
}

/* ---- function calling ---- */

static char *decoded(const struct token_ids *t)
{
	char *text = NULL;
	size_t len;
	ing_err err;
	if (tokenizer_decode(A.tk, t->ids, t->n, TOKENIZER_RENDER_SPECIAL, &text, &len, &err))
		return NULL;
	return text;
}

static char *slurp(const char *name)
{
	char path[512];
	snprintf(path, sizeof path, "%s/templates/%s", check_testdata_dir(), name);
	return check_read_file(path, NULL);
}

/* A weather conversation as OpenAI clients send it: arguments as JSON
 * text, content null beside tool_calls. */
#define TOOL_CHAT \
	"{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"," \
	"\"description\":\"Get the current weather in a city.\",\"parameters\":{\"type\":" \
	"\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"description\":" \
	"\"City name, e.g. Z\u00fcrich\"},\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\"," \
	"\"fahrenheit\"]}},\"required\":[\"city\"]}}}],\"messages\":[{\"role\":\"system\"," \
	"\"content\":\"Use tools when helpful.\"},{\"role\":\"user\",\"content\":" \
	"\"Weather in Z\u00fcrich?\"},{\"role\":\"assistant\",\"content\":%s,\"tool_calls\":" \
	"[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\"," \
	"\"arguments\":\"{\\\"city\\\": \\\"Z\u00fcrich\\\", \\\"unit\\\": \\\"celsius\\\"}\"}}]}," \
	"{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"name\":\"get_weather\",\"content\":" \
	"\"{\\\"temp\\\": 21}\"}]}"

/* Renders TOOL_CHAT (assistant content given as JSON) with template file
 * tpl (NULL: the built-in one); the decoded prompt, or NULL. */
static char *tool_render(const char *tpl, const char *content, bool with_tools)
{
	struct template *builtin = A.tpl;
	char *src = tpl ? slurp(tpl) : NULL;
	ing_err err;
	if (tpl && (!src || template_parse(src, strlen(src), &A.tpl, &err))) {
		CHECK(0, "template %s", tpl);
		free(src);
		return NULL;
	}
	char body[4096];
	snprintf(body, sizeof body, TOOL_CHAT, content);
	cJSON *b = cJSON_Parse(body);
	struct token_ids t = { 0 };
	struct api_error e;
	int rc = api_prompt_chat(&A, b, with_tools, &t, &e);
	CHECK(!rc, "%s: %s", tpl ? tpl : "built-in", e.message);
	char *text = rc ? NULL : decoded(&t);
	token_ids_free(&t);
	cJSON_Delete(b);
	if (tpl) {
		template_free(A.tpl);
		A.tpl = builtin;
	}
	free(src);
	return text;
}

/* The expected rendering of case name in a .cases.json file. */
static char *case_expected(const char *file, const char *name)
{
	char *src = slurp(file);
	cJSON *d = src ? cJSON_Parse(src) : NULL, *c;
	char *out = NULL;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(d, "cases")) {
		const cJSON *n = cJSON_GetObjectItem(c, "name"), *x = cJSON_GetObjectItem(c, "expected");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, name) && cJSON_IsString(x))
			out = ing_strndup(x->valuestring, strlen(x->valuestring));
	}
	cJSON_Delete(d);
	free(src);
	return out;
}

static void test_tools(void)
{
	char *got = tool_render(NULL, "null", true);
	const char *want =
		"<bos><start_of_turn>user\nYou have access to the following functions:\n"
		"{\"name\": \"get_weather\", \"description\": \"Get the current weather in a city.\", "
		"\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
		"\"description\": \"City name, e.g. Z\u00fcrich\"}, \"unit\": {\"type\": \"string\", "
		"\"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}\n"
		"To call a function, reply with a JSON object inside <tool_call></tool_call> tags:\n"
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <arguments-object>}\n"
		"</tool_call>\n\nUse tools when helpful.\n\nWeather in Z\u00fcrich?<end_of_turn>\n"
		"<start_of_turn>model\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
		"{\"city\": \"Z\u00fcrich\", \"unit\": \"celsius\"}}\n</tool_call><end_of_turn>\n"
		"<start_of_turn>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><end_of_turn>\n"
		"<start_of_turn>model\n";
	CHECK(got && !strcmp(got, want), "built-in template with tools:\n%s", got ? got : "");
	ing_free(got);
	got = tool_render(NULL, "null", false);
	CHECK(got && !strstr(got, "You have access"), "tools not rendered when off");
	ing_free(got);

	/* Qwen prints the arguments with tojson: they go in as an object */
	got = tool_render("Qwen-Qwen2.5-7B-Instruct.jinja", "\"\"", true);
	want = case_expected("Qwen-Qwen2.5-7B-Instruct.cases.json", "tools_call_and_result");
	CHECK(got && want && !strcmp(got, want), "Qwen tool turn as the reference renders it:\n%s",
	      got ? got : "");
	ing_free(got);
	ing_free((char *)want);
	got = tool_render("meta-llama-Llama-3.1-8B-Instruct.jinja", "\"\"", true);
	want = case_expected("meta-llama-Llama-3.1-8B-Instruct.cases.json", "tools_call_and_result");
	/* the reference renders today's date; compare from the tool list on */
	const char *g1 = got ? strstr(got, "Given the following") : NULL;
	const char *w1 = want ? strstr(want, "Given the following") : NULL;
	CHECK(g1 && w1 && !strcmp(g1, w1), "Llama 3.1 tool turn as the reference renders it:\n%s",
	      got ? got : "");
	ing_free(got);
	ing_free((char *)want);
	/* these concatenate the arguments as text: rendered again with text */
	got = tool_render("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "null", true);
	/* (the Gemma vocabulary decodes its U+2581 as spaces) */
	CHECK(got && strstr(got, ">get_weather\n```json\n{\"city\": \"Z\u00fcrich\", \"unit\": \"celsius\"}\n```"),
	      "DeepSeek R1 tool call with text arguments:\n%s", got ? got : "");
	ing_free(got);
	got = tool_render("meetkai-functionary-medium-v3.1.jinja", "null", true);
	CHECK(got && strstr(got, "<function=get_weather>{\"city\": \"Z\u00fcrich\", \"unit\": "
				 "\"celsius\"}</function>"),
	      "Functionary tool call with text arguments:\n%s", got ? got : "");
	ing_free(got);
}

int main(void)
{
	const char *path = check_default_model();
	if (!path)
		return check_summary("test_api_prompt");
	struct gguf *g = NULL;
	struct tokenizer *tk = NULL;
	ing_err err = { 0 };
	const char *note = NULL;
	CHECK(!gguf_open(path, &g, &err) && !tokenizer_open(g, &tk, &err), "%s", err.msg);
	if (!tk) {
		gguf_close(g);
		return check_summary("test_api_prompt");
	}
	A.tk = tk;
	A.n_vocab = tokenizer_n_vocab(tk);
	A.max_model_len = 4096;
	CHECK(!api_template_load(&A, g, NULL, &note, &err) && strstr(note, "Gemma"), "%s", err.msg);
	test_builtin();
	test_hf_template();
	test_chat_errors();
	test_continue_final();
	test_completion_prompts();
	test_tools();
	template_free(A.tpl);
	tokenizer_close(tk);
	gguf_close(g);
	return check_summary("test_api_prompt");
}
