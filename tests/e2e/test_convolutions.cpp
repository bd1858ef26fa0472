// Convolutions: ONNX Conv and ConvTranspose through both doors, checked against a direct double
// reference (every window summed cell by cell) within the error bound of its K-term dot
// products; every window parameter (pads, auto_pad, strides, dilations, groups, depthwise, 1x1,
// a kernel larger than its input); epilogues fused (one dispatch, no transient) and a
// convolution that another reads materialized. Runs on the default device and, as
// e2e.cpu.test_convolutions, on the CPU.
#include <gmock/gmock.h>

#include <cmath>

#include "../support/products.hpp"

namespace {

using kiln::dtype;
using kiln::tensor;
using ref::dims_t;
using ref::floats;
using ref::host_tensor;
using ref::random_tensor;
using ref::view_of;

// A 2-D convolution's windows as ONNX gives them (a 1-D one: height 1).
struct windows {
  std::int64_t stride[2] = {1, 1}, dilation[2] = {1, 1};
  std::int64_t begin[2] = {0, 0}, end[2] = {0, 0};  // pads
  std::int64_t groups = 1;
  std::int64_t extra[2] = {0, 0};  // conv_transpose's output_padding
};

// The result and, per element, the sum of |x w| over its terms (the rounding error's scale).
struct result {
  host_tensor value, magnitude;
};

// ONNX Conv: x [N, C, H, W], w [M, C / groups, KH, KW]; output sizes by ONNX's formula.
result ref_conv(const host_tensor& x, const host_tensor& w, const windows& p) {
  const std::int64_t N = x.dims[0], C = x.dims[1], H = x.dims[2], W = x.dims[3];
  const std::int64_t M = w.dims[0], KH = w.dims[2], KW = w.dims[3];
  const std::int64_t Cg = C / p.groups, Mg = M / p.groups;
  const std::int64_t OH =
      (H + p.begin[0] + p.end[0] - ((KH - 1) * p.dilation[0] + 1)) / p.stride[0] + 1;
  const std::int64_t OW =
      (W + p.begin[1] + p.end[1] - ((KW - 1) * p.dilation[1] + 1)) / p.stride[1] + 1;
  dims_t out{N, M, OH, OW};
  result r{{out, std::vector<double>(ref::count(out))},
           {out, std::vector<double>(ref::count(out))}};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          double s = 0, mag = 0;
          const std::int64_t g = m / Mg;
          for (std::int64_t ci = 0; ci < Cg; ++ci)
            for (std::int64_t kh = 0; kh < KH; ++kh)
              for (std::int64_t kw = 0; kw < KW; ++kw) {
                const std::int64_t ih = oh * p.stride[0] - p.begin[0] + kh * p.dilation[0];
                const std::int64_t iw = ow * p.stride[1] - p.begin[1] + kw * p.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const double t = x.v[((n * C + g * Cg + ci) * H + ih) * W + iw] *
                                 w.v[((m * Cg + ci) * KH + kh) * KW + kw];
                s += t;
                mag += std::fabs(t);
              }
          const std::int64_t at = ((n * M + m) * OH + oh) * OW + ow;
          r.value.v[at] = s;
          r.magnitude.v[at] = mag;
        }
  return r;
}

// ONNX ConvTranspose: x [N, C, H, W], w [C, M / groups, KH, KW]: each input cell scatters its
// kernel into the outputs.
result ref_conv_transpose(const host_tensor& x, const host_tensor& w, const windows& p) {
  const std::int64_t N = x.dims[0], C = x.dims[1], H = x.dims[2], W = x.dims[3];
  const std::int64_t Mg = w.dims[1], KH = w.dims[2], KW = w.dims[3];
  const std::int64_t M = Mg * p.groups, Cg = C / p.groups;
  const std::int64_t OH =
      p.stride[0] * (H - 1) + p.extra[0] + (KH - 1) * p.dilation[0] + 1 - p.begin[0] - p.end[0];
  const std::int64_t OW =
      p.stride[1] * (W - 1) + p.extra[1] + (KW - 1) * p.dilation[1] + 1 - p.begin[1] - p.end[1];
  dims_t out{N, M, OH, OW};
  result r{{out, std::vector<double>(ref::count(out))},
           {out, std::vector<double>(ref::count(out))}};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t ih = 0; ih < H; ++ih)
        for (std::int64_t iw = 0; iw < W; ++iw)
          for (std::int64_t mg = 0; mg < Mg; ++mg)
            for (std::int64_t kh = 0; kh < KH; ++kh)
              for (std::int64_t kw = 0; kw < KW; ++kw) {
                const std::int64_t oh = ih * p.stride[0] - p.begin[0] + kh * p.dilation[0];
                const std::int64_t ow = iw * p.stride[1] - p.begin[1] + kw * p.dilation[1];
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                const double t =
                    x.v[((n * C + c) * H + ih) * W + iw] * w.v[((c * Mg + mg) * KH + kh) * KW + kw];
                const std::int64_t at = ((n * M + (c / Cg) * Mg + mg) * OH + oh) * OW + ow;
                r.value.v[at] += t;
                r.magnitude.v[at] += std::fabs(t);
              }
  return r;
}

// The bound of K-term dot products (ref::expect_within_bound) on a result.
void expect_within_bound(const std::vector<float>& got, const result& want, std::int64_t k,
                         const std::string& what) {
  ref::expect_within_bound(got, want.value.v, want.magnitude.v, k, what);
}

