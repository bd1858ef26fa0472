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
