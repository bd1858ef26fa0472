// graph's random numbers on the CPU and on Vulkan: Threefry-2x32-20 against Random123's published
// known-answer vectors; the draws against the scalar Threefry of tests/support (itself checked
// by those vectors), bit for bit for uniform and Bernoulli draws and the same on both
// devices; the normal draws' moments; the refusals.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include <kiln/executable.hpp>

#include "../support/errors.hpp"
#include "../support/on_device.hpp"
#include "../support/threefry.hpp"

using namespace kiln;

namespace {

class GraphRandom : public ref::on_device {};
KILN_ON_BOTH_DEVICES(GraphRandom);

using ref::threefry;
using ref::uniform;

}  // namespace

TEST(Threefry, TheScalarReferenceMatchesRandom123sKnownAnswers) {
  // Random123's kat_vectors, threefry2x32 with 20 rounds: counter, key, result.
  EXPECT_EQ(threefry(0, 0, 0, 0), (std::array<std::uint32_t, 2>{0x6b200159u, 0x99ba4efeu}));
  EXPECT_EQ(threefry(~0u, ~0u, ~0u, ~0u), (std::array<std::uint32_t, 2>{0x1cb996fcu, 0xbb002be7u}));
  EXPECT_EQ(threefry(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u),
            (std::array<std::uint32_t, 2>{0xc4923a9cu, 0x483df7a0u}));
}

TEST_P(GraphRandom, ThreefryMatchesRandom123sKnownAnswers) {
  struct kat {
    std::uint32_t c0, c1, k0, k1, out0, out1;
  };
  const kat vectors[] = {
      {0, 0, 0, 0, 0x6b200159u, 0x99ba4efeu},
      {~0u, ~0u, ~0u, ~0u, 0x1cb996fcu, 0xbb002be7u},
      {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xc4923a9cu, 0x483df7a0u}};
  for (const kat& v : vectors) {
    graph g;  // the counters are inputs, so the device computes them (constants would fold)
    auto [w0, w1] =
        g.threefry(g.input("c0", dtype::u32, {1}), g.input("c1", dtype::u32, {1}), v.k0, v.k1);
    g.output("w0", w0);
    g.output("w1", w1);
    executable exe = compile(std::move(g));
    std::uint32_t c0 = v.c0, c1 = v.c1, out0 = 0, out1 = 0;
    exe.run({{"c0", view(&c0, {1})}, {"c1", view(&c1, {1})}},
            {{"w0", view(&out0, {1})}, {"w1", view(&out1, {1})}}, dev());
    EXPECT_EQ(out0, v.out0) << std::hex << v.c0;
    EXPECT_EQ(out1, v.out1) << std::hex << v.c0;
  }
}

TEST_P(GraphRandom, UniformAndBernoulliDrawsHaveTheReferencesBits) {
  const std::vector<std::int64_t> dims = {3, 5, 7};
  const std::uint64_t seed = 0x0123456789abcdefu;
  graph g;
  auto p = g.input("p", dtype::f32, {3, 5, 7});
  g.output("u", g.random_uniform(dims, -2.0, 6.0, seed));
  g.output("unit", g.random_uniform(dims, 0.0, 1.0, seed));
  g.output("b", g.bernoulli(p, seed, dtype::i32));
  executable exe = compile(std::move(g));
  const std::size_t n = 105;
  std::vector<float> ps(n), u(n), unit(n);
  for (std::size_t i = 0; i < n; ++i) ps[i] = static_cast<float>(i % 11) / 10.f;  // 0 .. 1
  std::vector<std::int32_t> b(n);
  exe.run({{"p", view(ps.data(), {3, 5, 7})}},
          {{"u", view(u.data(), {3, 5, 7})},
           {"unit", view(unit.data(), {3, 5, 7})},
           {"b", view(b.data(), {3, 5, 7})}},
          dev());
  for (std::size_t i = 0; i < n; ++i) {
    const float want = uniform(seed, static_cast<std::uint32_t>(i));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(unit[i]), std::bit_cast<std::uint32_t>(want)) << i;
    ASSERT_EQ(u[i], -2.f + 8.f * want) << i;
    ASSERT_EQ(b[i], want < ps[i] ? 1 : 0) << i;
  }
}

