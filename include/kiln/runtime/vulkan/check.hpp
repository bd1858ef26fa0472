// Vulkan C API access for the runtime: the header, and a check that turns a failed call into a
// kiln::error naming the call and its VkResult.
#pragma once

#include <atomic>
#include <string>

#include <vulkan/vulkan.h>

#include "kiln/core/error.hpp"

namespace kiln::vulkan {

// A zeroed Vulkan info struct with its sType set (what `T x{sType}` means, without the
// missing-field-initializer warnings that form gives every user building with -Wextra).
template <class T>
T vk_struct(VkStructureType type) {
  T t{};
  t.sType = type;
  return t;
}

inline const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_INCOMPLETE:
      return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
      return "VkResult";
  }
}

// Test-only fault injection: set to n >= 0, the n-th Vulkan creation, allocation or submission
// kiln makes from then on fails with VK_ERROR_OUT_OF_DEVICE_MEMORY without being made (once; the
// count then stays below zero). Tests use it to check that every failure is a kiln::error, leaks
// nothing and leaves the device usable.
inline std::atomic<long> fail_creation_in{-1};

// Runs `call` (a Vulkan call that creates, allocates or submits), unless fault injection says
// this one fails.
template <class Call>
VkResult attempt(Call&& call) {
  if (fail_creation_in.load(std::memory_order_relaxed) >= 0 && fail_creation_in.fetch_sub(1) == 0)
    return VK_ERROR_OUT_OF_DEVICE_MEMORY;
  return call();
}

// Throws kiln::error(device_error) unless r is VK_SUCCESS.
inline void check(VkResult r, const char* call) {
  if (r != VK_SUCCESS)
    throw error(errc::device_error, "vulkan",
                std::string(call) + " failed: " + result_name(r) + " (" + std::to_string(r) + ")");
}

}  // namespace kiln::vulkan
