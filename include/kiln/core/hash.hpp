// FNV-1a over a sequence of integers: kiln's one hash (kernel keys, dedup tables, dump names).
#pragma once

#include <cstdint>

namespace kiln::detail {

template <class Range>
constexpr std::uint64_t fnv1a(const Range& values, std::uint64_t seed = 0) {
  std::uint64_t h = 1469598103934665603ull ^ seed;
  for (auto v : values) h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ull;
  return h;
}

}  // namespace kiln::detail
