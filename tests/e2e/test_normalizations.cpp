// Normalizations end to end: softmax, log_softmax, reduce_log_sum_exp, layer_norm and rms_norm
// through both doors, each one row group (one dispatch), checked against the tests' own double
// evaluation of ONNX's formulas; reduction epilogues; and row groups run a block of rows at a
// time on the CPU (every path: serial, blocks on threads, a few long rows) with the same bits as
// the regions run one by one. Runs on the default device and, as e2e.cpu.test_normalizations, on
// the CPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string_view>

#include "../support/e2e.hpp"
#include "../support/regions.hpp"

namespace {

using kiln::dtype;
using ref::dims_t;

// The elements of one row along `axes` of dims: calls fn(row, offsets of its elements).
template <class Fn>
void for_each_row(const dims_t& dims, std::uint32_t axes, Fn fn) {
  std::int64_t n = ref::count(dims);
  std::map<std::int64_t, std::vector<std::int64_t>> rows;
  dims_t idx(dims.size());
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rest = i, row = 0;
    for (std::size_t k = dims.size(); k-- > 0;) {
      idx[k] = rest % dims[k];
      rest /= dims[k];
    }
    for (std::size_t k = 0; k < dims.size(); ++k)
      if (!((axes >> k) & 1u)) row = row * dims[k] + idx[k];
    rows[row].push_back(i);
  }
  for (auto& [row, elements] : rows) fn(row, elements);
}

std::vector<double> softmax_ref(const std::vector<float>& x, const dims_t& dims, int axis,
                                bool log) {
  std::vector<double> y(x.size());
  for_each_row(dims, 1u << axis, [&](std::int64_t, const std::vector<std::int64_t>& e) {
    double m = -INFINITY, s = 0;
    for (auto i : e) m = std::max(m, double(x[i]));
    for (auto i : e) s += std::exp(double(x[i]) - m);
    for (auto i : e) y[i] = log ? double(x[i]) - m - std::log(s) : std::exp(double(x[i]) - m) / s;
  });
  return y;
}

// Softmax values are near 1/n: relative error from the exp (a few ulp) and the sum's tree bound.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, double rel,
                  double abs, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < got.size() && reported < 5; ++i) {
    double g = got[i], w = want[i];
    bool ok = std::isnan(w)   ? std::isnan(g)
              : std::isinf(w) ? g == w
                              : std::fabs(g - w) <= rel * std::fabs(w) + abs;
    if (!ok) {
      ++reported;
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", expected " << w;
    }
  }
}

std::vector<float> run1(const kiln::executable& e, const std::vector<float>& x, const dims_t& dims,
                        const dims_t& out_dims, kiln::device* dev = nullptr) {
  ref::buffer<float> in(x), out(static_cast<std::size_t>(ref::count(out_dims)));
  if (dev)
    e.run({ref::view_of(in, dims)}, {ref::view_of(out, out_dims)}, *dev);
  else
    e.run({ref::view_of(in, dims)}, {ref::view_of(out, out_dims)});
  return out.to_vector();
}

const std::vector<dims_t> row_shapes = {{1},        {7},        {4097},     {3, 5},
                                        {70, 1000}, {2, 70001}, {300, 300}, {0, 5},
                                        {5, 0},     {2, 3, 4},  {3, 1, 65}, {6, 5, 4, 3}};

TEST(Normalizations, SoftmaxAndLogSoftmaxEveryAxis) {
  unsigned seed = 1;
  for (bool log : {false, true})
    for (const auto& dims : row_shapes)
      for (int axis = 0; axis < static_cast<int>(dims.size()); ++axis) {
        kiln::graph g;
        auto x = g.input("x", dtype::f32, ref::to_shape(dims));
        g.output("y", log ? g.log_softmax(x, axis) : g.softmax(x, axis - int(dims.size())));
        auto e = kiln::compile(g);
        EXPECT_EQ(e.dispatch_count(), 1);
        auto in = ref::random_data<float>(ref::count(dims), -30, 30, seed++);
        std::string what = std::string(log ? "log_softmax" : "softmax") + ref::dims_text(dims) +
                           " axis " + std::to_string(axis);
        double n = std::max<double>(dims[axis], 2);
        double rel = (std::log2(n) + 8) * 0x1p-23 * 4;
        expect_close(run1(e, in, dims, dims), softmax_ref(in, dims, axis, log), rel,
                     log ? rel * 30 : 1e-30, what);
      }
}

TEST(Normalizations, SoftmaxEdges) {
  // A row of -inf gives NaN (exp(-inf - -inf)), as ONNX's reference; +inf and NaN propagate;
  // large values do not overflow.
  dims_t dims = {4, 3};
  std::vector<float> x = {-INFINITY, -INFINITY, -INFINITY, 1e30f, 1e30f, 0,
                          INFINITY,  1,         2,         NAN,   1,     2};
  kiln::graph g;
  auto in = g.input("x", dtype::f32, {4, 3});
  g.output("y", g.softmax(in));
  auto y = run1(kiln::compile(g), x, dims, dims);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[i]));
  EXPECT_EQ(y[3], 0.5f);
  EXPECT_EQ(y[4], 0.5f);
  EXPECT_EQ(y[5], 0.0f);
  for (int i = 6; i < 12; ++i) EXPECT_TRUE(std::isnan(y[i]));  // inf - inf in the sum, and NaN
}

