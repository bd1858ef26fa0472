// Compute pipelines: created once per kernel (keyed by a hash of its SPIR-V words and the
// workgroup size) and kept in memory; a VkPipelineCache backs them on disk in KILN_CACHE_DIR
// (default ~/.cache/kiln), in a file named by device UUID, driver version and kiln version.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kiln/codegen/spirv/kernel.hpp"
#include "kiln/core/hash.hpp"
#include "kiln/core/version.hpp"
#include "kiln/runtime/vulkan/check.hpp"
#include "kiln/runtime/vulkan/handle.hpp"

namespace kiln::vulkan {

// Where pipeline caches live: KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
inline std::filesystem::path cache_directory() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::filesystem::path(x) / "kiln";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::filesystem::path(h) / ".cache" / "kiln";
  return {};
}

// The cache file's name for a device: its UUID, driver version and kiln's version.
inline std::string cache_file_name(const std::uint8_t* device_uuid, std::uint32_t driver_version) {
  char hex[2 * VK_UUID_SIZE + 1];
  for (unsigned i = 0; i < VK_UUID_SIZE; ++i) std::snprintf(hex + 2 * i, 3, "%02x", device_uuid[i]);
  return "pipelines-" + std::string(hex) + "-" + std::to_string(driver_version) + "-kiln" +
         version + ".bin";
}

// Destroyed in reverse order of declaration: the pipeline, then its layouts.
struct pipeline {
  set_layout_handle set_layout;
  pipeline_layout_handle layout;
  pipeline_handle handle;
  std::uint32_t bindings = 0;
  std::uint32_t push_bytes = 0;  // 0: metadata travels in the last binding
};

class pipeline_cache {
 public:
  struct statistics {
    std::size_t loaded_bytes = 0;  // size of the on-disk cache read at start
    int created = 0;               // pipelines created by this process
    int cache_hits = 0;            // of those, found in the VkPipelineCache (creation feedback)
  };

  pipeline_cache(VkDevice device, const VkPhysicalDeviceProperties& props, const std::uint8_t* uuid,
                 bool feedback)
      : device_(device), feedback_(feedback) {
    if (auto dir = cache_directory(); !dir.empty())
      file_ = dir / cache_file_name(uuid, props.driverVersion);
    std::vector<char> data = read_cache_file(props);
    auto ci = vk_struct<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
    ci.initialDataSize = data.size();
    ci.pInitialData = data.empty() ? nullptr : data.data();
    // A stale or foreign file is not an error: the driver ignores data it does not recognise.
    if (attempt([&] {
          return vkCreatePipelineCache(device_, &ci, nullptr, cache_.receive(device_));
        }) != VK_SUCCESS) {
      cache_.abandon();
      ci.initialDataSize = 0;
      ci.pInitialData = nullptr;
      VkResult r = attempt(
          [&] { return vkCreatePipelineCache(device_, &ci, nullptr, cache_.receive(device_)); });
      if (r != VK_SUCCESS) cache_.abandon();
      check(r, "vkCreatePipelineCache");
    } else {
      stats_.loaded_bytes = data.size();
    }
  }
  ~pipeline_cache() { save(); }  // then the pipelines, then the VkPipelineCache
  pipeline_cache(const pipeline_cache&) = delete;
  pipeline_cache& operator=(const pipeline_cache&) = delete;

  const statistics& stats() const { return stats_; }

  // The cache file's bytes when they are a pipeline cache of this device, else nothing (with a
  // one-line notice where the file is there but unusable). Never blocks: only a regular file is
  // opened, so a FIFO or a directory at that path is skipped (and never written either).
  std::vector<char> read_cache_file(const VkPhysicalDeviceProperties& props) {
    std::vector<char> data;
    if (file_.empty()) return data;
    std::error_code ec;
    auto status = std::filesystem::status(file_, ec);
    if (ec || status.type() == std::filesystem::file_type::not_found) return data;
    auto skip = [&](const char* why) {
      std::fprintf(stderr, "kiln: pipeline cache %s %s; not used\n", file_.c_str(), why);
      data.clear();
      return data;
    };
    if (status.type() != std::filesystem::file_type::regular) {
      file_.clear();
      return skip("is not a regular file");
    }
    try {
      std::ifstream in(file_, std::ios::binary);
      if (!in) return skip("cannot be read");
      data.assign(std::istreambuf_iterator<char>(in), {});
    } catch (const std::exception&) {
      return skip("cannot be read");
    }
    // VkPipelineCacheHeaderVersionOne: header size, version, vendor, device, cache UUID.
    VkPipelineCacheHeaderVersionOne h{};
    if (data.size() < sizeof h) return skip("is truncated");
    std::memcpy(&h, data.data(), sizeof h);
    if (h.headerSize < sizeof h || h.headerSize > data.size() ||
        h.headerVersion != VK_PIPELINE_CACHE_HEADER_VERSION_ONE || h.vendorID != props.vendorID ||
        h.deviceID != props.deviceID ||
        std::memcmp(h.pipelineCacheUUID, props.pipelineCacheUUID, VK_UUID_SIZE) != 0)
      return skip("was written by another device or driver");
    return data;
  }
  const std::filesystem::path& file() const { return file_; }

