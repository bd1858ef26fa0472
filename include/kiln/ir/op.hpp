// The op table: every IR op described once (name, arity, class, type rule); all layers read it.
#pragma once

#include <cstdint>
#include <string_view>

#include "kiln/core/dtype.hpp"

namespace kiln::ir {

enum class op : std::uint8_t {
  // leaves
  input,
  constant,
  // elementwise arithmetic
  add,
  sub,
  mul,
  div,
  neg,
  abs,
  min,
  max,
  pow,
  // elementwise float functions
  exp,
  log,
  sqrt,
  rsqrt,
  tanh,
  sigmoid,
  relu,
  erf,
  sin,
  cos,
  floor,
  ceil,
  round,
  // comparisons (-> bool)
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  // logic on bool
  logical_and,
  logical_or,
  logical_not,
  // select(cond, a, b) and cast to the node's dtype
  select,
  cast,
};

// How an op's operand and result types relate.
enum class op_class : std::uint8_t {
  leaf,     // input / constant
  unary,    // T -> T
  binary,   // (T, T) -> T
  compare,  // (T, T) -> bool
  logical,  // bool... -> bool
  select,   // (bool, T, T) -> T
  cast,     // T -> U
};

// Which element types an arithmetic op accepts.
enum class operand_types : std::uint8_t {
  any,        // every dtype (for leaves, select, cast, compare eq/ne)
  numeric,    // every dtype but bool
  floating,   // floating dtypes only
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
    {"input", 0, op_class::leaf, operand_types::any, false},
    {"constant", 0, op_class::leaf, operand_types::any, false},
    {"add", 2, op_class::binary, operand_types::numeric, true},
    {"sub", 2, op_class::binary, operand_types::numeric, false},
    {"mul", 2, op_class::binary, operand_types::numeric, true},
    {"div", 2, op_class::binary, operand_types::numeric, false},
    {"neg", 1, op_class::unary, operand_types::numeric, false},
    {"abs", 1, op_class::unary, operand_types::numeric, false},
    {"min", 2, op_class::binary, operand_types::numeric, true},
    {"max", 2, op_class::binary, operand_types::numeric, true},
    {"pow", 2, op_class::binary, operand_types::floating, false},
    {"exp", 1, op_class::unary, operand_types::floating, false},
    {"log", 1, op_class::unary, operand_types::floating, false},
    {"sqrt", 1, op_class::unary, operand_types::floating, false},
    {"rsqrt", 1, op_class::unary, operand_types::floating, false},
    {"tanh", 1, op_class::unary, operand_types::floating, false},
    {"sigmoid", 1, op_class::unary, operand_types::floating, false},
    {"relu", 1, op_class::unary, operand_types::numeric, false},
    {"erf", 1, op_class::unary, operand_types::floating, false},
    {"sin", 1, op_class::unary, operand_types::floating, false},
    {"cos", 1, op_class::unary, operand_types::floating, false},
    {"floor", 1, op_class::unary, operand_types::floating, false},
    {"ceil", 1, op_class::unary, operand_types::floating, false},
    {"round", 1, op_class::unary, operand_types::floating, false},
    {"eq", 2, op_class::compare, operand_types::any, true},
    {"ne", 2, op_class::compare, operand_types::any, true},
    {"lt", 2, op_class::compare, operand_types::numeric, false},
    {"le", 2, op_class::compare, operand_types::numeric, false},
    {"gt", 2, op_class::compare, operand_types::numeric, false},
    {"ge", 2, op_class::compare, operand_types::numeric, false},
    {"logical_and", 2, op_class::logical, operand_types::bool_only, true},
    {"logical_or", 2, op_class::logical, operand_types::bool_only, true},
    {"logical_not", 1, op_class::logical, operand_types::bool_only, false},
    {"select", 3, op_class::select, operand_types::any, false},
    {"cast", 1, op_class::cast, operand_types::any, false},
};

inline constexpr int op_count = sizeof(op_table) / sizeof(op_table[0]);
static_assert(op_count == static_cast<int>(op::cast) + 1, "op_table must list every op in order");

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
      return dtype::boolean;
    default:
      return t;
  }
}

}  // namespace kiln::ir
