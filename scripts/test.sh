#!/usr/bin/env bash
# Builds and runs every test (installs dependencies first when run as root): the whole suite,
# then the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer (leak checking
# on), then the threaded tests under ThreadSanitizer. The benchmarks are not built here (a
# quarter of the build's time, and no test): -DKILN_BUILD_BENCHMARKS=ON builds them
# (docs/PERFORMANCE.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ]; then scripts/setup.sh; fi
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The tests share precompiled headers: ccache caches the files that use them only when it need
# not check the header's macros and timestamps (ccache's manual, "Precompiled headers").
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
jobs=$(nproc)
supp=$PWD/tests/sanitizers

cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON \
  -DKILN_BUILD_EXAMPLES=ON -DKILN_BUILD_BENCHMARKS=OFF "${launcher[@]}"
cmake --build build/test -j "$jobs"
(cd build/test && ctest -j "$jobs" --output-on-failure)

# The sanitizer builds skip examples, benchmarks, compile-fail, package and header-only tests
# (nothing to sanitize there that the rest does not run) and compile the runtime once.
sanitized() {  # build dir, optimization, sanitizers, then targets to build (none: all)
  local dir=$1 opt=$2 sanitize=$3
  shift 3
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="$opt" \
    -DKILN_BUILD_TESTS=ON -DKILN_BUILD_EXAMPLES=OFF -DKILN_BUILD_BENCHMARKS=OFF \
    -DKILN_SANITIZE="$sanitize" "${launcher[@]}"
  if [ $# -eq 0 ]; then cmake --build "$dir" -j "$jobs"; else cmake --build "$dir" -j "$jobs" --target "$@"; fi
}

# -O0 for AddressSanitizer + UndefinedBehaviorSanitizer: it finds the same errors as -O1 and
# builds in less than half the time (the Release stage above has run the suite optimized).
sanitized build/asan -O0 address,undefined
(cd build/asan &&
  ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest -j "$jobs" --output-on-failure)

# The tests that run kiln from several threads: one executable from four threads on both devices
# (graph), large CPU regions on the worker pool (broadcast), row groups' blocks of rows on the
# pool (normalizations), views' strided rows gathered on the pool (views), a GEMM's tiles and its
# shared packed B on the pool (contractions, convolutions), the pool's own checks, submitted
# calls on the devices' queues (async), and thread limits (threads). -O1: ThreadSanitizer's usual
# level.
sanitized build/tsan -O1 thread graph_test_graph e2e_test_broadcast graph_test_bad_inputs \
  e2e_test_normalizations e2e_test_views e2e_test_contractions e2e_test_convolutions \
  runtime_test_async runtime_test_threads
(cd build/tsan &&
  TSAN_OPTIONS=suppressions=$supp/tsan.supp:halt_on_error=1:second_deadlock_stack=1 \
  ctest -j "$jobs" --output-on-failure \
    -R '^(Graph[A-Za-z]*|Broadcast|BadInputs|Scale|Normalizations|Views|Matmul|Conv|ConvTranspose|Async|Threads)\.|^e2e\.cpu\.(streaming_stores\.)?test_(broadcast|normalizations|views|contractions|convolutions)$')
