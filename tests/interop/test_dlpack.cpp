// DLPack in and out (kiln/dlpack.hpp): host DLTensors read and written in place by both doors
// (byte_offset, explicit compact strides), the refusals (strided, vector lanes, other devices,
// types kiln lacks), and kiln::buffers exported as DLManagedTensors on the CPU and on Vulkan and
// taken back as the same memory, alive until the deleter.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <kiln/dlpack.hpp>
#include <kiln/kiln.hpp>

using namespace kiln;

namespace {

constexpr auto plus_one = fn<tensor<f32, dyn, dyn>>([](auto x) { return x + 1.0f; });

// y = x * 10 + 1 over [2, 3] f32.
executable times_ten_plus_one() {
  graph g;
  auto x = g.input("x", dtype::f32, {2, 3});
  g.output("y", g.add(g.mul(x, g.constant(10.0f, dtype::f32)), g.constant(1.0f, dtype::f32)));
  return compile(g);
}

DLTensor host_tensor(void* data, std::int64_t* sizes, int ndim, DLDataType type) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = type;
  t.shape = sizes;
  return t;
}

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(DLPack, HostTensorsAreReadAndWrittenInPlace) {
  const executable e = times_ten_plus_one();
  // The tensor starts 8 bytes (two floats) into the allocation: byte_offset.
  std::vector<float> in = {-1, -1, 0, 1, 2, 3, 4, 5}, out(6, -7.0f);
  std::int64_t sizes[2] = {2, 3}, strides[2] = {3, 1};
  DLTensor x = host_tensor(in.data(), sizes, 2, {kDLFloat, 32, 1});
  x.byte_offset = 8;
  DLTensor y = host_tensor(out.data(), sizes, 2, {kDLFloat, 32, 1});
  y.strides = strides;  // explicit, and compact: taken
  for (const device& d : {device::cpu(), device::vulkan()}) {
    std::fill(out.begin(), out.end(), -7.0f);
    e.run({from_dlpack(x)}, {from_dlpack(y)}, d);
    EXPECT_EQ(out, (std::vector<float>{1, 11, 21, 31, 41, 51})) << d.name();
  }
  // The DSL door: a typed view.
  std::vector<float> flat(6);
  DLTensor z = host_tensor(flat.data(), sizes, 2, {kDLFloat, 32, 1});
  plus_one(dlpack_view<float>(x), into(dlpack_view<float>(z)));
  EXPECT_EQ(flat, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(message_of([&] { (void)dlpack_view<double>(x); }),
            "kiln: dlpack_view: the DLTensor holds f32, not f64");
}

TEST(DLPack, WhatIsRefusedSaysWhy) {
  std::vector<float> data(12);
  std::int64_t sizes[2] = {3, 4}, transposed[2] = {1, 3};
  DLTensor t = host_tensor(data.data(), sizes, 2, {kDLFloat, 32, 1});
  t.strides = transposed;  // taken as a strided view (tests/runtime/test_strided.cpp)
  EXPECT_TRUE(from_dlpack(t).ref.strided);
  std::int64_t far[2] = {std::int64_t{1} << 61, 1};
  t.strides = far;
  EXPECT_NE(message_of([&] { (void)from_dlpack(t); }).find("reaches beyond the address space"),
            std::string::npos);
  t.strides = nullptr;
  t.dtype = {kDLFloat, 32, 4};
  EXPECT_EQ(message_of([&] { (void)from_dlpack(t); }),
            "kiln: from_dlpack: the DLTensor's type (code 2, 32 bits, 4 lanes) has vector lanes; "
            "kiln takes 1");
  t.dtype = {kDLComplex, 64, 1};
  EXPECT_EQ(message_of([&] { (void)from_dlpack(t); }),
            "kiln: from_dlpack: the DLTensor's type (code 5, 64 bits, 1 lanes) is no kiln dtype");
  t.dtype = {kDLFloat, 32, 1};
  t.device = {kDLCUDA, 0};
  EXPECT_NE(message_of([&] { (void)from_dlpack(t); }).find("device type 2"), std::string::npos);
  buffer<f8e4m3> narrow = device::cpu().alloc<f8e4m3>(4);
  EXPECT_EQ(message_of([&] { (void)to_dlpack(narrow); }),
            "kiln: to_dlpack: f8e4m3 has no DLPack 0.6 type code");
  // Null pointers: no shape for two dimensions; no data, whatever the offset (the call refuses it,
  // rather than reading address 64).
  t.device = {kDLCPU, 0};
  t.shape = nullptr;
  EXPECT_EQ(message_of([&] { (void)from_dlpack(t); }),
            "kiln: from_dlpack: the DLTensor has 2 dimensions and a null shape");
  t.shape = sizes;
  std::int64_t negative[2] = {3, -4};
  t.shape = negative;
  EXPECT_NE(message_of([&] { (void)from_dlpack(t); }).find("below zero"), std::string::npos);
  std::int64_t huge[2] = {std::int64_t{1} << 62, 4};  // its bytes overflow: refused, no stride made
  t.shape = huge;
  EXPECT_NE(message_of([&] { (void)from_dlpack(t); }).find("does not fit in 64 bits"),
            std::string::npos);
  t.shape = sizes;
  t.data = nullptr;
  t.byte_offset = 64;
  EXPECT_EQ(from_dlpack(t).ref.data, nullptr);
  graph g;
  g.output("y", g.relu(g.input("x", dtype::f32, {3, 4})));
  std::vector<float> y(12);
  EXPECT_NE(message_of([&] { compile(g).run({from_dlpack(t)}, {y}, device::cpu()); }), "no error");
  t.data = data.data();
  t.byte_offset = 0;
  DLManagedTensor foreign{};
  foreign.dl_tensor = host_tensor(data.data(), sizes, 2, {kDLFloat, 32, 1});
  EXPECT_NE(message_of([&] { (void)dlpack_buffer<float>(foreign); }).find("not exported by kiln"),
            std::string::npos);
}

// Exported buffers: fields as DLPack defines them, memory alive until the deleter (the buffer
// itself is gone by then), and taken back as the same memory by both doors.
TEST(DLPack, ExportedBuffersComeBackAsTheSameMemory) {
  const executable e = times_ten_plus_one();
  for (const device& d : {device::cpu(), device::vulkan()}) {
    SCOPED_TRACE(d.name());
    DLManagedTensor* m = nullptr;
    {
      buffer<float> whole = d.upload(std::vector<float>{9, 9, 9, 9, 0, 1, 2, 3, 4, 5});
      buffer<float> b = whole.slice(4, 6).reshaped(shape{2, 3});
      m = to_dlpack(b);
      const DLTensor& t = m->dl_tensor;
      EXPECT_EQ(t.ndim, 2);
      EXPECT_EQ(t.shape[0], 2);
      EXPECT_EQ(t.shape[1], 3);
      EXPECT_EQ(t.strides, nullptr);
      EXPECT_EQ(t.dtype.code, kDLFloat);
      EXPECT_EQ(t.dtype.bits, 32);
      if (d.type() == device::kind::cpu) {
        EXPECT_EQ(t.device.device_type, kDLCPU);
        EXPECT_EQ(t.data, b.memory()->host_address());
        EXPECT_EQ(t.byte_offset, 16u);
      } else {
        EXPECT_EQ(t.device.device_type, kDLVulkan);
        EXPECT_NE(t.data, nullptr);
        EXPECT_EQ(t.byte_offset, b.memory()->vk_offset() + 16u);
      }
    }
    // The buffers are gone; the managed tensor keeps the memory.
    buffer<float> back = dlpack_buffer<float>(*m);
    std::vector<float> got(6);
    back.download(got);
    EXPECT_EQ(got, (std::vector<float>{0, 1, 2, 3, 4, 5}));
    buffer<float> out = d.alloc<float>(shape{2, 3});
    DLManagedTensor* out_m = to_dlpack(out);
    e.run({from_dlpack(*m)}, {from_dlpack(*out_m)}, d);
    out.download(got);
    EXPECT_EQ(got, (std::vector<float>{1, 11, 21, 31, 41, 51}));
    plus_one.on(d)(dlpack_buffer<float>(*m), into(dlpack_buffer<float>(*out_m)));
    out.download(got);
    EXPECT_EQ(got, (std::vector<float>{1, 2, 3, 4, 5, 6}));
    m->deleter(m);
    out_m->deleter(out_m);
  }
  // bool goes out as kDLBool (code 6 of later DLPack versions) and comes back as bool.
  buffer<bool> flags = device::cpu().alloc<bool>(3);
  DLManagedTensor* fm = to_dlpack(flags);
  EXPECT_EQ(fm->dl_tensor.dtype.code, 6);
  EXPECT_EQ(fm->dl_tensor.dtype.bits, 8);
  EXPECT_EQ(from_dlpack(fm->dl_tensor).type, dtype::boolean);
  fm->deleter(fm);
}

// An owned export keeps the buffer's memory alive while it lives and lets go of it when it goes;
// released, the pointer is the framework's to delete.
TEST(DLPack, OwnedExportsReleaseTheirMemory) {
  buffer<float> b = device::cpu().upload(std::vector<float>{1, 2, 3});
  std::weak_ptr<const void> memory = b.memory()->shared_from_this();
  const long owners = memory.use_count();
  {
    dlpack_tensor t = to_dlpack_owned(b);
    EXPECT_EQ(memory.use_count(), owners + 1);
    EXPECT_EQ(t->dl_tensor.shape[0], 3);
  }
  EXPECT_EQ(memory.use_count(), owners);
  dlpack_tensor handed = to_dlpack_owned(b);
  DLManagedTensor* raw = handed.release();
  EXPECT_EQ(memory.use_count(), owners + 1);
  raw->deleter(raw);
  EXPECT_EQ(memory.use_count(), owners);
}
