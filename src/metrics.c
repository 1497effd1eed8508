/* metrics.c — Prometheus text exposition (format 0.0.4) of serving metrics.
 *
 * Histograms keep per-bucket counts (non-cumulative) under one mutex and
 * are made cumulative when rendered. Bucket bounds are vLLM's, so that
 * the same dashboards and alerts apply. Every series carries the
 * model_name label, as vLLM's do. Engine numbers are read from the
 * snapshot the caller passes in; nothing here talks to the engine. */
#include "metrics.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "engine.h"
#include "kv.h"
#include "mem.h"
#include "sbuf.h"

#define METRICS_MAX_BUCKETS 24

struct hist_def {
	const char *name, *help;
	int n;                                  /* finite bounds */
	double le[METRICS_MAX_BUCKETS];
};

#define ITL_BOUNDS                                                                          \
	19, { 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, \
	      10.0, 20.0, 40.0, 80.0 }
#define LATENCY_BOUNDS                                                                      \
	21, { 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,  \
	      120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0 }

/* vLLM's names and bucket bounds (vllm/v1/metrics/loggers.py). Token
 * counts (n 0 here) get 1, 2, 5, 10, 20, 50, ... up to max_model_len at
 * metrics_create. */
static const struct hist_def hist_defs[METRICS_N_HIST] = {
	[METRICS_TTFT] = { "vllm:time_to_first_token_seconds",
			   "Histogram of time to first token in seconds.", 22,
			   { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
			     2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0 } },
	[METRICS_ITL] = { "vllm:inter_token_latency_seconds",
			  "Histogram of inter-token latency in seconds.", ITL_BOUNDS },
	[METRICS_E2E] = { "vllm:e2e_request_latency_seconds",
			  "Histogram of e2e request latency in seconds.", LATENCY_BOUNDS },
	[METRICS_QUEUE] = { "vllm:request_queue_time_seconds",
			    "Histogram of time spent in WAITING phase for request.", LATENCY_BOUNDS },
	[METRICS_TPOT] = { "vllm:request_time_per_output_token_seconds",
			   "Histogram of time_per_output_token_seconds per request.", ITL_BOUNDS },
	[METRICS_PREFILL] = { "vllm:request_prefill_time_seconds",
			      "Histogram of time spent in PREFILL phase for request.",
			      LATENCY_BOUNDS },
	[METRICS_DECODE] = { "vllm:request_decode_time_seconds",
			     "Histogram of time spent in DECODE phase for request.", LATENCY_BOUNDS },
	[METRICS_INFERENCE] = { "vllm:request_inference_time_seconds",
				"Histogram of time spent in RUNNING phase for request.",
				LATENCY_BOUNDS },
	[METRICS_PROMPT_TOKENS] = { "vllm:request_prompt_tokens",
				    "Number of prefill tokens processed.", 0, { 0 } },
	[METRICS_GEN_TOKENS] = { "vllm:request_generation_tokens",
				 "Number of generation tokens processed.", 0, { 0 } },
	[METRICS_MAX_GEN_TOKENS] = { "vllm:request_max_num_generation_tokens",
				     "Histogram of maximum number of requested generation tokens.",
				     0, { 0 } },
	[METRICS_PARAM_MAX_TOKENS] = { "vllm:request_params_max_tokens",
				       "Histogram of the max_tokens request parameter.", 0, { 0 } },
	[METRICS_PREFILL_KV_TOKENS] = { "vllm:request_prefill_kv_computed_tokens",
					"Histogram of new KV tokens computed during prefill "
					"(excluding cached tokens).", 0, { 0 } },
	[METRICS_PARAM_N] = { "vllm:request_params_n", "Histogram of the n request parameter.",
			      5, { 1, 2, 5, 10, 20 } },
};

/* vllm:iteration_tokens_total's bounds: powers of two, so the engine's
 * power-of-two bins (engine_stats.step_rows_bins) add up to them exactly. */
