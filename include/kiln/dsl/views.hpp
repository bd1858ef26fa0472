// The DSL's index maps: transpose, reshape, expand, slice, gather, gather_elements, concat and
// pad, with the result's extents worked out (and mistakes reported) at compile time.
#pragma once

#include <array>

#include "kiln/dsl/ops.hpp"
#include "kiln/ir/moves.hpp"
#include "kiln/ir/pooling.hpp"

namespace kiln {

namespace detail {

// The dims of view `make(builder, x)` of an operand of element T and extents E (run-time sizes
// as dyn): the builder's own rules, run during constant evaluation.
template <class T, class E, class Make>
constexpr shape view_dims(Make make) {
  ir::builder b;
  std::int32_t x = b.input(dtype_of<T>, E::value());
  shape d = b.get().nodes[make(b, x)].dims;
  for (int i = 0; i < d.rank; ++i)
    if (d.dims[i] < 0) d.dims[i] = dyn;
  return d;
}

template <class A, class Make>
constexpr auto make_view(const A& x, Make make) {
  using T = typename A::element;
  using R = decltype(extents_from<view_dims<T, typename A::extents_type>(Make{})>());
  return value<T, R>{x.builder, make(*x.builder, x.id)};
}

// The same for a map of several operands (DSL values Vs).
template <class Make, class... Vs>
constexpr shape views_dims() {
  ir::builder b;
  std::array<std::int32_t, sizeof...(Vs)> ids{
      b.input(dtype_of<typename Vs::element>, Vs::extents_type::value())...};
  shape d = b.get().nodes[Make{}(b, ids)].dims;
  for (int i = 0; i < d.rank; ++i)
    if (d.dims[i] < 0) d.dims[i] = dyn;
  return d;
}

template <class Make, class A, class... More>
constexpr auto make_views(Make, const A& x, const More&... more) {
  using T = typename A::element;
  using R = decltype(extents_from<views_dims<Make, A, More...>()>());
  std::array<std::int32_t, 1 + sizeof...(More)> ids{x.id, more.id...};
  return value<T, R>{x.builder, Make{}(*x.builder, ids)};
}

template <std::int64_t... V>
inline constexpr std::array<std::int64_t, sizeof...(V)> list_of{V...};

// The element types of gather's indices.
template <class T>
concept index_element = dtype_of<T>
== dtype::i32 || dtype_of<T> == dtype::i64;

template <int Rank, std::int64_t... Perm>
constexpr bool is_permutation() {
  if (sizeof...(Perm) != static_cast<std::size_t>(Rank)) return false;
  std::array<bool, max_rank> seen{};
  for (std::int64_t p : {Perm...}) {
    if (p < 0 || p >= Rank || seen[p]) return false;
    seen[p] = true;
  }
  return true;
}

// Whether `sizes` reshape extents `from` (the builder's rules, as a static_assert can test them).
template <shape From, std::int64_t... Sizes>
constexpr bool reshape_ok() {
  constexpr std::array<std::int64_t, sizeof...(Sizes)> sizes{Sizes...};
  std::int64_t have = 1, want = 1;
  int inferred = 0;
  for (int i = 0; i < From.rank; ++i) {
    bool copied = i < static_cast<int>(sizes.size()) && sizes[i] == 0;
    if (From.dims[i] < 0 && !copied) return false;  // a run-time size is copied in place
    if (!copied) have *= From.dims[i];
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    std::int64_t s = sizes[i];
    if (s < -1 || (s == 0 && static_cast<int>(i) >= From.rank)) return false;
    if (s == -1) ++inferred;
    if (s > 0) want *= s;
  }
  if (inferred > 1) return false;
  return inferred ? want != 0 && have % want == 0 : want == have;
}

}  // namespace detail

// transpose<perm...>(x): result axis i is x's axis perm[i] (ONNX's Transpose); transpose<>(x)
// reverses the axes. A view: regions read x in place.
template <std::int64_t... Perm, tensor_value A>
constexpr auto transpose(const A& x) {
  constexpr int rank = A::extents_type::rank;
  constexpr bool ok = sizeof...(Perm) == 0 || detail::is_permutation<rank, Perm...>();
  static_assert(ok, "kiln::transpose: perm must name each axis of the operand once");
  if constexpr (rejected_value<A> || !ok)
    return value<typename A::element, rejected_extents>{};
  else
    return detail::make_view(x, [](ir::builder& b, std::int32_t id) {
      return b.transpose(id, detail::list_of<Perm...>);
    });
}

// reshape<sizes...>(x): x's elements in row-major order as `sizes` (ONNX's Reshape: 0 copies
// x's size at that position, one -1 is inferred).
template <std::int64_t... Sizes, tensor_value A>
constexpr auto reshape(const A& x) {
  constexpr bool valid = detail::reshape_ok<A::extents_type::value(), Sizes...>();
  static_assert(valid,
                "kiln::reshape: the sizes must hold the operand's element count (0 copies a "
                "size, one -1 is inferred, a run-time size is copied by a 0 in its place)");
  if constexpr (rejected_value<A> || !valid)
    return value<typename A::element, rejected_extents>{};
  else
    return detail::make_view(x, [](ir::builder& b, std::int32_t id) {
      return b.reshape(id, detail::list_of<Sizes...>);
    });
}

// expand<sizes...>(x): x broadcast with `sizes` (ONNX's Expand).
template <std::int64_t... Sizes, tensor_value A>
constexpr auto expand(const A& x) {
  constexpr bool ok = sizeof...(Sizes) <= max_rank && ((Sizes >= 0) && ...) &&
                      broadcastable(A::extents_type::value(), shape{Sizes...});
  static_assert(ok, "kiln::expand: the sizes do not broadcast with the operand's extents");
  if constexpr (rejected_value<A> || !ok)
    return value<typename A::element, rejected_extents>{};
  else
    return detail::make_view(
        x, [](ir::builder& b, std::int32_t id) { return b.expand(id, shape{Sizes...}); });
}

// slice<axis, start, end[, step]>(x): along one axis the elements from start to end (exclusive)
// by step, negative indices from the end, clamped (ONNX's Slice). Slices of slices are one view.
template <int Axis, std::int64_t Start, std::int64_t End, std::int64_t Step = 1, tensor_value A>
constexpr auto slice(const A& x) {
  constexpr shape from = A::extents_type::value();
  constexpr bool in_range = Axis >= -from.rank && Axis < from.rank;
  static_assert(in_range, "kiln::slice: the axis is out of range for the operand's rank");
  constexpr bool step_ok = Step != 0;
  static_assert(step_ok, "kiln::slice: the step is 0");
  constexpr bool sized = !in_range || from.dims[Axis < 0 ? Axis + from.rank : Axis] >= 0;
  static_assert(sized, "kiln::slice: the sliced axis needs a static size");
  if constexpr (rejected_value<A> || !in_range || !step_ok || !sized)
    return value<typename A::element, rejected_extents>{};
  else
    return detail::make_view(x, [](ir::builder& b, std::int32_t id) {
      return b.slice(id, detail::list_of<Start>, detail::list_of<End>, detail::list_of<Axis>,
                     detail::list_of<Step>);
    });
}

// gather<axis>(data, indices): data's axis replaced by the indices' extents, each element read
// at the position the indices give (ONNX's Gather; i32 or i64 indices, negative from the end,
// clamped to the axis). gather_elements<axis>: the indices' extents, one position per element
// (ONNX's GatherElements). Views: regions read data in place.
template <int Axis, tensor_value A, tensor_value I>
constexpr auto gather(const A& data, const I& indices) {
  constexpr bool index_ok = detail::index_element<typename I::element>;
  static_assert(index_ok, "kiln::gather: the indices must be std::int32_t or std::int64_t");
  constexpr int rank = A::extents_type::rank, q = I::extents_type::rank;
  constexpr bool in_range = Axis >= -rank && Axis < rank && rank - 1 + q <= max_rank;
  static_assert(in_range, "kiln::gather: the axis is out of range for the data's rank");
  if constexpr (rejected_value<A> || rejected_value<I> || !index_ok || !in_range)
    return value<typename A::element, rejected_extents>{};
  else
    return detail::make_views(
        [](ir::builder& b, std::span<const std::int32_t> ids) {
          return b.gather(ids[0], ids[1], Axis);
        },
        data, indices);
}
template <int Axis, tensor_value A, tensor_value I>
constexpr auto gather_elements(const A& data, const I& indices) {
  constexpr bool index_ok = detail::index_element<typename I::element>;
  static_assert(index_ok,
                "kiln::gather_elements: the indices must be std::int32_t or std::int64_t");
  constexpr shape d = A::extents_type::value(), i = I::extents_type::value();
  constexpr bool fits = [&] {
    if (d.rank != i.rank || Axis < -d.rank || Axis >= d.rank) return false;
    for (int k = 0; k < d.rank; ++k)
      if (k != (Axis < 0 ? Axis + d.rank : Axis) && i.dims[k] != d.dims[k] &&
          (i.dims[k] < 0 || d.dims[k] < 0 || i.dims[k] > d.dims[k]))
        return false;
    return true;
  }();
  static_assert(fits,
                "kiln::gather_elements: the indices must have the data's rank and be no larger "
                "than it except along the axis");
  if constexpr (rejected_value<A> || rejected_value<I> || !index_ok || !fits)
    return value<typename A::element, rejected_extents>{};
  else
    return detail::make_views(
        [](ir::builder& b, std::span<const std::int32_t> ids) {
          return b.gather_elements(ids[0], ids[1], Axis);
        },
        data, indices);
}

// concat<axis>(a, b, ...): the pieces joined along the axis (ONNX's Concat), read in place by
// the consumer: one element type, the same extents but along the axis, whose sizes are static.
template <int Axis, tensor_value A, tensor_value... More>
constexpr auto concat(const A& first, const More&... more) {
  constexpr bool same_type = (std::is_same_v<typename A::element, typename More::element> && ...);
  static_assert(same_type, "kiln::concat: the pieces must have one element type");
  constexpr shape f = A::extents_type::value();
  constexpr bool fits = [&] {
    if (Axis < -f.rank || Axis >= f.rank) return false;
    const int a = Axis < 0 ? Axis + f.rank : Axis;
    for (shape s : std::array<shape, sizeof...(More)>{More::extents_type::value()...}) {
      if (s.rank != f.rank || s.dims[a] < 0) return false;
      for (int k = 0; k < f.rank; ++k)
        if (k != a && s.dims[k] != f.dims[k]) return false;
    }
    return f.dims[a] >= 0;
  }();
  static_assert(fits,
                "kiln::concat: the pieces must have the same extents except along the axis, "
                "where their sizes are static");
  if constexpr (rejected_value<A> || (rejected_value<More> || ...) || !same_type || !fits)
    return value<typename A::element, rejected_extents>{};
  else
    return detail::make_views(
        [](ir::builder& b, std::span<const std::int32_t> ids) { return ir::concat(b, ids, Axis); },
        first, more...);
}

using pad_mode = ir::pad_mode;

// pad<pads...>(x) and pad<mode, pads...>(x): ONNX's Pad; pads holds every axis's begin, then
// every end (negative: a crop), on axes of static size; the constant mode pads with 0.
template <pad_mode Mode, std::int64_t... Pads, tensor_value A>
constexpr auto pad(const A& x) {
  constexpr shape d = A::extents_type::value();
  constexpr std::array<std::int64_t, sizeof...(Pads)> p{Pads...};
  constexpr bool fits = [&] {
    if (static_cast<int>(p.size()) != 2 * d.rank) return false;
    for (int k = 0; k < d.rank; ++k) {
      std::int64_t b = p[k], e = p[k + d.rank];
      if (b == 0 && e == 0) continue;
      if (d.dims[k] < 0 || d.dims[k] + b + e < 0) return false;
      if ((b > 0 || e > 0) && d.dims[k] == 0 && Mode != pad_mode::constant) return false;
      if (Mode == pad_mode::reflect && (b >= d.dims[k] || e >= d.dims[k])) return false;
    }
    return true;
  }();
  static_assert(fits,
                "kiln::pad: pads must give every axis a begin and an end, on axes of static "
                "size, cropping no more than the axis (reflect: each pad below its size)");
  if constexpr (rejected_value<A> || !fits)
    return value<typename A::element, rejected_extents>{};
  else
    return detail::make_views(
        [](ir::builder& b, std::span<const std::int32_t> ids) {
          return ir::pad(b, ids[0], detail::list_of<Pads...>, Mode);
        },
        x);
}
template <std::int64_t... Pads, tensor_value A>
constexpr auto pad(const A& x) {
  return pad<pad_mode::constant, Pads...>(x);
}

namespace detail {

// ONNX's MaxPool (Average: AveragePool) of x [N, C, H, W] over window P.
template <pool_params P, bool Average, tensor_value A>
constexpr auto pool2d(const A& x) {
  constexpr shape d = A::extents_type::value();
  using T = typename A::element;
  constexpr bool fits = d.rank == 4 && d.dims[2] >= 0 && d.dims[3] >= 0 &&
                        (Average ? is_floating(dtype_of<T>) : !std::is_same_v<T, bool>);
  static_assert(fits || Average,
                "kiln::max_pool2d: the input must be [N, C, H, W] numbers, H and W static");
  static_assert(fits || !Average,
                "kiln::avg_pool2d: the input must be [N, C, H, W] floats, H and W static");
  if constexpr (rejected_value<A> || !fits)
    return value<T, rejected_extents>{};
  else
    return make_views(
        [](ir::builder& b, std::span<const std::int32_t> ids) {
          return ir::pool(b, ids[0], ir::window_of(P), Average);
        },
        x);
}

// ONNX's GlobalAveragePool (Average) or GlobalMaxPool of x [N, C, spatial...].
template <bool Average, tensor_value A>
constexpr auto global_pool(const A& x) {
  constexpr shape d = A::extents_type::value();
  using T = typename A::element;
  constexpr bool fits =
      d.rank >= 3 && (Average ? is_floating(dtype_of<T>) : !std::is_same_v<T, bool>);
  static_assert(fits || Average,
                "kiln::global_max_pool: the input must be [N, C, spatial...] numbers");
  static_assert(fits || !Average,
                "kiln::global_average_pool: the input must be [N, C, spatial...] floats");
  if constexpr (rejected_value<A> || !fits)
    return value<T, rejected_extents>{};
  else
    return make_views(
        [](ir::builder& b, std::span<const std::int32_t> ids) {
          return ir::global_pool(b, ids[0], Average);
        },
        x);
}

}  // namespace detail

// global_average_pool(x), global_max_pool(x): every spatial axis of x [N, C, spatial...] reduced,
// kept with size 1 (ONNX's GlobalAveragePool and GlobalMaxPool), as the graph API's methods.
template <tensor_value A>
constexpr auto global_average_pool(const A& x) {
  return detail::global_pool<true>(x);
}
template <tensor_value A>
constexpr auto global_max_pool(const A& x) {
  return detail::global_pool<false>(x);
}

// max_pool2d<params>(x) and avg_pool2d<params>(x): ONNX's MaxPool and AveragePool of x [N, C, H,
// W] (H and W static) over the window `params` (kiln::pool_params), its result's extents worked
// out at compile time; read in place by the consumer (one dispatch with its epilogue).
template <pool_params P, tensor_value A>
constexpr auto max_pool2d(const A& x) {
  return detail::pool2d<P, false>(x);
}
template <pool_params P, tensor_value A>
constexpr auto avg_pool2d(const A& x) {
  return detail::pool2d<P, true>(x);
}

}  // namespace kiln
