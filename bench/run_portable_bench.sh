#!/usr/bin/env bash
# The portable build (the default -march=x86-64-v2, hot loops dispatched to
# AVX2/AVX-512 at run time) against a build for this CPU alone
# (-march=native), in one run with interleaved rounds: the book's CNN step
# (batch 50, Adam) at one thread, pinned, from bench/train_bench. Also times
# the portable build with its dispatched loops held to the baseline
# (DISTFLOW_KERNEL_ISA=baseline), which is what the portable build would be
# without dispatch. Prints the medians and the ratios.
#
#   bench/run_portable_bench.sh [PORTABLE_BUILD_DIR] [NATIVE_BUILD_DIR]
#
# The native build (default: build-native beside the portable one) is made
# by this script alone: CI never builds it. A cold one takes as long as the
# main build.
# Environment: ROUNDS=5 (rounds), MIN_TIME=3 (seconds per case),
# CPU=<first CPU this shell may use> (the CPU the cases are pinned to).
# Raw results: PORTABLE_BUILD_DIR/bench-results/portable_bench.txt.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORTABLE="${1:-$ROOT/build}"
NATIVE="${2:-$(dirname "$PORTABLE")/build-native}"
ROUNDS="${ROUNDS:-5}"
MIN_TIME="${MIN_TIME:-3}"
PY=/usr/bin/python3

export CCACHE_BASEDIR="$ROOT"
cmake -S "$ROOT" -B "$PORTABLE" -G Ninja >/dev/null
if grep -q '^DISTFLOW_ARCH_FLAGS:STRING=.*native' "$PORTABLE/CMakeCache.txt"; then
  echo "$PORTABLE is configured with -march=native; pass a portable build (the default flags)" >&2
  exit 1
fi
cmake -S "$ROOT" -B "$NATIVE" -G Ninja -DDISTFLOW_ARCH_FLAGS=-march=native >/dev/null
nice -n 10 ninja -C "$PORTABLE" train_bench >&2
nice -n 10 ninja -C "$NATIVE" train_bench >&2

CPU="${CPU:-$(taskset -cp $$ | sed 's/.*: //' | cut -d, -f1 | cut -d- -f1)}"
OUT="$PORTABLE/bench-results"
mkdir -p "$OUT"
RAW="$OUT/portable_bench.txt"
: >"$RAW"

# case KEY BUILD [ENV=...]: the 1-thread CNN step -> "KEY ms/step"
case_() {
  local key="$1" build="$2"; shift 2
  local json
  json="$(env "$@" taskset -c "$CPU" "$build/bench/train_bench" --benchmark_filter='BM_CnnStep/threads:1/' \
    --benchmark_min_time="$MIN_TIME" --benchmark_format=json 2>/dev/null)"
  "$PY" -c '
import json, sys
b = json.loads(sys.stdin.read())["benchmarks"][0]
scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6}[b["time_unit"]]
print(sys.argv[1], b["real_time"] * scale)
' "$key" <<<"$json" | tee -a "$RAW"
}

echo "kernels (portable build): $(DISTFLOW_KERNEL_ISA= "$PORTABLE/tools/distflow-server" --version | tail -1)" |
  tee -a "$RAW" >&2
echo "load before: $(uptime)" | tee -a "$RAW" >&2
for ((r = 1; r <= ROUNDS; r++)); do
  echo "--- round $r (CPU $CPU)" >&2
  # Alternate the order, so a load change does not always hit the same side.
  if ((r % 2)); then
    case_ portable "$PORTABLE" DISTFLOW_KERNEL_ISA=
    case_ native "$NATIVE"
  else
    case_ native "$NATIVE"
    case_ portable "$PORTABLE" DISTFLOW_KERNEL_ISA=
  fi
  case_ portable_baseline "$PORTABLE" DISTFLOW_KERNEL_ISA=baseline
done
echo "load after: $(uptime)" | tee -a "$RAW" >&2

"$PY" - "$RAW" <<'PYEOF'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 2 and p[0] in ("portable", "native", "portable_baseline"):
        vals.setdefault(p[0], []).append(float(p[1]))
med = {k: statistics.median(v) for k, v in vals.items()}
print("\n=== CNN step, batch 50, Adam, 1 thread: median ms/step over %d rounds ===" % len(vals["native"]))
for k in ("native", "portable", "portable_baseline"):
    print("%-18s %8.2f ms  (rounds: %s)" % (k, med[k], " ".join("%.1f" % x for x in vals[k])))
print("portable / native step time:           %.3f  (target <= 1.05)" % (med["portable"] / med["native"]))
print("portable held to baseline / native:    %.3f" % (med["portable_baseline"] / med["native"]))
PYEOF
