// kiln::device: where a function runs. The CPU always exists; Vulkan devices are opened on first
// use. The default device is read from KILN_DEVICE once (cpu | vulkan | vulkan:N; unset: the best
// Vulkan GPU if there is one, else the CPU, with a one-line notice saying why).
#pragma once

#include <memory>
#include <ranges>
#include <span>
#include <string>

#include "kiln/core/error.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/buffer.hpp"

struct VkDevice_T;  // Vulkan's handle types (vulkan_core.h; VkBuffer on 64-bit targets),
struct VkBuffer_T;  // without including it

namespace kiln {

namespace vulkan {
class context;
}

class device {
 public:
  enum class kind { cpu, vulkan };

  static device cpu() { return device(kind::cpu, nullptr); }
  // The Vulkan device `index` (enumeration order), or the best one (discrete > integrated >
  // virtual > CPU) when index < 0. Throws kiln::error when there is none.
  KILN_RUNTIME_API static device vulkan(int index = -1);

  // The default device (KILN_DEVICE: cpu | vulkan | vulkan:N; unset: the best Vulkan device that
  // is not a CPU implementation of Vulkan such as lavapipe, or else kiln's own CPU path, with a
  // one-line notice saying why), chosen at the first call.
  KILN_RUNTIME_API static device default_device();

  kind type() const { return kind_; }
  // "cpu", or "vulkan:N (driver's device name)".
  KILN_RUNTIME_API std::string name() const;
  // The Vulkan context (null for the CPU).
  vulkan::context* context() const { return ctx_.get(); }
  // The VkDevice kiln opened (null for the CPU): for a framework's semaphores that kiln's calls
  // wait for and signal (kiln::external_fence).
  KILN_RUNTIME_API VkDevice_T* vulkan_device() const;
  friend bool operator==(const device& a, const device& b) {
    return a.kind_ == b.kind_ && a.ctx_ == b.ctx_;
  }

  // Device memory for n elements (or the given extents), uninitialized.
  template <element_type T>
  buffer<T> alloc(std::int64_t n) const {
    shape dims{n};
    return buffer<T>(memory(checked_element_count(dims, sizeof(T), "device::alloc", "the count") *
                                static_cast<std::int64_t>(sizeof(T)),
                            "alloc"),
                     dims, true);
  }
  template <element_type T>
  buffer<T> alloc(const shape& dims) const {
    return buffer<T>(memory(checked_element_count(dims, sizeof(T), "device::alloc", "the shape") *
                                static_cast<std::int64_t>(sizeof(T)),
                            "alloc"),
                     dims, false);
  }
  // Bytes [offset, offset + bytes) of a VkBuffer the program made on vulkan_device(), as a
  // kiln::buffer with the given extents: no copy. Kernels access whole groups of 4 elements, so
  // the range must hold the elements rounded up to a multiple of 4; offset must be a multiple of
  // the device's minStorageBufferOffsetAlignment. The VkBuffer needs STORAGE_BUFFER usage (and
  // TRANSFER_SRC / TRANSFER_DST for download / upload from device-only memory) and must outlive
  // the kiln::buffer and every call given it.
  template <element_type T>
  buffer<T> wrap(VkBuffer_T* vk_buffer, std::uint64_t offset, std::uint64_t bytes,
                 const shape& dims) const {
    auto count = checked_element_count(dims, sizeof(T), "device::wrap", "the shape");
    return buffer<T>(
        wrapped(vk_buffer, offset, bytes, static_cast<std::uint64_t>(count), sizeof(T)), dims,
        false);
  }

  // A device copy of host data (a contiguous range), flat or with the given extents.
  template <std::ranges::contiguous_range R>
  auto upload(const R& host) const {
    using T = std::ranges::range_value_t<R>;
    auto b = alloc<T>(static_cast<std::int64_t>(std::ranges::size(host)));
    b.upload(std::span<const T>(std::ranges::data(host), std::ranges::size(host)));
    return b;
  }
  template <std::ranges::contiguous_range R>
  auto upload(const R& host, shape dims) const {
    return upload(host).reshaped(dims);
  }

 private:
  device(kind k, std::shared_ptr<vulkan::context> ctx) : kind_(k), ctx_(std::move(ctx)) {}

  KILN_RUNTIME_API std::shared_ptr<runtime::device_memory> memory(std::int64_t bytes,
                                                                  const char* what) const;
  KILN_RUNTIME_API std::shared_ptr<runtime::device_memory> wrapped(VkBuffer_T* vk_buffer,
                                                                   std::uint64_t offset,
                                                                   std::uint64_t bytes,
                                                                   std::uint64_t count,
                                                                   std::uint64_t element) const;

