#!/usr/bin/env bash
# ThreadSanitizer run of the threaded and distributed tests, in build-tsan/.
#
# TSan sees a lock only if the code that takes it is instrumented. Debian's
# abseil is not, and every absl::Mutex of distflow (and of gRPC, whose locks
# are absl::Mutex too) locks inside libabsl_synchronization.so, so against the
# packaged library TSan would report every guarded access. This script first
# builds Debian's own abseil source package (apt-get source abseil: the same
# version, patches and SONAMEs as the installed libraries) with
# -fsanitize=thread into build-tsan/absl, then builds distflow against it.
# At run time the instrumented abseil replaces the packaged one for gRPC too
# (LD_LIBRARY_PATH). gRPC's core stays uninstrumented: accesses inside it
# are not checked (ignore_noninstrumented_modules), and the ordering it gives
# between the thread that starts a call and the one that runs its callback
# is invisible, so distflow marks those hand-overs (base/tsan.h) and
# scripts/tsan.supp names the few reports that lie wholly inside gRPC's own
# templates and status objects. oneDNN runs single-threaded
# (OMP_NUM_THREADS=1): its OpenMP barriers live in uninstrumented libgomp.
#
# Needs deb-src entries for apt (added if missing) and ~40 min cold on two
# cores; not part of .ci/run. Any report fails the run.
#
#   bash scripts/tsan.sh            # after scripts/install_deps.sh
#   bash scripts/tsan.sh -R bulk    # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
OUT="$ROOT/build-tsan"
mkdir -p "$OUT"
export CCACHE_BASEDIR="$ROOT"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# --- abseil, instrumented ---------------------------------------------------
ABSL_PREFIX="$OUT/absl"
if [ ! -f "$ABSL_PREFIX/.built" ]; then
  if ! ls "$OUT"/abseil-*/CMakeLists.txt >/dev/null 2>&1; then
    if ! apt-get source --print-uris abseil >/dev/null 2>&1; then
      echo "tsan.sh: adding deb-src entries for apt (to fetch abseil's source package)"
      sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
        $SUDO tee /etc/apt/sources.list.d/debian-src.sources >/dev/null
      $SUDO apt-get update -qq
    fi
    (cd "$OUT" && apt-get source -qq abseil)
  fi
  SRC=$(ls -d "$OUT"/abseil-*/ | head -1)
  # As debian/rules builds the shared libraries, plus TSan.
  cmake -S "$SRC" -B "$OUT/absl-build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_STANDARD=17 \
    -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX="$ABSL_PREFIX" -DCMAKE_INSTALL_LIBDIR=lib \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build "$OUT/absl-build"
  cmake --install "$OUT/absl-build" >/dev/null
  touch "$ABSL_PREFIX/.built"
fi

# --- distflow, instrumented, against it --------------------------------------
TARGETS=(base_test runtime_test bulk_test rpc_test worker_test master_test coordination_test server_test
         in_process_cluster_test bulk_tls_test sync_replicas_test
         connection_loss_test)
# -U__SANITIZE_THREAD__: protobuf's headers change MapFieldBase's layout under
# TSan, and Debian's libprotobuf was built without it; our code must see the
# layout the library has. -D_GLIBCXX_TSAN=1 keeps what the macro gave
# libstdc++ (shared_ptr's release path TSan understands); DISTFLOW_TSAN turns
# on base/tsan.h's annotations.
cmake -S . -B "$OUT/distflow" -G Ninja -DDISTFLOW_SANITIZE=thread -DCMAKE_PREFIX_PATH="$ABSL_PREFIX" \
  -DCMAKE_BUILD_RPATH="$ABSL_PREFIX/lib" -DCMAKE_CXX_FLAGS="-U__SANITIZE_THREAD__ -D_GLIBCXX_TSAN=1 -DDISTFLOW_TSAN=1" \
  >/dev/null
cmake --build "$OUT/distflow" --target "${TARGETS[@]}"

export LD_LIBRARY_PATH="$ABSL_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Every report is printed and fails its test (exit 66) at the end.
export TSAN_OPTIONS="second_deadlock_stack=1 ignore_noninstrumented_modules=1 history_size=4 suppressions=$ROOT/scripts/tsan.supp"
export OMP_NUM_THREADS=1
# The instrumented abseil must be the one loaded, by distflow and gRPC alike.
ldd "$OUT/distflow/src/server/server_test" | grep -q "$ABSL_PREFIX/lib/libabsl_synchronization" || {
  echo "tsan.sh: server_test does not load the instrumented abseil" >&2
  exit 1
}
regex=$(IFS='|'; echo "^(${TARGETS[*]})\$")
ctest --test-dir "$OUT/distflow" -j 2 --output-on-failure -R "$regex" "$@"
