/* api_responses.c — OpenAI's Responses API (POST /v1/responses) as a view
 * of the chat path.
 *
 * A Responses request asks for what a chat completion computes, in other
 * words: input items instead of messages, instructions, max_output_tokens,
 * flat function tools, text.format. api_responses_chat_body rewrites it
 * into a chat completions body, which the chat path parses, checks and runs
 * unchanged; the errors it reports name chat fields, and
 * api_responses_error_param renames them back. The answer goes the other
 * way: a whole chat completion becomes a response object
 * (api_responses_whole); a stream of chat chunks becomes the Responses
 * event sequence (response.created, output items and their content parts,
 * text and argument deltas, response.completed) through struct
 * resp_stream, a small state machine over the chunks.
 *
 * Stored responses (api_store.c, when the server keeps them): an answer
 * whose request has store (true by default) is kept, and
 * previous_response_id puts the conversation it ends (every earlier
 * turn's input and output items) before the request's input; the
 * previous instructions are not carried over, as OpenAI does.
 *
 * Not supported, each a 400 naming its field: conversation and background,
 * previous_response_id without a store, tools other than functions, input
 * parts other than text. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api_int.h"
#include "mem.h"
#include "sbuf.h"

static char *str_copy(const char *s) { return ing_strndup(s, strlen(s)); }

/* ---- request: Responses body -> chat body ---- */

/* Responses fields with no chat counterpart, and chat fields a Responses
 * request must not set through the copy (their Responses forms are
 * translated, or they shape a chat answer the translation drops). */
static const char *const dropped[] = {
	"input", "instructions", "max_output_tokens", "tools", "tool_choice", "text", "store",
	"previous_response_id",
	"reasoning", "metadata", "truncation", "include", "service_tier", "top_logprobs",
	"max_tool_calls", "prompt_cache_key", "safety_identifier", "stream_options", "messages",
	"n", "max_tokens", "max_completion_tokens", "response_format", "echo", "logprobs",
	"prompt_logprobs", "return_token_ids", "user",
};

/* Fields ingot cannot honour: present and not null (or false) is a 400. */
static int refuse_unsupported(const cJSON *body, struct api_error *e)
{
	static const char *const keys[] = { "conversation", "prompt" };
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (api_get(body, keys[i]))
			return api_fail(e, 400, keys[i], "unsupported_parameter",
					"'%s' is not supported: ingot keeps no conversations or "
					"prompts; send the conversation as 'input', or continue a "
					"stored response with 'previous_response_id'",
					keys[i]);
	const cJSON *bg = api_get(body, "background");
	if (bg && !cJSON_IsFalse(bg))
		return api_fail(e, 400, "background", "unsupported_parameter",
				"'background' responses are not supported");
	/* taken, never applied: an input over the context is a 400 either way
	 * (the answer says "disabled") */
	const cJSON *tr = api_get(body, "truncation");
	if (tr && !(cJSON_IsString(tr) && (!strcmp(tr->valuestring, "auto") ||
					   !strcmp(tr->valuestring, "disabled"))))
		return api_fail(e, 400, "truncation", "invalid_value",
				"'truncation' must be \"auto\" or \"disabled\"");
	return 0;
}

static cJSON *message_new(cJSON *msgs, const char *role)
{
	cJSON *m = cJSON_CreateObject();
	cJSON_AddItemToArray(msgs, m);
	cJSON_AddStringToObject(m, "role", role);
	return m;
}

/* A message item's content: a string, or an array of text parts
 * (input_text, output_text) -> the chat form, an array of text parts. */
static int content_convert(const cJSON *c, int i, cJSON *m, struct api_error *e)
{
	if (cJSON_IsString(c)) {
		cJSON_AddItemToObject(m, "content", cJSON_Duplicate(c, false));
		return 0;
	}
	if (!cJSON_IsArray(c))
		return api_fail(e, 400, "input", "invalid_type",
				"input[%d].content must be a string or an array of content parts",
				i);
	cJSON *parts = cJSON_AddArrayToObject(m, "content");
	const cJSON *p;
	cJSON_ArrayForEach(p, c) {
		const cJSON *t = api_get(p, "type"), *x = api_get(p, "text");
		if (!cJSON_IsString(t) || !cJSON_IsString(x) ||
		    (strcmp(t->valuestring, "input_text") && strcmp(t->valuestring, "output_text") &&
		     strcmp(t->valuestring, "text")))
			return api_fail(e, 400, "input", "invalid_value",
					"input[%d].content: only text parts (input_text, "
					"output_text) are supported", i);
		cJSON *q = cJSON_CreateObject();
		cJSON_AddStringToObject(q, "type", "text");
		cJSON_AddItemToObject(q, "text", cJSON_Duplicate(x, false));
		cJSON_AddItemToArray(parts, q);
	}
	return 0;
}

