// One Vulkan device as kiln uses it: the opened VkDevice with its memory pools, staging ring,
// pipelines and compute queue, made from a physical device chosen and described by
// physical_device.hpp. One context per device per process, shared by every function and buffer.
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
#include "kiln/runtime/host_counter.hpp"
#include "kiln/runtime/submission_queue.hpp"
#include "kiln/runtime/vulkan/handle.hpp"
#include "kiln/runtime/vulkan/instance.hpp"
#include "kiln/runtime/vulkan/memory.hpp"
#include "kiln/runtime/vulkan/physical_device.hpp"
#include "kiln/runtime/vulkan/pipelines.hpp"
#include "kiln/runtime/vulkan/profiler.hpp"
#include "kiln/runtime/vulkan/queue.hpp"
#include "kiln/runtime/vulkan/staging_ring.hpp"
#include "kiln/runtime/vulkan/timeline.hpp"

namespace kiln::vulkan {

class context {
 public:
  // The context of device `index` in enumeration order, or of the best device of the given types
  // for index < 0. Throws kiln::error (unsupported) when there is no usable device.
  static std::shared_ptr<context> get(int index = -1, device_types types = device_types::any);
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
  // Device-local memory the host can map (lavapipe, integrated GPUs, a discrete GPU's resizable
  // BAR): uploads are one memcpy.
  bool unified() const { return device_pool_->host_visible(); }
  // Whether the host reads mapped device memory as fast as its own: not a discrete GPU's, whose
  // mapped memory the host reads uncached (downloads then go through a staged copy).
  bool host_reads_device_memory() const { return !discrete_; }
  // Storage-buffer bindings start at multiples of this (minStorageBufferOffsetAlignment).
  VkDeviceSize storage_offset_alignment() const { return storage_offset_alignment_; }
  VkDevice device() const { return device_.get(); }
  VkPhysicalDevice physical() const { return physical_; }
  vulkan::instance& instance() { return *instance_; }
  pipeline_cache& pipelines() { return *pipelines_; }
  // The dispatch profiler while KILN_PROFILE asks for one (profiler.hpp), else null; also null,
  // with a notice once, where the queue takes no timestamps. Used under mutex().
  dispatch_profiler* profiler() {
    if (!profile_wanted()) return nullptr;
    if (!profiler_) {
      profiler_ =
          std::make_unique<dispatch_profiler>(device_.get(), timestamp_period_, timestamp_bits_);
      if (!profiler_->usable())
        std::fprintf(stderr, "kiln: KILN_PROFILE: %s's compute queue takes no timestamps\n",
                     name_.c_str());
    }
    return profiler_->usable() ? profiler_.get() : nullptr;
  }
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

  // The staging ring for host data of one call (callers hold mutex()).
  staging_ring& ring() {
    expect_live();
    return *ring_;
  }

  // The compute queue: submissions with wait and signal lists, their command buffers and
  // descriptor pools. Callers hold mutex().
  vulkan::queue& queue() {
    expect_live();
    return *queue_;
  }
  // Waits until every submission made so far has finished (before the host touches device memory
  // that a submission nobody waited for may use). Callers hold mutex(); direct submissions never
  // wait for the host queue, so this never waits for work that needs the lock.
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

