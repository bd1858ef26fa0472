// kiln's CPU worker threads as the executors see them: how many there are, and running a job's
// tasks on them. Declarations only; the pool itself (thread_pool.hpp) is compiled with the runtime.
#pragma once

#include <cstdint>

#include "kiln/core/function_ref.hpp"
#include "kiln/core/runtime_boundary.hpp"

namespace kiln::cpu {

// fn(first, last) runs tasks [first, last) on the calling thread; it must not throw.
using task_range = function_ref<void(std::int64_t, std::int64_t)>;

// Threads for large regions, read once: KILN_NUM_THREADS when it is a positive integer (clamped to
// 4 x the hardware threads), else the hardware threads. A value that is not used says so once.
KILN_RUNTIME_API int thread_count();

// Runs fn over [0, tasks) in pieces of `chunk` tasks on the calling thread and the process's
// worker pool (made at first use, thread_count() threads in all); returns when all have run.
KILN_RUNTIME_API void parallel_for(std::int64_t tasks, std::int64_t chunk, task_range fn);

}  // namespace kiln::cpu

#if KILN_RUNTIME_BODY
#include "kiln/runtime/cpu/thread_pool.hpp"
#endif
