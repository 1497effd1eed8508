/* toolcall.c — parsing function calls out of model text (see toolcall.h).
 *
 * Every format is a sequence of calls introduced by a marker; each call is
 * a JSON value read with cJSON's prefix parser (so the text after the
 * value, closing tags included, stays for the next step). A parser walks
 * the text with a cursor and fails the whole parse on anything unexpected;
 * toolcall_parse then reports no calls. Markers are byte strings: the
 * DeepSeek ones are full-width Unicode, matched as their UTF-8 bytes. */
#include "toolcall.h"

#include <ctype.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "mem.h"

#define DS_CALLS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>"
#define PYTHON_TAG "<|python_tag|>"

/* ---- formats ---- */

enum toolcall_format toolcall_format_detect(const char *tpl, size_t n)
{
	if (memmem(tpl, n, DS_CALL_BEGIN, strlen(DS_CALL_BEGIN)))
		return TOOLCALL_DEEPSEEK_R1;
	if (memmem(tpl, n, "[TOOL_CALLS]", 12))
		return TOOLCALL_MISTRAL;
	if (memmem(tpl, n, "<function=", 10))
		return TOOLCALL_FUNCTIONARY;
	if (memmem(tpl, n, "<tool_call>", 11))
		return TOOLCALL_HERMES;
	if (memmem(tpl, n, "<|start_header_id|>", 19) && memmem(tpl, n, "\"parameters\"", 12))
		return TOOLCALL_LLAMA3;
	return TOOLCALL_HERMES;
}

const char *toolcall_format_name(enum toolcall_format f)
{
	static const char *const names[] = { "hermes", "llama3", "functionary", "deepseek_r1",
					     "mistral" };
	return (unsigned)f < sizeof names / sizeof names[0] ? names[f] : "unknown";
}

/* ---- a cursor over the text ---- */

struct cur {
	const char *s;
	size_t n, pos;
};

static void cur_ws(struct cur *c)
{
	while (c->pos < c->n && isspace((unsigned char)c->s[c->pos]))
		c->pos++;
}

/* Consumes lit when the text continues with it. */
static bool cur_lit(struct cur *c, const char *lit)
{
	size_t l = strlen(lit);
	if (c->n - c->pos < l || memcmp(c->s + c->pos, lit, l))
		return false;
	c->pos += l;
	return true;
}

/* Position of the next lit at or after pos, or n. */
static size_t cur_find(const struct cur *c, const char *lit)
{
	const char *p = memmem(c->s + c->pos, c->n - c->pos, lit, strlen(lit));
	return p ? (size_t)(p - c->s) : c->n;
}

/* Reads one JSON value (after whitespace); NULL when there is none. */
static cJSON *cur_json(struct cur *c)
{
	cur_ws(c);
	const char *end = NULL;
	cJSON *v = cJSON_ParseWithLengthOpts(c->s + c->pos, c->n - c->pos, &end, false);
	if (v)
		c->pos = (size_t)(end - c->s);
	return v;
}

/* ---- building the list ---- */

/* Appends a call named name[0..nl) with arguments args (an object or
 * array is printed; a string is taken as the JSON text itself; NULL is
 * "{}"). -1 when out of memory. */
static int list_add(struct toolcall_list *l, const char *name, size_t nl, const cJSON *args)
{
	struct toolcall *nv = ing_realloc(l->v, (size_t)(l->n + 1) * sizeof *nv);
	if (!nv)
		return -1;
	l->v = nv;
	char *a = NULL;
	if (cJSON_IsString(args)) {
		a = ing_strndup(args->valuestring, strlen(args->valuestring));
	} else if (args) {
		char *p = cJSON_PrintUnformatted(args);
		a = p ? ing_strndup(p, strlen(p)) : NULL;
		cJSON_free(p);
	} else {
		a = ing_strndup("{}", 2);
	}
	char *nm = ing_strndup(name, nl);
	if (!a || !nm) {
		ing_free(a);
		ing_free(nm);
		return -1;
	}
	l->v[l->n++] = (struct toolcall){ .name = nm, .arguments = a };
	return 0;
}

