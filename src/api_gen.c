/* api_gen.c — one generation request, from engine submit to the last byte.
 *
 * A gen_call holds the n choices of one HTTP request (n per prompt, each
 * its own engine request). Threads: the engine thread only appends to a
 * choice's token log and sets its final state, under the call's mutex,
 * and signals the condition variable; the connection's thread waits on it
 * and does all the work — detokenizing (tokenizer_stream, so a UTF-8
 * character is never split), matching stop strings, building JSON. The
 * token log is allocated at submit for max_tokens entries, so the engine
 * thread never allocates for us.
 *
 * Lifetime: the call is reference-counted: one reference for the
 * connection side and one per engine request until its final event.
 * Whoever drops the last one frees it. When the connection side leaves
 * early (client gone, stop string seen) it cancels the engine requests
 * that have not finished; their final events still arrive and find the
 * call alive.
 *
 * Stop strings are matched on the decoded text. Text is released to the
 * client only when it cannot be the start of a stop string any more; the
 * stop string itself is never sent.
 *
 * Function calls (r.tools_on): the decoder renders special tokens (call
 * markup may be made of them) and the whole output is kept, to be parsed
 * when the choice finishes (toolcall.h); streams send content only up to
 * where a call may begin and the calls as tool_calls deltas at the end,
 * except a forced call to a known function, whose head goes out at once
 * and whose arguments stream as they are written.
 *
 * Prompt scoring (completions' echo with logprobs, vLLM's prompt_logprobs):
 * the engine reports each prompt token's score before the first generated
 * token, into a log of its own allocated at submit; echo sends the prompt
 * (text, and scores when asked) once they are all in. Of a prompt's n
 * choices only the first (its scorer) scores it; the others read its log,
 * and take the prompt's rows from the prefix cache instead of computing
 * them again (a scored request cannot).
 *
 * Tracing (a->tracer): the final event's counts and times are kept per
 * choice; when the connection side lets go, the request's spans are built
 * from them and handed to the exporter (trace.h), which never blocks. */
#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api_int.h"
#include "clock.h"
#include "engine.h"
#include "generate.h"
#include "hash.h"
#include "mem.h"
#include "metrics.h"
#include "sbuf.h"
#include "server.h"

#define GEN_WAIT_MS 100

struct tokrec {
	int32_t token;
	float logprob;
	int32_t rank;              /* prompt tokens: 1 + ids more likely */
	bool is_eos;
	uint8_t n_top;
};

struct gen_choice {
	struct gen_call *k;
	int index;                 /* in the response's choices */
	int prompt;
	uint64_t id;               /* engine request */
	bool submitted;
	/* engine thread writes, under k->mu */
	struct tokrec *toks;       /* [cap] */
	int32_t *top_ids;          /* [cap * k->top] */
	float *top_lps;            /* [cap * k->top] */
	int n_toks, cap;
	struct tokrec *ptoks;      /* [n_prompt - 1] scored prompt tokens (positions 1 ..);
				    * the prompt's scorer only */
	int32_t *ptop_ids;         /* [(n_prompt - 1) * k->ptop] */
	float *ptop_lps;
	int n_ptoks;
	bool final, failed, stop_hit;
	enum engine_finish finish;
	char errmsg[256];
	int err_code;              /* failed: the engine's ING_ERR_* */
	double t_last;             /* time of the last token (inter-token latency) */
	int64_t n_cached;          /* prompt tokens the prefix cache supplied */
	int64_t ev_prompt, ev_gen;                /* from the final event (tracing) */
	double ev_queue_s, ev_ttft_s, ev_total_s;
	uint64_t t_submit_ns;      /* Unix ns at submit (tracing) */
	/* connection thread only */
	int cursor;                /* tokens of the log already taken */
	struct tokenizer_stream ts;
	struct sbuf held;          /* decoded text not yet released */
	struct sbuf text;          /* released text (non-streamed answers) */
	cJSON *lp;                 /* logprobs of a non-streamed answer */
	size_t text_offset;        /* completions logprobs */
	int64_t n_gen;             /* tokens taken: their ids are toks[0 .. n_gen) */
	int64_t ids_sent;          /* r.return_token_ids, streamed: ids already sent */
	bool first_sent;           /* a stream chunk of this choice went out */
	bool echoed;               /* r.echo: the prompt went out */
	bool done;
	const char *finish_reason;
	int stop_str;              /* vLLM's stop_reason: index of the stop string hit, */
	int32_t stop_token;        /* or the stop_token_ids id that ended it (-1: none) */
	/* function calling (k->r.tools_on): text holds the whole output, also
	 * when streamed, to be parsed at the end */
	size_t streamed;           /* bytes of text already sent (content, or arguments) */
	cJSON *lp_wait;            /* streamed: logprobs entries (chat's) of tokens whose
				    * text has not gone out yet, for the next chunk */
	bool call_open;            /* a forced call's head went out; its arguments stream */
	struct toolcall_list calls;
};

struct gen_call {
	struct api *a;
	struct gen_request r;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs;
	struct gen_choice *ch;     /* [n_ch] */
	int n_ch;
	int top;                   /* logprob alternatives stored per token */
	int ptop;                  /* ... per scored prompt token */
	bool score;                /* prompt tokens are scored (echo + logprobs,
				    * prompt_logprobs) */
	char id[16 + API_REQUEST_ID_MAX];
	long long created;
	int64_t prompt_tokens;
	struct sbuf out;           /* SSE bytes not yet handed to the server */
	struct resp_stream *resp;  /* a streamed Responses call: its chunks' translation */
	bool ended;                /* [DONE] written */
	bool failed;               /* an engine error (non-streamed: 400 or 500, err_refused) */
	bool submitted;            /* every choice reached the engine */
	char errmsg[256];
	int err_code;              /* failed: the engine's ING_ERR_* */
	struct gen_call *prev, *next; /* a->live */
};

/* ---- lifetime ---- */

static void call_free(struct gen_call *k)
{
	for (int i = 0; i < k->n_ch; i++) {
		struct gen_choice *ch = &k->ch[i];
		ing_free(ch->toks);
		ing_free(ch->top_ids);
		ing_free(ch->top_lps);
		ing_free(ch->ptoks);
		ing_free(ch->ptop_ids);
		ing_free(ch->ptop_lps);
		tokenizer_stream_free(&ch->ts);
		sbuf_free(&ch->held);
		sbuf_free(&ch->text);
		cJSON_Delete(ch->lp);
		cJSON_Delete(ch->lp_wait);
		toolcall_list_free(&ch->calls);
	}
	ing_free(k->ch);
	sbuf_free(&k->out);
	api_resp_stream_free(k->resp);
	gen_request_free(&k->r);
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->mu);
	ing_free(k);
}

static void live_add(struct api *a, struct gen_call *k)
{
	pthread_mutex_lock(&a->mu);
	k->next = a->live;
	if (a->live)
		a->live->prev = k;
	a->live = k;
	pthread_mutex_unlock(&a->mu);
}

static void live_remove(struct api *a, struct gen_call *k)
{
	pthread_mutex_lock(&a->mu);
	if (k->prev)
		k->prev->next = k->next;
	else if (a->live == k)
		a->live = k->next;
	if (k->next)
		k->next->prev = k->prev;
	k->prev = k->next = NULL;
	pthread_mutex_unlock(&a->mu);
}

void api_cancel_all(struct api *a)
{
	pthread_mutex_lock(&a->mu);
	for (struct gen_call *k = a->live; k; k = k->next)
		for (int i = 0; i < k->n_ch; i++)
			if (k->ch[i].submitted)
				engine_cancel(a->e, k->ch[i].id);
	pthread_mutex_unlock(&a->mu);
}

/* ---- tracing ---- */

static void id_fill(struct api *a, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t x = api_unique(a);
		memcpy(p + i, &x, n - i < 8 ? n - i : 8);
	}
}

/* A child of the server span, [t0 + from_s, t0 + to_s). */
static struct trace_span *span_child(struct trace_span *sp, int *n, const struct trace_span *srv,
				     const char *name, uint64_t t0, double from_s, double to_s)
{
	struct trace_span *s = &sp[(*n)++];
	*s = (struct trace_span){ .name = name, .kind = TRACE_KIND_INTERNAL, .error = srv->error,
				  .start_ns = t0 + (uint64_t)(from_s * 1e9),
				  .end_ns = t0 + (uint64_t)(to_s * 1e9) };
	memcpy(s->trace_id, srv->trace_id, 16);
	memcpy(s->parent_id, srv->span_id, 8);
	return s;
}

