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
#
# The sizes come from the environment (defaults: the published run):
#   STEPS=3000               global steps of each run (each worker: about half)
#   VOCAB=1000000            rows of the large table (sparse and PyTorch runs)
#   SMALL_VOCAB=100000       rows of the table the dense equivalent can afford
#   MEASURE_FROM=200         first local step of the steady-state window
#   MEASURE_STEPS=1000       its length (distflow; PyTorch measures to its end)
#   LOOKUP_ROWS=1000000 LOOKUP_IDS=200000 LOOKUP_REPEATS=20   part 3's sizes
#   STRATEGY=mod             partition_strategy of distflow and PyTorch alike (or div)
# TINY=1 makes every size small (a check that the script works end to end in
# about a minute, not a measurement):
#   TINY=1 bench/run_sparse_bench.sh build
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
if [[ "${TINY:-0}" == 1 ]]; then
  : "${ROUNDS:=1}" "${STEPS:=40}" "${VOCAB:=20000}" "${SMALL_VOCAB:=5000}" "${MEASURE_FROM:=4}" "${MEASURE_STEPS:=8}"
  : "${LOOKUP_ROWS:=20000}" "${LOOKUP_IDS:=5000}" "${LOOKUP_REPEATS:=2}"
fi
STEPS="${STEPS:-3000}"
VOCAB="${VOCAB:-1000000}"
# How ids map to the table's parts, the same in distflow and PyTorch ("mod":
# power-law ids spread evenly over the 2 ps; "div": nearly all on ps 0).
STRATEGY="${STRATEGY:-mod}"
SMALL_VOCAB="${SMALL_VOCAB:-100000}"
MEASURE_FROM="${MEASURE_FROM:-200}"
MEASURE_STEPS="${MEASURE_STEPS:-1000}"
ROUNDS="${ROUNDS:-3}"
LOOKUP_ROWS="${LOOKUP_ROWS:-1000000}"
LOOKUP_IDS="${LOOKUP_IDS:-200000}"
LOOKUP_REPEATS="${LOOKUP_REPEATS:-20}"
if ((2 * (MEASURE_FROM + MEASURE_STEPS) > STEPS)); then
  # Two workers share the global steps: each must get past the window.
  echo "MEASURE_FROM + MEASURE_STEPS ($((MEASURE_FROM + MEASURE_STEPS))) must be at most STEPS / 2 ($((STEPS / 2)))" >&2
  exit 2
fi
export CCACHE_BASEDIR="$PWD"
cmake --build "$BUILD" --target distflow_python distflow-server distflow-launch >/dev/null
export PYTHONPATH="$PWD/$BUILD/python"
PY=/usr/bin/python3
LOG="$(mktemp)"
trap 'rm -f "$LOG" "$LOG.round"' EXIT
free_port() {
  $PY -c 'import sys; sys.path.insert(0, sys.argv[1]); import ports; print(ports.free_port())' "$PWD/tests/py"
}
# report PATTERN COMMAND...: runs COMMAND and prints its lines matching
# PATTERN; a failed run, or one without them, prints the end of its output
# and stops the script.
report() {
  local pattern="$1"
  shift
  local rc=0
  "$@" >"$LOG" 2>&1 || rc=$?
  if ((rc != 0)); then
    echo "  FAILED (exit $rc): $*" >&2
    tail -n 30 "$LOG" >&2
    exit 1
  fi
  if ! grep -E "$pattern" "$LOG" | sed 's/^/  /'; then
    echo "  no report line (/$pattern/) from: $*" >&2
    tail -n 30 "$LOG" >&2
    exit 1
  fi
}
example() {  # example ARGS...: the chief's report lines
  report "Worker [0-9]|bytes from ps" "$BUILD/tools/distflow-launch" --ps 2 --workers 2 \
    --status_base_port "$(free_port)" -- $PY examples/python/sparse_embedding.py --last_step="$STEPS" \
    --measure_from="$MEASURE_FROM" --measure_steps="$MEASURE_STEPS" --partition_strategy="$STRATEGY" "$@"
}
echo "== bytes per step and steps/s: distflow, 2 ps + 2 workers (STEPS=$STEPS)"
echo "sparse, $VOCAB x 64:"; example --vocab="$VOCAB" --dim=64
echo "sparse, $SMALL_VOCAB x 64:"; example --vocab="$SMALL_VOCAB" --dim=64
echo "dense equivalent, $SMALL_VOCAB x 64:"; example --vocab="$SMALL_VOCAB" --dim=64 --dense_lookup
echo "== steps/s, $VOCAB x 64, 2 ps + 2 workers: distflow (summed over the workers) vs PyTorch"
echo "   EmbeddingBag(sparse=True) + rpc ps, $ROUNDS interleaved rounds"
if $PY -c 'import torch' 2>/dev/null; then
  ratios=()
  for ((r = 1; r <= ROUNDS; r++)); do
    example --vocab="$VOCAB" --dim=64 >"$LOG.round"
    ours=$(grep -o 'steady state: [0-9.]*' "$LOG.round" | awk '{s += $3} END {printf "%.1f", s}')
    report "pytorch-sparse-ps" $PY bench/pytorch_sparse_ps.py --ps 2 --workers 2 --vocab "$VOCAB" --dim 64 \
      --steps "$STEPS" --measure_from "$MEASURE_FROM" --partition_strategy "$STRATEGY" --port "$(free_port)" \
      >"$LOG.round"
    theirs=$(grep -o 'steps/s=[0-9.]*' "$LOG.round" | cut -d= -f2)
    ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN {printf "%.2f", a / b}')
    ratios+=("$ratio")
    echo "  round $r: distflow $ours steps/s, PyTorch $theirs steps/s, distflow / PyTorch = ${ratio}x"
  done
  echo "  median distflow / PyTorch: $(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')x"
else
  echo "  skipped: python3-torch is not installed"
fi
echo "== lookup throughput, one task ($LOOKUP_IDS ids into $LOOKUP_ROWS x 64)"
report "rows/s" $PY bench/sparse_lookup_bench.py --rows "$LOOKUP_ROWS" --ids "$LOOKUP_IDS" --repeats "$LOOKUP_REPEATS"
