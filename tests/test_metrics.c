/* test_metrics.c — Prometheus text of the serving metrics: vLLM's names,
 * cumulative histogram buckets with +Inf == _count, _sum, label escaping,
 * engine numbers passed through, bad observations ignored; and the sbuf
 * helper it is built on. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine.h"
#include "mem.h"
#include "metrics.h"
#include "sbuf.h"

/* Value of the series whose line starts with prefix (name{labels}), or NAN. */
static double series(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, prefix, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return NAN;
}

static void test_render(void)
{
	struct metrics *m;
	ing_err err;
	CHECK(!metrics_create("my \"model\"\\x", 4096, &m, &err), "%s", err.msg);
	metrics_observe(m, METRICS_TTFT, 0.003);
	metrics_observe(m, METRICS_TTFT, 0.05);
	metrics_observe(m, METRICS_TTFT, 5000);   /* above every bound */
	metrics_observe(m, METRICS_TTFT, -1);     /* ignored */
	metrics_observe(m, METRICS_TTFT, NAN);    /* ignored */
	metrics_observe(m, METRICS_ITL, 0.01);    /* on a bound: le is inclusive */
	metrics_observe(m, METRICS_PROMPT_TOKENS, 7);
	metrics_observe(m, METRICS_PROMPT_TOKENS, 4096); /* above 2000, the last bound */
	metrics_observe(m, METRICS_PARAM_N, 2);
	metrics_count_cached(m, 30);
	metrics_count_cached(m, -5); /* ignored */
	metrics_finish_count(m, METRICS_FINISH_STOP);
	metrics_finish_count(m, METRICS_FINISH_LENGTH);
	metrics_finish_count(m, METRICS_FINISH_LENGTH);
	metrics_set_responses(m, 5, 12345);
	struct engine_stats st = { .running = 3, .waiting = 2, .kv_usage = 0.25,
				   .prompt_tokens = 100, .generation_tokens = 40,
				   .preemptions = 1, .prefix_queries = 64, .prefix_hits = 32,
				   .steps = 7, .step_seconds = 1.5, .batch_rows = 21,
				   /* 1 row, 2 rows, 3-4 rows, 5-8 rows; 9-16 rows */
				   .step_rows_bins = { 1, 1, 2, 1, 2 },
				   .kv_blocks = 4096, .kv_dtype = "f16" };
	char *t;
	size_t len;
	CHECK(!metrics_render(m, &st, &t, &len, &err) && strlen(t) == len, "%s", err.msg);
	const char *L = "model_name=\"my \\\"model\\\"\\\\x\"";
	char k[256];
#define S(fmt, ...) (snprintf(k, sizeof k, fmt, __VA_ARGS__), series(t, k))
	CHECK(S("vllm:num_requests_running{%s}", L) == 3, "running");
	CHECK(S("vllm:cache_config_info{%s}", "block_size=\"16\",cache_dtype=\"f16\","
		"enable_prefix_caching=\"True\",num_gpu_blocks=\"4096\"") == 1, "cache info");
	CHECK(S("vllm:num_requests_waiting{%s}", L) == 2, "waiting");
	CHECK(S("vllm:kv_cache_usage_perc{%s}", L) == 0.25, "kv usage");
	CHECK(S("vllm:prompt_tokens_total{%s}", L) == 100, "prompt tokens");
	CHECK(S("vllm:generation_tokens_total{%s}", L) == 40, "generation tokens");
	CHECK(S("vllm:num_preemptions_total{%s}", L) == 1, "preemptions");
	CHECK(S("vllm:prefix_cache_queries_total{%s}", L) == 64, "prefix queries");
	CHECK(S("vllm:prefix_cache_hits_total{%s}", L) == 32, "prefix hits");
	CHECK(S("ingot_steps_total{%s}", L) == 7 && S("ingot_batch_rows_total{%s}", L) == 21 &&
	      S("ingot_step_seconds_total{%s}", L) == 1.5, "ingot counters");
	CHECK(S("ingot_responses_stored{%s}", L) == 5 &&
	      S("ingot_responses_store_bytes{%s}", L) == 12345, "response store gauges");
	CHECK(S("vllm:request_success_total{finished_reason=\"stop\",%s}", L) == 1 &&
	      S("vllm:request_success_total{finished_reason=\"length\",%s}", L) == 2 &&
	      S("vllm:request_success_total{finished_reason=\"abort\",%s}", L) == 0, "finished");
	const char *h = "vllm:time_to_first_token_seconds";
	CHECK(S("%s_bucket{le=\"0.001\",%s}", h, L) == 0 && S("%s_bucket{le=\"0.005\",%s}", h, L) == 1 &&
	      S("%s_bucket{le=\"0.06\",%s}", h, L) == 2 && S("%s_bucket{le=\"2560\",%s}", h, L) == 2 &&
	      S("%s_bucket{le=\"+Inf\",%s}", h, L) == 3 && S("%s_count{%s}", h, L) == 3,
	      "cumulative TTFT buckets");
	CHECK(fabs(S("%s_sum{%s}", h, L) - 5000.053) < 1e-9, "TTFT sum");
	CHECK(S("vllm:inter_token_latency_seconds_bucket{le=\"0.01\",%s}", L) == 1, "le inclusive");
	CHECK(S("vllm:e2e_request_latency_seconds_count{%s}", L) == 0 &&
	      S("vllm:request_queue_time_seconds_bucket{le=\"+Inf\",%s}", L) == 0, "empty histograms");
	const char *pt = "vllm:request_prompt_tokens";
	CHECK(S("%s_bucket{le=\"5\",%s}", pt, L) == 0 && S("%s_bucket{le=\"10\",%s}", pt, L) == 1 &&
	      S("%s_bucket{le=\"2000\",%s}", pt, L) == 1 && isnan(S("%s_bucket{le=\"5000\",%s}", pt, L)) &&
	      S("%s_bucket{le=\"+Inf\",%s}", pt, L) == 2 && S("%s_sum{%s}", pt, L) == 4103,
	      "token counts: 1-2-5 bounds up to max_model_len");
	CHECK(S("vllm:request_params_n_bucket{le=\"1\",%s}", L) == 0 &&
	      S("vllm:request_params_n_bucket{le=\"2\",%s}", L) == 1, "n: vLLM's bounds");
	CHECK(S("vllm:prompt_tokens_cached_total{%s}", L) == 30, "cached prompt tokens");
	const char *it = "vllm:iteration_tokens_total";
	CHECK(S("%s_bucket{le=\"1\",%s}", it, L) == 1 && S("%s_bucket{le=\"8\",%s}", it, L) == 5 &&
	      S("%s_bucket{le=\"16\",%s}", it, L) == 7 && S("%s_bucket{le=\"16384\",%s}", it, L) == 7 &&
	      S("%s_bucket{le=\"+Inf\",%s}", it, L) == 7 && S("%s_sum{%s}", it, L) == 21,
	      "tokens per step from the engine's power-of-two bins");
	CHECK(S("vllm:request_time_per_output_token_seconds_count{%s}", L) == 0 &&
	      S("vllm:request_prefill_time_seconds_count{%s}", L) == 0 &&
	      S("vllm:request_decode_time_seconds_count{%s}", L) == 0 &&
	      S("vllm:request_inference_time_seconds_count{%s}", L) == 0 &&
	      S("vllm:request_generation_tokens_count{%s}", L) == 0 &&
	      S("vllm:request_max_num_generation_tokens_count{%s}", L) == 0 &&
	      S("vllm:request_params_max_tokens_count{%s}", L) == 0 &&
	      S("vllm:request_prefill_kv_computed_tokens_count{%s}", L) == 0,
	      "the other per-request histograms, empty");
	CHECK(strstr(t, "# TYPE vllm:time_to_first_token_seconds histogram\n") &&
	      strstr(t, "# TYPE vllm:prompt_tokens_total counter\n") &&
	      strstr(t, "# TYPE vllm:num_requests_running gauge\n"), "TYPE lines");
#undef S
	ing_free(t);
	metrics_free(m);
	metrics_free(NULL);
}