/* queue, prefill and decode spans of one finished choice. */
static void spans_choice(struct gen_call *k, const struct gen_choice *ch, struct trace_span *sp,
			 int *n)
{
	const struct trace_span *srv = &sp[0];
	uint64_t t0 = ch->t_submit_ns;
	double q = ch->ev_queue_s, first = ch->ev_gen > 0 ? ch->ev_ttft_s : ch->ev_total_s;
	struct trace_span *s = span_child(sp, n, srv, "queue", t0, 0, q);
	id_fill(k->a, s->span_id, 8);
	trace_attr_int(s, "ingot.choice.index", ch->index);
	s = span_child(sp, n, srv, "prefill", t0, q, first);
	id_fill(k->a, s->span_id, 8);
	trace_attr_int(s, "ingot.choice.index", ch->index);
	trace_attr_int(s, "gen_ai.usage.input_tokens", ch->ev_prompt);
	trace_attr_int(s, "ingot.prefix_cache_hit_tokens", ch->n_cached);
	if (ch->ev_gen == 0)
		return;
	s = span_child(sp, n, srv, "decode", t0, first, ch->ev_total_s);
	id_fill(k->a, s->span_id, 8);
	trace_attr_int(s, "ingot.choice.index", ch->index);
	trace_attr_int(s, "gen_ai.usage.output_tokens", ch->ev_gen);
}

/* The request's server span, then per finished choice its queue, prefill
 * and decode spans; handed to the exporter. Runs with k->mu held (the
 * engine thread may still write unfinished choices). */
static void call_trace(struct gen_call *k)
{
	const struct gen_request *r = &k->r;
	struct trace_span *sp = ing_malloc_array((size_t)(1 + 3 * k->n_ch), sizeof *sp);
	if (!sp)
		return;
	char name[160];
	snprintf(name, sizeof name, "%s %s", r->chat ? "chat" : "text_completion", k->a->model_name);
	struct trace_span *srv = &sp[0];
	*srv = (struct trace_span){ .name = name, .kind = TRACE_KIND_SERVER,
				    .start_ns = r->t_start_ns, .end_ns = trace_now_ns(),
				    .error = k->failed };
	if (r->has_parent) {
		memcpy(srv->trace_id, r->parent.trace_id, 16);
		memcpy(srv->parent_id, r->parent.span_id, 8);
	} else {
		id_fill(k->a, srv->trace_id, 16);
	}
	id_fill(k->a, srv->span_id, 8);
	int n = 1;
	int64_t gen = 0, cached = 0;
	for (int i = 0; i < k->n_ch; i++) {
		const struct gen_choice *ch = &k->ch[i];
		gen += ch->n_gen;
		cached += ch->n_cached;
		if (ch->final && !ch->failed)
			spans_choice(k, ch, sp, &n);
	}
	trace_attr_str(srv, "gen_ai.operation.name", r->chat ? "chat" : "text_completion");
	trace_attr_str(srv, "gen_ai.request.model", k->a->model_name);
	if (r->max_tokens)
		trace_attr_int(srv, "gen_ai.request.max_tokens", r->max_tokens);
	trace_attr_str(srv, "gen_ai.response.id", k->id);
	trace_attr_int(srv, "gen_ai.usage.input_tokens", k->prompt_tokens);
	trace_attr_int(srv, "gen_ai.usage.output_tokens", gen);
	trace_attr_int(srv, "ingot.prefix_cache_hit_tokens", cached);
	trace_attr_int(srv, "ingot.choices", k->n_ch);
	trace_attr_int(srv, "ingot.stream", r->stream);
	if (k->n_ch > 0 && k->ch[0].finish_reason)
		trace_attr_str(srv, "gen_ai.response.finish_reasons", k->ch[0].finish_reason);
	trace_export(k->a->tracer, sp, n);
	ing_free(sp);
}

/* The connection side lets go: unfinished engine requests are cancelled. */
static void call_release(struct gen_call *k)
{
	live_remove(k->a, k);
	pthread_mutex_lock(&k->mu);
	if (k->a->tracer && k->submitted)
		call_trace(k);
	for (int i = 0; i < k->n_ch; i++)
		if (k->ch[i].submitted && !k->ch[i].final)
			engine_cancel(k->a->e, k->ch[i].id);
	bool last = --k->refs == 0;
	pthread_mutex_unlock(&k->mu);
	if (last)
		call_free(k);
}

/* ---- the engine side (runs on the engine thread) ---- */

static enum metrics_finish finish_metric(const struct gen_choice *ch)
{
	if (ch->stop_hit || ch->finish == ENGINE_FINISH_STOP)
		return METRICS_FINISH_STOP;
	return ch->finish == ENGINE_FINISH_LENGTH ? METRICS_FINISH_LENGTH : METRICS_FINISH_ABORT;
}

/* The first of ch's prompt's n choices: it scores the prompt. */
static const struct gen_choice *scorer(const struct gen_call *k, const struct gen_choice *ch)
{
	return &k->ch[ch->prompt * k->r.n];
}

/* Once every choice of ch's prompt has finished well: the request-level
 * histograms (n, max_tokens, the most tokens a choice generated). Under
 * k->mu. */
static void prompt_final(const struct gen_choice *ch)
{
	const struct gen_call *k = ch->k;
	const int n = k->r.n;
	const struct gen_choice *c = scorer(k, ch);
	int64_t most = 0;
	for (int j = 0; j < n; j++) {
		if (!c[j].final || c[j].failed)
			return;
		most = c[j].ev_gen > most ? c[j].ev_gen : most;
	}
	struct metrics *m = k->a->metrics;
	metrics_observe(m, METRICS_PARAM_N, n);
	metrics_observe(m, METRICS_PARAM_MAX_TOKENS, (double)(ch->cap - 1));
	metrics_observe(m, METRICS_MAX_GEN_TOKENS, (double)most);
}

static void on_final(struct gen_choice *ch, const struct engine_event *ev)
{
	struct metrics *m = ch->k->a->metrics;
	ch->final = true;
	ch->finish = ev->finish;
	if (ev->kind == ENGINE_EV_ERROR) {
		ch->failed = true;
		snprintf(ch->errmsg, sizeof ch->errmsg, "%s", ev->error ? ev->error : "engine error");
		ch->err_code = ev->error_code;
		return;
	}
	ch->n_cached = ev->n_cached_prompt;
	ch->ev_prompt = ev->n_prompt;
	ch->ev_gen = ev->n_generated;
	ch->ev_queue_s = ev->queue_s;
	ch->ev_ttft_s = ev->ttft_s;
	ch->ev_total_s = ev->total_s;
	metrics_observe(m, METRICS_QUEUE, ev->queue_s);
	metrics_observe(m, METRICS_E2E, ev->total_s);
	metrics_observe(m, METRICS_INFERENCE, ev->total_s - ev->queue_s);
	if (ev->n_generated > 0) {
		metrics_observe(m, METRICS_TTFT, ev->ttft_s);
		metrics_observe(m, METRICS_PREFILL, ev->ttft_s - ev->queue_s);
		metrics_observe(m, METRICS_DECODE, ev->total_s - ev->ttft_s);
	}
	if (ev->n_generated > 1)
		metrics_observe(m, METRICS_TPOT,
				(ev->total_s - ev->ttft_s) / (double)(ev->n_generated - 1));
	metrics_observe(m, METRICS_PROMPT_TOKENS, (double)ev->n_prompt);
	metrics_observe(m, METRICS_GEN_TOKENS, (double)ev->n_generated);
	metrics_observe(m, METRICS_PREFILL_KV_TOKENS, (double)(ev->n_prompt - ev->n_cached_prompt));
	metrics_count_cached(m, ev->n_cached_prompt);
	metrics_finish_count(m, finish_metric(ch));
	prompt_final(ch);
}

/* Entry i of a token log (recs, with top alternatives each in ids/lps)
 * from ev, keeping at most top of its alternatives. */
static void tokrec_store(struct tokrec *recs, int32_t *ids, float *lps, int i, int top,
			 const struct engine_event *ev)
{
	int nt = ev->n_top < top ? ev->n_top : top;
	recs[i] = (struct tokrec){ .token = ev->token, .logprob = ev->logprob, .rank = ev->rank,
				   .is_eos = ev->is_eos, .n_top = (uint8_t)(nt > 0 ? nt : 0) };
	for (int j = 0; j < nt; j++) {
		ids[(size_t)i * top + j] = ev->top_ids[j];
		lps[(size_t)i * top + j] = ev->top_logprobs[j];
	}
}

static void on_token(struct gen_choice *ch, const struct engine_event *ev)
{
	double now = clock_now_s();
	if (ch->n_toks > 0)
		metrics_observe(ch->k->a->metrics, METRICS_ITL, now - ch->t_last);
	ch->t_last = now;
	if (ch->n_toks >= ch->cap)
		return; /* cannot happen: the log holds max_tokens */
	tokrec_store(ch->toks, ch->top_ids, ch->top_lps, ch->n_toks++, ch->k->top, ev);
}

