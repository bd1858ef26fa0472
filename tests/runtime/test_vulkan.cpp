// The Vulkan back end on lavapipe: device choice and its target description, device-resident
// buffers across calls, staging of host data, in-place, errors naming the device, the CPU
// fallback for what the device cannot run, grid-stride over more groups than one dispatch has,
// and metadata spilled past the push constants; the queue's wait and signal lists chaining two
// calls on the device with one host wait.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>
#include <kiln/runtime/vulkan/context.hpp>
#include <kiln/runtime/vulkan/executor.hpp>

#include "../support/profile.hpp"

using namespace kiln;

namespace {
constexpr auto relu_fma = fn<tensor<f32, dyn>, tensor<f32, dyn>, tensor<f32, dyn>>(
    [](auto x, auto y, auto z) { return relu(x * y + z); });

std::vector<float> iota_data(std::size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 977) * scale + offset;
  return v;
}
float relu_fma_ref(float x, float y, float z) {
  float p = x * y;  // the product rounds on its own (kiln never contracts into FMA)
  return std::max(p + z, 0.0f);
}
}  // namespace

// The tests' Vulkan driver is lavapipe (tests/CMakeLists.txt); run by hand with another driver
// (scripts/gpu_check.sh), the only device the loader sees is the one chosen.
TEST(VulkanDevice, ChoosesTheOnlyDeviceAndDescribesIt) {
  auto d = device::vulkan();
  EXPECT_EQ(d.type(), device::kind::vulkan);
  const char* driver = std::getenv("VK_DRIVER_FILES");
  if (driver && std::string(driver).find("lvp_icd") != std::string::npos) {
    EXPECT_NE(d.name().find("llvmpipe"), std::string::npos) << d.name();
  }
  EXPECT_EQ(device::default_device(), d);  // the best (only) Vulkan device is the default
  const auto& t = d.context()->target();
  EXPECT_GE(t.push_constant_bytes, 128u);
  EXPECT_GE(t.max_storage_buffers, 4u);
  EXPECT_GE(t.max_workgroup_count_x, 65535u);
  EXPECT_GT(t.subgroup_size, 0u);
  EXPECT_TRUE(t.float64);  // lavapipe has shaderFloat64 and shaderInt64
  EXPECT_TRUE(t.int64);
  EXPECT_EQ(device::vulkan(0), d);
  try {
    device::vulkan(7);
    ADD_FAILURE() << "vulkan:7 exists?";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_EQ(std::string(e.what()),
              "kiln: device::vulkan: device index 7 does not exist (1 Vulkan device)");
  }
}

TEST(VulkanBuffers, UploadDownloadRoundTrip) {
  auto d = device::vulkan();
  auto x = iota_data(1027, 0.5f, -3);
  auto b = d.upload(x);
  EXPECT_EQ(b.size(), 1027);
  std::vector<float> back(1027);
  b.download(back);
  EXPECT_EQ(back, x);
  std::unique_ptr<bool[]> flags(new bool[13]);
  for (int i = 0; i < 13; ++i) flags[i] = i % 3 == 0;
  auto fb = d.upload(std::span<const bool>(flags.get(), 13));
  std::unique_ptr<bool[]> fback(new bool[13]);
  fb.download(std::span<bool>(fback.get(), 13));
  for (int i = 0; i < 13; ++i) EXPECT_EQ(fback[i], flags[i]) << i;
  auto shaped = d.alloc<std::int8_t>(shape{3, 5});
  EXPECT_EQ(shaped.size(), 15);
  std::vector<float> wrong(5);
  EXPECT_THROW(b.download(wrong), error);
  EXPECT_THROW(b.reshaped(shape{10, 10}), error);
  EXPECT_THROW(d.alloc<float>(-1), error);
}

TEST(VulkanCall, DeviceResidentBuffersAcrossCalls) {
  auto d = device::vulkan();
  const std::size_t n = 70001;
  auto x = iota_data(n, 0.25f, -60), y = iota_data(n, -0.01f, 2), z = iota_data(n, 0.1f, 1);
  auto xb = d.upload(x), yb = d.upload(y), zb = d.upload(z);
  auto ob = d.alloc<float>(static_cast<std::int64_t>(n));
  relu_fma.on(d)(xb, yb, zb, into(ob));
  // The result stays on the device and feeds the next call.
  auto ob2 = d.alloc<float>(static_cast<std::int64_t>(n));
  relu_fma.on(d)(ob, yb, zb, into(ob2));
  std::vector<float> first(n), second(n);
  ob.download(first);
  ob2.download(second);
  for (std::size_t i = 0; i < n; ++i) {
    float r1 = relu_fma_ref(x[i], y[i], z[i]);
    ASSERT_EQ(first[i], r1) << i;
    ASSERT_EQ(second[i], relu_fma_ref(r1, y[i], z[i])) << i;
  }
  // Host and device arguments mixed, host output staged through the ring.
  std::vector<float> out(n);
  relu_fma.on(d)(x, yb, z, into(out));
  EXPECT_EQ(out, first);
  // In place on a device buffer (one region: each element read before written).
  relu_fma.on(d)(xb, yb, zb, into(xb));
  std::vector<float> in_place(n);
  xb.download(in_place);
  EXPECT_EQ(in_place, first);
}

