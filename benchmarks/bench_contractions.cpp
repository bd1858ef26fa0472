// Contraction benchmarks: kiln's matmul with its fused epilogue (one dispatch) on the CPU beside
// oneDNN's matmul with the same post-ops, Eigen and OpenBLAS (sgemm, then the epilogue in an
// OpenMP loop), all in this process on all cores; a transformer MLP block and a dense layer with
// int8 weights dequantized beside Eigen.
// Ratios are anchor time / kiln time (above 1: kiln is faster).
#include <cblas.h>

#include <cmath>
#include <vector>

#include <benchmark/benchmark.h>
#include <Eigen/Dense>
#include <dnnl.hpp>
#include <unsupported/Eigen/SpecialFunctions>

#include <kiln/kiln.hpp>

#include "timing.hpp"

using namespace kiln;

namespace {

template <std::int64_t N>
constexpr auto dense = fn<tensor<f32, N, N>, tensor<f32, N, N>, tensor<f32, N>>([](auto x, auto w,
                                                                                   auto b) {
  return relu(matmul(x, w) + b);
});

constexpr std::int64_t tokens = 128, width = 768, hidden = 3072;
// gelu(z) = z/2 (1 + erf(z / sqrt 2)), written out as a user would.
constexpr auto mlp = fn<tensor<f32, tokens, width>, tensor<f32, width, hidden>, tensor<f32, hidden>,
                        tensor<f32, hidden, width>, tensor<f32, width>>(
    [](auto x, auto w1, auto b1, auto w2, auto b2) {
      auto z = matmul(x, w1) + b1;
      auto h = 0.5f * z * (1.0f + erf(z * 0.70710678f));
      return matmul(h, w2) + b2;
    });
static_assert(mlp.plan.dispatch_count() == 2 && mlp.plan.transient_bytes() == tokens * hidden * 4);

// A dense layer with int8 weights, dequantized per output column (ONNX DequantizeLinear: (q -
// zero point) x scale): on the CPU the weight is computed as the GEMM packs it.
constexpr auto dequantized_dense =
    fn<tensor<f32, tokens, width>, tensor<i8, width, hidden>, tensor<i8, hidden>,
       tensor<f32, hidden>, tensor<f32, hidden>>([](auto x, auto q, auto zp, auto scale, auto b) {
      return matmul(x, (cast<f32>(q) - cast<f32>(zp)) * scale) + b;
    });

using row_major = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::vector<float> data(std::size_t n, float step = 0.37f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(step * float(i));
  return v;
}

// oneDNN's matmul of row-major [m, k] x [k, n] + bias [n], then relu (its post-op), as one
// primitive made once.
struct onednn_dense {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::matmul prim;
  dnnl::memory a, b, bias, c;
  onednn_dense(float* x, float* w, float* bv, float* y, std::int64_t m, std::int64_t k,
               std::int64_t n) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::memory::desc a_md({m, k}, dt::f32, tag::ab), b_md({k, n}, dt::f32, tag::ab),
        bias_md({1, n}, dt::f32, tag::ab), c_md({m, n}, dt::f32, tag::ab);
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, bias_md, c_md), attr, engine);
    prim = dnnl::matmul(pd);
    a = dnnl::memory(a_md, engine, x);
    b = dnnl::memory(b_md, engine, w);
    bias = dnnl::memory(bias_md, engine, bv);
    c = dnnl::memory(c_md, engine, y);
  }
  void operator()() {
    prim.execute(
        stream,
        {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, c}});
    stream.wait();
  }
};

