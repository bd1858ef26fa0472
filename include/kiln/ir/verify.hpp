// The IR verifier: checks every rule of ir::graph and reports each violation in one clear line.
#pragma once

#include <bit>
#include <string>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::ir {

// A view's index map against its operand and dims: the attributes its op takes and no others,
// every element it reads inside the operand.
// indices: a gather's operand 1, else null.
template <class Report>
constexpr void verify_view(const node& n, const node& x, const node* indices, Report report) {
  if (n.type != x.type) report("result type differs from the operand's");
  const attributes& m = n.attrs;
  attributes expected{};
  if (n.kind == op::transpose) expected.perm = m.perm;
  if (n.kind == op::slice) expected.starts = m.starts, expected.steps = m.steps;
  if (is_gather(n.kind)) expected.axis = m.axis;
  if (n.kind == op::shift) {
    expected.axis = m.axis;
    expected.fold = m.fold;
    expected.begin_symbol = m.begin_symbol;
    expected.window = m.window;
    if (m.axis >= 0 && m.axis < max_rank) expected.starts[m.axis] = m.starts[m.axis];
  }
  if (m != expected) report("has attributes its op does not take");
  auto count = [](const shape& s) {  // static elements, or -1 with a run-time size
    std::int64_t c = 1;
    for (int i = 0; i < s.rank; ++i) {
      if (is_symbol(s.dims[i])) return std::int64_t{-1};
      c *= s.dims[i];
    }
    return c;
  };
  switch (n.kind) {
    case op::transpose: {
      std::uint32_t seen = 0;
      bool ok = n.dims.rank == x.dims.rank;
      for (int i = 0; ok && i < n.dims.rank; ++i) {
        int p = m.perm[i];
        ok = p >= 0 && p < x.dims.rank && !((seen >> p) & 1u) && n.dims.dims[i] == x.dims.dims[p];
        if (ok) seen |= 1u << p;
      }
      if (!ok) report("perm and dims " + to_string(n.dims) + " are not a transpose of its operand");
      break;
    }
    case op::slice: {
      bool ok = n.dims.rank == x.dims.rank;
      for (int i = 0; ok && i < n.dims.rank; ++i) {
        std::int64_t len = n.dims.dims[i], size = x.dims.dims[i];
        if (m.steps[i] == 0) ok = false;
        if (!ok || len == 0 || (m.starts[i] == 0 && m.steps[i] == 1 && len == size)) continue;
        // (In checked arithmetic: a forged module's sizes may overflow the last index.)
        std::int64_t span = 0, last = -1;
        ok = !is_symbol(size) && len > 0 && m.starts[i] >= 0 && m.starts[i] < size &&
             !__builtin_mul_overflow(len - 1, std::int64_t{m.steps[i]}, &span) &&
             !__builtin_add_overflow(std::int64_t{m.starts[i]}, span, &last) && last >= 0 &&
             last < size;
      }
      if (!ok) report("reads outside its operand " + to_string(x.dims));
      break;
    }
    case op::gather:
    case op::gather_elements: {
      const shape& i = indices->dims;
      bool ok = m.axis >= 0 && m.axis < x.dims.rank &&
                (indices->type == dtype::i32 || indices->type == dtype::i64);
      shape want = i;  // gather_elements: the indices' dims
      // The result's rank (the operand's - 1 + the indices') must fit in a shape.
      ok = ok && (n.kind != op::gather || x.dims.rank - 1 + i.rank <= max_rank);
      if (ok && n.kind == op::gather) {
        want = shape{};
        for (int k = 0; k < x.dims.rank; ++k) {
          if (k != m.axis) {
            want.dims[want.rank++] = x.dims.dims[k];
            continue;
          }
          for (int j = 0; j < i.rank && want.rank < max_rank; ++j)
            want.dims[want.rank++] = i.dims[j];
        }
      }
      if (!ok || n.dims != want)
        report("axis " + kiln::detail::to_text(m.axis) + ", dims " + to_string(n.dims) +
               " and indices " + to_string(i) + " are not a gather of its operand " +
               to_string(x.dims));
      break;
    }
    case op::shift: {
      bool ok = m.axis >= 0 && m.axis < x.dims.rank && n.dims.rank == x.dims.rank &&
                m.fold <= static_cast<std::uint8_t>(position_fold::wrap) &&
                (x.dims.dims[m.axis] != 0 || n.dims.dims[m.axis] == 0);
      for (int i = 0; ok && i < n.dims.rank; ++i)
        ok = i == m.axis || n.dims.dims[i] == x.dims.dims[i];
      if (!ok)
        report("axis " + kiln::detail::to_text(m.axis) + " and dims " + to_string(n.dims) +
               " are not a shift of its operand " + to_string(x.dims));
      break;
    }
    case op::reshape:
      if (count(n.dims) != count(x.dims) && (count(n.dims) >= 0 && count(x.dims) >= 0))
        report("dims " + to_string(n.dims) + " hold another count of elements than its operand " +
               to_string(x.dims));
      break;
    default: {  // expand: the operand broadcasts to the dims
      bool ok = n.dims.rank >= x.dims.rank;
      for (int i = 0; ok && i < x.dims.rank; ++i) {
        std::int64_t have = x.dims.dims[i], want = n.dims.dims[n.dims.rank - x.dims.rank + i];
        ok = have == want || have == 1 || is_symbol(want) || is_symbol(have);
      }
      if (!ok)
        report("operand " + to_string(x.dims) + " does not broadcast to " + to_string(n.dims));
      break;
    }
  }
}

