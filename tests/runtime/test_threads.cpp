// Threads per call and per executable (kiln::thread_limit, executable::set_threads): a limit of one
// keeps the work on the calling thread; a limit of n lets at most n threads take part; the
// process's count holds outside any limit; calls under a limit, synchronous or submitted, compute
// what they compute without one; each thread of a job starts on its own share of the tasks; a
// worker stacked on the caller's CPU steps off it, and one that cannot leaves the next jobs to the
// caller.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>
#include <kiln/runtime/cpu/parallel.hpp>

#include "../support/errors.hpp"

using namespace kiln;

namespace {

// The threads that ran a job of many small tasks.
std::set<std::thread::id> threads_of_a_job() {
  std::mutex m;
  std::set<std::thread::id> ids;
  cpu::parallel_for(2000, 1, [&](std::int64_t first, std::int64_t last) {
    volatile double sink = 0;
    for (std::int64_t t = first; t < last; ++t)
      for (int k = 0; k < 2000; ++k) sink = sink + double(k) * double(t);
    std::lock_guard lock(m);
    ids.insert(std::this_thread::get_id());
  });
  return ids;
}

// Each thread of a job starts on its own share of the tasks (the calling thread on the first half,
// the worker on the second), so that jobs which split their data alike keep it on the same
// threads; a thread done with its share takes what is left of the others'. Each thread's first
// task waits (5 s at most) until the other has begun one, so that neither takes from the other's
// share before that thread's first look at it. (First in this file: the process's first job, so
// that no earlier long wait has the pool running jobs on their callers alone.)
TEST(Threads, EachThreadStartsOnItsOwnShareOfTheTasks) {
  if (cpu::thread_count() < 2) GTEST_SKIP() << "one hardware thread: no worker";
  const thread_limit two(2);
  const auto caller = std::this_thread::get_id();
  constexpr std::int64_t tasks = 8;
  std::vector<std::atomic<int>> runs(tasks);
  std::atomic<bool> caller_began{false}, worker_began{false};
  std::atomic<std::int64_t> callers_first{-1}, workers_first{-1};
  cpu::parallel_for(tasks, 1, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t t = first; t < last; ++t) {
      runs[t]++;
      const bool on_caller = std::this_thread::get_id() == caller;
      std::int64_t none = -1;
      if ((on_caller ? callers_first : workers_first).compare_exchange_strong(none, t)) {
        (on_caller ? caller_began : worker_began) = true;
        const std::atomic<bool>& other = on_caller ? worker_began : caller_began;
        for (int i = 0; i < 5000 && !other; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  });
  for (std::int64_t t = 0; t < tasks; ++t) EXPECT_EQ(runs[t].load(), 1) << "task " << t;
  ASSERT_TRUE(worker_began) << "no worker took part in 5 s";
  EXPECT_EQ(callers_first.load(), 0) << "the calling thread began outside its share";
  EXPECT_EQ(workers_first.load(), tasks / 2) << "the worker began outside its share";
}

#if defined(__linux__)
// The CPUs this thread may run on, and setting them.
cpu_set_t allowed_cpus() {
  cpu_set_t set;
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  return set;
}
void allow_cpus(const cpu_set_t& set) { EXPECT_EQ(sched_setaffinity(0, sizeof set, &set), 0); }
cpu_set_t only_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return set;
}

// A job of 8 tasks on two threads, the caller kept on one CPU: the caller's first task waits
// (2 s at most) until the worker has run its first two tasks; the worker's first waits until the
// caller has begun, then moves the worker onto the caller's CPU (and gives it back all the CPUs
// it had unless `keep_it_there`). Returns the CPU of the worker's second task, or -1 where no
// worker took part: after an earlier job's signs the pool runs jobs on their callers alone for
// up to 1.28 s, so a test tries again after that.
int worker_cpu_after_joining_the_caller(int callers_cpu, bool keep_it_there) {
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> caller_began{false};
  std::atomic<int> worker_tasks{0}, second_cpu{-1};
  auto wait_for = [](auto ready) {
    for (int i = 0; i < 2000 && !ready(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  cpu::parallel_for(8, 1, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t t = first; t < last; ++t) {
      if (std::this_thread::get_id() == caller) {
        if (t == 0) {
          caller_began = true;
          wait_for([&] { return worker_tasks >= 2; });
        }
        continue;
      }
      const int n = ++worker_tasks;
      if (n == 1) {
        wait_for([&] { return caller_began.load(); });
        const cpu_set_t had = allowed_cpus();
        allow_cpus(only_cpu(callers_cpu));  // moves this thread there now
        if (!keep_it_there) allow_cpus(had);
      } else if (n == 2) {
        second_cpu = sched_getcpu();
      }
    }
  });
  return second_cpu;
}
int worker_cpu_after_joining(int callers_cpu, bool keep_it_there) {
  int cpu = -1;
  for (int attempt = 0; attempt < 3 && cpu == -1; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    cpu = worker_cpu_after_joining_the_caller(callers_cpu, keep_it_there);
  }
  return cpu;
}
#endif

// A worker the scheduler stacked on the CPU the caller works on (other processes hold the
// others, and the scheduler does not move a core's second thread) moves itself off it at its
// next task, and is not pinned there. Second in this file: no earlier job's signs have the pool
// running jobs on their callers alone.
TEST(Threads, AWorkerOnTheCallersCpuStepsOffIt) {
#if defined(__linux__)
  if (cpu::thread_count() < 2) GTEST_SKIP() << "one hardware thread: no worker";
  const cpu_set_t had = allowed_cpus();
  if (CPU_COUNT(&had) < 2) GTEST_SKIP() << "one CPU allowed: nowhere to step off to";
  const thread_limit two(2);
  EXPECT_EQ(cpu::split_threads(), 2) << "no job has run alone yet: work splits for both threads";
  cpu::parallel_for(2, 1, [](std::int64_t, std::int64_t) {});  // the pool's workers, unpinned
  const int here = sched_getcpu();
  allow_cpus(only_cpu(here));
  const int worker_cpu = worker_cpu_after_joining(here, false);
  allow_cpus(had);
  ASSERT_NE(worker_cpu, -1) << "no worker took part in three tries";
  EXPECT_NE(worker_cpu, here) << "the worker stayed on the caller's CPU";
#else
  GTEST_SKIP() << "CPU placement is read on Linux only";
#endif
}

// A worker that cannot leave the caller's CPU gains the job nothing: the jobs that follow run
// on the calling thread alone for a while, then on both threads again.
TEST(Threads, AWorkerStuckOnTheCallersCpuLeavesTheNextJobsToTheCaller) {
#if defined(__linux__)
  if (cpu::thread_count() < 2) GTEST_SKIP() << "one hardware thread: no worker";
  const cpu_set_t had = allowed_cpus();
  const thread_limit two(2);
  cpu::parallel_for(2, 1, [](std::int64_t, std::int64_t) {});  // the pool's workers, unpinned
  const int here = sched_getcpu();
  allow_cpus(only_cpu(here));
  const int worker_cpu = worker_cpu_after_joining(here, true);
  const int split_for = cpu::split_threads();
  const auto next = threads_of_a_job();
  ASSERT_NE(worker_cpu, -1) << "no worker took part in three tries";
  EXPECT_EQ(worker_cpu, here);
  EXPECT_EQ(next, std::set<std::thread::id>{std::this_thread::get_id()})
      << "the job after a worker stuck on the caller's CPU ran on the worker too";
  // Meanwhile the executors split their work as for one thread, within the limit of two.
  EXPECT_EQ(split_for, 1);
  EXPECT_EQ(cpu::thread_count(), 2);
  // The worker's CPUs back (a task of its own), once the pool tries the workers again.
  std::atomic<bool> restored{false};
  for (int i = 0; i < 100 && !restored; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto caller = std::this_thread::get_id();
    cpu::parallel_for(64, 1, [&](std::int64_t first, std::int64_t) {
      if (std::this_thread::get_id() == caller) {  // gives a worker time to wake
        for (int k = 0; first == 0 && k < 50 && !restored; ++k)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      } else if (!restored) {
        allow_cpus(had);
        restored = true;
      }
    });
  }
  allow_cpus(had);
  EXPECT_TRUE(restored) << "no job in 6 s ran on the worker again";
#else
  GTEST_SKIP() << "CPU placement is read on Linux only";
#endif
}

TEST(Threads, ALimitBoundsTheThreadsOfTheCallingThreadsWork) {
  const int process = cpu::thread_count();
  {
    thread_limit one(1);
    EXPECT_EQ(cpu::thread_count(), 1);
    EXPECT_EQ(threads_of_a_job(), std::set<std::thread::id>{std::this_thread::get_id()});
    {
      thread_limit two(2);  // the inner scope holds
      EXPECT_EQ(cpu::thread_count(), std::min(process, 2));
      EXPECT_LE(threads_of_a_job().size(), 2u);
    }
    EXPECT_EQ(cpu::thread_count(), 1);
  }
  EXPECT_EQ(cpu::thread_count(), process);
  // Another thread's limit is its own.
  std::thread other([&] {
    thread_limit one(1);
    EXPECT_EQ(cpu::thread_count(), 1);
  });
  other.join();
  EXPECT_EQ(cpu::thread_count(), process);
}

// A call holds the workers awake while it runs its regions (cpu::workers_awake): jobs that follow
// one another closely, small and large, each run every task once; a thread limited to itself
// holds nothing (its jobs wake no worker).
TEST(Threads, JobsWhileTheWorkersAreHeldAwakeRunEveryTaskOnce) {
  {
    thread_limit one(1);
    EXPECT_FALSE(cpu::hold_workers());
  }
  // Whether the pool is held depends on the machine's load (not while calls run on their callers
  // alone): the jobs must be whole either way.
  const cpu::workers_awake awake;
  for (std::int64_t tasks : {1, 3, 64, 5000, 2, 100000}) {
    std::vector<std::atomic<int>> runs(static_cast<std::size_t>(tasks));
    cpu::parallel_for(tasks, 7, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t t = first; t < last; ++t) runs[static_cast<std::size_t>(t)]++;
    });
    for (std::int64_t t = 0; t < tasks; ++t)
      ASSERT_EQ(runs[static_cast<std::size_t>(t)].load(), 1) << "task " << t << " of " << tasks;
  }
}

TEST(Threads, CallsUnderALimitComputeTheSame) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn});
  g.output("y", g.add(g.mul(x, x), g.reduce_sum(x, {0}, true)));
  executable e = compile(g);
  const std::int64_t n = 1 << 18;
  std::vector<float> xs(n), free_y(n), one_y(n), submitted_y(n);
  for (std::int64_t i = 0; i < n; ++i) xs[i] = float(i % 13) * 0.125f - 0.75f;
  const device cpu = device::cpu();
  e.run({xs}, {free_y}, cpu);
  e.set_threads(1);
  e.run({xs}, {one_y}, cpu);
  EXPECT_EQ(one_y, free_y);  // the same bits: folds have one order whatever the threads
  e.set_threads(0);
  {
    thread_limit one(1);
    e.submit({xs}, {submitted_y}, cpu).wait();
  }
  EXPECT_EQ(submitted_y, free_y);
  EXPECT_NE(error_of([&] { e.set_threads(-1); }).find("set_threads takes 0"), std::string::npos);
}

}  // namespace
