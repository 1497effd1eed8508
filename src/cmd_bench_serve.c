/* cmd_bench_serve.c — `ingot bench serve`: a load generator against a
 * running OpenAI-compatible server (ingot serve, vLLM, llama-server) that
 * prints the figures and labels of vLLM's `benchmark_serving.py`.
 *
 * The workload (bench_serve_workload.c) is a fixed list of streamed
 * requests; up to --concurrency of them are in flight at once on one
 * libcurl multi handle in this thread. Each SSE chunk is timed as it
 * arrives: TTFT is the first chunk carrying text, ITL the gaps between
 * text chunks, TPOT (e2e - TTFT) / (output tokens - 1), output and input
 * tokens come from the usage chunk (else output = text chunks). Means,
 * medians and P99s (linear interpolation, as numpy) are over successful
 * requests; ITL over all their gaps. Requests are greedy unless
 * --temperature (and --top-p) say otherwise: sampling is work the server
 * does per token too. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "bench_serve.h"
#include "cli.h"
#include "clock.h"
#include "mem.h"
#include "sbuf.h"

struct bs_opts {
	char url[2048];     /* base, without a trailing "/" or "/v1" */
	const char *api_key, *model;
	int kind, concurrency, requests, max_tokens, json;
	double temperature, top_p;
	uint64_t seed;
};

/* What one request measured. Times in seconds from its start. */
struct bs_result {
	int started, done, ok;
	double t0, ttft, e2e, t_last;
	int n_text, in_tok, out_tok, cached_tok;
	double *itl;        /* [n_itl] gaps between text chunks, seconds */
	int n_itl, cap_itl;
	char err[256];
};

/* One transfer in flight. */
struct bs_xfer {
	CURL *h;
	struct curl_slist *hdrs;
	struct sbuf line;   /* bytes of the SSE line being received */
	struct bs_result *res;
	char head[200];     /* first bytes of the response, for error messages */
	size_t n_head;
};

struct bs_stats {
	int completed, failed;
	long in_tok, out_tok, cached_tok;
	/* agentic: prefix-cache share of prompt tokens after each session's
	 * first turn; mean TTFT of first and last turns (ms); -1: n/a */
	double later_hit, ttft_first, ttft_last;
	double duration;
	double ttft[3], tpot[3], itl[3];  /* mean, median, p99 in ms */
};

/* f: stdout for --help, else stderr; returns 2, the usage error's status */
static int usage(FILE *f)
{
	fprintf(f,
		"usage: ingot bench serve --url http://HOST:PORT [--workload chat|shared-prefix|agentic]\n"
		"                         [--concurrency 16] [--requests 200] [--max-tokens 64]\n"
		"                         [--temperature 0] [--top-p 1] [--seed 1] [--model NAME]\n"
		"                         [--api-key K] [--json]\n");
	return 2;
}

/* Checks and normalises the base URL; -1 if it is not http(s)://... */
static int set_url(struct bs_opts *o, const char *url)
{
	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
		return -1;
	size_t n = strlen(url);
	if (n < 9 || n >= sizeof o->url)
		return -1;
	memcpy(o->url, url, n + 1);
	while (n && o->url[n - 1] == '/')
		o->url[--n] = 0;
	if (n >= 3 && !strcmp(o->url + n - 3, "/v1"))
		o->url[n - 3] = 0;
	return 0;
}

/* A number in [lo, hi] into *out; -1 if arg is not one. */
static int parse_unit(const char *arg, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(arg, &end);
	if (end == arg || *end || !(v >= lo && v <= hi))
		return -1;
	*out = v;
	return 0;
}

