/* server.c — HTTP on libmicrohttpd, one thread per connection.
 *
 * Why thread-per-connection: a handler waits for the engine (a whole
 * non-streamed completion, or the next token of a stream) and the simplest
 * correct way to wait is to block; with a thread per connection blocking
 * holds up only that client, and a stream's reader can poll the socket
 * between tokens to notice a client that left. Concurrency is bounded by
 * max_connections, not by the engine (which has its own waiting queue).
 *
 * A request moves through the access callback in three kinds of calls:
 * the first (headers only: limits checked, state allocated), zero or more
 * with body bytes (appended, or discarded when over the limit), and the
 * last (auth, then the handler). The request-completed callback frees the
 * state; a streamed response's free callback closes its source, which is
 * how a disconnect reaches the engine as a cancel.
 *
 * CORS follows what vLLM's (Starlette's) middleware answers, so browser
 * clients of either work here: a preflight gets 204 with the allowed
 * origin, methods ("*" for methods and headers: whatever the browser asks
 * is echoed) and a 10-minute max age, or 400 for an origin not allowed;
 * other answers to an allowed Origin carry Access-Control-Allow-Origin
 * ("*", or the origin itself with Vary: Origin when origins are listed). */
#include "server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "clock.h"
#include "mem.h"
#include "sbuf.h"

#define SERVER_MAX_HEADERS 8
#define SERVER_STREAM_BLOCK (16 * 1024)
#define SERVER_POLL_MS 100

struct server {
	struct server_config cfg;
	char *host, *api_key, *auth_prefix;
	char *origins;            /* cfg.allowed_origins copied; NULL: CORS off */
	char *tls_cert, *tls_key; /* PEM copies (HTTPS), or NULL */
	server_handler_fn handler;
	void *ud;
	struct MHD_Daemon *d;
	MHD_socket quiesced_fd;   /* listen socket handed back by quiesce, closed at stop */
	atomic_int active;
	atomic_bool draining;
	int port;
	/* what libmicrohttpd reports while starting (a certificate it cannot
	 * use, ...), for server_start's error; later messages are dropped */
	atomic_bool started;
	char start_msg[256];
};

struct server_call {
	struct server *srv;
	struct MHD_Connection *conn;
	char method[16];
	char *path;
	double t0;                /* headers received */
	char peer[64];            /* client address:port, for the access log */
	char note[128];           /* server_call_note */
	bool stream_failed;       /* the stream's source reported an error */
	struct sbuf body;
	size_t discarded;         /* body bytes dropped after the limit was passed */
	bool too_large;
	struct MHD_Response *resp;
	int status;
	int n_hdr;
	char *hdr[SERVER_MAX_HEADERS][2];
};

struct stream_ctx {
	struct server_stream src;
	struct server_call *call; /* valid while the request is (stream_read runs) */
	int fd;                   /* the client's socket, polled for hang-up */
	struct MHD_Connection *conn;
	unsigned timeout_s;
	double t_out;             /* when data last went to MHD (it writes it then) */
};

struct server_config server_config_default(void)
{
	return (struct server_config){ .host = "127.0.0.1", .port = 8080, .auth_prefix = "/v1",
				       .max_body = 8u << 20, .timeout_s = 30,
				       .max_connections = 2048, .allowed_origins = "*" };
}

/* ---- small helpers ---- */

static bool fd_hung_up(int fd)
{
	if (fd < 0)
		return false;
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	if (poll(&p, 1, 0) <= 0)
		return false;
	return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* MHD closes a connection once timeout passes since its last socket
 * activity, and checks that also right after a callback returns, counting
 * the time spent inside it. Time spent waiting for the engine is not the
 * client's idling: the timeout is stretched by it (since) so that only
 * timeout_s without progress on the socket closes the connection. */
static void conn_timeout_after(struct MHD_Connection *conn, unsigned timeout_s, double since)
{
	double waited = clock_now_s() - since;
	unsigned t = timeout_s + (waited > 0 ? (unsigned)waited + 1 : 0);
	MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, t);
}

