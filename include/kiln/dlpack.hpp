// DLPack in and out (Debian: libdlpack-dev; kiln itself does not need it): a framework's DLTensor
// as a call's argument or result with no copy, and kiln::buffers exported as DLManagedTensors whose
// deleter gives kiln's memory back.
//
// In: host tensors (kDLCPU) as a tensor_ref (graph door) or a tensor_view<T> (kiln::fn), and the
// DLManagedTensors kiln exported (any device) as the kiln::buffer they came from. Out: a buffer of
// the CPU device as kDLCPU memory; a Vulkan buffer as kDLVulkan with `data` the VkBuffer of kiln's
// memory block and `byte_offset` where the tensor starts in it. Host tensors may be strided (any
// strides, in elements, as DLPack gives them): calls read and write them in place.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kiln/executable.hpp"

namespace kiln {

namespace detail {

// DLPack 0.6's type codes, and kDLBool (6) of later versions for bool.
inline constexpr std::uint8_t dl_bool_code = 6;

inline DLDataType dl_type_of(dtype t) {
  switch (t) {
    case dtype::f32:
      return {kDLFloat, 32, 1};
    case dtype::f64:
      return {kDLFloat, 64, 1};
    case dtype::f16:
      return {kDLFloat, 16, 1};
    case dtype::bf16:
      return {kDLBfloat, 16, 1};
    case dtype::i8:
      return {kDLInt, 8, 1};
    case dtype::i16:
      return {kDLInt, 16, 1};
    case dtype::i32:
      return {kDLInt, 32, 1};
    case dtype::i64:
      return {kDLInt, 64, 1};
    case dtype::u8:
      return {kDLUInt, 8, 1};
    case dtype::u16:
      return {kDLUInt, 16, 1};
    case dtype::u32:
      return {kDLUInt, 32, 1};
    case dtype::u64:
      return {kDLUInt, 64, 1};
    case dtype::boolean:
      return {dl_bool_code, 8, 1};
    default:
      throw error(errc::unsupported, "to_dlpack",
                  std::string(name(t)) + " has no DLPack 0.6 type code");
  }
}

inline dtype dtype_of_dl(const DLDataType& t, const char* who) {
  auto text = [&] {
    return "code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
           std::to_string(t.lanes) + " lanes";
  };
  if (t.lanes != 1)
    throw error(errc::unsupported, who,
                "the DLTensor's type (" + text() + ") has vector lanes; kiln takes 1");
  for (int d = 0; d < dtype_count; ++d) {
    const auto k = static_cast<dtype>(d);
    if (k == dtype::f8e4m3 || k == dtype::f8e5m2) continue;
    DLDataType c = dl_type_of(k);
    if (c.code == t.code && c.bits == t.bits) return k;
  }
  throw error(errc::unsupported, who, "the DLTensor's type (" + text() + ") is no kiln dtype");
}

// The DLTensor's extents, checked: rank and sizes.
inline shape dl_dims(const DLTensor& t, const char* who) {
  if (t.ndim < 0 || t.ndim > max_rank)
    throw error(errc::unsupported, who,
                "the DLTensor has " + std::to_string(t.ndim) + " dimensions; kiln takes 0 to " +
                    std::to_string(max_rank));
  if (t.ndim > 0 && !t.shape)
    throw error(errc::invalid_argument, who,
                "the DLTensor has " + std::to_string(t.ndim) + " dimensions and a null shape");
  shape s;
  s.rank = t.ndim;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      throw error(errc::invalid_argument, who,
                  "the DLTensor's extent " + std::to_string(i) + " is " +
                      std::to_string(t.shape[i]) + ", below zero");
    s.dims[i] = t.shape[i];
  }
  return s;
}

// The DLTensor's strides in elements (null: row-major, as DLPack says).
inline stride_list dl_strides(const DLTensor& t, const shape& dims) {
  if (!t.strides) return row_major_strides(dims);
  stride_list st{};
  for (int i = 0; i < dims.rank; ++i) st[i] = t.strides[i];
  return st;
}

// What an exported DLManagedTensor owns: the buffer (so kiln's memory lives) and the extents.
struct dl_export {
  DLManagedTensor managed{};
  std::shared_ptr<runtime::device_memory> memory;
  dtype type = dtype::f32;
  std::int64_t offset = 0;
  shape dims;
  std::int64_t sizes[max_rank] = {};
  static void release(DLManagedTensor* self) { delete static_cast<dl_export*>(self->manager_ctx); }
};

}  // namespace detail

