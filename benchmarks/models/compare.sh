#!/usr/bin/env bash
# The model benchmark: kiln (kiln_bench, linked as users link kiln::onnx) and ONNX Runtime's CPU
# provider (ort_bench.js) on the models of make_models.py, interleaved over three rounds on the
# same cores; kiln's outputs are compared with ORT's. Then kiln beside a busy process: one thread
# against THREADS, alternating.
# Usage: benchmarks/models/compare.sh BUILD_DIR [THREADS]
#   BUILD_DIR: a build with -DKILN_BUILD_BENCHMARKS=ON; onnxruntime-node must be resolvable by
#   node (npm install --ignore-scripts onnxruntime-node, then NODE_PATH=.../node_modules).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: compare.sh BUILD_DIR [THREADS]}
threads=${2:-2}
models=${KILN_MODELS_DIR:-$build/models}
mkdir -p "$models"
[ -f "$models/detector.onnx" ] || /usr/bin/python3 "$here/make_models.py" "$models"
for round in 1 2 3; do
  echo "round $round"
  node "$here/ort_bench.js" "$models" "$threads" | sed 's/^/  ORT   /'
  "$build/benchmarks/kiln_bench_models" "$models" "$threads" | sed 's/^/  kiln  /'
done
echo "beside a busy process"
"$build/benchmarks/kiln_bench_models" "$models" "$threads" --busy | sed 's/^/  kiln  /'
