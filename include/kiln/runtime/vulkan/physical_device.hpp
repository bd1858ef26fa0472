// Choosing a physical device and describing it: which devices can serve kiln (Vulkan 1.2,
// timeline semaphores, a compute queue), which one is best, and its target description (the
// limits and features the SPIR-V emitter plans for). No VkDevice exists yet at this step.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/codegen/spirv/target.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/vulkan/check.hpp"

namespace kiln::vulkan {

// Discrete > integrated > virtual > CPU (lower is better).
inline int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 3;
    default:
      return 4;
  }
}

// The queue family kiln submits to: compute-capable, a compute-only one preferred (async compute
// on discrete GPUs); -1 when there is none.
inline int compute_family(VkPhysicalDevice pd) {
  std::uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> q(n);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q.data());
  int best = -1;
  for (int i = 0; i < static_cast<int>(n); ++i) {
    if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best < 0 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = i;
  }
  return best;
}

// Why a physical device cannot serve kiln (empty: it can).
inline std::string unusable(VkPhysicalDevice pd) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(pd, &p);
  std::string who = p.deviceName;
  if (p.apiVersion < VK_API_VERSION_1_2) return who + " supports only Vulkan < 1.2";
  auto f12 = vk_struct<VkPhysicalDeviceVulkan12Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  auto f = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  f.pNext = &f12;
  vkGetPhysicalDeviceFeatures2(pd, &f);
  if (!f12.timelineSemaphore) return who + " lacks timeline semaphores";
  if (compute_family(pd) < 0) return who + " has no compute queue";
  return "";
}

// Which devices the choice of the best one may take. The default device takes no CPU
// implementation of Vulkan (lavapipe, SwiftShader): kiln's own CPU path runs the same plan
// natively, its GEMM some 150x faster than lavapipe's on the same cores (PERFORMANCE.md).
enum class device_types { any, not_cpu };

// Device `index` of `devices`, or the best usable one of the given types for index < 0; throws
// kiln::error naming why none (or that one) can serve.
inline int choose_physical_device(const std::vector<VkPhysicalDevice>& devices, int index,
                                  device_types types = device_types::any) {
  if (index >= static_cast<int>(devices.size()))
    throw error(errc::invalid_argument, "device::vulkan",
                "device index " + std::to_string(index) + " does not exist (" +
                    std::to_string(devices.size()) + " Vulkan device" +
                    (devices.size() == 1 ? "" : "s") + ")");
  if (index >= 0) {
    if (auto reason = unusable(devices[index]); !reason.empty())
      throw error(errc::unsupported, "vulkan", reason);
    return index;
  }
  int chosen = -1, best_rank = 99;
  std::string why;
  for (int i = 0; i < static_cast<int>(devices.size()); ++i) {
    if (std::string reason = unusable(devices[i]); !reason.empty()) {
      why += (why.empty() ? "" : "; ") + reason;
      continue;
    }
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(devices[i], &p);
    if (types == device_types::not_cpu && p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
      why += (why.empty() ? "" : "; ") + std::string(p.deviceName) +
             " is a CPU implementation of Vulkan (KILN_DEVICE=vulkan runs on it)";
      continue;
    }
    if (type_rank(p.deviceType) < best_rank) {
      best_rank = type_rank(p.deviceType);
      chosen = i;
    }
  }
  if (chosen < 0)
    throw error(errc::unsupported, "vulkan",
                devices.empty() ? "no Vulkan device (no driver found by the loader)"
                                : "no usable Vulkan device: " + why);
  return chosen;
}

// What kiln knows of a physical device before it opens it.
struct physical_description {
  std::string name;
  spirv::target target;
  VkPhysicalDeviceProperties properties{};
  std::uint8_t uuid[VK_UUID_SIZE] = {};
  bool float64 = false, int64 = false;  // features to enable where present
  bool matrix_units = false;            // VK_NV_cooperative_matrix and shaderFloat16, to enable
  std::uint32_t family = 0;             // the compute queue family
  std::uint32_t timestamp_bits = 0;     // its timestampValidBits (0: no timestamps)
};

