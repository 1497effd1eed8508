#!/usr/bin/env bash
# ingot vs llama.cpp on the same GGUF, same machine, same thread count, same run.
#
#   bench/vs-llamacpp.sh [-m MODEL] [-t THREADS]
#
# Builds llama.cpp from the llama-cpp-python source distribution into
# ~/.cache/ingot (scripts/build-llamacpp.sh, through scripts/llamacpp-bin.sh,
# which picks the build without AMX where llama.cpp's AMX path dies; a dev
# tool, never a runtime dependency of ingot), runs llama-bench (pp512, tg128) and
# llama-batched-bench, then `ingot bench`, and prints the figures and ratios
# side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=""
THREADS=$(nproc)
while getopts "m:t:" o; do
  case $o in m) MODEL=$OPTARG ;; t) THREADS=$OPTARG ;; *) exit 2 ;; esac
done
[ -n "$MODEL" ] || MODEL=$(./ingot pull | tail -1)
LLAMA=$(scripts/llamacpp-bin.sh "$MODEL")
BIN=$(sed -n 1p <<<"$LLAMA")
LLAMA_BUILD=$(sed -n 2p <<<"$LLAMA")
make -s >/dev/null
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

echo "== llama.cpp: llama-bench -p 512 -n 128 -t $THREADS" >&2
"$BIN/llama-bench" -m "$MODEL" -t "$THREADS" -p 512 -n 128 -o json > "$OUT/lb.json" 2>"$OUT/lb.err"
echo "== llama.cpp: llama-batched-bench (npl 1,8,32; 128 tokens each)" >&2
"$BIN/llama-batched-bench" -m "$MODEL" -t "$THREADS" -c 8192 -b 2048 -ub 512 \
  -npp 8 -ntg 128 -npl 1,8,32 --output-format jsonl > "$OUT/bb.jsonl" 2>"$OUT/bb.err" || true
echo "== ingot bench --batch 1,8,32 -t $THREADS" >&2
./ingot bench -m "$MODEL" -t "$THREADS" --batch 1,8,32 --runner mega,graph --json > "$OUT/ingot.json"

python3 - "$OUT" "$LLAMA_BUILD" <<'PY'
import json, sys, os
out = sys.argv[1]
print("llama.cpp build: %s" % sys.argv[2])
lb = json.load(open(os.path.join(out, "lb.json")))
ll = {}
for r in lb:
    key = "pp512" if r.get("n_prompt") and not r.get("n_gen") else "tg128"
    ll[key] = r["avg_ts"]
bb = {}
for line in open(os.path.join(out, "bb.jsonl")):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        bb[int(r["pl"])] = r.get("speed_tg", 0.0)
ing = json.load(open(os.path.join(out, "ingot.json")))
res = {(r["runner"], r["batch"]): r for r in ing["results"]}
print("stream read bandwidth (ingot's probe, same run): %.1f GB/s; weights %.1f MB/token"
      % (ing["stream_bw_gbs"], ing["weight_bytes_per_token"] / 1e6))
print("ingot kernels: %s (AMX: %s)" % (ing.get("isa", "?"), ing.get("amx", "?")))
print("%-28s %12s %12s %12s %8s" % ("figure", "llama.cpp", "ingot mega", "ingot graph", "ratio"))
def row(name, ref, key, field):
    m = res.get(("mega", key), {}).get(field)
    g = res.get(("graph", key), {}).get(field)
    ratio = (m / ref) if (m and ref) else float("nan")
    print("%-28s %12.1f %12.1f %12.1f %7.2fx" % (name, ref or float("nan"), m or float("nan"),
                                                 g or float("nan"), ratio))
row("prefill pp512 tok/s", ll.get("pp512"), 1, "prefill_tok_s")
row("decode tg128 tok/s (B=1)", ll.get("tg128"), 1, "decode_tok_s")
for b in (8, 32):
    row("batched decode B=%d tok/s" % b, bb.get(b), b, "decode_tok_s")
m1 = res.get(("mega", 1), {})
if m1:
    print("ingot mega B=1: %.1f GB/s = %.0f%% of the measured bandwidth" % (m1["bw_gbs"], m1["bw_pct"]))
PY
