#!/usr/bin/env bash
# Builds and runs the demo examples (the DSL and the run-time graph API) (installs dependencies first when run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then scripts/setup.sh; fi
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=ON
cmake --build build/demo --target gelu_demo graph_demo
./build/demo/examples/gelu_demo
./build/demo/examples/graph_demo