TEST(Normalizations, ReduceLogSumExp) {
  unsigned seed = 100;
  for (const auto& dims : std::vector<dims_t>{{}, {0}, {7}, {4097}, {3, 5}, {2, 3, 4}, {5, 0}})
    for (std::uint32_t axes = 0; axes < (1u << dims.size()); ++axes)
      for (bool keepdims : {true, false}) {
        kiln::graph g;
        auto x = g.input("x", dtype::f32, ref::to_shape(dims));
        std::vector<std::int64_t> list;
        for (std::size_t i = 0; i < dims.size(); ++i)
          if ((axes >> i) & 1u) list.push_back(static_cast<std::int64_t>(i));
        g.output("y", g.reduce_log_sum_exp(x, list, keepdims));
        auto e = kiln::compile(g);
        EXPECT_LE(e.dispatch_count(), 1);
        std::uint32_t all = axes == 0 ? (1u << dims.size()) - 1 : axes;
        dims_t out_dims;
        for (std::size_t i = 0; i < dims.size(); ++i)
          if (!((all >> i) & 1u))
            out_dims.push_back(dims[i]);
          else if (keepdims)
            out_dims.push_back(1);
        // Values up to 1000: exp overflows f32 (and double) without the maximum taken out.
        auto in = ref::random_data<float>(ref::count(dims), -1000, 1000, seed++);
        std::vector<double> want;
        for_each_row(dims, all, [&](std::int64_t, const std::vector<std::int64_t>& el) {
          double m = -INFINITY, s = 0;
          for (auto i : el) m = std::max(m, double(in[i]));
          for (auto i : el) s += std::exp(double(in[i]) - m);
          want.push_back(el.empty() ? -INFINITY : m + std::log(s));
        });
        if (ref::count(dims) == 0) want.assign(ref::count(out_dims), -INFINITY);
        expect_close(run1(e, in, dims, out_dims), want, 1e-6, 1e-4,
                     "reduce_log_sum_exp" + ref::dims_text(dims) + " axes " + std::to_string(axes) +
                         (keepdims ? " keepdims" : ""));
      }
}

TEST(Normalizations, ReduceLogSumExpOfInfinities) {
  // Infinite rows: -inf stays -inf, +inf gives +inf.
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {2, 2});
  g.output("y", g.reduce_log_sum_exp(x, {1}, false));
  auto y = run1(kiln::compile(g), {-INFINITY, -INFINITY, INFINITY, 0}, {2, 2}, {2});
  EXPECT_EQ(y[0], -INFINITY);
  EXPECT_EQ(y[1], INFINITY);
}

// layer_norm over the axes from `axis`, or rms_norm (no mean taken out, no bias).
std::vector<double> norm_ref(const std::vector<float>& x, const dims_t& dims, int axis,
                             const std::vector<float>& scale, const std::vector<float>* bias,
                             double eps, bool rms) {
  std::uint32_t axes = 0;
  for (int i = axis; i < static_cast<int>(dims.size()); ++i) axes |= 1u << i;
  std::vector<double> y(x.size());
  for_each_row(dims, axes, [&](std::int64_t, const std::vector<std::int64_t>& e) {
    double mean = 0, var = 0;
    if (!rms) {
      for (auto i : e) mean += x[i];
      mean /= double(e.size());
    }
    for (auto i : e) var += (x[i] - mean) * (x[i] - mean);
    var /= double(e.size());
    for (std::size_t k = 0; k < e.size(); ++k) {
      // Elements of a row run through the normalized axes in order: k is the index into scale.
      y[e[k]] = (x[e[k]] - mean) / std::sqrt(var + eps) * scale[k] + (bias ? (*bias)[k] : 0);
    }
  });
  return y;
}

TEST(Normalizations, LayerNormAndRmsNorm) {
  unsigned seed = 200;
  for (bool rms : {false, true})
    for (const auto& dims : std::vector<dims_t>{{7}, {3, 5}, {70, 1000}, {2, 3, 4}, {300, 768}})
      for (int axis = 0; axis < static_cast<int>(dims.size()); ++axis)
        for (bool with_bias : {true, false}) {
          if (rms && with_bias) continue;
          dims_t norm_dims(dims.begin() + axis, dims.end());
          kiln::graph g;
          auto x = g.input("x", dtype::f32, ref::to_shape(dims));
          auto s = g.input("scale", dtype::f32, ref::to_shape(norm_dims));
          double eps = 1e-3;
          if (rms)
            g.output("y", g.rms_norm(x, s, axis, eps));
          else if (with_bias)
            g.output("y", g.layer_norm(x, s, g.input("bias", dtype::f32, ref::to_shape(norm_dims)),
                                       axis - int(dims.size()), eps));
          else
            g.output("y", g.layer_norm(x, s, axis, eps));
          auto e = kiln::compile(g);
          EXPECT_EQ(e.dispatch_count(), 1);
          auto in = ref::random_data<float>(ref::count(dims), -3, 5, seed++);
          auto sc = ref::random_data<float>(ref::count(norm_dims), 0.5, 2, seed++);
          auto bi = ref::random_data<float>(ref::count(norm_dims), -1, 1, seed++);
          ref::buffer<float> xb(in), sb(sc), bb(bi), out(in.size());
          std::vector<kiln::tensor_ref> args = {ref::view_of(xb, dims),
                                                ref::view_of(sb, norm_dims)};
          if (with_bias && !rms) args.push_back(ref::view_of(bb, norm_dims));
          std::vector<kiln::tensor_ref> results = {ref::view_of(out, dims)};
          e.run(args, results);
          // Normalized values are a few units: each of the mean, the variance and the scaling
          // carries the f32 sums' tree bound.
          double n = double(ref::count(norm_dims));
          double tol = 16 * (std::log2(n) + 8) * 0x1p-23;
          expect_close(out.to_vector(),
                       norm_ref(in, dims, axis, sc, with_bias ? &bi : nullptr, eps, rms), tol, tol,
                       std::string(rms ? "rms_norm" : "layer_norm") + ref::dims_text(dims) +
                           " axis " + std::to_string(axis) + (with_bias ? " with bias" : ""));
        }
}

