// Checks that need their own process, each run by ctest with its own environment: no Vulkan
// driver visible, the on-disk pipeline cache across two processes (and unusable cache files),
// KILN_DUMP_DIR dumps, and an exit with a call still waiting.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>
#include <kiln/runtime/vulkan/context.hpp>

using namespace kiln;
namespace fs = std::filesystem;

namespace {
constexpr auto relu_fma = fn<tensor<f32, dyn>, tensor<f32, dyn>, tensor<f32, dyn>>(
    [](auto x, auto y, auto z) { return relu(x * y + z); });

void expect_relu_fma(const device& d) {
  std::vector<float> x{-2, -1, 0, 1, 2, 3, 4}, y{1, 2, 3, 4, 5, 6, 7}, z(7, 0.5f), out(7);
  relu_fma.on(d)(x, y, z, into(out));
  for (std::size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(out[i], std::max(x[i] * y[i] + z[i], 0.0f)) << i;
}
}  // namespace

// Run with VK_ICD_FILENAMES / VK_DRIVER_FILES pointing at nothing.
TEST(NoDriver, DefaultDeviceIsTheCpuAndSaysSo) {
  testing::internal::CaptureStderr();
  device d = device::default_device();
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(d.type(), device::kind::cpu);
  EXPECT_NE(said.find("kiln: running on the CPU; vulkan: no Vulkan driver found by the loader"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("running on the CPU"), said.rfind("running on the CPU")) << said;
  expect_relu_fma(d);
  std::vector<float> x{1, -1}, out(2);
  relu_fma(x, x, x, into(out));  // the default call works too
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 0.0f);
  try {
    device::vulkan();
    ADD_FAILURE() << "device::vulkan() found a device with no driver";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
  }
}

// Run with lavapipe the only driver and KILN_DEVICE unset: a CPU implementation of Vulkan is no
// default device (kiln's CPU path runs the plan natively), and the notice says how to ask for it.
// Asked for, it is there.
TEST(OnlyACpuDriver, DefaultDeviceIsKilnsCpuPathAndSaysSo) {
  ASSERT_EQ(std::getenv("KILN_DEVICE"), nullptr);
  testing::internal::CaptureStderr();
  device d = device::default_device();
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(d.type(), device::kind::cpu);
  EXPECT_NE(said.find("kiln: running on the CPU; vulkan: no usable Vulkan device: llvmpipe"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("is a CPU implementation of Vulkan (KILN_DEVICE=vulkan runs on it)"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("running on the CPU"), said.rfind("running on the CPU")) << said;
  expect_relu_fma(d);
  device lavapipe = device::vulkan();
  EXPECT_NE(lavapipe.name().find("llvmpipe"), std::string::npos) << lavapipe.name();
  EXPECT_TRUE(lavapipe.context()->target().cpu_device);
  expect_relu_fma(lavapipe);
}

// Run with lavapipe the only driver and KILN_DEVICE=vulkan: the default device is lavapipe, and
// no CPU is mentioned.
TEST(OnlyACpuDriver, AskedForItIsTheDefault) {
  testing::internal::CaptureStderr();
  device d = device::default_device();
  std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(d.type(), device::kind::vulkan);
  EXPECT_NE(d.name().find("llvmpipe"), std::string::npos) << d.name();
  EXPECT_EQ(said.find("CPU"), std::string::npos) << said;
  expect_relu_fma(d);
}

// Run first with an empty KILN_CACHE_DIR: creates the pipeline and writes the cache file.
TEST(PipelineCache, FirstProcessWritesIt) {
  auto d = device::vulkan();
  expect_relu_fma(d);
  auto& cache = d.context()->pipelines();
  EXPECT_EQ(cache.stats().loaded_bytes, 0u);
  EXPECT_GE(cache.stats().created, 1);
  ASSERT_FALSE(cache.file().empty());
  EXPECT_TRUE(fs::exists(cache.file())) << cache.file();
  EXPECT_GT(fs::file_size(cache.file()), 0u);
}

// Run second with the same KILN_CACHE_DIR: starts from the file the first process wrote.
TEST(PipelineCache, SecondProcessReusesIt) {
  auto d = device::vulkan();
  auto& cache = d.context()->pipelines();
  ASSERT_TRUE(fs::exists(cache.file())) << cache.file();
  EXPECT_EQ(cache.stats().loaded_bytes, fs::file_size(cache.file()));
  EXPECT_GT(cache.stats().loaded_bytes, 0u);
  expect_relu_fma(d);
  std::printf("pipeline cache: %zu bytes loaded, %d created, %d creation-feedback cache hits\n",
              cache.stats().loaded_bytes, cache.stats().created, cache.stats().cache_hits);
}

// Run with KILN_DUMP_DIR set: every stage of the function and each region's module are written.
TEST(Dumps, EveryStageAndEveryModule) {
  auto d = device::vulkan();
  expect_relu_fma(d);
  // And a run-time graph: the same files, under graph-<hash>.
  graph g;
  auto a = g.input("a", dtype::f32, {dyn});
  g.output("b", g.mul(g.abs(a), a));
  std::vector<float> in = {-2, 3}, out(2);
  compile(g).run({{"a", in}}, {{"b", out}}, d);
  EXPECT_EQ(out, (std::vector<float>{-4, 9}));
  const char* dir = std::getenv("KILN_DUMP_DIR");
  ASSERT_NE(dir, nullptr);
  std::vector<fs::path> functions;
  for (auto& e : fs::directory_iterator(dir)) functions.push_back(e.path());
  std::sort(functions.begin(), functions.end());  // fn-<hash> before graph-<hash>
  ASSERT_EQ(functions.size(), 2u);
  EXPECT_EQ(functions[0].filename().string().rfind("fn-", 0), 0u);
  EXPECT_EQ(functions[1].filename().string().rfind("graph-", 0), 0u);
  for (const auto& function : functions) {
    for (const char* f :
         {"0-traced.ir", "1-canonical.ir", "2-regions.txt", "3-plan.txt", "4-cpu.txt"}) {
      ASSERT_TRUE(fs::exists(function / f)) << function << " " << f;
      EXPECT_GT(fs::file_size(function / f), 0u) << f;
    }
    // What the CPU path runs: the instruction set chosen, each region's loop and ops in order.
    std::ifstream cpu_file(function / "4-cpu.txt");
    const std::string cpu((std::istreambuf_iterator<char>(cpu_file)), {});
    EXPECT_NE(cpu.find(std::string("(") + kiln::cpu::runtime_isa() + ")"), std::string::npos)
        << cpu;
    EXPECT_NE(cpu.find("region 0 (dispatch 0) over [s"), std::string::npos) << cpu;
    EXPECT_NE(cpu.find("]: rows of the space through the ops below"), std::string::npos) << cpu;
    EXPECT_NE(cpu.find(" = load arg0"), std::string::npos) << cpu;
    EXPECT_NE(cpu.find(" -> result0"), std::string::npos) << cpu;
    for (const char* op : function == functions[0] ? std::vector<const char*>{"= mul", "= relu"}
                                                   : std::vector<const char*>{"= abs", "= mul"})
      EXPECT_NE(cpu.find(op), std::string::npos) << op << "\n" << cpu;
    std::string stem = function == functions[0] ? "region0-fff" : "region0-f";
    std::ifstream in(function / (stem + ".spv"), std::ios::binary);
    ASSERT_TRUE(in.good()) << function << " " << stem;
    std::uint32_t magic = 0;
    in.read(reinterpret_cast<char*>(&magic), 4);
    EXPECT_EQ(magic, 0x07230203u);
    std::ifstream text(function / (stem + ".spvasm"));
    std::string asm_text((std::istreambuf_iterator<char>(text)), {});
    EXPECT_NE(asm_text.find("OpEntryPoint GLCompute"), std::string::npos);
    EXPECT_NE(asm_text.find("OpFMul"), std::string::npos);
    EXPECT_NE(asm_text.find("NoContraction"), std::string::npos);
  }
}

namespace {
// The path kiln's pipeline cache has for the (only) Vulkan device, found with Vulkan directly
// before kiln opens the device.
fs::path cache_path_of_first_device() {
  auto app = vulkan::vk_struct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.apiVersion = VK_API_VERSION_1_2;
  auto ci = vulkan::vk_struct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  ci.pApplicationInfo = &app;
  VkInstance inst = VK_NULL_HANDLE;
  if (vkCreateInstance(&ci, nullptr, &inst) != VK_SUCCESS) return {};
  std::uint32_t n = 1;
  VkPhysicalDevice pd = VK_NULL_HANDLE;
  vkEnumeratePhysicalDevices(inst, &n, &pd);
  auto p11 = vulkan::vk_struct<VkPhysicalDeviceVulkan11Properties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES);
  auto props = vulkan::vk_struct<VkPhysicalDeviceProperties2>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
  props.pNext = &p11;
  vkGetPhysicalDeviceProperties2(pd, &props);
  vkDestroyInstance(inst, nullptr);
  return vulkan::cache_directory() /
         vulkan::cache_file_name(p11.deviceUUID, props.properties.driverVersion);
}
}  // namespace

// Run with KILN_TEST_CACHE_CASE = directory | fifo | header: something other than a cache file at
// the cache's path is skipped with a notice (no exception escapes, nothing blocks on a FIFO), and
// the call runs.
TEST(CachePath, UnusableFileIsSkipped) {
  const char* c = std::getenv("KILN_TEST_CACHE_CASE");
  ASSERT_NE(c, nullptr);
  std::string what = c;
  fs::path path = cache_path_of_first_device();
  ASSERT_FALSE(path.empty());
  fs::remove_all(path.parent_path());
  fs::create_directories(path.parent_path());
  if (what == "directory") {
    fs::create_directories(path);
  } else if (what == "fifo") {
    ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  } else {  // a file cut inside the header
    std::ofstream(path, std::ios::binary) << "trunc";
  }
  testing::internal::CaptureStderr();
  auto d = device::vulkan();
  expect_relu_fma(d);
  std::string said = testing::internal::GetCapturedStderr();
  std::string expected = what == "header" ? "is truncated; not used" : "is not a regular file";
  EXPECT_NE(said.find(expected), std::string::npos) << said;
  EXPECT_EQ(d.context()->pipelines().stats().loaded_bytes, 0u);
}

// Run after PipelineCache.FirstProcessWritesIt, on a copy of its cache cut in half: the header is
// this device's, the rest is not a whole cache. With KILN_VALIDATE=1 nothing is reported and
// nothing leaks (the ASan build checks that).
TEST(CachePath, HalfACacheFile) {
  fs::path path = cache_path_of_first_device();
  ASSERT_TRUE(fs::exists(path)) << path;
  fs::resize_file(path, fs::file_size(path) / 2);
  auto d = device::vulkan();
  expect_relu_fma(d);
}

// Run with KILN_VALIDATE=1 (and, in the sanitizer build, with leak checking): each Vulkan
// creation, allocation or submission kiln makes is made to fail in turn (the test-only hook
// vulkan::fail_creation_in). Every failure is a kiln::error, and afterwards the device still
// works; LeakSanitizer at exit shows that nothing a failed call had made was left behind.
TEST(Faults, EveryCreationCanFail) {
  // Opening the device.
  device d = device::cpu();
  int opening_failures = 0;
  for (long k = 0;; ++k) {
    ASSERT_LT(k, 200);
    vulkan::fail_creation_in = k;
    try {
      d = device::vulkan();
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::device_error) << e.what();
      ++opening_failures;
      continue;
    }
    bool untouched = vulkan::fail_creation_in >= 0;  // opened before the k-th creation came
    vulkan::fail_creation_in = -1;
    if (untouched) break;
    // Opened although a creation failed: only the pipeline cache retries (without its data).
  }
  // Instance, device, the queue's command pool and timeline semaphore, ... (a submission's command
  // buffer and descriptor pool are made by the first call: counted below).
  EXPECT_GE(opening_failures, 4);
  expect_relu_fma(d);

  // Calls: a new memory block, a new kernel (each variant is a graph of its own shape), descriptor
  // sets and a submission.
  // (The check after a failure uses sub instead of add: a graph no injected call has seen.)
  auto workload = [&](int variant, bool check_after_failure) {
    auto big = d.alloc<float>((std::int64_t{64} << 20) / 4 + 1024);  // past one 64 MiB block
    graph g;
    auto x = g.input("x", dtype::f32, {dyn});
    auto v = x;
    for (int i = 0; i <= variant; ++i)
      v = check_after_failure ? g.sub(g.mul(v, g.constant(2.0)), x)
                              : g.add(g.mul(v, g.constant(2.0)), x);
    g.output("y", v);
    std::vector<float> in = {1, 2, 3}, out(3);
    compile(g).run({in}, {out}, d);
    for (int i = 0; i < 3; ++i) {
      float want = in[i];
      for (int s = 0; s <= variant; ++s) want = want * 2 + (check_after_failure ? -in[i] : in[i]);
      EXPECT_EQ(out[i], want) << "variant " << variant;
    }
    (void)big;
  };
  auto first_block = d.alloc<float>(16);  // so that each big allocation makes a block of its own
  int call_failures = 0;
  for (long k = 0;; ++k) {
    ASSERT_LT(k, 200);
    vulkan::fail_creation_in = k;
    try {
      workload(static_cast<int>(k), false);
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::device_error) << e.what();
      ++call_failures;
    }
    bool untouched = vulkan::fail_creation_in >= 0;
    vulkan::fail_creation_in = -1;
    workload(static_cast<int>(k), true);  // the device still works
    if (untouched) break;
  }
  EXPECT_GE(call_failures, 5);  // memory block, pipeline, command buffer, descriptor pool, submit
  std::printf("injected failures: %d while opening the device, %d in calls\n", opening_failures,
              call_failures);
}

