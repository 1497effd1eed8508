/* trace.h — OpenTelemetry spans, exported over OTLP/HTTP with JSON bodies.
 *
 * The API layer describes what happened to a request as a few spans
 * (struct trace_span, plain values) and hands them to the exporter, which
 * encodes them at once and queues them; a background thread posts batches
 * to the collector (libcurl, short timeouts). The queue is bounded: when
 * the collector is slow or down, new spans are dropped and counted, and a
 * request never waits on export. With no exporter (tracing off, the
 * default) callers skip all of this: the only cost is a NULL check.
 *
 * Incoming context follows W3C Trace Context: a `traceparent` header
 * "00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>" makes the
 * request's spans part of the caller's trace; an absent or malformed one
 * starts a new trace. */
#ifndef INGOT_TRACE_H
#define INGOT_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define TRACE_MAX_ATTRS 12

/* Span kinds, as OTLP numbers them. */
enum trace_kind { TRACE_KIND_INTERNAL = 1, TRACE_KIND_SERVER = 2 };

enum trace_attr_type { TRACE_ATTR_INT, TRACE_ATTR_DOUBLE, TRACE_ATTR_STR };

struct trace_attr {
	const char *key;            /* static */
	enum trace_attr_type type;
	int64_t i;
	double d;
	char s[96];
};

struct trace_span {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t parent_id[8];       /* all zero: a root span */
	const char *name;           /* static, or kept alive until trace_export returns */
	enum trace_kind kind;
	uint64_t start_ns, end_ns;  /* Unix epoch nanoseconds */
	bool error;                 /* status ERROR (else OK) */
	struct trace_attr attrs[TRACE_MAX_ATTRS];
	int n_attrs;
};

/* The remote parent from a traceparent header. */
struct trace_parent {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t flags;
};

/* Parses a W3C traceparent value (version 00, or a later version read as
 * 00 as the spec asks). False for NULL or anything malformed, including
 * all-zero ids. */
bool trace_parent_parse(const char *value, struct trace_parent *out);

/* Now, in Unix epoch nanoseconds. */
uint64_t trace_now_ns(void);

/* Adds an attribute to s (ignored past TRACE_MAX_ATTRS; strings cut to
 * fit). */
void trace_attr_int(struct trace_span *s, const char *key, int64_t v);
void trace_attr_double(struct trace_span *s, const char *key, double v);
void trace_attr_str(struct trace_span *s, const char *key, const char *v);

struct trace_exporter;

/* Starts the exporter thread posting to endpoint: a full URL; when its
 * path is empty or "/", "/v1/traces" is appended (OTLP's default path).
 * service is the resource's service.name. *out is closed with
 * trace_exporter_close. ING_ERR_INVALID for a URL that is not http(s),
 * ING_ERR_NOMEM, ING_ERR_IO (thread or libcurl start). */
int trace_exporter_open(const char *endpoint, const char *service, struct trace_exporter **out,
			ing_err *err);

/* Sends what is still queued (each post gives up after a couple of
 * seconds), stops the thread and frees everything. Accepts NULL. */
void trace_exporter_close(struct trace_exporter *t);

/* Encodes spans[0..n) and queues them for the thread. Never blocks on the
 * network; drops them (counted) when the queue is full or memory is short.
 * Thread-safe. */
void trace_export(struct trace_exporter *t, const struct trace_span *spans, int n);

/* Spans dropped so far (queue full, out of memory, or a failed post).
 * Thread-safe. */
uint64_t trace_dropped(struct trace_exporter *t);

#endif
