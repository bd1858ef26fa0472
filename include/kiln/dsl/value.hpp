// value<T, extents>: the DSL's handle to a graph node while a kiln::fn lambda is traced, and the
// named concepts that make compile-time mistakes read as sentences.
#pragma once

#include <type_traits>
#include <utility>

#include "kiln/core/broadcast.hpp"
#include "kiln/ir/builder.hpp"

namespace kiln {

// A node of the graph being traced: its type carries only element type and extents.
template <element_type T, class Extents>
struct value {
  using element = T;
  using extents_type = Extents;
  ir::builder* builder = nullptr;
  std::int32_t id = -1;
};

namespace detail {
template <class V>
struct is_value : std::false_type {};
template <class T, class E>
struct is_value<value<T, E>> : std::true_type {};

template <shape S>
constexpr auto extents_from() {
  return []<std::size_t... I>(std::index_sequence<I...>) { return extents<S.dims[I]...>{}; }
  (std::make_index_sequence<S.rank>{});
}
}  // namespace detail

template <class V>
concept tensor_value = detail::is_value<std::remove_cvref_t<V>>::value;

// The extents of a value whose op was rejected by a static_assert: every later op on it gives
// another such value without a message, and kiln::fn does not trace a lambda that returns one, so
// one mistake is one compile error.
struct rejected_extents {
  static constexpr int rank = 0;
  static constexpr shape value() { return {}; }
};

template <class V>
concept rejected_value = tensor_value<V> &&
    std::is_same_v<typename std::remove_cvref_t<V>::extents_type, rejected_extents>;

// Whether either operand of an op is a rejected value (numbers never are).
template <class... X>
constexpr bool any_rejected() {
  return ((tensor_value<X> && rejected_value<X>) || ...);
}

// A C++ number written beside a tensor (0.5f, 2, true): it becomes a constant of the tensor's type.
template <class S>
concept scalar_literal = std::is_arithmetic_v<std::remove_cvref_t<S>>;

template <class X>
concept dsl_operand = tensor_value<X> || scalar_literal<X>;

// Two tensors whose element types are the same (kiln never converts implicitly: use cast<T>).
template <class A, class B>
concept same_element_type = std::is_same_v < typename std::remove_cvref_t<A>::element,
typename std::remove_cvref_t<B>::element > ;

// Two extents that broadcast under numpy's rules (static sizes equal, or one of them 1).
template <class EA, class EB>
concept broadcastable_extents = broadcastable(EA::value(), EB::value());

template <class EA, class EB>
requires broadcastable_extents<EA, EB>
using broadcast_t = decltype(detail::extents_from<*broadcast_shapes(EA::value(), EB::value())>());

// A literal that can stand beside a tensor of element type T without losing meaning: any number
// beside a floating tensor, an integer beside an integer tensor, a bool beside a bool tensor.
template <class S, class T>
concept literal_fits = (is_floating(dtype_of<T>) &&
                        !std::is_same_v<std::remove_cvref_t<S>, bool>) ||
                       (is_integer(dtype_of<T>) && std::is_integral_v<std::remove_cvref_t<S>> &&
                        !std::is_same_v<std::remove_cvref_t<S>, bool>) ||
                       (dtype_of<T> == dtype::boolean &&
                        std::is_same_v<std::remove_cvref_t<S>, bool>);

template <class T>
concept floating_element = is_floating(dtype_of<T>);

template <class T>
concept numeric_element = dtype_of<T>
!= dtype::boolean;

template <class T>
concept integer_element = is_integer(dtype_of<T>);

template <class T>
concept bool_element = dtype_of<T>
== dtype::boolean;

namespace detail {

// The tensor among two operands (at least one is); its element type types the literal.
template <class A, class B>
using tensor_of =
    std::conditional_t<tensor_value<A>, std::remove_cvref_t<A>, std::remove_cvref_t<B>>;

template <class T, class S>
constexpr std::int32_t literal_node(ir::builder* b, S s) {
  constexpr dtype t = dtype_of<T>;
  if constexpr (std::is_floating_point_v<S> || is_floating(t))
    return b->constant(scalar::computed(t, static_cast<double>(s)));
  else
    return b->constant(scalar::of_integer(t, static_cast<std::int64_t>(s)));
}

// The node id of an operand: a tensor's own, or a new constant for a literal.
template <class T, class X>
constexpr std::int32_t node_of(ir::builder* b, const X& x) {
  if constexpr (tensor_value<X>)
    return x.id;
  else
    return literal_node<T>(b, x);
}

template <class X>
using extents_of = typename std::conditional_t<tensor_value<X>, std::remove_cvref_t<X>,
                                               value<float, extents<>>>::extents_type;

}  // namespace detail
}  // namespace kiln
