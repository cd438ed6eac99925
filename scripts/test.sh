#!/usr/bin/env bash
# Installs dependencies, builds everything, and runs the whole test suite:
# unit tests, integration tests with real servers, and a bounded libFuzzer run.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh

# Paths relative to the checkout let ccache reuse objects across clones.
export CCACHE_BASEDIR="$PWD"

# libFuzzer targets need clang; they get their own small build.
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DDISTFLOW_FUZZ=ON
cmake --build build-fuzz

cmake -S . -B build -G Ninja -DDISTFLOW_FUZZERS_DIR="$PWD/build-fuzz/fuzz"
cmake --build build
ctest --test-dir build --output-on-failure -j 2
