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
// the rest, overlapping it. The call's transients live in ws where given, else in an arena of
// prog's for d. `who` names the caller in errors.
KILN_RUNTIME_API void execute(const device& d, const program& prog,
                              std::span<const buffer_ref> args, std::span<const buffer_ref> results,
                              const std::int64_t* sym, const std::string& who, host_regions on_host,
                              const workspace& ws);

}  // namespace kiln::runtime

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include "kiln/runtime/host_memory.hpp"
#include "kiln/runtime/vulkan/executor.hpp"

namespace kiln::runtime {

namespace detail {

// The arenas of one call, found when a back end asks (the Vulkan back end knows only after
// planning the call whether its transients are on the device or on the host): the caller's
// workspace where it is in that memory, else one of the program's, held until the call ends.
class call_arenas {
 public:
  call_arenas(const device& d, const program& prog, const workspace& ws, const std::int64_t* sym,
              const std::string& who)
      : d_(d), prog_(prog), ws_(ws), sym_(sym), who_(who) {
    if (!ws.given()) return;
    if (ws.memory() && (d.type() == device::kind::cpu || ws.memory()->device_name() != d.name()))
      throw error(errc::invalid_argument, who,
                  "the workspace is on " + ws.memory()->device_name() + " but the call runs on " +
                      d.name() + "; give memory of " + d.name() + " (" +
                      (d.type() == device::kind::cpu ? "host bytes" : "a buffer of that device") +
                      ")");
  }

  // p's arena for this call: on the device, or in host memory.
  arena operator()(const compiler::plan& p, bool on_device) {
    if (p.transients.empty()) return {};  // most plans: nothing to lay out or lend
    arena a{prog_.arenas().layout(p, sym_, p.graph.symbols.size() + 1)};
    const std::int64_t bytes = a.layout.bytes;
    if (bytes == 0) return a;
    if (ws_.given()) {
      if (on_device && !ws_.memory())
        throw error(errc::invalid_argument, who_,
                    "the workspace is host memory but the call's transients are on " + d_.name() +
                        "; give a buffer of that device (device.alloc<std::uint8_t>(" +
                        std::to_string(bytes) + "))");
      unsigned char* host = nullptr;
      std::size_t have = ws_.bytes();
      if (!on_device) {  // host bytes, or a device buffer the host can address
        host = ws_.memory() ? ws_.memory()->host_address()
                            : reinterpret_cast<unsigned char*>(ws_.host());
        if (host) {  // the arena starts at a multiple of 64 bytes, as the CPU loads like
          auto skip = static_cast<std::size_t>(-reinterpret_cast<std::uintptr_t>(host) & 63);
          have = have > skip ? have - skip : 0;
          host += skip;
        }
      }
      if (on_device || host) {
        if (have < static_cast<std::size_t>(bytes))
          throw error(errc::invalid_argument, who_,
                      "the workspace holds " + std::to_string(have) +
                          " usable bytes but this call's transients need " + std::to_string(bytes) +
                          (on_device ? "" : " (from a 64-byte boundary)"));
        a.host = host;
        a.memory = on_device ? ws_.memory() : nullptr;
        return a;
      }
      // A device-only workspace where the transients are on the host (a region fell back to
      // the CPU): the program's host arena serves.
    }
    const device* owner = on_device ? &d_ : nullptr;
    leases_.push_back(prog_.arenas().take(
        on_device ? static_cast<const void*>(d_.context()) : nullptr, bytes, [&](std::int64_t n) {
          return owner ? device_block(*owner, n) : arena_pool::host_block(n);
        }));
    a.host = leases_.back().get().host;
    a.memory = leases_.back().get().memory;
    return a;
  }

 private:
  static arena_pool::block device_block(const device& d, std::int64_t bytes) {
    auto memory = std::make_shared<buffer<std::uint8_t>>(d.alloc<std::uint8_t>(bytes));
    arena_pool::block b;
    b.memory = memory->memory();
    b.bytes = bytes;
    b.keep = std::move(memory);
    return b;
  }

  const device& d_;
  const program& prog_;
  const workspace& ws_;
  const std::int64_t* sym_;
  const std::string& who_;
  std::vector<arena_pool::lease> leases_;
};

}  // namespace detail

KILN_RUNTIME_API void execute(const device& d, const program& prog,
                              std::span<const buffer_ref> args, std::span<const buffer_ref> results,
                              const std::int64_t* sym, const std::string& who, host_regions on_host,
                              const workspace& ws) {
  detail::call_arenas arenas(d, prog, ws, sym, who);
  // The CPU device's buffers are host data, on every device.
  const std::vector<buffer_ref> in = host_refs(args), out = host_refs(results);
  switch (d.type()) {
    case device::kind::cpu:
      check_host(in, out, who);
      on_host(in, out, nullptr, arenas(prog.plan(), false));
      return;
    case device::kind::vulkan:
      vulkan::run(prog, *d.context(), in, out, sym, on_host, arenas);
      return;
  }
}

}  // namespace kiln::runtime
#endif  // KILN_RUNTIME_BODY
