// Index-map benchmarks: kiln reading a view in place (transpose(x) + y; a reversed, strided slice
// times a scale; an embedding lookup through gather; a concat of three pieces) on the CPU beside
// Eigen and plain OpenMP loops, in the same process; strided arguments and results read and
// written in place beside copying them row-major around the call. Ratios are anchor time / kiln
// time (above 1: kiln is faster).
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include <benchmark/benchmark.h>
#include <Eigen/Dense>

#include <kiln/kiln.hpp>

#include "timing.hpp"

using namespace kiln;

namespace {

constexpr std::int64_t n = 4096;
constexpr auto transpose_add =
    fn<tensor<f32, n, n>, tensor<f32, n, n>>([](auto x, auto y) { return transpose<1, 0>(x) + y; });
static_assert(transpose_add.plan.dispatch_count() == 1);
static_assert(transpose_add.plan.transient_bytes() == 0);
// Every other column, right to left, scaled: a slice with step -2.
constexpr auto strided_scale =
    fn<tensor<f32, n, n>>([](auto x) { return slice<1, -1, -n - 1, -2>(x) * 0.5f; });

// An embedding lookup with its bias and activation: 4096 rows of a [32000, 512] table.
constexpr std::int64_t vocab = 32000, width = 512, tokens = 4096;
constexpr auto embed = fn<tensor<f32, vocab, width>, tensor<i64, tokens>, tensor<f32, width>>(
    [](auto table, auto ids, auto b) { return relu(gather<0>(table, ids) + b); });
static_assert(embed.plan.dispatch_count() == 1 && embed.plan.transient_bytes() == 0);
// Three [2048, 1024] pieces side by side, scaled: each read in place by the one dispatch.
constexpr std::int64_t rows = 2048, cols = 1024;
constexpr auto concat3 =
    fn<tensor<f32, rows, cols>, tensor<f32, rows, cols>, tensor<f32, rows, cols>>(
        [](auto a, auto b, auto c) { return concat<1>(a, b, c) * 2.0f; });
static_assert(concat3.plan.dispatch_count() == 1 && concat3.plan.transient_bytes() == 0);

using row_major = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::vector<float> data(std::size_t count, float step) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = std::sin(step * float(i));
  return v;
}

// out = x^T + y in 64 x 64 tiles, so a tile of x's columns stays in cache while it is read.
void transpose_add_blocked(const float* x, const float* y, float* out) {
  constexpr std::int64_t tile = 64;
#pragma omp parallel for schedule(static)
  for (std::int64_t bi = 0; bi < n; bi += tile)
    for (std::int64_t bj = 0; bj < n; bj += tile)
      for (std::int64_t i = bi; i < bi + tile; ++i)
#pragma omp simd
        for (std::int64_t j = bj; j < bj + tile; ++j) out[i * n + j] = x[j * n + i] + y[i * n + j];
}

void BM_transpose_add(benchmark::State& state) {
  auto x = data(n * n, 0.37f), y = data(n * n, 0.11f);
  std::vector<float> out(n * n);
  auto cpu = device::cpu();
  auto xv = view(x.data(), {n, n}), yv = view(y.data(), {n, n});
  auto ov = view(out.data(), {n, n});
  auto kiln_call = [&] { transpose_add.on(cpu)(xv, yv, into(ov)); };
  int calls = 5;
  measure_kiln(state, kiln_call, n * n * 12, calls);
  Eigen::Map<const row_major> mx(x.data(), n, n), my(y.data(), n, n);
  Eigen::Map<row_major> mo(out.data(), n, n);
  ratio(
      state, "x_vs_eigen", [&] { mo.noalias() = mx.transpose() + my; }, calls, kiln_call);
  ratio(
      state, "x_vs_omp_blocked", [&] { transpose_add_blocked(x.data(), y.data(), out.data()); },
      calls, kiln_call);
}

void BM_strided_slice(benchmark::State& state) {
  auto x = data(n * n, 0.37f);
  std::vector<float> out(n * n / 2);
  auto cpu = device::cpu();
  auto xv = view(x.data(), {n, n});
  auto ov = view(out.data(), {n, n / 2});
  auto kiln_call = [&] { strided_scale.on(cpu)(xv, into(ov)); };
  int calls = 5;
  measure_kiln(state, kiln_call, n * n * 4, calls);
  ratio(
      state, "x_vs_omp_loop",
      [&] {
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n / 2; ++j)
            out[i * (n / 2) + j] = 0.5f * x[i * n + (n - 1 - 2 * j)];
      },
      calls, kiln_call);
}

void BM_embedding_gather(benchmark::State& state) {
  auto table = data(vocab * width, 0.37f), b = data(width, 0.11f);
  std::vector<std::int64_t> ids(tokens);
  for (std::int64_t t = 0; t < tokens; ++t) ids[t] = (t * 7919) % vocab;
  std::vector<float> out(tokens * width);
  auto cpu = device::cpu();
  auto tv = view(table.data(), {vocab, width}), bv = view(b.data(), {width});
  auto iv = view(ids.data(), {tokens});
  auto ov = view(out.data(), {tokens, width});
  auto kiln_call = [&] { embed.on(cpu)(tv, iv, bv, into(ov)); };
  int calls = 10;
  measure_kiln(state, kiln_call, tokens * width * 8, calls);
  ratio(
      state, "x_vs_omp_loop",
      [&] {
#pragma omp parallel for schedule(static)
        for (std::int64_t t = 0; t < tokens; ++t) {
          const float* row = table.data() + ids[t] * width;
#pragma omp simd
          for (std::int64_t j = 0; j < width; ++j)
            out[t * width + j] = std::max(row[j] + b[j], 0.0f);
        }
      },
      calls, kiln_call);
}

