/* api_format.c — response_format: the grammar a request's output must
 * follow, and the cache that compiles each schema once.
 *
 *   {"type": "text"}                          no constraint
 *   {"type": "json_object"}                   any JSON object
 *   {"type": "json_schema", "json_schema": {"name": ..., "schema": {...},
 *    "strict": true}}                         a value the schema accepts
 *
 * and ingot's own request field "structured": {"regex": "..."} (the whole
 * output matches) or {"grammar": "..."} (GBNF, start rule root). vLLM's
 * names for the same constraints work too, so its clients need no change:
 * the fields guided_json (a schema: an object, or its JSON text),
 * guided_regex, guided_choice (a list of strings, the output is one of
 * them) and guided_grammar (GBNF), and the newer "structured_outputs":
 * {"json" | "regex" | "choice" | "grammar": ...} or {"json_object": true}.
 * A request gives at most one constraint (400 naming the second field).
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

enum cons_kind { CONS_SCHEMA, CONS_REGEX, CONS_GBNF };

/* A compile failure of the constraint of that kind given as field `param`. */
static int compile_error(int rc, const ing_err *err, const char *param, enum cons_kind kind,
			 struct api_error *e)
{
	if (rc == ING_ERR_NOMEM)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	if (kind == CONS_SCHEMA)
		return api_fail(e, 400, param, rc == ING_ERR_UNSUPPORTED ? "unsupported_schema"
									 : "invalid_json_schema",
				"Invalid schema for %s: %s", param, err->msg);
	return api_fail(e, 400, param, "invalid_value", "Invalid %s: %s",
			kind == CONS_REGEX ? "regex" : "grammar", err->msg);
}

/* The grammar of text (a JSON schema, a regex or GBNF) into *out, from the
 * cache when an earlier request compiled it. */
static int cons_compile(struct api *a, enum cons_kind kind, const char *text, const char *param,
			struct grammar **out, struct api_error *e)
{
	static const char *const prefix[] = { "schema", "regex", "gbnf" };
	const size_t n = strlen(text);
	char *key = ing_malloc(n + 8);
	if (!key)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	snprintf(key, n + 8, "%s:%s", prefix[kind], text);
	int rc = ING_OK;
	ing_err err = { 0 };
	if (!(*out = api_gcache_get(a, key))) {
		rc = kind == CONS_SCHEMA  ? grammar_from_json_schema(text, n, out, &err)
		     : kind == CONS_REGEX ? grammar_from_regex(text, n, out, &err)
					  : grammar_from_gbnf(text, n, out, &err);
		if (rc == ING_OK)
			api_gcache_put(a, key, *out);
	}
	ing_free(key);
	return rc ? compile_error(rc, &err, param, kind, e) : 0;
}

/* A schema given as an object (or true: any JSON value) or as its JSON
 * text. */
static int cons_schema(struct api *a, const cJSON *schema, const char *param,
		       struct grammar **out, struct api_error *e)
{
	if (cJSON_IsString(schema))
		return cons_compile(a, CONS_SCHEMA, schema->valuestring, param, out, e);
	if (!cJSON_IsObject(schema) && !cJSON_IsTrue(schema))
		return api_fail(e, 400, param, "invalid_type", "'%s' must be a JSON schema", param);
	char *printed = cJSON_PrintUnformatted(schema);
	if (!printed)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	int rc = cons_compile(a, CONS_SCHEMA, printed, param, out, e);
	cJSON_free(printed);
	return rc;
}

/* A regex or GBNF given as a string. */
static int cons_text(struct api *a, enum cons_kind kind, const cJSON *v, const char *param,
		     struct grammar **out, struct api_error *e)
{
	if (!cJSON_IsString(v))
		return api_fail(e, 400, param, "invalid_type", "'%s' must be a string", param);
	return cons_compile(a, kind, v->valuestring, param, out, e);
}

/* One of a list of strings, exactly: the GBNF root ::= "c1" | "c2" | ...,
 * every byte but letters and digits escaped (\xHH; UTF-8 sequences pass
 * whole, as GBNF reads its literals as UTF-8). */
static int cons_choice(struct api *a, const cJSON *list, const char *param,
		       struct grammar **out, struct api_error *e)
{
	if (!cJSON_IsArray(list) || !cJSON_GetArraySize(list))
		return api_fail(e, 400, param, "invalid_type",
				"'%s' must be a non-empty array of strings", param);
	struct sbuf g = { 0 };
	int bad = sbuf_puts(&g, "root ::=");
	const cJSON *c;
	cJSON_ArrayForEach(c, list) {
		if (!cJSON_IsString(c)) {
			sbuf_free(&g);
			return api_fail(e, 400, param, "invalid_type",
					"'%s' must be a non-empty array of strings", param);
		}
		bad |= sbuf_puts(&g, c == list->child ? " \"" : " | \"");
		for (const unsigned char *p = (const unsigned char *)c->valuestring; *p; p++) {
			char hex[8];
			if ((*p >= '0' && *p <= '9') || ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z') ||
			    *p >= 0x80) {
				bad |= sbuf_put(&g, (const char *)p, 1);
			} else {
				snprintf(hex, sizeof hex, "\\x%02x", *p);
				bad |= sbuf_puts(&g, hex);
			}
		}
		bad |= sbuf_puts(&g, "\"");
	}
	if (bad) {
		sbuf_free(&g);
		return api_fail(e, 500, NULL, NULL, "out of memory");
	}
	int rc = cons_compile(a, CONS_GBNF, g.p, param, out, e);
	sbuf_free(&g);
	return rc;
}