template <std::int64_t N>
void BM_sgemm_bias_relu(benchmark::State& state) {
  auto x = data(N * N), w = data(N * N, 0.11f), b = data(N, 0.05f);
  std::vector<float> y(N * N);
  auto cpu = device::cpu();
  auto kiln_call = [&] { dense<N>.on(cpu)(x, w, b, into(y)); };
  const int calls = N >= 2048 ? 3 : N >= 1024 ? 10 : 100;
  double seconds = measure_kiln(state, kiln_call, 0, calls);
  state.counters["GFLOPS"] = 2.0 * N * N * N / seconds * 1e-9;
  onednn_dense onednn(x.data(), w.data(), b.data(), y.data(), N, N, N);
  ratio(state, "x_vs_onednn", onednn, calls, kiln_call);
  Eigen::Map<const row_major> xm(x.data(), N, N), wm(w.data(), N, N);
  Eigen::Map<const Eigen::RowVectorXf> bm(b.data(), N);
  Eigen::Map<row_major> ym(y.data(), N, N);
  ratio(
      state, "x_vs_eigen",
      [&] {
        ym.noalias() = xm * wm;
        ym = (ym.rowwise() + bm).cwiseMax(0.0f);
      },
      calls, kiln_call);
  ratio(
      state, "x_vs_openblas",
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, x.data(), N, w.data(),
                    N, 0.0f, y.data(), N);
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < N; ++i)
          for (std::int64_t j = 0; j < N; ++j) y[i * N + j] = std::max(y[i * N + j] + b[j], 0.0f);
      },
      calls, kiln_call);
}

void BM_mlp_block(benchmark::State& state) {
  auto x = data(tokens * width), w1 = data(width * hidden, 0.013f), b1 = data(hidden, 0.05f),
       w2 = data(hidden * width, 0.017f), b2 = data(width, 0.07f);
  std::vector<float> y(tokens * width);
  auto cpu = device::cpu();
  auto kiln_call = [&] { mlp.on(cpu)(x, w1, b1, w2, b2, into(y)); };
  const int calls = 20;
  double seconds = measure_kiln(state, kiln_call, 0, calls);
  state.counters["GFLOPS"] = 4.0 * tokens * width * hidden / seconds * 1e-9;
  Eigen::Map<const row_major> xm(x.data(), tokens, width), w1m(w1.data(), width, hidden),
      w2m(w2.data(), hidden, width);
  Eigen::Map<const Eigen::RowVectorXf> b1m(b1.data(), hidden), b2m(b2.data(), width);
  Eigen::Map<row_major> ym(y.data(), tokens, width);
  row_major h(tokens, hidden);
  ratio(
      state, "x_vs_eigen",
      [&] {
        h.noalias() = xm * w1m;
        h.rowwise() += b1m;
        h = (0.5f * h.array() * (1.0f + (h.array() * 0.70710678f).erf())).matrix();
        ym.noalias() = h * w2m;
        ym.rowwise() += b2m;
      },
      calls, kiln_call);
}

// The dequantized dense layer beside Eigen written as its users would: the weight dequantized into
// a float matrix, then the product and the bias.
void BM_dequantized_dense(benchmark::State& state) {
  auto x = data(tokens * width), scale = data(hidden, 0.003f), b = data(hidden, 0.05f);
  std::vector<std::int8_t> q(width * hidden), zp(hidden);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<std::int8_t>(i * 7 % 255 - 127);
  for (std::size_t j = 0; j < zp.size(); ++j) zp[j] = static_cast<std::int8_t>(j % 9 - 4);
  for (float& s : scale) s = 0.01f + 0.005f * s;
  std::vector<float> y(tokens * hidden);
  auto cpu = device::cpu();
  auto kiln_call = [&] { dequantized_dense.on(cpu)(x, q, zp, scale, b, into(y)); };
  const int calls = 20;
  double seconds = measure_kiln(state, kiln_call, 0, calls);
  state.counters["GFLOPS"] = 2.0 * tokens * width * hidden / seconds * 1e-9;
  Eigen::Map<const row_major> xm(x.data(), tokens, width);
  Eigen::Map<const Eigen::Matrix<std::int8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> qm(
      q.data(), width, hidden);
  Eigen::Map<const Eigen::Matrix<std::int8_t, 1, Eigen::Dynamic>> zm(zp.data(), hidden);
  Eigen::Map<const Eigen::RowVectorXf> sm(scale.data(), hidden), bm(b.data(), hidden);
  Eigen::Map<row_major> ym(y.data(), tokens, hidden);
  row_major w(width, hidden);
  ratio(
      state, "x_vs_eigen",
      [&] {
        w = ((qm.cast<float>().rowwise() - zm.cast<float>()).array().rowwise() * sm.array())
                .matrix();
        ym.noalias() = xm * w;
        ym.rowwise() += bm;
      },
      calls, kiln_call);
}

}  // namespace

BENCHMARK(BM_sgemm_bias_relu<256>)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_sgemm_bias_relu<1024>)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_sgemm_bias_relu<2048>)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_mlp_block)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_dequantized_dense)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
