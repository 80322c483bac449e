#!/usr/bin/env bash
# The GPU work of a session lent a GPU machine, in one call (it has ~10 minutes):
#
#     bash scripts/gpu_checks.sh OUT [MINUTES [CLAIM:JOBS[:SEEDS] ..]]   # MEMREAD_DATA: a data root with their data
#
# 1. in the background, issue 23's claims a CPU session cannot finish (scripts/claims.py), every run limited to
#    MINUTES of training (train.max_minutes; validation at 16 streams, not the CPU's exact 1: a few context resets
#    in 73k tokens), each job a process sharing the GPU; by default daniluk-fig2c:5 and ptb-lstmn-1layer:3
#    (session 15's), e.g. `babi-iaa:9` or `daniluk-fig2c:15:3` (three seeds) in another session;
# 2. meanwhile the CUDA tests (tests/test_cuda.py) and the GPU memory of 2,000-word documents (issue 24);
# 3. when the claims are done, the benches of the suite on the GPU, alone on it (issues 20 and 24).
# Everything it measures lands in OUT: env.txt, cuda-tests.log, bench.jsonl, memory.log, results.jsonl
# (the claims' comparisons) and runs.tgz (the runs' metrics, configs, final.json and logs; no checkpoints).
set -u
out=${1:?usage: gpu_checks.sh OUT [MINUTES]}
minutes=${2:-5}
shift $(( $# < 2 ? $# : 2 ))
claims=("$@")
[ ${#claims[@]} -gt 0 ] || claims=(daniluk-fig2c:5 ptb-lstmn-1layer:3)
mkdir -p "$out" logs
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MEMREAD_RESULTS=$out/results.jsonl MEMREAD_QUIET=1
py=${PYTHON:-python3}
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$out/timeline.txt"; }
{ nvidia-smi -L; $py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
  echo "cpus $(nproc)"; } > "$out/env.txt" 2>&1

claim() {  # NAME JOBS [SEEDS]; a watchdog over the whole claim: its training, final evaluations and comparisons
  timeout $(( ${minutes%.*} * 60 + 240 )) $py scripts/claims.py run "$1" --jobs "$2" ${3:+--seeds "$3"} --device cuda \
    --set "train.max_minutes=$minutes" --set train.eval_batch_size=16 > "logs/claim-$1.log" 2>&1
  stamp "claim $1 done (exit $?)"
}
stamp "claims start"
for spec in "${claims[@]}"; do
  IFS=: read -r name jobs seeds <<< "$spec"
  claim "$name" "$jobs" "$seeds" &
done

stamp "cuda tests start"
timeout 240 $py -m pytest -m cuda tests/test_cuda.py -q -p no:cacheprovider -o addopts="" > "$out/cuda-tests.log" 2>&1
stamp "cuda tests done (exit $?)"
# peaks are per process (max_memory_allocated), so sharing the GPU leaves them as they are; its speeds are not kept
timeout 150 $py benchmarks/document_memory.py --device cuda --flat nse nse-ckpt lstmn lstm > "$out/memory.log" 2>&1
stamp "document memory done (exit $?)"
wait
stamp "claims all done"
tar czf "$out/runs.tgz" logs $(find runs/claims -name metrics.jsonl -o -name final.json -o -name config.json) 2>/dev/null

# the suite's checks that run on `memread bench`, each once, on the GPU alone
$py - <<'EOF' > logs/bench-args.txt
from memread.bench.suite import SUITE
for c in SUITE:
    if not c.script and c.name in ("lstm", "lstmn", "kvp", "ngram", "nse", "mma-nse", "iaa"):
        print(c.name, c.args)
EOF
while read -r name args; do
  # shellcheck disable=SC2086
  line=$(timeout 25 $py -m memread bench $args --device cuda 2>>"$out/bench.err" | tail -1)
  [ -n "$line" ] && echo "{\"check\": \"$name\", \"args\": \"$args\", \"bench\": $line}" >> "$out/bench.jsonl"
  stamp "bench $name"
done < logs/bench-args.txt

stamp "end"
