/* cmd_serve.c — `ingot serve`: the OpenAI-compatible HTTP server.
 *
 * Wires the pieces together — engine (owns the model, one thread),
 * metrics, api (OpenAI endpoints), server (HTTP, one thread per
 * connection) — and waits for SIGINT/SIGTERM. Signals are blocked in every
 * thread (the mask is set before any thread starts) and taken with
 * sigtimedwait here, so no handler runs in odd places. On the first signal
 * the server stops accepting, lets in-flight requests and streams finish
 * (up to DRAIN_S seconds), then cancels what is left; a second signal
 * cancels at once. With --otlp-endpoint, a trace exporter thread (started
 * after the signal mask too) posts request spans; it is closed last, once
 * the server has let go of every request.
 *
 * Logs on stderr, as vLLM's server writes them: a line per finished
 * request (the server's access log; --disable-access-log), and every
 * --log-stats-interval seconds while there is work the engine's
 * throughput, queue and cache figures (--disable-log-stats). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "api.h"
#include "cli.h"
#include "engine.h"
#include "forward.h"
#include "mem.h"
#include "metrics.h"
#include "runner.h"
#include "server.h"
#include "trace.h"

#define DRAIN_S 60
#define CANCEL_WAIT_S 10

struct serve_opts {
	const char *model, *runner, *name, *spec;
	const char *otlp;          /* OTLP/HTTP traces endpoint, or NULL: no tracing */
	const char *chat_template; /* --chat-template: a file, or a template inline */
	const char *ssl_key, *ssl_cert; /* --ssl-keyfile, --ssl-certfile (PEM files) */
	struct engine_config ec;
	struct server_config sc;
	int threads;
	bool log_stats;
	bool len_given;            /* --max-model-len was given */
	long stats_interval_s;
	long store_mb;             /* --responses-store-mb */
	char origins[1024];        /* --allowed-origins, normalized */
};

/* f: stdout for --help, else stderr; returns 2, the usage error's status */
static int usage(FILE *f)
{
	fprintf(f,
		"usage: ingot serve [options]\n"
		"  -m, --model FILE         GGUF model (default: the pulled default model)\n"
		"      --host ADDR          address to bind (default 127.0.0.1)\n"
		"      --port N             port (default 8080; 0 = any free port)\n"
		"      --api-key KEY        require \"Authorization: Bearer KEY\" (not for /health)\n"
		"      --max-num-seqs N     sequences decoded together (default 16)\n"
		"      --max-waiting N      queued requests before 429 (default 64)\n"
		"      --max-num-batched-tokens N  tokens a step computes: decode rows and prompt\n"
		"                           chunks (default 256; at least --max-num-seqs)\n"
		"      --kv-cache-mb N      KV pool size (default: max-num-seqs full contexts)\n"
		"      --kv-cache-dtype f16|f32|q8_0|auto  how the KV cache stores keys and values\n"
		"                           (default auto: f16, half the memory of f32; q8_0 about\n"
		"                           a quarter)\n"
		"      --max-model-len N    prompt + generated tokens per request (default 4096)\n"
		"      --served-model-name NAME   model id in the API (default: file name)\n"
		"      --chat-template FILE|TEMPLATE  Jinja chat template to use instead of the\n"
		"                           model's (a file, or the template itself)\n"
		"      --max-body-mb N      request body limit (default 8)\n"
		"      --timeout S          idle connection timeout in seconds (default 30)\n"
		"      --max-connections N  open client connections (default 2048)\n"
		"  -t, --threads N          compute threads (default: physical cores)\n"
		"      --runner mega|graph  step schedule (default mega)\n"
		"      --spec ngram|suffix|draft  speculative decoding (default none; draft: a draft model\n"
		"                           given by --draft-model, same vocabulary;\n"
		"                           a request may opt out: \"speculative\": {\"method\": \"none\"})\n"
		"      --spec-max N         longest draft per sequence per step (default 16)\n"
		"      --mixed-prefill-tokens N   prompt tokens in a step that also decodes (default 0:\n"
		"                           up to the step budget); e.g. 64: steadier streams\n"
		"                           (lower P99 inter-token latency) for less throughput\n"
		"      --otlp-endpoint URL  export OpenTelemetry spans of requests (OTLP/HTTP\n"
		"                           JSON; \"/v1/traces\" is added to a URL without path)\n"
		"      --allowed-origins LIST  CORS: origins browsers may call from, separated by\n"
		"                           commas (or a JSON list); \"*\" (default) any, \"none\" off\n"
		"      --disable-access-log no line per request on stderr\n"
		"      --disable-log-stats  no periodic throughput/queue/cache line on stderr\n"
		"      --log-stats-interval S  seconds between those lines (default 10)\n"
		"      --responses-store-mb N  memory for stored Responses API answers, which\n"
		"                           previous_response_id continues (default 64; 0: none)\n"
		"      --ssl-certfile FILE  serve HTTPS with this certificate (chain), PEM ...\n"
		"      --ssl-keyfile FILE   ... and its private key, PEM (give both)\n");
	return 2;
}

