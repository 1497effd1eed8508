/* api_prompt.c — from request bodies to prompt tokens.
 *
 * Chat: messages are rendered with the chat template, and the result is
 * tokenized so that control tokens ("<start_of_turn>", "<bos>", ...) can
 * come only from the template itself, never from what users wrote: a
 * message saying "<end_of_turn>" must stay text, or users could forge
 * turns. To know which parts of the rendering are the template's, it is
 * rendered with every message content replaced by a unique placeholder
 * (a per-request nonce and the message index); the output splits at the
 * placeholders into template text and contents. Control tokens are looked
 * for only in the template text; every other byte, contents included, is
 * tokenized without special-token parsing. Text between two control tokens
 * is tokenized as one piece, as when the whole rendering is tokenized
 * with special parsing (so BPE merges and SentencePiece space prefixes
 * come out the same).
 *
 * Templates sometimes transform contents (Gemma's trims them; Llama 3.1
 * prints tool results with tojson). The real rendering is made too and
 * matched piece by piece against the placeholder one: each content is
 * taken raw, trimmed or escaped as inside a JSON string, whichever
 * reproduces the real rendering there. When no choice does (a template
 * that inspects contents), the raw contents are used: the prompt stays
 * safe, if not exactly the template's. Empty contents need no protection
 * and go in as they are (templates test them: Qwen writes "\n" + content
 * only when there is one). Other user-controlled strings that reach the template
 * (tools, names, tool calls, chat_template_kwargs) are refused when they
 * contain control-token text.
 *
 * Completions: prompts are the user's raw text (special tokens parsed, as
 * vLLM and llama.cpp do) or token ids. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "engine.h"
#include "gguf.h"
#include "mem.h"
#include "model.h"
#include "sbuf.h"
#include "template.h"

/* Gemma's turn format (system merged into the first user turn, as Gemma's
 * own template does), for models whose GGUF carries no template. Function
 * calling, which Gemma's format lacks, follows Hermes: the tools are
 * listed at the top of the first user turn, the model answers
 * <tool_call>{"name": ..., "arguments": {...}}</tool_call>, and tool
 * results go back as user turns wrapped in <tool_response> tags. */
static const char gemma_template[] =
	"{{ bos_token }}"
	"{% if messages[0]['role'] == 'system' %}"
	"{% set first_prefix = messages[0]['content'] + '\\n\\n' %}"
	"{% set loop_messages = messages[1:] %}"
	"{% else %}{% set first_prefix = '' %}{% set loop_messages = messages %}{% endif %}"
	"{% for m in loop_messages %}"
	"<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' if m['role'] == 'tool'"
	" else m['role'] }}\n"
	"{% if loop.first and tools %}You have access to the following functions:\n"
	"{% for t in tools %}{{ (t['function'] if t['function'] is defined else t) | tojson }}\n"
	"{% endfor %}To call a function, reply with a JSON object inside <tool_call></tool_call>"
	" tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <arguments-object>}\n"
	"</tool_call>\n\n{% endif %}"
	"{% if m['role'] == 'tool' %}<tool_response>\n{{ m['content'] }}\n</tool_response>"
	"{% else %}{{ (first_prefix if loop.first else '') + (m['content'] or '') }}{% endif %}"
	"{% if m['tool_calls'] %}{% for tc in m['tool_calls'] %}"
	"{% if not loop.first %}\n{% endif %}"
	"<tool_call>\n{\"name\": \"{{ tc['function']['name'] }}\", \"arguments\": "
	"{% if tc['function']['arguments'] is string %}{{ tc['function']['arguments'] }}"
	"{% else %}{{ tc['function']['arguments'] | tojson }}{% endif %}}\n</tool_call>"
	"{% endfor %}{% endif %}"
	"<end_of_turn>\n"
	"{% endfor %}"
	"{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";

static const char chatml_template[] =
	"{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] or '' }}<|im_end|>\n"
	"{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

