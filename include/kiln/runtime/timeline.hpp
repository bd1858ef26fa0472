// runtime::timeline: a counter that only grows, which fences (fence.hpp) are points on.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>

namespace kiln::runtime {

// A counter that only grows, which threads (and, for a Vulkan semaphore, devices) wait on.
class timeline {
 public:
  virtual ~timeline() = default;
  // The value reached so far.
  virtual std::uint64_t reached() const = 0;
  // Blocks until `value` is reached or `timeout` passes; whether it was reached.
  virtual bool wait(std::uint64_t value, std::chrono::nanoseconds timeout) const = 0;
  // Advances to `value` from the host (a submission that ran there signalling its points).
  virtual void signal(std::uint64_t value) = 0;
  // "cpu", or the Vulkan device's name: where the timeline advances.
  virtual std::string owner() const = 0;
  // Why no value beyond reached() will ever come (a kiln::host_timeline destroyed), or null:
  // waits then return at once, and the fences not reached fail with it.
  virtual std::exception_ptr abandoned() const { return nullptr; }
};

}  // namespace kiln::runtime
