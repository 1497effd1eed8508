/* api.h — the OpenAI-compatible HTTP API over the serving engine.
 *
 * Endpoints: POST /v1/chat/completions, POST /v1/completions,
 * POST /v1/responses (and, with a store, GET and DELETE
 * /v1/responses/{id}, GET /v1/responses/{id}/input_items), GET /v1/models, POST /tokenize, POST /detokenize (vLLM bodies),
 * GET /health, GET /metrics (Prometheus). Requests are parsed and checked
 * on the HTTP connection's thread, prompts rendered (chat template) and
 * tokenized there, then submitted to the engine; the engine's events come
 * back through a per-request queue that the connection's thread drains
 * (detokenizing, matching stop strings, writing JSON or SSE).
 *
 * api_handle() is a server_handler_fn: pass the api as its ud. */
#ifndef INGOT_API_H
#define INGOT_API_H

#include "err.h"

struct api;
struct engine;
struct metrics;
struct server_call;

/* Builds the API over a running engine (borrowed; it must outlive the
 * api). model_name is what /v1/models lists and responses carry; requests
 * naming another model get 404. Loads chat_template (Jinja source, copied;
 * NULL: the model's tokenizer.chat_template or, when it has none, a
 * built-in one); *note (may be NULL) gets a static description of which,
 * for the log. *out is freed with api_free. ING_ERR_FORMAT when the
 * template does not parse, ING_ERR_NOMEM. */
int api_create(struct engine *e, struct metrics *m, const char *model_name,
	       const char *chat_template, struct api **out, const char **note, ing_err *err);

/* Turns on OpenTelemetry spans for generation requests, exported through
 * t (borrowed; it must outlive the api). Call before serving. */
struct trace_exporter;
void api_set_tracer(struct api *a, struct trace_exporter *t);

/* Keeps Responses API answers (request `store`, true by default) in
 * memory, up to max_bytes, least recently used dropped first, so that
 * previous_response_id can continue them and GET/DELETE
 * /v1/responses/{id} reach them. Without it (or with 0) nothing is stored
 * and previous_response_id is refused. Call before serving. ING_ERR_NOMEM. */
int api_set_responses_store(struct api *a, size_t max_bytes, ing_err *err);

/* Call only once no request is in flight. Accepts NULL. */
void api_free(struct api *a);

/* Serves one request (runs on its connection's thread; may block until
 * the generation is done). */
void api_handle(void *api, struct server_call *c);

/* Cancels every request in flight (shutdown when draining takes too
 * long): their handlers return promptly. */
void api_cancel_all(struct api *a);

#endif