// The DSL door: the same graphs, one dispatch each (static_assert), the same results.
TEST(Normalizations, DslDoor) {
  using kiln::tensor;
  constexpr auto sm = kiln::fn<tensor<float, 70, 1000>>([](auto x) { return kiln::softmax(x); });
  static_assert(sm.plan.dispatch_count() == 1);
  constexpr auto lsm =
      kiln::fn<tensor<float, 70, 1000>>([](auto x) { return kiln::log_softmax<0>(x); });
  static_assert(lsm.plan.dispatch_count() == 1);
  constexpr auto ln = kiln::fn<tensor<float, 70, 1000>, tensor<float, 1000>, tensor<float, 1000>>(
      [](auto x, auto s, auto b) { return kiln::layer_norm(x, s, b, 1e-3); });
  static_assert(ln.plan.dispatch_count() == 1);
  constexpr auto rn = kiln::fn<tensor<float, 70, 1000>, tensor<float, 1000>>(
      [](auto x, auto s) { return kiln::rms_norm<-1>(x, s, 1e-3); });
  static_assert(rn.plan.dispatch_count() == 1);
  constexpr auto lse =
      kiln::fn<tensor<float, 70, 1000>>([](auto x) { return kiln::reduce_log_sum_exp<1>(x); });
  static_assert(std::is_same_v<std::tuple_element_t<0, decltype(lse)::result_values>,
                               kiln::value<float, kiln::extents<70>>>);
  static_assert(lse.plan.dispatch_count() == 1);
  // A softmax written by hand fuses the same way: one dispatch, no transient beyond the
  // per-row max and sum.
  constexpr auto by_hand = kiln::fn<tensor<float, 70, 1000>>([](auto x) {
    auto e = kiln::exp(x - kiln::reduce_max<1>(x, kiln::keepdims));
    return e / kiln::reduce_sum<1>(e, kiln::keepdims);
  });
  static_assert(by_hand.plan.dispatch_count() == 1);
  static_assert(by_hand.plan.transient_bytes() == 2 * 512);

  dims_t dims = {70, 1000};
  auto in = ref::random_data<float>(70000, -10, 10, 7);
  auto sc = ref::random_data<float>(1000, 0.5, 2, 8);
  auto bi = ref::random_data<float>(1000, -1, 1, 9);
  ref::buffer<float> xb(in), sb(sc), bb(bi), y(70000), y2(70000), y3(70000), y4(70000), y5(70);
  sm(ref::view_of(xb, dims), kiln::into(ref::view_of(y, dims)));
  by_hand(ref::view_of(xb, dims), kiln::into(ref::view_of(y2, dims)));
  EXPECT_EQ(y.to_vector(), y2.to_vector()) << "a softmax by hand and kiln::softmax differ";
  double rel = (std::log2(1000.0) + 8) * 0x1p-23 * 4;
  expect_close(y.to_vector(), softmax_ref(in, dims, 1, false), rel, 1e-30, "dsl softmax");
  lsm(ref::view_of(xb, dims), kiln::into(ref::view_of(y3, dims)));
  expect_close(y3.to_vector(), softmax_ref(in, dims, 0, true), rel, rel * 30, "dsl log_softmax");
  ln(ref::view_of(xb, dims), ref::view_of(sb, {1000}), ref::view_of(bb, {1000}),
     kiln::into(ref::view_of(y4, dims)));
  double tol = 16 * (std::log2(1000.0) + 8) * 0x1p-23;
  expect_close(y4.to_vector(), norm_ref(in, dims, 1, sc, &bi, 1e-3, false), tol, tol,
               "dsl layer_norm");
  lse(ref::view_of(xb, dims), kiln::into(ref::view_of(y5, {70})));
  std::vector<double> want;
  for_each_row(dims, 2u, [&](std::int64_t, const std::vector<std::int64_t>& el) {
    double m = -INFINITY, s = 0;
    for (auto i : el) m = std::max(m, double(in[i]));
    for (auto i : el) s += std::exp(double(in[i]) - m);
    want.push_back(m + std::log(s));
  });
  expect_close(y5.to_vector(), want, 1e-6, 1e-5, "dsl reduce_log_sum_exp");
}

// f16 and bf16 are normalized in f32 and rounded once: within half an ulp of the storage type
// (plus the f32 bound) of the exact result.
TEST(Normalizations, NarrowFloats) {
  dims_t dims = {33, 257};
  auto in = ref::random_data<float>(33 * 257, -8, 8, 11);
  for (dtype t : {dtype::f16, dtype::bf16}) {
    kiln::graph g;
    auto x = g.input("x", t, {33, 257});
    g.output("y", g.softmax(x, 1));
    auto e = kiln::compile(g);
    EXPECT_EQ(e.dispatch_count(), 1);
    std::vector<double> want;
    // Half an ulp relative, and half the spacing of f16's subnormals absolute.
    double ulp = t == dtype::f16 ? 0x1p-11 : 0x1p-8, tiny = t == dtype::f16 ? 0x1p-25 : 0;
    auto check = [&](auto tag) {
      using T = decltype(tag);
      ref::buffer<T> xb(33 * 257), yb(33 * 257);
      std::vector<float> rounded(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) {
        xb[i] = T(in[i]);
        rounded[i] = float(xb[i]);
      }
      e.run({kiln::tensor_ref(static_cast<void*>(xb.data()), t, ref::to_shape(dims))},
            {kiln::tensor_ref(static_cast<void*>(yb.data()), t, ref::to_shape(dims))});
      auto w = softmax_ref(rounded, dims, 1, false);
      std::vector<float> got(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) got[i] = float(yb[i]);
      expect_close(got, w, ulp + 1e-5, tiny, "softmax of " + std::string(kiln::name(t)));
    };
    if (t == dtype::f16)
      check(kiln::float16{});
    else
      check(kiln::bfloat16{});
  }
}