  // The pipeline of kernel k run with `workgroup` invocations per workgroup (created at first use).
  const pipeline& get(const spirv::kernel& k, std::uint32_t workgroup) {
    const std::uint64_t key = kiln::detail::fnv1a(k.code, workgroup);
    if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
    const auto started = std::chrono::steady_clock::now();
    made m = create(k, workgroup);
    return keep(key, std::move(m), started);
  }

  // The pipelines of `kernels` (kernel, workgroup), in order; those that do not exist yet made
  // several at once: a first call of many regions waits about as long as its slowest pipeline
  // takes the driver, not the sum. A failure is thrown once every thread has finished (what was
  // made is kept).
  std::vector<const pipeline*> get_all(
      std::span<const std::pair<const spirv::kernel*, std::uint32_t>> kernels) {
    std::vector<std::uint64_t> keys;
    std::vector<const pipeline*> found;
    std::vector<std::size_t> missing;  // the first entry of each key to make
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      keys.push_back(kiln::detail::fnv1a(kernels[i].first->code, kernels[i].second));
      auto it = pipelines_.find(keys.back());
      found.push_back(it == pipelines_.end() ? nullptr : &it->second);
      bool seen = found.back() != nullptr;
      for (std::size_t j : missing) seen = seen || keys[j] == keys.back();
      if (!seen) missing.push_back(i);
    }
    if (!missing.empty()) {
      const auto started = std::chrono::steady_clock::now();
      std::vector<std::optional<made>> out(missing.size());
      std::vector<std::exception_ptr> failed(missing.size());
      std::atomic<std::size_t> next{0};
      auto work = [&] {
        for (std::size_t j; (j = next.fetch_add(1)) < missing.size();) {
          const auto& [kernel, workgroup] = kernels[missing[j]];
          try {
            out[j] = create(*kernel, workgroup);
          } catch (...) {
            failed[j] = std::current_exception();
          }
        }
      };
      const std::size_t threads =
          std::min<std::size_t>(missing.size(), std::max(1u, std::thread::hardware_concurrency()));
      std::vector<std::thread> helpers;
      for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
      work();
      for (auto& h : helpers) h.join();
      for (std::size_t j = 0; j < missing.size(); ++j)
        if (out[j]) keep(keys[missing[j]], std::move(*out[j]), started);
      for (const auto& f : failed)
        if (f) std::rethrow_exception(f);
      for (std::size_t i = 0; i < kernels.size(); ++i)
        if (!found[i]) found[i] = &pipelines_.find(keys[i])->second;
    }
    return found;
  }

  // Writes the VkPipelineCache to its file (through a temporary file, so readers never see half).
  void save() {
    if (!dirty_ || file_.empty()) return;
    dirty_ = false;
    std::size_t n = 0;
    if (vkGetPipelineCacheData(device_, cache_.get(), &n, nullptr) != VK_SUCCESS || n == 0) return;
    std::vector<char> data(n);
    if (vkGetPipelineCacheData(device_, cache_.get(), &n, data.data()) != VK_SUCCESS) return;
    std::error_code ec;
    std::filesystem::create_directories(file_.parent_path(), ec);
    auto tmp = file_;
    tmp += ".tmp" + std::to_string(reinterpret_cast<std::uintptr_t>(this));
    {
      std::ofstream out(tmp, std::ios::binary);
      if (!out) return;  // an unwritable cache directory costs only the next process's time
      out.write(data.data(), static_cast<std::streamsize>(n));
    }
    std::filesystem::rename(tmp, file_, ec);
  }

 private:
  // A pipeline made for kernel k, timed, with whether the driver's cache held it: no member but
  // the device and cache handles is read, so several are made at once (prepare).
  struct made {
    pipeline p;
    bool cache_hit = false;
  };
  made create(const spirv::kernel& k, std::uint32_t workgroup) const {
    pipeline p;
    p.bindings = k.bindings;
    p.push_bytes = k.metadata_in_buffer ? 0 : k.metadata * 4;
    shader_module_handle module;
    // A failure throws; the handles destroy what this call made so far.
    auto fail = [&](VkResult r, const char* call) { check(r, call); };
    std::vector<VkDescriptorSetLayoutBinding> b(k.bindings);
    for (std::uint32_t i = 0; i < k.bindings; ++i)
      b[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    auto li = vk_struct<VkDescriptorSetLayoutCreateInfo>(
        VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    li.bindingCount = k.bindings;
    li.pBindings = b.data();
    if (VkResult r = attempt([&] {
          return vkCreateDescriptorSetLayout(device_, &li, nullptr, p.set_layout.receive(device_));
        });
        r != VK_SUCCESS) {
      p.set_layout.abandon();
      fail(r, "vkCreateDescriptorSetLayout");
    }
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_bytes};
    auto pl = vk_struct<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
    pl.setLayoutCount = 1;
    VkDescriptorSetLayout set_layout = p.set_layout.get();
    pl.pSetLayouts = &set_layout;
    pl.pushConstantRangeCount = p.push_bytes ? 1 : 0;
    pl.pPushConstantRanges = &range;
    if (VkResult r = attempt([&] {
          return vkCreatePipelineLayout(device_, &pl, nullptr, p.layout.receive(device_));
        });
        r != VK_SUCCESS) {
      p.layout.abandon();
      fail(r, "vkCreatePipelineLayout");
    }
    auto si = vk_struct<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
    si.codeSize = k.code.size() * 4;
    si.pCode = k.code.data();
    if (VkResult r = attempt(
            [&] { return vkCreateShaderModule(device_, &si, nullptr, module.receive(device_)); });
        r != VK_SUCCESS) {
      module.abandon();
      fail(r, "vkCreateShaderModule");
    }
    VkSpecializationMapEntry entry{0, 0, 4};
    VkSpecializationInfo spec{1, &entry, 4, &workgroup};
    auto ci =
        vk_struct<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
    ci.stage = {};
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module.get();
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = &spec;
    ci.layout = p.layout.get();
    VkPipelineCreationFeedback whole{}, stage{};
    auto fb = vk_struct<VkPipelineCreationFeedbackCreateInfo>(
        VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO);
    fb.pPipelineCreationFeedback = &whole;
    fb.pipelineStageCreationFeedbackCount = 1;
    fb.pPipelineStageCreationFeedbacks = &stage;
    if (feedback_) ci.pNext = &fb;
    VkResult r = attempt([&] {
      return vkCreateComputePipelines(device_, cache_.get(), 1, &ci, nullptr,
                                      p.handle.receive(device_));
    });
    if (r != VK_SUCCESS) {
      p.handle.abandon();
      fail(r, "vkCreateComputePipelines");
    }
    module.reset();
    return {std::move(p),
            feedback_ && (whole.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
                (whole.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT)};
  }

  // Keeps a pipeline made since `started`; a first call that builds many pipelines on a slow
  // compiler (lavapipe's LLVM: seconds for a GEMM region) says so once the building has taken a
  // second, once per device, rather than look hung.
  const pipeline& keep(std::uint64_t key, made m, std::chrono::steady_clock::time_point started) {
    building_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ++stats_.created;
    if (m.cache_hit) ++stats_.cache_hits;
    if (!said_slow_ && building_seconds_ > 1.0) {
      said_slow_ = true;
      std::fprintf(stderr,
                   "kiln: building Vulkan pipelines takes a while on this device (%.1f s for the "
                   "%d so far); %s\n",
                   building_seconds_, stats_.created,
                   file_.empty()
                       ? "no pipeline cache is kept (KILN_CACHE_DIR)"
                       : ("they are kept in " + file_.string() + " for the next process").c_str());
    }
    dirty_ = true;
    return pipelines_.emplace(key, std::move(m.p)).first->second;
  }

  VkDevice device_;
  bool feedback_;
  pipeline_cache_handle cache_;  // declared before the pipelines: destroyed after them
  std::filesystem::path file_;
  std::map<std::uint64_t, pipeline> pipelines_;
  statistics stats_;
  bool dirty_ = false;
  double building_seconds_ = 0;  // in vkCreateComputePipelines, this process
  bool said_slow_ = false;
};

}  // namespace kiln::vulkan