TEST_P(GraphRandom, DrawsAreUniformAndNormalInDistribution) {
  const std::int64_t n = 1 << 16;
  const std::vector<std::int64_t> dims = {n};
  graph g;
  g.output("u", g.random_uniform(dims, 0.0, 1.0, 7));
  g.output("z", g.random_normal(dims, 3.0, 2.0, 7));
  g.output("other", g.random_uniform(dims, 0.0, 1.0, 8));
  executable exe = compile(std::move(g));
  std::vector<float> u(n), z(n), other(n);
  exe.run(
      {},
      {{"u", view(u.data(), {n})}, {"z", view(z.data(), {n})}, {"other", view(other.data(), {n})}},
      dev());
  double su = 0, suu = 0, sz = 0, szz = 0, suo = 0;
  int buckets[16] = {};
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(u[i] >= 0 && u[i] < 1) << i;
    ASSERT_TRUE(std::isfinite(z[i])) << i;
    su += u[i];
    suu += u[i] * u[i];
    sz += z[i];
    szz += double(z[i]) * z[i];
    suo += (u[i] - 0.5) * (other[i] - 0.5);
    ++buckets[static_cast<int>(u[i] * 16)];
  }
  // Means within about five standard errors; a uniform's variance is 1/12, the normal's 4.
  EXPECT_NEAR(su / n, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(suu / n - (su / n) * (su / n), 1.0 / 12, 0.003);
  EXPECT_NEAR(sz / n, 3.0, 5 * 2.0 / std::sqrt(double(n)));
  EXPECT_NEAR(szz / n - (sz / n) * (sz / n), 4.0, 0.1);
  EXPECT_NEAR(suo / n, 0.0, 5 * (1.0 / 12) / std::sqrt(double(n)));  // another seed: uncorrelated
  for (int k : buckets) EXPECT_NEAR(k, n / 16, 5 * std::sqrt(n / 16.0));
}

TEST_P(GraphRandom, TheDevicesDrawTheSameNumbers) {
  if (!GetParam()) GTEST_SKIP() << "compares the CPU with Vulkan in the Vulkan instance";
  const std::vector<std::int64_t> dims = {4, 1000};
  auto draw = [&](device d) {
    graph g;
    g.output("u", g.random_uniform(dims, 0.0, 1.0, 42));
    g.output("z", g.random_normal(dims, 0.0, 1.0, 42));
    executable exe = compile(std::move(g));
    std::vector<float> u(4000), z(4000);
    exe.run({}, {{"u", view(u.data(), {4, 1000})}, {"z", view(z.data(), {4, 1000})}}, d);
    return std::pair{u, z};
  };
  auto [cpu_u, cpu_z] = draw(device::cpu());
  auto [gpu_u, gpu_z] = draw(dev());
  EXPECT_EQ(cpu_u, gpu_u);  // integer arithmetic and exact conversions: the same bits
  for (std::size_t i = 0; i < cpu_z.size(); ++i)  // log, sqrt and cos within their bounds
    ASSERT_NEAR(gpu_z[i], cpu_z[i], 2e-5 * std::max(1.f, std::fabs(cpu_z[i]))) << i;
}

TEST(GraphRandomErrors, RefusalsNameTheOpAndWhatIsWrong) {
  graph g;
  const std::vector<std::int64_t> bad = {3, -1};
  EXPECT_EQ(error_of([&] { g.random_uniform(bad, 0, 1, 0); }),
            "kiln: random_uniform: extents must be static and non-negative, got -1");
  const std::vector<std::int64_t> dims = {2};
  EXPECT_EQ(error_of([&] { g.random_normal(dims, 0, 1, 0, dtype::i32); }),
            "kiln: random_normal: draws floats (f32, f64, f16, bf16), not i32");
  const std::vector<std::int64_t> huge = {1 << 20, 1 << 13};
  EXPECT_EQ(error_of([&] { g.random_uniform(huge, 0, 1, 0); }),
            "kiln: random_uniform: more than 2^32 elements (each element's position is a u32 "
            "counter)");
  EXPECT_EQ(
      error_of([&] { g.threefry(g.input("x", dtype::i32, {2}), g.constant(1, dtype::u32), 0, 0); }),
      "kiln: threefry: the counter words are u32, got i32");
}
