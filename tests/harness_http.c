/* harness_http.c — fuzz body for the HTTP request path.
 *
 * The input is what a client sends on one connection: raw bytes written
 * to a loopback socket of a real server (server.c on libmicrohttpd,
 * started once per process on a free port with an API key "k", a 64 KiB
 * body limit and a 1 s idle timeout), after which the client shuts down
 * its sending side and reads until the server closes. The handler is the
 * API's router (api_handle) on an engine-less api (harness_api_init):
 * the generation endpoints (chat, completions, responses) stop after
 * api_gen_request_read and answer 200 or the error, /metrics answers a
 * fixed text; everything else (routing, 404/405, /tokenize, /detokenize,
 * /v1/models, /health, auth, body limits, HTTP parsing) is the real code.
 * The intercepts match paths as the router does (api_route_path: a
 * trailing slash is the same route); one they miss reaches the engine,
 * which is NULL here, and crashes.
 *
 * Invariants: the server answers with something that starts "HTTP/1." or
 * closes without answering, and closes within 5 s of the client's
 * shutdown; it then still answers GET /health with 200 (checked every
 * 64 inputs and on inputs that got no answer). */
#include "harness_fuzz.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_int.h"
#include "clock.h"
#include "mem.h"
#include "server.h"

static struct {
	struct server *srv;
	struct api api;
	long runs;
} H;

static void handler(void *ud, struct server_call *c)
{
	struct api *a = ud;
	char trimmed[API_PATH_MAX];
	const char *path = api_route_path(server_call_path(c), trimmed);
	const char *method = server_call_method(c);
	bool chat = !strcmp(path, "/v1/chat/completions");
	bool responses = !strcmp(path, "/v1/responses"); /* read as the chat body it becomes */
	if ((chat || responses || !strcmp(path, "/v1/completions")) && !strcmp(method, "POST")) {
		size_t len;
		const char *s = server_call_body(c, &len);
		struct api_error e;
		struct gen_request r;
		cJSON *body = api_body_parse(a, s, len, &e), *conv = NULL;
		int rc = body ? 0 : -1;
		if (!rc && responses)
			rc = api_responses_chat_body(body, a->store, &conv, &e);
		const cJSON *req = responses ? conv : body;
		if (!rc && api_gen_request_read(a, req, chat || responses, c, &r, &e) == 0) {
			gen_request_free(&r);
			server_call_header_add(c, "Retry-After", "1");
			server_call_respond(c, 200, "application/json", "{}", 2);
		} else {
			api_respond_error(c, &e);
		}
		cJSON_Delete(conv);
		cJSON_Delete(body);
		return;
	}
	if (!strcmp(path, "/metrics") && (!strcmp(method, "GET") || !strcmp(method, "HEAD"))) {
		server_call_respond(c, 200, "text/plain", "# none\n", 7);
		return;
	}
	api_handle(a, c);
}

static void server_up(void)
{
	if (H.srv)
		return;
	harness_api_init(&H.api, 0x10);
	struct server_config cfg = server_config_default();
	cfg.port = 0;
	cfg.api_key = "k";
	cfg.max_body = 64 * 1024;
	cfg.timeout_s = 1;
	cfg.max_connections = 1024;
	ing_err err;
	if (server_start(&cfg, handler, &H.api, &H.srv, &err))
		harness_fail("server_start: %s", err.msg);
}

/* Sends data, shuts down the sending side, reads the answer into resp
 * (up to cap bytes kept). Returns bytes received, or -1 when the server
 * did not close within the deadline. */
static long exchange(const uint8_t *data, size_t size, char *resp, size_t cap)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		harness_fail("socket: %s", strerror(errno));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)server_port(H.srv)),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) && errno != EINPROGRESS)
		harness_fail("connect: %s", strerror(errno));
	size_t sent = 0, got = 0;
	bool shut = false;
	long total = 0;
	double deadline = clock_now_s() + 5;
	for (;;) {
		if (sent == size && !shut) {
			shutdown(fd, SHUT_WR);
			shut = true;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN | (shut ? 0 : POLLOUT) };
		int ms = (int)((deadline - clock_now_s()) * 1000), pr = ms > 0 ? poll(&p, 1, ms) : 0;
		if (pr < 0 && errno == EINTR) /* libFuzzer's -timeout alarm */
			continue;
		if (pr <= 0) {
			close(fd);
			return -1;
		}
		if (p.revents & POLLOUT) {
			ssize_t w = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
			if (w > 0)
				sent += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EINTR)
				sent = size; /* the server stopped reading: just read */
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			char buf[4096];
			ssize_t r = recv(fd, buf, sizeof buf, 0);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
				break;
			if (r > 0) {
				size_t keep = got < cap ? cap - got : 0;
				memcpy(resp + got, buf, (size_t)r < keep ? (size_t)r : keep);
				got += (size_t)r < keep ? (size_t)r : keep;
				total += r;
			}
		}
	}
	close(fd);
	return total;
}

static void health_check(void)
{
	static const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	char resp[256] = { 0 };
	long n = exchange((const uint8_t *)req, sizeof req - 1, resp, sizeof resp - 1);
	if (n <= 0 || strncmp(resp, "HTTP/1.1 200", 12))
		harness_fail("server stopped answering /health (got %ld bytes: '%.40s')", n, resp);
}

int harness_http(const uint8_t *data, size_t size)
{
	server_up();
	char resp[64] = { 0 };
	double t0 = clock_now_s();
	long n = exchange(data, size, resp, sizeof resp - 1);
	if (getenv("HARNESS_HTTP_DEBUG") && clock_now_s() - t0 > 1)
		fprintf(stderr, "harness_http: %.2f s, %ld bytes back\n", clock_now_s() - t0, n);
	if (n < 0 && getenv("HARNESS_HTTP_DEBUG")) {
		char cmd[128];
		snprintf(cmd, sizeof cmd, "ss -tanoi | grep -A1 :%d >&2; ls /proc/%d/task | wc -l >&2",
			 server_port(H.srv), (int)getpid());
		if (system(cmd)) {}
	}
	if (n < 0)
		harness_fail("the server did not close the connection within 5 s (%d requests active)",
			     server_active(H.srv));
	if (n > 0 && strncmp(resp, "HTTP/1.", n < 7 ? (size_t)n : 7))
		harness_fail("answer does not start with HTTP/1.: '%.40s'", resp);
	if (n == 0 || ++H.runs % 64 == 0)
		health_check();
	return 0;
}

void harness_http_cleanup(void)
{
	if (!H.srv)
		return;
	for (int i = 0; i < 500 && server_active(H.srv) > 0; i++)
		usleep(10000);
	server_stop(H.srv);
	memset(&H, 0, sizeof H);
}
