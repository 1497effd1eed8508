/* test_server_stream.c — server.c with clients that stop reading.
 *
 * A streamed response whose client never reads must not hold anything
 * but its own connection: other requests are answered meanwhile, and once
 * the idle timeout passes without the client taking bytes the connection
 * is closed and the stream's close() runs (which is how the API cancels
 * the generation). The stream here is endless, so only the timeout can
 * end it. The other way round, time spent waiting for the source (a
 * handler or a stream that takes longer than the timeout to produce its
 * data, as when a request waits for the engine) is not idling: such
 * answers arrive whole. Also: a body larger than the limit, and
 * everything freed at the end. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "mem.h"
#include "server.h"

static atomic_int closed;
static atomic_long produced;

static long endless_next(void *ud, char *buf, size_t cap, int wait_ms)
{
	memset(buf, 'x', cap);
	atomic_fetch_add(&produced, (long)cap);
	return (long)cap;
}

static void endless_close(void *ud)
{
	atomic_store(&closed, 1);
}

/* A stream of three chunks, each after 1.5 s (the timeout is 1 s). */
static long slow_next(void *ud, char *buf, size_t cap, int wait_ms)
{
	int *left = ud;
	if (*left == 0)
		return SERVER_STREAM_END;
	usleep(1500 * 1000);
	(*left)--;
	memcpy(buf, "chunk\n", 6);
	return 6;
}

static void slow_close(void *ud)
{
	ing_free(ud);
}

static void handler(void *ud, struct server_call *c)
{
	if (!strcmp(server_call_path(c), "/slow")) {
		usleep(2500 * 1000);
		server_call_respond(c, 200, "text/plain", "late but whole", 14);
		return;
	}
	if (!strcmp(server_call_path(c), "/slowstream")) {
		int *left = ing_malloc(sizeof *left);
		*left = 3;
		struct server_stream s = { slow_next, slow_close, left };
		server_call_stream(c, 200, "text/plain", &s);
		return;
	}
	if (!strcmp(server_call_path(c), "/stream")) {
		struct server_stream s = { endless_next, endless_close, NULL };
		server_call_stream(c, 200, "text/event-stream", &s);
		return;
	}
	server_call_respond(c, 200, "text/plain", "ok", 2);
}

static int connect_to(int port, int rcvbuf)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (rcvbuf)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
		close(fd);
		return -1;
	}
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	return fd;
}

/* The status of one request on a fresh connection, 0 when none came. */
static int request(int port, const char *req)
{
	int fd = connect_to(port, 0);
	char buf[512] = { 0 };
	int st = 0;
	if (fd >= 0 && send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req) &&
	    recv(fd, buf, sizeof buf - 1, 0) > 12)
		sscanf(buf, "HTTP/1.%*d %d", &st);
	if (fd >= 0)
		close(fd);
	return st;
}

int main(void)
{
	struct server_config cfg = server_config_default();
	cfg.port = 0;
	cfg.timeout_s = 1;
	cfg.max_body = 1024;
	struct server *s;
	ing_err err;
	CHECK(server_start(&cfg, handler, NULL, &s, &err) == ING_OK, "server_start: %s", err.msg);
	int port = server_port(s);

	int fd = connect_to(port, 4096);
	const char *sreq = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
	CHECK(fd >= 0 && send(fd, sreq, strlen(sreq), 0) > 0, "stream request not sent");
	usleep(300 * 1000);
	double t0 = clock_now_s();
	int st = request(port, "GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	double dt = clock_now_s() - t0;
	CHECK(st == 200 && dt < 1, "another request while a stream is stuck: %d in %.2f s", st, dt);
	printf("a request beside a stuck stream: %d in %.0f ms\n", st, dt * 1000);

	t0 = clock_now_s();
	while (!atomic_load(&closed) && clock_now_s() - t0 < 10)
		usleep(20 * 1000);
	CHECK(atomic_load(&closed), "the stuck stream was never closed");
	printf("stuck stream closed after %.1f s more, %ld bytes produced\n", clock_now_s() - t0,
	       atomic_load(&produced));
	CHECK(atomic_load(&produced) < (64L << 20), "the stream was not held back: %ld bytes",
	      atomic_load(&produced));
	close(fd);

	/* slow sources, patient clients: answers arrive whole */
	fd = connect_to(port, 0);
	const char *slow = "GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
			   "";
	char all[4096];
	size_t got = 0;
	ssize_t r;
	CHECK(send(fd, slow, strlen(slow), 0) > 0, "send");
	while ((r = recv(fd, all + got, sizeof all - 1 - got, 0)) > 0)
		got += (size_t)r;
	all[got] = 0;
	close(fd);
	CHECK(strstr(all, "200 OK") && strstr(all, "late but whole"),
	      "a handler slower than the timeout: '%s'", all);
	fd = connect_to(port, 0);
	slow = "GET /slowstream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	got = 0;
	CHECK(send(fd, slow, strlen(slow), 0) > 0, "send");
	while ((r = recv(fd, all + got, sizeof all - 1 - got, 0)) > 0)
		got += (size_t)r;
	all[got] = 0;
	close(fd);
	const char *c1 = strstr(all, "chunk"), *c2 = c1 ? strstr(c1 + 1, "chunk") : NULL,
		   *c3 = c2 ? strstr(c2 + 1, "chunk") : NULL;
	CHECK(c3 && strstr(c3, "\r\n0\r\n"), "a stream slower than the timeout: '%s'", all);

	st = request(port, "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n");
	CHECK(st == 413, "body over the limit: %d", st);

	for (int i = 0; i < 200 && server_active(s) > 0; i++)
		usleep(10 * 1000);
	server_stop(s);
	CHECK(ing_mem_live() == 0, "%zu bytes still allocated", ing_mem_live());
	return check_summary("test_server_stream");
}
