#!/usr/bin/env bash
# Where the README's cluster (1 ps + 3 asynchronous workers of
# mnist_distributed, the book's CNN, batch 50) spends its CPU: per process,
# CPU ms per global step split into kernels, copies, page faults,
# (de)serialisation, gRPC, syscalls and the network stack, waiting,
# allocation and the rest (perf samples grouped by symbol), context switches
# and bytes copied per global step. See bench/profile_cluster.py for the
# groups and docs/PERFORMANCE.md for results.
#
#   bench/profile_cluster.sh [BUILD_DIR] [profile_cluster.py options...]
# e.g. bench/profile_cluster.sh build --steps 300 --intra_op_threads 1
# Only 127.0.0.1 is used. Needs Debian's linux-perf for the symbol groups
# (without it, or where perf_event_paranoid forbids it, only /proc figures).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
shift || true  # the build dir argument is optional: nothing to shift without it
export CCACHE_BASEDIR="$PWD"
cmake --build "$BUILD" --target mnist_distributed >/dev/null
exec /usr/bin/python3 bench/profile_cluster.py --build "$BUILD" "$@"
