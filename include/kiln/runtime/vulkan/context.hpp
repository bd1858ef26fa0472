// One Vulkan device as kiln uses it: the chosen physical device, its target description, memory
// pools, the staging ring, pipelines, and the compute queue (queue.hpp). One context per device
// per process, shared by every function and buffer.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/codegen/spirv/target.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/vulkan/instance.hpp"
#include "kiln/runtime/vulkan/memory.hpp"
#include "kiln/runtime/vulkan/pipelines.hpp"
#include "kiln/runtime/vulkan/queue.hpp"

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

class context {
 public:
  // The context of device `index` in enumeration order, or of the best device for index < 0.
  // Throws kiln::error (unsupported) when there is no usable device.
  static std::shared_ptr<context> get(int index = -1);
  // Destroys every context's Vulkan objects and the instance. Registered with std::atexit after
  // the instance exists, so it runs before the static destructors of the layers and drivers the
  // loader brought in (destroying a device after those are gone leaks it, and can crash). Buffers
  // and devices still held after it are inert: freeing them does nothing.
  static void shutdown_all();

  ~context() { release(); }
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  const spirv::target& target() const { return target_; }
  const std::string& name() const { return name_; }
  int index() const { return index_; }
  // Device-local memory the host can map (lavapipe, integrated GPUs): uploads are one memcpy.
  bool unified() const { return device_pool_->host_visible(); }
  VkDevice device() const { return device_; }
  vulkan::instance& instance() { return *instance_; }
  pipeline_cache& pipelines() { return *pipelines_; }
  std::mutex& mutex() { return mutex_; }

  allocation allocate_device(VkDeviceSize bytes) {
    std::lock_guard lock(memory_mutex_);
    expect_live();
    return device_pool_->allocate(bytes);
  }
  void release_device(const allocation& a) {
    std::lock_guard lock(memory_mutex_);
    if (device_pool_) device_pool_->release(a);  // none after shutdown_all
  }
  // Host-visible memory for staging; released by the caller.
  allocation allocate_host(VkDeviceSize bytes) {
    std::lock_guard lock(memory_mutex_);
    expect_live();
    return host_pool_->allocate(bytes);
  }
  void release_host(const allocation& a) {
    std::lock_guard lock(memory_mutex_);
    if (host_pool_) host_pool_->release(a);
  }

  // The staging ring for host data of one call (callers hold mutex()). Calls are synchronous, so
  // the ring starts over at each call; it grows to the largest call seen.
  void ring_reset() { ring_used_ = 0; }
  allocation ring_take(VkDeviceSize bytes) {
    VkDeviceSize size = padded(bytes);
    if (ring_used_ + size > ring_.size) {
      // Grow: a new ring for what is left of this call and everything after. Ranges already
      // handed out in this call stay valid in the old block until the call ends.
      if (ring_.block) retired_.push_back(ring_);
      ring_ = ring_pool_->allocate(std::max<VkDeviceSize>(2 * (ring_.size + size), 1 << 20));
      ring_used_ = 0;
    }
    allocation a{ring_.block, ring_.offset + ring_used_, size};
    ring_used_ += size;
    return a;
  }
  void ring_end_call() {
    for (auto& r : retired_) ring_pool_->release(r);
    retired_.clear();
    ring_used_ = 0;
  }

  // The compute queue: submissions with wait and signal lists, their command buffers and
  // descriptor pools. Callers hold mutex().
  vulkan::queue& queue() {
    expect_live();
    return *queue_;
  }
  // Waits until every submission made so far has finished (before the host touches device memory
  // that a submission nobody waited for may use).
  void finish_submitted() {
    if (queue_) queue_->wait(queue_->last_submitted());
  }
  // One synchronous submission: runs record(command_buffer) into a fresh command buffer, submits
  // it and waits for it.
  template <class Record>
  void submit_and_wait(Record&& record) {
    VkCommandBuffer cb = queue().begin(0, 0);
    record(cb);
    queue_->wait(queue_->submit());
  }

  // Throws kiln::error when the validation layer reported anything since the last check.
  void check_validation(const std::string& what) {
    if (!instance_->validating()) return;
    auto messages = instance_->take_messages();
    if (messages.empty()) return;
    std::string text;
    for (auto& m : messages) text += "\n  " + m;
    throw error(errc::device_error, "vulkan",
                "validation layer reported during " + what + ":" + text);
  }