static int call_fd(const struct server_call *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? (int)ci->connect_fd : -1;
}

/* ---- CORS ---- */

/* True when origin is one of the comma-separated list's entries (spaces
 * around entries ignored). */
static bool origin_listed(const char *list, const char *origin)
{
	size_t on = strlen(origin);
	for (const char *p = list; *p;) {
		p += strspn(p, " ,");
		size_t n = strcspn(p, ",");
		size_t m = n;
		while (m && p[m - 1] == ' ')
			m--;
		if (m && m == on && !memcmp(p, origin, on))
			return true;
		p += n;
	}
	return false;
}

/* The Access-Control-Allow-Origin value for this request, or NULL (CORS
 * off, no Origin header, or an origin not allowed). */
static const char *cors_allow(const struct server_call *c)
{
	const char *origins = c->srv->origins;
	const char *origin = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Origin");
	if (!origins || !origin)
		return NULL;
	if (!strcmp(origins, "*"))
		return "*";
	return origin_listed(origins, origin) ? origin : NULL;
}

static void cors_headers_add(const struct server_call *c, struct MHD_Response *r)
{
	const char *allow = cors_allow(c);
	if (!allow)
		return;
	MHD_add_response_header(r, "Access-Control-Allow-Origin", allow);
	if (strcmp(allow, "*"))
		MHD_add_response_header(r, "Vary", "Origin");
}

/* A browser asking before a cross-origin request (CORS on). */
static bool call_is_preflight(const struct server_call *c)
{
	return c->srv->origins && !strcmp(c->method, "OPTIONS") &&
	       MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Origin") &&
	       MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND,
					   "Access-Control-Request-Method");
}

/* "Bearer KEY", compared in time that depends only on the lengths. */
static bool auth_ok(const char *hdr, const char *key)
{
	if (!hdr || strncasecmp(hdr, "Bearer ", 7) != 0)
		return false;
	const char *tok = hdr + 7;
	size_t a = strlen(tok), b = strlen(key);
	unsigned diff = a != b;
	for (size_t i = 0; i < b; i++)
		diff |= (unsigned char)(i < a ? tok[i] : 0) ^ (unsigned char)key[i];
	return diff == 0;
}

static void call_free(struct server_call *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->n_hdr; i++) {
		ing_free(c->hdr[i][0]);
		ing_free(c->hdr[i][1]);
	}
	if (c->resp)
		MHD_destroy_response(c->resp);
	sbuf_free(&c->body);
	ing_free(c->path);
	ing_free(c);
}

/* ---- responses ---- */

static int call_finish_response(struct server_call *c, struct MHD_Response *r, int status,
				const char *content_type)
{
	if (!r)
		return -1;
	if (content_type)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	for (int i = 0; i < c->n_hdr; i++)
		MHD_add_response_header(r, c->hdr[i][0], c->hdr[i][1]);
	cors_headers_add(c, r);
	c->resp = r;
	c->status = status;
	return 0;
}

