/* api.c — routing, errors and the small endpoints of the OpenAI API.
 *
 * Every error answer has OpenAI's shape,
 *   {"error": {"message", "type", "param", "code"}},
 * with the HTTP status saying what kind: 400 bad request (param names the
 * field), 401 key, 404 unknown path or model, 405 method, 413 body size,
 * 429 engine queue full (with Retry-After), 500 ours. */
#include "api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_int.h"
#include "engine.h"
#include "mem.h"
#include "metrics.h"
#include "model.h"
#include "sample.h"
#include "server.h"
#include "template.h"
#include "version.h"

/* ---- errors and JSON answers ---- */

int api_fail(struct api_error *e, int status, const char *param, const char *code,
	     const char *fmt, ...)
{
	e->status = status;
	e->type = status >= 500 ? "server_error" : "invalid_request_error";
	e->code = code;
	snprintf(e->param, sizeof e->param, "%s", param ? param : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof e->message, fmt, ap);
	va_end(ap);
	return -1;
}

void api_respond_json(struct server_call *c, int status, cJSON *obj)
{
	char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
	cJSON_Delete(obj);
	if (!s) {
		static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
					  "\"server_error\",\"param\":null,\"code\":null}}";
		server_call_respond(c, 500, "application/json", oom, sizeof oom - 1);
		return;
	}
	server_call_respond(c, status, "application/json", s, strlen(s));
	cJSON_free(s);
}

void api_respond_error(struct server_call *c, const struct api_error *e)
{
	cJSON *o = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(o, "error");
	cJSON_AddItemToObject(err, "message", api_json_text(e->message, strlen(e->message)));
	cJSON_AddStringToObject(err, "type", e->type ? e->type : "invalid_request_error");
	if (e->param[0])
		cJSON_AddItemToObject(err, "param", api_json_text(e->param, strlen(e->param)));
	else
		cJSON_AddNullToObject(err, "param");
	if (e->code)
		cJSON_AddStringToObject(err, "code", e->code);
	else
		cJSON_AddNullToObject(err, "code");
	api_respond_json(c, e->status, o);
}

uint64_t api_unique(struct api *a)
{
	uint64_t x = a->salt + 0x9E3779B97F4A7C15ull * (atomic_fetch_add(&a->counter, 1) + 1);
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

/* ---- endpoints ---- */

static void on_health(struct api *a, struct server_call *c, const cJSON *body)
{
	static const char ok[] = "{\"status\":\"ok\"}";
	server_call_respond(c, 200, "application/json", ok, sizeof ok - 1);
}

/* GET /version, as vLLM answers it. */
static void on_version(struct api *a, struct server_call *c, const cJSON *body)
{
	static const char v[] = "{\"version\":\"" INGOT_VERSION "\"}";
	server_call_respond(c, 200, "application/json", v, sizeof v - 1);
}

static cJSON *model_json(const struct api *a)
{
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "id", a->model_name);
	cJSON_AddStringToObject(m, "object", "model");
	cJSON_AddNumberToObject(m, "created", (double)time(NULL));
	cJSON_AddStringToObject(m, "owned_by", "ingot");
	cJSON_AddStringToObject(m, "root", a->model_name);
	cJSON_AddNullToObject(m, "parent");
	cJSON_AddNumberToObject(m, "max_model_len", (double)a->max_model_len);
	return m;
}

static void on_models(struct api *a, struct server_call *c, const cJSON *body)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "object", "list");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "data"), model_json(a));
	api_respond_json(c, 200, o);
}

/* GET and DELETE /v1/responses/{id}: a stored response, or 404. */
static void on_response_one(struct api *a, struct server_call *c, const char *id,
			    bool del)
{
	cJSON *o = NULL;
	bool found = false;
	if (a->store && !strchr(id, '/')) {
		if (del && (found = resp_store_delete(a->store, id))) {
			o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "id", id);
			cJSON_AddStringToObject(o, "object", "response");
			cJSON_AddTrueToObject(o, "deleted");
		} else if (!del) {
			found = (o = resp_store_get(a->store, id)) != NULL;
		}
	}
	if (found) {
		api_respond_json(c, 200, o);
		return;
	}
	struct api_error e;
	api_fail(&e, 404, NULL, "not_found", "Response with id '%.160s' not found.", id);
	api_respond_error(c, &e);
}

