// runtime::program: a compiled function as the runtime keeps it, shared by every call of one
// kiln::fn or by the copies of one executable: its plan, its name (in notices, errors and dump
// paths), what the Vulkan back end has made of it so far (kernels per region and layout), and the
// transient arenas its calls reuse.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/compiler/freeze.hpp"
#include "kiln/compiler/plan.hpp"
#include "kiln/core/function_ref.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/arena.hpp"
#include "kiln/runtime/signature.hpp"

namespace kiln::vulkan {
struct kernel_cache;
}

namespace kiln::runtime {

// How a door runs a program's regions on the CPU, on host data: those marked in `only`, or all
// when it is null (the kiln::fn's compiled kernels, or an executable's interpreter), with the
// call's transients in `transients` (host memory).
using host_regions =
    function_ref<void(std::span<const buffer_ref> args, std::span<const buffer_ref> results,
                      const std::vector<bool>* only, const arena& transients)>;

class program {
 public:
  // Names the plan `prefix`-<hash of its text>; with KILN_DUMP_DIR set, writes there, under that
  // name, the traced IR, the IR after canonicalization, the regions and the plan.
  KILN_RUNTIME_API program(const char* prefix, const ir::graph& traced, compiler::plan p);
  // The same from a kiln::fn's frozen trace and plan (thawed here, not in the fn's file).
  KILN_RUNTIME_API program(const char* prefix, const compiler::frozen_parts& traced,
                           const compiler::frozen_parts& p);
  KILN_RUNTIME_API ~program();
  program(const program&) = delete;
  program& operator=(const program&) = delete;

  const compiler::plan& plan() const { return plan_; }
  const std::string& name() const { return name_; }
  // Kernels, per-device plans and notices of the Vulkan back end (runtime/vulkan/executor.hpp).
  vulkan::kernel_cache& vulkan_kernels() const { return *vulkan_; }
  // The transient arenas its calls reuse, per device.
  arena_pool& arenas() const { return arenas_; }

 private:
  compiler::plan plan_;
  std::string name_;
  std::unique_ptr<vulkan::kernel_cache> vulkan_;
  mutable arena_pool arenas_;
};

}  // namespace kiln::runtime