static const int iter_log2[] = { 0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 };

static const char *const finish_names[METRICS_N_FINISH] = { "stop", "length", "abort" };

struct hist {
	uint64_t counts[METRICS_MAX_BUCKETS + 1]; /* last: above every bound (+Inf only) */
	uint64_t count;
	double sum;
};

struct metrics {
	pthread_mutex_t mu;
	char *label;                    /* model_name="..." with the value escaped */
	struct hist_def defs[METRICS_N_HIST];
	uint64_t cached_tokens;
	struct hist hist[METRICS_N_HIST];
	uint64_t finished[METRICS_N_FINISH];
	size_t resp_stored, resp_bytes; /* metrics_set_responses */
};

/* Label values escape backslash, double quote and newline. */
static char *label_make(const char *model_name)
{
	struct sbuf b = { 0 };
	sbuf_puts(&b, "model_name=\"");
	for (const char *s = model_name; *s; s++) {
		if (*s == '\\' || *s == '"')
			sbuf_put(&b, "\\", 1);
		if (*s == '\n')
			sbuf_puts(&b, "\\n");
		else
			sbuf_put(&b, s, 1);
	}
	sbuf_puts(&b, "\"");
	return sbuf_take(&b, NULL);
}

/* 1, 2, 5, 10, 20, 50, ... while <= max (vLLM's build_1_2_5_buckets). */
static void bounds_1_2_5(struct hist_def *d, int64_t max)
{
	static const int steps[] = { 1, 2, 5 };
	d->n = 0;
	for (double mag = 1; d->n < METRICS_MAX_BUCKETS; mag *= 10)
		for (int i = 0; i < 3 && d->n < METRICS_MAX_BUCKETS; i++) {
			if (steps[i] * mag > (double)max)
				return;
			d->le[d->n++] = steps[i] * mag;
		}
}

int metrics_create(const char *model_name, int64_t max_model_len, struct metrics **out,
		   ing_err *err)
{
	*out = NULL;
	struct metrics *m = ing_calloc(1, sizeof *m);
	if (!m || !(m->label = label_make(model_name))) {
		ing_free(m);
		return ing_err_set(err, ING_ERR_NOMEM, "metrics: out of memory");
	}
	memcpy(m->defs, hist_defs, sizeof m->defs);
	for (int h = 0; h < METRICS_N_HIST; h++)
		if (m->defs[h].n == 0)
			bounds_1_2_5(&m->defs[h], max_model_len);
	pthread_mutex_init(&m->mu, NULL);
	*out = m;
	return ING_OK;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->mu);
	ing_free(m->label);
	ing_free(m);
}

void metrics_observe(struct metrics *m, enum metrics_hist h, double v)
{
	if (!m || (unsigned)h >= METRICS_N_HIST || !isfinite(v) || v < 0)
		return;
	const struct hist_def *d = &m->defs[h];
	int i = 0;
	while (i < d->n && v > d->le[i])
		i++;
	pthread_mutex_lock(&m->mu);
	m->hist[h].counts[i]++;
	m->hist[h].count++;
	m->hist[h].sum += v;
	pthread_mutex_unlock(&m->mu);
}

void metrics_count_cached(struct metrics *m, int64_t n)
{
	if (!m || n <= 0)
		return;
	pthread_mutex_lock(&m->mu);
	m->cached_tokens += (uint64_t)n;
	pthread_mutex_unlock(&m->mu);
}

void metrics_finish_count(struct metrics *m, enum metrics_finish why)
{
	if (!m || (unsigned)why >= METRICS_N_FINISH)
		return;
	pthread_mutex_lock(&m->mu);
	m->finished[why]++;
	pthread_mutex_unlock(&m->mu);
}

/* ---- rendering ---- */

