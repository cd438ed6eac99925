#!/usr/bin/env bash
# Installs dependencies, builds, and runs distflow's main job.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh

# Paths relative to the checkout let ccache reuse objects across clones.
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build -G Ninja
cmake --build build
./build/examples/softmax_fashion_mnist --steps=2000
