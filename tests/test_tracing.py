"""OpenTelemetry tracing of `ingot serve --otlp-endpoint`: a tiny OTLP/HTTP
receiver (http.server on a free loopback port) collects what the server
posts to /v1/traces, and the spans are checked:

- OTLP JSON shape: resourceSpans/scopeSpans/spans, service.name, hex ids of
  the right length, times as decimal strings, integer kind and status;
- a request with a W3C traceparent gets a server span in that trace whose
  parent is the caller's span, with children queue, prefill and decode in
  the same trace, parented by the server span, in time order, carrying the
  token counts the response reported;
- the same long prompt again shows prefix-cache hit tokens;
- no traceparent, or a malformed one, starts a new trace (no parent) and
  the request still succeeds; streamed requests are traced too;
- a collector that is down costs requests nothing (they still answer)."""
import http.client
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_proc  # noqa: E402
from checks import check, results, summary  # noqa: E402

received = []  # (path, content type, parsed body)
lock = threading.Lock()




class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        with lock:
            received.append((self.path, self.headers.get("Content-Type"), doc))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *a):
        pass


def all_spans():
    out = []
    with lock:
        for _, _, doc in received:
            for rs in (doc or {}).get("resourceSpans", []):
                for ss in rs.get("scopeSpans", []):
                    out.extend(ss.get("spans", []))
    return out


def attrs(span):
    out = {}
    for a in span.get("attributes", []):
        v = a["value"]
        out[a["key"]] = int(v["intValue"]) if "intValue" in v else next(iter(v.values()))
    return out


def wait_spans(pred, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        got = [s for s in all_spans() if pred(s)]
        if got:
            return got
        time.sleep(0.1)
    return []


def post(port, body, headers=None, path="/v1/chat/completions"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json",
                                               **(headers or {})})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, data


def family(trace_id):
    """The server span of trace_id and its children by name."""
    srv = wait_spans(lambda s: s["traceId"] == trace_id and s["kind"] == 2)
    if not srv:
        return None, {}
    sid = srv[0]["spanId"]
    kids = wait_spans(lambda s: s.get("parentSpanId") == sid and s["name"] == "decode")
    kids = {s["name"]: s for s in all_spans() if s.get("parentSpanId") == sid}
    return srv[0], kids


def test_shape():
    with lock:
        docs = list(received)
    path, ctype, doc = docs[0]
    check("posted to /v1/traces as JSON", path == "/v1/traces" and
          (ctype or "").startswith("application/json") and doc is not None, (path, ctype))
    rs = doc["resourceSpans"][0]
    svc = [a for a in rs["resource"]["attributes"] if a["key"] == "service.name"]
    check("resource service.name", svc and svc[0]["value"] == {"stringValue": "ingot"}, rs)
    check("scope name", rs["scopeSpans"][0]["scope"]["name"] == "ingot", rs["scopeSpans"][0])
    ok = True
    for s in all_spans():
        ok &= len(s["traceId"]) == 32 and len(s["spanId"]) == 16 and \
            all(c in "0123456789abcdef" for c in s["traceId"] + s["spanId"])
        ok &= isinstance(s["startTimeUnixNano"], str) and s["startTimeUnixNano"].isdigit()
        ok &= int(s["endTimeUnixNano"]) >= int(s["startTimeUnixNano"])
        ok &= s["kind"] in (1, 2) and s["status"]["code"] in (1, 2)
    check("every span well formed", ok, all_spans()[:3])