  // Submissions that need the host (host data, regions on the CPU, a wait for a host fence), in
  // order on a worker thread, and the timeline they signal there (runtime/submission_queue.hpp).
  runtime::submission_queue& host_queue() { return host_queue_; }
  const std::shared_ptr<runtime::host_counter>& host_line() const { return host_line_; }
  // The device queue's own timeline, as fences see it (direct submissions signal it).
  const std::shared_ptr<semaphore_timeline>& device_line() const { return device_line_; }
  // A point on `semaphore`, a timeline semaphore made on this VkDevice by the program.
  std::shared_ptr<semaphore_timeline> external_line(VkSemaphore semaphore) const {
    return std::make_shared<semaphore_timeline>(device_.get(), semaphore, name_, live_);
  }
  // Keeps `what` (buffers, an arena, a program) until direct submission `value` has finished.
  // Callers hold no lock: what finished submissions kept goes here, and may take locks as it goes.
  void retain(std::uint64_t value, std::shared_ptr<void> what) {
    keep_until(value, std::move(what));
  }
  // Drops what finished direct submissions kept.
  void drop_finished() { keep_until(0, nullptr); }

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
  void keep_until(std::uint64_t value, std::shared_ptr<void> what) {
    std::vector<std::pair<std::uint64_t, std::shared_ptr<void>>> finished;
    std::lock_guard lock(retained_mutex_);
    if (!retained_.empty()) {
      const std::uint64_t done = device_line_->reached();
      auto running =
          std::ranges::partition(retained_, [&](const auto& r) { return r.first > done; });
      finished.assign(std::make_move_iterator(running.begin()),
                      std::make_move_iterator(running.end()));
      retained_.erase(running.begin(), running.end());
    }
    if (what) retained_.emplace_back(value, std::move(what));
  }

  // Work asked of a device after shutdown_all (from a static destructor at exit) is refused.
  void expect_live() const {
    if (!device_)
      throw error(errc::device_error, "vulkan",
                  name_ + " was shut down at process exit; no more work can run on it");
  }

  // Destroys what exists, in reverse order of creation: at exit (shutdown_all) and from the
  // destructor. A constructor that throws leaves its members to their own destructors.
  void release() {
    if (!device_) return;
    host_queue_.stop();  // runs what is queued
    vkDeviceWaitIdle(device_.get());
    retained_.clear();
    *live_ = false;
    profiler_.reset();
    queue_.reset();
    pipelines_.reset();
    ring_.reset();
    ring_pool_.reset();
    device_pool_.reset();
    host_pool_.reset();
    device_.reset();
  }

  context(std::shared_ptr<vulkan::instance> inst, VkPhysicalDevice pd, int index)
      : instance_(std::move(inst)), physical_(pd), index_(index) {
    physical_description d = describe(instance_->handle(), pd);
    name_ = d.name;
    target_ = d.target;
    storage_offset_alignment_ =
        std::max<VkDeviceSize>(d.properties.limits.minStorageBufferOffsetAlignment, 1);
    family_ = d.family;
    timestamp_period_ = d.properties.limits.timestampPeriod;
    timestamp_bits_ = d.timestamp_bits;
    // Enable only what kiln emits: timeline semaphores, 64-bit types where present, and the matrix
    // units' extension with shaderFloat16 where the device offers f16 products on them.
    auto on12 = vk_struct<VkPhysicalDeviceVulkan12Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
    on12.timelineSemaphore = VK_TRUE;
    auto on = vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    on.pNext = &on12;
    on.features.shaderFloat64 = d.float64;
    on.features.shaderInt64 = d.int64;
    // f16 products on the matrix units (spirv::target::f16_matrix_m)
    auto matrix = vk_struct<VkPhysicalDeviceCooperativeMatrixFeaturesNV>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV);
    const char* matrix_extension = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
    if (d.matrix_units) {
      matrix.cooperativeMatrix = VK_TRUE;
      on12.shaderFloat16 = VK_TRUE;
      on12.pNext = &matrix;
    }
    float priority = 1.0f;
    auto qi = vk_struct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    qi.queueFamilyIndex = family_;
    qi.queueCount = 1;
    qi.pQueuePriorities = &priority;
    auto di = vk_struct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    di.pNext = &on;
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
    di.enabledExtensionCount = d.matrix_units ? 1 : 0;
    di.ppEnabledExtensionNames = &matrix_extension;
    VkResult r = attempt([&] { return vkCreateDevice(pd, &di, nullptr, device_.receive()); });
    if (r != VK_SUCCESS) device_.abandon();
    check(r, "vkCreateDevice");
    // From here a throw destroys the members made so far (each owns its objects), the VkDevice
    // last; none of them is in use yet, so no wait is needed.
    discrete_ = d.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
    choose_memory(discrete_);
    ring_ = std::make_unique<staging_ring>(*ring_pool_);
    bool feedback =
        std::min(instance_->api_version(), d.properties.apiVersion) >= VK_API_VERSION_1_3;
    pipelines_ = std::make_unique<pipeline_cache>(device_.get(), d.properties, d.uuid, feedback);
    queue_ = std::make_unique<vulkan::queue>(device_.get(), family_);
    device_line_ =
        std::make_shared<semaphore_timeline>(device_.get(), queue_->timeline(), name_, live_);
    check_validation("device creation");
  }

