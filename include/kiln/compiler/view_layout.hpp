// Where a view's elements lie in its base's buffer at a call: an offset and strides (in
// elements), composed down the chain of views from the base's row-major layout, plus one index
// term per gather in the chain (a position read from an index tensor). Both back ends read a
// view in place through it.
#pragma once

#include <array>
#include <vector>

#include "kiln/compiler/plan.hpp"

namespace kiln::compiler {

// A gather's or shift's part of an element's place: data_stride times a position. A gather reads
// it from the index tensor in input slot `slot` (element type `type`) at offset + sum of
// coordinate x strides; a shift (slot -1) computes offset + sum of coordinate x strides itself.
// Either is folded into the axis's `extent` positions by `fold` (a gather's: clamp).
struct index_term {
  std::int32_t slot = -1;
  dtype type = dtype::i64;
  ir::position_fold fold = ir::position_fold::clamp;
  std::int64_t extent = 0, data_stride = 0, offset = 0;
  std::array<std::int64_t, max_rank> strides{};
};

// The position a term gives for value v, in [0, extent): a read index (a gather's) counts from
// the end when negative, as ONNX's; then it is folded into the axis.
constexpr std::int64_t term_position(std::int64_t v, std::int64_t extent, ir::position_fold fold,
                                     bool read) {
  if (read && v < 0) v += extent;
  return ir::folded_position(v, extent, fold);
}

struct strided_layout {
  shape dims;
  std::int64_t offset = 0;
  std::array<std::int64_t, max_rank> strides{};
  std::vector<index_term> terms;
};

constexpr strided_layout row_major(const shape& dims) {
  strided_layout l{dims, 0, {}, {}};
  std::int64_t s = 1;
  for (int i = dims.rank - 1; i >= 0; --i) {
    l.strides[i] = s;
    s *= dims.dims[i];
  }
  return l;
}

// View node n of graph g applied to layout l (its operand's); sym: the call's resolved symbols;
// index_slot: a gather's indices' input slot.
constexpr strided_layout apply_view(const ir::graph& g, const ir::node& n, const strided_layout& l,
                                    const std::int64_t* sym, std::int32_t index_slot = -1) {
  shape d = n.dims;
  for (int i = 0; i < d.rank; ++i) d.dims[i] = size_at(d.dims[i], sym);
  strided_layout r{d, l.offset, {}, l.terms};
  // Result axis i reads operand axis from(i) (-1: none); every stride vector moves with it.
  auto remap = [&](auto from) {
    for (int i = 0; i < d.rank; ++i) {
      int j = from(i);
      r.strides[i] = j < 0 ? 0 : l.strides[j];
      for (std::size_t t = 0; t < r.terms.size(); ++t)
        r.terms[t].strides[i] = j < 0 ? 0 : l.terms[t].strides[j];
    }
  };
  switch (n.kind) {
    case ir::op::transpose:
      remap([&](int i) { return int{n.attrs.perm[i]}; });
      break;
    case ir::op::slice:
      remap([](int i) { return i; });
      for (int i = 0; i < d.rank; ++i) {
        r.offset += std::int64_t{n.attrs.starts[i]} * l.strides[i];
        r.strides[i] *= n.attrs.steps[i];
        for (auto& t : r.terms) {
          t.offset += std::int64_t{n.attrs.starts[i]} * t.strides[i];
          t.strides[i] *= n.attrs.steps[i];
        }
      }
      break;
    case ir::op::expand:  // numpy broadcasting: right-aligned, size 1 repeats
      remap([&](int i) {
        int j = i - (d.rank - l.dims.rank);
        return j < 0 || l.dims.dims[j] == 1 ? -1 : j;
      });
      break;
    case ir::op::shift: {  // positions computed from the coordinate along the axis
      const int axis = n.attrs.axis;
      if (l.dims.dims[axis] == 0) {  // a piece of run-time length 0, never selected: every
        r.offset = 0;                // position reads the operand's place 0 (the runtime gives an
        r.strides = {};              // empty argument readable data there), with the same terms
        for (auto& t : r.terms) t.data_stride = 0, t.strides = {};
        r.terms.push_back({-1, dtype::i64, ir::position_fold::clamp, 0, 0, 0, {}});
        break;
      }
      remap([&](int i) { return i == axis ? -1 : i; });
      index_term t{
          -1,
          dtype::i64,
          static_cast<ir::position_fold>(n.attrs.fold),
          l.dims.dims[axis],
          l.strides[axis],
          -std::int64_t{n.attrs.starts[axis]} - (n.attrs.begin_symbol < 0 ? 0
                                                 : n.attrs.window ? -sym[n.attrs.begin_symbol]
                                                                  : sym[n.attrs.begin_symbol]),
          {}};
      t.strides[axis] = 1;
      r.terms.push_back(t);
      break;
    }
    case ir::op::gather:
    case ir::op::gather_elements: {
      const int axis = n.attrs.axis;
      const ir::node& idx = g.nodes[n.operands[1]];
      shape idims = idx.dims;
      for (int i = 0; i < idims.rank; ++i) idims.dims[i] = size_at(idims.dims[i], sym);
      strided_layout positions = row_major(idims);
      index_term t{
          index_slot, idx.type, ir::position_fold::clamp, l.dims.dims[axis], l.strides[axis],
          0,          {}};
      if (n.kind == ir::op::gather) {  // axes [axis, axis + q) walk the indices
        const int q = idims.rank;
        remap([&](int i) { return i < axis ? i : i < axis + q ? -1 : i - q + 1; });
        for (int i = 0; i < q; ++i) t.strides[axis + i] = positions.strides[i];
      } else {  // every axis walks the indices; the others also walk the data
        remap([&](int i) { return i == axis ? -1 : i; });
        t.strides = positions.strides;
      }
      if (t.extent == 0 && d.element_count() != 0)
        throw error(errc::shape_mismatch, std::string(ir::name(n.kind)),
                    "data has no positions along axis " + kiln::detail::to_text(axis) +
                        " for the indices to select");
      r.terms.push_back(t);
      break;
    }
    default:  // reshape, of a row-major base (compiler::form_dispatch_regions sees to it)
      r = row_major(d);
      r.offset = l.offset;
      break;
  }
  return r;
}

// The views of view v of plan p from its base up: the order its map is composed in (and its
// gathers' index terms are listed in).
constexpr std::vector<std::int32_t> view_chain(const plan& p, std::int32_t v) {
  const ir::graph& g = p.graph;
  const auto n_inputs = static_cast<std::int32_t>(g.inputs.size());
  const std::int32_t slot = p.view_bases[v];
  const std::int32_t base_node = slot >= n_inputs ? p.transients[slot - n_inputs] : -1;
  std::vector<std::int32_t> chain;
  for (std::int32_t id = p.views[v];; id = g.nodes[id].operands[0]) {
    if (id == base_node || (base_node < 0 && g.nodes[id].kind == ir::op::input)) break;
    chain.insert(chain.begin(), id);
  }
  return chain;
}

// View v's index terms as its kernel needs them before the call: each term's positions' input
// slot (-1: computed, a shift's) and fold, in the order of strided_layout::terms.
struct term_source {
  std::int32_t slot = -1;
  ir::position_fold fold = ir::position_fold::clamp;
};
constexpr std::vector<term_source> view_terms(const plan& p, std::int32_t v) {
  std::vector<term_source> terms;
  for (auto id : view_chain(p, v)) {
    const ir::node& n = p.graph.nodes[id];
    if (ir::is_gather(n.kind))
      terms.push_back({value_slot(p.graph, p.transients, n.operands[1])});
    else if (n.kind == ir::op::shift)
      terms.push_back({-1, static_cast<ir::position_fold>(n.attrs.fold)});
  }
  return terms;
}

// The layout of view v of plan p; base: the layout of its base (view_bases[v]) at the call.
constexpr strided_layout view_layout(const plan& p, std::int32_t v, const strided_layout& base,
                                     const std::int64_t* sym) {
  const ir::graph& g = p.graph;
  strided_layout l = base;
  for (auto id : view_chain(p, v)) {
    const ir::node& n = g.nodes[id];
    std::int32_t index_slot =
        ir::is_gather(n.kind) ? value_slot(g, p.transients, n.operands[1]) : -1;
    l = apply_view(g, n, l, sym, index_slot);
  }
  return l;
}

// Whether the views apply_view composes over any base layout: not a reshape, which needs its
// base row-major.
constexpr bool keeps_base_strides(ir::op kind) {
  return kind == ir::op::transpose || kind == ir::op::slice || kind == ir::op::expand ||
         kind == ir::op::shift || ir::is_gather(kind);
}

// Whether plan p reads parameter `arg` only through its layout, whatever its strides: not as a
// gather's positions nor through a reshape, which both read it row-major (a call copies a
// strided argument into a row-major one for them).
constexpr bool reads_any_layout(const plan& p, std::int32_t arg) {
  for (std::int32_t v = 0; v < static_cast<std::int32_t>(p.views.size()); ++v) {
    for (const term_source& t : view_terms(p, v))
      if (t.slot == arg) return false;
    if (p.view_bases[v] != arg) continue;
    for (auto id : view_chain(p, v))
      if (!keeps_base_strides(p.graph.nodes[id].kind)) return false;
  }
  for (const region& r : p.regions)
    for (auto s : r.indices)
      if (s == arg) return false;
  return true;
}

}  // namespace kiln::compiler
