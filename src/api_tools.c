/* api_tools.c — function calling in the chat API.
 *
 * Request side: `tools` (function definitions), `tool_choice` ("none",
 * "auto", "required" or {"type": "function", "function": {"name": N}}) and
 * `parallel_tool_calls` are checked here. With tool_choice "none" the tools
 * never reach the template and the output is plain text. With "auto" (the
 * default when tools are given) the output is parsed for calls in the
 * markup of the template's family (toolcall.h). With "required" or a named
 * function, the call is forced: the prompt ends with the opening markup
 * of a call (toolcall_frame), so the model continues inside it (special
 * tokens of the markup stay special tokens), and a grammar (grammar.h)
 * constrains the rest: the arguments to the function's parameters schema,
 * then the closing markup; with "required" and several tools, one
 * alternative per function, name included. The engine stops once the
 * call is complete; the closing markup is also a stop string. The forced
 * text counts as output: it is prepended to what the model wrote before
 * parsing. One call is forced (the grammar allows exactly one).
 *
 * Answer side: parsed calls become OpenAI `tool_calls` entries with ids
 * "call_" + 24 random letters and digits (9 for Mistral templates, which
 * check), arguments as a JSON string. */
#include <stdio.h>
#include <string.h>

#include "api_int.h"
#include "grammar.h"
#include "mem.h"
#include "sbuf.h"

/* OpenAI's rule for function names: [a-zA-Z0-9_-]{1,64}. It also keeps
 * control-token text and quotes out of the forced markup. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

static int tool_check(const cJSON *t, int i, struct api_error *e)
{
	char param[48];
	snprintf(param, sizeof param, "tools[%d]", i);
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
	const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
	if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
	    !cJSON_IsObject(fn))
		return api_fail(e, 400, param, "invalid_value", "'%s' must be {\"type\": "
				"\"function\", \"function\": {...}}", param);
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
	const cJSON *desc = api_get(fn, "description"), *params = api_get(fn, "parameters");
	snprintf(param, sizeof param, "tools[%d].function", i);
	if (!cJSON_IsString(name) || !name_ok(name->valuestring))
		return api_fail(e, 400, param, "invalid_value", "'%s.name' must be 1 to 64 letters, "
				"digits, underscores or dashes", param);
	if (desc && !cJSON_IsString(desc))
		return api_fail(e, 400, param, "invalid_type", "'%s.description' must be a string",
				param);
	if (params && !cJSON_IsObject(params))
		return api_fail(e, 400, param, "invalid_type", "'%s.parameters' must be a JSON "
				"Schema object", param);
	return 0;
}

/* The function named name in tools, or NULL. */
static const cJSON *tool_find(const cJSON *tools, const char *name)
{
	const cJSON *t;
	cJSON_ArrayForEach(t, tools) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(fn, "name");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
			return fn;
	}
	return NULL;
}

enum choice { CHOICE_NONE, CHOICE_AUTO, CHOICE_REQUIRED, CHOICE_NAMED };

static int choice_read(const cJSON *tc, const cJSON *tools, enum choice *c, const char **name,
		       struct api_error *e)
{
	*c = tools ? CHOICE_AUTO : CHOICE_NONE;
	*name = NULL;
	if (!tc)
		return 0;
	if (cJSON_IsString(tc)) {
		const char *s = tc->valuestring;
		*c = !strcmp(s, "none") ? CHOICE_NONE : !strcmp(s, "auto") ? CHOICE_AUTO
		     : !strcmp(s, "required") ? CHOICE_REQUIRED : (enum choice)-1;
		if ((int)*c < 0)
			return api_fail(e, 400, "tool_choice", "invalid_value", "'tool_choice' must be "
					"\"none\", \"auto\", \"required\" or a named function");
	} else {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type");
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(fn, "name");
		if (!cJSON_IsObject(tc) || !cJSON_IsString(type) ||
		    strcmp(type->valuestring, "function") || !cJSON_IsString(n))
			return api_fail(e, 400, "tool_choice", "invalid_value", "'tool_choice' must be "
					"a string or {\"type\": \"function\", \"function\": "
					"{\"name\": ...}}");
		*c = CHOICE_NAMED;
		*name = n->valuestring;
	}
	if (*c >= CHOICE_REQUIRED && !tools)
		return api_fail(e, 400, "tool_choice", "invalid_value",
				"'tool_choice' requires 'tools'");
	if (*name && !tool_find(tools, *name))
		return api_fail(e, 400, "tool_choice", "invalid_value", "'tool_choice' names "
				"function '%.64s', which is not in 'tools'", *name);
	return 0;
}

/* Grammar alternatives for the rest of a call after the forced start
 * (opening): for the named function, its arguments and the closing
 * markup; with name NULL, for every function the remaining markup with its
 * name, its arguments and the closing markup. pre/suf [n] hold the
 * strings. Returns how many alternatives, or -1 (out of memory). */
