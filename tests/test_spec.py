"""Speculative decoding never changes the output, on the default model.

CLI (`ingot run --spec ...`): for both model-free drafters and draft lengths
k in {1, 4, 8, 16}, greedy ids equal plain decoding's on several prompts
(repetitive ones, where drafts are long and mostly accepted, and prose);
at n_predict and context boundaries; and seeded sampling (with penalties)
reproduces plain decoding token for token. A draft model (the default model
drafting for itself, the only model at hand) keeps greedy output identical
and samples with rejection sampling; a draft model with another vocabulary
is refused.

Server (`ingot serve --spec suffix`): concurrent greedy requests (a batch
of sequences with uneven drafts) give exactly what the same requests give
with speculation turned off per request, including an end-of-sequence
forced mid-draft by logit_bias; the vLLM spec-decode counters move; a bad
"speculative" value is a 400. With a draft model (--spec draft) concurrent
greedy requests again equal plain decoding and sampled ones complete."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_proc  # noqa: E402
import http.client  # noqa: E402
from checks import check, results, summary  # noqa: E402

INGOT = serve_proc.INGOT

CODE = """def area(width, height):
    return width * height


def perimeter(width, height):
    return 2 * (width + height)


def describe(width, height):
    print("area", area(width, height))
    print("perimeter", perimeter(width, height))

