#!/usr/bin/env bash
# Runs every test of the project and prints "N passed, N failed" last.
#
#   tests/run.sh [FILTER]      FILTER: substring of test names to run
#
# C tests: build/release/tests/test_* and (unless INGOT_TEST_ASAN=0) the same
# binaries from build/asan, and whatever build/tsan holds (the threaded tests,
# `make tsan`; INGOT_TEST_TSAN=0 skips them, INGOT_TSAN_TESTS="test_a test_b"
# runs only those). Python tests: tests/test_*.py, run with the
# private test packages on PYTHONPATH, promtool on PATH and the release ./ingot.
# Each test runs from the repository root; its output goes to
# build/test-logs/NAME.log and is shown when it fails.
set -u
cd "$(dirname "$0")/.."
FILTER=${1:-}
export PYTHONPATH="${INGOT_PYDEPS:-$HOME/.cache/ingot/pip/test}${PYTHONPATH:+:$PYTHONPATH}"
# promtool where scripts/setup.sh unpacked it (when not installed)
export PATH="$PATH:${INGOT_PROMTOOL_DIR:-$HOME/.cache/ingot/promtool}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
LOGS=build/test-logs
mkdir -p "$LOGS/release" "$LOGS/asan" "$LOGS/tsan" "$LOGS/py"
pass=0; fail=0; failed=()

run_one() { # name, command...
  local name=$1; shift
  [ -n "$FILTER" ] && [[ "$name" != *"$FILTER"* ]] && return
  local t0=$(date +%s%N)
  if "$@" > "$LOGS/$name.log" 2>&1; then
    pass=$((pass+1)); printf 'PASS %-40s %6.1fs\n' "$name" "$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN{print (b-a)/1e9}')"
  else
    fail=$((fail+1)); failed+=("$name")
    printf 'FAIL %-40s (log: %s)\n' "$name" "$LOGS/$name.log"
    tail -n 40 "$LOGS/$name.log" | sed 's/^/    | /'
  fi
}

modes=(release)
[ "${INGOT_TEST_ASAN:-1}" != 0 ] && [ -d build/asan/tests ] && modes+=(asan)
[ "${INGOT_TEST_TSAN:-1}" != 0 ] && [ -d build/tsan/tests ] && modes+=(tsan)
[ "${INGOT_TEST_MODE:-}" = asan ] && modes=(asan)
[ "${INGOT_TEST_MODE:-}" = tsan ] && modes=(tsan)
# halt_on_error: a race fails the test (TSan's exit code 66)
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
for mode in "${modes[@]}"; do
  for bin in build/$mode/tests/test_*; do
    [ -x "$bin" ] || continue
    if [ "$mode" = tsan ] && [ "${INGOT_TSAN_TESTS:-all}" != all ] &&
       [[ " ${INGOT_TSAN_TESTS} " != *" $(basename "$bin") "* ]]; then
      continue
    fi
    run_one "$mode/$(basename "$bin")" "$bin"
  done
done
if [ -z "${INGOT_TEST_MODE:-}" ]; then
  for py in tests/test_*.py; do
    [ -f "$py" ] || continue
    run_one "py/$(basename "$py" .py)" python3 "$py"
  done
fi
echo
[ $fail -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