// All violations, one message each ("%3 (add): ..."); empty when the graph is well formed.
constexpr std::vector<std::string> verify(const graph& g) {
  std::vector<std::string> problems;
  auto n_nodes = static_cast<std::int32_t>(g.nodes.size());
  auto report = [&](std::int32_t id, const std::string& what) {
    std::string where = id >= 0 ? "%" + kiln::detail::to_text(id) + " (" +
                                      std::string(name(g.nodes[id].kind)) + "): "
                                : std::string();
    problems.push_back(where + what);
  };
  // A size names symbol -1 - size where it is below zero: one of the graph's (compared in 64 bits,
  // so that no size wraps into a valid index).
  const auto n_symbols = static_cast<std::int64_t>(g.symbols.size());
  auto check_dims = [&](std::int32_t id, const shape& s) {
    if (s.rank < 0 || s.rank > max_rank) return report(id, "rank out of range");
    for (int i = 0; i < s.rank; ++i)
      if (s.dims[i] < -n_symbols)
        report(id, "size " + kiln::detail::to_text(i) + " names an unknown symbol");
  };
  for (std::size_t i = 0; i < g.inputs.size(); ++i) {
    const shape& s = g.inputs[i].dims;
    bool ok = s.rank >= 0 && s.rank <= max_rank && is_valid(g.inputs[i].type);
    for (int k = 0; ok && k < s.rank; ++k) ok = s.dims[k] >= 0 || s.dims[k] == dyn;
    for (int k = 0; ok && k < max_rank; ++k) {  // the same size as an earlier parameter's
      const std::int32_t code = g.inputs[i].same_as[k];
      if (code == 0) continue;
      const std::int32_t from = (code - 1) / max_rank, axis = (code - 1) % max_rank;
      ok = code > 0 && k < s.rank && s.dims[k] == dyn && from < static_cast<std::int32_t>(i) &&
           axis < g.inputs[from].dims.rank && g.inputs[from].dims.dims[axis] == dyn;
    }
    if (!ok)
      problems.push_back("parameter " + kiln::detail::to_text(static_cast<std::int64_t>(i)) +
                         " has an invalid type, rank or size");
  }
  for (std::int32_t id = 0; id < n_nodes; ++id) {
    const node& n = g.nodes[id];
    if (static_cast<int>(n.kind) >= op_count) {
      problems.push_back("%" + kiln::detail::to_text(id) + ": unknown op");
      continue;
    }
    const op_info& oi = info(n.kind);
    check_dims(id, n.dims);
    for (int k = 0; k < 3; ++k) {
      std::int32_t o = n.operands[k];
      if (k < oi.arity && (o < 0 || o >= id))
        report(id, "operand " + kiln::detail::to_text(k) + " (%" + kiln::detail::to_text(o) +
                       ") must name an earlier node");
      if (k >= oi.arity && o != -1) report(id, "has more operands than its arity");
    }
    bool operands_ok = true;
    for (int k = 0; k < oi.arity; ++k)
      operands_ok = operands_ok && n.operands[k] >= 0 && n.operands[k] < id;
    bool positions = false;
    for (std::int32_t p : g.positions) positions = positions || (n.kind == op::input && p == n.arg);
    if (positions) {  // i64 [s], s a run-time size that is not its own
      const std::int64_t e = n.dims.dims[0];
      if (n.type != dtype::i64 || n.dims.rank != 1 || !(e < 0 && e >= -n_symbols) ||
          (g.symbols[symbol_of(e)].kind == symbol_kind::input &&
           g.symbols[symbol_of(e)].a == n.arg))
        report(id, "positions are i64 of one run-time size of the parameters");
    } else if (n.kind == op::input) {
      if (n.arg < 0 || n.arg >= static_cast<std::int32_t>(g.inputs.size()))
        report(id, "reads parameter " + kiln::detail::to_text(n.arg) + " which is not declared");
      else if (g.inputs[n.arg].type != n.type)
        report(id, "type differs from its parameter's declaration");
      else if (const shape& d = g.inputs[n.arg].dims; n.dims.rank != d.rank)
        report(id, "rank differs from its parameter's declaration");
      else
        for (int i = 0; i < d.rank; ++i) {
          // A declared size, or (dyn) the symbol of this parameter's size i, or of the earlier
          // parameter's size it shares.
          const std::int64_t e = n.dims.dims[i];
          const std::int32_t code = g.inputs[n.arg].same_as[i];
          const std::int32_t arg = code ? (code - 1) / max_rank : n.arg,
                             axis = code ? (code - 1) % max_rank : i;
          const bool ok = d.dims[i] >= 0 ? e == d.dims[i]
                                         : e < 0 && e >= -n_symbols &&
                                               g.symbols[symbol_of(e)].kind == symbol_kind::input &&
                                               g.symbols[symbol_of(e)].a == arg &&
                                               g.symbols[symbol_of(e)].b == axis;
          if (!ok) {
            report(id, "dims " + to_string(n.dims) + " differ from its parameter's declaration");
            break;
          }
        }
    }
    if (n.kind == op::constant && (n.dims.rank != 0 || n.value.type != n.type))
      report(id, "a constant is a rank-0 scalar of its node's type");
    if (!operands_ok || oi.arity == 0) continue;
    const node& x = g.nodes[n.operands[0]];
    if (is_reduction(oi.cls)) {
      if (x.dims.rank < 32 && (n.attrs.axes >> x.dims.rank) != 0)
        report(id,
               "reduces an axis beyond its operand's rank " + kiln::detail::to_text(x.dims.rank));
      else if (n.dims != reduced_dims(x.dims, n.attrs))
        report(id, "dims " + to_string(n.dims) + " are not its operand's reduced over its axes");
      if (!accepts(oi.types, x.type))
        report(id, "does not accept element type " + std::string(name(x.type)));
      if (n.type != result_dtype(n.kind, x.type))
        report(id, "result type " + std::string(name(n.type)) + " breaks the op's type rule");
      if (oi.cls == op_class::index_reduction && std::popcount(n.attrs.axes) != 1)
        report(id, "reduces " + kiln::detail::to_text(std::popcount(n.attrs.axes)) +
                       " axes where it takes one");
      if (oi.cls == op_class::reduction && n.attrs.select_last)
        report(id, "has select_last, which only argmax and argmin take");
      continue;
    }
    if (is_convolution(n.kind)) {
      const node& w = g.nodes[n.operands[1]];
      const int r = x.dims.rank;
      const std::int64_t groups = n.attrs.groups;
      bool fits = r >= 3 && w.dims.rank == r && n.dims.rank == r && groups >= 1 &&
                  n.dims.dims[0] == x.dims.dims[0];
      if (fits && n.kind == op::conv)
        fits = w.dims.dims[1] * groups == x.dims.dims[1] && n.dims.dims[1] == w.dims.dims[0] &&
               w.dims.dims[0] % groups == 0;
      if (fits && n.kind == op::conv_transpose)
        fits = w.dims.dims[0] == x.dims.dims[1] && n.dims.dims[1] == w.dims.dims[1] * groups &&
               x.dims.dims[1] % groups == 0;
      for (int a = 2; fits && a < r; ++a) fits = n.attrs.steps[a] >= 1 && n.attrs.dilations[a] >= 1;
      if (!fits)
        report(id, "dims " + to_string(n.dims) + " are not a convolution of " + to_string(x.dims) +
                       " by " + to_string(w.dims) + " in " + kiln::detail::to_text(groups) +
                       " groups");
      if (!accepts(oi.types, x.type) || w.type != x.type || n.type != x.type)
        report(id, "types " + std::string(name(x.type)) + ", " + std::string(name(w.type)) +
                       " -> " + std::string(name(n.type)) + " break the op's type rule");
      continue;
    }
    if (oi.cls == op_class::contraction) {
      const node& y = g.nodes[n.operands[1]];
      bool fits = x.dims.rank >= 2 && y.dims.rank == x.dims.rank && n.dims.rank == x.dims.rank;
      for (int i = 0; fits && i + 2 < x.dims.rank; ++i)
        fits = x.dims.dims[i] == y.dims.dims[i] && n.dims.dims[i] == x.dims.dims[i];
      const int r = x.dims.rank;
      if (!fits || x.dims.dims[r - 1] != y.dims.dims[r - 2] ||
          n.dims.dims[r - 2] != x.dims.dims[r - 2] || n.dims.dims[r - 1] != y.dims.dims[r - 1])
        report(id, "dims " + to_string(n.dims) + " are not the contraction of " +
                       to_string(x.dims) + " and " + to_string(y.dims));
      if (!accepts(oi.types, x.type) || y.type != x.type || n.type != x.type)
        report(id, "types " + std::string(name(x.type)) + ", " + std::string(name(y.type)) +
                       " -> " + std::string(name(n.type)) + " break the op's type rule");
      if (n.attrs != attributes{}) report(id, "has attributes its op does not take");
      continue;
    }
    if (oi.cls == op_class::view) {
      const node* indices = is_gather(n.kind) ? &g.nodes[n.operands[1]] : nullptr;
      verify_view(n, x, indices, [&](const std::string& m) { report(id, m); });
      if (n.attrs.begin_symbol < -1 || n.attrs.begin_symbol >= n_symbols)
        report(id, "its begin names an unknown symbol");
      continue;
    }
    if (n.attrs != attributes{}) report(id, "has attributes its op does not take");
    int rank = 0;
    for (int k = 0; k < oi.arity; ++k) rank = std::max(rank, g.nodes[n.operands[k]].dims.rank);
    if (n.dims.rank != rank)
      report(id, "rank " + kiln::detail::to_text(n.dims.rank) +
                     " differs from the broadcast rank " + kiln::detail::to_text(rank) +
                     " of its operands");
    // Each size the broadcast of its operands' (the builder's rule): a static size is one of
    // theirs, each of the others 1 or a run-time size; a run-time size comes from theirs alone.
    for (int i = 0; n.dims.rank == rank && i < rank; ++i) {
      const std::int64_t d = n.dims.dims[i];
      bool from_operand = d == 1, fits = true;
      for (int k = 0; k < oi.arity; ++k) {
        const shape& s = g.nodes[n.operands[k]].dims;
        const int at = i - (rank - s.rank);
        const std::int64_t e = at >= 0 ? s.dims[at] : 1;
        from_operand = from_operand || e == d || (is_symbol(d) && is_symbol(e));
        fits = fits && (e == d || e == 1 || is_symbol(e));
      }
      if (!from_operand || !fits) {
        report(id, "dims " + to_string(n.dims) + " are not the broadcast of its operands'");
        break;
      }
    }
    dtype value_type = oi.cls == op_class::select ? g.nodes[n.operands[1]].type : x.type;
    if (!accepts(oi.types, value_type))
      report(id, "does not accept element type " + std::string(name(value_type)));
    switch (oi.cls) {
      case op_class::binary:
      case op_class::compare:
      case op_class::logical:
        if (oi.arity == 2 && g.nodes[n.operands[1]].type != x.type)
          report(id, "operand types differ");
        if (n.type != result_dtype(n.kind, x.type))
          report(id, "result type " + std::string(name(n.type)) + " breaks the op's type rule");
        break;
      case op_class::unary:
        if (n.type != x.type) report(id, "result type differs from the operand's");
        break;
      case op_class::test:
        if (n.type != dtype::boolean) report(id, "result type is not bool");
        break;
      case op_class::ternary:
        if (g.nodes[n.operands[1]].type != x.type || g.nodes[n.operands[2]].type != x.type)
          report(id, "operand types differ");
        if (n.type != x.type) report(id, "result type differs from the operands'");
        break;
      case op_class::select:
        if (x.type != dtype::boolean) report(id, "condition is not bool");
        if (g.nodes[n.operands[1]].type != g.nodes[n.operands[2]].type || n.type != value_type)
          report(id, "branch and result types differ");
        break;
      default:
        break;
    }
  }
  for (std::size_t k = 0; k < g.positions.size(); ++k) {
    const std::int32_t p = g.positions[k];
    bool ok = p >= 0 && p < static_cast<std::int32_t>(g.inputs.size()) &&
              g.inputs[p].type == dtype::i64 && g.inputs[p].dims == shape{dyn};
    for (const tensor_data& t : g.tensors) ok = ok && t.arg != p;
    for (std::size_t j = 0; j < k; ++j) ok = ok && g.positions[j] != p;
    if (!ok)
      problems.push_back("positions input " + kiln::detail::to_text(p) +
                         " is not a parameter of its own declared i64 [?]");
  }
  for (const tensor_data& t : g.tensors) {
    bool ok = t.arg >= 0 && t.arg < static_cast<std::int32_t>(g.inputs.size());
    if (ok) {
      const input_decl& d = g.inputs[t.arg];
      ok = d.dims.is_static() &&
           d.dims.element_count() == static_cast<std::int64_t>(t.values.size());
      for (const scalar& v : t.values) ok = ok && v.type == d.type;
    }
    if (!ok)
      problems.push_back("tensor constant of input " + kiln::detail::to_text(t.arg) +
                         " does not match its declaration");
  }
  for (const trace_point& t : g.traces)
    if (t.node < 0 || t.node >= n_nodes || t.text().empty())
      problems.push_back("trace '" + std::string(t.text()) + "' names no node");
  for (std::size_t i = 0; i < g.outputs.size(); ++i)
    if (g.outputs[i] < 0 || g.outputs[i] >= n_nodes)
      problems.push_back("output " + kiln::detail::to_text(static_cast<std::int64_t>(i)) +
                         " names no node");
  for (std::size_t i = 0; i < g.symbols.size(); ++i) {
    const symbol& s = g.symbols[i];
    const auto before = static_cast<std::int32_t>(i);  // a symbol names earlier ones only
    bool ok = s.kind == symbol_kind::input
                  ? s.a >= 0 && s.a < static_cast<std::int32_t>(g.inputs.size()) && s.b >= 0 &&
                        s.b < g.inputs[s.a].dims.rank
              : s.kind == symbol_kind::exactly ? s.a >= 0 && s.a < before && s.b >= 0
              : s.kind == symbol_kind::scaled || s.kind == symbol_kind::quotient
                  ? s.a >= 0 && s.a < before && s.b > 1
              : s.kind == symbol_kind::offset         ? s.a >= 0 && s.a < before && s.b != 0
              : s.kind == symbol_kind::floor_quotient ? s.a >= 0 && s.a < before && s.b > 1
              : s.kind == symbol_kind::minimum || s.kind == symbol_kind::maximum ||
                      s.kind == symbol_kind::at_most
                  ? s.a >= 0 && s.a < before && s.b >= 0
                  : s.a >= 0 && s.b >= 0 && s.a < before && s.b < before;
    if (!ok || s.node < -1 || s.node >= n_nodes)
      problems.push_back("symbol s" + kiln::detail::to_text(static_cast<std::int64_t>(i)) +
                         " is malformed");
  }
  for (const constraint& c : g.constraints)
    if (c.sym < 0 || c.sym >= n_symbols || c.size < 0 || c.node < -1 || c.node >= n_nodes)
      problems.push_back("a constraint of symbol s" + kiln::detail::to_text(c.sym) +
                         " is malformed");
  return problems;
}

// Throws kiln::error(invalid_graph) listing every violation.
constexpr void verify_or_throw(const graph& g) {
  auto problems = verify(g);
  if (problems.empty()) return;
  std::string all;
  for (const auto& p : problems) all += "\n  " + p;
  throw error(
      errc::invalid_graph, "verify",
      kiln::detail::to_text(static_cast<std::int64_t>(problems.size())) + " problem(s):" + all);
}

}  // namespace kiln::ir