int api_template_load(struct api *a, const struct gguf *g, const char *given, const char **note,
		      ing_err *err)
{
	struct gguf_str s;
	const char *src;
	size_t len;
	if (given) {
		src = given;
		len = strlen(given);
		*note = "chat template from --chat-template";
	} else if (gguf_get_str(g, "tokenizer.chat_template", &s) == ING_OK && s.len > 0) {
		src = s.ptr;
		len = (size_t)s.len;
		*note = "chat template from the model";
	} else if (tokenizer_find_token(a->tk, "<start_of_turn>") != TOKEN_NONE ||
		   tokenizer_find_token(a->tk, "<|im_start|>") == TOKEN_NONE) {
		src = gemma_template;
		len = sizeof gemma_template - 1;
		*note = "the model has no chat template; using the built-in Gemma turn format";
	} else {
		src = chatml_template;
		len = sizeof chatml_template - 1;
		*note = "the model has no chat template; using the built-in ChatML format";
	}
	a->tool_format = toolcall_format_detect(src, len);
	int rc = template_parse(src, len, &a->tpl, err);
	if (rc)
		return ing_err_set(err, rc, "chat template: %s", err->msg);
	int32_t bos = tokenizer_bos(a->tk), eos = tokenizer_eos(a->tk);
	a->bos_text = bos != TOKEN_NONE ? tokenizer_token_text(a->tk, bos, NULL) : "";
	a->eos_text = eos != TOKEN_NONE ? tokenizer_token_text(a->tk, eos, NULL) : "";
	return ING_OK;
}

/* ---- control-token text in user strings ---- */

static bool text_has_control(const struct api *a, const char *s, size_t n)
{
	struct token_ids ids = { 0 };
	ing_err err;
	bool found = false;
	if (tokenizer_encode(a->tk, s, n, TOKENIZER_PARSE_SPECIAL, &ids, &err))
		found = true; /* cannot check: refuse */
	for (size_t i = 0; i < ids.n && !found; i++)
		found = tokenizer_is_control(a->tk, ids.ids[i]);
	token_ids_free(&ids);
	return found;
}

static bool json_has_control(const struct api *a, const cJSON *v)
{
	if (v->string && text_has_control(a, v->string, strlen(v->string)))
		return true;
	if (cJSON_IsString(v))
		return text_has_control(a, v->valuestring, strlen(v->valuestring));
	const cJSON *it;
	cJSON_ArrayForEach(it, v)
		if (json_has_control(a, it))
			return true;
	return false;
}

/* ---- messages ---- */

struct chat {
	char tag[40];            /* "@@ingot<nonce>." placeholders start with */
	size_t tag_len;
	struct sbuf *content;    /* [n] message contents (text parts joined) */
	struct sbuf *escaped;    /* [n] the same escaped as inside a JSON string */
	bool *has_content;       /* [n] content was not null */
	int n;
};

static void chat_free(struct chat *ch)
{
	for (int i = 0; i < ch->n; i++) {
		sbuf_free(&ch->content[i]);
		sbuf_free(&ch->escaped[i]);
	}
	ing_free(ch->content);
	ing_free(ch->escaped);
	ing_free(ch->has_content);
}

static bool role_ok(const char *r)
{
	static const char *const roles[] = { "system", "user", "assistant", "tool", "developer" };
	for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
		if (!strcmp(r, roles[i]))
			return true;
	return false;
}

/* Content as text: a string, or text parts joined with newlines. */
static int content_read(const cJSON *c, int i, struct sbuf *out, struct api_error *e)
{
	char param[48];
	snprintf(param, sizeof param, "messages[%d].content", i);
	if (cJSON_IsString(c))
		return sbuf_puts(out, c->valuestring) ? api_fail(e, 500, NULL, NULL, "out of memory") : 0;
	if (!cJSON_IsArray(c))
		return api_fail(e, 400, param, "invalid_type",
				"'%s' must be a string or an array of content parts", param);
	const cJSON *part;
	int k = 0;
	cJSON_ArrayForEach(part, c) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
		const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
		if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text))
			return api_fail(e, 400, param, "invalid_value",
					"only text content parts are supported");
		if ((k++ && sbuf_puts(out, "\n")) || sbuf_puts(out, text->valuestring))
			return api_fail(e, 500, NULL, NULL, "out of memory");
	}
	return 0;
}

