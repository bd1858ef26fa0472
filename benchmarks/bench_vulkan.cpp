// kiln on Vulkan beside its anchors, in one process on one driver: the emitted relu(x * y + z),
// softmax along rows and matmul + bias + relu (with f32 weights, and with int8 weights
// dequantized as the tiles are staged) against the same kernels hand-written in GLSL
// (compiled by glslangValidator at build time) run through the same Vulkan calls; a tiny call's
// round trip against raw Vulkan; SPIR-V emission time for a 1-op and a 30-op region; first-call
// latency (emission + pipeline creation).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <type_traits>

#include <kiln/kiln.hpp>
#include <kiln/runtime/vulkan/executor.hpp>

#include "timing.hpp"

using namespace kiln;

namespace {

constexpr auto relu_fma = fn<tensor<f32, dyn>, tensor<f32, dyn>, tensor<f32, dyn>>(
    [](auto x, auto y, auto z) { return relu(x * y + z); });

// A GLSL anchor: its pipeline (from SPIR-V compiled at build time), and one dispatch of it
// through the same calls kiln makes (reset pools, allocate a descriptor set, bind, push,
// dispatch, submit, wait on the timeline).
struct glsl_anchor {
  vulkan::context& ctx;
  std::uint32_t bindings;
  const vulkan::pipeline& pl;

  // workgroup: the shader's own local size (0: the device's, specialization constant 0).
  glsl_anchor(vulkan::context& c, const char* spv, std::uint32_t n_bindings,
              std::uint32_t metadata_words, std::uint32_t workgroup = 0)
      : ctx(c), bindings(n_bindings), pl(make(c, spv, n_bindings, metadata_words, workgroup)) {}

  static const vulkan::pipeline& make(vulkan::context& c, const char* spv, std::uint32_t n_bindings,
                                      std::uint32_t metadata_words, std::uint32_t workgroup) {
    std::ifstream in(spv, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    if (bytes.empty()) throw std::runtime_error(std::string("missing ") + spv);
    spirv::kernel k;
    k.code.resize(bytes.size() / 4);
    std::memcpy(k.code.data(), bytes.data(), bytes.size());
    k.bindings = n_bindings;
    k.metadata = metadata_words;
    return c.pipelines().get(k, workgroup ? workgroup : c.target().workgroup_size());
  }

  // Binds bufs[0 .. bindings), pushes `metadata`, dispatches `workgroups` along x (at most the
  // device's limit; the kernels loop over the rest), and y and z.
  void run(const buffer<float>* bufs, const std::vector<std::uint32_t>& metadata,
           std::uint32_t workgroups, std::uint32_t y = 1, std::uint32_t z = 1) {
    std::lock_guard lock(ctx.mutex());
    VkCommandBuffer cb = ctx.queue().begin(1, bindings);
    VkDescriptorSet set = ctx.queue().descriptor_set(pl.set_layout.get());
    VkDescriptorBufferInfo info[8];
    VkWriteDescriptorSet writes[8];
    for (std::uint32_t b = 0; b < bindings; ++b) {
      auto* m = static_cast<vulkan::device_memory*>(bufs[b].memory());
      info[b] = {m->range().buffer(), m->range().offset, m->range().size};
      writes[b] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[b].dstSet = set;
      writes[b].dstBinding = b;
      writes[b].descriptorCount = 1;
      writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[b].pBufferInfo = &info[b];
    }
    vkUpdateDescriptorSets(ctx.device(), bindings, writes, 0, nullptr);
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl.handle.get());
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl.layout.get(), 0, 1, &set, 0,
                            nullptr);
    vkCmdPushConstants(cb, pl.layout.get(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       static_cast<std::uint32_t>(metadata.size() * 4), metadata.data());
    vkCmdDispatch(cb, std::min(workgroups, ctx.target().max_workgroup_count_x), y, z);
    ctx.queue().wait(ctx.queue().submit());
  }
};

std::vector<float> data(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * float(i));
  return v;
}