TEST(VulkanCall, ErrorsNameTheDevice) {
  auto d = device::vulkan();
  auto xb = d.upload(std::vector<float>(8, 1.0f));
  std::vector<float> y(8, 1.0f), out(8);
  try {
    relu_fma.on(device::cpu())(xb, y, y, into(out));
    ADD_FAILURE() << "a device buffer ran on the CPU";
  } catch (const error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("argument 1 lives on vulkan:0"), std::string::npos) << m;
    EXPECT_NE(m.find("runs on the cpu"), std::string::npos) << m;
  }
  std::vector<float> short_out(7);
  EXPECT_THROW(relu_fma.on(d)(xb, y, y, into(short_out)), error);
}

// exp on f64 has no GLSL.std.450 form: the region runs on the CPU, says so once, and is right.
TEST(VulkanCall, UnsupportedRegionFallsBackToTheCpuWithANotice) {
  constexpr auto f = fn<tensor<f64, dyn>, tensor<f32, dyn>>([](auto x, auto y) {
    return std::tuple{exp(x), y * 2.0f};
  });
  static_assert(f.plan.dispatch_count() == 1 || f.plan.dispatch_count() == 2);
  auto d = device::vulkan();
  std::vector<double> x{0.0, 1.0, -2.5, 3.25, 10.0};
  std::vector<float> y{1, 2, 3, 4, 5};
  std::vector<double> ex(5);
  std::vector<float> twice(5);
  testing::internal::CaptureStderr();
  f.on(d)(x, y, into(ex, twice));
  f.on(d)(x, y, into(ex, twice));
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("runs on the CPU: exp on f64"), std::string::npos) << said;
  EXPECT_EQ(said.find("runs on the CPU", said.find("runs on the CPU") + 1), std::string::npos)
      << "the notice repeats: " << said;
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(ex[i], std::exp(x[i]), 1e-15 * std::exp(x[i])) << i;
    EXPECT_EQ(twice[i], y[i] * 2) << i;
  }
}

// More 4-element groups than one dispatch can have workgroups: the grid-stride loop covers them.
TEST(VulkanCall, SizesBeyondOneDispatchGridStride) {
  auto d = device::vulkan();
  const auto& t = d.context()->target();
  std::size_t n = std::size_t(t.max_workgroup_count_x) * t.workgroup_size() * 4 + 4099;
  // lavapipe's 65535 workgroups make 64 MiB per operand; a GPU's 2^31 - 1 would make 2 TiB.
  if (n > (std::size_t{1} << 28))
    GTEST_SKIP() << "one dispatch covers " << n << " elements, more than this test allocates";
  auto x = iota_data(n, 0.5f, -100), y = iota_data(n, 0.001f, 0.5f), z = iota_data(n, -1, 3);
  std::vector<float> out(n);
  relu_fma.on(d)(x, y, z, into(out));
  for (std::size_t i = 0; i < n; i += (i < n - 10000 ? 997 : 1))
    ASSERT_EQ(out[i], relu_fma_ref(x[i], y[i], z[i])) << i << " of " << n;
}