static int call_alts(struct api *a, const cJSON *tools, const char *name, const char *opening,
		     const cJSON *any, struct grammar_alt *alts, struct sbuf *pre,
		     struct sbuf *suf)
{
	const cJSON *t;
	int n = 0;
	size_t ol = strlen(opening);
	cJSON_ArrayForEach(t, tools) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
		const char *fname = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
		if (name && strcmp(fname, name))
			continue;
		if (toolcall_frame(a->tool_format, fname, &pre[n], &suf[n]))
			return -1;
		const cJSON *params = api_get(fn, "parameters");
		const char *p = strncmp(pre[n].p, opening, ol) ? pre[n].p : pre[n].p + ol;
		alts[n] = (struct grammar_alt){ .prefix = name ? NULL : p,
						.schema = params ? params : any, .suffix = suf[n].p };
		n++;
	}
	return n;
}

/* Calls a forced output may hold when the model picks the functions and
 * parallel_tool_calls allows more than one (OpenAI's "required" makes at
 * least one; vLLM's grammar no upper bound, this one a generous cap). */
#define API_MAX_FORCED_CALLS 8

/* The text between two calls of a forced output in formats whose calls
 * are separate blocks (Hermes: one per line; Functionary: back to back),
 * each opened by the markup; NULL: one call only (the other formats wrap
 * all calls in one frame). */
static const char *calls_sep(enum toolcall_format f)
{
	if (!toolcall_block_close(f))
		return NULL;
	return f == TOOLCALL_HERMES ? "\n<tool_call>\n" : "<function=";
}

/* Compiles (or finds in the cache) the grammar of a forced call into
 * *out: a call to name, or (name NULL) to any of the tools, then with
 * more further calls (calls_sep). A parameters schema the grammar cannot
 * express is replaced by "any JSON object" rather than refusing the
 * request. */
static int call_grammar(struct api *a, const cJSON *tools, const char *name, const char *opening,
			bool more, struct grammar **out, struct api_error *e)
{
	const char *sep = more ? calls_sep(a->tool_format) : NULL;
	const int max_calls = sep ? API_MAX_FORCED_CALLS : 1;
	int cap = cJSON_GetArraySize(tools), n = -1, rc = ING_ERR_NOMEM;
	struct grammar_alt *alts = ing_calloc((size_t)cap, sizeof *alts);
	struct sbuf *pre = ing_calloc((size_t)cap, sizeof *pre), *suf = ing_calloc((size_t)cap, sizeof *suf);
	cJSON *any = cJSON_Parse("{\"type\": \"object\"}");
	char *printed = cJSON_PrintUnformatted(tools);
	struct sbuf key = { 0 };
	sbuf_printf(&key, "tools:%s:%s:%d:%s", toolcall_format_name(a->tool_format),
		    name ? name : "*", max_calls, printed ? printed : "");
	if (alts && pre && suf && any && printed && !key.oom)
		n = call_alts(a, tools, name, opening, any, alts, pre, suf);
	ing_err err = { 0 };
	if (n > 0 && (*out = api_gcache_get(a, key.p))) {
		rc = ING_OK;
	} else if (n > 0) {
		rc = grammar_from_alts(alts, n, 1, max_calls, sep, out, &err);
		for (int i = 0; rc == ING_ERR_UNSUPPORTED && i < n; i++)
			alts[i].schema = any;
		if (rc == ING_ERR_UNSUPPORTED)
			rc = grammar_from_alts(alts, n, 1, max_calls, sep, out, &err);
		if (rc == ING_OK)
			api_gcache_put(a, key.p, *out);
	}
	for (int i = 0; i < cap && pre && suf; i++) {
		sbuf_free(&pre[i]);
		sbuf_free(&suf[i]);
	}
	ing_free(alts);
	ing_free(pre);
	ing_free(suf);
	cJSON_Delete(any);
	cJSON_free(printed);
	sbuf_free(&key);
	if (rc == ING_OK)
		return 0;
	if (rc == ING_ERR_NOMEM)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	return api_fail(e, 400, "tools", "invalid_value", "cannot constrain the tool call: %s",
			err.msg);
}

/* Forces a call (to name, or to any tool when NULL): the forced start the
 * prompt ends with, the stop string that ends a call, and the grammar of
 * the rest. */
