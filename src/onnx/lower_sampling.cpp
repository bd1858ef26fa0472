// ONNX ops that read their input at computed positions: GridSample, RoiAlign, MaxUnpool,
// ReverseSequence, and MaxPool's Indices output. Internal to kiln::onnx.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "kiln/ir/windows.hpp"
#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;
using ints = std::vector<std::int64_t>;

void lower_grid_sample(node_context& c) {
  c.only_attrs({"mode", "padding_mode", "align_corners"});
  std::string mode = c.attr_string("mode", c.opset() >= 20 ? "linear" : "bilinear");
  if (c.opset() >= 20) {  // opset 20 renamed the modes (and allows N-D; kiln: 2-D)
    if (mode == "linear") mode = "bilinear";
    if (mode == "cubic") mode = "bicubic";
  }
  c.out(0, c.g.grid_sample(c.in(0), c.in(1), mode, c.attr_string("padding_mode", "zeros"),
                           c.attr_int("align_corners", 0) != 0));
}

void lower_roi_align(node_context& c) {
  if (c.opset() >= 16)
    c.only_attrs({"mode", "output_height", "output_width", "sampling_ratio", "spatial_scale",
                  "coordinate_transformation_mode"});
  else
    c.only_attrs({"mode", "output_height", "output_width", "sampling_ratio", "spatial_scale"});
  // Opset 10 behaves as opset 16's "output_half_pixel" (no half-pixel shift).
  const std::string transform = c.attr_string("coordinate_transformation_mode",
                                              c.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  if (transform != "half_pixel" && transform != "output_half_pixel")
    c.fail(errc::invalid_argument, "coordinate_transformation_mode '" + transform +
                                       "', expected half_pixel or output_half_pixel");
  c.out(0, c.g.roi_align(c.in(0), c.in(1), c.in(2), c.attr_int("output_height", 1),
                         c.attr_int("output_width", 1), c.attr_int("sampling_ratio", 0),
                         c.attr_float("spatial_scale", 1.0), c.attr_string("mode", "avg"),
                         transform == "half_pixel"));
}

// MaxUnpool: X's values written at I's positions of a zero tensor. I holds positions flattened
// over the whole output (of the windows' size), as MaxPool makes them; kiln scatters each (n, c)
// plane on its own, so an index outside its own plane writes nothing (MaxPool never makes one).
void lower_max_unpool(node_context& c) {
  c.only_attrs({"kernel_shape", "pads", "strides"});
  graph& g = c.g;
  const shape d = c.dims_of(0);
  if (!d.is_static() || d.rank < 3)
    c.fail(errc::unsupported, "X dims " + to_string(d) + " (kiln: static, [N, C, spatial...])");
  if (c.dims_of(1) != d)
    c.fail(errc::shape_mismatch, "I is " + to_string(c.dims_of(1)) + ", X " + to_string(d));
  const auto axes = static_cast<std::size_t>(d.rank - 2);
  const ints kernel = c.attr_ints("kernel_shape");
  ints strides = c.attr_ints("strides"), pads = c.attr_ints("pads");
  if (kernel.size() != axes)
    c.fail(errc::invalid_argument, "kernel_shape has " + std::to_string(kernel.size()) +
                                       " values for " + std::to_string(axes) + " spatial axes");
  if (strides.empty()) strides.assign(axes, 1);
  if (pads.empty()) pads.assign(2 * axes, 0);
  if (strides.size() != axes || pads.size() != 2 * axes)
    c.fail(errc::invalid_argument, "strides or pads do not have one value per spatial axis");
  // The windows' own output size; output_shape (as ONNX's reference reads it) then pads or
  // crops its end, the indices still counting positions of the windows' size.
  ints out(d.dims.begin(), d.dims.begin() + d.rank);
  for (std::size_t i = 0; i < axes; ++i)
    out[i + 2] = (d.dims[i + 2] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + axes];
  ints wanted = out;
  if (c.has(2)) {
    wanted = c.ints_input(2, "output_shape");
    if (wanted.size() != static_cast<std::size_t>(d.rank) || wanted[0] != d.dims[0] ||
        wanted[1] != d.dims[1])
      c.fail(errc::shape_mismatch, "output_shape has " + std::to_string(wanted.size()) +
                                       " values for X " + to_string(d) + " (N and C kept)");
  }
  std::int64_t plane = 1, cells = 1;
  for (std::size_t i = 2; i < out.size(); ++i) {
    if (out[i] < 1)
      c.fail(errc::invalid_argument, "output axis " + std::to_string(i) + " is empty");
    plane *= out[i];
    cells *= d.dims[i];
  }
  const std::int64_t planes = d.dims[0] * d.dims[1];
  // Each plane's positions counted from the plane's start.
  const value first = g.reshape(
      g.mul(g.range(0, double(planes), 1, dtype::i64), g.constant(plane, dtype::i64)), {planes, 1});
  const value at = g.sub(g.reshape(g.cast(c.in(1), dtype::i64), {planes, cells}), first);
  const dtype t = c.type_of(0);
  const value zeros = g.expand(g.constant(0.0, t), {planes, plane});
  const value y = g.scatter_elements(zeros, at, g.reshape(c.in(0), {planes, cells}), 1);
  ints ends(2 * out.size(), 0);
  for (std::size_t i = 2; i < out.size(); ++i) {
    if (wanted[i] < 1)
      c.fail(errc::invalid_argument, "output_shape axis " + std::to_string(i) + " is empty");
    ends[out.size() + i] = wanted[i] - out[i];
  }
  c.out(0, wanted == out ? g.reshape(y, out) : g.pad(g.reshape(y, out), ends));
}

// ReverseSequence: along time_axis, each batch entry's first sequence_lens[b] steps reversed.
void lower_reverse_sequence(node_context& c) {
  c.only_attrs({"batch_axis", "time_axis"});
  graph& g = c.g;
  const shape d = c.dims_of(0);
  const std::int64_t batch_axis = c.attr_int("batch_axis", 1),
                     time_axis = c.attr_int("time_axis", 0);
  if (d.rank < 2 || !d.is_static())
    c.fail(errc::unsupported, "input dims " + to_string(d) + " (kiln: static, rank 2 or more)");
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) ||
      batch_axis == time_axis)
    c.fail(errc::invalid_argument, "batch_axis " + std::to_string(batch_axis) + " and time_axis " +
                                       std::to_string(time_axis) + ": expected 0 and 1 apart");
  const std::int64_t steps = d.dims[time_axis], batch = d.dims[batch_axis];
  if (c.dims_of(1) != shape{batch})
    c.fail(errc::shape_mismatch, "sequence_lens is " + to_string(c.dims_of(1)) + ", expected [" +
                                     std::to_string(batch) + "]");
  ints time_dims(static_cast<std::size_t>(d.rank), 1), batch_dims = time_dims;
  time_dims[static_cast<std::size_t>(time_axis)] = steps;
  batch_dims[static_cast<std::size_t>(batch_axis)] = batch;
  const value t = g.reshape(g.range(0, double(steps), 1, dtype::i64), time_dims);
  const value len = g.reshape(g.cast(c.in(1), dtype::i64), batch_dims);
  const value from = g.select(g.lt(t, len), g.sub(g.sub(len, g.constant(1, dtype::i64)), t), t);
  c.out(0, g.gather_elements(c.in(0), g.expand(from, ints(d.dims.begin(), d.dims.begin() + d.rank)),
                             time_axis));
}

}  // namespace

