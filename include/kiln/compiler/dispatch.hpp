// Dispatch-region formation. Reductions are roots: each gets a region that evaluates its operand's
// elementwise producers in its loads (recomputing them, nothing materialized) and stores the
// reduced value. The function's other results are grouped by iteration space into elementwise
// regions. A root's value read by another region is passed through a transient buffer; so is a
// row value (an elementwise value over a root's result that a larger op reads), computed once.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/compiler/region.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/attributes.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::compiler {

struct region_options {
  int max_bindings = 0;  // buffers one dispatch may bind; 0 means no limit
};

// Row groups: runs of consecutive regions that a back end can run a block of rows at a time, as
// one dispatch (softmax's max, sum and divide; layer_norm's mean, variance and scaling). A group
// starts at a reduction's region; its rows are the kept indices of that root's space. A region
// joins the run when each of its elements belongs to one row and every value it loads from the
// group's own transients is that row's (per-row values broadcast, or a row-local value's
// elements at the same place):
//  - a reduction over the same space and axes (a row's earlier reductions as per-row values);
//  - an elementwise region over the same space (the rows' elements);
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
    // A row-local value (row_local_values): the row's own elements, read where they were written.
    auto per_row_or_local = [&](std::int32_t t) {
      return per_row(t) || g.nodes[transients[t]].dims == space;
    };
    auto reads_all = [&](auto fits) {
      for (auto t : r.reads)
        if (from_group(t) && !fits(t)) return false;
      return true;
    };
    bool joins = false;
    // A value of the group read through a view may be another row's.
    for (auto t : r.view_reads) open = open && !from_group(t);
    // A contraction's region is a dispatch of its own: its tiles, not rows, are its unit.
    if (r.contraction >= 0)
      joins = false;
    else if (open && r.root >= 0)
      joins = r.space == space && g.nodes[r.root].attrs.axes == axes.axes &&
              reads_all(per_row_or_local);
    else if (open && same_rows(g, r.space, space))
      joins = reads_all(per_row_or_local);
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

// Ops whose value costs far more to recompute than to keep in cache (a polynomial and a range
// reduction per element, or more).
constexpr bool costly(ir::op k) {
  using ir::op;
  constexpr op ops[] = {op::pow,   op::exp,  op::log,   op::tanh,     op::sigmoid, op::erf,
                        op::sin,   op::cos,  op::tan,   op::asin,     op::acos,    op::atan,
                        op::sinh,  op::cosh, op::asinh, op::acosh,    op::atanh,   op::exp2,
                        op::expm1, op::log2, op::log1p, op::softplus, op::erfc};
  for (op o : ops)
    if (o == k) return true;
  return false;
}