// The window as the graph API takes it, over `axes` spatial axes (1: the width only).
kiln::ir::conv_window window_of(const windows& p, int axes) {
  kiln::ir::conv_window c;
  for (int a = 2 - axes; a < 2; ++a) {
    c.strides.push_back(p.stride[a]);
    c.dilations.push_back(p.dilation[a]);
  }
  for (int a = 2 - axes; a < 2; ++a) c.pads.push_back(p.begin[a]);
  for (int a = 2 - axes; a < 2; ++a) c.pads.push_back(p.end[a]);
  for (int a = 2 - axes; a < 2 && (p.extra[0] || p.extra[1]); ++a)
    c.output_padding.push_back(p.extra[a]);
  c.groups = p.groups;
  return c;
}

// conv (or conv_transpose) of x and w through the graph API, 2-D, or 1-D where x's height is 1
// (the operands given as [N, C, W]), checked against the reference. constant_w: w a constant of
// the graph (packed once, at the first call, and read so by later ones), run twice.
void check(const dims_t& xd, const dims_t& wd, const windows& p, bool transposed, unsigned seed,
           bool one_dimensional = false, bool constant_w = false) {
  SCOPED_TRACE(std::string(transposed ? "conv_transpose " : "conv ") + ref::dims_text(xd) + " by " +
               ref::dims_text(wd) + " stride " + std::to_string(p.stride[1]) + " dilation " +
               std::to_string(p.dilation[1]) + " pads " + std::to_string(p.begin[1]) + "/" +
               std::to_string(p.end[1]) + " groups " + std::to_string(p.groups));
  host_tensor x = random_tensor(xd, seed), w = random_tensor(wd, seed + 1);
  result want = transposed ? ref_conv_transpose(x, w, p) : ref_conv(x, w, p);
  auto drop_height = [&](dims_t d) {
    if (one_dimensional) d.erase(d.begin() + 2);
    return d;
  };
  dims_t out = drop_height(want.value.dims);
  std::vector<float> x32 = floats(x), w32 = floats(w), y32(ref::count(out));
  kiln::graph g;
  auto xv = g.input("x", dtype::f32, ref::to_shape(drop_height(xd)));
  auto wv = constant_w
                ? g.constant(w32.data(), dtype::f32, w32.size(), ref::to_shape(drop_height(wd)))
                : g.input("w", dtype::f32, ref::to_shape(drop_height(wd)));
  const auto c = window_of(p, one_dimensional ? 1 : 2);
  auto y = transposed ? g.conv_transpose(xv, wv, c) : g.conv(xv, wv, c);
  ASSERT_EQ(g.dims_of(y), ref::to_shape(out));
  g.output("y", y);
  auto e = kiln::compile(g);
  EXPECT_EQ(e.dispatch_count(), 1);
  const std::int64_t cells = wd[2] * wd[3];
  for (int call = 0; call < (constant_w ? 2 : 1); ++call) {
    std::fill(y32.begin(), y32.end(), -1.f);
    if (constant_w)
      e.run({view_of(x32, drop_height(xd))}, {view_of(y32, out)});
    else
      e.run({view_of(x32, drop_height(xd)), view_of(w32, drop_height(wd))}, {view_of(y32, out)});
    expect_within_bound(y32, want, (transposed ? wd[0] : wd[1]) * cells,
                        "result of call " + std::to_string(call + 1));
  }
}

windows with(std::int64_t stride, std::int64_t dilation, std::int64_t begin, std::int64_t end,
             std::int64_t groups = 1) {
  windows p;
  p.stride[0] = p.stride[1] = stride;
  p.dilation[0] = p.dilation[1] = dilation;
  p.begin[0] = p.begin[1] = begin;
  p.end[0] = p.end[1] = end;
  p.groups = groups;
  return p;
}

TEST(Conv, EveryWindowParameterAgainstTheReference) {
  unsigned seed = 1;
  // 1x1, 3x3 and an odd 5x2 kernel; strides, dilations and pads (asymmetric too).
  for (dims_t k : {dims_t{1, 1}, dims_t{3, 3}, dims_t{5, 2}})
    for (std::int64_t stride : {1, 2})
      for (std::int64_t dilation : {1, 2})
        for (auto [begin, end] : {std::pair{0, 0}, std::pair{1, 1}, std::pair{2, 0}})
          check({2, 3, 11, 9}, {4, 3, k[0], k[1]}, with(stride, dilation, begin, end), false,
                seed += 2);
  // 1x1 over contiguous cells (B packed as a plain matrix), and over a sliced input (not).
  check({2, 70, 9, 13}, {33, 70, 1, 1}, with(1, 1, 0, 0), false, seed += 2);
  check({1, 5, 9, 13}, {6, 5, 1, 1}, with(2, 1, 0, 0), false, seed += 2);
  // Height and width apart.
  windows p = with(1, 1, 0, 0);
  p.stride[0] = 3;
  p.dilation[1] = 3;
  p.begin[0] = 2;
  p.end[1] = 1;
  check({1, 2, 13, 10}, {3, 2, 3, 2}, p, false, seed += 2);
  // Groups, depthwise (a group per channel) and depthwise with a multiplier.
  check({2, 6, 8, 8}, {8, 3, 3, 3}, with(1, 1, 1, 1, 2), false, seed += 2);
  check({2, 5, 9, 7}, {5, 1, 3, 3}, with(1, 1, 1, 1, 5), false, seed += 2);
  check({1, 4, 9, 7}, {8, 1, 3, 3}, with(2, 1, 1, 1, 4), false, seed += 2);
  // Depthwise with dilation and uneven padding (the direct kernel), and over three images.
  windows d = with(1, 2, 2, 1, 6);
  d.begin[1] = 0;
  check({3, 6, 10, 11}, {6, 1, 3, 4}, d, false, seed += 2);
  // A kernel larger than its input, reaching it only through the padding.
  check({1, 2, 2, 3}, {3, 2, 5, 5}, with(1, 1, 2, 2), false, seed += 2);
}

