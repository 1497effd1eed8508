#!/usr/bin/env bash
# Builds llama.cpp from the llama-cpp-python source distribution (which
# vendors it) into a cache outside the repository. Dev/test tool only: ingot
# never links or calls llama.cpp at run time. Prints the bin directory.
#
#   scripts/build-llamacpp.sh            # -> $LLAMACPP_HOME/build/bin
set -euo pipefail
VERSION=${LLAMACPP_PY_VERSION:-0.3.36}
HOME_DIR=${LLAMACPP_HOME:-$HOME/.cache/ingot/llama.cpp-$VERSION}
BIN="$HOME_DIR/build/bin"
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
cmake -S src/vendor/llama.cpp -B build -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON >&2
cmake --build build -j"$(nproc)" --target llama-cli llama-perplexity llama-bench \
  llama-batched-bench llama-server llama-simple llama-tokenize >&2
echo "$BIN"