static int item_message(const cJSON *it, int i, cJSON *msgs, struct api_error *e)
{
	static const char *const roles[] = { "user", "assistant", "system", "developer" };
	const cJSON *role = api_get(it, "role");
	size_t r = 0;
	while (cJSON_IsString(role) && r < 4 && strcmp(role->valuestring, roles[r]))
		r++;
	if (!cJSON_IsString(role) || r == 4)
		return api_fail(e, 400, "input", "invalid_value",
				"input[%d].role must be user, assistant, system or developer", i);
	const cJSON *c = api_get(it, "content");
	if (!c)
		return api_fail(e, 400, "input", "missing_required_parameter",
				"input[%d].content is required", i);
	return content_convert(c, i, message_new(msgs, roles[r]), e);
}

static const char *str_field(const cJSON *o, const char *key)
{
	const cJSON *v = api_get(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A function_call item joins the assistant message of the calls just
 * before it, or starts one. */
static int item_call(const cJSON *it, int i, cJSON *msgs, struct api_error *e)
{
	const char *id = str_field(it, "call_id"), *name = str_field(it, "name");
	const char *args = str_field(it, "arguments");
	if (!id || !name || !args)
		return api_fail(e, 400, "input", "invalid_value",
				"input[%d]: a function_call needs string call_id, name and "
				"arguments", i);
	cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
	cJSON *calls = last ? cJSON_GetObjectItemCaseSensitive(last, "tool_calls") : NULL;
	if (!calls) {
		cJSON *m = message_new(msgs, "assistant");
		cJSON_AddNullToObject(m, "content");
		calls = cJSON_AddArrayToObject(m, "tool_calls");
	}
	cJSON *c = cJSON_CreateObject(), *fn;
	cJSON_AddItemToArray(calls, c);
	cJSON_AddStringToObject(c, "id", id);
	cJSON_AddStringToObject(c, "type", "function");
	fn = cJSON_AddObjectToObject(c, "function");
	cJSON_AddStringToObject(fn, "name", name);
	cJSON_AddStringToObject(fn, "arguments", args);
	return 0;
}

static int item_call_output(const cJSON *it, int i, cJSON *msgs, struct api_error *e)
{
	const char *id = str_field(it, "call_id");
	const cJSON *out = api_get(it, "output");
	if (!id || !out)
		return api_fail(e, 400, "input", "invalid_value",
				"input[%d]: a function_call_output needs call_id and output", i);
	cJSON *m = message_new(msgs, "tool");
	cJSON_AddStringToObject(m, "tool_call_id", id);
	return content_convert(out, i, m, e);
}

/* Input items -> chat messages; i0: the index of the first in the
 * request's input (errors name input[i]). */
static int items_convert(const cJSON *items, int i0, cJSON *msgs, struct api_error *e)
{
	int i = i0;
	for (const cJSON *it = items->child; it; it = it->next, i++) {
		const char *type = str_field(it, "type");
		int rc;
		if (!cJSON_IsObject(it))
			rc = api_fail(e, 400, "input", "invalid_type", "input[%d] must be an object", i);
		else if (!type || !strcmp(type, "message"))
			rc = item_message(it, i, msgs, e);
		else if (!strcmp(type, "function_call"))
			rc = item_call(it, i, msgs, e);
		else if (!strcmp(type, "function_call_output"))
			rc = item_call_output(it, i, msgs, e);
		else if (!strcmp(type, "reasoning"))
			rc = 0; /* no reasoning to carry over */
		else
			rc = api_fail(e, 400, "input", "invalid_value",
				      "input[%d]: items of type '%.40s' are not supported", i, type);
		if (rc)
			return rc;
	}
	return 0;
}

/* body.instructions, the stored conversation (history, or NULL), then
 * body.input -> chat messages. */
static int messages_build(const cJSON *body, const cJSON *history, cJSON *msgs,
			  struct api_error *e)
{
	const cJSON *ins = api_get(body, "instructions"), *in = api_get(body, "input");
	if (ins && !cJSON_IsString(ins))
		return api_fail(e, 400, "instructions", "invalid_type",
				"'instructions' must be a string");
	if (ins)
		cJSON_AddItemToObject(message_new(msgs, "system"), "content",
				      cJSON_Duplicate(ins, false));
	if (history && items_convert(history, -cJSON_GetArraySize(history), msgs, e))
		return -1;
	if (cJSON_IsString(in)) {
		cJSON_AddItemToObject(message_new(msgs, "user"), "content",
				      cJSON_Duplicate(in, false));
		return 0;
	}
	if (!cJSON_IsArray(in))
		return api_fail(e, 400, "input", in ? "invalid_type" : "missing_required_parameter",
				"'input' must be a string or an array of input items");
	if (items_convert(in, 0, msgs, e))
		return -1;
	if (!cJSON_GetArraySize(msgs))
		return api_fail(e, 400, "input", "invalid_value", "'input' has no messages");
	return 0;
}

/* previous_response_id -> *history, the conversation it ends (NULL when
 * the field is absent). */
static int history_read(const cJSON *body, struct resp_store *store, cJSON **history,
			struct api_error *e)
{
	*history = NULL;
	const cJSON *prev = api_get(body, "previous_response_id");
	if (!prev)
		return 0;
	if (!cJSON_IsString(prev))
		return api_fail(e, 400, "previous_response_id", "invalid_type",
				"'previous_response_id' must be a string");
	if (!store)
		return api_fail(e, 400, "previous_response_id", "unsupported_parameter",
				"'previous_response_id' needs stored responses, which this server "
				"does not keep (--responses-store-mb 0): send the whole "
				"conversation as 'input'");
	char missing[160];
	int rc = resp_store_history(store, prev->valuestring, true, history, missing,
				    sizeof missing);
	if (rc == RESP_STORE_NOT_FOUND && !strcmp(missing, prev->valuestring))
		return api_fail(e, 400, "previous_response_id", "previous_response_not_found",
				"Previous response with id '%.160s' not found.", missing);
	if (rc == RESP_STORE_NOT_FOUND)
		return api_fail(e, 400, "previous_response_id", "previous_response_not_found",
				"Previous response with id '%.160s' not found: an earlier turn of "
				"its conversation ('%.160s') is no longer stored.",
				prev->valuestring, missing);
	if (rc == RESP_STORE_TOO_LONG)
		return api_fail(e, 400, "previous_response_id", "invalid_value",
				"the conversation of '%.160s' is too long", prev->valuestring);
	if (rc)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	return 0;
}

/* Flat function tools {type, name, description, parameters, strict} ->
 * chat's {type, function: {...}}. */
static int tools_build(const cJSON *body, cJSON *chat, struct api_error *e)
{
	const cJSON *tools = api_get(body, "tools"), *t;
	if (!tools)
		return 0;
	if (!cJSON_IsArray(tools))
		return api_fail(e, 400, "tools", "invalid_type", "'tools' must be an array");
	cJSON *out = cJSON_AddArrayToObject(chat, "tools");
	int i = 0;
	cJSON_ArrayForEach(t, tools) {
		const char *type = str_field(t, "type");
		if (!type || strcmp(type, "function"))
			return api_fail(e, 400, "tools", "unsupported_value",
					"tools[%d]: only function tools are supported", i);
		if (!str_field(t, "name"))
			return api_fail(e, 400, "tools", "missing_required_parameter",
					"tools[%d].name is required", i);
		cJSON *c = cJSON_CreateObject(), *fn;
		cJSON_AddStringToObject(c, "type", "function");
		fn = cJSON_AddObjectToObject(c, "function");
		static const char *const keys[] = { "name", "description", "parameters", "strict" };
		for (size_t k = 0; k < 4; k++)
			if (api_get(t, keys[k]))
				cJSON_AddItemToObject(fn, keys[k], cJSON_Duplicate(api_get(t, keys[k]),
										   true));
		cJSON_AddItemToArray(out, c);
		i++;
	}
	const cJSON *tc = api_get(body, "tool_choice");
	if (!tc || cJSON_IsString(tc)) {
		if (tc)
			cJSON_AddItemToObject(chat, "tool_choice", cJSON_Duplicate(tc, false));
		return 0;
	}
	const char *type = str_field(tc, "type"), *name = str_field(tc, "name");
	if (!type || strcmp(type, "function") || !name)
		return api_fail(e, 400, "tool_choice", "invalid_value",
				"'tool_choice' must be auto, none, required or "
				"{\"type\": \"function\", \"name\": ...}");
	cJSON *c = cJSON_AddObjectToObject(chat, "tool_choice");
	cJSON_AddStringToObject(c, "type", "function");
	cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "function"), "name", name);
	return 0;
}