// A host DLTensor (kDLCPU) as a graph call's argument or result, read and written in place.
inline tensor_ref from_dlpack(const DLTensor& t) {
  const char* who = "from_dlpack";
  if (t.device.device_type != kDLCPU)
    throw error(errc::unsupported, who,
                "the DLTensor is on device type " + std::to_string(t.device.device_type) +
                    "; kiln reads host tensors (kDLCPU) in place, and device tensors only as "
                    "the DLManagedTensor kiln exported");
  dtype type = detail::dtype_of_dl(t.dtype, who);
  shape dims = detail::dl_dims(t, who);
  checked_element_count(dims, size_in_bytes(type), who, "the DLTensor");  // before any stride
  // A null data pointer stays null whatever the offset (the call then refuses it where the
  // tensor has elements), rather than becoming a small address.
  unsigned char* data = t.data ? static_cast<unsigned char*>(t.data) + t.byte_offset : nullptr;
  return tensor_ref(data, type, dims, detail::dl_strides(t, dims));
}

// A DLManagedTensor: kiln's own export as the buffer it came from (on any device), else its host
// tensor as above. The managed tensor must outlive the call.
inline tensor_ref from_dlpack(const DLManagedTensor& m) {
  if (m.deleter != &detail::dl_export::release) return from_dlpack(m.dl_tensor);
  const auto& e = *static_cast<const detail::dl_export*>(m.manager_ctx);
  tensor_ref r(static_cast<const void*>(nullptr), e.type, shape{0});
  r.ref = {nullptr, e.dims, false, e.memory.get(), e.offset};
  r.writable = true;
  return r;
}

// A host DLTensor as a kiln::fn argument or result of element type T (checked).
template <element_type T>
tensor_view<T> dlpack_view(const DLTensor& t) {
  tensor_ref r = from_dlpack(t);
  if (r.type != dtype_of<T>)
    throw error(errc::dtype_mismatch, "dlpack_view",
                "the DLTensor holds " + std::string(name(r.type)) + ", not " +
                    std::string(name(dtype_of<T>)));
  return {static_cast<T*>(const_cast<void*>(r.ref.data)), r.ref.dims, false, r.ref.strided,
          r.ref.steps};
}

// The kiln::buffer a DLManagedTensor that kiln exported came from (for kiln::fn calls on device
// memory): the same memory, offset and extents.
template <element_type T>
buffer<T> dlpack_buffer(const DLManagedTensor& m) {
  if (m.deleter != &detail::dl_export::release)
    throw error(errc::invalid_argument, "dlpack_buffer",
                "the DLManagedTensor was not exported by kiln (take host tensors with "
                "dlpack_view)");
  const auto& e = *static_cast<const detail::dl_export*>(m.manager_ctx);
  if (e.type != dtype_of<T>)
    throw error(errc::dtype_mismatch, "dlpack_buffer",
                "the DLManagedTensor holds " + std::string(name(e.type)) + ", not " +
                    std::string(name(dtype_of<T>)));
  return buffer<T>(e.memory, e.dims, false, e.offset);
}

// b as a DLManagedTensor (the caller, or the framework it is given to, calls its deleter once):
// its memory stays alive until then.
template <element_type T>
DLManagedTensor* to_dlpack(const buffer<T>& b) {
  auto e = std::make_unique<detail::dl_export>();
  e->memory = b.memory()->shared_from_this();
  e->type = dtype_of<T>;
  e->offset = b.offset_bytes();
  e->dims = b.dims();
  for (int i = 0; i < b.dims().rank; ++i) e->sizes[i] = b.dims().dims[i];
  DLTensor& t = e->managed.dl_tensor;
  t.dtype = detail::dl_type_of(dtype_of<T>);
  t.ndim = b.dims().rank;
  t.shape = e->sizes;
  t.strides = nullptr;
  if (unsigned char* host = b.memory()->host_address(); host && b.device_name() == "cpu") {
    t.device = {kDLCPU, 0};
    t.data = host;
    t.byte_offset = static_cast<std::uint64_t>(b.offset_bytes());
  } else {
    t.device = {kDLVulkan, b.memory()->device_index()};
    t.data = b.memory()->vk_buffer();
    t.byte_offset = b.memory()->vk_offset() + static_cast<std::uint64_t>(b.offset_bytes());
  }
  e->managed.manager_ctx = e.get();
  e->managed.deleter = &detail::dl_export::release;
  return &e.release()->managed;
}

// An exported tensor owned by the caller: its deleter runs when the handle goes, unless
// `.release()` handed the pointer to a framework (which then calls the deleter, as DLPack asks).
struct dlpack_deleter {
  void operator()(DLManagedTensor* t) const {
    if (t && t->deleter) t->deleter(t);
  }
};
using dlpack_tensor = std::unique_ptr<DLManagedTensor, dlpack_deleter>;

template <element_type T>
dlpack_tensor to_dlpack_owned(const buffer<T>& b) {
  return dlpack_tensor(to_dlpack(b));
}

}  // namespace kiln