def test_parent(port):
    tid, pid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    st, data = post(port, {"messages": [{"role": "user", "content": "Say hi."}],
                           "max_tokens": 6, "ignore_eos": True},
                    {"traceparent": f"00-{tid}-{pid}-01"})
    check("traced request answers", st == 200, data)
    usage = json.loads(data)["usage"]
    srv, kids = family(tid)
    check("server span in the caller's trace", srv is not None, all_spans())
    if not srv:
        return
    check("server span's parent is the caller's span", srv.get("parentSpanId") == pid, srv)
    a = attrs(srv)
    check("server span token counts", a.get("gen_ai.usage.input_tokens") ==
          usage["prompt_tokens"] and a.get("gen_ai.usage.output_tokens") ==
          usage["completion_tokens"], (a, usage))
    check("server span request attributes", a.get("gen_ai.request.max_tokens") == 6 and
          a.get("gen_ai.operation.name") == "chat" and "ingot.prefix_cache_hit_tokens" in a, a)
    check("children queue, prefill, decode", set(kids) == {"queue", "prefill", "decode"},
          list(kids))
    if set(kids) != {"queue", "prefill", "decode"}:
        return
    check("children in the same trace", all(k["traceId"] == tid for k in kids.values()), kids)
    t = [int(kids[n][f]) for n in ("queue", "prefill", "decode")
         for f in ("startTimeUnixNano", "endTimeUnixNano")]
    check("children in time order, inside the server span",
          t == sorted(t) and t[0] >= int(srv["startTimeUnixNano"]) and
          t[-1] <= int(srv["endTimeUnixNano"]), t)
    check("prefill input tokens", attrs(kids["prefill"]).get("gen_ai.usage.input_tokens") ==
          usage["prompt_tokens"], attrs(kids["prefill"]))
    check("decode output tokens", attrs(kids["decode"]).get("gen_ai.usage.output_tokens") ==
          usage["completion_tokens"], attrs(kids["decode"]))


def test_prefix_cache(port):
    prompt = "The history of the city of Lyon, told slowly and in great detail: " * 6
    ids = []
    for i in range(2):
        tid = f"{i + 1:032x}"
        post(port, {"prompt": prompt, "max_tokens": 2},
             {"traceparent": f"00-{tid}-{'ab' * 8}-01"}, path="/v1/completions")
        ids.append(tid)
    first, _ = family(ids[0])
    second, kids = family(ids[1])
    hits = attrs(second).get("ingot.prefix_cache_hit_tokens", 0) if second else -1
    check("completion traced", first is not None and
          attrs(first).get("gen_ai.operation.name") == "text_completion", first)
    check("second identical prompt: prefix-cache hit tokens > 0", hits > 0, second)
    check("prefill span carries the hits",
          attrs(kids.get("prefill", {})).get("ingot.prefix_cache_hit_tokens") == hits, kids)


def test_new_trace(port):
    for hdr in ({}, {"traceparent": "00-zzzz-not-valid"},
                {"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}):
        before = {s["spanId"] for s in all_spans()}
        st, data = post(port, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
                        hdr)
        rid = json.loads(data).get("id") if st == 200 else None
        got = wait_spans(lambda s: s["spanId"] not in before and s["kind"] == 2 and
                         attrs(s).get("gen_ai.response.id") == rid)
        check(f"new trace for {hdr or 'no header'}", st == 200 and got and
              "parentSpanId" not in got[0] and got[0]["traceId"] != "0" * 32, (st, got))


def test_stream(port):
    tid = "0af7651916cd43dd8448eb211c80319c"
    st, data = post(port, {"messages": [{"role": "user", "content": "Count."}], "max_tokens": 4,
                           "stream": True}, {"traceparent": f"00-{tid}-b7ad6b7169203331-01"})
    srv, kids = family(tid)
    check("streamed request traced", st == 200 and srv is not None and
          attrs(srv).get("ingot.stream") == 1 and "prefill" in kids, (st, srv, list(kids)))


def test_collector_down():
    srv = serve_proc.Server("-t", "2", "--otlp-endpoint", "http://127.0.0.1:9/v1/traces")
    try:
        t0 = time.time()
        st, _ = post(srv.port, {"messages": [{"role": "user", "content": "Hi"}],
                                "max_tokens": 2})
        check("collector down: request still answers", st == 200, st)
        check("collector down: no added latency", time.time() - t0 < 10, time.time() - t0)
    finally:
        srv.stop()


def main():
    rx = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=rx.serve_forever, daemon=True).start()
    srv = serve_proc.Server("-t", "2", "--otlp-endpoint",
                            f"http://127.0.0.1:{rx.server_address[1]}")
    t0 = time.time()
    try:
        test_parent(srv.port)
        test_shape()
        test_prefix_cache(srv.port)
        test_new_trace(srv.port)
        test_stream(srv.port)
        test_collector_down()
    except Exception as e:
        import traceback
        traceback.print_exc()
        check("no exception", False, repr(e))
    finally:
        srv.stop()
        rx.shutdown()
    return summary(t0, srv)


if __name__ == "__main__":
    sys.exit(main())
