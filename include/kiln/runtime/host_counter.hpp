// runtime::host_counter: a timeline the host advances (timeline.hpp), waited on with a condition
// variable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "kiln/runtime/timeline.hpp"

namespace kiln::runtime {

// A timeline the host advances: the CPU device's queue, and kiln::host_timeline for a
// framework's own events.
class host_counter final : public timeline {
 public:
  std::uint64_t reached() const override {
    std::lock_guard lock(mutex_);
    return value_;
  }
  bool wait(std::uint64_t value, std::chrono::nanoseconds timeout) const override {
    std::unique_lock lock(mutex_);
    auto done = [&] { return value_ >= value || abandoned_; };
    if (timeout == std::chrono::nanoseconds::max()) {
      changed_.wait(lock, done);
      return true;
    }
    return changed_.wait_for(lock, timeout, done);
  }
  std::exception_ptr abandoned() const override {
    std::lock_guard lock(mutex_);
    return abandoned_;
  }
  // No value beyond the one reached will come: waiters wake, and fail with `why`.
  void abandon(std::exception_ptr why) {
    {
      std::lock_guard lock(mutex_);
      if (!abandoned_) abandoned_ = std::move(why);
    }
    changed_.notify_all();
  }
  std::string owner() const override { return "cpu"; }
  // Advances to `value` (never back).
  void signal(std::uint64_t value) override {
    {
      std::lock_guard lock(mutex_);
      if (value > value_) value_ = value;
    }
    changed_.notify_all();
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::uint64_t value_ = 0;
  std::exception_ptr abandoned_;
};

}  // namespace kiln::runtime
