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
cmake -S "$ROOT" -B "$BUILD" -G Ninja >/dev/null
nice -n 10 ninja -C "$BUILD" shm_pull_bench
echo "load: $(uptime)"
echo "cpus: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$BUILD/bench/shm_pull_bench" "${2:-64}" "${3:-15}"
