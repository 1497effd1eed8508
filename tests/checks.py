"""The check-and-count layer of the Python tests (the C tests' check.h):
check() prints one "ok"/"FAIL" line and records the result in `results`,
which each test's main() sums up for its exit status."""

results = []


def check(name, cond, detail=""):
    results.append(bool(cond))
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + str(detail)[:2000]),
          flush=True)
