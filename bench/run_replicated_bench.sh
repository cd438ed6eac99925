#!/usr/bin/env bash
# Replicated training throughput, all in one run (reported in
# docs/PERFORMANCE.md): aggregate examples/s of the book's CNN, batch 50,
# one intra-op thread per process, on this machine's loopback:
#   mnist_distributed, 1 ps + W workers, asynchronous, W = 1, 2, 3
#   mnist_distributed, 1 ps + 3 workers, synchronous (replicas_to_aggregate=3)
#   mnist_local, one process (no cluster)
#   PyTorch's parameter server over torch.distributed.rpc, 1 ps + 3 workers,
#   asynchronous (bench/pytorch_rpc_ps.py): the baseline
#   mnist_distributed --all_reduce, 3 workers and no ps (config "allreduce 3":
#   CollectiveAllReduceOptimizer, every worker STEPS steps of 50)
#   PyTorch DDP over gloo, 3 processes of one thread (config "ddp 3",
#   bench/pytorch_ddp.py: the same CNN, batch 50 per process, Adam(1e-3),
#   every process STEPS steps on Fashion-MNIST)
# Aggregate examples/s = (batches the workers computed) x 50 / (the longest
# worker's training time). Test accuracy is the chief's (rank 0's) on
# Fashion-MNIST's 10,000 test images at the end ("-": random data, or not
# reported); "allreduce 3" and "ddp 3" both train on 3 x STEPS x 50
# examples, so theirs compare directly (the ps configurations train on
# STEPS x 50 asynchronous, STEPS x 150 synchronous). Each configuration runs
# ROUNDS times; the medians are reported.
#
#   bench/run_replicated_bench.sh [BUILD_DIR]
# Environment: STEPS=600 global steps per run, ROUNDS=3, CONFIGS (comma-separated,
# default "async 1,async 2,async 3,sync 3,local,torch,allreduce 3,ddp 3"; without torch the ratio
# column is left out; "local 2" runs two mnist_local processes at once;
# "local pinned" runs one pinned to one CPU (taskset), "local 2 pinned" two
# on a CPU each; the "of bound" column divides by 2 x "local pinned" when
# it ran, else by 2 x "local"; "async 3 prefetch" runs 3 async workers with
# --prefetch_variables, each worker reading its next step's variables while
# it computes ("noprefetch" is the default and kept as a name); "async 3 defer" adds --defer_updates, each worker step ending
# once the ps has its gradients (the ps applies them in the background);
# "async 3 unfused" or "sync 3 unfused" passes --fused_adam=false,
# one ApplyAdam per variable instead of one FusedApplyAdam per ps task;
# "tcp" runs the tasks with DISTFLOW_UNIX_SOCKETS=0 (gRPC over loopback TCP,
# the default), "unix" with DISTFLOW_UNIX_SOCKETS=1,
# "ring" with DISTFLOW_SHM_TENSORS=0 (same-host gets through the ring's two
# copies), "old" with both). Only 127.0.0.1 is used; DISTFLOW_SHM=0 reaches the tasks.
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

