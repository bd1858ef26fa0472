// ONNX ops that kiln builds from several graph ops: the classification losses, CumSum and LRN (as
// products with a constant 0/1 matrix), DynamicQuantizeLinear.
#include <cmath>
#include <cstring>
#include <numeric>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;
using ints = std::vector<std::int64_t>;

ints all_axes(int rank) {
  ints a(static_cast<std::size_t>(rank));
  std::iota(a.begin(), a.end(), 0);
  return a;
}

// A [rows, cols] matrix of x's dtype, 1 where keep(i, j), else 0.
template <class Keep>
value mask_matrix(graph& g, dtype t, std::int64_t rows, std::int64_t cols, Keep keep) {
  std::vector<double> m(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) m[static_cast<std::size_t>(i * cols + j)] = keep(i, j);
  return g.cast(g.constant(m.data(), dtype::f64, m.size(), shape{rows, cols}), t);
}

// y[..., j, ...] = sum over i of x[..., i, ...] m[i, j] along `axis` (x's axis moved last, a
// product with m, moved back).
value along_axis_times(graph& g, value x, std::int64_t axis, value m) {
  const int rank = g.dims_of(x).rank;
  if (rank == 1) return g.reshape(g.matmul(g.reshape(x, {1, -1}), m), {-1});
  ints perm = all_axes(rank);
  std::swap(perm[static_cast<std::size_t>(axis)], perm.back());
  return g.transpose(g.matmul(g.transpose(x, perm), m), perm);
}

// NegativeLogLikelihoodLoss on log-probabilities [N, C, d...] and targets [N, d...].
value nll_loss(node_context& c, value input, value target, std::optional<value> weight) {
  c.only_attrs({"reduction", "ignore_index"});
  graph& g = c.g;
  const std::string reduction = c.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    c.fail(errc::invalid_argument, "reduction is '" + reduction + "', expected none, sum or mean");
  const dtype t = g.type_of(input);
  value index = g.cast(target, dtype::i64);
  std::optional<value> ignored;
  if (c.has_attr("ignore_index")) {
    ignored = g.eq(index, g.constant(c.attr_int("ignore_index", 0), dtype::i64));
    index = g.select(*ignored, g.constant(0, dtype::i64), index);
  }
  const std::int64_t class_axis[] = {1};
  value picked = g.squeeze(g.gather_elements(input, g.unsqueeze(index, class_axis), 1), class_axis);
  std::optional<value> w;
  if (weight) w = g.gather(*weight, index, 0);
  if (ignored) w = g.select(*ignored, g.constant(0.0, t), w ? *w : g.constant(1.0, t));
  value loss = w ? g.mul(g.neg(picked), *w) : g.neg(picked);
  if (reduction == "none") return loss;
  const ints axes = all_axes(g.dims_of(loss).rank);
  value total = g.reduce(ir::op::reduce_sum, loss, axes, false);
  if (reduction == "sum") return total;
  if (!w) return g.reduce(ir::op::reduce_mean, loss, axes, false);
  return g.div(total, g.reduce(ir::op::reduce_sum, *w, axes, false));  // w has the loss's dims
}

void lower_nll(node_context& c) {
  c.out(0, nll_loss(c, c.in(0), c.in(1), c.has(2) ? std::optional(c.in(2)) : std::nullopt));
}

void lower_softmax_cross_entropy(node_context& c) {
  value log_prob = c.g.log_softmax(c.in(0), 1);
  c.out(0, nll_loss(c, log_prob, c.in(1), c.has(2) ? std::optional(c.in(2)) : std::nullopt));
  c.out(1, log_prob);
}

void lower_cumsum(node_context& c) {
  c.only_attrs({"exclusive", "reverse"});
  const shape d = c.dims_of(0);
  auto axis = static_cast<std::int64_t>(c.scalar_input(1, "axis"));
  if (axis < -d.rank || axis >= d.rank)
    c.fail(errc::invalid_argument,
           "axis " + std::to_string(axis) + " is outside rank " + std::to_string(d.rank));
  if (axis < 0) axis += d.rank;
  const std::int64_t n = d.dims[axis];
  if (n == dyn) c.fail(errc::unsupported, "the summed axis has a run-time size");
  const bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  // y[j] sums x[i] for i up to j (reverse: from j on); exclusive leaves out i = j.
  value m = mask_matrix(c.g, c.type_of(0), n, n, [&](std::int64_t i, std::int64_t j) {
    return reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
  });
  c.out(0, along_axis_times(c.g, c.in(0), axis, m));
}

void lower_lrn(node_context& c) {
  c.only_attrs({"size", "alpha", "beta", "bias"});
  const shape d = c.dims_of(0);
  const std::int64_t size = c.attr_int("size", 0);
  if (size < 1) c.fail(errc::invalid_argument, "size is " + std::to_string(size));
  if (d.rank < 3 || d.dims[1] == dyn)
    c.fail(errc::unsupported, "input dims " + to_string(d) + " (kiln: [N, C, ...], C static)");
  const std::int64_t channels = d.dims[1], before = (size - 1) / 2, after = size - 1 - before;
  const dtype t = c.type_of(0);
  value x = c.in(0);
  // The squares summed over channels c - before to c + after, as a product with a band matrix.
  value band = mask_matrix(c.g, t, channels, channels, [&](std::int64_t i, std::int64_t j) {
    return i >= j - before && i <= j + after;
  });
  value sums = along_axis_times(c.g, c.g.mul(x, x), 1, band);
  value scale = c.g.add(
      c.g.constant(c.attr_float("bias", 1.0), t),
      c.g.mul(c.g.constant(c.attr_float("alpha", 1e-4) / static_cast<double>(size), t), sums));
  c.out(0, c.g.div(x, c.g.pow(scale, c.g.constant(c.attr_float("beta", 0.75), t))));
}

