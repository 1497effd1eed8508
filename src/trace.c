/* trace.c — span encoding (OTLP/HTTP JSON) and the exporter thread.
 *
 * Encoding follows the OTLP JSON mapping of ExportTraceServiceRequest:
 *   {"resourceSpans": [{"resource": {"attributes": [...]},
 *     "scopeSpans": [{"scope": {"name": "ingot"}, "spans": [...]}]}]}
 * with trace and span ids as lower-case hex strings (not base64), 64-bit
 * integers (times, intValue) as decimal strings, and enums (kind, status
 * code) as numbers.
 *
 * Queue: a ring of encoded span arrays (one per trace_export call) under a
 * mutex. The thread takes everything queued, merges it into one request
 * and posts it; on failure the batch is dropped (counted), never retried,
 * so a dead collector costs one short timeout per batch. */
#include "trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "mem.h"

#define TRACE_QUEUE_CAP 256     /* span batches waiting for the thread */
#define TRACE_POST_TIMEOUT_MS 2000

struct trace_exporter {
	char *url;
	char *service;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	cJSON *q[TRACE_QUEUE_CAP];  /* ring of span arrays, [head, head + n) */
	int head, n;
	bool stop;
	atomic_uint_fast64_t dropped;
};

/* ---- ids, times, attributes ---- */

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Lower-case hex into out[0..n); false on anything else. */
static bool hex_read(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(s[2 * i]), lo = hi < 0 ? -1 : hexval(s[2 * i + 1]);
		if (lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

bool trace_parent_parse(const char *v, struct trace_parent *out)
{
	uint8_t ver;
	if (!v || strlen(v) < 55 || !hex_read(v, &ver, 1) || ver == 0xff || v[2] != '-' ||
	    v[35] != '-' || v[52] != '-')
		return false;
	if (ver == 0 && v[55] != 0)
		return false; /* version 00 is exactly 55 characters */
	if (ver != 0 && v[55] != 0 && v[55] != '-')
		return false;
	if (!hex_read(v + 3, out->trace_id, 16) || !hex_read(v + 36, out->span_id, 8) ||
	    !hex_read(v + 53, &out->flags, 1))
		return false;
	return !all_zero(out->trace_id, 16) && !all_zero(out->span_id, 8);
}

uint64_t trace_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct trace_attr *attr_new(struct trace_span *s, const char *key,
				   enum trace_attr_type type)
{
	if (s->n_attrs >= TRACE_MAX_ATTRS)
		return NULL;
	struct trace_attr *a = &s->attrs[s->n_attrs++];
	*a = (struct trace_attr){ .key = key, .type = type };
	return a;
}

void trace_attr_int(struct trace_span *s, const char *key, int64_t v)
{
	struct trace_attr *a = attr_new(s, key, TRACE_ATTR_INT);
	if (a)
		a->i = v;
}

void trace_attr_double(struct trace_span *s, const char *key, double v)
{
	struct trace_attr *a = attr_new(s, key, TRACE_ATTR_DOUBLE);
	if (a)
		a->d = v;
}

void trace_attr_str(struct trace_span *s, const char *key, const char *v)
{
	struct trace_attr *a = attr_new(s, key, TRACE_ATTR_STR);
	if (a)
		snprintf(a->s, sizeof a->s, "%s", v);
}

/* ---- encoding ---- */

static void hex_add(cJSON *o, const char *key, const uint8_t *p, size_t n)
{
	char buf[33];
	for (size_t i = 0; i < n; i++)
		snprintf(buf + 2 * i, 3, "%02x", p[i]);
	cJSON_AddStringToObject(o, key, buf);
}

static void u64_add(cJSON *o, const char *key, uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
	cJSON_AddStringToObject(o, key, buf);
}

static cJSON *attr_json(const char *key, const struct trace_attr *a, const char *str)
{
	cJSON *o = cJSON_CreateObject(), *v;
	cJSON_AddStringToObject(o, "key", key);
	v = cJSON_AddObjectToObject(o, "value");
	if (str) {
		cJSON_AddStringToObject(v, "stringValue", str);
	} else if (a->type == TRACE_ATTR_INT) {
		char buf[24];
		snprintf(buf, sizeof buf, "%lld", (long long)a->i);
		cJSON_AddStringToObject(v, "intValue", buf);
	} else if (a->type == TRACE_ATTR_DOUBLE) {
		cJSON_AddNumberToObject(v, "doubleValue", a->d);
	} else {
		cJSON_AddStringToObject(v, "stringValue", a->s);
	}
	return o;
}

static cJSON *span_json(const struct trace_span *s)
{
	cJSON *o = cJSON_CreateObject();
	hex_add(o, "traceId", s->trace_id, 16);
	hex_add(o, "spanId", s->span_id, 8);
	if (!all_zero(s->parent_id, 8))
		hex_add(o, "parentSpanId", s->parent_id, 8);
	cJSON_AddStringToObject(o, "name", s->name);
	cJSON_AddNumberToObject(o, "kind", s->kind);
	u64_add(o, "startTimeUnixNano", s->start_ns);
	u64_add(o, "endTimeUnixNano", s->end_ns > s->start_ns ? s->end_ns : s->start_ns);
	cJSON *attrs = cJSON_AddArrayToObject(o, "attributes");
	for (int i = 0; i < s->n_attrs; i++)
		cJSON_AddItemToArray(attrs, attr_json(s->attrs[i].key, &s->attrs[i], NULL));
	cJSON *st = cJSON_AddObjectToObject(o, "status");
	cJSON_AddNumberToObject(st, "code", s->error ? 2 : 1);
	return o;
}

/* The request document around spans (an array, taken over). */
static cJSON *request_json(const struct trace_exporter *t, cJSON *spans)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *rs = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "resourceSpans"), rs);
	cJSON *res = cJSON_AddObjectToObject(rs, "resource");
	cJSON_AddItemToArray(cJSON_AddArrayToObject(res, "attributes"),
			     attr_json("service.name", NULL, t->service));
	cJSON *ss = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_AddArrayToObject(rs, "scopeSpans"), ss);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(ss, "scope"), "name", "ingot");
	cJSON_AddItemToObject(ss, "spans", spans);
	return o;
}

