// kiln's runtime, compiled once per program: the Vulkan back end (device choice, SPIR-V emission,
// pipelines, memory, the executor), the CPU worker pool and the run-time door's interpreter. The
// CMake package adds it to every target that links kiln::kiln (as the static library
// kiln_runtime); a program built without CMake includes kiln's headers alone (header-only), or
// defines KILN_SEPARATE_RUNTIME everywhere and compiles this file once.
#define KILN_RUNTIME_IMPLEMENTATION
#ifndef KILN_SEPARATE_RUNTIME
#define KILN_SEPARATE_RUNTIME
#endif
#include <kiln/executable.hpp>

// kiln::fn's services (function.hpp's detail::fn_door): here, unless the build compiles them in
// an object of their own (kiln's CMake package does, so that a program that only runs modules
// links no compiler pass).
#ifndef KILN_FN_DOOR_APART
#include "fn_door.cpp"
#endif
