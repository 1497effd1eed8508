/* server.h — the HTTP side: sockets, request bodies, limits, auth, streams.
 *
 * Built on libmicrohttpd with one thread per connection: a request's
 * handler runs on its connection's thread and may block there (waiting
 * for the engine) without holding up other clients. The server owns the
 * sockets; handlers never see them. What a handler needs from the
 * connection it gets through server_call_* functions, and it answers with
 * exactly one of server_call_respond() or server_call_stream().
 *
 * Done here, before any handler runs:
 *   - bodies larger than max_body get 413 (read and discarded when small
 *     enough to be worth it, so clients see the answer, else refused at
 *     the headers);
 *   - with an api_key, the paths under auth_prefix ("/v1": vLLM's rule;
 *     /health, /metrics, /version, /tokenize stay open) need
 *     "Authorization: Bearer KEY" (compared in constant time) or get 401,
 *     before the body is sent when the client waits for 100 Continue;
 *   - after server_quiesce() new requests get 503;
 *   - CORS (allowed_origins): a browser's preflight (OPTIONS with Origin
 *     and Access-Control-Request-Method) is answered here, before the
 *     key is checked (browsers send no credentials on it), and every
 *     answer to an allowed Origin carries Access-Control-Allow-Origin.
 * With access_log, every finished request leaves one line on stderr:
 * client, method, path, status, seconds from its headers to its last
 * byte, the handler's note (server_call_note), and how it ended when not
 * normally (client gone, timed out).
 * Connections idle for timeout_s (slow headers, slow bodies, idle
 * keep-alive, a client that stops reading its response) are closed; while
 * a handler runs the timeout is lifted (generation may take long). */
#ifndef INGOT_SERVER_H
#define INGOT_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct server;
struct server_call;

struct server_config {
	const char *host;          /* numeric address or name; "127.0.0.1" by default */
	int port;                  /* 0: any free port (see server_port) */
	const char *api_key;       /* NULL or "": no authentication */
	const char *auth_prefix;   /* the key guards this path and those under it ("/v1");
				    * NULL: every path */
	size_t max_body;           /* bytes */
	unsigned timeout_s;        /* idle connection timeout */
	unsigned max_connections;
	/* CORS: NULL or "": off (no CORS headers; a preflight reaches the
	 * handler); "*": any origin; else origins separated by commas, each
	 * matched exactly ("http://localhost:3000") */
	const char *allowed_origins;
	bool access_log;           /* one line on stderr per finished request */
	/* HTTPS: the certificate (chain) and its private key, PEM text (not
	 * file names; copied at start). Both NULL: plain HTTP. */
	const char *tls_cert_pem, *tls_key_pem;
};

/* host 127.0.0.1, port 8080, no key (guarding "/v1" once set), 8 MiB bodies,
 * 30 s timeout, 2048 connections, CORS for any origin (as vLLM and
 * llama-server: browser clients work), no access log (each a thread and a descriptor: the
 * process's descriptor limit must allow them; `ingot serve` raises its
 * soft limit to the hard one). Past the limit new connections are closed
 * at once. */
struct server_config server_config_default(void);

/* A streamed response body (sent with chunked transfer encoding).
 * next() fills buf with up to cap bytes and returns how many, or 0 when
 * nothing came within wait_ms (the server then checks that the client is
 * still there and calls again), or SERVER_STREAM_END / SERVER_STREAM_ERROR.
 * close() is called exactly once, when the response is finished or the
 * client went away (then the source should cancel its work). Both run on
 * the connection's thread. */
enum { SERVER_STREAM_END = -1, SERVER_STREAM_ERROR = -2 };
struct server_stream {
	long (*next)(void *ud, char *buf, size_t cap, int wait_ms);
	void (*close)(void *ud);
	void *ud;
};

/* Called once per complete request on its connection's thread. */
typedef void (*server_handler_fn)(void *ud, struct server_call *c);

/* Binds and starts serving. On success *out is the server (stop it with
 * server_stop). ING_ERR_IO when the address cannot be resolved or bound,
 * or the TLS certificate and key are unusable (the message says what the
 * TLS library reported), ING_ERR_NOMEM. */
int server_start(const struct server_config *cfg, server_handler_fn handler, void *ud,
		 struct server **out, ing_err *err);

/* The port actually bound (useful with port 0). */
int server_port(const struct server *s);

/* Stops accepting connections; requests arriving on open connections get
 * 503. In-flight requests continue. */
void server_quiesce(struct server *s);

/* Requests currently being received, handled or streamed. */
int server_active(struct server *s);

/* Closes every connection and joins the threads: call once no handler is
 * blocked (server_active() == 0) or after making them return. Accepts
 * NULL. */
void server_stop(struct server *s);

/* ---- for handlers ---- */

const char *server_call_method(const struct server_call *c);
/* The path without the query string. */
const char *server_call_path(const struct server_call *c);
/* A request header's value (name matched ignoring case), or NULL. Valid
 * until the response is given. */
const char *server_call_header(const struct server_call *c, const char *name);
/* A query-string argument's value (decoded), or NULL. Valid until the
 * response is given. */
const char *server_call_query(const struct server_call *c, const char *name);
/* The request body (NUL-terminated; *len may be NULL). */
const char *server_call_body(const struct server_call *c, size_t *len);

/* True when the client has closed its end (checked without blocking). */
bool server_call_client_gone(const struct server_call *c);

/* Adds a response header (Retry-After, ...) for the coming response; the
 * strings are copied. Up to 8 per response. */
void server_call_header_add(struct server_call *c, const char *name, const char *value);

/* A short text for the access log's line of this request (the response's
 * id, ...); copied, up to 127 bytes; a later call replaces it. */
void server_call_note(struct server_call *c, const char *note);

/* Answers with body[0..len) (copied). Returns 0, or -1 when a response was
 * already given or on allocation failure. */
int server_call_respond(struct server_call *c, int status, const char *content_type,
			const char *body, size_t len);

/* Answers with a streamed body; the server owns src from here on (its
 * close() is called even when this fails). Returns 0 or -1. */
int server_call_stream(struct server_call *c, int status, const char *content_type,
		       const struct server_stream *src);

#endif
