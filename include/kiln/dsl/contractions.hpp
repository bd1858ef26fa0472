// The DSL's contractions: matmul(a, b) and conv2d<params>(x, w), their result's extents worked out
// (and mistakes reported) at compile time; its elementwise consumers fuse into its dispatch as the
// epilogue.
#pragma once

#include "kiln/dsl/views.hpp"
#include "kiln/ir/convolutions.hpp"

namespace kiln {

namespace detail {

// Whether a [..., M, K] and b [..., K, N] contract (1-D operands promoted as numpy's matmul): the
// contracted sizes equal where both are static (a run-time one is checked at the call), the batch
// dims broadcastable.
constexpr bool contracts(const shape& a, const shape& b) {
  if (a.rank == 0 || b.rank == 0) return false;
  const std::int64_t k_a = a.dims[a.rank - 1], k_b = b.dims[b.rank == 1 ? 0 : b.rank - 2];
  if (k_a >= 0 && k_b >= 0 && k_a != k_b) return false;
  shape batch_a, batch_b;
  for (int i = 0; i + 2 < a.rank; ++i) batch_a.dims[batch_a.rank++] = a.dims[i];
  for (int i = 0; i + 2 < b.rank; ++i) batch_b.dims[batch_b.rank++] = b.dims[i];
  return broadcastable(batch_a, batch_b) && !(a.rank == 1 && b.rank > 1 && b.dims[b.rank - 1] < 0);
}

// Whether x [N, C, H, W] and w [M, C / groups, KH, KW] (w and x's H, W static; x's C static or
// checked at the call) convolve with windows P into at least one output per axis.
constexpr bool convolves(const shape& x, const shape& w, const conv_params& p) {
  if (x.rank != 4 || w.rank != 4 || p.groups < 1) return false;
  for (int a = 1; a < 4; ++a)
    if ((a > 1 && x.dims[a] < 0) || w.dims[a] < 0) return false;
  if (w.dims[0] < 0 || (x.dims[1] >= 0 && w.dims[1] * p.groups != x.dims[1]) ||
      w.dims[0] % p.groups != 0)
    return false;
  for (int i = 0; i < 2; ++i) {
    if (p.strides[i] < 1 || p.dilations[i] < 1 || w.dims[2 + i] < 1 || p.pads[i] < 0 ||
        p.pads[i + 2] < 0)
      return false;
    if (ir::window_along(x.dims[2 + i], w.dims[2 + i], p.strides[i], p.dilations[i], p.pads[i],
                         p.pads[i + 2], p.auto_pad)
            .outputs < 1)
      return false;
  }
  return true;
}

}  // namespace detail

// conv2d<params>(x, w): ONNX's Conv of x [N, C, H, W] with w [M, C / groups, KH, KW] (floats of
// one type, all but N and C static; a run-time C is checked at the call) into [N, M, OH, OW], the
// windows `params` (kiln::conv_params); conv2d<params>(x, w, bias) adds bias [M] per output
// channel. `relu(conv2d<p>(x, w, b))` is one dispatch: the bias and relu run on each finished tile
// of the convolution.
template <conv_params P, tensor_value X, tensor_value W, tensor_value... Bias>
requires(sizeof...(Bias) <= 1) constexpr auto conv2d(const X& x, const W& w, const Bias&... bias) {
  using T = typename X::element;
  constexpr bool same_type =
      std::is_same_v<T, typename W::element> && (std::is_same_v<T, typename Bias::element> && ...);
  static_assert(same_type, "kiln::conv2d: x, w (and the bias) must have one element type");
  static_assert(is_floating(dtype_of<T>), "kiln::conv2d: the elements must be floating-point");
  constexpr bool fits =
      detail::convolves(X::extents_type::value(), W::extents_type::value(), P) &&
      ((Bias::extents_type::value() == shape{W::extents_type::value().dims[0]}) && ...);
  static_assert(fits,
                "kiln::conv2d: x must be [N, C, H, W] and w [M, C / groups, KH, KW], all but N "
                "and x's C static, the bias [M], and every spatial axis must hold a window");
  if constexpr (rejected_value<X> || rejected_value<W> || (rejected_value<Bias> || ...) ||
                !same_type || !is_floating(dtype_of<T>) || !fits)
    return value<T, rejected_extents>{};
  else
    return detail::make_views(
        [](ir::builder& bld, std::span<const std::int32_t> ids) {
          return ir::conv(bld, ids[0], ids[1], ir::window_of(P), ids.size() > 2 ? ids[2] : -1);
        },
        x, w, bias...);
}

// matmul(a, b): ONNX's MatMul of a [..., M, K] and b [..., K, N] (floats of one type) into
// [..., M, N]; a K known only at the call must be the same for both then; batch dims broadcast, a
// 1-D operand is a row (a) or a column (b) whose axis the result drops. `relu(matmul(x, w) + bias)`
// is one dispatch: the bias and relu run on each finished tile of the product.
template <tensor_value A, tensor_value B>
constexpr auto matmul(const A& a, const B& b) {
  using T = typename A::element;
  constexpr bool same_type = std::is_same_v<T, typename B::element>;
  static_assert(same_type, "kiln::matmul: a and b must have one element type");
  static_assert(is_floating(dtype_of<T>), "kiln::matmul: the elements must be floating-point");
  constexpr bool fits = detail::contracts(A::extents_type::value(), B::extents_type::value());
  static_assert(fits,
                "kiln::matmul: a's last size must equal b's second-to-last (b's only, for a "
                "1-D b) where both are static, and the batch dims must broadcast");
  if constexpr (rejected_value<A> || rejected_value<B> || !same_type || !is_floating(dtype_of<T>) ||
                !fits)
    return value<T, rejected_extents>{};
  else
    return detail::make_views(
        [](ir::builder& bld, std::span<const std::int32_t> ids) {
          return bld.matmul(ids[0], ids[1]);
        },
        a, b);
}

}  // namespace kiln
