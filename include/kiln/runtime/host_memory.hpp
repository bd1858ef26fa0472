// The CPU device's memory: bytes in host RAM behind the same device_memory interface as a Vulkan
// device's, so code that uploads, allocates and downloads kiln::buffers runs on every device. A
// call reads and writes it in place (runtime::host_refs), on the CPU and, staged like any host
// data, on Vulkan.
#pragma once

#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "kiln/runtime/buffer.hpp"
#include "kiln/runtime/signature.hpp"
#include "kiln/runtime/submission_queue.hpp"

namespace kiln::runtime {

class host_memory final : public device_memory {
 public:
  // 64-byte aligned, as the CPU's kernels load like.
  explicit host_memory(std::size_t bytes)
      : bytes_(bytes),
        data_(static_cast<unsigned char*>(
            ::operator new (bytes ? bytes : 1, std::align_val_t{alignment}))) {}
  ~host_memory() override { ::operator delete (data_, std::align_val_t{alignment}); }
  host_memory(const host_memory&) = delete;
  host_memory& operator=(const host_memory&) = delete;

  // After the CPU device's submissions so far, which may use the bytes.
  void write(const void* src, std::size_t bytes, std::size_t offset) override {
    cpu_queue().queue.drain();
    if (bytes) std::memcpy(data_ + offset, src, bytes);
  }
  void read(void* dst, std::size_t bytes, std::size_t offset) const override {
    cpu_queue().queue.drain();
    if (bytes) std::memcpy(dst, data_ + offset, bytes);
  }
  std::string device_name() const override { return "cpu"; }
  unsigned char* host_address() const override { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  static constexpr std::size_t alignment = 64;
  std::size_t bytes_;
  unsigned char* data_;
};

// refs into out, with every buffer of the CPU device's memory as the host data it is (other
// devices' buffers stay as they are).
inline void host_refs(std::span<const buffer_ref> refs, std::vector<buffer_ref>& out) {
  out.assign(refs.begin(), refs.end());
  for (buffer_ref& r : out)
    if (auto* h = dynamic_cast<const host_memory*>(r.memory)) {
      r.data = h->host_address() + r.offset;
      r.offset = 0;
      r.memory = nullptr;
    }
}

}  // namespace kiln::runtime
