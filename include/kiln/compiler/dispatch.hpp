// Dispatch-region formation. Reductions are roots: each gets a region that evaluates its operand's
// elementwise producers in its loads (recomputing them, nothing materialized) and stores the
// reduced value. The function's other results are grouped by iteration space into elementwise
// regions. A root's value read by another region is passed through a transient buffer.
#pragma once

#include <string>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/ir/attributes.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::compiler {

struct region {
  shape space;                        // iteration space: elementwise, the dims it writes;
                                      // a reduction, its operand's dims (the reduced result's
                                      // axes keep their place with size 1)
  std::vector<std::int32_t> nodes;    // node ids it evaluates, in topological order
  std::vector<std::int32_t> args;     // function parameters it reads
  std::vector<std::int32_t> results;  // function results it writes
  std::int32_t root = -1;             // the reduction it computes (its last node), or -1
  std::vector<std::int32_t> reads;    // transients it loads (indices into plan::transients)
  std::vector<std::int32_t> writes;   // transients it stores
  std::int32_t group = 0;             // its dispatch: consecutive regions of one row group
                                      // (form_row_groups) share it
  constexpr int binding_count() const {
    return static_cast<int>(args.size() + results.size() + reads.size() + writes.size());
  }
};

struct region_options {
  int max_bindings = 0;  // buffers one dispatch may bind; 0 means no limit
};

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

// Row groups: runs of consecutive regions that a back end can run a block of rows at a time, as
// one dispatch (softmax's max, sum and divide; layer_norm's mean, variance and scaling). A group
// starts at a reduction's region; its rows are the kept indices of that root's space. A region
// joins the run when each of its elements belongs to one row and every value it loads from the
// group's own transients is that row's:
//  - a reduction over the same space and axes (a row's earlier reductions as per-row values);
//  - an elementwise region over the same space (the rows' elements, per-row values broadcast);
//  - an epilogue: an elementwise region over the kept indices themselves (the reduced values,
//    element for element: relu(reduce_sum(x))).
// Every other region is a group of its own. Sets region::group.
//
// Run-time sizes: an elementwise region over the group's space broadcast with another run-time
// size (x * scale, both [?, n]) joins too, since at nearly every call the broadcast size is the
// group's; at a call where it is not, the back end runs the group's regions one by one.
constexpr void form_row_groups(const ir::graph& g, std::vector<region>& regions,
                               const std::vector<std::int32_t>& transients) {
  std::int32_t group = -1;
  std::size_t start = 0;
  bool open = false;  // the current group takes more regions
  shape space;        // the current group's space and reduced axes
  ir::attributes axes;
  for (std::size_t k = 0; k < regions.size(); ++k) {
    region& r = regions[k];
    auto from_group = [&](std::int32_t t) {
      for (std::size_t j = start; j < k; ++j)
        for (auto w : regions[j].writes)
          if (w == t) return true;
      return false;
    };
    // A value that is one per row, broadcast over the row (keepdims form, right-aligned).
    auto per_row = [&](std::int32_t t) {
      const shape& d = g.nodes[transients[t]].dims;
      int offset = space.rank - d.rank;
      if (offset < 0) return false;
      for (int i = 0; i < space.rank; ++i) {
        std::int64_t want = ir::reduces(axes, i) ? 1 : space.dims[i];
        std::int64_t have = i < offset ? 1 : d.dims[i - offset];
        if (have != want) return false;
      }
      return true;
    };
    auto reads_all = [&](auto fits) {
      for (auto t : r.reads)
        if (from_group(t) && !fits(t)) return false;
      return true;
    };
    bool joins = false;
    if (open && r.root >= 0)
      joins = r.space == space && g.nodes[r.root].attrs.axes == axes.axes && reads_all(per_row);
    else if (open && same_rows(g, r.space, space))
      joins = reads_all(per_row);
    else if (open)
      joins = squeezed(r.space) == squeezed(ir::kept_dims(space, axes)) &&
              reads_all([&](std::int32_t t) { return g.nodes[transients[t]].dims == r.space; });
    if (!joins) {
      ++group;
      start = k;
      open = r.root >= 0;
      if (open) {
        space = r.space;
        axes = ir::attributes{g.nodes[r.root].attrs.axes};
      }
    }
    r.group = group;
  }
}