/* text.format -> response_format. */
static int format_build(const cJSON *body, cJSON *chat, struct api_error *e)
{
	const cJSON *text = api_get(body, "text");
	const cJSON *f = text ? api_get(text, "format") : NULL;
	if (text && !cJSON_IsObject(text))
		return api_fail(e, 400, "text", "invalid_type", "'text' must be an object");
	if (!f)
		return 0;
	const char *type = str_field(f, "type");
	if (type && !strcmp(type, "text"))
		return 0;
	if (type && !strcmp(type, "json_object")) {
		cJSON_AddStringToObject(cJSON_AddObjectToObject(chat, "response_format"), "type",
					"json_object");
		return 0;
	}
	if (!type || strcmp(type, "json_schema"))
		return api_fail(e, 400, "text.format", "invalid_value",
				"'text.format.type' must be text, json_object or json_schema");
	cJSON *rf = cJSON_AddObjectToObject(chat, "response_format");
	cJSON_AddStringToObject(rf, "type", "json_schema");
	cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
	static const char *const keys[] = { "name", "schema", "strict", "description" };
	for (size_t k = 0; k < 4; k++)
		if (api_get(f, keys[k]))
			cJSON_AddItemToObject(js, keys[k], cJSON_Duplicate(api_get(f, keys[k]), true));
	return 0;
}

