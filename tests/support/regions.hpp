// A plan's regions run one at a time through the interpreter (run_plan with `only` set per
// region), each over all its rows, every value between them stored in the arena: the reference
// for the bits of what the CPU runs fused (a row group, a matmul packing its computed operand).
// It runs the interpreter of the set the runtime library chose (runtime/cpu/kernels.hpp), as the
// fused calls do, whatever set the test file is built for.
#pragma once

#include <vector>

#include <kiln/compiler/plan.hpp>
#include <kiln/runtime/signature.hpp>

namespace ref {

// Static sizes only.
void run_region_by_region(const kiln::compiler::plan& p,
                          std::vector<kiln::runtime::buffer_ref> args,
                          std::vector<kiln::runtime::buffer_ref> results);

}  // namespace ref
