// Builds an ir::graph op by op (validate -> infer -> append), deduplicating identical nodes.
// Used at compile time by the DSL and at run time by the graph API: the same code for both.
#pragma once

#include <algorithm>
#include <string>
#include <utility>

#include "kiln/core/broadcast.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::ir {

class builder {
 public:
  // A function parameter with element type t and declared extents (static sizes or dyn).
  constexpr std::int32_t input(dtype t, const shape& declared) {
    if (declared.rank > max_rank) fail(op::input, errc::invalid_argument, "rank above max_rank");
    std::int32_t arg = static_cast<std::int32_t>(g_.inputs.size());
    g_.inputs.push_back({t, declared});
    node n;
    n.kind = op::input;
    n.type = t;
    n.arg = arg;
    n.dims = declared;
    for (int i = 0; i < declared.rank; ++i) {
      if (declared.dims[i] >= 0) continue;
      n.dims.dims[i] = dim_of_symbol(static_cast<std::int32_t>(g_.symbols.size()));
      g_.symbols.push_back({symbol_kind::input, arg, i, -1});
    }
    g_.nodes.push_back(n);
    return static_cast<std::int32_t>(g_.nodes.size() - 1);
  }

  // A rank-0 constant of dtype v.type.
  constexpr std::int32_t constant(const scalar& v) {
    node n;
    n.kind = op::constant;
    n.type = v.type;
    n.value = v;
    return append(n);
  }

  constexpr std::int32_t unary(op o, std::int32_t a) {
    const node& x = at(a, o);
    expect_arity(o, 1);
    if (info(o).cls == op_class::cast) fail(o, errc::invalid_argument, "use builder::cast");
    check_type(o, x.type);
    node n;
    n.kind = o;
    n.type = result_dtype(o, x.type);
    n.dims = x.dims;
    n.operands = {a, -1, -1};
    return append(n);
  }

  constexpr std::int32_t binary(op o, std::int32_t a, std::int32_t b) {
    expect_arity(o, 2);
    const node& x = at(a, o);
    const node& y = at(b, o);
    if (x.type != y.type)
      fail(o, errc::dtype_mismatch,
           std::string("operand types differ: ") + std::string(name(x.type)) + " and " +
               std::string(name(y.type)) + " (insert a cast)");
    check_type(o, x.type);
    node n;
    n.kind = o;
    n.type = result_dtype(o, x.type);
    n.dims = broadcast(o, x.dims, y.dims);
    n.operands = {a, b, -1};
    if (info(o).commutative && b < a) n.operands = {b, a, -1};  // canonical order helps CSE
    return append(n);
  }

  constexpr std::int32_t select(std::int32_t cond, std::int32_t a, std::int32_t b) {
    const node& c = at(cond, op::select);
    const node& x = at(a, op::select);
    const node& y = at(b, op::select);
    if (c.type != dtype::boolean)
      fail(op::select, errc::dtype_mismatch,
           "condition must be bool, got " + std::string(name(c.type)));
    if (x.type != y.type)
      fail(op::select, errc::dtype_mismatch,
           std::string("branch types differ: ") + std::string(name(x.type)) + " and " +
               std::string(name(y.type)));
    node n;
    n.kind = op::select;
    n.type = x.type;
    n.dims = broadcast(op::select, broadcast(op::select, c.dims, x.dims), y.dims);
    n.operands = {cond, a, b};
    return append(n);
  }

  constexpr std::int32_t cast(std::int32_t a, dtype to) {
    const node& x = at(a, op::cast);
    if (x.type == to) return a;
    node n;
    n.kind = op::cast;
    n.type = to;
    n.dims = x.dims;
    n.operands = {a, -1, -1};
    return append(n);
  }

  // Marks node id as the next function result.
  constexpr void output(std::int32_t id) {
    at(id, op::input);
    g_.outputs.push_back(id);
  }

  constexpr const graph& get() const { return g_; }
  constexpr graph take() { return std::move(g_); }

 private:
  // Reached during constant evaluation, the throw is the compile error. (The condition only keeps
  // C++20's "a constexpr function must be able to yield a constant" rule satisfied.)
  static constexpr void fail(op o, errc code, const std::string& message) {
    if (!message.empty()) throw error(code, std::string(name(o)), message);
  }

