// graph::grid_sample, roi_align and dft on the CPU and on Vulkan, each against a scalar loop in
// double written from its definition here (PyTorch's grid_sample, ONNX's RoiAlign reference, the
// DFT's sum), over every mode and the edges where the definitions branch.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <kiln/executable.hpp>

#include "../support/on_device.hpp"

using namespace kiln;

namespace {

class GraphSampling : public ref::on_device {};

KILN_ON_BOTH_DEVICES(GraphSampling);

// Values that repeat no pattern a wrong stride could match.
std::vector<float> wave(std::size_t n, double f, double scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(scale * std::sin(f * double(i) + 0.37 * double(i % 7)));
  return v;
}

// PyTorch's grid_sample, one output element at a time.
struct grid_reference {
  const std::vector<float>& x;
  std::int64_t c, h, w;
  std::string mode, padding;
  bool align;

  double unnormalize(double v, std::int64_t size) const {
    return align ? (v + 1) / 2 * double(size - 1) : ((v + 1) * double(size) - 1) / 2;
  }
  double reflect(double v, double twice_low, double twice_high) const {
    if (twice_low == twice_high) return 0;
    const double low = twice_low / 2, span = (twice_high - twice_low) / 2;
    v = std::fabs(v - low);
    const double extra = std::fmod(v, span);
    const auto flips = static_cast<std::int64_t>(std::floor(v / span));
    return flips % 2 == 0 ? extra + low : span - extra + low;
  }
  double padded(double v, std::int64_t size) const {
    if (padding == "border") return std::clamp(v, 0.0, double(size - 1));
    if (padding == "reflection") {
      v = align ? reflect(v, 0, 2 * double(size - 1)) : reflect(v, -1, 2 * double(size) - 1);
      return std::clamp(v, 0.0, double(size - 1));
    }
    return v;
  }
  double pixel(std::int64_t n, std::int64_t ch, std::int64_t iy, std::int64_t ix) const {
    if (ix < 0 || ix >= w || iy < 0 || iy >= h) return 0;
    return x[static_cast<std::size_t>(((n * c + ch) * h + iy) * w + ix)];
  }
  double at(std::int64_t n, std::int64_t ch, double gx, double gy) const {
    double ix = unnormalize(gx, w), iy = unnormalize(gy, h);
    if (mode == "bicubic") {
      const double a = -0.75;
      auto weights = [&](double t) {
        auto near = [&](double s) { return ((a + 2) * s - (a + 3)) * s * s + 1; };
        auto far = [&](double s) { return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a; };
        return std::vector<double>{far(t + 1), near(t), near(1 - t), far(2 - t)};
      };
      const double fx = std::floor(ix), fy = std::floor(iy);
      const auto wx = weights(ix - fx), wy = weights(iy - fy);
      double sum = 0;
      for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 4; ++i) {
          const double px = padded(fx - 1 + i, w), py = padded(fy - 1 + j, h);
          sum += wx[static_cast<std::size_t>(i)] * wy[static_cast<std::size_t>(j)] *
                 pixel(n, ch, static_cast<std::int64_t>(py), static_cast<std::int64_t>(px));
        }
      return sum;
    }
    ix = padded(ix, w);
    iy = padded(iy, h);
    if (mode == "nearest")
      return pixel(n, ch, static_cast<std::int64_t>(std::nearbyint(iy)),
                   static_cast<std::int64_t>(std::nearbyint(ix)));
    const auto x0 = static_cast<std::int64_t>(std::floor(ix)),
               y0 = static_cast<std::int64_t>(std::floor(iy));
    const double rx = ix - double(x0), ry = iy - double(y0);
    return pixel(n, ch, y0, x0) * (1 - rx) * (1 - ry) + pixel(n, ch, y0, x0 + 1) * rx * (1 - ry) +
           pixel(n, ch, y0 + 1, x0) * (1 - rx) * ry + pixel(n, ch, y0 + 1, x0 + 1) * rx * ry;
  }
};