// The 2-D depthwise kernel computes a row's outputs a vector at a time, up to four vectors side by
// side, from one copy of the input per column phase: output widths around the vector (16 lanes
// on AVX-512, 8 on AVX2, 4 on SSE2) and four of them, with strides 1 to 3 (phases), dilation
// (a kernel column in another phase), uneven padding and a channel multiplier. At stride 2 with a
// 3-wide window and a padding column (parted in registers on AVX-512 and AVX2) also an odd input
// width, whose last window reads the padding on the right, and a padding on the right wider than
// a vector of outputs.
TEST(Conv, DepthwiseAcrossVectorWidthsStridesAndPhases) {
  unsigned seed = 150;
  for (std::int64_t width : {1, 4, 15, 16, 17, 33, 48, 64, 65, 80, 131})
    for (std::int64_t stride : {1, 2, 3}) {
      windows p = with(stride, 1, 1, 1, 3);
      check({1, 3, 5, width * stride}, {3, 1, 3, 3}, p, false, seed += 2);
      if (stride == 2) {
        check({1, 3, 7, width * stride - 1}, {3, 1, 3, 3}, p, false, seed += 2);
        windows wide = p;  // whole vectors of outputs over the padding on the right
        wide.end[1] = 37;
        check({1, 3, 7, width * stride - 1}, {3, 1, 3, 3}, wide, false, seed += 2);
      }
      windows d = with(stride, 2, 2, 0, 3);
      d.begin[0] = 1;
      check({1, 3, 6, width * stride + 3}, {6, 1, 2, 3}, d, false, seed += 2);  // multiplier 2
    }
}

// The direct kernel of 2-D convolutions with several input channels per group (a stem's): output
// rows around one and two vectors and a register tile's columns (16 and 32 lanes on AVX-512, 8
// and 16 on AVX2, 4 and 8 on SSE2), strides 1 to 3 and dilation (kernel columns in other
// phases), uneven padding, register tiles with rows left over (5, 6 and 17 output channels) and
// columns past the row's end (added to in a later KC block), groups, K past one KC block (30 x
// 3 x 3 = 270), w an input or a constant (packed once).
TEST(Conv, DirectAcrossWidthsStridesAndBlocks) {
  unsigned seed = 900;
  for (std::int64_t width : {8, 9, 16, 17, 32, 33, 47, 64, 70})
    for (std::int64_t stride : {1, 2, 3}) {
      check({1, 3, 5, width * stride}, {5, 3, 3, 3}, with(stride, 1, 1, 1), false, seed += 2);
      windows d = with(stride, 2, 2, 0, 2);
      d.begin[0] = 1;
      check({2, 4, 6, width * stride + 3}, {6, 2, 2, 3}, d, false, seed += 2, false, true);
    }
  check({1, 3, 9, 80}, {17, 3, 3, 3}, with(2, 1, 1, 1), false, seed += 2, false, true);
  check({1, 30, 4, 40}, {9, 30, 3, 3}, with(1, 1, 1, 1), false, seed += 2);
  check({1, 30, 4, 40}, {9, 30, 3, 3}, with(1, 1, 1, 1), false, seed += 2, false, true);
  check({1, 30, 3, 20}, {7, 30, 3, 3}, with(1, 1, 1, 1), false, seed += 2);
  check({0, 3, 5, 40}, {5, 3, 3, 3}, with(1, 1, 1, 1), false, seed += 2);  // no images
}

TEST(Conv, SizesAroundTilesAndBlocks) {
  unsigned seed = 100;
  // Output channels (the GEMM's rows), input channels (with the kernel cells, its sum) and
  // output cells (its columns): 1, 7, 63, 64, 65 and, for the cells, 1000 (1-D: 1000 long).
  windows width_pad = with(1, 1, 0, 0);
  width_pad.begin[1] = width_pad.end[1] = 1;
  for (std::int64_t s : {1, 7, 63, 64, 65}) {
    check({1, 3, 6, 5}, {s, 3, 3, 3}, with(1, 1, 1, 1), false, seed += 2);
    check({1, s, 6, 5}, {5, s, 3, 3}, with(1, 1, 1, 1), false, seed += 2);
    check({2, 3, 1, s}, {4, 3, 1, 3}, width_pad, false, seed += 2, true);
  }
  check({2, 3, 1, 1000}, {70, 3, 1, 5}, with(1, 1, 0, 0), false, seed += 2, true);
  check({1, 64, 20, 20}, {64, 64, 3, 3}, with(1, 1, 1, 1), false, seed += 2);  // K in blocks
}

// w a constant (packed whole once as the GEMM's A, per group, KC block after KC block): rows
// around the register tile, K in several KC blocks, groups, transposed, 1-D, depthwise (not
// packed).
TEST(Conv, ConstantWeightsArePackedOnceAndReadSo) {
  unsigned seed = 400;
  for (std::int64_t s : {1, 7, 9, 63, 65})
    check({1, 3, 6, 5}, {s, 3, 3, 3}, with(1, 1, 1, 1), false, seed += 2, false, true);
  check({1, 64, 10, 10}, {33, 64, 3, 3}, with(1, 1, 1, 1), false, seed += 2, false, true);
  check({2, 6, 8, 8}, {10, 3, 3, 3}, with(2, 1, 1, 1, 2), false, seed += 2, false, true);
  check({2, 5, 9, 7}, {5, 1, 3, 3}, with(1, 1, 1, 1, 5), false, seed += 2, false, true);
  check({2, 70, 9, 13}, {33, 70, 1, 1}, with(1, 1, 0, 0), false, seed += 2, false, true);
  check({2, 3, 1, 200}, {70, 3, 1, 5}, with(2, 1, 0, 0), false, seed += 2, true, true);
  check({1, 4, 5, 6}, {4, 3, 3, 3}, with(2, 1, 1, 0, 2), true, seed += 2, false, true);
  check({1, 9, 4, 5}, {9, 5, 2, 3}, with(1, 2, 0, 1), true, seed += 2, false, true);
}

