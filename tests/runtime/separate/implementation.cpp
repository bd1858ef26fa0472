// The one translation unit that compiles kiln's Vulkan runtime and CPU interpreter for this
// program (executable.hpp brings both doors).
#define KILN_RUNTIME_IMPLEMENTATION
#include <kiln/executable.hpp>
