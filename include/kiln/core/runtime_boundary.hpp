// Where the Vulkan runtime's heavy functions are compiled: in every translation unit that calls a
// function (the default: header-only), or once, when the program defines KILN_SEPARATE_RUNTIME
// everywhere and KILN_RUNTIME_IMPLEMENTATION in exactly one .cpp file before including kiln.
#pragma once

#if defined(KILN_SEPARATE_RUNTIME)
// Declared in every translation unit, defined (non-inline) in the implementation one.
#define KILN_RUNTIME_API
#if defined(KILN_RUNTIME_IMPLEMENTATION)
#define KILN_RUNTIME_BODY 1
#else
#define KILN_RUNTIME_BODY 0
#endif
#else
#define KILN_RUNTIME_API inline
#define KILN_RUNTIME_BODY 1
#endif

// The CPU kernels whose speed depends on the vector width (runtime/cpu/kernels.hpp): compiled
// wherever the runtime is, and once more in each of the runtime library's per-instruction-set
// objects (src/cpu_kernels.cpp, which defines KILN_CPU_KERNELS_IMPLEMENTATION).
#if KILN_RUNTIME_BODY || defined(KILN_CPU_KERNELS_IMPLEMENTATION)
#define KILN_CPU_KERNELS_BODY 1
#else
#define KILN_CPU_KERNELS_BODY 0
#endif
