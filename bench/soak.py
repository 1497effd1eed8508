"""Soak test of `ingot serve` (driven by bench/soak.sh; see there for usage).

Starts the server, keeps CONCURRENCY clients busy for DURATION seconds with
a mix of chat and completion requests (streamed or not; some with bad
words, allowed token ids, per-chunk usage, a prefilled answer to continue,
or the prompt scored: echo with logprobs, prompt_logprobs; or token ids
returned), of which about 10% are dropped at a random point (before the
body, mid-body, after the headers, mid-stream) and 5% are malformed (bad JSON, wrong types, out of
range values, unknown paths). Meanwhile it samples the server's resident
memory and open descriptors once a second.

Pass criteria (exit status 1 when any fails):
  - the server is alive at the end (no crash);
  - no 5xx answer to a valid request (429 is counted, not a failure);
  - malformed requests get 4xx;
  - resident memory at the end of the run is within RSS_GROWTH (1%) of
    its level after the warm-up (the first WARMUP fraction, 0.3, of the
    run; the server's buffers are made and written at start, so it is
    flat after the first seconds of load, as the connection threads'
    allocator arenas come into use);
  - within 2 s of the load stopping: nothing running or waiting, KV cache
    usage 0 and the open descriptors back to their count before the load;
  - SIGTERM then ends the server with status 0 (with an ASan build,
    INGOT_BIN=build/asan/ingot, that includes leak detection; give it
    ASAN_OPTIONS=quarantine_size_mb=0 too, or ASan's quarantine of freed
    memory grows RSS by a few percent and fails the RSS check).
Before the load, 16 long requests fill the KV pool once, so that its pages
are resident before memory is measured.
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from serve_proc import metrics  # noqa: E402  (the tests' /metrics reader)

MALFORMED = [
    ("/v1/chat/completions", b'{"messages": ['),
    ("/v1/chat/completions", b'[1, 2]'),
    ("/v1/chat/completions", b'{"messages":[{"role":"user","content":"x"}],"temperature":NaN}'),
    ("/v1/chat/completions", b'{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}'),
    ("/v1/chat/completions", b'{"messages":[{"role":"user","content":"x"}],"n":1.5}'),
    ("/v1/chat/completions", b'{"messages":"x"}'),
    ("/v1/chat/completions", b'{"messages":[{"role":"wizard","content":"x"}]}'),
    ("/v1/completions", b'{"prompt":[1,2,-1]}'),
    ("/v1/completions", b'{"prompt":"x","top_p":7}'),
    ("/v1/completions", b'{"prompt":{"a":1}}'),
    ("/v1/completions", b'{"prompt":"x","stop":' + json.dumps(["s"] * 100).encode() + b'}'),
    ("/v1/nothing", b'{}'),
    ("/v1/completions", b'{"prompt":"x","logit_bias":{"abc":1}}'),
    ("/v1/responses", b'{"input":[{"type":"function_call"}]}'),
    ("/v1/responses", b'{"input":"x","previous_response_id":"resp_1"}'),
    ("/v1/responses", b'{"input":"x","tools":[{"type":"web_search"}]}'),
]

WORDS = ("the a river mountain story robot city night light song window garden "
         "ocean train letter market winter dream engine paper").split()


class Stats:
    def __init__(self):
        self.mu = threading.Lock()
        self.c = {}
        self.failures = []

    def add(self, key, fail=None):
        with self.mu:
            self.c[key] = self.c.get(key, 0) + 1
            if fail and len(self.failures) < 20:
                self.failures.append(fail)


def start_server(binary, extra):
    p = subprocess.Popen([binary, "serve", "--port", "0", *extra], stderr=subprocess.PIPE,
                         text=True)
    port, log = None, []
    t0 = time.time()
    while time.time() - t0 < 180:
        line = p.stderr.readline()
        if not line:
            break
        log.append(line)
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        p.kill()
        raise RuntimeError("server did not start:\n" + "".join(log))
    threading.Thread(target=lambda: [log.append(l) for l in p.stderr], daemon=True).start()
    return p, port, log


def proc_rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def proc_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def prompt(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40)))


def responses_body(rng):
    """A Responses API request (what agent SDKs send): instructions, input
    items, maybe a function tool and a finished call's output."""
    body = {"max_output_tokens": rng.randint(4, 24), "stream": rng.random() < 0.5,
            "temperature": rng.choice([0, 0.7, 1.0])}
    if rng.random() < 0.3:
        body["store"] = False  # else kept in the server's (small) response store
    if rng.random() < 0.5:
        body["instructions"] = "Be brief."
    items = [{"role": "user", "content": prompt(rng)}]
    if rng.random() < 0.3:
        body["tools"] = [{"type": "function", "name": "lookup",
                          "parameters": {"type": "object",
                                         "properties": {"q": {"type": "string"}}}}]
        items += [{"type": "function_call", "call_id": "call_1", "name": "lookup",
                   "arguments": '{"q": "x"}'},
                  {"type": "function_call_output", "call_id": "call_1", "output": prompt(rng)}]
    body["input"] = items if rng.random() < 0.7 else prompt(rng)
    return "/v1/responses", body


