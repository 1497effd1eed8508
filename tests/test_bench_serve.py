"""Black-box test of `ingot bench serve` against `ingot serve` on the default
model: the shared-prefix and agentic workloads complete every request with
sane figures (--json), the text report carries vLLM's labels, and a dead URL
or a bad one exits nonzero with a message. Small runs keep it well under a
minute on two cores."""
import http.server
import json
import os
import socket
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INGOT = os.environ.get("INGOT_BIN", os.path.join(ROOT, "ingot"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_proc  # noqa: E402
from checks import check, results  # noqa: E402

LABELS = [
    "============ Serving Benchmark Result ============", "Successful requests:",
    "Failed requests:", "Benchmark duration (s):", "Total input tokens:",
    "Total generated tokens:", "Request throughput (req/s):",
    "Output token throughput (tok/s):", "Total Token throughput (tok/s):",
    "---------------Time to First Token----------------", "Mean TTFT (ms):",
    "Median TTFT (ms):", "P99 TTFT (ms):",
    "-----Time per Output Token (excl. 1st token)------", "Mean TPOT (ms):",
    "Median TPOT (ms):", "P99 TPOT (ms):",
    "---------------Inter-token Latency----------------", "Mean ITL (ms):",
    "Median ITL (ms):", "P99 ITL (ms):",
    "==================================================",
]




def Server():
    return serve_proc.Server()


def bench(url, *args):
    return subprocess.run([INGOT, "bench", "serve", "--url", url, *args], capture_output=True,
                          text=True, timeout=120)


def check_json_run(name, p, n):
    try:
        r = json.loads(p.stdout)
    except ValueError:
        check(name + " prints JSON", False, p.stdout + p.stderr)
        return
    check(name + " exits 0", p.returncode == 0, p.stderr)
    check(name + " completed all", r["completed"] == n and r["failed"] == 0, r)
    check(name + " throughput > 0", r["request_throughput"] > 0 and r["output_throughput"] > 0
          and r["total_token_throughput"] > r["output_throughput"], r)
    check(name + " tokens counted", r["total_input_tokens"] > n * 10
          and 0 < r["total_output_tokens"] <= n * 8, r)
    ttft = (r["mean_ttft_ms"], r["median_ttft_ms"], r["p99_ttft_ms"])
    check(name + " TTFT sane", all(0 < t < r["duration"] * 1000 for t in ttft)
          and r["median_ttft_ms"] <= r["p99_ttft_ms"], r)
    check(name + " TPOT/ITL sane", 0 < r["mean_tpot_ms"] < 60000
          and 0 < r["median_itl_ms"] <= r["p99_itl_ms"], r)


class Recorder(http.server.BaseHTTPRequestHandler):
    """A stand-in server that records the bodies bench serve posts and
    answers each with a one-token stream."""
    bodies = []

    def log_message(self, *args):
        pass

    def reply(self, ctype, data):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.reply("application/json", b'{"object":"list","data":[{"id":"m"}]}')

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        Recorder.bodies.append(json.loads(self.rfile.read(n)))
        chunk = {"choices": [{"index": 0, "text": "x", "finish_reason": None}]}
        usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1,
                                          "total_tokens": 6}}
        data = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\n"
        self.reply("text/event-stream", data.encode())


def check_seeds():
    """Sampled requests carry seed + i, so two runs draw the same texts;
    greedy ones carry none."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        bench(url, "--workload", "chat", "--requests", "4", "--concurrency", "2",
              "--temperature", "1", "--seed", "7")
        seeds = sorted(b.get("seed", -1) for b in Recorder.bodies)
        check("sampled requests carry seeds 7..10", seeds == [7, 8, 9, 10], Recorder.bodies)
        Recorder.bodies.clear()
        bench(url, "--workload", "chat", "--requests", "2", "--concurrency", "2")
        check("greedy requests carry no seed",
              len(Recorder.bodies) == 2 and all("seed" not in b for b in Recorder.bodies),
              Recorder.bodies)
    finally:
        srv.shutdown()


def dead_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def main():
    srv = Server()
    url = f"http://127.0.0.1:{srv.port}"
    try:
        p = bench(url, "--workload", "shared-prefix", "--concurrency", "4", "--requests", "8",
                  "--max-tokens", "8", "--json")
        check_json_run("shared-prefix", p, 8)
        p = bench(url + "/v1", "--workload", "agentic", "--concurrency", "3", "--requests", "6",
                  "--max-tokens", "8", "--json")
        check_json_run("agentic", p, 6)
        p = bench(url, "--workload", "chat", "--concurrency", "3", "--requests", "3",
                  "--max-tokens", "8", "--temperature", "0.8", "--top-p", "0.9", "--json")
        check_json_run("sampled chat", p, 3)
        check("sampled chat reports its sampling", '"temperature":0.8' in p.stdout
              and '"top_p":0.9' in p.stdout, p.stdout)
        p = bench(url, "--workload", "chat", "--concurrency", "2", "--requests", "2",
                  "--max-tokens", "4")
        missing = [l for l in LABELS if l not in p.stdout]
        check("text report has vLLM's labels", p.returncode == 0 and not missing,
              (missing, p.stdout, p.stderr))
    finally:
        srv.stop()
    check_seeds()
    p = bench(dead_url(), "--requests", "2")
    check("dead URL exits nonzero with a message",
          p.returncode != 0 and "cannot reach" in p.stderr, (p.returncode, p.stderr))
    p = bench("localhost:8080", "--requests", "2")
    check("bad URL exits nonzero with a message",
          p.returncode != 0 and "--url" in p.stderr, (p.returncode, p.stderr))
    p = bench(dead_url(), "--top-p", "1.5")
    check("top-p out of range is a usage error, the option named",
          p.returncode == 2 and "bad value '1.5' for --top-p" in p.stderr,
          (p.returncode, p.stderr))
    p = bench(dead_url(), "--workload", "nope")
    check("unknown workload is a usage error, the option named",
          p.returncode == 2 and "bad value 'nope' for --workload" in p.stderr,
          (p.returncode, p.stderr))


if __name__ == "__main__":
    main()
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    raise SystemExit(1 if failed else 0)
