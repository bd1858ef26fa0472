#!/usr/bin/env bash
# Installs everything kiln builds, tests and benchmarks with, from Debian 12 packages (as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  g++ cmake ninja-build ccache pkg-config \
  libxsimd-dev librange-v3-dev libgtest-dev libgmock-dev libbenchmark-dev \
  libeigen3-dev \
  libvulkan-dev spirv-headers spirv-tools mesa-vulkan-drivers vulkan-validationlayers \
  glslang-tools libdnnl-dev libopenblas-dev >/dev/null