def valid_body(rng):
    if rng.random() < 0.15:
        return responses_body(rng)
    chat = rng.random() < 0.5
    body = {"max_tokens": rng.randint(4, 24), "stream": rng.random() < 0.5,
            "temperature": rng.choice([0, 0.7, 1.0])}
    if rng.random() < 0.2:
        body["stop"] = [rng.choice(WORDS)]
    if rng.random() < 0.1:
        body["bad_words"] = [rng.choice(WORDS)]
    if rng.random() < 0.1:  # what RL and agent frameworks ask for
        body["return_token_ids"] = True
        if rng.random() < 0.5:
            body["return_tokens_as_token_ids"] = True
            body["logprobs"] = True if chat else 2
    if rng.random() < 0.1:  # tenants apart in the prefix cache
        body["cache_salt"] = rng.choice(["tenant-a", "tenant-b"])
    if rng.random() < 0.05:
        body["allowed_token_ids"] = [rng.randrange(2, 20000) for _ in range(rng.randint(1, 50))]
    if body["stream"] and rng.random() < 0.3:
        body["stream_options"] = {"include_usage": True,
                                  "continuous_usage_stats": rng.random() < 0.5}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt(rng)}]
        if rng.random() < 0.3:
            body["messages"].insert(0, {"role": "system", "content": "Be brief."})
        if rng.random() < 0.1:  # a prefilled answer to go on with
            body["messages"].append({"role": "assistant", "content": prompt(rng)})
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
    else:
        body["prompt"] = prompt(rng)
        # prompt scoring (lm-eval's requests), which preemption must not disturb
        if rng.random() < 0.1:
            body["echo"] = True
            body["logprobs"] = rng.choice([None, 0, 1, 5])
            body["max_tokens"] = rng.choice([0, body["max_tokens"]])
            body["n"] = rng.choice([1, 2])  # one choice scores, the other reads it
        if not body["stream"] and rng.random() < 0.05:
            body["prompt_logprobs"] = rng.choice([0, 2])
    return ("/v1/chat/completions" if chat else "/v1/completions"), body


def http_head(path, n):
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {n}\r\n\r\n").encode()


def do_valid(port, rng, st):
    path, body = valid_body(rng)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
    except (OSError, http.client.HTTPException) as e:
        st.add("valid_error", f"valid request: {e!r}")
        return
    finally:
        c.close()
    if r.status >= 500:
        st.add("valid_5xx", f"{r.status} for a valid request: {data[:200]!r}")
    elif r.status == 429:
        st.add("valid_429")
    elif r.status != 200:
        st.add("valid_4xx", f"{r.status} for a valid request {body}: {data[:200]!r}")
    elif body["stream"] and path == "/v1/responses" and not re.search(
            rb"event: response\.(completed|incomplete)\ndata: [^\n]*\n\n$", data):
        st.add("valid_bad_stream", f"responses stream without its last event: {data[-200:]!r}")
    elif body["stream"] and path != "/v1/responses" and \
            not data.rstrip().endswith(b"data: [DONE]"):
        st.add("valid_bad_stream", f"stream without [DONE]: {data[-200:]!r}")
    else:
        st.add("valid_200")