namespace {
// The bits of reductions of a 300 x 4097 tensor (rows, columns, all of it, large enough to be
// split across threads), through both CPU drivers, of its columns as 4097 x 300, and of
// normalizations (row groups).
std::vector<std::uint32_t> reduction_bits() {
  constexpr auto f = fn<tensor<f32, dyn, dyn>>([](auto x) {
    return std::tuple{reduce_sum<1>(x), reduce_mean<0>(exp(x)), reduce_l2<>(x)};
  });
  std::vector<float> x(300 * 4097);
  std::uint32_t state = 12345;
  for (auto& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / 16777216.0f * 4 - 2;
  }
  auto data = view(x.data(), {300, 4097});
  auto [rows, cols, all] = f.on(device::cpu())(data);
  std::vector<float> rows2(300), cols2(4097), all2(1);
  compile(f).run({data}, {rows2, cols2, all2}, device::cpu());
  std::vector<std::uint32_t> bits;
  for (const auto* v : {&rows, &cols, &all, &rows2, &cols2, &all2})
    for (float e : *v) bits.push_back(std::bit_cast<std::uint32_t>(e));
  // The same numbers as 4097 rows of 300: columns in one strip, whose tree the threads share.
  constexpr auto down = fn<tensor<f32, dyn, dyn>>([](auto x) { return reduce_sum<0>(x); });
  for (float e : down.on(device::cpu())(view(x.data(), {4097, 300})))
    bits.push_back(std::bit_cast<std::uint32_t>(e));
  // Row groups, run a block of rows at a time on however many threads: softmax along rows and
  // along columns (the contiguous dim kept), layer_norm with a scale and a bias.
  constexpr auto groups = fn<tensor<f32, dyn, dyn>, tensor<f32, dyn>>([](auto x, auto s) {
    return std::tuple{softmax<1>(x), softmax<0>(x), layer_norm<1>(x, s, s, 1e-5)};
  });
  std::vector<float> scale(x.begin(), x.begin() + 4097);
  auto [by_rows, by_columns, normalized] =
      groups.on(device::cpu())(data, view(scale.data(), {4097}));
  for (const auto* v : {&by_rows, &by_columns, &normalized})
    for (float e : *v) bits.push_back(std::bit_cast<std::uint32_t>(e));
  return bits;
}
}  // namespace