static int message_read(const struct api *a, const cJSON *m, int i, struct chat *ch,
			struct api_error *e)
{
	char param[48];
	snprintf(param, sizeof param, "messages[%d]", i);
	if (!cJSON_IsObject(m))
		return api_fail(e, 400, param, "invalid_type", "'%s' must be an object", param);
	const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
	if (!cJSON_IsString(role) || !role_ok(role->valuestring))
		return api_fail(e, 400, param, "invalid_value", "'%s.role' must be one of system, "
				"user, assistant, tool, developer", param);
	const cJSON *it;
	cJSON_ArrayForEach(it, m)
		if (strcmp(it->string, "content") && json_has_control(a, it))
			return api_fail(e, 400, param, "invalid_value",
					"'%s' has special-token text outside its content", param);
	const cJSON *calls = api_get(m, "tool_calls");
	if (calls && api_tools_check_calls(calls, i, e))
		return -1;
	const cJSON *c = api_get(m, "content");
	if (!c) {
		if (strcmp(role->valuestring, "assistant"))
			return api_fail(e, 400, param, "missing_required_parameter",
					"'%s.content' is required", param);
		return 0;
	}
	ch->has_content[i] = true;
	return content_read(c, i, &ch->content[i], e);
}

/* c as it appears inside a JSON string (tojson without ensure_ascii). */
static int json_escape(const struct sbuf *c, struct sbuf *out)
{
	for (size_t i = 0; i < c->len; i++) {
		unsigned char ch = (unsigned char)c->p[i];
		const char *esc = ch == '"' ? "\\\"" : ch == '\\' ? "\\\\" : ch == '\n' ? "\\n"
				  : ch == '\r' ? "\\r" : ch == '\t' ? "\\t" : ch == '\b' ? "\\b"
				  : ch == '\f' ? "\\f" : NULL;
		if (esc)
			sbuf_puts(out, esc);
		else if (ch < 0x20)
			sbuf_printf(out, "\\u%04x", ch);
		else
			sbuf_put(out, &c->p[i], 1);
	}
	return out->oom ? -1 : 0;
}

static int chat_read(struct api *a, const cJSON *msgs, struct chat *ch, struct api_error *e)
{
	if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
		return api_fail(e, 400, "messages", msgs ? "invalid_value" : "missing_required_parameter",
				"'messages' must be a non-empty array");
	int n = cJSON_GetArraySize(msgs);
	ch->content = ing_calloc((size_t)n, sizeof *ch->content);
	ch->has_content = ing_calloc((size_t)n, sizeof *ch->has_content);
	ch->escaped = ing_calloc((size_t)n, sizeof *ch->escaped);
	if (!ch->content || !ch->has_content || !ch->escaped)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	ch->n = n;
	snprintf(ch->tag, sizeof ch->tag, "@@ingot%016" PRIx64 ".", api_unique(a));
	ch->tag_len = strlen(ch->tag);
	const cJSON *m;
	int i = 0;
	cJSON_ArrayForEach(m, msgs)
		if (message_read(a, m, i++, ch, e))
			return -1;
	for (i = 0; i < n; i++)
		if (json_escape(&ch->content[i], &ch->escaped[i]))
			return api_fail(e, 500, NULL, NULL, "out of memory");
	return 0;
}

/* How messages and tools go into the template. */
struct render_opts {
	bool agp;        /* add_generation_prompt */
	bool tools;      /* body.tools reach the template */
	bool args_obj;   /* tool-call arguments as objects (else JSON text) */
};

/* Puts the arguments of m's tool calls in the form templates get: objects
 * (most print them with tojson; vLLM does the same) or JSON text (for
 * templates that concatenate them as strings). */
static void args_form(cJSON *m, bool obj)
{
	cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls"), *c;
	cJSON_ArrayForEach(c, calls) {
		cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
		cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments"), *v = NULL;
		if (obj && cJSON_IsString(args)) {
			v = cJSON_Parse(args->valuestring);
			if (!cJSON_IsObject(v)) {
				cJSON_Delete(v);
				v = NULL;
			}
		} else if (!obj && cJSON_IsObject(args)) {
			char *t = cJSON_PrintUnformatted(args);
			v = t ? cJSON_CreateString(t) : NULL;
			cJSON_free(t);
		}
		if (v)
			cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", v);
	}
}

/* The template's variables; contents are placeholders, or the real text
 * when real is true. NULL when out of memory. */