// Epilogues: elementwise ops over a reduction's result run in its row group.
TEST(Normalizations, ReductionEpilogue) {
  for (bool keepdims : {true, false}) {
    kiln::graph g;
    auto x = g.input("x", dtype::f32, {300, 301});
    auto b = g.input("b", dtype::f32, {keepdims ? 300 : 1, 1});
    auto s = g.reduce_sum(x, {1}, keepdims);
    g.output("y", keepdims ? g.relu(g.add(s, b)) : g.relu(s));
    auto e = kiln::compile(g);
    EXPECT_EQ(e.dispatch_count(), 1) << kiln::compiler::print(e.plan());
    auto in = ref::random_data<float>(300 * 301, -1, 1, 21);
    auto bias = ref::random_data<float>(300, -3, 3, 22);
    ref::buffer<float> xb(in), bb(bias), y(300);
    dims_t out_dims = keepdims ? dims_t{300, 1} : dims_t{300};
    std::vector<kiln::tensor_ref> args = {ref::view_of(xb, {300, 301})};
    if (keepdims)
      args.push_back(ref::view_of(bb, {300, 1}));
    else
      args.push_back(ref::view_of(bb, {1, 1}));
    std::vector<kiln::tensor_ref> results = {ref::view_of(y, out_dims)};
    e.run(args, results);
    for (int r = 0; r < 300; ++r) {
      double sum = 0, scale = 0;
      for (int c = 0; c < 301; ++c) {
        sum += in[r * 301 + c];
        scale += std::fabs(in[r * 301 + c]);
      }
      double want = std::max(0.0, sum + (keepdims ? bias[r] : 0));
      EXPECT_NEAR(y[r], want, 4 * (std::log2(301.0) + 8) * 0x1p-23 * (scale + 3)) << r;
    }
  }
}

// On Vulkan a row group whose reduced axes are the trailing ones is one kernel: a workgroup per
// four rows runs the group's regions over those rows in turn (softmax's max, sum and divide;
// layer_norm's mean, variance, per-row scale and output). Over other axes its regions are one
// kernel each. Results against the reference either way: row counts of every remainder modulo
// four, rows shorter and longer than a workgroup, one element per row.
TEST(Normalizations, VulkanRowGroupOverTrailingAxesIsOneKernel) {
  if (kiln::device::default_device().type() == kiln::device::kind::cpu)
    GTEST_SKIP() << "a Vulkan test (e2e.cpu runs the suite on the CPU)";
  auto vk = kiln::device::vulkan();
  unsigned seed = 500;
  for (const dims_t& dims :
       std::vector<dims_t>{{1, 3}, {5, 7}, {6, 1}, {7, 1000}, {9, 4097}, {2, 3, 5}, {4, 2, 8}})
    for (int axis : {static_cast<int>(dims.size()) - 1, 0})
      for (bool layer_norm : {false, true}) {
        SCOPED_TRACE(ref::dims_text(dims) + " axis " + std::to_string(axis) +
                     (layer_norm ? " layer_norm" : " softmax"));
        kiln::graph g;
        auto x = g.input("x", dtype::f32, ref::to_shape(dims));
        dims_t norm_dims(dims.begin() + axis, dims.end());
        auto s = g.input("scale", dtype::f32, ref::to_shape(norm_dims));
        if (layer_norm)
          g.output("y", g.layer_norm(x, s, axis, 1e-3));
        else
          g.output("y", g.mul(g.softmax(x, axis), s));
        auto e = kiln::compile(g);
        auto in = ref::random_data<float>(ref::count(dims), -3, 5, seed++);
        auto sc = ref::random_data<float>(ref::count(norm_dims), 0.5, 2, seed++);
        ref::buffer<float> xb(in), sb(sc), out(in.size());
        e.run({ref::view_of(xb, dims), ref::view_of(sb, norm_dims)}, {ref::view_of(out, dims)}, vk);
        // layer_norm normalizes every axis from `axis` on: trailing however many there are.
        bool trailing = layer_norm || axis == static_cast<int>(dims.size()) - 1;
        auto kernels = e.kernels();
        // The device plan computes softmax's row-local exp(x - max) where it is read: the region
        // that writes it is not in the kernel.
        auto regions = static_cast<std::uint32_t>(e.plan().regions.size());
        for (std::size_t t = 0; t < e.plan().transients.size(); ++t)
          regions -= e.plan().row_local(static_cast<std::int32_t>(t)) ? 1 : 0;
        if (!layer_norm && trailing && regions > 1) {
          EXPECT_EQ(regions, 3u);  // max, sum, divide
        }
        if (regions == 1) {  // a size-1 axis folded the reductions away
          EXPECT_EQ(kernels.size(), 1u);
        } else if (trailing) {
          ASSERT_EQ(kernels.size(), 1u);
          EXPECT_EQ(kernels[0].regions, regions);
        } else {
          EXPECT_EQ(kernels.size(), regions);
          for (const auto& k : kernels) EXPECT_EQ(k.regions, 1u);
        }
        std::vector<double> want;
        if (layer_norm) {
          want = norm_ref(in, dims, axis, sc, nullptr, 1e-3, false);
        } else {
          want = softmax_ref(in, dims, axis, false);
          for (std::size_t i = 0; i < want.size(); ++i) want[i] *= sc[i % sc.size()];
        }
        double n = double(ref::count(norm_dims));
        double tol = 16 * (std::log2(n) + 8) * 0x1p-23;
        expect_close(out.to_vector(), want, tol, layer_norm ? tol : 1e-9, "on Vulkan");
      }
}

