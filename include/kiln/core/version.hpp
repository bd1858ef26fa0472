// kiln's version (the CMake project version): part of every on-disk cache key.
#pragma once

namespace kiln {
inline constexpr const char* version = "0.2.0";
}