/* The answer carries logprobs on its text when include names
 * "message.output_text.logprobs" or top_logprobs is given (other include
 * values, such as reasoning.encrypted_content, ask for nothing ingot
 * makes and are ignored). */
static bool logprobs_wanted(const cJSON *req)
{
	const cJSON *inc = api_get(req, "include"), *it;
	cJSON_ArrayForEach(it, (cJSON_IsArray(inc) ? inc : NULL))
		if (cJSON_IsString(it) && !strcmp(it->valuestring, "message.output_text.logprobs"))
			return true;
	return api_get(req, "top_logprobs") != NULL;
}

/* include and top_logprobs -> chat's logprobs and top_logprobs (checked
 * there: 0 .. 20). */
static int logprobs_build(const cJSON *body, cJSON *chat, struct api_error *e)
{
	const cJSON *inc = api_get(body, "include"), *it;
	if (inc && !cJSON_IsArray(inc))
		return api_fail(e, 400, "include", "invalid_type", "'include' must be an array");
	cJSON_ArrayForEach(it, inc)
		if (!cJSON_IsString(it))
			return api_fail(e, 400, "include", "invalid_type",
					"'include' must be an array of strings");
	if (!logprobs_wanted(body))
		return 0;
	cJSON_AddTrueToObject(chat, "logprobs");
	const cJSON *top = api_get(body, "top_logprobs");
	if (top)
		cJSON_AddItemToObject(chat, "top_logprobs", cJSON_Duplicate(top, false));
	return 0;
}

int api_responses_chat_body(const cJSON *body, struct resp_store *store, cJSON **chat,
			    struct api_error *e)
{
	*chat = NULL;
	cJSON *history;
	if (refuse_unsupported(body, e) || history_read(body, store, &history, e))
		return -1;
	cJSON *c = cJSON_Duplicate(body, true);
	if (!c) {
		cJSON_Delete(history);
		return api_fail(e, 500, NULL, NULL, "out of memory");
	}
	for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++)
		cJSON_DeleteItemFromObjectCaseSensitive(c, dropped[i]);
	const cJSON *mot = api_get(body, "max_output_tokens");
	if (mot)
		cJSON_AddItemToObject(c, "max_tokens", cJSON_Duplicate(mot, false));
	const cJSON *stream = api_get(body, "stream");
	if (cJSON_IsTrue(stream)) /* the usage chunk feeds response.completed */
		cJSON_AddTrueToObject(cJSON_AddObjectToObject(c, "stream_options"), "include_usage");
	int rc = messages_build(body, history, cJSON_AddArrayToObject(c, "messages"), e) ||
		 tools_build(body, c, e) || format_build(body, c, e) || logprobs_build(body, c, e);
	cJSON_Delete(history);
	if (rc) {
		cJSON_Delete(c);
		return -1;
	}
	*chat = c;
	return 0;
}

void api_responses_keep(struct api *a, const cJSON *response, const cJSON *req)
{
	/* a failed put only means the response is not kept */
	if (a->store && response && cJSON_IsTrue(api_get(req, "store")))
		(void)resp_store_put(a->store, response, req);
}

/* The first 'from' (quoted so) in msg[0..cap) renamed 'to', so the
 * message names the field the client sent. */
static void message_rename(char *msg, size_t cap, const char *from, const char *to)
{
	char q[72], out[512];
	snprintf(q, sizeof q, "'%s'", from);
	const char *at = strstr(msg, q);
	if (!at || cap > sizeof out)
		return;
	snprintf(out, sizeof out, "%.*s'%s'%s", (int)(at - msg), msg, to, at + strlen(q));
	snprintf(msg, cap, "%s", out);
}

void api_responses_error_param(struct api_error *e)
{
	static const char *const map[][2] = {
		{ "messages", "input" },
		{ "max_tokens", "max_output_tokens" },
		{ "response_format", "text.format" },
	};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
		size_t n = strlen(map[i][0]);
		if (!strncmp(e->param, map[i][0], n) &&
		    (e->param[n] == 0 || e->param[n] == '.' || e->param[n] == '[')) {
			snprintf(e->param, sizeof e->param, "%s", map[i][1]);
			message_rename(e->message, sizeof e->message, map[i][0], map[i][1]);
			return;
		}
	}
}

/* ---- answer: chat completion -> response object ---- */

void api_responses_id(char *out, size_t cap, const char *prefix, const char *chat_id)
{
	const char *dash = chat_id ? strchr(chat_id, '-') : NULL;
	const char *under = chat_id ? strchr(chat_id, '_') : NULL;
	const char *tail = dash ? dash + 1 : under ? under + 1 : chat_id ? chat_id : "";
	snprintf(out, cap, "%s%s", prefix, tail);
}

static cJSON *dup_or(const cJSON *req, const char *key, cJSON *dflt)
{
	const cJSON *v = api_get(req, key);
	if (!v)
		return dflt;
	cJSON_Delete(dflt);
	return cJSON_Duplicate(v, true);
}

