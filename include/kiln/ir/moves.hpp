// Data movement built from index maps: pad (constant, edge, reflect, wrap) and concat, each a
// shift along an axis (positions computed from the coordinate, folded into the operand) and,
// where a piece or the padding ends, a mask (a two-value table, shifted), so a consumer reads the
// pieces in place and nothing is copied unless a region boundary needs it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/builder.hpp"
#include "kiln/ir/print.hpp"

namespace kiln::ir {

enum class pad_mode : std::uint8_t { constant, edge, reflect, wrap };

namespace detail {

// A static size of x along `axis`, or an error naming op `name`.
constexpr std::int64_t static_size(builder& b, std::string_view name, std::int32_t x, int axis) {
  std::int64_t n = b.get().nodes[x].dims.dims[axis];
  if (is_symbol(n))
    throw error(errc::unsupported, std::string(name),
                "axis " + kiln::detail::to_text(axis) +
                    " has a run-time size: its positions need a static size");
  return n;
}

// The bool pair {first, second} as a [2, 1, ..., 1] tensor constant: a mask along `axis` of a
// rank-`rank` value, once shifted (step_mask).
constexpr std::int32_t bool_pair(builder& b, int axis, int rank, bool first, bool second) {
  scalar values[] = {scalar::of_integer(dtype::boolean, first),
                     scalar::of_integer(dtype::boolean, second)};
  std::int32_t m = b.tensor_constant(dtype::boolean, shape{2}, values);
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(rank - axis), 1);
  sizes[0] = 2;
  return b.reshape(m, sizes);
}

// Along `axis`, `size` positions: pair's first value before position `at`, its second from
// there on (a shift of the pair by at - 1, clamped). No table as long as the axis. Sizes and `at`
// may be run-time sizes.
constexpr std::int32_t step_mask(builder& b, std::int32_t pair, std::int64_t size,
                                 std::int64_t at) {
  return b.shift_by(pair, 0, size, at, -1, position_fold::clamp);
}

}  // namespace detail

// ONNX Pad: pads holds every axis's begin, then every axis's end (negative: crop); `value` is
// the constant mode's (a rank-0 node of x's type, or -1 for 0). Edge repeats the border, reflect
// mirrors without repeating it (each pad below the axis's size), wrap repeats the axis.
constexpr std::int32_t pad(builder& b, std::int32_t x, std::span<const std::int64_t> pads,
                           pad_mode mode, std::int32_t value = -1) {
  const int r = b.get().nodes[x].dims.rank;
  if (static_cast<int>(pads.size()) != 2 * r)
    throw error(errc::invalid_argument, "pad",
                "pads has " + kiln::detail::to_text(static_cast<std::int64_t>(pads.size())) +
                    " entries for x of rank " + kiln::detail::to_text(r) + " (expected " +
                    kiln::detail::to_text(2 * r) + ": every begin, then every end)");
  const dtype t = b.get().nodes[x].type;
  if (value < 0)
    value = b.constant(is_floating(t) ? scalar::of_float(t, 0.0) : scalar::of_integer(t, 0));
  if (b.get().nodes[value].type != t || b.get().nodes[value].dims.rank != 0)
    throw error(errc::dtype_mismatch, "pad",
                "constant_value is " +
                    type_text(b.get().nodes[value].type, b.get().nodes[value].dims) +
                    ", expected a scalar of x's type " + std::string(name(t)));
  std::int32_t y = x, mask = -1;
  shape padded = b.get().nodes[x].dims;
  bool empty = false;
  for (int axis = 0; axis < r; ++axis) {
    if (pads[axis] == 0 && pads[axis + r] == 0) continue;
    padded.dims[axis] = detail::static_size(b, "pad", x, axis) + pads[axis] + pads[axis + r];
  }
  for (int axis = 0; axis < r; ++axis) empty = empty || b.get().nodes[x].dims.dims[axis] == 0;
  if (empty && mode == pad_mode::constant && padded.is_static() && padded.element_count() >= 0)
    return b.expand(value, padded);  // nothing of x is read: every element is the value
  for (int axis = 0; axis < r; ++axis) {
    const std::int64_t begin = pads[axis], end = pads[axis + r];
    if (begin == 0 && end == 0) continue;
    const std::int64_t n = detail::static_size(b, "pad", x, axis), out = n + begin + end;
    if (out < 0)
      throw error(errc::invalid_argument, "pad",
                  "pads " + kiln::detail::to_text(begin) + " and " + kiln::detail::to_text(end) +
                      " crop more than the " + kiln::detail::to_text(n) + " positions of axis " +
                      kiln::detail::to_text(axis));
    if (begin <= 0 && end <= 0) {  // a crop: an affine slice
      std::int64_t s[] = {-begin}, e[] = {n + end}, a[] = {axis};
      y = b.slice(y, s, e, a, {});
      continue;
    }
    if (n == 0 && mode != pad_mode::constant)
      throw error(
          errc::invalid_argument, "pad",
          "axis " + kiln::detail::to_text(axis) + " is empty: only the constant mode " + "pads it");
    if (mode == pad_mode::reflect && (begin >= n || end >= n))
      throw error(errc::invalid_argument, "pad",
                  "reflect pads " + kiln::detail::to_text(begin) + " and " +
                      kiln::detail::to_text(end) + " must be below the axis's size " +
                      kiln::detail::to_text(n) + " (axis " + kiln::detail::to_text(axis) + ")");
    const position_fold fold = mode == pad_mode::reflect ? position_fold::reflect
                               : mode == pad_mode::wrap  ? position_fold::wrap
                                                         : position_fold::clamp;
    y = b.shift(y, axis, out, begin, fold);
    if (mode != pad_mode::constant) continue;
    // Inside: from position `begin` (when it pads there) and below begin + n (likewise).
    for (auto [at, outside_first] : {std::pair{begin, true}, std::pair{begin + n, false}}) {
      if (outside_first ? at <= 0 : at >= out) continue;
      std::int32_t pair = detail::bool_pair(b, axis, r, !outside_first, outside_first);
      std::int32_t m = detail::step_mask(b, pair, out, at);
      mask = mask < 0 ? m : b.binary(op::logical_and, mask, m);
    }
  }
  return mask < 0 ? y : b.select(mask, y, value);
}

