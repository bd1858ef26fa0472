// A device queue as kiln submits to it, in the IREE HAL's shape: every submission takes a list of
// (timeline semaphore, value) pairs to wait for and a list to signal, so that calls chain on the
// device with no host wait between them. Each submission records into a command buffer and a
// descriptor pool of its own, reused only once the queue's own timeline semaphore shows that the
// device has finished with them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kiln/runtime/vulkan/check.hpp"
#include "kiln/runtime/vulkan/handle.hpp"

namespace kiln::vulkan {

// A point on a timeline semaphore: waited for, or signalled, by a submission.
struct semaphore_value {
  VkSemaphore semaphore = VK_NULL_HANDLE;
  std::uint64_t value = 0;
};

class queue {
 public:
  // The queue `family`'s first queue of `device`, with its command pool and timeline semaphore.
  // A failure half way destroys what was made (the handles do). The owner makes sure the device
  // is idle before the queue goes.
  queue(VkDevice device, std::uint32_t family) : device_(device) {
    vkGetDeviceQueue(device_, family, 0, &queue_);
    auto ci = vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    ci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    ci.queueFamilyIndex = family;
    VkResult r = attempt(
        [&] { return vkCreateCommandPool(device_, &ci, nullptr, commands_.receive(device_)); });
    if (r != VK_SUCCESS) commands_.abandon();
    check(r, "vkCreateCommandPool");
    *timeline_.receive(device_) = create_timeline(device_);
  }
  queue(const queue&) = delete;
  queue& operator=(const queue&) = delete;

  // The queue's own timeline: submission n signals value n.
  VkSemaphore timeline() const { return timeline_.get(); }
  // The last submission's value on timeline() (0 before the first).
  std::uint64_t last_submitted() const { return submitted_; }

  // Starts recording a submission into a command buffer no pending submission uses, whose
  // descriptor pool holds at least `sets` sets and `descriptors` storage-buffer descriptors.
  VkCommandBuffer begin(std::uint32_t sets, std::uint32_t descriptors) {
    if (recording_) batches_[current_].done_at = 0;  // a recording abandoned by an exception
    check(vkGetSemaphoreCounterValue(device_, timeline_.get(), &finished_),
          "vkGetSemaphoreCounterValue");
    auto free =
        std::ranges::find_if(batches_, [&](const batch& b) { return b.done_at <= finished_; });
    if (free == batches_.end()) {
      batches_.push_back(make_batch());
      free = batches_.end() - 1;
    }
    current_ = static_cast<std::size_t>(free - batches_.begin());
    batch& b = *free;
    b.done_at = UINT64_MAX;  // recording: not free until its submission finishes
    recording_ = true;
    grow_descriptors(b, sets, descriptors);
    check(vkResetDescriptorPool(device_, b.descriptors.get(), 0), "vkResetDescriptorPool");
    check(vkResetCommandBuffer(b.commands, 0), "vkResetCommandBuffer");
    auto bi = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(b.commands, &bi), "vkBeginCommandBuffer");
    return b.commands;
  }

  // A descriptor set from the recording submission's pool.
  VkDescriptorSet descriptor_set(VkDescriptorSetLayout layout) {
    auto ai =
        vk_struct<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
    ai.descriptorPool = batches_[current_].descriptors.get();
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set;
    check(attempt([&] { return vkAllocateDescriptorSets(device_, &ai, &set); }),
          "vkAllocateDescriptorSets");
    return set;
  }
  // The largest descriptor pool so far, in sets.
  std::uint32_t descriptor_set_capacity() const {
    std::uint32_t most = 0;
    for (const batch& b : batches_) most = std::max(most, b.sets);
    return most;
  }