static void on_prompt_token(struct gen_choice *ch, const struct engine_event *ev)
{
	int i = ch->n_ptoks;
	if (!ch->ptoks || ev->pos != i + 1 || i + 1 >= (int)ch->k->r.prompts[ch->prompt].n)
		return; /* cannot happen: the engine scores each position once, in order */
	tokrec_store(ch->ptoks, ch->ptop_ids, ch->ptop_lps, ch->n_ptoks++, ch->k->ptop, ev);
}

static void on_event(void *ud, const struct engine_event *ev)
{
	struct gen_choice *ch = ud;
	struct gen_call *k = ch->k;
	pthread_mutex_lock(&k->mu);
	if (ev->kind == ENGINE_EV_TOKEN)
		on_token(ch, ev);
	else if (ev->kind == ENGINE_EV_PROMPT_TOKEN)
		on_prompt_token(ch, ev);
	else
		on_final(ch, ev);
	bool last = ch->final && --k->refs == 0;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	if (last)
		call_free(k);
}

/* ---- JSON pieces ---- */

static void utf8_clean(const unsigned char *s, size_t n, struct sbuf *out)
{
	static const char repl[] = "\xEF\xBF\xBD";
	for (size_t i = 0; i < n;) {
		unsigned c = s[i];
		size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		bool ok = len > 0 && c != 0 && i + len <= n && !(c == 0xC0 || c == 0xC1 || c > 0xF4);
		for (size_t j = 1; ok && j < len; j++)
			ok = (s[i + j] & 0xC0) == 0x80;
		if (ok && len == 3) /* no overlongs, no surrogates */
			ok = !(c == 0xE0 && s[i + 1] < 0xA0) && !(c == 0xED && s[i + 1] >= 0xA0);
		if (ok && len == 4)
			ok = !(c == 0xF0 && s[i + 1] < 0x90) && !(c == 0xF4 && s[i + 1] >= 0x90);
		if (ok)
			sbuf_put(out, s + i, len);
		else
			sbuf_put(out, repl, 3);
		i += ok ? len : 1;
	}
}

cJSON *api_json_text(const char *s, size_t n)
{
	struct sbuf b = { 0 };
	utf8_clean((const unsigned char *)s, n, &b);
	if (b.oom)
		return NULL;
	cJSON *j = cJSON_CreateString(b.p ? b.p : "");
	sbuf_free(&b);
	return j;
}

/* How logprobs name token id: its text, or vLLM's "token_id:<id>"
 * (return_tokens_as_token_ids), which tells apart tokens of equal text. */
static const char *lp_piece(const struct gen_call *k, int32_t id, char buf[32], size_t *n)
{
	if (k->r.tokens_as_ids) {
		*n = (size_t)snprintf(buf, 32, "token_id:%" PRId32, id);
		return buf;
	}
	return tokenizer_piece(k->a->tk, id, 0, n);
}

static cJSON *lp_token(const struct gen_call *k, int32_t id, float lp, bool with_bytes)
{
	size_t n;
	char buf[32];
	const char *p = lp_piece(k, id, buf, &n);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "token", api_json_text(p, n));
	cJSON_AddNumberToObject(o, "logprob", isfinite(lp) ? lp : -9999.0);
	if (with_bytes) {
		cJSON *b = cJSON_AddArrayToObject(o, "bytes");
		for (size_t i = 0; i < n; i++)
			cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)p[i]));
	}
	return o;
}

/* Chat format: {token, logprob, bytes, top_logprobs: [...]}. */
static cJSON *lp_chat_entry(const struct gen_call *k, const struct gen_choice *ch, int t)
{
	const struct tokrec *r = &ch->toks[t];
	cJSON *o = lp_token(k, r->token, r->logprob, true);
	cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs");
	for (int i = 0; i < r->n_top && i < k->r.logprobs; i++)
		cJSON_AddItemToArray(top, lp_token(k, ch->top_ids[(size_t)t * k->top + i],
						   ch->top_lps[(size_t)t * k->top + i], true));
	return o;
}

/* Completions format: parallel arrays tokens, token_logprobs,
 * top_logprobs (one {token: logprob} object per token), text_offset. */
static cJSON *lp_legacy_new(void)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddArrayToObject(o, "tokens");
	cJSON_AddArrayToObject(o, "token_logprobs");
	cJSON_AddArrayToObject(o, "top_logprobs");
	cJSON_AddArrayToObject(o, "text_offset");
	return o;
}

/* Appends token r (alternatives ids/lps) to legacy logprobs o; r NULL:
 * token `token` with no logprob (an echoed prompt's first). */
static void lp_legacy_put(const struct gen_call *k, struct gen_choice *ch, cJSON *o,
			  int32_t token, const struct tokrec *r, const int32_t *ids,
			  const float *lps)
{
	size_t n;
	char buf[32];
	const char *p = lp_piece(k, token, buf, &n);
	cJSON *self = api_json_text(p, n);
	cJSON_AddItemToArray(cJSON_GetObjectItem(o, "tokens"), self);
	cJSON_AddItemToArray(cJSON_GetObjectItem(o, "token_logprobs"),
			     !r ? cJSON_CreateNull()
				: cJSON_CreateNumber(isfinite(r->logprob) ? r->logprob : -9999.0));
	cJSON *top = r ? cJSON_CreateObject() : cJSON_CreateNull();
	/* the token itself first, then its alternatives: OpenAI's legacy
	 * API (and vLLM) always return the chosen token's logprob there, so
	 * up to logprobs + 1 entries */
	if (r && self)
		cJSON_AddNumberToObject(top, self->valuestring,
					isfinite(r->logprob) ? r->logprob : -9999.0);
	for (int i = 0; r && i < r->n_top && i < k->r.logprobs; i++) {
		size_t tn;
		char tbuf[32];
		const char *tp = lp_piece(k, ids[i], tbuf, &tn);
		cJSON *tok = api_json_text(tp, tn);
		if (tok && !cJSON_GetObjectItemCaseSensitive(top, tok->valuestring))
			cJSON_AddNumberToObject(top, tok->valuestring,
						isfinite(lps[i]) ? lps[i] : -9999.0);
		cJSON_Delete(tok);
	}
	cJSON_AddItemToArray(cJSON_GetObjectItem(o, "top_logprobs"), top);
	cJSON_AddItemToArray(cJSON_GetObjectItem(o, "text_offset"),
			     cJSON_CreateNumber((double)ch->text_offset));
	ch->text_offset += n;
}

static void lp_legacy_add(const struct gen_call *k, struct gen_choice *ch, int t, cJSON *o)
{
	lp_legacy_put(k, ch, o, ch->toks[t].token, &ch->toks[t], ch->top_ids + (size_t)t * k->top,
		      ch->top_lps + (size_t)t * k->top);
}

/* vLLM's prompt_logprobs: null for the first token, then per token
 * {"id": {logprob, rank, decoded_token}} for the token itself followed by
 * its alternatives (ranks 1 ..). NULL when out of memory. */
static cJSON *lp_prompt_json(const struct gen_call *k, const struct gen_choice *c)
{
	const struct gen_choice *ch = scorer(k, c);
	cJSON *arr = cJSON_CreateArray();
	cJSON_AddItemToArray(arr, cJSON_CreateNull());
	for (int i = 0; arr && i < ch->n_ptoks; i++) {
		const struct tokrec *r = &ch->ptoks[i];
		cJSON *d = cJSON_CreateObject();
		for (int j = -1; d && j < r->n_top && j < k->r.prompt_logprobs; j++) {
			int32_t id = j < 0 ? r->token : ch->ptop_ids[(size_t)i * k->ptop + j];
			float lp = j < 0 ? r->logprob : ch->ptop_lps[(size_t)i * k->ptop + j];
			char key[16];
			snprintf(key, sizeof key, "%" PRId32, id);
			if (cJSON_GetObjectItemCaseSensitive(d, key))
				continue; /* the token is among its alternatives */
			size_t n;
			const char *p = tokenizer_piece(k->a->tk, id, TOKENIZER_RENDER_SPECIAL, &n);
			cJSON *e = cJSON_AddObjectToObject(d, key);
			cJSON_AddNumberToObject(e, "logprob", isfinite(lp) ? lp : -9999.0);
			cJSON_AddNumberToObject(e, "rank", j < 0 ? r->rank : j + 1);
			cJSON_AddItemToObject(e, "decoded_token", api_json_text(p, n));
		}
		cJSON_AddItemToArray(arr, d);
	}
	return arr;
}

