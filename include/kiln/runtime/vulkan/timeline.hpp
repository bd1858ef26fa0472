// A Vulkan timeline semaphore as a fence's timeline: a device queue's own (what its direct
// submissions signal), or a framework's semaphore made on kiln's VkDevice (external_fence), which
// submissions wait for and signal on the device.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/runtime/fence.hpp"
#include "kiln/runtime/vulkan/check.hpp"

namespace kiln::vulkan {

class semaphore_timeline final : public runtime::timeline {
 public:
  // live: the context's flag, false once its device is destroyed (at exit); every point counts
  // as reached then, since the device was idle before it went.
  semaphore_timeline(VkDevice device, VkSemaphore semaphore, std::string owner,
                     std::shared_ptr<const std::atomic<bool>> live)
      : device_(device), semaphore_(semaphore), owner_(std::move(owner)), live_(std::move(live)) {}

  std::uint64_t reached() const override {
    if (!*live_) return UINT64_MAX;
    std::uint64_t v = 0;
    check(vkGetSemaphoreCounterValue(device_, semaphore_, &v), "vkGetSemaphoreCounterValue");
    return v;
  }
  bool wait(std::uint64_t value, std::chrono::nanoseconds timeout) const override {
    if (!*live_) return true;
    auto wi = vk_struct<VkSemaphoreWaitInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO);
    wi.semaphoreCount = 1;
    wi.pSemaphores = &semaphore_;
    wi.pValues = &value;
    std::uint64_t ns = timeout == std::chrono::nanoseconds::max()
                           ? UINT64_MAX
                           : static_cast<std::uint64_t>(timeout.count());
    VkResult r = vkWaitSemaphores(device_, &wi, ns);
    if (r == VK_TIMEOUT) return false;
    check(r, "vkWaitSemaphores");
    return true;
  }
  void signal(std::uint64_t value) override {
    if (!*live_) return;
    auto si = vk_struct<VkSemaphoreSignalInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO);
    si.semaphore = semaphore_;
    si.value = value;
    check(vkSignalSemaphore(device_, &si), "vkSignalSemaphore");
  }
  std::string owner() const override { return owner_; }

  VkDevice device() const { return device_; }
  VkSemaphore semaphore() const { return semaphore_; }

 private:
  VkDevice device_;
  VkSemaphore semaphore_;
  std::string owner_;
  std::shared_ptr<const std::atomic<bool>> live_;
};

}  // namespace kiln::vulkan