// Reductions have the same bits whatever KILN_NUM_THREADS is: a process with one thread writes
// them to KILN_TEST_BITS, one with two threads compares (runtime.determinism.* in CMake).
TEST(Determinism, WriteReductionBits) {
  auto bits = reduction_bits();
  std::ofstream out(std::getenv("KILN_TEST_BITS"), std::ios::binary);
  out.write(reinterpret_cast<const char*>(bits.data()),
            static_cast<std::streamsize>(bits.size() * 4));
  ASSERT_TRUE(out.good());
}

TEST(Determinism, SameReductionBitsWithOtherThreadCounts) {
  auto bits = reduction_bits();
  std::ifstream in(std::getenv("KILN_TEST_BITS"), std::ios::binary);
  std::vector<std::uint32_t> written(bits.size());
  in.read(reinterpret_cast<char*>(written.data()), static_cast<std::streamsize>(bits.size() * 4));
  ASSERT_TRUE(in.good()) << "the first process wrote no bits";
  std::size_t differ = 0;
  for (std::size_t i = 0; i < bits.size(); ++i) differ += bits[i] != written[i];
  EXPECT_EQ(differ, 0u) << "of " << bits.size() << " results";
}

// A call queued after a fence nobody will signal (a host timeline kept alive to the end) does not
// hold the process at exit: the CPU queue, stopped by the static destructors, gives the wait up.
// The parent runs this test again in a child process (KILN_TEST_EXIT_CHILD), which submits the
// call and exits; the child must end, with status 0, well within the limit.
TEST(Exit, APendingCallDoesNotHoldTheProcess) {
  if (std::getenv("KILN_TEST_EXIT_CHILD")) {
    static auto* gate = new host_timeline;  // never signalled, never destroyed
    static std::vector<float> x(64, 1.0f), y(64, 1.0f), z(64, 0.0f), out(64);
    relu_fma.on(device::cpu()).submit(after(gate->at(1)), x, y, z, into(out));
    std::exit(0);
  }
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(("KILN_TEST_EXIT_CHILD=1 timeout 60 '" + self +
                                  "' --gtest_filter=Exit.APendingCallDoesNotHoldTheProcess"
                                  " >/dev/null 2>&1")
                                     .c_str());
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "124: the child was still waiting after 60 s";
  EXPECT_LT(took, std::chrono::seconds(20));
}