static int cons_json_object(struct api *a, const char *param, struct grammar **out,
			    struct api_error *e)
{
	if ((*out = api_gcache_get(a, "json_object")))
		return 0;
	ing_err err = { 0 };
	int rc = grammar_json_object(out, &err);
	if (rc)
		return compile_error(rc, &err, param, CONS_SCHEMA, e);
	api_gcache_put(a, "json_object", *out);
	return 0;
}

/* response_format into *out (NULL for text). */
static int response_format(struct api *a, const cJSON *rf, struct grammar **out,
			   struct api_error *e)
{
	const cJSON *type = api_get(rf, "type");
	if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
		return api_fail(e, 400, "response_format", "invalid_type",
				"'response_format' must be an object with a string 'type'");
	const char *t = type->valuestring;
	if (!strcmp(t, "text"))
		return 0;
	if (!strcmp(t, "json_object"))
		return cons_json_object(a, "response_format", out, e);
	if (strcmp(t, "json_schema"))
		return api_fail(e, 400, "response_format", "invalid_value",
				"'response_format.type' must be 'text', 'json_object' or 'json_schema', "
				"not '%.64s'", t);
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
	return schema ? cons_schema(a, schema, "response_format", out, e)
		      : cons_compile(a, CONS_SCHEMA, "true", "response_format", out, e);
}

/* "structured" (ingot: regex or grammar) or "structured_outputs" (vLLM:
 * json, regex, choice, grammar or json_object), exactly one key. */
static int structured(struct api *a, const cJSON *st, const char *param, bool vllm,
		      struct grammar **out, struct api_error *e)
{
	static const char *const keys[] = { "regex", "grammar", "json", "choice", "json_object" };
	const int nkeys = vllm ? 5 : 2;
	const cJSON *v = NULL;
	int k = -1, given = 0;
	for (int i = 0; cJSON_IsObject(st) && i < nkeys; i++)
		if (api_get(st, keys[i]))
			given++, k = i, v = api_get(st, keys[i]);
	if (given != 1)
		return api_fail(e, 400, param, "invalid_value",
				vllm ? "'%s' must have exactly one of regex, grammar, json, choice, "
				       "json_object"
				     : "'%s' must be {\"regex\": string} or {\"grammar\": string}",
				param);
	switch (k) {
	case 0: return cons_text(a, CONS_REGEX, v, param, out, e);
	case 1: return cons_text(a, CONS_GBNF, v, param, out, e);
	case 2: return cons_schema(a, v, param, out, e);
	case 3: return cons_choice(a, v, param, out, e);
	default:
		if (!cJSON_IsTrue(v))
			return api_fail(e, 400, param, "invalid_value",
					"'%s.json_object' must be true", param);
		return cons_json_object(a, param, out, e);
	}
}

/* The constraint of field `name` (present) into *out, NULL for none. */
/* The request fields that carry a constraint, in the order they are read. */
enum field_kind { F_RESPONSE_FORMAT, F_STRUCTURED, F_STRUCTURED_OUTPUTS, F_SCHEMA, F_REGEX,
		  F_CHOICE, F_GBNF };
static const struct {
	const char *name;
	enum field_kind kind;
} fields[] = {
	{ "response_format", F_RESPONSE_FORMAT }, { "structured", F_STRUCTURED },
	{ "structured_outputs", F_STRUCTURED_OUTPUTS }, { "guided_json", F_SCHEMA },
	{ "guided_regex", F_REGEX }, { "guided_choice", F_CHOICE }, { "guided_grammar", F_GBNF },
};

/* The constraint of field f (present, value v) into *out, NULL for none. */
static int field_grammar(struct api *a, int f, const cJSON *v, struct grammar **out,
			 struct api_error *e)
{
	const char *name = fields[f].name;
	switch (fields[f].kind) {
	case F_RESPONSE_FORMAT: return response_format(a, v, out, e);
	case F_STRUCTURED: return structured(a, v, name, false, out, e);
	case F_STRUCTURED_OUTPUTS: return structured(a, v, name, true, out, e);
	case F_SCHEMA: return cons_schema(a, v, name, out, e);
	case F_REGEX: return cons_text(a, CONS_REGEX, v, name, out, e);
	case F_GBNF: return cons_text(a, CONS_GBNF, v, name, out, e);
	default: return cons_choice(a, v, name, out, e);
	}
}

int api_parse_response_format(struct api *a, const cJSON *body, struct grammar **out,
			      struct api_error *e)
{
	*out = NULL;
	const char *first = NULL;
	for (int i = 0; i < (int)(sizeof fields / sizeof fields[0]); i++) {
		const cJSON *v = api_get(body, fields[i].name);
		struct grammar *g = NULL;
		if (!v)
			continue;
		if (field_grammar(a, i, v, &g, e)) {
			grammar_free(*out);
			*out = NULL;
			return -1;
		}
		if (!g)
			continue;
		if (*out) {
			grammar_free(g);
			grammar_free(*out);
			*out = NULL;
			return api_fail(e, 400, fields[i].name, "invalid_value",
					"'%s' cannot be combined with '%s': one output constraint per "
					"request",
					fields[i].name, first);
		}
		*out = g;
		first = fields[i].name;
	}
	return 0;
}
