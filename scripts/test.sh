#!/usr/bin/env bash
# Builds and runs every test (installs dependencies first when run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then scripts/setup.sh; fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON \
  -DKILN_BUILD_EXAMPLES=ON -DKILN_BUILD_BENCHMARKS=ON "${launcher[@]}"
cmake --build build/test -j "$(nproc)"
cd build/test && ctest -j "$(nproc)" --output-on-failure
