// Normalization benchmarks: kiln's softmax and layer_norm (one row group each) on the CPU beside
// Eigen written as an Eigen user would (max, subtract, exp, sum, scale; rowwise mean and
// variance) and a hand-fused OpenMP + SIMD loop, in the same process. Ratios are anchor time /
// kiln time (above 1: kiln is faster).
#include <cmath>
#include <vector>

#include <benchmark/benchmark.h>
#include <Eigen/Dense>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>

#include "timing.hpp"

using namespace kiln;

namespace {

constexpr auto softmax_rows = fn<tensor<f32, dyn, dyn>>([](auto x) { return softmax<1>(x); });
constexpr auto layer_norm_rows = fn<tensor<f32, dyn, dyn>, tensor<f32, dyn>, tensor<f32, dyn>>(
    [](auto x, auto s, auto b) { return layer_norm<1>(x, s, b, 1e-5); });

using row_major = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::vector<float> data(std::size_t n, float step = 0.37f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 4 * std::sin(step * float(i));
  return v;
}

// One pass for the max, one for exp and the sum (kept in y), one to scale: a row at a time.
void softmax_omp(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* p = x + r * cols;
    float* q = y + r * cols;
    float m = -INFINITY, s = 0;
#pragma omp simd reduction(max : m)
    for (std::int64_t c = 0; c < cols; ++c) m = std::max(m, p[c]);
#pragma omp simd reduction(+ : s)
    for (std::int64_t c = 0; c < cols; ++c) s += (q[c] = std::exp(p[c] - m));
    float inv = 1 / s;
#pragma omp simd
    for (std::int64_t c = 0; c < cols; ++c) q[c] *= inv;
  }
}

// Small calls (a single token's row) run on the calling thread, as kiln's do: waking a team
// costs more than the row.
void layer_norm_omp(const float* x, const float* scale, const float* bias, float* y,
                    std::int64_t rows, std::int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= 65536)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* p = x + r * cols;
    float* q = y + r * cols;
    float s = 0, v = 0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t c = 0; c < cols; ++c) s += p[c];
    float mean = s / float(cols);
#pragma omp simd reduction(+ : v)
    for (std::int64_t c = 0; c < cols; ++c) v += (p[c] - mean) * (p[c] - mean);
    float inv = 1 / std::sqrt(v / float(cols) + 1e-5f);
#pragma omp simd
    for (std::int64_t c = 0; c < cols; ++c) q[c] = (p[c] - mean) * inv * scale[c] + bias[c];
  }
}

void BM_softmax(benchmark::State& state) {
  std::int64_t rows = state.range(0), cols = state.range(1);
  auto x = data(rows * cols);
  std::vector<float> y(rows * cols);
  auto cpu = device::cpu();
  auto in = view(x.data(), {rows, cols});
  auto out = view(y.data(), {rows, cols});
  auto kiln_call = [&] { softmax_rows.on(cpu)(in, into(out)); };
  int calls = 5;
  measure_kiln(state, kiln_call, rows * cols * 8, calls);
  Eigen::Map<const row_major> m(x.data(), rows, cols);
  Eigen::Map<row_major> o(y.data(), rows, cols);
  ratio(
      state, "x_vs_eigen",
      [&] {
        Eigen::VectorXf mx = m.rowwise().maxCoeff();
        o = (m.colwise() - mx).array().exp().matrix();
        Eigen::VectorXf s = o.rowwise().sum();
        o = s.cwiseInverse().asDiagonal() * o;
      },
      calls, kiln_call);
  ratio(
      state, "x_vs_omp_fused", [&] { softmax_omp(x.data(), y.data(), rows, cols); }, calls,
      kiln_call);
  auto exe = compile(softmax_rows);
  ratio(
      state, "interpreter_vs_compiled", [&] { exe.run({in}, {out}, cpu); }, calls, kiln_call);
}

void BM_layer_norm(benchmark::State& state) {
  std::int64_t rows = state.range(0), cols = state.range(1);
  auto x = data(rows * cols), scale = data(cols, 0.11f), bias = data(cols, 0.05f);
  std::vector<float> y(rows * cols);
  auto cpu = device::cpu();
  auto in = view(x.data(), {rows, cols});
  auto s = view(scale.data(), {cols}), b = view(bias.data(), {cols});
  auto out = view(y.data(), {rows, cols});
  auto kiln_call = [&] { layer_norm_rows.on(cpu)(in, s, b, into(out)); };
  // Blocks of calls long enough for the clock: a one-row call takes microseconds.
  int calls = rows * cols >= (1 << 20) ? 5 : 2000;
  measure_kiln(state, kiln_call, rows * cols * 8, calls);
  Eigen::Map<const row_major> m(x.data(), rows, cols);
  Eigen::Map<row_major> o(y.data(), rows, cols);
  Eigen::Map<const Eigen::RowVectorXf> sc(scale.data(), cols), bi(bias.data(), cols);
  ratio(
      state, "x_vs_eigen",
      [&] {
        Eigen::VectorXf mean = m.rowwise().mean();
        o = m.colwise() - mean;
        Eigen::VectorXf inv =
            ((o.array().square().rowwise().sum() / float(cols)) + 1e-5f).rsqrt().matrix();
        o = (inv.asDiagonal() * o).array().rowwise() * sc.array();
        o.rowwise() += bi;
      },
      calls, kiln_call);
  ratio(
      state, "x_vs_omp_fused",
      [&] { layer_norm_omp(x.data(), scale.data(), bias.data(), y.data(), rows, cols); }, calls,
      kiln_call);
  auto exe = compile(layer_norm_rows);
  ratio(
      state, "interpreter_vs_compiled",
      [&] {
        exe.run({in, s, b}, {out}, cpu);
      },
      calls, kiln_call);
}

}  // namespace

BENCHMARK(BM_softmax)->Args({4096, 4096})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_layer_norm)->Args({8192, 768})->Unit(benchmark::kMillisecond)->UseRealTime();
// One token's row: what a call costs beyond its work.
BENCHMARK(BM_layer_norm)->Args({1, 768})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_MAIN();
