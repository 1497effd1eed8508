/* bench_serve_workload.c — deterministic request lists for `ingot bench
 * serve`, built from a fixed word list and a seed (no downloads).
 *
 * chat: independent prompts of 50-200 random words.
 * shared-prefix: 4 common prefixes of ~600 words, each request one of them
 *   plus a short random suffix (what a prefix cache is for).
 * agentic: sessions of AG_TURNS turns on /v1/chat/completions; each turn
 *   resends the whole history (system prompt + tool definitions + prior
 *   turns + a short new message) and waits for the previous turn; after the
 *   second turn a burst of AG_BURST short sub-agent requests runs in
 *   parallel. Prior assistant turns are synthetic text, so the bodies do
 *   not depend on what the server answered. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bench_serve.h"
#include "mem.h"
#include "sbuf.h"

#define N_PREFIX 4
#define PREFIX_WORDS 600
#define AG_TURNS 8
#define AG_BURST 3

static const char *const words[] = {
	"the", "model", "server", "request", "token", "cache", "memory", "thread", "queue",
	"river", "mountain", "green", "quickly", "under", "between", "system", "answer",
	"question", "window", "library", "engine", "signal", "garden", "winter", "summer",
	"number", "letter", "paper", "stone", "light", "shadow", "music", "travel", "city",
	"village", "market", "price", "value", "simple", "complex", "layer", "vector",
	"matrix", "kernel", "batch", "stream", "buffer", "socket", "client", "history",
	"north", "south", "east", "west", "ocean", "forest", "animal", "bird", "horse",
	"bright", "dark", "silver", "golden", "ancient", "modern", "story", "chapter",
	"write", "read", "build", "measure", "compare", "explain", "describe", "remember",
	"and", "or", "but", "with", "without", "before", "after", "during", "because",
	"table", "chair", "door", "house", "road", "bridge", "tower", "engineer", "teacher",
};
#define N_WORDS (sizeof words / sizeof words[0])

static const char *const system_prompt =
	"You are a careful coding agent. Think step by step, call tools when they help, "
	"and answer briefly.";
static const char *const tool_text =
	"Tools:\n"
	"- read_file(path: string, start_line: integer, end_line: integer): returns the file's "
	"text, or the given line range of it, with line numbers.\n"
	"- write_file(path: string, text: string): replaces the whole file with text; creates "
	"missing directories.\n"
	"- edit_file(path: string, old: string, new: string): replaces the one occurrence of old "
	"with new; fails when old occurs zero or several times.\n"
	"- list_dir(path: string, depth: integer): lists files and directories with sizes.\n"
	"- run(command: string, timeout_s: integer, cwd: string): runs a shell command and "
	"returns its exit status, standard output and standard error (truncated to 20000 "
	"characters).\n"
	"- search(query: string, path: string, limit: integer, regex: boolean): returns matching "
	"lines with paths and line numbers.\n"
	"- git_diff(path: string): the uncommitted changes of the repository or of one path.\n"
	"- git_log(limit: integer): the latest commits with their messages.\n"
	"- run_tests(filter: string): builds the project and runs the tests whose names contain "
	"filter; returns the summary and the logs of failing tests.\n"
	"- web_docs(library: string, topic: string): returns the reference documentation of a "
	"library function or option.\n"
	"- ask_user(question: string): asks the user and waits for the answer.\n"
	"- todo(items: array of strings): replaces the task list shown to the user.\n"
	"Rules: read a file before editing it; keep edits small; run the tests after every "
	"change; never delete files you did not create; report what you changed and why.\n"
	"Answer with a JSON object {\"tool\": name, \"args\": {...}} to call a tool, or with "
	"plain text when the task is done.";

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int rng_range(uint64_t *s, int lo, int hi)
{
	return lo + (int)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

static void put_words(struct sbuf *b, uint64_t *s, int n)
{
	for (int i = 0; i < n; i++) {
		if (b->len && b->p[b->len - 1] != '\n')
			sbuf_put(b, " ", 1);
		sbuf_puts(b, words[rng_next(s) % N_WORDS]);
	}
}

/* Random text of n words, or NULL out of memory; free with ing_free. */
static char *random_text(uint64_t *s, int n)
{
	struct sbuf b = {0};
	put_words(&b, s, n);
	return b.oom ? (sbuf_free(&b), NULL) : sbuf_take(&b, NULL);
}