// ONNX Concat: the pieces along `axis` (negative from the end), every other size equal. Each
// piece is read where its positions are: a shift of it (clamped) chosen by a mask, so the
// consumer reads every piece in place. Pieces of run-time sizes along the axis make the result's
// size their sum (a KV cache's past + new), and the later pieces' begins run-time sizes.
constexpr std::int32_t concat(builder& b, std::span<const std::int32_t> pieces, std::int64_t axis) {
  if (pieces.empty()) throw error(errc::invalid_argument, "concat", "takes at least one piece");
  const node first = b.get().nodes[pieces[0]];
  const int r = first.dims.rank;
  if (axis < -r || axis >= r)
    throw error(errc::invalid_argument, "concat",
                "axis " + kiln::detail::to_text(axis) + " is out of range for pieces of rank " +
                    kiln::detail::to_text(r));
  const int a = static_cast<int>(axis < 0 ? axis + r : axis);
  std::vector<std::int32_t> kept;
  std::vector<std::int64_t> ends;  // each kept piece's end along the axis (a size)
  std::int64_t total = 0;
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const node& p = b.get().nodes[pieces[k]];
    bool same = p.dims.rank == r && p.type == first.type;
    for (int i = 0; same && i < r; ++i) {  // run-time sizes: checked at the call (broadcast)
      std::int64_t have = p.dims.dims[i], want = first.dims.dims[i];
      same = i == a || have == want || is_symbol(have) || is_symbol(want);
    }
    if (!same)
      throw error(errc::shape_mismatch, "concat",
                  "piece " + kiln::detail::to_text(static_cast<std::int64_t>(k)) + " is " +
                      type_text(p.type, p.dims) + ", piece 0 is " +
                      type_text(first.type, first.dims) +
                      " (the same element type and sizes except along axis " +
                      kiln::detail::to_text(a) + ")");
    const std::int64_t n = p.dims.dims[a];
    if (n == 0) continue;
    kept.push_back(pieces[k]);
    total = b.size_sum(total, n);
    ends.push_back(total);
  }
  if (kept.empty()) return pieces[0];  // every piece is empty along the axis
  if (kept.size() == 1) return kept[0];
  // Piece k is read at positions j - begin(k), clamped into it, where j < end(k) and no piece
  // before it holds j.
  std::int32_t below = detail::bool_pair(b, a, r, true, false), y = -1;
  for (std::size_t k = kept.size(); k-- > 0;) {
    const std::int64_t begin = k ? ends[k - 1] : 0;
    std::int32_t piece = b.shift_by(kept[k], a, total, begin, 0, position_fold::clamp);
    y = y < 0 ? piece : b.select(detail::step_mask(b, below, total, ends[k]), piece, y);
  }
  return y;
}

}  // namespace kiln::ir
