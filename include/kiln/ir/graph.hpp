// The one graph IR: nodes in topological order, symbolic run-time sizes, inputs and outputs.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kiln/core/convert.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/ir/attributes.hpp"
#include "kiln/ir/op.hpp"

namespace kiln::ir {

// Inside the IR a size is either static (>= 0) or a symbol: -1 - symbol id. Two values have the
// same iteration space exactly when their sizes are equal, symbols included.
constexpr bool is_symbol(std::int64_t d) { return d < 0; }
constexpr std::int32_t symbol_of(std::int64_t d) { return static_cast<std::int32_t>(-1 - d); }
constexpr std::int64_t dim_of_symbol(std::int32_t s) { return -1 - static_cast<std::int64_t>(s); }

enum class symbol_kind : std::uint8_t {
  input,      // size of input `a`, axis `b`
  broadcast,  // broadcast of symbols `a` and `b` (equal, or one is 1), made by node `node`
  equal,      // symbols `a` and `b`, which must be equal (sizes node `node` contracts over)
  exactly,    // symbol `a`, which must be the static size `b` (contracted with it by `node`)
  // Sizes computed from run-time sizes (a reshape's): built by ir::builder in one canonical order,
  // so that equal products are one symbol.
  product,   // symbols `a` times `b`
  scaled,    // symbol `a` times the static size `b` (> 1)
  quotient,  // symbol `a` divided by the static size `b` (> 1), which must divide it
  // Sums (a concat's length over run-time sizes, a KV cache's past + new), in the same canonical
  // order.
  sum,     // symbols `a` plus `b`
  offset,  // symbol `a` plus the static size `b` (not 0; negative where the call's `a` allows)
  // Shape arithmetic as ONNX computes it on sizes (an exporter's Div, Min and Max).
  floor_quotient,  // symbol `a` divided by the static size `b` (> 1), rounded down
  minimum,         // the smaller of symbol `a` and the static size `b`
  maximum,         // the larger of symbol `a` and the static size `b`
  // A check: symbol `a`, which must not pass the static size `b` (a window's end in its operand).
  at_most,
};
constexpr bool is_computed_size(symbol_kind k) { return k >= symbol_kind::product; }

struct symbol {
  symbol_kind kind = symbol_kind::input;
  std::int32_t a = 0, b = 0;
  std::int32_t node = -1;
  friend constexpr bool operator==(const symbol&, const symbol&) = default;
};

// A symbol broadcast against a static size > 1: at the call the symbol must be 1 or `size`.
struct constraint {
  std::int32_t sym = 0;
  std::int64_t size = 0;
  std::int32_t node = -1;
  friend constexpr bool operator==(const constraint&, const constraint&) = default;
};

struct node {
  op kind = op::constant;
  dtype type = dtype::f32;
  shape dims;  // static sizes and symbols
  std::array<std::int32_t, 3> operands{-1, -1, -1};
  scalar value;           // constant: its value
  std::int32_t arg = -1;  // input: the function parameter it reads
  attributes attrs;       // reductions: axes, keepdims
  constexpr int arity() const { return info(kind).arity; }
};

// A function parameter: element type and declared extents (static or dyn). A dyn axis may be
// the same size as an earlier parameter's dyn axis (an ONNX model's inputs that name one
// dimension "batch"): same_as[i] = 1 + that parameter x max_rank + its axis (0: a size of its
// own), checked at the call, so that both have one symbol.
struct input_decl {
  dtype type = dtype::f32;
  shape dims;
  std::array<std::int32_t, max_rank> same_as{};
  friend constexpr bool operator==(const input_decl&, const input_decl&) = default;
};
constexpr std::int32_t same_as_code(std::int32_t arg, int axis) {
  return 1 + arg * max_rank + axis;
}

// A tensor constant of the DSL (a kiln::table in the lambda): the input it is given as, and its
// values in row-major order. The runtime supplies it as that input's data; it is never folded
// into a kernel.
struct tensor_data {
  std::int32_t arg = 0;
  std::vector<scalar> values;
};

// A value recorded at run time under a name (trace(name, v), flow.tensor.trace): not an op, so a
// function compiled with tracing off has exactly the plan it has without it. The name is held in
// place, so that a traced DSL graph stays a structural constant.
struct trace_point {
  static constexpr std::size_t max_name = 63;
  std::int32_t node = -1;
  std::array<char, max_name + 1> name{};
  constexpr std::string_view text() const { return std::string_view(name.data()); }
  friend constexpr bool operator==(const trace_point&, const trace_point&) = default;
};

struct graph {
  std::vector<input_decl> inputs;
  std::vector<node> nodes;  // operands always precede their users
  std::vector<symbol> symbols;
  std::vector<constraint> constraints;
  std::vector<std::int32_t> outputs;  // node ids, one per function result, in order
  std::vector<tensor_data> tensors;   // tensor constants, each an input (after the parameters)
  // Inputs the runtime supplies as positions 0, 1, ..., n - 1 (i64, rank 1, n a run-time size of
  // the parameters): the counting a Range of run-time length needs (builder::positions).
  std::vector<std::int32_t> positions;
  std::vector<trace_point> traces;  // values recorded when tracing is on (compiling drops them)
};

// Same op, type, operands, attributes and payload: the test CSE and the builder's deduplication
// use.
constexpr bool same_node(const node& x, const node& y) {
  return x.kind == y.kind && x.type == y.type && x.operands == y.operands && x.arg == y.arg &&
         x.dims == y.dims && x.attrs == y.attrs &&
         (x.kind != op::constant || same_bits(x.value, y.value));
}

}  // namespace kiln::ir
