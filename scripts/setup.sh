#!/usr/bin/env bash
# Installs everything kiln builds, tests and benchmarks with, from Debian 12 packages (as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt (an unattended upgrade, a second shell) instead of failing on its lock.
apt=(apt-get -o DPkg::Lock::Timeout=600)
"${apt[@]}" update -qq
"${apt[@]}" install -y -qq --no-install-recommends \
  g++ cmake ninja-build ccache pkg-config \
  libxsimd-dev librange-v3-dev libgtest-dev libgmock-dev libbenchmark-dev \
  libeigen3-dev libdlpack-dev \
  libvulkan-dev spirv-headers spirv-tools mesa-vulkan-drivers vulkan-validationlayers \
  glslang-tools libdnnl-dev libopenblas-dev python3 python3-onnx python3-numpy \
  libonnx-dev libprotobuf-dev libonnx-testdata python3-matplotlib >/dev/null
