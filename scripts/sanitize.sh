#!/usr/bin/env bash
# Builds the project with AddressSanitizer and UndefinedBehaviorSanitizer in
# build-asan/ and runs the test suite there (the long MNIST example runs and
# the fuzzers, which have their own sanitized build, are left out, as are
# python_test and install_test, which load or link the library from programs
# built without the sanitizer runtime: python3 and an outside consumer). Any report
# fails the run. Takes ~25 min cold on 2 cores; not part of .ci/run.
#
#   bash scripts/sanitize.sh            # after scripts/install_deps.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build-asan -G Ninja -DDISTFLOW_SANITIZE=address,undefined
cmake --build build-asan
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp"
export UBSAN_OPTIONS="print_stacktrace=1"
ctest --test-dir build-asan -j 2 --output-on-failure -E "example_mnist|fuzz|python_test_|install_test"
