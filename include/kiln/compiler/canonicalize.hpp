// Canonicalization: dead-code removal, constant folding, algebraic identities (a quotient by a
// power of two as a product) and CSE, in one rebuild of the graph through ir::builder (whose
// deduplication is the CSE).
#pragma once

#include <bit>

#include "kiln/compiler/fold.hpp"
#include "kiln/ir/builder.hpp"

namespace kiln::compiler {

namespace detail {

constexpr bool is_constant(const ir::node& n, double v) {
  return n.kind == ir::op::constant &&
         (is_floating(n.type) ? n.value.f == v : static_cast<double>(n.value.i) == v);
}

// x*1, x/1, x-0 (and x+0 for integers, where it is exact) give x when x already has the result's
// shape; neg(neg x) and not(not x) give x.
constexpr std::int32_t identity_of(const ir::graph& g, const ir::node& n) {
  using ir::op;
  auto [a, b, c] = n.operands;
  if (n.arity() == 1) {
    const ir::node& x = g.nodes[a];
    if ((n.kind == op::neg && x.kind == op::neg) ||
        (n.kind == op::logical_not && x.kind == op::logical_not))
      return x.operands[0];
    return -1;
  }
  if (n.arity() != 2) return -1;
  const ir::node& x = g.nodes[a];
  const ir::node& y = g.nodes[b];
  auto keeps_shape = [&](const ir::node& v) { return v.dims == n.dims && v.type == n.type; };
  bool integer = is_integer(n.type);
  switch (n.kind) {
    case op::mul:
      if (is_constant(y, 1) && keeps_shape(x)) return a;
      if (is_constant(x, 1) && keeps_shape(y)) return b;
      return -1;
    case op::div:
      return is_constant(y, 1) && keeps_shape(x) ? a : -1;
    case op::sub:
      return is_constant(y, 0) && keeps_shape(x) ? a : -1;
    case op::add:
      if (!integer) return -1;
      if (is_constant(y, 0) && keeps_shape(x)) return a;
      if (is_constant(x, 0) && keeps_shape(y)) return b;
      return -1;
    default:
      return -1;
  }
}

// The reciprocal r of divisor y (a node of g) where x / y is x * r exactly (exact_reciprocal),
// else 0: y a float constant or a tensor constant of the DSL of one element.
constexpr double exact_reciprocal(const ir::graph& g, const ir::node& y) {
  if (y.kind == ir::op::constant) return kiln::exact_reciprocal(y.type, y.value.f);
  if (y.kind != ir::op::input) return 0;
  for (const ir::tensor_data& d : g.tensors)
    if (d.arg == y.arg && d.values.size() == 1)
      return kiln::exact_reciprocal(y.type, d.values[0].f);
  return 0;
}

// The old graph's `exactly` symbol of run-time size `have` against static `size`, or -1: an
// expand from `have` to `size` is then the builder's with_size for a contraction (a run-time size
// checked to be `size`), not a broadcast (which would allow 1).
constexpr std::int32_t exactly_symbol(const ir::graph& g, std::int64_t have, std::int64_t size) {
  if (!ir::is_symbol(have) || ir::is_symbol(size)) return -1;
  for (std::size_t i = 0; i < g.symbols.size(); ++i) {
    const ir::symbol& s = g.symbols[i];
    if (s.kind == ir::symbol_kind::exactly && s.a == ir::symbol_of(have) && s.b == size)
      return static_cast<std::int32_t>(i);
  }
  return -1;
}

// A contraction's size check re-made by a rebuild: the new symbol and the old contraction, whose
// new node it names once that is rebuilt.
struct contraction_check {
  std::int32_t symbol, old_node;
};

// Run-time size d of the old graph in the rebuilt one (map: old node -> new node): an input's size
// is that input's again; a size computed from run-time sizes is computed again from its operands;
// any other is the size a rebuilt node has where its old node had d.
constexpr std::int64_t rebuilt_size(ir::builder& b, const ir::graph& g,
                                    const std::vector<std::int32_t>& map, std::int64_t d) {
  if (!ir::is_symbol(d)) return d;
  const ir::symbol& s = g.symbols[static_cast<std::size_t>(ir::symbol_of(d))];
  switch (s.kind) {
    case ir::symbol_kind::product:
      return b.size_product(rebuilt_size(b, g, map, ir::dim_of_symbol(s.a)),
                            rebuilt_size(b, g, map, ir::dim_of_symbol(s.b)));
    case ir::symbol_kind::scaled:
      return b.size_product(rebuilt_size(b, g, map, ir::dim_of_symbol(s.a)), s.b);
    case ir::symbol_kind::quotient:
      return b.size_quotient(rebuilt_size(b, g, map, ir::dim_of_symbol(s.a)), s.b);
    case ir::symbol_kind::sum:
      return b.size_sum(rebuilt_size(b, g, map, ir::dim_of_symbol(s.a)),
                        rebuilt_size(b, g, map, ir::dim_of_symbol(s.b)));
    case ir::symbol_kind::offset:
      return b.size_plus(rebuilt_size(b, g, map, ir::dim_of_symbol(s.a)), s.b);
    case ir::symbol_kind::floor_quotient:
      return b.size_floor_quotient(rebuilt_size(b, g, map, ir::dim_of_symbol(s.a)), s.b);
    case ir::symbol_kind::minimum:
    case ir::symbol_kind::maximum:
      return b.size_bound(s.kind, rebuilt_size(b, g, map, ir::dim_of_symbol(s.a)), s.b);
    case ir::symbol_kind::at_most:
      return b.size_at_most(rebuilt_size(b, g, map, ir::dim_of_symbol(s.a)), s.b, -1);
    default:
      break;
  }
  for (std::size_t i = 0; i < map.size(); ++i) {
    if (map[i] < 0) continue;
    const shape& was = g.nodes[i].dims;
    for (int a = 0; a < was.rank; ++a)
      if (was.dims[a] == d) return b.get().nodes[static_cast<std::size_t>(map[i])].dims.dims[a];
  }
  throw error(errc::invalid_graph, "canonicalize",
              "run-time size s" + std::to_string(ir::symbol_of(d)) + " has no rebuilt node");
}

// A view re-added over its rebuilt operand: run-time sizes are renumbered by a rebuild, so the
// dims take them from the new operand (a view's own sizes are static, or a reshape's sizes
// computed from run-time sizes, computed again).
constexpr std::int32_t rebuild_view(ir::builder& b, const ir::graph& g, const ir::node& old,
                                    std::int32_t operand, std::vector<contraction_check>& checks,
                                    const std::vector<std::int32_t>& map) {
  const shape& x = b.get().nodes[operand].dims;
  shape d = old.dims;
  if (old.kind == ir::op::expand) {  // again through the broadcast, which keeps its constraints
    const shape& from = g.nodes[old.operands[0]].dims;
    std::int32_t v = operand;
    for (int i = 0; i < d.rank; ++i) {
      const int j = i - (d.rank - from.rank);  // the operand's axis (it may have fewer)
      const std::int32_t check = j >= 0 ? exactly_symbol(g, from.dims[j], d.dims[i]) : -1;
      if (check >= 0) {  // a contracted size checked at the call: kept, and its check
        const auto k = b.contracted(ir::op::expand, b.get().nodes[v].dims.dims[j], d.dims[i]);
        checks.push_back({k.symbol, g.symbols[static_cast<std::size_t>(check)].node});
        v = b.with_size(v, j, d.dims[i]);
        d.dims[i] = 1;
      } else if (ir::is_symbol(d.dims[i])) {
        // The operand's own run-time size comes with it; a size the operand does not have there
        // (an expand to extents) is computed anew.
        d.dims[i] = j >= 0 && ir::is_symbol(from.dims[j]) ? 1 : rebuilt_size(b, g, map, d.dims[i]);
      }
    }
    return b.expand(v, d);
  }
  for (int i = 0; i < d.rank; ++i) {
    if (!ir::is_symbol(d.dims[i])) continue;
    switch (old.kind) {
      case ir::op::transpose:
        d.dims[i] = x.dims[old.attrs.perm[i]];
        break;
      case ir::op::reshape:  // a copy at the same position, or a size computed anew
        d.dims[i] = i < x.rank && g.nodes[old.operands[0]].dims.dims[i] == old.dims.dims[i]
                        ? x.dims[i]
                        : rebuilt_size(b, g, map, old.dims.dims[i]);
        break;
      case ir::op::shift:  // its axis's size is its own (a concat's sum of sizes)
        d.dims[i] = i == old.attrs.axis ? rebuilt_size(b, g, map, old.dims.dims[i]) : x.dims[i];
        break;
      default:  // slice keeps the axis whole
        d.dims[i] = x.dims[i];
        break;
    }
  }
  ir::attributes m = old.attrs;
  if (m.begin_symbol >= 0) {  // renumbered too
    const std::int64_t begin = rebuilt_size(b, g, map, ir::dim_of_symbol(m.begin_symbol));
    if (ir::is_symbol(begin)) {
      m.begin_symbol = ir::symbol_of(begin);
    } else {
      m.begin_symbol = -1;
      m.starts[m.axis] = static_cast<std::int32_t>(m.starts[m.axis] + (m.window ? -begin : begin));
    }
  }
  return b.view(old.kind, operand, m, d);
}

// conv(x * s, w) as conv(x, w * s) where s is constant along x's batch and spatial axes (one
// value per channel or one in all: a squeeze-excite's scale), the convolution has one group and
// no window reads padding: the scaling then runs over the weights' few elements instead of over
// the activation, which a pointwise convolution would otherwise read back after a pass of its
// own. s broadcasts along w's input channels as it did along x's (the same axis), so no view of
// it is needed (a view of a computed s would be a region of its own). Only where the product
// x * s has no other reader (`uses`: the old graph's readers per node) and w has fewer elements
// than x. Why no padding: a padding cell is zero, and 0 * (w * s) is NaN where s is infinite,
// while the scaled input's padding gives 0. Returns the new convolution, or -1.
constexpr std::int32_t scaled_weights_conv(ir::builder& b, const ir::graph& g, const ir::node& conv,
                                           const std::vector<std::int32_t>& map,
                                           const std::vector<int>& uses) {
  if (conv.kind != ir::op::conv || !is_floating(conv.type) || conv.attrs.groups != 1) return -1;
  const ir::node& x = g.nodes[conv.operands[0]];
  const ir::node& w = g.nodes[conv.operands[1]];
  if (x.kind != ir::op::mul || uses[conv.operands[0]] != 1) return -1;
  const int rank = x.dims.rank;
  if (!x.dims.is_static() || !w.dims.is_static() || !conv.dims.is_static() ||
      w.dims.element_count() >= x.dims.element_count())
    return -1;
  for (int a = 2; a < rank; ++a) {  // every window inside the input
    const std::int64_t last = (conv.dims.dims[a] - 1) * conv.attrs.steps[a] + conv.attrs.starts[a] +
                              (w.dims.dims[a] - 1) * conv.attrs.dilations[a];
    if (conv.attrs.starts[a] < 0 || last >= x.dims.dims[a]) return -1;
  }
  for (int k = 0; k < 2; ++k) {
    const std::int32_t full = x.operands[k], scale = x.operands[1 - k];
    const shape& s = g.nodes[scale].dims;
    if (!(g.nodes[full].dims == x.dims)) continue;
    bool per_channel = s.rank <= rank;
    for (int j = 0; j < s.rank && per_channel; ++j)
      per_channel = s.dims[j] == 1 || (j + rank - s.rank == 1 && s.dims[j] == x.dims.dims[1]);
    if (!per_channel) continue;
    return b.convolution(conv.kind, map[full],
                         b.binary(ir::op::mul, map[conv.operands[1]], map[scale]), conv.attrs,
                         conv.dims);
  }
  return -1;
}

// One rebuild: drops dead nodes; with `simplify`, also folds and applies identities. Those can
// leave nodes dead, which the next rebuild drops.
constexpr ir::graph rebuild(const ir::graph& g, bool simplify) {
  auto n = g.nodes.size();
  // Liveness: the outputs and everything they read. Inputs stay: they are the signature.
  std::vector<bool> live(n, false);
  for (auto id : g.outputs) live[id] = true;
  for (std::size_t i = n; i-- > 0;) {
    if (!live[i]) continue;
    for (int k = 0; k < g.nodes[i].arity(); ++k) live[g.nodes[i].operands[k]] = true;
  }
  // Readers per node among the live ones, the outputs counted (for scaled_weights_conv, which
  // only a simplifying rebuild applies).
  std::vector<int> uses(simplify ? n : 0, 0);
  if (simplify) {
    for (auto id : g.outputs) ++uses[id];
    for (std::size_t i = 0; i < n; ++i)
      if (live[i])
        for (int k = 0; k < g.nodes[i].arity(); ++k) ++uses[g.nodes[i].operands[k]];
  }
  ir::builder b;
  std::vector<std::int32_t> map(n, -1);
  std::vector<contraction_check> checks;
  // Inputs first, in their order (a graph may make them between other nodes: tensor constants).
  std::vector<std::int32_t> input_node(g.inputs.size(), -1);
  for (std::size_t i = 0; i < n; ++i)
    if (g.nodes[i].kind == ir::op::input) input_node[g.nodes[i].arg] = static_cast<std::int32_t>(i);
  for (std::size_t a = 0; a < g.inputs.size(); ++a) {
    if (input_node[a] < 0) continue;
    bool positions = false;  // (their size is a parameter's, rebuilt before them)
    for (std::int32_t p : g.positions) positions = positions || p == static_cast<std::int32_t>(a);
    map[input_node[a]] =
        positions ? b.positions(rebuilt_size(b, g, map, g.nodes[input_node[a]].dims.dims[0]))
                  : b.input(g.inputs[a].type, g.inputs[a].dims, g.inputs[a].same_as);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const ir::node& old = g.nodes[i];
    if (old.kind == ir::op::input) continue;
    if (!live[i]) continue;
    if (old.kind == ir::op::constant) {
      map[i] = b.constant(old.value);
      continue;
    }
    std::int32_t ops[3] = {-1, -1, -1};
    bool all_constant = true;
    scalar values[3];
    for (int k = 0; k < old.arity(); ++k) {
      ops[k] = map[old.operands[k]];
      const ir::node& x = b.get().nodes[ops[k]];
      all_constant = all_constant && x.kind == ir::op::constant;
      values[k] = x.value;
    }
    auto cls = ir::info(old.kind).cls;
    bool elementwise = !ir::is_root(cls) && cls != ir::op_class::view;
    if (simplify && all_constant && elementwise) {
      if (auto folded = fold(old.kind, old.type, values)) {
        map[i] = b.constant(*folded);
        continue;
      }
    }
    std::int32_t id = -1;
    switch (ir::info(old.kind).cls) {
      case ir::op_class::cast:
        id = b.cast(ops[0], old.type);
        break;
      case ir::op_class::select:
        id = b.select(ops[0], ops[1], ops[2]);
        break;
      case ir::op_class::ternary:
        id = b.ternary(old.kind, ops[0], ops[1], ops[2]);
        break;
      case ir::op_class::reduction:
        id = b.reduce(old.kind, ops[0], old.attrs.axes, old.attrs.keepdims);
        break;
      case ir::op_class::index_reduction:
        id = b.index_reduce(old.kind, ops[0], std::countr_zero(old.attrs.axes), old.attrs.keepdims,
                            old.attrs.select_last);
        break;
      case ir::op_class::contraction:
        if (simplify && (id = scaled_weights_conv(b, g, old, map, uses)) >= 0) break;
        id = ir::is_convolution(old.kind)
                 ? b.convolution(old.kind, ops[0], ops[1], old.attrs, old.dims)
                 : b.matmul(ops[0], ops[1]);
        break;
      case ir::op_class::view:
        if (old.kind == ir::op::gather)
          id = b.gather(ops[0], ops[1], old.attrs.axis);
        else if (old.kind == ir::op::gather_elements)
          id = b.gather_elements(ops[0], ops[1], old.attrs.axis);
        else
          id = rebuild_view(b, g, old, ops[0], checks, map);
        break;
      default:
        if (const double r = simplify && old.kind == ir::op::div
                                 ? exact_reciprocal(g, g.nodes[old.operands[1]])
                                 : 0;
            r != 0 && b.get().nodes[ops[0]].dims == old.dims &&
            b.get().nodes[ops[0]].type == old.type) {
          id = b.binary(ir::op::mul, ops[0], b.constant(scalar{old.type, r, 0}));
          break;
        }
        id = old.arity() == 1 ? b.unary(old.kind, ops[0]) : b.binary(old.kind, ops[0], ops[1]);
    }
    std::int32_t same = simplify ? identity_of(b.get(), b.get().nodes[id]) : -1;
    map[i] = same >= 0 ? same : id;
  }
  for (const contraction_check& c : checks)
    if (c.old_node >= 0 && map[static_cast<std::size_t>(c.old_node)] >= 0)
      b.set_contraction(c.symbol, map[static_cast<std::size_t>(c.old_node)]);
  for (auto id : g.outputs) b.output(map[id]);
  b.keep_tensors(g.tensors);
  return b.take();
}

}  // namespace detail

constexpr ir::graph canonicalize(const ir::graph& g) {
  return detail::rebuild(detail::rebuild(g, true), false);
}

}  // namespace kiln::compiler