// Row-local values: the operand of a reduction over trailing axes that other elementwise nodes
// over the same dims read too, that costs a transcendental function per element to recompute,
// and that reads an earlier reduction over the same axes (so all of them land in that
// reduction's row group): softmax's exp(x - max), read by the sum and by the divide. Each is
// materialized, computed once by a region of the group, and passed to the regions after it
// through a transient that lives a block of rows at a time (compiler::row_local): on the CPU in a
// block-sized buffer, never in the arena. Without this, each of those regions evaluates it again.
constexpr std::vector<std::int32_t> row_local_values(const ir::graph& g,
                                                     const std::vector<bool>& materialized) {
  const auto n_nodes = g.nodes.size();
  auto is_reduction = [&](std::int32_t id) {
    return ir::is_reduction(ir::info(g.nodes[id].kind).cls);
  };
  std::vector<std::vector<std::int32_t>> readers(n_nodes);
  for (std::size_t i = 0; i < n_nodes; ++i)
    for (int k = 0; k < g.nodes[i].arity(); ++k)
      readers[g.nodes[i].operands[k]].push_back(static_cast<std::int32_t>(i));
  std::vector<std::int32_t> found;
  for (std::size_t i = 0; i < n_nodes; ++i) {
    const ir::node& n = g.nodes[i];
    auto cls = ir::info(n.kind).cls;
    if (materialized[i] || ir::is_root(cls) || cls == ir::op_class::leaf ||
        cls == ir::op_class::view || readers[i].size() < 2)
      continue;
    std::int32_t root = -1;
    bool elementwise_readers = true;
    for (auto r : readers[i]) {
      const ir::node& reader = g.nodes[r];
      if (is_reduction(r) && ir::trailing_axes(reader.attrs.axes, n.dims.rank))
        root = r;
      else if (ir::is_root(ir::info(reader.kind).cls) ||
               ir::info(reader.kind).cls == ir::op_class::view || !(reader.dims == n.dims))
        elementwise_readers = false;
    }
    if (root < 0 || !elementwise_readers) continue;
    // Its producers up to loaded values: one costly op, and an earlier reduction of the rows.
    bool costs = false, in_rows = false;
    std::vector<bool> used(n_nodes, false);
    used[i] = true;
    for (std::size_t j = i + 1; j-- > 0;) {
      if (!used[j]) continue;
      const ir::node& m = g.nodes[j];
      if (j != i && (materialized[j] || is_view(g, static_cast<std::int32_t>(j)))) {
        in_rows = in_rows || (is_reduction(static_cast<std::int32_t>(j)) &&
                              m.attrs.axes == g.nodes[root].attrs.axes &&
                              g.nodes[m.operands[0]].dims == n.dims);
        continue;
      }
      costs = costs || costly(m.kind);
      for (int k = 0; k < m.arity(); ++k) used[m.operands[k]] = true;
    }
    if (costs && in_rows) found.push_back(static_cast<std::int32_t>(i));
  }
  return found;
}

