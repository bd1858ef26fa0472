// Memory a thread keeps from one call to the next, for the lists the runtime rebuilds on every
// call (a region's operands, its collapsed space, a row group's walks): their allocations were
// a large part of a small call's instructions.
#pragma once

#include <utility>

namespace kiln {

// A T taken from this thread's kept one and given back when it goes out of scope, so its
// capacity serves the next call. A use inside a use of the same T (a kiln call made during
// another on the same thread) finds none kept and starts from an empty T; so a scope that needs
// two lists of one type at once keeps one struct holding both.
template <class T>
class thread_kept {
 public:
  thread_kept() : value_(std::move(kept())) {}
  ~thread_kept() { kept() = std::move(value_); }
  thread_kept(const thread_kept&) = delete;
  thread_kept& operator=(const thread_kept&) = delete;

  T& operator*() { return value_; }
  const T& operator*() const { return value_; }
  T* operator->() { return &value_; }

 private:
  static T& kept() {
    thread_local T value;
    return value;
  }
  T value_;
};

}  // namespace kiln