static int parse_opt(struct bs_opts *o, int c, const char *arg)
{
	switch (c) {
	case 'u': return set_url(o, arg);
	case 'w': return (o->kind = bs_kind_parse(arg)) < 0 ? -1 : 0;
	case 'c': return cli_parse_int(arg, 1, 4096, &o->concurrency);
	case 'n': return cli_parse_int(arg, 1, 1000000, &o->requests);
	case 'x': return cli_parse_int(arg, 1, 1 << 20, &o->max_tokens);
	case 's': o->seed = strtoull(arg, NULL, 10); return 0;
	case 't': return parse_unit(arg, 0, 2, &o->temperature);
	case 'p': return parse_unit(arg, 1e-9, 1, &o->top_p);
	case 'k': o->api_key = arg; return 0;
	case 'm': o->model = arg; return 0;
	case 'j': o->json = 1; return 0;
	default: return -1;
	}
}

static int parse_args(int argc, char **argv, struct bs_opts *o)
{
	static const struct option lo[] = {
		{"url", 1, 0, 'u'}, {"workload", 1, 0, 'w'}, {"concurrency", 1, 0, 'c'},
		{"requests", 1, 0, 'n'}, {"max-tokens", 1, 0, 'x'}, {"seed", 1, 0, 's'},
		{"api-key", 1, 0, 'k'}, {"model", 1, 0, 'm'}, {"json", 0, 0, 'j'},
		{"temperature", 1, 0, 't'}, {"top-p", 1, 0, 'p'}, {0, 0, 0, 0},
	};
	*o = (struct bs_opts){.kind = BS_CHAT, .concurrency = 16, .requests = 200,
			      .max_tokens = 64, .seed = 1, .top_p = 1};
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == '?') /* getopt_long has said what */
			return -1;
		if (parse_opt(o, c, optarg)) {
			cli_bad_value("ingot bench serve", lo, c, optarg,
				      c == 'u' ? "http://HOST:PORT or https://..." : NULL);
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ingot bench serve: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (!o->url[0]) {
		fprintf(stderr, "ingot bench serve: give the server with --url http://HOST:PORT\n");
		return -1;
	}
	return 0;
}

/* Headers every request carries; NULL out of memory. */
static struct curl_slist *headers_new(const char *api_key)
{
	char auth[1024];
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	if (h && api_key) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", api_key);
		struct curl_slist *t = curl_slist_append(h, auth);
		if (!t) {
			curl_slist_free_all(h);
			return NULL;
		}
		h = t;
	}
	return h;
}

static size_t sink_write(char *p, size_t size, size_t n, void *ud)
{
	return sbuf_put(ud, p, size * n) ? 0 : size * n;
}

/* The first model the server lists, into buf; -1 with err set when the
 * server cannot be reached or answers something else. */
static int model_discover(const struct bs_opts *o, char *buf, size_t cap, char *err, size_t ecap)
{
	char url[2100];
	struct sbuf body = {0};
	struct curl_slist *hdrs = headers_new(o->api_key);
	CURL *h = curl_easy_init();
	int rc = -1;
	snprintf(url, sizeof url, "%s/v1/models", o->url);
	if (!h || !hdrs) {
		snprintf(err, ecap, "out of memory");
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
	CURLcode cc = curl_easy_perform(h);
	long code = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (cc != CURLE_OK) {
		snprintf(err, ecap, "cannot reach %.300s: %s", url, curl_easy_strerror(cc));
		goto out;
	}
	cJSON *j = code == 200 && body.p ? cJSON_Parse(body.p) : NULL;
	const cJSON *id = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0), "id");
	if (cJSON_IsString(id)) {
		snprintf(buf, cap, "%s", id->valuestring);
		rc = 0;
	} else {
		snprintf(err, ecap, "GET %.200s answered HTTP %ld: %.200s", url, code,
			 body.p ? body.p : "");
	}
	cJSON_Delete(j);
out:
	sbuf_free(&body);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return rc;
}

/* A chunk with text arrived at time t. */
static void on_text(struct bs_result *r, double t)
{
	if (r->n_text++ == 0) {
		r->ttft = t;
	} else {
		if (r->n_itl == r->cap_itl) {
			int cap = r->cap_itl ? 2 * r->cap_itl : 64;
			double *p = ing_realloc(r->itl, (size_t)cap * sizeof *p);
			if (!p) {
				snprintf(r->err, sizeof r->err, "out of memory");
				return;
			}
			r->itl = p;
			r->cap_itl = cap;
		}
		r->itl[r->n_itl++] = t - r->t_last;
	}
	r->t_last = t;
}