  constexpr const node& at(std::int32_t id, op o) const {
    if (id < 0 || id >= static_cast<std::int32_t>(g_.nodes.size()))
      fail(o, errc::invalid_argument, "operand %" + detail::to_text(id) + " is not in the graph");
    return g_.nodes[id];
  }

  static constexpr void expect_arity(op o, int n) {
    if (info(o).arity != n)
      fail(o, errc::invalid_argument,
           "takes " + detail::to_text(info(o).arity) + " operands, not " + detail::to_text(n));
  }

  static constexpr void check_type(op o, dtype t) {
    if (!accepts(info(o).types, t))
      fail(o, errc::dtype_mismatch, "does not accept element type " + std::string(name(t)));
  }

  constexpr std::int32_t append(const node& n) {
    for (std::size_t i = 0; i < g_.nodes.size(); ++i)
      if (same_node(g_.nodes[i], n)) return static_cast<std::int32_t>(i);
    g_.nodes.push_back(n);
    return static_cast<std::int32_t>(g_.nodes.size() - 1);
  }

  // The input sizes a symbol joins, sorted.
  constexpr std::vector<std::int32_t> leaves(std::int32_t sym) const {
    const symbol& s = g_.symbols[sym];
    if (s.kind == symbol_kind::input) return {sym};
    auto l = leaves(s.a);
    for (auto x : leaves(s.b)) l.push_back(x);
    std::sort(l.begin(), l.end());
    l.erase(std::unique(l.begin(), l.end()), l.end());
    return l;
  }

  constexpr std::int64_t broadcast_dim(op o, std::int64_t a, std::int64_t b) {
    if (a == b) return a;
    if (a == 1) return b;
    if (b == 1) return a;
    auto next = static_cast<std::int32_t>(g_.nodes.size());
    if (is_symbol(a) && is_symbol(b)) {
      // A broadcast symbol stands for the set of input sizes it joins: broadcasting x = bcast(a, b)
      // with b again is x, and bcast(bcast(a, b), c) is bcast(a, bcast(b, c)).
      auto joined = leaves(symbol_of(a));
      for (auto l : leaves(symbol_of(b))) joined.push_back(l);
      std::sort(joined.begin(), joined.end());
      joined.erase(std::unique(joined.begin(), joined.end()), joined.end());
      for (std::size_t i = 0; i < g_.symbols.size(); ++i)
        if (leaves(static_cast<std::int32_t>(i)) == joined)
          return dim_of_symbol(static_cast<std::int32_t>(i));
      g_.symbols.push_back({symbol_kind::broadcast, std::min(symbol_of(a), symbol_of(b)),
                            std::max(symbol_of(a), symbol_of(b)), next});
      return dim_of_symbol(static_cast<std::int32_t>(g_.symbols.size() - 1));
    }
    if (is_symbol(a) || is_symbol(b)) {
      constraint c{symbol_of(is_symbol(a) ? a : b), is_symbol(a) ? b : a, next};
      bool known = false;
      for (const auto& k : g_.constraints) known = known || (k.sym == c.sym && k.size == c.size);
      if (!known) g_.constraints.push_back(c);
      return c.size;
    }
    fail(o, errc::shape_mismatch,
         "sizes " + detail::to_text(a) + " and " + detail::to_text(b) + " do not broadcast");
    return 0;
  }

  constexpr shape broadcast(op o, const shape& a, const shape& b) {
    auto static_only = [](shape s) {
      for (int i = 0; i < s.rank; ++i) s.dims[i] = s.dims[i] < 0 ? dyn : s.dims[i];
      return s;
    };
    if (!broadcastable(static_only(a), static_only(b)))
      fail(o, errc::shape_mismatch,
           "shapes " + to_string(a) + " and " + to_string(b) + " do not broadcast");
    shape r;
    r.rank = std::max(a.rank, b.rank);
    for (int i = 0; i < r.rank; ++i) {
      int ia = a.rank - r.rank + i, ib = b.rank - r.rank + i;
      r.dims[i] = broadcast_dim(o, ia >= 0 ? a.dims[ia] : 1, ib >= 0 ? b.dims[ib] : 1);
    }
    return r;
  }

  graph g_;
};

}  // namespace kiln::ir
