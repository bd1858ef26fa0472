// The benchmarks' shared clock for anchors timed in the same process.
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <thread>

#include <benchmark/benchmark.h>

// Mean seconds per call over one block of `calls` calls of fn.
template <class Fn>
double block_seconds(Fn& fn, int calls) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
}

// Best-of-five mean seconds per call of fn (the min filters out interference).
template <class Fn>
double seconds_per_call(Fn&& fn, int calls) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) best = std::min(best, block_seconds(fn, calls));
  return best;
}

// The benchmark's measured loop over kiln_call (bytes_per_call > 0: a bytes/s counter), then
// kiln_call's seconds per call, the denominator of the ratios beside its anchors.
template <class Fn>
double measure_kiln(benchmark::State& state, Fn&& kiln_call, std::int64_t bytes_per_call,
                    int calls) {
  for (auto _ : state) {
    kiln_call();
    benchmark::ClobberMemory();
  }
  if (bytes_per_call > 0) state.SetBytesProcessed(state.iterations() * bytes_per_call);
  return seconds_per_call(kiln_call, calls);
}

// Counter `name`: the anchor's time over kiln's (above 1: kiln is faster).
template <class Fn>
void ratio(benchmark::State& state, const char* name, Fn&& anchor, int calls, double kiln_seconds) {
  state.counters[name] = seconds_per_call(anchor, calls) / kiln_seconds;
}

// Counter `name` the same way, but with kiln timed again beside the anchor: blocks of `calls`
// calls, kiln and anchor alternating, best of seven each, every block after a 10 ms pause. So
// both see the same machine (this VM's memory bandwidth drifts by 20 % within seconds), and
// neither starts while the other's idle threads still hold the cores: libgomp's workers spin for
// milliseconds after a parallel loop, and kiln's workers, which sleep, cannot start until then.
template <class Fn, std::invocable Kiln>
void ratio(benchmark::State& state, const char* name, Fn&& anchor, int calls, Kiln&& kiln_call) {
  auto block = [&](auto& fn) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return block_seconds(fn, calls);
  };
  double best_anchor = 1e30, best_kiln = 1e30;
  for (int round = 0; round < 7; ++round) {
    best_anchor = std::min(best_anchor, block(anchor));
    best_kiln = std::min(best_kiln, block(kiln_call));
  }
  state.counters[name] = best_anchor / best_kiln;
}
