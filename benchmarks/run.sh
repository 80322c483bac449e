#!/usr/bin/env bash
# Run the speed checks the issues name; append one JSON line each to benchmarks/results.jsonl.
# Run on an otherwise idle machine: the ratios are measured in one process, but a busy machine
# still skews them.
set -euo pipefail
cd "$(dirname "$0")/.."
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
run() {
  line="$(memread bench "$@")"
  echo "$line"
  python -c 'import json,sys; r=json.loads(sys.argv[1]); r["commit"]=sys.argv[2]; r["args"]=sys.argv[3]; print(json.dumps(r))' \
    "$line" "$commit" "$*" >> benchmarks/results.jsonl
}
run lstm --batch 40 --steps 35 --emb 150 --hidden 300                                    # issue 2: ~1
run lstmn --batch 40 --steps 35 --emb 150 --hidden 300                                   # issue 3: >= 0.5
run kvp --batch 64 --steps 20 --emb 300 --hidden 300 --vocab 10000 --set window=5 --match-params  # issue 7: >= 0.95
run ngram --batch 64 --steps 20 --emb 300 --hidden 300 --vocab 10000 --set n=4 --match-params     # issue 7: >= 0.95
run iaa                                                                                  # issue 8: >= 0.9
run nse --batch 32 --steps 30 --emb 300 --hidden 300                                     # issue 4: >= 0.5
run lstmn-deep-fusion                                                                     # issue 5: >= 0.4