TEST(Conv, PointwiseOverATransposedInputReadsItInPlace) {
  // x is xt [1, 3, W, H] with its last two axes swapped: its cells are not one stride apart, so
  // the 1x1 kernel's B is packed from the windows (the transposed view read in place).
  const std::int64_t H = 4, W = 5;
  host_tensor xt = random_tensor({1, 3, W, H}, 150), w = random_tensor({2, 3, 1, 1}, 151);
  host_tensor x{{1, 3, H, W}, std::vector<double>(3 * H * W)};
  for (std::int64_t c = 0; c < 3; ++c)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t v = 0; v < W; ++v) x.v[(c * H + h) * W + v] = xt.v[(c * W + v) * H + h];
  result want = ref_conv(x, w, with(1, 1, 0, 0));
  kiln::graph g;
  auto xv = g.input("xt", dtype::f32, {1, 3, W, H});
  auto wv = g.input("w", dtype::f32, {2, 3, 1, 1});
  g.output("y", g.conv(g.transpose(xv, {0, 1, 3, 2}), wv, kiln::ir::conv_window{}));
  auto e = kiln::compile(g);
  EXPECT_EQ(e.dispatch_count(), 1);
  std::vector<float> x32 = floats(xt), w32 = floats(w), y(ref::count(want.value.dims));
  e.run({view_of(x32, xt.dims), view_of(w32, w.dims)}, {view_of(y, want.value.dims)});
  expect_within_bound(y, want, 3, "pointwise");
}

// conv(x * s, w) with s one value per channel (a squeeze-excite's scale): where no window reads
// padding and the convolution has one group, the product scales w instead (the arena then holds
// w * s, not x * s); with padding, groups, a scale per image, or x * s read twice, the scaled
// input is stored. Each against the reference of the scaled input.
TEST(Conv, AChannelScaleOfTheInputScalesTheWeightsInstead) {
  using kiln::ir::op;
  struct form {
    const char* what;
    dims_t x, w, scale;
    windows p;
    bool scaled_read_twice, weights_scaled;
  };
  const form forms[] = {
      {"pointwise", {2, 6, 7, 9}, {4, 6, 1, 1}, {1, 6, 1, 1}, with(1, 1, 0, 0), false, true},
      {"one scale", {1, 6, 7, 9}, {4, 6, 1, 1}, {1}, with(1, 1, 0, 0), false, true},
      {"rank 3 scale", {1, 5, 9, 11}, {3, 5, 3, 3}, {5, 1, 1}, with(2, 1, 0, 0), false, true},
      {"two images", {2, 3, 8, 8}, {4, 3, 3, 3}, {1, 3, 1, 1}, with(1, 1, 0, 0), false, true},
      {"depthwise", {1, 5, 9, 11}, {5, 1, 3, 3}, {5, 1, 1}, with(2, 1, 0, 0, 5), false, false},
      {"padded", {1, 6, 7, 9}, {4, 6, 3, 3}, {1, 6, 1, 1}, with(1, 1, 1, 1), false, false},
      {"per image", {2, 6, 7, 9}, {4, 6, 1, 1}, {2, 6, 1, 1}, with(1, 1, 0, 0), false, false},
      {"read twice", {1, 6, 7, 9}, {4, 6, 1, 1}, {1, 6, 1, 1}, with(1, 1, 0, 0), true, false},
  };

  unsigned seed = 700;
  for (const form& f : forms) {
    SCOPED_TRACE(f.what);
    host_tensor x = random_tensor(f.x, seed++), w = random_tensor(f.w, seed++),
                gate = random_tensor(f.scale, seed++);
    // s = relu(gate) broadcast against x (aligned at the right, as the graph broadcasts).
    host_tensor scaled = x;
    const std::int64_t N = f.x[0], C = f.x[1], plane = f.x[2] * f.x[3];
    for (std::int64_t i = 0; i < ref::count(f.x); ++i) {
      const std::int64_t n = i / (C * plane), c = i / plane % C;
      std::int64_t at = 0;
      if (f.scale.size() == 4) at = (f.scale[0] > 1 ? n * C : 0) + c;
      if (f.scale.size() == 3) at = c;
      scaled.v[i] *= std::max(gate.v[at], 0.0);
    }
    result want = ref_conv(scaled, w, f.p);
    kiln::graph g;
    auto xv = g.input("x", dtype::f32, ref::to_shape(f.x));
    auto wv = g.input("w", dtype::f32, ref::to_shape(f.w));
    auto sv = g.relu(g.input("gate", dtype::f32, ref::to_shape(f.scale)));
    auto product = g.apply(op::mul, {xv, sv});
    auto y = g.conv(product, wv, window_of(f.p, 2));
    g.output("y", y);
    if (f.scaled_read_twice) g.output("scaled", product);
    auto e = kiln::compile(g);
    const std::int64_t stored = f.weights_scaled ? ref::count(f.w) : N * C * plane;
    EXPECT_EQ(e.plan().transient_bytes(), (stored * 4 + 255) / 256 * 256)
        << kiln::compiler::print(e.plan());
    std::vector<float> x32 = floats(x), w32 = floats(w), s32 = floats(gate),
                       y32(ref::count(want.value.dims)), p32(ref::count(f.x));
    std::vector<kiln::tensor_ref> outs{view_of(y32, want.value.dims)};
    if (f.scaled_read_twice) outs.push_back(view_of(p32, f.x));
    const std::vector<kiln::tensor_ref> ins{view_of(x32, f.x), view_of(w32, f.w),
                                            view_of(s32, f.scale)};
    e.run(ins, outs);
    // One rounding more per term than the dot product's own (of x * s, or of w * s).
    expect_within_bound(y32, want, f.w[1] * f.w[2] * f.w[3] + 1, "y");
    if (f.scaled_read_twice) ref::expect_near(p32, scaled.v, {1e-6, 0}, "x * s");
  }
}