// Row groups on the CPU give the bits of their regions run one by one (the interpreter runs a
// plan's regions alone when told to run only some of them: here, every region of the group in
// turn, the row-local exp(x - max) kept in the arena between them), whatever the path: small
// (serial), many rows (blocks on threads), few long rows.
TEST(Normalizations, RowGroupsMatchRegionByRegion) {
  for (const dims_t& dims : std::vector<dims_t>{{3, 5}, {200, 1000}, {2, 70001}, {1000, 3, 40}}) {
    kiln::graph g;
    auto x = g.input("x", dtype::f32, ref::to_shape(dims));
    g.output("y", g.softmax(x, 1));
    g.output("z", g.relu(g.reduce_sum(x, {1}, false)));
    auto e = kiln::compile(g);
    auto in = ref::random_data<float>(ref::count(dims), -5, 5, 31);
    dims_t z_dims = dims;
    z_dims.erase(z_dims.begin() + 1);
    auto cpu = kiln::device::cpu();
    ref::buffer<float> xb(in), y(in.size()), z(ref::count(z_dims));
    e.run({ref::view_of(xb, dims)}, {ref::view_of(y, dims), ref::view_of(z, z_dims)}, cpu);
    // The same plan's regions one at a time: run_plan with `only` set per region.
    ref::buffer<float> y1(in.size()), z1(ref::count(z_dims));
    ref::run_region_by_region(
        e.plan(), {{xb.data(), ref::to_shape(dims)}},
        {{y1.data(), ref::to_shape(dims)}, {z1.data(), ref::to_shape(z_dims)}});
    EXPECT_EQ(y.to_vector(), y1.to_vector()) << ref::dims_text(dims);
    EXPECT_EQ(z.to_vector(), z1.to_vector()) << ref::dims_text(dims);
    EXPECT_GT(z.to_vector()[0] + y.to_vector()[0], 0.0f);
  }
}

// layer_norm's row group ends with an epilogue over the rows themselves (the per-row scale,
// flat_walks), which one row walks too (every operand steps by 0 there): the bits of the regions
// run one by one and the reference, from one row to many, small calls repeated (the runtime keeps
// its lists from call to call).
TEST(Normalizations, LayerNormRowGroupsMatchRegionByRegion) {
  for (const dims_t& dims : std::vector<dims_t>{{1, 768}, {1, 5}, {3, 5}, {1, 1}, {200, 1000}}) {
    kiln::graph g;
    auto x = g.input("x", dtype::f32, ref::to_shape(dims));
    auto s = g.input("scale", dtype::f32, {dims[1]});
    g.output("y", g.layer_norm(x, s, 1, 1e-3));
    auto e = kiln::compile(g);
    auto in = ref::random_data<float>(ref::count(dims), -3, 5, 61);
    auto sc = ref::random_data<float>(dims[1], 0.5, 2, 62);
    ref::buffer<float> xb(in), sb(sc), y1(in.size());
    ref::run_region_by_region(e.plan(), {{xb.data(), ref::to_shape(dims)}, {sb.data(), {dims[1]}}},
                              {{y1.data(), ref::to_shape(dims)}});
    const double tol = 16 * (std::log2(double(dims[1])) + 8) * 0x1p-23;
    auto cpu = kiln::device::cpu();
    for (int call = 0; call < 3; ++call) {
      ref::buffer<float> y(in.size());
      e.run({ref::view_of(xb, dims), ref::view_of(sb, {dims[1]})}, {ref::view_of(y, dims)}, cpu);
      EXPECT_EQ(y.to_vector(), y1.to_vector()) << ref::dims_text(dims) << " call " << call;
      expect_close(y.to_vector(), norm_ref(in, dims, 1, sc, nullptr, 1e-3, false), tol, tol,
                   ref::dims_text(dims));
    }
  }
}

// A row group whose operands walk the rows affinely runs each row with a few multiplies
// (row_walks); one that reads an operand broadcast over some of the rows only ([a, 1, c] over
// [a, b, c]) goes through the collapsed space. Both against the reference, and with the bits of
// the regions run one by one.
TEST(Normalizations, RowWalksAndTheirFallback) {
  for (const dims_t& dims : std::vector<dims_t>{{40, 3, 50}, {2, 5, 4097}, {300, 2, 64}}) {
    for (bool uneven : {false, true}) {
      dims_t w_dims = {dims[0], uneven ? 1 : dims[1], dims[2]};
      kiln::graph g;
      auto x = g.input("x", dtype::f32, ref::to_shape(dims));
      auto w = g.input("w", dtype::f32, ref::to_shape(w_dims));
      g.output("y", g.softmax(g.add(x, w), 2));
      auto e = kiln::compile(g);
      EXPECT_EQ(e.dispatch_count(), 1) << kiln::compiler::print(e.plan());
      auto in = ref::random_data<float>(ref::count(dims), -5, 5, 51);
      auto ws = ref::random_data<float>(ref::count(w_dims), -2, 2, 52);
      std::vector<float> sum(in.size());
      for (std::int64_t i = 0; i < ref::count(dims); ++i) {
        std::int64_t c = i % dims[2], b = i / dims[2] % dims[1], a = i / (dims[1] * dims[2]);
        sum[i] = in[i] + ws[(a * w_dims[1] + (uneven ? 0 : b)) * dims[2] + c];
      }
      ref::buffer<float> xb(in), wb(ws), y(in.size()), y1(in.size());
      std::vector<kiln::tensor_ref> args = {ref::view_of(xb, dims), ref::view_of(wb, w_dims)};
      std::vector<kiln::tensor_ref> results = {ref::view_of(y, dims)};
      auto cpu = kiln::device::cpu();
      e.run(args, results, cpu);
      std::string what =
          "softmax(x + w) for x " + ref::dims_text(dims) + ", w " + ref::dims_text(w_dims);
      expect_close(y.to_vector(), softmax_ref(sum, dims, 2, false), 1e-5, 1e-30, what);
      // The same plan's regions one at a time, each over all its rows.
      ref::run_region_by_region(
          e.plan(), {{xb.data(), ref::to_shape(dims)}, {wb.data(), ref::to_shape(w_dims)}},
          {{y1.data(), ref::to_shape(dims)}});
      EXPECT_EQ(y.to_vector(), y1.to_vector()) << what;
    }
  }
}

