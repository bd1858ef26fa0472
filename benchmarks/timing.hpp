// The benchmarks' shared clock for anchors timed in the same process.
#pragma once

#include <algorithm>
#include <chrono>

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
