// The op list: every IR op described once (name, arity, class, accepted types, commutativity) in
// KILN_IR_OPS; the enum, the table, the DSL functions and the graph methods are made from it.
#pragma once

#include <cstdint>
#include <string_view>

#include "kiln/core/dtype.hpp"

// X(name, arity, class, operand types, commutative), in enum order. Adding an op: see "Adding an
// op" in docs/ARCHITECTURE.md (this row, a CPU primitive, a SPIR-V lowering, the tests' reference).
#define KILN_IR_OPS(X)                                         \
  /* leaves */                                                 \
  X(input, 0, leaf, any, false)                                \
  X(constant, 0, leaf, any, false)                             \
  /* elementwise arithmetic */                                 \
  X(add, 2, binary, numeric, true)                             \
  X(sub, 2, binary, numeric, false)                            \
  X(mul, 2, binary, numeric, true)                             \
  X(div, 2, binary, numeric, false)                            \
  X(neg, 1, unary, numeric, false)                             \
  X(abs, 1, unary, numeric, false)                             \
  X(min, 2, binary, numeric, true)                             \
  X(max, 2, binary, numeric, true)                             \
  X(pow, 2, binary, floating, false)                           \
  /* elementwise float functions */                            \
  X(exp, 1, unary, floating, false)                            \
  X(log, 1, unary, floating, false)                            \
  X(sqrt, 1, unary, floating, false)                           \
  X(rsqrt, 1, unary, floating, false)                          \
  X(tanh, 1, unary, floating, false)                           \
  X(sigmoid, 1, unary, floating, false)                        \
  X(relu, 1, unary, numeric, false)                            \
  X(erf, 1, unary, floating, false)                            \
  X(sin, 1, unary, floating, false)                            \
  X(cos, 1, unary, floating, false)                            \
  X(floor, 1, unary, floating, false)                          \
  X(ceil, 1, unary, floating, false)                           \
  X(round, 1, unary, floating, false)                          \
  X(reciprocal, 1, unary, floating, false)                     \
  X(sign, 1, unary, numeric, false)                            \
  X(softsign, 1, unary, floating, false)                       \
  X(tan, 1, unary, floating, false)                            \
  X(asin, 1, unary, floating, false)                           \
  X(acos, 1, unary, floating, false)                           \
  X(atan, 1, unary, floating, false)                           \
  X(sinh, 1, unary, floating, false)                           \
  X(cosh, 1, unary, floating, false)                           \
  X(asinh, 1, unary, floating, false)                          \
  X(acosh, 1, unary, floating, false)                          \
  X(atanh, 1, unary, floating, false)                          \
  X(exp2, 1, unary, floating, false)                           \
  X(expm1, 1, unary, floating, false)                          \
  X(log2, 1, unary, floating, false)                           \
  X(log1p, 1, unary, floating, false)                          \
  X(softplus, 1, unary, floating, false)                       \
  X(erfc, 1, unary, floating, false)                           \
  /* remainders: mod as Python (the divisor's sign), */        \
  /* fmod as C (the dividend's sign) */                        \
  X(mod, 2, binary, numeric, false)                            \
  X(fmod, 2, binary, numeric, false)                           \
  /* clip(x, lo, hi) = min(max(x, lo), hi) */                  \
  X(clip, 3, ternary, numeric, false)                          \
  /* bits of integers */                                       \
  X(bitwise_and, 2, binary, integer, true)                     \
  X(bitwise_or, 2, binary, integer, true)                      \
  X(bitwise_xor, 2, binary, integer, true)                     \
  X(bitwise_not, 1, unary, integer, false)                     \
  X(shift_left, 2, binary, integer, false)                     \
  X(shift_right, 2, binary, integer, false)                    \
  /* float classification (-> bool) */                         \
  X(isnan, 1, test, floating, false)                           \
  X(isinf, 1, test, floating, false)                           \
  /* comparisons (-> bool) */                                  \
  X(eq, 2, compare, any, true)                                 \
  X(ne, 2, compare, any, true)                                 \
  X(lt, 2, compare, numeric, false)                            \
  X(le, 2, compare, numeric, false)                            \
  X(gt, 2, compare, numeric, false)                            \
  X(ge, 2, compare, numeric, false)                            \
  /* logic on bool */                                          \
  X(logical_and, 2, logical, bool_only, true)                  \
  X(logical_or, 2, logical, bool_only, true)                   \
  X(logical_not, 1, logical, bool_only, false)                 \
  /* select(cond, a, b), and cast to the node's dtype */       \
  X(select, 3, select, any, false)                             \
  X(cast, 1, cast, any, false)                                 \
  /* reductions over the axes in the node's attributes */      \
  X(reduce_sum, 1, reduction, numeric, false)                  \
  X(reduce_mean, 1, reduction, floating, false)                \
  X(reduce_max, 1, reduction, numeric, false)                  \
  X(reduce_min, 1, reduction, numeric, false)                  \
  X(reduce_prod, 1, reduction, numeric, false)                 \
  X(reduce_l1, 1, reduction, numeric, false)                   \
  X(reduce_l2, 1, reduction, floating, false)                  \
  X(reduce_sum_square, 1, reduction, numeric, false)           \
  /* the index (i64) of the largest / smallest element */      \
  /* along one axis */                                         \
  X(argmax, 1, index_reduction, numeric, false)                \
  X(argmin, 1, index_reduction, numeric, false)                \
  /* contractions: [..., M, K] x [..., K, N] -> [..., M, N] */ \
  X(matmul, 2, contraction, numeric, false)                    \
  /* x [N, C, spatial...] with w [M, C / groups, kernel...] */ \
  /* (conv_transpose: w [C, M / groups, kernel...]) */         \
  X(conv, 2, contraction, floating, false)                     \
  X(conv_transpose, 2, contraction, floating, false)           \
  /* index maps: where each element comes from */              \
  X(transpose, 1, view, any, false)                            \
  X(reshape, 1, view, any, false)                              \
  X(expand, 1, view, any, false)                               \
  X(slice, 1, view, any, false)                                \
  /* position j along attributes::axis reads the */            \
  /* operand's fold(j - starts[axis]) (pad, concat) */         \
  X(shift, 1, view, any, false)                                \
  /* indirect index maps: positions along one axis */          \
  /* read from an index tensor (operand 1) */                  \
  X(gather, 2, view, any, false)                               \
  X(gather_elements, 2, view, any, false)