// Every mode, padding and corner convention, the grid reaching past the image by up to 1.8
// widths on each side (reflections of several flips), and a 1-pixel-wide image. Vulkan runs four
// of the combinations (each mode and padding once): the composite is the same graph on both
// devices, and lavapipe takes seconds to compile each one.
TEST_P(GraphSampling, GridSampleAsPyTorchDefinesIt) {
  struct combination {
    const char* mode;
    const char* padding;
    bool align;
    std::int64_t w;
  };
  std::vector<combination> combinations = {{"bilinear", "zeros", false, 5},
                                           {"nearest", "border", true, 5},
                                           {"bicubic", "reflection", false, 5},
                                           {"bilinear", "reflection", true, 1}};
  if (!GetParam()) {
    combinations.clear();
    for (std::int64_t w : {5, 1})
      for (const char* mode : {"bilinear", "nearest", "bicubic"})
        for (const char* padding : {"zeros", "border", "reflection"})
          for (bool align : {false, true}) combinations.push_back({mode, padding, align, w});
  }
  for (const auto& [mode, padding, align, w] : combinations) {
    SCOPED_TRACE(std::string(mode) + " " + padding + (align ? " align_corners" : "") + " W " +
                 std::to_string(w));
    const std::int64_t n = 2, c = 3, h = 4, ho = 3, wo = 7;
    const auto x = wave(static_cast<std::size_t>(n * c * h * w), 0.9, 2.0);
    const auto grid = wave(static_cast<std::size_t>(n * ho * wo * 2), 1.3, 2.8);
    graph g;
    auto xv = g.input("x", dtype::f32, {n, c, h, w});
    auto gv = g.input("grid", dtype::f32, {n, ho, wo, 2});
    g.output("y", g.grid_sample(xv, gv, mode, padding, align));
    std::vector<float> y(static_cast<std::size_t>(n * c * ho * wo));
    compile(g).run({tensor_ref(x.data(), dtype::f32, {n, c, h, w}),
                    tensor_ref(grid.data(), dtype::f32, {n, ho, wo, 2})},
                   {tensor_ref(y.data(), dtype::f32, {n, c, ho, wo})}, dev());
    const grid_reference ref{x, c, h, w, mode, padding, align};
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t ch = 0; ch < c; ++ch)
        for (std::int64_t i = 0; i < ho * wo; ++i) {
          const auto at = static_cast<std::size_t>((b * ho * wo + i) * 2);
          const double want = ref.at(b, ch, grid[at], grid[at + 1]);
          ASSERT_NEAR(y[static_cast<std::size_t>((b * c + ch) * ho * wo + i)], want,
                      2e-5 * (1 + std::fabs(want)))
              << "n " << b << " c " << ch << " cell " << i;
        }
  }
  graph bad;
  auto x = bad.input("x", dtype::f32, {1, 1, 4, 4});
  EXPECT_THROW(bad.grid_sample(x, bad.input("g", dtype::f32, {1, 2, 2, 3})), kiln::error);
  EXPECT_THROW(bad.grid_sample(x, bad.input("h", dtype::f32, {1, 2, 2, 2}), "area"), kiln::error);
  EXPECT_THROW(bad.grid_sample(x, bad.input("i", dtype::f32, {1, 2, 2, 2}), "bilinear", "wrap"),
               kiln::error);
}

// ONNX's RoiAlign reference (its bilinear rules at the edges, avg and ONNX Runtime's max).
double roi_reference(const std::vector<float>& x, std::int64_t c, std::int64_t h, std::int64_t w,
                     const float* roi, std::int64_t image, std::int64_t ch, std::int64_t py,
                     std::int64_t px, std::int64_t out_h, std::int64_t out_w, std::int64_t s,
                     double scale, bool avg, bool half_pixel) {
  const double off = half_pixel ? 0.5 : 0;
  const double x1 = roi[0] * scale - off, y1 = roi[1] * scale - off;
  double rw = roi[2] * scale - off - x1, rh = roi[3] * scale - off - y1;
  if (!half_pixel) {
    rw = std::max(rw, 1.0);
    rh = std::max(rh, 1.0);
  }
  const double bh = rh / double(out_h), bw = rw / double(out_w);
  double acc = avg ? 0 : -1e300;
  for (std::int64_t iy = 0; iy < s; ++iy)
    for (std::int64_t ix = 0; ix < s; ++ix) {
      double y = y1 + double(py) * bh + (double(iy) + 0.5) * bh / double(s);
      double xx = x1 + double(px) * bw + (double(ix) + 0.5) * bw / double(s);
      double v[4] = {0, 0, 0, 0};
      if (!(y < -1.0 || y > double(h) || xx < -1.0 || xx > double(w))) {
        y = std::max(y, 0.0);
        xx = std::max(xx, 0.0);
        auto yl = static_cast<std::int64_t>(y), xl = static_cast<std::int64_t>(xx);
        std::int64_t yh = yl + 1, xh = xl + 1;
        if (yl >= h - 1) yh = yl = h - 1, y = double(yl);
        if (xl >= w - 1) xh = xl = w - 1, xx = double(xl);
        const double ly = y - double(yl), lx = xx - double(xl);
        auto p = [&](std::int64_t a, std::int64_t b) {
          return double(x[static_cast<std::size_t>(((image * c + ch) * h + a) * w + b)]);
        };
        v[0] = (1 - ly) * (1 - lx) * p(yl, xl);
        v[1] = (1 - ly) * lx * p(yl, xh);
        v[2] = ly * (1 - lx) * p(yh, xl);
        v[3] = ly * lx * p(yh, xh);
      }
      if (avg)
        acc += v[0] + v[1] + v[2] + v[3];
      else
        acc = std::max({acc, v[0], v[1], v[2], v[3]});
    }
  return avg ? acc / double(s * s) : acc;
}