  // Ends the recording and submits it: it starts once every `wait` value is reached and, when
  // done, signals every `signal` value and its own value on timeline(), which it returns. A failed
  // submission leaves its command buffer free again.
  std::uint64_t submit(std::span<const semaphore_value> wait = {},
                       std::span<const semaphore_value> signal = {}) {
    batch& b = batches_[current_];
    b.done_at = 0;  // free again unless the submission below is made
    recording_ = false;
    check(vkEndCommandBuffer(b.commands), "vkEndCommandBuffer");
    std::vector<VkSemaphore> wait_semaphores, signal_semaphores{timeline_.get()};
    std::vector<std::uint64_t> wait_values, signal_values{submitted_ + 1};
    std::vector<VkPipelineStageFlags> stages;
    for (const semaphore_value& w : wait) {
      wait_semaphores.push_back(w.semaphore);
      wait_values.push_back(w.value);
      stages.push_back(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
    }
    for (const semaphore_value& s : signal) {
      signal_semaphores.push_back(s.semaphore);
      signal_values.push_back(s.value);
    }
    auto ti =
        vk_struct<VkTimelineSemaphoreSubmitInfo>(VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO);
    ti.waitSemaphoreValueCount = static_cast<std::uint32_t>(wait_values.size());
    ti.pWaitSemaphoreValues = wait_values.data();
    ti.signalSemaphoreValueCount = static_cast<std::uint32_t>(signal_values.size());
    ti.pSignalSemaphoreValues = signal_values.data();
    auto si = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    si.pNext = &ti;
    si.waitSemaphoreCount = static_cast<std::uint32_t>(wait_semaphores.size());
    si.pWaitSemaphores = wait_semaphores.data();
    si.pWaitDstStageMask = stages.data();
    si.commandBufferCount = 1;
    si.pCommandBuffers = &b.commands;
    si.signalSemaphoreCount = static_cast<std::uint32_t>(signal_semaphores.size());
    si.pSignalSemaphores = signal_semaphores.data();
    check(attempt([&] { return vkQueueSubmit(queue_, 1, &si, VK_NULL_HANDLE); }), "vkQueueSubmit");
    b.done_at = ++submitted_;
    return submitted_;
  }

  // Blocks the calling thread until submission `value` of this queue has finished (no driver
  // call when it is already known to have: every synchronous call has waited for its own).
  void wait(std::uint64_t value) {
    if (value <= finished_) return;
    semaphore_value point{timeline_.get(), value};
    wait_all(device_, std::span(&point, 1));
    finished_ = value;
  }

  // Blocks until every point in `points` is reached.
  static void wait_all(VkDevice device, std::span<const semaphore_value> points) {
    std::vector<VkSemaphore> semaphores;
    std::vector<std::uint64_t> values;
    for (const semaphore_value& p : points) {
      semaphores.push_back(p.semaphore);
      values.push_back(p.value);
    }
    auto wi = vk_struct<VkSemaphoreWaitInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO);
    wi.semaphoreCount = static_cast<std::uint32_t>(semaphores.size());
    wi.pSemaphores = semaphores.data();
    wi.pValues = values.data();
    check(vkWaitSemaphores(device, &wi, UINT64_MAX), "vkWaitSemaphores");
  }

  // A new timeline semaphore at value 0 (the caller destroys it).
  static VkSemaphore create_timeline(VkDevice device) {
    auto st = vk_struct<VkSemaphoreTypeCreateInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO);
    st.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    auto sc = vk_struct<VkSemaphoreCreateInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO);
    sc.pNext = &st;
    VkSemaphore s = VK_NULL_HANDLE;
    check(attempt([&] { return vkCreateSemaphore(device, &sc, nullptr, &s); }),
          "vkCreateSemaphore");
    return s;
  }

 private:
  // One submission's command buffer and descriptor pool; free once timeline() reaches done_at.
  struct batch {
    VkCommandBuffer commands = VK_NULL_HANDLE;
    descriptor_pool_handle descriptors;
    std::uint32_t sets = 0, descriptor_count = 0;
    std::uint64_t done_at = 0;
  };

  batch make_batch() {
    batch b;
    auto ai =
        vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    ai.commandPool = commands_.get();
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(attempt([&] { return vkAllocateCommandBuffers(device_, &ai, &b.commands); }),
          "vkAllocateCommandBuffers");
    try {
      grow_descriptors(b, 64, 1024);
    } catch (...) {
      vkFreeCommandBuffers(device_, commands_.get(), 1, &b.commands);
      throw;
    }
    return b;
  }

  // Makes b's pool hold `sets` sets and `descriptors` descriptors, at least doubling when it
  // grows; a pool never shrinks. Only between submissions (no set of the old pool is in use).
  void grow_descriptors(batch& b, std::uint32_t sets, std::uint32_t descriptors) {
    if (b.descriptors && sets <= b.sets && descriptors <= b.descriptor_count) return;
    std::uint32_t want_sets = std::max(sets, 2 * b.sets);
    std::uint32_t want_descriptors = std::max(descriptors, 2 * b.descriptor_count);
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, want_descriptors};
    auto dp = vk_struct<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
    dp.maxSets = want_sets;
    dp.poolSizeCount = 1;
    dp.pPoolSizes = &size;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    check(attempt([&] { return vkCreateDescriptorPool(device_, &dp, nullptr, &pool); }),
          "vkCreateDescriptorPool");
    b.descriptors = descriptor_pool_handle(device_, pool);  // the old pool goes
    b.sets = want_sets;
    b.descriptor_count = want_descriptors;
  }

  VkDevice device_;
  VkQueue queue_ = VK_NULL_HANDLE;
  // Destroyed in reverse order: the batches' descriptor pools, the semaphore, the command pool
  // (which frees its command buffers).
  command_pool_handle commands_;
  semaphore_handle timeline_;
  std::uint64_t submitted_ = 0;
  std::uint64_t finished_ = 0;  // timeline() is known to have reached this value
  std::vector<batch> batches_;
  std::size_t current_ = 0;  // the batch being recorded, or last recorded
  bool recording_ = false;
};

}  // namespace kiln::vulkan