int server_call_respond(struct server_call *c, int status, const char *content_type,
			const char *body, size_t len)
{
	if (c->resp)
		return -1;
	struct MHD_Response *r =
		MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	return call_finish_response(c, r, status, content_type);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream_ctx *sc = cls;
	for (;;) {
		long n = sc->src.next(sc->src.ud, buf, max, SERVER_POLL_MS);
		if (n > 0) {
			conn_timeout_after(sc->conn, sc->timeout_s, sc->t_out);
			sc->t_out = clock_now_s();
			return n;
		}
		if (n == SERVER_STREAM_END) {
			conn_timeout_after(sc->conn, sc->timeout_s, sc->t_out);
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		if (n < 0)
			sc->call->stream_failed = true;
		if (n < 0 || fd_hung_up(sc->fd))
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
}

static void stream_free(void *cls)
{
	struct stream_ctx *sc = cls;
	sc->src.close(sc->src.ud);
	ing_free(sc);
}

int server_call_stream(struct server_call *c, int status, const char *content_type,
		       const struct server_stream *src)
{
	struct stream_ctx *sc = c->resp ? NULL : ing_malloc(sizeof *sc);
	if (!sc) {
		src->close(src->ud);
		return -1;
	}
	*sc = (struct stream_ctx){ .src = *src, .call = c, .fd = call_fd(c), .conn = c->conn,
				   .timeout_s = c->srv->cfg.timeout_s, .t_out = clock_now_s() };
	struct MHD_Response *r = MHD_create_response_from_callback(
		MHD_SIZE_UNKNOWN, SERVER_STREAM_BLOCK, stream_read, sc, stream_free);
	if (!r) {
		stream_free(sc);
		return -1;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	return call_finish_response(c, r, status, content_type);
}

void server_call_note(struct server_call *c, const char *note)
{
	snprintf(c->note, sizeof c->note, "%s", note);
}

void server_call_header_add(struct server_call *c, const char *name, const char *value)
{
	if (c->n_hdr >= SERVER_MAX_HEADERS)
		return;
	char *n = ing_strndup(name, strlen(name)), *v = ing_strndup(value, strlen(value));
	if (!n || !v) {
		ing_free(n);
		ing_free(v);
		return;
	}
	c->hdr[c->n_hdr][0] = n;
	c->hdr[c->n_hdr][1] = v;
	c->n_hdr++;
}

/* Errors the server answers itself, in OpenAI's shape (fixed texts, no
 * escaping needed). */
static enum MHD_Result queue_error(struct server_call *c, int status, const char *msg,
				   const char *type, const char *code, bool close)
{
	char body[512];
	int n = snprintf(body, sizeof body,
			 "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":null,\"code\":\"%s\"}}",
			 msg, type, code);
	struct MHD_Response *r =
		MHD_create_response_from_buffer((size_t)n, body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	cors_headers_add(c, r);
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	if (close)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	c->status = status;
	enum MHD_Result rc = MHD_queue_response(c->conn, (unsigned)status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result queue_too_large(struct server_call *c)
{
	return queue_error(c, 413, "Request body too large",
			   "invalid_request_error", "request_too_large", true);
}

/* The answer to a preflight: 204 with what the browser asked for, or 400
 * for an origin not allowed. */
static enum MHD_Result queue_preflight(struct server_call *c)
{
	if (!cors_allow(c))
		return queue_error(c, 400, "Disallowed CORS origin", "invalid_request_error",
				   "cors_origin", false);
	struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	cors_headers_add(c, r);
	MHD_add_response_header(r, "Access-Control-Allow-Methods",
				"DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT");
	const char *asked = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND,
							"Access-Control-Request-Headers");
	if (asked)
		MHD_add_response_header(r, "Access-Control-Allow-Headers", asked);
	MHD_add_response_header(r, "Access-Control-Max-Age", "600");
	c->status = 204;
	enum MHD_Result rc = MHD_queue_response(c->conn, 204, r);
	MHD_destroy_response(r);
	return rc;
}

/* ---- the access callback ---- */

/* Bodies over the limit are still read (and dropped) up to this many
 * bytes, so the client gets to read the 413 instead of a reset. */
static size_t discard_cap(const struct server *s)
{
	return s->cfg.max_body * 4 + (1u << 20);
}

/* The client's "address:port" ("[v6]:port"), or "-". */
static void peer_format(struct MHD_Connection *conn, char *buf, size_t cap)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char host[INET6_ADDRSTRLEN], port[8];
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	socklen_t len = !sa ? 0 : sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
							  : sizeof(struct sockaddr_in);
	if (!sa || getnameinfo(sa, len, host, sizeof host, port, sizeof port,
			       NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(buf, cap, "-");
	else if (sa->sa_family == AF_INET6)
		snprintf(buf, cap, "[%s]:%s", host, port);
	else
		snprintf(buf, cap, "%s:%s", host, port);
}

static struct server_call *call_new(struct server *s, struct MHD_Connection *conn,
				    const char *url, const char *method)
{
	struct server_call *c = ing_calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->srv = s;
	c->conn = conn;
	c->t0 = clock_now_s();
	snprintf(c->method, sizeof c->method, "%s", method);
	if (s->cfg.access_log)
		peer_format(conn, c->peer, sizeof c->peer);
	size_t n = strcspn(url, "?");
	if (!(c->path = ing_strndup(url, n))) {
		ing_free(c);
		return NULL;
	}
	return c;
}

/* The framing headers as the request gave them: how many Content-Length
 * headers, whether they all agree, and how many Transfer-Encoding ones
 * with the last value. */
struct framing {
	int n_length, n_coding;
	bool lengths_differ;
	const char *length, *coding;
};

static enum MHD_Result framing_count(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	(void)kind;
	struct framing *f = cls;
	if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
		if (f->n_length++ && strcmp(f->length, value ? value : ""))
			f->lengths_differ = true;
		f->length = value ? value : "";
	} else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
		f->n_coding++;
		f->coding = value ? value : "";
	}
	return MHD_YES;
}

/* First call: a body whose length the headers leave in doubt is refused
 * before any of it is read (RFC 9112 6.1-6.3, what uvicorn/h11 refuse
 * too): Content-Length headers that disagree or that come with a
 * Transfer-Encoding (libmicrohttpd would pick one, a proxy in front the
 * other: request smuggling), and a transfer coding other than chunked
 * (501: the body could not be read; libmicrohttpd would wait for the
 * connection to close). The connection is closed after the answer, as the
 * rest of its bytes cannot be framed. Returns false when answered. */
static bool call_check_framing(struct server_call *c, enum MHD_Result *rc)
{
	struct framing f = { 0 };
	MHD_get_connection_values(c->conn, MHD_HEADER_KIND, framing_count, &f);
	if (f.lengths_differ) {
		*rc = queue_error(c, 400, "Conflicting Content-Length headers",
				  "invalid_request_error", "bad_request", true);
		return false;
	}
	if (f.n_coding && f.n_length) {
		*rc = queue_error(c, 400, "Content-Length and Transfer-Encoding together",
				  "invalid_request_error", "bad_request", true);
		return false;
	}
	if (f.n_coding && (f.n_coding > 1 || strcasecmp(f.coding, "chunked"))) {
		*rc = queue_error(c, 501, "Unsupported Transfer-Encoding (only chunked is accepted)",
				  "invalid_request_error", "unsupported_transfer_encoding", true);
		return false;
	}
	return true;
}

/* First call: headers are in. Returns false when the request is answered
 * already (body refused from its declared length). */
static bool call_check_length(struct server_call *c, enum MHD_Result *rc)
{
	const char *cl = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (!cl)
		return true;
	unsigned long long n = strtoull(cl, NULL, 10);
	if (n <= c->srv->cfg.max_body)
		return true;
	c->too_large = true;
	const char *expect = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND,
							 MHD_HTTP_HEADER_EXPECT);
	if (n > discard_cap(c->srv) || (expect && !strcasecmp(expect, "100-continue"))) {
		*rc = queue_too_large(c);
		return false;
	}
	return true;
}

static enum MHD_Result call_upload(struct server_call *c, const char *data, size_t *size)
{
	size_t n = *size;
	*size = 0;
	if (!c->too_large && c->body.len + n > c->srv->cfg.max_body) {
		c->too_large = true;
		c->discarded = c->body.len;
		sbuf_free(&c->body);
	}
	if (c->too_large) {
		c->discarded += n;
		return c->discarded > discard_cap(c->srv) ? MHD_NO : MHD_YES;
	}
	return sbuf_put(&c->body, data, n) ? MHD_NO : MHD_YES;
}

/* Whether the request may go on as far as the API key goes: no key set,
 * a path outside cfg.auth_prefix, or "Authorization: Bearer KEY". */
static bool call_key_ok(struct server_call *c)
{
	struct server *s = c->srv;
	if (!s->api_key)
		return true;
	if (s->auth_prefix) {
		size_t n = strlen(s->auth_prefix);
		if (strncmp(c->path, s->auth_prefix, n) || (c->path[n] && c->path[n] != '/'))
			return true;
	}
	return auth_ok(MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND,
						   MHD_HTTP_HEADER_AUTHORIZATION),
		       s->api_key);
}

/* What the server answers itself instead of the handler: 503 while
 * draining, a CORS preflight, 401 for a missing or wrong key. Returns
 * true with *rc when it answered. */
static bool call_gate(struct server_call *c, enum MHD_Result *rc)
{
	if (atomic_load(&c->srv->draining))
		*rc = queue_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "Server is shutting down",
				  "server_error", "shutting_down", true);
	else if (call_is_preflight(c))
		*rc = queue_preflight(c);
	else if (!call_key_ok(c))
		*rc = queue_error(c, MHD_HTTP_UNAUTHORIZED, "Incorrect API key provided",
				  "invalid_request_error", "invalid_api_key", false);
	else
		return false;
	return true;
}

static enum MHD_Result call_dispatch(struct server_call *c)
{
	struct server *s = c->srv;
	enum MHD_Result rc;
	if (c->too_large)
		return queue_too_large(c);
	if (call_gate(c, &rc))
		return rc;
	if (!c->body.p && sbuf_put(&c->body, "", 0))
		return MHD_NO;
	/* Generation may take long: no idle timeout while the handler runs.
	 * It is back (stretched by the handler's time, see
	 * conn_timeout_after) before the response goes out, so a client that
	 * stops reading is cut off after timeout_s without progress. */
	double t0 = clock_now_s();
	MHD_set_connection_option(c->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
	s->handler(s->ud, c);
	conn_timeout_after(c->conn, s->cfg.timeout_s, t0);
	if (!c->resp)
		return queue_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "No response",
				   "server_error", "internal_error", false);
	rc = MHD_queue_response(c->conn, (unsigned)c->status, c->resp);
	MHD_destroy_response(c->resp);
	c->resp = NULL;
	return rc;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
				 const char *method, const char *version,
				 const char *upload_data, size_t *upload_size, void **con_cls)
{
	struct server *s = cls;
	struct server_call *c = *con_cls;
	if (!c) {
		if (!(c = call_new(s, conn, url, method)))
			return MHD_NO;
		*con_cls = c;
		atomic_fetch_add(&s->active, 1);
		enum MHD_Result rc = MHD_YES;
		if (!call_check_framing(c, &rc) || !call_check_length(c, &rc))
			return rc;
		/* a client that waits for "100 Continue" before its body gets
		 * the gate's answer (a 401, ...) instead, not after uploading */
		const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
								 MHD_HTTP_HEADER_EXPECT);
		if (expect && !strcasecmp(expect, "100-continue"))
			call_gate(c, &rc);
		return rc;
	}
	if (*upload_size)
		return call_upload(c, upload_data, upload_size);
	return call_dispatch(c);
}

