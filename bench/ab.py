#!/usr/bin/env python3
"""A against B on a noisy machine: two ingot builds' `ingot bench`, alternating.

    bench/ab.py [--cycles N] A B [-- BENCH_ARGS...]

A and B are ingot binaries, or git revisions of this repository (each built
once with `make ingot` in a throwaway worktree; the binary is kept as
$INGOT_HOME/ab/ingot-<commit>, ~/.cache/ingot by default). BENCH_ARGS go to
`ingot bench --json` (default: --batch 1 --runs 5 --gen 64 --prompt 16).

Why: the machines we measure on are shared, and their bandwidth moves by
10-25% from one minute to the next, more than most changes are worth. Each
cycle runs A B B A, so a drift that is linear over a cycle weighs on both
sides alike; the figure to quote is the ratio of the sums (all of B's runs
over all of A's), with the spread of the per-cycle ratios beside it to say
how far to trust it. Every run's figures are printed as they come, with the
bandwidth probe `ingot bench` took in that run.

Output, per runner and batch: decode tok/s and prefill tok/s of A and of B
(each run's median over its --runs, as `ingot bench` reports it), the
ratio of the sums B/A, and the lowest and highest per-cycle ratio.

Exit status: 0; 1 when a run fails (its stderr is shown) or prints no
results; 2 on bad arguments or a revision that does not build.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BENCH_ARGS = ["--batch", "1", "--runs", "5", "--gen", "64", "--prompt", "16"]
METRICS = (("decode_tok_s", "decode tok/s"), ("prefill_tok_s", "prefill tok/s"))


class AbError(Exception):
    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


def cache_dir():
    home = os.environ.get("INGOT_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "ingot")
    return os.path.join(home, "ab")


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)


def binary_of(spec):
    """The ingot binary for SPEC: SPEC itself when it is an executable file,
    else SPEC's commit, built (once) in a throwaway worktree."""
    if os.path.isfile(spec) and os.access(spec, os.X_OK):
        return os.path.abspath(spec)
    rev = git("rev-parse", "--verify", "--quiet", spec + "^{commit}")
    if rev.returncode != 0:
        raise AbError(f"ab: {spec!r} is neither an executable file nor a git revision", 2)
    commit = rev.stdout.strip()
    out = os.path.join(cache_dir(), "ingot-" + commit[:12])
    if os.path.isfile(out):
        return out
    os.makedirs(cache_dir(), exist_ok=True)
    tree = tempfile.mkdtemp(prefix="ingot-ab-", dir=cache_dir())
    os.rmdir(tree)  # git worktree add wants to make it
    print(f"ab: building {spec} ({commit[:12]}) in {tree}", file=sys.stderr, flush=True)
    added = git("worktree", "add", "--detach", tree, commit)
    if added.returncode != 0:
        raise AbError(f"ab: git worktree add failed: {added.stderr.strip()}", 2)
    try:
        jobs = str(os.cpu_count() or 1)
        made = subprocess.run(["make", "-C", tree, "-j" + jobs, "ingot"],
                              capture_output=True, text=True)
        if made.returncode != 0:
            tail = "\n".join((made.stdout + made.stderr).splitlines()[-20:])
            raise AbError(f"ab: {spec} does not build:\n{tail}", 2)
        shutil.copy2(os.path.join(tree, "ingot"), out + ".tmp")
        os.replace(out + ".tmp", out)
    finally:
        git("worktree", "remove", "--force", tree)
    return out


def bench_once(binary, bench_args):
    """One `BINARY bench --json BENCH_ARGS`: (probe GB/s, {(runner, batch): result})."""
    p = subprocess.run([binary, "bench", "--json", *bench_args], capture_output=True, text=True)
    if p.returncode != 0:
        raise AbError(f"ab: {binary} bench exited {p.returncode}:\n{p.stderr.strip()}", 1)
    try:
        doc = json.loads(p.stdout)
        results = {(r["runner"], r["batch"]): r for r in doc["results"]}
    except (ValueError, KeyError, TypeError) as e:
        raise AbError(f"ab: {binary} bench printed no results ({e}):\n{p.stdout[:500]}", 1)
    if not results:
        raise AbError(f"ab: {binary} bench printed an empty results array", 1)
    return doc.get("stream_bw_gbs"), results