// Seven broadcast operands of rank 4: 34 metadata words, more than 128 bytes of push constants.
TEST(VulkanCall, BroadcastMetadataSpilledToABuffer) {
  constexpr auto f =
      fn<tensor<f32, dyn, dyn, dyn, dyn>, tensor<f32, dyn, 1, dyn, 1>, tensor<f32, 1, dyn, 1, dyn>,
         tensor<f32, dyn, 1, 1, 1>, tensor<f32, 1, 1, dyn, 1>, tensor<f32, 1, dyn, dyn, 1>,
         tensor<f32, dyn, 1, 1, dyn>, tensor<f32, 1, 1, 1, dyn>>(
          [](auto a, auto b, auto c, auto d, auto e, auto f, auto g, auto h) {
            return a + b * c - d + e * f + g - h;
          });
  auto dev = device::vulkan();
  const std::int64_t A = 3, B = 5, C = 4, D = 7;
  auto make = [](std::int64_t n, float s) { return iota_data(static_cast<std::size_t>(n), s, -1); };
  auto a = make(A * B * C * D, 0.01f), b = make(A * C, 0.5f), c = make(B * D, 0.25f),
       dd = make(A, 1), e = make(C, 2), ff = make(B * C, 0.125f), g = make(A * D, 0.75f),
       h = make(D, 3);
  std::vector<float> out(A * B * C * D);
  f.on(dev)(view(a.data(), {A, B, C, D}), view(b.data(), {A, 1, C, 1}),
            view(c.data(), {1, B, 1, D}), view(dd.data(), {A, 1, 1, 1}),
            view(e.data(), {1, 1, C, 1}), view(ff.data(), {1, B, C, 1}),
            view(g.data(), {A, 1, 1, D}), view(h.data(), {1, 1, 1, D}),
            into(view(out.data(), {A, B, C, D})));
  for (std::int64_t i = 0; i < A; ++i)
    for (std::int64_t j = 0; j < B; ++j)
      for (std::int64_t k = 0; k < C; ++k)
        for (std::int64_t l = 0; l < D; ++l) {
          float r = a[((i * B + j) * C + k) * D + l] + b[i * C + k] * c[j * D + l];
          r = r - dd[i];
          r = r + e[k] * ff[j * C + k];
          r = r + g[i * D + l];
          r = r - h[l];
          ASSERT_EQ(out[((i * B + j) * C + k) * D + l], r) << i << j << k << l;
        }
}

namespace {
// A compiled graph of one op over f32[n], as the runtime keeps it (no symbols: static extents).
runtime::program unary_program(std::int64_t n, bool square) {
  graph g;
  auto x = g.input("x", dtype::f32, {n});
  g.output("y", square ? g.mul(x, x)
                       : g.add(g.mul(x, g.constant(2.0, dtype::f32)), g.constant(1.0, dtype::f32)));
  return runtime::program("graph", g.ir(), compiler::compile(g.ir()));
}
runtime::buffer_ref ref_of(const buffer<float>& b) {
  return {nullptr, b.dims(), false, b.memory()};
}
}  // namespace

// Two calls, the second reading what the first writes, submitted back to back: the second waits
// on the device for the first's signal, and the host waits once, for the second's.
TEST(VulkanQueue, TwoDependentCallsWithOneHostWait) {
  device d = device::vulkan();
  vulkan::context& ctx = *d.context();
  constexpr std::int64_t n = 100000;
  runtime::program twice_plus_one = unary_program(n, false), square = unary_program(n, true);
  std::vector<float> host(n);
  for (std::int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000) * 0.01f - 5.0f;
  buffer<float> x = d.upload(host, {n}), y = d.alloc<float>(shape{n}), z = d.alloc<float>(shape{n});
  VkSemaphore s = vulkan::queue::create_timeline(ctx.device());
  std::int64_t sym[1] = {0};
  vulkan::semaphore_value first{s, 1}, second{s, 2};
  runtime::buffer_ref xr = ref_of(x), yr = ref_of(y), zr = ref_of(z);
  std::uint64_t a = vulkan::submit(twice_plus_one, ctx, std::span(&xr, 1), std::span(&yr, 1), sym,
                                   {}, std::span(&first, 1));
  std::uint64_t b = vulkan::submit(square, ctx, std::span(&yr, 1), std::span(&zr, 1), sym,
                                   std::span(&first, 1), std::span(&second, 1));
  EXPECT_EQ(b, a + 1);  // consecutive submissions of the device's queue
  vulkan::queue::wait_all(ctx.device(), std::span(&second, 1));  // the one host wait
  std::uint64_t reached = 0, queue_reached = 0;
  ASSERT_EQ(vkGetSemaphoreCounterValue(ctx.device(), s, &reached), VK_SUCCESS);
  ASSERT_EQ(vkGetSemaphoreCounterValue(ctx.device(), ctx.queue().timeline(), &queue_reached),
            VK_SUCCESS);
  EXPECT_EQ(reached, 2u);
  EXPECT_GE(queue_reached, b);  // both calls finished: the first before the second could start
  // lavapipe's queue thread may still hold its record of the wait on `s` for a moment after the
  // signal (LeakSanitizer saw it leak when `s` was destroyed right away): idle first.
  vkDeviceWaitIdle(ctx.device());
  vkDestroySemaphore(ctx.device(), s, nullptr);
  std::vector<float> out(n);
  z.download(out);
  for (std::int64_t i = 0; i < n; ++i) {
    float t = host[i] * 2.0f + 1.0f;  // each step rounds to f32, as on the device
    ASSERT_EQ(out[i], t * t) << i;
  }
}

