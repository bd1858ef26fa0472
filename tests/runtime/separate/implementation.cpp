// The one translation unit that compiles kiln's Vulkan runtime for this program.
#define KILN_RUNTIME_IMPLEMENTATION
#include <kiln/kiln.hpp>
