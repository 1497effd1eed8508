#!/usr/bin/env bash
# Builds llama.cpp from the llama-cpp-python source distribution (which
# vendors it) into a cache outside the repository. Dev/test tool only: ingot
# never links or calls llama.cpp at run time. Prints the bin directory.
#
#   scripts/build-llamacpp.sh            # -> $LLAMACPP_HOME/build/bin
#   scripts/build-llamacpp.sh --no-amx   # -> $LLAMACPP_HOME/build-noamx/bin
#
# --no-amx: compiled without AMX (-mno-amx-*), for hosts where llama.cpp's
# AMX kernels die: on the first AMX host seen (a Sapphire Rapids-class KVM
# guest, 2026-12-05) this version's llama-bench took SIGILL (ILL_ILLOPN)
# at its LDTILECFG although the tile permission had been granted, where
# ingot's AMX kernels run.
set -euo pipefail
VERSION=${LLAMACPP_PY_VERSION:-0.3.36}
HOME_DIR=${LLAMACPP_HOME:-$HOME/.cache/ingot/llama.cpp-$VERSION}
BUILD=build
ISA_FLAGS=""
if [ "${1:-}" = "--no-amx" ]; then
  BUILD=build-noamx
  ISA_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--no-amx]" >&2; exit 2
fi
BIN="$HOME_DIR/$BUILD/bin"
if [ -x "$BIN/llama-cli" ] && [ -x "$BIN/llama-perplexity" ] && [ -x "$BIN/llama-bench" ]; then
  echo "$BIN"; exit 0
fi
command -v cmake >/dev/null || { apt-get update -qq && apt-get install -y -qq cmake; } >&2
mkdir -p "$HOME_DIR"
cd "$HOME_DIR"
if [ ! -d src ]; then
  pip download --no-deps --no-binary :all: -d dl "llama-cpp-python==$VERSION" >&2
  mkdir -p src && tar -xzf dl/llama_cpp_python-*.tar.gz -C src --strip-components=1
fi
cmake -S src/vendor/llama.cpp -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="$ISA_FLAGS" -DCMAKE_CXX_FLAGS="$ISA_FLAGS" -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON >&2
cmake --build "$BUILD" -j"$(nproc)" --target llama-cli llama-perplexity llama-bench \
  llama-batched-bench llama-server llama-simple llama-tokenize >&2
echo "$BIN"