/* ---- the thread ---- */

static size_t discard_body(void *p, size_t size, size_t n, void *ud)
{
	return size * n;
}

/* Posts body; true on a 2xx answer. */
static bool post(CURL *h, const char *url, const char *body)
{
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)TRACE_POST_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_body);
	long code = 0;
	bool ok = curl_easy_perform(h) == CURLE_OK &&
		  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK &&
		  code >= 200 && code < 300;
	curl_slist_free_all(hdr);
	return ok;
}

/* Takes everything queued into one span array; NULL when nothing is.
 * Called with t->mu held. */
static cJSON *queue_take(struct trace_exporter *t)
{
	if (t->n == 0)
		return NULL;
	cJSON *all = t->q[t->head];
	for (int i = 1; i < t->n; i++) {
		cJSON *more = t->q[(t->head + i) % TRACE_QUEUE_CAP], *s;
		while ((s = cJSON_DetachItemViaPointer(more, more->child)))
			cJSON_AddItemToArray(all, s);
		cJSON_Delete(more);
	}
	t->head = (t->head + t->n) % TRACE_QUEUE_CAP;
	t->n = 0;
	return all;
}

static void *exporter_main(void *ud)
{
	struct trace_exporter *t = ud;
	CURL *h = curl_easy_init();
	pthread_mutex_lock(&t->mu);
	for (;;) {
		while (t->n == 0 && !t->stop)
			pthread_cond_wait(&t->cv, &t->mu);
		cJSON *spans = queue_take(t);
		if (!spans)
			break; /* stopping and drained */
		pthread_mutex_unlock(&t->mu);
		int n = cJSON_GetArraySize(spans);
		cJSON *doc = request_json(t, spans);
		char *body = cJSON_PrintUnformatted(doc);
		if (!h || !body || !post(h, t->url, body))
			atomic_fetch_add(&t->dropped, (uint64_t)n);
		cJSON_free(body);
		cJSON_Delete(doc);
		pthread_mutex_lock(&t->mu);
	}
	pthread_mutex_unlock(&t->mu);
	curl_easy_cleanup(h);
	return NULL;
}

/* ---- the public side ---- */

static char *url_make(const char *endpoint)
{
	const char *host = strstr(endpoint, "://");
	if (!host || (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8)))
		return NULL;
	const char *path = strchr(host + 3, '/');
	bool bare = !path || !strcmp(path, "/");
	size_t n = strlen(endpoint) - (path && bare ? 1 : 0);
	char *u = ing_malloc(n + 16);
	if (u)
		snprintf(u, n + 16, "%.*s%s", (int)n, endpoint, bare ? "/v1/traces" : "");
	return u;
}

int trace_exporter_open(const char *endpoint, const char *service, struct trace_exporter **out,
			ing_err *err)
{
	*out = NULL;
	if (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8))
		return ing_err_set(err, ING_ERR_INVALID, "OTLP endpoint '%s' is not an http(s) URL",
				   endpoint);
	struct trace_exporter *t = ing_calloc(1, sizeof *t);
	if (!t || !(t->url = url_make(endpoint)) ||
	    !(t->service = ing_strndup(service, strlen(service)))) {
		if (t)
			ing_free(t->url);
		ing_free(t);
		return ing_err_set(err, ING_ERR_NOMEM, "tracing: out of memory");
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		ing_free(t->url);
		ing_free(t->service);
		ing_free(t);
		return ing_err_set(err, ING_ERR_IO, "tracing: libcurl did not start");
	}
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	if (pthread_create(&t->thread, NULL, exporter_main, t)) {
		pthread_cond_destroy(&t->cv);
		pthread_mutex_destroy(&t->mu);
		curl_global_cleanup();
		ing_free(t->url);
		ing_free(t->service);
		ing_free(t);
		return ing_err_set(err, ING_ERR_IO, "tracing: cannot start the exporter thread");
	}
	*out = t;
	return ING_OK;
}

void trace_exporter_close(struct trace_exporter *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	t->stop = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->thread, NULL);
	for (int i = 0; i < t->n; i++) /* cannot happen: the thread drains */
		cJSON_Delete(t->q[(t->head + i) % TRACE_QUEUE_CAP]);
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
	curl_global_cleanup();
	ing_free(t->url);
	ing_free(t->service);
	ing_free(t);
}

void trace_export(struct trace_exporter *t, const struct trace_span *spans, int n)
{
	cJSON *arr = cJSON_CreateArray();
	for (int i = 0; arr && i < n; i++) {
		cJSON *s = span_json(&spans[i]);
		if (!s || !cJSON_AddItemToArray(arr, s)) {
			cJSON_Delete(s);
			cJSON_Delete(arr);
			arr = NULL;
		}
	}
	bool queued = false;
	pthread_mutex_lock(&t->mu);
	if (arr && t->n < TRACE_QUEUE_CAP && !t->stop) {
		t->q[(t->head + t->n++) % TRACE_QUEUE_CAP] = arr;
		queued = true;
		pthread_cond_signal(&t->cv);
	}
	pthread_mutex_unlock(&t->mu);
	if (!queued) {
		cJSON_Delete(arr);
		atomic_fetch_add(&t->dropped, (uint64_t)n);
	}
}

uint64_t trace_dropped(struct trace_exporter *t)
{
	return atomic_load(&t->dropped);
}
