// ONNX's shape, index-map, reduction, normalization, pooling and contraction ops as kiln graph
// ops: one row per op; inputs that ONNX computes and kiln takes at import (shapes, axes, pads) are
// read from tensors known then.
#include <cstring>
#include <limits>
#include <numeric>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;
using ints = std::vector<std::int64_t>;

host_tensor i64_tensor(const ints& v, bool scalar = false) {
  host_tensor t;
  t.type = dtype::i64;
  t.dims = scalar ? shape{} : shape{static_cast<std::int64_t>(v.size())};
  t.bytes.resize(v.size() * 8);
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

std::int64_t normalized_axis(const node_context& c, std::int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    c.fail(errc::invalid_argument,
           "axis " + std::to_string(axis) + " is outside rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// An axis list: the attribute `name` before opset `input_from`, the optional input `index` from
// then on.
ints axes_of(const node_context& c, const char* name, std::int64_t input_from, int index) {
  if (c.opset() < input_from) return c.attr_ints(name);
  return c.has(index) ? c.ints_input(index, name) : ints{};
}

void lower_constant(node_context& c) {
  const auto* a = c.attr("value");
  if (a && a->type() == ::onnx::AttributeProto::TENSOR)
    return c.out_known(0, tensor_of(a->t(), c.who() + " value"));
  if (c.has_attr("value_float")) {
    float f = static_cast<float>(c.attr_float("value_float", 0));
    host_tensor t{dtype::f32, shape{}, std::vector<unsigned char>(4)};
    std::memcpy(t.bytes.data(), &f, 4);
    return c.out_known(0, t);
  }
  if (c.has_attr("value_floats")) {
    std::vector<float> v;
    for (double d : c.attr_floats("value_floats")) v.push_back(static_cast<float>(d));
    host_tensor t{dtype::f32, shape{static_cast<std::int64_t>(v.size())},
                  std::vector<unsigned char>(v.size() * 4)};
    if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return c.out_known(0, t);
  }
  if (c.has_attr("value_int"))
    return c.out_known(0, i64_tensor({c.attr_int("value_int", 0)}, true));
  if (c.has_attr("value_ints")) return c.out_known(0, i64_tensor(c.attr_ints("value_ints")));
  c.fail(errc::unsupported,
         "only value, value_float(s) and value_int(s) are kiln's (sparse and string constants "
         "are not)");
}

void lower_constant_of_shape(node_context& c) {
  c.only_attrs({"value"});
  ints dims = c.ints_input(0, "shape");
  host_tensor fill{dtype::f32, shape{1}, std::vector<unsigned char>(4, 0)};
  if (const auto* a = c.attr("value")) fill = tensor_of(a->t(), c.who() + " value");
  if (fill.count() != 1) c.fail(errc::shape_mismatch, "value has more than one element");
  host_tensor t;
  t.type = fill.type;
  if (dims.size() > static_cast<std::size_t>(max_rank))
    c.fail(errc::unsupported,
           "the shape has rank " + std::to_string(dims.size()) + ", above kiln::max_rank");
  t.dims = shape(dims);
  const auto n = checked_element_count(t.dims, size_in_bytes(t.type), c.who(), "the shape");
  const auto size = static_cast<std::size_t>(size_in_bytes(t.type));
  t.bytes.resize(static_cast<std::size_t>(n) * size);
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(t.bytes.data() + static_cast<std::size_t>(i) * size, fill.bytes.data(), size);
  c.out_known(0, std::move(t));
}

void lower_shape(node_context& c) {
  c.only_attrs({"start", "end"});
  shape d = c.dims_of(0);
  std::int64_t start = c.attr_int("start", 0), end = c.attr_int("end", d.rank);
  auto clamp = [&](std::int64_t v) {
    if (v < 0) v += d.rank;
    return std::clamp<std::int64_t>(v, 0, d.rank);
  };
  start = clamp(start);
  end = clamp(end);
  // Run-time sizes as extents (lower_extents.cpp), known where every size is static.
  std::vector<graph::extent> e;
  for (std::int64_t i = start; i < end; ++i)
    e.push_back(c.g.extent_of(c.in(0), static_cast<int>(i)));
  c.out_extents(0, e, false);
}

void lower_size(node_context& c) {
  const int rank = c.dims_of(0).rank;
  graph::extent n = 1;
  for (int i = 0; i < rank; ++i) n = c.g.product(n, c.g.extent_of(c.in(0), i));
  c.out_extents(0, {n}, true);
}

void lower_reshape(node_context& c) {
  c.only_attrs({"allowzero", "shape"});
  ints s = c.opset() < 5 ? c.attr_ints("shape") : c.ints_input(1, "shape");
  c.out(0, c.g.reshape(c.in(0), s, c.attr_int("allowzero", 0) != 0));
}

void lower_slice(node_context& c) {
  if (c.opset() < 10) {
    c.only_attrs({"starts", "ends", "axes"});
    return c.out(
        0, c.g.slice(c.in(0), c.attr_ints("starts"), c.attr_ints("ends"), c.attr_ints("axes")));
  }
  c.only_attrs({});
  ints axes = c.has(3) ? c.ints_input(3, "axes") : ints{};
  ints steps = c.has(4) ? c.ints_input(4, "steps") : ints{};
  c.out(0, c.g.slice(c.in(0), c.ints_input(1, "starts"), c.ints_input(2, "ends"), axes, steps));
}

void lower_split(node_context& c) {
  c.only_attrs({"axis", "split", "num_outputs"});
  const std::int64_t axis = c.attr_int("axis", 0);
  ints sizes = c.opset() < 13 ? c.attr_ints("split") : c.has(1) ? c.ints_input(1, "split") : ints{};
  std::vector<value> parts =
      sizes.empty() ? c.g.split_equal(c.in(0), c.outputs(), axis) : c.g.split(c.in(0), sizes, axis);
  if (static_cast<int>(parts.size()) != c.outputs())
    c.fail(errc::shape_mismatch, "splits into " + std::to_string(parts.size()) +
                                     " parts, but has " + std::to_string(c.outputs()) + " outputs");
  for (int o = 0; o < c.outputs(); ++o) c.out(o, parts[static_cast<std::size_t>(o)]);
}

void lower_pad(node_context& c) {
  const int rank = c.dims_of(0).rank;
  std::string mode = c.attr_string("mode", "constant");
  ints pads;
  std::optional<value> fill;
  if (c.opset() < 11) {
    c.only_attrs({"mode", "pads", "paddings", "value"});
    pads = c.has_attr("pads") ? c.attr_ints("pads") : c.attr_ints("paddings");
    if (c.attr_float("value", 0) != 0) fill = c.g.constant(c.attr_float("value", 0), c.type_of(0));
  } else {
    c.only_attrs({"mode"});
    ints given = c.ints_input(1, "pads");
    ints axes = c.has(3) ? c.ints_input(3, "axes") : ints{};
    if (axes.empty()) {
      pads = given;
    } else {  // pads for the listed axes only: every listed begin, then every listed end
      if (given.size() != 2 * axes.size())
        c.fail(errc::shape_mismatch, "pads has " + std::to_string(given.size()) +
                                         " values, expected twice the " +
                                         std::to_string(axes.size()) + " axes");
      pads.assign(2 * static_cast<std::size_t>(rank), 0);
      for (std::size_t k = 0; k < axes.size(); ++k) {
        auto a = static_cast<std::size_t>(normalized_axis(c, axes[k], rank));
        pads[a] = given[k];
        pads[a + static_cast<std::size_t>(rank)] = given[k + axes.size()];
      }
    }
    if (c.has(2)) fill = c.in(2);
  }
  c.out(0,
        fill && mode == "constant" ? c.g.pad(c.in(0), pads, *fill) : c.g.pad(c.in(0), pads, mode));
}

void lower_reduce(node_context& c, ir::op o) {
  c.only_attrs({"axes", "keepdims", "noop_with_empty_axes"});
  ints axes = c.has(1) ? c.ints_input(1, "axes") : c.attr_ints("axes");
  const bool keepdims = c.attr_int("keepdims", 1) != 0;
  if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) return c.out(0, c.in(0));
  c.out(0, o == ir::op::input ? c.g.reduce_log_sum_exp(c.in(0), axes, keepdims)
                              : c.g.reduce(o, c.in(0), axes, keepdims));
}

void lower_reduce_log_sum(node_context& c) {
  lower_reduce(c, ir::op::reduce_sum);
  c.out(0, c.g.log(*c.produced()[0].value));
}

void lower_arg(node_context& c, ir::op o) {
  c.only_attrs({"axis", "keepdims", "select_last_index"});
  c.out(0, c.g.index_reduce(o, c.in(0), c.attr_int("axis", 0), c.attr_int("keepdims", 1) != 0,
                            c.attr_int("select_last_index", 0) != 0));
}

// TopK: k from the attribute (before opset 10) or the K input (known at import); `sorted` = 0
// leaves the order open, so kiln's sorted order serves it too.
void lower_top_k(node_context& c) {
  if (c.opset() < 10)
    c.only_attrs({"axis", "k"});
  else if (c.opset() < 11)
    c.only_attrs({"axis"});
  else
    c.only_attrs({"axis", "largest", "sorted"});
  const shape d = c.dims_of(0);
  std::int64_t axis = c.attr_int("axis", -1);
  if (axis < -d.rank || axis >= d.rank)
    c.fail(errc::invalid_argument,
           "axis " + std::to_string(axis) + " is outside rank " + std::to_string(d.rank));
  if (axis < 0) axis += d.rank;
  if (d.dims[axis] == dyn) c.fail(errc::unsupported, "the axis has a run-time size");
  const auto k =
      c.opset() < 10 ? c.attr_int("k", -1) : static_cast<std::int64_t>(c.scalar_input(1, "K"));
  if (k < 0 || k > d.dims[axis])
    c.fail(errc::invalid_argument, "k is " + std::to_string(k) + ", axis " + std::to_string(axis) +
                                       " holds " + std::to_string(d.dims[axis]));
  if (c.type_of(0) == dtype::boolean) c.fail(errc::dtype_mismatch, "x is bool, not a number");
  auto [values, indices] = c.g.top_k(c.in(0), k, axis, c.attr_int("largest", 1) != 0);
  c.out(0, values);
  if (c.wants(1)) c.out(1, indices);
}

// A scatter's reduction attribute (opset 16 on; max and min from opset 18).
std::string scatter_reduction(const node_context& c) {
  const std::string reduction = c.attr_string("reduction", "none");
  if (c.opset() < 18 && (reduction == "max" || reduction == "min"))
    c.fail(errc::invalid_argument, "reduction '" + reduction + "' arrived in opset 18");
  return reduction;
}

// ScatterElements, and Scatter (opsets 9 and 10) which it renamed.
void lower_scatter_elements(node_context& c) {
  const bool reduces = c.op() == "ScatterElements" && c.opset() >= 16;
  if (reduces)
    c.only_attrs({"axis", "reduction"});
  else
    c.only_attrs({"axis"});
  c.out(0, c.g.scatter_elements(c.in(0), c.in(1), c.in(2), c.attr_int("axis", 0),
                                scatter_reduction(c)));
}

// Hardmax along the last axis of x: 1 where x first takes its maximum, else 0.
value hardmax_last(node_context& c, value x) {
  shape d = c.g.dims_of(x);
  const std::int64_t n = d.dims[d.rank - 1];
  if (n == dyn) c.fail(errc::unsupported, "the axis has a run-time size");
  value at = c.g.index_reduce(ir::op::argmax, x, -1, true, false);
  value positions = c.g.range(0, static_cast<double>(n), 1, dtype::i64);
  return c.g.cast(c.g.eq(at, positions), c.g.type_of(x));
}

// Softmax, LogSoftmax, Hardmax: from opset 13 along one axis; before, over x coerced to 2-D at
// `axis` (every axis from it on, as one).
void lower_softmax_family(node_context& c, int which) {
  c.only_attrs({"axis"});
  auto along_last = [&](value x) {
    return which == 0   ? c.g.softmax(x, -1)
           : which == 1 ? c.g.log_softmax(x, -1)
                        : hardmax_last(c, x);
  };
  shape d = c.dims_of(0);
  if (c.opset() >= 13) {
    const std::int64_t axis = normalized_axis(c, c.attr_int("axis", -1), d.rank);
    if (axis == d.rank - 1) return c.out(0, along_last(c.in(0)));
    ints perm(static_cast<std::size_t>(d.rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[static_cast<std::size_t>(axis)], perm.back());
    return c.out(0, c.g.transpose(along_last(c.g.transpose(c.in(0), perm)), perm));
  }
  const std::int64_t axis = normalized_axis(c, c.attr_int("axis", 1), d.rank);
  if (axis == d.rank - 1) return c.out(0, along_last(c.in(0)));
  if (!d.is_static())
    c.fail(errc::unsupported, "opset " + std::to_string(c.opset()) +
                                  "'s 2-D coercion of an input with run-time sizes");
  ints back(d.dims.begin(), d.dims.begin() + d.rank);
  c.out(0, c.g.reshape(along_last(c.g.flatten(c.in(0), axis)), back));
}

// BatchNormalization in training mode (opset 14's training_mode): normalized by the batch's own
// mean and population variance per channel, which also update the running statistics.
void lower_batch_norm_training(node_context& c) {
  graph& g = c.g;
  const shape d = c.dims_of(0);
  if (d.rank < 2) c.fail(errc::shape_mismatch, "x is " + to_string(d) + ", not [N, C, ...]");
  ints axes{0}, column(static_cast<std::size_t>(d.rank), 1);
  for (int a = 2; a < d.rank; ++a) axes.push_back(a);
  column[1] = -1;
  const value x = c.in(0);
  const value mean = g.reduce(ir::op::reduce_mean, x, axes, false);
  const value centred = g.sub(x, g.reshape(mean, column));
  const value var = g.reduce(ir::op::reduce_mean, g.mul(centred, centred), axes, false);
  c.out(0, g.batch_norm(x, c.in(1), c.in(2), mean, var, c.attr_float("epsilon", 1e-5)));
  const dtype t = c.type_of(3);
  const value momentum = g.constant(c.attr_float("momentum", 0.9), t);
  const value rest = g.constant(1 - c.attr_float("momentum", 0.9), t);
  c.out(1, g.add(g.mul(c.in(3), momentum), g.mul(g.cast(mean, t), rest)));
  c.out(2, g.add(g.mul(c.in(4), momentum), g.mul(g.cast(var, t), rest)));
}

void lower_batch_norm(node_context& c) {
  c.only_attrs({"epsilon", "momentum", "training_mode", "spatial", "is_test", "consumed_inputs"});
  if (c.opset() >= 14 && c.attr_int("training_mode", 0) != 0) return lower_batch_norm_training(c);
  if (c.opset() < 7 && c.attr_int("is_test", 0) == 0)
    c.fail(errc::unsupported, "training mode (kiln: inference only, or opset 14's training_mode)");
  if (c.attr_int("spatial", 1) != 1) c.fail(errc::unsupported, "spatial = 0");
  for (int o = 1; o < c.outputs(); ++o)
    if (c.wants(o)) c.fail(errc::unsupported, "output " + std::to_string(o) + " (training only)");
  c.out(0,
        c.g.batch_norm(c.in(0), c.in(1), c.in(2), c.in(3), c.in(4), c.attr_float("epsilon", 1e-5)));
}

void lower_layer_norm(node_context& c) {
  c.only_attrs({"axis", "epsilon", "stash_type"});
  if (c.attr_int("stash_type", 1) != 1)
    c.fail(errc::unsupported, "stash_type other than 1 (kiln computes statistics in f32)");
  const std::int64_t axis = c.attr_int("axis", -1);
  const double eps = c.attr_float("epsilon", 1e-5);
  c.out(0, c.has(2) ? c.g.layer_norm(c.in(0), c.in(1), c.in(2), axis, eps)
                    : c.g.layer_norm(c.in(0), c.in(1), axis, eps));
  if (!c.wants(1) && !c.wants(2)) return;
  // Mean and InvStdDev, by reductions of their own (Y stays one fused layer_norm).
  const int rank = c.dims_of(0).rank;
  ints axes;
  for (std::int64_t a = normalized_axis(c, axis, rank); a < rank; ++a) axes.push_back(a);
  value x = c.in(0);
  value mean = c.g.reduce(ir::op::reduce_mean, x, axes, true);
  value centred = c.g.sub(x, mean);
  value variance = c.g.reduce(ir::op::reduce_mean, c.g.mul(centred, centred), axes, true);
  c.out(1, mean);
  c.out(2, c.g.rsqrt(c.g.add(variance, c.g.constant(eps, c.type_of(0)))));
}

void lower_mean_variance_norm(node_context& c) {
  c.only_attrs({"axes"});
  ints axes = c.has_attr("axes") ? c.attr_ints("axes") : ints{0, 2, 3};
  value x = c.in(0);
  value centred = c.g.sub(x, c.g.reduce(ir::op::reduce_mean, x, axes, true));
  value variance = c.g.reduce(ir::op::reduce_mean, c.g.mul(centred, centred), axes, true);
  value eps = c.g.constant(1e-9, c.type_of(0));
  c.out(0, c.g.div(centred, c.g.sqrt(c.g.add(variance, eps))));
}

void lower_lp_norm(node_context& c) {
  c.only_attrs({"axis", "p"});
  const std::int64_t p = c.attr_int("p", 2);
  if (p != 1 && p != 2)
    c.fail(errc::invalid_argument, "p is " + std::to_string(p) + ", expected 1 or 2");
  const std::int64_t axis[] = {c.attr_int("axis", -1)};
  value norm = c.g.reduce(p == 1 ? ir::op::reduce_l1 : ir::op::reduce_l2, c.in(0), axis, true);
  c.out(0, c.g.div(c.in(0), norm));
}

ir::pool_window pool_window_of(node_context& c) {
  ir::pool_window w;
  w.kernel = c.attr_ints("kernel_shape");
  w.strides = c.attr_ints("strides");
  w.pads = c.attr_ints("pads");
  w.dilations = c.attr_ints("dilations");
  w.ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  w.count_include_pad = c.attr_int("count_include_pad", 0) != 0;
  w.auto_pad = auto_pad_of(c);
  return w;
}

void lower_pool(node_context& c, bool average) {
  if (average)
    c.only_attrs({"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "count_include_pad",
                  "auto_pad"});
  else
    c.only_attrs(
        {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "storage_order"});
  ir::pool_window w = pool_window_of(c);
  if (c.wants(1)) return lower_max_pool_with_indices(c, w);
  c.out(0, average ? c.g.average_pool(c.in(0), w) : c.g.max_pool(c.in(0), w));
}

void lower_conv(node_context& c, bool transpose) {
  if (transpose)
    c.only_attrs({"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad",
                  "output_padding", "output_shape"});
  else
    c.only_attrs({"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"});
  ir::conv_window w = conv_window_of(c);
  value x = c.in(0), weight = c.in(1);
  if (transpose)
    c.out(0,
          c.has(2) ? c.g.conv_transpose(x, weight, c.in(2), w) : c.g.conv_transpose(x, weight, w));
  else
    c.out(0, c.has(2) ? c.g.conv(x, weight, c.in(2), w) : c.g.conv(x, weight, w));
}

void lower_gemm(node_context& c) {
  c.only_attrs({"alpha", "beta", "transA", "transB", "broadcast"});
  const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  const bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  c.out(0, c.has(2) ? c.g.gemm(c.in(0), c.in(1), c.in(2), alpha, beta, ta, tb)
                    : c.g.gemm(c.in(0), c.in(1), alpha, ta, tb));
}

void lower_one_hot(node_context& c) {
  c.only_attrs({"axis"});
  const auto depth = static_cast<std::int64_t>(c.scalar_input(1, "depth"));
  if (depth < 1) c.fail(errc::invalid_argument, "depth is " + std::to_string(depth));
  const int rank = c.dims_of(0).rank + 1;
  const std::int64_t axis = normalized_axis(c, c.attr_int("axis", -1), rank);
  value index = c.g.cast(c.in(0), dtype::i64);
  value d = c.g.constant(depth, dtype::i64);
  index = c.g.select(c.g.lt(index, c.g.constant(0, dtype::i64)), c.g.add(index, d), index);
  const std::int64_t at[] = {axis};
  index = c.g.unsqueeze(index, at);
  ints positions_dims(static_cast<std::size_t>(rank), 1);
  positions_dims[static_cast<std::size_t>(axis)] = depth;
  value positions =
      c.g.reshape(c.g.range(0, static_cast<double>(depth), 1, dtype::i64), positions_dims);
  value values = c.in(2);
  const std::int64_t zero[] = {0}, one[] = {1}, two[] = {2};
  value off = c.g.reshape(c.g.slice(values, zero, one), ints{});
  value on = c.g.reshape(c.g.slice(values, one, two), ints{});
  c.out(0, c.g.select(c.g.eq(index, positions), on, off));
}

void lower_eye_like(node_context& c) {
  c.only_attrs({"dtype", "k"});
  shape d = c.dims_of(0);
  if (d.rank != 2 || !d.is_static())
    c.fail(errc::unsupported, "input dims " + to_string(d) + " (kiln: static, rank 2)");
  const dtype t = c.has_attr("dtype") ? c.element_type(c.attr_int("dtype", 1)) : c.type_of(0);
  const std::int64_t k = c.attr_int("k", 0);
  std::vector<double> v(static_cast<std::size_t>(d.element_count()), 0.0);
  for (std::int64_t i = 0; i < d.dims[0]; ++i)
    if (i + k >= 0 && i + k < d.dims[1]) v[static_cast<std::size_t>(i * d.dims[1] + i + k)] = 1;
  value ones = c.g.constant(v.data(), dtype::f64, v.size(), d);
  c.out(0, c.g.cast(ones, t));
}

void lower_trilu(node_context& c) {
  c.only_attrs({"upper"});
  shape d = c.dims_of(0);
  if (d.rank < 2 || d.dims[d.rank - 1] == dyn || d.dims[d.rank - 2] == dyn)
    c.fail(errc::unsupported, "input dims " + to_string(d) + " (kiln: the last two static)");
  const std::int64_t k = c.has(1) ? static_cast<std::int64_t>(c.scalar_input(1, "k")) : 0;
  const bool upper = c.attr_int("upper", 1) != 0;
  const std::int64_t n = d.dims[d.rank - 2], m = d.dims[d.rank - 1];
  std::vector<unsigned char> keep(static_cast<std::size_t>(n * m));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j)
      keep[static_cast<std::size_t>(i * m + j)] = upper ? j - i >= k : j - i <= k;
  value mask = c.g.constant(std::move(keep), dtype::boolean, shape{n, m});
  c.out(0, c.g.select(mask, c.in(0), c.g.constant(0.0, c.type_of(0))));
}

void lower_range(node_context& c) {
  c.only_attrs({});
  c.out(0, c.g.range(c.scalar_input(0, "start"), c.scalar_input(1, "limit"),
                     c.scalar_input(2, "delta"), c.type_of(0)));
}

}  // namespace

kiln::auto_pad auto_pad_of(const node_context& c) {
  std::string p = c.attr_string("auto_pad", "NOTSET");
  if (p == "NOTSET") return kiln::auto_pad::notset;
  if (p == "SAME_UPPER") return kiln::auto_pad::same_upper;
  if (p == "SAME_LOWER") return kiln::auto_pad::same_lower;
  if (p == "VALID") return kiln::auto_pad::valid;
  c.fail(errc::invalid_argument,
         "auto_pad is '" + p + "', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
}

ir::conv_window conv_window_of(node_context& c) {
  ir::conv_window w;
  w.strides = c.attr_ints("strides");
  w.pads = c.attr_ints("pads");
  w.dilations = c.attr_ints("dilations");
  w.groups = c.attr_int("group", 1);
  w.auto_pad = auto_pad_of(c);
  w.output_padding = c.attr_ints("output_padding");
  w.output_shape = c.attr_ints("output_shape");
  // kernel_shape is the weight's own spatial extents; a different one is refused.
  ints kernel = c.attr_ints("kernel_shape");
  shape wd = c.dims_of(1);
  for (std::size_t i = 0; i < kernel.size(); ++i)
    if (2 + static_cast<int>(i) >= wd.rank || kernel[i] != wd.dims[2 + i])
      c.fail(errc::shape_mismatch, "kernel_shape " + std::to_string(kernel[i]) + " at axis " +
                                       std::to_string(i) + " differs from the weight's dims " +
                                       to_string(wd));
  return w;
}

void add_tensor_lowerings(lowering_table& t) {
  t["Constant"] = lower_constant;
  t["ConstantOfShape"] = lower_constant_of_shape;
  t["Shape"] = lower_shape;
  t["Size"] = lower_size;
  t["Reshape"] = lower_reshape;
  t["Slice"] = lower_slice;
  t["Split"] = lower_split;
  t["Pad"] = lower_pad;
  t["Range"] = lower_range;
  t["OneHot"] = lower_one_hot;
  t["EyeLike"] = lower_eye_like;
  t["Trilu"] = lower_trilu;
  t["Expand"] = [](node_context& c) {
    c.only_attrs({});
    c.out(0, c.g.expand(c.in(0), c.ints_input(1, "shape")));
  };
  t["Tile"] = [](node_context& c) {
    c.only_attrs({});
    if (c.opset() >= 6) return c.out(0, c.g.tile(c.in(0), c.ints_input(1, "repeats")));
    // Before opset 6: inputs tiles and axis, the input repeated `tiles` times along `axis`.
    const int rank = c.dims_of(0).rank;
    ints repeats(static_cast<std::size_t>(rank), 1);
    const auto axis = static_cast<std::int64_t>(c.scalar_input(2, "axis"));
    repeats.at(static_cast<std::size_t>(normalized_axis(c, axis, rank))) =
        static_cast<std::int64_t>(c.scalar_input(1, "tiles"));
    c.out(0, c.g.tile(c.in(0), repeats));
  };
  t["Squeeze"] = [](node_context& c) {
    c.only_attrs({"axes"});
    c.out(0, c.g.squeeze(c.in(0), axes_of(c, "axes", 13, 1)));
  };
  t["Unsqueeze"] = [](node_context& c) {
    c.only_attrs({"axes"});
    c.out(0, c.g.unsqueeze(c.in(0), axes_of(c, "axes", 13, 1)));
  };
  t["Flatten"] = [](node_context& c) {
    c.only_attrs({"axis"});
    c.out(0, c.g.flatten(c.in(0), c.attr_int("axis", 1)));
  };
  t["Transpose"] = [](node_context& c) {
    c.only_attrs({"perm"});
    c.out(0, c.g.transpose(c.in(0), c.attr_ints("perm")));
  };
  t["Concat"] = [](node_context& c) {
    c.only_attrs({"axis"});
    c.out(0, c.g.concat(c.present_inputs(), c.attr_int("axis", c.opset() < 4 ? 1 : 0)));
  };
  t["Gather"] = [](node_context& c) {
    c.only_attrs({"axis"});
    c.out(0, c.g.gather(c.in(0), c.in(1), c.attr_int("axis", 0)));
  };
  t["GatherElements"] = [](node_context& c) {
    c.only_attrs({"axis"});
    c.out(0, c.g.gather_elements(c.in(0), c.in(1), c.attr_int("axis", 0)));
  };
  t["DepthToSpace"] = [](node_context& c) {
    c.only_attrs({"blocksize", "mode"});
    c.out(0, c.g.depth_to_space(c.in(0), c.attr_int("blocksize", 0), c.attr_string("mode", "DCR")));
  };
  t["SpaceToDepth"] = [](node_context& c) {
    c.only_attrs({"blocksize"});
    c.out(0, c.g.space_to_depth(c.in(0), c.attr_int("blocksize", 0)));
  };
#define KILN_REDUCE(ONNX, OP) t[ONNX] = [](node_context& c) { lower_reduce(c, ir::op::OP); };
  KILN_REDUCE("ReduceSum", reduce_sum)
  KILN_REDUCE("ReduceMean", reduce_mean)
  KILN_REDUCE("ReduceMax", reduce_max)
  KILN_REDUCE("ReduceMin", reduce_min)
  KILN_REDUCE("ReduceProd", reduce_prod)
  KILN_REDUCE("ReduceL1", reduce_l1)
  KILN_REDUCE("ReduceL2", reduce_l2)
  KILN_REDUCE("ReduceSumSquare", reduce_sum_square)
  KILN_REDUCE("ReduceLogSumExp", input)  // (input: the composite reduce_log_sum_exp)
#undef KILN_REDUCE
  t["ReduceLogSum"] = lower_reduce_log_sum;
  t["ArgMax"] = [](node_context& c) { lower_arg(c, ir::op::argmax); };
  t["ArgMin"] = [](node_context& c) { lower_arg(c, ir::op::argmin); };
  t["TopK"] = lower_top_k;
  t["ScatterElements"] = lower_scatter_elements;
  t["Scatter"] = lower_scatter_elements;
  t["Det"] = [](node_context& c) {
    c.only_attrs({});
    c.out(0, c.g.det(c.in(0)));
  };
  t["ScatterND"] = [](node_context& c) {
    if (c.opset() >= 16)
      c.only_attrs({"reduction"});
    else
      c.only_attrs({});
    c.out(0, c.g.scatter_nd(c.in(0), c.in(1), c.in(2), scatter_reduction(c)));
  };
  t["Softmax"] = [](node_context& c) { lower_softmax_family(c, 0); };
  t["LogSoftmax"] = [](node_context& c) { lower_softmax_family(c, 1); };
  t["Hardmax"] = [](node_context& c) { lower_softmax_family(c, 2); };
  t["BatchNormalization"] = lower_batch_norm;
  t["LayerNormalization"] = lower_layer_norm;
  t["InstanceNormalization"] = [](node_context& c) {
    c.only_attrs({"epsilon"});
    c.out(0, c.g.instance_norm(c.in(0), c.in(1), c.in(2), c.attr_float("epsilon", 1e-5)));
  };
  t["MeanVarianceNormalization"] = lower_mean_variance_norm;
  t["LpNormalization"] = lower_lp_norm;
  t["MaxPool"] = [](node_context& c) { lower_pool(c, false); };
  t["AveragePool"] = [](node_context& c) { lower_pool(c, true); };
  t["GlobalMaxPool"] = [](node_context& c) {
    c.only_attrs({});
    c.out(0, c.g.global_max_pool(c.in(0)));
  };
  t["GlobalAveragePool"] = [](node_context& c) {
    c.only_attrs({});
    c.out(0, c.g.global_average_pool(c.in(0)));
  };
  t["MatMul"] = [](node_context& c) {
    c.only_attrs({});
    c.out(0, c.g.matmul(c.in(0), c.in(1)));
  };
  t["MatMulInteger"] = [](node_context& c) {
    c.only_attrs({});
    if (!c.has(2) && !c.has(3)) return c.out(0, c.g.matmul_integer(c.in(0), c.in(1)));
    value za = c.has(2) ? c.in(2) : c.g.constant(0, c.type_of(0));
    value zb = c.has(3) ? c.in(3) : c.g.constant(0, c.type_of(1));
    c.out(0, c.g.matmul_integer(c.in(0), c.in(1), za, zb));
  };
  t["Gemm"] = lower_gemm;
  t["Conv"] = [](node_context& c) { lower_conv(c, false); };
  t["ConvTranspose"] = [](node_context& c) { lower_conv(c, true); };
}

}  // namespace kiln::onnx_import
