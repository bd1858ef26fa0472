// Convolution benchmarks: kiln's conv2d with its fused bias and relu (one dispatch, NCHW in and
// out) on the CPU beside oneDNN's convolution with the same post-ops, given the same NCHW memory,
// and beside oneDNN in its own blocked layout (its best case: the input reordered beforehand,
// untimed). 3x3, 64 -> 64 channels, 56 x 56, pad 1, batch 1 and 8; a network's stem, 3x3 at
// stride 2 from 3 channels of 224 x 224 to 16 (both kiln's direct kernel for several input
// channels); and a depthwise 3x3 over 64 channels of 112 x 112 (kiln's depthwise kernel), at
// stride 1 and at stride 2 (MobileNet's downsampling). Ratios are anchor time / kiln time (above
// 1: kiln is faster).
#include <cmath>
#include <vector>

#include <benchmark/benchmark.h>
#include <dnnl.hpp>

#include <kiln/kiln.hpp>

#include "timing.hpp"

using namespace kiln;

namespace {

constexpr std::int64_t channels = 64, size = 56;
constexpr conv_params same{.pads = {1, 1, 1, 1}};

template <std::int64_t N>
constexpr auto block =
    fn<tensor<f32, N, channels, size, size>, tensor<f32, channels, channels, 3, 3>,
       tensor<f32, channels>>([](auto x, auto w, auto b) { return relu(conv2d<same>(x, w, b)); });
static_assert(block<1>.plan.dispatch_count() == 1 && block<1>.plan.transient_bytes() == 0);

constexpr std::int64_t image = 224, stem_channels = 16;
constexpr conv_params halving{.strides = {2, 2}, .pads = {1, 1, 1, 1}};
constexpr auto stem = fn<tensor<f32, 1, 3, image, image>, tensor<f32, stem_channels, 3, 3, 3>,
                         tensor<f32, stem_channels>>(
    [](auto x, auto w, auto b) { return relu(conv2d<halving>(x, w, b)); });

constexpr std::int64_t wide = 112;
constexpr conv_params depthwise_same{.pads = {1, 1, 1, 1}, .groups = channels};
constexpr auto depthwise =
    fn<tensor<f32, 1, channels, wide, wide>, tensor<f32, channels, 1, 3, 3>, tensor<f32, channels>>(
        [](auto x, auto w, auto b) { return relu(conv2d<depthwise_same>(x, w, b)); });
constexpr conv_params depthwise_halving{
    .strides = {2, 2}, .pads = {1, 1, 1, 1}, .groups = channels};
constexpr auto depthwise_stride2 =
    fn<tensor<f32, 1, channels, wide, wide>, tensor<f32, channels, 1, 3, 3>, tensor<f32, channels>>(
        [](auto x, auto w, auto b) { return relu(conv2d<depthwise_halving>(x, w, b)); });

std::vector<float> data(std::size_t n, float step = 0.37f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(step * float(i));
  return v;
}

// oneDNN's forward convolution with bias and relu (a post-op), made once; `blocked`: source,
// weights and destination in the layouts oneDNN picks (the data reordered into them first).
struct onednn_conv {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::convolution_forward prim;
  dnnl::memory src, weights, bias, dst;
  // n images of `in` channels x side x side to `out` channels, 3x3 kernel, pad 1, in `groups`
  // groups, at `stride`.
  onednn_conv(float* x, float* w, float* b, float* y, std::int64_t n, bool blocked,
              std::int64_t side = size, std::int64_t groups = 1, std::int64_t stride = 1,
              std::int64_t in = channels, std::int64_t out = channels) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const std::int64_t out_side = (side - 1) / stride + 1;
    const dnnl::memory::dims src_dims{n, in, side, side}, bias_dims{out},
        dst_dims{n, out, out_side, out_side};
    const dnnl::memory::dims weight_dims =
        groups == 1 ? dnnl::memory::dims{out, in, 3, 3}
                    : dnnl::memory::dims{groups, out / groups, in / groups, 3, 3};
    const tag weight_tag = groups == 1 ? tag::oihw : tag::goihw;
    auto layout = [&](tag t) { return blocked ? tag::any : t; };
    dnnl::memory::desc src_md(src_dims, dt::f32, layout(tag::nchw)),
        w_md(weight_dims, dt::f32, layout(weight_tag)), b_md(bias_dims, dt::f32, tag::x),
        dst_md(dst_dims, dt::f32, layout(tag::nchw));
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, src_md, w_md, b_md,
                                        dst_md, {stride, stride}, {1, 1}, {1, 1}),
        attr, engine);
    prim = dnnl::convolution_forward(pd);
    dnnl::memory user_src({src_dims, dt::f32, tag::nchw}, engine, x),
        user_w({weight_dims, dt::f32, weight_tag}, engine, w),
        user_dst({dst_dims, dt::f32, tag::nchw}, engine, y);
    auto reordered = [&](dnnl::memory user, const dnnl::memory::desc& want) {
      if (want == user.get_desc()) return user;
      dnnl::memory m(want, engine);
      dnnl::reorder(user, m).execute(stream, user, m);
      stream.wait();
      return m;
    };
    src = reordered(user_src, pd.src_desc());
    weights = reordered(user_w, pd.weights_desc());
    bias = dnnl::memory({bias_dims, dt::f32, tag::x}, engine, b);
    dst = pd.dst_desc() == user_dst.get_desc() ? user_dst : dnnl::memory(pd.dst_desc(), engine);
  }
  void operator()() {
    prim.execute(stream, {{DNNL_ARG_SRC, src},
                          {DNNL_ARG_WEIGHTS, weights},
                          {DNNL_ARG_BIAS, bias},
                          {DNNL_ARG_DST, dst}});
    stream.wait();
  }
};

