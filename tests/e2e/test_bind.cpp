// kiln::fn::bind: the leading parameters bound once, the rest given at each call; the result is
// the unbound call's, on the CPU and with device buffers bound on the default device, called or
// submitted (after a fence too).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <kiln/kiln.hpp>

namespace {

using namespace kiln;

// A dense layer, its weights first: relu(x w + b).
constexpr auto dense = fn<tensor<f32, 8, 3>, tensor<f32, 3>, tensor<f32, dyn, 8>>(
    [](auto w, auto b, auto x) { return relu(matmul(x, w) + b); });

TEST(Bind, BoundWeightsGiveTheUnboundCallsResult) {
  std::vector<float> w(24), b = {0.5f, -0.25f, 0.0f}, x(4 * 8);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.3f * float(i));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.7f * float(i));
  std::vector<float> want(12), got(12), on_device(12);
  dense.on(device::cpu())(w, b, view(x.data(), {4, 8}), into(view(want.data(), {4, 3})));
  // By hand: the first row.
  for (int j = 0; j < 3; ++j) {
    double sum = b[static_cast<std::size_t>(j)];
    for (int k = 0; k < 8; ++k)
      sum += double(x[static_cast<std::size_t>(k)]) * w[static_cast<std::size_t>(k * 3 + j)];
    EXPECT_NEAR(want[static_cast<std::size_t>(j)], std::max(sum, 0.0), 1e-5);
  }
  auto layer = dense.bind(w, b);
  layer.on(device::cpu())(view(x.data(), {4, 8}), into(view(got.data(), {4, 3})));
  EXPECT_EQ(got, want);
  // Device buffers bound once stay on the device; each call passes them as they are.
  const device dev = device::default_device();
  auto on_dev = dense.bind(dev.upload(w, {8, 3}), dev.upload(b)).on(dev);
  for (int call = 0; call < 2; ++call) {
    on_dev(view(x.data(), {4, 8}), into(view(on_device.data(), {4, 3})));
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(on_device[i], want[i], 1e-5) << i;
  }
  // Returned results, as the unbound call returns them.
  std::vector<float> returned = layer(view(x.data(), {4, 8}));
  EXPECT_EQ(returned.size(), 12u);
}

}  // namespace

namespace {

// Submitted: the bound weights before the call's own arguments, after a fence too, and from a
// temporary binding (kept alive until its fence); the results are the synchronous call's.
TEST(Bind, BoundFunctionsSubmitAfterAFence) {
  std::vector<float> w(24), b = {3.0f, 2.5f, 3.5f}, x(2 * 8), x2(2 * 8);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.45f * float(i));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.9f * float(i));
  for (std::size_t i = 0; i < x.size(); ++i) x2[i] = 2.0f * x[i];
  std::vector<float> want(6), got(6), doubled(16), want2(6), got2(6), got3(6);
  auto layer = dense.bind(w, b);
  layer(view(x.data(), {2, 8}), into(view(want.data(), {2, 3})));
  layer(view(x2.data(), {2, 8}), into(view(want2.data(), {2, 3})));
  for (float v : want) EXPECT_GT(v, 0.0f);  // relu passes every value of these inputs
  fence first = layer.submit(view(x.data(), {2, 8}), into(view(got.data(), {2, 3})));
  first.wait();
  EXPECT_EQ(got, want);
  // A call that starts once a scaling of x is done, reading what it wrote, on the CPU whatever
  // the default device, through a temporary copy of the binding.
  constexpr auto twice = fn<tensor<f32, dyn, 8>>([](auto v) { return v * 2.0f; });
  fence scaled = twice.submit(view(x.data(), {2, 8}), into(view(doubled.data(), {2, 8})));
  fence second =
      layer.on(device::cpu())
          .submit(after(scaled), view(doubled.data(), {2, 8}), into(view(got2.data(), {2, 3})));
  second.wait();
  EXPECT_EQ(got2, want2);
  // A binding that is itself a temporary, with its own copies of the weights.
  fence third = dense.bind(std::vector<float>(w), std::vector<float>(b))
                    .submit(view(x2.data(), {2, 8}), into(view(got3.data(), {2, 3})));
  third.wait();
  EXPECT_EQ(got3, want2);
}

}  // namespace