TEST(Conv, OneDimensionalWindows) {
  unsigned seed = 200;
  windows p = with(2, 2, 0, 0);
  p.begin[1] = 3;
  p.end[1] = 1;
  check({3, 4, 1, 17}, {6, 2, 1, 4}, (p.groups = 2, p), false, seed += 2, true);
  check({3, 4, 1, 9}, {4, 3, 1, 3}, (p.groups = 1, p), true, seed += 2, true);
  check({2, 4, 1, 30}, {4, 1, 1, 5}, (p.groups = 4, p), false, seed += 2, true);  // depthwise
  // One input channel: many filters over short strided rows (an STFT's), and long unit rows.
  check({1, 1, 1, 576}, {258, 1, 1, 256}, with(128, 1, 0, 0), false, seed += 2, true);
  windows q = with(1, 1, 0, 0);
  q.begin[1] = q.end[1] = 1;
  check({2, 1, 1, 100}, {8, 1, 1, 3}, q, false, seed += 2, true);
}

TEST(ConvTranspose, EveryWindowParameterAgainstTheReference) {
  unsigned seed = 300;
  for (dims_t k : {dims_t{1, 1}, dims_t{3, 3}, dims_t{4, 2}})
    for (std::int64_t stride : {1, 2, 3})
      for (std::int64_t dilation : {1, 2})
        for (auto [begin, end] : {std::pair{0, 0}, std::pair{1, 1}, std::pair{2, 0}}) {
          windows p = with(stride, dilation, begin, end);
          if (p.stride[0] == 1 && begin == 2 && k[0] == 1) continue;  // no output
          check({2, 3, 5, 4}, {3, 4, k[0], k[1]}, p, true, seed += 2);
        }
  // output_padding, groups and a stride per axis.
  windows p = with(2, 1, 1, 0, 2);
  p.stride[1] = 3;
  p.extra[0] = 1;
  p.extra[1] = 2;
  check({2, 4, 5, 6}, {4, 3, 3, 3}, p, true, seed += 2);
  check({1, 6, 7, 7}, {6, 1, 3, 3}, with(2, 1, 1, 1, 6), true, seed += 2);  // depthwise
  check({1, 65, 9, 9}, {65, 64, 2, 2}, with(2, 1, 0, 0), true, seed += 2);
}

TEST(Conv, AutoPadAndOutputShapeAsOnnx) {
  // SAME_UPPER / SAME_LOWER keep ceil(size / stride) outputs, the odd pad at the end / the
  // beginning; VALID pads nothing.
  const std::int64_t H = 7, W = 8;
  host_tensor x = random_tensor({1, 2, H, W}, 400), w = random_tensor({3, 2, 4, 3}, 401);
  struct mode_case {
    kiln::auto_pad mode;
    windows p;
  };
  // stride 2: H 7 -> 4 outputs need 4 + 2 x 3 - 7 = 3 pad rows, W 8 -> 4 need 3 + 6 - 8 = 1.
  windows upper = with(2, 1, 0, 0), lower = upper, valid = upper;
  upper.begin[0] = 1, upper.end[0] = 2, upper.begin[1] = 0, upper.end[1] = 1;
  lower.begin[0] = 2, lower.end[0] = 1, lower.begin[1] = 1, lower.end[1] = 0;
  for (auto [mode, p] :
       {mode_case{kiln::auto_pad::same_upper, upper}, mode_case{kiln::auto_pad::same_lower, lower},
        mode_case{kiln::auto_pad::valid, valid}}) {
    SCOPED_TRACE(static_cast<int>(mode));
    result want = ref_conv(x, w, p);
    kiln::graph g;
    auto xv = g.input("x", dtype::f32, {1, 2, H, W});
    auto wv = g.input("w", dtype::f32, {3, 2, 4, 3});
    kiln::ir::conv_window c;
    c.strides = {2, 2};
    c.pads = {9, 9, 9, 9};  // ignored: auto_pad decides
    c.auto_pad = mode;
    if (mode == kiln::auto_pad::valid) c.pads.clear();
    g.output("y", g.conv(xv, wv, c));
    auto e = kiln::compile(g);
    std::vector<float> x32 = floats(x), w32 = floats(w), y(ref::count(want.value.dims));
    e.run({view_of(x32, x.dims), view_of(w32, w.dims)}, {view_of(y, want.value.dims)});
    expect_within_bound(y, want, 2 * 12, "auto_pad");
  }
  // ConvTranspose's output_shape: the pads follow (the odd one at the beginning).
  host_tensor xt = random_tensor({1, 2, 3, 3}, 402), wt = random_tensor({2, 2, 3, 3}, 403);
  windows p = with(2, 1, 1, 0);  // full size 2 x 2 + 3 = 7; 6 wanted: total pad 1, at the start
  result want = ref_conv_transpose(xt, wt, p);
  kiln::graph g;
  auto xv = g.input("x", dtype::f32, {1, 2, 3, 3});
  auto wv = g.input("w", dtype::f32, {2, 2, 3, 3});
  kiln::ir::conv_window c;
  c.strides = {2, 2};
  c.output_shape = {6, 6};
  g.output("y", g.conv_transpose(xv, wv, c));
  auto e = kiln::compile(g);
  ASSERT_EQ(want.value.dims, (dims_t{1, 2, 6, 6}));
  std::vector<float> x32 = floats(xt), w32 = floats(wt), y(72);
  e.run({view_of(x32, xt.dims), view_of(w32, wt.dims)}, {view_of(y, want.value.dims)});
  expect_within_bound(y, want, 18, "output_shape");
}

