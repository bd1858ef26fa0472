// A dispatch region as the plan records it (region formation, compiler/dispatch.hpp, makes them),
// and the facts about regions the back ends ask too: which views broadcasting already gives, and
// which spaces share a row group's rows. Data only: the runtime includes it without the passes.
#pragma once

#include <vector>

#include "kiln/core/shape.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::compiler {

struct region {
  shape space;                           // iteration space: elementwise, the dims it writes;
                                         // a reduction, its operand's dims (the reduced result's
                                         // axes keep their place with size 1)
  std::vector<std::int32_t> nodes;       // node ids it evaluates, in topological order
  std::vector<std::int32_t> args;        // function parameters it reads
  std::vector<std::int32_t> results;     // function results it writes
  std::int32_t root = -1;                // the reduction it computes (its last node), or -1
  std::int32_t contraction = -1;         // the contraction (matmul) it computes, or -1: the
                                         // region is then elementwise over the contraction's
                                         // result (its epilogue), the contraction's value
                                         // loaded from the finished tile
  std::vector<std::int32_t> reads;       // transients it loads (indices into plan::transients)
  std::vector<std::int32_t> writes;      // transients it stores
  std::vector<std::int32_t> views;       // views it loads (indices into plan::views): a value read
                                         // through an index map, in place
  std::vector<std::int32_t> view_reads;  // transients it reads through views, as bases or
                                         // indices (they order the regions and keep the
                                         // transient alive)
  std::vector<std::int32_t> indices;     // input slots (plan.hpp) of the index tensors its
                                         // views' gathers read whole
  std::int32_t group = 0;                // its dispatch: consecutive regions of one row group
                                         // (form_row_groups) share it
  constexpr int binding_count() const {
    return static_cast<int>(args.size() + results.size() + reads.size() + writes.size() +
                            views.size() + indices.size());
  }
};

constexpr bool is_view(const ir::graph& g, std::int32_t id) {
  return ir::info(g.nodes[id].kind).cls == ir::op_class::view;
}

// A view that numpy broadcasting of its operand to its dims already gives: computed as the
// operand's value, per element of the region's space.
constexpr bool computed_view(const ir::graph& g, const ir::node& n) {
  if (ir::selects_positions(n.kind)) return false;
  const shape& x = g.nodes[n.operands[0]].dims;
  if (n.kind == ir::op::expand || x.rank == 0) return true;
  if (n.kind != ir::op::reshape) return false;
  auto strip = [](const shape& s) {  // without leading 1s
    int lead = 0;
    while (lead < s.rank && s.dims[lead] == 1) ++lead;
    shape r;
    for (int i = lead; i < s.rank; ++i) r.dims[r.rank++] = s.dims[i];
    return r;
  };
  return strip(n.dims) == strip(x);
}

// Whether run-time size `d` is symbol `target`, or a broadcast with it (equal to it at the call,
// unless the target is 1 there).
constexpr bool joins_symbol(const ir::graph& g, std::int64_t d, std::int64_t target) {
  if (d == target) return true;
  if (!ir::is_symbol(d) || !ir::is_symbol(target)) return false;
  const ir::symbol& s = g.symbols[ir::symbol_of(d)];
  return s.kind == ir::symbol_kind::broadcast && (joins_symbol(g, ir::dim_of_symbol(s.a), target) ||
                                                  joins_symbol(g, ir::dim_of_symbol(s.b), target));
}

// Whether `space` has the rows of group space `rows`: equal, up to broadcasts with its symbols.
constexpr bool same_rows(const ir::graph& g, const shape& space, const shape& rows) {
  if (space.rank != rows.rank) return false;
  for (int i = 0; i < space.rank; ++i)
    if (!joins_symbol(g, space.dims[i], rows.dims[i])) return false;
  return true;
}

}  // namespace kiln::compiler
