// The CPU device's buffers: upload, alloc, download and reshape as on a Vulkan device, read and
// written in place by calls on the CPU (both doors), and taken as host data by a call on Vulkan,
// so one code path serves every device.
#include <gtest/gtest.h>

#include <cstdint>

#include <vulkan/vulkan.h>
#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>
#include <kiln/runtime/vulkan/context.hpp>

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

// buf.slice(offset, count): a sub-range of the same memory, on every device. Three slices of one
// allocation as the call's two arguments and its result; the elements around them keep their
// values; a slice of a slice adds the offsets; reshaped keeps it.
TEST(BufferSlices, ThreeSlicesOfOneAllocationInOneCall) {
  constexpr std::int64_t n = 320;  // 1280 bytes: every slice starts at a multiple of 256
  for (const device& d : {device::cpu(), device::vulkan()}) {
    SCOPED_TRACE(d.name());
    std::vector<float> all(4 * n + 64, -9.0f);
    buffer<float> block = d.upload(all);
    std::vector<float> x(n), y(n);
    for (std::int64_t i = 0; i < n; ++i) {
      x[i] = float(i % 17) - 8.0f;
      y[i] = 0.25f * float(i % 5);
    }
    buffer<float> xs = block.slice(0, n), ys = block.slice(n, 2 * n).slice(0, n),
                  out = block.slice(3 * n, n).reshaped(shape{16, 20}).reshaped(shape{n});
    EXPECT_EQ(ys.offset_bytes(), n * 4);
    EXPECT_EQ(out.offset_bytes(), 3 * n * 4);
    xs.upload(x);
    ys.upload(y);
    scale_add.on(d)(xs, ys, into(out));
    std::vector<float> got(n), back(all.size());
    out.download(got);
    block.download(back);
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], x[i] * 3.0f + y[i]) << i;
      ASSERT_EQ(back[3 * n + i], got[i]) << i;
      ASSERT_EQ(back[2 * n + i], -9.0f) << i;  // between the slices: untouched
    }
    for (std::size_t i = 4 * n; i < back.size(); ++i) ASSERT_EQ(back[i], -9.0f) << i;
    // The graph door takes slices too, and a result may be an argument's slice in place.
    graph g;
    auto v = g.input("v", dtype::f32, {dyn});
    g.output("w", g.mul(v, g.constant(2.0f, dtype::f32)));
    compile(g).run({ys}, {ys}, d);
    std::vector<float> doubled(n);
    ys.download(doubled);
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(doubled[i], 2.0f * y[i]) << i;
  }
}

