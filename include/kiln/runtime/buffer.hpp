// kiln::buffer<T>: tensor data that lives on a device across calls. Made by a device
// (dev.upload(span), dev.alloc<T>(n)); passed to a function bound to that device with no copy.
// buf.slice(offset, count) is a sub-range of the same memory (for arenas and caches).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

namespace kiln {

namespace runtime {
// Bytes on a device; the back end that made them implements the copies. Owned by the buffers
// that share it (and by submissions that use it, until they are done); freed when the last goes.
class device_memory : public std::enable_shared_from_this<device_memory> {
 public:
  virtual ~device_memory() = default;
  // Copies `bytes` from the host into the memory at byte `offset`, or back.
  virtual void write(const void* src, std::size_t bytes, std::size_t offset) = 0;
  virtual void read(void* dst, std::size_t bytes, std::size_t offset) const = 0;
  virtual std::string device_name() const = 0;
  // Where the host can address the bytes directly (host-visible device memory), else null.
  virtual unsigned char* host_address() const { return nullptr; }
  // For export (kiln/dlpack.hpp): a Vulkan device's index, the VkBuffer of the memory block and
  // where the bytes start in it (null and 0 for host memory).
  virtual int device_index() const { return 0; }
  virtual void* vk_buffer() const { return nullptr; }
  virtual std::uint64_t vk_offset() const { return 0; }
};
}  // namespace runtime

template <element_type T>
class buffer {
 public:
  using element = T;
  // offset: where the buffer starts in `memory`, in bytes.
  buffer(std::shared_ptr<runtime::device_memory> memory, shape dims, bool flat,
         std::int64_t offset = 0)
      : memory_(std::move(memory)), dims_(dims), flat_(flat), offset_(offset) {}

  std::int64_t size() const { return dims_.element_count(); }
  const shape& dims() const { return dims_; }
  bool flat() const { return flat_; }  // made from a count rather than a shape
  std::string device_name() const { return memory_->device_name(); }
  runtime::device_memory* memory() const { return memory_.get(); }
  // Where the buffer starts in memory(), in bytes (a slice's; 0 for a whole allocation).
  std::int64_t offset_bytes() const { return offset_; }

  // Elements [offset, offset + count) of this buffer, flat, sharing its memory (which lives as
  // long as any buffer on it). On a Vulkan device a call binds a slice at its byte offset, which
  // must then be a multiple of the device's minStorageBufferOffsetAlignment (the call says so).
  buffer slice(std::int64_t offset, std::int64_t count) const {
    if (offset < 0 || count < 0 || offset > size() || count > size() - offset)
      throw error(errc::invalid_argument, "buffer::slice",
                  "elements [" + std::to_string(offset) + ", " + std::to_string(offset) + " + " +
                      std::to_string(count) + ") are not within the buffer's " +
                      std::to_string(size()) + " (" + std::string(name(dtype_of<T>)) +
                      to_string(dims_) + " on " + device_name() + ")");
    return buffer(memory_, shape{count}, true,
                  offset_ + offset * static_cast<std::int64_t>(sizeof(T)));
  }

  // The same memory seen with other extents (same element count).
  buffer reshaped(const shape& dims) const {
    if (checked_element_count(dims, sizeof(T), "buffer::reshaped", "the shape") != size())
      throw error(errc::shape_mismatch, "buffer::reshaped",
                  "extents " + to_string(dims) + " hold " + std::to_string(dims.element_count()) +
                      " elements but the buffer has " + std::to_string(size()));
    return buffer(memory_, dims, false, offset_);
  }

  void upload(std::span<const T> host) {
    check_count("upload", host.size());
    memory_->write(host.data(), host.size() * sizeof(T), static_cast<std::size_t>(offset_));
  }
  void download(std::span<T> host) const {
    check_count("download", host.size());
    memory_->read(host.data(), host.size() * sizeof(T), static_cast<std::size_t>(offset_));
  }

 private:
  void check_count(const char* what, std::size_t n) const {
    if (static_cast<std::int64_t>(n) != size())
      throw error(errc::shape_mismatch, std::string("buffer::") + what,
                  "the host span has " + std::to_string(n) + " elements but the buffer has " +
                      std::to_string(size()) + " (" + std::string(name(dtype_of<T>)) +
                      to_string(dims_) + " on " + device_name() + ")");
  }
  std::shared_ptr<runtime::device_memory> memory_;
  shape dims_;
  bool flat_ = true;
  std::int64_t offset_ = 0;
};

}  // namespace kiln
