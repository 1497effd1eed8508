"""What operators and browser clients of vLLM or llama-server expect of the
server around the API itself, against a real `ingot serve`:

- CORS: a browser's preflight is answered (before the API key is checked:
  browsers send none on it) with the origin, methods and headers asked
  for; every answer to an allowed Origin, errors and streams included,
  carries Access-Control-Allow-Origin; with listed origins the origin is
  echoed (Vary: Origin) and others get no CORS headers (their preflight a
  400); --allowed-origins none turns it off (a preflight is then a plain
  OPTIONS: 405).
- The access log: a line per finished request on stderr (client, method,
  path, status, seconds, the answer's id), a client that left mid-stream
  marked as such, a path's control bytes escaped (no forged lines);
  --disable-access-log silences it.
- The stats line every --log-stats-interval seconds while there is work,
  with vLLM's labels; --disable-log-stats silences it.
- Request ids: X-Request-Id (or vLLM's request_id field) becomes the
  answer's id (chatcmpl-ID, cmpl-ID, resp_ID) and comes back as a header;
  a malformed one on a generation request is a 400 naming it.
- GET /version and `ingot --version` agree; a port in use stops the
  server at start saying so.
- --responses-store-mb 0: no stored responses (previous_response_id a
  400)."""
import http.client
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_proc  # noqa: E402
from checks import check, summary  # noqa: E402

KEY = "ops-key"
CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0}


def req(port, method, path, body=None, key=KEY, headers=None):
    return serve_proc.request(port, method, path, body, key=key, headers=headers)


def hdr(h, name):
    """A response header, matched ignoring case (None when absent)."""
    for k, v in h.items():
        if k.lower() == name.lower():
            return v
    return None


def log_lines(srv, needle, wait=5.0):
    """srv's stderr lines holding needle, waiting up to `wait` s for one."""
    end = time.time() + wait
    while True:
        found = [l for l in list(srv.log) if needle in l]
        if found or time.time() > end:
            return found
        time.sleep(0.05)


