// kiln::fence: a point on a timeline (a counter that only grows), as the IREE HAL's (semaphore,
// value) pairs: what an asynchronous call returns, what kiln::after makes a later call wait for,
// and how a call's failure reaches whoever waits for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/timeline.hpp"

namespace kiln {

namespace runtime {

class host_counter;  // host_counter.hpp

}  // namespace runtime

class fence;

namespace detail {

// What a fence shares with the submission that signals it: the point, and the submission's
// failure, set before the point is signalled. (Only the host queue's submissions fail that way: a
// submission goes straight to a device only when every fence it waits for is a device's point,
// which never carries a failure, or one already reached without one.)
struct fence_state {
  std::shared_ptr<runtime::timeline> line;
  std::uint64_t value = 0;
  std::mutex mutex;
  std::exception_ptr failure;

  std::exception_ptr failed() {
    std::lock_guard lock(mutex);
    return failure;
  }
  void fail(std::exception_ptr e) {
    std::lock_guard lock(mutex);
    if (!failure) failure = std::move(e);
  }
};

}  // namespace detail

// The point a submitted call signals when it is done. Copies share the point. A default fence is
// already reached. Inputs and outputs of the call must outlive it (kiln keeps its own buffers
// alive until then; host memory it cannot).
class fence {
 public:
  fence() = default;
  fence(std::shared_ptr<runtime::timeline> line, std::uint64_t value)
      : s_(std::make_shared<detail::fence_state>()) {
    s_->line = std::move(line);
    s_->value = value;
  }
  // The fence of a submission that shares `state` (made before its value was known).
  explicit fence(std::shared_ptr<detail::fence_state> state) : s_(std::move(state)) {}

  // Whether the call has finished (successfully or not); never blocks.
  bool ready() const {
    return !s_ || s_->line->reached() >= s_->value || s_->line->abandoned() != nullptr;
  }
  // Blocks until the call has finished; throws its kiln::error (or one of a call it waited for)
  // when it failed.
  void wait() const {
    if (!s_) return;
    s_->line->wait(s_->value, std::chrono::nanoseconds::max());
    rethrow_failure();
  }
  // The same with a limit: false when the call has not finished within `timeout`.
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) const {
    if (!s_) return true;
    if (!s_->line->wait(s_->value, saturated(timeout))) return false;
    rethrow_failure();
    return true;
  }

  // A limit in nanoseconds: none below zero; a century or more (hours::max() included, which
  // overflows a cast to nanoseconds) is no limit at all (nanoseconds::max(), as wait()).
  template <class Rep, class Period>
  static std::chrono::nanoseconds saturated(std::chrono::duration<Rep, Period> timeout) {
    const std::chrono::duration<double> seconds = timeout;
    if (!(seconds.count() > 0)) return std::chrono::nanoseconds::zero();
    if (seconds.count() >= 100 * 365.25 * 86400) return std::chrono::nanoseconds::max();
    return std::chrono::duration_cast<std::chrono::nanoseconds>(seconds);
  }

  runtime::timeline* line() const { return s_ ? s_->line.get() : nullptr; }
  std::uint64_t value() const { return s_ ? s_->value : 0; }
  const std::shared_ptr<detail::fence_state>& state() const { return s_; }

 private:
  void rethrow_failure() const {
    if (auto e = s_->failed()) std::rethrow_exception(e);
    if (s_->line->reached() < s_->value)
      if (auto e = s_->line->abandoned()) std::rethrow_exception(e);
  }
  std::shared_ptr<detail::fence_state> s_;
};

// A timeline a framework advances from the host (its own events): at(v) is the fence reached when
// signal(v') is called with v' >= v. Submissions that wait for it wait on the host of their
// device's queue.
// Copies share the timeline; once the last is destroyed, the points it never reached fail (a
// kiln::error naming it) and the calls waiting for them fail without running.
class host_timeline {
 public:
  KILN_RUNTIME_API host_timeline();
  KILN_RUNTIME_API fence at(std::uint64_t value) const;
  KILN_RUNTIME_API void signal(std::uint64_t value) const;
  KILN_RUNTIME_API std::uint64_t reached() const;

 private:
  struct owner;  // abandons the counter when the last copy goes
  std::shared_ptr<owner> owner_;
};

// A submission's order: the fences it waits for before it starts (kiln::after(f, ...)), and extra
// fences it signals when done (.then_signal(f): points on external timelines, e.g. a Vulkan
// semaphore of the framework's, kiln::vulkan::external_fence).
struct submission_order {
  std::vector<fence> waits, signals;
  // What the call must keep alive until it is done (a bound function's arguments).
  std::shared_ptr<const void> keep;
  submission_order then_signal(fence f) const {
    submission_order o = *this;
    o.signals.push_back(std::move(f));
    return o;
  }
};

// after(f1, f2, ...): leads a submit(...) call's arguments; the call starts once every fence is
// reached, and fails (without running) when one of them reports a failure.
template <class... F>
submission_order after(const F&... fences) {
  static_assert((std::is_convertible_v<const F&, const fence&> && ...),
                "kiln::after takes kiln::fence values (what submit returns)");
  return {{fences...}, {}, {}};
}
inline submission_order after(std::vector<fence> fences) { return {std::move(fences), {}, {}}; }

}  // namespace kiln

// host_timeline's definitions (core/runtime_boundary.hpp): the host counter and its condition
// variable stay out of the files that only call functions.
#if KILN_RUNTIME_BODY
#include "kiln/runtime/host_counter.hpp"

namespace kiln {

struct host_timeline::owner {
  std::shared_ptr<runtime::host_counter> line = std::make_shared<runtime::host_counter>();
  ~owner() {
    line->abandon(std::make_exception_ptr(error(errc::invalid_argument, "host_timeline",
                                                "destroyed at " + std::to_string(line->reached()) +
                                                    ": a point beyond it is never reached")));
  }
};

KILN_RUNTIME_API host_timeline::host_timeline() : owner_(std::make_shared<owner>()) {}
KILN_RUNTIME_API fence host_timeline::at(std::uint64_t value) const {
  return fence(owner_->line, value);
}
KILN_RUNTIME_API void host_timeline::signal(std::uint64_t value) const {
  owner_->line->signal(value);
}
KILN_RUNTIME_API std::uint64_t host_timeline::reached() const { return owner_->line->reached(); }

}  // namespace kiln
#endif  // KILN_RUNTIME_BODY
