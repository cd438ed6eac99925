#!/usr/bin/env bash
# Installs dependencies, builds, and runs distflow's main job.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh
cmake -S . -B build -G Ninja
cmake --build build
./build/examples/tensor_tour