TEST(Conv, BiasAndActivationFuseIntoOneDispatch) {
  // relu(conv(x, w) + bias) + residual, with the weights read in place through a transpose and
  // the residual through a slice: one dispatch, no transient; a second convolution reading the
  // first materializes it.
  const std::int64_t N = 2, C = 5, H = 12, W = 10, M = 6;
  host_tensor x = random_tensor({N, C, H, W}, 500), wt = random_tensor({C, M, 3, 3}, 501),
              bias = random_tensor({M}, 502), res = random_tensor({N, M, H, 2 * W}, 503),
              w2 = random_tensor({4, M, 1, 1}, 504);
  // w: wt's first two axes swapped.
  host_tensor w{{M, C, 3, 3}, std::vector<double>(M * C * 9)};
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t k = 0; k < 9; ++k) w.v[(m * C + c) * 9 + k] = wt.v[(c * M + m) * 9 + k];
  const windows p = with(1, 1, 1, 1);
  result z = ref_conv(x, w, p);
  result want = z;
  for (std::int64_t i = 0; i < ref::count(z.value.dims); ++i) {
    const std::int64_t m = i / (H * W) % M, n = i / (M * H * W), hw = i % (H * W);
    const double r = res.v[((n * M + m) * H + hw / W) * 2 * W + 2 * (hw % W)];
    want.value.v[i] = std::max(z.value.v[i] + bias.v[m], 0.0) + r;
    want.magnitude.v[i] = z.magnitude.v[i] + std::fabs(bias.v[m]) + std::fabs(r);
  }
  kiln::graph g;
  auto xv = g.input("x", dtype::f32, {N, C, H, W});
  auto wv = g.input("wt", dtype::f32, {C, M, 3, 3});
  auto bv = g.input("bias", dtype::f32, {M});
  auto rv = g.input("res", dtype::f32, {N, M, H, 2 * W});
  auto conv = g.conv(xv, g.transpose(wv, {1, 0, 2, 3}), bv, window_of(p, 2));
  auto h = g.apply(kiln::ir::op::add, {g.relu(conv), g.slice(rv, {0}, {2 * W}, {3}, {2})});
  g.output("y", h);
  auto e = kiln::compile(g);
  EXPECT_EQ(e.dispatch_count(), 1) << kiln::compiler::print(e.plan());
  EXPECT_EQ(e.plan().transient_bytes(), 0);
  std::vector<float> x32 = floats(x), w32 = floats(wt), b32 = floats(bias), r32 = floats(res),
                     y(ref::count(want.value.dims));
  e.run({view_of(x32, x.dims), view_of(w32, wt.dims), kiln::view(b32.data(), {M}),
         view_of(r32, res.dims)},
        {view_of(y, want.value.dims)});
  expect_within_bound(y, want, C * 9 + 4, "fused");

  // conv -> conv: two dispatches, the first's result a transient.
  kiln::graph g2;
  auto x2 = g2.input("x", dtype::f32, {N, C, H, W});
  auto wv2 = g2.input("wt", dtype::f32, {C, M, 3, 3});
  auto bv2 = g2.input("bias", dtype::f32, {M});
  auto w2v2 = g2.input("w2", dtype::f32, {4, M, 1, 1});
  auto first = g2.relu(g2.conv(x2, g2.transpose(wv2, {1, 0, 2, 3}), bv2, window_of(p, 2)));
  g2.output("y", g2.conv(first, w2v2, window_of(with(1, 1, 0, 0), 2)));
  auto e2 = kiln::compile(g2);
  EXPECT_EQ(e2.dispatch_count(), 2);
  EXPECT_EQ(e2.plan().transient_bytes(), (N * M * H * W * 4 + 255) / 256 * 256);
  host_tensor hidden{z.value.dims, {}};
  for (std::int64_t i = 0; i < ref::count(z.value.dims); ++i)
    hidden.v.push_back(std::max(z.value.v[i] + bias.v[i / (H * W) % M], 0.0));
  result want2 = ref_conv(hidden, w2, with(1, 1, 0, 0));
  // The hidden layer's own rounding (K u of its magnitude) moves the second sum by at most that
  // times |w2|: folded into the bound's magnitude.
  for (std::int64_t i = 0; i < ref::count(want2.value.dims); ++i) want2.magnitude.v[i] += 8 * C;
  std::vector<float> w232 = floats(w2), y2(ref::count(want2.value.dims));
  e2.run({view_of(x32, x.dims), view_of(w32, wt.dims), kiln::view(b32.data(), {M}),
          view_of(w232, w2.dims)},
         {view_of(y2, want2.value.dims)});
  expect_within_bound(y2, want2, C * 9 + M, "conv of conv");
}