// A compiled row function folds its sum, mean, max or min of an f32 operand in registers
// (region_kernel::fold) in the runtime reducer's order: the DSL's kernels give the interpreter's
// bits (whose tile programs store the operand for the reducer to fold), for rows with a partial
// block of 256, a partial batch, several pieces of 4096, and NaN.
TEST(Normalizations, CompiledFoldsGiveTheReducersBits) {
  using kiln::tensor;
  constexpr auto f =
      kiln::fn<tensor<float, kiln::dyn, kiln::dyn>, tensor<float, kiln::dyn>>([](auto x, auto w) {
        auto v = x * w;
        auto c = v - kiln::reduce_max<1>(v, kiln::keepdims);
        auto m = kiln::reduce_mean<1>(c * c, kiln::keepdims);
        auto n = kiln::reduce_min<1>(c + m, kiln::keepdims);
        auto t = kiln::reduce_sum<1>(c - n, kiln::keepdims);
        return c / (m + 1.0f) + n * t;
      });
  static_assert(f.plan.dispatch_count() == 1);
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {kiln::dyn, kiln::dyn});
  auto w = g.input("w", dtype::f32, {kiln::dyn});
  auto v = g.mul(x, w);
  auto c = g.sub(v, g.reduce_max(v, {1}, true));
  auto m = g.reduce_mean(g.mul(c, c), {1}, true);
  auto n = g.reduce_min(g.add(c, m), {1}, true);
  auto t = g.reduce_sum(g.sub(c, n), {1}, true);
  g.output("y", g.add(g.div(c, g.add(m, g.constant(1.0))), g.mul(n, t)));
  auto e = kiln::compile(g);
  auto cpu = kiln::device::cpu();
  for (const dims_t& dims : std::vector<dims_t>{{300, 1001}, {5, 7}, {3, 9000}, {64, 256}}) {
    auto in = ref::random_data<float>(ref::count(dims), -3, 3, 61);
    auto ws = ref::random_data<float>(dims[1], 0.5, 2, 62);
    in[dims[1] + 3] = NAN;  // row 1
    ref::buffer<float> xb(in), wb(ws), y(in.size()), y1(in.size());
    f.on(cpu)(ref::view_of(xb, dims), ref::view_of(wb, {dims[1]}),
              kiln::into(ref::view_of(y, dims)));
    e.run({ref::view_of(xb, dims), ref::view_of(wb, {dims[1]})}, {ref::view_of(y1, dims)}, cpu);
    auto a = y.to_vector(), b = y1.to_vector();
    // The same bits, NaN for NaN (a NaN's payload is the hardware's).
    std::size_t differ = 0;
    for (std::size_t k = 0; k < a.size(); ++k)
      differ +=
          !(std::isnan(a[k]) && std::isnan(b[k])) && std::memcmp(&a[k], &b[k], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << ref::dims_text(dims);
    // Row 0 by hand, in double: the fold's tree bound on each reduction.
    double vmax = -INFINITY, mean = 0, mn = INFINITY, sum = 0;
    for (std::int64_t k = 0; k < dims[1]; ++k) vmax = std::max(vmax, double(in[k]) * ws[k]);
    auto cv = [&](std::int64_t k) { return double(in[k]) * ws[k] - vmax; };
    for (std::int64_t k = 0; k < dims[1]; ++k) mean += cv(k) * cv(k) / double(dims[1]);
    for (std::int64_t k = 0; k < dims[1]; ++k) mn = std::min(mn, cv(k) + mean);
    for (std::int64_t k = 0; k < dims[1]; ++k) sum += cv(k) - mn;
    for (std::int64_t k = 0; k < dims[1]; ++k) {
      double want = cv(k) / (mean + 1) + mn * sum;
      EXPECT_NEAR(a[k], want, 1e-4 * (std::fabs(mn * sum) + 1)) << ref::dims_text(dims) << " " << k;
    }
    EXPECT_TRUE(std::isnan(a[dims[1]])) << "NaN propagates through the max of row 1";
  }
}