void BM_concat(benchmark::State& state) {
  auto a = data(rows * cols, 0.37f), b = data(rows * cols, 0.11f), c = data(rows * cols, 0.7f);
  std::vector<float> out(rows * cols * 3);
  auto cpu = device::cpu();
  auto av = view(a.data(), {rows, cols}), bv = view(b.data(), {rows, cols});
  auto cv = view(c.data(), {rows, cols});
  auto ov = view(out.data(), {rows, 3 * cols});
  auto kiln_call = [&] { concat3.on(cpu)(av, bv, cv, into(ov)); };
  int calls = 5;
  measure_kiln(state, kiln_call, rows * cols * 3 * 8, calls);
  Eigen::Map<const row_major> ma(a.data(), rows, cols), mb(b.data(), rows, cols),
      mc(c.data(), rows, cols);
  Eigen::Map<row_major> mo(out.data(), rows, 3 * cols);
  ratio(
      state, "x_vs_eigen",
      [&] {
        mo.leftCols(cols) = ma * 2.0f;
        mo.middleCols(cols, cols) = mb * 2.0f;
        mo.rightCols(cols) = mc * 2.0f;
      },
      calls, kiln_call);
  ratio(
      state, "x_vs_omp_loop",
      [&] {
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < rows; ++i)
          for (int p = 0; p < 3; ++p) {
            const float* from = (p == 0 ? a : p == 1 ? b : c).data() + i * cols;
            float* to = out.data() + i * 3 * cols + p * cols;
#pragma omp simd
            for (std::int64_t j = 0; j < cols; ++j) to[j] = from[j] * 2.0f;
          }
      },
      calls, kiln_call);
}

// A strided argument read in place beside copying it row-major first (what a caller does for a
// library that takes contiguous data only): one channel of an NHWC image, and a column-major
// matrix; and a strided result written in place beside a call and a scatter after it.
constexpr std::int64_t side = 2048, channels = 3;
constexpr auto scale_shift = fn<tensor<f32, dyn, dyn>, tensor<f32, dyn, dyn>>(
    [](auto x, auto y) { return relu(x * 2.0f + y); });

void run_strided(benchmark::State& state, const stride_list& steps, std::int64_t base_count,
                 bool strided_result) {
  auto base = data(static_cast<std::size_t>(base_count), 0.37f), y = data(side * side, 0.11f);
  std::vector<float> packed(side * side), out(static_cast<std::size_t>(base_count));
  auto cpu = device::cpu();
  const stride_list row_major = row_major_strides(shape{side, side});
  // Copies element (i, j) between a strided and a row-major layout, on every core.
  auto copy = [&](const float* from, const stride_list& f, float* to, const stride_list& t) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < side; ++i)
      for (std::int64_t j = 0; j < side; ++j) to[i * t[0] + j * t[1]] = from[i * f[0] + j * f[1]];
  };
  auto yv = view(y.data(), {side, side});
  std::function<void()> kiln_call, anchor;
  if (strided_result) {
    auto xv = view(base.data(), {side, side}, {side, 1});
    auto ov = view(out.data(), {side, side}, {steps[0], steps[1]});
    kiln_call = [=] { scale_shift.on(cpu)(xv, yv, into(ov)); };
    anchor = [&, xv, yv] {
      scale_shift.on(cpu)(xv, yv, into(view(packed.data(), {side, side})));
      copy(packed.data(), row_major, out.data(), steps);
    };
  } else {
    auto xv = view(base.data(), {side, side}, {steps[0], steps[1]});
    auto ov = view(out.data(), {side, side});
    kiln_call = [=] { scale_shift.on(cpu)(xv, yv, into(ov)); };
    anchor = [&, yv, ov] {
      copy(base.data(), steps, packed.data(), row_major);
      scale_shift.on(cpu)(view(packed.data(), {side, side}), yv, into(ov));
    };
  }
  int calls = 5;
  measure_kiln(state, kiln_call, side * side * 12, calls);
  ratio(state, "x_vs_copy_then_call", anchor, calls, kiln_call);
}

void BM_strided_channel_argument(benchmark::State& state) {
  run_strided(state, {side * channels, channels}, side * side * channels, false);
}
void BM_column_major_argument(benchmark::State& state) {
  run_strided(state, {1, side}, side * side, false);
}
void BM_strided_channel_result(benchmark::State& state) {
  run_strided(state, {side * channels, channels}, side * side * channels, true);
}

}  // namespace

BENCHMARK(BM_strided_channel_argument)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_column_major_argument)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_strided_channel_result)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_transpose_add)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_strided_slice)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_embedding_gather)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_concat)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