static int force_call(struct api *a, struct gen_request *r, const cJSON *tools,
		      const char *name, struct api_error *e)
{
	struct sbuf open = { 0 }, suf = { 0 };
	int rc = toolcall_frame(a->tool_format, name, &open, &suf);
	if (!rc) {
		r->tool_prefix = sbuf_take(&open, NULL);
		r->tool_close = name ? sbuf_take(&suf, NULL) : NULL;
		r->tool_name = name ? ing_strndup(name, strlen(name)) : NULL;
		rc = r->tool_prefix && (!name || (r->tool_close && r->tool_name)) ? 0 : -1;
	}
	/* the closing markup as a stop string, where it is distinctive and
	 * no second call may follow */
	const bool more = !name && r->parallel_tool_calls && calls_sep(a->tool_format);
	const char *stop = more ? NULL : toolcall_block_close(a->tool_format);
	if (!rc && stop && r->n_stop < API_MAX_STOP) {
		r->stop[r->n_stop] = ing_strndup(stop, strlen(stop));
		rc = r->stop[r->n_stop++] ? 0 : -1;
	}
	sbuf_free(&open);
	sbuf_free(&suf);
	if (rc)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	struct grammar *g = NULL;
	if (call_grammar(a, tools, name, r->tool_prefix, more, &g, e))
		return -1;
	grammar_free(r->grammar); /* a forced call overrides response_format */
	r->grammar = g;
	return 0;
}

int api_tools_parse(struct api *a, const cJSON *body, struct gen_request *r,
		    struct api_error *e)
{
	const cJSON *tools = api_get(body, "tools"), *t;
	r->parallel_tool_calls = true;
	if (api_get_bool(body, "parallel_tool_calls", &r->parallel_tool_calls, e))
		return -1;
	if (tools && !cJSON_IsArray(tools))
		return api_fail(e, 400, "tools", "invalid_type", "'tools' must be an array");
	int i = 0;
	cJSON_ArrayForEach(t, tools)
		if (tool_check(t, i++, e))
			return -1;
	if (tools && i == 0)
		tools = NULL; /* [] is no tools */
	enum choice c;
	const char *name;
	if (choice_read(api_get(body, "tool_choice"), tools, &c, &name, e))
		return -1;
	r->tools_on = c != CHOICE_NONE;
	if (c == CHOICE_REQUIRED && i == 1) { /* one function: the same as naming it */
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tools->child, "function");
		name = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
		c = CHOICE_NAMED;
	}
	return c >= CHOICE_REQUIRED ? force_call(a, r, tools, name, e) : 0;
}

bool api_tools_rendered(const cJSON *body)
{
	const cJSON *tc = api_get(body, "tool_choice");
	return api_get(body, "tools") && !(cJSON_IsString(tc) && !strcmp(tc->valuestring, "none"));
}

int api_tools_check_calls(const cJSON *calls, int i, struct api_error *e)
{
	char param[48];
	snprintf(param, sizeof param, "messages[%d].tool_calls", i);
	if (!cJSON_IsArray(calls))
		return api_fail(e, 400, param, "invalid_type", "'%s' must be an array", param);
	const cJSON *c;
	cJSON_ArrayForEach(c, calls) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
		const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
		if (!cJSON_IsObject(c) || !cJSON_IsString(name) ||
		    !(cJSON_IsString(args) || cJSON_IsObject(args)))
			return api_fail(e, 400, param, "invalid_value", "'%s' entries must be "
					"{\"id\", \"type\": \"function\", \"function\": {\"name\", "
					"\"arguments\"}}", param);
	}
	return 0;
}

/* Mistral's templates accept back only ids of 9 letters and digits. */
void api_tools_call_id(struct api *a, char out[32])
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	bool mistral = a->tool_format == TOOLCALL_MISTRAL;
	int pre = mistral ? 0 : 5, n = mistral ? 9 : 24;
	memcpy(out, "call_", (size_t)pre);
	uint64_t x = 0;
	for (int i = 0; i < n; i++) {
		if (i % 8 == 0)
			x = api_unique(a);
		out[pre + i] = abc[x % 62];
		x /= 62;
	}
	out[pre + n] = 0;
}

cJSON *api_tools_json(struct api *a, const struct toolcall_list *calls, bool parallel)
{
	cJSON *arr = cJSON_CreateArray();
	for (int i = 0; arr && i < calls->n && (parallel || i == 0); i++) {
		char id[32];
		api_tools_call_id(a, id);
		cJSON *c = cJSON_CreateObject(), *fn;
		cJSON_AddItemToArray(arr, c);
		if (!cJSON_AddStringToObject(c, "id", id) ||
		    !cJSON_AddStringToObject(c, "type", "function") ||
		    !(fn = cJSON_AddObjectToObject(c, "function")) ||
		    !cJSON_AddItemToObject(fn, "name", api_json_text(calls->v[i].name,
								      strlen(calls->v[i].name))) ||
		    !cJSON_AddItemToObject(fn, "arguments",
					   api_json_text(calls->v[i].arguments,
							 strlen(calls->v[i].arguments)))) {
			cJSON_Delete(arr);
			return NULL;
		}
	}
	return arr;
}