/* The query's limit (1..100, default 20) and order (asc, or desc by
 * default), or a 400. */
static int list_args(struct server_call *c, long *limit, bool *asc, struct api_error *e)
{
	const char *l = server_call_query(c, "limit"), *o = server_call_query(c, "order");
	char *end;
	*limit = 20;
	if (l) {
		*limit = strtol(l, &end, 10);
		if (end == l || *end || *limit < 1 || *limit > 100)
			return api_fail(e, 400, "limit", "invalid_value",
					"'limit' must be an integer from 1 to 100");
	}
	*asc = o && !strcmp(o, "asc");
	if (o && !*asc && strcmp(o, "desc"))
		return api_fail(e, 400, "order", "invalid_value", "'order' must be asc or desc");
	return 0;
}

/* Where a page of the n items (listed in order asc) starts: past the
 * item the query's "after" names, 0 without one, -1 when no item has
 * that id. */
static int after_index(const cJSON *items, int n, bool asc, struct server_call *c)
{
	const char *after = server_call_query(c, "after");
	if (!after)
		return 0;
	for (int k = 0; k < n; k++) {
		const cJSON *it = cJSON_GetArrayItem(items, asc ? k : n - 1 - k);
		const cJSON *iid = cJSON_GetObjectItemCaseSensitive(it, "id");
		if (cJSON_IsString(iid) && !strcmp(iid->valuestring, after))
			return k + 1;
	}
	return -1;
}

/* GET /v1/responses/{id}/input_items: the items response id was
 * generated from (its conversation's earlier turns and its own input),
 * a page at a time as OpenAI lists them: limit, order, after (an item id:
 * the page starts past it). */
static void on_input_items(struct api *a, struct server_call *c, const char *id)
{
	struct api_error e;
	long limit;
	bool asc;
	char missing[160];
	cJSON *items = NULL;
	int rc = list_args(c, &limit, &asc, &e) ? 1
		 : !a->store ? RESP_STORE_NOT_FOUND
			     : resp_store_history(a->store, id, false, &items, missing,
						  sizeof missing);
	if (rc == RESP_STORE_NOT_FOUND && a->store && strcmp(missing, id))
		api_fail(&e, 404, NULL, "not_found", "Response with id '%.160s' is stored, but an "
			 "earlier turn of its conversation ('%.160s') is not.", id, missing);
	else if (rc == RESP_STORE_NOT_FOUND || rc == RESP_STORE_TOO_LONG)
		api_fail(&e, 404, NULL, "not_found", "Response with id '%.160s' not found.", id);
	else if (rc < 0)
		api_fail(&e, 500, NULL, NULL, "out of memory");
	if (rc) {
		api_respond_error(c, &e);
		return;
	}
	int n = cJSON_GetArraySize(items), start = after_index(items, n, asc, c);
	if (start < 0) {
		api_fail(&e, 400, "after", "invalid_value",
			 "No input item with id '%.160s' in response '%.160s'",
			 server_call_query(c, "after"), id);
		cJSON_Delete(items);
		api_respond_error(c, &e);
		return;
	}
	cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
	cJSON_AddStringToObject(o, "object", "list");
	for (int k = start; k < n && k - start < limit; k++) {
		cJSON *it = cJSON_GetArrayItem(items, asc ? k : n - 1 - k);
		cJSON_AddItemToArray(data, cJSON_Duplicate(it, true));
	}
	int got = cJSON_GetArraySize(data);
	const cJSON *first = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, 0), "id");
	const cJSON *last = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, got - 1),
							     "id");
	cJSON_AddItemToObject(o, "first_id", cJSON_IsString(first) ? cJSON_CreateString(
					      first->valuestring) : cJSON_CreateNull());
	cJSON_AddItemToObject(o, "last_id", cJSON_IsString(last) ? cJSON_CreateString(
					     last->valuestring) : cJSON_CreateNull());
	cJSON_AddBoolToObject(o, "has_more", start + got < n);
	cJSON_Delete(items);
	api_respond_json(c, 200, o);
}

