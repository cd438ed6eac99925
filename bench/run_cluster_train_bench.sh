#!/usr/bin/env bash
# Between-graph training throughput on a local cluster (1 ps process + 1
# worker), the worker's client in two setups, alternated over ROUNDS rounds:
#   in-process: mnist_distributed --start_server (the seeds' setup: the worker
#               process is its task's server; its session reaches the master
#               without the network)
#   separate:   a distflow-server for the worker task and mnist_distributed
#               as a client process talking to it over gRPC
# MODEL=softmax (default; a step is mostly RPCs, so the setup shows) or cnn.
#
#   bench/run_cluster_train_bench.sh [BUILD_DIR]
# Environment: ROUNDS=3, STEPS=3000, MODEL=softmax. Only 127.0.0.1 is used.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
ROUNDS="${ROUNDS:-3}"
STEPS="${STEPS:-3000}"
MODEL="${MODEL:-softmax}"
export CCACHE_BASEDIR="$PWD"
cmake --build "$BUILD" --target distflow-server mnist_distributed >/dev/null
SERVER="$BUILD/tools/distflow-server"
TRAIN="$BUILD/examples/mnist_distributed"
LOGS=$(mktemp -d)

free_port() {  # outside the kernel's ephemeral range: see tests/py/ports.py
  /usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import ports; print(ports.free_port())' \
    "$(dirname "${BASH_SOURCE[0]}")/../tests/py"
}

# Runs one training; prints steps/s from the worker's own report.
run() {
  local mode=$1 ps w spec pids=()
  ps=$(free_port); w=$(free_port)
  spec="ps|127.0.0.1:$ps,worker|127.0.0.1:$w"
  "$SERVER" --cluster_spec="$spec" --job_name=ps --task_index=0 >"$LOGS/ps.log" 2>&1 &
  pids+=($!)
  local args=(--cluster_spec="$spec" --task_index=0 --model="$MODEL" --train_steps="$STEPS" --print_every=100000)
  if [ "$mode" = in-process ]; then
    "$TRAIN" "${args[@]}" --start_server=true >"$LOGS/train.log" 2>&1
  else
    "$SERVER" --cluster_spec="$spec" --job_name=worker --task_index=0 >"$LOGS/worker.log" 2>&1 &
    pids+=($!)
    "$TRAIN" "${args[@]}" --start_server=false >"$LOGS/train.log" 2>&1
  fi
  for p in "${pids[@]}"; do wait "$p" || true; done  # the chief's shutdown ends them
  sed -n 's/.*(\([0-9.]*\) steps\/s).*/\1/p' "$LOGS/train.log"
}

declare -a IN SEP
for r in $(seq "$ROUNDS"); do
  IN+=("$(run in-process)")
  SEP+=("$(run separate)")
  echo "round $r: in-process ${IN[-1]} steps/s, separate ${SEP[-1]} steps/s"
done
python3 - "${IN[*]}" "${SEP[*]}" "$MODEL" "$STEPS" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"model {sys.argv[3]}, {sys.argv[4]} steps, batch 50, 1 ps + 1 worker on 127.0.0.1 (medians):")
print(f"  worker process is its task's server (in-process master): {ma:8.1f} steps/s")
print(f"  separate distflow-server + client process (over gRPC):   {mb:8.1f} steps/s")
print(f"  in-process / separate: {ma / mb:.2f}x")
PY
