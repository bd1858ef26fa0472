// ref::run_region_by_region (regions.hpp): the runtime library's chosen interpreter.
#include "regions.hpp"

#include <cstdint>

#include <kiln/runtime/cpu/kernels.hpp>

namespace ref {

void run_region_by_region(const kiln::compiler::plan& p,
                          std::vector<kiln::runtime::buffer_ref> args,
                          std::vector<kiln::runtime::buffer_ref> results) {
  const kiln::cpu::interpreted_plan programs(p);
  std::vector<std::int64_t> sym(p.graph.symbols.size() + 1);
  // One arena for the whole call: region r reads what the regions before it left there.
  kiln::runtime::arena transients{p.arena(sym.data(), true)};
  auto memory = kiln::runtime::arena_pool::host_block(transients.layout.bytes);
  transients.host = memory.host;
  for (std::size_t r = 0; r < p.regions.size(); ++r) {
    std::vector<bool> only(p.regions.size(), false);
    only[r] = true;
    programs.run(p, args, results, sym.data(), &only, transients, "region_by_region");
  }
}

}  // namespace ref
