"""The check-and-count layer of the Python tests (the C tests' check.h):
check() prints one "ok"/"FAIL" line and records the result in `results`,
which summary() turns into the exit status."""
import time

results = []


def check(name, cond, detail=""):
    results.append(bool(cond))
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + str(detail)[:2000]),
          flush=True)


def summary(t0, srv=None):
    """Prints the count (and srv's last log lines on failure); the exit status."""
    print(f"{sum(results)}/{len(results)} checks passed in {time.time() - t0:.1f}s")
    if srv is not None and not all(results):
        print("server log:\n" + "".join(srv.log[-30:]))
    return 0 if results and all(results) else 1
