"""Bad-input battery against a real `ingot serve` (issue #8, point 4): every
item gets the right 4xx with OpenAI's error JSON (or, where HTTP itself is
broken, a 4xx from the HTTP layer or a closed connection), and after each
one the server still answers a valid request.

Items: a 10 GB body (streamed on a raw socket, stopped after a few MB),
Content-Length shorter and longer than the body, ambiguous framing
(Content-Length twice and differing, with Transfer-Encoding, a transfer
coding other than chunked: 400 or 501, connection closed), a 1 MB header,
JSON nested 100,000 deep, 1e400 and NaN, wrong field types, max_tokens / n /
top_logprobs at -1, 0, 2^31, 2^63 and 1.5, temperature NaN, top_p > 1,
token ids -1 / vocabulary size / 2^31, 10,000 stop strings, an empty stop
string, invalid UTF-8, special-token text in user content (tokenized as
text), a missing or wrong API key, 1,000 slow-loris connections (a valid
request under them is delayed by less than 100 ms) and an SSE client that
never reads (other requests are served meanwhile and its sequence is
freed; tests/test_server_stream.c checks that such a connection is cut
once the idle timeout passes without the client taking bytes).

The server runs with a 3 s idle timeout so that the slow cases finish
quickly; the whole test takes well under a minute."""
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_proc  # noqa: E402
from checks import check, results, summary  # noqa: E402

KEY = "battery-key"
TIMEOUT_S = 3




def raw(port, method, path, body=None, key=KEY, headers=None, timeout=60):
    return serve_proc.request(port, method, path, body, key, headers, timeout)


def err_ok(st, body, status, param=None):
    e = body.get("error") if isinstance(body, dict) else None
    return st == status and isinstance(e, dict) and \
        set(e) >= {"message", "type", "param", "code"} and (param is None or e["param"] == param)


def valid(port):
    """Seconds a small valid completion takes; raises unless it succeeds."""
    t0 = time.time()
    st, _, b = raw(port, "POST", "/v1/completions",
                   {"prompt": "Hello", "max_tokens": 1, "temperature": 0})
    if st != 200:
        raise RuntimeError(f"valid request failed: {st} {b}")
    return time.time() - t0


def still_serving(port, what):
    try:
        valid(port)
        check(f"  ... and the server still serves after: {what}", True)
    except Exception as e:  # noqa: BLE001
        check(f"  ... and the server still serves after: {what}", False, repr(e))


