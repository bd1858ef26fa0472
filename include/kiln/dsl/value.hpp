// value<T, extents>: the DSL's handle to a graph node while a kiln::fn lambda is traced, and the
// named concepts that make compile-time mistakes read as sentences.
#pragma once

#include <array>
#include <type_traits>
#include <utility>
#include <vector>

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

// A tensor constant written in a kiln::fn lambda from literals, row-major:
// kiln::table<float, 2, 3>{{1, 2, 3, 4, 5, 6}}. Beside a tensor it is read like an argument
// (fused, broadcast), never folded into a kernel; the function keeps its data, uploaded once per
// device.
template <class T, std::int64_t... Sizes>
struct table {
  static_assert(std::is_arithmetic_v<T> && element_type<T>,
                "kiln::table: the elements are float, double, a kiln integer type or bool");
  static_assert(((Sizes >= 0) && ...), "kiln::table: the sizes are static (>= 0)");
  using element = T;
  using extents_type = extents<Sizes...>;
  std::array<T, (static_cast<std::size_t>(Sizes) * ... * std::size_t{1})> values;
};

namespace detail {
template <class X>
struct is_table : std::false_type {};
template <class T, std::int64_t... S>
struct is_table<table<T, S...>> : std::true_type {};
}  // namespace detail

template <class X>
concept tensor_literal = detail::is_table<std::remove_cvref_t<X>>::value;

template <class X>
concept dsl_operand = tensor_value<X> || scalar_literal<X> || tensor_literal<X>;

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

namespace detail {
template <class S, class T>
constexpr bool table_fits() {
  if constexpr (tensor_literal<S>)
    return std::is_same_v<typename std::remove_cvref_t<S>::element, T>;
  else
    return false;
}
}  // namespace detail

// A literal that can stand beside a tensor of element type T without losing meaning: any number
// beside a floating tensor, an integer beside an integer tensor, a bool beside a bool tensor, a
// kiln::table of element type T.
template <class S, class T>
concept literal_fits = detail::table_fits<S, T>() ||
    (scalar_literal<S> &&
     ((is_floating(dtype_of<T>) && !std::is_same_v<std::remove_cvref_t<S>, bool>) ||
      (is_integer(dtype_of<T>) && std::is_integral_v<std::remove_cvref_t<S>> &&
       !std::is_same_v<std::remove_cvref_t<S>, bool>) ||
      (dtype_of<T> == dtype::boolean && std::is_same_v<std::remove_cvref_t<S>, bool>)));

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

// The node id of an operand: a tensor's own, a new tensor constant for a kiln::table, or a new
// constant for a literal.
template <class T, class X>
constexpr std::int32_t node_of(ir::builder* b, const X& x) {
  if constexpr (tensor_value<X>) {
    return x.id;
  } else if constexpr (tensor_literal<X>) {
    constexpr dtype t = dtype_of<T>;
    std::vector<scalar> values;
    for (const auto& v : x.values) {
      if constexpr (std::is_floating_point_v<T>)
        values.push_back(scalar::of_float(t, static_cast<double>(v)));
      else
        values.push_back(scalar::of_integer(t, static_cast<std::int64_t>(v)));
    }
    return b->tensor_constant(t, X::extents_type::value(), values);
  } else {
    return literal_node<T>(b, x);
  }
}

template <class X>
using extents_of =
    typename std::conditional_t<tensor_value<X> || tensor_literal<X>, std::remove_cvref_t<X>,
                                value<float, extents<>>>::extents_type;

}  // namespace detail
}  // namespace kiln
