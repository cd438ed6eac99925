#!/usr/bin/env bash
# All-reduce of float32 tensors between 2 and 3 processes on one machine:
# distflow's CollectiveReduce (bench/collective_bench.cc) with its
# same-host shared-memory transport (the default: the tasks move the bulk
# parts through memfd rings) and without it (DISTFLOW_SHM=0: TCP on
# loopback), and PyTorch's gloo over TCP (bench/collective_gloo.py,
# Debian's python3-torch; gloo has no shared-memory transport), in the same
# run, and the ratios against gloo. Usage:
#   bench/run_collective_bench.sh [BUILD_DIR] [SIZES_MIB] [ITERS]
# Environment: VARIANTS (comma-separated, default "shm,tcp").
# Only 127.0.0.1 is used.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
sizes=${2:-4,64}
iters=${3:-10}
bin="$build/bench/collective_bench"
[[ -x $bin ]] || { echo "build $bin first: cmake --build $build --target collective_bench" >&2; exit 2; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
IFS=, read -ra variants <<<"${VARIANTS:-shm,tcp}"
for n in 2 3; do
  for variant in "${variants[@]}"; do
    case $variant in
      shm) shm=1 ;;
      tcp) shm=0 ;;
      *) echo "unknown variant '$variant' (shm or tcp)" >&2; exit 2 ;;
    esac
    spec="worker|"
    for ((r = 0; r < n; r++)); do spec+="127.0.0.1:$(free_port)"; ((r < n - 1)) && spec+=";"; done
    pids=()
    for ((r = 1; r < n; r++)); do
      DISTFLOW_SHM=$shm "$bin" --cluster_spec="$spec" --task_index=$r --sizes_mib="$sizes" --iters="$iters" \
        >/dev/null 2>&1 & pids+=($!)
    done
    DISTFLOW_SHM=$shm "$bin" --cluster_spec="$spec" --task_index=0 --sizes_mib="$sizes" --iters="$iters" 2>/dev/null |
      sed "s/\"impl\": \"distflow\"/\"impl\": \"distflow-$variant\"/" | tee -a "$out"
    wait "${pids[@]}"
  done
  port=$(free_port)
  pids=()
  for ((r = 1; r < n; r++)); do
    /usr/bin/python3 bench/collective_gloo.py $r $n "$port" "$sizes" "$iters" 2 >/dev/null 2>&1 & pids+=($!)
  done
  /usr/bin/python3 bench/collective_gloo.py 0 $n "$port" "$sizes" "$iters" 2 | tee -a "$out"
  wait "${pids[@]}"
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {(r["impl"], r["ranks"], r["mib"]): r for r in rows}
print("\n| ranks | MiB | transport | distflow ms | gloo ms | distflow busbw GB/s | gloo busbw GB/s | distflow / gloo |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
names = {"distflow-shm": "shared memory", "distflow-tcp": "TCP (DISTFLOW_SHM=0)"}
for (n, mib, impl), r in sorted(((n, mib, impl), r) for (impl, n, mib), r in by.items()):
    if impl not in names or ("gloo", n, mib) not in by:
        continue
    g = by[("gloo", n, mib)]
    print(f"| {n} | {mib} | {names[impl]} | {r['ms']} | {g['ms']} | {r['busbw_gbs']} | {g['busbw_gbs']} "
          f"| {g['ms'] / r['ms']:.2f}x |")
PY