/* The response object around output (taken) and usage (taken; may be
 * NULL: null), echoing the request's settings as OpenAI does. */
static cJSON *response_obj(const cJSON *req, const char *id, double created, const char *model,
			   const char *status, cJSON *output, cJSON *usage)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "object", "response");
	cJSON_AddNumberToObject(o, "created_at", created);
	cJSON_AddStringToObject(o, "status", status);
	cJSON_AddNullToObject(o, "error");
	if (!strcmp(status, "incomplete"))
		cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason",
					"max_output_tokens");
	else
		cJSON_AddNullToObject(o, "incomplete_details");
	cJSON_AddItemToObject(o, "instructions", dup_or(req, "instructions", cJSON_CreateNull()));
	cJSON_AddItemToObject(o, "max_output_tokens",
			      dup_or(req, "max_output_tokens", cJSON_CreateNull()));
	cJSON_AddItemToObject(o, "metadata", dup_or(req, "metadata", cJSON_CreateObject()));
	cJSON_AddStringToObject(o, "model", model ? model : "");
	cJSON_AddItemToObject(o, "output", output ? output : cJSON_CreateArray());
	cJSON_AddItemToObject(o, "parallel_tool_calls",
			      dup_or(req, "parallel_tool_calls", cJSON_CreateTrue()));
	cJSON_AddItemToObject(o, "previous_response_id",
			      dup_or(req, "previous_response_id", cJSON_CreateNull()));
	cJSON *rs = cJSON_AddObjectToObject(o, "reasoning");
	cJSON_AddNullToObject(rs, "effort");
	cJSON_AddNullToObject(rs, "summary");
	cJSON_AddBoolToObject(o, "store", cJSON_IsTrue(api_get(req, "store")));
	cJSON_AddItemToObject(o, "temperature", dup_or(req, "temperature", cJSON_CreateNumber(1)));
	cJSON *text = dup_or(req, "text", NULL);
	if (!text || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(text, "format"))) {
		cJSON_Delete(text);
		text = cJSON_CreateObject();
		cJSON_AddStringToObject(cJSON_AddObjectToObject(text, "format"), "type", "text");
	}
	cJSON_AddItemToObject(o, "text", text);
	cJSON_AddItemToObject(o, "tool_choice", dup_or(req, "tool_choice", cJSON_CreateString("auto")));
	cJSON_AddItemToObject(o, "tools", dup_or(req, "tools", cJSON_CreateArray()));
	cJSON_AddItemToObject(o, "top_p", dup_or(req, "top_p", cJSON_CreateNumber(1)));
	cJSON_AddStringToObject(o, "truncation", "disabled");
	cJSON_AddItemToObject(o, "usage", usage ? usage : cJSON_CreateNull());
	cJSON_AddItemToObject(o, "user", dup_or(req, "user", cJSON_CreateNull()));
	return o;
}

/* Chat usage -> Responses usage (input/output tokens and details). */
static cJSON *usage_convert(const cJSON *u)
{
	if (!cJSON_IsObject(u))
		return NULL;
	const cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
	const cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens_details");
	const cJSON *cached = d ? cJSON_GetObjectItemCaseSensitive(d, "cached_tokens") : NULL;
	double in = cJSON_IsNumber(pt) ? pt->valuedouble : 0;
	double out = cJSON_IsNumber(ct) ? ct->valuedouble : 0;
	cJSON *r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "input_tokens", in);
	cJSON_AddNumberToObject(cJSON_AddObjectToObject(r, "input_tokens_details"), "cached_tokens",
				cJSON_IsNumber(cached) ? cached->valuedouble : 0);
	cJSON_AddNumberToObject(r, "output_tokens", out);
	cJSON_AddNumberToObject(cJSON_AddObjectToObject(r, "output_tokens_details"),
				"reasoning_tokens", 0);
	cJSON_AddNumberToObject(r, "total_tokens", in + out);
	return r;
}

/* An output_text part; lp (copied; NULL: none asked for) its tokens'
 * logprobs, in chat's form, which is the Responses form too. */
static cJSON *text_part(const char *text, const cJSON *lp)
{
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "type", "output_text");
	cJSON_AddStringToObject(p, "text", text);
	cJSON_AddArrayToObject(p, "annotations");
	if (lp)
		cJSON_AddItemToObject(p, "logprobs", cJSON_Duplicate(lp, true));
	return p;
}

static cJSON *message_item(const char *id, const char *status, const char *text,
			   const cJSON *lp)
{
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "id", id);
	cJSON_AddStringToObject(m, "type", "message");
	cJSON_AddStringToObject(m, "status", status);
	cJSON_AddStringToObject(m, "role", "assistant");
	cJSON *c = cJSON_AddArrayToObject(m, "content");
	if (text)
		cJSON_AddItemToArray(c, text_part(text, lp));
	return m;
}

