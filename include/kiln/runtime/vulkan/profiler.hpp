// KILN_PROFILE=1: the device time of each dispatch of a call that waits for its result, from
// timestamp queries around the dispatch, printed to stderr once the call is done.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kiln/core/profile.hpp"
#include "kiln/runtime/vulkan/check.hpp"
#include "kiln/runtime/vulkan/handle.hpp"

namespace kiln::vulkan {

// A query pool with two timestamps per dispatch of the call being recorded, and what each
// dispatch runs. Each timestamp is taken when the commands before it have finished their compute
// shaders, so a dispatch's time is from the end of the one before (the executor separates
// dependent dispatches by barriers) to its own end.
class dispatch_profiler {
 public:
  // period: nanoseconds per tick (timestampPeriod); valid_bits: the queue's timestampValidBits.
  dispatch_profiler(VkDevice device, float period, std::uint32_t valid_bits)
      : device_(device), period_(period), valid_bits_(valid_bits) {}

  // Whether the queue takes timestamps at all (timestampValidBits > 0).
  bool usable() const { return valid_bits_ > 0; }

  // Starts a call's recording into cb for up to `dispatches` dispatches.
  void begin(VkCommandBuffer cb, std::uint32_t dispatches) {
    labels_.clear();
    if (dispatches * 2 > capacity_) {
      capacity_ = std::max(dispatches * 2, 64u);
      auto qi = vk_struct<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = capacity_;
      check(vkCreateQueryPool(device_, &qi, nullptr, pool_.receive(device_)), "vkCreateQueryPool");
    }
    vkCmdResetQueryPool(cb, pool_.get(), 0, dispatches * 2);
  }
  // Around the call's next dispatch (what it runs: `label`).
  void before(VkCommandBuffer cb, std::string label) {
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, pool_.get(),
                        static_cast<std::uint32_t>(labels_.size() * 2));
    labels_.push_back(std::move(label));
  }
  void after(VkCommandBuffer cb) {
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, pool_.get(),
                        static_cast<std::uint32_t>(labels_.size() * 2 - 1));
  }

  // Each recorded dispatch's device time in microseconds, once the call has finished.
  std::vector<double> read() const {
    const auto n = static_cast<std::uint32_t>(labels_.size());
    std::vector<std::uint64_t> ticks(2 * n);
    if (n)
      check(vkGetQueryPoolResults(device_, pool_.get(), 0, 2 * n, ticks.size() * 8, ticks.data(), 8,
                                  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
            "vkGetQueryPoolResults");
    const std::uint64_t mask =
        valid_bits_ >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << valid_bits_) - 1;
    std::vector<double> us(n);
    for (std::uint32_t i = 0; i < n; ++i)
      us[i] = double((ticks[2 * i + 1] - ticks[2 * i]) & mask) * period_ / 1000.0;
    return us;
  }

  // Prints the call's dispatches of program `program`: one line each, then their sum.
  void print(const std::string& program) const {
    std::vector<double> us = read();
    double total = 0;
    for (std::size_t i = 0; i < us.size(); ++i) {
      std::fprintf(stderr, "kiln profile: %s dispatch %zu: %10.2f us  %s\n", program.c_str(), i,
                   us[i], labels_[i].c_str());
      total += us[i];
    }
    std::fprintf(stderr, "kiln profile: %s %zu dispatches: %10.2f us\n", program.c_str(), us.size(),
                 total);
  }

 private:
  VkDevice device_;
  float period_;
  std::uint32_t valid_bits_;
  std::uint32_t capacity_ = 0;
  query_pool_handle pool_;
  std::vector<std::string> labels_;
};

}  // namespace kiln::vulkan
