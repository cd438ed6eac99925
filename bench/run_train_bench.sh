#!/usr/bin/env bash
# One training step of the book's CNN (batch 50, Adam): distflow vs PyTorch,
# plus oneDNN's single-thread sgemm rate as the roofline, all in one run.
#
#   bench/run_train_bench.sh [BUILD_DIR]
#
# Environment:
#   ROUNDS=3        rounds; each round runs every case once (interleaved, so
#                   a load change hits both sides); medians are reported
#   MIN_TIME=3      seconds per Google Benchmark case
#   TORCH_STEPS=30  timed PyTorch steps per case (after 5 warm-up steps)
#   CPUS=0,1        the two CPUs to use (default: the first two this shell may
#                   use); 1-thread cases are pinned to the first one
#   OPENBLAS_DIR    a directory holding OpenBLAS's libblas.so.3. Debian's
#                   python3-torch does its nn.Linear products through the
#                   system libblas.so.3, which by default is the *reference*
#                   BLAS (~2 GFLOP/s), so PyTorch is also timed with OpenBLAS
#                   (the fair baseline). If unset and OpenBLAS is not
#                   installed, the script unpacks Debian's
#                   libopenblas0-pthread into BUILD_DIR/openblas (apt-get
#                   download + dpkg -x; nothing is installed).
#
# Cases: ours at 1 thread (pinned to one core), also with
# OMP_WAIT_POLICY=passive; PyTorch at 1 thread (torch.set_num_threads(1),
# pinned the same way) with the default BLAS and with OpenBLAS; the same at
# 2 threads on two cores; the MLP step (784-256-10, batch 64, SGD) both
# sides; dnnl_sgemm 1024^3 on one core (bench/matmul_bench).
# Raw results: BUILD_DIR/bench-results/train_bench.txt.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
ROUNDS="${ROUNDS:-3}"
MIN_TIME="${MIN_TIME:-3}"
TORCH_STEPS="${TORCH_STEPS:-30}"
PY=/usr/bin/python3  # Debian's interpreter: python3-torch lives there

# An existing build keeps its configuration (its DISTFLOW_ARCH_FLAGS above
# all); a new one is configured with $DISTFLOW_ARCH_FLAGS if set, else the
# project's default.
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja ${DISTFLOW_ARCH_FLAGS:+"-DDISTFLOW_ARCH_FLAGS=$DISTFLOW_ARCH_FLAGS"} >/dev/null
fi
nice -n 10 ninja -C "$BUILD" train_bench matmul_bench >&2
echo "build: $BUILD, $(grep -m1 '^DISTFLOW_ARCH_FLAGS' "$BUILD/CMakeCache.txt" || echo 'DISTFLOW_ARCH_FLAGS unknown')" >&2

if ! "$PY" -c "import torch" 2>/dev/null; then
  echo "PyTorch missing: apt-get install -y python3-torch (for $PY)" >&2
  exit 1
fi

if [[ -z "${CPUS:-}" ]]; then
  CPUS="$(taskset -cp $$ | sed 's/.*: //' | tr ',' '\n' | \
    awk -F- '{ if (NF == 2) { for (i = $1; i <= $2; i++) print i } else print $1 }' | head -n 2 | paste -sd, -)"
fi
CPU1="${CPUS%%,*}"
PIN1=(taskset -c "$CPU1")
PIN2=(taskset -c "$CPUS")

if [[ -z "${OPENBLAS_DIR:-}" ]]; then
  for d in /usr/lib/x86_64-linux-gnu/openblas-pthread "$BUILD/openblas/usr/lib/x86_64-linux-gnu/openblas-pthread"; do
    [[ -f "$d/libblas.so.3" ]] && OPENBLAS_DIR="$d" && break
  done
fi
if [[ -z "${OPENBLAS_DIR:-}" ]] && command -v apt-get >/dev/null; then
  mkdir -p "$BUILD/openblas"
  (cd "$BUILD/openblas" && apt-get download libopenblas0-pthread >/dev/null 2>&1 &&
    dpkg -x libopenblas0-pthread_*.deb . ) || true  # optional baseline: without it only default-BLAS PyTorch is timed
  d="$BUILD/openblas/usr/lib/x86_64-linux-gnu/openblas-pthread"
  [[ -f "$d/libblas.so.3" ]] && OPENBLAS_DIR="$d"
fi
[[ -z "${OPENBLAS_DIR:-}" ]] && echo "OpenBLAS not found: PyTorch is timed with the default BLAS only" >&2

OUT="$BUILD/bench-results"
mkdir -p "$OUT"
RAW="$OUT/train_bench.txt"
: >"$RAW"

# ours KEY PIN... -- FILTER [ENV=...]: one train_bench case -> "KEY ms gflops"
ours() {
  local key="$1" filter="$2"; shift 2
  local json
  json="$("$@" "$BUILD/bench/train_bench" --benchmark_filter="$filter" --benchmark_min_time="$MIN_TIME" \
    --benchmark_format=json 2>/dev/null)"
  "$PY" -c '
import json, sys
b = json.loads(sys.stdin.read())["benchmarks"][0]
scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6}[b["time_unit"]]
print(sys.argv[1], b["real_time"] * scale, b["GFLOP/s"])
' "$key" <<<"$json" | tee -a "$RAW"
}