/* How a request ended, when not normally. MHD reports a failed socket
 * read or write, and a stream reader that gave up, alike as an error;
 * ours gives up when the client hung up or the stream's source failed
 * (then stream_failed). */
static const char *termination_text(const struct server_call *c,
				    enum MHD_RequestTerminationCode toe)
{
	switch (toe) {
	case MHD_REQUEST_TERMINATED_COMPLETED_OK: return NULL;
	case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: return "timed out";
	case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: return "server stopped";
	default: return c->stream_failed ? "stream failed" : "client gone";
	}
}

/* s as printable text for a log line: control bytes, quotes, backslashes
 * and bytes past ASCII as \xNN (a client cannot forge lines), cut at
 * about cap bytes. */
static void log_escape(const char *s, char *out, size_t cap)
{
	size_t n = 0;
	for (; *s && n + 5 < cap; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\')
			n += (size_t)snprintf(out + n, cap - n, "\\x%02x", ch);
		else
			out[n++] = (char)ch;
	}
	out[n] = 0;
}

/* The access log's line: one fprintf, so lines of concurrent requests do
 * not interleave (stdio locks the stream per call). */
static void call_log(const struct server_call *c, enum MHD_RequestTerminationCode toe)
{
	char status[8] = "-", method[64], path[256];
	if (c->status)
		snprintf(status, sizeof status, "%d", c->status);
	log_escape(c->method, method, sizeof method);
	log_escape(c->path, path, sizeof path);
	const char *end = termination_text(c, toe);
	fprintf(stderr, "ingot serve: %s \"%s %s\" %s %.3f s%s%s%s%s%s\n", c->peer, method, path,
		status, clock_now_s() - c->t0, c->note[0] ? " " : "", c->note, end ? " (" : "",
		end ? end : "", end ? ")" : "");
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct server *s = cls;
	struct server_call *c = *con_cls;
	if (!c)
		return;
	*con_cls = NULL;
	MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, s->cfg.timeout_s);
	if (s->cfg.access_log)
		call_log(c, toe);
	call_free(c);
	atomic_fetch_sub(&s->active, 1);
}

