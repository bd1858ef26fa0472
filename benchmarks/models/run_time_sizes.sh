#!/usr/bin/env bash
# Models whose sizes are left to the call, imported once (kiln-run MODEL.onnx --save
# MODEL.kiln) and run from that module at two sizes on each device, against ONNX Runtime's CPU
# provider (ort_run.js) at the same sizes: the BERT layer at batch x sequence 1 x 128 and 3 x 37,
# the GPT-2 step (batch 1: one new token after a cache of 7; batch 2: four after 30), the MLP at
# 256 and 77 tokens, the ResNet bottlenecks and the MobileNet block at batch 1 and 2. Prints each
# model's import time and each output's largest difference from ORT's.
# Usage: benchmarks/models/run_time_sizes.sh BUILD_DIR
#   BUILD_DIR: a build with kiln-run and kiln-import-onnx; onnxruntime-node must be resolvable by
#   node (NODE_PATH). KILN_DEVICES: the devices (default "cpu vulkan").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: run_time_sizes.sh BUILD_DIR}" && pwd)
models=${KILN_MODELS_DIR:-$build/models}
mkdir -p "$models"
[ -f "$models/gpt2_step.onnx" ] || /usr/bin/python3 "$here/make_models.py" "$models"
io=$models/run_time_sizes
rm -rf "$io" && mkdir -p "$io"

# The inputs of each run (seeded): LABEL.in.NAME.npy.
/usr/bin/python3 - "$io" <<'PY'
import sys
import numpy as np
io = sys.argv[1]
rng = np.random.default_rng(7)
def save(label, **arrays):
    for name, a in arrays.items():
        np.save(f"{io}/{label}.in.{name}.npy", a)
for batch, seq in ((1, 128), (3, 37)):
    mask = np.ones((batch, seq), np.int64)
    mask[-1, seq - seq // 4:] = 0  # the last row padded
    save(f"bert_layer.{batch}x{seq}",
         hidden_states=rng.standard_normal((batch, seq, 768)).astype(np.float32),
         attention_mask=mask)
for batch, past, seq in ((1, 7, 1), (2, 30, 4)):
    cache = {f"past_key_values.{layer}.{kind}":
             (0.5 * rng.standard_normal((batch, 12, past, 64))).astype(np.float32)
             for layer in range(2) for kind in ("key", "value")}
    mask = np.ones((batch, past + seq), np.int64)
    mask[0, :2] = 0  # the first row left-padded
    save(f"gpt2_step.{batch}x{past}+{seq}", input_ids=rng.integers(0, 2048, (batch, seq)),
         attention_mask=mask, **cache)
for tokens in (256, 77):
    save(f"mlp.{tokens}", x=rng.standard_normal((tokens, 1024)).astype(np.float32))
for batch in (1, 2):
    save(f"resnet_stages.{batch}",
         x=np.maximum(rng.standard_normal((batch, 256, 56, 56)), 0).astype(np.float32))
    save(f"mobilenet_48x192.{batch}",
         x=rng.standard_normal((batch, 3, 48, 192)).astype(np.float32))
PY

for model in bert_layer gpt2_step mlp resnet_stages mobilenet_48x192; do
  start=$(date +%s%N)
  "$build/kiln-run" "$models/$model.onnx" --save "$io/$model.kiln" >/dev/null
  echo "$model: imported once in $(( ($(date +%s%N) - start) / 1000000 )) ms"
  for file in "$io/$model".*.in.*.npy; do
    label=${file#"$io/"}
    label=${label%%.in.*}
    [ -f "$io/$label.ort.done" ] && continue
    node "$here/ort_run.js" "$models/$model.onnx" "$io" "$label"
    touch "$io/$label.ort.done"
    for device in ${KILN_DEVICES:-cpu vulkan}; do
      args=()
      for in in "$io/$label".in.*.npy; do
        name=${in#"$io/$label.in."}
        args+=(--input "${name%.npy}=$in")
      done
      for out in "$io/$label".ort.*.npy; do
        name=${out#"$io/$label.ort."}
        args+=(--output "${name%.npy}=$io/$label.kiln.$device.${name}")
      done
      "$build/kiln-run" "$io/$model.kiln" --device "$device" "${args[@]}" >/dev/null
      /usr/bin/python3 "$here/compare_npy.py" "$io" "$label" "$device" 1e-4 1e-4
    done
  done
done