Now the same three functions again, unchanged:
"""
LIST = "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday. " * 3 + "Again: Monday,"
PROSE = "The old lighthouse keeper climbed the stairs every evening"




def run(prompt, n, *extra):
    r = subprocess.run([INGOT, "run", "-p", prompt, "-n", str(n), "--ids", "-t", "2", *extra],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, r.stderr
    return r.stdout.split(), r.stderr


def test_cli():
    for pname, prompt in [("code", CODE), ("list", LIST), ("prose", PROSE)]:
        base, _ = run(prompt, 40, "--temp", "0")
        check(f"cli {pname}: plain run", base and len(base) == 40, base)
        for method in ("ngram", "suffix"):
            for k in ((1, 4, 8, 16) if pname != "prose" else (4, 16)):
                ids, err = run(prompt, 40, "--temp", "0", "--spec", method, "--spec-max", str(k))
                check(f"cli {pname} {method} k={k}: same ids", ids == base, (ids, base, err))
                if pname == "code" and k == 16:
                    acc = re.search(r"(\d+) accepted", err)
                    check(f"cli code {method}: drafts accepted", acc and int(acc.group(1)) > 0,
                          err)
    # n_predict boundaries: drafts must never run past the last token
    for n in (1, 2, 5):
        base, _ = run(LIST, n, "--temp", "0")
        for method in ("ngram", "suffix"):
            ids, err = run(LIST, n, "--temp", "0", "--spec", method, "--spec-max", "16")
            check(f"cli n={n} {method}: same ids", ids == base and len(ids) == n, (ids, base, err))
    # the context boundary: generation stops where plain decoding stops
    base, _ = run(LIST, 200, "--temp", "0", "--ctx", "64")
    for method in ("ngram", "suffix"):
        ids, err = run(LIST, 200, "--temp", "0", "--ctx", "64", "--spec", method)
        check(f"cli context full {method}: same ids", ids == base and "context" in err,
              (ids, base, err))
    # seeded sampling with deterministic drafts reproduces plain decoding
    samp = ["--temp", "0.8", "--seed", "11", "--repeat-penalty", "1.1", "--top-k", "20"]
    for prompt in (CODE, LIST):
        base, _ = run(prompt, 48, *samp)
        for method in ("ngram", "suffix"):
            ids, err = run(prompt, 48, *samp, "--spec", method, "--spec-max", "8")
            check(f"cli seeded sampling {method}: same ids", ids == base, (ids, base, err))
    # a draft model (the only model at hand drafts for itself: every greedy
    # draft is right, so this checks the bookkeeping, not the speedup)
    model = subprocess.run([INGOT, "pull"], capture_output=True, text=True).stdout.strip()
    for prompt in (PROSE, LIST):
        base, _ = run(prompt, 40, "--temp", "0")
        for k in (1, 5):
            ids, err = run(prompt, 40, "--temp", "0", "--spec", "draft", "--draft-model", model,
                           "--spec-max", str(k))
            check(f"cli draft model k={k}: same ids", ids == base, (ids, base, err))
    ids, err = run(PROSE, 24, "--temp", "0.9", "--seed", "5", "--spec", "draft",
                   "--draft-model", model, "--spec-max", "4")
    check("cli draft model, sampling: runs and accepts", ids and len(ids) == 24 and
          re.search(r"[1-9]\d* accepted", err), err)
    with tempfile.TemporaryDirectory() as d:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ref"))
        import make_tiny
        import contextlib
        import io
        with contextlib.redirect_stdout(io.StringIO()):
            make_tiny.main(["make_tiny", d, "gemma3-f32"])
        ids, err = run(PROSE, 4, "--spec", "draft", "--draft-model", os.path.join(d, "gemma3-f32.gguf"))
        check("cli draft model with another vocabulary is refused",
              ids is None and "vocabulary" in err, err)
    _, err = run(PROSE, 4, "--spec", "bogus")
    check("cli: unknown --spec is an error", "unknown --spec" in err, err)


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = json.loads(r.read().decode())
    c.close()
    return r.status, data


def metric_sum(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
            seen = True
    return total if seen else None


def completion(port, prompt, spec, **kw):
    body = {"prompt": prompt, "max_tokens": 48, "temperature": 0, **kw}
    if not spec:
        body["speculative"] = {"method": "none"}
    st, data = post(port, "/v1/completions", body)
    if st != 200:
        return st, data
    ch = data["choices"][0]
    return ch["finish_reason"], ch["text"]


def test_server():
    srv = serve_proc.Server("-t", "2", "--max-num-seqs", "8", "--max-model-len", "1024",
                            "--spec", "suffix", "--spec-max", "8")
    try:
        port = srv.port
        prompts = [CODE, LIST, PROSE, CODE + "def volume(", LIST + " Tuesday,",
                   "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,", PROSE + " and", "A B C D A B C D A B"]
        alone = [completion(port, p, False) for p in prompts]
        with ThreadPoolExecutor(8) as ex:
            together = list(ex.map(lambda p: completion(port, p, True), prompts))
        check("server: concurrent speculative requests == plain, one at a time",
              together == alone, list(zip(together, alone)))
        drafts = metric_sum(port, "vllm:spec_decode_num_drafts_total")
        acc = metric_sum(port, "vllm:spec_decode_num_accepted_tokens_total")
        pos0 = metric_sum(port, "vllm:spec_decode_num_accepted_tokens_per_pos_total")
        check("server: spec-decode counters", drafts and drafts > 0 and acc and acc > 0 and
              pos0 is not None and pos0 == acc, (drafts, acc, pos0))
        # end of sequence inside an accepted draft: a biased EOS id (1 in Gemma)
        # becomes the argmax somewhere in the middle of the repetition
        stops = 0
        for bias in (4, 8):
            kw = {"logit_bias": {"1": bias}}
            a = completion(port, LIST, False, **kw)
            b = completion(port, LIST, True, **kw)
            check(f"server: EOS bias {bias}: same result", a == b, (a, b))
            stops += a[0] == "stop"
        check("server: a biased EOS ended a request", stops > 0)
        st, data = post(port, "/v1/completions",
                        {"prompt": "x", "max_tokens": 2, "speculative": {"method": "magic"}})
        check("server: bad speculative.method is a 400", st == 400 and
              data.get("error", {}).get("param") == "speculative.method", (st, data))
        st, data = post(port, "/v1/completions",
                        {"prompt": "x", "max_tokens": 2, "speculative": 3})
        check("server: speculative must be an object", st == 400, (st, data))
    finally:
        srv.stop()


def test_server_draft():
    model = subprocess.run([INGOT, "pull"], capture_output=True, text=True).stdout.strip()
    srv = serve_proc.Server("-t", "2", "--max-num-seqs", "4", "--max-model-len", "512",
                            "--spec", "draft", "--draft-model", model, "--spec-max", "4")
    try:
        port = srv.port
        prompts = [PROSE, LIST, CODE[:200], "Once upon a time"]
        alone = [completion(port, p, False) for p in prompts]
        with ThreadPoolExecutor(4) as ex:
            together = list(ex.map(lambda p: completion(port, p, True), prompts))
        check("server draft model: concurrent greedy == plain", together == alone,
              list(zip(together, alone)))
        with ThreadPoolExecutor(4) as ex:
            sampled = list(ex.map(lambda p: completion(port, p, True, temperature=0.9, seed=3),
                                  prompts))
        check("server draft model: sampled requests finish",
              all(r[0] in ("stop", "length") for r in sampled), sampled)
        acc = metric_sum(port, "vllm:spec_decode_num_accepted_tokens_total")
        check("server draft model: drafts accepted", acc and acc > 0, acc)
    finally:
        srv.stop()


def main():
    t0 = time.time()
    try:
        test_cli()
        test_server()
        test_server_draft()
    except Exception as e:
        import traceback
        traceback.print_exc()
        check("no exception", False, repr(e))
    return summary(t0)


if __name__ == "__main__":
    sys.exit(main())