void lower_dynamic_quantize(node_context& c) {
  c.only_attrs({});
  graph& g = c.g;
  value x = c.in(0);
  const dtype t = c.type_of(0);
  const ints axes = all_axes(c.dims_of(0).rank);
  value zero = g.constant(0.0, t);
  value hi = g.max(g.reduce(ir::op::reduce_max, x, axes, false), zero);
  value lo = g.min(g.reduce(ir::op::reduce_min, x, axes, false), zero);
  value scale = g.div(g.sub(hi, lo), g.constant(255.0, t));
  value q_lo = g.constant(0.0, t), q_hi = g.constant(255.0, t);
  value zero_point = g.clip(g.round(g.sub(zero, g.div(lo, scale))), q_lo, q_hi);
  value y = g.clip(g.add(g.round(g.div(x, scale)), zero_point), q_lo, q_hi);
  c.out(0, g.cast(y, dtype::u8));
  c.out(1, scale);
  c.out(2, g.cast(zero_point, dtype::u8));
}

// HannWindow, HammingWindow, BlackmanWindow: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), with
// N the size (periodic) or the size - 1 (symmetric); computed at import.
void lower_window(node_context& c, double a0, double a1, double a2) {
  c.only_attrs({"output_datatype", "periodic"});
  const auto size = static_cast<std::int64_t>(c.scalar_input(0, "size"));
  if (size < 0) c.fail(errc::invalid_argument, "size is " + std::to_string(size));
  auto to = dtype_from_onnx(static_cast<int>(c.attr_int("output_datatype", 1)));
  if (!to) c.fail(errc::unsupported, "output_datatype is not one of kiln's element types");
  const double n = static_cast<double>(c.attr_int("periodic", 1) != 0 ? size : size - 1);
  const double pi = 3.14159265358979323846;
  std::vector<double> w(static_cast<std::size_t>(size));
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double x = 2 * pi * static_cast<double>(i) / n;
    w[i] = a0 - a1 * std::cos(x) + a2 * std::cos(2 * x);
  }
  c.out(0, c.g.cast(c.g.constant(w.data(), dtype::f64, w.size(), shape{size}), *to));
}

// x - zero point, exactly, in f64 (every integer product and sum of int8 data up to 2^53).
value centred_f64(node_context& c, int x, int zero_point) {
  value v = c.g.cast(c.in(x), dtype::f64);
  return c.has(zero_point) ? c.g.sub(v, c.g.cast(c.in(zero_point), dtype::f64)) : v;
}

void lower_conv_integer(node_context& c) {
  c.only_attrs({"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"});
  ir::conv_window w;
  w.strides = c.attr_ints("strides");
  w.pads = c.attr_ints("pads");
  w.dilations = c.attr_ints("dilations");
  w.groups = c.attr_int("group", 1);
  std::string pad = c.attr_string("auto_pad", "NOTSET");
  w.auto_pad = pad == "SAME_UPPER"   ? kiln::auto_pad::same_upper
               : pad == "SAME_LOWER" ? kiln::auto_pad::same_lower
               : pad == "VALID"      ? kiln::auto_pad::valid
                                     : kiln::auto_pad::notset;
  if (pad != "NOTSET" && pad != "SAME_UPPER" && pad != "SAME_LOWER" && pad != "VALID")
    c.fail(errc::invalid_argument, "auto_pad is '" + pad + "'");
  c.out(0, c.g.cast(c.g.conv(centred_f64(c, 0, 2), centred_f64(c, 1, 3), w), dtype::i32));
}

// (a - a_zero)(b - b_zero) a_scale b_scale / y_scale + y_zero, rounded half to even and
// saturated to y's type, as ONNX's reference computes it (the scale in f32).
void lower_qlinear_matmul(node_context& c) {
  c.only_attrs({});
  graph& g = c.g;
  value product = g.cast(g.matmul(centred_f64(c, 0, 2), centred_f64(c, 3, 5)), dtype::f32);
  value scale = g.div(g.mul(c.in(1), c.in(4)), c.in(6));
  const dtype to = c.type_of(7);
  value y = g.add(g.round(g.mul(product, scale)), g.cast(c.in(7), dtype::f32));
  const double lo = to == dtype::u8 ? 0 : -128, hi = to == dtype::u8 ? 255 : 127;
  c.out(0, g.cast(g.clip(y, g.constant(lo, dtype::f32), g.constant(hi, dtype::f32)), to));
}

}  // namespace

void add_composite_lowerings(lowering_table& t) {
  t["HannWindow"] = [](node_context& c) { lower_window(c, 0.5, 0.5, 0); };
  t["HammingWindow"] = [](node_context& c) { lower_window(c, 25.0 / 46.0, 21.0 / 46.0, 0); };
  t["BlackmanWindow"] = [](node_context& c) { lower_window(c, 0.42, 0.5, 0.08); };
  t["ConvInteger"] = lower_conv_integer;
  t["QLinearMatMul"] = lower_qlinear_matmul;
  t["NegativeLogLikelihoodLoss"] = lower_nll;
  t["SoftmaxCrossEntropyLoss"] = lower_softmax_cross_entropy;
  t["CumSum"] = lower_cumsum;
  t["LRN"] = lower_lrn;
  t["DynamicQuantizeLinear"] = lower_dynamic_quantize;
}

}  // namespace kiln::onnx_import