static cJSON *usage_new(const struct gen_call *k)
{
	int64_t gen = 0;
	for (int i = 0; i < k->n_ch; i++)
		gen += k->ch[i].n_gen;
	cJSON *u = cJSON_CreateObject();
	cJSON_AddNumberToObject(u, "prompt_tokens", (double)k->prompt_tokens);
	cJSON_AddNumberToObject(u, "completion_tokens", (double)gen);
	cJSON_AddNumberToObject(u, "total_tokens", (double)(k->prompt_tokens + gen));
	/* prompt tokens served from the prefix cache, counted once per prompt
	 * (its first choice) like prompt_tokens */
	int64_t cached = 0;
	for (int i = 0; i < k->n_ch; i++)
		if (k->ch[i].index % k->r.n == 0)
			cached += k->ch[i].n_cached;
	cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
	if (d)
		cJSON_AddNumberToObject(d, "cached_tokens", (double)cached);
	return u;
}

static cJSON *response_new(const struct gen_call *k, const char *object)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "id", k->id);
	cJSON_AddStringToObject(o, "object", object);
	cJSON_AddNumberToObject(o, "created", (double)k->created);
	cJSON_AddStringToObject(o, "model", k->a->model_name);
	cJSON_AddNullToObject(o, "system_fingerprint");
	return o;
}

/* ---- token ids (vLLM's return_token_ids) ---- */

/* Ids of the tokens ch took, from .. to (an EOS and a stop string's
 * tokens among them: the output as the model made it). */
static cJSON *gen_ids_json(const struct gen_choice *ch, int64_t from, int64_t to)
{
	cJSON *arr = cJSON_CreateArray();
	for (int64_t i = from; arr && i < to; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber(ch->toks[i].token));
	return arr;
}

/* Stream chunk o (its choice c) of ch: a choice's first chunk carries its
 * prompt's ids (chat: beside the choices, in the role chunk, which has no
 * token_ids); every other chunk the ids of the tokens taken since the
 * last, whether or not they made text yet (text held back, an EOS). */
static void chunk_ids(const struct gen_call *k, struct gen_choice *ch, cJSON *o, cJSON *c)
{
	bool first = !ch->first_sent;
	ch->first_sent = true;
	if (!k->r.return_token_ids)
		return;
	if (first)
		cJSON_AddItemToObject(k->r.chat ? o : c, "prompt_token_ids",
				      api_ids_json(&k->r.prompts[ch->prompt]));
	if (first && k->r.chat)
		return;
	cJSON_AddItemToObject(c, "token_ids", gen_ids_json(ch, ch->ids_sent, ch->n_gen));
	ch->ids_sent = ch->n_gen;
}

/* ---- SSE output ---- */

static void sse_put(struct gen_call *k, cJSON *o)
{
	if (k->resp) {
		api_resp_stream_chunk(k->resp, o, &k->out);
		return;
	}
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (!s) {
		k->out.oom = true;
		return;
	}
	sbuf_puts(&k->out, "data: ");
	sbuf_puts(&k->out, s);
	sbuf_puts(&k->out, "\n\n");
	cJSON_free(s);
}

/* vLLM's stop_reason: the stop string or stop token id that ended the
 * choice; null for EOS, a length or an abort. */
static cJSON *stop_reason_json(const struct gen_call *k, const struct gen_choice *ch)
{
	if (ch->stop_str >= 0)
		return cJSON_CreateString(k->r.stop[ch->stop_str]);
	if (ch->stop_token >= 0)
		return cJSON_CreateNumber(ch->stop_token);
	return cJSON_CreateNull();
}

/* One chunk for choice ch: a delta (chat) or text (completions), its
 * logprobs (may be NULL: chat, one token's entry or an array of them,
 * sent as OpenAI's {"content": [entries]}; completions, the legacy
 * arrays) and finish reason (may be NULL; with it, vLLM's stop_reason). */
static void sse_chunk(struct gen_call *k, struct gen_choice *ch, cJSON *delta,
		      const char *text, size_t len, cJSON *lp, const char *finish)
{
	bool chat = k->r.chat;
	cJSON *o = response_new(k, chat ? "chat.completion.chunk" : "text_completion");
	cJSON *c = cJSON_CreateObject();
	cJSON_AddNumberToObject(c, "index", ch->index);
	if (chat) {
		if (!delta) {
			delta = cJSON_CreateObject();
			if (len)
				cJSON_AddItemToObject(delta, "content", api_json_text(text, len));
		}
		cJSON_AddItemToObject(c, "delta", delta);
	} else {
		cJSON_Delete(delta);
		cJSON_AddItemToObject(c, "text", api_json_text(text, len));
	}
	if (chat && lp) { /* one entry, or an array of them (lp_take) */
		cJSON *wrap = cJSON_CreateObject();
		if (cJSON_IsArray(lp))
			cJSON_AddItemToObject(wrap, "content", lp);
		else
			cJSON_AddItemToArray(cJSON_AddArrayToObject(wrap, "content"), lp);
		lp = wrap;
	}
	cJSON_AddItemToObject(c, "logprobs", lp ? lp : cJSON_CreateNull());
	cJSON_AddItemToObject(c, "finish_reason",
			      finish ? cJSON_CreateString(finish) : cJSON_CreateNull());
	if (finish)
		cJSON_AddItemToObject(c, "stop_reason", stop_reason_json(k, ch));
	chunk_ids(k, ch, o, c);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
	if (k->r.usage_each)
		cJSON_AddItemToObject(o, "usage", usage_new(k));
	else if (k->r.include_usage)
		cJSON_AddNullToObject(o, "usage");
	sse_put(k, o);
}

static void sse_role(struct gen_call *k)
{
	for (int i = 0; i < k->n_ch; i++) {
		cJSON *d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "role", "assistant");
		cJSON_AddStringToObject(d, "content", "");
		sse_chunk(k, &k->ch[i], d, NULL, 0, NULL, NULL);
	}
}

static void sse_end(struct gen_call *k)
{
	if (k->r.include_usage) {
		cJSON *o = response_new(k, k->r.chat ? "chat.completion.chunk" : "text_completion");
		cJSON_AddArrayToObject(o, "choices");
		cJSON_AddItemToObject(o, "usage", usage_new(k));
		sse_put(k, o);
	}
	if (k->resp && !k->failed) {
		cJSON *fin = api_resp_stream_end(k->resp, &k->out);
		api_responses_keep(k->a, fin, k->r.responses);
		cJSON_Delete(fin);
	} else if (!k->resp) {
		sbuf_puts(&k->out, "data: [DONE]\n\n");
	} /* a failed Responses stream ended with response.failed (sse_error) */
	k->ended = true;
}

/* An engine failure the request caused (a grammar too complex to follow)
 * rather than the server: a 400, not a 500. */
static bool err_refused(int err_code)
{
	return err_code == ING_ERR_UNSUPPORTED || err_code == ING_ERR_INVALID;
}

static void sse_error(struct gen_call *k, const char *msg, int err_code)
{
	const char *type = err_refused(err_code) ? "invalid_request_error" : "server_error";
	if (k->resp) {
		api_resp_stream_error(k->resp, msg, type, &k->out);
		return;
	}
	cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
	cJSON_AddItemToObject(e, "message", api_json_text(msg, strlen(msg)));
	cJSON_AddStringToObject(e, "type", type);
	cJSON_AddNullToObject(e, "param");
	cJSON_AddNullToObject(e, "code");
	sse_put(k, o);
}

/* ---- text: detokenizing, stop strings, release ---- */

/* Longest suffix of s[0..n) that is a proper prefix of stop. */
static size_t stop_partial(const char *s, size_t n, const char *stop)
{
	size_t sl = strlen(stop);
	for (size_t k = sl - 1 < n ? sl - 1 : n; k > 0; k--)
		if (!memcmp(s + n - k, stop, k))
			return k;
	return 0;
}

/* Bytes of held text that may be released; *hit when a stop string
 * (number *which) starts there (the text then ends before it, or after it
 * with include_stop_str_in_output). */
static size_t stop_scan(const struct gen_request *r, const char *s, size_t n, bool *hit,
			int *which)
{
	size_t first = n, first_len = 0, hold = 0;
	*hit = false;
	for (int i = 0; i < r->n_stop; i++) {
		const size_t len = strlen(r->stop[i]);
		const char *p = memmem(s, n, r->stop[i], len);
		if (p && (size_t)(p - s) < first) {
			first = (size_t)(p - s);
			first_len = len;
			*hit = true;
			*which = i;
		}
	}
	if (*hit)
		return r->include_stop ? first + first_len : first;
	for (int i = 0; i < r->n_stop; i++) {
		size_t h = stop_partial(s, n, r->stop[i]);
		hold = h > hold ? h : hold;
	}
	return n - hold;
}

/* ---- function calls in the output ---- */

/* With tools, a streamed token's text may go out chunks later than the
 * token (held back where a call may start, or sent as call arguments):
 * its logprobs entry (lp, owned) waits in ch->lp_wait and goes out with
 * the next chunk of the choice, so that a stream's logprobs add up to
 * the whole answer's, as without tools. */
