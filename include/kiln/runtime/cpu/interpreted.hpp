// Runs a run-time plan on the CPU: each region's tile program over its iteration space, through
// the same executor (broadcast strides, collapsed dimensions, threads) as the compile-time kernels.
#pragma once

#include "kiln/codegen/cpu/interpreter.hpp"
#include "kiln/codegen/cpu/isa.hpp"
#include "kiln/runtime/cpu/executor.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {

// One tile program per region of p.
inline std::vector<tile_program> tile_programs(const compiler::plan& p) {
  std::vector<tile_program> programs;
  for (const compiler::region& reg : p.regions) programs.emplace_back(p, reg);
  return programs;
}

// Runs the regions of p marked in `only` (or all) on host data. sym: the resolved symbols.
inline void run_interpreted(const compiler::plan& p, std::span<const tile_program> programs,
                            std::span<const runtime::buffer_ref> args,
                            std::span<const runtime::buffer_ref> results, const std::int64_t* sym,
                            const std::vector<bool>* only = nullptr) {
  const ir::graph& g = p.graph;
  std::vector<operand_layout> ins(g.inputs.size()), outs(g.outputs.size());
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    if (only && !(*only)[i]) continue;
    const compiler::region& reg = p.regions[i];
    shape space = runtime::concrete(reg.space, sym);
    for (auto a : reg.args) {
      const ir::input_decl& d = g.inputs[a];
      shape dims = runtime::argument_dims(args[a], d.dims);
      ins[a] = layout_over(args[a].data, size_in_bytes(d.type), dims, space);
    }
    for (auto r : reg.results)
      outs[r] =
          layout_over(results[r].data, size_in_bytes(g.nodes[g.outputs[r]].type), space, space);
    const tile_program& program = programs[i];
    run_region([&](const void* const* in, const std::int64_t* step, void* const* out,
                   std::int64_t n) { program.row(in, step, out, n); },
               space, reg.args, ins, reg.results, outs);
  }
}

}  // namespace kiln::cpu::inline KILN_CPU_ISA
