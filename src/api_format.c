/* api_format.c — response_format: the grammar a request's output must
 * follow, and the cache that compiles each schema once.
 *
 *   {"type": "text"}                          no constraint
 *   {"type": "json_object"}                   any JSON object
 *   {"type": "json_schema", "json_schema": {"name": ..., "schema": {...},
 *    "strict": true}}                         a value the schema accepts
 *
 * and ingot's own request field "structured": {"regex": "..."} (the whole
 * output matches) or {"grammar": "..."} (GBNF, start rule root), not
 * together with a JSON response_format.
 *
 * "strict" is accepted either way: the output is always constrained. A
 * schema construct we cannot guarantee is refused with 400 naming it
 * (grammar.h). Compiled grammars are kept in a small LRU keyed by the
 * schema's compact JSON text; a grammar also carries the automaton states
 * and token masks earlier requests built, so a repeated schema starts warm. */
#include <stdio.h>
#include <string.h>

#include "api_int.h"
#include "grammar.h"
#include "mem.h"

void api_gcache_free(struct api *a)
{
	for (int i = 0; i < API_GRAMMAR_CACHE; i++) {
		ing_free(a->gcache[i].key);
		grammar_free(a->gcache[i].g);
		a->gcache[i] = (struct api_gcache_entry){ 0 };
	}
}

struct grammar *api_gcache_get(struct api *a, const char *key)
{
	struct grammar *g = NULL;
	pthread_mutex_lock(&a->gmu);
	for (int i = 0; i < API_GRAMMAR_CACHE; i++)
		if (a->gcache[i].key && !strcmp(a->gcache[i].key, key)) {
			a->gcache[i].used = ++a->gclock;
			g = grammar_ref(a->gcache[i].g);
			break;
		}
	pthread_mutex_unlock(&a->gmu);
	return g;
}

void api_gcache_put(struct api *a, const char *key, struct grammar *g)
{
	char *k = ing_strndup(key, strlen(key));
	if (!k)
		return;
	pthread_mutex_lock(&a->gmu);
	int victim = 0;
	for (int i = 1; i < API_GRAMMAR_CACHE; i++)
		if (a->gcache[i].used < a->gcache[victim].used)
			victim = i;
	struct api_gcache_entry *s = &a->gcache[victim];
	ing_free(s->key);
	grammar_free(s->g);
	*s = (struct api_gcache_entry){ .key = k, .g = grammar_ref(g), .used = ++a->gclock };
	pthread_mutex_unlock(&a->gmu);
}

static int compile_error(int rc, const ing_err *err, struct api_error *e)
{
	if (rc == ING_ERR_NOMEM)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	return api_fail(e, 400, "response_format", rc == ING_ERR_UNSUPPORTED ? "unsupported_schema"
									  : "invalid_json_schema",
			"Invalid schema for response_format: %s", err->msg);
}

/* The grammar of a json_schema response_format into *out. */
static int schema_grammar(struct api *a, const cJSON *rf, struct grammar **out,
			  struct api_error *e)
{
	const cJSON *js = api_get(rf, "json_schema");
	if (!cJSON_IsObject(js))
		return api_fail(e, 400, "response_format", js ? "invalid_type" : "missing_required_parameter",
				"'response_format.json_schema' must be an object");
	const cJSON *strict = api_get(js, "strict");
	if (strict && !cJSON_IsBool(strict))
		return api_fail(e, 400, "response_format", "invalid_type",
				"'response_format.json_schema.strict' must be a boolean");
	const cJSON *schema = api_get(js, "schema");
	/* no schema: any JSON value */
	char *printed = schema ? cJSON_PrintUnformatted(schema) : NULL;
	const char *text = schema ? printed : "true";
	size_t n = text ? strlen(text) : 0;
	char *key = ing_malloc(n + 8);
	if (!key || !text) {
		cJSON_free(printed);
		ing_free(key);
		return api_fail(e, 500, NULL, NULL, "out of memory");
	}
	snprintf(key, n + 8, "schema:%s", text);
	int rc = ING_OK;
	ing_err err = { 0 };
	if (!(*out = api_gcache_get(a, key))) {
		rc = grammar_from_json_schema(text, n, out, &err);
		if (rc == ING_OK)
			api_gcache_put(a, key, *out);
	}
	cJSON_free(printed);
	ing_free(key);
	return rc ? compile_error(rc, &err, e) : 0;
}

/* "structured": {"regex": ...} or {"grammar": ...} into *out. */
static int structured_grammar(struct api *a, const cJSON *st, struct grammar **out,
			      struct api_error *e)
{
	const cJSON *re = api_get(st, "regex"), *gbnf = api_get(st, "grammar");
	if (!cJSON_IsObject(st) || !!re == !!gbnf || !cJSON_IsString(re ? re : gbnf))
		return api_fail(e, 400, "structured", "invalid_value",
				"'structured' must be {\"regex\": string} or {\"grammar\": string}");
	const char *text = (re ? re : gbnf)->valuestring;
	size_t n = strlen(text);
	char *key = ing_malloc(n + 8);
	if (!key)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	snprintf(key, n + 8, "%s:%s", re ? "regex" : "gbnf", text);
	int rc = ING_OK;
	ing_err err = { 0 };
	if (!(*out = api_gcache_get(a, key))) {
		rc = re ? grammar_from_regex(text, n, out, &err) : grammar_from_gbnf(text, n, out, &err);
		if (rc == ING_OK)
			api_gcache_put(a, key, *out);
	}
	ing_free(key);
	if (rc == ING_ERR_NOMEM)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	if (rc)
		return api_fail(e, 400, "structured", "invalid_value", "Invalid %s: %s",
				re ? "regex" : "grammar", err.msg);
	return 0;
}

static int response_format(struct api *a, const cJSON *body, struct grammar **out,
			   struct api_error *e);

int api_parse_response_format(struct api *a, const cJSON *body, struct grammar **out,
			      struct api_error *e)
{
	*out = NULL;
	const cJSON *st = api_get(body, "structured");
	if (!st)
		return response_format(a, body, out, e);
	if (response_format(a, body, out, e))
		return -1;
	if (*out) {
		grammar_free(*out);
		*out = NULL;
		return api_fail(e, 400, "structured", "invalid_value",
				"'structured' cannot be combined with a JSON 'response_format'");
	}
	return structured_grammar(a, st, out, e);
}

static int response_format(struct api *a, const cJSON *body, struct grammar **out,
			   struct api_error *e)
{
	const cJSON *rf = api_get(body, "response_format");
	if (!rf)
		return 0;
	const cJSON *type = api_get(rf, "type");
	if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
		return api_fail(e, 400, "response_format", "invalid_type",
				"'response_format' must be an object with a string 'type'");
	const char *t = type->valuestring;
	if (!strcmp(t, "text"))
		return 0;
	if (!strcmp(t, "json_schema"))
		return schema_grammar(a, rf, out, e);
	if (strcmp(t, "json_object"))
		return api_fail(e, 400, "response_format", "invalid_value",
				"'response_format.type' must be 'text', 'json_object' or 'json_schema', "
				"not '%.64s'", t);
	if ((*out = api_gcache_get(a, "json_object")))
		return 0;
	ing_err err = { 0 };
	int rc = grammar_json_object(out, &err);
	if (rc)
		return compile_error(rc, &err, e);
	api_gcache_put(a, "json_object", *out);
	return 0;
}