static const char *chunk_text(const cJSON *j)
{
	const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	const cJSON *t = cJSON_GetObjectItem(c, "text");
	if (!cJSON_IsString(t))
		t = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "delta"), "content");
	return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* One SSE line (without its newline). */
static void on_line(struct bs_result *r, char *line, double t)
{
	if (strncmp(line, "data:", 5))
		return;
	line += 5 + (line[5] == ' ');
	if (!strcmp(line, "[DONE]"))
		return;
	cJSON *j = cJSON_Parse(line);
	const char *text = chunk_text(j);
	const cJSON *u = cJSON_GetObjectItem(j, "usage");
	if (!j || cJSON_GetObjectItem(j, "error"))
		snprintf(r->err, sizeof r->err, "bad chunk: %.200s", line);
	if (text && *text)
		on_text(r, t);
	if (cJSON_IsObject(u)) {
		const cJSON *p = cJSON_GetObjectItem(u, "prompt_tokens");
		const cJSON *c = cJSON_GetObjectItem(u, "completion_tokens");
		r->in_tok = cJSON_IsNumber(p) ? p->valueint : r->in_tok;
		r->out_tok = cJSON_IsNumber(c) ? c->valueint : r->out_tok;
		const cJSON *ct = cJSON_GetObjectItem(cJSON_GetObjectItem(u, "prompt_tokens_details"),
						      "cached_tokens");
		r->cached_tok = cJSON_IsNumber(ct) ? ct->valueint : r->cached_tok;
	}
	cJSON_Delete(j);
}

static size_t stream_write(char *p, size_t size, size_t n, void *ud)
{
	struct bs_xfer *x = ud;
	size_t len = size * n, keep = sizeof x->head - 1 - x->n_head;
	double t = clock_now_s() - x->res->t0;
	memcpy(x->head + x->n_head, p, len < keep ? len : keep);
	x->n_head += len < keep ? len : keep;
	if (sbuf_put(&x->line, p, len))
		return 0;
	char *nl;
	while (x->line.len && (nl = memchr(x->line.p, '\n', x->line.len))) {
		size_t ll = (size_t)(nl - x->line.p);
		*nl = 0;
		if (ll && nl[-1] == '\r')
			nl[-1] = 0;
		on_line(x->res, x->line.p, t);
		sbuf_consume(&x->line, ll + 1);
	}
	return len;
}

static void xfer_free(struct bs_xfer *x)
{
	if (!x)
		return;
	curl_easy_cleanup(x->h);
	sbuf_free(&x->line);
	ing_free(x);
}

/* Starts request i on m; -1 out of memory. */
static int xfer_start(CURLM *m, const struct bs_opts *o, const struct bs_req *q,
		      struct bs_result *r, struct curl_slist *hdrs)
{
	char url[2100];
	struct bs_xfer *x = ing_calloc(1, sizeof *x);
	if (!x || !(x->h = curl_easy_init())) {
		ing_free(x);
		return -1;
	}
	x->res = r;
	snprintf(url, sizeof url, "%s/v1/%s", o->url, q->chat_api ? "chat/completions" : "completions");
	curl_easy_setopt(x->h, CURLOPT_URL, url);
	curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, q->body);
	curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, stream_write);
	curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
	curl_easy_setopt(x->h, CURLOPT_TIMEOUT, 600L);
	r->started = 1;
	r->t0 = clock_now_s();
	if (curl_multi_add_handle(m, x->h) != CURLM_OK) {
		xfer_free(x);
		return -1;
	}
	return 0;
}

