// Elementwise benchmarks: kiln's fused CPU kernels beside Eigen (same expression), a plain unfused
// op-by-op loop (one pass per op, as an eager framework runs it) and a hand-fused OpenMP loop.
// Each kiln benchmark also times its anchors in the same process and reports the ratios
// (anchor time / kiln time: above 1 means kiln is faster).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <Eigen/Dense>

#include <kiln/kiln.hpp>

#include "timing.hpp"

using namespace kiln;

namespace {

constexpr auto relu_fma = fn<tensor<f32, dyn>, tensor<f32, dyn>, tensor<f32, dyn>>(
    [](auto x, auto y, auto z) { return relu(x * y + z); });

constexpr auto gelu_bias = fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto b) {
  auto y = x + b;
  return 0.5f * y * (1.f + tanh(0.7978845608f * (y + 0.044715f * y * y * y)));
});

constexpr auto three_ops =
    fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) { return exp(x) * y + 1.f; });

std::vector<float> data(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * float(i));
  return v;
}

using eigen_vec = Eigen::Map<Eigen::ArrayXf>;

void relu_fma_eigen(float* x, float* y, float* z, float* o, std::size_t n) {
  eigen_vec(o, n) = (eigen_vec(x, n) * eigen_vec(y, n) + eigen_vec(z, n)).max(0.f);
}
void relu_fma_unfused(float* x, float* y, float* z, float* o, float* t, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) t[i] = x[i] * y[i];
  for (std::size_t i = 0; i < n; ++i) t[i] = t[i] + z[i];
  for (std::size_t i = 0; i < n; ++i) o[i] = std::max(t[i], 0.f);
}
void relu_fma_handfused(float* x, float* y, float* z, float* o, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) o[i] = std::max(x[i] * y[i] + z[i], 0.f);
}

void BM_relu_fma(benchmark::State& state) {
  std::size_t n = state.range(0);
  auto x = data(n, 1.f), y = data(n, 2.f), z = data(n, 0.5f);
  std::vector<float> o(n), t(n);
  float *px = x.data(), *py = y.data(), *pz = z.data(), *po = o.data();
  auto fused = [&] { relu_fma.on(kiln::device::cpu())(x, y, z, into(o)); };
  int calls = n > 100000 ? 10 : 20000;
  measure_kiln(state, fused, n * 16, calls);
  ratio(
      state, "x_vs_eigen", [&] { relu_fma_eigen(px, py, pz, po, n); }, calls, fused);
  ratio(
      state, "x_vs_unfused", [&] { relu_fma_unfused(px, py, pz, po, t.data(), n); }, calls, fused);
  ratio(
      state, "x_vs_handfused_omp", [&] { relu_fma_handfused(px, py, pz, po, n); }, calls, fused);
}

float gelu_scalar(float y) {
  return 0.5f * y * (1.f + std::tanh(0.7978845608f * (y + 0.044715f * y * y * y)));
}
void gelu_eigen(float* x, float* b, float* o, std::size_t n) {
  auto y = eigen_vec(x, n) + eigen_vec(b, n);
  eigen_vec(o, n) = 0.5f * y * (1.f + (0.7978845608f * (y + 0.044715f * y * y * y)).tanh());
}
void gelu_unfused(float* x, float* b, float* o, float* y, float* t, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = x[i] + b[i];
  for (std::size_t i = 0; i < n; ++i) t[i] = y[i] * y[i];
  for (std::size_t i = 0; i < n; ++i) t[i] = t[i] * y[i];
  for (std::size_t i = 0; i < n; ++i) t[i] = 0.044715f * t[i];
  for (std::size_t i = 0; i < n; ++i) t[i] = y[i] + t[i];
  for (std::size_t i = 0; i < n; ++i) t[i] = 0.7978845608f * t[i];
  for (std::size_t i = 0; i < n; ++i) t[i] = std::tanh(t[i]);
  for (std::size_t i = 0; i < n; ++i) t[i] = 1.f + t[i];
  for (std::size_t i = 0; i < n; ++i) o[i] = 0.5f * y[i] * t[i];
}
void gelu_handfused(float* x, float* b, float* o, std::size_t n) {
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i) o[i] = gelu_scalar(x[i] + b[i]);
}

void BM_gelu_bias(benchmark::State& state) {
  std::size_t n = state.range(0);
  auto x = data(n, 3.f), b = data(n, 0.5f);
  std::vector<float> o(n), y(n), t(n);
  float *px = x.data(), *pb = b.data(), *po = o.data();
  auto fused = [&] { gelu_bias.on(kiln::device::cpu())(x, b, into(o)); };
  measure_kiln(state, fused, n * 12, 5);
  ratio(
      state, "x_vs_eigen", [&] { gelu_eigen(px, pb, po, n); }, 5, fused);
  ratio(
      state, "x_vs_unfused", [&] { gelu_unfused(px, pb, po, y.data(), t.data(), n); }, 5, fused);
  ratio(
      state, "x_vs_handfused_omp", [&] { gelu_handfused(px, pb, po, n); }, 5, fused);
}

// Call overhead: a 3-op chain on 1024 elements (argument checks, size resolution, one region).
void BM_three_ops_call(benchmark::State& state) {
  std::size_t n = state.range(0);
  auto x = data(n, 1.f), y = data(n, 1.f);
  std::vector<float> o(n);
  auto fused = [&] { three_ops.on(kiln::device::cpu())(x, y, into(o)); };
  auto plain_loop = [&] {
    for (std::size_t i = 0; i < n; ++i) o[i] = std::exp(x[i]) * y[i] + 1.f;
    benchmark::DoNotOptimize(o.data());
  };
  double k = measure_kiln(state, fused, 0, 20000);
  ratio(state, "x_vs_plain_loop", plain_loop, 20000, k);
}