// Slices of one memory may be given together only where they do not overlap (as host ranges);
// out-of-range slices and, on Vulkan, starts that the device cannot bind say why.
TEST(BufferSlices, OverlapRangeAndAlignmentErrors) {
  for (const device& d : {device::cpu(), device::vulkan()}) {
    SCOPED_TRACE(d.name());
    buffer<float> block = d.alloc<float>(1024);
    try {
      scale_add.on(d)(block.slice(0, 256), block.slice(256, 256), into(block.slice(128, 256)));
      ADD_FAILURE() << "a result overlapping an argument's slice was taken";
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find("result 1 overlaps argument 1"), std::string::npos)
          << e.what();
    }
    EXPECT_NO_THROW(
        scale_add.on(d)(block.slice(0, 256), block.slice(256, 256), into(block.slice(512, 256))));
    try {
      (void)block.slice(1000, 25);
      ADD_FAILURE() << "a slice past the end was made";
    } catch (const error& e) {
      EXPECT_EQ(std::string(e.what()),
                "kiln: buffer::slice: elements [1000, 1000 + 25) are not within the buffer's 1024 "
                "(f32[1024] on " +
                    d.name() + ")");
    }
    EXPECT_THROW((void)block.slice(-1, 2), error);
  }
  const device gpu = device::vulkan();
  const auto alignment = static_cast<std::int64_t>(gpu.context()->storage_offset_alignment());
  if (alignment > 4) {  // a slice one float in cannot be bound there
    buffer<float> block = gpu.alloc<float>(1024);
    try {
      scale_add.on(gpu)(block.slice(1, 256), block.slice(512, 256), into(block.slice(768, 256)));
      ADD_FAILURE() << "an unaligned slice was bound";
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find("binds storage buffers at multiples of " +
                                           std::to_string(alignment) + " bytes"),
                std::string::npos)
          << e.what();
    }
  }
  // Kernels there store whole groups of four elements: a result slice of 5 inside its memory is
  // refused (the group would overwrite 3 elements after it); one at the memory's end is taken.
  {
    buffer<float> block = gpu.upload(std::vector<float>(69, 5.0f));
    try {
      scale_add.on(gpu)(block.slice(0, 5), block.slice(16, 5), into(block.slice(32, 5)));
      ADD_FAILURE() << "a 5-element result slice inside its memory was taken";
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find("result 1 is a buffer slice of 5 f32 elements that "
                                           "ends inside its memory"),
                std::string::npos)
          << e.what();
    }
    scale_add.on(gpu)(block.slice(0, 5), block.slice(16, 5), into(block.slice(64, 5)));
    std::vector<float> back(69);
    block.download(back);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(back[i], 5.0f) << i;
    for (int i = 64; i < 69; ++i) ASSERT_EQ(back[i], 20.0f) << i;
  }
  // The CPU reads a slice at any element.
  const device cpu = device::cpu();
  buffer<float> block = cpu.upload(std::vector<float>{1, 2, 3, 4, 5, 6, 7});
  buffer<float> out = cpu.alloc<float>(3);
  scale_add.on(cpu)(block.slice(1, 3), block.slice(4, 3), into(out));
  std::vector<float> got(3);
  out.download(got);
  EXPECT_EQ(got, (std::vector<float>{2 * 3 + 5, 3 * 3 + 6, 4 * 3 + 7}));
}

// A workspace made from a slice holds the call's transients from the slice's start: the bytes
// before and after it keep their values, and the result is the one the function's own arena
// gives, bit for bit.
TEST(BufferSlices, AWorkspaceSlice) {
  graph g;
  auto x = g.input("x", dtype::f32, {24, 40});
  auto w1 = g.input("w1", dtype::f32, {40, 56});
  auto w2 = g.input("w2", dtype::f32, {56, 8});
  g.output("y", g.matmul(g.relu(g.matmul(x, w1)), w2));
  const executable mlp = compile(g);
  const std::int64_t need = mlp.plan().transient_bytes();
  ASSERT_GT(need, 0);
  auto fill = [](std::size_t n, int seed) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = float((i * 13 + seed) % 11) / 5.0f - 1.0f;
    return v;
  };
  const std::vector<float> xs = fill(24 * 40, 1), w1s = fill(40 * 56, 2), w2s = fill(56 * 8, 3);
  for (const device& d : {device::cpu(), device::vulkan()}) {
    SCOPED_TRACE(d.name());
    std::vector<float> own(24 * 8), in_slice(24 * 8);
    mlp.run({xs, w1s, w2s}, {own}, d);
    const std::int64_t words = need / 4;
    std::vector<float> sentinel(static_cast<std::size_t>(words + 128), 77.0f);
    buffer<float> block = d.upload(sentinel);
    mlp.run({xs, w1s, w2s}, {in_slice}, d, workspace(block.slice(64, words)));
    EXPECT_EQ(in_slice, own);
    std::vector<float> back(sentinel.size());
    block.download(back);
    for (std::int64_t i = 0; i < 64; ++i) ASSERT_EQ(back[i], 77.0f) << i;
    for (std::size_t i = static_cast<std::size_t>(64 + words); i < back.size(); ++i)
      ASSERT_EQ(back[i], 77.0f) << i;
    bool written = false;
    for (std::int64_t i = 64; i < 64 + words; ++i) written = written || back[i] != 77.0f;
    EXPECT_TRUE(written) << "the transients went elsewhere";
  }
}