void relu_fma_vs_glsl(benchmark::State& state) {
  auto dev = device::vulkan();
  std::size_t n = static_cast<std::size_t>(state.range(0));
  buffer<float> bufs[4] = {dev.upload(data(n, 1)), dev.upload(data(n, 2)),
                           dev.upload(data(n, 0.5f)),
                           dev.alloc<float>(static_cast<std::int64_t>(n))};
  auto run_kiln = [&] { relu_fma.on(dev)(bufs[0], bufs[1], bufs[2], into(bufs[3])); };
  glsl_anchor glsl(*dev.context(), KILN_GLSL_ANCHOR_SPV, 4, 1);
  std::uint32_t groups = static_cast<std::uint32_t>((n + 3) / 4);
  std::uint32_t wg = dev.context()->target().workgroup_size();
  auto run_glsl = [&] { glsl.run(bufs, {groups}, (groups + wg - 1) / wg); };
  run_kiln();
  run_glsl();
  for (auto _ : state) run_kiln();
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n) * 16);
  int calls = n > 100000 ? 10 : 2000;
  double k = seconds_per_call(run_kiln, calls);
  state.counters["kiln_us"] = k * 1e6;
  state.counters["glsl_us"] = seconds_per_call(run_glsl, calls) * 1e6;
  state.counters["x_vs_glsl"] = state.counters["glsl_us"] / state.counters["kiln_us"];
  state.SetLabel(dev.name());
}
BENCHMARK(relu_fma_vs_glsl)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();
// A tiny call: the round trip (record, submit, wait) dominates.
BENCHMARK(relu_fma_vs_glsl)
    ->Name("tiny_call_round_trip_vs_raw_vulkan")
    ->Arg(16)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Softmax along rows: kiln's row group (max, sum, divide: one kernel, a workgroup per four rows,
// each reduction folding along its rows) against one hand-written kernel, a workgroup per row, an
// element per invocation.
constexpr auto softmax_rows = fn<tensor<f32, dyn, dyn>>([](auto x) { return softmax<1>(x); });

