// kiln's CPU worker threads as the executors see them: how many there are, and running a job's
// tasks on them. Declarations only; the pool itself (thread_pool.hpp) is compiled with the runtime.
#pragma once

#include <cstdint>

#include "kiln/core/function_ref.hpp"
#include "kiln/core/runtime_boundary.hpp"

namespace kiln::cpu {

// fn(first, last) runs tasks [first, last) on the calling thread; it must not throw.
using task_range = function_ref<void(std::int64_t, std::int64_t)>;

// Threads for large regions: the process's (read once: KILN_NUM_THREADS when it is a positive
// integer, clamped to 4 x the hardware threads, else the hardware threads; a value that is not
// used says so once), or fewer where the calling thread set a limit (thread_limit).
KILN_RUNTIME_API int thread_count();

// The threads a job's work is split for: thread_count(), or 1 while the pool runs jobs on their
// callers alone (another process holds the cores; thread_pool.hpp).
KILN_RUNTIME_API int split_threads();

// The most threads this thread's CPU work may use (0: no limit of its own), and setting it.
KILN_RUNTIME_API int thread_limit_of_this_thread();
KILN_RUNTIME_API void set_thread_limit_of_this_thread(int threads);

// Runs fn over [0, tasks) in pieces of `chunk` tasks on the calling thread and the process's
// worker pool (made at first use); at most thread_count() threads take part, the calling thread
// among them. Returns when all have run.
KILN_RUNTIME_API void parallel_for(std::int64_t tasks, std::int64_t chunk, task_range fn);

// Keeps the pool's idle workers spinning between jobs until the matching release_workers():
// true where it did (this thread may use several threads, and the pool is not running calls on
// their callers alone because another process holds the cores). workers_awake holds them for a
// scope: a call running its regions one after another.
KILN_RUNTIME_API bool hold_workers();
KILN_RUNTIME_API void release_workers();
class workers_awake {
 public:
  workers_awake() : held_(hold_workers()) {}
  ~workers_awake() {
    if (held_) release_workers();
  }
  workers_awake(const workers_awake&) = delete;
  workers_awake& operator=(const workers_awake&) = delete;

 private:
  bool held_;
};

}  // namespace kiln::cpu

namespace kiln {

// The threads of the CPU calls this thread makes while it lives, as ONNX Runtime's intra-op
// setting: at most `threads` (1: the calling thread alone), within the process's count. A call
// submitted meanwhile keeps the limit when it runs. Scopes nest; the inner one holds.
class thread_limit {
 public:
  explicit thread_limit(int threads) : before_(cpu::thread_limit_of_this_thread()) {
    cpu::set_thread_limit_of_this_thread(threads);
  }
  ~thread_limit() { cpu::set_thread_limit_of_this_thread(before_); }
  thread_limit(const thread_limit&) = delete;
  thread_limit& operator=(const thread_limit&) = delete;

 private:
  int before_;
};

}  // namespace kiln

#if KILN_RUNTIME_BODY
#include "kiln/runtime/cpu/thread_pool.hpp"
#endif
