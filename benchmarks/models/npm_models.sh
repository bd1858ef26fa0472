#!/usr/bin/env bash
# Trained models that npm packages ship (the voice-activity detectors of @ricky0123/vad-web), run
# by kiln (kiln-run on the .onnx file itself, through kiln-import-onnx) and by ONNX Runtime's CPU
# provider (npm_models.js) on the same inputs: each output's largest difference from ORT's, and
# each one's median time per call.
# Usage: benchmarks/models/npm_models.sh BUILD_DIR [THREADS]
#   BUILD_DIR: a build with kiln-run and kiln-import-onnx. The packages are installed once
#   (npm install --ignore-scripts) into $KILN_NPM_DIR, by default BUILD_DIR/npm-models.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: npm_models.sh BUILD_DIR [THREADS]}" && pwd)
threads=${2:-1}
npm_dir=${KILN_NPM_DIR:-$build/npm-models}
mkdir -p "$npm_dir"
if [ ! -d "$npm_dir/node_modules/@ricky0123/vad-web" ] ||
  [ ! -d "$npm_dir/node_modules/onnxruntime-node" ]; then
  (cd "$npm_dir" && npm install --ignore-scripts --no-audit --no-fund @ricky0123/vad-web \
    onnxruntime-node >/dev/null)
fi
pkg=$npm_dir/node_modules/@ricky0123/vad-web/dist
io=$npm_dir/io
NODE_PATH=$npm_dir/node_modules node "$here/npm_models.js" "$pkg" "$io" "$threads"

# kiln on one model, on each device of $KILN_NPM_DEVICES (default: the CPU; "cpu vulkan" adds the
# Vulkan device): its inputs but the sample rate (given at import, where it picks the branch for
# 16 kHz), each output compared with ORT's; then its time per call on the CPU.
devices=${KILN_NPM_DEVICES:-cpu}
kiln_on() {  # LABEL IMPORT-FLAGS...
  local label=$1 file device
  shift
  local inputs=()
  for file in "$io/$label".in.*.npy; do
    local name=${file#"$io/$label".in.}
    name=${name%.npy}
    [ "$name" = sr ] || inputs+=(--input "$name=$file")
  done
  for device in $devices; do
    local outputs=()
    for file in "$io/$label".ort.*.npy; do
      local name=${file#"$io/$label".ort.}
      name=${name%.npy}
      outputs+=(--output "$name=$io/$label.kiln.$device.$name.npy")
    done
    KILN_NUM_THREADS=$threads "$build/kiln-run" "$pkg/$label.onnx" --device "$device" "$@" \
      "${inputs[@]}" "${outputs[@]}" >/dev/null
    /usr/bin/python3 "$here/compare_npy.py" "$io" "$label" "$device" 1e-4 1e-5
  done
  echo -n "$label: kiln on the CPU, "
  KILN_NUM_THREADS=$threads "$build/kiln-run" "$pkg/$label.onnx" --device cpu "$@" \
    "${inputs[@]}" --benchmark 200 2>/dev/null | grep '^benchmark:'
}

kiln_on silero_vad_legacy --dim batch=1 --dim sequence=512 --value sr=16000
kiln_on silero_vad_v5 --shape input=1x512 --shape state=2x1x128 --value sr=16000
kiln_on silero_vad_v6 --shape input=1x512 --shape state=2x1x128 --value sr=16000