// MaxPool with its Indices output: the window's first largest value and its position, flattened
// over x (storage_order 1: each plane column-major), by a running comparison over the window's
// offsets, each a gathered view of x along every spatial axis.
void lower_max_pool_with_indices(node_context& c, const ir::pool_window& w) {
  graph& g = c.g;
  const shape d = c.dims_of(0);
  if (!d.is_static() || d.rank < 3)
    c.fail(errc::unsupported, "x dims " + to_string(d) + " with Indices (kiln: static)");
  const dtype t = c.type_of(0);
  if (!is_floating(t)) c.fail(errc::unsupported, "Indices of a non-float x");
  const bool column_major = c.attr_int("storage_order", 0) != 0;
  const auto axes = static_cast<std::size_t>(d.rank - 2);
  if (w.kernel.size() != axes)
    c.fail(errc::invalid_argument, "kernel_shape has " + std::to_string(w.kernel.size()) +
                                       " values for " + std::to_string(axes) + " spatial axes");
  auto each = [&](const ints& v, std::size_t n, std::int64_t fallback) {
    return v.empty() ? ints(n, fallback) : v;
  };
  const ints strides = each(w.strides, axes, 1), dilations = each(w.dilations, axes, 1),
             pads = each(w.pads, 2 * axes, 0);
  if (strides.size() != axes || dilations.size() != axes || pads.size() != 2 * axes)
    c.fail(errc::invalid_argument, "strides, dilations or pads do not fit the spatial axes");
  std::vector<ir::axis_window> along;
  for (std::size_t i = 0; i < axes; ++i) {
    if (w.kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 || pads[i + axes] < 0)
      c.fail(errc::invalid_argument,
             "kernel sizes, strides and dilations must be positive and pads not negative");
    along.push_back(ir::window_along(d.dims[i + 2], w.kernel[i], strides[i], dilations[i], pads[i],
                                     pads[i + axes], w.auto_pad, w.ceil_mode));
    if (along.back().outputs < 1)
      c.fail(errc::shape_mismatch, "spatial axis " + std::to_string(i) + " holds no window");
  }
  // A position's offset within its plane: row-major, or column-major over the spatial axes.
  ints place(axes);
  std::int64_t plane = 1;
  for (std::size_t i = 0; i < axes; ++i) {
    const std::size_t a = column_major ? i : axes - 1 - i;
    place[a] = plane;
    plane *= d.dims[a + 2];
  }
  const std::int64_t planes = d.dims[0] * d.dims[1];
  value best{}, index{};
  ints offset(axes, 0);
  for (bool first = true;; first = false) {
    value v = c.in(0);
    value pos = g.constant(0, dtype::i64);
    value inside{};
    for (std::size_t i = 0; i < axes; ++i) {
      const std::int64_t outputs = along[i].outputs, size = d.dims[i + 2];
      ints at(static_cast<std::size_t>(outputs));
      std::vector<unsigned char> in(at.size());
      for (std::int64_t o = 0; o < outputs; ++o) {
        const std::int64_t p = o * strides[i] + offset[i] * dilations[i] - along[i].begin;
        at[static_cast<std::size_t>(o)] = std::clamp<std::int64_t>(p, 0, size - 1);
        in[static_cast<std::size_t>(o)] = p >= 0 && p < size;
      }
      ints dims(axes, 1);
      dims[i] = outputs;
      const auto ax = static_cast<std::int64_t>(i + 2);
      v = g.gather(v, g.constant(at.data(), dtype::i64, at.size(), shape{outputs}), ax);
      pos = g.add(pos, g.reshape(g.mul(g.constant(at.data(), dtype::i64, at.size(), shape{outputs}),
                                       g.constant(place[i], dtype::i64)),
                                 dims));
      const value ok = g.reshape(g.constant(std::move(in), dtype::boolean, shape{outputs}), dims);
      inside = i == 0 ? ok : g.logical_and(inside, ok);
    }
    v = g.select(inside, v, g.constant(-std::numeric_limits<double>::infinity(), t));
    if (first) {
      best = v;
      index = pos;
    } else {
      const value better = g.gt(v, best);  // strictly: the first largest keeps its place
      best = g.select(better, v, best);
      index = g.select(better, pos, index);
    }
    std::size_t i = axes;
    while (i > 0 && ++offset[i - 1] == w.kernel[i - 1]) offset[--i] = 0;
    if (i == 0) break;
  }
  ints plane_dims(static_cast<std::size_t>(d.rank), 1);
  plane_dims[0] = d.dims[0];
  plane_dims[1] = d.dims[1];
  const value plane_start = g.reshape(
      g.mul(g.range(0, double(planes), 1, dtype::i64), g.constant(plane, dtype::i64)), plane_dims);
  c.out(0, best);
  c.out(1, g.add(index, plane_start));
}

void add_sampling_lowerings(lowering_table& t) {
  t["GridSample"] = lower_grid_sample;
  t["RoiAlign"] = lower_roi_align;
  t["MaxUnpool"] = lower_max_unpool;
  t["ReverseSequence"] = lower_reverse_sequence;
}

}  // namespace kiln::onnx_import