static void test_sbuf(void)
{
	struct sbuf b = { 0 };
	sbuf_puts(&b, "abc");
	for (int i = 0; i < 1000; i++)
		sbuf_printf(&b, "%04d", i);
	CHECK(b.len == 3 + 4000 && !memcmp(b.p + 3, "0000", 4) && !strcmp(b.p + b.len - 4, "0999"),
	      "appends");
	char big[600];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = 0;
	sbuf_printf(&b, "%s|", big);
	CHECK(b.len == 4003 + 600 && b.p[b.len - 1] == '|', "long printf");
	sbuf_consume(&b, 4003);
	CHECK(b.len == 600 && b.p[0] == 'x' && b.p[600] == 0, "consume");
	size_t n;
	char *s = sbuf_take(&b, &n);
	CHECK(s && n == 600 && b.p == NULL && b.len == 0, "take");
	ing_free(s);
	s = sbuf_take(&b, &n);
	CHECK(s && n == 0 && s[0] == 0, "take of an empty buffer is \"\"");
	ing_free(s);
	ing_mem_fail_at(1, 1);
	int rc = sbuf_puts(&b, "x");
	ing_mem_fail_at(0, 0);
	CHECK(rc == -1 && b.oom && sbuf_puts(&b, "y") == -1 && !sbuf_take(&b, &n),
	      "allocation failure sticks");
	sbuf_free(&b);
}

int main(void)
{
	test_render();
	test_sbuf();
	return check_summary("test_metrics");
}
