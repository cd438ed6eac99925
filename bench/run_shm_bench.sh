#!/usr/bin/env bash
# Same-host shared memory vs TCP vs memcpy for a 64 MiB ps -> worker pull, in
# one run (bench/shm_pull_bench.cc says what each row measures).
#
#   bench/run_shm_bench.sh [BUILD_DIR] [MiB=64] [rounds=15]
#
# The machine may be shared: the load is printed first; compare the ratios.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
# An existing build keeps its configuration (its DISTFLOW_ARCH_FLAGS above
# all); a new one is configured with $DISTFLOW_ARCH_FLAGS if set, else the
# project's default.
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja ${DISTFLOW_ARCH_FLAGS:+"-DDISTFLOW_ARCH_FLAGS=$DISTFLOW_ARCH_FLAGS"} >/dev/null
fi
nice -n 10 cmake --build "$BUILD" --target shm_pull_bench
echo "build: $BUILD, $(grep -m1 '^DISTFLOW_ARCH_FLAGS' "$BUILD/CMakeCache.txt" || echo 'DISTFLOW_ARCH_FLAGS unknown')"
echo "load: $(uptime)"
echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$BUILD/bench/shm_pull_bench" "${2:-64}" "${3:-15}"
