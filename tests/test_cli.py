"""Black-box tests of the ingot CLI on the default model: pull (idempotent),
info, run (greedy determinism, seeded sampling, chat, errors), bench (JSON
shape, the op profile, bench spec; figures are not judged), every command's
--help, exit codes and the messages that name a bad option."""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INGOT = os.path.join(ROOT, "ingot")
results = []


def ingot(*args, stdin=None, env=None, timeout=300):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([INGOT] + list(args), input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=e)


def check(name, cond, detail=""):
    results.append(cond)
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + detail))


def main():
    r = ingot("pull")
    path = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    check("pull prints the model path last", r.returncode == 0 and path.endswith(".gguf")
          and os.path.exists(path), r.stderr)
    r2 = ingot("pull", timeout=60)
    check("pull is idempotent", r2.returncode == 0 and r2.stdout.strip().endswith(path), r2.stderr)

    r = ingot("info")
    check("info names the architecture", r.returncode == 0 and "gemma3" in r.stdout and
          "Q8_0" in r.stdout and "chat template" in r.stdout, r.stderr)

    with tempfile.TemporaryDirectory() as d:
        r = ingot("info", env={"INGOT_HOME": d})
        check("missing default model: says how to get it", r.returncode == 1 and
              "ingot pull" in r.stderr, r.stderr)
        bad = os.path.join(d, "bad.gguf")
        open(bad, "wb").write(b"GGUF\x03\x00\x00\x00" + b"\xff" * 8)
        r = ingot("info", "-m", bad)
        check("corrupt model: clean error", r.returncode == 1 and "offset" in r.stderr, r.stderr)
        r = ingot("run", "-m", bad, "-p", "x")
        check("run on corrupt model: clean error", r.returncode == 1, r.stderr)

    with tempfile.TemporaryDirectory() as d:
        r = ingot("pull", env={"INGOT_HOME": d, "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
                               "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}, timeout=120)
        check("pull offline: clear error, no partial file", r.returncode == 1 and
              "unreachable" in r.stderr and not [f for f in os.listdir(d) if f.endswith(".gguf")],
              r.stderr)

    r = ingot("frobnicate")
    check("unknown command -> exit 2", r.returncode == 2, r.stderr)
    r = ingot("run", "-p", "x", "--top-p", "7")
    check("bad option value -> exit 2, the option named", r.returncode == 2 and
          "bad value '7' for --top-p" in r.stderr, r.stderr)
    r = ingot("run")
    check("run without prompt -> exit 2", r.returncode == 2, r.stderr)
    # every command's --help / -h: its usage on stdout, exit 0, nothing on
    # stderr and nothing done (no model loaded, no server started)
    for cmd in (["run"], ["bench"], ["bench", "serve"], ["bench", "spec"], ["serve"],
                ["info"], ["tokenize"], ["pull"], ["perplexity"], ["template"]):
        for flag in ("--help", "-h"):
            r = ingot(*cmd, flag, timeout=30)
            check(f"{' '.join(cmd)} {flag}: usage on stdout, exit 0", r.returncode == 0 and
                  r.stdout.startswith("usage: ingot " + " ".join(cmd)) and r.stderr == "",
                  r.stdout[:200] + r.stderr[:200])
    r = ingot("run", "-p", "--help", "-n", "1", "--temp", "0", "--ids")
    check("run -p --help: the prompt, not a request for help", r.returncode == 0 and
          len(r.stdout.split()) == 1, r.stdout + r.stderr)
    r = ingot("info", "--frobnicate")
    check("bad option -> usage on stderr, exit 2", r.returncode == 2 and
          "usage: ingot info" in r.stderr and r.stdout == "", r.stderr)
    for cmd in (["run", "-p", "x"], ["bench"], ["perplexity", "-f", "/dev/null"]):
        r = ingot(*cmd, "--kv-cache-dtype", "q4_0")
        check(f"{cmd[0]} --kv-cache-dtype q4_0 -> exit 2", r.returncode == 2, r.stderr)
    for kv in ("f32", "f16", "q8_0", "auto"):
        r = ingot("run", "-p", "The capital of France is", "-n", "4", "--temp", "0", "--ids",
                  "--kv-cache-dtype", kv)
        check(f"run --kv-cache-dtype {kv}: 4 tokens", r.returncode == 0 and
              len(r.stdout.split()) == 4, r.stdout + r.stderr)

    long_prompt = "word " * 300
    r = ingot("run", "-p", long_prompt, "--ctx", "64", "-n", "4")
    check("prompt longer than the context: clear error", r.returncode == 1 and
          "context" in r.stderr, r.stderr)

    a = ingot("run", "-p", "The capital of France is", "-n", "12", "--temp", "0", "--ids")
    b = ingot("run", "-p", "The capital of France is", "-n", "12", "--temp", "0", "--ids",
              "-t", "1")
    check("greedy ids are deterministic across thread counts",
          a.returncode == 0 and a.stdout == b.stdout and len(a.stdout.split()) == 12,
          a.stderr + b.stderr)
    check("summary on stderr", "prompt:" in a.stderr and "generated:" in a.stderr and
          "stop:" in a.stderr, a.stderr)

    s1 = ingot("run", "-p", "Once upon a time", "-n", "16", "--seed", "7", "--ids")
    s2 = ingot("run", "-p", "Once upon a time", "-n", "16", "--seed", "7", "--ids")
    s3 = ingot("run", "-p", "Once upon a time", "-n", "16", "--seed", "8", "--ids")
    check("seeded sampling reproduces", s1.returncode == 0 and s1.stdout == s2.stdout,
          s1.stderr)
    check("another seed gives other tokens", s1.stdout != s3.stdout, s1.stdout)
    # --seed -1 (llama.cpp's): a random seed, printed, that repeats the run when given
    r1 = ingot("run", "-p", "Once upon a time", "-n", "16", "--seed", "-1", "--ids")
    r2 = ingot("run", "-p", "Once upon a time", "-n", "16", "--seed", "-1", "--ids")
    seeds = [re.search(r"^seed: +([0-9]+)$", r.stderr, re.M) for r in (r1, r2)]
    check("--seed -1 prints the seed it drew", all(seeds) and r1.returncode == 0 and
          seeds[0].group(1) != seeds[1].group(1), r1.stderr + r2.stderr)
    if seeds[0]:
        again = ingot("run", "-p", "Once upon a time", "-n", "16", "--seed", seeds[0].group(1),
                      "--ids")
        check("the printed seed repeats the run", again.stdout == r1.stdout and
              "seed:" not in again.stderr, (again.stdout, r1.stdout))
    bad = ingot("run", "-p", "x", "--seed", "-2")
    check("--seed -2 is refused", bad.returncode != 0 and "--seed" in bad.stderr, bad.stderr)

    r = ingot("run", "--chat", "-p", "Say hello.", "-n", "24", "--temp", "0")
    check("chat mode generates and stops or hits the limit", r.returncode == 0 and
          r.stdout.strip() != "" and ("stop:      eos" in r.stderr or "length" in r.stderr),
          r.stderr)

    # constrained output: what the grammar allows, stopping when it is complete
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120}},
        "required": ["name", "age"], "additionalProperties": False}
    for seed in ("1", "2"):
        r = ingot("run", "-p", "A person as JSON:", "-j", json.dumps(schema), "--seed", seed,
                  "--temp", "1", "-n", "80")
        try:
            v = json.loads(r.stdout)
        except ValueError:
            v = None
        check(f"run --json-schema (seed {seed}): a JSON value of the schema, then stop",
              r.returncode == 0 and isinstance(v, dict) and sorted(v) == ["age", "name"] and
              isinstance(v["age"], int) and 0 <= v["age"] <= 120 and
              "stop:      grammar complete" in r.stderr, r.stdout + r.stderr)
    with tempfile.TemporaryDirectory() as d:
        gf = os.path.join(d, "yes.gbnf")
        open(gf, "w").write('root ::= ("yes" | "no") ", because " [a-z ]{1,30} "."\n')
        r = ingot("run", "-p", "Is the sky blue?", "--grammar-file", gf, "--seed", "3", "-n", "60")
        check("run --grammar-file: the text matches the grammar", r.returncode == 0 and
              bool(re.fullmatch(r"(yes|no), because [a-z ]{1,30}\.\n", r.stdout)),
              r.stdout + r.stderr)
    r = ingot("run", "-p", "Phone:", "--regex", " [0-9]{3}-[0-9]{4}", "--temp", "0", "-n", "20")
    check("run --regex: the text matches", r.returncode == 0 and
          bool(re.fullmatch(r" [0-9]{3}-[0-9]{4}\n", r.stdout)), r.stdout + r.stderr)
    for args, needle in ((["--regex", "a(?=b)"], "--regex: lookaround"),
                         (["-j", "{\"type\": \"wat\"}"], "--json-schema: "),
                         (["--regex", "a", "--grammar", 'root ::= "a"'], "give one constraint"),
                         (["--json-schema-file", "/nonexistent"], "cannot read"),
                         (["--regex", "a", "--spec", "ngram"], "cannot be combined with --spec"),
                         (["--regex", "x(.*[a-m].{100}y)", "-n", "60"], "too complex")):
        r = ingot("run", "-p", "x", *args)
        check(f"run {' '.join(args)[:40]}: exit 1, '{needle}'",
              r.returncode == 1 and needle in r.stderr, r.stderr)

    r = ingot("tokenize", "-p", "<start_of_turn>user", "--special")
    ids = r.stdout.split()
    check("--special parses control tokens and adds BOS", r.returncode == 0 and
          ids[:2] == ["2", "105"], r.stdout)
    r = ingot("tokenize", "-p", "<start_of_turn>user")
    check("without --special control text is plain text", r.returncode == 0 and
          "105" not in r.stdout.split(), r.stdout)
    r = ingot("tokenize", stdin="Hello world\n")
    r2 = ingot("tokenize", "-p", "Hello world")
    check("stdin keeps its final newline", r.returncode == 0 and r.stdout != r2.stdout,
          r.stdout + r2.stdout)

    # bench: a tiny run, only its shape (speed is never a test)
    r = ingot("bench", "--batch", "1,2", "--runner", "mega,graph", "--runs", "1", "--gen", "2",
              "--prompt", "16", "-t", "2", "--json")
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    res = j.get("results", [])
    check("bench --json: one result per runner and batch, positive figures",
          r.returncode == 0 and
          0 < j.get("stream_bw_min_gbs", 0) <= j.get("stream_bw_gbs", 0) <=
          j.get("stream_bw_max_gbs", 0) and
          j.get("weight_bytes_per_token", 0) > 0 and
          sorted((x["runner"], x["batch"]) for x in res) ==
          [("graph", 1), ("graph", 2), ("mega", 1), ("mega", 2)] and
          all(x["decode_tok_s"] > 0 and x["prefill_tok_s"] > 0 and x["bw_pct"] > 0 for x in res),
          r.stdout + r.stderr)
    # the compute roofline: an int8 peak wherever there are int8 kernels (AVX2 and up),
    # multiply-add counts with the LM head (decode) above those without (prompt)
    simd = j.get("isa") not in (None, "scalar")
    check("bench --json: int8 peak and multiply-add counts, % of the peak per result",
          (j.get("int8_peak_gmacs", 0) > 0 if simd else j.get("int8_peak_gmacs") == 0) and
          j.get("weight_macs_per_token", 0) > j.get("weight_macs_per_prompt_token", 0) > 0 and
          all((x.get("mac_pct", 0) > 0 and x.get("prefill_mac_pct", 0) > 0) == simd
              for x in res), r.stdout + r.stderr)
    r = ingot("bench", "--batch", "2", "--runner", "mega", "--runs", "1", "--gen", "2",
              "--prompt", "16", "-t", "2", "--profile")
    walls, _, rest = r.stdout.split("where the time goes", 1)[-1].partition("a thread's step")
    rows = {ln.split()[0]: ln.split() for ln in walls.splitlines()
            if ln.strip() and not ln.startswith(" ")}
    check("bench --profile: every op kind timed, shares adding up to the total",
          r.returncode == 0 and {"qkv", "attn", "gate_up", "down", "lm_head"} <= set(rows) and
          rows.get("total", [""] * 3)[-1] == "100%" and
          95 <= sum(float(v[-1].rstrip("%")) for k, v in rows.items()
                    if k not in ("op", "total")) <= 105, r.stdout + r.stderr)
    # each runner's thread step (the graph runner's added to --runner mega):
    # work by op kind plus idle making up the step, in every column
    steps, _, bound = rest.partition("\nbatch 2:")
    lines = [ln.split() for ln in steps.splitlines() if ln.strip()]
    head = next((ln for ln in lines if ln[0] == "op"), [])
    cols = {ln[0]: [float(v) for v in ln[1:]] for ln in lines
            if len(ln) == len(head) - (len(head) - 1) // 2 and ln[0] not in ("op", "waits")}
    waits = next((ln[1:] for ln in lines if ln[0] == "waits"), [])
    step, idle = cols.get("step", []), cols.get("idle", [])
    sums = [sum(v[i] for k, v in cols.items() if k != "step") for i in range(len(step))]
    check("bench --profile: a thread's step per runner, its work and idle adding up to it",
          head[1:] == ["mega", "b=2", "graph", "b=2", "mega", "pp", "graph", "pp"] and
          len(step) == 4 and all(v >= -0.01 for v in idle) and
          all(abs(a - b) <= 0.02 * len(cols) + 0.01 * b for a, b in zip(sums, step)),
          rest)
    # the megakernel's waits on its counters: part of its idle time; none for graph
    check("bench --profile: mega's counter waits within its idle time, graph's none",
          len(waits) == 4 and waits[1] == waits[3] == "-" and
          all(0 <= float(waits[i]) <= idle[i] + 0.01 for i in (0, 2)), rest)
    m = re.search(r"at most ([0-9.]+)x as fast \(mega: idle [0-9.]+%, ([0-9.]+)x", bound)
    check("bench --profile: the bound on a schedule from the graph runner's idle time",
          m is not None and float(m.group(1)) >= 1 and float(m.group(2)) > 0, bound)
    # the kernels' bound: the matrix ops timed again in cache; "in the step"
    # is the graph runner's matrix work from the thread-step table
    m = re.search(r"batch 2: matrix ops cache-resident ([0-9.]+) ms a thread \(in the step "
                  r"([0-9.]+)\); with the rest of the\nwork as measured and no idle time at most "
                  r"([0-9.]+) tok/s \(these runs: mega ([0-9.]+), graph ([0-9.]+)\)", bound)
    gi = head.index("graph") if "graph" in head else 0  # the graph b=2 column
    matrix = sum(cols.get(k, [0] * 4)[(gi - 1) // 2] for k in ("qkv", "wo", "gate_up", "down",
                                                                "lm_head"))
    check("bench --profile: the kernels' bound, in the step = the graph runner's matrix work",
          m is not None and all(float(v) > 0 for v in m.groups()) and
          abs(float(m.group(2)) - matrix) <= 0.04, bound)  # 6 figures rounded to 0.01
    # ... and by op: each matrix kind's pair, adding up to the two totals
    by_op = bound.split("batch 2: matrix ops", 1)[-1].partition("in the step:")[2]
    by_op = by_op.split("\nprefill:")[0]
    pairs = {k: (float(a), float(b)) for k, a, b in
             re.findall(r"([a-z_]+) ([0-9.]+) / ([0-9.]+)", by_op)}
    check("bench --profile: the kernels' bound by op, adding up to its totals",
          m is not None and set(pairs) == {"qkv", "wo", "gate_up", "down", "lm_head"} and
          abs(sum(a for a, _ in pairs.values()) - float(m.group(1))) <= 0.04 and
          abs(sum(b for _, b in pairs.values()) - float(m.group(2))) <= 0.04 and
          all(abs(b - cols.get(k, [0] * 4)[(gi - 1) // 2]) <= 0.011
              for k, (_, b) in pairs.items()), by_op)
    # ... and for the prefill (one chunk: its plan is all of the prompt)
    mp = re.search(r"prefill: matrix ops cache-resident ([0-9.]+) ms a thread \(in the step "
                   r"([0-9.]+)\)", bound)
    pp = sum(cols.get(k, [0] * 4)[3] for k in ("qkv", "wo", "gate_up", "down", "lm_head"))
    check("bench --profile: the kernels' bound for the prefill, its matrix work the graph pp one",
          mp is not None and float(mp.group(1)) > 0 and abs(float(mp.group(2)) - pp) <= 0.04,
          bound)
    # --depth: decode after a longer prompt, filled once per runner
    r = ingot("bench", "--batch", "2", "--runner", "mega,graph", "--runs", "2", "--gen", "2",
              "--prompt", "16", "-t", "2", "--depth", "40", "--json")
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    check("bench --depth 40 --json: the depth reported, a positive figure per runner",
          r.returncode == 0 and j.get("depth") == 40 and
          sorted(x["runner"] for x in j.get("results", [])) == ["graph", "mega"] and
          all(x["decode_tok_s"] > 0 for x in j.get("results", [])), r.stdout + r.stderr)
    for bad in (["--batch", "0"], ["--batch", "1,x"], ["--depth", "-1"], ["--depth", "4x"],
                ["-t", "2x"], ["--runner", "mega,fast"], ["--prefetch", "maybe"]):
        r = ingot("bench", *bad)
        check("bench %s: the option and its value named, then the usage" % " ".join(bad),
              r.returncode == 2 and "bad value '%s' for --" % bad[1] in r.stderr and
              "usage" in r.stderr, r.stderr)
    r = ingot("bench", "--json", "--profile")
    check("bench --json --profile: refused (tables would follow the JSON), exit 2",
          r.returncode == 2 and "--profile" in r.stderr and r.stdout == "", r.stderr)
    # bench spec: a short output (-n 4) still leaves its verify-cost steps
    # of up to spec-max + 1 rows room in the context
    r = ingot("bench", "spec", "-w", "chat", "--runs", "1", "-n", "4", "--json")
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    check("bench spec -n 4 --json: identical output, a verify cost per draft length",
          r.returncode == 0 and j.get("identical_output") is True and
          len(j.get("t_ratio", [])) == j.get("spec_max", 0) + 1, r.stdout + r.stderr)
    r = ingot("bench", "spec", "--runs", "0")
    check("bench spec --runs 0: the option named", r.returncode == 2 and
          "bad value '0' for --runs" in r.stderr, r.stderr)
    r = ingot("bench", "--runs", "1", "stray")
    check("bench: a stray argument named", r.returncode == 2 and
          "unexpected argument 'stray'" in r.stderr, r.stderr)

    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