// A call submitted without a host wait takes device buffers only: host data would have to be
// copied back after the device finishes, which nobody waits for.
TEST(VulkanQueue, SubmissionRefusesHostData) {
  device d = device::vulkan();
  runtime::program p = unary_program(4, true);
  std::vector<float> in = {1, 2, 3, 4}, out(4);
  runtime::buffer_ref a{in.data(), shape{4}, false, nullptr},
      r{out.data(), shape{4}, false, nullptr};
  std::int64_t sym[1] = {0};
  try {
    vulkan::submit(p, *d.context(), std::span(&a, 1), std::span(&r, 1), sym, {}, {});
    FAIL() << "host data was accepted";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("argument 1 is host data"), std::string::npos) << e.what();
  }
}

// The wait list holds a submission back on the device: nothing runs until the host signals.
TEST(VulkanQueue, SubmissionStartsOnlyOnceItsWaitListIsReached) {
  device d = device::vulkan();
  vulkan::context& ctx = *d.context();
  runtime::program square = unary_program(4, true);
  buffer<float> x = d.upload(std::vector<float>{1.5f, -2, 3, 0.25f}, {4});
  buffer<float> y = d.upload(std::vector<float>{7, 7, 7, 7}, {4});
  VkSemaphore s = vulkan::queue::create_timeline(ctx.device());
  vulkan::semaphore_value go{s, 1}, done{s, 2};
  runtime::buffer_ref xr = ref_of(x), yr = ref_of(y);
  std::int64_t sym[1] = {0};
  std::uint64_t v = vulkan::submit(square, ctx, std::span(&xr, 1), std::span(&yr, 1), sym,
                                   std::span(&go, 1), std::span(&done, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::uint64_t reached = 0;
  ASSERT_EQ(vkGetSemaphoreCounterValue(ctx.device(), ctx.queue().timeline(), &reached), VK_SUCCESS);
  EXPECT_LT(reached, v);  // still waiting for `go`
  auto signal = vulkan::vk_struct<VkSemaphoreSignalInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO);
  signal.semaphore = s;
  signal.value = 1;
  ASSERT_EQ(vkSignalSemaphore(ctx.device(), &signal), VK_SUCCESS);
  vulkan::queue::wait_all(ctx.device(), std::span(&done, 1));
  vkDeviceWaitIdle(ctx.device());  // as above
  vkDestroySemaphore(ctx.device(), s, nullptr);
  std::vector<float> out(4);
  y.download(out);
  EXPECT_EQ(out, (std::vector<float>{2.25f, 4, 9, 0.0625f}));
}

// KILN_PROFILE=1: after each call that waits, one line per dispatch with its device time and the
// ops it runs, then their sum; the results are those of a call without it. Unset, nothing.
TEST(VulkanProfile, EachDispatchsDeviceTimeIsPrinted) {
  const auto [said, call_us, dispatch_count] =
      test_support::profile_softmax_of_product(device::vulkan());
  std::istringstream lines(said);
  std::string line;
  int dispatches = 0;
  double sum = 0, total = -1;
  bool product = false, row_group = false;
  while (std::getline(lines, line)) {
    if (line.rfind("kiln profile: ", 0) != 0) continue;
    if (auto at = line.find(" dispatch "); at != std::string::npos) {
      EXPECT_EQ(line.find(" dispatch " + std::to_string(dispatches) + ":"), at) << line;
      double us = std::stod(line.substr(line.find(':', at) + 1));
      EXPECT_GE(us, 0.0) << line;
      EXPECT_LT(us, 60e6) << line;
      sum += us;
      product = product || line.find("region 0: matmul") != std::string::npos;
      row_group = row_group || line.find("reduce_max") != std::string::npos;
      ++dispatches;
    } else if (line.find(" dispatches: ") != std::string::npos) {
      total = std::stod(line.substr(line.find(" dispatches: ") + 13));
    }
  }
  // A row group's regions share one dispatch on the device.
  EXPECT_GE(dispatches, 2) << said;
  EXPECT_LE(dispatches, dispatch_count) << said;
  EXPECT_TRUE(product) << said;
  EXPECT_TRUE(row_group) << said;
  EXPECT_NEAR(total, sum, 0.01 * dispatches + 1e-6 * sum) << said;
}

// A kiln::fn named before its first call: its Vulkan lines (here KILN_PROFILE's) say the name;
// a second name after that call, and a name that cannot be a folder, are kiln::errors.
constexpr auto named_relu = fn<tensor<f32, dyn>>([](auto x) { return relu(x); });

TEST(VulkanProfile, ANamedFunctionsLinesSayItsName) {
  EXPECT_THROW(named_relu.set_name("has space"), kiln::error);
  EXPECT_THROW(named_relu.set_name("-leading"), kiln::error);
  named_relu.set_name("rectifier");
  const device d = device::vulkan();
  std::vector<float> x{-1, 2, -3, 4}, y(4);
  ASSERT_EQ(setenv("KILN_PROFILE", "1", 1), 0);
  testing::internal::CaptureStderr();
  named_relu.on(d)(x, into(y));
  std::string said = testing::internal::GetCapturedStderr();
  unsetenv("KILN_PROFILE");
  EXPECT_EQ(y, (std::vector<float>{0, 2, 0, 4}));
  EXPECT_NE(said.find("kiln profile: rectifier-"), std::string::npos) << said;
  EXPECT_EQ(said.find("kiln profile: fn-"), std::string::npos) << said;
  try {
    named_relu.set_name("other");
    ADD_FAILURE() << "a name after the first call was taken";
  } catch (const kiln::error& e) {
    EXPECT_NE(std::string(e.what()).find("as rectifier-"), std::string::npos) << e.what();
  }
}

// A reduction's or a row group's workgroup shrinks to the rows it takes (numbers worked out by
// hand): on a GPU-like target of 256 invocations and subgroups of 32, rows of 128 (32 groups of
// four) take 32 invocations, rows of 4096 all 256, rows of 100 not whole groups of four (an
// element an invocation) 128, three elements the subgroup's 32; on a CPU-like one of 64 and
// subgroups of 8, rows of 128 take 32 and rows of 16 take 8.
TEST(VulkanCall, ShortRowsTakeSmallerWorkgroups) {
  spirv::target gpu;
  gpu.subgroup_size = 32;
  gpu.max_workgroup_size_x = 1024;
  gpu.shared_memory_bytes = 49152;
  ASSERT_EQ(gpu.workgroup_size(), 256u);
  auto rows_of = [](std::int64_t reduced, bool whole_quads) {
    vulkan::detail::region_call c;
    c.reduced = reduced;
    c.whole_quads = whole_quads;
    return c;
  };
  EXPECT_EQ(vulkan::reduction_workgroup(gpu, rows_of(128, true)), 32u);
  EXPECT_EQ(vulkan::reduction_workgroup(gpu, rows_of(4096, true)), 256u);
  EXPECT_EQ(vulkan::reduction_workgroup(gpu, rows_of(1000, true)), 256u);
  EXPECT_EQ(vulkan::reduction_workgroup(gpu, rows_of(100, false)), 128u);
  EXPECT_EQ(vulkan::reduction_workgroup(gpu, rows_of(3, false)), 32u);
  spirv::target cpu = gpu;
  cpu.subgroup_size = 8;
  cpu.cpu_device = true;
  ASSERT_EQ(cpu.workgroup_size(), 64u);
  EXPECT_EQ(vulkan::reduction_workgroup(cpu, rows_of(128, true)), 32u);
  EXPECT_EQ(vulkan::reduction_workgroup(cpu, rows_of(16, true)), 8u);
  EXPECT_EQ(vulkan::reduction_workgroup(cpu, rows_of(1 << 20, true)), 64u);

  // And the device's own, on softmax over short rows (37 rows: the last workgroup's four rows
  // run past the end) against a double reference.
  auto d = device::vulkan();
  for (std::int64_t n : {128, 20, 6, 1}) {
    SCOPED_TRACE("rows of " + std::to_string(n));
    const std::int64_t rows = 37;
    std::vector<float> x(static_cast<std::size_t>(rows * n)), y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 4;
    graph g;
    g.output("y", g.softmax(g.input("x", dtype::f32, {rows, n})));
    executable e = compile(g);
    e.run({view(x.data(), {rows, n})}, {view(y.data(), {rows, n})}, d);
    for (std::int64_t r = 0; r < rows; ++r) {
      double most = -INFINITY, sum = 0;
      for (std::int64_t j = 0; j < n; ++j) most = std::max<double>(most, x[r * n + j]);
      for (std::int64_t j = 0; j < n; ++j) sum += std::exp(double(x[r * n + j]) - most);
      for (std::int64_t j = 0; j < n; ++j) {
        const double want = std::exp(double(x[r * n + j]) - most) / sum;
        ASSERT_NEAR(y[r * n + j], want, 4e-7 + 4e-6 * want) << "row " << r << ", element " << j;
      }
    }
  }
}
