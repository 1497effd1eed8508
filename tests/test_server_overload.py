"""Overload and client faults against a real `ingot serve` (issue #8, point 5);
tests/test_server.py already has the basic 429 and SIGTERM cases, this
pushes further:

  - a burst of 4x capacity (max-num-seqs + max-waiting) at once: the excess
    gets 429 with Retry-After fast (p99 of the rejections < 50 ms, scaled
    by the load average per core when the machine is shared), every
    admitted request completes;
  - one request of more choices than that capacity: 400 (a 429 would be
    retried forever);
  - clients that leave before sending all headers, during prefill (a long
    prompt, closed right after sending) and mid-stream: within 1 s nothing
    is running and the KV cache is back to its baseline;
  - every sequence slot filled at once with prompts near max-model-len and
    a KV pool too small for all of them: all complete (preemption), none
    fails;
  - SIGTERM with requests running and waiting: they all complete, a new
    request gets 503 or a refused connection, the server exits 0."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_proc  # noqa: E402
from checks import check, results, summary  # noqa: E402

SEQS, WAITING, MAX_LEN = 4, 4, 256




def post(port, body, path="/v1/completions", timeout=300):
    """(status, headers, parsed body, seconds to the whole answer)."""
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    dt = time.time() - t0
    c.close()
    try:
        data = json.loads(data)
    except ValueError:
        pass
    return r.status, dict(r.getheaders()), data, dt


def idle_within(port, secs, base_kv):
    """Seconds until nothing runs or waits and KV usage <= base_kv, or None."""
    t0 = time.time()
    while time.time() - t0 < secs:
        m = serve_proc.metrics(port)
        if m.get("vllm:num_requests_running", 0) == 0 and \
                m.get("vllm:num_requests_waiting", 0) == 0 and \
                m.get("vllm:kv_cache_usage_perc", 0) <= base_kv + 1e-9:
            return time.time() - t0
        time.sleep(0.02)
    return None


def wait_running(port, n=1, secs=30):
    t0 = time.time()
    while time.time() - t0 < secs:
        if serve_proc.metrics(port).get("vllm:num_requests_running", 0) >= n:
            return True
        time.sleep(0.02)
    return False


def test_burst(port):
    """Connections are opened first, then every request is written at once
    from one thread and the answers collected with select (no client
    threads competing for the interpreter); latency is from a request's
    send to the end of its answer."""
    import selectors
    n = 4 * (SEQS + WAITING)
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    sent, got = {}, {}
    for i, s in enumerate(socks):
        data = json.dumps({"prompt": f"Count {i} to ten:", "max_tokens": 8, "ignore_eos": True,
                           "temperature": 0}).encode()
        sent[s] = time.time()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                  % len(data) + data)
        s.setblocking(False)
        got[s] = b""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    done = {}
    t0 = time.time()
    while len(done) < n and time.time() - t0 < 300:
        for key, _ in sel.select(1):
            d = key.fileobj.recv(65536)
            if d:
                got[key.fileobj] += d
            else:
                done[key.fileobj] = time.time() - sent[key.fileobj]
                sel.unregister(key.fileobj)
                key.fileobj.close()
    res = []
    for s in socks:
        head, _, rest = got[s].partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        try:
            body = json.loads(rest)
        except ValueError:
            body = rest
        res.append((int(lines[0].split(" ")[1]) if lines[0] else 0,
                    dict(l.split(": ", 1) for l in lines[1:] if ": " in l), body, done.get(s, 1e9)))
    ok = [r for r in res if r[0] == 200]
    rej = [r for r in res if r[0] in (429, 503)]
    other = [r[:3] for r in res if r[0] not in (200, 429, 503)]
    lat = sorted(r[3] for r in rej)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else None
    # 50 ms on a machine of our own; on a shared one (load average above
    # the core count) the bound scales with the load per core, and a host
    # slowed by its neighbours (steal time, not in the load average) is
    # read off the served requests: a rejection must take under a quarter
    # of the fastest of them, whose 8 tokens it would otherwise wait for
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    fastest = min((r[3] for r in ok), default=0.0)
    bound = max(0.05 * max(1.0, load), 0.25 * fastest)
    check(f"burst of {n} (4x capacity): {len(ok)} served, {len(rej)} rejected, "
          f"rejection p50 {lat[len(lat) // 2] * 1000 if lat else 0:.1f} ms, "
          f"p99 {p99 * 1000 if p99 else 0:.1f} ms (bound {bound * 1000:.0f} ms at load "
          f"{load:.1f}/core, fastest served {fastest * 1000:.0f} ms)",
          ok and rej and not other and p99 is not None and p99 < bound, (other, lat[-5:]))
    check("rejections carry Retry-After and OpenAI's error shape",
          all("Retry-After" in r[1] and isinstance(r[2], dict) and "error" in r[2] for r in rej),
          [r[:3] for r in rej[:2]])
    check("every admitted request completed",
          all(r[2]["usage"]["completion_tokens"] == 8 for r in ok), [r[2] for r in ok[:2]])


def test_too_many_choices(port):
    """More choices (n x prompts) than running and waiting sequences
    together can never be admitted: 400 naming n, not a 429 that a
    retrying client would repeat forever; exactly that many are served."""
    cap = SEQS + WAITING
    st, hdr, body, _ = post(port, {"prompt": "Hi", "max_tokens": 2, "n": cap + 1})
    check(f"n = {cap + 1} (over --max-num-seqs + --max-waiting): 400 on n, no Retry-After",
          st == 400 and isinstance(body, dict) and body["error"]["param"] == "n" and
          "Retry-After" not in hdr, (st, hdr, body))
    st, _, body, _ = post(port, {"prompt": ["Hi", "Ho", "Ha"], "max_tokens": 2, "n": 3})
    check(f"3 prompts x n = 3 (over {cap}): 400", st == 400, (st, body))
    st, _, body, _ = post(port, {"prompt": "Hi", "max_tokens": 2, "n": cap,
                                 "temperature": 0})
    check(f"n = {cap}: served, {cap} choices",
          st == 200 and len(body.get("choices", [])) == cap, (st, body))


def test_disconnects(port):
    idle_within(port, 30, 1.0)
    base = serve_proc.metrics(port).get("vllm:kv_cache_usage_perc", 0)
    # before headers
    socks = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
        socks.append(s)
    for s in socks:
        s.close()
    dt = idle_within(port, 1.0, base)
    check("20 disconnects before the headers: nothing running", dt is not None, dt)
    # during prefill: a long prompt, closed right after sending it
    long_prompt = "The history of the world, told in many small chapters. " * 20
    for k in range(3):
        s = socket.create_connection(("127.0.0.1", port))
        body = json.dumps({"prompt": long_prompt + str(k), "max_tokens": 32}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                  b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(0.05)
        s.close()
    dt = idle_within(port, 1.0, base)
    check(f"disconnects during prefill: idle, KV at baseline within 1 s "
          f"({dt if dt is None else round(dt, 2)} s)", dt is not None, dt)
    # mid-stream, several at once (raw sockets: http.client's response
    # object would keep the descriptor open after close)
    socks = []
    for k in range(SEQS):
        s = socket.create_connection(("127.0.0.1", port))
        body = json.dumps({"prompt": f"Story {k}:", "stream": True, "max_tokens": 200,
                           "ignore_eos": True}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        socks.append(s)
    for s in socks:  # the first token has come: the sequence is running
        buf = b""
        while b"data: " not in buf:
            buf += s.recv(4096)
    running = serve_proc.metrics(port).get("vllm:num_requests_running", 0)
    for s in socks:
        s.close()
    dt = idle_within(port, 1.0, base)
    if dt is None:
        later = idle_within(port, 10.0, base)
        print("     not idle after 1 s; idle after", later, "s more;", serve_proc.metrics(port))
    check(f"{SEQS} disconnects mid-stream ({running:.0f} running): idle, KV at baseline "
          f"within 1 s ({dt if dt is None else round(dt, 2)} s)", running >= 1 and dt is not None,
          dt)


def test_full_slots(port):
    m0 = serve_proc.metrics(port)
    # near-maximum prompts, all different (no prefix sharing), each filling
    # its context: the pool holds about 2.5 of them
    words = ["alpha", "bravo", "charlie", "delta", "echo", "fox", "golf", "hotel"]
    prompts = [" ".join(words[(i + j) % 8] + str(j % 7) for j in range(60)) for i in range(SEQS)]

    def one(p):
        # max_tokens null: generate until the context is full
        return post(port, {"prompt": p, "temperature": 0, "ignore_eos": True, "max_tokens": None})

    t0 = time.time()
    with ThreadPoolExecutor(SEQS) as ex:
        res = list(ex.map(one, prompts))
    dt = time.time() - t0
    m1 = serve_proc.metrics(port)
    pre = m1.get("vllm:num_preemptions_total", 0) - m0.get("vllm:num_preemptions_total", 0)
    ok = [r for r in res if r[0] == 200]
    check(f"{SEQS} near-max-length requests on a pool for ~2.5: all complete "
          f"({len(ok)}/{SEQS} in {dt:.0f} s, {pre:.0f} preemptions)",
          len(ok) == SEQS and pre >= 1 and all(r[2]["choices"][0]["finish_reason"] == "length"
                                              for r in ok),
          [(r[0], str(r[2])[:200]) for r in res if r[0] != 200])


def test_sigterm(srv):
    port = srv.port
    conns = []
    for k in range(SEQS + 2):  # some run, some wait
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", "/v1/completions", json.dumps(
            {"prompt": f"Drain {k}:", "max_tokens": 12, "ignore_eos": True}),
            {"Content-Type": "application/json"})
        conns.append(c)
    wait_running(port, 1)
    srv.p.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    t_late = time.time()
    try:
        st = post(port, {"prompt": "late", "max_tokens": 1}, timeout=10)[0]
    except ConnectionRefusedError:
        st = "refused"  # the listen socket stopped listening at once
    except OSError as e:  # a reset or a timeout: left hanging in the backlog
        st = repr(e)
    t_late = time.time() - t_late
    statuses = []
    for c in conns:
        r = c.getresponse()
        b = json.loads(r.read())
        statuses.append((r.status, b.get("usage", {}).get("completion_tokens")))
        c.close()
    try:
        rc = srv.p.wait(60)
    except subprocess.TimeoutExpired:
        rc = None
    check("SIGTERM: running and waiting requests complete, a new one is refused at once "
          "(503 or connection refused, not reset), exit 0",
          all(s == (200, 12) for s in statuses) and st in (503, "refused") and t_late < 2 and
          rc == 0, (statuses, st, t_late, rc))


def main():
    args = ["-t", "2", "--max-num-seqs", str(SEQS), "--max-waiting", str(WAITING),
            "--max-model-len", str(MAX_LEN)]
    srv = serve_proc.Server(*args)
    t0 = time.time()
    try:
        for fn in (test_burst, test_too_many_choices, test_disconnects):  # noqa
            t = time.time()
            fn(srv.port)
            print(f"  [{fn.__name__}: {time.time() - t:.1f}s]", flush=True)
        test_sigterm(srv)
        srv.stop()
        # a pool of about 2.5 full contexts (gemma-3-270m: 18 KB of F16 KV,
        # the default type, per token)
        srv = serve_proc.Server(*args, "--kv-cache-mb", str(int(2.5 * MAX_LEN * 18432 / 1e6)))
        t = time.time()
        test_full_slots(srv.port)
        print(f"  [test_full_slots: {time.time() - t:.1f}s]", flush=True)
        check("the server never crashed", srv.p.poll() is None)
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        check("no exception", False, repr(e))
    finally:
        srv.stop()
    return summary(t0, srv)


if __name__ == "__main__":
    sys.exit(main())