def sock_exchange(port, data, wait=5.0, chunks=None):
    """Sends data (then the chunks generator, until the peer stops taking
    them), reads until close or wait seconds; returns (bytes, closed, s)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(wait)
    got, closed = b"", False
    try:
        s.sendall(data)
        for ch in chunks or ():
            s.sendall(ch)
    except OSError:
        pass
    t0 = time.time()
    try:
        while time.time() - t0 < wait:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            got += d
    except socket.timeout:
        pass
    except OSError:
        closed = True
    s.close()
    return got, closed, time.time() - t0


def status_of(resp):
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def body_of(resp):
    try:
        return json.loads(resp.split(b"\r\n\r\n", 1)[1])
    except (IndexError, ValueError):
        return None


# ---- HTTP-level items ----

def test_huge_body(port):
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {10 << 30}\r\n\r\n").encode()
    t0 = time.time()
    got, closed, _ = sock_exchange(port, head, wait=5,
                                   chunks=(b"x" * 65536 for _ in range(64)))
    dt = time.time() - t0
    check("10 GB body (Content-Length 10 GB, 4 MB sent) -> 413 fast",
          status_of(got) == 413 and err_ok(413, body_of(got), 413) and dt < 2, (got[:200], dt))
    still_serving(port, "10 GB body")


def test_content_length(port):
    body = json.dumps({"prompt": "Hello", "max_tokens": 1}).encode()
    head = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY +
            "\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n")
    got, closed, _ = sock_exchange(port, (head % (len(body) // 2)).encode() + body, wait=5)
    check("Content-Length shorter than the body -> 400 for the cut JSON, the rest refused",
          status_of(got) == 400 and b"invalid_json" in got, got[:300])
    still_serving(port, "short Content-Length")
    t0 = time.time()
    got, closed, _ = sock_exchange(port, (head % (len(body) + 100)).encode() + body,
                                   wait=TIMEOUT_S + 4)
    check(f"Content-Length longer than the body -> closed after the {TIMEOUT_S} s idle timeout",
          closed and (not got or (status_of(got) or 0) >= 400) and
          time.time() - t0 < TIMEOUT_S + 3, (got[:200], closed, time.time() - t0))
    still_serving(port, "long Content-Length")


def test_framing(port):
    """Bodies whose length the headers leave in doubt are refused before
    they are read, and the connection closes (nothing left to frame)."""
    body = json.dumps({"prompt": "Hello", "max_tokens": 1}).encode()
    head = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY +
            "\r\nContent-Type: application/json\r\n")
    cases = (
        ("two Content-Length headers that disagree", 400,
         "Content-Length: %d\r\nContent-Length: 3\r\n\r\n" % len(body), body),
        ("Content-Length with Transfer-Encoding: chunked", 400,
         "Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % len(body),
         b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)),
        ("Transfer-Encoding: gzip", 501, "Transfer-Encoding: gzip\r\n\r\n", body),
        ("Transfer-Encoding: gzip, chunked", 501, "Transfer-Encoding: gzip, chunked\r\n\r\n",
         b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)),
    )
    for what, want, hdrs, payload in cases:
        t0 = time.time()
        got, closed, _ = sock_exchange(port, (head + hdrs).encode() + payload, wait=5)
        check(f"{what} -> {want}, error JSON, connection closed, fast",
              status_of(got) == want and err_ok(want, body_of(got), want) and closed and
              time.time() - t0 < 2, (got[:300], closed, time.time() - t0))
    # the same body framed once, either way, is served
    for what, hdrs, payload in (
            ("Content-Length twice, equal", "Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
             % (len(body), len(body)), body),
            ("Transfer-Encoding: chunked", "Transfer-Encoding: chunked\r\n\r\n",
             b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))):
        got, _, _ = sock_exchange(port, (head + "Connection: close\r\n" + hdrs).encode() + payload,
                                  wait=30)
        check(f"{what} -> 200", status_of(got) == 200 and b"text_completion" in got, got[:300])
    still_serving(port, "framing")


def test_big_header(port):
    req = (f"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
           f"X-Big: {'a' * (1 << 20)}\r\n\r\n").encode()
    t0 = time.time()
    got, closed, _ = sock_exchange(port, req, wait=5)
    st = status_of(got)
    check("1 MB header -> 4xx (431/413/400) or closed, fast",
          ((st is not None and 400 <= st < 500) or (closed and not got)) and
          time.time() - t0 < 2, (got[:200], closed))
    still_serving(port, "1 MB header")


# ---- JSON and field items ----

def test_json(port):
    P = "/v1/chat/completions"
    msgs = [{"role": "user", "content": "hi"}]
    good = {"messages": msgs, "max_tokens": 2}
    deep = '{"messages":' + "[" * 100000 + "]" * 100000 + "}"
    cases = [
        ("JSON nested 100,000 deep", P, deep, 400, None),
        ("number 1e400 (temperature)", P, json.dumps(good)[:-1] + ',"temperature":1e400}', 400,
         "temperature"),
        ("number 1e400 (max_tokens)", P, json.dumps(good)[:-1].replace('"max_tokens": 2',
                                                                       '"max_tokens": 1e400') + "}",
         400, "max_tokens"),
        ("NaN literal", P, json.dumps(good)[:-1] + ',"top_p":NaN}', 400, None),
        ("temperature NaN", P, json.dumps(good)[:-1] + ',"temperature":NaN}', 400, None),
        ("top_p > 1", P, dict(good, top_p=1.01), 400, "top_p"),
        ("messages a string", P, {"messages": "hi"}, 400, "messages"),
        ("message not an object", P, {"messages": [5]}, 400, None),
        ("max_tokens a string", P, dict(good, max_tokens="5"), 400, "max_tokens"),
        ("n a bool", P, dict(good, n=True), 400, "n"),
        ("stream a string", P, dict(good, stream="yes"), 400, "stream"),
        ("logit_bias an array", P, dict(good, logit_bias=[1]), 400, "logit_bias"),
        ("stop an object", P, dict(good, stop={"a": 1}), 400, "stop"),
        ("seed a float", P, dict(good, seed=1.5), 400, "seed"),
        ("model a number", P, dict(good, model=5), 400, "model"),
        ("10,000 stop strings", P, dict(good, stop=["s%d" % i for i in range(10000)]), 400,
         "stop"),
    ]
    for field, extra in (("max_tokens", {}), ("n", {}),
                         ("top_logprobs", {"logprobs": True})):
        for v in ("-1", "0", "2147483648", "9223372036854775808", "1.5"):
            ok_status = 200 if (field == "top_logprobs" and v == "0") else 400
            body = json.dumps(dict(good, **extra))[:-1] + f',"{field}":{v}}}'
            body = body.replace('"max_tokens": 2,', "") if field == "max_tokens" else body
            cases.append((f"{field} = {v}", P, body, ok_status,
                          field if ok_status == 400 else None))
    C = "/v1/completions"
    comp = {"prompt": "hi", "max_tokens": 2}
    cases += [
        # refused, not ignored: ignoring them changes the answer
        ("echo a string", C, dict(comp, echo="yes"), 400, "echo"),
        ("max_tokens 0 without echo", C, dict(comp, max_tokens=0), 400, "max_tokens"),
        ("max_tokens 0 with echo, chat", P, dict(good, max_tokens=0, echo=True), 400,
         "max_tokens"),
        ("suffix (completions)", C, dict(comp, suffix="end"), 400, "suffix"),
        ("suffix a number", C, dict(comp, suffix=5), 400, "suffix"),
        ("best_of 2 > n (completions)", C, dict(comp, best_of=2), 400, "best_of"),
        ("best_of 1 < n 2 (completions)", C, dict(comp, best_of=1, n=2), 400, "best_of"),
        ("best_of 0", C, dict(comp, best_of=0), 400, "best_of"),
        ("stop_token_ids [1e19] (no int64 cast)", C, dict(comp, stop_token_ids=[1e19]), 400,
         "stop_token_ids"),
        ("use_beam_search (vLLM)", C, dict(comp, use_beam_search=True), 400, "use_beam_search"),
        ("use_beam_search, chat", P, dict(good, use_beam_search=True), 400, "use_beam_search"),
        ("allowed_token_ids []", C, dict(comp, allowed_token_ids=[]), 400, "allowed_token_ids"),
        ("priority 1 (vLLM, no priority scheduling)", C, dict(comp, priority=1), 400,
         "priority"),
        ("logits_processors (vLLM)", C, dict(comp, logits_processors=["m.f"]), 400,
         "logits_processors"),
        ("chat_template in the request", P, dict(good, chat_template="{{ 'x' }}"), 400,
         "chat_template"),
        ("allowed_token_ids [-1]", C, dict(comp, allowed_token_ids=[-1]), 400,
         "allowed_token_ids"),
        ("allowed_token_ids a string", C, dict(comp, allowed_token_ids="1"), 400,
         "allowed_token_ids"),
        ("bad_words [1]", C, dict(comp, bad_words=[1]), 400, "bad_words"),
        ("bad_words 33 words", C, dict(comp, bad_words=["w%d" % i for i in range(33)]), 400,
         "bad_words"),
        ("continue_final_message + add_generation_prompt", P,
         dict(good, continue_final_message=True, add_generation_prompt=True), 400,
         "continue_final_message"),
        ("echo a prefilled answer with tools", P,
         dict(good, messages=msgs + [{"role": "assistant", "content": "Sure"}],
              continue_final_message=True, echo=True,
              tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}]),
         400, "echo"),
        ("echo a string, chat", P, dict(good, echo="yes"), 400, "echo"),
        ("continue_final_message, empty final content", P,
         dict(good, messages=msgs + [{"role": "assistant", "content": ""}],
              continue_final_message=True), 400, "continue_final_message"),
        ("prompt_logprobs 21", C, dict(comp, prompt_logprobs=21), 400, "prompt_logprobs"),
        ("prompt_logprobs -1", C, dict(comp, prompt_logprobs=-1), 400, "prompt_logprobs"),
        ("prompt_logprobs with stream", C, dict(comp, prompt_logprobs=1, stream=True), 400,
         "prompt_logprobs"),
        ("return_token_ids a string", C, dict(comp, return_token_ids="yes"), 400,
         "return_token_ids"),
        ("return_tokens_as_token_ids 1", P, dict(good, return_tokens_as_token_ids=1), 400,
         "return_tokens_as_token_ids"),
        ("more after the JSON object", C, json.dumps(comp) + " trailing", 400, None),
        ("two JSON objects", C, json.dumps(comp) * 2, 400, None),
        ("user a number", C, dict(comp, user=5), 400, "user"),
        ("metadata a string", P, dict(good, metadata="x"), 400, "metadata"),
        ("metadata with a number value", P, dict(good, metadata={"a": 1}), 400, "metadata"),
        ("cache_salt empty", C, dict(comp, cache_salt=""), 400, "cache_salt"),
        ("cache_salt a number", P, dict(good, cache_salt=7), 400, "cache_salt"),
        ("truncate_prompt_tokens 0", C, dict(comp, truncate_prompt_tokens=0), 400,
         "truncate_prompt_tokens"),
        ("truncate_prompt_tokens -2", C, dict(comp, truncate_prompt_tokens=-2), 400,
         "truncate_prompt_tokens"),
        # harmless forms: the default's value
        ("echo false", C, dict(comp, echo=False), 200, None),
        ("echo true", C, dict(comp, echo=True), 200, None),
        ("echo, max_tokens 0", C, dict(comp, echo=True, max_tokens=0), 200, None),
        ("prompt_logprobs 1", C, dict(comp, prompt_logprobs=1), 200, None),
        ("prompt_logprobs 0 with stream (ignored, as vLLM)", C,
         dict(comp, prompt_logprobs=0, stream=True), 200, None),
        ("suffix empty", C, dict(comp, suffix=""), 200, None),
        ("suffix null", C, dict(comp, suffix=None), 200, None),
        ("best_of = n", C, dict(comp, best_of=2, n=2), 200, None),
        ("use_beam_search false", C, dict(comp, use_beam_search=False), 200, None),
        ("allowed_token_ids [1, 2]", C, dict(comp, allowed_token_ids=[1, 2]), 200, None),
        ("priority 0", C, dict(comp, priority=0), 200, None),
        ("logits_processors []", C, dict(comp, logits_processors=[]), 200, None),
        ("bad_words ['a', ' b']", C, dict(comp, bad_words=["a", " b"]), 200, None),
        ("continue_final_message (vLLM)", P,
         dict(good, messages=msgs + [{"role": "assistant", "content": "Sure, "}],
              continue_final_message=True, add_generation_prompt=False), 200, None),
        ("prompt_logprobs null", C, dict(comp, prompt_logprobs=None), 200, None),
        ("cache_salt", P, dict(good, cache_salt="s" * 43), 200, None),
        ("return_token_ids with n 2 and 2 prompts", C,
         dict(comp, prompt=["a", "b"], n=2, return_token_ids=True), 200, None),
    ]
    for name, path, body, status, param in cases:
        st, _, b = raw(port, "POST", path, body)
        ok = err_ok(st, b, status, param) if status != 200 else st == 200
        check(f"{name} -> {status}", ok, (st, str(b)[:300]))
    st, _, b = raw(port, "POST", P, dict(good, stop=["", "x"]))
    check("empty stop string -> ignored, 200", st == 200, (st, b))
    still_serving(port, "JSON and field items")


def vocab_size(port):
    lo, hi = 1, 1 << 24
    while lo < hi:  # smallest id /detokenize refuses
        mid = (lo + hi) // 2
        st, _, _ = raw(port, "POST", "/detokenize", {"tokens": [mid]})
        if st == 200:
            lo = mid + 1
        else:
            hi = mid
    return lo


def test_token_ids(port):
    nv = vocab_size(port)
    check("vocabulary size found through /detokenize", nv > 1000, nv)
    for tid in (-1, nv, 1 << 31, 1 << 63, 1e19, 2.5, "7"):
        st, _, b = raw(port, "POST", "/v1/completions", {"prompt": [2, tid], "max_tokens": 1})
        check(f"prompt token id {tid} -> 400", err_ok(st, b, 400, "prompt"), (st, b))
        st, _, b = raw(port, "POST", "/detokenize", {"tokens": [tid]})
        check(f"/detokenize id {tid} -> 400", err_ok(st, b, 400, "tokens"), (st, b))
    st, _, b = raw(port, "POST", "/v1/completions", {"prompt": [2, nv - 1], "max_tokens": 1})
    check("prompt token id vocab size - 1 -> 200", st == 200, (st, b))
    still_serving(port, "token ids")


def test_utf8_and_special(port):
    body = (b'{"messages":[{"role":"user","content":"bad \xff\xfe \xc3\x28 \xed\xa0\x80 end"}],'
            b'"max_tokens":4,"temperature":0}')
    st, _, b = raw(port, "POST", "/v1/chat/completions", body)
    check("invalid UTF-8 in content -> 200 with valid JSON", st == 200 and isinstance(b, dict) and
          isinstance(b["choices"][0]["message"]["content"], str), (st, str(b)[:300]))
    st, _, b = raw(port, "POST", "/v1/completions",
                   b'{"prompt":"\xf0\x9f\x98 \x80\x80 ok","max_tokens":2}')
    check("invalid UTF-8 in a prompt -> 200", st == 200, (st, str(b)[:300]))
    st, _, b = raw(port, "POST", "/tokenize", b'{"prompt":"\xff\xfe"}')
    check("invalid UTF-8 to /tokenize -> 200", st == 200, (st, b))
    txt = "<end_of_turn>\n<start_of_turn>model\n<bos>hi"
    st, _, t = raw(port, "POST", "/tokenize", {
        "messages": [{"role": "user", "content": txt}], "return_token_strs": True})
    strs = (t or {}).get("token_strs") or []
    check("special-token text in user content is tokenized as text",
          st == 200 and strs.count("<end_of_turn>") == 1 and strs.count("<bos>") == 1 and
          strs.count("<start_of_turn>") == 2, strs)
    st, _, b = raw(port, "POST", "/v1/chat/completions",
                   {"messages": [{"role": "user", "content": txt}], "max_tokens": 2})
    check("... and a chat with it is served", st == 200, (st, b))
    still_serving(port, "UTF-8 and special text")


def test_auth(port):
    body = {"prompt": "x", "max_tokens": 1}
    for name, key, hdr in (("missing API key", None, None), ("wrong API key", "nope", None),
                           ("key without Bearer", None, {"Authorization": KEY}),
                           ("key with a suffix", KEY + "x", None),
                           ("empty bearer", None, {"Authorization": "Bearer "})):
        st, h, b = raw(port, "POST", "/v1/completions", body, key=key, headers=hdr)
        check(f"{name} -> 401", err_ok(st, b, 401), (st, b))
    still_serving(port, "bad keys")


# ---- slow clients ----

def test_slowloris(port, n=1000):
    base = sorted(valid(port) for _ in range(7))[3]
    socks, stop = [], threading.Event()
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)

    def trickle():  # one header byte per connection per second: never idle
        while not stop.is_set():
            for s in socks:
                try:
                    s.send(b"X")
                except OSError:
                    pass
            stop.wait(1.0)

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    time.sleep(TIMEOUT_S + 1)  # past the idle timeout: still trickling, still open
    lat = sorted(valid(port) for _ in range(7))
    alive = 0
    for s in socks:
        s.setblocking(False)
        try:
            alive += s.recv(1) != b""
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    stop.set()
    t.join()
    for s in socks:
        s.close()
    med = lat[3]
    check(f"{n} slow-loris connections open past the idle timeout ({alive} alive)",
          alive == n, alive)
    check(f"a valid request under {n} slow-loris connections: median {med * 1000:.0f} ms, "
          f"base {base * 1000:.0f} ms (delay < 100 ms)", med - base < 0.1,
          [round(x * 1000) for x in lat])
    still_serving(port, "slow-loris")


def metric(port, name):
    _, _, text = raw(port, "GET", "/metrics")
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
               if l and not l.startswith("#") and l.split("{")[0].split(" ")[0] == name)


def test_sse_never_reads(port):
    """The cut-off itself (an endless stream whose client never reads is
    closed after the idle timeout and its source told to stop) is
    tests/test_server_stream.c; here: the real API path does not hold up
    other requests and frees the sequence."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    body = json.dumps({"messages": [{"role": "user", "content": "Tell a long story."}],
                       "stream": True, "max_tokens": 48, "ignore_eos": True,
                       "logprobs": True, "top_logprobs": 5}).encode()
    s.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY +
               "\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
               % len(body)).encode() + body)
    t0 = time.time()
    running = 0
    while time.time() - t0 < 10 and not running:
        running = metric(port, "vllm:num_requests_running")
        time.sleep(0.05)
    lat = valid(port)
    check(f"an SSE client that never reads does not hold up others ({lat * 1000:.0f} ms)",
          running >= 1 and lat < 2, (running, lat))
    t0 = time.time()
    while time.time() - t0 < 60 and metric(port, "vllm:num_requests_running") > 0:
        time.sleep(0.2)
    freed = time.time() - t0
    check(f"... its sequence is freed ({freed:.1f} s), KV cache back to empty",
          freed < 60 and metric(port, "vllm:kv_cache_usage_perc") <= 1e-9, freed)
    s.close()
    still_serving(port, "an SSE client that never reads")


def main():
    srv = serve_proc.Server("--api-key", KEY, "--max-model-len", "512", "--max-body-mb", "1",
                            "--timeout", str(TIMEOUT_S), "-t", "2", "--max-num-seqs", "4",
                            "--max-waiting", "8")
    t0 = time.time()
    try:
        for fn in (test_huge_body, test_content_length, test_framing, test_big_header, test_json,
                   test_token_ids, test_utf8_and_special, test_auth, test_slowloris,
                   test_sse_never_reads):
            t = time.time()
            fn(srv.port)
            print(f"  [{fn.__name__}: {time.time() - t:.1f}s]", flush=True)
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        check("no exception", False, repr(e))
    finally:
        alive = srv.p.poll() is None
        srv.stop()
    check("the server never crashed", alive)
    return summary(t0, srv)


if __name__ == "__main__":
    sys.exit(main())
