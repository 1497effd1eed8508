#!/usr/bin/env bash
# Prints the bin directory of a llama.cpp build (scripts/build-llamacpp.sh)
# that runs MODEL on this host: the native build, or where its AMX kernels
# die of SIGILL (seen on a Sapphire Rapids-class KVM guest), the build
# without AMX: the directory on the first line, which build on the second.
# Dev/bench tool only.
#
#   scripts/llamacpp-bin.sh MODEL
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:?usage: $0 MODEL}
BIN=$(scripts/build-llamacpp.sh)
ERR=$(mktemp)
trap 'rm -f "$ERR"' EXIT
if "$BIN/llama-bench" -m "$MODEL" -t 1 -p 8 -n 2 -r 1 -o json > /dev/null 2>"$ERR"; then
  printf '%s\nnative\n' "$BIN"
  exit 0
else
  rc=$?
fi
if [ "$rc" -ne 132 ]; then
  cat "$ERR" >&2
  echo "llama-bench failed (exit $rc)" >&2
  exit 1
fi
BIN=$(scripts/build-llamacpp.sh --no-amx)
printf '%s\nnative without AMX (its AMX kernels died of SIGILL here)\n' "$BIN"
