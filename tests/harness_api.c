/* harness_api.c — fuzz bodies for the request path and the chat templates.
 *
 * harness_request: the path from body bytes to prompt tokens that a
 * generation request takes before it reaches the engine
 * (api_body_parse, api_gen_request_read), on an api built here without an
 * engine: a shared vocabulary and a chat template.
 *   byte 0   bits 0-2: vocabulary (harness_vocab, modulo its count);
 *            bit 3: chat (else completions);
 *            bits 4-7: template (0 a built-in ChatML, then the shared
 *            templates in name order, modulo their count)
 *   bytes 1. the request body; a chat one with an "input" field is a
 *            Responses request (/v1/responses), translated to chat first
 * Invariants: success gives at least one prompt, every id inside the
 * vocabulary and in-range fields; failure gives a 4xx/5xx status with a
 * message and leaves nothing allocated.
 *
 * harness_template: a template and a JSON context, split at the first NUL
 * byte (no NUL: the whole input is the template and the context is a
 * fixed two-message chat). The template is compiled and, when it parses,
 * rendered twice under small limits. Invariants: errors carry one of the
 * documented codes and a message, *out is NULL on failure and
 * NUL-terminated on success, both renderings are identical and nothing
 * stays allocated. */
#include "harness_fuzz.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "check.h"
#include "mem.h"
#include "template.h"
#include "tokenizer.h"

#define MAX_TEMPLATES 32

static const char chatml[] =
	"{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] or '' }}"
	"<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

static struct {
	bool loaded;
	int n;
	struct template *tpl[MAX_TEMPLATES];
} templates;

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b); /* elements are char[256] */
}

size_t harness_template_files(char names[][256], size_t max)
{
	char dir[2048];
	snprintf(dir, sizeof dir, "%s/templates", check_testdata_dir());
	DIR *d = opendir(dir);
	size_t n = 0;
	for (struct dirent *e; d && (e = readdir(d)) && n < max;) {
		size_t l = strlen(e->d_name);
		if (l > 6 && l < 200 && !strcmp(e->d_name + l - 6, ".jinja"))
			snprintf(names[n++], 256, "%.180s/%.70s", dir, e->d_name);
	}
	if (d)
		closedir(d);
	qsort(names, n, sizeof names[0], name_cmp);
	return n;
}

static void templates_load(void)
{
	if (templates.loaded)
		return;
	templates.loaded = true;
	ing_err err;
	if (template_parse(chatml, sizeof chatml - 1, &templates.tpl[0], &err))
		harness_fail("built-in template: %s", err.msg);
	templates.n = 1;
	static char names[MAX_TEMPLATES][256];
	size_t n = harness_template_files(names, MAX_TEMPLATES - 1);
	for (size_t i = 0; i < n; i++) {
		size_t len;
		char *src = check_read_file(names[i], &len);
		if (!src)
			continue;
		if (template_parse(src, len, &templates.tpl[templates.n], &err) == ING_OK)
			templates.n++;
		free(src);
	}
}

void harness_api_init(struct api *a, unsigned sel)
{
	templates_load();
	memset(a, 0, sizeof *a);
	pthread_mutex_init(&a->gmu, NULL); /* the grammar cache's (api_gcache_free empties it) */
	a->tk = harness_vocab(sel & 7);
	a->model_name = "m";
	a->max_model_len = 4096;
	a->n_vocab = tokenizer_n_vocab(a->tk);
	a->tpl = templates.tpl[(sel >> 4) % (unsigned)templates.n];
	int32_t bos = tokenizer_bos(a->tk), eos = tokenizer_eos(a->tk);
	a->bos_text = bos != TOKEN_NONE ? tokenizer_token_text(a->tk, bos, NULL) : "";
	a->eos_text = eos != TOKEN_NONE ? tokenizer_token_text(a->tk, eos, NULL) : "";
	a->salt = 0x1234;
}

static struct resp_store *seed_store; /* harness_store */

void harness_api_cleanup(void)
{
	resp_store_free(seed_store);
	seed_store = NULL;
	for (int i = 0; i < templates.n; i++)
		template_free(templates.tpl[i]);
	memset(&templates, 0, sizeof templates);
}

static void check_request(const struct api *a, const struct gen_request *r)
{
	if (r->n_prompts < 1 || r->n < 1 || r->n > API_MAX_N || r->n_stop > API_MAX_STOP ||
	    r->max_tokens < 0 || r->logprobs < -1 || r->n_bias < 0 || r->n_bias > API_MAX_BIAS)
		harness_fail("accepted request out of range: prompts %d n %d stop %d max_tokens %lld",
			     r->n_prompts, r->n, r->n_stop, (long long)r->max_tokens);
	if (!isfinite(r->sp.temperature) || !isfinite(r->sp.top_p) || !isfinite(r->sp.min_p))
		harness_fail("accepted a non-finite sampling parameter");
	for (int i = 0; i < r->n_prompts; i++)
		for (size_t j = 0; j < r->prompts[i].n; j++)
			if (r->prompts[i].ids[j] < 0 || r->prompts[i].ids[j] >= a->n_vocab)
				harness_fail("prompt %d token %zu: id %d outside the vocabulary", i, j,
					     r->prompts[i].ids[j]);
	for (int i = 0; i < r->n_bias; i++)
		if (r->bias_ids[i] < 0 || r->bias_ids[i] >= a->n_vocab || !isfinite(r->bias_vals[i]))
			harness_fail("logit_bias entry %d out of range", i);
}

