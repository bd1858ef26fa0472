// Turns what a caller passes (std::vector, std::span, contiguous ranges, kiln::view, plain numbers
// for scalar parameters) into tensor views, and into(...) into the set of outputs.
#pragma once

#include <ranges>
#include <tuple>
#include <type_traits>

#include "kiln/core/view.hpp"
#include "kiln/runtime/buffer.hpp"

namespace kiln {

namespace detail {
template <class V>
struct is_view : std::false_type {};
template <class T>
struct is_view<tensor_view<T>> : std::true_type {};
template <class B>
struct is_buffer : std::false_type {};
template <class T>
struct is_buffer<buffer<T>> : std::true_type {};
}  // namespace detail

// A kiln::buffer<T>: data already on a device.
template <class A>
concept device_buffer = detail::is_buffer<std::remove_cvref_t<A>>::value;

// Something a call accepts as tensor data.
template <class A>
concept tensor_argument = detail::is_view<std::remove_cvref_t<A>>::value || device_buffer<A> ||
                          (std::ranges::contiguous_range<A>&& std::ranges::sized_range<A>&&
                               element_type<std::ranges::range_value_t<A>>) ||
                          (std::is_arithmetic_v<std::remove_cvref_t<A>>);

namespace detail {
template <class D, class A>
struct argument_element {
  using type = std::ranges::range_value_t<A>;
};
template <class T, class A>
struct argument_element<tensor_view<T>, A> {
  using type = std::remove_cv_t<T>;
};
template <class T, class A>
struct argument_element<buffer<T>, A> {
  using type = T;
};
template <class D, class A>
requires std::is_arithmetic_v<D>
struct argument_element<D, A> {
  using type = D;
};
}  // namespace detail

// The element type of a call argument.
template <class A>
using argument_element_t =
    typename detail::argument_element<std::remove_cvref_t<A>, std::remove_reference_t<A>>::type;

template <class A>
auto as_view(A& a) {
  using D = std::remove_cvref_t<A>;
  if constexpr (detail::is_view<D>::value || device_buffer<D>) {
    return D(a);
  } else if constexpr (std::is_arithmetic_v<D>) {
    return tensor_view<std::remove_reference_t<A>>{&a, shape{}, false};
  } else {
    auto* p = std::ranges::data(a);
    return tensor_view<std::remove_pointer_t<decltype(p)>>{
        p, shape{static_cast<std::int64_t>(std::ranges::size(a))}, true};
  }
}

// What an into(...) entry holds: its element type, and whether it can be written.
template <class V>
struct output_traits;
template <class T>
struct output_traits<tensor_view<T>> {
  using element = std::remove_const_t<T>;
  static constexpr bool writable = !std::is_const_v<T>;
};
template <class T>
struct output_traits<buffer<T>> {
  using element = T;
  static constexpr bool writable = true;
};

// The outputs of a call, written in place: f(x, y, into(out)).
template <class... Views>
struct outputs {
  std::tuple<Views...> views;
};

template <class... Outs>
requires(tensor_argument<Outs>&&...) auto into(Outs&&... outs) {
  return outputs<decltype(as_view(outs))...>{{as_view(outs)...}};
}

namespace detail {
template <class O>
struct is_outputs : std::false_type {};
template <class... V>
struct is_outputs<outputs<V...>> : std::true_type {};
}  // namespace detail

template <class O>
concept output_set = detail::is_outputs<std::remove_cvref_t<O>>::value;

}  // namespace kiln