// relu(y + bias[m]) from a convolution's reference y [N, M, OH, OW] (the bias's terms bounded
// by 1 in the error's scale).
result with_bias_relu(result z, const host_tensor& b) {
  const std::int64_t m = z.value.dims[1], plane = z.value.dims[2] * z.value.dims[3];
  for (std::size_t i = 0; i < z.value.v.size(); ++i) {
    z.value.v[i] = std::max(
        z.value.v[i] + b.v[static_cast<std::size_t>(static_cast<std::int64_t>(i) / plane % m)],
        0.0);
    z.magnitude.v[i] += 1;
  }
  return z;
}

TEST(Conv, TheDslDoorChecksShapesAndFusesAtCompileTime) {
  constexpr kiln::conv_params same{.pads = {1, 1, 1, 1}};
  static constexpr auto block =
      kiln::fn<tensor<float, 2, 3, 9, 8>, tensor<float, 4, 3, 3, 3>, tensor<float, 4>>(
          [](auto x, auto w, auto b) { return relu(kiln::conv2d<same>(x, w, b)); });
  static_assert(block.plan.dispatch_count() == 1 && block.plan.transient_bytes() == 0);
  constexpr kiln::conv_params strided{.strides = {2, 2}, .dilations = {1, 2}, .groups = 3};
  static constexpr auto grouped = kiln::fn<tensor<float, 1, 3, 9, 8>, tensor<float, 6, 1, 3, 2>>(
      [](auto x, auto w) { return kiln::conv2d<strided>(x, w); });
  using out = std::tuple_element_t<0, typename decltype(grouped)::result_values>;
  static_assert(out::extents_type::value() == kiln::shape{1, 6, 4, 3});

  host_tensor x = random_tensor({2, 3, 9, 8}, 600), w = random_tensor({4, 3, 3, 3}, 601),
              b = random_tensor({4}, 602);
  const result z = with_bias_relu(ref_conv(x, w, with(1, 1, 1, 1)), b);
  std::vector<float> x32 = floats(x), w32 = floats(w), b32 = floats(b), y(z.value.v.size());
  block(x32, w32, b32, kiln::into(y));
  expect_within_bound(y, z, 27, "dsl");

  host_tensor x2 = random_tensor({1, 3, 9, 8}, 603), w2 = random_tensor({6, 1, 3, 2}, 604);
  windows p = with(2, 1, 0, 0, 3);
  p.dilation[1] = 2;
  result z2 = ref_conv(x2, w2, p);
  std::vector<float> x232 = floats(x2), w232 = floats(w2), y2(z2.value.v.size());
  grouped(x232, w232, kiln::into(y2));
  expect_within_bound(y2, z2, 6, "dsl grouped");
}

// x's channels known only at the call (the DSL's dyn, the graph's too), checked against w's then;
// grouped too (w takes C / groups per group).
TEST(Conv, RunTimeChannelsAreCheckedAtTheCall) {
  using kiln::dyn;
  constexpr kiln::conv_params same{.pads = {1, 1, 1, 1}};
  static constexpr auto block =
      kiln::fn<tensor<float, dyn, dyn, 9, 8>, tensor<float, 4, 3, 3, 3>, tensor<float, 4>>(
          [](auto x, auto w, auto b) { return relu(kiln::conv2d<same>(x, w, b)); });
  host_tensor x = random_tensor({2, 3, 9, 8}, 610), w = random_tensor({4, 3, 3, 3}, 611),
              b = random_tensor({4}, 612);
  const result z = with_bias_relu(ref_conv(x, w, with(1, 1, 1, 1)), b);
  std::vector<float> x32 = floats(x), w32 = floats(w), b32 = floats(b), y(z.value.v.size());
  block(view_of(x32, {2, 3, 9, 8}), w32, b32, kiln::into(view_of(y, {2, 4, 9, 8})));
  expect_within_bound(y, z, 27, "dsl");

  kiln::graph g;
  auto xv = g.input("x", dtype::f32, {1, dyn, 9, 8});
  auto wv = g.input("w", dtype::f32, {6, 1, 3, 2});
  g.output("y", g.conv(xv, wv, kiln::conv_params{.strides = {2, 2}, .groups = 3}));
  auto grouped = kiln::compile(g);
  host_tensor x2 = random_tensor({1, 3, 9, 8}, 613), w2 = random_tensor({6, 1, 3, 2}, 614);
  result z2 = ref_conv(x2, w2, with(2, 1, 0, 0, 3));
  std::vector<float> x232 = floats(x2), w232 = floats(w2), y2(z2.value.v.size());
  grouped.run({view_of(x232, {1, 3, 9, 8}), view_of(w232, {6, 1, 3, 2})},
              {view_of(y2, z2.value.dims)});
  expect_within_bound(y2, z2, 6, "graph grouped");

  // A groups that is not positive, with run-time channels, is refused (not read as a size).
  for (std::int64_t groups : {0, -1, -3}) {
    kiln::graph bad;
    auto bx = bad.input("x", dtype::f32, {1, dyn, 9, 8});
    auto bw = bad.input("w", dtype::f32, {6, 1, 3, 2});
    EXPECT_THAT(ref::error_message([&] { bad.conv(bx, bw, kiln::conv_params{.groups = groups}); }),
                testing::HasSubstr("groups is " + std::to_string(groups)));
  }
  std::vector<float> x5(2 * 5 * 9 * 8), y5(2 * 4 * 9 * 8);
  EXPECT_THAT(ref::error_message([&] {
                block(view_of(x5, {2, 5, 9, 8}), w32, b32, kiln::into(view_of(y5, {2, 4, 9, 8})));
              }),
              testing::HasSubstr("argument 1 axis 1 has size 5, but conv contracts it with a size "
                                 "of 3"));
}

