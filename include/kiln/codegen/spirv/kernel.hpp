// What the runtime needs of an emitted kernel: its code, bindings and metadata layout, and how
// each region argument is laid out over the iteration space.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/codegen/spirv/module.hpp"

namespace kiln::spirv {

// How a region argument is laid out over the iteration space (chosen per call from the extents).
// The last two are strided ones that the host found more of: where the kernel's four lanes are
// consecutive elements along the space's last axis (its rows are whole groups of four), their
// index is lane 0's plus the lane, so the kernel reads them without a gather; elsewhere they are
// read as strided.
enum class operand_kind : std::uint8_t {
  full,         // the argument has the space's extents: element e is at index e
  uniform,      // a single element, read once
  strided,      // broadcast: index from the coordinates and per-dimension strides
  consecutive,  // strided, with stride 1 along the last axis and every group of four starting
                // at an index divisible by four: one aligned vector
  repeated,     // strided, with stride 0 along the last axis: one element for the four lanes
};

// Whether the argument has strides (and an offset) in the metadata.
constexpr bool is_strided(operand_kind k) {
  return k == operand_kind::strided || k == operand_kind::consecutive ||
         k == operand_kind::repeated;
}

// Metadata words (push constants, or a small buffer past the device's push-constant size):
// [0] 4-element groups, [1] elements, [2, 2+rank) the space's extents, then for each strided
// argument in order its rank strides and its offset (elements; a view's: a slice's start;
// strides and offset wrap as u32, so negative steps work), and for each of its index terms
// (compiler::index_term) the positions' rank strides and offset, the data stride and the extent;
// then (a reduction) the count of elements reduced into each result,
// then the region's float constants (kernel::constants). A reduction's elements are its results,
// and its space is its operand's with the kept axes first, then the reduced ones. A row group's
// kernel has each member region's words in turn, then the constants of all of them.
inline std::uint32_t metadata_words(int rank, int strided_args, int index_terms,
                                    bool reduction = false) {
  const auto r = static_cast<std::uint32_t>(rank);
  return 2 + r + (r + 1) * static_cast<std::uint32_t>(strided_args) +
         (r + 3) * static_cast<std::uint32_t>(index_terms) + (reduction ? 1 : 0);
}
// A contraction region's words follow its epilogue's (metadata_words): its GEMM's K, M and N,
// then A's rank strides and offset, then B's (a matmul's over [batch..., M, K] and
// [batch..., K, N]; a convolution's (conv or conv_transpose) A is its weights, B its input, each
// over its own dims); then a convolution's groups, input channels per group and kernel cells, and
// per spatial axis its stride, start (-pad, wrapped), dilation, kernel extent and input extent.
inline std::uint32_t contraction_words(int rank, bool convolution) {
  const auto r = static_cast<std::uint32_t>(rank);
  return 5 + 2 * r + (convolution ? 3 + 5 * (r - 2) : 0);
}

struct kernel {
  words code;                  // the module; empty when the device cannot run the region
  std::string unsupported;     // why not, naming the op and dtype
  std::uint32_t bindings = 0;  // input slots, index tensors (region::indices), output slots,
                               // then the metadata buffer if any
  std::uint32_t metadata = 0;  // metadata words, the constants' included
  bool metadata_in_buffer = false;
  bool per_workgroup = false;  // a reduction: one workgroup per four results (not per invocation)
  bool per_tile = false;       // a contraction: one workgroup per tile of the result (target::gemm)
  std::uint32_t workgroup = 0;  // invocations per workgroup; 0: the device's (workgroup_size)
  std::uint32_t regions = 1;    // plan regions it runs: a row group's kernel runs several
  // The float constants of the region, as words that end the metadata: a kernel reads them at run
  // time rather than as SPIR-V constants, so no driver can fold them against IEEE rules (llvmpipe
  // turns x * 0.0 into 0 and x / 0.0 into 0 when 0.0 is a shader constant), and kernels that
  // differ only in their constants are one kernel.
  std::vector<std::uint32_t> constants;
  std::uint32_t vulkan_version = 0;  // the target's it was emitted for (what spirv-val checks)
};

}  // namespace kiln::spirv
