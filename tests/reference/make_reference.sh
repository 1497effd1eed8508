#!/usr/bin/env bash
# Regenerates the llama.cpp greedy references for the default model.
# Dev tool: builds llama.cpp from the llama-cpp-python sdist (see
# scripts/build-llamacpp.sh) and a tiny driver against its library. The
# committed output (gemma3-270m-greedy.jsonl) is what tests compare with;
# rerun this only to refresh it, and say why in the commit.
set -euo pipefail
cd "$(dirname "$0")"
BIN=$(../../scripts/build-llamacpp.sh)
SRC="$BIN/../../src/vendor/llama.cpp"
MODEL=${INGOT_MODEL:-$(../../ingot pull | tail -1)}
OUT=$(mktemp -d)
cc -O2 -std=c11 llama_greedy.c -I"$SRC/include" -I"$SRC/ggml/include" \
   -L"$BIN" -Wl,-rpath,"$BIN" -lllama -lggml -lggml-base -o "$OUT/llama_greedy"
# F32 KV cache and no flash attention: the most precise llama.cpp
# configuration, and the one whose arithmetic ingot's F32 cache follows.
LLAMA_KV_F32=1 "$OUT/llama_greedy" "$MODEL" 64 < prompts.txt > gemma3-270m-greedy.jsonl 2>"$OUT/log" \
  || { tail -20 "$OUT/log"; exit 1; }
echo "wrote $(wc -l < gemma3-270m-greedy.jsonl) references (llama-cpp-python ${LLAMACPP_PY_VERSION:-0.3.36})"
