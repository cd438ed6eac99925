#!/usr/bin/env bash
# All-reduce of float32 tensors between 2 and 3 processes on loopback:
# distflow's CollectiveReduce (bench/collective_bench.cc) and PyTorch's gloo
# (bench/collective_gloo.py, Debian's python3-torch) in the same run, and
# their ratio. Usage: bench/run_collective_bench.sh [BUILD_DIR] [SIZES_MIB] [ITERS]
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
for n in 2 3; do
  spec="worker|"
  for ((r = 0; r < n; r++)); do spec+="127.0.0.1:$(free_port)"; ((r < n - 1)) && spec+=";"; done
  pids=()
  for ((r = 1; r < n; r++)); do
    "$bin" --cluster_spec="$spec" --task_index=$r --sizes_mib="$sizes" --iters="$iters" >/dev/null 2>&1 & pids+=($!)
  done
  "$bin" --cluster_spec="$spec" --task_index=0 --sizes_mib="$sizes" --iters="$iters" 2>/dev/null | tee -a "$out"
  wait "${pids[@]}"
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
print("\n| ranks | MiB | distflow ms | gloo ms | distflow busbw GB/s | gloo busbw GB/s | distflow / gloo |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for (impl, n, mib), r in sorted(by.items()):
    if impl != "distflow" or ("gloo", n, mib) not in by:
        continue
    g = by[("gloo", n, mib)]
    print(f"| {n} | {mib} | {r['ms']} | {g['ms']} | {r['busbw_gbs']} | {g['busbw_gbs']} | {g['ms'] / r['ms']:.2f}x |")
PY