enum { O_HOST = 256, O_PORT, O_KEY, O_SEQS, O_WAIT, O_KV, O_LEN, O_NAME, O_BODY, O_TIMEOUT,
       O_RUNNER, O_SPEC, O_SPEC_MAX, O_DRAFT, O_MIXED, O_OTLP, O_CONN, O_TEMPLATE, O_BATCHED,
       O_KV_DTYPE, O_ORIGINS, O_NO_ACCESS_LOG, O_NO_LOG_STATS, O_STATS_INTERVAL,
       O_STORE_MB, O_SSL_KEY, O_SSL_CERT };

static int num(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* --allowed-origins: "a,b", or vLLM's JSON list '["a", "b"]', into
 * o->origins as "a,b"; "none" or "" (or []) turns CORS off. */
static int origins_parse(struct serve_opts *o, const char *arg)
{
	size_t n = 0;
	for (const char *p = arg; *p; p++) {
		if (*p == '[' || *p == ']' || *p == '"' || *p == ' ')
			continue;
		if (n + 1 >= sizeof o->origins) {
			fprintf(stderr, "ingot serve: --allowed-origins is too long\n");
			return -1;
		}
		o->origins[n++] = *p;
	}
	o->origins[n] = 0;
	if (!strcmp(o->origins, "none"))
		o->origins[0] = 0;
	o->sc.allowed_origins = o->origins;
	return 0;
}

static const struct option serve_options[] = {
	{ "model", 1, 0, 'm' }, { "threads", 1, 0, 't' }, { "host", 1, 0, O_HOST },
	{ "port", 1, 0, O_PORT }, { "api-key", 1, 0, O_KEY },
	{ "max-num-seqs", 1, 0, O_SEQS }, { "max-waiting", 1, 0, O_WAIT },
	{ "kv-cache-mb", 1, 0, O_KV }, { "max-model-len", 1, 0, O_LEN },
	{ "served-model-name", 1, 0, O_NAME }, { "max-body-mb", 1, 0, O_BODY },
	{ "timeout", 1, 0, O_TIMEOUT }, { "runner", 1, 0, O_RUNNER },
	{ "spec", 1, 0, O_SPEC }, { "spec-max", 1, 0, O_SPEC_MAX },
	{ "draft-model", 1, 0, O_DRAFT }, { "mixed-prefill-tokens", 1, 0, O_MIXED },
	{ "otlp-endpoint", 1, 0, O_OTLP }, { "max-connections", 1, 0, O_CONN },
	{ "chat-template", 1, 0, O_TEMPLATE },
	{ "max-num-batched-tokens", 1, 0, O_BATCHED },
	{ "kv-cache-dtype", 1, 0, O_KV_DTYPE }, { "allowed-origins", 1, 0, O_ORIGINS },
	{ "disable-access-log", 0, 0, O_NO_ACCESS_LOG },
	{ "disable-uvicorn-access-log", 0, 0, O_NO_ACCESS_LOG }, /* vLLM's name */
	{ "disable-log-stats", 0, 0, O_NO_LOG_STATS },
	{ "log-stats-interval", 1, 0, O_STATS_INTERVAL },
	{ "responses-store-mb", 1, 0, O_STORE_MB }, { "ssl-keyfile", 1, 0, O_SSL_KEY },
	{ "ssl-certfile", 1, 0, O_SSL_CERT }, { 0 }
};

static int parse_opt(struct serve_opts *o, int opt, const char *arg)
{
	long v = 0;
	switch (opt) {
	case 'm': o->model = arg; return 0;
	case O_HOST: o->sc.host = arg; return 0;
	case O_KEY: o->sc.api_key = arg; return 0;
	case O_NAME: o->name = arg; return 0;
	case O_RUNNER: o->runner = arg; return 0;
	case O_SPEC: o->spec = arg; return 0;
	case O_DRAFT: o->ec.draft_model = arg; return 0;
	case O_OTLP: o->otlp = arg; return 0;
	case O_TEMPLATE: o->chat_template = arg; return 0;
	case O_NO_ACCESS_LOG: o->sc.access_log = false; return 0;
	case O_NO_LOG_STATS: o->log_stats = false; return 0;
	case O_ORIGINS: return origins_parse(o, arg);
	case O_SSL_KEY: o->ssl_key = arg; return 0;
	case O_SSL_CERT: o->ssl_cert = arg; return 0;
	}
	if (opt == O_KV_DTYPE) {
		if (!fwd_kv_type_parse(arg, &o->ec.kv_type))
			return 0;
		fprintf(stderr, "ingot serve: --kv-cache-dtype takes f16, f32, q8_0 or auto, not '%s'\n",
			arg);
		return -1;
	}
	if (opt == O_PORT && !num(arg, 0, 65535, &v)) o->sc.port = (int)v;
	else if (opt == O_SEQS && !num(arg, 1, 1024, &v)) o->ec.max_num_seqs = (int)v;
	else if (opt == O_WAIT && !num(arg, 0, 1 << 20, &v)) o->ec.max_waiting = (int)v;
	else if (opt == O_BATCHED && !num(arg, 1, 8192, &v)) o->ec.step_tokens = v;
	else if (opt == O_KV && !num(arg, 1, 1L << 30, &v)) o->ec.kv_cache_mb = v;
	else if (opt == O_LEN && !num(arg, 2, 1L << 24, &v)) {
		o->ec.max_model_len = v;
		o->len_given = true;
	}
	else if (opt == O_BODY && !num(arg, 1, 1 << 14, &v)) o->sc.max_body = (size_t)v << 20;
	else if (opt == O_TIMEOUT && !num(arg, 1, 86400, &v)) o->sc.timeout_s = (unsigned)v;
	else if (opt == O_CONN && !num(arg, 1, 1 << 20, &v)) o->sc.max_connections = (unsigned)v;
	else if (opt == 't' && !num(arg, 1, 1024, &v)) o->threads = (int)v;
	else if (opt == O_MIXED && !num(arg, 0, 8192, &v)) o->ec.mixed_prefill_tokens = v;
	else if (opt == O_SPEC_MAX && !num(arg, 1, SPEC_MAX_K, &v)) o->ec.spec_max = (int)v;
	else if (opt == O_STATS_INTERVAL && !num(arg, 1, 86400, &v)) o->stats_interval_s = v;
	else if (opt == O_STORE_MB && !num(arg, 0, 1L << 20, &v)) o->store_mb = v;
	else {
		cli_bad_value("ingot serve", serve_options, opt, arg, NULL);
		return -1;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct serve_opts *o)
{
	*o = (struct serve_opts){ .runner = "mega", .spec = "none", .ec = engine_config_default(),
				  .sc = server_config_default(), .log_stats = true,
				  .stats_interval_s = 10, .store_mb = 64 };
	o->sc.access_log = true;
	int opt;
	while ((opt = getopt_long(argc, argv, "m:t:", serve_options, NULL)) != -1)
		if (opt == '?' || parse_opt(o, opt, optarg))
			return -1;
	if (optind != argc) {
		fprintf(stderr, "ingot serve: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	int kind = runner_kind_parse(o->runner);
	if (kind < 0) {
		fprintf(stderr, "ingot serve: unknown runner '%s' (mega, graph)\n", o->runner);
		return -1;
	}
	o->ec.runner = (enum runner_kind)kind;
	int method = spec_method_parse(o->spec);
	if (method < 0 || (method == SPEC_DRAFT) != (o->ec.draft_model != NULL)) {
		fprintf(stderr, "ingot serve: --spec must be none, ngram, suffix or draft; "
			"--spec draft and --draft-model FILE go together\n");
		return -1;
	}
	o->ec.spec = (enum spec_method)method;
	if (!o->ssl_key != !o->ssl_cert) {
		fprintf(stderr, "ingot serve: --ssl-keyfile and --ssl-certfile go together\n");
		return -1;
	}
	return 0;
}

/* The file name without directory and ".gguf". */
static void model_name_of(const char *path, char *buf, size_t cap)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t n = strlen(base);
	if (n > 5 && !strcmp(base + n - 5, ".gguf"))
		n -= 5;
	snprintf(buf, cap, "%.*s", (int)n, base);
}

/* ---- the periodic stats line ---- */

struct stats_log {
	long interval_s;
	struct timespec t_last;
	struct engine_stats last;
	bool was_busy;            /* the previous line had work: one more after it goes idle */
};

static double ts_diff(struct timespec a, struct timespec b)
{
	return (double)(a.tv_sec - b.tv_sec) + (a.tv_nsec - b.tv_nsec) / 1e9;
}

static void stats_log_init(struct stats_log *l, long interval_s, struct engine *e)
{
	*l = (struct stats_log){ .interval_s = interval_s };
	clock_gettime(CLOCK_MONOTONIC, &l->t_last);
	engine_stats_get(e, &l->last);
}

/* Once per interval, while requests run or wait or tokens went through
 * (and once more after): vLLM's line, its labels kept so that what reads
 * vLLM's logs reads these. Token rates and the prefix-cache hit rate are
 * over the interval. */
static void stats_log_tick(struct stats_log *l, struct engine *e)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double dt = ts_diff(now, l->t_last);
	if (dt < (double)l->interval_s)
		return;
	struct engine_stats st;
	engine_stats_get(e, &st);
	uint64_t dp = st.prompt_tokens - l->last.prompt_tokens;
	uint64_t dg = st.generation_tokens - l->last.generation_tokens;
	uint64_t dq = st.prefix_queries - l->last.prefix_queries;
	uint64_t dh = st.prefix_hits - l->last.prefix_hits;
	bool busy = dp || dg || st.running || st.waiting;
	if (busy || l->was_busy)
		fprintf(stderr, "ingot serve: Avg prompt throughput: %.1f tokens/s, Avg generation "
				"throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs, "
				"KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%\n",
			(double)dp / dt, (double)dg / dt, st.running, st.waiting, 100.0 * st.kv_usage,
			dq ? 100.0 * (double)dh / (double)dq : 0.0);
	l->was_busy = busy;
	l->last = st;
	l->t_last = now;
}

/* Waits up to ms for SIGINT/SIGTERM; returns the signal or 0. */
static int signal_wait(const sigset_t *set, long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	int sig = sigtimedwait(set, NULL, &ts);
	return sig > 0 ? sig : 0;
}

/* Lets in-flight requests finish: returns when none is left or after
 * seconds (or at a signal, if stop_on_signal). */
static bool drain_wait(struct server *s, const sigset_t *set, int seconds, bool stop_on_signal)
{
	for (long waited = 0; waited < seconds * 1000L; waited += 100) {
		if (server_active(s) == 0)
			return true;
		if (signal_wait(set, 100) && stop_on_signal)
			return false;
	}
	return server_active(s) == 0;
}

static void serve_shutdown(struct server *s, struct api *a, const sigset_t *set)
{
	fprintf(stderr, "ingot serve: draining %d request(s) (signal again to cancel them)\n",
		server_active(s));
	server_quiesce(s);
	if (!drain_wait(s, set, DRAIN_S, true)) {
		fprintf(stderr, "ingot serve: cancelling what is left\n");
		api_cancel_all(a);
		if (!drain_wait(s, set, CANCEL_WAIT_S, false))
			fprintf(stderr, "ingot serve: %d request(s) still open; closing anyway\n",
				server_active(s));
	}
	server_stop(s);
}

/* Each connection holds a descriptor: lift the soft limit to the hard one
 * so that max_connections clients fit (the default soft limit is often
 * 1024). */
static void fd_limit_raise(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* --chat-template's text, as vLLM takes it: the file named, or else the
 * argument itself when it reads as a template. NULL (with a message) when
 * it is neither; the caller frees the text. */
static char *template_text(const char *arg)
{
	size_t len;
	char *src = cli_read_file(arg, &len);
	if (src) {
		if (strlen(src) == len)
			return src;
		fprintf(stderr, "ingot serve: --chat-template %s: the file holds a NUL byte\n", arg);
		ing_free(src);
		return NULL;
	}
	if (strstr(arg, "{{") || strstr(arg, "{%"))
		return ing_strndup(arg, strlen(arg));
	fprintf(stderr, "ingot serve: --chat-template %s: %s (not a file, nor a template)\n", arg,
		strerror(errno));
	return NULL;
}

static int serve(const struct serve_opts *o, const char *path, const char *tpl,
		 const sigset_t *set)
{
	fd_limit_raise();
	ing_err err = { 0 };
	struct engine *e = NULL;
	struct metrics *m = NULL;
	struct api *a = NULL;
	struct server *s = NULL;
	struct trace_exporter *tr = NULL;
	char name[256];
	const char *note = NULL;
	model_name_of(path, name, sizeof name);
	struct engine_config ec = o->ec;
	ec.threads = cli_threads(o->threads);
	int rc = engine_create(path, &ec, &e, &err);
	if (!rc && engine_config_of(e)->max_model_len < ec.max_model_len) {
		/* the pool cannot hold one request of the asked length: an
		 * error when the length was asked for (as vLLM refuses to
		 * start), else the length the pool holds */
		const int64_t held = engine_config_of(e)->max_model_len;
		if (o->len_given)
			rc = ing_err_set(&err, ING_ERR_RANGE,
					 "--max-model-len %lld does not fit the KV cache: --kv-cache-mb "
					 "%lld holds %lld tokens; raise --kv-cache-mb or lower "
					 "--max-model-len",
					 (long long)ec.max_model_len, (long long)ec.kv_cache_mb,
					 (long long)held);
		else
			fprintf(stderr, "ingot serve: note: --kv-cache-mb %lld holds %lld tokens: the "
					"max model length is %lld (default %lld)\n",
				(long long)ec.kv_cache_mb, (long long)held, (long long)held,
				(long long)ec.max_model_len);
		ec.max_model_len = held;
	}
	if (!rc)
		rc = metrics_create(o->name ? o->name : name, engine_config_of(e)->max_model_len, &m,
				    &err);
	if (!rc)
		rc = api_create(e, m, o->name ? o->name : name, tpl, &a, &note, &err);
	if (!rc)
		rc = api_set_responses_store(a, (size_t)o->store_mb << 20, &err);
	if (!rc && o->otlp && !(rc = trace_exporter_open(o->otlp, "ingot", &tr, &err)))
		api_set_tracer(a, tr);
	if (!rc)
		rc = server_start(&o->sc, api_handle, a, &s, &err);
	if (rc) {
		fprintf(stderr, "ingot serve: %s\n", err.msg);
	} else {
		fprintf(stderr, "ingot serve: %s; model '%s', %d thread%s, max %d sequences, "
				"context %lld\n", note, o->name ? o->name : name, ec.threads,
			cli_plural(ec.threads), ec.max_num_seqs, (long long)ec.max_model_len);
		bool v6 = strchr(o->sc.host, ':') != NULL;
		if (tr)
			fprintf(stderr, "ingot serve: tracing requests to %s\n", o->otlp);
		fprintf(stderr, "listening on http%s://%s%s%s:%d\n", o->sc.tls_key_pem ? "s" : "",
			v6 ? "[" : "", o->sc.host, v6 ? "]" : "", server_port(s));
		struct stats_log sl;
		stats_log_init(&sl, o->stats_interval_s, e);
		while (!signal_wait(set, 1000))
			if (o->log_stats)
				stats_log_tick(&sl, e);
		serve_shutdown(s, a, set);
	}
	api_free(a);
	trace_exporter_close(tr);
	engine_destroy(e, true);
	metrics_free(m);
	return rc ? 1 : 0;
}

/* A PEM file's text (--ssl-keyfile, --ssl-certfile), or NULL with a
 * message. The caller frees it. */
static char *pem_read(const char *flag, const char *path)
{
	size_t len;
	char *pem = cli_read_file(path, &len);
	if (!pem) {
		fprintf(stderr, "ingot serve: %s %s: %s\n", flag, path, strerror(errno));
		return NULL;
	}
	if (strlen(pem) != len || !strstr(pem, "-----BEGIN ")) {
		fprintf(stderr, "ingot serve: %s %s: not a PEM file\n", flag, path);
		explicit_bzero(pem, len);
		ing_free(pem);
		return NULL;
	}
	return pem;
}

/* Frees a PEM text, wiping it first (it may be a private key). */
static void pem_free(char *pem)
{
	if (pem)
		explicit_bzero(pem, strlen(pem));
	ing_free(pem);
}

int cmd_serve(int argc, char **argv)
{
	struct serve_opts o;
	if (cli_help_asked(argc, argv))
		return usage(stdout), 0;
	if (parse_args(argc, argv, &o))
		return usage(stderr);
	char path[4096];
	if (cli_model_path(o.model, path, sizeof path))
		return 1;
	char *tpl = NULL, *cert = NULL, *key = NULL; /* checked before the model loads */
	if (o.chat_template && !(tpl = template_text(o.chat_template)))
		return 1;
	if (o.ssl_key && (!(cert = pem_read("--ssl-certfile", o.ssl_cert)) ||
			  !(key = pem_read("--ssl-keyfile", o.ssl_key)))) {
		pem_free(cert);
		ing_free(tpl);
		return 1;
	}
	o.sc.tls_cert_pem = cert;
	o.sc.tls_key_pem = key;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	int rc = serve(&o, path, tpl, &set);
	ing_free(tpl);
	pem_free(cert);
	pem_free(key);
	return rc;
}