// The product of f16 matrices into f32 on the matrix units that VK_NV_cooperative_matrix offers,
// where the device has the extension and shaderFloat16: the shape with the most products per
// instruction among the subgroup-scope ones (0 x 0 x 0: none).
inline void describe_matrix_units(VkInstance instance, VkPhysicalDevice pd, bool float16,
                                  physical_description& d) {
  std::uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> extensions(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, extensions.data());
  const bool offered = std::any_of(extensions.begin(), extensions.end(), [](const auto& e) {
    return std::string_view(e.extensionName) == VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
  });
  auto properties = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (!offered || !float16 || !properties) return;
  auto features = vk_struct<VkPhysicalDeviceCooperativeMatrixFeaturesNV>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV);
  auto f = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  f.pNext = &features;
  vkGetPhysicalDeviceFeatures2(pd, &f);
  if (!features.cooperativeMatrix) return;
  n = 0;
  properties(pd, &n, nullptr);
  std::vector<VkCooperativeMatrixPropertiesNV> shapes(
      n, vk_struct<VkCooperativeMatrixPropertiesNV>(
             VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV));
  properties(pd, &n, shapes.data());
  spirv::target& t = d.target;
  for (const VkCooperativeMatrixPropertiesNV& s : shapes) {
    if (s.AType != VK_COMPONENT_TYPE_FLOAT16_NV || s.BType != VK_COMPONENT_TYPE_FLOAT16_NV ||
        s.CType != VK_COMPONENT_TYPE_FLOAT32_NV || s.DType != VK_COMPONENT_TYPE_FLOAT32_NV ||
        s.scope != VK_SCOPE_SUBGROUP_NV)
      continue;
    const spirv::target::gemm_tile fits = [&] {
      spirv::target with = t;
      with.f16_matrix_m = s.MSize;
      with.f16_matrix_n = s.NSize;
      with.f16_matrix_k = s.KSize;
      return with.gemm(true);
    }();
    if (!fits.on_matrix_units()) continue;  // a shape the tiles do not divide
    if (std::uint64_t(s.MSize) * s.NSize * s.KSize >
        std::uint64_t(t.f16_matrix_m) * t.f16_matrix_n * t.f16_matrix_k) {
      t.f16_matrix_m = s.MSize;
      t.f16_matrix_n = s.NSize;
      t.f16_matrix_k = s.KSize;
      d.matrix_units = true;
    }
  }
}

inline physical_description describe(VkInstance instance, VkPhysicalDevice pd) {
  auto p12 = vk_struct<VkPhysicalDeviceVulkan12Properties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES);
  auto p11 = vk_struct<VkPhysicalDeviceVulkan11Properties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES);
  p11.pNext = &p12;
  auto props =
      vk_struct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
  props.pNext = &p11;
  vkGetPhysicalDeviceProperties2(pd, &props);
  auto f12 = vk_struct<VkPhysicalDeviceVulkan12Features>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  auto f = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  f.pNext = &f12;
  vkGetPhysicalDeviceFeatures2(pd, &f);
  const VkPhysicalDeviceLimits& lim = props.properties.limits;

  physical_description d;
  d.name = props.properties.deviceName;
  d.properties = props.properties;
  std::copy(std::begin(p11.deviceUUID), std::end(p11.deviceUUID), d.uuid);
  d.float64 = f.features.shaderFloat64;
  d.int64 = f.features.shaderInt64;
  d.family = static_cast<std::uint32_t>(compute_family(pd));
  {
    std::uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
    std::vector<VkQueueFamilyProperties> families(n);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, families.data());
    d.timestamp_bits = d.family < n ? families[d.family].timestampValidBits : 0;
  }
  spirv::target& t = d.target;
  t.vulkan_version = props.properties.apiVersion;
  t.subgroup_size = p11.subgroupSize ? p11.subgroupSize : 32;
  t.subgroup_arithmetic = (p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                          (p11.subgroupSupportedOperations &
                           (VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT)) ==
                              (VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  t.max_workgroup_size_x =
      std::min(lim.maxComputeWorkGroupSize[0], lim.maxComputeWorkGroupInvocations);
  t.max_workgroup_count_x = lim.maxComputeWorkGroupCount[0];
  t.max_workgroup_count_y = lim.maxComputeWorkGroupCount[1];
  t.max_workgroup_count_z = lim.maxComputeWorkGroupCount[2];
  t.shared_memory_bytes = lim.maxComputeSharedMemorySize;
  t.max_storage_buffers = std::min(lim.maxPerStageDescriptorStorageBuffers, 64u);
  t.push_constant_bytes = lim.maxPushConstantsSize;
  t.max_storage_buffer_range = lim.maxStorageBufferRange;
  t.float64 = f.features.shaderFloat64;
  t.int64 = f.features.shaderInt64;
  t.int16 = f.features.shaderInt16;
  t.preserve_inf_nan32 = p12.shaderSignedZeroInfNanPreserveFloat32;
  t.preserve_inf_nan64 = p12.shaderSignedZeroInfNanPreserveFloat64;
  t.denorm_preserve32 = p12.shaderDenormPreserveFloat32;
  t.denorm_preserve64 = p12.shaderDenormPreserveFloat64;
  t.denorm_widths =
      p12.denormBehaviorIndependence == VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_ALL           ? 2
      : p12.denormBehaviorIndependence == VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_32_BIT_ONLY ? 1
                                                                                            : 0;
  t.cpu_device = props.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  describe_matrix_units(instance, pd, f12.shaderFloat16, d);
  return d;
}

}  // namespace kiln::vulkan