// A reduction that is its own region folds in its row function too, piece by piece of 4096 along
// the contiguous dim, also where reduced axes lie outside it: the interpreter's bits, and the
// double reference.
TEST(Normalizations, CompiledFoldsOfLoneReductions) {
  using kiln::tensor;
  constexpr auto sum = kiln::fn<tensor<float, kiln::dyn, kiln::dyn>, tensor<float, kiln::dyn>>(
      [](auto x, auto w) { return kiln::reduce_sum<1>(kiln::exp(x) * w); });
  constexpr auto max = kiln::fn<tensor<float, kiln::dyn, kiln::dyn, kiln::dyn>>(
      [](auto x) { return kiln::reduce_max<0, 2>(x * 2.0f - 1.0f); });
  static_assert(sum.plan.dispatch_count() == 1 && max.plan.dispatch_count() == 1);
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {kiln::dyn, kiln::dyn});
  auto w = g.input("w", dtype::f32, {kiln::dyn});
  g.output("s", g.reduce_sum(g.mul(g.exp(x), w), {1}, false));
  auto sum_graph = kiln::compile(g);
  kiln::graph h;
  auto x3 = h.input("x", dtype::f32, {kiln::dyn, kiln::dyn, kiln::dyn});
  h.output("m", h.reduce_max(h.sub(h.mul(x3, h.constant(2.0)), h.constant(1.0)), {0, 2}, false));
  auto max_graph = kiln::compile(h);
  auto cpu = kiln::device::cpu();
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (const dims_t& dims : std::vector<dims_t>{{300, 1001}, {5, 7}, {3, 9000}, {64, 256}}) {
    auto in = ref::random_data<float>(ref::count(dims), -3, 3, 71);
    auto ws = ref::random_data<float>(dims[1], 0.5, 2, 72);
    ref::buffer<float> xb(in), wb(ws), y(dims[0]), y1(dims[0]);
    sum.on(cpu)(ref::view_of(xb, dims), ref::view_of(wb, {dims[1]}),
                kiln::into(ref::view_of(y, {dims[0]})));
    sum_graph.run({ref::view_of(xb, dims), ref::view_of(wb, {dims[1]})},
                  {ref::view_of(y1, {dims[0]})}, cpu);
    // exp's polynomial fuses multiplies into adds where the instruction set has FMA: the same
    // bits where this file and the runtime's interpreter were built for the same set (not so in
    // e2e.native, a -march=native file against the baseline library).
    if (std::string_view(kiln::cpu::runtime_isa()) == KILN_CPU_ISA_NAME) {
      EXPECT_TRUE(same_bits(y.to_vector(), y1.to_vector())) << ref::dims_text(dims);
    }
    for (std::int64_t r = 0; r < dims[0]; ++r) {
      double want = 0;
      for (std::int64_t k = 0; k < dims[1]; ++k)
        want += std::exp(double(in[r * dims[1] + k])) * ws[k];
      EXPECT_NEAR(y.to_vector()[r], want, 1e-5 * want) << ref::dims_text(dims) << " row " << r;
    }
  }
  for (const dims_t& dims : std::vector<dims_t>{{3, 4, 1001}, {2, 5, 9000}, {1, 3, 7}}) {
    auto in = ref::random_data<float>(ref::count(dims), -3, 3, 73);
    in[5] = NAN;  // in the first kept index's set
    ref::buffer<float> xb(in), y(dims[1]), y1(dims[1]);
    max.on(cpu)(ref::view_of(xb, dims), kiln::into(ref::view_of(y, {dims[1]})));
    max_graph.run({ref::view_of(xb, dims)}, {ref::view_of(y1, {dims[1]})}, cpu);
    auto a = y.to_vector(), b = y1.to_vector();
    EXPECT_TRUE(std::isnan(a[0]) && std::isnan(b[0])) << ref::dims_text(dims);
    a[0] = b[0] = 0;
    EXPECT_TRUE(same_bits(a, b)) << ref::dims_text(dims);
    for (std::int64_t j = 1; j < dims[1]; ++j) {
      double want = -INFINITY;
      for (std::int64_t i = 0; i < dims[0]; ++i)
        for (std::int64_t k = 0; k < dims[2]; ++k)
          want = std::max(want, double(in[(i * dims[1] + j) * dims[2] + k]) * 2 - 1);
      EXPECT_EQ(a[j], float(want)) << ref::dims_text(dims) << " at " << j;
    }
  }
}

// A fold of products keeps the interpreter's bits where the target has FMA (e2e.native): GCC
// fuses a multiply into the add after it by default, and the fold's join may not be that add.
TEST(Normalizations, CompiledFoldsOfProductsAreNotFused) {
  using kiln::tensor;
  constexpr auto f = kiln::fn<tensor<float, kiln::dyn, kiln::dyn>>(
      [](auto x) { return kiln::reduce_sum<1>(x * x); });
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {kiln::dyn, kiln::dyn});
  g.output("s", g.reduce_sum(g.mul(x, x), {1}, false));
  auto e = kiln::compile(g);
  auto cpu = kiln::device::cpu();
  for (const dims_t& dims : std::vector<dims_t>{{64, 1000}, {3, 9000}}) {
    auto in = ref::random_data<float>(ref::count(dims), -3, 3, 74);
    ref::buffer<float> xb(in), y(dims[0]), y1(dims[0]);
    f.on(cpu)(ref::view_of(xb, dims), kiln::into(ref::view_of(y, {dims[0]})));
    e.run({ref::view_of(xb, dims)}, {ref::view_of(y1, {dims[0]})}, cpu);
    auto a = y.to_vector(), b = y1.to_vector();
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << ref::dims_text(dims);
    for (std::int64_t r = 0; r < dims[0]; ++r) {
      double want = 0;
      for (std::int64_t k = 0; k < dims[1]; ++k)
        want += double(in[r * dims[1] + k]) * in[r * dims[1] + k];
      EXPECT_NEAR(a[r], want, 1e-5 * want) << ref::dims_text(dims) << " row " << r;
    }
  }
}

