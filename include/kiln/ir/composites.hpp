// Ops that are graphs of other ops: softmax, log_softmax, reduce_log_sum_exp, layer_norm and
// rms_norm, built here once for both doors. They are the graphs a user would write by hand, so
// the compiler fuses either the same way (one row group: max, sum and divide in one dispatch).
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
  dtype c = b.get().nodes[w].type;
  std::uint32_t axes = axes_from(axis, b.get().nodes[x].dims.rank);
  std::int32_t d = b.binary(op::sub, w, b.reduce(op::reduce_mean, w, axes, true));
  std::int32_t var = b.reduce(op::reduce_mean, b.binary(op::mul, d, d), axes, true);
  std::int32_t inv =
      b.unary(op::rsqrt, b.binary(op::add, var, b.constant(scalar::computed(c, epsilon))));
  std::int32_t y = b.binary(op::mul, b.binary(op::mul, d, inv), detail::widened(b, scale));
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

}  // namespace kiln::ir