static void lp_wait_add(struct gen_call *k, struct gen_choice *ch, cJSON *lp)
{
	if (!lp)
		return;
	if (!ch->lp_wait && !(ch->lp_wait = cJSON_CreateArray())) {
		cJSON_Delete(lp);
		k->out.oom = true;
		return;
	}
	cJSON_AddItemToArray(ch->lp_wait, lp);
}

/* The waiting entries as an array for sse_chunk (NULL: none); the choice
 * keeps none. */
static cJSON *lp_take(struct gen_choice *ch)
{
	cJSON *lp = ch->lp_wait;
	ch->lp_wait = NULL;
	if (lp && !cJSON_GetArraySize(lp)) {
		cJSON_Delete(lp);
		lp = NULL;
	}
	return lp;
}

/* One tool_calls delta of call 0: the head (id, type, name, empty
 * arguments) when name is given, else a piece of the arguments. */
static void call_delta(struct gen_call *k, struct gen_choice *ch, const char *name,
		       const char *args, size_t n)
{
	cJSON *d = cJSON_CreateObject(), *c = cJSON_CreateObject(), *fn;
	cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "tool_calls"), c);
	cJSON_AddNumberToObject(c, "index", 0);
	if (name) {
		char id[32];
		api_tools_call_id(k->a, id);
		cJSON_AddStringToObject(c, "id", id);
		cJSON_AddStringToObject(c, "type", "function");
	}
	fn = cJSON_AddObjectToObject(c, "function");
	if (name)
		cJSON_AddStringToObject(fn, "name", name);
	cJSON_AddItemToObject(fn, "arguments", api_json_text(args, n));
	sse_chunk(k, ch, d, NULL, 0, lp_take(ch), NULL);
}

/* End of the JSON value at text[from..len), or 0 while it is incomplete
 * (or not JSON). */
static size_t json_end(const char *t, size_t from, size_t len)
{
	const char *end = NULL;
	cJSON *v = from < len ? cJSON_ParseWithLengthOpts(t + from, len - from, &end, false) : NULL;
	cJSON_Delete(v);
	return v ? (size_t)(end - t) : 0;
}

/* Where a named call's arguments start in the text: the first non-blank
 * byte after the forced prefix (the grammar lets the model write blanks
 * before the object; clients parse partial arguments, the SDK's strict
 * tools, so they start at the object, as OpenAI's do), or the text's end
 * while only blanks came. */
static size_t args_from(const struct gen_call *k, const struct gen_choice *ch, const char *t)
{
	size_t i = strlen(k->r.tool_prefix);
	while (i < ch->text.len && isspace((unsigned char)t[i]))
		i++;
	return i;
}

/* A forced call to a known function streams as OpenAI's do: its head at
 * once, then the arguments as they come (held back only where they may
 * run into the closing markup). */
static void forced_emit(struct gen_call *k, struct gen_choice *ch)
{
	const char *t = ch->text.p ? ch->text.p : "";
	if (!ch->call_open) {
		call_delta(k, ch, k->r.tool_name, "", 0);
		ch->call_open = true;
	}
	size_t from = args_from(k, ch, t);
	if (ch->streamed < from)
		ch->streamed = from;
	size_t safe = json_end(t, from, ch->text.len);
	if (!safe) {
		size_t hold = 0, cl = strlen(k->r.tool_close);
		for (size_t h = cl - 1 < ch->text.len ? cl - 1 : ch->text.len; h > 0 && !hold; h--)
			if (!memcmp(t + ch->text.len - h, k->r.tool_close, h))
				hold = h;
		safe = ch->text.len - hold;
	}
	if (safe > ch->streamed) {
		call_delta(k, ch, NULL, t + ch->streamed, safe - ch->streamed);
		ch->streamed = safe;
	}
}

/* With tools, streamed text goes out as content only up to where a call
 * may start (and not its trailing whitespace, which the parsed content
 * drops); the rest waits for the end. lp (owned) waits in ch->lp_wait
 * for the next chunk (lp_wait_add). */
static void tools_emit(struct gen_call *k, struct gen_choice *ch, const char *s, size_t n,
		       cJSON *lp)
{
	sbuf_put(&ch->text, s, n);
	if (!k->r.stream) {
		if (lp && k->r.chat)
			cJSON_AddItemToArray(cJSON_GetObjectItem(ch->lp, "content"), lp);
		return;
	}
	lp_wait_add(k, ch, lp);
	if (k->r.tool_close) {
		forced_emit(k, ch);
		return;
	}
	const char *t = ch->text.p ? ch->text.p : "";
	size_t safe = toolcall_content_prefix(k->a->tool_format, t, ch->text.len);
	while (safe > ch->streamed && isspace((unsigned char)t[safe - 1]))
		safe--;
	if (safe > ch->streamed) {
		sse_chunk(k, ch, NULL, t + ch->streamed, safe - ch->streamed, lp_take(ch), NULL);
		ch->streamed = safe;
	}
}

/* The calls as OpenAI streams them: per call, a delta with its index, id,
 * type and name (arguments ""), then one with the arguments. */
static void tools_stream(struct gen_call *k, struct gen_choice *ch)
{
	cJSON *arr = api_tools_json(k->a, &ch->calls, k->r.parallel_tool_calls), *c;
	if (!arr) {
		k->out.oom = true;
		return;
	}
	int i = 0;
	cJSON_ArrayForEach(c, arr) {
		cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
		cJSON *args = cJSON_DetachItemFromObjectCaseSensitive(fn, "arguments");
		cJSON_AddStringToObject(fn, "arguments", "");
		cJSON_AddNumberToObject(c, "index", i);
		cJSON *d1 = cJSON_CreateObject(), *d2 = cJSON_CreateObject(), *c2 = cJSON_CreateObject();
		cJSON_AddItemToArray(cJSON_AddArrayToObject(d1, "tool_calls"), cJSON_Duplicate(c, true));
		cJSON_AddNumberToObject(c2, "index", i++);
		cJSON_AddItemToObject(cJSON_AddObjectToObject(c2, "function"), "arguments", args);
		cJSON_AddItemToArray(cJSON_AddArrayToObject(d2, "tool_calls"), c2);
		sse_chunk(k, ch, d1, NULL, 0, lp_take(ch), NULL);
		sse_chunk(k, ch, d2, NULL, 0, NULL, NULL);
	}
	cJSON_Delete(arr);
}

/* The forced call k->r.tool_name with arguments args[0..n) (incomplete
 * JSON) as ch's one call, no content. -1 when out of memory. */
static int forced_partial(struct gen_call *k, struct gen_choice *ch, const char *args, size_t n)
{
	struct toolcall *v = ing_calloc(1, sizeof *v);
	char *name = ing_strndup(k->r.tool_name, strlen(k->r.tool_name));
	char *a = ing_strndup(args, n);
	if (!v || !name || !a) {
		ing_free(v);
		ing_free(name);
		ing_free(a);
		return -1;
	}
	toolcall_list_free(&ch->calls);
	v->name = name;
	v->arguments = a;
	ch->calls = (struct toolcall_list){ .v = v, .n = 1, .content_len = 0 };
	return 0;
}

/* tool_choice required, the output cut off in a later call: the calls
 * that closed (streamed too), never the markup as content. False when
 * none closed. */
static bool required_closed_calls(struct gen_call *k, struct gen_choice *ch, const char *t)
{
	size_t done_len = toolcall_complete_prefix(k->a->tool_format, t, ch->text.len);
	if (!done_len)
		return false;
	ing_err err;
	toolcall_list_free(&ch->calls);
	if (toolcall_parse(k->a->tool_format, t, done_len, &ch->calls, &err))
		k->out.oom = true;
	if (ch->calls.n && k->r.stream)
		tools_stream(k, ch);
	return ch->calls.n > 0;
}

/* A named call (k->r.tool_close): its arguments as written, from the
 * object on; when the output did not parse (max_tokens cut it inside the
 * arguments or the closing markup), the call as far as it went, as a
 * stream sends it and vLLM answers, never the markup as content. Sends
 * what the stream has not. Returns the finish reason: "tool_calls" for a
 * call that parsed. */
static const char *named_finish(struct gen_call *k, struct gen_choice *ch, const char *t,
				const char *reason)
{
	const bool parsed = ch->calls.n > 0;
	size_t from = args_from(k, ch, t);
	size_t end = json_end(t, from, ch->text.len); /* 0: the object is incomplete */
	size_t upto = end ? end : ch->text.len;
	if (end && ch->calls.n == 1) {
		char *raw = ing_strndup(t + from, end - from);
		if (raw) {
			ing_free(ch->calls.v[0].arguments);
			ch->calls.v[0].arguments = raw;
		}
	} else if (!parsed && !ch->text.oom && forced_partial(k, ch, t + from, upto - from)) {
		k->out.oom = true;
	}
	if (k->r.stream && ch->call_open && upto > ch->streamed)
		call_delta(k, ch, NULL, t + ch->streamed, upto - ch->streamed);
	return parsed ? "tool_calls" : reason;
}