/* A call object {"name": N, "arguments"|"parameters": A}. 1 added, 0 not
 * a call, -1 out of memory. */
static int list_add_obj(struct toolcall_list *l, const cJSON *o)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
	if (!args)
		args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
	if (!cJSON_IsObject(o) || !cJSON_IsString(name) || !name->valuestring[0] ||
	    (args && !cJSON_IsObject(args) && !cJSON_IsString(args)))
		return 0;
	return list_add(l, name->valuestring, strlen(name->valuestring), args) ? -1 : 1;
}

/* Reads one call object at the cursor: 1, 0 (malformed), -1 (memory). */
static int read_obj_call(struct cur *c, struct toolcall_list *l)
{
	cJSON *v = cur_json(c);
	int rc = v ? list_add_obj(l, v) : 0;
	cJSON_Delete(v);
	return rc;
}

/* ---- the formats ---- */

/* <tool_call> {...} </tool_call>, repeated; the last close may be
 * missing (generation stopped at it). */
static int parse_hermes(struct cur *c, struct toolcall_list *l)
{
	size_t at = cur_find(c, "<tool_call>");
	if (at == c->n)
		return 0;
	l->content_len = at;
	while (at < c->n) {
		c->pos = at + 11;
		int rc = read_obj_call(c, l);
		if (rc <= 0)
			return rc;
		cur_ws(c);
		if (!cur_lit(c, "</tool_call>") && c->pos < c->n)
			return 0;
		cur_ws(c);
		at = c->pos == c->n ? c->n : cur_find(c, "<tool_call>");
	}
	return 1;
}

/* [<|python_tag|>] {...} [; {...}] from the start of the reply. */
static int parse_llama3(struct cur *c, struct toolcall_list *l)
{
	cur_ws(c);
	cur_lit(c, PYTHON_TAG);
	cur_ws(c);
	if (c->pos == c->n || c->s[c->pos] != '{')
		return 0;
	l->content_len = 0;
	while (c->pos < c->n) {
		int rc = read_obj_call(c, l);
		if (rc <= 0)
			return rc;
		cur_ws(c);
		cur_lit(c, ";");
		cur_lit(c, "<|eom_id|>");
		cur_ws(c);
	}
	return 1;
}

/* Functionary's code interpreter call: the rest of the text is the code,
 * passed as {"code": ...}. 1 or -1. */
static int add_python(struct toolcall_list *l, const char *code, size_t n)
{
	char *t = ing_strndup(code, n);
	cJSON *a = cJSON_CreateObject();
	int rc = t && a && cJSON_AddStringToObject(a, "code", t) && !list_add(l, "python", 6, a)
			 ? 1 : -1;
	ing_free(t);
	cJSON_Delete(a);
	return rc;
}

/* <function=NAME>{...}</function>, repeated, or <|python_tag|>code. */
static int parse_functionary(struct cur *c, struct toolcall_list *l)
{
	size_t fn = cur_find(c, "<function="), py = cur_find(c, PYTHON_TAG);
	if (fn == c->n && py == c->n)
		return 0;
	l->content_len = fn < py ? fn : py;
	c->pos = l->content_len;
	while (c->pos < c->n) {
		if (cur_lit(c, PYTHON_TAG))
			return add_python(l, c->s + c->pos, c->n - c->pos);
		if (!cur_lit(c, "<function="))
			return 0;
		size_t gt = cur_find(c, ">");
		if (gt == c->n || gt == c->pos)
			return 0;
		const char *name = c->s + c->pos;
		size_t nl = gt - c->pos;
		c->pos = gt + 1;
		cJSON *v = cur_json(c);
		int rc = cJSON_IsObject(v) ? (list_add(l, name, nl, v) ? -1 : 1) : 0;
		cJSON_Delete(v);
		if (rc <= 0)
			return rc;
		if (!cur_lit(c, "</function>") && c->pos < c->n)
			return 0;
		cur_ws(c);
		cur_lit(c, "<|eom_id|>");
		cur_ws(c);
	}
	return 1;
}

