#!/usr/bin/env bash
# Tensor fusion in hvd.DistributedOptimizer: step time with every gradient
# reduced alone vs fused into one bucket vs fused at run time with a cycle
# time (HOROVOD_CYCLE_TIME, CYCLE_MS; 0 leaves it out), same processes,
# same run (bench/horovod_fusion_bench.py), for 2 and 3 ranks under
# distflow-launch.
# Usage: [CYCLE_MS=1] bench/run_fusion_bench.sh [BUILD_DIR] [LAYERS] [WIDTH]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
layers=${2:-24}
width=${3:-64}
cycle_ms=${CYCLE_MS:-1}
launch="$build/tools/distflow-launch"
[[ -x $launch ]] || { echo "build $launch first: cmake --build $build" >&2; exit 2; }
for n in 2 3; do
  PYTHONPATH="$build/python" "$launch" --ps 0 --workers "$n" -- /usr/bin/python3 bench/horovod_fusion_bench.py \
    --layers "$layers" --width "$width" --cycle-ms "$cycle_ms" 2>/dev/null | sed -n 's/^\[worker:0\] \({.*\)/\1/p'
done