static cJSON *ctx_build(const struct api *a, const cJSON *body, const struct chat *ch,
			const struct render_opts *o, bool real)
{
	bool agp = o->agp;
	cJSON *ctx = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(ctx, "messages");
	const cJSON *kw = api_get(body, "chat_template_kwargs"), *it;
	if (cJSON_IsObject(kw))
		cJSON_ArrayForEach(it, kw)
			cJSON_AddItemToObject(ctx, it->string, cJSON_Duplicate(it, true));
	const cJSON *tools = o->tools ? api_get(body, "tools") : NULL;
	if (tools)
		cJSON_AddItemToObject(ctx, "tools", cJSON_Duplicate(tools, true));
	cJSON_AddBoolToObject(ctx, "add_generation_prompt", agp);
	cJSON_AddStringToObject(ctx, "bos_token", a->bos_text);
	cJSON_AddStringToObject(ctx, "eos_token", a->eos_text);
	int i = 0;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(body, "messages")) {
		cJSON *m = cJSON_Duplicate(it, true);
		cJSON_DeleteItemFromObjectCaseSensitive(m, "content");
		args_form(m, o->args_obj);
		char ph[64];
		snprintf(ph, sizeof ph, "%s%d@@", ch->tag, i);
		if (!ch->has_content[i])
			cJSON_AddNullToObject(m, "content");
		else
			cJSON_AddStringToObject(m, "content", real || ch->content[i].len == 0
							      ? (ch->content[i].p ? ch->content[i].p : "")
							      : ph);
		cJSON_AddItemToArray(msgs, m);
		i++;
	}
	if (!msgs || cJSON_GetArraySize(msgs) != ch->n ||
	    !cJSON_GetObjectItemCaseSensitive(ctx, "eos_token")) { /* an allocation failed */
		cJSON_Delete(ctx);
		return NULL;
	}
	return ctx;
}

/* ---- splitting the placeholder rendering ---- */

enum form { FORM_RAW, FORM_TRIM, FORM_JSON, FORM_COUNT };

struct seg {
	size_t off, len;  /* template text in the rendering, or ... */
	int msg;          /* ... message content (msg >= 0) */
	int form;         /* the content goes in raw, trimmed or JSON-escaped (enum form) */
};

static int segs_split(const struct chat *ch, const char *r, size_t n, struct seg **out, int *n_out)
{
	size_t cap = 16, k = 0, pos = 0;
	struct seg *s = ing_malloc_array(cap, sizeof *s);
	while (s) {
		if (k + 2 > cap) {
			struct seg *ns = ing_realloc(s, (cap *= 2) * sizeof *s);
			if (!ns)
				break;
			s = ns;
		}
		const char *p = memmem(r + pos, n - pos, ch->tag, ch->tag_len);
		char *end = NULL;
		long idx = p ? strtol(p + ch->tag_len, &end, 10) : -1;
		bool ok = p && end && idx >= 0 && idx < ch->n && !strncmp(end, "@@", 2);
		size_t stop = ok ? (size_t)(p - r) : n;
		s[k++] = (struct seg){ .off = pos, .len = stop - pos, .msg = -1 };
		if (!ok) {
			*out = s;
			*n_out = (int)k;
			return 0;
		}
		s[k++] = (struct seg){ .msg = (int)idx };
		pos = (size_t)(end + 2 - r);
	}
	ing_free(s);
	return -1;
}

static void trimmed(const struct sbuf *c, const char **p, size_t *n)
{
	const char *s = c->p ? c->p : "";
	size_t a = 0, b = c->len;
	while (a < b && isspace((unsigned char)s[a]))
		a++;
	while (b > a && isspace((unsigned char)s[b - 1]))
		b--;
	*p = s + a;
	*n = b - a;
}

/* The text segment s stands for: template text, or a content in its
 * form. */
static void seg_text(const struct chat *ch, const char *r, const struct seg *s, const char **p,
		     size_t *n)
{
	if (s->msg < 0) {
		*p = r + s->off;
		*n = s->len;
	} else if (s->form == FORM_TRIM) {
		trimmed(&ch->content[s->msg], p, n);
	} else if (s->form == FORM_JSON) {
		*p = ch->escaped[s->msg].p ? ch->escaped[s->msg].p : "";
		*n = ch->escaped[s->msg].len;
	} else {
		*p = ch->content[s->msg].p ? ch->content[s->msg].p : "";
		*n = ch->content[s->msg].len;
	}
}

static bool seg_matches(const struct chat *ch, const char *r, const struct seg *s,
			const char *real, size_t real_len, size_t pos)
{
	const char *p;
	size_t n;
	seg_text(ch, r, s, &p, &n);
	return pos + n <= real_len && !memcmp(real + pos, p, n);
}

