# kiln's dependencies, found the same way when building kiln and when a consumer loads kilnConfig.
include(CMakeFindDependencyMacro)
find_dependency(xsimd)
# Debian's xsimd export names "xtl" as a link dependency without finding it; kiln does not use
# xtl, so an empty target stands in when libxtl-dev is absent.
if(NOT TARGET xtl)
  add_library(xtl INTERFACE IMPORTED)
endif()
# The CPU path runs on kiln's own worker threads (runtime/cpu/thread_pool.hpp).
find_dependency(Threads)
find_dependency(range-v3)
# Vulkan: the loader and headers (libvulkan-dev). Drivers are found at run time; with none, kiln
# runs on the CPU.
find_dependency(Vulkan)