void softmax_vs_glsl(benchmark::State& state) {
  auto dev = device::vulkan();
  std::int64_t rows = state.range(0), cols = state.range(1);
  std::size_t n = static_cast<std::size_t>(rows * cols);
  buffer<float> bufs[2] = {dev.upload(data(n, 4)).reshaped({rows, cols}),
                           dev.alloc<float>(rows * cols).reshaped({rows, cols})};
  auto run_kiln = [&] { softmax_rows.on(dev)(bufs[0], into(bufs[1])); };
  glsl_anchor glsl(*dev.context(), KILN_GLSL_SOFTMAX_SPV, 2, 2);
  auto run_glsl = [&] {
    glsl.run(bufs, {static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(cols)},
             static_cast<std::uint32_t>(rows));
  };
  run_kiln();
  run_glsl();
  for (auto _ : state) run_kiln();
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n) * 8);
  double k = seconds_per_call(run_kiln, 3);
  state.counters["kiln_ms"] = k * 1e3;
  state.counters["glsl_ms"] = seconds_per_call(run_glsl, 3) * 1e3;
  state.counters["x_vs_glsl"] = state.counters["glsl_ms"] / state.counters["kiln_ms"];
  state.SetLabel(dev.name());
}
// 4096 x 4096, and rows of 128 as BERT-base's attention at batch 8 (12 heads x 8 x 128 rows).
BENCHMARK(softmax_vs_glsl)
    ->Args({4096, 4096})
    ->Args({12288, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// layer_norm over the rows of 8192 x 768 (BERT-base's hidden size) on device buffers: a row group
// (benchmarks/gpu/compare.py sets PyTorch's time beside it).
constexpr auto layer_norm_rows = fn<tensor<f32, dyn, 768>, tensor<f32, 768>, tensor<f32, 768>>(
    [](auto x, auto scale, auto bias) { return layer_norm<1>(x, scale, bias); });

void layer_norm_8192x768(benchmark::State& state) {
  auto dev = device::vulkan();
  const std::int64_t rows = 8192, cols = 768;
  const auto n = static_cast<std::size_t>(rows * cols);
  buffer<float> x = dev.upload(data(n, 3)).reshaped({rows, cols}),
                scale = dev.upload(data(cols, 1)).reshaped({cols}),
                bias = dev.upload(data(cols, 0.5f)).reshaped({cols}),
                y = dev.alloc<float>(rows * cols).reshaped({rows, cols});
  auto run_kiln = [&] { layer_norm_rows.on(dev)(x, scale, bias, into(y)); };
  run_kiln();
  double k = measure_kiln(state, run_kiln, static_cast<std::int64_t>(n) * 8, 10);
  state.counters["kiln_us"] = k * 1e6;
  state.SetLabel(dev.name());
}
BENCHMARK(layer_norm_8192x768)->Unit(benchmark::kMicrosecond)->UseRealTime();

// A 4096 x 4096 x 4096 product on device buffers, f16 (on the matrix units where the device has
// them) and f32 (the tiled kernel): its TFLOP/s, one synchronous call at a time.
template <class T>
void matmul_4096(benchmark::State& state) {
  constexpr std::int64_t n = 4096;
  static constexpr auto product =
      fn<tensor<T, n, n>, tensor<T, n, n>>([](auto a, auto b) { return matmul(a, b); });
  auto dev = device::vulkan();
  auto values = [&](float scale) {
    std::vector<float> f = data(static_cast<std::size_t>(n * n), scale);
    std::vector<T> v(f.size());
    for (std::size_t i = 0; i < f.size(); ++i) v[i] = T(f[i]);
    return dev.upload(v).reshaped({n, n});
  };
  buffer<T> a = values(1), b = values(0.01f), c = dev.alloc<T>(n * n).reshaped({n, n});
  auto run_kiln = [&] { product.on(dev)(a, b, into(c)); };
  run_kiln();
  double k = measure_kiln(state, run_kiln, 0, 3);
  state.counters["kiln_ms"] = k * 1e3;
  state.counters["TFLOPs"] = 2.0 * n * n * n / k / 1e12;
  state.counters["matrix_units"] =
      dev.context()->target().gemm(std::is_same_v<T, f16>).on_matrix_units();
  state.SetLabel(dev.name());
}
BENCHMARK(matmul_4096<f16>)->Name("matmul_4096_f16")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(matmul_4096<f32>)->Name("matmul_4096_f32")->Unit(benchmark::kMillisecond)->UseRealTime();

// relu(A B + bias), A [n, n], B [n, n], on device buffers: kiln's tiled kernel with its fused
// epilogue against the hand-written tiled GLSL kernel (64 x 64 tiles, 4 x 4 per invocation,
// shared memory), one dispatch each.
constexpr std::int64_t dense_size = 512;
constexpr auto dense_relu = fn<tensor<f32, dense_size, dense_size>,
                               tensor<f32, dense_size, dense_size>, tensor<f32, dense_size>>(
    [](auto a, auto b, auto bias) { return relu(matmul(a, b) + bias); });

void matmul_vs_glsl(benchmark::State& state) {
  auto dev = device::vulkan();
  const std::int64_t n = dense_size;
  const auto nn = static_cast<std::size_t>(n * n);
  buffer<float> bufs[4] = {dev.upload(data(nn, 1)).reshaped({n, n}),
                           dev.upload(data(nn, 0.5f)).reshaped({n, n}),
                           dev.upload(data(static_cast<std::size_t>(n), 0.25f)).reshaped({n}),
                           dev.alloc<float>(n * n).reshaped({n, n})};
  auto run_kiln = [&] { dense_relu.on(dev)(bufs[0], bufs[1], bufs[2], into(bufs[3])); };
  glsl_anchor glsl(*dev.context(), KILN_GLSL_GEMM_SPV, 4, 3, 256);
  const auto tiles = static_cast<std::uint32_t>((n + 63) / 64),
             size = static_cast<std::uint32_t>(n);
  auto run_glsl = [&] { glsl.run(bufs, {size, size, size}, tiles, tiles); };
  run_kiln();
  std::vector<float> kiln_out(nn), glsl_out(nn);
  bufs[3].download(kiln_out);
  run_glsl();
  bufs[3].download(glsl_out);
  double worst = 0;  // the two sum in the same order: they agree but for contraction into FMA
  for (std::size_t i = 0; i < nn; ++i)
    worst = std::max(worst, double(std::fabs(kiln_out[i] - glsl_out[i])));
  for (auto _ : state) run_kiln();
  state.SetItemsProcessed(state.iterations() * 2 * n * n * n);
  double k = seconds_per_call(run_kiln, 3);
  state.counters["kiln_ms"] = k * 1e3;
  state.counters["glsl_ms"] = seconds_per_call(run_glsl, 3) * 1e3;
  state.counters["x_vs_glsl"] = state.counters["glsl_ms"] / state.counters["kiln_ms"];
  state.counters["max_diff"] = worst;
  state.SetLabel(dev.name());
}
BENCHMARK(matmul_vs_glsl)->Unit(benchmark::kMillisecond)->UseRealTime();

// relu(x dequantize(q) + bias) with int8 weights dequantized per column ((q - zp) x scale), x
// [rows, n] with rows one tile row (64: a weight element is computed once) or eight: kiln's tiled
// kernel computing the weight as it stages its blocks where that computes each element once, else
// a kernel storing it first, against the hand-written tiled GLSL kernel on the weight already
// dequantized to f32 (which does less: no dequantization, the weight made beforehand).
constexpr auto dequantized_relu =
    fn<tensor<f32, dyn, dense_size>, tensor<i8, dense_size, dense_size>, tensor<i8, dense_size>,
       tensor<f32, dense_size>, tensor<f32, dense_size>>(
        [](auto x, auto q, auto zp, auto scale, auto bias) {
          return relu(matmul(x, (cast<f32>(q) - cast<f32>(zp)) * scale) + bias);
        });

void dequantized_matmul_vs_glsl(benchmark::State& state) {
  auto dev = device::vulkan();
  const std::int64_t n = dense_size, rows = state.range(0);
  const auto nn = static_cast<std::size_t>(n * n), un = static_cast<std::size_t>(n),
             rn = static_cast<std::size_t>(rows * n);
  std::vector<std::int8_t> q(nn), zp(un);
  for (std::size_t i = 0; i < nn; ++i) q[i] = static_cast<std::int8_t>(i * 37 % 255 - 127);
  for (std::size_t j = 0; j < un; ++j) zp[j] = static_cast<std::int8_t>(j % 7 - 3);
  const std::vector<float> scale = data(un, 0.01f), bias = data(un, 0.25f);
  std::vector<float> w(nn);
  for (std::size_t i = 0; i < nn; ++i) w[i] = (float(q[i]) - float(zp[i % un])) * scale[i % un];
  buffer<float> bufs[4] = {dev.upload(data(rn, 1)).reshaped({rows, n}),
                           dev.upload(w).reshaped({n, n}), dev.upload(bias).reshaped({n}),
                           dev.alloc<float>(rows * n).reshaped({rows, n})};
  buffer<std::int8_t> qb = dev.upload(q).reshaped({n, n}), zb = dev.upload(zp).reshaped({n});
  buffer<float> sb = dev.upload(scale).reshaped({n});
  auto run_kiln = [&] { dequantized_relu.on(dev)(bufs[0], qb, zb, sb, bufs[2], into(bufs[3])); };
  glsl_anchor glsl(*dev.context(), KILN_GLSL_GEMM_SPV, 4, 3, 256);
  const auto tiles = static_cast<std::uint32_t>((n + 63) / 64),
             row_tiles = static_cast<std::uint32_t>((rows + 63) / 64),
             size = static_cast<std::uint32_t>(n);
  auto run_glsl = [&] {
    glsl.run(bufs, {static_cast<std::uint32_t>(rows), size, size}, tiles, row_tiles);
  };
  run_kiln();
  std::vector<float> kiln_out(rn), glsl_out(rn);
  bufs[3].download(kiln_out);
  run_glsl();
  bufs[3].download(glsl_out);
  double worst = 0;
  for (std::size_t i = 0; i < rn; ++i)
    worst = std::max(worst, double(std::fabs(kiln_out[i] - glsl_out[i])));
  for (auto _ : state) run_kiln();
  state.SetItemsProcessed(state.iterations() * 2 * rows * n * n);
  state.counters["kiln_ms"] = seconds_per_call(run_kiln, 3) * 1e3;
  state.counters["glsl_f32_ms"] = seconds_per_call(run_glsl, 3) * 1e3;
  state.counters["x_vs_glsl"] = state.counters["glsl_f32_ms"] / state.counters["kiln_ms"];
  state.counters["max_diff"] = worst;
  state.SetLabel(dev.name());
}
BENCHMARK(dequantized_matmul_vs_glsl)
    ->Arg(64)
    ->Arg(dense_size)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// A plan of n chained ops (tanh(v * 1.5 + 0.25) repeated, plus adds) built at run time.
compiler::plan chain(int ops, float salt) {
  ir::builder b;
  auto v = b.input(dtype::f32, {dyn});
  auto x = v;
  for (int i = 0; i < ops; ++i) {
    switch (i % 3) {
      case 0:
        v = b.binary(ir::op::mul, v, b.constant(scalar::of_float(dtype::f32, 1.5 + salt)));
        break;
      case 1:
        v = b.binary(ir::op::add, v, x);
        break;
      default:
        v = b.unary(ir::op::tanh, v);
        break;
    }
  }
  b.output(v);
  return compiler::compile(b.get());
}

void spirv_emission(benchmark::State& state) {
  auto p = chain(static_cast<int>(state.range(0)), 0);
  spirv::target t;
  std::vector<spirv::operand_kind> kinds{spirv::operand_kind::full};
  std::size_t words = 0;
  for (auto _ : state) {
    auto k = spirv::emit_region(p, p.regions[0], kinds, t);
    words = k.code.size();
    benchmark::DoNotOptimize(k.code.data());
  }
  state.counters["words"] = static_cast<double>(words);
  state.counters["graph_ops"] = static_cast<double>(p.graph.nodes.size());
}
// A chain of `calls` dependent calls on device buffers (each reads the previous one's result):
// submitted with kiln::after and one host wait at the end, against the same calls made
// synchronously (each waits for its own). The counter is the synchronous chain's time over the
// submitted one's: the throughput the asynchronous door buys on this driver.
void chained_calls_submitted_vs_synchronous(benchmark::State& state) {
  const auto n = state.range(0);
  const int calls = static_cast<int>(state.range(1));
  auto d = device::vulkan();
  std::vector<float> x(static_cast<std::size_t>(n), 0.5f), y(x.size(), 0.999f), z(x.size(), 0.001f);
  auto a = d.upload(x), yb = d.upload(y), zb = d.upload(z), b = d.alloc<float>(n);
  auto submitted = [&] {
    fence last = relu_fma.on(d).submit(a, yb, zb, into(b));
    for (int k = 1; k < calls; ++k)
      last = k % 2 ? relu_fma.on(d).submit(after(last), b, yb, zb, into(a))
                   : relu_fma.on(d).submit(after(last), a, yb, zb, into(b));
    last.wait();
  };
  auto synchronous = [&] {
    relu_fma.on(d)(a, yb, zb, into(b));
    for (int k = 1; k < calls; ++k)
      if (k % 2)
        relu_fma.on(d)(b, yb, zb, into(a));
      else
        relu_fma.on(d)(a, yb, zb, into(b));
  };
  double kiln = measure_kiln(state, submitted, 0, 1);
  ratio(state, "sync/submitted", synchronous, 1, kiln);
  state.counters["calls/s"] = calls / kiln;
}
BENCHMARK(chained_calls_submitted_vs_synchronous)
    ->Args({4096, 1000})
    ->Args({1 << 20, 100})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(spirv_emission)->Arg(1)->Arg(30)->Unit(benchmark::kMicrosecond);

// First call of a new kernel: emission plus pipeline creation (a fresh constant each time, so
// neither the in-memory nor the driver's pipeline cache can answer).
void first_call_latency(benchmark::State& state) {
  auto dev = device::vulkan();
  auto& ctx = *dev.context();
  std::vector<spirv::operand_kind> kinds{spirv::operand_kind::full};
  float salt = 0;
  double emit_s = 0;
  for (auto _ : state) {
    auto p = chain(static_cast<int>(state.range(0)), salt += 1e-3f);
    auto t0 = std::chrono::steady_clock::now();
    auto k = spirv::emit_region(p, p.regions[0], kinds, ctx.target());
    emit_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(ctx.pipelines().get(k, ctx.target().workgroup_size()).handle);
  }
  state.counters["emission_us"] = emit_s / static_cast<double>(state.iterations()) * 1e6;
  state.SetLabel(dev.name());
}
BENCHMARK(first_call_latency)
    ->Arg(1)
    ->Arg(30)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(20);

}  // namespace

BENCHMARK_MAIN();