namespace kiln::ir {

enum class op : std::uint8_t {
#define KILN_IR_OP_ENUM(name, ...) name,
  KILN_IR_OPS(KILN_IR_OP_ENUM)
#undef KILN_IR_OP_ENUM
};

// How an op's operand and result types relate.
enum class op_class : std::uint8_t {
  leaf,             // input / constant
  unary,            // T -> T
  binary,           // (T, T) -> T
  ternary,          // (T, T, T) -> T
  test,             // T -> bool
  compare,          // (T, T) -> bool
  logical,          // bool... -> bool
  select,           // (bool, T, T) -> T
  cast,             // T -> U
  reduction,        // T[dims] -> T[dims without (or with size 1 at) the reduced axes]
  index_reduction,  // T[dims] -> i64[the same, over one axis]: where the extreme element is
  contraction,      // (T[..., M, K], T[..., K, N]) -> T[..., M, N]: sums of products over K,
                    // the batch dims (...) equal (the builder broadcasts them first); a
                    // convolution is one too, K running over input channels and kernel cells
  view,             // T[dims] -> T[other dims]: each element is one of the operand's, found by an
                    // index map: affine (attributes::perm, starts, steps), or along one axis
                    // from an index tensor (gather, gather_elements); no arithmetic
};

// Reductions of either kind.
constexpr bool is_reduction(op_class c) {
  return c == op_class::reduction || c == op_class::index_reduction;
}

// The roots of dispatch regions: reductions and contractions (a contraction's region computes
// its elementwise consumers as its epilogue).
constexpr bool is_root(op_class c) { return is_reduction(c) || c == op_class::contraction; }

// The contractions over sliding windows.
constexpr bool is_convolution(op o) { return o == op::conv || o == op::conv_transpose; }

// Views whose map along attributes::axis reads positions from an index tensor (operand 1).
constexpr bool is_gather(op o) { return o == op::gather || o == op::gather_elements; }
// Views whose map along attributes::axis is not affine: gathers and shifts.
constexpr bool selects_positions(op o) { return is_gather(o) || o == op::shift; }

// Which element types an op accepts.
enum class operand_types : std::uint8_t {
  any,        // every dtype (for leaves, select, cast, compare eq/ne)
  numeric,    // every dtype but bool
  floating,   // floating dtypes only
  integer,    // integer dtypes only
  bool_only,  // bool only
};

struct op_info {
  std::string_view name;
  int arity;
  op_class cls;
  operand_types types;
  bool commutative;
};

inline constexpr op_info op_table[] = {
#define KILN_IR_OP_INFO(name, arity, cls, types, commutative) \
  {#name, arity, op_class::cls, operand_types::types, commutative},
    KILN_IR_OPS(KILN_IR_OP_INFO)
#undef KILN_IR_OP_INFO
};

inline constexpr int op_count = sizeof(op_table) / sizeof(op_table[0]);

// False for a value outside the enum (an importer casting integers can make one).
constexpr bool is_valid(op o) { return static_cast<int>(o) < op_count; }
constexpr const op_info& info(op o) { return op_table[static_cast<int>(o)]; }
constexpr std::string_view name(op o) { return is_valid(o) ? info(o).name : "(not an op)"; }
constexpr bool accepts(operand_types rule, dtype t) {
  switch (rule) {
    case operand_types::any:
      return true;
    case operand_types::numeric:
      return t != dtype::boolean;
    case operand_types::floating:
      return is_floating(t);
    case operand_types::integer:
      return is_integer(t);
    case operand_types::bool_only:
      return t == dtype::boolean;
  }
  return false;
}

// The result dtype of an op whose (first value) operand has dtype t; cast's result is its target.
constexpr dtype result_dtype(op o, dtype t) {
  switch (info(o).cls) {
    case op_class::compare:
    case op_class::logical:
    case op_class::test:
      return dtype::boolean;
    case op_class::index_reduction:
      return dtype::i64;
    default:
      return t;
  }
}

}  // namespace kiln::ir
