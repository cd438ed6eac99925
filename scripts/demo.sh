#!/usr/bin/env bash
# Installs dependencies, builds, and runs distflow's main job: a local
# cluster (one parameter server process, two worker processes) training the
# book's CNN on Fashion-MNIST with between-graph replication. As in the seeds,
# each worker process runs its own task's server and its training loop; the
# ps is a plain distflow-server. When training is over the chief shuts the
# cluster down, so the parameter server exits by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh

# Paths relative to the checkout let ccache reuse objects across clones.
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build -G Ninja
cmake --build build --target mnist_distributed

STEPS="${STEPS:-2000}"
free_port() {
  local p
  for p in $(seq "$1" $(( $1 + 200 ))); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  echo "no free port near $1" >&2; exit 1
}
PS0=$(free_port 2222); W0=$(free_port $((PS0 + 1))); W1=$(free_port $((W0 + 1)))
SPEC="ps|127.0.0.1:$PS0,worker|127.0.0.1:$W0;127.0.0.1:$W1"
LOGS=$(mktemp -d)
echo "cluster: $SPEC (server logs in $LOGS)"

# The same program for every task, as in the book; the ps exits by itself
# when the chief shuts the cluster down. Checkpoints go to $LOGS/train_logs.
./build/examples/mnist_distributed --cluster_spec="$SPEC" --job_name=ps --task_index=0 >"$LOGS/ps0.log" 2>&1 &
PIDS=($!)
# On an early exit, stop what is still running; kill fails for the rest, which is fine.
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT  # those already gone make kill fail: fine

./build/examples/mnist_distributed --cluster_spec="$SPEC" --job_name=worker --task_index=1 \
  --train_steps="$STEPS" --logdir="$LOGS/train_logs" >"$LOGS/worker1.log" 2>&1 &
WORKER1=$!
PIDS+=("$WORKER1")
./build/examples/mnist_distributed --cluster_spec="$SPEC" --job_name=worker --task_index=0 \
  --train_steps="$STEPS" --logdir="$LOGS/train_logs"
wait "$WORKER1"
# The ps exits on its own once the chief shuts the cluster down.
wait "${PIDS[0]}"
trap - EXIT
echo "every process exited by itself"
