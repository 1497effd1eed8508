#!/usr/bin/env bash
# soak.sh — long-running load on `ingot serve` with faults mixed in.
#
#   bench/soak.sh                      10 minutes, 32 concurrent clients
#   bench/soak.sh --duration 300       5 minutes
#   bench/soak.sh --json               summary as JSON
#   bench/soak.sh -- -t 2 --max-num-seqs 8   other `ingot serve` arguments
#
# Starts ./ingot serve (INGOT_BIN or --ingot for another binary) on a free
# port with the default model; 10% of requests are dropped at a random
# point, 5% are malformed. Passes (exit 0) with no crash, no 5xx on valid
# requests, 4xx for every malformed one, resident memory within 1% of its
# level after warm-up, and within 2 s of going idle nothing running, KV
# cache empty, descriptors back to their count before the load. The driver
# is bench/soak.py (its --help lists every option).
set -eu
cd "$(dirname "$0")/.."
export PYTHONPATH="${INGOT_PYDEPS:-$HOME/.cache/ingot/pip/test}${PYTHONPATH:+:$PYTHONPATH}"
exec python3 bench/soak.py "$@"
