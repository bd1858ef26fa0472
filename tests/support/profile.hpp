// KILN_PROFILE's set-up shared by its CPU and Vulkan checks: a product then a softmax of it (a
// row group), run once quietly and once with KILN_PROFILE=1 on one device.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <kiln/executable.hpp>

namespace test_support {

struct profiled_call {
  std::string said;        // the profiled call's stderr
  double call_us = 0;      // its wall time
  int dispatch_count = 0;  // the executable's
};

// The profiled call; the quiet call prints no profile line and both give the same bits.
inline profiled_call profile_softmax_of_product(const kiln::device& d, std::string_view name = {}) {
  using namespace kiln;
  const std::int64_t M = 64, K = 48, N = 40;
  graph g;
  if (!name.empty()) g.set_name(name);
  auto a = g.input("a", dtype::f32, {M, K});
  auto w = g.input("w", dtype::f32, {K, N});
  g.output("y", g.softmax(g.relu(g.matmul(a, w)), -1));
  auto e = compile(g);
  std::vector<float> av(M * K), wv(K * N), quiet(M * N), profiled(M * N);
  for (std::size_t i = 0; i < av.size(); ++i) av[i] = std::sin(0.37f * float(i));
  for (std::size_t i = 0; i < wv.size(); ++i) wv[i] = std::cos(0.11f * float(i));
  profiled_call out;
  auto run = [&](std::vector<float>& y) {
    testing::internal::CaptureStderr();
    const auto t0 = std::chrono::steady_clock::now();
    e.run({tensor_ref(av.data(), dtype::f32, {M, K}), tensor_ref(wv.data(), dtype::f32, {K, N})},
          {tensor_ref(y.data(), dtype::f32, {M, N})}, d);
    out.call_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    return testing::internal::GetCapturedStderr();
  };
  EXPECT_EQ(run(quiet).find("kiln profile"), std::string::npos);
  EXPECT_EQ(setenv("KILN_PROFILE", "1", 1), 0);
  out.said = run(profiled);
  unsetenv("KILN_PROFILE");
  EXPECT_EQ(quiet, profiled);
  out.dispatch_count = e.dispatch_count();
  return out;
}

}  // namespace test_support