/* GET /v1/models/{id} (OpenAI's retrieve): ours, or 404. */
static void on_model_one(struct api *a, struct server_call *c, const char *id)
{
	if (!strcmp(id, a->model_name)) {
		api_respond_json(c, 200, model_json(a));
		return;
	}
	struct api_error e;
	api_fail(&e, 404, "model", "model_not_found", "The model `%.200s` does not exist.", id);
	api_respond_error(c, &e);
}

static void on_metrics(struct api *a, struct server_call *c, const cJSON *body)
{
	struct engine_stats st;
	engine_stats_get(a->e, &st);
	size_t bytes = 0, stored = a->store ? resp_store_usage(a->store, &bytes) : 0;
	metrics_set_responses(a->metrics, stored, bytes);
	char *text;
	size_t len;
	ing_err err;
	if (metrics_render(a->metrics, &st, &text, &len, &err)) {
		struct api_error e;
		api_fail(&e, 500, NULL, NULL, "%s", err.msg);
		api_respond_error(c, &e);
		return;
	}
	server_call_respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
	ing_free(text);
}

/* Appends the tokens of the forced start of a tool call (our own markup
 * and a checked function name: special tokens parsed). */
static int prompt_add_text(struct api *a, const char *text, struct token_ids *t,
			   struct api_error *e)
{
	ing_err err;
	if (tokenizer_encode(a->tk, text, strlen(text), TOKENIZER_PARSE_SPECIAL, t, &err))
		return api_fail(e, 500, NULL, NULL, "tokenizer: %s", err.msg);
	return 0;
}

/* vLLM's truncate_prompt_tokens: k keeps each prompt's last k tokens
 * (left truncation); -1 keeps the last max_model_len. */
static int prompts_truncate(struct api *a, const cJSON *body, struct gen_request *r,
			    struct api_error *e)
{
	int64_t k = 0;
	if (api_get_int(body, "truncate_prompt_tokens", -1, INT32_MAX, &k, e))
		return -1;
	if (k == 0 && api_get(body, "truncate_prompt_tokens"))
		return api_fail(e, 400, "truncate_prompt_tokens", "invalid_value",
				"'truncate_prompt_tokens' must be -1 or at least 1");
	if (k == -1)
		k = a->max_model_len;
	for (int i = 0; k > 0 && i < r->n_prompts; i++) {
		struct token_ids *t = &r->prompts[i];
		if (t->n > (size_t)k) {
			memmove(t->ids, t->ids + (t->n - (size_t)k), (size_t)k * sizeof *t->ids);
			t->n = (size_t)k;
		}
	}
	return 0;
}

void api_trace_begin(struct api *a, struct server_call *c, struct gen_request *r)
{
	if (!a->tracer)
		return;
	r->t_start_ns = trace_now_ns();
	r->has_parent = trace_parent_parse(server_call_header(c, "traceparent"), &r->parent);
}

bool api_request_id_ok(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++)
		if ((unsigned char)s[n] <= 0x20 || (unsigned char)s[n] >= 0x7f || s[n] == '"' ||
		    s[n] == '\\' || n >= API_REQUEST_ID_MAX)
			return false;
	return n > 0;
}

/* The caller's id for the request, as vLLM takes it: the X-Request-Id
 * header, else the body's request_id; checked (api_request_id_ok). */