/* Chooses a form for every content so that the substituted
 * placeholder rendering equals the real one; false when impossible (then
 * every content is left raw). */
static bool subst_choose(const struct chat *ch, const char *r, struct seg *s, int n,
			 const char *real, size_t real_len)
{
	size_t pos = 0;
	bool ok = true;
	for (int i = 0; i < n && ok; i++) {
		ok = false;
		for (int t = 0; t < (s[i].msg >= 0 ? FORM_COUNT : 1) && !ok; t++) {
			s[i].form = t;
			const char *p;
			size_t len;
			seg_text(ch, r, &s[i], &p, &len);
			ok = seg_matches(ch, r, &s[i], real, real_len, pos) &&
			     (i + 1 == n || s[i + 1].msg >= 0 ||
			      seg_matches(ch, r, &s[i + 1], real, real_len, pos + len));
			if (ok)
				pos += len;
		}
	}
	if (ok && pos == real_len)
		return true;
	for (int i = 0; i < n; i++)
		s[i].form = FORM_RAW;
	return false;
}

/* ---- tokenizing with control tokens only from template text ---- */

struct span {
	size_t off, len;
	int32_t id;
};

/* Control tokens of one template segment placed at base in the final
 * text. */
static int spans_find(const struct api *a, const char *t, size_t n, size_t base,
		      struct span **sp, size_t *ns, size_t *cap, struct api_error *e)
{
	struct token_ids ids = { 0 };
	ing_err err;
	if (tokenizer_encode(a->tk, t, n, TOKENIZER_PARSE_SPECIAL, &ids, &err)) {
		token_ids_free(&ids); /* what was pushed before the failure */
		return api_fail(e, 500, NULL, NULL, "tokenizer: %s", err.msg);
	}
	size_t cur = 0;
	int rc = 0;
	for (size_t i = 0; i < ids.n && !rc; i++) {
		if (!tokenizer_is_control(a->tk, ids.ids[i]))
			continue;
		size_t tl;
		const char *tt = tokenizer_token_text(a->tk, ids.ids[i], &tl);
		const char *p = tl ? memmem(t + cur, n - cur, tt, tl) : NULL;
		if (!p)
			continue; /* not literally there (cannot happen): leave it to the text */
		if (*ns == *cap) {
			struct span *nsp = ing_realloc(*sp, (*cap = *cap * 2 + 8) * sizeof **sp);
			if (!nsp) {
				rc = api_fail(e, 500, NULL, NULL, "out of memory");
				break;
			}
			*sp = nsp;
		}
		(*sp)[(*ns)++] = (struct span){ base + (size_t)(p - t), tl, ids.ids[i] };
		cur = (size_t)(p - t) + tl;
	}
	token_ids_free(&ids);
	return rc;
}

static int encode_text(const struct api *a, const char *s, size_t n, struct token_ids *out,
		       struct api_error *e)
{
	ing_err err;
	if (n && tokenizer_encode(a->tk, s, n, 0, out, &err))
		return api_fail(e, 500, NULL, NULL, "tokenizer: %s", err.msg);
	return 0;
}

static int tokenize_final(const struct api *a, const struct chat *ch, const char *r,
			  const struct seg *s, int n, struct token_ids *out, struct api_error *e)
{
	struct sbuf text = { 0 };
	struct span *sp = NULL;
	size_t ns = 0, cap = 0;
	int rc = 0;
	for (int i = 0; i < n && !rc; i++) {
		size_t base = text.len, len;
		const char *p;
		seg_text(ch, r, &s[i], &p, &len);
		if (sbuf_put(&text, p, len))
			rc = api_fail(e, 500, NULL, NULL, "out of memory");
		else if (s[i].msg < 0)
			rc = spans_find(a, r + s[i].off, s[i].len, base, &sp, &ns, &cap, e);
	}
	size_t pos = 0;
	for (size_t i = 0; i < ns && !rc; i++) {
		rc = encode_text(a, text.p + pos, sp[i].off - pos, out, e);
		if (!rc && token_ids_push(out, sp[i].id))
			rc = api_fail(e, 500, NULL, NULL, "out of memory");
		pos = sp[i].off + sp[i].len;
	}
	if (!rc)
		rc = encode_text(a, text.p + pos, text.len - pos, out, e);
	ing_free(sp);
	sbuf_free(&text);
	return rc;
}

