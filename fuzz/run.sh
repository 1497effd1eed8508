#!/usr/bin/env bash
# run.sh — builds the fuzz targets and runs each one for a while.
#
#   fuzz/run.sh [TARGET...]     TARGET: gguf, tokenizer, grammar, request, template,
#                               http (default: all)
#   make fuzz FUZZ_SECONDS=N    the same, via the Makefile
#
# Environment: FUZZ_SECONDS (default 60) per target; FUZZ_PARALLEL
# (default 1), how many targets run at once (test_fuzz_smoke.py runs one
# a CPU); FUZZ_ARGS, extra libFuzzer flags (e.g. "-jobs=2 -workers=2");
# INGOT_TESTDATA, the shared test data (its vocabularies seed the corpora
# and back the tokenizer target).
#
# Each target runs in one process under ASan + UBSan with leak detection;
# abort() (a broken harness invariant) counts as a crash. Seeds are
# regenerated into build/fuzz/seeds/<t>; what the fuzzer finds accumulates
# in build/fuzz/corpus/<t> across runs; crash inputs are kept as
# build/fuzz/crashes/<t>-crash-* (-oom-*, -timeout-*, -leak-*), logs in
# build/fuzz/logs. Exit status: 0 when no target crashed.
set -u
cd "$(dirname "$0")/.."
SECS=${FUZZ_SECONDS:-60}
B=build/fuzz
if ! command -v clang > /dev/null; then
  echo "fuzz: clang not found (scripts/setup.sh fuzz installs it)" >&2
  exit 2
fi
ROOT=$(pwd)
# the targets run from a directory under $B (below): the shared test data
# by an absolute path
case ${INGOT_TESTDATA:=../shared/testdata} in
  /*) ;;
  *) INGOT_TESTDATA=$ROOT/$INGOT_TESTDATA ;;
esac
export INGOT_TESTDATA
mkdir -p "$B/logs"
echo "fuzz: building into $B (log: $B/logs/build.log)" >&2
if ! make -f fuzz/fuzz.mk -j"$(nproc)" > "$B/logs/build.log" 2>&1; then
  tail -n 30 "$B/logs/build.log" >&2
  echo "fuzz: build failed" >&2
  exit 2
fi

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(gguf tokenizer grammar request template http)
mkdir -p "$B/crashes"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The longest input target $1 takes; fails for an unknown target.
max_len_of() {
  case $1 in
    gguf|template) echo 32768 ;;
    tokenizer|grammar) echo 4096 ;;
    request|http) echo 16384 ;;
    *) return 1 ;;
  esac
}
for t in "${targets[@]}"; do
  max_len_of "$t" > /dev/null || { echo "fuzz: unknown target '$t'" >&2; exit 2; }
done

# Runs target $1; its exit status is 0 when it found nothing.
run_target() {
  local t=$1 max_len
  max_len=$(max_len_of "$t")
  local seeds=$B/seeds/$t corpus=$B/corpus/$t log=$B/logs/$t.log
  rm -rf "$seeds" && mkdir -p "$seeds" "$corpus"
  "$B/make_seeds" "$t" "$seeds" || return 1
  echo "fuzz: $t for ${SECS}s (log: $log)" >&2
  # from a directory of its own: with -jobs (FUZZ_ARGS) libFuzzer writes
  # each job's output to fuzz-N.log in the current directory, appended to
  # $log afterwards
  local jobdir=$B/logs/$t.jobs
  rm -rf "$jobdir" && mkdir -p "$jobdir"
  # shellcheck disable=SC2086
  ( cd "$jobdir" && "$ROOT/$B/fuzz_$t" -max_total_time="$SECS" -max_len="$max_len" -timeout=30 \
    -rss_limit_mb=2048 -detect_leaks=1 -print_final_stats=1 \
    -dict="$ROOT/fuzz/$t.dict" -artifact_prefix="$ROOT/$B/crashes/$t-" ${FUZZ_ARGS:-} \
    "$ROOT/$corpus" "$ROOT/$seeds" ) > "$log" 2>&1
  local rc=$?
  cat "$jobdir"/fuzz-*.log >> "$log" 2> /dev/null
  rm -rf "$jobdir"
  local done_line eps execs cov
  done_line=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$log" | tail -1)
  # summed over the jobs, when there are several
  eps=$(awk '/^stat::average_exec_per_sec:/ { s += $2; n++ } END { if (n) print s }' "$log")
  execs=$(awk '/^stat::number_of_executed_units:/ { s += $2; n++ } END { if (n) print s }' "$log")
  cov=$(sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1, ft \2/p' <<< "$done_line")
  echo "fuzz: $t: rc $rc, ${execs:-?} execs, ${eps:-?} exec/s, ${cov:-no coverage line}," \
       "corpus $(ls "$corpus" | wc -l) files" >&2
  if [ $rc -ne 0 ]; then
    grep -E '^(==[0-9]+==ERROR|SUMMARY|harness:|artifact_prefix|Test unit written)' "$log" | head -8 >&2
    return 1
  fi
}

# FUZZ_PARALLEL targets at a time, each in the background
declare -A target_of=() # pid -> target
failed=()
reap() { # waits for one running target to end (wait -p: bash 5.1)
  local pid
  wait -n -p pid || failed+=("${target_of[$pid]}")
  unset "target_of[$pid]"
}
for t in "${targets[@]}"; do
  while [ ${#target_of[@]} -ge "${FUZZ_PARALLEL:-1}" ]; do reap; done
  run_target "$t" &
  target_of[$!]=$t
done
while [ ${#target_of[@]} -gt 0 ]; do reap; done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $B/crashes; minimize with" \
       "$B/fuzz_<t> -minimize_crash=1 -runs=20000 <input>)" >&2
  exit 1
fi
echo "fuzz: no crashes" >&2
