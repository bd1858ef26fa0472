// Ops that are graphs of other ops: softmax, log_softmax, reduce_log_sum_exp, layer_norm,
// rms_norm, batch_norm, instance_norm and group_norm, built here once for both doors. They are the
// graphs a user would write by hand, so the compiler fuses either the same way (one row group: max,
// sum and divide in one dispatch).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/ir/builder.hpp"

namespace kiln::ir {

// The axes [axis, rank): the trailing axes ONNX's LayerNormalization normalizes over.
constexpr std::uint32_t axes_from(int axis, int rank) {
  std::uint32_t m = 0;
  for (int i = axis; i < rank; ++i) m |= 1u << i;
  return m;
}

namespace detail {

// Narrow floats are normalized in f32 (ONNX's stash_type 1) and rounded once at the end.
constexpr std::int32_t widened(builder& b, std::int32_t x) {
  dtype t = b.get().nodes[x].type;
  return is_storage_only(t) ? b.cast(x, dtype::f32) : x;
}
constexpr std::int32_t narrowed(builder& b, std::int32_t y, dtype t) {
  return b.get().nodes[y].type == t ? y : b.cast(y, t);
}
constexpr void expect_floating(builder& b, std::string_view name, std::int32_t x) {
  dtype t = b.get().nodes[x].type;
  if (!is_floating(t))
    throw error(errc::dtype_mismatch, std::string(name),
                "needs floating-point elements, got " + std::string(kiln::name(t)));
}

// scale or bias (`what`) of normalization `name`: its dims must broadcast to x's, right-aligned.
constexpr void expect_parameter(builder& b, std::string_view name, std::string_view what,
                                std::int32_t x, std::int32_t p) {
  const node& xn = b.get().nodes[x];
  const node& pn = b.get().nodes[p];
  bool fits = pn.dims.rank <= xn.dims.rank;
  for (int i = 0; fits && i < pn.dims.rank; ++i) {
    std::int64_t d = pn.dims.dims[pn.dims.rank - 1 - i];
    std::int64_t xd = xn.dims.dims[xn.dims.rank - 1 - i];
    fits = d == 1 || d == xd || is_symbol(d) || is_symbol(xd);  // run-time sizes: checked then
  }
  if (!fits)
    throw error(errc::shape_mismatch, std::string(name),
                std::string(what) + " has dims " + to_string(pn.dims) +
                    ", which do not broadcast to x's " + to_string(xn.dims));
  if (pn.type != xn.type)
    throw error(errc::dtype_mismatch, std::string(name),
                std::string(what) + " is " + std::string(kiln::name(pn.type)) + ", x is " +
                    std::string(kiln::name(xn.type)));
}

// Per-channel parameter p (`what`, [C]) of normalization `name` for x [N, C, D...]: as
// [C, 1, ..., 1], so it broadcasts along axis 1 (a view, read in place).
constexpr std::int32_t per_channel(builder& b, std::string_view name, std::string_view what,
                                   std::int32_t x, std::int32_t p) {
  const node& xn = b.get().nodes[x];
  const node& pn = b.get().nodes[p];
  if (pn.type != xn.type)
    throw error(errc::dtype_mismatch, std::string(name),
                std::string(what) + " is " + std::string(kiln::name(pn.type)) + ", x is " +
                    std::string(kiln::name(xn.type)));
  std::int64_t c = xn.dims.dims[1], pc = pn.dims.rank == 1 ? pn.dims.dims[0] : -2;
  if (pn.dims.rank != 1 || (pc != c && !is_symbol(pc) && !is_symbol(c)))
    throw error(errc::shape_mismatch, std::string(name),
                std::string(what) + " has dims " + to_string(pn.dims) + ", expected [" +
                    (is_symbol(c) ? std::string("?") : kiln::detail::to_text(c)) +
                    "] (x's channels, axis 1 of " + to_string(xn.dims) + ")");
  std::int64_t sizes[max_rank] = {0};
  for (int i = 1; i < xn.dims.rank - 1; ++i) sizes[i] = 1;
  return b.reshape(p, std::span<const std::int64_t>(sizes, xn.dims.rank - 1));
}

constexpr void expect_channels(builder& b, std::string_view name, std::int32_t x, int min_rank) {
  expect_floating(b, name, x);
  int rank = b.get().nodes[x].dims.rank;
  if (rank < min_rank)
    throw error(errc::shape_mismatch, std::string(name),
                "x has rank " + kiln::detail::to_text(rank) + ", expected at least " +
                    kiln::detail::to_text(min_rank) + " ([N, C, ...])");
}

// (x - mean) / sqrt(var + epsilon) over the axes of `axes`, kept with size 1, in x's (widened)
// type: the core of layer_norm, instance_norm and group_norm.
constexpr std::int32_t normalized(builder& b, std::int32_t w, std::uint32_t axes, double epsilon) {
  dtype c = b.get().nodes[w].type;
  std::int32_t d = b.binary(op::sub, w, b.reduce(op::reduce_mean, w, axes, true));
  std::int32_t var = b.reduce(op::reduce_mean, b.binary(op::mul, d, d), axes, true);
  std::int32_t inv =
      b.unary(op::rsqrt, b.binary(op::add, var, b.constant(scalar::computed(c, epsilon))));
  return b.binary(op::mul, d, inv);
}

}  // namespace detail

// exp(x - max) / sum(exp(x - max)) along `axis` (0 <= axis < rank): ONNX's Softmax (opset 13).
constexpr std::int32_t softmax(builder& b, std::int32_t x, int axis) {
  detail::expect_floating(b, "softmax", x);
  dtype t = b.get().nodes[x].type;
  std::int32_t w = detail::widened(b, x);
  std::uint32_t axes = 1u << axis;
  std::int32_t e = b.unary(op::exp, b.binary(op::sub, w, b.reduce(op::reduce_max, w, axes, true)));
  return detail::narrowed(b, b.binary(op::div, e, b.reduce(op::reduce_sum, e, axes, true)), t);
}

// (x - max) - log(sum(exp(x - max))) along `axis`: ONNX's LogSoftmax (opset 13).
constexpr std::int32_t log_softmax(builder& b, std::int32_t x, int axis) {
  detail::expect_floating(b, "log_softmax", x);
  dtype t = b.get().nodes[x].type;
  std::int32_t w = detail::widened(b, x);
  std::uint32_t axes = 1u << axis;
  std::int32_t d = b.binary(op::sub, w, b.reduce(op::reduce_max, w, axes, true));
  std::int32_t s = b.reduce(op::reduce_sum, b.unary(op::exp, d), axes, true);
  return detail::narrowed(b, b.binary(op::sub, d, b.unary(op::log, s)), t);
}

// log(sum(exp(x))) over `axes`: ONNX's ReduceLogSumExp (opset 18), computed as
// m + log(sum(exp(x - m))) with m the finite maximum (0 where it is infinite, so that a row of
// -inf gives -inf and one holding +inf gives +inf, as the plain formula does). No axes: log(exp(x))
// of each element, as ONNX's noop_with_empty_axes does not apply here (none means every axis).
constexpr std::int32_t reduce_log_sum_exp(builder& b, std::int32_t x, std::uint32_t axes,
                                          bool keepdims) {
  detail::expect_floating(b, "reduce_log_sum_exp", x);
  dtype t = b.get().nodes[x].type;
  std::int32_t w = detail::widened(b, x);
  std::int32_t zero = b.constant(scalar::computed(b.get().nodes[w].type, 0));
  auto finite_max = [&](bool keep) {
    std::int32_t m = b.reduce(op::reduce_max, w, axes, keep);
    return b.select(b.unary(op::isinf, m), zero, m);
  };
  std::int32_t s = b.reduce(
      op::reduce_sum, b.unary(op::exp, b.binary(op::sub, w, finite_max(true))), axes, keepdims);
  std::int32_t m = keepdims ? finite_max(true) : finite_max(false);
  return detail::narrowed(b, b.binary(op::add, b.unary(op::log, s), m), t);
}

// (x - mean) / sqrt(var + epsilon) * scale + bias over axes [axis, rank): ONNX's
// LayerNormalization (opset 17) with its Y output; bias -1 for none.
constexpr std::int32_t layer_norm(builder& b, std::int32_t x, std::int32_t scale, std::int32_t bias,
                                  int axis, double epsilon) {
  detail::expect_floating(b, "layer_norm", x);
  detail::expect_parameter(b, "layer_norm", "scale", x, scale);
  if (bias >= 0) detail::expect_parameter(b, "layer_norm", "bias", x, bias);
  dtype t = b.get().nodes[x].type;
  std::int32_t w = detail::widened(b, x);
  std::uint32_t axes = axes_from(axis, b.get().nodes[x].dims.rank);
  std::int32_t y =
      b.binary(op::mul, detail::normalized(b, w, axes, epsilon), detail::widened(b, scale));
  if (bias >= 0) y = b.binary(op::add, y, detail::widened(b, bias));
  return detail::narrowed(b, y, t);
}

// x / sqrt(mean(x^2) + epsilon) * scale over axes [axis, rank): ONNX's RMSNormalization (opset
// 23).
constexpr std::int32_t rms_norm(builder& b, std::int32_t x, std::int32_t scale, int axis,
                                double epsilon) {
  detail::expect_floating(b, "rms_norm", x);
  detail::expect_parameter(b, "rms_norm", "scale", x, scale);
  dtype t = b.get().nodes[x].type;
  std::int32_t w = detail::widened(b, x);
  dtype c = b.get().nodes[w].type;
  std::uint32_t axes = axes_from(axis, b.get().nodes[x].dims.rank);
  std::int32_t ms = b.reduce(op::reduce_mean, b.binary(op::mul, w, w), axes, true);
  std::int32_t inv =
      b.unary(op::rsqrt, b.binary(op::add, ms, b.constant(scalar::computed(c, epsilon))));
  return detail::narrowed(
      b, b.binary(op::mul, b.binary(op::mul, w, inv), detail::widened(b, scale)), t);
}

// (x - mean) / sqrt(var + epsilon) * scale + bias with per-channel statistics given: ONNX's
// BatchNormalization (opset 15) for inference (training_mode 0). x [N, C, ...]; the rest [C].
constexpr std::int32_t batch_norm(builder& b, std::int32_t x, std::int32_t scale, std::int32_t bias,
                                  std::int32_t mean, std::int32_t var, double epsilon) {
  detail::expect_channels(b, "batch_norm", x, 2);
  dtype t = b.get().nodes[x].type;
  auto channel = [&](std::int32_t p, std::string_view what) {
    return detail::widened(b, detail::per_channel(b, "batch_norm", what, x, p));
  };
  std::int32_t w = detail::widened(b, x);
  dtype c = b.get().nodes[w].type;
  std::int32_t s = channel(scale, "scale"), o = channel(bias, "bias"), m = channel(mean, "mean");
  std::int32_t v = channel(var, "var");
  std::int32_t inv =
      b.unary(op::rsqrt, b.binary(op::add, v, b.constant(scalar::computed(c, epsilon))));
  std::int32_t y =
      b.binary(op::add, b.binary(op::mul, b.binary(op::sub, w, m), b.binary(op::mul, inv, s)), o);
  return detail::narrowed(b, y, t);
}

// Each channel of each sample normalized over its spatial axes, then scaled and shifted per
// channel: ONNX's InstanceNormalization (opset 6). x [N, C, D...]; scale and bias [C].
constexpr std::int32_t instance_norm(builder& b, std::int32_t x, std::int32_t scale,
                                     std::int32_t bias, double epsilon) {
  detail::expect_channels(b, "instance_norm", x, 3);
  dtype t = b.get().nodes[x].type;
  std::int32_t s = detail::widened(b, detail::per_channel(b, "instance_norm", "scale", x, scale));
  std::int32_t o = detail::widened(b, detail::per_channel(b, "instance_norm", "bias", x, bias));
  std::int32_t w = detail::widened(b, x);
  std::int32_t n = detail::normalized(b, w, axes_from(2, b.get().nodes[x].dims.rank), epsilon);
  return detail::narrowed(b, b.binary(op::add, b.binary(op::mul, n, s), o), t);
}

// The channels of each sample normalized in `groups` groups (each over its channels' spatial
// elements), then scaled and shifted per channel: ONNX's GroupNormalization with per-channel
// scale and bias (opset 21). x [N, C, D...] with C a multiple of groups and static C and D.
constexpr std::int32_t group_norm(builder& b, std::int32_t x, std::int32_t scale, std::int32_t bias,
                                  std::int64_t groups, double epsilon) {
  detail::expect_channels(b, "group_norm", x, 2);
  const shape dims = b.get().nodes[x].dims;
  std::int64_t c = dims.dims[1];
  for (int i = 1; i < dims.rank; ++i)
    if (is_symbol(dims.dims[i]))
      throw error(errc::shape_mismatch, "group_norm",
                  "axis " + kiln::detail::to_text(i) + " of x " + to_string(dims) +
                      " has a run-time size: the channels and spatial sizes must be static");
  if (groups <= 0 || is_symbol(c) || c % groups != 0)
    throw error(errc::shape_mismatch, "group_norm",
                "num_groups " + kiln::detail::to_text(groups) + " does not divide the " +
                    (is_symbol(c) ? std::string("run-time") : kiln::detail::to_text(c)) +
                    " channels of x " + to_string(dims));
  dtype t = b.get().nodes[x].type;
  std::int32_t s = detail::widened(b, detail::per_channel(b, "group_norm", "scale", x, scale));
  std::int32_t o = detail::widened(b, detail::per_channel(b, "group_norm", "bias", x, bias));
  std::int64_t grouped[3] = {0, groups, -1};  // [N, groups, the rest]
  std::int32_t w = detail::widened(b, b.reshape(x, grouped));
  std::int32_t n = detail::normalized(b, w, 1u << 2, epsilon);
  std::int64_t back[max_rank] = {0};
  for (int i = 1; i < dims.rank; ++i) back[i] = dims.dims[i];
  n = b.reshape(n, std::span<const std::int64_t>(back, dims.rank));
  return detail::narrowed(b, b.binary(op::add, b.binary(op::mul, n, s), o), t);
}

}  // namespace kiln::ir