static void check_error(const struct api_error *e, const char *what)
{
	if (e->status < 400 || e->status > 599 || !e->message[0] || !e->type)
		harness_fail("%s: bad error (status %d, message '%s')", what, e->status, e->message);
}

/* A store holding one two-turn conversation ("resp_seed1" then
 * "resp_seed2"), so that previous_response_id finds something: made once
 * and kept until harness_api_cleanup (like the templates), never written by
 * the request path. */
static struct resp_store *harness_store(void)
{
	struct resp_store *s = seed_store;
	if (s)
		return s;
	if (resp_store_create(1 << 20, &seed_store))
		return NULL;
	s = seed_store;
	static const char *const turns[][3] = { { "resp_seed1", NULL, "hi" },
						{ "resp_seed2", "resp_seed1", "more" } };
	for (int i = 0; i < 2; i++) {
		cJSON *r = cJSON_Parse("{\"output\":[{\"type\":\"message\",\"role\":"
				       "\"assistant\",\"content\":[{\"type\":\"output_text\","
				       "\"text\":\"hello\"}]}]}");
		cJSON *q = cJSON_CreateObject();
		cJSON_AddStringToObject(r, "id", turns[i][0]);
		if (turns[i][1])
			cJSON_AddStringToObject(q, "previous_response_id", turns[i][1]);
		cJSON_AddStringToObject(q, "input", turns[i][2]);
		resp_store_put(s, r, q);
		cJSON_Delete(r);
		cJSON_Delete(q);
	}
	return s;
}

int harness_request(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	struct api a;
	harness_api_init(&a, data[0]); /* caches vocabulary and templates first */
	struct resp_store *store = harness_store();
	size_t live = ing_mem_live();
	bool chat = data[0] & 8;
	struct api_error e = { 0 };
	cJSON *body = api_body_parse(&a, (const char *)data + 1, size - 1, &e);
	if (!body) {
		check_error(&e, "body");
	} else {
		struct gen_request r;
		cJSON *conv = NULL;
		int rc = 0;
		if (chat && cJSON_HasObjectItem(body, "input"))
			rc = api_responses_chat_body(body, store, &conv, &e);
		if (!rc && api_gen_request_read(&a, conv ? conv : body, chat, NULL, &r, &e) == 0) {
			check_request(&a, &r);
			gen_request_free(&r);
		} else {
			if (conv)
				api_responses_error_param(&e);
			check_error(&e, "request");
		}
		cJSON_Delete(conv);
		cJSON_Delete(body);
	}
	api_gcache_free(&a); /* grammars response_format and the like compiled */
	pthread_mutex_destroy(&a.gmu);
	if (ing_mem_live() != live)
		harness_fail("request path leaked %zu bytes", ing_mem_live() - live);
	return 0;
}

/* ---- templates ---- */

static const char default_ctx[] =
	"{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
	"{\"role\":\"user\",\"content\":\"Hello!\"}],\"add_generation_prompt\":true,"
	"\"bos_token\":\"<s>\",\"eos_token\":\"</s>\"}";

int harness_template(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t tlen = nul ? (size_t)(nul - data) : size;
	const char *ctx = nul ? (const char *)nul + 1 : default_ctx;
	size_t clen = nul ? size - tlen - 1 : sizeof default_ctx - 1;
	size_t live = ing_mem_live();
	struct template *t = NULL;
	ing_err err = { 0 };
	int rc = template_parse((const char *)data, tlen, &t, &err);
	if (rc && (t || (rc != ING_ERR_FORMAT && rc != ING_ERR_NOMEM && rc != ING_ERR_RANGE) ||
		   !err.msg[0]))
		harness_fail("template_parse failed badly: rc %d, '%s'", rc, err.msg);
	if (!rc) {
		struct tm now = { .tm_year = 126, .tm_mon = 6, .tm_mday = 26, .tm_hour = 9,
				  .tm_min = 30 };
		struct template_opts o = { .now = &now, .max_output = 1 << 20,
					   .max_bytes = 32u << 20, .max_steps = 20000 };
		char *out[2] = { NULL, NULL };
		size_t len[2] = { 0, 0 };
		int r[2];
		for (int i = 0; i < 2; i++) {
			ing_err e2 = { 0 };
			r[i] = template_render_json(t, ctx, clen, &o, &out[i], &len[i], &e2);
			if (r[i] && (out[i] || !e2.msg[0] || e2.code != r[i] ||
				     (r[i] != ING_ERR_INVALID && r[i] != ING_ERR_FORMAT &&
				      r[i] != ING_ERR_RANGE && r[i] != ING_ERR_NOMEM)))
				harness_fail("render failed badly: rc %d, '%s'", r[i], e2.msg);
			if (!r[i] && (!out[i] || out[i][len[i]] != 0))
				harness_fail("render output not NUL-terminated");
		}
		if (r[0] != r[1] || (!r[0] && (len[0] != len[1] || memcmp(out[0], out[1], len[0]))))
			harness_fail("two renderings differ");
		ing_free(out[0]);
		ing_free(out[1]);
		template_free(t);
	}
	if (ing_mem_live() != live)
		harness_fail("template leaked %zu bytes", ing_mem_live() - live);
	return 0;
}