// Row-local values: softmax's exp(x - max), read by the sum and by the divide, is computed once,
// by a region of the row group, and passed to the regions after it through a transient that takes
// no place in the arena (the CPU keeps a block of rows of it; Vulkan computes it again where it is
// read). Against the reference on every CPU path (serial, blocks on threads, a few long rows that
// each region runs whole), with exp(x - max) a result too, and over leading axes (where it is
// not row-local: recomputed).
TEST(Normalizations, RowLocalValuesAreComputedOnce) {
  unsigned seed = 60;
  for (const dims_t& dims : std::vector<dims_t>{{3, 5}, {200, 1000}, {2, 70001}, {40, 3, 50}})
    for (bool exp_too : {false, true}) {
      const int axis = static_cast<int>(dims.size()) - 1;
      SCOPED_TRACE(ref::dims_text(dims) + (exp_too ? " with exp(x - max) a result" : ""));
      kiln::graph g;
      auto x = g.input("x", dtype::f32, ref::to_shape(dims));
      auto shifted = g.exp(g.sub(x, g.reduce_max(x, {axis}, true)));
      g.output("y", g.div(shifted, g.reduce_sum(shifted, {axis}, true)));
      if (exp_too) g.output("e", shifted);
      auto e = kiln::compile(g);
      const auto& p = e.plan();
      EXPECT_EQ(e.dispatch_count(), 1) << kiln::compiler::print(p);
      // One region computes the exp; the others load it from the row-local transient.
      std::int32_t exp_node = -1;
      for (std::size_t id = 0; id < p.graph.nodes.size(); ++id)
        if (p.graph.nodes[id].kind == kiln::ir::op::exp) exp_node = static_cast<std::int32_t>(id);
      ASSERT_GE(exp_node, 0);
      int computing = 0, loading = 0, local = 0;
      for (const auto& r : p.regions)
        if (std::find(r.nodes.begin(), r.nodes.end(), exp_node) != r.nodes.end())
          ++(kiln::compiler::load_slot(p, r, exp_node) < 0 ? computing : loading);
      for (std::size_t t = 0; t < p.transients.size(); ++t)
        if (p.row_local(static_cast<std::int32_t>(t))) {
          ++local;
          EXPECT_EQ(p.transients[t], exp_node);
        }
      EXPECT_EQ(computing, 1) << kiln::compiler::print(p);
      EXPECT_EQ(loading, 2) << kiln::compiler::print(p);
      EXPECT_EQ(local, 1);
      // The arena holds the per-row max and sum only.
      EXPECT_EQ(p.transient_bytes(), 2 * ((ref::count(dims) / dims.back() * 4 + 255) / 256 * 256));

      auto in = ref::random_data<float>(ref::count(dims), -20, 20, seed++);
      ref::buffer<float> xb(in), y(in.size()), ex(in.size());
      std::vector<kiln::tensor_ref> results = {ref::view_of(y, dims)};
      if (exp_too) results.push_back(ref::view_of(ex, dims));
      std::vector<kiln::tensor_ref> args = {ref::view_of(xb, dims)};
      e.run(args, results);
      double tol = 16 * (std::log2(double(dims.back())) + 8) * 0x1p-23;
      expect_close(y.to_vector(), softmax_ref(in, dims, axis, false), tol, 1e-30, "softmax");
      if (!exp_too) continue;
      std::vector<double> want(in.size());
      for_each_row(dims, 1u << axis, [&](std::int64_t, const std::vector<std::int64_t>& row) {
        float m = -INFINITY;
        for (auto i : row) m = std::max(m, in[i]);
        // The difference rounded to f32, as the graph computes it, then exp within its bound.
        for (auto i : row) want[i] = std::exp(double(in[i] - m));
      });
      expect_close(ex.to_vector(), want, 4 * 0x1p-23, 1e-30, "exp(x - max)");
    }
  // Over a leading axis the value is not row-local (a block of rows is not a block of memory):
  // each region that reads it computes it.
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {300, 7});
  g.output("y", g.softmax(x, 0));
  auto e = kiln::compile(g);
  for (std::size_t t = 0; t < e.plan().transients.size(); ++t)
    EXPECT_FALSE(e.plan().row_local(static_cast<std::int32_t>(t)))
        << kiln::compiler::print(e.plan());
  auto in = ref::random_data<float>(2100, -20, 20, seed++);
  expect_close(run1(e, in, {300, 7}, {300, 7}), softmax_ref(in, {300, 7}, 0, false), 1e-5, 1e-30,
               "softmax over axis 0");
}

// Run-time sizes: x * w with x [?, ?] and w [?] joins x's row group (one dispatch), and at a call
// where the broadcast makes it larger than the rows (x [3, 1], w [5]) the regions run one by one.
TEST(Normalizations, RunTimeBroadcastInARowGroup) {
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {kiln::dyn, kiln::dyn});
  auto w = g.input("w", dtype::f32, {kiln::dyn});
  g.output("y", g.mul(g.softmax(x, 1), w));
  auto e = kiln::compile(g);
  EXPECT_EQ(e.dispatch_count(), 1) << kiln::compiler::print(e.plan());
  auto ws = ref::random_data<float>(5, -1, 1, 41);
  ref::buffer<float> wb(ws);
  for (const dims_t& dims : std::vector<dims_t>{{3, 5}, {300, 5}, {3, 1}}) {
    auto in = ref::random_data<float>(ref::count(dims), -5, 5, 42);
    ref::buffer<float> xb(in), y(ref::count(dims) * 5 / dims[1]);
    std::vector<kiln::tensor_ref> args = {ref::view_of(xb, dims), ref::view_of(wb, {5})};
    std::vector<kiln::tensor_ref> results = {ref::view_of(y, {dims[0], 5})};
    e.run(args, results);
    auto p = softmax_ref(in, dims, 1, false);
    std::vector<double> want(y.size());
    for (std::int64_t r = 0; r < dims[0]; ++r)
      for (int c = 0; c < 5; ++c) want[r * 5 + c] = p[r * dims[1] + (dims[1] == 1 ? 0 : c)] * ws[c];
    expect_close(y.to_vector(), want, 1e-5, 1e-30, "softmax(x) * w for x " + ref::dims_text(dims));
  }
}

TEST(Normalizations, Errors) {
  kiln::graph g;
  auto i = g.input("i", dtype::i32, {4, 5});
  auto x = g.input("x", dtype::f32, {4, 5});
  auto s = g.input("s", dtype::f32, {3});
  auto expect_error = [](auto fn, const std::string& op, const std::string& part) {
    try {
      fn();
      ADD_FAILURE() << op << ": no error";
    } catch (const kiln::error& e) {
      EXPECT_EQ(e.op(), op);
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error([&] { g.softmax(i); }, "softmax", "floating-point");
  expect_error([&] { g.softmax(x, 2); }, "softmax", "axis 2 is out of range");
  expect_error([&] { g.log_softmax(x, -3); }, "log_softmax", "axis -3 is out of range");
  expect_error([&] { g.reduce_log_sum_exp(x, {1, -1}); }, "reduce_log_sum_exp", "given twice");
  expect_error([&] { g.layer_norm(x, s); }, "layer_norm", "scale");
  expect_error([&] { g.rms_norm(x, s, 1); }, "rms_norm", "scale");
}

}  // namespace
