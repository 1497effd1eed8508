/* metrics.h — serving metrics in the Prometheus text format.
 *
 * Counters and gauges come from the engine (engine_stats_get) at scrape
 * time, and so does the histogram of tokens per step; per-request
 * histograms (latencies, token counts, parameters) and finished-request
 * counts are recorded here by the API layer as requests progress. Names
 * and buckets follow vLLM (vllm:time_to_first_token_seconds, ...) so
 * dashboards built for it work unchanged, plus a few ingot_* counters
 * about the step loop.
 *
 * Thread-safe: observations may come from any thread (including the
 * engine thread's event callback: each is one short critical section). */
#ifndef INGOT_METRICS_H
#define INGOT_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct engine_stats;
struct metrics;

enum metrics_hist {
	METRICS_TTFT,      /* arrival -> first generated token */
	METRICS_ITL,       /* between consecutive generated tokens */
	METRICS_E2E,       /* arrival -> final event */
	METRICS_QUEUE,     /* arrival -> first scheduled */
	METRICS_TPOT,      /* a request's decode time / (its tokens - 1) */
	METRICS_PREFILL,   /* first scheduled -> first token */
	METRICS_DECODE,    /* first token -> final event */
	METRICS_INFERENCE, /* first scheduled -> final event */
	/* token counts (bounds 1, 2, 5, 10, ... up to max_model_len) */
	METRICS_PROMPT_TOKENS,
	METRICS_GEN_TOKENS,
	METRICS_MAX_GEN_TOKENS, /* the most any of a prompt's n choices generated */
	METRICS_PARAM_MAX_TOKENS,
	METRICS_PREFILL_KV_TOKENS, /* prompt tokens computed (not from the prefix cache) */
	METRICS_PARAM_N,
	METRICS_N_HIST,
};

/* Why a request ended, as vLLM labels request_success_total. */
enum metrics_finish { METRICS_FINISH_STOP, METRICS_FINISH_LENGTH, METRICS_FINISH_ABORT,
		      METRICS_N_FINISH };

/* model_name is copied (it becomes the model_name label); max_model_len
 * bounds the token-count histograms. *out is freed with metrics_free.
 * ING_ERR_NOMEM on failure. */
int metrics_create(const char *model_name, int64_t max_model_len, struct metrics **out,
		   ing_err *err);

/* Accepts NULL. */
void metrics_free(struct metrics *m);

/* Records one observation (seconds, or a count); negative or non-finite
 * values are ignored. */
void metrics_observe(struct metrics *m, enum metrics_hist h, double v);

/* Adds n prompt tokens served from the prefix cache
 * (vllm:prompt_tokens_cached_total). */
void metrics_count_cached(struct metrics *m, int64_t n);

/* Counts one finished request. */
void metrics_finish_count(struct metrics *m, enum metrics_finish why);

/* The Responses API's store as it stands (count, bytes of text held),
 * for the ingot_responses_stored and ingot_responses_store_bytes gauges;
 * 0 and 0 until set (no store). */
void metrics_set_responses(struct metrics *m, size_t stored, size_t bytes);

/* Renders every metric, taking gauges and engine counters from st. On
 * success *out is a NUL-terminated string of *len bytes the caller frees
 * with ing_free(). ING_ERR_NOMEM on failure. */
int metrics_render(struct metrics *m, const struct engine_stats *st, char **out, size_t *len,
		   ing_err *err);

#endif