  kind kind_;
  std::shared_ptr<vulkan::context> ctx_;
};

}  // namespace kiln

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "kiln/runtime/host_memory.hpp"
#include "kiln/runtime/vulkan/device_memory.hpp"

namespace kiln {

KILN_RUNTIME_API device device::vulkan(int index) {
  return device(kind::vulkan, vulkan::context::get(index));
}

KILN_RUNTIME_API device device::default_device() {
  static const device d = [] {
    const char* env = std::getenv("KILN_DEVICE");
    std::string_view v = env ? env : "";
    if (v == "cpu") return cpu();
    if (v == "vulkan") return vulkan();
    if (v.starts_with("vulkan:")) {
      int index = -1;
      auto s = v.substr(7);
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), index);
      if (ec != std::errc() || end != s.data() + s.size() || index < 0)
        throw error(errc::invalid_argument, "KILN_DEVICE",
                    "'" + std::string(v) + "' is not vulkan:N with N a device index");
      try {
        return vulkan(index);
      } catch (const error& e) {  // say that the environment asked for it
        throw error(e.code(), "KILN_DEVICE", "'" + std::string(v) + "': " + e.what());
      }
    }
    if (!v.empty())
      throw error(errc::invalid_argument, "KILN_DEVICE",
                  "'" + std::string(v) + "' is not a device (expected cpu, vulkan or vulkan:N)");
    try {  // a GPU: a CPU implementation of Vulkan only where KILN_DEVICE asks for it
      return device(kind::vulkan, vulkan::context::get(-1, vulkan::device_types::not_cpu));
    } catch (const error& e) {
      std::string why = e.what();
      if (why.starts_with("kiln: ")) why.erase(0, 6);
      std::fprintf(stderr, "kiln: running on the CPU; %s\n", why.c_str());
      return cpu();
    }
  }();
  return d;
}

KILN_RUNTIME_API std::string device::name() const {
  if (kind_ == kind::cpu) return "cpu";
  return "vulkan:" + std::to_string(ctx_->index()) + " (" + ctx_->name() + ")";
}

KILN_RUNTIME_API VkDevice_T* device::vulkan_device() const {
  return ctx_ ? ctx_->device() : nullptr;
}

KILN_RUNTIME_API std::shared_ptr<runtime::device_memory> device::wrapped(
    VkBuffer_T* vk_buffer, std::uint64_t offset, std::uint64_t bytes, std::uint64_t count,
    std::uint64_t element) const {
  auto refuse = [](const std::string& why) {
    throw error(errc::invalid_argument, "device::wrap", why);
  };
  if (kind_ != kind::vulkan) refuse("wraps Vulkan buffers; this device is " + name());
  if (!vk_buffer) refuse("the VkBuffer is null");
  const std::uint64_t need = (count + 3) / 4 * 4 * element;
  if (bytes < need)
    refuse("the range holds " + std::to_string(bytes) + " bytes, but " + std::to_string(count) +
           " elements of " + std::to_string(element) + " bytes need " + std::to_string(need) +
           " (kernels access whole groups of 4 elements)");
  if (offset % ctx_->storage_offset_alignment() != 0)
    refuse("offset " + std::to_string(offset) + " is not a multiple of " + name() +
           "'s minStorageBufferOffsetAlignment (" +
           std::to_string(ctx_->storage_offset_alignment()) + " bytes)");
  return std::make_shared<vulkan::device_memory>(std::shared_ptr<vulkan::context>(ctx_),
                                                 reinterpret_cast<VkBuffer>(vk_buffer), offset,
                                                 static_cast<std::size_t>(bytes));
}

KILN_RUNTIME_API std::shared_ptr<runtime::device_memory> device::memory(std::int64_t bytes,
                                                                        const char* what) const {
  if (bytes < 0)
    throw error(errc::invalid_argument, std::string("device::") + what, "negative size");
  if (kind_ == kind::cpu)
    return std::make_shared<runtime::host_memory>(static_cast<std::size_t>(bytes));
  // shared_ptr<vulkan::context> keeps the device alive as long as the memory.
  return std::make_shared<vulkan::device_memory>(std::shared_ptr<vulkan::context>(ctx_),
                                                 static_cast<std::size_t>(bytes));
}
}  // namespace kiln
#endif  // KILN_RUNTIME_BODY
