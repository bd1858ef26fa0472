// tensor_view: a pointer to contiguous row-major data with its extents; what calls take and write.
#pragma once

#include <initializer_list>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

namespace kiln {

// Not owning: the caller keeps the data alive for the call. `flat` marks a view made from a
// one-dimensional range: it may stand for a tensor of any shape with the same element count.
template <class T>
struct tensor_view {
  T* data = nullptr;
  shape dims;
  bool flat = false;
  constexpr std::int64_t size() const { return dims.element_count(); }
};

// A view of `data` with the given extents (row-major, contiguous).
template <element_type T>
tensor_view<T> view(T* data, std::initializer_list<std::int64_t> dims) {
  shape s = shape_of(dims, "view", "the view");
  checked_element_count(s, sizeof(T), "view", "the view");
  return {data, s, false};
}

template <class R>
requires requires(R& r) { view(std::data(r), {}); }
auto view(R& range, std::initializer_list<std::int64_t> dims) {
  auto v = view(std::data(range), dims);
  if (v.size() != static_cast<std::int64_t>(std::size(range)))
    throw error(errc::shape_mismatch, "view",
                "extents " + to_string(v.dims) + " hold " + std::to_string(v.size()) +
                    " elements but the range has " + std::to_string(std::size(range)));
  return v;
}

}  // namespace kiln