static int request_id_read(const cJSON *body, struct server_call *c, struct gen_request *r,
			   struct api_error *e)
{
	const char *hdr = c ? server_call_header(c, "X-Request-Id") : NULL;
	const cJSON *f = api_get(body, "request_id");
	const char *id = hdr, *param = "X-Request-Id";
	if (!id && f && !cJSON_IsNull(f)) {
		if (!cJSON_IsString(f))
			return api_fail(e, 400, "request_id", "invalid_type",
					"'request_id' must be a string");
		id = f->valuestring, param = "request_id";
	}
	if (!id)
		return 0;
	if (!api_request_id_ok(id))
		return api_fail(e, 400, param, "invalid_value",
				"'%s' must be 1 to %d printable ASCII characters without spaces, "
				"quotes or backslashes", param, API_REQUEST_ID_MAX);
	snprintf(r->request_id, sizeof r->request_id, "%s", id);
	return 0;
}

int api_gen_request_read(struct api *a, const cJSON *body, bool chat, struct server_call *c,
			 struct gen_request *r, struct api_error *e)
{
	int rc = gen_request_parse(a, body, chat, r, e);
	if (!rc)
		rc = request_id_read(body, c, r, e);
	if (!rc && c)
		api_trace_begin(a, c, r);
	if (!rc && !chat)
		rc = api_prompt_completion(a, api_get(body, "prompt"), true, r, e);
	if (!rc && chat)
		rc = api_tools_parse(a, body, r, e);
	if (!rc && chat && !(r->prompts = ing_calloc(1, sizeof *r->prompts)))
		rc = api_fail(e, 500, NULL, NULL, "out of memory");
	if (!rc && chat) {
		r->n_prompts = 1;
		rc = api_prompt_chat(a, body, r->tools_on, &r->prompts[0], e);
	}
	if (!rc && chat)
		rc = api_prompt_chat_echo(body, &r->echo_text, e);
	if (!rc && r->echo_text && r->tools_on)
		rc = api_fail(e, 400, "echo", "invalid_value",
			      "'echo' of a prefilled answer is not supported with tools");
	if (!rc && chat && r->tool_prefix)
		rc = prompt_add_text(a, r->tool_prefix, &r->prompts[0], e);
	if (!rc)
		rc = prompts_truncate(a, body, r, e);
	if (rc)
		gen_request_free(r);
	return rc;
}

static void on_generate(struct api *a, struct server_call *c, const cJSON *body, bool chat)
{
	struct api_error e;
	struct gen_request r;
	if (api_gen_request_read(a, body, chat, c, &r, &e)) {
		api_respond_error(c, &e);
		return;
	}
	api_generate(a, c, &r);
}

static void on_chat(struct api *a, struct server_call *c, const cJSON *body)
{
	on_generate(a, c, body, true);
}

static void on_completions(struct api *a, struct server_call *c, const cJSON *body)
{
	on_generate(a, c, body, false);
}

/* The Responses API: the request as a chat one, the answer translated back
 * (api_responses.c). */
static void on_responses(struct api *a, struct server_call *c, const cJSON *body)
{
	struct api_error e;
	struct gen_request r;
	cJSON *chat = NULL;
	int rc = api_responses_chat_body(body, a->store, &chat, &e);
	if (!rc && (rc = api_gen_request_read(a, chat, true, c, &r, &e)))
		api_responses_error_param(&e);
	cJSON_Delete(chat);
	if (!rc && !(r.responses = cJSON_Duplicate(body, true))) {
		gen_request_free(&r);
		rc = api_fail(&e, 500, NULL, NULL, "out of memory");
	}
	/* what the answer says and api_responses_keep reads: stored when the
	 * server keeps responses and the request did not say store: false */
	const cJSON *store = rc ? NULL : api_get(body, "store");
	if (!rc && store && !cJSON_IsBool(store)) {
		gen_request_free(&r);
		rc = api_fail(&e, 400, "store", "invalid_type", "'store' must be a boolean");
	}
	if (!rc) {
		cJSON_DeleteItemFromObjectCaseSensitive(r.responses, "store");
		cJSON_AddBoolToObject(r.responses, "store", a->store && !cJSON_IsFalse(store));
	}
	if (rc) {
		api_respond_error(c, &e);
		return;
	}
	api_generate(a, c, &r);
}