TEST(Conv, WideAndNarrowFloatsAndARunTimeBatch) {
  // f64 accumulates in f64; f16 and bf16 in f32, rounded once. The batch size is a symbol. Dense
  // (the GEMM; over rows of 40, the direct kernel) and depthwise (its own kernel).
  for (int kind = 0; kind < 3; ++kind) {
    const bool depthwise = kind == 1;
    const std::int64_t W = kind == 2 ? 40 : 6;
    const dims_t wd = depthwise ? dims_t{4, 1, 3, 3} : dims_t{5, 4, 3, 3};
    const std::int64_t M = wd[0], cells = wd[1] * 9;
    host_tensor x = random_tensor({3, 4, 7, W}, 700), w = random_tensor(wd, 701);
    windows p = with(1, 1, 1, 1, depthwise ? 4 : 1);
    for (dtype t : {dtype::f64, dtype::f16, dtype::bf16}) {
      SCOPED_TRACE(std::string(kiln::name(t)) + (depthwise ? " depthwise" : "") + " width " +
                   std::to_string(W));
      kiln::graph g;
      auto xv = g.input("x", t, {kiln::dyn, 4, 7, W});
      auto wv = g.input("w", t, ref::to_shape(wd));
      g.output("y", g.conv(xv, wv, window_of(p, 2)));
      auto e = kiln::compile(g);
      auto xb = ref::bytes_of(t, x.v), wb = ref::bytes_of(t, w.v);
      host_tensor xr{x.dims, {}}, wr{w.dims, {}};
      for (std::size_t i = 0; i < x.v.size(); ++i) xr.v.push_back(ref::value_at(xb, t, i));
      for (std::size_t i = 0; i < w.v.size(); ++i) wr.v.push_back(ref::value_at(wb, t, i));
      result want = ref_conv(xr, wr, p);
      std::vector<unsigned char> y(ref::count(want.value.dims) * kiln::size_in_bytes(t));
      e.run({kiln::tensor_ref(static_cast<const void*>(xb.data()), t, {3, 4, 7, W}),
             kiln::tensor_ref(static_cast<const void*>(wb.data()), t, ref::to_shape(wd))},
            {kiln::tensor_ref(static_cast<void*>(y.data()), t, {3, M, 7, W})});
      const double u = t == dtype::f64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
      const double out_u = t == dtype::f16    ? std::ldexp(1.0, -11)
                           : t == dtype::bf16 ? std::ldexp(1.0, -8)
                                              : u;
      int bad = 0;
      for (std::size_t i = 0; i < want.value.v.size() && bad < 5; ++i) {
        double got = ref::value_at(y, t, i), v = want.value.v[i];
        double bound = double(cells + 2) * u * want.magnitude.v[i] + out_u * std::fabs(v) + 1e-300;
        if (!(std::fabs(got - v) <= bound)) {
          ++bad;
          ADD_FAILURE() << "element " << i << ": " << got << " vs " << v;
        }
      }
    }
  }
}

TEST(Conv, MistakesNameTheOpAndTheShapes) {
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {1, 4, 8, 8});
  auto w = g.input("w", dtype::f32, {6, 3, 3, 3});
  auto wi = g.input("wi", dtype::i32, {6, 4, 3, 3});
  auto v = g.input("v", dtype::f32, {4, 8});
  auto dyn_x = g.input("d", dtype::f32, {1, 4, kiln::dyn, 8});
  auto w4 = g.input("w4", dtype::f32, {6, 4, 3, 3});
  auto bias = g.input("b", dtype::f32, {5});
  auto message = [](auto&& call) { return ref::error_message(call); };
  kiln::ir::conv_window plain;
  EXPECT_THAT(message([&] { g.conv(x, w, plain); }),
              testing::AllOf(testing::HasSubstr("conv"), testing::HasSubstr("[1, 4, 8, 8]"),
                             testing::HasSubstr("[6, 3, 3, 3]"), testing::HasSubstr("4 channels")));
  kiln::ir::conv_window three = plain;
  three.groups = 3;
  EXPECT_THAT(message([&] { g.conv(x, w4, three); }), testing::HasSubstr("groups is 3"));
  EXPECT_THAT(message([&] { g.conv(v, w, plain); }), testing::HasSubstr("rank 3 or more"));
  EXPECT_THAT(message([&] { g.conv(x, wi, plain); }), testing::HasSubstr("insert a cast"));
  EXPECT_THAT(message([&] { g.conv(dyn_x, w4, plain); }), testing::HasSubstr("run time"));
  EXPECT_THAT(message([&] { g.conv(x, w4, bias, plain); }),
              testing::AllOf(testing::HasSubstr("bias"), testing::HasSubstr("f32[6]")));
  kiln::ir::conv_window wide = plain;
  wide.dilations = {5, 5};
  EXPECT_THAT(message([&] { g.conv(x, w4, wide); }), testing::HasSubstr("gives no output"));
  kiln::ir::conv_window odd = plain;
  odd.strides = {1, 1, 1};
  EXPECT_THAT(message([&] { g.conv(x, w4, odd); }), testing::HasSubstr("strides has 3 values"));
  EXPECT_THAT(
      message([&] { g.conv_transpose(x, w, plain); }),
      testing::AllOf(testing::HasSubstr("conv_transpose"), testing::HasSubstr("4 channels")));
}

}  // namespace