static int render(const struct api *a, const cJSON *ctx, char **out, size_t *len,
		  struct api_error *e)
{
	ing_err err = { 0 };
	int rc = ctx ? template_render_cjson(a->tpl, ctx, NULL, out, len, &err) : ING_ERR_NOMEM;
	if (rc == ING_ERR_NOMEM)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	if (rc)
		return api_fail(e, 400, "messages", "invalid_value", "chat template: %s", err.msg);
	return 0;
}

/* Both renderings (placeholders in ph, real contents in real; the caller
 * frees them, also on failure). */
static int render_pair(struct api *a, const cJSON *body, const struct chat *ch,
		       const struct render_opts *o, char **ph, size_t *ph_len, char **real,
		       size_t *real_len, struct api_error *e)
{
	cJSON *c1 = ctx_build(a, body, ch, o, false), *c2 = ctx_build(a, body, ch, o, true);
	int rc = render(a, c1, ph, ph_len, e);
	if (!rc)
		rc = render(a, c2, real, real_len, e);
	cJSON_Delete(c1);
	cJSON_Delete(c2);
	return rc;
}

static bool has_tool_calls(const cJSON *body)
{
	const cJSON *m;
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(body, "messages"))
		if (api_get(m, "tool_calls"))
			return true;
	return false;
}

static int check_user_json(struct api *a, const cJSON *body, bool tools, struct api_error *e)
{
	if (tools && json_has_control(a, api_get(body, "tools")))
		return api_fail(e, 400, "tools", "invalid_value", "'tools' has special-token text");
	if (api_get(body, "chat_template_kwargs") &&
	    json_has_control(a, api_get(body, "chat_template_kwargs")))
		return api_fail(e, 400, "chat_template_kwargs", "invalid_value",
				"'chat_template_kwargs' has special-token text");
	return 0;
}

/* add_generation_prompt and continue_final_message into *agp and *cont. */
static int ending_read(const cJSON *body, bool *agp, bool *cont, struct api_error *e)
{
	*agp = true;
	*cont = false;
	if (api_get_bool(body, "add_generation_prompt", agp, e) ||
	    api_get_bool(body, "continue_final_message", cont, e))
		return -1;
	if (*cont && *agp && api_get(body, "add_generation_prompt"))
		return api_fail(e, 400, "continue_final_message", "invalid_value",
				"'continue_final_message' and 'add_generation_prompt' cannot both "
				"be true");
	*agp = *agp && !*cont;
	return 0;
}

/* continue_final_message: drops what the template put after the last
 * message's content (its end-of-turn markup). Fails when that content is
 * empty: nothing marks where it would end. */
static int segs_cut_final(const struct chat *ch, const struct seg *s, int *n,
			  struct api_error *e)
{
	for (int i = *n - 1; i >= 0; i--)
		if (s[i].msg == ch->n - 1) {
			*n = i + 1;
			return 0;
		}
	return api_fail(e, 400, "continue_final_message", "invalid_value",
			"'continue_final_message' needs a final message with content");
}

int api_prompt_chat(struct api *a, const cJSON *body, bool with_tools, struct token_ids *out,
		    struct api_error *e)
{
	struct chat ch = { 0 };
	char *ph = NULL, *real = NULL;
	size_t ph_len = 0, real_len = 0;
	struct seg *s = NULL;
	bool agp, cont;
	if (ending_read(body, &agp, &cont, e))
		return -1;
	struct render_opts o = { .agp = agp, .tools = with_tools && api_get(body, "tools"),
				 .args_obj = true };
	int n = 0, rc = chat_read(a, cJSON_GetObjectItemCaseSensitive(body, "messages"), &ch, e);
	if (!rc)
		rc = check_user_json(a, body, o.tools, e);
	if (!rc) {
		rc = render_pair(a, body, &ch, &o, &ph, &ph_len, &real, &real_len, e);
		if (rc && e->status == 400 && has_tool_calls(body)) {
			/* the template wants the arguments as text */
			ing_free(ph);
			ing_free(real);
			ph = real = NULL;
			o.args_obj = false;
			rc = render_pair(a, body, &ch, &o, &ph, &ph_len, &real, &real_len, e);
		}
	}
	if (!rc && segs_split(&ch, ph, ph_len, &s, &n))
		rc = api_fail(e, 500, NULL, NULL, "out of memory");
	if (!rc) {
		subst_choose(&ch, ph, s, n, real, real_len);
		if (cont)
			rc = segs_cut_final(&ch, s, &n, e);
	}
	if (!rc)
		rc = tokenize_final(a, &ch, ph, s, n, out, e);
	ing_free(s);
	ing_free(ph);
	ing_free(real);
	chat_free(&ch);
	return rc;
}

