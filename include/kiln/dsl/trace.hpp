// Tracing: runs the user's lambda during constant evaluation on placeholder values and compiles
// the graph it builds; the frozen plan is the result.
#pragma once

#include <array>
#include <tuple>

#include "kiln/compiler/compile.hpp"
#include "kiln/compiler/freeze.hpp"
#include "kiln/dsl/activations.hpp"
#include "kiln/dsl/contractions.hpp"
#include "kiln/dsl/normalizations.hpp"
#include "kiln/dsl/ops.hpp"
#include "kiln/dsl/tensor.hpp"
#include "kiln/dsl/views.hpp"

namespace kiln {

template <tensor_parameter P>
using parameter_value_t = value<typename P::element, typename P::extents_type>;

namespace detail {
template <class R>
struct is_value_tuple : std::false_type {};
template <class... V>
struct is_value_tuple<std::tuple<V...>> : std::bool_constant<(tensor_value<V> && ...)> {};
}  // namespace detail

// What a kiln::fn lambda returns: one tensor expression, or a std::tuple of them.
template <class R>
concept function_result = tensor_value<R> || detail::is_value_tuple<R>::value;

// A lambda kiln::fn can trace: no captures, one argument per declared parameter.
template <class F, class... P>
concept traceable = std::is_empty_v<F> && std::is_default_constructible_v<F> &&
    std::is_invocable_v<const F&, parameter_value_t<P>...>;

namespace detail {

// The graph the lambda builds, before any pass (the plan's input; also what dumps print first).
template <class F, class... P>
constexpr ir::graph trace_graph() {
  ir::builder b;
  std::array<std::int32_t, sizeof...(P)> ids{};
  std::size_t k = 0;
  ((ids[k++] = b.input(dtype_of<typename P::element>, P::extents_type::value())), ...);
  auto result = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return F{}(parameter_value_t<P>{&b, ids[I]}...);
  }
  (std::index_sequence_for<P...>{});
  if constexpr (tensor_value<decltype(result)>)
    b.output(result.id);
  else
    std::apply([&](const auto&... r) { (b.output(r.id), ...); }, result);
  return b.take();
}

template <class F, class... P>
constexpr compiler::plan trace() {
  return compiler::compile(trace_graph<F, P...>());
}

template <class F, class... P>
inline constexpr compiler::plan_sizes plan_sizes_v = compiler::sizes_of(trace<F, P...>());

template <class F, class... P>
inline constexpr auto frozen_plan_v = compiler::freeze<plan_sizes_v<F, P...>>(trace<F, P...>());

// The traced graph itself, frozen the same way (as a plan with no regions): thawing it at run time
// for dumps costs a copy, where tracing again would compile the whole builder into every file
// that calls a kiln::fn (a sixth of a 30-op file's compile time).
template <class F, class... P>
constexpr compiler::plan traced_plan() {
  compiler::plan p;
  p.graph = trace_graph<F, P...>();
  return p;
}
template <class F, class... P>
inline constexpr auto frozen_trace_v =
    compiler::freeze<compiler::sizes_of(traced_plan<F, P...>())>(traced_plan<F, P...>());

}  // namespace detail
}  // namespace kiln
