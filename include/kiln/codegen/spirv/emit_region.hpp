// The region emitter: one dispatch region of a plan becomes one SPIR-V compute shader. Each
// invocation computes four consecutive elements of the iteration space as 4-wide vectors, in a
// grid-stride loop; every buffer is an array of uvec4 words, so narrow types (8/16-bit ints, f16,
// bf16, fp8, bool) are packed and unpacked in 32-bit words and need no 8/16-bit storage feature.
// A row group (softmax's max, sum and divide) is one kernel too: a workgroup per four rows runs
// each member region over those rows in turn, with a barrier between them. A contraction's region
// (a matmul, or a convolution, plain or transposed, as implicit GEMM) is a tiled GEMM (a workgroup
// per tile, shared memory, a block of each tile in each invocation's registers) whose epilogue runs
// on each block's rows before they are stored; an operand that elementwise ops compute from
// parameters (a weight's dequantization: compiler::packed_into) is computed as its blocks are
// staged, by the prologue's region as a member of the same kernel.
//
// The class and what its kernel families share: region_emitter.hpp; reductions and row groups:
// emit_row_group.hpp; contractions: emit_contraction.hpp.
#pragma once

#include <span>
#include <vector>

#include "kiln/codegen/spirv/emit_contraction.hpp"
#include "kiln/codegen/spirv/emit_row_group.hpp"
#include "kiln/codegen/spirv/region_emitter.hpp"

namespace kiln::spirv {

// Emits region r of plan p for target t, with one operand_kind per region argument.
// whole_quads: whether the rows along the region's last axis are whole groups of four (a
// contraction's N; a reduction's last reduced axis).
inline kernel emit_region(const compiler::plan& p, const compiler::region& r,
                          const std::vector<operand_kind>& kinds, const target& t,
                          bool whole_quads = true) {
  const int index = static_cast<int>(&r - p.regions.data());
  return detail::region_emitter(p, std::span(&index, 1), std::span(&kinds, 1), t, whole_quads)
      .run();
}

// Emits regions `members` of p as one kernel, with the operand kinds of each: a row group's
// regions in order (the reduced axes of the first, a reduction, are the trailing axes of its
// space), or a contraction's region and then the prologues its staging computes
// (compiler::packed_into), whole_quads as for emit_region.
inline kernel emit_kernel(const compiler::plan& p, std::span<const int> members,
                          std::span<const std::vector<operand_kind>> kinds, const target& t,
                          bool whole_quads = true) {
  return detail::region_emitter(p, members, kinds, t, whole_quads).run();
}

}  // namespace kiln::spirv
