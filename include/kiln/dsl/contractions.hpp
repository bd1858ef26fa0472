// The DSL's contractions: matmul(a, b), its result's extents worked out (and mistakes reported)
// at compile time; its elementwise consumers fuse into its dispatch as the epilogue.
#pragma once

#include "kiln/dsl/views.hpp"

namespace kiln {

namespace detail {

// Whether a [..., M, K] and b [..., K, N] contract (1-D operands promoted as numpy's matmul): the
// contracted sizes static and equal, the batch dims broadcastable.
constexpr bool contracts(const shape& a, const shape& b) {
  if (a.rank == 0 || b.rank == 0) return false;
  const std::int64_t k_a = a.dims[a.rank - 1], k_b = b.dims[b.rank == 1 ? 0 : b.rank - 2];
  if (k_a < 0 || k_a != k_b) return false;
  shape batch_a, batch_b;
  for (int i = 0; i + 2 < a.rank; ++i) batch_a.dims[batch_a.rank++] = a.dims[i];
  for (int i = 0; i + 2 < b.rank; ++i) batch_b.dims[batch_b.rank++] = b.dims[i];
  return broadcastable(batch_a, batch_b) && !(a.rank == 1 && b.rank > 1 && b.dims[b.rank - 1] < 0);
}

}  // namespace detail

// matmul(a, b): ONNX's MatMul of a [..., M, K] and b [..., K, N] (floats of one type) into
// [..., M, N]; batch dims broadcast, a 1-D operand is a row (a) or a column (b) whose axis the
// result drops. `relu(matmul(x, w) + bias)` is one dispatch: the bias and relu run on each
// finished tile of the product.
template <tensor_value A, tensor_value B>
constexpr auto matmul(const A& a, const B& b) {
  using T = typename A::element;
  constexpr bool same_type = std::is_same_v<T, typename B::element>;
  static_assert(same_type, "kiln::matmul: a and b must have one element type");
  static_assert(is_floating(dtype_of<T>), "kiln::matmul: the elements must be floating-point");
  constexpr bool fits = detail::contracts(A::extents_type::value(), B::extents_type::value());
  static_assert(fits,
                "kiln::matmul: a's last size must equal b's second-to-last (b's only, for a "
                "1-D b), both static, and the batch dims must broadcast");
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
