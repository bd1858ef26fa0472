// Where a view's elements lie in its base's buffer at a call: an offset and strides (in
// elements), composed down the chain of views from the base's row-major layout. Both back ends
// read a view in place through it.
#pragma once

#include <array>
#include <vector>

#include "kiln/compiler/plan.hpp"

namespace kiln::compiler {

struct strided_layout {
  shape dims;
  std::int64_t offset = 0;
  std::array<std::int64_t, max_rank> strides{};
};

constexpr strided_layout row_major(const shape& dims) {
  strided_layout l{dims, 0, {}};
  std::int64_t s = 1;
  for (int i = dims.rank - 1; i >= 0; --i) {
    l.strides[i] = s;
    s *= dims.dims[i];
  }
  return l;
}

// View node n applied to layout l (its operand's); sym: the call's resolved symbols.
constexpr strided_layout apply_view(const ir::node& n, const strided_layout& l,
                                    const std::int64_t* sym) {
  shape d = n.dims;
  for (int i = 0; i < d.rank; ++i) d.dims[i] = size_at(d.dims[i], sym);
  strided_layout r{d, l.offset, {}};
  switch (n.kind) {
    case ir::op::transpose:
      for (int i = 0; i < d.rank; ++i) r.strides[i] = l.strides[n.attrs.perm[i]];
      break;
    case ir::op::slice:
      for (int i = 0; i < d.rank; ++i) {
        r.offset += std::int64_t{n.attrs.starts[i]} * l.strides[i];
        r.strides[i] = l.strides[i] * n.attrs.steps[i];
      }
      break;
    case ir::op::expand:  // numpy broadcasting: right-aligned, size 1 repeats
      for (int i = 0; i < d.rank; ++i) {
        int j = i - (d.rank - l.dims.rank);
        r.strides[i] = j < 0 || l.dims.dims[j] == 1 ? 0 : l.strides[j];
      }
      break;
    default:  // reshape, of a row-major base (compiler::form_dispatch_regions sees to it)
      r = row_major(d);
      r.offset = l.offset;
      break;
  }
  return r;
}

// The layout of view v of plan p; base: the dims of its base (view_bases[v]) at the call.
constexpr strided_layout view_layout(const plan& p, std::int32_t v, const shape& base,
                                     const std::int64_t* sym) {
  const ir::graph& g = p.graph;
  const auto n_inputs = static_cast<std::int32_t>(g.inputs.size());
  const std::int32_t slot = p.view_bases[v];
  const std::int32_t base_node = slot >= n_inputs ? p.transients[slot - n_inputs] : -1;
  std::vector<std::int32_t> chain;  // the views from p.views[v] down to the base
  for (std::int32_t id = p.views[v];; id = g.nodes[id].operands[0]) {
    if (id == base_node || (base_node < 0 && g.nodes[id].kind == ir::op::input)) break;
    chain.push_back(id);
  }
  strided_layout l = row_major(base);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) l = apply_view(g.nodes[*it], l, sym);
  return l;
}

}  // namespace kiln::compiler
