// Per-channel normalizations of x [N, C, ...]: batch_norm (inference), instance_norm and
// group_norm, through both doors, against a double-precision reference written from ONNX's
// definitions. Runs on the default device and, as e2e.cpu.test_channel_norms, on the CPU.
#include <gmock/gmock.h>

#include <cmath>

#include "../support/e2e.hpp"

namespace {

using kiln::dtype;
using kiln::tensor;
using ref::dims_t;

struct case_data {
  dims_t dims;
  std::vector<float> x, scale, bias, mean, var;
  std::int64_t n() const { return dims[0]; }
  std::int64_t c() const { return dims[1]; }
  std::int64_t spatial() const { return ref::count(dims) / (n() * c()); }
};

case_data make(const dims_t& dims, unsigned seed) {
  case_data d{dims, ref::random_data<float>(ref::count(dims), -3, 3, seed), {}, {}, {}, {}};
  d.scale = ref::random_data<float>(dims[1], 0.5, 2, seed + 1);
  d.bias = ref::random_data<float>(dims[1], -1, 1, seed + 2);
  d.mean = ref::random_data<float>(dims[1], -1, 1, seed + 3);
  d.var = ref::random_data<float>(dims[1], 0.1, 4, seed + 4);
  return d;
}

// Normalizes each group of `per_group` consecutive channels of each sample, over those channels'
// elements; then scales and shifts per channel. Instance norm: groups of one channel.
std::vector<double> group_ref(const case_data& d, std::int64_t per_group, double eps) {
  std::vector<double> y(d.x.size());
  const std::int64_t s = d.spatial(), block = per_group * s;
  for (std::int64_t start = 0; start < static_cast<std::int64_t>(d.x.size()); start += block) {
    double mean = 0, var = 0;
    for (std::int64_t i = 0; i < block; ++i) mean += d.x[start + i];
    mean /= static_cast<double>(block);
    for (std::int64_t i = 0; i < block; ++i)
      var += (d.x[start + i] - mean) * (d.x[start + i] - mean);
    var /= static_cast<double>(block);
    for (std::int64_t i = 0; i < block; ++i) {
      std::int64_t ch = (start + i) / s % d.c();
      y[start + i] = (d.x[start + i] - mean) / std::sqrt(var + eps) * d.scale[ch] + d.bias[ch];
    }
  }
  return y;
}

kiln::tensor_view<float> tv(std::vector<float>& v, const dims_t& d) {
  return {v.data(), ref::to_shape(d), false};
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}

TEST(ChannelNorms, BatchNormIsOneDispatchOfPerChannelArithmetic) {
  for (const dims_t& dims : std::vector<dims_t>{{2, 3, 5, 7}, {4, 1000}, {1, 5, 3, 2, 9}}) {
    SCOPED_TRACE(ref::dims_text(dims));
    case_data d = make(dims, 11);
    const double eps = 1e-3;
    kiln::graph g;
    auto x = g.input("x", dtype::f32, ref::to_shape(dims));
    std::vector<kiln::graph::value> p;
    for (const char* name : {"scale", "bias", "mean", "var"})
      p.push_back(g.input(name, dtype::f32, {dims[1]}));
    g.output("y", g.batch_norm(x, p[0], p[1], p[2], p[3], eps));
    auto e = kiln::compile(g);
    EXPECT_EQ(e.dispatch_count(), 1);
    EXPECT_EQ(e.plan().transient_bytes(), 0);
    std::vector<float> y(d.x.size());
    std::vector<double> want(d.x.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      std::int64_t ch = static_cast<std::int64_t>(i) / d.spatial() % d.c();
      want[i] = (d.x[i] - d.mean[ch]) / std::sqrt(d.var[ch] + eps) * d.scale[ch] + d.bias[ch];
    }
    auto cv = [&](std::vector<float>& v) { return kiln::view(v.data(), {dims[1]}); };
    e.run({tv(d.x, dims), cv(d.scale), cv(d.bias), cv(d.mean), cv(d.var)}, {tv(y, dims)});
    expect_close(y, want, 2e-6);
  }
}

TEST(ChannelNorms, InstanceAndGroupNormAgainstTheReference) {
  case_data d = make({3, 6, 5, 67}, 21);
  const dims_t xs = {3, 6, 5, 67};
  for (std::int64_t groups : {0, 1, 2, 3, 6}) {  // 0: instance_norm
    SCOPED_TRACE(groups);
    kiln::graph g;
    auto x = g.input("x", dtype::f32, ref::to_shape(xs));
    auto s = g.input("scale", dtype::f32, {6});
    auto b = g.input("bias", dtype::f32, {6});
    g.output("y", groups ? g.group_norm(x, s, b, groups, 1e-4) : g.instance_norm(x, s, b, 1e-4));
    auto e = kiln::compile(g);
    // instance_norm: one row group; group_norm: the group's statistics over a reshaped view, then
    // the per-channel scaling over x's shape.
    EXPECT_EQ(e.dispatch_count(), groups ? 2 : 1);
    std::vector<float> y(d.x.size());
    e.run({tv(d.x, xs), kiln::view(d.scale.data(), {6}), kiln::view(d.bias.data(), {6})},
          {tv(y, xs)});
    expect_close(y, group_ref(d, groups ? 6 / groups : 1, 1e-4), 1e-5);
  }
}

TEST(ChannelNorms, DslDoorsCheckShapesAtCompileTime) {
  constexpr auto bn = kiln::fn<tensor<float, 2, 3, 4, 5>, tensor<float, 3>, tensor<float, 3>,
                               tensor<float, 3>, tensor<float, 3>>(
      [](auto x, auto s, auto b, auto m, auto v) { return kiln::batch_norm(x, s, b, m, v); });
  static_assert(bn.plan.dispatch_count() == 1);
  constexpr auto in = kiln::fn<tensor<float, 2, 3, 4, 5>, tensor<float, 3>, tensor<float, 3>>(
      [](auto x, auto s, auto b) { return kiln::instance_norm(x, s, b); });
  static_assert(in.plan.dispatch_count() == 1);
  constexpr auto gn = kiln::fn<tensor<float, 2, 6, 4, 5>, tensor<float, 6>, tensor<float, 6>>(
      [](auto x, auto s, auto b) { return kiln::group_norm<3>(x, s, b, 1e-5); });
  case_data d = make({2, 6, 4, 5}, 31);
  ref::buffer<float> xb(d.x), sb(d.scale), bb(d.bias), y(d.x.size());
  gn(ref::view_of(xb, d.dims), ref::view_of(sb, {6}), ref::view_of(bb, {6}),
     kiln::into(ref::view_of(y, d.dims)));
  expect_close(y.to_vector(), group_ref(d, 2, 1e-5), 1e-5);
}

TEST(ChannelNorms, ParametersOfTheWrongShapeNameTheOp) {
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {2, 6, 5});
  auto c6 = g.input("c6", dtype::f32, {6});
  auto c4 = g.input("c4", dtype::f32, {4});
  auto message = [](auto fn) { return ref::error_message(fn); };
  EXPECT_THAT(message([&] { g.batch_norm(x, c6, c6, c4, c6); }),
              testing::HasSubstr("batch_norm: mean has dims [4], expected [6]"));
  EXPECT_THAT(message([&] { g.group_norm(x, c6, c6, 4); }),
              testing::HasSubstr("group_norm: num_groups 4 does not divide the 6 channels"));
  EXPECT_THAT(message([&] { g.instance_norm(c6, c6, c6); }),
              testing::HasSubstr("instance_norm: x has rank 1, expected at least 3"));
}

}  // namespace