  // The memory types of the device, host and staging pools. A discrete GPU's memory that the host
  // maps (its BAR, all of it where the BAR is resizable) is read by the host uncached: results
  // staged there came back at about 60 MB/s on an H200 (a BERT layer's call with host data took
  // 13.5 ms, 0.9 ms on device buffers), so there the host's and the staging pools take cached host
  // memory where the device offers it.
  void choose_memory(bool discrete) {
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
    if (int cached = find(host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT); discrete && cached >= 0)
      host_type = cached;
    if (host_type < 0)
      throw error(errc::unsupported, "vulkan", name_ + " has no host-visible memory");
    // A discrete GPU's small host-visible device-local heap (BAR) is not used as the general pool.
    bool is_unified = unified >= 0 && mp.memoryHeaps[mp.memoryTypes[unified].heapIndex].size >=
                                          (VkDeviceSize(1) << 30);
    if (is_unified) {
      const int staging = discrete ? host_type : unified;
      device_pool_ = std::make_unique<memory_pool>(device_.get(), unified, true);
      host_pool_ = std::make_unique<memory_pool>(device_.get(), staging, true);
      ring_pool_ = std::make_unique<memory_pool>(device_.get(), staging, true);
    } else {
      device_pool_ = std::make_unique<memory_pool>(
          device_.get(), device_type < 0 ? host_type : device_type, device_type < 0);
      host_pool_ = std::make_unique<memory_pool>(device_.get(), host_type, true);
      ring_pool_ = std::make_unique<memory_pool>(device_.get(), host_type, true);
    }
  }

  std::shared_ptr<vulkan::instance> instance_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  int index_ = 0;
  std::string name_;
  spirv::target target_;
  VkDeviceSize storage_offset_alignment_ = 256;
  // Destroyed in reverse order of declaration: the queue first, the VkDevice last.
  logical_device device_;
  std::uint32_t family_ = 0;
  bool discrete_ = false;
  std::unique_ptr<memory_pool> device_pool_, host_pool_, ring_pool_;
  std::unique_ptr<staging_ring> ring_;
  std::unique_ptr<pipeline_cache> pipelines_;
  std::unique_ptr<vulkan::queue> queue_;
  std::unique_ptr<dispatch_profiler> profiler_;
  float timestamp_period_ = 1;
  std::uint32_t timestamp_bits_ = 0;
  std::mutex mutex_, memory_mutex_, retained_mutex_;
  std::shared_ptr<std::atomic<bool>> live_ = std::make_shared<std::atomic<bool>>(true);
  std::shared_ptr<semaphore_timeline> device_line_;
  std::shared_ptr<runtime::host_counter> host_line_ = std::make_shared<runtime::host_counter>();
  std::vector<std::pair<std::uint64_t, std::shared_ptr<void>>> retained_;
  runtime::submission_queue host_queue_;  // stopped (release) before anything above goes
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

KILN_RUNTIME_API std::shared_ptr<context> context::get(int index, device_types types) {
  auto& reg = detail::registry();
  std::lock_guard lock(reg.mutex);
  auto& contexts = reg.contexts;
  auto inst = instance::get();
  if (!reg.instance) {
    reg.instance = inst;
    std::atexit(&context::shutdown_all);  // after vkCreateInstance loaded the layers: runs first
  }
  auto devices = inst->physical_devices();
  int chosen = choose_physical_device(devices, index, types);
  auto& slot = contexts[chosen];
  if (!slot) slot = std::shared_ptr<context>(new context(inst, devices[chosen], chosen));
  return slot;
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::vulkan
