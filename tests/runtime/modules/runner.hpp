// What the runtime-only translation unit (runner.cpp) offers the module tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace module_runner {
// Loads the module at `path` (x [rows, ?], b -> y, s) and runs it on "cpu" or "vulkan": y, then s.
std::vector<float> run_saved(const std::string& path, const std::vector<float>& x,
                             const std::vector<float>& b, std::int64_t rows,
                             const std::string& device_name);
std::string signature_of(const std::string& path);
}  // namespace module_runner
