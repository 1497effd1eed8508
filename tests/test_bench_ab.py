#!/usr/bin/env python3
"""bench/ab.py, the A B B A comparison, against fake ingot binaries.

The fakes are small scripts that log their name and arguments and print an
`ingot bench --json` document with figures taken from a list, one entry a
call, so the test knows every run's figures and checks: the order A B B A
in each cycle; the bench arguments passed on (with --json added once); the
ratio of the sums and the per-cycle spread; a figure missing from a run left
out of the summary; a git revision resolved to its cached binary under
$INGOT_HOME/ab; and the failures (a run that exits nonzero, one that prints
no JSON, a name that is neither a binary nor a revision) ending in exit 1
or 2 with a message. Building a revision (`make ingot` in a worktree, a
minute or more) is not run here.
"""
import json
import os
import stat
import subprocess
import sys
import tempfile
import time

from checks import check, summary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AB = os.path.join(ROOT, "bench", "ab.py")

FAKE = r'''#!/usr/bin/env python3
import json, os, sys
name, log = %(name)r, %(log)r
figures = %(figures)r
calls = sum(1 for line in open(log) if line.startswith(name + " ")) if os.path.exists(log) else 0
with open(log, "a") as f:
    f.write(name + " " + " ".join(sys.argv[1:]) + "\n")
mode = %(mode)r
if mode == "fail":
    sys.stderr.write("fake: no model here\n")
    sys.exit(3)
if mode == "garbage":
    print("not json")
    sys.exit(0)
decode, prefill = figures[calls %% len(figures)]
result = {"runner": "mega", "batch": 1, "decode_tok_s": decode}
if prefill is not None:
    result["prefill_tok_s"] = prefill
print(json.dumps({"stream_bw_gbs": 25.0, "results": [result]}))
'''


def make_fake(tmp, name, log, figures, mode="ok"):
    path = os.path.join(tmp, "fake-" + name)
    with open(path, "w") as f:
        f.write(FAKE % {"name": name, "log": log, "figures": figures, "mode": mode})
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def run_ab(*args, env=None):
    p = subprocess.run([sys.executable, AB, *args], capture_output=True, text=True,
                       env=env, timeout=120)
    return p.returncode, p.stdout, p.stderr


def summary_row(out, label):
    """The summary line for LABEL ("decode tok/s"), split into words."""
    for line in out.splitlines():
        if line.startswith("mega") and label in line:
            return line.split()
    return None


def test_order_and_ratio(tmp):
    log = os.path.join(tmp, "calls.log")
    a = make_fake(tmp, "A", log, [(100.0, 500.0)])
    # B's runs: cycle 1 110 + 130 = 240 against A's 200 (1.2), cycle 2 90 + 110 = 200 (1.0)
    b = make_fake(tmp, "B", log, [(110.0, 500.0), (130.0, 500.0), (90.0, None), (110.0, 500.0)])
    rc, out, err = run_ab("--cycles", "2", a, b, "--", "--batch", "1", "--runs", "3", "--json")
    check("two cycles: exit 0", rc == 0, err)
    calls = [line.split() for line in open(log)]
    check("A B B A in each cycle", [c[0] for c in calls] == list("ABBAABBA"), calls)
    check("bench args passed on, --json once",
          all(c[1:] == ["bench", "--json", "--batch", "1", "--runs", "3"] for c in calls), calls)
    row = summary_row(out, "decode tok/s")
    check("decode row present", row is not None, out)
    if row:
        # mega 1 decode tok/s A.. B.. ratio lo .. hi
        check("ratio of the sums 440 / 400", row[-4] == "1.100", row)
        check("per-cycle ratios 1.000 .. 1.200", row[-3:] == ["1.000", "..", "1.200"], row)
        check("B's spread 90.0 .. 130.0", "90.0" in row and "130.0" in row, row)
    check("prefill missing from one of B's runs: left out", summary_row(out, "prefill") is None,
          out)
    check("each run printed with its probe", out.count("probe 25.0 GB/s") == 8, out)


def test_default_args(tmp):
    log = os.path.join(tmp, "default.log")
    a = make_fake(tmp, "A", log, [(50.0, None)])
    rc, out, err = run_ab("--cycles", "1", a, a)
    calls = [line.split() for line in open(log)]
    check("default bench args", rc == 0 and calls[0][1:] ==
          ["bench", "--json", "--batch", "1", "--runs", "5", "--gen", "64", "--prompt", "16"],
          (rc, err, calls))
    row = summary_row(out, "decode tok/s")
    check("same binary twice: ratio 1.000", row is not None and row[-4] == "1.000", out)


def test_failures(tmp):
    log = os.path.join(tmp, "fail.log")
    good = make_fake(tmp, "good", log, [(100.0, None)])
    bad = make_fake(tmp, "bad", log, [(0, None)], mode="fail")
    garbage = make_fake(tmp, "garbage", log, [(0, None)], mode="garbage")
    rc, out, err = run_ab("--cycles", "1", good, bad)
    check("a failing run: exit 1 with its stderr", rc == 1 and "no model here" in err, (rc, err))
    rc, out, err = run_ab("--cycles", "1", garbage, good)
    check("no JSON: exit 1, says so", rc == 1 and "no results" in err, (rc, err))
    rc, out, err = run_ab("--cycles", "1", good, "no-such-rev-or-file")
    check("unknown name: exit 2, names it", rc == 2 and "no-such-rev-or-file" in err, (rc, err))
    rc, out, err = run_ab("--cycles", "0", good, good)
    check("--cycles 0: exit 2", rc == 2, (rc, err))


def test_revision_cached(tmp):
    """A revision whose binary is already in $INGOT_HOME/ab runs without a build."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode != 0:
        print("skip: not a git checkout")
        return
    home = os.path.join(tmp, "home")
    os.makedirs(os.path.join(home, "ab"))
    log = os.path.join(tmp, "rev.log")
    cached = make_fake(tmp, "cached", log, [(80.0, None)])
    os.replace(cached, os.path.join(home, "ab", "ingot-" + head.stdout.strip()[:12]))
    other = make_fake(tmp, "other", log, [(88.0, None)])
    env = dict(os.environ, INGOT_HOME=home)
    rc, out, err = run_ab("--cycles", "1", "HEAD", other, env=env)
    row = summary_row(out, "decode tok/s")
    check("HEAD resolved to its cached binary", rc == 0 and "building" not in err and
          row is not None and row[-4] == "1.100", (rc, err, out))


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        test_order_and_ratio(tmp)
        test_default_args(tmp)
        test_failures(tmp)
        test_revision_cached(tmp)
    return summary(t0)


if __name__ == "__main__":
    sys.exit(main())
