#!/usr/bin/env bash
# Run every speed check the issues name three times (fresh processes, interleaved), append the JSON lines
# to benchmarks/results.jsonl, and regenerate results/benchmarks.md's current table and the README's speed
# row from them (memread.bench.suite). Run on an otherwise idle machine: pause training runs with SIGSTOP.
#   benchmarks/run.sh                      every check, 3 runs
#   benchmarks/run.sh --runs 5 --only nse mma-nse
#   python -m memread.bench.suite list     the checks, their commands and targets
set -euo pipefail
cd "$(dirname "$0")/.."
exec python -m memread.bench.suite run "$@"