// The regions of g in execution order, and `transients`: the root nodes whose values pass
// between regions.
constexpr std::vector<region> form_dispatch_regions(const ir::graph& g,
                                                    std::vector<std::int32_t>& transients,
                                                    region_options opt = {}) {
  const auto n_nodes = g.nodes.size();
  auto is_root = [&](std::int32_t id) { return ir::is_reduction(ir::info(g.nodes[id].kind).cls); };
  // The nodes a region evaluates to produce `wanted`: everything they read, stopping at roots
  // other than the region's own (those are loaded).
  auto closure = [&](region& r, const std::vector<std::int32_t>& wanted, std::int32_t root) {
    std::vector<bool> used(n_nodes, false);
    for (auto w : wanted) used[w] = true;
    for (std::size_t i = n_nodes; i-- > 0;) {
      if (!used[i] ||
          (is_root(static_cast<std::int32_t>(i)) && static_cast<std::int32_t>(i) != root))
        continue;
      for (int k = 0; k < g.nodes[i].arity(); ++k) used[g.nodes[i].operands[k]] = true;
    }
    r.nodes.clear();
    r.args.clear();
    for (std::size_t i = 0; i < n_nodes; ++i) {
      if (!used[i]) continue;
      r.nodes.push_back(static_cast<std::int32_t>(i));
      if (g.nodes[i].kind == ir::op::input) r.args.push_back(g.nodes[i].arg);
    }
  };
  auto loads_of = [&](const region& r) {  // root values r reads, not computes
    std::vector<std::int32_t> loaded;
    for (auto id : r.nodes)
      if (is_root(id) && id != r.root) loaded.push_back(id);
    return loaded;
  };
  auto count_text = [](std::int64_t v) { return kiln::detail::to_text(v); };

  std::vector<region> regions;
  // Roots first, in topological order: a root's region may load roots before it.
  for (std::size_t id = 0; id < n_nodes; ++id) {
    auto root = static_cast<std::int32_t>(id);
    if (!is_root(root)) continue;
    region r;
    r.root = root;
    r.space = g.nodes[g.nodes[root].operands[0]].dims;
    closure(r, {root}, root);
    for (std::size_t res = 0; res < g.outputs.size(); ++res)
      if (g.outputs[res] == root) r.results.push_back(static_cast<std::int32_t>(res));
    regions.push_back(r);
  }
  std::size_t first_elementwise = regions.size();
  for (std::size_t res = 0; res < g.outputs.size(); ++res) {
    std::int32_t out = g.outputs[res];
    if (is_root(out)) continue;  // written by its root's region
    const shape& space = g.nodes[out].dims;
    region* target = nullptr;
    for (std::size_t k = first_elementwise; k < regions.size(); ++k)
      if (regions[k].space == space) target = &regions[k];
    auto wanted = [&](const region& r) {
      std::vector<std::int32_t> w;
      for (auto x : r.results) w.push_back(g.outputs[x]);
      return w;
    };
    if (target && opt.max_bindings > 0) {
      region trial = *target;
      trial.results.push_back(static_cast<std::int32_t>(res));
      closure(trial, wanted(trial), -1);
      auto bindings = trial.args.size() + trial.results.size() + loads_of(trial).size();
      if (static_cast<int>(bindings) > opt.max_bindings) target = nullptr;  // start another
    }
    if (!target) {
      regions.push_back(region{space, {}, {}, {}, -1, {}, {}});
      target = &regions.back();
    }
    target->results.push_back(static_cast<std::int32_t>(res));
    closure(*target, wanted(*target), -1);
  }
  // Each elementwise region that loads roots' values goes right after the last of those roots'
  // regions, where a row group can take it in (a softmax's divide after its sum).
  std::vector<std::int32_t> region_of_root(n_nodes, -1);
  for (std::size_t k = 0; k < first_elementwise; ++k)
    region_of_root[regions[k].root] = static_cast<std::int32_t>(k);
  std::vector<region> ordered;
  std::vector<bool> placed(regions.size(), false);
  auto place_after = [&](std::int32_t root_region) {
    for (std::size_t k = first_elementwise; k < regions.size(); ++k) {
      std::int32_t last = -1;
      for (auto loaded : loads_of(regions[k])) last = std::max(last, region_of_root[loaded]);
      if (!placed[k] && last == root_region) {
        ordered.push_back(regions[k]);
        placed[k] = true;
      }
    }
  };
  for (std::size_t k = 0; k < first_elementwise; ++k) {
    ordered.push_back(regions[k]);
    place_after(static_cast<std::int32_t>(k));
  }
  place_after(-1);  // the regions that load no root
  regions = std::move(ordered);
  // Transients: every root value another region loads, numbered in order of their roots.
  transients.clear();
  std::vector<std::int32_t> transient_of(n_nodes, -1);
  for (auto& r : regions)
    for (auto loaded : loads_of(r)) {
      if (transient_of[loaded] < 0) {
        transient_of[loaded] = static_cast<std::int32_t>(transients.size());
        transients.push_back(loaded);
      }
      r.reads.push_back(transient_of[loaded]);
    }
  for (auto& r : regions)
    if (r.root >= 0 && transient_of[r.root] >= 0) r.writes.push_back(transient_of[r.root]);
  if (opt.max_bindings > 0)
    for (std::size_t k = 0; k < regions.size(); ++k)
      if (regions[k].binding_count() > opt.max_bindings)
        throw error(errc::unsupported, "form_dispatch_regions",
                    "region " + count_text(static_cast<std::int64_t>(k)) + " binds " +
                        count_text(regions[k].binding_count()) + " buffers, more than the " +
                        count_text(opt.max_bindings) + " a dispatch can bind");
  form_row_groups(g, regions, transients);
  return regions;
}

constexpr std::vector<region> form_dispatch_regions(const ir::graph& g, region_options opt = {}) {
  std::vector<std::int32_t> transients;
  return form_dispatch_regions(g, transients, opt);
}

}  // namespace kiln::compiler
