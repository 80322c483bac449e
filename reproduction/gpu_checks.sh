#!/usr/bin/env bash
# The GPU work of a session lent a GPU machine, in one call (it has ~10 minutes):
#
#     bash reproduction/gpu_checks.sh OUT [MINUTES [CLAIM:JOBS[:SEEDS[:MINUTES[:RUN,..]]] ..]]   # MEMREAD_DATA: their data root
#
# The runs share the GPU through NVIDIA's Multi-Process Service (MPS) where the machine has it: without it the GPU
# time-slices between processes, one process's small kernels at a time; with it their kernels run side by side.
# Session 20, six runs under MPS: the Daniluk LMs reached 20-24 epochs in 2-3 minutes where session 19's fourteen
# without it reached 10-13 in 8, the 1-layer LSTM 40 epochs in 156 s (session 19: 15 in 8 minutes). MPS=0 leaves
# it off; a daemon that will not serve a first CUDA call within 30 s is stopped and the runs go on without it.
#
# 1. in the background, issue 23's claims a CPU session cannot finish (reproduction/claims.py), every run limited to
#    MINUTES of training (train.max_minutes; validation at 16 streams, not the CPU's exact 1: a few context resets
#    in 73k tokens), each job a process sharing the GPU; by default daniluk-fig2c:5 and ptb-lstmn-1layer:3
#    (session 15's), e.g. `babi-iaa:9` or `daniluk-fig2c:15:3` (three seeds) in another session;
#    time-sliced, the GPU is the limit, not the count: five Daniluk LMs side by side already keep it busy, more share the
#    same throughput (session 15: 5 runs, 10-18 epochs in 4.5 min; session 18: 18 runs, ~8 epochs in 5.5; session
#    19: 14 runs, GPU 99 % busy all along, 10-13 epochs in 8) -- so it was without MPS; with it (below) six runs
#    reached 20-24 epochs in 2-3 minutes (session 20), and more runs in one call are the cheap way to use it;
# 2. meanwhile the CUDA tests (tests/test_cuda.py) and the GPU memory of 2,000-word documents (issue 24);
# 3. when the claims are done, the benches of the suite on the GPU, alone on it (issues 20 and 24).
# Everything it measures lands in OUT: env.txt, cuda-tests.log, bench.jsonl, memory.log, results.jsonl
# (the claims' comparisons) and runs.tgz (the runs' metrics, configs, vocabularies, final.json, unit records
# and logs; no checkpoints: the unit records are what a later comparison on a CPU reads in their place).
# A claim's RUN,.. (claims.py --only): those of its runs alone, e.g. the LSTM of a claim whose LSTMNs train on a
# CPU. Write MEMREAD_COMMIT=<this machine's git rev-parse --short HEAD> into the call's command: the device's copy of
# the tree reports the session's first commit as its HEAD.
# Runs begun on a CPU go on here: `python -m reproduction.claims stage CLAIM --only RUN` copies them, slim, into .carry/
# (git-ignored); name .carry in the call's carry and they are put in place first. Back on the CPU,
# `python -m reproduction.claims unpack OUT1 [OUT2 ..] --logs results/runs/device-calls/call-N` puts each call's runs in place (those that
# got further, with a checkpoint or ended) and its logs beside the session's results.
# Settings by environment: DEVICE (cuda; cpu for a dry run here), TESTS=0 (no CUDA tests, no memory check), GRACE
# (seconds a claim may take past MINUTES for its final evaluations and comparisons, 240), BENCH=0 (no benches),
# CKPTS (a glob of run folders whose checkpoints come back, for a CPU session to go on with: packed into
# ckpt.tar.part-* of 15 MiB, the tool's limit being 16 MiB a file and 8 files, so the small files then travel
# inside runs.tgz).
set -u
out=${1:?usage: gpu_checks.sh OUT [MINUTES]}
minutes=${2:-5}
shift $(( $# < 2 ? $# : 2 ))
claims=("$@")
[ ${#claims[@]} -gt 0 ] || claims=(daniluk-fig2c:5 ptb-lstmn-1layer:3)
mkdir -p "$out" logs
export PYTHONPATH=$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MEMREAD_RESULTS=$out/results.jsonl MEMREAD_QUIET=1
py=${PYTHON:-python3}
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$out/timeline.txt"; }
{ nvidia-smi -L; $py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
  echo "cpus $(nproc --all)"; } > "$out/env.txt" 2>&1

claim() {  # NAME JOBS SEEDS MINUTES RUNS; a watchdog over the whole claim: its training, final evaluations, comparisons
  local m=${4:-$minutes}
  timeout $(( ${m%.*} * 60 + ${GRACE:-240} )) $py -m reproduction.claims run "$1" --jobs "$2" ${3:+--seeds "$3"} \
    ${5:+--only "$5"} --device "${DEVICE:-cuda}" \
    --set "train.max_minutes=$m" --set train.eval_batch_size=16 > "logs/claim-$1.log" 2>&1
  stamp "claim $1 done (exit $?)"
}
if [ "${DEVICE:-cuda}" = cuda ] && [ "${MPS:-1}" != 0 ] && command -v nvidia-cuda-mps-control > /dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d && timeout 30 $py -c 'import torch; torch.ones(1, device="cuda").sum().item()'; then
    mps=1
    stamp "MPS on"
  else
    echo quit | nvidia-cuda-mps-control 2> /dev/null
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    stamp "MPS off: its daemon did not serve a first CUDA call"
  fi
fi
if [ "${DEVICE:-cuda}" = cuda ]; then  # how busy the GPU is, every 30 s, beside the runs' logs
  (while sleep 30; do nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader; done) \
    > logs/gpu-util.txt 2>&1 &
  smi=$!
fi
if [ -d .carry/runs ]; then  # runs begun elsewhere (`claims.py stage`, the call's carry): they go on here
  mkdir -p runs && cp -a .carry/runs/. runs/
  stamp "staged: $(cd .carry && find runs -name checkpoint_last.pt -printf '%h\n' | sort | tr '\n' ' ')"
fi
stamp "claims start"
pids=()
for spec in "${claims[@]}"; do
  IFS=: read -r name jobs seeds mins runs <<< "$spec"
  claim "$name" "$jobs" "$seeds" "$mins" "$runs" &
  pids+=($!)
done

stamp "cuda tests start"
if [ "${DEVICE:-cuda}" = cuda ] && [ "${TESTS:-1}" != 0 ]; then
  timeout 240 $py -m pytest -m cuda tests/test_cuda.py -q -p no:cacheprovider -o addopts="" > "$out/cuda-tests.log" 2>&1
  stamp "cuda tests done (exit $?)"
else
  stamp "cuda tests skipped (DEVICE=${DEVICE:-cuda}, TESTS=${TESTS:-1})"
fi
# peaks are per process (max_memory_allocated), so sharing the GPU leaves them as they are; its speeds are not kept
if [ "${DEVICE:-cuda}" = cuda ] && [ "${TESTS:-1}" != 0 ]; then
  timeout 150 $py benchmarks/document_memory.py --device cuda --flat nse nse-ckpt lstmn lstm > "$out/memory.log" 2>&1
  stamp "document memory done (exit $?)"
fi
wait "${pids[@]}"
[ -n "${smi:-}" ] && kill "$smi" 2> /dev/null
if [ -n "${mps:-}" ]; then  # the benches below time one process alone, as on a machine without MPS
  echo quit | nvidia-cuda-mps-control
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
stamp "claims all done"
small=()
if [ -n "${CKPTS:-}" ]; then  # the small files travel in runs.tgz, so that the parts fit the tool's 8 files
  for f in env.txt cuda-tests.log memory.log; do [ -f "$out/$f" ] && cp "$out/$f" logs/ && small+=("$out/$f"); done
fi
# with each ended run's unit records (units-*.npz, final_evaluation's): a CPU session compares it without its
# checkpoints
tar czf "$out/runs.tgz" logs $(find runs/claims -name metrics.jsonl -o -name final.json -o -name config.json \
  -o -name vocab.json -o -name 'units-*.npz') 2>/dev/null
[ ${#small[@]} -gt 0 ] && rm -f "${small[@]}"
if [ -n "${CKPTS:-}" ]; then
  # what each unfinished run needs to go on (as `claims.py stage`), up to four parts of 15 MiB beside 3 small files
  ckpts=$($py -m reproduction.claims resumable $CKPTS)
  [ -n "$ckpts" ] && tar cf - $ckpts | split -b 15M - "$out/ckpt.tar.part-"
  stamp "checkpoints packed: $(echo $ckpts | wc -w)"
fi

# the suite's checks that run on `memread bench`, each once, on the GPU alone
[ "${BENCH:-1}" = 0 ] && { stamp "end (no benches)"; exit 0; }
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
