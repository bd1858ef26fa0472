// Extents: static sizes with kiln::dyn for run-time ones, at the type level (extents<...>) and as a
// constexpr value (shape).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kiln/core/text.hpp"

namespace kiln {

// A size known only when the function is called.
inline constexpr std::int64_t dyn = -1;

inline constexpr int max_rank = 8;

// A rank and up to max_rank sizes. In type-level use a size is >= 0 or dyn; inside the IR a
// negative size names a symbolic run-time size (see ir::graph).
struct shape {
  int rank = 0;
  std::array<std::int64_t, max_rank> dims{};

  constexpr shape() = default;
  constexpr shape(std::initializer_list<std::int64_t> d) : rank(static_cast<int>(d.size())) {
    int i = 0;
    for (auto v : d) dims[i++] = v;
  }
  constexpr std::int64_t operator[](int i) const { return dims[i]; }
  constexpr std::int64_t& operator[](int i) { return dims[i]; }
  constexpr bool is_static() const {
    for (int i = 0; i < rank; ++i)
      if (dims[i] < 0) return false;
    return true;
  }
  // Product of the sizes; only meaningful when is_static().
  constexpr std::int64_t element_count() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  friend constexpr bool operator==(const shape& a, const shape& b) {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; ++i)
      if (a.dims[i] != b.dims[i]) return false;
    return true;
  }
};

// "[2, ?, 768]": dyn (and any negative size) prints as '?'.
constexpr std::string to_string(const shape& s) {
  std::string out = "[";
  for (int i = 0; i < s.rank; ++i) {
    if (i) out += ", ";
    out += s.dims[i] < 0 ? std::string("?") : detail::to_text(s.dims[i]);
  }
  return out + "]";
}

template <std::int64_t... E>
struct extents {
  static_assert(sizeof...(E) <= max_rank, "kiln::extents: rank is limited to kiln::max_rank (8)");
  static_assert(((E >= 0 || E == dyn) && ...), "kiln::extents: a size is >= 0 or kiln::dyn");
  static constexpr int rank = sizeof...(E);
  static constexpr shape value() { return shape{E...}; }
};

}  // namespace kiln
