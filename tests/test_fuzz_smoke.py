"""Short libFuzzer run of every fuzz target (fuzz/run.sh, FUZZ_SMOKE_SECONDS
each, default 10, one target a CPU at a time) when clang is installed
(scripts/setup.sh fuzz); skipped
otherwise. The corpora grow in build/fuzz/corpus across runs; a crash input
is kept in build/fuzz/crashes and fails the test (see fuzz/README.md)."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    if not shutil.which("clang") or os.environ.get("INGOT_FUZZ_SMOKE") == "0":
        print("skip: clang not installed (scripts/setup.sh fuzz), or INGOT_FUZZ_SMOKE=0")
        return 0
    env = dict(os.environ, FUZZ_SECONDS=os.environ.get("FUZZ_SMOKE_SECONDS", "10"),
               FUZZ_PARALLEL=str(os.cpu_count() or 1))
    r = subprocess.run([os.path.join(ROOT, "fuzz", "run.sh")], cwd=ROOT, env=env)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