/* Whether max_tokens (reason "length") cut the answer off inside the
 * opening markup of one more call after those that closed (Hermes:
 * "...</tool_call>\n<tool"): the whole text parses, yet it was cut inside
 * a call as surely as one cut inside the call's arguments, which does
 * not parse. */
static bool cut_in_next_call(const struct gen_call *k, const char *t, size_t n,
			     const char *reason)
{
	if (strcmp(reason, "length"))
		return false;
	const size_t done = toolcall_complete_prefix(k->a->tool_format, t, n);
	return done && toolcall_content_prefix(k->a->tool_format, t + done, n - done) < n - done;
}

/* Parses the whole output; streams what is left of the content and the
 * calls. Returns the finish reason: "tool_calls" when there are calls;
 * the one given when a forced answer was cut off inside a call (its
 * arguments, or the markup that opens it), with the calls that closed
 * before it. */
static const char *tools_finish(struct gen_call *k, struct gen_choice *ch, const char *reason)
{
	ing_err err;
	const char *t = ch->text.p ? ch->text.p : "";
	if (toolcall_parse(k->a->tool_format, t, ch->text.len, &ch->calls, &err))
		k->out.oom = ch->text.oom = true;
	if (k->r.tool_close)
		return named_finish(k, ch, t, reason);
	if (k->r.tool_prefix && !ch->text.oom &&
	    (!ch->calls.n || cut_in_next_call(k, t, ch->text.len, reason)) &&
	    required_closed_calls(k, ch, t))
		return reason;
	if (k->r.stream) {
		size_t cl = ch->calls.content_len;
		if (cl > ch->streamed)
			sse_chunk(k, ch, NULL, t + ch->streamed, cl - ch->streamed, lp_take(ch), NULL);
		ch->streamed = cl > ch->streamed ? cl : ch->streamed;
		if (ch->calls.n)
			tools_stream(k, ch);
	}
	return ch->calls.n ? "tool_calls" : reason;
}

/* Sends or keeps released text, with the logprobs of the token that
 * produced it (lp, owned; NULL when none). */
static void choice_emit(struct gen_call *k, struct gen_choice *ch, const char *s, size_t n,
			cJSON *lp)
{
	if (k->r.tools_on) {
		tools_emit(k, ch, s, n, lp);
		return;
	}
	if (k->r.stream) {
		if (n || lp)
			sse_chunk(k, ch, NULL, s, n, lp, NULL);
		return;
	}
	sbuf_put(&ch->text, s, n);
	if (lp && k->r.chat)
		cJSON_AddItemToArray(cJSON_GetObjectItem(ch->lp, "content"), lp);
}

static void choice_finish(struct gen_call *k, struct gen_choice *ch, const char *reason,
			  bool cancel)
{
	ch->done = true;
	if (k->r.tools_on)
		reason = tools_finish(k, ch, reason);
	ch->finish_reason = reason;
	if (cancel) {
		pthread_mutex_lock(&k->mu);
		ch->stop_hit = true;
		bool live = !ch->final;
		pthread_mutex_unlock(&k->mu);
		if (live)
			engine_cancel(k->a->e, ch->id);
	}
	if (k->r.stream) /* with tools, the logprobs still waiting (of text dropped as
			  * whitespace, or of a call's closing markup) */
		sse_chunk(k, ch, cJSON_CreateObject(), NULL, 0, lp_take(ch), reason);
}

static void choice_text(struct gen_call *k, struct gen_choice *ch, const char *s, size_t n,
			cJSON *lp)
{
	sbuf_put(&ch->held, s, n);
	bool hit;
	size_t emit = stop_scan(&k->r, ch->held.p ? ch->held.p : "", ch->held.len, &hit,
				&ch->stop_str);
	choice_emit(k, ch, ch->held.p, emit, lp);
	sbuf_consume(&ch->held, hit || ch->done ? ch->held.len : emit);
	if (hit && !ch->done)
		choice_finish(k, ch, "stop", true);
}

static cJSON *token_logprobs(struct gen_call *k, struct gen_choice *ch, int t)
{
	if (k->r.logprobs < 0)
		return NULL;
	if (k->r.chat)
		return lp_chat_entry(k, ch, t);
	cJSON *o = k->r.stream ? lp_legacy_new() : ch->lp;
	lp_legacy_add(k, ch, t, o);
	return k->r.stream ? o : NULL;
}

/* echo: the prompt's text, decoded by the choice's own stream so that
 * the output continues it as one text would, and with logprobs its
 * tokens' (the first has none; the np its scorer has after it). */
static void choice_echo(struct gen_call *k, struct gen_choice *ch, int np)
{
	const struct token_ids *p = &k->r.prompts[ch->prompt];
	const struct gen_choice *sc = scorer(k, ch);
	struct sbuf text = { 0 };
	ing_err err;
	for (size_t i = 0; i < p->n; i++) {
		const char *s = "";
		size_t n = 0;
		tokenizer_stream_feed(&ch->ts, p->ids[i], &s, &n, &err);
		sbuf_put(&text, s, n);
	}
	cJSON *lp = NULL;
	if (k->r.logprobs >= 0) {
		lp = k->r.stream ? lp_legacy_new() : ch->lp;
		for (size_t i = 0; i < p->n; i++) {
			const struct tokrec *r = i >= 1 && (int)i <= np ? &sc->ptoks[i - 1] : NULL;
			size_t at = r ? (i - 1) * (size_t)k->ptop : 0;
			lp_legacy_put(k, ch, lp, p->ids[i], r, r ? sc->ptop_ids + at : NULL,
				      r ? sc->ptop_lps + at : NULL);
		}
	}
	if (k->r.stream)
		sse_chunk(k, ch, NULL, text.p ? text.p : "", text.len, lp, NULL);
	else
		sbuf_put(&ch->text, text.p, text.len);
	if (text.oom)
		k->out.oom = true;
	sbuf_free(&text);
	ch->echoed = true;
}

static void choice_token(struct gen_call *k, struct gen_choice *ch, int t)
{
	if (ch->done || k->r.echo_only) /* echo_only: the one token made is not shown */
		return;
	ch->n_gen++;
	const struct tokrec *r = &ch->toks[t];
	if (r->is_eos) {
		/* a stop_token_ids id: its text only with include_stop_str_in_output,
		 * as vLLM; EOS never */
		for (int i = 0; i < k->r.n_stop_ids; i++)
			if (k->r.stop_ids[i] == r->token)
				ch->stop_token = r->token;
		if (ch->stop_token < 0 || !k->r.include_stop)
			return;
	}
	const char *s = "";
	size_t n = 0;
	ing_err err;
	tokenizer_stream_feed(&ch->ts, r->token, &s, &n, &err);
	choice_text(k, ch, s, n, token_logprobs(k, ch, t));
}

static const char *finish_name(enum engine_finish f)
{
	return f == ENGINE_FINISH_STOP ? "stop" : f == ENGINE_FINISH_LENGTH ? "length" : "abort";
}

/* A choice failed: the request fails as a whole, with this one error (a
 * 400 or 500 by err_refused; streamed, one error event), so its other
 * choices end here rather than run on to their ends for nothing: those
 * still in the engine are cancelled (their final events still come). */
static void call_fail(struct gen_call *k, const char *errmsg, int err_code)
{
	k->failed = true;
	k->err_code = err_code;
	snprintf(k->errmsg, sizeof k->errmsg, "%s", errmsg);
	if (k->r.stream)
		sse_error(k, errmsg, err_code);
	for (int i = 0; i < k->n_ch; i++) {
		struct gen_choice *o = &k->ch[i];
		if (o->done)
			continue;
		o->done = true;
		pthread_mutex_lock(&k->mu);
		bool live = o->submitted && !o->final;
		pthread_mutex_unlock(&k->mu);
		if (live)
			engine_cancel(k->a->e, o->id);
	}
}

static void choice_final(struct gen_call *k, struct gen_choice *ch, bool failed,
			 enum engine_finish finish, const char *errmsg, int err_code)
{
	if (failed) {
		call_fail(k, errmsg, err_code);
		return;
	}
	const char *s;
	size_t n;
	tokenizer_stream_flush(&ch->ts, &s, &n);
	choice_text(k, ch, s, n, NULL);
	if (ch->done)
		return;
	choice_emit(k, ch, ch->held.p, ch->held.len, NULL);
	sbuf_consume(&ch->held, ch->held.len);
	if (!ch->done)
		choice_finish(k, ch, finish_name(finish), false);
}

