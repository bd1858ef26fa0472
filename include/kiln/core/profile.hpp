// KILN_PROFILE=1: whether a call reports where its time goes (on Vulkan each dispatch's device
// time, on the CPU each region's wall time), printed to stderr once the call is done.
#pragma once

#include <cstdlib>
#include <string_view>

namespace kiln {

// Read at each call, so a program may turn profiling on and off as it runs.
inline bool profile_wanted() {
  const char* v = std::getenv("KILN_PROFILE");
  return v && *v && std::string_view(v) != "0";
}

}  // namespace kiln