/* Records how transfer h ended and frees it. */
static void xfer_finish(CURLM *m, CURL *h, CURLcode cc)
{
	struct bs_xfer *x;
	long code = 0;
	curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&x);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	struct bs_result *r = x->res;
	r->e2e = clock_now_s() - r->t0;
	r->done = 1;
	x->head[x->n_head] = 0;
	if (cc != CURLE_OK)
		snprintf(r->err, sizeof r->err, "%s", curl_easy_strerror(cc));
	else if (code != 200)
		snprintf(r->err, sizeof r->err, "HTTP %ld: %.200s", code, x->head);
	else if (!r->err[0] && !r->n_text)
		snprintf(r->err, sizeof r->err, "no text in the stream");
	r->ok = !r->err[0];
	if (r->ok && r->out_tok <= 0)
		r->out_tok = r->n_text;
	curl_multi_remove_handle(m, h);
	xfer_free(x);
}

/* Next request that may start: not started, its dependency done; or -1. */
static int next_ready(const struct bs_req *q, const struct bs_result *r, int n, int *from)
{
	while (*from < n && r[*from].started)
		(*from)++;
	for (int i = *from; i < n; i++)
		if (!r[i].started && (q[i].dep < 0 || r[q[i].dep].done))
			return i;
	return -1;
}

static int drain_done(CURLM *m)
{
	int left, n = 0;
	CURLMsg *msg;
	while ((msg = curl_multi_info_read(m, &left)))
		if (msg->msg == CURLMSG_DONE) {
			xfer_finish(m, msg->easy_handle, msg->data.result);
			n++;
		}
	return n;
}

