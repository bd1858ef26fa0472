// The run-time door on the CPU: graphs built with kiln::graph and run by the tiled interpreter,
// beside the same expressions as kiln::fn (compile-time fused kernels), Eigen, and a plain unfused
// op-by-op loop (one pass per op, as an eager framework runs it). Ratios are anchor time / kiln
// interpreter time: above 1 means the interpreter is faster.
#include <algorithm>
#include <cmath>
#include <vector>

#include <benchmark/benchmark.h>
#include <Eigen/Dense>

#include <kiln/executable.hpp>

#include "timing.hpp"

using namespace kiln;

namespace {

std::vector<float> data(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * float(i));
  return v;
}

using eigen_vec = Eigen::Map<Eigen::ArrayXf>;

constexpr auto relu_fma_fn = fn<tensor<f32, dyn>, tensor<f32, dyn>, tensor<f32, dyn>>(
    [](auto x, auto y, auto z) { return relu(x * y + z); });

executable relu_fma_graph() {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn});
  auto y = g.input("y", dtype::f32, {dyn});
  auto z = g.input("z", dtype::f32, {dyn});
  g.output("o", g.relu(g.add(g.mul(x, y), z)));
  return compile(g);
}

constexpr auto gelu_fn = fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto b) {
  auto y = x + b;
  return 0.5f * y * (1.f + tanh(0.7978845608f * (y + 0.044715f * y * y * y)));
});

executable gelu_graph() {
  graph g;
  auto y = g.add(g.input("x", dtype::f32, {dyn}), g.input("b", dtype::f32, {dyn}));
  auto c = [&](double v) { return g.constant(v); };
  auto cube = g.mul(g.mul(y, y), y);
  auto inner = g.mul(c(0.7978845608), g.add(y, g.mul(c(0.044715), cube)));
  g.output("o", g.mul(g.mul(c(0.5), y), g.add(c(1.0), g.tanh(inner))));
  return compile(g);
}

// At 2^24 elements the memory-bound throughput; at 1024 the call overhead (checks, sizes, one
// region).
void BM_graph_relu_fma(benchmark::State& state) {
  std::size_t n = state.range(0);
  auto x = data(n, 1.f), y = data(n, 2.f), z = data(n, 0.5f);
  std::vector<float> o(n), t(n);
  executable exe = relu_fma_graph();
  auto cpu = device::cpu();
  int calls = n > 100000 ? 10 : 20000;
  auto interpreted = [&] { exe.run({x, y, z}, {o}, cpu); };
  auto fused = [&] { relu_fma_fn.on(cpu)(x, y, z, into(o)); };
  auto ev = [&](std::vector<float>& v) { return eigen_vec(v.data(), n); };
  auto eigen = [&] { ev(o) = (ev(x) * ev(y) + ev(z)).max(0.f); };
  measure_kiln(state, interpreted, n * 16, calls);
  ratio(state, "x_vs_fn", fused, calls, interpreted);
  ratio(state, "x_vs_eigen", eigen, calls, interpreted);
  auto unfused = [&] {
    for (std::size_t i = 0; i < n; ++i) t[i] = x[i] * y[i];
    for (std::size_t i = 0; i < n; ++i) t[i] = t[i] + z[i];
    for (std::size_t i = 0; i < n; ++i) o[i] = std::max(t[i], 0.f);
    benchmark::DoNotOptimize(o.data());
  };
  ratio(state, "x_vs_unfused", unfused, calls, interpreted);
}

void BM_graph_gelu_bias(benchmark::State& state) {
  std::size_t n = state.range(0);
  auto x = data(n, 3.f), b = data(n, 0.5f);
  std::vector<float> o(n);
  executable exe = gelu_graph();
  auto cpu = device::cpu();
  auto interpreted = [&] { exe.run({x, b}, {o}, cpu); };
  auto fused = [&] { gelu_fn.on(cpu)(x, b, into(o)); };
  measure_kiln(state, interpreted, n * 12, 5);
  ratio(state, "x_vs_fn", fused, 5, interpreted);
  auto eigen = [&] {
    auto y = eigen_vec(x.data(), n) + eigen_vec(b.data(), n);
    eigen_vec(o.data(), n) =
        0.5f * y * (1.f + (0.7978845608f * (y + 0.044715f * y * y * y)).tanh());
  };
  ratio(state, "x_vs_eigen", eigen, 5, interpreted);
}