cJSON *api_ids_json(const struct token_ids *t)
{
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; arr && i < t->n; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber(t->ids[i]));
	return arr;
}

static int tokenize_body(struct api *a, const cJSON *body, struct token_ids *t,
			 struct api_error *e)
{
	bool special = !api_get(body, "messages");
	if (api_get_bool(body, "add_special_tokens", &special, e))
		return -1;
	if (api_get(body, "messages"))
		return api_prompt_chat(a, body, api_tools_rendered(body), t, e);
	const cJSON *p = api_get(body, "prompt");
	if (!cJSON_IsString(p))
		return api_fail(e, 400, "prompt", p ? "invalid_type" : "missing_required_parameter",
				"'prompt' must be a string (or give 'messages')");
	ing_err err;
	unsigned flags = TOKENIZER_PARSE_SPECIAL | (special ? TOKENIZER_ADD_SPECIAL : 0);
	if (tokenizer_encode(a->tk, p->valuestring, strlen(p->valuestring), flags, t, &err))
		return api_fail(e, 400, "prompt", "invalid_value", "cannot tokenize: %s", err.msg);
	return 0;
}

static void on_tokenize(struct api *a, struct server_call *c, const cJSON *body)
{
	struct api_error e;
	struct token_ids t = { 0 };
	bool strs = false;
	if (api_get_bool(body, "return_token_strs", &strs, &e) || tokenize_body(a, body, &t, &e)) {
		token_ids_free(&t);
		api_respond_error(c, &e);
		return;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "count", (double)t.n);
	cJSON_AddNumberToObject(o, "max_model_len", (double)a->max_model_len);
	cJSON_AddItemToObject(o, "tokens", api_ids_json(&t));
	cJSON *ts = strs ? cJSON_AddArrayToObject(o, "token_strs") : NULL;
	if (!strs)
		cJSON_AddNullToObject(o, "token_strs");
	for (size_t i = 0; ts && i < t.n; i++) {
		size_t n;
		const char *s = tokenizer_token_text(a->tk, t.ids[i], &n);
		cJSON_AddItemToArray(ts, api_json_text(s ? s : "", s ? n : 0));
	}
	token_ids_free(&t);
	api_respond_json(c, 200, o);
}

static int detok_ids(const struct api *a, const cJSON *toks, struct token_ids *t,
		     struct api_error *e)
{
	if (!cJSON_IsArray(toks))
		return api_fail(e, 400, "tokens", toks ? "invalid_type" : "missing_required_parameter",
				"'tokens' must be an array of token ids");
	const cJSON *it;
	cJSON_ArrayForEach(it, toks) {
		int32_t id;
		if (api_token_id(a, it, "tokens", &id, e))
			return -1;
		if (token_ids_push(t, id))
			return api_fail(e, 500, NULL, NULL, "out of memory");
	}
	return 0;
}

static void on_detokenize(struct api *a, struct server_call *c, const cJSON *body)
{
	struct api_error e;
	struct token_ids t = { 0 };
	char *text = NULL;
	size_t len;
	ing_err err;
	if (!detok_ids(a, api_get(body, "tokens"), &t, &e) &&
	    tokenizer_decode(a->tk, t.ids, t.n, TOKENIZER_RENDER_SPECIAL, &text, &len, &err))
		api_fail(&e, 500, NULL, NULL, "%s", err.msg);
	token_ids_free(&t);
	if (!text) {
		api_respond_error(c, &e);
		return;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "prompt", api_json_text(text, len));
	ing_free(text);
	api_respond_json(c, 200, o);
}

/* ---- routing ---- */

struct route {
	const char *path, *method;
	void (*fn)(struct api *a, struct server_call *c, const cJSON *body);
	bool json;  /* POST with a JSON object body */
};