def run_line(cycle, side, probe, results):
    cells = []
    for (runner, batch), r in sorted(results.items()):
        cell = f"{runner} b{batch} {r.get('decode_tok_s', 0):.1f}"
        if r.get("prefill_tok_s"):
            cell += f" / pp {r['prefill_tok_s']:.1f}"
        cells.append(cell)
    probe_text = f"probe {probe:.1f} GB/s" if probe else "probe -"
    return f"cycle {cycle} {side}  {probe_text}  " + "  ".join(cells)


def summarize(runs):
    """runs: [(cycle, side, results)]. Rows of (key, metric, A values, B
    values, ratio of sums, lowest and highest per-cycle ratio); a metric
    that some run lacks is left out."""
    keys = sorted(set.intersection(*(set(res) for _, _, res in runs)))
    cycles = sorted({c for c, _, _ in runs})
    rows = []
    for key in keys:
        for field, label in METRICS:
            vals = [(c, s, res[key].get(field)) for c, s, res in runs]
            if any(not v for _, _, v in vals):
                continue
            side_sum = {s: [0.0] * len(cycles) for s in "AB"}
            side_vals = {"A": [], "B": []}
            for c, s, v in vals:
                side_sum[s][cycles.index(c)] += v
                side_vals[s].append(v)
            per_cycle = [b / a for a, b in zip(side_sum["A"], side_sum["B"])]
            rows.append((key, label, side_vals["A"], side_vals["B"],
                         sum(side_sum["B"]) / sum(side_sum["A"]), min(per_cycle), max(per_cycle)))
    return rows


def print_summary(rows):
    print()
    print(f"{'runner':<7}{'batch':>6}  {'figure':<14}{'A (min .. max)':>22}"
          f"{'B (min .. max)':>22}{'B/A':>8}   per cycle")
    for (runner, batch), label, a, b, ratio, lo, hi in rows:
        a_text = f"{min(a):.1f} .. {max(a):.1f}"
        b_text = f"{min(b):.1f} .. {max(b):.1f}"
        print(f"{runner:<7}{batch:>6}  {label:<14}{a_text:>22}{b_text:>22}{ratio:>8.3f}"
              f"   {lo:.3f} .. {hi:.3f}")


def main(argv):
    if "--" in argv:
        cut = argv.index("--")
        argv, bench_args = argv[:cut], argv[cut + 1:]
    else:
        bench_args = list(DEFAULT_BENCH_ARGS)
    ap = argparse.ArgumentParser(prog="bench/ab.py",
                                 description="ingot bench, A B B A, ratio of the sums")
    ap.add_argument("--cycles", type=int, default=2, help="A B B A cycles (default 2)")
    ap.add_argument("a", metavar="A", help="ingot binary or git revision")
    ap.add_argument("b", metavar="B", help="ingot binary or git revision")
    args = ap.parse_args(argv)
    if args.cycles < 1:
        ap.error("--cycles must be at least 1")
    if "--json" in bench_args:
        bench_args.remove("--json")
    try:
        binary = {"A": binary_of(args.a), "B": binary_of(args.b)}
        print(f"A: {binary['A']}\nB: {binary['B']}\nbench args: {' '.join(bench_args)}",
              flush=True)
        runs = []
        for cycle in range(1, args.cycles + 1):
            for side in "ABBA":
                probe, results = bench_once(binary[side], bench_args)
                runs.append((cycle, side, results))
                print(run_line(cycle, side, probe, results), flush=True)
    except AbError as e:
        print(e, file=sys.stderr)
        return e.status
    rows = summarize(runs)
    if not rows:
        print("ab: A and B report no runner and batch in common", file=sys.stderr)
        return 1
    print_summary(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
