#!/usr/bin/env bash
# The sparse-embedding benchmarks, all in one run (docs/PERFORMANCE.md,
# "Sparse embeddings on parameter servers"):
#   1. bytes per step between the chief's task and the ps tasks (its
#      /metrics) for examples/python/sparse_embedding.py, 2 ps + 2 workers:
#      the sparse lookup on a 1,000,000 x 64 table and on a 100,000 x 64
#      table, and the dense equivalent (--dense_lookup: the whole table read
#      on the worker and updated densely) on the 100,000 x 64 table (the
#      dense one on 1,000,000 x 64 would move 256 MB each way per step);
#   2. steps/s (summed over the workers, local steps 50-200 of each) of the
#      example, 1,000,000 x 64, 2 ps + 2 workers, vs PyTorch's
#      nn.EmbeddingBag(sparse=True) on a torch.distributed.rpc parameter
#      server with the same shapes, batch and data (bench/pytorch_sparse_ps.py;
#      needs Debian's python3-torch, not a CI dependency);
#   3. lookup rows/s of one task vs memcpy (bench/sparse_lookup_bench.py).
#
#   bench/run_sparse_bench.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
STEPS="${STEPS:-500}"  # global steps of each run
export CCACHE_BASEDIR="$PWD"
cmake --build "$BUILD" --target distflow_python distflow-server distflow-launch >/dev/null
export PYTHONPATH="$PWD/$BUILD/python"
PY=/usr/bin/python3
free_port() {
  $PY -c 'import sys; sys.path.insert(0, sys.argv[1]); import ports; print(ports.free_port())' "$PWD/tests/py"
}
example() {  # example ARGS...: the chief's report lines
  "$BUILD/tools/distflow-launch" --ps 2 --workers 2 --status_base_port "$(free_port)" -- \
    $PY examples/python/sparse_embedding.py --last_step="$STEPS" --measure_from=50 --measure_steps=150 "$@" 2>&1 | grep -E "Worker [0-9]|bytes from ps" \
    | sed 's/^/  /'
}
echo "== bytes per step and steps/s: distflow, 2 ps + 2 workers"
echo "sparse, 1000000 x 64:"; example --vocab=1000000 --dim=64
echo "sparse, 100000 x 64:"; example --vocab=100000 --dim=64
echo "dense equivalent, 100000 x 64:"; example --vocab=100000 --dim=64 --dense_lookup
echo "== PyTorch EmbeddingBag(sparse=True) + rpc ps, 2 ps + 2 workers, 1000000 x 64"
if $PY -c 'import torch' 2>/dev/null; then
  $PY bench/pytorch_sparse_ps.py --ps 2 --workers 2 --vocab 1000000 --dim 64 --steps "$STEPS" --measure_from 50 --port "$(free_port)" 2>&1 \
    | grep pytorch-sparse-ps
else
  echo "  skipped: python3-torch is not installed"
fi
echo "== lookup throughput, one task"
$PY bench/sparse_lookup_bench.py 2>&1 | grep -v '^I[0-9]'
