#!/usr/bin/env bash
# The installed distflow runs on CPUs older than the one that built it and
# picks the kernel variant each CPU supports (src/kernels/cpu/isa_dispatch.h).
# Installs the built tree into a temporary prefix, then runs the installed
# distflow-server --version and a few training steps (portable_train.cc,
# built against the install) here and under qemu-user's emulated CPUs:
# Haswell (AVX2, no AVX-512) and Nehalem (x86-64-v2: no AVX at all). Each run
# must report the variant its CPU allows and train (the loss falls), to the
# same loss as on this machine within a tolerance for the different
# rounding of wider vectors and FMA.
#   portable_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

command -v qemu-x86_64 > /dev/null ||
  fail "qemu-x86_64 is missing: install Debian's qemu-user (scripts/install_deps.sh does)"
arch_flags=$(sed -n 's/^DISTFLOW_ARCH_FLAGS:STRING=//p' "$BUILD/CMakeCache.txt")
[[ "$arch_flags" != *native* ]] || fail "$BUILD is built with $arch_flags, which older CPUs cannot run"

step "cmake --install into $tmp/prefix"
cmake --install "$BUILD" --prefix "$tmp/prefix" > "$tmp/install.log"
P=$tmp/prefix
server=$P/bin/distflow-server
LIBDIR=
for d in "$P/lib" "$P"/lib/*-linux-gnu; do
  if [ -e "$d/libdistflow.so" ]; then LIBDIR=$d; fi
done
[ -n "$LIBDIR" ] || fail "no libdistflow.so installed"

# emulate CPU PROGRAM ARGS...: runs under qemu-user with that CPU model
# (qemu's warnings about host features it does not model go to a log).
emulate() {
  local cpu=$1
  shift
  qemu-x86_64 -cpu "$cpu" "$@" 2>> "$tmp/qemu-$cpu.log"
}
# expect_isa OUTPUT ISA WHAT
expect_isa() {
  grep -q "^kernels: $2 (runtime dispatch; library built with $arch_flags;" <<< "$1" ||
    fail "$3: expected the $2 kernels, got: $1"
}

step "distflow-server --version, here and on emulated CPUs"
here=$("$server" --version) || fail "distflow-server --version failed: $here"
echo "$here"
host_isa=$(sed -n 's/^kernels: \([a-z0-9]*\) (runtime dispatch.*/\1/p' <<< "$here")
[ -n "$host_isa" ] || fail "distflow-server --version does not name the kernels' instruction set: $here"
expect_isa "$(DISTFLOW_KERNEL_ISA=baseline "$server" --version)" baseline "DISTFLOW_KERNEL_ISA=baseline"
out=$(emulate Haswell "$server" --version) || fail "distflow-server under qemu -cpu Haswell: $out"
expect_isa "$out" avx2 "qemu -cpu Haswell"
grep -q "this CPU supports avx2)" <<< "$out" || fail "qemu -cpu Haswell is not seen as an AVX2 CPU: $out"
# Asking for more than the CPU has falls back to what it has.
out=$(DISTFLOW_KERNEL_ISA=avx512 qemu-x86_64 -cpu Haswell "$server" --version 2>&1) ||
  fail "distflow-server under qemu -cpu Haswell with DISTFLOW_KERNEL_ISA=avx512: $out"
expect_isa "$(grep '^kernels:' <<< "$out")" avx2 "qemu -cpu Haswell, DISTFLOW_KERNEL_ISA=avx512"
grep -q "DISTFLOW_KERNEL_ISA=avx512 asks for more than this CPU supports" <<< "$out" ||
  fail "no warning that DISTFLOW_KERNEL_ISA=avx512 exceeds the CPU: $out"
out=$(emulate Nehalem "$server" --version) || fail "distflow-server under qemu -cpu Nehalem: $out"
expect_isa "$out" baseline "qemu -cpu Nehalem"

step "a few training steps, built against the install, here and on emulated CPUs"
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 -march=x86-64-v2 "$SRC/tests/install/portable/portable_train.cc" -o "$tmp/portable_train" \
  $(pkg-config --cflags --libs distflow) -Wl,-rpath,"$LIBDIR" || fail "building portable_train against the install"
train() {  # train LABEL [qemu CPU]: the run's output; fails unless it trained
  local label=$1 out
  shift
  out=$("$@" "$tmp/portable_train" /usr/share/datasets/fashion-mnist 4) || fail "$label: portable_train failed: $out"
  grep -q "^portable_train: ok$" <<< "$out" || fail "$label: $out"
  echo "$out"
}
native=$(train "this CPU")
echo "$native"
expect_isa "$native" "$host_isa" "portable_train on this CPU"
haswell=$(train "qemu -cpu Haswell" emulate Haswell)
echo "$haswell"
expect_isa "$haswell" avx2 "portable_train under qemu -cpu Haswell"
nehalem=$(train "qemu -cpu Nehalem" emulate Nehalem)
echo "$nehalem"
expect_isa "$nehalem" baseline "portable_train under qemu -cpu Nehalem"
# The same training, so the same loss up to rounding: vector width, FMA and
# oneDNN's per-ISA kernels sum in different orders.
final() { sed -n 's/^step 4 loss //p' <<< "$1"; }
for run in haswell nehalem; do
  awk -v a="$(final "$native")" -v b="$(final "${!run}")" -v run="$run" 'BEGIN {
    d = a - b; if (d < 0) d = -d
    if (a == "" || b == "" || d > 0.02 * a) { printf "FAIL: final loss here %s, under %s %s\n", a, run, b; exit 1 }
  }' || exit 1
done
echo "all checks passed"
