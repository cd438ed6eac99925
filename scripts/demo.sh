#!/usr/bin/env bash
# Installs dependencies, builds, and runs distflow's main job: one command
# (distflow-launch) starts a local cluster of a parameter server and three
# workers running the book's program, mnist_distributed, which trains the
# book's CNN on Fashion-MNIST (Debian's dataset-fashion-mnist) with
# between-graph replication: variables on the ps, asynchronous Adam steps,
# checkpoints by the chief. Every line is prefixed with its task. When the
# global step reaches 5000 (STEPS=... changes it; SYNC=1 trains
# synchronously; SYNC=allreduce trains without a ps: three workers each
# holding the model, gradients averaged by collective all-reduce) the chief
# prints the test accuracy and shuts the cluster down; the launcher exits
# once every process has. While it trains, each
# task serves a status page (STATUS_PORT=8000: the ps on 8000, worker k on
# 8001+k; the chief's draws loss and accuracy; STATUS_PORT=0 turns them off).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh

# Paths relative to the checkout let ccache reuse objects across clones.
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build -G Ninja
cmake --build build --target mnist_distributed distflow-launch distflow-server

STEPS="${STEPS:-5000}"
LOGS=$(mktemp -d)
EXTRA=()
PS=1
case "${SYNC:-0}" in
  1) EXTRA=(--sync_replicas) ;;
  allreduce) EXTRA=(--all_reduce); PS=0 ;;
  0) ;;
  *) echo "SYNC must be 0, 1 or allreduce, not '${SYNC}'" >&2; exit 2 ;;
esac
echo "checkpoints in $LOGS/train_logs"
# One intra-op thread per process: four processes share two cores.
./build/tools/distflow-launch --ps "$PS" --workers 3 --status_base_port "${STATUS_PORT:-8000}" -- \
  ./build/examples/mnist_distributed --train_steps="$STEPS" --logdir="$LOGS/train_logs" \
  --intra_op_threads=1 --print_every=500 "${EXTRA[@]}"
echo "every process exited by itself"
