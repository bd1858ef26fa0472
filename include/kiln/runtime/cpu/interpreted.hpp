// Runs a run-time plan on the CPU: each region's tile program over its iteration space, through
// the same executor (broadcast strides, collapsed dimensions, threads) as the compile-time kernels.
#pragma once

#include "kiln/codegen/cpu/interpreter.hpp"
#include "kiln/codegen/cpu/isa.hpp"
#include "kiln/runtime/cpu/run_plan.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {

// One tile program per region of p.
inline std::vector<tile_program> tile_programs(const compiler::plan& p) {
  std::vector<tile_program> programs;
  for (const compiler::region& reg : p.regions) programs.emplace_back(p, reg);
  return programs;
}

// Runs the regions of p marked in `only` (or all) on host data. sym: the resolved symbols;
// transients: the call's arena.
inline void run_interpreted(const compiler::plan& p, std::span<const tile_program> programs,
                            std::span<const runtime::buffer_ref> args,
                            std::span<const runtime::buffer_ref> results, const std::int64_t* sym,
                            const std::vector<bool>* only, const runtime::arena& transients) {
  run_plan(
      p,
      [&](int region, const void* const* in, const std::int64_t* step, void* const* out,
          std::int64_t n) { programs[region].row(in, step, out, n); },
      {},  // the tile programs store a reduction's operand: run_reduction folds it
      args, results, sym, only, transients);
}

}  // namespace kiln::cpu::inline KILN_CPU_ISA
