#!/usr/bin/env bash
# Builds and runs the microbenchmarks.
#
#   bench/run_benchmarks.sh [BUILD_DIR] [extra Google Benchmark flags...]
#
# BUILD_DIR defaults to build/ under the repository. Output: console on stdout
# and JSON in BUILD_DIR/bench-results/matmul_bench.json. The benchmark is
# pinned with taskset to the CPUs this shell may use (at most 2), so the
# 1- and 2-thread cases do not wander onto other cores; set TASKSET_CPUS to
# override (e.g. TASKSET_CPUS=0,1).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
shift || true  # the build dir argument is optional: nothing to shift without it

# An existing build keeps its configuration (its DISTFLOW_ARCH_FLAGS above
# all); a new one is configured with $DISTFLOW_ARCH_FLAGS if set, else the
# project's default.
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja ${DISTFLOW_ARCH_FLAGS:+"-DDISTFLOW_ARCH_FLAGS=$DISTFLOW_ARCH_FLAGS"} >/dev/null
fi
ninja -C "$BUILD" matmul_bench
echo "build: $BUILD, $(grep -m1 '^DISTFLOW_ARCH_FLAGS' "$BUILD/CMakeCache.txt" || echo 'DISTFLOW_ARCH_FLAGS unknown')"

OUT="$BUILD/bench-results"
mkdir -p "$OUT"

PIN=()
if command -v taskset >/dev/null 2>&1; then
  CPUS="${TASKSET_CPUS:-}"
  if [[ -z "$CPUS" ]]; then
    # The first two CPUs of our affinity mask.
    CPUS="$(taskset -cp $$ | sed 's/.*: //' | tr ',' '\n' | \
      awk -F- '{ if (NF == 2) { for (i = $1; i <= $2; i++) print i } else print $1 }' | head -n 2 | paste -sd, -)"
  fi
  [[ -n "$CPUS" ]] && PIN=(taskset -c "$CPUS")
fi

echo "load: $(uptime)" >&2
"${PIN[@]}" "$BUILD/bench/matmul_bench" \
  --benchmark_repetitions="${REPS:-1}" \
  --benchmark_out="$OUT/matmul_bench.json" --benchmark_out_format=json \
  "$@"
echo "JSON written to $OUT/matmul_bench.json" >&2