/* ---- the connection side's loop ---- */

/* Whether ch may echo its prompt: its scorer has every score in (they
 * come before its first token), or has ended. Under k->mu. */
static bool echo_ready(const struct gen_call *k, const struct gen_choice *ch)
{
	const struct gen_choice *sc = scorer(k, ch);
	return !k->score || sc->n_ptoks >= (int)k->r.prompts[ch->prompt].n - 1 ||
	       sc->n_toks > 0 || sc->final;
}

static bool call_has_news(const struct gen_call *k)
{
	for (int i = 0; i < k->n_ch; i++) {
		const struct gen_choice *ch = &k->ch[i];
		if (ch->done)
			continue;
		if (k->r.echo && !ch->echoed ? echo_ready(k, ch) || ch->failed
					     : ch->n_toks > ch->cursor || ch->final)
			return true;
	}
	return false;
}

static bool call_all_done(const struct gen_call *k)
{
	for (int i = 0; i < k->n_ch; i++)
		if (!k->ch[i].done)
			return false;
	return true;
}

static void wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(cv, mu, &ts);
}

/* Waits up to wait_ms for events, then takes every new one. */
static void call_pump(struct gen_call *k, int wait_ms)
{
	pthread_mutex_lock(&k->mu);
	if (!call_has_news(k) && wait_ms > 0)
		wait_until(&k->cv, &k->mu, wait_ms);
	for (int i = 0; i < k->n_ch; i++) {
		struct gen_choice *ch = &k->ch[i];
		if (ch->done) /* done is the connection side's: nothing more of it goes out */
			continue;
		int upto = ch->n_toks, np = scorer(k, ch)->n_ptoks;
		bool final = ch->final, failed = ch->failed;
		bool echo_due = k->r.echo && !ch->echoed && !failed;
		bool echo_now = echo_due && echo_ready(k, ch);
		enum engine_finish finish = ch->finish;
		char errmsg[sizeof ch->errmsg];
		memcpy(errmsg, ch->errmsg, sizeof errmsg);
		int err_code = ch->err_code;
		pthread_mutex_unlock(&k->mu);
		/* entries below upto (np) are never written again: read unlocked.
		 * Nothing of the output goes before the echo. */
		if (echo_now) {
			choice_echo(k, ch, np);
		} else if (echo_due) {
			pthread_mutex_lock(&k->mu);
			continue;
		}
		for (; ch->cursor < upto; ch->cursor++)
			choice_token(k, ch, ch->cursor);
		if (final && !ch->done)
			choice_final(k, ch, failed, finish, errmsg, err_code);
		pthread_mutex_lock(&k->mu);
	}
	pthread_mutex_unlock(&k->mu);
	if (k->r.stream && !k->ended && call_all_done(k))
		sse_end(k);
}

/* ---- streams ---- */

static long stream_next(void *ud, char *buf, size_t cap, int wait_ms)
{
	struct gen_call *k = ud;
	if (k->out.len == 0 && !k->ended)
		call_pump(k, wait_ms);
	if (k->out.oom)
		return SERVER_STREAM_ERROR;
	if (k->out.len == 0)
		return k->ended ? SERVER_STREAM_END : 0;
	size_t n = k->out.len < cap ? k->out.len : cap;
	memcpy(buf, k->out.p, n);
	sbuf_consume(&k->out, n);
	return (long)n;
}

static void stream_close(void *ud)
{
	call_release(ud);
}

/* ---- non-streamed answers ---- */

static cJSON *choice_json(const struct gen_call *k, const struct gen_choice *ch)
{
	cJSON *c = cJSON_CreateObject();
	cJSON_AddNumberToObject(c, "index", ch->index);
	size_t len = ch->calls.n ? ch->calls.content_len : ch->text.len;
	cJSON *text = ch->calls.n && !len ? cJSON_CreateNull()
					  : api_json_text(ch->text.p ? ch->text.p : "", len);
	if (k->r.chat) {
		cJSON *m = cJSON_AddObjectToObject(c, "message");
		cJSON_AddStringToObject(m, "role", "assistant");
		cJSON_AddItemToObject(m, "content", text);
		cJSON_AddNullToObject(m, "refusal");
		if (ch->calls.n)
			cJSON_AddItemToObject(m, "tool_calls",
					      api_tools_json(k->a, &ch->calls, k->r.parallel_tool_calls));
	} else {
		cJSON_AddItemToObject(c, "text", text);
	}
	cJSON_AddItemToObject(c, "logprobs",
			      ch->lp ? cJSON_Duplicate(ch->lp, true) : cJSON_CreateNull());
	cJSON_AddStringToObject(c, "finish_reason", ch->finish_reason ? ch->finish_reason : "abort");
	cJSON_AddItemToObject(c, "stop_reason", stop_reason_json(k, ch));
	if (!k->r.chat && k->r.prompt_logprobs >= 0)
		cJSON_AddItemToObject(c, "prompt_logprobs", lp_prompt_json(k, ch));
	if (k->r.return_token_ids) {
		if (!k->r.chat)
			cJSON_AddItemToObject(c, "prompt_token_ids",
					      api_ids_json(&k->r.prompts[ch->prompt]));
		cJSON_AddItemToObject(c, "token_ids", gen_ids_json(ch, 0, ch->n_gen));
	}
	return c;
}

static void answer_whole(struct gen_call *k, struct server_call *c)
{
	while (!call_all_done(k)) {
		call_pump(k, GEN_WAIT_MS);
		if (!call_all_done(k) && server_call_client_gone(c)) {
			struct api_error e;
			api_fail(&e, 499, NULL, NULL, "client closed the connection");
			api_respond_error(c, &e);
			return;
		}
	}
	if (k->failed) {
		struct api_error e;
		bool refused = err_refused(k->err_code);
		api_fail(&e, refused ? 400 : 500, NULL, NULL, "%s", k->errmsg);
		e.type = refused ? "invalid_request_error" : "server_error";
		api_respond_error(c, &e);
		return;
	}
	cJSON *o = response_new(k, k->r.chat ? "chat.completion" : "text_completion");
	cJSON *arr = cJSON_AddArrayToObject(o, "choices");
	for (int i = 0; i < k->n_ch; i++)
		cJSON_AddItemToArray(arr, choice_json(k, &k->ch[i]));
	/* chat has one prompt: vLLM puts its logprobs beside the choices */
	if (k->r.chat && k->r.prompt_logprobs >= 0)
		cJSON_AddItemToObject(o, "prompt_logprobs", lp_prompt_json(k, &k->ch[0]));
	if (k->r.chat && k->r.return_token_ids)
		cJSON_AddItemToObject(o, "prompt_token_ids", api_ids_json(&k->r.prompts[0]));
	cJSON_AddItemToObject(o, "usage", usage_new(k));
	if (k->r.responses) {
		o = api_responses_whole(o, k->r.responses);
		api_responses_keep(k->a, o, k->r.responses);
	}
	api_respond_json(c, 200, o);
}

/* ---- setup and submit ---- */

static int choice_init(struct gen_call *k, struct gen_choice *ch, int64_t max_tokens,
		       struct api_error *e)
{
	ch->k = k;
	ch->cap = (int)max_tokens + 1;
	ch->toks = ing_malloc_array((size_t)ch->cap, sizeof *ch->toks);
	if (k->top > 0) {
		ch->top_ids = ing_malloc_array((size_t)ch->cap * k->top, sizeof *ch->top_ids);
		ch->top_lps = ing_malloc_array((size_t)ch->cap * k->top, sizeof *ch->top_lps);
	}
	size_t np = k->r.prompts[ch->prompt].n;
	if (k->score && np > 1 && scorer(k, ch) == ch) {
		ch->ptoks = ing_malloc_array(np - 1, sizeof *ch->ptoks);
		ch->ptop_ids = ing_malloc_array((np - 1) * (size_t)k->ptop + 1, sizeof *ch->ptop_ids);
		ch->ptop_lps = ing_malloc_array((np - 1) * (size_t)k->ptop + 1, sizeof *ch->ptop_lps);
		if (!ch->ptoks || !ch->ptop_ids || !ch->ptop_lps)
			return api_fail(e, 500, NULL, NULL, "out of memory");
	}
	ing_err err;
	if (!ch->toks || (k->top > 0 && (!ch->top_ids || !ch->top_lps)) ||
	    tokenizer_stream_init(&ch->ts, k->a->tk,
				  k->r.tools_on || !k->r.skip_special ? TOKENIZER_RENDER_SPECIAL : 0,
				  &err))
		return api_fail(e, 500, NULL, NULL, "out of memory");
	/* chat echo: the prefilled answer leads the text (a stream sends it
	 * in its own chunk, api_generate) */
	if (k->r.echo_text && !k->r.stream && sbuf_puts(&ch->text, k->r.echo_text))
		return api_fail(e, 500, NULL, NULL, "out of memory");
	/* tool-call markup may be special tokens; a forced call start is output */
	if (k->r.tools_on && k->r.tool_prefix && sbuf_puts(&ch->text, k->r.tool_prefix))
		return api_fail(e, 500, NULL, NULL, "out of memory");
	ch->stop_str = ch->stop_token = -1;
	if (!k->r.stream && k->r.logprobs >= 0) {
		ch->lp = k->r.chat ? cJSON_CreateObject() : lp_legacy_new();
		if (k->r.chat)
			cJSON_AddArrayToObject(ch->lp, "content");
	}
	return 0;
}