// kiln::compile itself: verify, canonicalize, regions, tile programs for the gelu graph.
void BM_graph_compile(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(gelu_graph());
}

// Building and compiling a chain of `n` nodes (add and mul with constants) through kiln::graph:
// linear in n (the builder deduplicates by hash). Anchor: pushing the same number of nodes into a
// std::vector, the least any builder does; per_node_ns is kiln's time per node.
void BM_graph_build_chain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  auto build = [&] {
    graph g;
    auto x = g.input("x", dtype::f32, {4});
    auto v = x;
    for (int i = 0; i < n / 2; ++i) v = g.mul(g.add(v, g.constant(1.0 + i % 7)), g.constant(0.5));
    g.output("y", v);
    return compile(g);
  };
  double k = measure_kiln(
      state, [&] { benchmark::DoNotOptimize(build()); }, 0, 1);
  state.counters["per_node_ns"] = k / n * 1e9;
  ratio(
      state, "x_vs_vector_push",
      [&] {
        std::vector<ir::node> nodes;
        for (int i = 0; i < n; ++i) nodes.push_back(ir::node{});
        benchmark::DoNotOptimize(nodes.data());
      },
      1, k);
}

// 2,000 inputs of run-time size summed: each add broadcasts two symbol sets.
void BM_graph_build_dyn_inputs(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  auto build = [&] {
    graph g;
    auto sum = g.input("x0", dtype::f32, {dyn});
    for (int i = 1; i < n; ++i)
      sum = g.add(sum, g.input("x" + std::to_string(i), dtype::f32, {dyn}));
    g.output("sum", sum);
    return compile(g);
  };
  double k = measure_kiln(
      state, [&] { benchmark::DoNotOptimize(build()); }, 0, 1);
  state.counters["per_input_us"] = k / n * 1e6;
}

// The fixed cost of one CPU region (issue of small dispatches: a MobileNet's 74 regions): a chain
// of n 8x8 products, each its own region (a contraction is a region's root), against one such
// product, both through kiln::graph on the CPU with the pool's default threads. per_region_us is
// (t(n) - t(1)) / (n - 1), interleaved in one run: setup, binding, the arena and the 512
// multiply-adds of one 8x8 product (well under 0.1 us of arithmetic).
executable product_chain(int n) {
  graph g;
  auto v = g.input("x", dtype::f32, {8, 8});
  auto w = g.input("w", dtype::f32, {8, 8});
  for (int i = 0; i < n; ++i) v = g.relu(g.matmul(v, w));
  g.output("y", v);
  return compile(g);
}

void BM_graph_dispatch_chain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  auto x = data(64, 1.f), w = data(64, 0.125f);
  std::vector<float> y(64);
  executable chain = product_chain(n), one = product_chain(1);
  auto cpu = device::cpu();
  auto chained = [&] { chain.run({x, w}, {y}, cpu); };
  auto single = [&] { one.run({x, w}, {y}, cpu); };
  measure_kiln(state, chained, 0, 2000);
  state.counters["regions"] = chain.dispatch_count();
  double best_chain = 1e30, best_one = 1e30;
  for (int round = 0; round < 7; ++round) {
    best_one = std::min(best_one, block_seconds(single, 2000));
    best_chain = std::min(best_chain, block_seconds(chained, 2000));
  }
  state.counters["one_region_us"] = best_one * 1e6;
  state.counters["per_region_us"] = (best_chain - best_one) / (n - 1) * 1e6;
}

}  // namespace

BENCHMARK(BM_graph_dispatch_chain)->Arg(16)->Arg(74)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_graph_build_chain)
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK(BM_graph_build_dyn_inputs)->Arg(2000)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_graph_relu_fma)->Arg(1 << 24)->Arg(1024)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_graph_gelu_bias)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_graph_compile)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