 private:
  // Work asked of a device after shutdown_all (from a static destructor at exit) is refused.
  void expect_live() const {
    if (!device_)
      throw error(errc::device_error, "vulkan",
                  name_ + " was shut down at process exit; no more work can run on it");
  }

  // Destroys what exists, in reverse order of creation (also when the constructor failed half way).
  void release() {
    if (!device_) return;
    vkDeviceWaitIdle(device_);
    queue_.reset();
    pipelines_.reset();
    ring_pool_.reset();
    device_pool_.reset();
    host_pool_.reset();
    vkDestroyDevice(device_, nullptr);
    device_ = VK_NULL_HANDLE;
  }

  // Why a physical device cannot serve kiln (empty: it can).
  static std::string unusable(VkPhysicalDevice pd) {
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
  static int compute_family(VkPhysicalDevice pd) {
    std::uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
    std::vector<VkQueueFamilyProperties> q(n);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q.data());
    int best = -1;
    for (int i = 0; i < static_cast<int>(n); ++i) {
      if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
      // Prefer a compute-only family (async compute on discrete GPUs).
      if (best < 0 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = i;
    }
    return best;
  }

  context(std::shared_ptr<vulkan::instance> inst, VkPhysicalDevice pd, int index)
      : instance_(std::move(inst)), physical_(pd), index_(index) {
    auto p12 = vk_struct<VkPhysicalDeviceVulkan12Properties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES);
    auto p11 = vk_struct<VkPhysicalDeviceVulkan11Properties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES);
    p11.pNext = &p12;
    auto props =
        vk_struct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
    props.pNext = &p11;
    vkGetPhysicalDeviceProperties2(pd, &props);
    const VkPhysicalDeviceLimits& lim = props.properties.limits;
    name_ = props.properties.deviceName;
    auto f = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    vkGetPhysicalDeviceFeatures2(pd, &f);

    target_.vulkan_version = props.properties.apiVersion;
    target_.subgroup_size = p11.subgroupSize ? p11.subgroupSize : 32;
    target_.max_workgroup_size_x =
        std::min(lim.maxComputeWorkGroupSize[0], lim.maxComputeWorkGroupInvocations);
    target_.max_workgroup_count_x = lim.maxComputeWorkGroupCount[0];
    target_.shared_memory_bytes = lim.maxComputeSharedMemorySize;
    target_.max_storage_buffers = std::min(lim.maxPerStageDescriptorStorageBuffers, 64u);
    target_.push_constant_bytes = lim.maxPushConstantsSize;
    target_.max_storage_buffer_range = lim.maxStorageBufferRange;
    target_.float64 = f.features.shaderFloat64;
    target_.int64 = f.features.shaderInt64;
    target_.int16 = f.features.shaderInt16;
    target_.preserve_inf_nan32 = p12.shaderSignedZeroInfNanPreserveFloat32;
    target_.preserve_inf_nan64 = p12.shaderSignedZeroInfNanPreserveFloat64;