// The regions of g in execution order, and `transients`: the values passed between regions
// (roots' results and materialized row values).
//
// Row values: an elementwise node over a root's result, with its dims (rsqrt(var + eps) in
// layer_norm, over [rows, 1]), is computed once per row by a region of its own when a node over
// more elements reads it, instead of once per element by that node's region. In a row group
// that region is an epilogue of the root.
//
// Views: one that numpy broadcasting already gives (expand; a reshape that only adds or drops
// leading 1s; any view of a single element) is computed as its operand's value. Every other view
// is a load: the region reads the view's base (a parameter or a materialized value) in place,
// through the index maps of the views between them, composed at the call (`views`). A computed
// value under a view is materialized, and so is a view under a reshape (a reshape maps the
// row-major order of what it reads, which only a base has).
constexpr std::vector<region> form_dispatch_regions(const ir::graph& g,
                                                    std::vector<std::int32_t>& transients,
                                                    std::vector<std::int32_t>& views,
                                                    region_options opt = {}) {
  const auto n_nodes = g.nodes.size();
  auto is_root = [&](std::int32_t id) { return ir::is_reduction(ir::info(g.nodes[id].kind).cls); };
  std::vector<bool> row_value(n_nodes, false), materialized(n_nodes, false);
  for (std::size_t i = 0; i < n_nodes; ++i) {
    const ir::node& n = g.nodes[i];
    auto cls = ir::info(n.kind).cls;
    if (is_root(static_cast<std::int32_t>(i))) {
      materialized[i] = true;
      continue;
    }
    if (cls == ir::op_class::leaf || cls == ir::op_class::view) continue;
    for (int k = 0; k < n.arity(); ++k) {
      std::int32_t o = n.operands[k];
      if ((is_root(o) || row_value[o]) && g.nodes[o].dims == n.dims) row_value[i] = true;
    }
  }
  for (std::size_t i = 0; i < n_nodes; ++i)
    for (int k = 0; k < g.nodes[i].arity(); ++k) {
      std::int32_t o = g.nodes[i].operands[k];
      if (row_value[o] && !(g.nodes[o].dims == g.nodes[i].dims)) materialized[o] = true;
    }
  for (auto id : row_local_values(g, materialized)) materialized[id] = true;
  // Indices are read whole, by position: a parameter's or a materialized value's.
  for (std::size_t i = 0; i < n_nodes; ++i)
    if (ir::is_gather(g.nodes[i].kind) && g.nodes[g.nodes[i].operands[1]].kind != ir::op::input)
      materialized[g.nodes[i].operands[1]] = true;
  std::vector<bool> load_view(n_nodes, false);
  for (std::size_t i = 0; i < n_nodes; ++i)
    load_view[i] = is_view(g, static_cast<std::int32_t>(i)) && !computed_view(g, g.nodes[i]);
  // A contraction's operands are read in place by its packing, with strides: a parameter, a
  // materialized value, or an affine view of one (a transposed weight, a broadcast batch). A
  // computed operand, or one read through positions (a gather, a pad), is materialized.
  auto is_contraction = [&](std::size_t id) {
    return ir::info(g.nodes[id].kind).cls == ir::op_class::contraction;
  };
  for (std::size_t i = 0; i < n_nodes; ++i) {
    if (!is_contraction(i)) continue;
    for (int k = 0; k < 2; ++k) {
      std::int32_t o = g.nodes[i].operands[k];
      bool affine = is_view(g, o);
      for (std::int32_t v = o; affine && is_view(g, v); v = g.nodes[v].operands[0])
        affine = !ir::selects_positions(g.nodes[v].kind);
      if (affine)
        load_view[o] = true;
      else if (g.nodes[o].kind != ir::op::input)
        materialized[o] = true;
    }
  }
  // Each load view's chain of views down to its base, materializing what a chain cannot map:
  // a computed value, a view under a reshape, and a gather along an axis that an index tensor
  // lower in the chain already selects (positions of positions). Until nothing changes: a value
  // materialized for one chain shortens others.
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 0; i < n_nodes; ++i) {
      if (!load_view[i]) continue;
      std::vector<std::int32_t> chain{static_cast<std::int32_t>(i)};
      for (std::int32_t o = g.nodes[i].operands[0];
           g.nodes[o].kind != ir::op::input && !materialized[o]; o = g.nodes[o].operands[0]) {
        if (!is_view(g, o) ||
            (g.nodes[chain.back()].kind == ir::op::reshape && g.nodes[o].kind != ir::op::reshape)) {
          materialized[o] = changed = true;
          break;
        }
        chain.push_back(o);
      }
      std::uint32_t selected = 0;  // the axes an index tensor selects along, bottom up
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        const ir::node& n = g.nodes[*it];
        const int from_rank = g.nodes[n.operands[0]].dims.rank;
        std::uint32_t next = 0;
        if (ir::selects_positions(n.kind) && ((selected >> n.attrs.axis) & 1u)) {
          materialized[n.operands[0]] = changed = true;
          break;
        }
        for (int a = 0; a < n.dims.rank; ++a) {
          int from = a;  // the operand axis result axis a reads, or -1 (an index axis)
          if (n.kind == ir::op::transpose) from = n.attrs.perm[a];
          if (n.kind == ir::op::expand) from = a - (n.dims.rank - from_rank);
          if (n.kind == ir::op::gather) {
            const int q = g.nodes[n.operands[1]].dims.rank;
            from = a < n.attrs.axis ? a : a < n.attrs.axis + q ? -1 : a - q + 1;
          }
          bool index_axis = n.kind == ir::op::gather_elements ||
                            (n.kind == ir::op::gather && from < 0) ||
                            (n.kind == ir::op::shift && a == n.attrs.axis);
          if (index_axis || (from >= 0 && ((selected >> from) & 1u))) next |= 1u << a;
        }
        selected = next;
      }
    }
  }
  // A contraction's epilogue: the elementwise nodes over its result's dims that read it (through
  // other such nodes), evaluated on each finished tile in the contraction's region. Where anything
  // else reads one of them (a root, a view, an op over other dims, an index tensor), that node is
  // materialized: the contraction's region computes it once and writes it, and its other readers
  // load it (a convolution's bias and activation read by a pooling and by a product, a residual
  // sum read by a layer_norm: evaluated again in every reader's loads before). Where that is the
  // contraction's own value or of a wider type, or one node reads two contractions, or the
  // epilogue would give two values (below), the contraction is materialized and its consumers
  // read it as a transient.
  std::vector<std::int32_t> fused(n_nodes, -1);  // the contraction whose epilogue a node is in
  // Per node materialized as an epilogue's value that another region reads: its contraction.
  std::vector<std::int32_t> kept_for(n_nodes, -1);
  for (bool changed = true; changed;) {
    changed = false;
    std::fill(fused.begin(), fused.end(), -1);
    std::vector<bool> spoiled(n_nodes, false);
    for (std::size_t i = 0; i < n_nodes; ++i) {
      const ir::node& n = g.nodes[i];
      if (is_contraction(i) && !materialized[i]) fused[i] = static_cast<std::int32_t>(i);
      for (int k = 0; k < n.arity(); ++k) {
        std::int32_t o = n.operands[k], c = fused[o];
        if (c < 0 || materialized[o]) continue;  // a materialized value is read as a transient
        auto cls = ir::info(n.kind).cls;
        bool epilogue = !ir::is_root(cls) && cls != ir::op_class::view && n.dims == g.nodes[o].dims;
        if (!epilogue && o != c &&
            size_in_bytes(g.nodes[o].type) <= size_in_bytes(g.nodes[c].type)) {
          materialized[o] = changed = true;
          kept_for[o] = c;
        } else if (!epilogue || (fused[i] >= 0 && fused[i] != c)) {
          spoiled[epilogue ? std::max(fused[i], c) : c] = true;
        } else {
          fused[i] = c;
        }
      }
    }
    // The values a contraction's epilogue gives other regions (materialized: an operand of
    // another contraction, MLP's hidden layer) and the function's results it gives: one region
    // computes them all, either the materialized value's own or a region of results.
    std::vector<int> kept(n_nodes, 0), returned(n_nodes, 0);
    for (std::size_t i = 0; i < n_nodes; ++i)
      if (fused[i] >= 0 && fused[i] != static_cast<std::int32_t>(i) && materialized[i])
        ++kept[fused[i]];
    for (auto out : g.outputs)
      if (fused[out] >= 0 && !materialized[out]) ++returned[fused[out]];
    for (std::size_t i = 0; i < n_nodes; ++i)
      if (spoiled[i] || (kept[i] > 0 && kept[i] + returned[i] > 1))
        materialized[i] = changed = true;
  }
  // An epilogue's value kept for its readers whose contraction was materialized after all (its
  // epilogue gave two values): its readers evaluate it from the contraction's value again, rather
  // than a region of its own writing it once more. Nothing is fused to a materialized
  // contraction, so `fused` stands.
  for (std::size_t i = 0; i < n_nodes; ++i)
    if (kept_for[i] >= 0 && materialized[kept_for[i]]) materialized[i] = false;
  std::vector<std::int32_t> view_base(n_nodes, -1);
  for (std::size_t i = 0; i < n_nodes; ++i) {
    if (!load_view[i]) continue;
    std::int32_t o = g.nodes[i].operands[0];
    while (g.nodes[o].kind != ir::op::input && !materialized[o]) o = g.nodes[o].operands[0];
    view_base[i] = o;
  }
  // The index tensors a load view's chain reads (parameters or materialized values).
  auto indices_of = [&](std::int32_t v) {
    std::vector<std::int32_t> idx;
    for (std::int32_t id = v; id != view_base[v]; id = g.nodes[id].operands[0])
      if (ir::is_gather(g.nodes[id].kind)) idx.push_back(g.nodes[id].operands[1]);
    return idx;
  };
  // The nodes a region evaluates to produce `wanted`: everything they read, stopping at
  // materialized values other than the one the region produces (`own`; those are loaded) and at
  // views it loads.
  auto closure = [&](region& r, const std::vector<std::int32_t>& wanted, std::int32_t own) {
    std::vector<bool> used(n_nodes, false);
    for (auto w : wanted) used[w] = true;
    for (std::size_t i = n_nodes; i-- > 0;) {
      if (!used[i] || (materialized[i] && static_cast<std::int32_t>(i) != own) || load_view[i])
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
  std::vector<std::int32_t> own;  // per region: the materialized value it produces, or -1
  auto loads_of = [&](const region& r, std::int32_t produced) {  // materialized values r reads
    std::vector<std::int32_t> loaded;
    for (auto id : r.nodes)
      if (materialized[id] && id != produced) loaded.push_back(id);
    return loaded;
  };
  // The views r loads, and the materialized values they read.
  auto views_of = [&](const region& r, std::int32_t produced) {
    std::vector<std::int32_t> v;
    for (auto id : r.nodes)
      if (load_view[id] && !(materialized[id] && id != produced)) v.push_back(id);
    return v;
  };
  // Each once: several views may read one value (an LSTM's gates, slices of one product).
  auto view_loads_of = [&](const region& r, std::int32_t produced) {
    std::vector<std::int32_t> loaded;
    auto load = [&](std::int32_t id) {
      if (materialized[id] && std::find(loaded.begin(), loaded.end(), id) == loaded.end())
        loaded.push_back(id);
    };
    for (auto id : views_of(r, produced)) {
      load(view_base[id]);
      for (auto i : indices_of(id)) load(i);
    }
    return loaded;
  };
  auto results_of = [&](std::int32_t id) {
    std::vector<std::int32_t> res;
    for (std::size_t k = 0; k < g.outputs.size(); ++k)
      if (g.outputs[k] == id) res.push_back(static_cast<std::int32_t>(k));
    return res;
  };
  auto count_text = [](std::int64_t v) { return kiln::detail::to_text(v); };

  std::vector<region> regions;
  // Roots and row values first, in topological order: each a region of its own.
  for (std::size_t id = 0; id < n_nodes; ++id) {
    auto v = static_cast<std::int32_t>(id);
    if (!materialized[id]) continue;
    region r;
    r.root = is_root(v) ? v : -1;
    r.contraction = fused[id] >= 0 ? fused[id] : is_contraction(id) ? v : -1;
    r.space = is_root(v) ? g.nodes[g.nodes[v].operands[0]].dims : g.nodes[v].dims;
    closure(r, {v}, v);
    r.results = results_of(v);
    regions.push_back(r);
    own.push_back(v);
  }
  std::size_t first_elementwise = regions.size();
  for (std::size_t res = 0; res < g.outputs.size(); ++res) {
    std::int32_t out = g.outputs[res];
    if (materialized[out]) continue;  // written by the region that produces it
    const shape& space = g.nodes[out].dims;
    // A region holds at most one contraction's epilogue, and all of it.
    const std::int32_t contraction = fused[out];
    region* target = nullptr;
    for (std::size_t k = first_elementwise; k < regions.size(); ++k)
      if (regions[k].space == space &&
          (contraction < 0 || regions[k].contraction < 0 ||
           regions[k].contraction == contraction) &&
          !(target && contraction >= 0 && target->contraction == contraction))
        target = &regions[k];
    auto wanted = [&](const region& r) {
      std::vector<std::int32_t> w;
      for (auto x : r.results) w.push_back(g.outputs[x]);
      return w;
    };
    if (target && opt.max_bindings > 0 && (contraction < 0 || target->contraction != contraction)) {
      region trial = *target;
      trial.results.push_back(static_cast<std::int32_t>(res));
      closure(trial, wanted(trial), -1);
      auto bindings = trial.args.size() + trial.results.size() + loads_of(trial, -1).size();
      for (auto v : views_of(trial, -1)) bindings += 1 + indices_of(v).size();
      if (static_cast<int>(bindings) > opt.max_bindings) target = nullptr;  // start another
    }
    if (!target) {
      regions.emplace_back().space = space;
      own.push_back(-1);
      target = &regions.back();
    }
    target->results.push_back(static_cast<std::int32_t>(res));
    if (contraction >= 0) target->contraction = contraction;
    closure(*target, wanted(*target), -1);
  }
  // Execution order: each region after the regions producing what it loads; of the regions
  // ready, the one that loads the most recently placed region's value goes next (a softmax's
  // divide right after its sum, where a row group can take it in), then the first formed.
  std::vector<std::int32_t> producer(n_nodes, -1);
  for (std::size_t k = 0; k < regions.size(); ++k)
    if (own[k] >= 0) producer[own[k]] = static_cast<std::int32_t>(k);
  // Each region's materialized values, loaded directly or through views (found once, not per
  // candidate placement).
  std::vector<std::vector<std::int32_t>> loaded_by(regions.size());
  for (std::size_t k = 0; k < regions.size(); ++k) {
    loaded_by[k] = loads_of(regions[k], own[k]);
    for (auto v : view_loads_of(regions[k], own[k])) loaded_by[k].push_back(v);
  }
  std::vector<int> position(regions.size(), -1);
  std::vector<region> ordered;
  std::vector<std::int32_t> ordered_own;
  for (std::size_t placed = 0; placed < regions.size(); ++placed) {
    int best = -1, best_key = -2;
    for (std::size_t k = 0; k < regions.size(); ++k) {
      if (position[k] >= 0) continue;
      int key = -1;
      bool ready = true;
      for (auto loaded : loaded_by[k]) {
        int at = position[producer[loaded]];
        ready = ready && at >= 0;
        key = std::max(key, at);
      }
      if (ready && key > best_key) {
        best = static_cast<int>(k);
        best_key = key;
      }
    }
    position[best] = static_cast<int>(placed);
    ordered.push_back(regions[best]);
    ordered_own.push_back(own[best]);
  }
  regions = std::move(ordered);
  own = std::move(ordered_own);
  // Transients: every materialized value another region loads, numbered in order of first load.
  transients.clear();
  std::vector<std::int32_t> transient_of(n_nodes, -1);
  auto transient_index = [&](std::int32_t loaded) {
    if (transient_of[loaded] < 0) {
      transient_of[loaded] = static_cast<std::int32_t>(transients.size());
      transients.push_back(loaded);
    }
    return transient_of[loaded];
  };
  views.clear();
  for (std::size_t k = 0; k < regions.size(); ++k) {
    for (auto loaded : loads_of(regions[k], own[k]))
      regions[k].reads.push_back(transient_index(loaded));
    for (auto loaded : view_loads_of(regions[k], own[k]))
      regions[k].view_reads.push_back(transient_index(loaded));
    for (auto v : views_of(regions[k], own[k])) {  // views in order of first load
      auto at = std::find(views.begin(), views.end(), v);
      regions[k].views.push_back(static_cast<std::int32_t>(at - views.begin()));
      if (at == views.end()) views.push_back(v);
      for (auto i : indices_of(v)) {
        const ir::node& n = g.nodes[i];
        std::int32_t slot = n.kind == ir::op::input
                                ? n.arg
                                : static_cast<std::int32_t>(g.inputs.size()) + transient_index(i);
        auto& idx = regions[k].indices;
        if (std::find(idx.begin(), idx.end(), slot) == idx.end()) idx.push_back(slot);
      }
    }
  }
  for (std::size_t k = 0; k < regions.size(); ++k)
    if (own[k] >= 0 && transient_of[own[k]] >= 0) regions[k].writes.push_back(transient_of[own[k]]);
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
  std::vector<std::int32_t> transients, views;
  return form_dispatch_regions(g, transients, views, opt);
}

}  // namespace kiln::compiler
