// The benchmarks' shared clock for anchors timed in the same process.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include <benchmark/benchmark.h>

// Best-of-five mean seconds per call of fn (the min filters out interference).
template <class Fn>
double seconds_per_call(Fn&& fn, int calls) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count() / calls);
  }
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