static cJSON *call_item(const char *call_id, const char *status, const char *name,
			const char *args)
{
	char id[80];
	api_responses_id(id, sizeof id, "fc_", call_id);
	cJSON *f = cJSON_CreateObject();
	cJSON_AddStringToObject(f, "id", id);
	cJSON_AddStringToObject(f, "type", "function_call");
	cJSON_AddStringToObject(f, "status", status);
	cJSON_AddStringToObject(f, "call_id", call_id);
	cJSON_AddStringToObject(f, "name", name);
	cJSON_AddStringToObject(f, "arguments", args);
	return f;
}

static const char *status_of(const char *finish)
{
	return finish && !strcmp(finish, "length") ? "incomplete" : "completed";
}

cJSON *api_responses_whole(cJSON *chat, const cJSON *req)
{
	const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chat, "choices"), 0);
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(ch, "message");
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
	const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"), *c;
	const char *finish = str_field(ch, "finish_reason");
	char id[80], mid[80];
	api_responses_id(id, sizeof id, "resp_", str_field(chat, "id"));
	api_responses_id(mid, sizeof mid, "msg_", str_field(chat, "id"));
	const bool want_lp = logprobs_wanted(req);
	const cJSON *lp = want_lp ? cJSON_GetObjectItemCaseSensitive(
					    cJSON_GetObjectItemCaseSensitive(ch, "logprobs"), "content")
				  : NULL;
	cJSON *no_lp = want_lp && !cJSON_IsArray(lp) ? cJSON_CreateArray() : NULL;
	if (no_lp)
		lp = no_lp;
	cJSON *output = cJSON_CreateArray();
	if (cJSON_IsString(content) && (content->valuestring[0] || !cJSON_GetArraySize(calls)))
		cJSON_AddItemToArray(output, message_item(mid, status_of(finish),
							  content->valuestring, lp));
	cJSON_Delete(no_lp);
	cJSON_ArrayForEach(c, calls) {
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
		const char *cid = str_field(c, "id"), *name = str_field(fn, "name");
		const char *args = str_field(fn, "arguments");
		/* an output cut off (max_output_tokens) ends in the call it cut */
		cJSON_AddItemToArray(output, call_item(cid ? cid : "", c->next ? "completed"
										: status_of(finish),
						       name ? name : "", args ? args : ""));
	}
	const cJSON *created = cJSON_GetObjectItemCaseSensitive(chat, "created");
	cJSON *o = response_obj(req, id, cJSON_IsNumber(created) ? created->valuedouble : 0,
				str_field(chat, "model"), status_of(finish), output,
				usage_convert(cJSON_GetObjectItemCaseSensitive(chat, "usage")));
	cJSON_Delete(chat);
	return o;
}

/* ---- streaming: chat chunks -> Responses events ---- */

#define RESP_MAX_CALLS 64

struct resp_call {
	char *call_id, *name;
	struct sbuf args;
	int out_index;
	bool open;
};

struct resp_stream {
	cJSON *req;              /* the Responses body (a copy) */
	char id[80], mid[80];
	char *model;
	double created;
	int seq;                 /* sequence_number of the next event */
	bool started;
	int n_out;               /* output items opened */
	cJSON *done;             /* finished output items, in output order */
	bool msg_open;           /* the message item is receiving text */
	int msg_index;
	struct sbuf text;
	cJSON *lp;               /* the text's logprobs so far; NULL: not asked for */
	cJSON *lp_pending;       /* ... those not yet sent with a delta */
	struct resp_call calls[RESP_MAX_CALLS];
	int n_calls;
	cJSON *usage;            /* Responses form, or NULL */
	char *finish;
	bool failed;             /* out of memory: events are incomplete */
};

struct resp_stream *api_resp_stream_new(const cJSON *req, const char *chat_id, double created,
					const char *model)
{
	struct resp_stream *s = ing_calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->req = cJSON_Duplicate(req, true);
	s->done = cJSON_CreateArray();
	s->model = str_copy(model ? model : "");
	const bool want_lp = logprobs_wanted(req);
	if (want_lp) {
		s->lp = cJSON_CreateArray();
		s->lp_pending = cJSON_CreateArray();
	}
	if (!s->req || !s->done || !s->model || (want_lp && (!s->lp || !s->lp_pending))) {
		api_resp_stream_free(s);
		return NULL;
	}
	api_responses_id(s->id, sizeof s->id, "resp_", chat_id);
	api_responses_id(s->mid, sizeof s->mid, "msg_", chat_id);
	s->created = created;
	return s;
}

void api_resp_stream_free(struct resp_stream *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n_calls; i++) {
		ing_free(s->calls[i].call_id);
		ing_free(s->calls[i].name);
		sbuf_free(&s->calls[i].args);
	}
	cJSON_Delete(s->req);
	cJSON_Delete(s->done);
	cJSON_Delete(s->lp);
	cJSON_Delete(s->lp_pending);
	cJSON_Delete(s->usage);
	sbuf_free(&s->text);
	ing_free(s->model);
	ing_free(s->finish);
	ing_free(s);
}

