// The DSL's operators and named functions, one per IR op: each checks its operands with named
// concepts (so a mistake reads as a sentence) and appends one node to the traced graph.
#pragma once

#include <bit>
#include <string_view>

#include "kiln/dsl/value.hpp"

namespace kiln {

namespace detail {

template <ir::op O, class T, class A, class B>
constexpr auto make_binary(const A& a, const B& b) {
  ir::builder* bld;
  if constexpr (tensor_value<A>)
    bld = a.builder;
  else
    bld = b.builder;
  std::int32_t id = bld->binary(O, node_of<T>(bld, a), node_of<T>(bld, b));
  using R = std::conditional_t<ir::result_dtype(O, dtype_of<T>) == dtype::boolean, bool, T>;
  return value<R, broadcast_t<extents_of<A>, extents_of<B>>>{bld, id};
}

template <ir::op O, class V>
constexpr auto make_unary(const V& a) {
  using R = std::conditional_t<ir::result_dtype(O, dtype_of<typename V::element>) == dtype::boolean,
                               bool, typename V::element>;
  return value<R, typename V::extents_type>{a.builder, a.builder->unary(O, a.id)};
}

}  // namespace detail

// A binary op: tensor with tensor, or tensor with a literal (either side).
#define KILN_DSL_BINARY(NAME, OP, ELEMENTS, ELEMENTS_TEXT)                                         \
  template <dsl_operand A, dsl_operand B>                                                          \
  requires(tensor_value<A> || tensor_value<B>) constexpr auto NAME(const A& a, const B& b) {       \
    using T = typename detail::tensor_of<A, B>::element;                                           \
    if constexpr (any_rejected<A, B>()) {                                                          \
      return value<T, rejected_extents>{};                                                         \
    } else {                                                                                       \
      constexpr bool types_agree =                                                                 \
          !(tensor_value<A> && tensor_value<B>) || same_element_type<A, B>;                        \
      static_assert(types_agree, "kiln::" #NAME                                                    \
                                 ": the operands have different element types; convert one with "  \
                                 "kiln::cast<T>(x)");                                              \
      constexpr bool literal_ok =                                                                  \
          (tensor_value<A> || literal_fits<A, T>)&&(tensor_value<B> || literal_fits<B, T>);        \
      static_assert(literal_ok, "kiln::" #NAME                                                     \
                                ": the literal does not fit the tensor's element type (a "         \
                                "floating-point literal beside an integer tensor?)");              \
      constexpr bool shapes_ok =                                                                   \
          broadcastable_extents<detail::extents_of<A>, detail::extents_of<B>>;                     \
      static_assert(shapes_ok, "kiln::" #NAME                                                      \
                               ": the static extents of the operands do not broadcast (each size " \
                               "must be equal or 1)");                                             \
      constexpr bool elements_ok = ELEMENTS<T>;                                                    \
      static_assert(elements_ok, "kiln::" #NAME ": needs " ELEMENTS_TEXT " elements");             \
      if constexpr (types_agree && literal_ok && shapes_ok && elements_ok)                         \
        return detail::make_binary<ir::op::OP, T>(a, b);                                           \
      else                                                                                         \
        return value<T, rejected_extents>{};                                                       \
    }                                                                                              \
  }

#define KILN_DSL_UNARY(NAME, OP, ELEMENTS, ELEMENTS_TEXT)                              \
  template <tensor_value A>                                                            \
  constexpr auto NAME(const A& a) {                                                    \
    if constexpr (rejected_value<A>) {                                                 \
      return a;                                                                        \
    } else {                                                                           \
      constexpr bool elements_ok = ELEMENTS<typename A::element>;                      \
      static_assert(elements_ok, "kiln::" #NAME ": needs " ELEMENTS_TEXT " elements"); \
      if constexpr (elements_ok)                                                       \
        return detail::make_unary<ir::op::OP>(a);                                      \
      else                                                                             \
        return value<typename A::element, rejected_extents>{};                         \
    }                                                                                  \
  }

// A ternary op on a tensor x and two more operands, each a tensor or a literal of x's type.
#define KILN_DSL_TERNARY(NAME, OP, ELEMENTS, ELEMENTS_TEXT)                                  \
  template <tensor_value X, dsl_operand A, dsl_operand B>                                    \
  constexpr auto NAME(const X& x, const A& a, const B& b) {                                  \
    using T = typename X::element;                                                           \
    if constexpr (any_rejected<X, A, B>()) {                                                 \
      return value<T, rejected_extents>{};                                                   \
    } else {                                                                                 \
      constexpr bool types_agree = (!tensor_value<A> || same_element_type<X, A>)&&(          \
          !tensor_value<B> || same_element_type<X, B>);                                      \
      static_assert(types_agree, "kiln::" #NAME                                              \
                                 ": the operands have different element types; convert one " \
                                 "with kiln::cast<T>(x)");                                   \
      constexpr bool literal_ok =                                                            \
          (tensor_value<A> || literal_fits<A, T>)&&(tensor_value<B> || literal_fits<B, T>);  \
      static_assert(literal_ok,                                                              \
                    "kiln::" #NAME ": the literal does not fit the tensor's element type");  \
      using EXA = broadcast_t<typename X::extents_type, detail::extents_of<A>>;              \
      constexpr bool shapes_ok =                                                             \
          broadcastable_extents<typename X::extents_type, detail::extents_of<A>> &&          \
          broadcastable_extents<EXA, detail::extents_of<B>>;                                 \
      static_assert(shapes_ok,                                                               \
                    "kiln::" #NAME ": the static extents of the operands do not broadcast"); \
      constexpr bool elements_ok = ELEMENTS<T>;                                              \
      static_assert(elements_ok, "kiln::" #NAME ": needs " ELEMENTS_TEXT " elements");       \
      if constexpr (types_agree && literal_ok && shapes_ok && elements_ok) {                 \
        ir::builder* bld = x.builder;                                                        \
        std::int32_t id = bld->ternary(ir::op::OP, x.id, detail::node_of<T>(bld, a),         \
                                       detail::node_of<T>(bld, b));                          \
        return value<T, broadcast_t<EXA, detail::extents_of<B>>>{bld, id};                   \
      } else {                                                                               \
        return value<T, rejected_extents>{};                                                 \
      }                                                                                      \
    }                                                                                        \
  }

// The optional last argument of a reduction: keep the reduced axes, with size 1.
struct keepdims_t {
  explicit keepdims_t() = default;
};
inline constexpr keepdims_t keepdims{};
template <class K>
concept keepdims_flag = std::is_same_v<K, keepdims_t>;

namespace detail {

// The axes mask of a reduction's template arguments (negative axes count from the end; none:
// every axis); `ok` is false when an axis is out of range or repeated.
template <int Rank, int... Axes>
struct reduction_axes {
  static constexpr bool in_range = ((Axes >= -Rank && Axes < Rank) && ...);
  static constexpr std::uint32_t mask = [] {
    std::uint32_t m = 0;
    if constexpr (in_range) ((m |= 1u << (Axes < 0 ? Axes + Rank : Axes)), ...);
    return sizeof...(Axes) == 0 && Rank > 0 ? static_cast<std::uint32_t>((1ull << Rank) - 1) : m;
  }();
  static constexpr bool distinct =
      !in_range || sizeof...(Axes) == 0 || std::popcount(mask) == static_cast<int>(sizeof...(Axes));
};

template <ir::op O, bool Keep, int... Axes, class A>
constexpr auto make_reduction(const A& a) {
  using T = typename A::element;
  using E = typename A::extents_type;
  using axes = reduction_axes<E::rank, Axes...>;
  constexpr bool in_range = axes::in_range;
  static_assert(in_range, "kiln reduction: an axis is out of range for the operand's rank");
  constexpr bool distinct = axes::distinct;
  static_assert(distinct, "kiln reduction: an axis is given twice");
  if constexpr (in_range && distinct) {  // (a wrong axis is one error, not two)
    constexpr ir::attributes attrs{axes::mask, Keep};
    using R = decltype(extents_from<ir::reduced_dims(E::value(), attrs)>());
    return value<T, R>{a.builder, a.builder->reduce(O, a.id, attrs.axes, Keep)};
  } else {
    return value<T, rejected_extents>{};
  }
}

}  // namespace detail

// A reduction over the template's axes (none: every axis), dropping them as numpy does, or keeping
// them with size 1 given kiln::keepdims: reduce_sum<1>(x), reduce_max<0, 2>(x, kiln::keepdims).
#define KILN_DSL_REDUCTION(NAME, OP, ELEMENTS, ELEMENTS_TEXT)                          \
  template <int... Axes, tensor_value A, keepdims_flag... Keep>                        \
  requires(sizeof...(Keep) <= 1) constexpr auto NAME(const A& a, Keep...) {            \
    if constexpr (rejected_value<A>) {                                                 \
      return a;                                                                        \
    } else {                                                                           \
      constexpr bool elements_ok = ELEMENTS<typename A::element>;                      \
      static_assert(elements_ok, "kiln::" #NAME ": needs " ELEMENTS_TEXT " elements"); \
      if constexpr (elements_ok)                                                       \
        return detail::make_reduction<ir::op::OP, sizeof...(Keep) == 1, Axes...>(a);   \
      else                                                                             \
        return value<typename A::element, rejected_extents>{};                         \
    }                                                                                  \
  }

// argmax<axis>(x), argmin<axis>(x): the i64 index of the first extreme element along the axis
// (negative: from the end), which is dropped, or kept with size 1 given kiln::keepdims.
#define KILN_DSL_INDEX_REDUCTION(NAME, OP, ELEMENTS, ELEMENTS_TEXT)                                \
  template <int Axis, tensor_value A, keepdims_flag... Keep>                                       \
  requires(sizeof...(Keep) <= 1) constexpr auto NAME(const A& a, Keep...) {                        \
    constexpr bool keep = sizeof...(Keep) == 1;                                                    \
    using E = typename A::extents_type;                                                            \
    if constexpr (rejected_value<A>) {                                                             \
      return value<std::int64_t, rejected_extents>{};                                              \
    } else {                                                                                       \
      constexpr bool elements_ok = ELEMENTS<typename A::element>;                                  \
      static_assert(elements_ok, "kiln::" #NAME ": needs " ELEMENTS_TEXT " elements");             \
      constexpr bool in_range = Axis >= -E::rank && Axis < E::rank;                                \
      static_assert(in_range, "kiln::" #NAME ": the axis is out of range for the operand's rank"); \
      if constexpr (elements_ok && in_range) {                                                     \
        constexpr int axis = Axis < 0 ? Axis + E::rank : Axis;                                     \
        constexpr bool nonempty = E::value().dims[axis] != 0;                                      \
        static_assert(nonempty, "kiln::" #NAME ": the axis has size 0 (no index to give)");        \
        constexpr ir::attributes attrs{1u << axis, keep, false};                                   \
        using R = decltype(detail::extents_from<ir::reduced_dims(E::value(), attrs)>());           \
        if constexpr (nonempty)                                                                    \
          return value<std::int64_t, R>{                                                           \
              a.builder, a.builder->index_reduce(ir::op::OP, a.id, axis, keep, false)};            \
        else                                                                                       \
          return value<std::int64_t, rejected_extents>{};                                          \
      } else {                                                                                     \
        return value<std::int64_t, rejected_extents>{};                                            \
      }                                                                                            \
    }                                                                                              \
  }

// One DSL function per row of ir/op.hpp's list, by its class and arity; leaves, select and cast
// are written by hand below.
#define KILN_DSL_ELEMENTS_any element_type, "any"
#define KILN_DSL_ELEMENTS_numeric numeric_element, "numeric (not bool)"
#define KILN_DSL_ELEMENTS_floating floating_element, "floating-point"
#define KILN_DSL_ELEMENTS_integer integer_element, "integer"
#define KILN_DSL_ELEMENTS_bool_only bool_element, "bool"
#define KILN_DSL_FORM_unary_1 KILN_DSL_UNARY
#define KILN_DSL_FORM_logical_1 KILN_DSL_UNARY
#define KILN_DSL_FORM_test_1 KILN_DSL_UNARY
#define KILN_DSL_FORM_ternary_3 KILN_DSL_TERNARY
#define KILN_DSL_FORM_binary_2 KILN_DSL_BINARY
#define KILN_DSL_FORM_compare_2 KILN_DSL_BINARY
#define KILN_DSL_FORM_logical_2 KILN_DSL_BINARY
#define KILN_DSL_FORM_leaf_0(...)
#define KILN_DSL_FORM_select_3(...)
#define KILN_DSL_FORM_cast_1(...)
#define KILN_DSL_FORM_reduction_1 KILN_DSL_REDUCTION
#define KILN_DSL_FORM_index_reduction_1 KILN_DSL_INDEX_REDUCTION
#define KILN_DSL_FORM_contraction_2(...)  // matmul: dsl/contractions.hpp
#define KILN_DSL_FORM_view_1(...)         // dsl/views.hpp: each takes its own template arguments
#define KILN_DSL_FORM_view_2(...)         // gather, gather_elements: dsl/views.hpp
#define KILN_DSL_EXPAND(FORM, ...) FORM(__VA_ARGS__)
#define KILN_DSL_OP(NAME, ARITY, CLASS, TYPES, COMMUTATIVE) \
  KILN_DSL_EXPAND(KILN_DSL_FORM_##CLASS##_##ARITY, NAME, NAME, KILN_DSL_ELEMENTS_##TYPES)
KILN_IR_OPS(KILN_DSL_OP)
#undef KILN_DSL_OP
#undef KILN_DSL_EXPAND
#undef KILN_DSL_FORM_unary_1
#undef KILN_DSL_FORM_logical_1
#undef KILN_DSL_FORM_test_1
#undef KILN_DSL_FORM_ternary_3
#undef KILN_DSL_FORM_binary_2
#undef KILN_DSL_FORM_compare_2
#undef KILN_DSL_FORM_logical_2
#undef KILN_DSL_FORM_leaf_0
#undef KILN_DSL_FORM_select_3
#undef KILN_DSL_FORM_cast_1
#undef KILN_DSL_FORM_reduction_1
#undef KILN_DSL_FORM_index_reduction_1
#undef KILN_DSL_FORM_contraction_2
#undef KILN_DSL_FORM_view_1
#undef KILN_DSL_FORM_view_2
#undef KILN_DSL_ELEMENTS_any
#undef KILN_DSL_ELEMENTS_numeric
#undef KILN_DSL_ELEMENTS_floating
#undef KILN_DSL_ELEMENTS_integer
#undef KILN_DSL_ELEMENTS_bool_only
#undef KILN_DSL_BINARY
#undef KILN_DSL_UNARY
#undef KILN_DSL_TERNARY
#undef KILN_DSL_REDUCTION
#undef KILN_DSL_INDEX_REDUCTION

// Operators: the same ops as the named functions above.
#define KILN_DSL_OPERATOR(SYMBOL, NAME)                                                     \
  template <dsl_operand A, dsl_operand B>                                                   \
  requires(tensor_value<A> || tensor_value<B>) constexpr auto operator SYMBOL(const A& a,   \
                                                                              const B& b) { \
    return NAME(a, b);                                                                      \
  }
KILN_DSL_OPERATOR(+, add)
KILN_DSL_OPERATOR(-, sub)
KILN_DSL_OPERATOR(*, mul)
KILN_DSL_OPERATOR(/, div)
KILN_DSL_OPERATOR(==, eq)
KILN_DSL_OPERATOR(!=, ne)
KILN_DSL_OPERATOR(<, lt)
KILN_DSL_OPERATOR(<=, le)
KILN_DSL_OPERATOR(>, gt)
KILN_DSL_OPERATOR(>=, ge)
KILN_DSL_OPERATOR(&&, logical_and)
KILN_DSL_OPERATOR(||, logical_or)
#undef KILN_DSL_OPERATOR

template <tensor_value A>
constexpr auto operator-(const A& a) {
  return neg(a);
}
template <tensor_value A>
constexpr auto operator!(const A& a) {
  return logical_not(a);
}

// cast<U>(x): converts elements to U (floats to integers truncate and saturate, NaN gives 0).
template <element_type U, tensor_value A>
constexpr auto cast(const A& a) {
  if constexpr (rejected_value<A>)
    return value<U, rejected_extents>{};
  else
    return value<U, typename A::extents_type>{a.builder, a.builder->cast(a.id, dtype_of<U>)};
}

// select(cond, a, b): a where cond is true, else b; a or b may be a literal.
template <tensor_value C, dsl_operand A, dsl_operand B>
requires(tensor_value<A> || tensor_value<B>) constexpr auto select(const C& cond, const A& a,
                                                                   const B& b) {
  using T = typename detail::tensor_of<A, B>::element;
  if constexpr (any_rejected<C, A, B>()) {
    return value<T, rejected_extents>{};
  } else {
    constexpr bool cond_ok = bool_element<typename C::element>;
    static_assert(cond_ok, "kiln::select: the condition must be a bool tensor (a comparison)");
    constexpr bool types_agree = !(tensor_value<A> && tensor_value<B>) || same_element_type<A, B>;
    static_assert(types_agree, "kiln::select: the two branches have different element types");
    constexpr bool literal_ok =
        (tensor_value<A> || literal_fits<A, T>)&&(tensor_value<B> || literal_fits<B, T>);
    static_assert(literal_ok, "kiln::select: the literal does not fit the tensor's element type");
    using EAB = broadcast_t<detail::extents_of<A>, detail::extents_of<B>>;
    constexpr bool shapes_ok = broadcastable_extents<typename C::extents_type, EAB>;
    static_assert(shapes_ok,
                  "kiln::select: the static extents of condition and branches do not broadcast");
    if constexpr (cond_ok && types_agree && literal_ok && shapes_ok) {
      ir::builder* bld = cond.builder;
      std::int32_t id =
          bld->select(cond.id, detail::node_of<T>(bld, a), detail::node_of<T>(bld, b));
      return value<T, broadcast_t<typename C::extents_type, EAB>>{bld, id};
    } else {
      return value<T, rejected_extents>{};
    }
  }
}

// where(cond, a, b): numpy's name for select.
template <tensor_value C, dsl_operand A, dsl_operand B>
requires(tensor_value<A> || tensor_value<B>) constexpr auto where(const C& cond, const A& a,
                                                                  const B& b) {
  return select(cond, a, b);
}

// trace("name", x): x itself, recorded under `name` at each call when tracing is on
// (kiln::set_trace_sink or KILN_TRACE=1, runtime/trace.hpp); with tracing off the function's
// plan is the one it has without the trace.
template <tensor_value A>
constexpr A trace(std::string_view name, const A& a) {
  if constexpr (!rejected_value<A>) a.builder->trace(name, a.id);
  return a;
}

}  // namespace kiln
