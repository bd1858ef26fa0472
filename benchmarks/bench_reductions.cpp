// Reduction benchmarks: kiln's reductions on the CPU (compile-time kernels and the run-time
// door's interpreter) beside Eigen written as an Eigen user would and a hand-written OpenMP + SIMD
// loop, in the same process. Ratios are anchor time / kiln time (above 1: kiln is faster).
#include <cmath>
#include <vector>

#include <benchmark/benchmark.h>
#include <omp.h>
#include <Eigen/Dense>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>

#include "timing.hpp"

using namespace kiln;

namespace {

constexpr auto row_sum = fn<tensor<f32, dyn, dyn>>([](auto x) { return reduce_sum<1>(x); });
constexpr auto column_sum = fn<tensor<f32, dyn, dyn>>([](auto x) { return reduce_sum<0>(x); });
constexpr auto total_sum = fn<tensor<f32, dyn>>([](auto x) { return reduce_sum<>(x); });
// A producer fused into the reduction's loads: sum(exp(x) * y) along rows.
constexpr auto fused_row = fn<tensor<f32, dyn, dyn>, tensor<f32, dyn>>(
    [](auto x, auto y) { return reduce_sum<1>(exp(x) * y); });

using row_major = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::vector<float> data(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * float(i));
  return v;
}

void row_sum_omp(const float* x, float* out, std::int64_t rows, std::int64_t cols) {
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    float s = 0;
    const float* p = x + r * cols;
#pragma omp simd reduction(+ : s)
    for (std::int64_t c = 0; c < cols; ++c) s += p[c];
    out[r] = s;
  }
}

// Each thread sums a band of rows into its own column sums (in L1 for 4096 columns), reading
// memory in order; the bands' sums are then added.
void column_sum_omp(const float* x, float* out, std::int64_t rows, std::int64_t cols) {
  std::vector<float> bands(static_cast<std::size_t>(omp_get_max_threads() * cols));
  int used = 1;
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    float* acc = bands.data() + t * cols;
    for (std::int64_t c = 0; c < cols; ++c) acc[c] = 0;
    for (std::int64_t r = rows * t / n; r < rows * (t + 1) / n; ++r)
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) acc[c] += x[r * cols + c];
    if (t == 0) used = n;
  }
  for (std::int64_t c = 0; c < cols; ++c) {
    float s = 0;
    for (int t = 0; t < used; ++t) s += bands[t * cols + c];
    out[c] = s;
  }
}

void BM_row_sum(benchmark::State& state) {
  std::int64_t rows = state.range(0), cols = state.range(1);
  auto x = data(rows * cols);
  std::vector<float> out(rows);
  auto cpu = device::cpu();
  auto in = view(x.data(), {rows, cols});
  auto kiln_call = [&] { row_sum.on(cpu)(in, into(out)); };
  int calls = 10;
  measure_kiln(state, kiln_call, rows * cols * 4, calls);
  Eigen::Map<const row_major> m(x.data(), rows, cols);
  Eigen::Map<Eigen::VectorXf> o(out.data(), rows);
  ratio(
      state, "x_vs_eigen", [&] { o = m.rowwise().sum(); }, calls, kiln_call);
  ratio(
      state, "x_vs_omp_simd", [&] { row_sum_omp(x.data(), out.data(), rows, cols); }, calls,
      kiln_call);
  auto exe = compile(row_sum);
  ratio(
      state, "interpreter_vs_compiled", [&] { exe.run({in}, {out}, cpu); }, calls, kiln_call);
}

void BM_column_sum(benchmark::State& state) {
  std::int64_t n = state.range(0);
  auto x = data(n * n);
  std::vector<float> out(n);
  auto cpu = device::cpu();
  auto in = view(x.data(), {n, n});
  auto kiln_call = [&] { column_sum.on(cpu)(in, into(out)); };
  int calls = 10;
  measure_kiln(state, kiln_call, n * n * 4, calls);
  Eigen::Map<const row_major> m(x.data(), n, n);
  Eigen::Map<Eigen::RowVectorXf> o(out.data(), n);
  ratio(
      state, "x_vs_eigen", [&] { o = m.colwise().sum(); }, calls, kiln_call);
  ratio(
      state, "x_vs_omp_simd", [&] { column_sum_omp(x.data(), out.data(), n, n); }, calls,
      kiln_call);
}

void BM_total_sum(benchmark::State& state) {
  std::int64_t n = state.range(0);
  auto x = data(n);
  std::vector<float> out(1);
  auto cpu = device::cpu();
  auto kiln_call = [&] { total_sum.on(cpu)(x, into(out)); };
  int calls = 10;
  measure_kiln(state, kiln_call, n * 4, calls);
  Eigen::Map<const Eigen::VectorXf> v(x.data(), n);
  ratio(
      state, "x_vs_eigen", [&] { out[0] = v.sum(); }, calls, kiln_call);
  ratio(
      state, "x_vs_omp_simd",
      [&] {
        float s = 0;
        const float* p = x.data();
#pragma omp parallel for simd reduction(+ : s)
        for (std::int64_t i = 0; i < n; ++i) s += p[i];
        out[0] = s;
      },
      calls, kiln_call);
}

void BM_fused_row_sum(benchmark::State& state) {
  std::int64_t n = state.range(0);
  auto x = data(n * n), y = data(n);
  std::vector<float> out(n);
  auto cpu = device::cpu();
  auto in = view(x.data(), {n, n});
  auto kiln_call = [&] { fused_row.on(cpu)(in, y, into(out)); };
  int calls = 10;
  measure_kiln(state, kiln_call, n * n * 4, calls);
  Eigen::Map<const row_major> m(x.data(), n, n);
  Eigen::Map<const Eigen::RowVectorXf> b(y.data(), n);
  Eigen::Map<Eigen::VectorXf> o(out.data(), n);
  ratio(
      state, "x_vs_eigen",
      [&] { o = (m.array().exp().rowwise() * b.array()).rowwise().sum().matrix(); }, calls,
      kiln_call);
}

}  // namespace

// Square rows, and short rows (a transformer's hidden size), where a row's own cost shows.
BENCHMARK(BM_row_sum)
    ->Args({4096, 4096})
    ->Args({8192, 768})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_column_sum)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_total_sum)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_fused_row_sum)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
