// runtime::execute: the one way both doors (kiln::fn and executable::run) reach a device. The
// call's arguments have been checked and its sizes resolved; this picks the back end.
#pragma once

#include <cstdint>
#include <span>

#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/device.hpp"
#include "kiln/runtime/program.hpp"
#include "kiln/runtime/signature.hpp"

namespace kiln::runtime {

// Runs `prog` for one call on `d`. sym: the resolved symbols. On the CPU, on_host runs every
// region (after the host-data checks); on Vulkan, the device runs the regions it can and on_host
// the rest, overlapping it. `who` names the caller in errors.
KILN_RUNTIME_API void execute(const device& d, const program& prog,
                              std::span<const buffer_ref> args, std::span<const buffer_ref> results,
                              const std::int64_t* sym, const std::string& who,
                              host_regions on_host);

}  // namespace kiln::runtime

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include "kiln/runtime/vulkan/executor.hpp"

namespace kiln::runtime {

KILN_RUNTIME_API void execute(const device& d, const program& prog,
                              std::span<const buffer_ref> args, std::span<const buffer_ref> results,
                              const std::int64_t* sym, const std::string& who,
                              host_regions on_host) {
  switch (d.type()) {
    case device::kind::cpu:
      check_host(args, results, who);
      on_host(args, results, nullptr);
      return;
    case device::kind::vulkan:
      vulkan::run(prog, *d.context(), args, results, sym, on_host);
      return;
  }
}

}  // namespace kiln::runtime
#endif  // KILN_RUNTIME_BODY
