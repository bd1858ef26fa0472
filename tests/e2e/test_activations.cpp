// The activations ONNX names, in the DSL (dsl/activations.hpp) and as graph methods, against their
// formulas evaluated in long double; the DSL's global pools against sums and maxima worked out
// here. On the default device (Vulkan in the suite) and on the CPU (e2e.cpu.*).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>

namespace {

using namespace kiln;
using ld = long double;
constexpr int n = 64;

std::vector<float> inputs() {  // -6 to 6, with 0 and the thresholds' neighbourhoods
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = -6.0f + 12.0f * float(i) / (n - 1);
  x[0] = 0.0f, x[1] = 0.5f, x[2] = -0.5f, x[3] = 0.61f, x[4] = -0.59f, x[5] = 0.39f;
  return x;
}

ld softplus(ld x) { return x > 20 ? x : std::log1p(std::exp(x)); }
ld clip01(ld v) { return std::min<ld>(1, std::max<ld>(0, v)); }

// Each activation with the arguments the tests give it, in long double.
std::vector<ld (*)(ld, ld)> references() {
  return {
      [](ld x, ld) { return x / 2 * (1 + std::erf(x / std::sqrt(ld(2)))); },
      [](ld x, ld) {
        return x / 2 *
               (1 + std::tanh(std::sqrt(2 / ld(3.14159265358979323846L)) *
                              (x + ld(0.044715) * x * x * x)));
      },
      [](ld x, ld) { return x < 0 ? ld(0.1) * x : x; },
      [](ld x, ld) { return x < 0 ? ld(0.7) * std::expm1(x) : x; },
      [](ld x, ld) {
        return ld(1.05070102214813232421875) *
               (x <= 0 ? ld(1.67326319217681884765625) * std::expm1(x) : x);
      },
      [](ld x, ld) { return std::max<ld>(0, x) + std::min<ld>(0, ld(1.3) * std::expm1(x / 1.3L)); },
      [](ld x, ld) { return clip01(ld(0.2) * x + ld(0.5)); },
      [](ld x, ld) { return x * clip01(x / 6 + ld(0.5)); },
      [](ld x, ld) { return x * std::tanh(softplus(x)); },
      [](ld x, ld) { return x > ld(0.4) ? x : 0; },
      [](ld x, ld) { return x < ld(-0.6)  ? x + ld(0.2)
                            : x > ld(0.6) ? x - ld(0.2)
                                          : 0; },
      [](ld x, ld slope) { return x < 0 ? x * slope : x; },
  };
}

constexpr auto dsl_activations = fn<tensor<f32, n>, tensor<f32, n>>([](auto x, auto slope) {
  return std::tuple{gelu(x),
                    gelu(x, true),
                    leaky_relu(x, 0.1),
                    elu(x, 0.7),
                    selu(x),
                    celu(x, 1.3),
                    hard_sigmoid(x),
                    hard_swish(x),
                    mish(x),
                    thresholded_relu(x, 0.4),
                    shrink(x, 0.2, 0.6),
                    prelu(x, slope)};
});
static_assert(dsl_activations.plan.dispatch_count() == 1);  // all fused

void expect_near_reference(const std::vector<std::vector<float>>& got, const std::vector<float>& x,
                           const std::vector<float>& slope) {
  const auto refs = references();
  ASSERT_EQ(got.size(), refs.size());
  for (std::size_t k = 0; k < refs.size(); ++k)
    for (std::size_t i = 0; i < x.size(); ++i) {
      const ld want = refs[k](x[i], slope[i]);
      EXPECT_NEAR(got[k][i], static_cast<double>(want), 1e-5 * (1 + std::fabs(double(want))))
          << "activation " << k << " at x = " << x[i];
    }
}

TEST(Activations, DslFunctionsFollowTheirFormulas) {
  const auto x = inputs();
  std::vector<float> slope(n);
  for (int i = 0; i < n; ++i) slope[static_cast<std::size_t>(i)] = 0.05f * float(i % 7);
  std::vector<std::vector<float>> r(12, std::vector<float>(n));
  dsl_activations(x, slope,
                  into(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11]));
  expect_near_reference(r, x, slope);
}

TEST(Activations, GraphMethodsFollowTheirFormulas) {
  const auto x = inputs();
  std::vector<float> slope(n);
  for (int i = 0; i < n; ++i) slope[static_cast<std::size_t>(i)] = 0.05f * float(i % 7);
  graph g;
  auto v = g.input("x", dtype::f32, {n});
  auto s = g.input("slope", dtype::f32, {n});
  const graph::value out[] = {g.gelu(v),
                              g.gelu(v, "tanh"),
                              g.leaky_relu(v, 0.1),
                              g.elu(v, 0.7),
                              g.selu(v),
                              g.celu(v, 1.3),
                              g.hard_sigmoid(v),
                              g.hard_swish(v),
                              g.mish(v),
                              g.thresholded_relu(v, 0.4),
                              g.shrink(v, 0.2, 0.6),
                              g.prelu(v, s)};
  for (std::size_t k = 0; k < std::size(out); ++k) {
    std::string name =
        "r";  // two appends: GCC 12 misreads "r" + to_string(k) (-Wstringop-overflow)
    name += std::to_string(k);
    g.output(name, out[k]);
  }
  EXPECT_THROW(g.gelu(v, "erf"), kiln::error);  // approximate is "none" or "tanh"
  executable e = compile(g);
  EXPECT_EQ(e.dispatch_count(), 1);
  std::vector<std::vector<float>> r(12, std::vector<float>(n));
  std::vector<tensor_ref> results;
  for (auto& o : r) results.emplace_back(static_cast<void*>(o.data()), dtype::f32, shape{n});
  const tensor_ref args[] = {tensor_ref(x.data(), dtype::f32, {n}),
                             tensor_ref(slope.data(), dtype::f32, {n})};
  e.run(args, results);
  expect_near_reference(r, x, slope);
}

constexpr auto pools = fn<tensor<f32, 2, 3, 4, 5>>([](auto x) {
  return std::tuple{global_average_pool(x), global_max_pool(x)};
});

TEST(Activations, DslGlobalPoolsReduceEverySpatialAxis) {
  std::vector<float> x(2 * 3 * 4 * 5);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * float(i)) * float(i % 11);
  std::vector<float> mean(6), top(6);
  pools(view(x.data(), {2, 3, 4, 5}),
        into(view(mean.data(), {2, 3, 1, 1}), view(top.data(), {2, 3, 1, 1})));
  for (int plane = 0; plane < 6; ++plane) {
    double sum = 0;
    float most = -1e30f;
    for (int k = 0; k < 20; ++k) {
      sum += x[static_cast<std::size_t>(plane * 20 + k)];
      most = std::max(most, x[static_cast<std::size_t>(plane * 20 + k)]);
    }
    EXPECT_NEAR(mean[static_cast<std::size_t>(plane)], sum / 20, 1e-5) << plane;
    EXPECT_EQ(top[static_cast<std::size_t>(plane)], most) << plane;
  }
}

}  // namespace
