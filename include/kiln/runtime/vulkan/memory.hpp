// Device memory: large blocks, each one VkDeviceMemory with one VkBuffer over all of it, carved
// into aligned ranges by a first-fit free list. Buffers handed out are (block buffer, offset).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime/vulkan/check.hpp"
#include "kiln/runtime/vulkan/handle.hpp"

namespace kiln::vulkan {

// Every range is aligned and padded to this many bytes: kernels read and write whole 4-element
// groups (up to 32 bytes), and 256 satisfies every device's minStorageBufferOffsetAlignment.
inline constexpr VkDeviceSize range_alignment = 256;
inline constexpr VkDeviceSize padded(VkDeviceSize bytes) {
  return std::max<VkDeviceSize>((bytes + range_alignment - 1) / range_alignment * range_alignment,
                                range_alignment);
}

struct memory_block {
  memory_handle memory;  // declared first: the buffer over it is destroyed before it is freed
  buffer_handle buffer;
  VkDeviceSize size = 0;
  unsigned char* mapped = nullptr;            // host address when the memory type is host-visible
  std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size
};

// A range of a block. Who owns it: the pool that made it, until release(). Or a range of a
// program's own VkBuffer that kiln wraps (no block; the program owns it).
struct allocation {
  memory_block* block = nullptr;
  VkDeviceSize offset = 0, size = 0;
  VkBuffer external = VK_NULL_HANDLE;
  VkBuffer buffer() const { return block ? block->buffer.get() : external; }
  unsigned char* host() const { return block && block->mapped ? block->mapped + offset : nullptr; }
};

// Blocks of one memory type.
class memory_pool {
 public:
  static constexpr VkDeviceSize block_size = VkDeviceSize(64) << 20;

  memory_pool() = default;
  memory_pool(VkDevice device, std::uint32_t type, bool host_visible)
      : device_(device), type_(type), host_visible_(host_visible) {}
  memory_pool(const memory_pool&) = delete;
  memory_pool& operator=(const memory_pool&) = delete;

  bool host_visible() const { return host_visible_; }

  allocation allocate(VkDeviceSize bytes) {
    VkDeviceSize size = padded(bytes);
    for (auto& b : blocks_)
      if (auto a = take(*b, size); a.block) return a;
    blocks_.push_back(make_block(std::max(size, block_size)));
    return take(*blocks_.back(), size);
  }

  void release(const allocation& a) {
    if (!a.block) return;
    auto& f = a.block->free;
    auto [it, ok] = f.emplace(a.offset, a.size);
    auto next = std::next(it);
    if (next != f.end() && it->first + it->second == next->first) {
      it->second += next->second;
      f.erase(next);
    }
    if (it != f.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        f.erase(it);
      }
    }
    // A block that is wholly free again goes back to the driver, but for the first: a large
    // buffer's memory does not stay held after the buffer is gone.
    memory_block* b = a.block;
    if (b != blocks_.front().get() && f.size() == 1 && f.begin()->second == b->size)
      std::erase_if(blocks_, [&](const auto& p) { return p.get() == b; });
  }

 private:
  static allocation take(memory_block& b, VkDeviceSize size) {
    for (auto it = b.free.begin(); it != b.free.end(); ++it) {
      if (it->second < size) continue;
      allocation a{&b, it->first, size};
      VkDeviceSize rest = it->second - size, at = it->first + size;
      b.free.erase(it);
      if (rest) b.free.emplace(at, rest);
      return a;
    }
    return {};
  }

  // A new block; a failure names the call and the size, and leaves nothing behind (the handles
  // destroy what was made).
  std::unique_ptr<memory_block> make_block(VkDeviceSize size) {
    auto b = std::make_unique<memory_block>();
    b->size = size;
    auto fail = [&](VkResult r, const char* call) {
      throw error(errc::device_error, "vulkan",
                  std::string(call) + " failed for a block of " + std::to_string(size) +
                      " bytes: " + result_name(r) + " (" + std::to_string(r) + ")");
    };
    auto bi = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    bi.size = size;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    if (VkResult r = attempt(
            [&] { return vkCreateBuffer(device_, &bi, nullptr, b->buffer.receive(device_)); });
        r != VK_SUCCESS) {
      b->buffer.abandon();  // a failed call may leave anything in its output
      fail(r, "vkCreateBuffer");
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, b->buffer.get(), &req);
    auto ai = vk_struct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type_;
    if (VkResult r = attempt(
            [&] { return vkAllocateMemory(device_, &ai, nullptr, b->memory.receive(device_)); });
        r != VK_SUCCESS) {
      b->memory.abandon();
      fail(r, "vkAllocateMemory");
    }
    if (VkResult r = vkBindBufferMemory(device_, b->buffer.get(), b->memory.get(), 0);
        r != VK_SUCCESS)
      fail(r, "vkBindBufferMemory");
    if (host_visible_) {
      void* p = nullptr;
      if (VkResult r = attempt(
              [&] { return vkMapMemory(device_, b->memory.get(), 0, VK_WHOLE_SIZE, 0, &p); });
          r != VK_SUCCESS)
        fail(r, "vkMapMemory");
      b->mapped = static_cast<unsigned char*>(p);
    }
    b->free.emplace(0, size);
    return b;
  }

  VkDevice device_ = VK_NULL_HANDLE;
  std::uint32_t type_ = 0;
  bool host_visible_ = false;
  std::vector<std::unique_ptr<memory_block>> blocks_;
};

}  // namespace kiln::vulkan