/* ---- lifecycle ---- */

static int resolve(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len,
		   ing_err *err)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *res;
	char ps[16];
	snprintf(ps, sizeof ps, "%d", port);
	int rc = getaddrinfo(host, ps, &hints, &res);
	if (rc)
		return ing_err_set(err, ING_ERR_IO, "cannot resolve host '%s': %s", host,
				   gai_strerror(rc));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return ING_OK;
}

/* libmicrohttpd's messages: kept while starting (the last one explains
 * a failure), dropped once serving (a client's failed TLS handshake is
 * the client's problem, and the access log has the rest). */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct server *s = cls;
	if (atomic_load(&s->started))
		return;
	vsnprintf(s->start_msg, sizeof s->start_msg, fmt, ap);
	size_t n = strlen(s->start_msg);
	while (n && (s->start_msg[n - 1] == '\n' || s->start_msg[n - 1] == '.'))
		s->start_msg[--n] = 0;
}

static int server_copy_config(struct server *s, const struct server_config *cfg)
{
	s->cfg = *cfg;
	const char *host = cfg->host ? cfg->host : "127.0.0.1";
	if (!(s->host = ing_strndup(host, strlen(host))))
		return -1;
	if (cfg->api_key && cfg->api_key[0] &&
	    !(s->api_key = ing_strndup(cfg->api_key, strlen(cfg->api_key))))
		return -1;
	if (cfg->auth_prefix &&
	    !(s->auth_prefix = ing_strndup(cfg->auth_prefix, strlen(cfg->auth_prefix))))
		return -1;
	if (cfg->allowed_origins && cfg->allowed_origins[0] &&
	    !(s->origins = ing_strndup(cfg->allowed_origins, strlen(cfg->allowed_origins))))
		return -1;
	if (cfg->tls_cert_pem && cfg->tls_key_pem &&
	    (!(s->tls_cert = ing_strndup(cfg->tls_cert_pem, strlen(cfg->tls_cert_pem))) ||
	     !(s->tls_key = ing_strndup(cfg->tls_key_pem, strlen(cfg->tls_key_pem)))))
		return -1;
	return 0;
}