/* The common fields of request i's body; NULL out of memory. */
static cJSON *body_new(const struct bs_body *body, int i)
{
	const char *model = body->model;
	cJSON *o = cJSON_CreateObject();
	cJSON *so = cJSON_CreateObject();
	if (!o || !so || !cJSON_AddItemToObject(o, "stream_options", so)) {
		cJSON_Delete(o);
		cJSON_Delete(so);
		return NULL;
	}
	const double seed = (double)((body->seed + (uint64_t)i) & 0x7fffffff);
	int ok = (!model || cJSON_AddStringToObject(o, "model", model)) &&
		 cJSON_AddNumberToObject(o, "max_tokens", body->max_tokens) &&
		 cJSON_AddTrueToObject(o, "stream") && cJSON_AddTrueToObject(so, "include_usage") &&
		 cJSON_AddTrueToObject(o, "ignore_eos") &&
		 cJSON_AddNumberToObject(o, "temperature", body->temperature) &&
		 (body->top_p >= 1 || cJSON_AddNumberToObject(o, "top_p", body->top_p)) &&
		 (body->temperature <= 0 || cJSON_AddNumberToObject(o, "seed", seed));
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* Serialises o (deleting it) into r->body; -1 out of memory. */
static int body_finish(struct bs_req *r, cJSON *o)
{
	char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (!txt)
		return -1;
	r->body = ing_strndup(txt, strlen(txt));
	cJSON_free(txt);
	return r->body ? 0 : -1;
}

static int completion_req(struct bs_req *r, int i, const struct bs_body *body,
			  const char *prompt)
{
	cJSON *o = body_new(body, i);
	if (o && !cJSON_AddStringToObject(o, "prompt", prompt)) {
		cJSON_Delete(o);
		o = NULL;
	}
	r->chat_api = 0;
	r->dep = -1;
	return body_finish(r, o);
}

static int build_chat(struct bs_req *r, int n, const struct bs_body *body, uint64_t *s)
{
	for (int i = 0; i < n; i++) {
		char *p = random_text(s, rng_range(s, 50, 200));
		int rc = p ? completion_req(&r[i], i, body, p) : -1;
		ing_free(p);
		if (rc)
			return -1;
	}
	return 0;
}

static int build_shared_prefix(struct bs_req *r, int n, const struct bs_body *body,
			       uint64_t *s)
{
	char *prefix[N_PREFIX] = {0};
	int rc = 0;
	for (int k = 0; k < N_PREFIX && !rc; k++)
		rc = (prefix[k] = random_text(s, PREFIX_WORDS)) ? 0 : -1;
	for (int i = 0; i < n && !rc; i++) {
		struct sbuf b = {0};
		sbuf_puts(&b, prefix[rng_next(s) % N_PREFIX]);
		sbuf_puts(&b, "\n");
		put_words(&b, s, rng_range(s, 10, 30));
		rc = b.oom ? -1 : completion_req(&r[i], i, body, b.p);
		sbuf_free(&b);
	}
	for (int k = 0; k < N_PREFIX; k++)
		ing_free(prefix[k]);
	return rc;
}

static int add_msg(cJSON *msgs, const char *role, const char *content)
{
	cJSON *m = cJSON_CreateObject();
	if (!m || !cJSON_AddItemToArray(msgs, m)) {
		cJSON_Delete(m);
		return -1;
	}
	return cJSON_AddStringToObject(m, "role", role) &&
	       cJSON_AddStringToObject(m, "content", content) ? 0 : -1;
}

static int add_random_msg(cJSON *msgs, const char *role, uint64_t *s, int lo, int hi)
{
	char *t = random_text(s, rng_range(s, lo, hi));
	int rc = t ? add_msg(msgs, role, t) : -1;
	ing_free(t);
	return rc;
}

/* One chat request over (a copy of) history; -1 out of memory. */
static int chat_req(struct bs_req *r, int i, const struct bs_body *body, const cJSON *history,
		    int dep)
{
	cJSON *o = body_new(body, i);
	cJSON *msgs = cJSON_Duplicate(history, 1);
	if (!o || !msgs || !cJSON_AddItemToObject(o, "messages", msgs)) {
		cJSON_Delete(o);
		cJSON_Delete(msgs);
		return -1;
	}
	r->chat_api = 1;
	r->dep = dep;
	return body_finish(r, o);
}

/* A fresh session history: system prompt with the tool definitions. */
static cJSON *session_new(void)
{
	cJSON *h = cJSON_CreateArray();
	char sys[4096]; /* both texts are constants well under this */
	snprintf(sys, sizeof sys, "%s\n\n%s", system_prompt, tool_text);
	if (h && add_msg(h, "system", sys)) {
		cJSON_Delete(h);
		return NULL;
	}
	return h;
}

/* Sub-agent requests after turn `dep`: short independent tasks. */
static int build_burst(struct bs_req *r, int *i, int n, const struct bs_body *body,
		       uint64_t *s, int dep)
{
	for (int k = 0; k < AG_BURST && *i < n; k++, (*i)++) {
		cJSON *h = cJSON_CreateArray();
		int rc = (!h || add_msg(h, "system", system_prompt) ||
			  add_random_msg(h, "user", s, 10, 30)) ? -1 :
			 chat_req(&r[*i], *i, body, h, dep);
		cJSON_Delete(h);
		if (rc)
			return -1;
	}
	return 0;
}

static int build_session(struct bs_req *r, int *i, int n, const struct bs_body *body,
			 uint64_t *s)
{
	cJSON *h = session_new();
	int rc = h ? 0 : -1, prev = -1;
	for (int t = 0; t < AG_TURNS && *i < n && !rc; t++) {
		if (t > 0)
			rc = add_random_msg(h, "assistant", s, 20, 60);
		rc = rc ? rc : add_random_msg(h, "user", s, 8, 25);
		rc = rc ? rc : chat_req(&r[*i], *i, body, h, prev);
		if (rc)
			break;
		r[*i].turn = t + 1;
		prev = (*i)++;
		if (t == 1)
			rc = build_burst(r, i, n, body, s, prev);
	}
	cJSON_Delete(h);
	return rc;
}

static int build_agentic(struct bs_req *r, int n, const struct bs_body *body, uint64_t *s)
{
	int i = 0;
	while (i < n)
		if (build_session(r, &i, n, body, s))
			return -1;
	return 0;
}

int bs_kind_parse(const char *name)
{
	if (!strcmp(name, "chat"))
		return BS_CHAT;
	if (!strcmp(name, "shared-prefix"))
		return BS_SHARED_PREFIX;
	if (!strcmp(name, "agentic"))
		return BS_AGENTIC;
	return -1;
}

struct bs_req *bs_workload_build(int kind, const struct bs_body *body, int n, uint64_t seed)
{
	struct bs_req *r = ing_calloc((size_t)n, sizeof *r);
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
	if (!r)
		return NULL;
	int rc = kind == BS_CHAT	  ? build_chat(r, n, body, &s) :
		 kind == BS_SHARED_PREFIX ? build_shared_prefix(r, n, body, &s) :
					    build_agentic(r, n, body, &s);
	if (rc) {
		bs_reqs_free(r, n);
		return NULL;
	}
	return r;
}

void bs_reqs_free(struct bs_req *r, int n)
{
	if (!r)
		return;
	for (int i = 0; i < n; i++)
		ing_free(r[i].body);
	ing_free(r);
}