// Busy processes on every hardware thread while a benchmark runs (another job on the machine).
class competing_load {
 public:
  competing_load() {
    unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i < n; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        volatile unsigned long spin = 0;
        for (;;) spin = spin + 1;  // until killed
      }
      children_.push_back(pid);
    }
  }
  ~competing_load() {
    for (pid_t pid : children_) kill(pid, SIGKILL);
    for (pid_t pid : children_) waitpid(pid, nullptr, 0);
  }

 private:
  std::vector<pid_t> children_;
};

// relu(x * y + z) on 2^20 elements while another process keeps every core busy: kiln's pool
// (sleeping workers, the caller takes chunks too) beside the same loop on the calling thread
// alone and beside an OpenMP loop with the default (spinning) wait policy. A ratio near 1 against
// the single thread means the threads cost nothing under load.
void BM_relu_fma_under_load(benchmark::State& state) {
  std::size_t n = state.range(0);
  auto x = data(n, 1.f), y = data(n, 2.f), z = data(n, 0.5f);
  std::vector<float> o(n);
  float *px = x.data(), *py = y.data(), *pz = z.data(), *po = o.data();
  competing_load load;
  auto fused = [&] { relu_fma.on(kiln::device::cpu())(x, y, z, into(o)); };
  double k = measure_kiln(state, fused, n * 16, 50);
  auto one_thread = [&] {
    for (std::size_t i = 0; i < n; ++i) po[i] = std::max(px[i] * py[i] + pz[i], 0.f);
    benchmark::DoNotOptimize(po);
  };
  ratio(state, "x_vs_one_thread", one_thread, 50, k);
  ratio(
      state, "x_vs_handfused_omp", [&] { relu_fma_handfused(px, py, pz, po, n); }, 50, k);
}

// Narrow storage: the same expression on bf16 and f16 data (computed in f32) beside f32 data.
template <class T>
void BM_relu_fma_narrow(benchmark::State& state) {
  std::size_t n = state.range(0);
  constexpr auto f = fn<tensor<T, dyn>, tensor<T, dyn>, tensor<T, dyn>>(
      [](auto x, auto y, auto z) { return relu(x * y + z); });
  auto narrow = [&](float scale) {
    auto v = data(n, scale);
    std::vector<T> r(n);
    for (std::size_t i = 0; i < n; ++i) r[i] = T(v[i]);
    return r;
  };
  auto x = narrow(1.f), y = narrow(2.f), z = narrow(0.5f);
  std::vector<T> o(n);
  auto xf = data(n, 1.f), yf = data(n, 2.f), zf = data(n, 0.5f);
  std::vector<float> of(n);
  auto cpu = kiln::device::cpu();
  double k = measure_kiln(
      state, [&] { f.on(cpu)(x, y, z, into(o)); }, n * 8, 10);
  ratio(
      state, "x_vs_f32", [&] { relu_fma.on(cpu)(xf, yf, zf, into(of)); }, 10, k);
}

}  // namespace

// kiln's own f32 functions (the op list's newer rows) on one thread's worth of data, beside the C
// library's function in a plain loop, single-threaded and under OpenMP (kiln's call uses its
// worker threads).
template <int F>
float libm(float x) {
  if constexpr (F == 0) return std::atan(x);
  if constexpr (F == 1) return std::erfc(x);
  if constexpr (F == 2) return std::expm1(x);
  if constexpr (F == 3) return std::log1p(x);
  if constexpr (F == 4) return std::asinh(x);
  return std::fmod(x, 0.7f);
}
template <int F>
constexpr auto kiln_function = fn<tensor<f32, dyn>>([](auto x) {
  if constexpr (F == 0) return atan(x);
  if constexpr (F == 1) return erfc(x);
  if constexpr (F == 2) return expm1(x);
  if constexpr (F == 3) return log1p(abs(x));
  if constexpr (F == 4) return asinh(x);
  if constexpr (F == 5) return fmod(x, 0.7f);
});
template <int F>
void BM_function(benchmark::State& state) {
  std::size_t n = state.range(0);
  auto x = data(n, 3.f);
  std::vector<float> o(n);
  float *px = x.data(), *po = o.data();
  auto fused = [&] { kiln_function<F>.on(kiln::device::cpu())(x, into(o)); };
  auto arg = [](float v) { return F == 3 ? std::fabs(v) : v; };
  measure_kiln(state, fused, n * 8, 20);
  ratio(
      state, "x_vs_libm_loop",
      [&] {
        for (std::size_t i = 0; i < n; ++i) po[i] = libm<F>(arg(px[i]));
      },
      20, fused);
  ratio(
      state, "x_vs_libm_omp",
      [&] {
#pragma omp parallel for schedule(static)
        for (std::size_t i = 0; i < n; ++i) po[i] = libm<F>(arg(px[i]));
      },
      20, fused);
}
BENCHMARK(BM_function<0>)
    ->Name("BM_atan")
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_function<1>)
    ->Name("BM_erfc")
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_function<2>)
    ->Name("BM_expm1")
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_function<3>)
    ->Name("BM_log1p")
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_function<4>)
    ->Name("BM_asinh")
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_function<5>)
    ->Name("BM_fmod")
    ->Arg(1 << 20)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

BENCHMARK(BM_relu_fma_under_load)->Arg(1 << 20)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_relu_fma_narrow<kiln::bf16>)
    ->Arg(1 << 24)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_relu_fma_narrow<kiln::f16>)
    ->Arg(1 << 24)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_relu_fma)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gelu_bias)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_three_ops_call)->Arg(1024)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_MAIN();
