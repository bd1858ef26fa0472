#!/usr/bin/env bash
# A three-file program as a user builds it: each file defines and calls one or two fused
# elementwise functions; kiln through find_package(kiln) from an installed copy (its runtime
# library built when kiln was, not in the program's build), the anchor the same program written
# with Eigen arrays. Both are
# configured Release and built with one job; prints each build's wall time and the ratio.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake -S "$here" -B "$work/package-build" -G Ninja -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF \
  >/dev/null
cmake --build "$work/package-build" >/dev/null  # kiln itself: its prebuilt runtime library
cmake --install "$work/package-build" --prefix "$work/prefix" >/dev/null

mkdir -p "$work/kiln" "$work/eigen"
cat > "$work/kiln/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(program LANGUAGES CXX)
find_package(kiln CONFIG REQUIRED)
add_executable(program a.cpp b.cpp main.cpp)
target_link_libraries(program PRIVATE kiln::kiln)
CM
cat > "$work/kiln/a.cpp" <<'CPP'
#include <vector>
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto gelu = fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto b) {
  auto v = x + b;
  return 0.5f * v * (1.f + tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
});
void run_a(const std::vector<float>& x, const std::vector<float>& b, std::vector<float>& o) {
  gelu(x, b, into(o));
}
CPP
cat > "$work/kiln/b.cpp" <<'CPP'
#include <vector>
#include <kiln/kiln.hpp>
using namespace kiln;
constexpr auto relu_fma = fn<tensor<f32, dyn>, tensor<f32, dyn>, tensor<f32, dyn>>(
    [](auto x, auto y, auto z) { return relu(x * y + z); });
constexpr auto log1p_exp = fn<tensor<f32, dyn>>([](auto x) { return log(1.f + exp(x)); });
void run_b(const std::vector<float>& x, std::vector<float>& o) {
  relu_fma(x, x, x, into(o));
  log1p_exp(o, into(o));
}
CPP
cat > "$work/kiln/main.cpp" <<'CPP'
#include <cstdio>
#include <vector>
#include <kiln/kiln.hpp>
using namespace kiln;
void run_a(const std::vector<float>& x, const std::vector<float>& b, std::vector<float>& o);
void run_b(const std::vector<float>& x, std::vector<float>& o);
constexpr auto scaled_sigmoid = fn<tensor<f32, dyn>, tensor<f32, dyn>>(
    [](auto x, auto s) { return sigmoid(x) * s - 0.5f; });
int main() {
  std::vector<float> x(1000, 0.5f), b(1000, 0.25f), o(1000), p(1000);
  run_a(x, b, o);
  run_b(o, p);
  scaled_sigmoid(p, x, into(o));
  std::printf("%f\n", o[0]);
}
CPP
cat > "$work/eigen/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(program LANGUAGES CXX)
find_package(Eigen3 REQUIRED NO_MODULE)
add_executable(program a.cpp b.cpp main.cpp)
target_link_libraries(program PRIVATE Eigen3::Eigen)
target_compile_features(program PRIVATE cxx_std_20)
CM
cat > "$work/eigen/a.cpp" <<'CPP'
#include <vector>
#include <Eigen/Dense>
using A = Eigen::Map<const Eigen::ArrayXf>;
void run_a(const std::vector<float>& xv, const std::vector<float>& bv, std::vector<float>& o) {
  auto n = static_cast<Eigen::Index>(xv.size());
  Eigen::ArrayXf v = A(xv.data(), n) + A(bv.data(), n);
  Eigen::Map<Eigen::ArrayXf>(o.data(), n) =
      0.5f * v * (1.f + (0.7978845608f * (v + 0.044715f * v * v * v)).tanh());
}
CPP
cat > "$work/eigen/b.cpp" <<'CPP'
#include <vector>
#include <Eigen/Dense>
using A = Eigen::Map<const Eigen::ArrayXf>;
void run_b(const std::vector<float>& xv, std::vector<float>& o) {
  auto n = static_cast<Eigen::Index>(xv.size());
  A x(xv.data(), n);
  Eigen::Map<Eigen::ArrayXf> out(o.data(), n);
  out = (x * x + x).max(0.f);
  out = (1.f + out.exp()).log();
}
CPP
cat > "$work/eigen/main.cpp" <<'CPP'
#include <cstdio>
#include <vector>
#include <Eigen/Dense>
void run_a(const std::vector<float>& x, const std::vector<float>& b, std::vector<float>& o);
void run_b(const std::vector<float>& x, std::vector<float>& o);
int main() {
  std::vector<float> x(1000, 0.5f), b(1000, 0.25f), o(1000), p(1000);
  run_a(x, b, o);
  run_b(o, p);
  auto n = static_cast<Eigen::Index>(p.size());
  Eigen::Map<Eigen::ArrayXf> pa(p.data(), n), xa(x.data(), n), oa(o.data(), n);
  oa = (1.f / (1.f + (-pa).exp())) * xa - 0.5f;
  std::printf("%f\n", o[0]);
}
CPP
build() {  # source dir -> seconds for configure-free build with one job
  cmake -S "$work/$1" -B "$work/$1-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
  local start end
  start=$(date +%s.%N)
  cmake --build "$work/$1-build" -j1 >"$work/$1-build.log" || { cat "$work/$1-build.log" >&2; exit 1; }
  end=$(date +%s.%N)
  "$work/$1-build/program" >/dev/null
  echo "$end - $start" | bc
}
eigen=$(build eigen)
kiln=$(build kiln)
printf 'three-file program, Release, one job: kiln %.1f s, Eigen %.1f s, ratio %.2f\n' \
  "$kiln" "$eigen" "$(echo "$kiln / $eigen" | bc -l)"