// Rois inside, across the edges, wholly outside and smaller than a pixel; both images; avg and
// max; both pixel conventions; 1 to 3 samples per cell.
TEST_P(GraphSampling, RoiAlignAsOnnxsReference) {
  const std::int64_t n = 2, c = 3, h = 6, w = 7, r = 5, oh = 3, ow = 2;
  const auto x = wave(static_cast<std::size_t>(n * c * h * w), 0.7, 3.0);
  const std::vector<float> rois = {0.5f, 1.f, 5.f,  4.5f, -2.f, -1.f, 3.f,  2.f,  4.f,  3.f,
                                   9.f,  8.f, 20.f, 20.f, 30.f, 25.f, 2.2f, 3.1f, 2.4f, 3.3f};
  const std::vector<std::int64_t> images = {0, 1, 1, 0, 1};
  for (const char* mode : {"avg", "max"})
    for (bool half_pixel : {true, false})
      for (std::int64_t s : {1, 2, 3}) {
        const double scale = s == 2 ? 0.5 : 1.0;
        SCOPED_TRACE(std::string(mode) + (half_pixel ? " half_pixel" : "") + " samples " +
                     std::to_string(s));
        graph g;
        auto xv = g.input("x", dtype::f32, {n, c, h, w});
        auto rv = g.input("rois", dtype::f32, {r, 4});
        auto bv = g.input("batch", dtype::i64, {r});
        g.output("y", g.roi_align(xv, rv, bv, oh, ow, s, scale, mode, half_pixel));
        std::vector<float> y(static_cast<std::size_t>(r * c * oh * ow));
        compile(g).run({tensor_ref(x.data(), dtype::f32, {n, c, h, w}),
                        tensor_ref(rois.data(), dtype::f32, {r, 4}),
                        tensor_ref(images.data(), dtype::i64, {r})},
                       {tensor_ref(y.data(), dtype::f32, {r, c, oh, ow})}, dev());
        for (std::int64_t k = 0; k < r; ++k)
          for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t py = 0; py < oh; ++py)
              for (std::int64_t px = 0; px < ow; ++px) {
                const double want =
                    roi_reference(x, c, h, w, &rois[static_cast<std::size_t>(4 * k)],
                                  images[static_cast<std::size_t>(k)], ch, py, px, oh, ow, s, scale,
                                  std::string(mode) == "avg", half_pixel);
                ASSERT_NEAR(y[static_cast<std::size_t>(((k * c + ch) * oh + py) * ow + px)], want,
                            2e-5 * (1 + std::fabs(want)))
                    << "roi " << k << " c " << ch << " cell " << py << ", " << px;
              }
      }
  graph bad;
  auto x4 = bad.input("x", dtype::f32, {1, 1, 4, 4});
  auto rois4 = bad.input("rois", dtype::f32, {2, 4});
  auto b2 = bad.input("b", dtype::i64, {2});
  EXPECT_THROW(bad.roi_align(x4, rois4, b2, 2, 2, 0), kiln::error);  // adaptive sampling
  EXPECT_THROW(bad.roi_align(x4, rois4, b2, 2, 2, 2, 1.0, "sum"), kiln::error);
  EXPECT_THROW(bad.roi_align(x4, rois4, bad.input("b3", dtype::i64, {3}), 2, 2, 2), kiln::error);
}

