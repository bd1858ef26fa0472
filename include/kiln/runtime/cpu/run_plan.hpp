// Runs a plan's regions on the CPU for one call, for both doors (the compile-time kernels and the
// interpreter differ only in their row functions): operand layouts per region, the call's
// transient arena, elementwise regions through run_region and reductions through run_reduction.
#pragma once

#include <span>
#include <vector>

#include "kiln/compiler/plan.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/cpu/executor.hpp"
#include "kiln/runtime/cpu/reduction.hpp"

namespace kiln::cpu {

// Region i's row function: row_of(i, in, step, out, count).
using region_rows_ref =
    function_ref<void(int region, const void* const* in, const std::int64_t* step, void* const* out,
                      std::int64_t count)>;

// Runs the regions of p marked in `only` (or all) on host data. sym: the resolved symbols.
KILN_RUNTIME_API void run_plan(const compiler::plan& p, region_rows_ref rows,
                               std::span<const runtime::buffer_ref> args,
                               std::span<const runtime::buffer_ref> results,
                               const std::int64_t* sym, const std::vector<bool>* only);

#if KILN_RUNTIME_BODY
KILN_RUNTIME_API void run_plan(const compiler::plan& p, region_rows_ref rows,
                               std::span<const runtime::buffer_ref> args,
                               std::span<const runtime::buffer_ref> results,
                               const std::int64_t* sym, const std::vector<bool>* only) {
  const ir::graph& g = p.graph;
  const auto n_inputs = static_cast<int>(g.inputs.size());
  const auto n_outputs = static_cast<int>(g.outputs.size());
  std::vector<operand_layout> ins(compiler::input_slot_count(p));
  std::vector<operand_layout> outs(compiler::output_slot_count(p));
  // The call's transients, in one arena laid out by the plan (reused between regions).
  // The memory is the calling thread's, kept for its next call (a call runs on one thread's
  // behalf at a time), so a steady stream of calls allocates nothing.
  compiler::arena_layout arena = p.arena(sym);
  struct alignas(64) line {
    unsigned char bytes[64];
  };
  thread_local std::vector<line> arena_memory;
  if (arena_memory.size() * sizeof(line) < static_cast<std::size_t>(arena.bytes))
    arena_memory.resize((arena.bytes + sizeof(line) - 1) / sizeof(line));
  auto transient = [&](std::int32_t t) {
    const ir::node& n = g.nodes[p.transients[t]];
    return std::pair{arena_memory.data()->bytes + arena.offsets[t], runtime::concrete(n.dims, sym)};
  };
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    if (only && !(*only)[i]) continue;
    const compiler::region& reg = p.regions[i];
    shape space = runtime::concrete(reg.space, sym);
    for (auto a : reg.args) {
      const ir::input_decl& d = g.inputs[a];
      shape dims = runtime::argument_dims(args[a], d.dims);
      ins[a] = layout_over(args[a].data, size_in_bytes(d.type), dims, space);
    }
    for (auto t : reg.reads) {
      auto [data, dims] = transient(t);
      ins[n_inputs + t] =
          layout_over(data, size_in_bytes(g.nodes[p.transients[t]].type), dims, space);
    }
    // What the region writes, over its space: a reduction's result keeps the reduced axes with
    // size 1 there, so they get stride 0.
    const ir::node* root = reg.root >= 0 ? &g.nodes[reg.root] : nullptr;
    shape written = root ? ir::kept_dims(space, root->attrs) : space;
    for (auto r : reg.results)
      outs[r] =
          layout_over(results[r].data, size_in_bytes(g.nodes[g.outputs[r]].type), written, space);
    for (auto t : reg.writes)
      outs[n_outputs + t] = layout_over(
          transient(t).first, size_in_bytes(g.nodes[p.transients[t]].type), written, space);
    auto row = [&](const void* const* in, const std::int64_t* step, void* const* out,
                   std::int64_t n) { rows(static_cast<int>(i), in, step, out, n); };
    auto in_slots = compiler::input_slots(p, reg);
    auto out_slots = compiler::output_slots(p, reg);
    if (root)
      run_reduction(row, root->kind, g.nodes[root->operands[0]].type, space, root->attrs, in_slots,
                    ins, out_slots, outs, compiler::load_slot(p, reg, root->operands[0]));
    else
      run_region(row, space, in_slots, ins, out_slots, outs);
  }
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::cpu
