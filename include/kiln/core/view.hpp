// tensor_view: a pointer to data with its extents, row-major or strided; what calls take and write.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/shape.hpp"

namespace kiln {

// Strides in elements, one per axis.
using stride_list = std::array<std::int64_t, max_rank>;

// The strides of a row-major tensor of extents s.
constexpr stride_list row_major_strides(const shape& s) {
  stride_list r{};
  std::int64_t step = 1;
  for (int i = s.rank - 1; i >= 0; --i) {
    r[i] = step;
    step *= s.dims[i];
  }
  return r;
}

// Whether `st` lays out extents s row-major (a size-1 axis's stride never matters).
constexpr bool is_row_major(const shape& s, const stride_list& st) {
  const stride_list want = row_major_strides(s);
  for (int i = 0; i < s.rank; ++i)
    if (s.dims[i] != 1 && st[i] != want[i]) return false;
  return true;
}

// The elements a strided layout reaches, from `low` to `high` (offsets in elements from the
// first element, which may be negative); empty extents reach none (high < low).
struct element_range {
  std::int64_t low = 0, high = -1;
};
constexpr element_range reach_of(const shape& s, const stride_list& st) {
  if (s.element_count() == 0) return {};
  element_range r{0, 0};
  for (int i = 0; i < s.rank; ++i) (st[i] < 0 ? r.low : r.high) += st[i] * (s.dims[i] - 1);
  return r;
}

// Whether two indices of a strided layout name the same element (a result may not: both
// writes would land there).
constexpr bool shares_elements(const shape& s, const stride_list& st) {
  if (s.element_count() <= 1) return false;
  std::array<int, max_rank> order{};
  int n = 0;
  for (int i = 0; i < s.rank; ++i)
    if (s.dims[i] > 1) order[n++] = i;
  auto magnitude = [&](int i) { return st[i] < 0 ? -st[i] : st[i]; };
  // By magnitude, an insertion sort of at most max_rank axes (GCC 12 warned of array bounds in
  // std::sort's insertion step on this array, in every -O3 -Wall build that checks a result).
  for (int k = 1; k < n; ++k)
    for (int j = k; j > 0 && magnitude(order[j]) < magnitude(order[j - 1]); --j)
      std::swap(order[j], order[j - 1]);
  // Sufficient and exact for the layouts frameworks make: each axis steps past everything the
  // axes with smaller strides reach.
  std::int64_t spanned = 0;
  for (int k = 0; k < n; ++k) {
    if (magnitude(order[k]) <= spanned) return true;
    spanned += magnitude(order[k]) * (s.dims[order[k]] - 1);
  }
  return false;
}

// Checks strides for extents s of `element_bytes` elements: one per axis, and every element's
// byte offset within the address space. `who` and `what` name them in messages.
inline void check_strides(const shape& s, const stride_list& st, int element_bytes,
                          std::string_view who, std::string_view what) {
  constexpr std::int64_t limit = std::int64_t{1} << 62;
  std::int64_t low = 0, high = 0;
  for (int i = 0; i < s.rank; ++i) {
    std::int64_t step = st[i] < 0 ? -st[i] : st[i], extent = s.dims[i] > 0 ? s.dims[i] - 1 : 0, far;
    if (__builtin_mul_overflow(step, extent, &far) ||
        __builtin_mul_overflow(far, std::int64_t{element_bytes}, &far) ||
        __builtin_add_overflow(st[i] < 0 ? low : high, far, st[i] < 0 ? &low : &high) ||
        low > limit || high > limit)
      throw error(errc::invalid_argument, std::string(who),
                  std::string(what) + " reaches beyond the address space with stride " +
                      detail::to_text(st[i]) + " on axis " + detail::to_text(i) + " of extents " +
                      to_string(s));
  }
}

// Checks `steps` for extents s (check_strides) and says whether they are strided: false, with
// `steps` cleared, when they lay s out row-major anyway.
inline bool strided_layout_of(const shape& s, stride_list& steps, int element_bytes,
                              std::string_view who, std::string_view what) {
  check_strides(s, steps, element_bytes, who, what);
  if (is_row_major(s, steps)) {
    steps = {};
    return false;
  }
  return true;
}

// Not owning: the caller keeps the data alive for the call. `flat` marks a view made from a
// one-dimensional range: it may stand for a tensor of any shape with the same element count.
// A strided view (`strided`) has element strides `steps`; otherwise it is row-major.
template <class T>
struct tensor_view {
  T* data = nullptr;
  shape dims;
  bool flat = false;
  bool strided = false;
  stride_list steps{};
  constexpr std::int64_t size() const { return dims.element_count(); }
};

// A view of `data` with the given extents (row-major, contiguous).
template <element_type T>
tensor_view<T> view(T* data, std::initializer_list<std::int64_t> dims) {
  shape s = shape_of(dims, "view", "the view");
  checked_element_count(s, sizeof(T), "view", "the view");
  return {data, s, false};
}

// A view of `data` with the given extents and strides in elements: a transposed matrix, a slice
// of a larger tensor, a channel of NHWC data. Calls read it (and write it, as a result) in place;
// `data` is element [0, 0, ...], and negative strides walk back from it.
template <element_type T>
tensor_view<T> view(T* data, std::initializer_list<std::int64_t> dims,
                    std::initializer_list<std::int64_t> element_strides) {
  tensor_view<T> v = view(data, dims);
  if (element_strides.size() != dims.size())
    throw error(errc::invalid_argument, "view",
                "the view has " + std::to_string(dims.size()) + " extents but " +
                    std::to_string(element_strides.size()) + " strides; give one per axis");
  std::copy(element_strides.begin(), element_strides.end(), v.steps.begin());
  v.strided = strided_layout_of(v.dims, v.steps, sizeof(T), "view", "the view");
  return v;
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

// Copies every element of extents s, `element_bytes` each, from `from` (strides `from_steps`)
// to `to` (strides `to_steps`): packs a strided tensor, or unpacks into one.
inline void copy_strided(const void* from, const stride_list& from_steps, void* to,
                         const stride_list& to_steps, const shape& s, int element_bytes) {
  if (s.element_count() == 0) return;
  const int inner = s.rank - 1;
  const std::int64_t n = s.rank ? s.dims[inner] : 1;
  const std::int64_t fs = s.rank ? from_steps[inner] : 0, ts = s.rank ? to_steps[inner] : 0;
  const std::int64_t rows = n ? s.element_count() / n : 0;
  const auto bytes = static_cast<std::size_t>(element_bytes);
  std::array<std::int64_t, max_rank> index{};
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t f = 0, t = 0;
    for (int i = 0; i < inner; ++i) {
      f += index[i] * from_steps[i];
      t += index[i] * to_steps[i];
    }
    auto* src = static_cast<const unsigned char*>(from) + f * element_bytes;
    auto* dst = static_cast<unsigned char*>(to) + t * element_bytes;
    if (fs == 1 && ts == 1)
      std::memcpy(dst, src, bytes * static_cast<std::size_t>(n));
    else
      for (std::int64_t e = 0; e < n; ++e)
        std::memcpy(dst + e * ts * element_bytes, src + e * fs * element_bytes, bytes);
    for (int i = inner - 1; i >= 0 && ++index[i] == s.dims[i]; --i) index[i] = 0;
  }
}

}  // namespace kiln