/* max_tokens for prompt p, or -1 (error set) when it cannot fit. */
static int64_t budget(const struct gen_call *k, int p, struct api_error *e)
{
	int64_t np = (int64_t)k->r.prompts[p].n, cap = k->a->max_model_len;
	int64_t mt = k->r.max_tokens ? k->r.max_tokens : cap - np;
	const char *what = k->r.chat ? "messages" : "prompt";
	if (np < 1)
		return api_fail(e, 400, what, "invalid_value", "the prompt is empty");
	if (np + mt > cap || mt < 1)
		return api_fail(e, 400, what, "context_length_exceeded",
				"This model's maximum context length is %lld tokens. However, you "
				"requested %lld tokens (%lld in the %s, %lld in the completion). "
				"Please reduce the length of the %s or completion.",
				(long long)cap, (long long)(np + (mt > 0 ? mt : 1)), (long long)np,
				what, (long long)(mt > 0 ? mt : 1), what);
	return mt;
}

static int call_setup(struct gen_call *k, struct api_error *e)
{
	k->n_ch = k->r.n_prompts * k->r.n;
	if (k->n_ch > API_MAX_PROMPTS)
		return api_fail(e, 400, "n", "invalid_value",
				"n times the number of prompts must be at most %d", API_MAX_PROMPTS);
	if (!(k->ch = ing_calloc((size_t)k->n_ch, sizeof *k->ch)))
		return api_fail(e, 500, NULL, NULL, "out of memory");
	k->top = k->r.logprobs > 0 ? k->r.logprobs : 0;
	/* echo with logprobs scores the prompt with the output's alternatives */
	int echo_top = k->r.echo && k->r.logprobs >= 0 ? k->r.logprobs : -1;
	k->score = echo_top >= 0 || k->r.prompt_logprobs >= 0;
	k->ptop = echo_top > k->r.prompt_logprobs ? echo_top : k->r.prompt_logprobs;
	k->ptop = k->ptop > 0 ? k->ptop : 0;
	for (int p = 0; p < k->r.n_prompts; p++) {
		int64_t mt = budget(k, p, e);
		if (mt < 0)
			return -1;
		k->prompt_tokens += (int64_t)k->r.prompts[p].n;
		for (int j = 0; j < k->r.n; j++) {
			struct gen_choice *ch = &k->ch[p * k->r.n + j];
			ch->index = p * k->r.n + j;
			ch->prompt = p;
			if (choice_init(k, ch, mt, e))
				return -1;
		}
	}
	return 0;
}

static int submit_error(int rc, const ing_err *err, struct api_error *e)
{
	if (rc == ING_ERR_BUSY) {
		api_fail(e, 429, NULL, "rate_limit_exceeded", "%s", err->msg);
		e->type = "rate_limit_error";
		return -1;
	}
	if (rc == ING_ERR_RANGE || rc == ING_ERR_INVALID || rc == ING_ERR_UNSUPPORTED)
		return api_fail(e, 400, NULL, "invalid_value", "%s", err->msg);
	return api_fail(e, 500, NULL, NULL, "%s", err->msg);
}

static_assert(API_MAX_STOP_IDS <= ENGINE_MAX_STOP_IDS, "stop_token_ids fit the engine's");

static int call_submit(struct gen_call *k, struct api_error *e)
{
	/* more choices than running and waiting sequences together would be
	 * a 429 on an idle server too: no retry can help */
	const struct engine_config *ec = engine_config_of(k->a->e);
	if (k->n_ch > ec->max_num_seqs + ec->max_waiting)
		return api_fail(e, 400, "n", "invalid_value",
				"%d choices (n x prompts) are more than this server takes at once: "
				"%d (--max-num-seqs %d + --max-waiting %d)",
				k->n_ch, ec->max_num_seqs + ec->max_waiting, ec->max_num_seqs,
				ec->max_waiting);
	for (int i = 0; i < k->n_ch; i++) {
		struct gen_choice *ch = &k->ch[i];
		const struct token_ids *p = &k->r.prompts[ch->prompt];
		int j = i % k->r.n;
		struct engine_params ep = {
			.prompt = p->ids, .n_prompt = (int64_t)p->n, .max_tokens = ch->cap - 1,
			.sample = k->r.sp, .ignore_eos = k->r.ignore_eos, .no_spec = k->r.no_spec,
			.top_logprobs = k->r.logprobs, .bias_ids = k->r.bias_ids,
			.bias_values = k->r.bias_vals, .n_bias = k->r.n_bias,
			.grammar = k->r.grammar, .stop_ids = k->r.stop_ids,
			.n_stop_ids = k->r.n_stop_ids, .min_tokens = k->r.min_tokens,
			.score_prompt = k->score && j == 0, .prompt_top = k->ptop,
			.allowed_ids = k->r.allowed_ids, .n_allowed = k->r.n_allowed,
			.bad_words = k->r.bad_words, .bad_word_len = k->r.bad_word_len,
			.n_bad_words = k->r.n_bad_words, .cache_salt = k->r.cache_salt };
		uint64_t seq = k->r.sp.seed + (uint64_t)j; /* choice j > 0: its own seed */
		ep.sample.seed = j == 0 ? k->r.sp.seed : hash_splitmix64(&seq);
		ing_err err = { 0 };
		if (k->a->tracer)
			ch->t_submit_ns = trace_now_ns();
		pthread_mutex_lock(&k->mu);
		k->refs++; /* before the first event can arrive */
		pthread_mutex_unlock(&k->mu);
		int rc = engine_submit(k->a->e, &ep, on_event, ch, &ch->id, &err);
		if (rc) {
			pthread_mutex_lock(&k->mu);
			k->refs--;
			pthread_mutex_unlock(&k->mu);
			return submit_error(rc, &err, e);
		}
		ch->submitted = true;
	}
	return 0;
}

static struct gen_call *call_new(struct api *a, struct gen_request *r)
{
	struct gen_call *k = ing_calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->a = a;
	k->r = *r;
	*r = (struct gen_request){ 0 };
	k->refs = 1;
	pthread_mutex_init(&k->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cv, &ca);
	pthread_condattr_destroy(&ca);
	const char *prefix = k->r.chat ? "chatcmpl-" : "cmpl-";
	if (k->r.request_id[0])
		snprintf(k->id, sizeof k->id, "%s%s", prefix, k->r.request_id);
	else
		snprintf(k->id, sizeof k->id, "%s%016" PRIx64, prefix, api_unique(a));
	k->created = (long long)time(NULL);
	if (k->r.responses && k->r.stream &&
	    !(k->resp = api_resp_stream_new(k->r.responses, k->id, (double)k->created,
					    a->model_name))) {
		call_free(k);
		return NULL;
	}
	return k;
}

void api_generate(struct api *a, struct server_call *c, struct gen_request *r)
{
	struct api_error e;
	struct gen_call *k = call_new(a, r);
	if (!k) {
		gen_request_free(r);
		api_fail(&e, 500, NULL, NULL, "out of memory");
		api_respond_error(c, &e);
		return;
	}
	char note[16 + API_REQUEST_ID_MAX]; /* the id the client sees, for the access log */
	if (k->r.responses)
		api_responses_id(note, sizeof note, "resp_", k->id);
	server_call_note(c, k->r.responses ? note : k->id);
	if (call_setup(k, &e) || call_submit(k, &e)) {
		if (e.status == 429)
			server_call_header_add(c, "Retry-After", "1");
		if (k->r.responses) /* the fields as the Responses API names them */
			api_responses_error_param(&e);
		api_respond_error(c, &e);
		call_release(k);
		return;
	}
	k->submitted = true;
	live_add(a, k);
	if (!k->r.stream) {
		answer_whole(k, c);
		call_release(k);
		return;
	}
	if (k->r.chat)
		sse_role(k);
	for (int i = 0; k->r.echo_text && i < k->n_ch; i++)
		sse_chunk(k, &k->ch[i], NULL, k->r.echo_text, strlen(k->r.echo_text), NULL, NULL);
	struct server_stream src = { .next = stream_next, .close = stream_close, .ud = k };
	server_call_stream(c, 200, "text/event-stream", &src);
}
