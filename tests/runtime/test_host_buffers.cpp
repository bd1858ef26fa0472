// The CPU device's buffers: upload, alloc, download and reshape as on a Vulkan device, read and
// written in place by calls on the CPU (both doors), and taken as host data by a call on Vulkan,
// so one code path serves every device.
#include <gtest/gtest.h>

#include <cstdint>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>

using namespace kiln;

namespace {
constexpr auto scale_add =
    fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) { return x * 3.0f + y; });
}  // namespace

TEST(HostBuffers, UploadAllocDownloadOnTheCpu) {
  const device cpu = device::cpu();
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * float(i) - 7.0f;
  buffer<float> b = cpu.upload(x);
  EXPECT_EQ(b.size(), 1000);
  EXPECT_EQ(b.device_name(), "cpu");
  ASSERT_NE(b.memory()->host_address(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.memory()->host_address()) % 64, 0u);
  std::vector<float> back(1000);
  b.download(back);
  EXPECT_EQ(back, x);
  buffer<std::int8_t> shaped = cpu.alloc<std::int8_t>(shape{3, 5});
  EXPECT_EQ(shaped.size(), 15);
  EXPECT_EQ(b.reshaped(shape{10, 100}).dims(), (shape{10, 100}));
  EXPECT_EQ(cpu.alloc<float>(0).size(), 0);
  std::vector<float> wrong(5);
  try {
    b.download(wrong);
    ADD_FAILURE() << "a 5-element span took 1000 elements";
  } catch (const error& e) {
    EXPECT_EQ(std::string(e.what()),
              "kiln: buffer::download: the host span has 5 elements but the buffer has 1000 "
              "(f32[1000] on cpu)");
  }
  EXPECT_THROW(cpu.alloc<float>(-1), error);
}

// One code path, every device: the same buffers-in, buffer-out code on the CPU and on Vulkan.
TEST(HostBuffers, OneCodePathServesEveryDevice) {
  std::vector<float> x(777), y(777);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = float(i % 31) - 15.0f;
    y[i] = 0.5f * float(i % 7);
  }
  auto run_on = [&](const device& d) {
    buffer<float> xb = d.upload(x), yb = d.upload(y), out = d.alloc<float>(777);
    scale_add.on(d)(xb, yb, into(out));
    std::vector<float> host(777);
    out.download(host);
    return host;
  };
  std::vector<float> want(777);
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = x[i] * 3.0f + y[i];
  EXPECT_EQ(run_on(device::cpu()), want);
  EXPECT_EQ(run_on(device::vulkan()), want);
  // The CPU device's buffers on a Vulkan call: host data, staged.
  const device cpu = device::cpu();
  buffer<float> xb = cpu.upload(x), yb = cpu.upload(y), out = cpu.alloc<float>(777);
  scale_add.on(device::vulkan())(xb, yb, into(out));
  std::vector<float> host(777);
  out.download(host);
  EXPECT_EQ(host, want);
}

// The run-time door reads and writes them in place too, and a result may be an argument's
// buffer (in place).
TEST(HostBuffers, TheGraphDoorReadsAndWritesThemInPlace) {
  graph g;
  auto x = g.input("x", dtype::i32, {dyn});
  g.output("y", g.add(x, g.constant(5, dtype::i32)));
  executable e = compile(g);
  const device cpu = device::cpu();
  std::vector<std::int32_t> v = {1, -2, 3, -4, 5};
  buffer<std::int32_t> b = cpu.upload(v);
  e.run({b}, {b}, cpu);
  std::vector<std::int32_t> back(5);
  b.download(back);
  EXPECT_EQ(back, (std::vector<std::int32_t>{6, 3, 8, 1, 10}));
}
