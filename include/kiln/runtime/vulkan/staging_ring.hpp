// The staging ring: host-visible memory that carries one call's host data to and from the device.
// Calls are synchronous, so the ring starts over at each call; it grows to the largest call seen.
#pragma once

#include <algorithm>
#include <vector>

#include "kiln/runtime/vulkan/memory.hpp"

namespace kiln::vulkan {

class staging_ring {
 public:
  explicit staging_ring(memory_pool& pool) : pool_(&pool) {}
  staging_ring(const staging_ring&) = delete;
  staging_ring& operator=(const staging_ring&) = delete;
  ~staging_ring() { end_call(); }  // the pool itself gives back the current ring

  void reset() { used_ = 0; }
  // `bytes` of the ring (padded), valid until end_call().
  allocation take(VkDeviceSize bytes) {
    VkDeviceSize size = padded(bytes);
    if (used_ + size > ring_.size) {
      // Grow: a new ring for what is left of this call and everything after. Ranges already
      // handed out in this call stay valid in the old block until the call ends.
      if (ring_.block) retired_.push_back(ring_);
      ring_ = pool_->allocate(std::max<VkDeviceSize>(2 * (ring_.size + size), 1 << 20));
      used_ = 0;
    }
    allocation a{ring_.block, ring_.offset + used_, size};
    used_ += size;
    return a;
  }
  // Gives back the rings outgrown during the call.
  void end_call() {
    for (auto& r : retired_) pool_->release(r);
    retired_.clear();
    used_ = 0;
  }

 private:
  memory_pool* pool_;
  allocation ring_;
  VkDeviceSize used_ = 0;
  std::vector<allocation> retired_;
};

}  // namespace kiln::vulkan
