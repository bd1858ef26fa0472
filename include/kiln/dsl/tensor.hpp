// tensor<T, sizes...>: how a kiln::fn declares a parameter (element type and static/dyn extents).
#pragma once

#include <type_traits>

#include "kiln/core/dtype.hpp"
#include "kiln/core/shape.hpp"

namespace kiln {

// A function parameter: element type T, one size per dimension (a number or kiln::dyn).
// tensor<f32> (no sizes) is a rank-0 scalar parameter, passed as a plain value at the call.
template <element_type T, std::int64_t... Sizes>
struct tensor {
  using element = T;
  using extents_type = extents<Sizes...>;
};

namespace detail {
template <class P>
struct is_tensor_param : std::false_type {};
template <class T, std::int64_t... S>
struct is_tensor_param<tensor<T, S...>> : std::true_type {};
}  // namespace detail

template <class P>
concept tensor_parameter = detail::is_tensor_param<P>::value;

}  // namespace kiln
