// Ops built around the matmul contraction, for both doors: ONNX Gemm (transposed operands, alpha,
// beta and a broadcast C), which the compiler fuses as one contraction and its epilogue, and
// MatMulInteger (u8 / i8 operands less their zero points, multiplied in i32).
#pragma once

#include <cstdint>

#include "kiln/ir/builder.hpp"
#include "kiln/ir/print.hpp"

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

// ONNX MatMulInteger: (a - a_zero) x (b - b_zero) in i32, exact (while the sums fit), a and b of
// u8 or i8 each, [..., M, K] and [..., K, N] as matmul's. A zero point (< 0: none, 0) has its
// operand's type and is a scalar or, per row of a, [M] (per column of b: [N]).
constexpr std::int32_t matmul_integer(builder& b, std::int32_t a, std::int32_t bm,
                                      std::int32_t a_zero = -1, std::int32_t b_zero = -1) {
  auto widened = [&](std::int32_t v, std::int32_t zero, const char* which) {
    const node n = b.get().nodes[v];  // a copy: the casts below append nodes
    if (n.type != dtype::u8 && n.type != dtype::i8)
      throw error(errc::dtype_mismatch, "matmul_integer",
                  std::string(which) + " is " + std::string(kiln::name(n.type)) + ", not u8 or i8");
    if (zero < 0) return b.cast(v, dtype::i32);
    const node z = b.get().nodes[zero];
    const bool rows = which[0] == 'a';  // a's zero points are per row, b's per column
    const std::int64_t count = n.dims.rank < 2 && !rows ? n.dims.dims[0]
                               : rows                   ? n.dims.dims[n.dims.rank - 2]
                                                        : n.dims.dims[n.dims.rank - 1];
    // A zero point of one element is the whole operand's, however it is shaped.
    const bool single = z.dims.rank == 0 || (z.dims.rank == 1 && z.dims.dims[0] == 1);
    if (z.type != n.type || z.dims.rank > 1 ||
        (!single && (n.dims.rank < 2 || z.dims.dims[0] != count)))
      throw error(errc::shape_mismatch, "matmul_integer",
                  std::string(which) + "'s zero point must be a " +
                      std::string(kiln::name(n.type)) + " scalar or one per " +
                      (rows ? "row" : "column") + ", got " + type_text(z.type, z.dims));
    const std::int32_t wide = b.cast(v, dtype::i32);
    std::int32_t shift = b.cast(zero, dtype::i32);
    if (!single && rows) {  // [M] -> [M, 1]: per row
      const std::int64_t sizes[] = {count, 1};
      shift = b.reshape(shift, sizes);
    }
    return b.binary(op::sub, wide, shift);
  };
  const std::int32_t wide_a = widened(a, a_zero, "a");
  const std::int32_t wide_b = widened(bm, b_zero, "b");
  return b.matmul(wide_a, wide_b);
}

}  // namespace kiln::ir
