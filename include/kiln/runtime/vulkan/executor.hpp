// Runs a plan on a Vulkan device: per region, the operand layouts of this call pick a kernel
// (emitted at first use, pipelines cached), host data is staged through the ring, every region
// is one dispatch of one command buffer, submitted with a timeline semaphore and waited for.
// Regions the device cannot run go to the CPU (a one-line notice, once), overlapping the GPU.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "kiln/codegen/spirv/emit_region.hpp"
#include "kiln/codegen/spirv/tools.hpp"
#include "kiln/core/hash.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/signature.hpp"
#include "kiln/runtime/vulkan/device_memory.hpp"

namespace kiln::vulkan {

// KILN_DUMP_DIR, read once (empty: no dumps).
inline const std::filesystem::path& dump_directory() {
  static const std::filesystem::path dir = [] {
    const char* d = std::getenv("KILN_DUMP_DIR");
    return d && *d ? std::filesystem::path(d) : std::filesystem::path();
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& p, const void* data, std::size_t bytes) {
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  std::ofstream out(p, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

// A compiled function's name: `prefix`-<hash of its plan's text>. With KILN_DUMP_DIR set, writes
// there, under that name, the traced IR, the IR after canonicalization, the regions and the plan.
KILN_RUNTIME_API std::string name_and_dump(const char* prefix, const ir::graph& traced,
                                           const compiler::plan& p);

// A compiled function's state on Vulkan devices: its plan, and its kernels per region and
// operand layout. Lives as long as the function (a static of the function's type, or shared by
// copies of an executable).
struct program {
  program(compiler::plan p, std::string n) : plan(std::move(p)), name(std::move(n)) {}

  // The plan as a device with `max_bindings` storage buffers per stage runs it: `plan` itself, or
  // its regions formed again so that none binds more (one binding kept for spilled metadata).
  // origin[k]: the region of `plan` that computes region k's results.
  struct device_plan {
    compiler::plan plan;
    std::vector<int> origin;
  };
  const device_plan& for_device(std::uint32_t max_bindings);

  compiler::plan plan;
  std::string name;  // in notices and dump paths
  std::mutex mutex;
  std::map<std::string, spirv::kernel> kernels;
  std::map<std::uint32_t, device_plan> by_bindings;
  std::set<std::string> noticed;
};

namespace detail {

// The metadata words of one dispatch and the kernel variant they go with.
struct region_call {
  std::vector<spirv::operand_kind> kinds;
  std::vector<std::uint32_t> metadata;
  std::string key;
};

inline region_call layout_call(const compiler::plan& p, int index, const shape& space,
                               std::span<const runtime::buffer_ref> args) {
  const compiler::region& reg = p.regions[index];
  region_call c;
  std::int64_t total = space.element_count();
  c.metadata = {static_cast<std::uint32_t>((total + 3) / 4), static_cast<std::uint32_t>(total)};
  for (int i = 0; i < space.rank; ++i)
    c.metadata.push_back(static_cast<std::uint32_t>(space.dims[i]));
  c.key = std::to_string(index) + ":";
  for (auto a : reg.args) {
    const ir::input_decl& d = p.graph.inputs[a];
    shape dims = args[a].dims.rank == d.dims.rank ? args[a].dims : d.dims;
    std::int64_t n = dims.element_count();
    spirv::operand_kind k = n == 1       ? spirv::operand_kind::uniform
                            : n == total ? spirv::operand_kind::full
                                         : spirv::operand_kind::strided;
    c.kinds.push_back(k);
    c.key += "fus"[static_cast<int>(k)];
    if (k != spirv::operand_kind::strided) continue;
    // Right-aligned numpy broadcasting: size-1 dimensions repeat (stride 0).
    std::vector<std::uint32_t> stride(space.rank, 0);
    std::int64_t s = 1;
    for (int i = dims.rank - 1; i >= 0; --i) {
      int si = space.rank - dims.rank + i;
      stride[si] = dims.dims[i] == 1 ? 0 : static_cast<std::uint32_t>(s);
      s *= dims.dims[i];
    }
    c.metadata.insert(c.metadata.end(), stride.begin(), stride.end());
  }
  return c;
}

inline const spirv::kernel& kernel_for(program& prog, const compiler::plan& p,
                                       const region_call& call, int index, const spirv::target& t) {
  std::lock_guard lock(prog.mutex);
  auto it = prog.kernels.find(call.key);
  if (it != prog.kernels.end()) return it->second;
  spirv::kernel k = spirv::emit_region(p, p.regions[index], call.kinds, t);
  if (!k.code.empty()) {
    if (validate_enabled())
      if (auto msg = spirv::validate(k.code, t.vulkan_version); !msg.empty())
        throw error(errc::device_error, "spirv-val",
                    prog.name + " region " + std::to_string(index) + ": " + msg);
    if (const auto& dir = dump_directory(); !dir.empty()) {
      std::string stem =
          "region" + std::to_string(index) + "-" + call.key.substr(call.key.find(':') + 1);
      auto base = dir / prog.name / stem;
      write_file(base.string() + ".spv", k.code.data(), k.code.size() * 4);
      std::string text = spirv::disassemble(k.code);
      if (!text.empty()) write_file(base.string() + ".spvasm", text.data(), text.size());
    }
  }
  return prog.kernels.emplace(call.key, std::move(k)).first->second;
}

}  // namespace detail

// Why a region of this call cannot run on the device (empty: it can).
inline std::string cannot_run(const spirv::kernel& k, const context& ctx, std::int64_t total,
                              std::int64_t largest_bytes) {
  if (!k.unsupported.empty()) return k.unsupported;
  if (total >= (std::int64_t(1) << 31)) return "more than 2^31 elements";
  if (static_cast<std::uint64_t>(largest_bytes) > ctx.target().max_storage_buffer_range)
    return "a buffer of " + std::to_string(largest_bytes) + " bytes exceeds maxStorageBufferRange";
  if (k.bindings > ctx.target().max_storage_buffers)
    return std::to_string(k.bindings) + " bindings exceed the device's " +
           std::to_string(ctx.target().max_storage_buffers);
  return "";
}

// Runs every region of prog's plan for one call. sym: the resolved symbols. cpu(args, results,
// regions) runs the marked regions of prog.plan on the CPU (with host pointers in the refs).
using cpu_regions =
    std::function<void(std::span<const runtime::buffer_ref>, std::span<const runtime::buffer_ref>,
                       const std::vector<bool>&)>;
KILN_RUNTIME_API void run(program& prog, context& ctx, std::span<const runtime::buffer_ref> args,
                          std::span<const runtime::buffer_ref> results, const std::int64_t* sym,
                          const cpu_regions& cpu);

// The definitions behind the runtime boundary (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY

KILN_RUNTIME_API std::string name_and_dump(const char* prefix, const ir::graph& traced,
                                           const compiler::plan& p) {
  std::string text = compiler::print(p);
  char name[48];
  std::snprintf(name, sizeof name, "%s-%016llx", prefix,
                static_cast<unsigned long long>(kiln::detail::fnv1a(text)));
  if (const auto& dir = dump_directory(); !dir.empty()) {
    std::string files[][2] = {{"0-traced.ir", ir::print(traced)},
                              {"1-canonical.ir", ir::print(compiler::canonicalize(traced))},
                              {"2-regions.txt", compiler::print_regions(p)},
                              {"3-plan.txt", text}};
    for (auto& [file, body] : files) write_file(dir / name / file, body.data(), body.size());
  }
  return name;
}

KILN_RUNTIME_API const program::device_plan& program::for_device(std::uint32_t max_bindings) {
  std::lock_guard lock(mutex);
  auto it = by_bindings.find(max_bindings);
  if (it != by_bindings.end()) return it->second;
  device_plan d{plan, {}};
  bool fits = true;
  for (const auto& r : plan.regions)
    fits = fits && static_cast<std::uint32_t>(r.binding_count()) + 1 <= max_bindings;
  if (!fits) {
    try {
      compiler::region_options opt{static_cast<int>(max_bindings) - 1};
      d.plan.regions = compiler::form_dispatch_regions(plan.graph, opt);
    } catch (const error&) {
      d.plan.regions = plan.regions;  // one result alone binds too many: that region falls back
    }
  }
  // Regions group results by iteration space, so every new region lies inside one old one.
  for (const auto& r : d.plan.regions)
    for (std::size_t o = 0; o < plan.regions.size(); ++o)
      if (std::ranges::find(plan.regions[o].results, r.results[0]) != plan.regions[o].results.end())
        d.origin.push_back(static_cast<int>(o));
  return by_bindings.emplace(max_bindings, std::move(d)).first->second;
}

KILN_RUNTIME_API void run(program& prog, context& ctx, std::span<const runtime::buffer_ref> args,
                          std::span<const runtime::buffer_ref> results, const std::int64_t* sym,
                          const cpu_regions& cpu) {
  const program::device_plan& dp = prog.for_device(ctx.target().max_storage_buffers);
  const compiler::plan& p = dp.plan;
  const ir::graph& g = p.graph;
  auto device_of = [&](const runtime::buffer_ref& b,
                       const std::string& what) -> const device_memory* {
    if (!b.memory) return nullptr;
    auto* m = dynamic_cast<const device_memory*>(b.memory);
    if (!m || &m->owner() != &ctx)
      throw error(errc::invalid_argument, prog.name,
                  what + " lives on " + b.memory->device_name() + " but the call runs on vulkan:" +
                      std::to_string(ctx.index()) + " (" + ctx.name() + ")");
    return m;
  };
  for (std::size_t a = 0; a < args.size(); ++a)
    device_of(args[a], "argument " + std::to_string(a + 1));
  for (std::size_t r = 0; r < results.size(); ++r)
    device_of(results[r], "result " + std::to_string(r + 1));

  std::lock_guard lock(ctx.mutex());
  ctx.ring_reset();
  std::vector<bool> on_cpu(prog.plan.regions.size(), false);  // by region of prog.plan
  // Descriptor of each argument and result, made at its first use (null buffer: not yet).
  std::vector<VkDescriptorBufferInfo> arg_info(args.size()), result_info(results.size());
  struct staged_result {
    const runtime::buffer_ref* ref;
    allocation range;
    std::size_t bytes;
  };
  std::vector<staged_result> copy_back;
  auto bytes_of_arg = [&](std::size_t a) {
    return static_cast<std::size_t>(args[a].dims.element_count()) * size_in_bytes(g.inputs[a].type);
  };
  auto bytes_of_result = [&](std::size_t r) {
    return static_cast<std::size_t>(results[r].dims.element_count()) *
           size_in_bytes(g.nodes[g.outputs[r]].type);
  };
  // Device memory binds as it is; host data goes through the ring (copied in for arguments,
  // copied out after the wait for results).
  auto bind = [&](VkDescriptorBufferInfo& info, const runtime::buffer_ref& b, std::size_t bytes,
                  bool is_result) {
    if (info.buffer) return info;
    if (auto* m = static_cast<const device_memory*>(b.memory)) {  // checked by device_of above
      info = {m->range().buffer(), m->range().offset, m->range().size};
    } else {
      allocation s = ctx.ring_take(bytes);
      if (is_result)
        copy_back.push_back({&b, s, bytes});
      else
        std::memcpy(s.host(), b.data, bytes);
      info = {s.buffer(), s.offset, s.size};
    }
    return info;
  };

  // First every region's kernel; a region the device cannot run sends the region of prog.plan it
  // came from to the CPU whole, so no result is written by both.
  struct planned {
    detail::region_call call;
    const spirv::kernel* kernel = nullptr;
    std::int64_t total = 0;
  };
  std::vector<planned> regions(p.regions.size());
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    const compiler::region& reg = p.regions[i];
    shape space = runtime::concrete(reg.space, sym);
    planned& r = regions[i];
    r.total = space.element_count();
    if (r.total == 0) continue;
    r.call = detail::layout_call(p, static_cast<int>(i), space, args);
    // Kernels are per device: two devices may differ in features, limits and so in regions.
    r.call.key = std::to_string(ctx.index()) + "/" + r.call.key;
    r.kernel = &detail::kernel_for(prog, p, r.call, static_cast<int>(i), ctx.target());
    r.call.metadata.insert(r.call.metadata.end(), r.kernel->constants.begin(),
                           r.kernel->constants.end());
    std::int64_t largest = 0;
    for (auto a : reg.args) largest = std::max<std::int64_t>(largest, bytes_of_arg(a));
    for (auto res : reg.results) largest = std::max<std::int64_t>(largest, bytes_of_result(res));
    if (auto why = cannot_run(*r.kernel, ctx, r.total, largest); !why.empty()) {
      on_cpu[dp.origin[i]] = true;
      std::lock_guard plock(prog.mutex);
      if (prog.noticed.insert(r.call.key + why).second)
        std::fprintf(stderr, "kiln: %s region %d runs on the CPU: %s\n", prog.name.c_str(),
                     dp.origin[i], why.c_str());
    }
  }

  std::uint32_t sets = 0, descriptors = 0;
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    if (regions[i].total == 0 || on_cpu[dp.origin[i]]) continue;
    ++sets;
    descriptors += regions[i].kernel->bindings;
  }
  ctx.reserve_descriptors(sets, descriptors);
  VkCommandBuffer cb = VK_NULL_HANDLE;
  std::uint32_t wg = ctx.target().workgroup_size();
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    const compiler::region& reg = p.regions[i];
    const auto& [call, kernel, total] = regions[i];
    if (total == 0 || on_cpu[dp.origin[i]]) continue;
    const spirv::kernel& k = *kernel;
    const pipeline& pl = ctx.pipelines().get(k, wg);
    if (!cb) {
      cb = ctx.begin();
      // Earlier submissions' writes (results, uploads) become visible to this call's shaders.
      auto mb = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
      mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
      vkCmdPipelineBarrier(cb,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    }
    std::vector<VkDescriptorBufferInfo> infos;
    for (auto a : reg.args) infos.push_back(bind(arg_info[a], args[a], bytes_of_arg(a), false));
    for (auto r : reg.results)
      infos.push_back(bind(result_info[r], results[r], bytes_of_result(r), true));
    if (k.metadata_in_buffer) {
      allocation m = ctx.ring_take(call.metadata.size() * 4);
      std::memcpy(m.host(), call.metadata.data(), call.metadata.size() * 4);
      infos.push_back({m.buffer(), m.offset, m.size});
    }
    VkDescriptorSet set = ctx.descriptor_set(pl.set_layout);
    std::vector<VkWriteDescriptorSet> writes(infos.size());
    for (std::size_t b = 0; b < infos.size(); ++b) {
      writes[b] = {};
      writes[b].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[b].dstSet = set;
      writes[b].dstBinding = static_cast<std::uint32_t>(b);
      writes[b].descriptorCount = 1;
      writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[b].pBufferInfo = &infos[b];
    }
    vkUpdateDescriptorSets(ctx.device(), static_cast<std::uint32_t>(writes.size()), writes.data(),
                           0, nullptr);
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl.handle);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl.layout, 0, 1, &set, 0, nullptr);
    if (pl.push_bytes)
      vkCmdPushConstants(cb, pl.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pl.push_bytes,
                         call.metadata.data());
    std::uint64_t groups = (static_cast<std::uint64_t>(total) + 3) / 4;
    std::uint64_t count =
        std::min<std::uint64_t>((groups + wg - 1) / wg, ctx.target().max_workgroup_count_x);
    vkCmdDispatch(cb, static_cast<std::uint32_t>(count), 1, 1);
  }
  std::uint64_t done = 0;
  if (cb) {
    auto mb = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                         &mb, 0, nullptr, 0, nullptr);
    done = ctx.submit();
    ctx.pipelines().save();
  }
  std::exception_ptr cpu_failure;
  if (std::find(on_cpu.begin(), on_cpu.end(), true) != on_cpu.end()) {
    // The CPU regions run while the GPU works, on host data: device buffers through their
    // mapping. Device-only memory (a discrete GPU's) is refused rather than copied behind the
    // caller's back.
    try {
      std::vector<runtime::buffer_ref> host_args(args.begin(), args.end());
      std::vector<runtime::buffer_ref> host_results(results.begin(), results.end());
      auto host_of = [&](runtime::buffer_ref& b, const std::string& what) {
        if (!b.memory) return;
        unsigned char* h = dynamic_cast<const device_memory*>(b.memory)->range().host();
        if (!h)
          throw error(errc::unsupported, prog.name,
                      what +
                          " is in device-only memory but a region the device cannot run needs "
                          "it on the CPU; pass host data instead");
        b.data = h;
        b.memory = nullptr;
      };
      for (std::size_t i = 0; i < prog.plan.regions.size(); ++i) {
        if (!on_cpu[i]) continue;
        for (auto a : prog.plan.regions[i].args)
          host_of(host_args[a], "argument " + std::to_string(a + 1));
        for (auto r : prog.plan.regions[i].results)
          host_of(host_results[r], "result " + std::to_string(r + 1));
      }
      cpu(std::span<const runtime::buffer_ref>(host_args),
          std::span<const runtime::buffer_ref>(host_results), on_cpu);
    } catch (...) {
      cpu_failure = std::current_exception();
    }
  }
  if (cb) ctx.wait(done);
  for (const staged_result& s : copy_back)
    std::memcpy(const_cast<void*>(s.ref->data), s.range.host(), s.bytes);
  ctx.ring_end_call();
  ctx.check_validation(prog.name + " call");
  if (cpu_failure) std::rethrow_exception(cpu_failure);
}

#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::vulkan
