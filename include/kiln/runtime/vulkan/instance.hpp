// The Vulkan instance: one per process, with the Khronos validation layer when KILN_VALIDATE=1
// (every warning or error it reports is collected and turned into a kiln::error by the caller).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/codegen/spirv/tools.hpp"
#include "kiln/runtime/vulkan/check.hpp"

namespace kiln::vulkan {

// KILN_VALIDATE=1: validation layers (and spirv-val where SPIRV-Tools is built in). Read once,
// and said once on stderr, with what it turned on.
inline bool validate_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("KILN_VALIDATE");
    bool enabled = v && *v && std::string_view(v) != "0";
    if (enabled)
      std::fprintf(stderr, "kiln: KILN_VALIDATE: Khronos validation layer on; %s\n",
                   spirv::have_tools ? "spirv-val on every emitted kernel"
                                     : "no spirv-val (link kiln::spirv_tools for it)");
    return enabled;
  }();
  return on;
}

class instance {
 public:
  // The process's instance (created at the first call); throws kiln::error when no Vulkan 1.2
  // loader and driver can be had.
  static std::shared_ptr<instance> get() {
    static std::mutex m;
    static std::weak_ptr<instance> current;
    std::lock_guard lock(m);
    if (auto p = current.lock()) return p;
    auto p = std::shared_ptr<instance>(new instance());
    current = p;
    return p;
  }

  ~instance() { release(); }

  // Destroys the VkInstance (and the debug messenger); later calls do nothing. Runs at the latest
  // at process exit (context::shutdown_all), while the layers and the driver are still loaded.
  void release() {
    if (!handle_) return;
    if (messenger_) {
      auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(handle_, "vkDestroyDebugUtilsMessengerEXT"));
      if (destroy) destroy(handle_, messenger_, nullptr);
      messenger_ = VK_NULL_HANDLE;
    }
    vkDestroyInstance(handle_, nullptr);
    handle_ = VK_NULL_HANDLE;
  }
  instance(const instance&) = delete;
  instance& operator=(const instance&) = delete;

  VkInstance handle() const { return handle_; }
  std::uint32_t api_version() const { return api_version_; }
  bool validating() const { return messenger_ != VK_NULL_HANDLE; }

  std::vector<VkPhysicalDevice> physical_devices() const {
    std::uint32_t n = 0;
    check(vkEnumeratePhysicalDevices(handle_, &n, nullptr), "vkEnumeratePhysicalDevices");
    std::vector<VkPhysicalDevice> v(n);
    check(vkEnumeratePhysicalDevices(handle_, &n, v.data()), "vkEnumeratePhysicalDevices");
    v.resize(n);
    return v;
  }

  // Validation messages reported since the last call, oldest first.
  std::vector<std::string> take_messages() {
    std::lock_guard lock(messages_mutex_);
    return std::exchange(messages_, {});
  }

 private:
  instance() {
    std::uint32_t version = 0;
    if (vkEnumerateInstanceVersion(&version) != VK_SUCCESS || version < VK_API_VERSION_1_2)
      throw error(errc::unsupported, "vulkan", "the Vulkan loader is older than 1.2");
    auto app = vk_struct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "kiln";
    app.pEngineName = "kiln";
    // 1.3 where the loader has it (pipeline creation feedback is core there), else 1.2.
    api_version_ = version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;
    app.apiVersion = api_version_;
    std::vector<const char*> layers, extensions;
    bool validate = validate_enabled();
    if (validate) {
      if (!has_layer("VK_LAYER_KHRONOS_validation"))
        throw error(errc::unsupported, "vulkan",
                    "KILN_VALIDATE=1 but VK_LAYER_KHRONOS_validation is not installed "
                    "(Debian: vulkan-validationlayers)");
      layers.push_back("VK_LAYER_KHRONOS_validation");
      extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    }
    auto info = vk_struct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    info.pApplicationInfo = &app;
    info.enabledLayerCount = static_cast<std::uint32_t>(layers.size());
    info.ppEnabledLayerNames = layers.data();
    info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
    info.ppEnabledExtensionNames = extensions.data();
    auto debug = vk_struct<VkDebugUtilsMessengerCreateInfoEXT>(
        VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
    debug.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    debug.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    debug.pfnUserCallback = &instance::on_message;
    debug.pUserData = this;
    if (validate) info.pNext = &debug;  // also catches messages of instance creation itself
    VkResult created = attempt([&] { return vkCreateInstance(&info, nullptr, &handle_); });
    if (created == VK_ERROR_INCOMPATIBLE_DRIVER)
      throw error(errc::unsupported, "vulkan",
                  "no Vulkan driver found by the loader (vkCreateInstance: "
                  "VK_ERROR_INCOMPATIBLE_DRIVER)");
    check(created, "vkCreateInstance");
    if (validate) {
      auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(handle_, "vkCreateDebugUtilsMessengerEXT"));
      if (!create) {
        release();
        throw error(errc::device_error, "vulkan", "vkCreateDebugUtilsMessengerEXT missing");
      }
      VkResult r = attempt([&] { return create(handle_, &debug, nullptr, &messenger_); });
      if (r != VK_SUCCESS) {
        messenger_ = VK_NULL_HANDLE;
        release();  // no destructor runs for a constructor that throws
        check(r, "vkCreateDebugUtilsMessengerEXT");
      }
    }
  }

  static bool has_layer(std::string_view name) {
    std::uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, nullptr);
    std::vector<VkLayerProperties> v(n);
    vkEnumerateInstanceLayerProperties(&n, v.data());
    for (const auto& l : v)
      if (name == l.layerName) return true;
    return false;
  }

  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                                   VkDebugUtilsMessageTypeFlagsEXT,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                   void* self) {
    auto* inst = static_cast<instance*>(self);
    std::lock_guard lock(inst->messages_mutex_);
    inst->messages_.emplace_back(data && data->pMessage ? data->pMessage : "(no message)");
    return VK_FALSE;
  }

  VkInstance handle_ = VK_NULL_HANDLE;
  std::uint32_t api_version_ = VK_API_VERSION_1_2;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::mutex messages_mutex_;
  std::vector<std::string> messages_;
};

}  // namespace kiln::vulkan
