// kiln's CPU worker threads: a small pool whose idle workers sleep (after a short spin), and which
// gives each thread of a job an equal share of its tasks (the calling thread's the first, worker
// k's the k+1-th), taken in chunks, and lets a thread that has finished its own share take chunks
// of the others'. The shares keep consecutive jobs that split their data alike on the same
// threads' caches; the taking keeps a call on a loaded machine never much slower than running it
// on the calling thread: the caller waits only for chunks a worker has already started, never for
// a worker that has not woken up; a worker the scheduler stacked on the caller's CPU steps off
// it; and when a wait cost more than the worker saved (the scheduler took the worker away) or a
// worker could not leave the caller's CPU, the next jobs run on the calling thread alone for a
// while (docs/ARCHITECTURE.md, "Threads beside a busy process"). While a call runs its
// regions it holds the workers awake (they spin between its jobs instead of sleeping), so that a
// small region's job finds them ready.
#pragma once

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#include "kiln/runtime/cpu/parallel.hpp"

namespace kiln::cpu {

// Threads for large regions, read once: KILN_NUM_THREADS when it is a positive integer (clamped to
// 4 x the hardware threads), else the hardware threads. A value that is not used says so once.
inline int parse_thread_count(const char* env, int hardware) {
  hardware = std::max(hardware, 1);
  if (!env) return hardware;
  std::string_view v = env;
  int n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n < 1) {
    std::fprintf(stderr,
                 "kiln: KILN_NUM_THREADS='%s' is not a positive integer; using %d threads\n", env,
                 hardware);
    return hardware;
  }
  int limit = 4 * hardware;
  if (n > limit) {
    std::fprintf(stderr,
                 "kiln: KILN_NUM_THREADS=%d is above 4 x the %d hardware threads; using %d\n", n,
                 hardware, limit);
    return limit;
  }
  return n;
}

class thread_pool {
  using clock = std::chrono::steady_clock;