static void server_free(struct server *s)
{
	ing_free(s->host);
	ing_free(s->api_key);
	ing_free(s->auth_prefix);
	ing_free(s->origins);
	ing_free(s->tls_cert);
	if (s->tls_key) /* a private key: wiped before it goes back to the heap */
		explicit_bzero(s->tls_key, strlen(s->tls_key));
	ing_free(s->tls_key);
	ing_free(s);
}

int server_start(const struct server_config *cfg, server_handler_fn handler, void *ud,
		 struct server **out, ing_err *err)
{
	*out = NULL;
	struct server *s = ing_calloc(1, sizeof *s);
	if (!s || server_copy_config(s, cfg)) {
		if (s)
			server_free(s);
		return ing_err_set(err, ING_ERR_NOMEM, "server: out of memory");
	}
	s->handler = handler;
	s->ud = ud;
	s->quiesced_fd = MHD_INVALID_SOCKET;
	struct sockaddr_storage ss;
	socklen_t sl;
	int rc = resolve(s->host, cfg->port, &ss, &sl, err);
	if (rc) {
		server_free(s);
		return rc;
	}
	/* poll(), not select(): descriptors past FD_SETSIZE (1024) must work
	 * when more than about a thousand clients are connected. */
	bool tls = cfg->tls_cert_pem && cfg->tls_key_pem;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG |
			 (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0) | (tls ? MHD_USE_TLS : 0);
	/* MHD keeps pointers to the PEM texts, not copies: ours (made by
	 * server_copy_config) live until server_stop has stopped the daemon */
	struct MHD_OptionItem tls_opts[] = {
		{ tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)s->tls_cert },
		{ MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)s->tls_key },
		{ MHD_OPTION_END, 0, NULL },
	};
	s->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_access, s,
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
				MHD_OPTION_ARRAY, tls_opts,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_CONNECTION_TIMEOUT, cfg->timeout_s,
				MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
	if (!s->d) {
		if (s->start_msg[0])
			rc = ing_err_set(err, ING_ERR_IO, "cannot serve %s on %s:%d: %s%s",
					 tls ? "HTTPS" : "HTTP", s->host, cfg->port, s->start_msg,
					 tls ? " (the certificate and the key must be PEM, and "
					       "the key the certificate's)" : "");
		else
			rc = ing_err_set(err, ING_ERR_IO, "cannot listen on %s:%d (address in use?)",
					 s->host, cfg->port);
		server_free(s);
		return rc;
	}
	atomic_store(&s->started, true);
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = di ? di->port : cfg->port;
	*out = s;
	return ING_OK;
}

