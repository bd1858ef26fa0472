// Pooling built from index maps (ONNX's MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool):
// per window offset, a strided, clamped view of the input with the padding masked in, joined by
// max or add; an average divides by the window's count of cells (per axis, so no table grows
// with the image). A consumer reads the views in place: a pool and its epilogue are one
// dispatch, with no transient.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/ir/builder.hpp"
#include "kiln/ir/moves.hpp"
#include "kiln/ir/windows.hpp"

namespace kiln {

// A 2-D pooling window, usable as a template argument: max_pool2d<kiln::pool_params{.kernel =
// {2, 2}, .strides = {2, 2}}>(x). pads in ONNX's order: every axis's begin, then every end.
struct pool_params {
  std::array<std::int64_t, 2> kernel{1, 1};
  std::array<std::int64_t, 2> strides{1, 1};
  std::array<std::int64_t, 4> pads{0, 0, 0, 0};
  std::array<std::int64_t, 2> dilations{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = false;  // average: padding cells count in the divisor
  kiln::auto_pad auto_pad = kiln::auto_pad::notset;
};

}  // namespace kiln

namespace kiln::ir {

// A pooling window over any number of spatial axes (those after N and C): ONNX's attributes.
// Empty strides and dilations mean 1, empty pads 0.
struct pool_window {  // (every member initialized: designated initializers may leave any out)
  std::vector<std::int64_t> kernel{}, strides{}, pads{}, dilations{};
  bool ceil_mode = false;
  bool count_include_pad = false;
  kiln::auto_pad auto_pad = kiln::auto_pad::notset;
};

constexpr pool_window window_of(const pool_params& p) {
  return {{p.kernel.begin(), p.kernel.end()},
          {p.strides.begin(), p.strides.end()},
          {p.pads.begin(), p.pads.end()},
          {p.dilations.begin(), p.dilations.end()},
          p.ceil_mode,
          p.count_include_pad,
          p.auto_pad};
}

// max (the window's largest, NaN propagating) or average (its sum over its count of cells) of
// x [N, C, spatial...] over each window: [N, C, outputs...].
constexpr std::int32_t pool(builder& b, std::int32_t x, const pool_window& w, bool average) {
  const char* name = average ? "average_pool" : "max_pool";
  const node& xn = b.get().nodes[x];
  const int rank = xn.dims.rank, n = rank - 2;
  const dtype t = xn.type;
  auto fail = [&](errc code, const std::string& what) { throw error(code, name, what); };
  auto count_text = [](std::size_t v) {
    return kiln::detail::to_text(static_cast<std::int64_t>(v));
  };
  if (n < 1)
    fail(errc::shape_mismatch,
         "the input must be [N, C, spatial...] (rank 3 or more), got " + type_text(t, xn.dims));
  if (average ? !is_floating(t) : t == dtype::boolean)
    fail(errc::dtype_mismatch, std::string("the input is ") + std::string(kiln::name(t)) +
                                   (average ? ", not a float type" : ", not a number type"));
  auto each = [&](const std::vector<std::int64_t>& v, std::size_t want, std::int64_t fallback,
                  const char* what) {
    if (v.empty()) return std::vector<std::int64_t>(want, fallback);
    if (v.size() != want)
      fail(errc::invalid_argument, std::string(what) + " has " + count_text(v.size()) +
                                       " values, expected " + count_text(want));
    return v;
  };
  const auto axes = static_cast<std::size_t>(n);
  if (w.kernel.size() != axes)
    fail(errc::invalid_argument, "the kernel has " + count_text(w.kernel.size()) +
                                     " sizes, expected one per spatial axis (" + count_text(axes) +
                                     ")");
  std::vector<std::int64_t> strides = each(w.strides, axes, 1, "strides"),
                            dilations = each(w.dilations, axes, 1, "dilations"),
                            pads = each(w.pads, 2 * axes, 0, "pads");
  // Per spatial axis: outputs, begin pad, end pad as given and as the windows need it.
  std::vector<std::int64_t> out(axes), begin(axes), end(axes);
  for (std::size_t i = 0; i < axes; ++i) {
    const std::int64_t size = detail::static_size(b, name, x, 2 + static_cast<int>(i));
    const std::int64_t k = w.kernel[i], s = strides[i], d = dilations[i];
    if (k < 1 || s < 1 || d < 1 || pads[i] < 0 || pads[i + axes] < 0)
      fail(errc::invalid_argument,
           "kernel sizes, strides and dilations must be positive and pads "
           "not negative");
    // Bounds under which the window arithmetic cannot overflow.
    constexpr std::int64_t limit = 0x7fffffff;
    if (size > limit || k > limit || s > limit || d > 0x7fff || pads[i] > limit ||
        pads[i + axes] > limit)
      fail(errc::unsupported,
           "a spatial size, kernel, stride or pad of 2^31 or more, or a dilation of 2^15 or "
           "more");
    const axis_window along =
        window_along(size, k, s, d, pads[i], pads[i + axes], w.auto_pad, w.ceil_mode);
    out[i] = along.outputs;
    begin[i] = along.begin;
    end[i] = along.end;
    const std::int64_t span = (k - 1) * d + 1;
    if (out[i] < 1)
      fail(errc::shape_mismatch, "spatial axis " + count_text(i) + " of size " +
                                     kiln::detail::to_text(size) + " (padded by " +
                                     kiln::detail::to_text(begin[i]) + " and " +
                                     kiln::detail::to_text(end[i]) + ") holds no window of " +
                                     kiln::detail::to_text(span) + " cells");
  }
  // Padding cells: below every value for a max, 0 for a sum.
  const std::int32_t fill = b.constant(
      is_floating(t)
          ? scalar::of_float(t, average ? 0.0 : -std::numeric_limits<double>::infinity())
          : scalar::of_integer(t, average || !is_signed_integer(t) ? 0 : integer_min(t)));
  // Per window offset, a view of x: along each spatial axis, output o reads position
  // o s + j d - begin (shifted, then strided), clamped into the axis; where that position is
  // outside the axis, a mask of two steps picks the fill instead. Nothing is copied.
  std::int32_t acc = -1;
  std::vector<std::int64_t> offset(axes, 0);
  // The masks' two-value tables, one pair per axis, shared by every offset's shifts.
  std::vector<std::int32_t> rises(axes, -1), falls(axes, -1);
  for (;;) {
    std::int32_t v = x, mask = -1;
    for (std::size_t i = 0; i < axes; ++i) {
      const int axis = 2 + static_cast<int>(i);
      const std::int64_t size = b.get().nodes[x].dims.dims[axis];
      const std::int64_t first = offset[i] * dilations[i] - begin[i];  // output 0's position
      const std::int64_t reach = (out[i] - 1) * strides[i] + 1;
      v = b.shift(v, axis, reach, -first, position_fold::clamp);
      const std::int64_t zero = 0, s = strides[i], a = axis;
      v = b.slice(v, std::span(&zero, 1), std::span(&reach, 1), std::span(&a, 1), std::span(&s, 1));
      // Outputs [lo, hi) read inside the axis.
      std::int64_t lo = first >= 0 ? 0 : (-first + strides[i] - 1) / strides[i];
      std::int64_t hi = size - first <= 0 ? 0 : (size - first + strides[i] - 1) / strides[i];
      lo = lo < out[i] ? lo : out[i];
      hi = hi < out[i] ? hi : out[i];
      auto both = [&](std::int32_t m) { mask = mask < 0 ? m : b.binary(op::logical_and, mask, m); };
      if (lo > 0) {
        if (rises[i] < 0) rises[i] = detail::bool_pair(b, axis, rank, false, true);
        both(detail::step_mask(b, rises[i], out[i], lo));
      }
      if (hi < out[i]) {
        if (falls[i] < 0) falls[i] = detail::bool_pair(b, axis, rank, true, false);
        both(detail::step_mask(b, falls[i], out[i], hi));
      }
    }
    if (mask >= 0) v = b.select(mask, v, fill);
    acc = acc < 0 ? v : b.binary(average ? op::add : op::max, acc, v);
    std::size_t i = axes;
    while (i > 0 && ++offset[i - 1] == w.kernel[i - 1]) offset[--i] = 0;
    if (i == 0) break;
  }
  if (!average) return acc;
  // The divisor per output: the product over axes of the window's cells inside the input (or
  // inside the input and its given padding, count_include_pad), as [out_i, 1, ...] constants.
  std::int32_t divisor = -1;
  for (std::size_t i = 0; i < axes; ++i) {
    const std::int64_t size = b.get().nodes[x].dims.dims[2 + i];
    const std::int64_t lo = w.count_include_pad ? -begin[i] : 0;
    const std::int64_t hi = w.count_include_pad ? size + end[i] : size;
    std::vector<scalar> counts;
    bool uniform = true;
    for (std::int64_t o = 0; o < out[i]; ++o) {
      std::int64_t c = 0;
      for (std::int64_t j = 0; j < w.kernel[i]; ++j) {
        const std::int64_t p = o * strides[i] - begin[i] + j * dilations[i];
        c += p >= lo && p < hi ? 1 : 0;
      }
      counts.push_back(scalar::of_float(t, static_cast<double>(c)));
      uniform = uniform && c == static_cast<std::int64_t>(counts[0].f);
    }
    std::int32_t axis_counts;
    if (uniform) {
      axis_counts = b.constant(counts[0]);
    } else {
      std::vector<std::int64_t> dims(static_cast<std::size_t>(n) - i, 1);
      dims[0] = out[i];
      shape d;
      d.rank = static_cast<int>(dims.size());
      for (std::size_t k = 0; k < dims.size(); ++k) d.dims[k] = dims[k];
      axis_counts = b.tensor_constant(t, d, counts);
    }
    divisor = divisor < 0 ? axis_counts : b.binary(op::mul, divisor, axis_counts);
  }
  return b.binary(op::div, acc, divisor);
}

// ONNX's GlobalMaxPool and GlobalAveragePool: every spatial axis reduced, kept with size 1.
constexpr std::int32_t global_pool(builder& b, std::int32_t x, bool average) {
  const node& xn = b.get().nodes[x];
  if (xn.dims.rank < 3)
    throw error(errc::shape_mismatch, average ? "global_average_pool" : "global_max_pool",
                "the input must be [N, C, spatial...] (rank 3 or more), got " +
                    type_text(xn.type, xn.dims));
  std::uint32_t axes = 0;
  for (int a = 2; a < xn.dims.rank; ++a) axes |= 1u << a;
  return b.reduce(average ? op::reduce_mean : op::reduce_max, x, axes, true);
}

}  // namespace kiln::ir
