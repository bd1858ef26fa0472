// A device's host queue: one worker thread that runs submitted calls in submission order, each
// after the fences it waits for. The CPU device runs every submission here; a Vulkan device runs
// here the ones that need the host (host data to stage, regions on the CPU, a wait for a CPU
// fence), and the rest straight on its device queue.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "kiln/core/copyable_function.hpp"
#include "kiln/runtime/fence.hpp"
#include "kiln/runtime/host_counter.hpp"

namespace kiln::runtime {

class submission_queue {
 public:
  submission_queue() = default;
  submission_queue(const submission_queue&) = delete;
  submission_queue& operator=(const submission_queue&) = delete;
  // Runs what is queued (each task's waits giving up: stopping()), then stops the worker.
  ~submission_queue() { stop(); }

  // Queues `task` after every task queued before it; returns its number (1, 2, ...), which the
  // task is given too. The task signals its own fence and must not throw.
  std::uint64_t push(copyable_function<void(std::uint64_t number)> task) {
    std::lock_guard lock(mutex_);
    if (!worker_.joinable()) {
      worker_ = std::thread([this] { work(); });
      worker_id_ = worker_.get_id();
    }
    tasks_.push_back(std::move(task));
    ++pushed_;
    wake_.notify_all();
    return pushed_;
  }

  // The number of the last task queued (0 before the first).
  std::uint64_t last_pushed() const {
    std::lock_guard lock(mutex_);
    return pushed_;
  }

  // Blocks until every task queued so far has run. Does nothing on the worker itself (a task
  // that makes a synchronous call is already in order).
  void drain() {
    std::unique_lock lock(mutex_);
    if (std::this_thread::get_id() == worker_id_) return;
    std::uint64_t until = pushed_;
    wake_.wait(lock, [&] { return done_ >= until; });
  }

  // Whether stop() has begun: a task waiting for a fence that may never come gives up then.
  bool stopping() const {
    std::lock_guard lock(mutex_);
    return stopping_;
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (!worker_.joinable()) return;
      stopping_ = true;
      wake_.notify_all();
    }
    worker_.join();
  }

 private:
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left
      copyable_function<void(std::uint64_t)> task = std::move(tasks_.front());
      tasks_.pop_front();
      const std::uint64_t number = done_ + 1;
      lock.unlock();
      task(number);
      task = nullptr;  // what it holds goes before a drain() returns
      lock.lock();
      ++done_;
      wake_.notify_all();
    }
  }

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<copyable_function<void(std::uint64_t)>> tasks_;
  std::uint64_t pushed_ = 0, done_ = 0;
  bool stopping_ = false;
  std::thread worker_;
  std::thread::id worker_id_;
};

// The CPU device's queue of submissions and the timeline they signal.
struct cpu_submissions {
  submission_queue queue;
  std::shared_ptr<host_counter> line = std::make_shared<host_counter>();
};
inline cpu_submissions& cpu_queue() {
  static cpu_submissions q;
  return q;
}

}  // namespace kiln::runtime