static void put_header(struct sbuf *b, const char *name, const char *type, const char *help)
{
	sbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_gauge(struct sbuf *b, const struct metrics *m, const char *name,
		      const char *help, double v)
{
	put_header(b, name, "gauge", help);
	sbuf_printf(b, "%s{%s} %.17g\n", name, m->label, v);
}

static void put_counter(struct sbuf *b, const struct metrics *m, const char *name,
			const char *help, double v)
{
	put_header(b, name, "counter", help);
	sbuf_printf(b, "%s{%s} %.17g\n", name, m->label, v);
}

static void put_hist(struct sbuf *b, const struct metrics *m, const struct hist_def *d,
		     const struct hist *h)
{
	put_header(b, d->name, "histogram", d->help);
	uint64_t cum = 0;
	for (int i = 0; i < d->n; i++) {
		cum += h->counts[i];
		sbuf_printf(b, "%s_bucket{le=\"%g\",%s} %llu\n", d->name, d->le[i], m->label,
			    (unsigned long long)cum);
	}
	sbuf_printf(b, "%s_bucket{le=\"+Inf\",%s} %llu\n", d->name, m->label,
		    (unsigned long long)h->count);
	sbuf_printf(b, "%s_sum{%s} %.17g\n", d->name, m->label, h->sum);
	sbuf_printf(b, "%s_count{%s} %llu\n", d->name, m->label, (unsigned long long)h->count);
}

static void put_finished(struct sbuf *b, const struct metrics *m, const uint64_t *finished)
{
	const char *name = "vllm:request_success_total";
	put_header(b, name, "counter", "Count of successfully processed requests.");
	for (int i = 0; i < METRICS_N_FINISH; i++)
		sbuf_printf(b, "%s{finished_reason=\"%s\",%s} %llu\n", name, finish_names[i],
			    m->label, (unsigned long long)finished[i]);
}

/* Speculative decoding, vLLM's names. Per-position counts for the draft
 * positions the engine may use (none when speculation is off). */
static void put_spec(struct sbuf *b, const struct metrics *m, const struct engine_stats *st)
{
	put_counter(b, m, "vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.",
		    (double)st->spec_drafts);
	put_counter(b, m, "vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.",
		    (double)st->spec_draft_tokens);
	put_counter(b, m, "vllm:spec_decode_num_accepted_tokens_total",
		    "Number of accepted tokens.", (double)st->spec_accepted);
	const char *name = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
	put_header(b, name, "counter", "Accepted tokens per draft position.");
	for (int i = 0; i < st->spec_positions && i < SPEC_MAX_K; i++)
		sbuf_printf(b, "%s{position=\"%d\",%s} %llu\n", name, i, m->label,
			    (unsigned long long)st->spec_accepted_per_pos[i]);
}

/* vllm:iteration_tokens_total from the engine's power-of-two bins. */
static void put_iterations(struct sbuf *b, const struct metrics *m,
			   const struct engine_stats *st)
{
	const char *name = "vllm:iteration_tokens_total";
	put_header(b, name, "histogram", "Histogram of number of tokens per engine_step.");
	uint64_t cum = 0;
	int bin = 0;
	for (size_t i = 0; i < sizeof iter_log2 / sizeof iter_log2[0]; i++) {
		for (; bin <= iter_log2[i] && bin < ENGINE_STEP_ROWS_BINS; bin++)
			cum += st->step_rows_bins[bin];
		sbuf_printf(b, "%s_bucket{le=\"%d\",%s} %llu\n", name, 1 << iter_log2[i], m->label,
			    (unsigned long long)cum);
	}
	sbuf_printf(b, "%s_bucket{le=\"+Inf\",%s} %llu\n", name, m->label,
		    (unsigned long long)st->steps);
	sbuf_printf(b, "%s_sum{%s} %llu\n", name, m->label, (unsigned long long)st->batch_rows);
	sbuf_printf(b, "%s_count{%s} %llu\n", name, m->label, (unsigned long long)st->steps);
}

/* vLLM's info gauge of its cache configuration (value 1, the facts in
 * labels, no model_name): dashboards read the block size, the element
 * type and the pool's size in blocks from it. */
static void put_cache_info(struct sbuf *b, const struct engine_stats *st)
{
	put_header(b, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
	sbuf_printf(b,
		    "vllm:cache_config_info{block_size=\"%d\",cache_dtype=\"%s\","
		    "enable_prefix_caching=\"True\",num_gpu_blocks=\"%lld\"} 1\n",
		    KV_BLOCK, st->kv_dtype ? st->kv_dtype : "auto", (long long)st->kv_blocks);
}

static void put_engine(struct sbuf *b, const struct metrics *m, const struct engine_stats *st)
{
	put_cache_info(b, st);
	put_gauge(b, m, "vllm:num_requests_running", "Number of requests in model execution batches.",
		  st->running);
	put_gauge(b, m, "vllm:num_requests_waiting", "Number of requests waiting to be processed.",
		  st->waiting);
	put_gauge(b, m, "vllm:kv_cache_usage_perc",
		  "KV-cache usage. 1 means 100 percent usage.", st->kv_usage);
	put_counter(b, m, "vllm:prompt_tokens_total", "Number of prefill tokens processed.",
		    (double)st->prompt_tokens);
	put_counter(b, m, "vllm:generation_tokens_total", "Number of generation tokens processed.",
		    (double)st->generation_tokens);
	put_counter(b, m, "vllm:num_preemptions_total", "Cumulative number of preemption from the engine.",
		    (double)st->preemptions);
	put_counter(b, m, "vllm:prefix_cache_queries_total",
		    "Prefix cache queries, in terms of number of queried tokens.",
		    (double)st->prefix_queries);
	put_counter(b, m, "vllm:prefix_cache_hits_total",
		    "Prefix cache hits, in terms of number of cached tokens.",
		    (double)st->prefix_hits);
	put_counter(b, m, "ingot_step_seconds_total", "Time spent in forward steps.",
		    st->step_seconds);
	put_counter(b, m, "ingot_batch_rows_total", "Rows over all forward steps.",
		    (double)st->batch_rows);
	put_counter(b, m, "ingot_steps_total", "Forward steps run.", (double)st->steps);
	put_spec(b, m, st);
	put_iterations(b, m, st);
}

void metrics_set_responses(struct metrics *m, size_t stored, size_t bytes)
{
	pthread_mutex_lock(&m->mu);
	m->resp_stored = stored;
	m->resp_bytes = bytes;
	pthread_mutex_unlock(&m->mu);
}

int metrics_render(struct metrics *m, const struct engine_stats *st, char **out, size_t *len,
		   ing_err *err)
{
	struct hist hist[METRICS_N_HIST];
	uint64_t finished[METRICS_N_FINISH], cached;
	size_t resp_stored, resp_bytes;
	pthread_mutex_lock(&m->mu);
	memcpy(hist, m->hist, sizeof hist);
	memcpy(finished, m->finished, sizeof finished);
	cached = m->cached_tokens;
	resp_stored = m->resp_stored;
	resp_bytes = m->resp_bytes;
	pthread_mutex_unlock(&m->mu);

	struct sbuf b = { 0 };
	put_engine(&b, m, st);
	put_counter(&b, m, "vllm:prompt_tokens_cached_total",
		    "Number of cached prompt tokens (local + external).", (double)cached);
	put_finished(&b, m, finished);
	put_gauge(&b, m, "ingot_responses_stored",
		  "Responses API answers kept for previous_response_id.", (double)resp_stored);
	put_gauge(&b, m, "ingot_responses_store_bytes",
		  "Bytes of text the stored responses hold.", (double)resp_bytes);
	for (int h = 0; h < METRICS_N_HIST; h++)
		put_hist(&b, m, &m->defs[h], &hist[h]);
	*out = sbuf_take(&b, len);
	if (!*out)
		return ing_err_set(err, ING_ERR_NOMEM, "metrics: out of memory");
	return ING_OK;
}