static const struct route routes[] = {
	{ "/v1/chat/completions", "POST", on_chat, true },
	{ "/v1/completions", "POST", on_completions, true },
	{ "/v1/responses", "POST", on_responses, true },
	{ "/v1/models", "GET", on_models, false },
	{ "/tokenize", "POST", on_tokenize, true },
	{ "/detokenize", "POST", on_detokenize, true },
	{ "/health", "GET", on_health, false },
	{ "/metrics", "GET", on_metrics, false },
	{ "/version", "GET", on_version, false },
};

/* The body as one JSON value and nothing after it but whitespace; NULL
 * with why set when it is not. (Bytes that are not UTF-8 inside strings
 * pass: they reach the tokenizer, which takes any bytes, and answers
 * carry U+FFFD for them.) */
static cJSON *body_json(const char *s, size_t len, const char **why)
{
	const char *end = NULL;
	cJSON *b = cJSON_ParseWithLengthOpts(s, len, &end, false);
	if (!b) {
		*why = "it is not valid JSON";
		return NULL;
	}
	while (end < s + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
		end++;
	if (end != s + len) {
		*why = "there is more after the JSON value";
		cJSON_Delete(b);
		return NULL;
	}
	return b;
}

cJSON *api_body_parse(const struct api *a, const char *s, size_t len, struct api_error *e)
{
	const char *why = "it must be a JSON object";
	cJSON *b = body_json(s, len, &why);
	const cJSON *m = b ? api_get(b, "model") : NULL;
	if (!cJSON_IsObject(b))
		api_fail(e, 400, NULL, "invalid_json", "We could not parse the JSON body of your "
			 "request: %s.", why);
	else if (m && !cJSON_IsString(m))
		api_fail(e, 400, "model", "invalid_type", "'model' must be a string");
	else if (m && strcmp(m->valuestring, a->model_name))
		api_fail(e, 404, "model", "model_not_found", "The model `%.200s` does not exist.",
			 m->valuestring);
	else
		return b;
	cJSON_Delete(b);
	return NULL;
}

/* The body as a JSON object whose "model" (if any) is ours; NULL after
 * answering with the error. */
static cJSON *body_read(struct api *a, struct server_call *c)
{
	struct api_error e;
	size_t len;
	const char *s = server_call_body(c, &len);
	cJSON *b = api_body_parse(a, s, len, &e);
	if (!b)
		api_respond_error(c, &e);
	return b;
}

/* 405 for a path served under other methods, with the Allow header
 * HTTP requires. */
static void method_not_allowed(struct server_call *c, const char *method, const char *path,
			       const char *allow)
{
	struct api_error e;
	server_call_header_add(c, "Allow", allow);
	api_fail(&e, 405, NULL, "method_not_allowed", "Method %.16s is not allowed for %.200s",
		 method, path);
	api_respond_error(c, &e);
}

const char *api_route_path(const char *path, char buf[API_PATH_MAX])
{
	/* one trailing slash means the same resource (Starlette, in front of
	 * vLLM, redirects it) */
	size_t n = strlen(path);
	if (n <= 1 || n >= API_PATH_MAX || path[n - 1] != '/')
		return path;
	memcpy(buf, path, n - 1);
	buf[n - 1] = '\0';
	return buf;
}

void api_handle(void *ud, struct server_call *c)
{
	struct api *a = ud;
	const char *path = server_call_path(c), *method = server_call_method(c);
	const struct route *r = NULL, *known = NULL; /* known: a route of this path */
	char trimmed[API_PATH_MAX];
	path = api_route_path(path, trimmed);
	/* the caller's request id goes back with the answer (as vLLM's
	 * --enable-request-id-headers does) */
	const char *rid = server_call_header(c, "X-Request-Id");
	if (rid && api_request_id_ok(rid))
		server_call_header_add(c, "X-Request-Id", rid);
	static const char one_model[] = "/v1/models/", one_resp[] = "/v1/responses/";
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	if (!strncmp(path, one_model, sizeof one_model - 1) && get) {
		on_model_one(a, c, path + sizeof one_model - 1);
		return;
	}
	static const char items_tail[] = "/input_items";
	size_t plen = strlen(path), tlen = sizeof items_tail - 1, rlen = sizeof one_resp - 1;
	if (!strncmp(path, one_resp, rlen) && get && plen > rlen + tlen &&
	    !strcmp(path + plen - tlen, items_tail)) {
		char id[192];
		snprintf(id, sizeof id, "%.*s", (int)(plen - rlen - tlen), path + rlen);
		on_input_items(a, c, id);
		return;
	}
	if (!strncmp(path, one_resp, rlen) && (get || !strcmp(method, "DELETE"))) {
		on_response_one(a, c, path + rlen, !get);
		return;
	}
	if (!strncmp(path, one_model, sizeof one_model - 1) ||
	    (!strncmp(path, one_resp, rlen) && plen > rlen + tlen && !strcmp(path + plen - tlen, items_tail))) {
		method_not_allowed(c, method, path, "GET, HEAD");
		return;
	}
	if (!strncmp(path, one_resp, rlen)) {
		method_not_allowed(c, method, path, "GET, HEAD, DELETE");
		return;
	}
	for (size_t i = 0; i < sizeof routes / sizeof routes[0] && !r; i++) {
		if (strcmp(routes[i].path, path))
			continue;
		known = &routes[i];
		if (!strcmp(routes[i].method, method) ||
		    (!strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET")))
			r = &routes[i];
	}
	if (!r && known) {
		method_not_allowed(c, method, path,
				   !strcmp(known->method, "GET") ? "GET, HEAD" : known->method);
		return;
	}
	if (!r) {
		struct api_error e;
		api_fail(&e, 404, NULL, "unknown_url", "Invalid URL (%.16s %.200s)", method, path);
		api_respond_error(c, &e);
		return;
	}
	cJSON *body = r->json ? body_read(a, c) : NULL;
	if (r->json && !body)
		return;
	r->fn(a, c, body);
	cJSON_Delete(body);
}

/* ---- lifecycle ---- */

static char *dup_str(const char *s)
{
	return ing_strndup(s, strlen(s));
}

int api_create(struct engine *e, struct metrics *m, const char *model_name,
	       const char *chat_template, struct api **out, const char **note, ing_err *err)
{
	*out = NULL;
	const char *dummy;
	struct api *a = ing_calloc(1, sizeof *a);
	if (!a || !(a->model_name = dup_str(model_name))) {
		ing_free(a);
		return ing_err_set(err, ING_ERR_NOMEM, "api: out of memory");
	}
	a->e = e;
	a->tk = engine_tokenizer(e);
	a->metrics = m;
	a->max_model_len = engine_config_of(e)->max_model_len;
	a->n_vocab = tokenizer_n_vocab(a->tk);
	a->salt = sample_seed_random();
	pthread_mutex_init(&a->mu, NULL);
	pthread_mutex_init(&a->gmu, NULL);
	int rc = api_template_load(a, engine_model(e)->gguf, chat_template,
				   note ? note : &dummy, err);
	if (rc) {
		api_free(a);
		return rc;
	}
	*out = a;
	return ING_OK;
}

void api_set_tracer(struct api *a, struct trace_exporter *t)
{
	a->tracer = t;
}

int api_set_responses_store(struct api *a, size_t max_bytes, ing_err *err)
{
	if (!max_bytes)
		return ING_OK;
	if (resp_store_create(max_bytes, &a->store))
		return ing_err_set(err, ING_ERR_NOMEM, "api: out of memory");
	return ING_OK;
}

void api_free(struct api *a)
{
	if (!a)
		return;
	resp_store_free(a->store);
	template_free(a->tpl);
	api_gcache_free(a);
	pthread_mutex_destroy(&a->mu);
	pthread_mutex_destroy(&a->gmu);
	ing_free(a->model_name);
	ing_free(a);
}