def stream_then_leave(port):
    """Starts a long stream, reads its first event, and closes the socket."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = dict(CHAT, max_tokens=2000, stream=True, ignore_eos=True)
    c.request("POST", "/v1/chat/completions", body=__import__("json").dumps(body),
              headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json",
                       "X-Request-Id": "leaver-1"})
    r = c.getresponse()
    r.fp.readline()
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()


def test_cors_any(srv):
    port = srv.port
    pre = {"Origin": "http://ui.example", "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization, content-type"}
    st, h, _ = req(port, "OPTIONS", "/v1/chat/completions", key=None, headers=pre)
    check("preflight without the key: 204", st == 204, st)
    check("preflight allows any origin", hdr(h, "Access-Control-Allow-Origin") == "*", h)
    check("preflight allows POST", "POST" in (hdr(h, "Access-Control-Allow-Methods") or ""), h)
    check("preflight echoes the asked headers",
          hdr(h, "Access-Control-Allow-Headers") == "authorization, content-type", h)
    check("preflight max age", hdr(h, "Access-Control-Max-Age") == "600", h)
    o = {"Origin": "http://ui.example"}
    st, h, body = req(port, "POST", "/v1/chat/completions", CHAT, headers=o)
    check("a cross-origin request is answered with the header",
          st == 200 and hdr(h, "Access-Control-Allow-Origin") == "*", (st, h))
    st, h, _ = req(port, "POST", "/v1/chat/completions", CHAT, key="wrong", headers=o)
    check("a 401 carries it too (the browser can read the error)",
          st == 401 and hdr(h, "Access-Control-Allow-Origin") == "*", (st, h))
    st, h, _ = req(port, "POST", "/v1/chat/completions", dict(CHAT, stream=True), headers=o)
    check("a stream carries it", st == 200 and hdr(h, "Access-Control-Allow-Origin") == "*", h)
    st, h, _ = req(port, "GET", "/v1/models")
    check("no Origin, no CORS header", st == 200 and hdr(h, "Access-Control-Allow-Origin") is None,
          h)
    st, _, body = req(port, "OPTIONS", "/v1/chat/completions")
    check("a plain OPTIONS (no preflight) still reaches the API: 405", st == 405, (st, body))


def test_access_log(srv):
    port = srv.port
    st, _, body = req(port, "POST", "/v1/chat/completions", CHAT)
    cid = body.get("id", "?") if isinstance(body, dict) else "?"
    lines = log_lines(srv, cid)
    check("a line for the request, with its id",
          len(lines) == 1 and re.search(r'127\.0\.0\.1:\d+ "POST /v1/chat/completions" 200 '
                                        r'\d+\.\d{3} s ' + re.escape(cid), lines[0]),
          lines or srv.log[-5:])
    req(port, "GET", "/no/such%0Aline%22quote")
    lines = log_lines(srv, "/no/such")
    check("a path's control bytes and quotes are escaped",
          len(lines) == 1 and '/no/such\\x0aline\\x22quote" 404' in lines[0], lines)
    req(port, "POST", "/v1/chat/completions", CHAT, key="wrong")
    check("a refused request is logged with its status",
          log_lines(srv, '"POST /v1/chat/completions" 401'), srv.log[-5:])
    stream_then_leave(port)
    lines = log_lines(srv, "chatcmpl-leaver-1", wait=10)
    check("a client that left mid-stream is marked",
          len(lines) == 1 and lines[0].rstrip().endswith("(client gone)"), lines)


def test_stats_log(srv):
    before = len(log_lines(srv, "Avg generation throughput", wait=0))
    req(srv.port, "POST", "/v1/chat/completions", dict(CHAT, max_tokens=16))
    time.sleep(2.5)
    lines = [l for l in srv.log if "Avg generation throughput" in l][before:]
    pat = (r"Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: [\d.]+ "
           r"tokens/s, Running: \d+ reqs, Waiting: \d+ reqs, KV cache usage: [\d.]+%, "
           r"Prefix cache hit rate: [\d.]+%")
    check("a stats line after work, with vLLM's labels",
          lines and all(re.search(pat, l) for l in lines), lines or srv.log[-5:])
    check("the line counts the tokens generated",
          any(float(re.search(r"generation throughput: ([\d.]+)", l).group(1)) > 0
              for l in lines), lines)
    n = len([l for l in srv.log if "Avg generation throughput" in l])
    time.sleep(3.5)
    m = len([l for l in srv.log if "Avg generation throughput" in l])
    check("quiet when idle (at most one line after the work)", m - n <= 1, (n, m))


def test_request_ids(srv):
    port = srv.port
    st, h, body = req(port, "POST", "/v1/chat/completions", CHAT,
                      headers={"X-Request-Id": "trace-42"})
    check("X-Request-Id names the chat answer",
          st == 200 and body.get("id") == "chatcmpl-trace-42", body)
    check("and comes back as a header", hdr(h, "X-Request-Id") == "trace-42", h)
    st, h, body = req(port, "POST", "/v1/completions",
                      {"prompt": "Hi", "max_tokens": 2, "request_id": "body-7"})
    check("the body's request_id names a completion", body.get("id") == "cmpl-body-7", body)
    st, h, body = req(port, "POST", "/v1/completions",
                      {"prompt": "Hi", "max_tokens": 2, "request_id": "body-7"},
                      headers={"X-Request-Id": "hdr-8"})
    check("the header wins over the body (as vLLM)", body.get("id") == "cmpl-hdr-8", body)
    st, h, body = req(port, "POST", "/v1/responses", {"input": "Hi", "max_output_tokens": 2},
                      headers={"X-Request-Id": "r-9"})
    check("a Responses answer is resp_ID", st == 200 and body.get("id") == "resp_r-9", body)
    check("and its access-log line names that id", log_lines(srv, '" 200 ') and
          log_lines(srv, "resp_r-9"), srv.log[-5:])
    for bad in ("has space", "x" * 65, 'q"uote'):
        st, h, body = req(port, "POST", "/v1/chat/completions", CHAT,
                          headers={"X-Request-Id": bad})
        err = body.get("error", {}) if isinstance(body, dict) else {}
        check(f"a malformed X-Request-Id ({bad[:12]!r}) is a 400 naming it",
              st == 400 and err.get("param") == "X-Request-Id", (st, body))
    st, h, body = req(port, "POST", "/v1/chat/completions", dict(CHAT, request_id=5))
    check("a request_id that is not a string is a 400",
          st == 400 and body["error"]["param"] == "request_id", body)
    st, h, _ = req(port, "GET", "/health", headers={"X-Request-Id": "has space"})
    check("elsewhere a malformed one is ignored, not echoed",
          st == 200 and hdr(h, "X-Request-Id") is None, (st, h))


def test_port_in_use(srv):
    p = subprocess.run([serve_proc.INGOT, "serve", "--port", str(srv.port), "-t", "1"],
                       capture_output=True, text=True, timeout=120)
    check("a port in use: exit 1, saying why",
          p.returncode == 1 and "Address already in use" in p.stderr,
          (p.returncode, p.stderr[-300:]))


def test_version(srv):
    st, _, body = req(srv.port, "GET", "/version")
    out = subprocess.run([serve_proc.INGOT, "--version"], capture_output=True, text=True)
    check("GET /version agrees with ingot --version",
          st == 200 and out.returncode == 0 and out.stdout.strip() == "ingot " + body.get("version", "?"),
          (st, body, out.stdout))


def test_cors_listed():
    srv = serve_proc.Server("--allowed-origins", '["http://a.example", "http://b.example"]',
                            "-t", "2", "--disable-access-log", "--disable-log-stats",
                            "--log-stats-interval", "1", "--responses-store-mb", "0")
    try:
        port = srv.port
        for origin in ("http://a.example", "http://b.example"):
            st, h, _ = req(port, "OPTIONS", "/v1/models", key=None,
                           headers={"Origin": origin, "Access-Control-Request-Method": "GET"})
            check(f"listed origin {origin}: preflight echoes it",
                  st == 204 and hdr(h, "Access-Control-Allow-Origin") == origin and
                  hdr(h, "Vary") == "Origin", (st, h))
        st, h, body = req(port, "OPTIONS", "/v1/models", key=None,
                          headers={"Origin": "http://evil.example",
                                   "Access-Control-Request-Method": "GET"})
        check("an unlisted origin's preflight is a 400",
              st == 400 and hdr(h, "Access-Control-Allow-Origin") is None and
              "CORS" in body["error"]["message"], (st, h, body))
        st, h, _ = req(port, "GET", "/v1/models", headers={"Origin": "http://evil.example"})
        check("and its requests get no CORS header",
              st == 200 and hdr(h, "Access-Control-Allow-Origin") is None, h)
        st, _, body = req(port, "POST", "/v1/responses", {"input": "hi", "max_output_tokens": 2},
                          key=None)
        st2, _, body2 = req(port, "POST", "/v1/responses",
                            {"input": "hi", "previous_response_id": body.get("id", "x")},
                            key=None)
        st3, _, _ = req(port, "GET", "/v1/responses/" + body.get("id", "x"), key=None)
        check("--responses-store-mb 0: nothing stored, previous_response_id refused",
              st == 200 and body.get("store") is False and st2 == 400 and
              body2["error"]["code"] == "unsupported_parameter" and st3 == 404,
              (st, body, st2, body2, st3))
        req(port, "POST", "/v1/chat/completions", CHAT, key=None)
        time.sleep(2.5)
        check("--disable-access-log and --disable-log-stats: no such lines",
              not [l for l in srv.log if '"POST ' in l or "throughput" in l], srv.log)
    finally:
        srv.stop()
    srv = serve_proc.Server("--allowed-origins", "none", "-t", "2")
    try:
        st, h, _ = req(srv.port, "OPTIONS", "/v1/models", key=None,
                       headers={"Origin": "http://a.example",
                                "Access-Control-Request-Method": "GET"})
        check("--allowed-origins none: no CORS (OPTIONS is a 405)",
              st == 405 and hdr(h, "Access-Control-Allow-Origin") is None, (st, h))
    finally:
        srv.stop()
    p = subprocess.run([serve_proc.INGOT, "serve", "--log-stats-interval", "0"],
                       capture_output=True, text=True, timeout=60)
    check("a bad --log-stats-interval is refused",
          p.returncode == 2 and "bad value" in p.stderr, (p.returncode, p.stderr[:200]))


def main():
    t0 = time.time()
    srv = serve_proc.Server("--api-key", KEY, "-t", "2", "--log-stats-interval", "1")
    try:
        for fn in (test_cors_any, test_access_log, test_stats_log, test_request_ids,
                   test_version, test_port_in_use):
            fn(srv)
        alive = srv.p.poll() is None
    finally:
        srv.stop()
    check("the server never crashed", alive)
    test_cors_listed()
    return summary(t0, srv)


if __name__ == "__main__":
    sys.exit(main())