def do_malformed(port, rng, st):
    path, data = rng.choice(MALFORMED)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("POST", path, data, {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
    except (OSError, http.client.HTTPException) as e:
        st.add("malformed_error", f"malformed request: {e!r}")
        return
    finally:
        c.close()
    if 400 <= r.status < 500:
        st.add("malformed_4xx")
    else:
        st.add("malformed_not_4xx", f"{r.status} for malformed {data[:80]!r}")


def do_disconnect(port, rng, st):
    path, body = valid_body(rng)
    body["stream"] = True
    body["max_output_tokens" if path == "/v1/responses" else "max_tokens"] = 64
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(60)
    try:
        where = rng.choice(["headers", "body", "response", "stream"])
        req = http_head(path, len(data)) + data
        if where == "headers":
            s.sendall(req[:rng.randint(1, len(req) - len(data) - 1)])
        elif where == "body":
            s.sendall(req[:len(req) - rng.randint(1, len(data))])
        else:
            s.sendall(req)
            got = s.recv(256)
            if where == "stream":
                for _ in range(rng.randint(1, 6)):
                    got = s.recv(4096)
                    if not got:
                        break
        if rng.random() < 0.5:  # abortive close (RST) half of the time
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    except OSError:
        pass
    s.close()
    st.add("disconnect")


def fill_kv(port, n):
    """n long requests at once, so that every block of the KV pool has been
    written before memory is measured (the pool's pages become resident on
    first use, which would otherwise look like growth)."""
    def one(i):
        rng = random.Random(i)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        body = {"prompt": " ".join(rng.choice(WORDS) for _ in range(150)), "max_tokens": 8}
        c.request("POST", "/v1/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        c.getresponse().read()
        c.close()
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def worker(port, seed, deadline, st):
    rng = random.Random(seed)
    while time.time() < deadline:
        x = rng.random()
        if x < 0.05:
            do_malformed(port, rng, st)
        elif x < 0.15:
            do_disconnect(port, rng, st)
        else:
            do_valid(port, rng, st)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=600, help="seconds of load (600)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--warmup", type=float, default=0.3, help="fraction of the run (0.3)")
    ap.add_argument("--rss-growth", type=float, default=0.01, help="allowed growth (0.01)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ingot", default=os.environ.get("INGOT_BIN", os.path.join(ROOT, "ingot")))
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("serve_args", nargs="*", help="extra `ingot serve` arguments (after --)")
    a = ap.parse_args()
    # a 1 MB response store: it fills and evicts during a long run, and its
    # bound stays well inside the RSS allowance
    extra = a.serve_args or ["-t", "2", "--max-num-seqs", "16", "--max-waiting", "64",
                             "--max-model-len", "512", "--kv-cache-mb", "64", "--timeout", "10",
                             "--responses-store-mb", "1"]
    p, port, log = start_server(a.ingot, extra)
    st = Stats()
    samples = []  # (t, rss_kb, fds)
    ok = True
    try:
        fill_kv(port, 16)
        fds0 = proc_fds(p.pid)
        t0 = time.time()
        deadline = t0 + a.duration
        stop = threading.Event()

        def sampler():
            while not stop.is_set() and p.poll() is None:
                try:
                    samples.append((time.time() - t0, proc_rss_kb(p.pid), proc_fds(p.pid)))
                except OSError:
                    pass
                stop.wait(1.0)

        ts = threading.Thread(target=sampler, daemon=True)
        ts.start()
        ws = [threading.Thread(target=worker, args=(port, a.seed * 1000 + i, deadline, st),
                               daemon=True) for i in range(a.concurrency)]
        for w in ws:
            w.start()
        for w in ws:
            w.join(a.duration + 600)
        t_idle = time.time()
        alive = p.poll() is None
        idle = None
        fds_end = None
        while alive and time.time() - t_idle < 2.0:
            m = metrics(port)
            fds_end = proc_fds(p.pid)
            if m.get("vllm:num_requests_running", 1) == 0 and \
                    m.get("vllm:num_requests_waiting", 1) == 0 and \
                    m.get("vllm:kv_cache_usage_perc", 1) == 0 and fds_end <= fds0:
                idle = time.time() - t_idle
                break
            time.sleep(0.05)
        stop.set()
        ts.join()
        rc = None
        if alive:  # SIGTERM drains and exits 0 (an ASan build also checks for leaks here)
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(120)
            except subprocess.TimeoutExpired:
                rc = "timeout"
        wu = a.duration * a.warmup
        after = [s for s in samples if wu <= s[0] <= wu + max(5.0, a.duration * 0.1)]
        last = [s for s in samples if s[0] >= a.duration * 0.9]
        rss_wu = sorted(s[1] for s in after)[len(after) // 2] if after else 0
        rss_end = sorted(s[1] for s in last)[len(last) // 2] if last else 0
        growth = (rss_end - rss_wu) / rss_wu if rss_wu else float("nan")
        c = st.c
        valid_n = sum(v for k, v in c.items() if k.startswith("valid"))
        summary = {
            "duration_s": a.duration, "concurrency": a.concurrency, "requests": sum(c.values()),
            "counts": c, "crashed": not alive,
            "rss_mb_after_warmup": round(rss_wu / 1024, 1), "rss_mb_end": round(rss_end / 1024, 1),
            "rss_growth_pct": round(growth * 100, 3),
            "rss_mb_max": round(max((s[1] for s in samples), default=0) / 1024, 1),
            "fds_before": fds0, "fds_after": fds_end,
            "fds_max": max((s[2] for s in samples), default=0),
            "idle_after_s": None if idle is None else round(idle, 2), "exit_status": rc,
            "failures": st.failures,
            "rss_mb_every_10s": [round(x[1] / 1024, 1) for x in samples[::10]],
        }
        checks = [
            ("no crash", alive),
            ("no 5xx or transport error on valid requests",
             not c.get("valid_5xx") and not c.get("valid_error")),
            ("valid requests answered 200 (or 429)",
             not c.get("valid_4xx") and not c.get("valid_bad_stream") and c.get("valid_200", 0)),
            ("malformed requests get 4xx", not c.get("malformed_not_4xx") and
             not c.get("malformed_error")),
            (f"RSS growth after warm-up <= {a.rss_growth * 100:g}%",
             rss_wu and growth <= a.rss_growth),
            ("idle within 2 s: nothing running, KV empty, descriptors back", idle is not None),
            ("SIGTERM: clean exit 0", rc == 0),
        ]
        summary["checks"] = {name: bool(v) for name, v in checks}
        ok = all(v for _, v in checks)
        if a.json:
            print(json.dumps(summary, indent=1))
        else:
            print(f"soak: {a.duration:.0f} s, {a.concurrency} clients, {summary['requests']} "
                  f"requests ({valid_n} valid, {c.get('disconnect', 0)} dropped, "
                  f"{c.get('malformed_4xx', 0) + c.get('malformed_not_4xx', 0)} malformed)")
            print(f"soak: counts {json.dumps(c, sort_keys=True)}")
            print(f"soak: RSS {summary['rss_mb_after_warmup']} MB after warm-up -> "
                  f"{summary['rss_mb_end']} MB at the end ({summary['rss_growth_pct']:+.2f}%), "
                  f"max {summary['rss_mb_max']} MB; descriptors {fds0} before, "
                  f"{summary['fds_max']} max, {fds_end} after; idle after "
                  f"{summary['idle_after_s']} s")
            for name, v in checks:
                print(f"soak: {'ok  ' if v else 'FAIL'} {name}")
            print(f"soak: RSS every 10 s (MB): {summary['rss_mb_every_10s']}")
            for f in st.failures:
                print("soak:   " + f)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        if not ok:
            time.sleep(0.5)
            print("server log tail:\n" + "".join(log[-40:]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
