// kiln demo: a fused bias + GELU, its plan checked at compile time, run on the CPU and on a
// Vulkan device where a driver serves one (lavapipe too, which is no default device: see
// device::default_device), each checked against a plain scalar loop.
#include <cmath>
#include <cstdio>
#include <vector>

#include <kiln/kiln.hpp>

using namespace kiln;

constexpr auto gelu_bias = fn<tensor<f32, dyn, 768>, tensor<f32, 768>>([](auto x, auto b) {
  auto y = x + b;
  return 0.5f * y * (1.f + tanh(0.7978845608f * (y + 0.044715f * y * y * y)));
});
static_assert(gelu_bias.plan.dispatch_count() == 1);  // one fused loop, decided at compile time

int main() {
  const int rows = 64, cols = 768;
  std::vector<float> x(rows * cols), b(cols), out(rows * cols);
  for (int i = 0; i < rows * cols; ++i) x[i] = std::sin(0.001f * i) * 4.f;
  for (int j = 0; j < cols; ++j) b[j] = 0.01f * (j % 50) - 0.25f;

  std::printf("plan:\n%s\n", compiler::print(gelu_bias.plan.thaw()).c_str());
  std::printf("default device: %s\n", device::default_device().name().c_str());
  std::vector<device> devices{device::cpu()};
  try {
    devices.push_back(device::vulkan());
  } catch (const error& e) {
    std::printf("no Vulkan device (%s)\n", e.what());
  }
  int failures = 0;
  for (const device& d : devices) {
    gelu_bias.on(d)(view(x.data(), {rows, cols}), b, into(view(out.data(), {rows, cols})));
    double max_error = 0;
    for (int i = 0; i < rows * cols; ++i) {
      float y = x[i] + b[i % cols];
      float want = 0.5f * y * (1.f + std::tanh(0.7978845608f * (y + 0.044715f * y * y * y)));
      max_error = std::fmax(max_error, std::fabs(out[i] - want));
    }
    std::printf("on %s: gelu(x + b) on [%d, %d]: out[0..3] = %.6f %.6f %.6f %.6f\n",
                d.name().c_str(), rows, cols, out[0], out[1], out[2], out[3]);
    std::printf("  max error vs scalar loop: %.3g (%s)\n", max_error,
                max_error < 1e-5 ? "ok" : "WRONG");
    failures += max_error >= 1e-5;
  }
  return failures;
}
