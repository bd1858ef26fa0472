// Extents: static sizes with kiln::dyn for run-time ones, at the type level (extents<...>) and as a
// constexpr value (shape).
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "kiln/core/error.hpp"
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
    if (d.size() > static_cast<std::size_t>(max_rank))
      throw error(errc::invalid_argument, "shape",
                  "a shape of rank " + detail::to_text(static_cast<std::int64_t>(d.size())) +
                      ", above kiln::max_rank (" + detail::to_text(max_rank) + ")");
    int i = 0;
    for (auto v : d) dims[i++] = v;
  }
  // From any sized range of integers (a std::vector, a span, an importer's list).
  template <class R>
  requires requires(const R& r) {
    { *r.begin() } -> std::convertible_to<std::int64_t>;
    { r.size() } -> std::convertible_to<std::size_t>;
  }
  constexpr explicit shape(const R& d) : rank(static_cast<int>(d.size())) {
    if (d.size() > static_cast<std::size_t>(max_rank))
      throw error(errc::invalid_argument, "shape",
                  "a shape of rank " + detail::to_text(static_cast<std::int64_t>(d.size())) +
                      ", above kiln::max_rank (" + detail::to_text(max_rank) + ")");
    int i = 0;
    for (auto v : d) dims[i++] = static_cast<std::int64_t>(v);
  }
  constexpr std::int64_t operator[](int i) const { return dims[i]; }
  constexpr std::int64_t& operator[](int i) { return dims[i]; }
  constexpr bool is_static() const {
    for (int i = 0; i < rank; ++i)
      if (dims[i] < 0) return false;
    return true;
  }
  // Product of the sizes; only meaningful when is_static() and checked (checked_element_count).
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

// s without its size-1 dims: shapes that hold their elements in the same order compare equal.
constexpr shape squeezed(const shape& s) {
  shape r;
  for (int i = 0; i < s.rank; ++i)
    if (s.dims[i] != 1) r.dims[r.rank++] = s.dims[i];
  return r;
}

// "[2, ?, 768]": dyn (and any negative size) prints as '?'.
constexpr std::string to_string(const shape& s) {
  std::string out = "[";
  for (int i = 0; i < s.rank; ++i) {
    if (i) out += ", ";
    out += s.dims[i] < 0 ? std::string("?") : detail::to_text(s.dims[i]);
  }
  return out + "]";
}

// A shape from a list of sizes, naming `who` and `what` when the list is longer than max_rank.
inline shape shape_of(std::initializer_list<std::int64_t> d, std::string_view who,
                      std::string_view what) {
  if (d.size() > static_cast<std::size_t>(max_rank))
    throw error(errc::invalid_argument, std::string(who),
                std::string(what) + " has rank " + std::to_string(d.size()) +
                    ", above kiln::max_rank (" + std::to_string(max_rank) + ")");
  return shape(d);
}

// The one check for a shape that enters from outside (a view, a tensor_ref, a graph input, an
// allocation): a rank within max_rank, every size >= 0 (or dyn where `allow_dyn`), and an element
// count whose bytes (element_bytes each) fit in 64 bits. Returns the element count (dyn sizes
// count as 1). `who` is the API call, `what` the argument, for the message.
constexpr std::int64_t checked_element_count(const shape& s, int element_bytes,
                                             std::string_view who, std::string_view what,
                                             bool allow_dyn = false) {
  auto fail = [&](const std::string& why) {
    throw error(errc::invalid_argument, std::string(who), std::string(what) + " " + why);
  };
  if (s.rank < 0 || s.rank > max_rank)
    fail("has rank " + detail::to_text(s.rank) + ", above kiln::max_rank (" +
         detail::to_text(max_rank) + ")");
  constexpr std::int64_t limit = 0x7FFFFFFFFFFFFFFF;
  std::int64_t n = 1;
  for (int i = 0; i < s.rank; ++i) {
    std::int64_t d = s.dims[i];
    if (d == dyn && allow_dyn) continue;
    if (d < 0)
      fail("has extents " + to_string(s) + " (size " + detail::to_text(d) + " at axis " +
           detail::to_text(i) + "); a size is >= 0" + (allow_dyn ? " or kiln::dyn" : ""));
    if (d != 0 && n > limit / d)
      n = -1;  // overflow; a later 0 still makes the count 0
    else if (n >= 0)
      n *= d;
  }
  bool zero = false;
  for (int i = 0; i < s.rank; ++i) zero = zero || s.dims[i] == 0;
  if (zero) return 0;
  if (n < 0 || n > limit / (element_bytes > 0 ? element_bytes : 1))
    fail("has extents " + to_string(s) + ": the element count times " +
         detail::to_text(element_bytes) + " bytes does not fit in 64 bits");
  return n;
}

template <std::int64_t... E>
struct extents {
  static_assert(sizeof...(E) <= max_rank, "kiln::extents: rank is limited to kiln::max_rank (8)");
  static_assert(((E >= 0 || E == dyn) && ...), "kiln::extents: a size is >= 0 or kiln::dyn");
  static constexpr int rank = sizeof...(E);
  static constexpr shape value() { return shape{E...}; }
};

}  // namespace kiln