/* One event: "event: TYPE" and its data, ev (deleted) with type and
 * sequence_number added first. */
static void emit(struct resp_stream *s, const char *type, cJSON *ev, struct sbuf *out)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", type);
	cJSON_AddNumberToObject(o, "sequence_number", s->seq++);
	for (cJSON *it = ev ? ev->child : NULL; it;) { /* move ev's fields after those */
		cJSON *next = it->next;
		cJSON_AddItemToObject(o, it->string, cJSON_DetachItemViaPointer(ev, it));
		it = next;
	}
	cJSON_Delete(ev);
	char *p = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!p) {
		s->failed = out->oom = true;
		return;
	}
	sbuf_printf(out, "event: %s\ndata: %s\n\n", type, p);
	cJSON_free(p);
}

/* The response as it stands: finished items, then the open ones as they
 * are so far. */
static cJSON *snapshot(const struct resp_stream *s, const char *status, bool with_usage)
{
	cJSON *output = cJSON_Duplicate(s->done, true);
	return response_obj(s->req, s->id, s->created, s->model, status, output,
			    with_usage && s->usage ? cJSON_Duplicate(s->usage, true) : NULL);
}

static void emit_response(struct resp_stream *s, const char *type, const char *status,
			  struct sbuf *out)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddItemToObject(ev, "response", snapshot(s, status, true));
	emit(s, type, ev, out);
}

static cJSON *at(int output_index)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddNumberToObject(ev, "output_index", output_index);
	return ev;
}

/* An event about the message's text part (its output index, item id and
 * content index). */
static cJSON *at_text(const struct resp_stream *s)
{
	cJSON *ev = at(s->msg_index);
	cJSON_AddStringToObject(ev, "item_id", s->mid);
	cJSON_AddNumberToObject(ev, "content_index", 0);
	return ev;
}

static void message_open(struct resp_stream *s, struct sbuf *out)
{
	s->msg_open = true;
	s->msg_index = s->n_out++;
	cJSON *ev = at(s->msg_index);
	cJSON_AddItemToObject(ev, "item", message_item(s->mid, "in_progress", NULL, NULL));
	emit(s, "response.output_item.added", ev, out);
	cJSON *none = s->lp ? cJSON_CreateArray() : NULL;
	ev = at_text(s);
	cJSON_AddItemToObject(ev, "part", text_part("", none));
	cJSON_Delete(none);
	emit(s, "response.content_part.added", ev, out);
}

/* Moves the items of array from to the end of array to (NULLs: nothing). */
static void lp_move(cJSON *from, cJSON *to)
{
	for (cJSON *it = from && to ? from->child : NULL, *next; it; it = next) {
		next = it->next;
		cJSON_AddItemToArray(to, cJSON_DetachItemViaPointer(from, it));
	}
}

static void message_close(struct resp_stream *s, struct sbuf *out)
{
	if (!s->msg_open)
		return;
	s->msg_open = false;
	const char *text = s->text.p ? s->text.p : "";
	lp_move(s->lp_pending, s->lp); /* logprobs that came with no more text */
	cJSON *ev = at_text(s);
	cJSON_AddStringToObject(ev, "text", text);
	cJSON_AddItemToObject(ev, "logprobs", s->lp ? cJSON_Duplicate(s->lp, true)
						    : cJSON_CreateArray());
	emit(s, "response.output_text.done", ev, out);
	ev = at_text(s);
	cJSON_AddItemToObject(ev, "part", text_part(text, s->lp));
	emit(s, "response.content_part.done", ev, out);
	cJSON *item = message_item(s->mid, status_of(s->finish), text, s->lp);
	ev = at(s->msg_index);
	cJSON_AddItemToObject(ev, "item", cJSON_Duplicate(item, true));
	emit(s, "response.output_item.done", ev, out);
	cJSON_AddItemToArray(s->done, item);
}

/* Text t of a chunk, with its tokens' logprobs (lp: chat's content array,
 * or NULL). The chat stream can hold text back (a stop string may be
 * starting) while its logprobs come: they wait in lp_pending and go out
 * with the next delta, so the deltas' logprobs add up to the text's. */
static void text_delta(struct resp_stream *s, const char *t, const cJSON *lp,
		       struct sbuf *out)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, (s->lp_pending && cJSON_IsArray(lp) ? lp : NULL))
		cJSON_AddItemToArray(s->lp_pending, cJSON_Duplicate(it, true));
	if (!t || !*t)
		return;
	if (!s->msg_open)
		message_open(s, out);
	sbuf_puts(&s->text, t);
	cJSON *ev = at_text(s);
	cJSON_AddStringToObject(ev, "delta", t);
	cJSON_AddItemToObject(ev, "logprobs", s->lp_pending ? cJSON_Duplicate(s->lp_pending, true)
							     : cJSON_CreateArray());
	lp_move(s->lp_pending, s->lp);
	emit(s, "response.output_text.delta", ev, out);
}

