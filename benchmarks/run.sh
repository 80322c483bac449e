#!/usr/bin/env bash
# Run the speed checks the issues name; append one JSON line each to benchmarks/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
run() {
  line="$(memread bench "$@")"
  echo "$line"
  python -c 'import json,sys; r=json.loads(sys.argv[1]); r["commit"]=sys.argv[2]; r["args"]=sys.argv[3]; print(json.dumps(r))' \
    "$line" "$commit" "$*" >> benchmarks/results.jsonl
}
run lstm --batch 40 --steps 35 --emb 150 --hidden 300
for reader in "${@}"; do
  run "$reader" --batch 40 --steps 35 --emb 150 --hidden 300
done
