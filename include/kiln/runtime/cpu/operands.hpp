// What the CPU runtime knows of a region's operands: their layouts over the iteration space
// (strides, the index terms of gathers), the walks of a row group's rows, and the row function
// as the runtime calls it. Declarations the executors' signatures need; row_pointers.hpp has the
// machinery that uses them.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kiln/core/function_ref.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/ir/attributes.hpp"

namespace kiln::cpu {

// A gather's or shift's part of an operand's element address (compiler::index_term over the
// iteration space): data_stride x the position read from `positions` (i32 or i64 elements,
// `wide`) at offset + sum of index x stride, or (no positions: a shift) that place itself.
// (Positions are read from `positions` already at the offset; a shift adds it, `shift`.)
struct index_term {
  const unsigned char* positions = nullptr;
  bool wide = false;
  ir::position_fold fold = ir::position_fold::clamp;
  std::int64_t extent = 0, data_stride = 0, shift = 0;
  std::array<std::int64_t, max_rank> stride{};
  // Its part of the element address at index `at` of the positions (row_pointers.hpp defines
  // it: only the runtime reads through gathers).
  inline std::int64_t position(std::int64_t at) const;
};

// One operand of a region: where its data starts, its element size, its stride (in elements)
// along each dimension of the iteration space (0 where it is broadcast), and the index terms of
// the gathers it is read through.
struct operand_layout {
  const unsigned char* data = nullptr;
  int bytes = 0;
  std::array<std::int64_t, max_rank> stride{};
  std::vector<index_term> terms;
};

// Some rows of a row group (kept indices [first, last)) run on the calling thread; by default
// (last < 0) all of them, on kiln's threads.
struct row_block {
  std::int64_t first = 0, last = -1;
};

// A region's row function as run_region takes it: a cpu::row_fn, or anything callable like one.
using row_ref = function_ref<void(const void* const* in, const std::int64_t* step, void* const* out,
                                  std::int64_t count)>;

// How one operand of a region walks a row group's rows when that is one affine walk: row r's
// element c at data + (r * row_stride + c * step) elements of `bytes`, step 0 (broadcast along
// the row) or 1. A walk carries its data pointer, so a thread can point its own copy elsewhere
// (a row-local value's block buffer) without copying the region's layouts. stream: an output
// written with streaming stores (streaming_stores.hpp; run_walks).
struct row_walk {
  std::int32_t slot;
  bool output;
  const unsigned char* data;
  int bytes;
  std::int64_t row_stride, step;
  bool stream = false;
};

}  // namespace kiln::cpu
