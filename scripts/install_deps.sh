#!/usr/bin/env bash
# Installs everything distflow needs to build, test and run its main job, from
# Debian 12 packages only. Idempotent: packages already present are skipped by apt.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  clang libclang-rt-14-dev clang-format  # clang-format: tests/format_test.sh
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev libdnnl-dev zlib1g-dev libisal-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist
  iperf3 tmux openssl
  python3 python3-yaml python3-dev python3-numpy python3-protobuf python3-pytest pybind11-dev
  python3-pip python3-setuptools python3-venv
  python3-torch  # the reference the sparse ops are checked against (tests/python/test_sparse_torch_reference.py)
  libcpp-httplib-dev chromium
  qemu-user  # tests/install/portable_test.sh runs the build on emulated older CPUs
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