/* [<｜tool▁calls▁begin｜>] (<｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n
 * [```json\n]{...}[\n```]<｜tool▁call▁end｜>)+ [<｜tool▁calls▁end｜>] */
static int parse_deepseek(struct cur *c, struct toolcall_list *l)
{
	size_t outer = cur_find(c, DS_CALLS_BEGIN), inner = cur_find(c, DS_CALL_BEGIN);
	if (inner == c->n)
		return 0;
	l->content_len = outer < inner ? outer : inner;
	c->pos = l->content_len;
	cur_lit(c, DS_CALLS_BEGIN);
	for (;;) {
		cur_ws(c);
		if (c->pos == c->n || cur_lit(c, DS_CALLS_END))
			break;
		if (!cur_lit(c, DS_CALL_BEGIN))
			return 0;
		size_t sep = cur_find(c, DS_SEP);
		if (sep == c->n)
			return 0;
		c->pos = sep + strlen(DS_SEP);
		size_t nl = cur_find(c, "\n");
		while (nl > c->pos && isspace((unsigned char)c->s[nl - 1]))
			nl--;
		if (nl == c->n || nl == c->pos)
			return 0;
		const char *name = c->s + c->pos;
		size_t name_len = nl - c->pos;
		c->pos = nl;
		cur_ws(c);
		cur_lit(c, "```json");
		cJSON *v = cur_json(c);
		int rc = cJSON_IsObject(v) ? (list_add(l, name, name_len, v) ? -1 : 1) : 0;
		cJSON_Delete(v);
		if (rc <= 0)
			return rc;
		cur_ws(c);
		cur_lit(c, "```");
		cur_ws(c);
		if (!cur_lit(c, DS_CALL_END) && c->pos < c->n)
			return 0;
	}
	return 1;
}

/* [TOOL_CALLS] [{...}, ...] (or one object). */
static int parse_mistral(struct cur *c, struct toolcall_list *l)
{
	size_t at = cur_find(c, "[TOOL_CALLS]");
	if (at == c->n)
		return 0;
	l->content_len = at;
	c->pos = at + 12;
	cJSON *v = cur_json(c), *it;
	int rc = v ? 1 : 0;
	if (cJSON_IsArray(v)) {
		cJSON_ArrayForEach(it, v)
			if (rc > 0)
				rc = list_add_obj(l, it);
		if (cJSON_GetArraySize(v) == 0)
			rc = 0;
	} else if (v) {
		rc = list_add_obj(l, v);
	}
	cJSON_Delete(v);
	return rc;
}

int toolcall_parse(enum toolcall_format f, const char *text, size_t n, struct toolcall_list *out,
		   ing_err *err)
{
	*out = (struct toolcall_list){ .content_len = n };
	struct cur c = { text, n, 0 };
	int rc;
	switch (f) {
	case TOOLCALL_LLAMA3: rc = parse_llama3(&c, out); break;
	case TOOLCALL_FUNCTIONARY: rc = parse_functionary(&c, out); break;
	case TOOLCALL_DEEPSEEK_R1: rc = parse_deepseek(&c, out); break;
	case TOOLCALL_MISTRAL: rc = parse_mistral(&c, out); break;
	default: rc = parse_hermes(&c, out); break;
	}
	if (rc <= 0) {
		toolcall_list_free(out);
		out->content_len = n;
	}
	if (rc < 0)
		return ing_err_set(err, ING_ERR_NOMEM, "tool calls: out of memory");
	while (out->n && out->content_len > 0 && isspace((unsigned char)text[out->content_len - 1]))
		out->content_len--;
	return ING_OK;
}

