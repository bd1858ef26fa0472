// Ops built around the matmul contraction, for both doors: ONNX Gemm (transposed operands, alpha,
// beta and a broadcast C), which the compiler fuses as one contraction and its epilogue.
#pragma once

#include <cstdint>

#include "kiln/ir/builder.hpp"

namespace kiln::ir {

// ONNX Gemm: alpha x A' x B' + beta x C, where A' is A [M, K] (or A transposed, [K, M], with
// trans_a) and B' is B [K, N] (or transposed); C (optional: c < 0) broadcasts to [M, N].
constexpr std::int32_t gemm(builder& b, std::int32_t a, std::int32_t bm, std::int32_t c,
                            double alpha, double beta, bool trans_a, bool trans_b) {
  for (std::int32_t operand : {a, bm}) {
    const node& n = b.get().nodes[operand];
    if (n.dims.rank != 2)
      throw error(errc::shape_mismatch, "gemm",
                  (operand == a ? "A " : "B ") + to_string(n.dims) + " is not a matrix (rank 2)");
  }
  const std::int64_t swap[] = {1, 0};
  if (trans_a) a = b.transpose(a, swap);
  if (trans_b) bm = b.transpose(bm, swap);
  std::int32_t y = b.matmul(a, bm);
  const dtype t = b.get().nodes[y].type;
  if (alpha != 1) y = b.binary(op::mul, y, b.constant(scalar::computed(t, alpha)));
  if (c < 0 || beta == 0) return y;
  if (beta != 1) c = b.binary(op::mul, c, b.constant(scalar::computed(t, beta)));
  return b.binary(op::add, y, c);
}

}  // namespace kiln::ir
