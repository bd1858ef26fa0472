// A node's attributes: the op parameters beside its operands (a reduction's axes and keepdims, a
// view's index map), structural and constexpr, so they compare in CSE and freeze into the plan's
// template argument.
#pragma once

#include <array>
#include <cstdint>

#include "kiln/core/shape.hpp"

namespace kiln::ir {

struct attributes {
  std::uint32_t axes = 0;    // reductions: bit i set = operand axis i is reduced
  bool keepdims = false;     // reductions: the reduced axes stay, with size 1
  bool select_last = false;  // argmax/argmin: the last index of equal extremes (ONNX's
                             // select_last_index), else the first
  std::int8_t axis = 0;      // gather, gather_elements, shift: the operand axis it maps along
  std::uint8_t fold = 0;     // shift: how a position outside the operand's axis comes back into
                             // it (position_fold)
  // transpose: result axis i is operand axis perm[i].
  std::array<std::int8_t, max_rank> perm{};
  // slice: result index j along axis i reads operand index starts[i] + j * steps[i] (normalized
  // by the builder: clamped as ONNX's Slice, steps never 0). 32 bits keep nodes small; an axis
  // of 2^31 elements or more cannot be sliced.
  std::array<std::int32_t, max_rank> starts{}, steps{};
  // conv, conv_transpose: along each spatial axis a (2, 3, ...), kernel cell k joins output o and
  // input i where o * steps[a] + starts[a] + k * dilations[a] = i (conv) or
  // i * steps[a] + starts[a] + k * dilations[a] = o (conv_transpose); starts[a] is minus the
  // padding before the axis. groups: the channels split into that many (0 for other ops).
  std::array<std::int16_t, max_rank> dilations{};
  std::int32_t groups = 0;
  // shift: its begin is starts[axis] plus this run-time size (a symbol; -1: none), so that a
  // concat's pieces of run-time sizes are read where they lie.
  std::int32_t begin_symbol = -1;
  // shift: a window of its operand (a slice at run-time positions): begin_symbol is subtracted
  // instead, and every position it reads lies inside the operand (checked where it is built, or
  // at the call: builder::view), so that its fold never applies.
  bool window = false;
  friend constexpr bool operator==(const attributes&, const attributes&) = default;
};

// How a shift brings a position p outside an axis of n positions back into it: clamp (edge
// padding, concat's pieces), reflect (mirror without repeating the border), wrap (p mod n).
enum class position_fold : std::uint8_t { clamp, reflect, wrap };

constexpr std::int64_t folded_position(std::int64_t p, std::int64_t n, position_fold f) {
  if (n <= 1) return 0;
  switch (f) {
    case position_fold::reflect: {
      std::int64_t period = 2 * (n - 1);
      p = ((p % period) + period) % period;
      return p >= n ? period - p : p;
    }
    case position_fold::wrap:
      return ((p % n) + n) % n;
    default:
      return p < 0 ? 0 : p >= n ? n - 1 : p;
  }
}

constexpr bool reduces(const attributes& a, int axis) { return (a.axes >> axis) & 1u; }
// Whether `axes` are the last of `rank` axes, at least one (a row's elements then lie together).
constexpr bool trailing_axes(std::uint32_t axes, int rank) {
  return axes != 0 && axes + (axes & (0u - axes)) == 1u << rank;
}

// The result dims of reducing `dims` over a.axes.
constexpr shape reduced_dims(const shape& dims, const attributes& a) {
  shape r;
  for (int i = 0; i < dims.rank; ++i) {
    if (!reduces(a, i))
      r.dims[r.rank++] = dims.dims[i];
    else if (a.keepdims)
      r.dims[r.rank++] = 1;
  }
  return r;
}

// `dims` (an operand's) with every reduced axis set to 1: the result's shape as keepdims gives it,
// which broadcasts against the operand.
constexpr shape kept_dims(const shape& dims, const attributes& a) {
  shape r = dims;
  for (int i = 0; i < dims.rank; ++i)
    if (reduces(a, i)) r.dims[i] = 1;
  return r;
}

}  // namespace kiln::ir
