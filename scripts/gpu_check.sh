#!/bin/bash
# Runs kiln's Vulkan tests and benchmarks on a machine with an NVIDIA GPU and no build tools:
# `pack` here builds build/test (Release, configured with benchmarks) and puts the test and benchmark
# binaries, the validation layer and the libraries the machine lacks into .dev/ (ignored by git);
# `run` there, with .dev and .gl carried, runs every gtest suite on the GPU with the validation
# layer on, then the Vulkan benchmarks beside PyTorch's same ops (benchmarks/gpu) and the BERT
# layer through kiln::onnx, writing to $OUT the suites' logs (tests.log, rc.txt), the benchmarks'
# (bench.txt), the table of both (compare.md) and the BERT layer's kernels as the GPU's target
# emits them (dump.tgz); `run tests`: the suites alone. .gl holds the Vulkan loader's Debian
# packages (docs/TESTING.md says how).
set -u
mode=${1:-}
root=$(pwd)

if [ "$mode" = pack ]; then
  set -e
  # Stale binaries would measure old code: build what is bundled (benchmarks must be configured).
  grep -q 'KILN_BUILD_BENCHMARKS:BOOL=ON' build/test/CMakeCache.txt ||
    { echo "configure build/test with -DKILN_BUILD_BENCHMARKS=ON first"; exit 1; }
  ninja -C build/test all
  mkdir -p .dev/lib .dev/layers
  cd build/test
  bins=$(ctest --show-only=json-v1 | python3 -c '
import json, sys
seen = []
for t in json.load(sys.stdin)["tests"]:
    c = t.get("command", [])
    if c and "/tests/" in c[0] and "runtime_process" not in c[0] and c[0] not in seen:
        seen.append(c[0])
print(" ".join(p.split("/build/test/", 1)[1] for p in seen))')
  # Stripped copies: the carried folders may hold 64 MiB in all.
  stage=$(mktemp -d)
  for f in $bins kiln-run benchmarks/bench_vulkan benchmarks/bench_normalizations \
    benchmarks/bench_reductions benchmarks/kiln_bench_models benchmarks/*.spv \
    tests/onnx-node-tests.txt; do
    mkdir -p "$stage/$(dirname "$f")"
    case $f in *.spv | *.txt) cp "$f" "$stage/$f" ;; *) strip -o "$stage/$f" "$f" ;; esac
  done
  tar -cf - -C "$stage" . | xz -T0 -6 >"$root/.dev/bin.tar.xz"
  rm -rf "$stage"
  cd "$root"
  cp /lib/x86_64-linux-gnu/libbenchmark.so.1debian /lib/x86_64-linux-gnu/libgomp.so.1 \
    /lib/x86_64-linux-gnu/libonnx.so.1 /lib/x86_64-linux-gnu/libonnx_proto.so.1 \
    /lib/x86_64-linux-gnu/libprotobuf.so.32 .dev/lib/
  xz -T0 -6 -c /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so \
    >.dev/lib/libVkLayer_khronos_validation.so.xz
  sed 's#"library_path": "libVkLayer#"library_path": "../lib/libVkLayer#' \
    /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json \
    >.dev/layers/VkLayer_khronos_validation.json
  du -sh .dev
  exit 0
fi

[ "$mode" = run ] || { echo "usage: $0 pack | run [tests]"; exit 2; }
: "${OUT:?run on the device machine}"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
# The benchmarks read the GLSL anchors' SPIR-V by their absolute build path.
[ "$root" = /work/main ] || { mkdir -p /work && ln -sfn "$root" /work/main; }
mkdir -p build/test && xz -dc .dev/bin.tar.xz | tar -xf - -C build/test
xz -dkf .dev/lib/libVkLayer_khronos_validation.so.xz
export LD_LIBRARY_PATH=$root/.dev/lib VK_LAYER_PATH=$root/.dev/layers
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd
nvidia-smi -L
lscpu | grep -m1 'Model name'
nproc

cd build/test
export KILN_DEVICE=vulkan KILN_VALIDATE=1 KILN_CACHE_DIR=/tmp/kiln-cache
./kiln-run --list-devices
export KILN_ONNX_CASES=$root/build/test/tests/onnx-node-tests.txt
mkdir -p /tmp/logs
start=$(date +%s)
# The ONNX suites that read Debian's ONNX test data or run kiln-import-onnx stay here: neither
# travels.
ls tests/ | grep -v '\.' | grep -v -E 'onnx-node|onnx_test_onnx_(import|options|fuzz)' | xargs -P 12 -I{} sh -c \
  'timeout 120 ./tests/{} --gtest_brief=1 >/tmp/logs/{}.log 2>&1; echo "{} rc=$?" >>/tmp/logs/rc'
echo "tests took $(($(date +%s) - start)) s"
for f in /tmp/logs/*.log; do echo "=== $f"; cat "$f"; done >"$OUT/tests.log"
sort /tmp/logs/rc | tee "$OUT/rc.txt"
grep -h '^\[  FAILED  \]' /tmp/logs/*.log | sort -u | head -60
[ "${2:-}" = tests ] && exit 0

unset KILN_VALIDATE  # the layer checks every call: timings without it
# The benchmarks' outputs gather in /tmp/bench and come back as one file, $OUT/bench.txt, beside
# compare.md, the tests' logs and dump.tgz: few files, since a run's $OUT may bring back only a
# handful.
b=/tmp/bench && mkdir -p $b
timeout 150 ./benchmarks/bench_vulkan --benchmark_min_time=0.2 \
  --benchmark_out=$b/bench_vulkan.json >$b/bench_vulkan.txt 2>&1
# The BERT-base layer through kiln::onnx on the GPU, with one profiled call and its kernels as
# this device's target emits them (KILN_DUMP_DIR, dump.tgz); then PyTorch on the same GPU, the
# same ops and ONNX Runtime on the same model, and the table of both (benchmarks/gpu).
mkdir -p /tmp/models/bert && (cd /tmp/models && python3 "$root/benchmarks/models/make_models.py" . >/dev/null) &&
  mv /tmp/models/bert_layer.onnx /tmp/models/bert/ &&
  KILN_DUMP_DIR=/tmp/dump KILN_BENCH_DEVICE=vulkan timeout 60 ./benchmarks/kiln_bench_models \
    /tmp/models/bert >$b/kiln_models.txt 2>&1
[ -d /tmp/dump ] && tar -czf "$OUT/dump.tgz" -C /tmp dump
timeout 150 python3 "$root/benchmarks/gpu/torch_anchors.py" /tmp/models/bert >$b/torch.json
unset KILN_DEVICE  # and kiln's CPU path on the machine's cores, beside ONNX Runtime's CPU provider
timeout 60 ./benchmarks/kiln_bench_models /tmp/models/bert "$(nproc)" >$b/kiln_cpu.txt 2>&1
for f in bench_vulkan.txt kiln_models.txt kiln_cpu.txt torch.json; do
  echo "=== $f" && cat $b/$f
done >"$OUT/bench.txt"
python3 "$root/benchmarks/gpu/compare.py" $b/bench_vulkan.json $b/torch.json $b/kiln_models.txt |
  tee "$OUT/compare.md"