 public:
  // `threads` in all: the calling thread and threads - 1 workers.
  explicit thread_pool(int threads) : shares_(static_cast<std::size_t>(std::max(threads, 1))) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ~thread_pool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(first, last) over [0, tasks) in pieces of `chunk` tasks, on the calling thread and
  // at most participants - 1 workers; returns when every piece has run. fn must not throw. While
  // another thread's job holds the pool, the whole range runs on the calling thread.
  void run(std::int64_t tasks, std::int64_t chunk, task_range fn, int participants) {
    // (Decided before the lock: a job's task that runs kiln's kernels under a limit of one
    // thread calls here from the thread that may hold it.)
    if (workers_.empty() || tasks <= chunk || participants < 2) {
      fn(std::int64_t{0}, tasks);
      return;
    }
    std::unique_lock busy(run_mutex_, std::try_to_lock);
    auto start = clock::now();
    if (!busy || solo(start)) {
      fn(std::int64_t{0}, tasks);
      return;
    }
    {
      std::lock_guard lock(mutex_);
      job_ = &fn;
      chunk_ = std::max<std::int64_t>(chunk, 1);
      // Participant s's share: the s-th of n equal runs of whole chunks.
      participants_ = std::min(participants, size());
      const std::int64_t chunks = (tasks + chunk_ - 1) / chunk_, n = participants_;
      for (int s = 0; s < participants_; ++s) {
        shares_[s].next.store(s * chunks / n * chunk_, std::memory_order_relaxed);
        shares_[s].end = std::min(tasks, (s + 1) * chunks / n * chunk_);
        shares_[s].chunks = 0;
        shares_[s].shared_cpu = false;
      }
      open_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    caller_claims_.store(true, std::memory_order_relaxed);
    const std::int64_t caller_chunks = claim(0);
    caller_claims_.store(false, std::memory_order_relaxed);
    auto claimed = clock::now();
    spin_until([&] { return active_.load(std::memory_order_acquire) == 0; });
    std::unique_lock lock(mutex_);
    open_ = false;  // a worker that wakes from now on skips this job
    done_.wait(lock, [&] { return active_ == 0; });
    // Waiting for a worker longer than its chunks saved means the scheduler took it away
    // mid-chunk: another process holds its core, and a worker that gets half a core costs the
    // job ends as much time as its work saves. A worker that ran on a CPU the caller ran on
    // means the scheduler put both on one core (other processes hold the rest, and a core's
    // second thread is not moved), where they take turns and gain nothing. Either way the
    // jobs run on this thread alone for a while, then on all the threads again; a sign within
    // the trial that follows doubles the while.
    const auto ended = clock::now();
    const auto waited = ended - claimed, worked = claimed - start;
    bool one_core = false;
    std::int64_t worker_chunks = 0;
    for (int s = 1; s < participants_; ++s) {
      one_core |= shares_[s].shared_cpu;
      worker_chunks += shares_[s].chunks;
    }
    // The time the workers saved the caller: their chunks at the caller's pace.
    const auto saved = caller_chunks > 0 ? worked * worker_chunks / caller_chunks : waited;
    if (one_core || (waited > saved && waited > std::chrono::microseconds(50))) {
      solo_window_ = ended < trial_end_ ? std::min(2 * solo_window_, longest_solo) : shortest_solo;
      solo_until_.store((ended + solo_window_).time_since_epoch().count(),
                        std::memory_order_relaxed);
      trial_end_ = ended + solo_window_ + trial;
    }
  }

  // Keeps idle workers spinning, rather than sleeping, until as many release() calls: a call
  // holds them while it runs its regions, whose jobs then cost no wake-up (tens of microseconds
  // on a virtual machine, more than a small region's work). Not while the calls run on the
  // calling thread alone: a spinning worker would take a core the machine's other work needs.
  bool hold() {
    if (workers_.empty() || solo(clock::now())) return false;
    held_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  void release() { held_.fetch_sub(1, std::memory_order_relaxed); }

  // Whether jobs run on their callers alone now (after a sign that another process holds the
  // cores): the executors then split their work as for one thread.
  bool solo_now() const { return solo(clock::now()); }

 private:
  // Spins while `ready()` is false, up to a few tens of microseconds: a job that follows soon
  // (a GEMM packs B, then multiplies; a program runs its regions one after another) then finds
  // its workers awake, and its end needs no wake-up, where sleeping costs each a futex wake-up
  // (13 % of a 256³ GEMM's time). Idle longer, the threads sleep.
  // With `held`, a worker spins on while a call holds the pool, up to a bound that keeps a caller
  // that never releases from spinning a core forever.
  template <class Ready>
  void spin_until(Ready ready, bool held = false) const {
    using namespace std::chrono;
    const auto start = steady_clock::now();
    for (;;) {
      for (int i = 0; i < 64; ++i) {
        if (ready()) return;
        pause();
      }
      const auto now = steady_clock::now();
      const auto spun = now - start;
      if (spun < microseconds(50)) continue;
      if (!held || held_.load(std::memory_order_relaxed) == 0 || spun > milliseconds(20) ||
          solo(now))
        return;
      std::this_thread::yield();
    }
  }
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  // Takes chunks until none is left: participant `seat`'s share first, front to back, then
  // what is left of the others'. So where consecutive jobs split their data alike (a product's
  // columns, then an elementwise region's rows over the same cells), each thread's part of one
  // job reads what its part of the job before wrote, from its own cache; a thread that finishes
  // early, or a worker that is late, leaves no thread idle.
  // A worker that finds itself on the CPU the caller takes chunks on (the scheduler stacked the
  // two on one core because other processes hold the rest, and it does not move a core's
  // second thread) steps off it, twice a job at most (the scheduler may have put it back); there
  // again after that, or unable to leave, it notes the shared CPU.
  std::int64_t claim(int seat) {
    std::int64_t chunks = 0;
    int steps_off = 0;
    for (int k = 0; k < participants_; ++k) {
      share& s = shares_[(seat + k) % participants_];
      for (;;) {
        std::int64_t first = s.next.fetch_add(chunk_, std::memory_order_relaxed);
        if (first >= s.end) break;
        if (seat == 0) {
          // Written only when it moved: the workers read it at each of their chunks.
          const int cpu = this_cpu();
          if (cpu != caller_cpu_.load(std::memory_order_relaxed))
            caller_cpu_.store(cpu, std::memory_order_relaxed);
        } else if (caller_claims_.load(std::memory_order_relaxed)) {
          const int cpu = this_cpu();
          if (cpu >= 0 && cpu == caller_cpu_.load(std::memory_order_relaxed)) {
            if (steps_off == 2 || !step_off(cpu))
              shares_[seat].shared_cpu = true;
            else
              ++steps_off;
          }
        }
        (*job_)(first, std::min(first + chunk_, s.end));
        ++chunks;
      }
    }
    shares_[seat].chunks = chunks;
    return chunks;
  }
  // The CPU this thread runs on, or -1 where unknown.
  static int this_cpu() {
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
  }
  // Moves this thread to another CPU the process may use (the scheduler then keeps it there) and
  // gives it back the CPUs it had: it is not pinned. False where it could not.
  static bool step_off(int cpu) {
#if defined(__linux__)
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || !CPU_ISSET(cpu, &allowed))
      return false;
    cpu_set_t others = allowed;
    CPU_CLR(cpu, &others);
    if (CPU_COUNT(&others) == 0 || sched_setaffinity(0, sizeof others, &others) != 0) return false;
    sched_setaffinity(0, sizeof allowed, &allowed);
    return true;
#else
    (void)cpu;
    return false;
#endif
  }
  bool solo(clock::time_point now) const {
    return now.time_since_epoch().count() < solo_until_.load(std::memory_order_relaxed);
  }

  // Worker `seat` (1 … the workers): the job's share of that number, where it has one.
  void work(int seat) {
    std::uint64_t seen = 0;
    for (;;) {
      spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; }, true);
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || (open_ && generation_ != seen); });
      if (stop_) return;
      seen = generation_;
      if (seat >= participants_) continue;  // the job has the threads it may use
      ++active_;
      lock.unlock();
      claim(seat);
      lock.lock();
      if (--active_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one job at a time
  // Jobs run on the caller alone until solo_until_ (a clock::time_point's count; written under
  // run_mutex_, read by hold() and spinning workers), for solo_window_; a sign before
  // trial_end_ doubles the window. A time, not a count of jobs: the scheduler's time slices
  // (milliseconds) outlast many small regions' jobs, and a window shorter than a slice would
  // try the workers again while the neighbour still holds their core.
  static constexpr clock::duration shortest_solo = std::chrono::milliseconds(20),
                                   longest_solo = std::chrono::milliseconds(1280),
                                   trial = std::chrono::milliseconds(50);
  std::atomic<clock::rep> solo_until_{0};
  clock::duration solo_window_ = shortest_solo;
  clock::time_point trial_end_{};
  std::atomic<int> held_{0};  // calls holding the workers awake
  std::mutex mutex_;          // guards the fields below (shares are claimed without it)
  std::condition_variable wake_, done_;
  const task_range* job_ = nullptr;  // the running job's, alive until run() returns
  std::int64_t chunk_ = 1;
  int participants_ = 0;  // the running job's threads, the caller's seat 0 among them
  // The running job's tasks by participant: [next, end), claimed without the mutex.
  struct alignas(64) share {
    std::atomic<std::int64_t> next{0};
    std::int64_t end = 0;
    std::int64_t chunks = 0;  // the chunks its participant ran
    bool shared_cpu = false;  // its participant (a worker) ran on the caller's CPU
  };
  std::vector<share> shares_;
  // Read without the mutex by spinning threads; written with it.
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> active_{0};
  std::atomic<bool> caller_claims_{false};  // the caller is taking chunks of the running job
  std::atomic<int> caller_cpu_{-1};         // where the caller took its last chunk
  bool open_ = false, stop_ = false;
};