int server_port(const struct server *s)
{
	return s->port;
}

/* The listen socket stops listening at once: new connections are
 * refused (as uvicorn does when vLLM drains) instead of queueing in the
 * backlog, unanswered, to be reset when the socket closes at stop.
 * shutdown, not close: libmicrohttpd's threads may still hold the
 * descriptor until MHD_stop_daemon, and it must not be reused meanwhile. */
void server_quiesce(struct server *s)
{
	atomic_store(&s->draining, true);
	if (s->quiesced_fd == MHD_INVALID_SOCKET) {
		s->quiesced_fd = MHD_quiesce_daemon(s->d);
		if (s->quiesced_fd != MHD_INVALID_SOCKET)
			shutdown(s->quiesced_fd, SHUT_RDWR);
	}
}

int server_active(struct server *s)
{
	return atomic_load(&s->active);
}

void server_stop(struct server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->d);
	if (s->quiesced_fd != MHD_INVALID_SOCKET)
		close(s->quiesced_fd);
	server_free(s);
}

/* ---- accessors ---- */

const char *server_call_method(const struct server_call *c)
{
	return c->method;
}

const char *server_call_path(const struct server_call *c)
{
	return c->path;
}

const char *server_call_header(const struct server_call *c, const char *name)
{
	return MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, name);
}

const char *server_call_query(const struct server_call *c, const char *name)
{
	return MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *server_call_body(const struct server_call *c, size_t *len)
{
	if (len)
		*len = c->body.len;
	return c->body.p ? c->body.p : "";
}

bool server_call_client_gone(const struct server_call *c)
{
	return fd_hung_up(call_fd(c));
}
