// A kiln::buffer's memory on a Vulkan device: one allocation of the device pool. Uploads and
// downloads are a memcpy where the device memory is host-visible, else a staged copy command (and
// downloads from a discrete GPU always: the host reads its mapped memory uncached).
#pragma once

#include <cstring>

#include "kiln/runtime/buffer.hpp"
#include "kiln/runtime/vulkan/context.hpp"

namespace kiln::vulkan {

class device_memory final : public runtime::device_memory {
 public:
  device_memory(std::shared_ptr<context> ctx, std::size_t bytes)
      : ctx_(std::move(ctx)), bytes_(bytes), range_(ctx_->allocate_device(bytes)) {}
  // Bytes [offset, offset + bytes) of the program's `buffer`, which it keeps alive.
  device_memory(std::shared_ptr<context> ctx, VkBuffer buffer, VkDeviceSize offset,
                std::size_t bytes)
      : ctx_(std::move(ctx)), bytes_(bytes), range_{nullptr, offset, bytes, buffer} {}
  ~device_memory() override {
    if (range_.block) ctx_->release_device(range_);
  }

  const allocation& range() const { return range_; }
  std::size_t bytes() const { return bytes_; }
  context& owner() const { return *ctx_; }
  unsigned char* host_address() const override { return range_.host(); }
  int device_index() const override { return ctx_->index(); }
  void* vk_buffer() const override { return reinterpret_cast<void*>(range_.buffer()); }
  std::uint64_t vk_offset() const override { return range_.offset; }
  std::string device_name() const override {
    return "vulkan:" + std::to_string(ctx_->index()) + " (" + ctx_->name() + ")";
  }

  // Both after the device's submissions so far (its host queue's first: a direct submission never
  // waits for the host, so the device's are then waited for under the lock).
  void write(const void* src, std::size_t bytes, std::size_t offset) override {
    ctx_->host_queue().drain();
    if (unsigned char* p = range_.host()) {
      std::lock_guard lock(ctx_->mutex());  // never while a call of this device is recorded
      ctx_->finish_submitted();             // nor while one the host did not wait for runs
      if (bytes) std::memcpy(p + offset, src, bytes);
      return;
    }
    copy(
        bytes, offset, [&](unsigned char* staging) { std::memcpy(staging, src, bytes); }, true);
  }
  void read(void* dst, std::size_t bytes, std::size_t offset) const override {
    ctx_->host_queue().drain();
    if (const unsigned char* p = range_.host(); p && ctx_->host_reads_device_memory()) {
      std::lock_guard lock(ctx_->mutex());
      ctx_->finish_submitted();
      if (bytes) std::memcpy(dst, p + offset, bytes);
      return;
    }
    const_cast<device_memory*>(this)->copy(
        bytes, offset, [&](unsigned char* staging) { std::memcpy(dst, staging, bytes); }, false);
  }

 private:
  // Staged copy of `bytes` at byte `offset`: host -> staging -> device (to_device) or back, one
  // submission, waited for.
  template <class Fn>
  void copy(std::size_t bytes, std::size_t offset, Fn&& host_side, bool to_device) {
    if (bytes == 0) return;
    std::lock_guard lock(ctx_->mutex());
    ctx_->finish_submitted();
    allocation staging = ctx_->allocate_host(bytes);
    try {
      if (to_device) host_side(staging.host());
      ctx_->submit_and_wait([&](VkCommandBuffer cb) {
        VkBufferCopy region{to_device ? staging.offset : range_.offset + offset,
                            to_device ? range_.offset + offset : staging.offset, bytes};
        vkCmdCopyBuffer(cb, to_device ? staging.buffer() : range_.buffer(),
                        to_device ? range_.buffer() : staging.buffer(), 1, &region);
        auto mb = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
        mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT;
        vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                             1, &mb, 0, nullptr, 0, nullptr);
      });
      if (!to_device) host_side(staging.host());
    } catch (...) {
      ctx_->release_host(staging);
      throw;
    }
    ctx_->release_host(staging);
    ctx_->check_validation(to_device ? "buffer upload" : "buffer download");
  }

  std::shared_ptr<context> ctx_;
  std::size_t bytes_;
  allocation range_;
};

}  // namespace kiln::vulkan
