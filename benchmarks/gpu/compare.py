"""kiln's GPU benchmarks beside PyTorch's: reads bench_vulkan's JSON (--benchmark_out) and
torch_anchors.py's, prints a Markdown table of both times and PyTorch's time over kiln's (above 1:
kiln is faster), with the bandwidth-bound ops' bytes per second as a fraction of PyTorch's
device-to-device copy in the same run (each time is one call that waits for its result, so a
small op's time is mostly the call's round trip).
Usage: python3 compare.py bench_vulkan.json torch.json [kiln_models.txt]"""
import json
import re
import sys

kiln = {b["name"]: b for b in json.load(open(sys.argv[1]))["benchmarks"]}
torch = json.load(open(sys.argv[2]))
rows = [  # (label, kiln benchmark, its seconds counter and scale, torch key, bytes, flops)
    ("relu(x*y+z), 2^24 f32", "relu_fma_vs_glsl/16777216/real_time", "kiln_us", 1e-6,
     "relu_fma_2^24", 16 * 2**24, 0),
    ("softmax 4096x4096 f32", "softmax_vs_glsl/4096/4096/real_time", "kiln_ms", 1e-3,
     "softmax_4096x4096", 8 * 4096**2, 0),
    ("softmax 12288x128 f32", "softmax_vs_glsl/12288/128/real_time", "kiln_ms", 1e-3,
     "softmax_12288x128", 8 * 12288 * 128, 0),
    ("layer_norm 8192x768 f32", "layer_norm_8192x768/real_time", "kiln_us", 1e-6,
     "layer_norm_8192x768", 8 * 8192 * 768, 0),
    ("matmul 4096^3 f16", "matmul_4096_f16/real_time", "kiln_ms", 1e-3, "matmul_4096_f16", 0,
     2 * 4096**3),
    ("matmul 4096^3 f32 (TF32 off)", "matmul_4096_f32/real_time", "kiln_ms", 1e-3,
     "matmul_4096_f32", 0, 2 * 4096**3),
]
copy = 2 * 4 * 2**26 / torch["copy_2^26_f32"]  # bytes read and written per second
print(f"{torch.get('device', 'GPU')}; PyTorch {torch.get('torch', '')}; copy "
      f"{copy / 1e12:.2f} TB/s through PyTorch\n")
print("| op | kiln | PyTorch | PyTorch / kiln | kiln: of copy bandwidth, or TFLOP/s |")
print("| --- | --- | --- | --- | --- |")
for label, name, counter, scale, key, moved, flops in rows:
    if name not in kiln or key not in torch:
        continue
    k = kiln[name][counter] * scale
    t = torch[key]
    extra = f"{moved / k / copy:.2f}" if moved else ""
    if flops:
        extra = f"{flops / k / 1e12:.1f} against {flops / t / 1e12:.1f} TFLOP/s"
    print(f"| {label} | {k * 1e3:.3f} ms | {t * 1e3:.3f} ms | {t / k:.2f} | {extra} |")
if len(sys.argv) > 3:
    for line in open(sys.argv[3]):
        m = re.match(r"bert_layer: median ([0-9.]+) ms.*device buffers: median ([0-9.]+) ms", line)
        if m and "bert_layer_b1_f32_eager" in torch:
            t = torch["bert_layer_b1_f32_eager"]
            for what, ms in (("device buffers", m.group(2)), ("host data", m.group(1))):
                k = float(ms) / 1e3
                print(f"| BERT-base layer, S 128, batch 1, f32, {what} | {k * 1e3:.3f} ms "
                      f"| {t * 1e3:.3f} ms | {t / k:.2f} | |")
            for provider in ("cuda", "cpu"):
                key = f"bert_layer_b1_f32_ort_{provider}"
                if key in torch:
                    print(f"| (ONNX Runtime, {provider.upper()} provider, host data) | | "
                          f"{torch[key] * 1e3:.3f} ms | {torch[key] / k:.2f} | |")
        m = re.match(r"kiln profile: .* ([0-9]+) dispatches: +([0-9.]+) us", line)
        if m:
            print(f"| (BERT layer: device time of its {m.group(1)} dispatches) | "
                  f"{float(m.group(2)) / 1e3:.3f} ms | | | |")