/* Runs all requests, at most o->concurrency at once; -1 out of memory. */
static int run_all(const struct bs_opts *o, const struct bs_req *q, struct bs_result *r)
{
	CURLM *m = curl_multi_init();
	struct curl_slist *hdrs = headers_new(o->api_key);
	int running = 0, done = 0, from = 0, rc = m && hdrs ? 0 : -1, i;
	while (!rc && done < o->requests) {
		while (running < o->concurrency && (i = next_ready(q, r, o->requests, &from)) >= 0) {
			if ((rc = xfer_start(m, o, &q[i], &r[i], hdrs)))
				break;
			running++;
		}
		int still;
		curl_multi_perform(m, &still);
		int fin = drain_done(m);
		done += fin;
		running -= fin;
		if (!fin)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	curl_multi_cleanup(m);
	curl_slist_free_all(hdrs);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* mean, median, p99 of v[n] (sorted in place) times scale, into out[3]. */
static void summarize(double *v, int n, double scale, double out[3])
{
	out[0] = out[1] = out[2] = 0;
	if (n == 0)
		return;
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += v[i];
	out[0] = sum / n * scale;
	for (int k = 1; k < 3; k++) {
		double pos = (k == 1 ? 0.5 : 0.99) * (n - 1);
		int lo = (int)pos, hi = lo + 1 < n ? lo + 1 : lo;
		out[k] = (v[lo] + (v[hi] - v[lo]) * (pos - lo)) * scale;
	}
}

static int count_itl(const struct bs_result *r, int n)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		k += r[i].ok ? r[i].n_itl : 0;
	return k;
}

/* Fills s from the results; -1 out of memory. */
/* The agentic figures: prefix hits after the first turn, TTFT by turn. */
static void stats_turns(const struct bs_req *q, const struct bs_result *r, int n,
			struct bs_stats *s)
{
	int last = 0;
	for (int i = 0; i < n; i++)
		last = q[i].turn > last ? q[i].turn : last;
	s->later_hit = s->ttft_first = s->ttft_last = -1;
	if (last < 2)
		return;
	double in = 0, hit = 0, t1 = 0, tl = 0;
	int n1 = 0, nl = 0;
	for (int i = 0; i < n; i++) {
		if (!r[i].ok || q[i].turn == 0)
			continue;
		if (q[i].turn >= 2) {
			in += r[i].in_tok;
			hit += r[i].cached_tok;
		}
		if (q[i].turn == 1)
			t1 += r[i].ttft, n1++;
		if (q[i].turn == last)
			tl += r[i].ttft, nl++;
	}
	s->later_hit = in > 0 ? hit / in : -1;
	s->ttft_first = n1 ? 1e3 * t1 / n1 : -1;
	s->ttft_last = nl ? 1e3 * tl / nl : -1;
}

static int stats_compute(const struct bs_result *r, int n, double duration, struct bs_stats *s)
{
	int n_itl = count_itl(r, n), nt = 0, np = 0, ni = 0;
	double *ttft = ing_malloc_array((size_t)n, sizeof *ttft);
	double *tpot = ing_malloc_array((size_t)n, sizeof *tpot);
	double *itl = ing_malloc_array((size_t)n_itl + 1, sizeof *itl);
	int rc = ttft && tpot && itl ? 0 : -1;
	*s = (struct bs_stats){.duration = duration};
	for (int i = 0; i < n && !rc; i++) {
		if (!r[i].ok) {
			s->failed++;
			continue;
		}
		s->completed++;
		s->in_tok += r[i].in_tok;
		s->out_tok += r[i].out_tok;
		s->cached_tok += r[i].cached_tok;
		ttft[nt++] = r[i].ttft;
		if (r[i].out_tok > 1)
			tpot[np++] = (r[i].e2e - r[i].ttft) / (r[i].out_tok - 1);
		for (int k = 0; k < r[i].n_itl; k++)
			itl[ni++] = r[i].itl[k];
	}
	if (!rc) {
		summarize(ttft, nt, 1e3, s->ttft);
		summarize(tpot, np, 1e3, s->tpot);
		summarize(itl, ni, 1e3, s->itl);
	}
	ing_free(ttft);
	ing_free(tpot);
	ing_free(itl);
	return rc;
}

static void print_row_i(const char *label, long v)
{
	printf("%-40s %-10ld\n", label, v);
}

static void print_row_f(const char *label, double v)
{
	printf("%-40s %-10.2f\n", label, v);
}

static void print_triple(const char *head, const char *name, const double v[3])
{
	char label[64];
	static const char *const what[3] = {"Mean", "Median", "P99"};
	printf("%s\n", head);
	for (int k = 0; k < 3; k++) {
		snprintf(label, sizeof label, "%s %s (ms):", what[k], name);
		print_row_f(label, v[k]);
	}
}

static void print_text(const struct bs_stats *s)
{
	double d = s->duration > 0 ? s->duration : 1e-9;
	printf("============ Serving Benchmark Result ============\n");
	print_row_i("Successful requests:", s->completed);
	print_row_i("Failed requests:", s->failed);
	print_row_f("Benchmark duration (s):", s->duration);
	print_row_i("Total input tokens:", s->in_tok);
	print_row_i("Total generated tokens:", s->out_tok);
	print_row_f("Request throughput (req/s):", s->completed / d);
	print_row_f("Output token throughput (tok/s):", s->out_tok / d);
	print_row_f("Total Token throughput (tok/s):", (s->in_tok + s->out_tok) / d);
	print_triple("---------------Time to First Token----------------", "TTFT", s->ttft);
	print_triple("-----Time per Output Token (excl. 1st token)------", "TPOT", s->tpot);
	print_triple("---------------Inter-token Latency----------------", "ITL", s->itl);
	printf("------------------Prefix Cache--------------------\n");
	print_row_f("Prompt tokens from the cache (%):",
		    s->in_tok ? 100.0 * s->cached_tok / s->in_tok : 0.0);
	if (s->later_hit >= 0) {
		print_row_f("... after each session's first turn (%):", 100.0 * s->later_hit);
		print_row_f("Mean TTFT of first turns (ms):", s->ttft_first);
		print_row_f("Mean TTFT of last turns (ms):", s->ttft_last);
	}
	printf("==================================================\n");
}

static void add_triple(cJSON *o, const char *name, const double v[3])
{
	char key[64];
	static const char *const what[3] = {"mean", "median", "p99"};
	for (int k = 0; k < 3; k++) {
		snprintf(key, sizeof key, "%s_%s_ms", what[k], name);
		cJSON_AddNumberToObject(o, key, v[k]);
	}
}

static int print_json(const struct bs_stats *s, const struct bs_opts *o)
{
	static const char *const kinds[] = {"chat", "shared-prefix", "agentic"};
	double d = s->duration > 0 ? s->duration : 1e-9;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "workload", kinds[o->kind]);
	cJSON_AddNumberToObject(j, "max_concurrency", o->concurrency);
	cJSON_AddNumberToObject(j, "temperature", o->temperature);
	cJSON_AddNumberToObject(j, "top_p", o->top_p);
	cJSON_AddNumberToObject(j, "completed", s->completed);
	cJSON_AddNumberToObject(j, "failed", s->failed);
	cJSON_AddNumberToObject(j, "duration", s->duration);
	cJSON_AddNumberToObject(j, "total_input_tokens", (double)s->in_tok);
	cJSON_AddNumberToObject(j, "total_output_tokens", (double)s->out_tok);
	cJSON_AddNumberToObject(j, "request_throughput", s->completed / d);
	cJSON_AddNumberToObject(j, "output_throughput", s->out_tok / d);
	cJSON_AddNumberToObject(j, "total_token_throughput", (s->in_tok + s->out_tok) / d);
	add_triple(j, "ttft", s->ttft);
	add_triple(j, "tpot", s->tpot);
	add_triple(j, "itl", s->itl);
	cJSON_AddNumberToObject(j, "total_cached_input_tokens", (double)s->cached_tok);
	if (s->later_hit >= 0) {
		cJSON_AddNumberToObject(j, "prefix_hit_ratio_after_first_turn", s->later_hit);
		cJSON_AddNumberToObject(j, "mean_ttft_first_turn_ms", s->ttft_first);
		cJSON_AddNumberToObject(j, "mean_ttft_last_turn_ms", s->ttft_last);
	}
	char *txt = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	if (!txt)
		return -1;
	printf("%s\n", txt);
	cJSON_free(txt);
	return 0;
}