    // Enable only what kiln emits: timeline semaphores, and 64-bit types where present.
    auto on12 = vk_struct<VkPhysicalDeviceVulkan12Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
    on12.timelineSemaphore = VK_TRUE;
    auto on = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    on.pNext = &on12;
    on.features.shaderFloat64 = f.features.shaderFloat64;
    on.features.shaderInt64 = f.features.shaderInt64;
    family_ = static_cast<std::uint32_t>(compute_family(pd));
    float priority = 1.0f;
    auto qi = vk_struct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    qi.queueFamilyIndex = family_;
    qi.queueCount = 1;
    qi.pQueuePriorities = &priority;
    auto di = vk_struct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    di.pNext = &on;
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
    check(attempt([&] { return vkCreateDevice(pd, &di, nullptr, &device_); }), "vkCreateDevice");
    try {
      create_objects(props.properties, p11);
    } catch (...) {
      release();  // no destructor runs for a constructor that throws
      throw;
    }
  }

  // Everything made from the VkDevice: memory pools, pipelines, the queue.
  void create_objects(const VkPhysicalDeviceProperties& props,
                      const VkPhysicalDeviceVulkan11Properties& p11) {
    choose_memory();
    bool feedback = std::min(instance_->api_version(), props.apiVersion) >= VK_API_VERSION_1_3;
    pipelines_ = std::make_unique<pipeline_cache>(device_, props, p11.deviceUUID, feedback);
    queue_ = std::make_unique<vulkan::queue>(device_, family_);
    check_validation("device creation");
  }

  void choose_memory() {
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(physical_, &mp);
    auto find = [&](VkMemoryPropertyFlags want) -> int {
      for (std::uint32_t i = 0; i < mp.memoryTypeCount; ++i)
        if ((mp.memoryTypes[i].propertyFlags & want) == want) return static_cast<int>(i);
      return -1;
    };
    constexpr auto local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    constexpr auto host =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int unified = find(local | host);
    int device_type = find(local);
    int host_type = find(host);
    if (host_type < 0)
      throw error(errc::unsupported, "vulkan", name_ + " has no host-visible memory");
    // A discrete GPU's small host-visible device-local heap (BAR) is not used as the general pool.
    bool is_unified = unified >= 0 && mp.memoryHeaps[mp.memoryTypes[unified].heapIndex].size >=
                                          (VkDeviceSize(1) << 30);
    if (is_unified) {
      device_pool_ = std::make_unique<memory_pool>(device_, unified, true);
      host_pool_ = std::make_unique<memory_pool>(device_, unified, true);
      ring_pool_ = std::make_unique<memory_pool>(device_, unified, true);
    } else {
      device_pool_ = std::make_unique<memory_pool>(
          device_, device_type < 0 ? host_type : device_type, device_type < 0);
      host_pool_ = std::make_unique<memory_pool>(device_, host_type, true);
      ring_pool_ = std::make_unique<memory_pool>(device_, host_type, true);
    }
  }

  std::shared_ptr<vulkan::instance> instance_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  int index_ = 0;
  std::string name_;
  spirv::target target_;
  VkDevice device_ = VK_NULL_HANDLE;
  std::uint32_t family_ = 0;
  std::unique_ptr<memory_pool> device_pool_, host_pool_, ring_pool_;
  std::unique_ptr<pipeline_cache> pipelines_;
  std::unique_ptr<vulkan::queue> queue_;
  allocation ring_;
  VkDeviceSize ring_used_ = 0;
  std::vector<allocation> retired_;
  std::mutex mutex_, memory_mutex_;
};

#if KILN_RUNTIME_BODY
namespace detail {
// The open contexts by device index, and the instance they were made from.
struct context_registry {
  std::mutex mutex;
  std::map<int, std::shared_ptr<context>> contexts;
  std::shared_ptr<vulkan::instance> instance;
};
inline context_registry& registry() {
  static context_registry r;
  return r;
}
}  // namespace detail

KILN_RUNTIME_API void context::shutdown_all() {
  auto& r = detail::registry();
  std::lock_guard lock(r.mutex);
  for (auto& [index, ctx] : r.contexts) ctx->release();
  if (r.instance) r.instance->release();
}

KILN_RUNTIME_API std::shared_ptr<context> context::get(int index) {
  auto& reg = detail::registry();
  std::lock_guard lock(reg.mutex);
  auto& contexts = reg.contexts;
  auto inst = instance::get();
  if (!reg.instance) {
    reg.instance = inst;
    std::atexit(&context::shutdown_all);  // after vkCreateInstance loaded the layers: runs first
  }
  auto devices = inst->physical_devices();
  int chosen = index;
  std::string why;
  if (index < 0) {
    int best_rank = 99;
    for (int i = 0; i < static_cast<int>(devices.size()); ++i) {
      std::string reason = unusable(devices[i]);
      if (!reason.empty()) {
        why += (why.empty() ? "" : "; ") + reason;
        continue;
      }
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(devices[i], &p);
      if (type_rank(p.deviceType) < best_rank) {
        best_rank = type_rank(p.deviceType);
        chosen = i;
      }
    }
    if (chosen < 0)
      throw error(errc::unsupported, "vulkan",
                  devices.empty() ? "no Vulkan device (no driver found by the loader)"
                                  : "no usable Vulkan device: " + why);
  } else if (index >= static_cast<int>(devices.size())) {
    throw error(errc::invalid_argument, "device::vulkan",
                "device index " + std::to_string(index) + " does not exist (" +
                    std::to_string(devices.size()) + " Vulkan device" +
                    (devices.size() == 1 ? "" : "s") + ")");
  } else if (auto reason = unusable(devices[index]); !reason.empty()) {
    throw error(errc::unsupported, "vulkan", reason);
  }
  auto& slot = contexts[chosen];
  if (!slot) slot = std::shared_ptr<context>(new context(inst, devices[chosen], chosen));
  return slot;
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::vulkan
