#!/usr/bin/env bash
# ingot serve vs llama-server: the same workload, model, threads and machine.
#
#   bench/vs-llamacpp-server.sh [-m MODEL] [-t THREADS] [-w chat|shared-prefix|agentic]
#                               [-c CONCURRENCY] [-n REQUESTS] [-o MAX_TOKENS]
#
# Builds llama.cpp from the llama-cpp-python sdist (scripts/build-llamacpp.sh;
# a dev tool, never a runtime dependency), starts llama-server with as many
# parallel slots as the concurrency, runs `ingot bench serve` against it,
# then does the same against `ingot serve`, and prints both side by side.
# Servers listen on loopback only and are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="" THREADS=$(nproc) WORKLOAD=chat CONC=16 REQS=64 MAXTOK=32
while getopts "m:t:w:c:n:o:" o; do
  case $o in
    m) MODEL=$OPTARG ;; t) THREADS=$OPTARG ;; w) WORKLOAD=$OPTARG ;;
    c) CONC=$OPTARG ;; n) REQS=$OPTARG ;; o) MAXTOK=$OPTARG ;; *) exit 2 ;;
  esac
done
[ -n "$MODEL" ] || MODEL=$(./ingot pull | tail -1)
BIN=$(scripts/llamacpp-bin.sh "$MODEL" | head -1)
make -s >/dev/null
OUT=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$OUT"; }
trap cleanup EXIT

wait_health() { # url
  for _ in $(seq 1 120); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "server at $1 did not become healthy" >&2
  return 1
}

run_bench() { # url name
  ./ingot bench serve --url "$1" --workload "$WORKLOAD" --concurrency "$CONC" \
    --requests "$REQS" --max-tokens "$MAXTOK" --json > "$OUT/$2.json"
}

LPORT=$((20000 + RANDOM % 10000))
"$BIN/llama-server" -m "$MODEL" -t "$THREADS" --host 127.0.0.1 --port "$LPORT" \
  -np "$CONC" -c $((CONC * 2048)) > "$OUT/llama.log" 2>&1 &
PIDS+=($!)
wait_health "http://127.0.0.1:$LPORT"
echo "== llama-server: $WORKLOAD, concurrency $CONC, $REQS requests" >&2
run_bench "http://127.0.0.1:$LPORT" llama
kill "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true

IPORT=$((LPORT + 1))
./ingot serve -m "$MODEL" -t "$THREADS" --port "$IPORT" --max-num-seqs "$CONC" \
  > "$OUT/ingot.log" 2>&1 &
PIDS+=($!)
wait_health "http://127.0.0.1:$IPORT"
echo "== ingot serve: $WORKLOAD, concurrency $CONC, $REQS requests" >&2
run_bench "http://127.0.0.1:$IPORT" ingot

python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
l = json.load(open(os.path.join(out, "llama.json")))
i = json.load(open(os.path.join(out, "ingot.json")))
rows = [("completed requests", "completed"), ("failed requests", "failed"),
        ("output tok/s", "output_throughput"), ("total tok/s", "total_token_throughput"),
        ("mean TTFT ms", "mean_ttft_ms"), ("P99 TTFT ms", "p99_ttft_ms"),
        ("mean TPOT ms", "mean_tpot_ms"), ("P99 ITL ms", "p99_itl_ms")]
print("%-22s %14s %14s %8s" % ("figure", "llama-server", "ingot serve", "ratio"))
for name, key in rows:
    a, b = l.get(key, float("nan")), i.get(key, float("nan"))
    # no ratio where llama-server's figure is 0 (e.g. no failed requests on either side)
    ratio = "%7.2fx" % (b / a) if isinstance(a, (int, float)) and a else "%8s" % "-"
    print("%-22s %14.2f %14.2f %s" % (name, a, b, ratio))
PY