// A VkBuffer the program made on kiln's VkDevice, wrapped as a kiln::buffer without a copy:
// written through the program's own mapping, read by a call, its result read back through the
// mapping and through download (a staged copy, since kiln does not know the mapping); the ranges
// and offsets kiln cannot use are refused when wrapped.
TEST(WrappedVulkanBuffers, AProgramsVkBufferIsReadAndWrittenInPlace) {
  const device gpu = device::vulkan();
  VkDevice vk = gpu.vulkan_device();
  VkPhysicalDevice physical = gpu.context()->physical();
  constexpr VkDeviceSize bytes = 4096;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer vb = VK_NULL_HANDLE;
  ASSERT_EQ(vkCreateBuffer(vk, &bi, nullptr, &vb), VK_SUCCESS);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(vk, vb, &req);
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(physical, &mp);
  std::uint32_t type = 0;
  const VkMemoryPropertyFlags want =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  while (type < mp.memoryTypeCount &&
         !((req.memoryTypeBits >> type & 1) && (mp.memoryTypes[type].propertyFlags & want) == want))
    ++type;
  ASSERT_LT(type, mp.memoryTypeCount);
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  ASSERT_EQ(vkAllocateMemory(vk, &ai, nullptr, &memory), VK_SUCCESS);
  ASSERT_EQ(vkBindBufferMemory(vk, vb, memory, 0), VK_SUCCESS);
  void* mapped = nullptr;
  ASSERT_EQ(vkMapMemory(vk, memory, 0, VK_WHOLE_SIZE, 0, &mapped), VK_SUCCESS);
  auto* words = static_cast<float*>(mapped);
  for (int i = 0; i < 1024; ++i) words[i] = float(i % 13) - 6.0f;
  {
    // x: floats [0, 256); y: [256, 512); the result: [512, 768), by offset.
    buffer<float> x = gpu.wrap<float>(vb, 0, 1024, shape{256});
    buffer<float> y = gpu.wrap<float>(vb, 1024, 1024, shape{256});
    buffer<float> out = gpu.wrap<float>(vb, 2048, 1024, shape{256});
    scale_add.on(gpu)(x, y, into(out));
    std::vector<float> got(256);
    out.download(got);
    for (int i = 0; i < 256; ++i) {
      float want_i = (float(i % 13) - 6.0f) * 3.0f + (float((256 + i) % 13) - 6.0f);
      ASSERT_EQ(words[512 + i], want_i) << i;
      ASSERT_EQ(got[i], want_i) << i;
    }
    for (int i = 768; i < 1024; ++i) ASSERT_EQ(words[i], float(i % 13) - 6.0f) << i;
    // Refused: a range without room for the last group of 4, an offset the device cannot
    // bind, the CPU device.
    try {
      (void)gpu.wrap<float>(vb, 0, 20, shape{5});
      ADD_FAILURE() << "a 20-byte range was wrapped for 5 floats";
    } catch (const error& e) {
      EXPECT_EQ(std::string(e.what()),
                "kiln: device::wrap: the range holds 20 bytes, but 5 elements of 4 bytes need 32 "
                "(kernels access whole groups of 4 elements)");
    }
    const VkDeviceSize alignment = gpu.context()->storage_offset_alignment();
    if (alignment > 4) {
      EXPECT_THROW((void)gpu.wrap<float>(vb, 4, 1024, shape{256}), error);
    }
    EXPECT_THROW((void)device::cpu().wrap<float>(vb, 0, 1024, shape{256}), error);
  }
  vkUnmapMemory(vk, memory);
  vkDestroyBuffer(vk, vb, nullptr);
  vkFreeMemory(vk, memory, nullptr);
}