template <std::int64_t N>
void BM_conv3x3_bias_relu(benchmark::State& state) {
  auto x = data(N * channels * size * size), w = data(channels * channels * 9, 0.11f),
       b = data(channels, 0.05f);
  std::vector<float> y(x.size());
  auto cpu = device::cpu();
  auto kiln_call = [&] { block<N>.on(cpu)(x, w, b, into(y)); };
  const int calls = N >= 8 ? 5 : 20;
  double seconds = measure_kiln(state, kiln_call, 0, calls);
  state.counters["GFLOPS"] = 2.0 * N * channels * channels * 9 * size * size / seconds * 1e-9;
  onednn_conv nchw(x.data(), w.data(), b.data(), y.data(), N, false);
  ratio(state, "x_vs_onednn_nchw", nchw, calls, kiln_call);
  onednn_conv blocked(x.data(), w.data(), b.data(), y.data(), N, true);
  ratio(state, "x_vs_onednn_blocked", blocked, calls, kiln_call);
}

void BM_stem3x3_stride2_bias_relu(benchmark::State& state) {
  auto x = data(3 * image * image), w = data(stem_channels * 3 * 9, 0.11f),
       b = data(stem_channels, 0.05f);
  std::vector<float> y(stem_channels * (image / 2) * (image / 2));
  auto cpu = device::cpu();
  auto kiln_call = [&] { stem.on(cpu)(x, w, b, into(y)); };
  const int calls = 50;
  double seconds = measure_kiln(state, kiln_call, 0, calls);
  state.counters["GFLOPS"] = 2.0 * 27 * double(y.size()) / seconds * 1e-9;
  onednn_conv nchw(x.data(), w.data(), b.data(), y.data(), 1, false, image, 1, 2, 3, stem_channels);
  ratio(state, "x_vs_onednn_nchw", nchw, calls, kiln_call);
  onednn_conv blocked(x.data(), w.data(), b.data(), y.data(), 1, true, image, 1, 2, 3,
                      stem_channels);
  ratio(state, "x_vs_onednn_blocked", blocked, calls, kiln_call);
}

void BM_depthwise3x3_bias_relu(benchmark::State& state) {
  auto x = data(channels * wide * wide), w = data(channels * 9, 0.11f), b = data(channels, 0.05f);
  std::vector<float> y(x.size());
  auto cpu = device::cpu();
  auto kiln_call = [&] { depthwise.on(cpu)(x, w, b, into(y)); };
  const int calls = 50;
  double seconds = measure_kiln(state, kiln_call, 0, calls);
  state.counters["GFLOPS"] = 2.0 * channels * 9 * wide * wide / seconds * 1e-9;
  onednn_conv nchw(x.data(), w.data(), b.data(), y.data(), 1, false, wide, channels);
  ratio(state, "x_vs_onednn_nchw", nchw, calls, kiln_call);
  onednn_conv blocked(x.data(), w.data(), b.data(), y.data(), 1, true, wide, channels);
  ratio(state, "x_vs_onednn_blocked", blocked, calls, kiln_call);
}

void BM_depthwise3x3_stride2_bias_relu(benchmark::State& state) {
  auto x = data(channels * wide * wide), w = data(channels * 9, 0.11f), b = data(channels, 0.05f);
  std::vector<float> y(x.size() / 4);
  auto cpu = device::cpu();
  auto kiln_call = [&] { depthwise_stride2.on(cpu)(x, w, b, into(y)); };
  const int calls = 50;
  double seconds = measure_kiln(state, kiln_call, 0, calls);
  state.counters["GFLOPS"] = 2.0 * channels * 9 * (wide / 2) * (wide / 2) / seconds * 1e-9;
  onednn_conv nchw(x.data(), w.data(), b.data(), y.data(), 1, false, wide, channels, 2);
  ratio(state, "x_vs_onednn_nchw", nchw, calls, kiln_call);
  onednn_conv blocked(x.data(), w.data(), b.data(), y.data(), 1, true, wide, channels, 2);
  ratio(state, "x_vs_onednn_blocked", blocked, calls, kiln_call);
}

}  // namespace

BENCHMARK(BM_stem3x3_stride2_bias_relu)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_depthwise3x3_bias_relu)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_depthwise3x3_stride2_bias_relu)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_conv3x3_bias_relu<1>)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_conv3x3_bias_relu<8>)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