static void report_failure(const struct bs_result *r, int n)
{
	for (int i = 0; i < n; i++)
		if (r[i].done && !r[i].ok) {
			fprintf(stderr, "ingot bench serve: request %d failed: %s\n", i, r[i].err);
			return;
		}
}

/* Builds the workload, runs it and prints the figures. */
static int bench_run(const struct bs_opts *o, const char *model)
{
	const struct bs_body body = { .model = model, .max_tokens = o->max_tokens,
				      .temperature = o->temperature, .top_p = o->top_p,
				      .seed = o->seed };
	struct bs_req *q = bs_workload_build(o->kind, &body, o->requests, o->seed);
	struct bs_result *r = q ? ing_calloc((size_t)o->requests, sizeof *r) : NULL;
	struct bs_stats s;
	int rc = 1;
	if (!r)
		goto out;
	double t0 = clock_now_s();
	if (run_all(o, q, r) || stats_compute(r, o->requests, clock_now_s() - t0, &s))
		goto out;
	stats_turns(q, r, o->requests, &s);
	report_failure(r, o->requests);
	if (o->json ? print_json(&s, o) : (print_text(&s), 0))
		goto out;
	rc = s.completed ? 0 : 1;
out:
	if (rc && !r)
		fprintf(stderr, "ingot bench serve: out of memory\n");
	for (int i = 0; r && i < o->requests; i++)
		ing_free(r[i].itl);
	ing_free(r);
	bs_reqs_free(q, o->requests);
	return rc;
}

int cmd_bench_serve(int argc, char **argv)
{
	if (cli_help_asked(argc, argv))
		return usage(stdout), 0;
	struct bs_opts o;
	char model[512], err[512];
	if (parse_args(argc, argv, &o))
		return usage(stderr);
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		fprintf(stderr, "ingot bench serve: libcurl failed to start\n");
		return 1;
	}
	int rc = 1;
	if (model_discover(&o, model, sizeof model, err, sizeof err))
		fprintf(stderr, "ingot bench serve: %s\n", err);
	else
		rc = bench_run(&o, o.model ? o.model : model);
	curl_global_cleanup();
	return rc;
}