# distflow W MODE [VARIANT]: prints aggregate examples/s and the chief's
# test accuracy of one run. MODE allreduce: no ps, --all_reduce.
distflow() {
  local workers=$1 mode=$2 variant=${3:-} spec pids=() extra=()
  spec="worker|127.0.0.1:$(free_port)"
  [ "$mode" != allreduce ] && spec="ps|127.0.0.1:$(free_port),$spec"
  for ((i = 1; i < workers; i++)); do spec="$spec;127.0.0.1:$(free_port)"; done
  [ "$mode" = sync ] && extra=(--sync_replicas --replicas_to_aggregate="$workers")
  [ "$mode" = allreduce ] && extra=(--all_reduce)
  [ "$variant" = noprefetch ] && extra+=(--prefetch_variables=false)
  [ "$variant" = prefetch ] && extra+=(--prefetch_variables)
  [ "$variant" = unfused ] && extra+=(--fused_adam=false)
  [ "$variant" = defer ] && extra+=(--defer_updates)
  local envs=()
  [ "$variant" = tcp ] && envs=(DISTFLOW_UNIX_SOCKETS=0)
  [ "$variant" = unix ] && envs=(DISTFLOW_UNIX_SOCKETS=1)
  [ "$variant" = ring ] && envs=(DISTFLOW_SHM_TENSORS=0)
  [ "$variant" = old ] && envs=(DISTFLOW_UNIX_SOCKETS=0 DISTFLOW_SHM_TENSORS=0)
  local common=(--cluster_spec="$spec" --intra_op_threads=1 --model=cnn --batch_size=50 --print_every=100000)
  rm -f "$LOGS"/*.log
  if [ "$mode" != allreduce ]; then
    env "${envs[@]}" "$TRAIN" "${common[@]}" --job_name=ps --task_index=0 >"$LOGS/ps.log" 2>&1 &
    pids+=($!)
  fi
  for ((i = workers - 1; i >= 0; i--)); do
    env "${envs[@]}" "$TRAIN" "${common[@]}" "${extra[@]}" --job_name=worker --task_index=$i --train_steps="$STEPS" \
      --wait_for_workers_secs=60 >"$LOGS/w$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "a task failed; logs in $LOGS" >&2; exit 1; }; done
  # "Worker i ran L of the G global steps in T s (...)", with all-reduce
  # "Worker i ran L steps in T s; ..."
  cat "$LOGS"/w*.log | "$PY" -c '
import re, sys
text = sys.stdin.read()
runs = [(int(m.group(1)), float(m.group(2))) for m in re.finditer(r"ran (\d+) (?:of the \d+ global )?steps in ([\d.]+) s", text)]
acc = re.search(r"Test-Accuracy: ([\d.]+)", text)
print(f"{sum(l for l, _ in runs) * 50 / max(t for _, t in runs):.1f} {acc.group(1) if acc else chr(45)}")'
}

# local_run [N]: N mnist_local processes at once (default 1), one thread
# each; prints their summed examples/s. "local 2" is what two cores reach
# when both compute with nothing to send: the cluster's real ceiling (the
# two share caches and memory bandwidth), against the nominal bound of
# 2 x "local".
# local_run N pinned: each process pinned to its own CPU (taskset), so one
# process computes on exactly one core; unpinned, "--threads=1" still runs
# independent ops on the inter-op pool, on the other core.
local_run() {
  local n=${1:-1} pin=${2:-} pids=() i cpus=() pre=()
  [ "$pin" = pinned ] && read -ra cpus <<<"$(allowed_cpus)"
  rm -f "$LOGS"/local*.log
  for ((i = 0; i < n; i++)); do
    pre=()
    [ "$pin" = pinned ] && pre=(taskset -c "${cpus[$((i % ${#cpus[@]}))]}")
    "${pre[@]}" "$BUILD/examples/mnist_local" --threads=1 --steps="$STEPS" --print_every=100000 >"$LOGS/local$i.log" 2>/dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { echo "mnist_local failed; logs in $LOGS" >&2; exit 1; }; done
  cat "$LOGS"/local*.log | "$PY" -c '
import re, sys
ms = [float(m) for m in re.findall(r"([\d.]+) ms/step", sys.stdin.read())]
print(f"{sum(50000 / m for m in ms):.1f} -")'
}

torch_run() {
  "$PY" bench/pytorch_rpc_ps.py --workers 3 --steps "$STEPS" --port "$(free_port)" 2>/dev/null |
    "$PY" -c 'import re, sys; print(re.search(r"examples/s=([\d.]+)", sys.stdin.read()).group(1), "-")'
}

ddp_run() {
  "$PY" bench/pytorch_ddp.py --workers "$1" --steps "$STEPS" --port "$(free_port)" 2>/dev/null |
    "$PY" -c 'import re, sys; t = sys.stdin.read(); print(re.search(r"examples/s=([\d.]+)", t).group(1), re.search(r"test_accuracy=([\d.]+)", t).group(1))'
}

allowed_cpus() {  # the CPUs this shell may run on, one per word
  "$PY" -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))'
}

median() { tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }

declare -A result accuracy
IFS=, read -ra configs <<<"${CONFIGS:-async 1,async 2,async 3,sync 3,local,torch,allreduce 3,ddp 3}"
for ((r = 1; r <= ROUNDS; r++)); do
  for c in "${configs[@]}"; do
    set -- $c
    case $1 in
      async | sync | allreduce) out=$(distflow "$2" "$1" "${3:-}") ;;
      local)
        if [ "${2:-}" = pinned ]; then out=$(local_run 1 pinned); else out=$(local_run "${2:-1}" "${3:-}"); fi ;;
      torch) out=$(torch_run) ;;
      ddp) out=$(ddp_run "$2") ;;
      *) echo "unknown configuration '$c'" >&2; exit 2 ;;
    esac
    read -r v a <<<"$out"
    result[$c]="${result[$c]:-} $v"
    [ "$a" != - ] && accuracy[$c]="${accuracy[$c]:-} $a"
    echo "round $r: $c: $v examples/s, test accuracy $a" >&2
  done
done
base=$(echo ${result[torch]:-} | median)
# The bound: two cores, each computing what one core computes alone
# ("local pinned"); without it, 2 x the unpinned "local" (which overstates
# it: that process also uses the second core for its inter-op pool).
bound="" bound_of=""
if [ -n "${result[local pinned]:-}" ]; then
  bound=$(echo "2 * $(echo ${result[local pinned]} | median)" | bc -l) bound_of='"local pinned"'
elif [ -n "${result[local]:-}" ]; then
  bound=$(echo "2 * $(echo ${result[local]} | median)" | bc -l) bound_of='"local"'
fi
ddp_base=$(echo ${result[ddp 3]:-} | median)
printf '%-48s %12s %10s %10s %10s %10s\n' "configuration (book CNN, batch 50, 1 thread/process)" "examples/s" "vs torch" \
  "vs DDP" "of bound" "test acc."
for c in "${configs[@]}"; do
  m=$(echo ${result[$c]} | median)
  acc=$(echo ${accuracy[$c]:--} | median)
  vs_ddp="-"
  [ -n "$ddp_base" ] && vs_ddp=$(printf '%.2fx' "$(echo "$m / $ddp_base" | bc -l)")
  case $c in
    "async "*" noprefetch") name="distflow 1 ps + $(echo $c | cut -d' ' -f2) async workers, no prefetch" ;;
    "async "*" prefetch") name="distflow 1 ps + $(echo $c | cut -d' ' -f2) async workers, prefetching" ;;
    "async "*" defer") name="distflow 1 ps + $(echo $c | cut -d' ' -f2) async workers, deferred updates" ;;
    *" tcp") name="distflow 1 ps + $(echo $c | cut -d' ' -f2) $(echo $c | cut -d' ' -f1), gRPC over TCP" ;;
    *" unix") name="distflow 1 ps + $(echo $c | cut -d' ' -f2) $(echo $c | cut -d' ' -f1), gRPC over Unix sockets" ;;
    *" ring") name="distflow 1 ps + $(echo $c | cut -d' ' -f2) $(echo $c | cut -d' ' -f1), gets via the ring" ;;
    *" old") name="distflow 1 ps + $(echo $c | cut -d' ' -f2) $(echo $c | cut -d' ' -f1), TCP + ring" ;;
    *" unfused") name="distflow 1 ps + $(echo $c | cut -d' ' -f2) $(echo $c | cut -d' ' -f1) workers, Adam unfused" ;;
    "async "*) name="distflow 1 ps + ${c#async } async workers" ;;
    "sync "*) name="distflow 1 ps + ${c#sync } sync workers (all aggregated)" ;;
    local) name="distflow single process (mnist_local)" ;;
    "local pinned") name="mnist_local pinned to one core" ;;
    "local "*" pinned") name="$(echo $c | cut -d' ' -f2) mnist_local at once, one core each" ;;
    "local "*) name="$(echo $c | cut -d' ' -f2) mnist_local processes at once" ;;
    torch) name="PyTorch RPC ps, 1 ps + 3 async workers" ;;
    "allreduce "*) name="distflow all-reduce, ${c#allreduce } workers, no ps" ;;
    "ddp "*) name="PyTorch DDP over gloo, ${c#ddp } processes" ;;
  esac
  vs_torch="-"
  [ -n "$base" ] && vs_torch=$(printf '%.2fx' "$(echo "$m / $base" | bc -l)")
  of_bound="-"
  [ -n "$bound" ] && of_bound=$(printf '%.0f%%' "$(echo "100 * $m / $bound" | bc -l)")
  printf '%-48s %12.1f %10s %10s %10s %10s\n' "$name" "$m" "$vs_torch" "$vs_ddp" "$of_bound" "$acc"
done
[ -n "$bound" ] && printf '(of bound: against 2 x the median of %s, %.1f examples/s)\n' "$bound_of" "$bound"
echo "(median of $ROUNDS rounds, $STEPS global steps each; logs in $LOGS)"
