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
