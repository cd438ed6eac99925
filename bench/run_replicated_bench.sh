#!/usr/bin/env bash
# Replicated training throughput, all in one run (reported in
# docs/PERFORMANCE.md): aggregate examples/s of the book's CNN, batch 50,
# one intra-op thread per process, on this machine's loopback:
#   mnist_distributed, 1 ps + W workers, asynchronous, W = 1, 2, 3
#   mnist_distributed, 1 ps + 3 workers, synchronous (replicas_to_aggregate=3)
#   mnist_local, one process (no cluster)
#   PyTorch's parameter server over torch.distributed.rpc, 1 ps + 3 workers,
#   asynchronous (bench/pytorch_rpc_ps.py): the baseline
# Aggregate examples/s = (batches the workers computed) x 50 / (the longest
# worker's training time). Each configuration runs ROUNDS times; the median
# is reported.
#
#   bench/run_replicated_bench.sh [BUILD_DIR]
# Environment: STEPS=600 global steps per run, ROUNDS=3, CONFIGS (comma-separated,
# default "async 1,async 2,async 3,sync 3,local,torch"; without torch the ratio
# column is left out; "async 3 noprefetch" runs 3 async workers with
# --prefetch_variables=false, the workers reading every step's variables
# afresh; "async 3 unfused" or "sync 3 unfused" passes --fused_adam=false,
# one ApplyAdam per variable instead of one FusedApplyAdam per ps task). Only 127.0.0.1 is used; DISTFLOW_SHM=0 reaches the tasks.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
STEPS="${STEPS:-600}"
ROUNDS="${ROUNDS:-3}"
export CCACHE_BASEDIR="$PWD"
cmake --build "$BUILD" --target mnist_distributed mnist_local >/dev/null
TRAIN="$BUILD/examples/mnist_distributed"
LOGS=$(mktemp -d)
PY=/usr/bin/python3

free_port() {  # outside the kernel's ephemeral range: see tests/py/ports.py
  /usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import ports; print(ports.free_port())' \
    "$(dirname "${BASH_SOURCE[0]}")/../tests/py"
}

# distflow W MODE [noprefetch]: prints aggregate examples/s of one run.
distflow() {
  local workers=$1 mode=$2 variant=${3:-} spec pids=() extra=()
  spec="ps|127.0.0.1:$(free_port),worker|127.0.0.1:$(free_port)"
  for ((i = 1; i < workers; i++)); do spec="$spec;127.0.0.1:$(free_port)"; done
  [ "$mode" = sync ] && extra=(--sync_replicas --replicas_to_aggregate="$workers")
  [ "$variant" = noprefetch ] && extra+=(--prefetch_variables=false)
  [ "$variant" = unfused ] && extra+=(--fused_adam=false)
  local common=(--cluster_spec="$spec" --intra_op_threads=1 --model=cnn --batch_size=50 --print_every=100000)
  "$TRAIN" "${common[@]}" --job_name=ps --task_index=0 >"$LOGS/ps.log" 2>&1 &
  pids+=($!)
  for ((i = workers - 1; i >= 0; i--)); do
    "$TRAIN" "${common[@]}" "${extra[@]}" --job_name=worker --task_index=$i --train_steps="$STEPS" \
      --wait_for_workers_secs=60 >"$LOGS/w$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "a task failed; logs in $LOGS" >&2; exit 1; }; done
  # "Worker i ran L of the G global steps in T s (...)"
  cat "$LOGS"/w*.log | "$PY" -c '
import re, sys
runs = [(int(m.group(1)), float(m.group(2))) for m in re.finditer(r"ran (\d+) of the \d+ global steps in ([\d.]+) s", sys.stdin.read())]
print(f"{sum(l for l, _ in runs) * 50 / max(t for _, t in runs):.1f}")'
}

local_run() {
  "$BUILD/examples/mnist_local" --threads=1 --steps="$STEPS" --print_every=100000 2>/dev/null |
    "$PY" -c 'import re, sys; m = re.search(r"([\d.]+) ms/step", sys.stdin.read()); print(f"{50000 / float(m.group(1)):.1f}")'
}

torch_run() {
  "$PY" bench/pytorch_rpc_ps.py --workers 3 --steps "$STEPS" --port "$(free_port)" 2>/dev/null |
    "$PY" -c 'import re, sys; print(re.search(r"examples/s=([\d.]+)", sys.stdin.read()).group(1))'
}

median() { tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }

declare -A result
IFS=, read -ra configs <<<"${CONFIGS:-async 1,async 2,async 3,sync 3,local,torch}"
for ((r = 1; r <= ROUNDS; r++)); do
  for c in "${configs[@]}"; do
    set -- $c
    case $1 in
      async | sync) v=$(distflow "$2" "$1" "${3:-}") ;;
      local) v=$(local_run) ;;
      torch) v=$(torch_run) ;;
    esac
    result[$c]="${result[$c]:-} $v"
    echo "round $r: $c: $v examples/s" >&2
  done
done
base=$(echo ${result[torch]:-} | median)
printf '%-48s %12s %10s\n' "configuration (book CNN, batch 50, 1 thread/process)" "examples/s" "vs torch"
for c in "${configs[@]}"; do
  m=$(echo ${result[$c]} | median)
  case $c in
    "async "*" noprefetch") name="distflow 1 ps + $(echo $c | cut -d' ' -f2) async workers, no prefetch" ;;
    *" unfused") name="distflow 1 ps + $(echo $c | cut -d' ' -f2) $(echo $c | cut -d' ' -f1) workers, Adam unfused" ;;
    "async "*) name="distflow 1 ps + ${c#async } async workers" ;;
    "sync "*) name="distflow 1 ps + ${c#sync } sync workers (all aggregated)" ;;
    local) name="distflow single process (mnist_local)" ;;
    torch) name="PyTorch RPC ps, 1 ps + 3 async workers" ;;
  esac
  if [ -n "$base" ]; then
    printf '%-48s %12.1f %9.2fx\n' "$name" "$m" "$(echo "$m / $base" | bc -l)"
  else
    printf '%-48s %12.1f %10s\n' "$name" "$m" "-"
  fi
done
echo "(median of $ROUNDS rounds, $STEPS global steps each; logs in $LOGS)"
