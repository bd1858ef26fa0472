// The DSL's normalizations: softmax, log_softmax, reduce_log_sum_exp, layer_norm and rms_norm,
// each the graph of ir/composites.hpp (fused by the compiler into one row group), with its axes
// and extents checked at compile time.
#pragma once

#include "kiln/dsl/ops.hpp"
#include "kiln/ir/composites.hpp"

namespace kiln {

namespace detail {

// The checks every normalization makes of its operand x and its axis (negative: from the end).
template <int Axis, class A>
constexpr bool normalization_ok() {
  using E = typename A::extents_type;
  constexpr bool elements_ok = floating_element<typename A::element>;
  static_assert(elements_ok, "kiln normalization: needs floating-point elements");
  constexpr bool in_range = Axis >= -E::rank && Axis < E::rank;
  static_assert(in_range, "kiln normalization: the axis is out of range for the operand's rank");
  return elements_ok && in_range;
}
template <int Axis, class A>
constexpr int axis_of() {
  return Axis < 0 ? Axis + A::extents_type::rank : Axis;
}

// The extents of x combined with its scale (and bias) operands, which must broadcast to x's.
template <class A, class... P>
constexpr bool parameters_ok() {
  constexpr bool types_agree = (same_element_type<A, P> && ...);
  static_assert(types_agree, "kiln normalization: scale and bias must have x's element type");
  using E = typename A::extents_type;
  constexpr bool shapes_ok = (broadcastable_extents<E, typename P::extents_type> && ...);
  static_assert(shapes_ok, "kiln normalization: scale or bias does not broadcast against x");
  return types_agree && shapes_ok;
}

}  // namespace detail

namespace detail {
// x's extents and element type, built by composite `build(builder, x, axis)` along Axis.
template <int Axis, class A, class Build>
constexpr auto along_axis(const A& x, Build build) {
  if constexpr (rejected_value<A>)
    return x;
  else if constexpr (normalization_ok<Axis, A>())
    return A{x.builder, build(*x.builder, x.id, axis_of<Axis, A>())};
  else
    return value<typename A::element, rejected_extents>{};
}
}  // namespace detail

// softmax<axis>(x): exp(x - max) / sum(exp(x - max)) along the axis (ONNX's Softmax).
template <int Axis = -1, tensor_value A>
constexpr auto softmax(const A& x) {
  return detail::along_axis<Axis>(x, ir::softmax);
}

// log_softmax<axis>(x): (x - max) - log(sum(exp(x - max))) along the axis (ONNX's LogSoftmax).
template <int Axis = -1, tensor_value A>
constexpr auto log_softmax(const A& x) {
  return detail::along_axis<Axis>(x, ir::log_softmax);
}

// reduce_log_sum_exp<axes...>(x[, kiln::keepdims]): log(sum(exp(x))) over the axes, without
// overflow; the axes are dropped unless kiln::keepdims is given, as the other reductions.
template <int... Axes, tensor_value A, keepdims_flag... Keep>
requires(sizeof...(Keep) <= 1) constexpr auto reduce_log_sum_exp(const A& x, Keep...) {
  using T = typename A::element;
  using E = typename A::extents_type;
  using axes = detail::reduction_axes<E::rank, Axes...>;
  constexpr bool elements_ok = floating_element<T>;
  static_assert(elements_ok, "kiln::reduce_log_sum_exp: needs floating-point elements");
  constexpr bool in_range = axes::in_range;
  static_assert(in_range, "kiln reduction: an axis is out of range for the operand's rank");
  constexpr bool distinct = axes::distinct;
  static_assert(distinct, "kiln reduction: an axis is given twice");
  if constexpr (rejected_value<A>) {
    return x;
  } else if constexpr (elements_ok && in_range && distinct) {
    constexpr bool keep = sizeof...(Keep) == 1;
    constexpr ir::attributes attrs{axes::mask, keep};
    using R = decltype(detail::extents_from<ir::reduced_dims(E::value(), attrs)>());
    return value<T, R>{x.builder, ir::reduce_log_sum_exp(*x.builder, x.id, axes::mask, keep)};
  } else {
    return value<T, rejected_extents>{};
  }
}

// layer_norm<axis>(x, scale, bias, epsilon): (x - mean) / sqrt(var + epsilon) * scale + bias over
// the axes from `axis` to the last (ONNX's LayerNormalization).
template <int Axis = -1, tensor_value A, tensor_value S, tensor_value B>
constexpr auto layer_norm(const A& x, const S& scale, const B& bias, double epsilon = 1e-5) {
  if constexpr (any_rejected<A, S, B>()) {
    return value<typename A::element, rejected_extents>{};
  } else if constexpr (detail::normalization_ok<Axis, A>() && detail::parameters_ok<A, S, B>()) {
    using R = broadcast_t<broadcast_t<typename A::extents_type, typename S::extents_type>,
                          typename B::extents_type>;
    return value<typename A::element, R>{
        x.builder,
        ir::layer_norm(*x.builder, x.id, scale.id, bias.id, detail::axis_of<Axis, A>(), epsilon)};
  } else {
    return value<typename A::element, rejected_extents>{};
  }
}

// rms_norm<axis>(x, scale, epsilon): x / sqrt(mean(x^2) + epsilon) * scale over the axes from
// `axis` to the last (ONNX's RMSNormalization).
template <int Axis = -1, tensor_value A, tensor_value S>
constexpr auto rms_norm(const A& x, const S& scale, double epsilon = 1e-5) {
  if constexpr (any_rejected<A, S>()) {
    return value<typename A::element, rejected_extents>{};
  } else if constexpr (detail::normalization_ok<Axis, A>() && detail::parameters_ok<A, S>()) {
    using R = broadcast_t<typename A::extents_type, typename S::extents_type>;
    return value<typename A::element, R>{
        x.builder, ir::rms_norm(*x.builder, x.id, scale.id, detail::axis_of<Axis, A>(), epsilon)};
  } else {
    return value<typename A::element, rejected_extents>{};
  }
}

namespace detail {
// x [N, C, ...] and per-channel parameters P... [C], checked at compile time.
template <int MinRank, class A, class... P>
constexpr bool channels_ok() {
  using E = typename A::extents_type;
  constexpr bool elements_ok = floating_element<typename A::element>;
  static_assert(elements_ok, "kiln normalization: needs floating-point elements");
  constexpr bool rank_ok = E::rank >= MinRank;
  static_assert(rank_ok, "kiln normalization: x must be [N, C, ...] (rank too small)");
  constexpr bool types_agree = (same_element_type<A, P> && ...);
  static_assert(types_agree, "kiln normalization: the parameters must have x's element type");
  constexpr bool shapes_ok = [] {
    if constexpr (!rank_ok) {
      return true;
    } else {
      constexpr std::int64_t c = E::value().dims[1];
      return ((P::extents_type::rank == 1 && (P::extents_type::value().dims[0] == c || c == dyn ||
                                              P::extents_type::value().dims[0] == dyn)) &&
              ...);
    }
  }();
  static_assert(shapes_ok, "kiln normalization: each parameter must be [C], x's axis 1");
  return elements_ok && rank_ok && types_agree && shapes_ok;
}
}  // namespace detail

// batch_norm(x, scale, bias, mean, var, epsilon): ONNX's BatchNormalization for inference,
// x [N, C, ...] and the rest [C].
template <tensor_value A, tensor_value S, tensor_value B, tensor_value M, tensor_value V>
constexpr auto batch_norm(const A& x, const S& scale, const B& bias, const M& mean, const V& var,
                          double epsilon = 1e-5) {
  if constexpr (any_rejected<A, S, B, M, V>() || !detail::channels_ok<2, A, S, B, M, V>())
    return value<typename A::element, rejected_extents>{};
  else
    return A{x.builder,
             ir::batch_norm(*x.builder, x.id, scale.id, bias.id, mean.id, var.id, epsilon)};
}

// instance_norm(x, scale, bias, epsilon): ONNX's InstanceNormalization, x [N, C, D...].
template <tensor_value A, tensor_value S, tensor_value B>
constexpr auto instance_norm(const A& x, const S& scale, const B& bias, double epsilon = 1e-5) {
  if constexpr (any_rejected<A, S, B>() || !detail::channels_ok<3, A, S, B>())
    return value<typename A::element, rejected_extents>{};
  else
    return A{x.builder, ir::instance_norm(*x.builder, x.id, scale.id, bias.id, epsilon)};
}

// group_norm<groups>(x, scale, bias, epsilon): ONNX's GroupNormalization (opset 21: per-channel
// scale and bias), x [N, C, D...] with C a multiple of groups.
template <std::int64_t Groups, tensor_value A, tensor_value S, tensor_value B>
constexpr auto group_norm(const A& x, const S& scale, const B& bias, double epsilon = 1e-5) {
  constexpr bool divides =
      A::extents_type::rank < 2 || (Groups > 0 && A::extents_type::value().dims[1] >= 0 &&
                                    A::extents_type::value().dims[1] % Groups == 0);
  static_assert(divides, "kiln::group_norm: the group count must divide x's static channels");
  if constexpr (any_rejected<A, S, B>() || !detail::channels_ok<2, A, S, B>() || !divides)
    return value<typename A::element, rejected_extents>{};
  else
    return A{x.builder, ir::group_norm(*x.builder, x.id, scale.id, bias.id, Groups, epsilon)};
}

}  // namespace kiln
