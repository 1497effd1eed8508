/* api_int.h — what the api_*.c files share (not a public interface).
 *
 *   api.c         routing, errors, small endpoints (models, tokenize, ...)
 *   api_params.c  reading and checking request fields into gen_request
 *   api_prompt.c  chat template rendering and safe tokenization
 *   api_format.c  response_format -> grammar, with a cache of compiled
 *                 schemas
 *   api_tools.c   tools, tool_choice, parallel_tool_calls; tool calls in
 *                 answers and stream deltas
 *   api_gen.c     one generation: engine submit, event queue, stop
 *                 strings, responses and SSE streams
 *   api_responses.c  the Responses API as a translation of chat requests,
 *                 answers and streams */
#ifndef INGOT_API_INT_H
#define INGOT_API_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "api.h"
#include "api_store.h"
#include "logit_mask.h"
#include "sample.h"
#include "tokenizer.h"
#include "toolcall.h"
#include "trace.h"

struct engine;
struct template;
struct gen_call;
struct grammar;

#define API_MAX_N 128          /* choices per request */
#define API_MAX_PROMPTS 256    /* engine requests per HTTP request */
#define API_MAX_STOP 16
#define API_MAX_STOP_IDS 64 /* ENGINE_MAX_STOP_IDS */
#define API_MAX_STOP_LEN 256
#define API_MAX_BIAS 1024
#define API_REQUEST_ID_MAX 64  /* X-Request-Id / request_id characters */
#define API_GRAMMAR_CACHE 32     /* compiled response_format grammars kept */

struct api_gcache_entry {
	char *key;            /* "json_object" or "schema:" + compact schema JSON */
	struct grammar *g;    /* one reference held by the cache */
	uint64_t used;        /* LRU clock; 0: empty */
};

struct api {
	struct engine *e;
	const struct tokenizer *tk;
	struct metrics *metrics;
	char *model_name;
	int64_t max_model_len;
	int32_t n_vocab;
	struct template *tpl;        /* chat template (the model's or built-in) */
	const char *bos_text, *eos_text;
	enum toolcall_format tool_format; /* the template's tool-call markup */
	struct trace_exporter *tracer;    /* NULL: tracing off */
	struct resp_store *store;    /* stored Responses answers; NULL: off */
	pthread_mutex_t mu;          /* guards live */
	struct gen_call *live;       /* generations in flight (cancel_all) */
	atomic_uint_fast64_t counter;
	uint64_t salt;               /* random per process: ids and default seeds */
	pthread_mutex_t gmu;         /* guards gcache, gclock */
	struct api_gcache_entry gcache[API_GRAMMAR_CACHE];
	uint64_t gclock;
};

/* An error answer in OpenAI's shape. */
struct api_error {
	int status;
	const char *type;            /* "invalid_request_error", ... */
	const char *code;            /* NULL: null */
	char param[64];              /* "": null */
	char message[512];
};

