// kiln header-only, as a plain #include gives it (no KILN_SEPARATE_RUNTIME, no runtime library):
// both doors run on Vulkan and on the CPU and give the scalar loop's answers.
#include <gtest/gtest.h>

#include <cmath>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>

#ifdef KILN_SEPARATE_RUNTIME
#error "this test must be built header-only (kiln::headers)"
#endif

using namespace kiln;

namespace {

constexpr auto softplus = fn<tensor<f32, dyn>>([](auto x) { return log(1.f + exp(x)); });

// A kiln::fn's trace points reach the run-time door (executable.hpp sets detail::fn_door at
// static initialization) in a header-only program too.
constexpr auto traced_softplus =
    fn<tensor<f32, dyn>>([](auto x) { return log(1.f + trace("e", exp(x))); });

TEST(HeaderOnly, TracedFunctionsReachTheRunTimeDoor) {
  std::vector<float> x{-1.f, 0.f, 2.f}, y(3), traced;
  set_trace_sink([&](const traced_value& v) {
    const auto* data = static_cast<const float*>(v.data);
    traced.assign(data, data + v.dims.element_count());
  });
  traced_softplus.on(device::cpu())(x, into(y));
  set_trace_sink({});
  ASSERT_EQ(traced.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(traced[i], std::exp(x[i]), 1e-6 * std::exp(x[i])) << i;
    EXPECT_NEAR(y[i], std::log1p(std::exp(x[i])), 3e-6) << i;
  }
}

TEST(HeaderOnly, FunctionsRunOnVulkanAndCpu) {
  std::vector<float> x(3001), vk(x.size()), cpu(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = -6.f + 0.004f * float(i);
  softplus.on(device::vulkan())(x, into(vk));
  softplus.on(device::cpu())(x, into(cpu));
  for (std::size_t i = 0; i < x.size(); ++i) {
    float want = std::log1p(std::exp(x[i]));
    ASSERT_NEAR(vk[i], want, 3e-6 * want + 1e-6) << i;
    ASSERT_NEAR(cpu[i], want, 3e-6 * want + 1e-6) << i;
  }
}

TEST(HeaderOnly, ExecutablesRunOnVulkan) {
  graph g;
  auto a = g.input("a", dtype::i32, {dyn});
  g.output("b", g.mul(a, g.constant(3, dtype::i32)));
  executable exe = compile(g);
  std::vector<std::int32_t> in = {1, -2, 7, 40000}, out(4);
  exe.run({{"a", in}}, {{"b", out}}, device::vulkan());
  EXPECT_EQ(out, (std::vector<std::int32_t>{3, -6, 21, 120000}));
}

}  // namespace
