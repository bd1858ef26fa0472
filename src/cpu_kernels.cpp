// One instruction set's CPU kernels (runtime/cpu/kernels.hpp) for the runtime library: CMake
// compiles this file once per x86-64 level above the baseline (-march=x86-64-v3, x86-64-v4) and
// makes every symbol of each object local but its entry, so that no inline function compiled here
// for a wider set can stand in for the baseline runtime's copy of it at link time.
#define KILN_CPU_KERNELS_IMPLEMENTATION
#ifndef KILN_SEPARATE_RUNTIME
#define KILN_SEPARATE_RUNTIME
#endif
#include <kiln/runtime/cpu/kernels.hpp>

#ifndef KILN_CPU_KERNELS_ENTRY
#error "KILN_CPU_KERNELS_ENTRY names this object's entry (CMakeLists.txt)"
#endif

extern "C" const kiln::cpu::kernel_table* KILN_CPU_KERNELS_ENTRY() {
  return &kiln::cpu::kernels::table();
}
