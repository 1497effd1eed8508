/* test_tracing.c — the trace module without a server: W3C traceparent
 * parsing (valid, later versions, every kind of malformed value), span
 * attributes past the limit, endpoint checks, and an exporter whose
 * collector is down: export never blocks, close returns promptly, and the
 * dropped spans are counted. (Spans reaching a real receiver are checked
 * by tests/test_tracing.py.) */
#include <string.h>

#include "check.h"
#include "clock.h"
#include "trace.h"

static void test_traceparent(void)
{
	struct trace_parent p;
	CHECK(trace_parent_parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &p),
	      "valid");
	CHECK(p.trace_id[0] == 0x4b && p.trace_id[15] == 0x36 && p.span_id[0] == 0x00 &&
	      p.span_id[7] == 0xb7 && p.flags == 1, "bytes");
	CHECK(trace_parent_parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra",
				 &p), "a later version with more fields");
	static const char *const bad[] = {
		NULL, "", "garbage",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(!trace_parent_parse(bad[i], &p), "bad %zu: %s", i, bad[i] ? bad[i] : "NULL");
}

static void test_attrs(void)
{
	struct trace_span s = { 0 };
	for (int i = 0; i < TRACE_MAX_ATTRS + 3; i++)
		trace_attr_int(&s, "k", i);
	CHECK(s.n_attrs == TRACE_MAX_ATTRS, "attributes capped: %d", s.n_attrs);
	struct trace_span t = { 0 };
	char longv[300];
	memset(longv, 'x', sizeof longv - 1);
	longv[sizeof longv - 1] = 0;
	trace_attr_str(&t, "s", longv);
	CHECK(strlen(t.attrs[0].s) == sizeof t.attrs[0].s - 1, "string cut to fit");
}

static void test_exporter_down(void)
{
	struct trace_exporter *t = NULL;
	ing_err err;
	CHECK(trace_exporter_open("ftp://x", "svc", &t, &err) == ING_ERR_INVALID && !t, "ftp");
	CHECK(trace_exporter_open("localhost:4318", "svc", &t, &err) == ING_ERR_INVALID, "no scheme");
	/* port 9 (discard): nothing listens there on a test machine */
	int rc = trace_exporter_open("http://127.0.0.1:9", "svc", &t, &err);
	CHECK(rc == ING_OK && t, "open: %s", err.msg);
	if (!t)
		return;
	struct trace_span s[2] = { { .name = "a", .kind = TRACE_KIND_SERVER, .start_ns = 1,
				     .end_ns = 2, .trace_id = { 1 }, .span_id = { 2 } },
				   { .name = "b", .kind = TRACE_KIND_INTERNAL, .start_ns = 1,
				     .end_ns = 2, .trace_id = { 1 }, .span_id = { 3 },
				     .parent_id = { 2 } } };
	trace_attr_str(&s[0], "k", "v");
	trace_attr_double(&s[1], "d", 0.5);
	double t0 = clock_now_s();
	for (int i = 0; i < 1000; i++)
		trace_export(t, s, 2);
	CHECK(clock_now_s() - t0 < 1.0, "export never waits on the network: %.2fs", clock_now_s() - t0);
	t0 = clock_now_s();
	trace_exporter_close(t);
	CHECK(clock_now_s() - t0 < 10.0, "close returns promptly: %.2fs", clock_now_s() - t0);
	trace_exporter_close(NULL);
}

int main(void)
{
	test_traceparent();
	test_attrs();
	test_exporter_down();
	return check_summary("test_tracing");
}
