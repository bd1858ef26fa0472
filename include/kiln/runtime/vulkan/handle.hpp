// Owning handles for Vulkan objects, and nothing more (IREE's drivers/vulkan/handle_util.h is the
// model): each destroys its object with the matching vkDestroy*/vkFree* when it goes, moves, never
// copies. Members of this type make a constructor that throws half way leak nothing: what was
// already created is destroyed with them.
#pragma once

#include <utility>

#include <vulkan/vulkan.h>

namespace kiln::vulkan {

// An object created from a VkDevice and destroyed with Destroy(device, object, nullptr).
template <class H, void (*Destroy)(VkDevice, H, const VkAllocationCallbacks*)>
class device_handle {
 public:
  device_handle() = default;
  device_handle(VkDevice device, H h) : device_(device), h_(h) {}
  device_handle(device_handle&& o) noexcept
      : device_(o.device_), h_(std::exchange(o.h_, VK_NULL_HANDLE)) {}
  device_handle& operator=(device_handle&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = o.device_;
      h_ = std::exchange(o.h_, VK_NULL_HANDLE);
    }
    return *this;
  }
  ~device_handle() { reset(); }

  void reset() {
    if (h_ != VK_NULL_HANDLE) Destroy(device_, h_, nullptr);
    h_ = VK_NULL_HANDLE;
  }
  H get() const { return h_; }
  explicit operator bool() const { return h_ != VK_NULL_HANDLE; }
  // Where a vkCreate* call writes the new object (what was held before is destroyed first).
  H* receive(VkDevice device) {
    reset();
    device_ = device;
    return &h_;
  }
  // After a failed vkCreate*: whatever the call left in the output is not an object.
  void abandon() { h_ = VK_NULL_HANDLE; }

 private:
  VkDevice device_ = VK_NULL_HANDLE;
  H h_ = VK_NULL_HANDLE;
};

using buffer_handle = device_handle<VkBuffer, vkDestroyBuffer>;
using memory_handle = device_handle<VkDeviceMemory, vkFreeMemory>;
using pipeline_handle = device_handle<VkPipeline, vkDestroyPipeline>;
using pipeline_layout_handle = device_handle<VkPipelineLayout, vkDestroyPipelineLayout>;
using set_layout_handle = device_handle<VkDescriptorSetLayout, vkDestroyDescriptorSetLayout>;
using shader_module_handle = device_handle<VkShaderModule, vkDestroyShaderModule>;
using pipeline_cache_handle = device_handle<VkPipelineCache, vkDestroyPipelineCache>;
using descriptor_pool_handle = device_handle<VkDescriptorPool, vkDestroyDescriptorPool>;
using command_pool_handle = device_handle<VkCommandPool, vkDestroyCommandPool>;
using semaphore_handle = device_handle<VkSemaphore, vkDestroySemaphore>;
using query_pool_handle = device_handle<VkQueryPool, vkDestroyQueryPool>;

// The VkDevice itself (destroyed last, after everything made from it).
class logical_device {
 public:
  logical_device() = default;
  logical_device(logical_device&& o) noexcept : d_(std::exchange(o.d_, VK_NULL_HANDLE)) {}
  logical_device& operator=(logical_device&& o) noexcept {
    if (this != &o) {
      reset();
      d_ = std::exchange(o.d_, VK_NULL_HANDLE);
    }
    return *this;
  }
  ~logical_device() { reset(); }

  void reset() {
    if (d_ != VK_NULL_HANDLE) vkDestroyDevice(d_, nullptr);
    d_ = VK_NULL_HANDLE;
  }
  VkDevice get() const { return d_; }
  explicit operator bool() const { return d_ != VK_NULL_HANDLE; }
  VkDevice* receive() {
    reset();
    return &d_;
  }
  void abandon() { d_ = VK_NULL_HANDLE; }

 private:
  VkDevice d_ = VK_NULL_HANDLE;
};

}  // namespace kiln::vulkan