void toolcall_list_free(struct toolcall_list *l)
{
	for (int i = 0; i < l->n; i++) {
		ing_free(l->v[i].name);
		ing_free(l->v[i].arguments);
	}
	ing_free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* ---- streaming and forcing ---- */

/* Start of the first marker in text, or of a marker's beginning cut off
 * at the end of text; n when neither. */
static size_t marker_start(const char *text, size_t n, const char *const *m, int nm)
{
	size_t best = n;
	for (int i = 0; i < nm; i++) {
		size_t ml = strlen(m[i]);
		const char *p = memmem(text, n, m[i], ml);
		if (p && (size_t)(p - text) < best)
			best = (size_t)(p - text);
		for (size_t k = ml - 1 < n ? ml - 1 : n; k > 0; k--)
			if (n - k < best && !memcmp(text + n - k, m[i], k)) {
				best = n - k;
				break;
			}
	}
	return best;
}

size_t toolcall_content_prefix(enum toolcall_format f, const char *text, size_t n)
{
	static const char *const hermes[] = { "<tool_call>" };
	static const char *const functionary[] = { "<function=", PYTHON_TAG };
	static const char *const deepseek[] = { DS_CALLS_BEGIN, DS_CALL_BEGIN };
	static const char *const mistral[] = { "[TOOL_CALLS]" };
	switch (f) {
	case TOOLCALL_LLAMA3: {
		size_t i = 0;
		while (i < n && isspace((unsigned char)text[i]))
			i++;
		size_t rest = n - i, pl = strlen(PYTHON_TAG);
		bool maybe = rest == 0 || text[i] == '{' ||
			     !memcmp(text + i, PYTHON_TAG, rest < pl ? rest : pl);
		return maybe ? 0 : n;
	}
	case TOOLCALL_FUNCTIONARY: return marker_start(text, n, functionary, 2);
	case TOOLCALL_DEEPSEEK_R1: return marker_start(text, n, deepseek, 2);
	case TOOLCALL_MISTRAL: return marker_start(text, n, mistral, 1);
	default: return marker_start(text, n, hermes, 1);
	}
}

const char *toolcall_block_close(enum toolcall_format f)
{
	return f == TOOLCALL_HERMES ? "</tool_call>" : f == TOOLCALL_FUNCTIONARY ? "</function>" : NULL;
}

size_t toolcall_complete_prefix(enum toolcall_format f, const char *text, size_t n)
{
	const char *close = toolcall_block_close(f);
	if (!close)
		return 0;
	const size_t cl = strlen(close);
	for (size_t end = n; end >= cl; end--)
		if (!memcmp(text + end - cl, close, cl))
			return end;
	return 0;
}

int toolcall_frame(enum toolcall_format f, const char *name, struct sbuf *prefix,
		   struct sbuf *suffix)
{
	if (!name) { /* only the opening markup: the model picks the function */
		static const char *const open[] = {
			[TOOLCALL_HERMES] = "<tool_call>\n",
			[TOOLCALL_LLAMA3] = "{\"name\": \"",
			[TOOLCALL_FUNCTIONARY] = "<function=",
			[TOOLCALL_DEEPSEEK_R1] = DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP,
			[TOOLCALL_MISTRAL] = "[TOOL_CALLS][",
		};
		sbuf_puts(prefix, open[(unsigned)f < 5 ? f : 0]);
		return prefix->oom ? -1 : 0;
	}
	switch (f) {
	case TOOLCALL_LLAMA3:
		sbuf_printf(prefix, "{\"name\": \"%s\", \"parameters\": ", name);
		sbuf_puts(suffix, "}");
		break;
	case TOOLCALL_FUNCTIONARY:
		sbuf_printf(prefix, "<function=%s>", name);
		sbuf_puts(suffix, "</function>");
		break;
	case TOOLCALL_DEEPSEEK_R1:
		sbuf_printf(prefix, DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "%s\n```json\n",
			    name);
		sbuf_puts(suffix, "\n```" DS_CALL_END DS_CALLS_END);
		break;
	case TOOLCALL_MISTRAL:
		sbuf_printf(prefix, "[TOOL_CALLS][{\"name\": \"%s\", \"arguments\": ", name);
		sbuf_puts(suffix, "}]");
		break;
	default:
		sbuf_printf(prefix, "<tool_call>\n{\"name\": \"%s\", \"arguments\": ", name);
		sbuf_puts(suffix, "}\n</tool_call>");
		break;
	}
	return prefix->oom || suffix->oom ? -1 : 0;
}