// The DFT's sum in double: real and complex signals, the axis first, middle and (counted from
// the end) last, lengths cut and padded, onesided, inverse.
TEST_P(GraphSampling, DftAsItsSum) {
  struct dft_case {
    std::int64_t axis, parts, length;
    bool inverse, onesided;
  };
  const std::int64_t d0 = 3, d1 = 12, d2 = 5;
  for (const dft_case k : {dft_case{1, 1, 0, false, false}, dft_case{1, 2, 0, true, false},
                           dft_case{0, 2, 0, false, false}, dft_case{-2, 1, 7, false, true},
                           dft_case{1, 1, 16, false, true}, dft_case{1, 2, 9, true, false},
                           dft_case{-2, 2, 5, false, false}}) {
    SCOPED_TRACE("axis " + std::to_string(k.axis) + " parts " + std::to_string(k.parts) +
                 " length " + std::to_string(k.length) + (k.inverse ? " inverse" : "") +
                 (k.onesided ? " onesided" : ""));
    const std::int64_t dims[] = {d0, d1, d2};
    const auto x = wave(static_cast<std::size_t>(d0 * d1 * d2 * k.parts), 0.8, 1.5);
    graph g;
    auto xv = g.input("x", dtype::f32, {d0, d1, d2, k.parts});
    auto y = g.dft(xv, k.axis, k.inverse, k.onesided, k.length);
    g.output("y", y);
    const int a = static_cast<int>(k.axis < 0 ? k.axis + 4 : k.axis);
    const std::int64_t n = dims[a], m = k.length == 0 ? n : k.length;
    const std::int64_t bins = k.onesided ? m / 2 + 1 : m;
    std::int64_t out_dims[] = {d0, d1, d2, 2};
    out_dims[a] = bins;
    ASSERT_EQ(g.dims_of(y), shape({out_dims[0], out_dims[1], out_dims[2], 2}));
    std::vector<float> got(static_cast<std::size_t>(out_dims[0] * out_dims[1] * out_dims[2] * 2));
    compile(g).run({tensor_ref(x.data(), dtype::f32, {d0, d1, d2, k.parts})},
                   {tensor_ref(got.data(), dtype::f32, {out_dims[0], out_dims[1], out_dims[2], 2})},
                   dev());
    const double pi = 3.14159265358979323846, sign = k.inverse ? 1 : -1;
    for (std::int64_t i0 = 0; i0 < out_dims[0]; ++i0)
      for (std::int64_t i1 = 0; i1 < out_dims[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < out_dims[2]; ++i2) {
          std::int64_t at[] = {i0, i1, i2};
          const std::int64_t f = at[a];
          double re = 0, im = 0, size = 0;
          for (std::int64_t j = 0; j < std::min(n, m); ++j) {
            at[a] = j;
            const auto p = static_cast<std::size_t>(((at[0] * d1 + at[1]) * d2 + at[2]) * k.parts);
            const double xr = x[p], xi = k.parts == 2 ? x[p + 1] : 0;
            const double angle = sign * 2 * pi * double(j * f) / double(m);
            re += xr * std::cos(angle) - xi * std::sin(angle);
            im += xr * std::sin(angle) + xi * std::cos(angle);
            size += std::fabs(xr) + std::fabs(xi);
          }
          if (k.inverse) re /= double(m), im /= double(m), size /= double(m);
          const auto o = static_cast<std::size_t>(((i0 * out_dims[1] + i1) * out_dims[2] + i2) * 2);
          ASSERT_NEAR(got[o], re, 1e-5 * (1 + size)) << i0 << ", " << i1 << ", " << i2;
          ASSERT_NEAR(got[o + 1], im, 1e-5 * (1 + size)) << i0 << ", " << i1 << ", " << i2;
        }
  }
  graph bad;
  auto x3 = bad.input("x", dtype::f32, {2, 4, 3});
  EXPECT_THROW(bad.dft(x3), kiln::error);  // the last axis holds 3
  auto x2 = bad.input("y", dtype::f32, {2, 4, 2});
  EXPECT_THROW(bad.dft(x2, 2), kiln::error);  // the parts' axis
  EXPECT_THROW(bad.dft(bad.input("i", dtype::i32, {2, 4, 1})), kiln::error);
}

}  // namespace
