"""PyTorch's side of kiln's GPU benchmarks (bench_vulkan): the same ops on the same GPU, each
timed as bench_vulkan times kiln's, one call that waits for its result at a time (the best of
five blocks' mean). Prints one JSON object: {name: seconds per call}. The BERT-base encoder layer
(S 128; post-norm, GELU, as benchmarks/models/make_models.py writes it) in f32 and f16, batch 1
and 8, eager; and, given the folder where make_models.py wrote bert_layer.onnx, that model through
ONNX Runtime's CUDA and CPU providers (batch 1, host data, kiln_bench's inputs; the median of 20
calls, as kiln_bench_models reports).
Usage: python3 torch_anchors.py [MODEL_DIR] > torch.json"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False  # f32 products in f32, as kiln's
torch.backends.cudnn.allow_tf32 = False


def per_call(fn, calls):
    fn()
    torch.cuda.synchronize()
    best = 1e30
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
            torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def data(shape, scale=1.0, dtype=torch.float32):
    n = 1
    for s in shape:
        n *= s
    i = torch.arange(n, device=dev, dtype=torch.float32)
    return (scale * torch.sin(0.37 * i)).reshape(shape).to(dtype)


out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
x = data([1 << 26])
y = torch.empty_like(x)
out["copy_2^26_f32"] = per_call(lambda: y.copy_(x), 10)
a, b, c = data([1 << 24]), data([1 << 24], 2), data([1 << 24], 0.5)
out["relu_fma_2^24"] = per_call(lambda: torch.relu(a * b + c), 10)
s = data([4096, 4096], 4)
out["softmax_4096x4096"] = per_call(lambda: torch.softmax(s, -1), 10)
short = data([12288, 128], 4)
out["softmax_12288x128"] = per_call(lambda: torch.softmax(short, -1), 10)
ln_x, ln_w, ln_b = data([8192, 768], 3), data([768]), data([768], 0.5)
out["layer_norm_8192x768"] = per_call(lambda: F.layer_norm(ln_x, [768], ln_w, ln_b), 10)
for name, dt in (("f16", torch.float16), ("f32", torch.float32)):
    m1, m2 = data([4096, 4096], 1, dt), data([4096, 4096], 0.01, dt)
    out[f"matmul_4096_{name}"] = per_call(lambda: m1 @ m2, 3)
for name, dt in (("f32", torch.float32), ("f16", torch.float16)):
    layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu",
                                             batch_first=True).to(dev, dt).eval()
    for batch in (1, 8):
        h = data([batch, 128, 768], 1, dt)
        with torch.inference_mode():
            out[f"bert_layer_b{batch}_{name}_eager"] = per_call(lambda: layer(h), 20)
model = os.path.join(sys.argv[1], "bert_layer.onnx") if len(sys.argv) > 1 else ""
if model and os.path.exists(model):
    import numpy as np
    import onnxruntime as ort
    i = np.arange(128 * 768, dtype=np.float32)
    feed = {"hidden_states": np.sin(np.float32(0.37) * i).reshape(1, 128, 768).astype(np.float32),
            "attention_mask": (np.arange(128) % 100 < 90).astype(np.int64).reshape(1, 128)}
    for provider in ("CUDAExecutionProvider", "CPUExecutionProvider"):
        if provider not in ort.get_available_providers():
            continue
        runner = ort.InferenceSession(model, providers=[provider])
        runner.run(None, feed)
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            runner.run(None, feed)
            times.append(time.perf_counter() - t0)
        out[f"bert_layer_b1_f32_ort_{provider[:-17].lower()}"] = statistics.median(times)
print(json.dumps(out, indent=1))