# torch KEY THREADS MODEL [LD_LIBRARY_PATH] PIN...
torch_case() {
  local key="$1" threads="$2" model="$3" lib="$4"; shift 4
  local line steps="$TORCH_STEPS"
  [[ "$model" == mlp ]] && steps=$((TORCH_STEPS * 20))
  line="$(env ${lib:+LD_LIBRARY_PATH="$lib"} OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" \
    "$@" "$PY" "$ROOT/bench/pytorch_cnn.py" --threads "$threads" --model "$model" --steps "$steps")"
  echo "$key $(sed 's/.*ms\/step=\([0-9.]*\).*/\1/' <<<"$line") 0" | tee -a "$RAW"
}

sgemm() {
  local json
  json="$("${PIN1[@]}" "$BUILD/bench/matmul_bench" --benchmark_filter='BM_OneDnnSgemm/n:1024/threads:1/' \
    --benchmark_min_time=1 --benchmark_format=json 2>/dev/null)"
  "$PY" -c '
import json, sys
b = json.loads(sys.stdin.read())["benchmarks"][0]
print("sgemm_1024_1t", b["real_time"], b["GFLOP/s"])
' <<<"$json" | tee -a "$RAW"
}

echo "load before: $(uptime)" | tee -a "$RAW" >&2
echo "pinning: 1 thread -> CPU $CPU1, 2 threads -> CPUs $CPUS" >&2
for ((r = 1; r <= ROUNDS; r++)); do
  echo "--- round $r" >&2
  sgemm
  ours cnn_ours_1t 'BM_CnnStep/threads:1/' "${PIN1[@]}"
  torch_case cnn_torch_1t 1 cnn "" "${PIN1[@]}"
  [[ -n "${OPENBLAS_DIR:-}" ]] && torch_case cnn_torch_openblas_1t 1 cnn "$OPENBLAS_DIR" "${PIN1[@]}"
  ours cnn_ours_1t_passive 'BM_CnnStep/threads:1/' env OMP_WAIT_POLICY=passive "${PIN1[@]}"
  ours cnn_ours_2t 'BM_CnnStep/threads:2/' "${PIN2[@]}"
  ours cnn_ours_2t_passive 'BM_CnnStep/threads:2/' env OMP_WAIT_POLICY=passive "${PIN2[@]}"
  torch_case cnn_torch_2t 2 cnn "" "${PIN2[@]}"
  [[ -n "${OPENBLAS_DIR:-}" ]] && torch_case cnn_torch_openblas_2t 2 cnn "$OPENBLAS_DIR" "${PIN2[@]}"
  ours mlp_ours_1t 'BM_MlpStep/threads:1/' "${PIN1[@]}"
  ours mlp_ours_2t 'BM_MlpStep/threads:2/' "${PIN2[@]}"
  [[ -n "${OPENBLAS_DIR:-}" ]] && torch_case mlp_torch_openblas_1t 1 mlp "$OPENBLAS_DIR" "${PIN1[@]}"
  [[ -n "${OPENBLAS_DIR:-}" ]] && torch_case mlp_torch_openblas_2t 2 mlp "$OPENBLAS_DIR" "${PIN2[@]}"
  torch_case mlp_torch_1t 1 mlp "" "${PIN1[@]}"
done
echo "load after: $(uptime)" | tee -a "$RAW" >&2

"$PY" - "$RAW" <<'EOF'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 3 and not line.startswith("load"):
        vals.setdefault(p[0], []).append((float(p[1]), float(p[2])))
med = {k: (statistics.median(x for x, _ in v), statistics.median(g for _, g in v), len(v)) for k, v in vals.items()}
def ms(k): return med[k][0] if k in med else float("nan")
def gf(k): return med[k][1] if k in med else float("nan")
print("\n=== medians (ms/step; GFLOP/s effective) ===")
for k in sorted(med):
    print(f"{k:26s} {med[k][0]:9.3f} ms  {med[k][1]:7.1f} GFLOP/s  (n={med[k][2]})")
sg = gf("sgemm_1024_1t")
print("\n=== summary: the book's CNN step, batch 50, Adam (3.61 GFLOP) ===")
for t in ("1t", "2t"):
    o = ms(f"cnn_ours_{t}")
    print(f"[{t}] ours {o:.1f} ms/step (passive OMP wait: {ms(f'cnn_ours_{t}_passive'):.1f})")
    print(f"[{t}] PyTorch, default (reference) BLAS {ms(f'cnn_torch_{t}'):.1f} ms/step -> ours/PyTorch "
          f"{o / ms(f'cnn_torch_{t}'):.2f}")
    if f"cnn_torch_openblas_{t}" in med:
        print(f"[{t}] PyTorch + OpenBLAS {ms(f'cnn_torch_openblas_{t}'):.1f} ms/step -> ours/PyTorch "
              f"{o / ms(f'cnn_torch_openblas_{t}'):.2f}" + ("  (target <= 0.80)" if t == "1t" else ""))
print(f"[1t] ours {gf('cnn_ours_1t'):.1f} GFLOP/s = {100 * gf('cnn_ours_1t') / sg:.0f}% of oneDNN sgemm "
      f"1024^3 on one core ({sg:.1f} GFLOP/s)  (target >= 70%)")
print("\n=== small MLP step 784-256-10, batch 64, SGD (52.4 MFLOP) ===")
for t in ("1t", "2t"):
    line = f"[{t}] ours {1e3 * ms(f'mlp_ours_{t}'):.0f} us/step"
    if f"mlp_torch_openblas_{t}" in med:
        line += f", PyTorch+OpenBLAS {1e3 * ms(f'mlp_torch_openblas_{t}'):.0f} us/step"
    if f"mlp_torch_{t}" in med:
        line += f", PyTorch default BLAS {1e3 * ms(f'mlp_torch_{t}'):.0f} us/step"
    print(line)
EOF
echo "raw results: $RAW" >&2