/* Fills e and returns -1, so checks read `return api_fail(...)`. */
int api_fail(struct api_error *e, int status, const char *param, const char *code,
	     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void api_respond_error(struct server_call *c, const struct api_error *e);
/* Prints obj (which is deleted) as the response body. */
void api_respond_json(struct server_call *c, int status, cJSON *obj);

/* A fresh 64-bit value, different on every call (ids, default seeds). */
uint64_t api_unique(struct api *a);

/* ---- request fields (api_params.c) ---- */

/* Optional typed fields: absent or JSON null leave *out unchanged and
 * return 0; a wrong type or a value outside [lo, hi] fails naming key. */
int api_get_bool(const cJSON *o, const char *key, bool *out, struct api_error *e);
int api_get_int(const cJSON *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
		struct api_error *e);
int api_get_num(const cJSON *o, const char *key, double lo, double hi, double *out,
		struct api_error *e);
/* Present and not null. */
const cJSON *api_get(const cJSON *o, const char *key);
/* Element v of an array of token ids (field key) into *out: an integer in
 * the vocabulary, else a 400 naming key. */
int api_token_id(const struct api *a, const cJSON *v, const char *key, int32_t *out,
		 struct api_error *e);

/* Parsed generation parameters. */
struct gen_request {
	bool chat;
	struct token_ids *prompts;   /* [n_prompts] */
	int n_prompts;
	int n;                       /* choices per prompt */
	int64_t max_tokens;          /* 0: up to max_model_len */
	struct sample_params sp;
	bool ignore_eos;
	int32_t stop_ids[API_MAX_STOP_IDS]; /* stop_token_ids (vLLM) */
	int n_stop_ids;
	int64_t min_tokens;          /* (vLLM) 0: none */
	int logprobs;                /* -1 none, else alternatives per token */
	bool echo;                   /* completions: each choice begins with its prompt's text
				      * (and, with logprobs, its tokens' logprobs) */
	bool echo_only;              /* echo with max_tokens 0: the prompt, nothing generated
				      * (one token is, and dropped, as vLLM does) */
	int prompt_logprobs;         /* vLLM: -1 none, else alternatives per prompt token */
	char *echo_text;             /* chat echo (vLLM): the final assistant message's
				      * content, put before each answer; NULL: none */
	char *stop[API_MAX_STOP];
	int n_stop;
	bool include_stop;           /* include_stop_str_in_output (vLLM) */
	bool skip_special;           /* skip_special_tokens (vLLM; default true): control
				      * tokens are not rendered in the text */
	bool return_token_ids;       /* vLLM: the prompt's and the output's token ids in
				      * the answer (token_ids, prompt_token_ids) */
	bool tokens_as_ids;          /* vLLM's return_tokens_as_token_ids: logprobs name
				      * tokens "token_id:<id>" instead of their text */
	uint64_t cache_salt;         /* vLLM's cache_salt, hashed (engine_params); 0: none */
	int32_t *bias_ids;
	float *bias_vals;
	int n_bias;
	int32_t *allowed_ids;        /* allowed_token_ids (vLLM); n_allowed 0: any */
	int64_t n_allowed;
	int32_t *bad_words;          /* bad_words (vLLM) as token sequences, back to back */
	int32_t bad_word_len[LOGIT_MASK_MAX_WORDS];
	int n_bad_words;
	bool stream, include_usage;
	bool usage_each;             /* vLLM's continuous_usage_stats: usage on every chunk */
	bool no_spec;                /* "speculative": {"method": "none"} */
	struct grammar *grammar;     /* response_format constraint (a reference), or NULL */
	/* function calling (chat) */
	bool tools_on;               /* tools rendered, calls parsed from the output */
	bool parallel_tool_calls;    /* false: only the first call is kept */
	char *tool_prefix;           /* forced start of a call the prompt ends with, or NULL */
	char *tool_name;             /* the forced call's function, when known, or NULL */
	char *tool_close;            /* ... and the markup after its arguments */
	cJSON *responses;            /* POST /v1/responses: its body (owned), the answer
				      * translated back into its form; NULL: chat or
				      * completions */
	/* the caller's id for the request (X-Request-Id, or vLLM's request_id
	 * field): the answer's id is "chatcmpl-" (...) followed by it; "":
	 * a random one */
	char request_id[API_REQUEST_ID_MAX + 1];
	/* tracing (a->tracer set) */
	uint64_t t_start_ns;         /* request start, Unix ns */
	struct trace_parent parent;  /* from traceparent, when has_parent */
	bool has_parent;
};

/* True when s can be a request id: 1 .. API_REQUEST_ID_MAX printable
 * ASCII characters, no space, quote or backslash (it goes into ids,
 * headers and log lines as it is). */
bool api_request_id_ok(const char *s);

/* The path the router matches for path: without one trailing slash
 * ("/metrics/" is "/metrics"), copied into buf when trimmed; path itself
 * otherwise (also when it is API_PATH_MAX bytes or longer). Anything that
 * intercepts routes in front of api_handle must match this, not the raw
 * path. */
#define API_PATH_MAX 1024
const char *api_route_path(const char *path, char buf[API_PATH_MAX]);

/* Reads everything but the prompt from body into r (zeroed first). */
int gen_request_parse(struct api *a, const cJSON *body, bool chat, struct gen_request *r,
		      struct api_error *e);
void gen_request_free(struct gen_request *r);

/* ---- the Responses API (api_responses.c) ---- */

struct resp_stream;

/* body of POST /v1/responses -> *chat, a chat completions body asking for
 * the same generation (the caller deletes it). A 400 naming the Responses
 * field for what cannot be translated or is not supported. */
int api_responses_chat_body(const cJSON *body, struct resp_store *store, cJSON **chat,
			    struct api_error *e);
/* Keeps a finished response object (borrowed) for req (the Responses body
 * as gen_request.responses holds it) when req's store is true. */
void api_responses_keep(struct api *a, const cJSON *response, const cJSON *req);
/* Renames the chat field an error from the chat path names to the
 * Responses field it came from (messages -> input, ...). */
void api_responses_error_param(struct api_error *e);
/* A whole chat completion (deleted) -> the response object for req. */
cJSON *api_responses_whole(cJSON *chat, const cJSON *req);

/* The response's own ids from the chat completion's: "chatcmpl-X" ->
 * "resp_X", "msg_X" (prefix "resp_", "msg_"); a tool call "call_Y" ->
 * item "fc_Y". */
void api_responses_id(char *out, size_t cap, const char *prefix, const char *chat_id);

/* A stream's translation state: chat_id and created as the chat chunks
 * carry them. NULL when out of memory. */
struct resp_stream *api_resp_stream_new(const cJSON *req, const char *chat_id, double created,
					const char *model);
void api_resp_stream_free(struct resp_stream *s);
/* Appends to out the events chat chunk `chunk` (deleted; NULL: out of
 * memory) makes; the first one also opens the response. */
void api_resp_stream_chunk(struct resp_stream *s, cJSON *chunk, struct sbuf *out);
/* The chat stream ended (after its usage chunk): closes the open items
 * and appends response.completed (or response.incomplete). Returns that
 * final response object (the caller deletes it; NULL out of memory). */
cJSON *api_resp_stream_end(struct resp_stream *s, struct sbuf *out);
/* The generation failed: an error event and response.failed, both with
 * code (e.g. "server_error"). */
void api_resp_stream_error(struct resp_stream *s, const char *msg, const char *code,
			   struct sbuf *out);

/* ---- response_format (api_format.c) ---- */

/* body.response_format (or ingot's body.structured: regex / GBNF) -> *out:
 * NULL for none/text, else a new reference to the (cached) grammar. 400
 * naming the unsupported schema construct or the grammar error. */
int api_parse_response_format(struct api *a, const cJSON *body, struct grammar **out,
			      struct api_error *e);
/* Drops the cached grammars (api_free). */
void api_gcache_free(struct api *a);
/* A new reference to the grammar cached under key, or NULL. */
struct grammar *api_gcache_get(struct api *a, const char *key);
/* Caches g under key (takes its own reference), evicting the least
 * recently used entry; allocation failure just skips caching. Also used
 * for tool-call grammars (api_tools.c, keys "tools:..."). */
void api_gcache_put(struct api *a, const char *key, struct grammar *g);

/* The pure part of a request, without the engine (api.c; fuzzed by
 * tests/harness_request.c). api_body_parse: body[0..len) as a JSON object
 * whose "model", if any, is ours; the caller cJSON_Deletes it; NULL with e
 * filled otherwise. api_gen_request_read: a chat (chat) or completions
 * body into r: fields, then prompt tokens (c, for tracing, may be NULL);
 * on failure r is freed and e
 * says why (4xx for the client's mistakes, 500 out of memory). */
cJSON *api_body_parse(const struct api *a, const char *s, size_t len, struct api_error *e);
int api_gen_request_read(struct api *a, const cJSON *body, bool chat, struct server_call *c,
			 struct gen_request *r, struct api_error *e);

/* ---- prompts (api_prompt.c) ---- */

/* Renders body.messages (and body.tools when with_tools) with the chat
 * template and tokenizes the result so that only the template's own text
 * can produce control tokens. body.add_generation_prompt (default true)
 * and vLLM's continue_final_message (the rendering ends with the last
 * message's content, for the model to go on with it; not with an explicit
 * add_generation_prompt: true) choose how it ends. */
int api_prompt_chat(struct api *a, const cJSON *body, bool with_tools, struct token_ids *out,
		    struct api_error *e);

/* vLLM's chat echo: when body.echo is true and the last message is the
 * assistant's (a prefilled answer), its content into *out (the caller
 * frees it), else NULL. After api_prompt_chat (the messages are valid). */
int api_prompt_chat_echo(const cJSON *body, char **out, struct api_error *e);

/* body.prompt: a string, an array of strings, an array of token ids or an
 * array of such arrays. Appends one token_ids per prompt to r. */
int api_prompt_completion(struct api *a, const cJSON *prompt, bool add_special,
			  struct gen_request *r, struct api_error *e);

/* Loads a->tpl from given (the Jinja source; NULL: none), else from g's
 * tokenizer.chat_template or, without one, a built-in turn format chosen
 * by a->tk's control tokens; sets bos_text and eos_text. *note gets a
 * static description of the choice. */
struct gguf;
int api_template_load(struct api *a, const struct gguf *g, const char *given, const char **note,
		      ing_err *err);

/* ---- function calling (api_tools.c) ---- */

/* Reads tools, tool_choice and parallel_tool_calls into r (after
 * gen_request_parse): checks their shape (400 naming the field), decides
 * whether calls are parsed and, for tool_choice "required" or a named
 * function, the forced call start (r->tool_prefix), the stop string that
 * ends the call and the grammar of the rest of the call (r->grammar,
 * replacing a response_format one). */
int api_tools_parse(struct api *a, const cJSON *body, struct gen_request *r,
		    struct api_error *e);

/* Whether body's tools reach the template (present, tool_choice not
 * "none"). */
bool api_tools_rendered(const cJSON *body);

/* Checks messages[i].tool_calls of an assistant message. */
int api_tools_check_calls(const cJSON *calls, int i, struct api_error *e);

/* A fresh tool-call id ("call_" + 24 letters and digits; 9 letters and
 * digits for Mistral's markup). */
void api_tools_call_id(struct api *a, char out[32]);

/* calls as OpenAI's message.tool_calls array (fresh ids); the first only
 * unless parallel. NULL when out of memory. */
cJSON *api_tools_json(struct api *a, const struct toolcall_list *calls, bool parallel);

/* Tracing: notes the request's start and its traceparent in r (after
 * gen_request_parse). Does nothing when tracing is off. */
void api_trace_begin(struct api *a, struct server_call *c, struct gen_request *r);

/* ---- generation (api_gen.c) ---- */

/* Submits r (owned from here on) and answers c: a JSON response, an SSE
 * stream, or an error. */
void api_generate(struct api *a, struct server_call *c, struct gen_request *r);

/* Valid UTF-8 copy of s[0..n) with bad bytes as U+FFFD, into a cJSON
 * string. */
cJSON *api_json_text(const char *s, size_t n);

/* t's ids as a JSON array (api.c; /tokenize, prompt_token_ids). */
cJSON *api_ids_json(const struct token_ids *t);

#endif
