#!/usr/bin/env bash
# Installs dependencies, builds, and runs distflow's main job: a local
# cluster (one parameter server, two workers, each a distflow-server
# process) training the book's CNN on Fashion-MNIST with between-graph
# replication. When training is over the chief shuts the cluster down, so
# every server exits by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh

# Paths relative to the checkout let ccache reuse objects across clones.
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build -G Ninja
cmake --build build --target distflow-server mnist_distributed

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

./build/tools/distflow-server --cluster_spec="$SPEC" --job_name=ps --task_index=0 >"$LOGS/ps0.log" 2>&1 &
SERVERS=($!)
for i in 0 1; do
  ./build/tools/distflow-server --cluster_spec="$SPEC" --job_name=worker --task_index=$i >"$LOGS/worker$i.log" 2>&1 &
  SERVERS+=($!)
done
# On an early exit, stop the servers; those already gone make kill fail, which is fine.
trap 'kill "${SERVERS[@]}" 2>/dev/null || true' EXIT

./build/examples/mnist_distributed --cluster_spec="$SPEC" --task_index=1 --steps="$STEPS" >"$LOGS/client1.log" 2>&1 &
CLIENT1=$!
./build/examples/mnist_distributed --cluster_spec="$SPEC" --task_index=0 --steps="$STEPS"
wait "$CLIENT1"
# The servers exit on their own once the chief shuts the cluster down.
for pid in "${SERVERS[@]}"; do wait "$pid"; done
trap - EXIT
echo "every server exited by itself"