int api_prompt_chat_echo(const cJSON *body, char **out, struct api_error *e)
{
	bool echo = false;
	*out = NULL;
	if (api_get_bool(body, "echo", &echo, e))
		return -1;
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages");
	const cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
	const cJSON *role = cJSON_GetObjectItemCaseSensitive(last, "role");
	const cJSON *content = api_get(last, "content");
	if (!echo || !cJSON_IsString(role) || strcmp(role->valuestring, "assistant") || !content)
		return 0;
	struct sbuf s = { 0 };
	if (content_read(content, cJSON_GetArraySize(msgs) - 1, &s, e)) {
		sbuf_free(&s);
		return -1;
	}
	if (!(*out = sbuf_take(&s, NULL)) && !(*out = ing_strndup("", 0)))
		return api_fail(e, 500, NULL, NULL, "out of memory");
	return 0;
}

/* ---- completion prompts ---- */

static int prompt_push(struct gen_request *r, struct api_error *e)
{
	if (r->n_prompts == API_MAX_PROMPTS)
		return api_fail(e, 400, "prompt", "invalid_value", "at most %d prompts",
				API_MAX_PROMPTS);
	struct token_ids *np = ing_realloc(r->prompts, (size_t)(r->n_prompts + 1) * sizeof *np);
	if (!np)
		return api_fail(e, 500, NULL, NULL, "out of memory");
	r->prompts = np;
	r->prompts[r->n_prompts++] = (struct token_ids){ 0 };
	return 0;
}

static int prompt_text(struct api *a, const cJSON *s, unsigned flags, struct gen_request *r,
		       struct api_error *e)
{
	if (prompt_push(r, e))
		return -1;
	ing_err err;
	if (tokenizer_encode(a->tk, s->valuestring, strlen(s->valuestring), flags,
			     &r->prompts[r->n_prompts - 1], &err))
		return api_fail(e, 400, "prompt", "invalid_value", "cannot tokenize: %s", err.msg);
	return 0;
}

static int prompt_ids(struct api *a, const cJSON *arr, struct gen_request *r, struct api_error *e)
{
	if (prompt_push(r, e))
		return -1;
	const cJSON *it;
	cJSON_ArrayForEach(it, arr) {
		int32_t id;
		if (api_token_id(a, it, "prompt", &id, e))
			return -1;
		if (token_ids_push(&r->prompts[r->n_prompts - 1], id))
			return api_fail(e, 500, NULL, NULL, "out of memory");
	}
	return 0;
}

int api_prompt_completion(struct api *a, const cJSON *p, bool add_special, struct gen_request *r,
			  struct api_error *e)
{
	unsigned flags = TOKENIZER_PARSE_SPECIAL | (add_special ? TOKENIZER_ADD_SPECIAL : 0);
	if (!p)
		return api_fail(e, 400, "prompt", "missing_required_parameter", "'prompt' is required");
	if (cJSON_IsString(p))
		return prompt_text(a, p, flags, r, e);
	if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) == 0)
		return api_fail(e, 400, "prompt", "invalid_type", "'prompt' must be a string, an "
				"array of strings, an array of token ids or an array of those");
	const cJSON *first = p->child, *it;
	if (cJSON_IsNumber(first))
		return prompt_ids(a, p, r, e);
	cJSON_ArrayForEach(it, p) {
		int rc = cJSON_IsString(first) && cJSON_IsString(it) ? prompt_text(a, it, flags, r, e)
			 : cJSON_IsArray(first) && cJSON_IsArray(it) ? prompt_ids(a, it, r, e)
			 : api_fail(e, 400, "prompt", "invalid_type",
				    "'prompt' array elements must all be strings or all token-id arrays");
		if (rc)
			return -1;
	}
	return 0;
}