/* An event about function call c's item (its output index and item id). */
static cJSON *at_call(const struct resp_call *c)
{
	char id[80];
	api_responses_id(id, sizeof id, "fc_", c->call_id);
	cJSON *ev = at(c->out_index);
	cJSON_AddStringToObject(ev, "item_id", id);
	return ev;
}

/* Ends call c's item with status: "completed" when a later call starts,
 * the output's (status_of) when the output ends with it. */
static void call_close(struct resp_stream *s, struct resp_call *c, const char *status,
		       struct sbuf *out)
{
	if (!c->open)
		return;
	c->open = false;
	const char *args = c->args.p ? c->args.p : "";
	cJSON *ev = at_call(c);
	cJSON_AddStringToObject(ev, "arguments", args);
	emit(s, "response.function_call_arguments.done", ev, out);
	cJSON *item = call_item(c->call_id, status, c->name, args);
	ev = at(c->out_index);
	cJSON_AddItemToObject(ev, "item", cJSON_Duplicate(item, true));
	emit(s, "response.output_item.done", ev, out);
	cJSON_AddItemToArray(s->done, item);
}

/* One tool_calls delta entry: a head (with id) opens call `index`; any
 * arguments stream into it. */
static void call_delta(struct resp_stream *s, const cJSON *tc, struct sbuf *out)
{
	const cJSON *idx = cJSON_GetObjectItemCaseSensitive(tc, "index");
	const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
	const char *cid = str_field(tc, "id"), *name = str_field(fn, "name");
	const char *args = str_field(fn, "arguments");
	int i = cJSON_IsNumber(idx) ? idx->valueint : 0;
	if (i < 0 || i >= RESP_MAX_CALLS)
		return;
	if (cid && i >= s->n_calls) {
		message_close(s, out);
		for (int j = 0; j < s->n_calls; j++)
			call_close(s, &s->calls[j], "completed", out);
		s->n_calls = i + 1;
		struct resp_call *c = &s->calls[i];
		c->call_id = str_copy(cid);
		c->name = str_copy(name ? name : "");
		if (!c->call_id || !c->name) {
			s->failed = out->oom = true;
			return;
		}
		c->open = true;
		c->out_index = s->n_out++;
		cJSON *ev = at(c->out_index);
		cJSON_AddItemToObject(ev, "item", call_item(c->call_id, "in_progress", c->name, ""));
		emit(s, "response.output_item.added", ev, out);
	}
	struct resp_call *c = i < s->n_calls ? &s->calls[i] : NULL;
	if (!c || !c->open || !args || !*args)
		return;
	sbuf_puts(&c->args, args);
	cJSON *ev = at_call(c);
	cJSON_AddStringToObject(ev, "delta", args);
	emit(s, "response.function_call_arguments.delta", ev, out);
}

void api_resp_stream_chunk(struct resp_stream *s, cJSON *chunk, struct sbuf *out)
{
	if (!chunk) {
		s->failed = out->oom = true;
		return;
	}
	if (!s->started) {
		s->started = true;
		emit_response(s, "response.created", "in_progress", out);
		emit_response(s, "response.in_progress", "in_progress", out);
	}
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(chunk, "usage");
	if (cJSON_IsObject(u)) {
		cJSON_Delete(s->usage);
		s->usage = usage_convert(u);
	}
	const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(ch, "delta"), *tc;
	const char *content = str_field(d, "content"), *finish = str_field(ch, "finish_reason");
	const cJSON *lp = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(ch, "logprobs"), "content");
	text_delta(s, content, lp, out);
	cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(d, "tool_calls"))
		call_delta(s, tc, out);
	if (finish && !s->finish)
		s->finish = str_copy(finish);
	cJSON_Delete(chunk);
}

cJSON *api_resp_stream_end(struct resp_stream *s, struct sbuf *out)
{
	message_close(s, out);
	const char *status = status_of(s->finish);
	for (int i = 0; i < s->n_calls; i++)
		call_close(s, &s->calls[i], status, out);
	cJSON *r = snapshot(s, status, true), *ev = cJSON_CreateObject();
	cJSON *copy = cJSON_Duplicate(r, true);
	cJSON_AddItemToObject(ev, "response", r);
	emit(s, !strcmp(status, "incomplete") ? "response.incomplete" : "response.completed", ev,
	     out);
	return copy;
}

void api_resp_stream_error(struct resp_stream *s, const char *msg, const char *code,
			   struct sbuf *out)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "code", code);
	cJSON_AddStringToObject(ev, "message", msg);
	cJSON_AddNullToObject(ev, "param");
	emit(s, "error", ev, out);
	cJSON *r = snapshot(s, "failed", false);
	cJSON *err = cJSON_CreateObject();
	cJSON_AddStringToObject(err, "code", code);
	cJSON_AddStringToObject(err, "message", msg);
	cJSON_ReplaceItemInObjectCaseSensitive(r, "error", err);
	ev = cJSON_CreateObject();
	cJSON_AddItemToObject(ev, "response", r);
	emit(s, "response.failed", ev, out);
}
