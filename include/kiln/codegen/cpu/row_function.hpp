// The signatures of a region's compiled functions, which the runtime calls without knowing the
// plan: its row function, and its register fold (a reduction's, where it has one).
#pragma once

#include <cstdint>

namespace kiln::cpu {

// One row of a region: `count` elements. in[s] points at input slot s's first element for this
// row and advances by step[s] (1, or 0 where broadcast); out[s] at output slot s's. Input slots:
// the parameters, then the transients; output slots: the results, then the transients
// (compiler::input_slot / output_slot). A reduction's region stores its root's operand, to the
// region's first output slot: the reduction itself is run_reduction's.
using row_fn = void (*)(const void* const* in, const std::int64_t* step, void* const* out,
                        std::int64_t count);
// A reduction's region folding `count` elements (at most fold_piece: one piece of fold_order.hpp)
// of its root's operand into the accumulator at acc (the runtime reducer's, a float), in the
// reducer's order, so to the same bits, with no pass through memory.
using fold_fn = void (*)(const void* const* in, const std::int64_t* step, std::int64_t count,
                         void* acc);

}  // namespace kiln::cpu