// The definitions behind parallel.hpp's declarations (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
namespace detail {
inline int process_thread_count() {
  static const int n = parse_thread_count(std::getenv("KILN_NUM_THREADS"),
                                          static_cast<int>(std::thread::hardware_concurrency()));
  return n;
}
inline thread_local int this_thread_limit = 0;
}  // namespace detail

KILN_RUNTIME_API int thread_limit_of_this_thread() { return detail::this_thread_limit; }
KILN_RUNTIME_API void set_thread_limit_of_this_thread(int threads) {
  detail::this_thread_limit = std::max(threads, 0);
}

namespace detail {
inline thread_pool& process_pool() {
  static thread_pool pool(process_thread_count());
  return pool;
}
}  // namespace detail

KILN_RUNTIME_API int thread_count() {
  const int n = detail::process_thread_count(), limit = detail::this_thread_limit;
  return limit > 0 ? std::min(n, limit) : n;
}

// A job split for several threads and run by its caller alone costs more than one split for one
// (a product's extra column blocks, a convolution's extra bands, rows cut in pieces).
KILN_RUNTIME_API int split_threads() {
  const int threads = thread_count();
  return threads > 1 && detail::process_pool().solo_now() ? 1 : threads;
}

KILN_RUNTIME_API void parallel_for(std::int64_t tasks, std::int64_t chunk, task_range fn) {
  detail::process_pool().run(tasks, chunk, fn, thread_count());
}

KILN_RUNTIME_API bool hold_workers() { return thread_count() > 1 && detail::process_pool().hold(); }
KILN_RUNTIME_API void release_workers() { detail::process_pool().release(); }
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::cpu
