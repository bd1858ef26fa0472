// Runs a plan on a Vulkan device: per region, the operand layouts of this call pick a kernel
// (kernel_cache.hpp), host data is staged through the ring, every region is one dispatch of one
// command buffer, submitted to the queue and waited for (or, for vulkan::submit, chained by
// semaphores). Regions the device cannot run go to the CPU (a one-line notice, once), overlapping
// the GPU.
#pragma once

#include <array>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/program.hpp"
#include "kiln/runtime/signature.hpp"
#include "kiln/runtime/vulkan/device_memory.hpp"
#include "kiln/runtime/vulkan/kernel_cache.hpp"

namespace kiln::vulkan {

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

// Workgroups a reduction's dispatch has: one per group of four results, up to the device's limit.
inline std::uint64_t reduction_workgroups(const spirv::target& t, const detail::region_call& call) {
  return std::min<std::uint64_t>(call.metadata[0], t.max_workgroup_count_x);
}

// The invocations of a reduction's (or a row group's) workgroup at this call: the device's
// workgroup size, halved while every invocation still gets a share of each row (a group of four
// along it where the rows are whole groups of four, else an element), down to the subgroup.
// Each workgroup takes four rows whatever its size, so a short row (attention's 128) left most
// of a large workgroup idle at every barrier of the row group; smaller workgroups take the same
// rows with the same loop count and a shallower tree. The fold order, so the bits, depend on the
// size: the same for every call of the same shapes on a device.
inline std::uint32_t reduction_workgroup(const spirv::target& t, const detail::region_call& call) {
  std::uint32_t w = t.workgroup_size();
  if (w & (w - 1)) return w;  // (cannot_reduce refuses it)
  const std::int64_t shares = call.whole_quads ? (call.reduced + 3) / 4 : call.reduced;
  // (At least 4, so that rows of nothing, or a target that gives no subgroup size, stop there.)
  const std::uint32_t least = std::max<std::uint32_t>(t.subgroup_size, 4);
  while (w / 2 >= least && w / 2 >= shares) w /= 2;
  return w;
}

// Why a reduction of this call cannot run on the device (empty: it can). Its tree join needs a
// power-of-two workgroup; and an invocation's loops may not pass 65535 iterations in all, which
// is where llvmpipe stops them (any driver's guard against endless loops may).
inline std::string cannot_reduce(const spirv::target& t, const detail::region_call& call) {
  std::uint32_t w = reduction_workgroup(t, call);
  if (w & (w - 1)) return "the workgroup size " + std::to_string(w) + " is not a power of two";
  std::uint64_t rounds = (call.metadata[0] + reduction_workgroups(t, call) - 1) /
                         std::max<std::uint64_t>(reduction_workgroups(t, call), 1);
  std::uint64_t per_round = (static_cast<std::uint64_t>(call.reduced) + w - 1) / w + 16;
  if (rounds * per_round > 65535)
    return "it folds " + std::to_string(call.reduced) + " elements into each of " +
           std::to_string(call.metadata[1]) +
           " results, more loop iterations per invocation "
           "than drivers allow (65535)";
  return "";
}

// A contraction's dispatch: a workgroup per tile (columns, rows, batches) of its GEMM (batches, M,
// N, K), the tile of region i's contraction (spirv::contraction_tile). Why this call cannot run on
// the device (empty: it can): more workgroups than the device counts, or more steps along K than a
// loop may take (65535, as for reductions).
inline std::string contraction_grid(const spirv::target& t, const compiler::plan& p, std::size_t i,
                                    const std::array<std::int64_t, 4>& gemm,
                                    std::array<std::uint32_t, 3>& grid) {
  const spirv::target::gemm_tile tile =
      spirv::contraction_tile(t, p.graph, p.graph.nodes[p.regions[i].contraction]);
  const auto [batches, M, N, depth] = gemm;
  const std::int64_t want[3] = {(N + tile.cols() - 1) / tile.cols(),
                                (M + tile.rows() - 1) / tile.rows(), batches};
  const std::uint32_t most[3] = {t.max_workgroup_count_x, t.max_workgroup_count_y,
                                 t.max_workgroup_count_z};
  for (int a = 0; a < 3; ++a) {
    if (want[a] > most[a])
      return std::to_string(want[a]) + " workgroups along " + "xyz"[a] + " exceed the device's " +
             std::to_string(most[a]);
    grid[a] = static_cast<std::uint32_t>(want[a]);
  }
  if ((depth + tile.depth - 1) / tile.depth > 65535 - 16)
    return "a K of " + std::to_string(depth) +
           " takes more loop iterations per invocation than drivers allow (65535)";
  return "";
}

// Runs every region of prog's plan for one call and waits for it. sym: the resolved symbols.
// cpu(args, results, regions, arena) runs the marked regions of prog.plan() on the CPU (with host
// pointers in the refs), while the device works. arenas: where the call's transients live.
KILN_RUNTIME_API void run(const runtime::program& prog, context& ctx,
                          std::span<const runtime::buffer_ref> args,
                          std::span<const runtime::buffer_ref> results, const std::int64_t* sym,
                          runtime::host_regions cpu, runtime::arena_source arenas);

// Submits one call without waiting for it: it starts once every `wait` point is reached and
// signals every `signal` point when done; returns its value on ctx.queue().timeline(). Every
// argument and result must be device memory of ctx, every region must run on the device, and
// transients need `arenas` (on the device; the caller keeps what they lend until the value is
// reached). Otherwise the call needs the host: with `needs_host` given, it says why there and
// returns 0 (nothing submitted); else kiln::error.
KILN_RUNTIME_API std::uint64_t submit(
    const runtime::program& prog, context& ctx, std::span<const runtime::buffer_ref> args,
    std::span<const runtime::buffer_ref> results, const std::int64_t* sym,
    std::span<const semaphore_value> wait, std::span<const semaphore_value> signal,
    const runtime::arena_source* arenas = nullptr, std::string* needs_host = nullptr);

// The definitions behind the runtime boundary (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY

namespace detail {

// Checks that every argument and result in device memory lives on ctx.
inline void check_devices(const runtime::program& prog, const context& ctx,
                          std::span<const runtime::buffer_ref> args,
                          std::span<const runtime::buffer_ref> results) {
  auto check_one = [&](const runtime::buffer_ref& b, const std::string& what) {
    if (!b.memory) return;
    auto* m = dynamic_cast<const device_memory*>(b.memory);
    if (!m || &m->owner() != &ctx)
      throw error(errc::invalid_argument, prog.name(),
                  what + " lives on " + b.memory->device_name() + " but the call runs on vulkan:" +
                      std::to_string(ctx.index()) + " (" + ctx.name() + ")");
  };
  for (std::size_t a = 0; a < args.size(); ++a)
    check_one(args[a], "argument " + std::to_string(a + 1));
  for (std::size_t r = 0; r < results.size(); ++r)
    check_one(results[r], "result " + std::to_string(r + 1));
}

// One call as the device will run it: per region of the device plan, its kernel and metadata;
// per region of prog.plan(), whether it runs on the CPU instead.
struct call_plan {
  struct region {
    region_call call;
    const spirv::kernel* kernel = nullptr;
    std::int64_t total = 0;
    std::array<std::uint32_t, 3> grid{};  // a contraction's workgroups (contraction_grid)
    // The regions its kernel runs: itself, or a row group's when it is the group's first; none
    // when another region's kernel runs it, or it writes nothing at this call.
    std::vector<int> members;
  };
  const kernel_cache::device_plan* device = nullptr;
  std::vector<region> regions;
  std::vector<bool> on_cpu;
  std::uint32_t sets = 0, descriptors = 0;  // what the dispatches bind

  bool dispatched(std::size_t i) const {
    if (regions[i].members.empty()) return false;
    for (int m : regions[i].members)
      if (on_cpu[device->origin[m]]) return false;
    return true;
  }
  bool any_on_cpu() const { return std::find(on_cpu.begin(), on_cpu.end(), true) != on_cpu.end(); }
};

inline std::size_t bytes_of(const runtime::buffer_ref& b, dtype t) {
  return static_cast<std::size_t>(b.dims.element_count()) * size_in_bytes(t);
}

// The loop iterations an invocation of a row group's kernel makes in all: per round of four rows,
// each member's share of the rows' elements (or of their values). Drivers stop loops past 65535.
inline std::uint64_t group_iterations(const spirv::target& t,
                                      std::span<const detail::region_call> calls) {
  std::uint64_t w = reduction_workgroup(t, calls[0]),
                workgroups = reduction_workgroups(t, calls[0]);
  std::uint64_t rounds =
      (calls[0].metadata[0] + workgroups - 1) / std::max<std::uint64_t>(workgroups, 1);
  std::uint64_t per_member = (static_cast<std::uint64_t>(calls[0].reduced) + w - 1) / w + 16;
  return rounds * per_member * calls.size();
}

// Whether regions [first, end) of p, a row group, can run as one kernel at this call: the kernel
// needs the reduced axes to be the trailing ones (a row's elements consecutive) and, at this call,
// every member over the group's rows (run-time sizes may broadcast one wider).
inline bool fusable_group(const compiler::plan& p, std::size_t first, std::size_t end,
                          std::span<const call_plan::region> regions, const std::int64_t* sym) {
  const compiler::region& root = p.regions[first];
  if (end - first < 2 || root.root < 0) return false;
  const std::uint32_t axes = p.graph.nodes[root.root].attrs.axes;
  const int rank = root.space.rank;
  if (!ir::trailing_axes(axes, rank)) return false;
  shape space = runtime::concrete(root.space, sym);
  std::int64_t rows = regions[first].total;
  for (std::size_t k = first; k < end; ++k) {
    const compiler::region& m = p.regions[k];
    if (regions[k].total == 0) return false;
    if (spirv::over_rows(p, root, m) ? runtime::concrete(m.space, sym) != space
                                     : regions[k].total != rows)
      return false;
  }
  return true;
}

// The contraction region whose kernel computes region i of p as it stages its blocks, or -1: i is
// a prologue of its operand (compiler::packed_into), the contraction is alone in its dispatch
// group, both have elements at this call, and the staging computes each of i's elements about
// once. It computes the operand's whole matrix per batch and per tile along the product's other
// dimension (and a convolution's input once per window over it): where that is more than i's
// elements, storing them costs less than computing them again (lavapipe, a weight under 8 tile
// rows: 240 ms against 200 ms; under one: 28-31 ms against 31 ms; docs/PERFORMANCE.md).
inline int product_computing(const compiler::plan& p, std::size_t i,
                             std::span<const call_plan::region> regions, const spirv::target& t) {
  const compiler::packing into = compiler::packed_into(p, i);
  if (into.region < 0) return -1;
  const auto j = static_cast<std::size_t>(into.region);
  if (!compiler::alone_in_group(p, j) || regions[i].total == 0 || regions[j].total == 0) return -1;
  const auto [batches, M, N, K] = regions[j].call.gemm;
  const bool a = ir::is_convolution(p.graph.nodes[p.regions[j].contraction].kind)
                     ? into.operand == 1
                     : into.operand == 0;  // the GEMM's A: a matmul's first, a convolution's w
  const spirv::target::gemm_tile tile =
      spirv::contraction_tile(t, p.graph, p.graph.nodes[p.regions[j].contraction]);
  const std::int64_t across = a ? (N + tile.cols() - 1) / tile.cols()   // column tiles
                                : (M + tile.rows() - 1) / tile.rows();  // row tiles
  const double staged = double(batches) * double(across) * double(a ? M : N) * double(K);
  return staged <= double(regions[i].total) ? into.region : -1;
}

// Every region's kernel (emitted at first use), a row group's regions in one kernel where they
// can be, a contraction's with the prologues it computes; a region the device cannot run sends the
// region of prog.plan() it came from to the CPU whole, so no result is written by both.
inline call_plan plan_call(const runtime::program& prog, context& ctx,
                           std::span<const runtime::buffer_ref> args,
                           std::span<const runtime::buffer_ref> results, const std::int64_t* sym) {
  kernel_cache& cache = prog.vulkan_kernels();
  call_plan c;
  c.device = &cache.for_device(prog.plan(), ctx.target().max_storage_buffers);
  const compiler::plan& p = c.device->plan;
  const ir::graph& g = p.graph;
  c.on_cpu.assign(prog.plan().regions.size(), false);
  c.regions.resize(p.regions.size());
  const std::string device_key = spirv::fingerprint(ctx.target()) + "/";
  std::vector<shape> spaces;
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    const compiler::region& reg = p.regions[i];
    spaces.push_back(runtime::concrete(reg.space, sym));
    call_plan::region& r = c.regions[i];
    r.call = layout_call(p, static_cast<int>(i), spaces.back(), args, sym);
    r.total = r.call.metadata[1];  // the elements it writes
    // Kernels are per target: two devices may differ in features, limits and so in regions.
    r.call.key = device_key + r.call.key;
    if (r.total > 0 && reg.root >= 0 && r.call.reduced == 0 &&
        ir::info(g.nodes[reg.root].kind).cls == ir::op_class::index_reduction)
      throw error(errc::shape_mismatch, std::string(ir::name(g.nodes[reg.root].kind)),
                  "the axis has size 0 at this call: there is no index to give");
  }
  // The largest buffer a set of regions binds (against maxStorageBufferRange).
  auto largest_bytes = [&](std::size_t first, std::size_t end) {
    std::int64_t largest = 0;
    for (std::size_t k = first; k < end; ++k) {
      for (auto a : p.regions[k].args)
        largest = std::max<std::int64_t>(largest, bytes_of(args[a], g.inputs[a].type));
      for (auto res : p.regions[k].results)
        largest =
            std::max<std::int64_t>(largest, bytes_of(results[res], g.nodes[g.outputs[res]].type));
    }
    return largest;
  };
  // Region i on its own: its kernel, or the CPU, noticed once with the reason.
  auto plan_alone = [&](std::size_t i) {
    call_plan::region& r = c.regions[i];
    if (r.total == 0) return;
    r.kernel = &kernel_for(prog, p, r.call, static_cast<int>(i), ctx.target());
    r.members = {static_cast<int>(i)};
    r.call.metadata.insert(r.call.metadata.end(), r.kernel->constants.begin(),
                           r.kernel->constants.end());
    std::string why = cannot_run(*r.kernel, ctx, std::max(spaces[i].element_count(), r.total),
                                 largest_bytes(i, i + 1));
    if (why.empty() && r.kernel->per_workgroup) why = cannot_reduce(ctx.target(), r.call);
    if (why.empty() && r.kernel->per_tile)
      why = contraction_grid(ctx.target(), p, i, r.call.gemm, r.grid);
    if (!why.empty()) {
      int origin = c.device->origin[i];
      c.on_cpu[origin] = true;
      std::lock_guard lock(cache.mutex);
      if (cache.noticed.insert(r.call.key + why).second)
        std::fprintf(stderr, "kiln: %s region %d runs on the CPU: %s\n", prog.name().c_str(),
                     origin, why.c_str());
    }
  };
  // Contraction region j's kernel with the prologues it computes, regions {j, prologues...}: true
  // where the device can run it (the prologues then have no kernel of their own: their
  // transients keep their places in the arena, unwritten).
  auto plan_with_prologues = [&](std::size_t j, const std::vector<int>& prologues) {
    std::vector<int> members{static_cast<int>(j)};
    members.insert(members.end(), prologues.begin(), prologues.end());
    std::vector<region_call> calls;
    std::int64_t elements = c.regions[j].total, bytes = 0;
    for (int m : members) {
      calls.push_back(c.regions[m].call);
      elements = std::max(elements, spaces[m].element_count());
      bytes = std::max(bytes, largest_bytes(m, m + 1));
    }
    const spirv::kernel& k = kernel_of_regions(prog, p, members, calls, ctx.target());
    call_plan::region& r = c.regions[j];
    std::array<std::uint32_t, 3> grid{};
    std::string why = cannot_run(k, ctx, elements, bytes);
    if (why.empty()) why = contraction_grid(ctx.target(), p, j, r.call.gemm, grid);
    if (!why.empty()) return false;  // each on its own then, the product saying why
    r.kernel = &k;
    r.grid = grid;
    r.members = members;
    for (std::size_t m = 1; m < calls.size(); ++m)
      r.call.metadata.insert(r.call.metadata.end(), calls[m].metadata.begin(),
                             calls[m].metadata.end());
    r.call.metadata.insert(r.call.metadata.end(), k.constants.begin(), k.constants.end());
    return true;
  };
  // Per region, the contraction whose kernel computes it (product_computing), or -1.
  std::vector<int> computed_by(p.regions.size());
  for (std::size_t i = 0; i < p.regions.size(); ++i)
    computed_by[i] = product_computing(p, i, c.regions, ctx.target());
  for (std::size_t i = 0; i < p.regions.size();) {
    std::size_t end = i + 1;
    while (end < p.regions.size() && p.regions[end].group == p.regions[i].group) ++end;
    if (computed_by[i] >= 0) {  // planned with its product, below
      ++i;
      continue;
    }
    if (p.regions[i].contraction >= 0) {
      std::vector<int> prologues;
      for (std::size_t k = 0; k < i; ++k)
        if (computed_by[k] == static_cast<int>(i)) prologues.push_back(static_cast<int>(k));
      if (!prologues.empty() && plan_with_prologues(i, prologues)) {
        ++i;
        continue;
      }
      for (int k : prologues) plan_alone(k);
    }
    if (fusable_group(p, i, end, c.regions, sym)) {  // one kernel, a workgroup per four rows
      std::vector<region_call> calls;
      std::vector<int> members;
      for (std::size_t k = i; k < end; ++k) {
        calls.push_back(c.regions[k].call);
        members.push_back(static_cast<int>(k));
      }
      const spirv::kernel& k = kernel_of_regions(prog, p, members, calls, ctx.target());
      std::int64_t elements = 0;
      for (std::size_t m = i; m < end; ++m)
        elements = std::max(elements, spaces[m].element_count());
      std::string why = cannot_run(k, ctx, elements, largest_bytes(i, end));
      if (why.empty()) why = cannot_reduce(ctx.target(), calls[0]);
      if (why.empty() && group_iterations(ctx.target(), calls) > 65535) why = "loop limit";
      if (why.empty()) {
        call_plan::region& r = c.regions[i];
        r.kernel = &k;
        r.members = members;
        r.call.metadata.clear();
        for (const region_call& call : calls)
          r.call.metadata.insert(r.call.metadata.end(), call.metadata.begin(), call.metadata.end());
        r.call.metadata.insert(r.call.metadata.end(), k.constants.begin(), k.constants.end());
        i = end;
        continue;
      }
      // Else each member on its own, as below (a reason that holds for one of them is noticed
      // there).
    }
    for (; i < end; ++i) plan_alone(i);
  }
  // Transients live in one memory per call: the device's, or the CPU's when any region goes
  // there (then every region does).
  if (!p.transients.empty() && c.any_on_cpu()) c.on_cpu.assign(c.on_cpu.size(), true);
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    if (!c.dispatched(i)) continue;
    ++c.sets;
    c.descriptors += c.regions[i].kernel->bindings;
  }
  return c;
}

// The buffers a call binds: device memory as it is, host data through the staging ring (copied
// in for arguments now, copied out for results after the wait).
class call_bindings {
 public:
  // arenas: where the transients of p (the device's plan) live; null for a call that has none.
  call_bindings(context& ctx, std::span<const runtime::buffer_ref> args,
                std::span<const runtime::buffer_ref> results, const compiler::plan& p,
                const runtime::arena_source* arenas)
      : ctx_(ctx),
        args_(args),
        results_(results),
        plan_(p),
        g_(p.graph),
        arenas_(arenas),
        arg_info_(args.size()),
        result_info_(results.size()) {}

  VkDescriptorBufferInfo arg(int a) {
    const dtype type = g_.inputs[a].type;
    return bind(arg_info_[a], args_[a], bytes_of(args_[a], type), false, size_in_bytes(type));
  }

  VkDescriptorBufferInfo result(int r) {
    const runtime::buffer_ref& b = results_[r];
    const dtype type = g_.nodes[g_.outputs[r]].type;
    const std::size_t bytes = bytes_of(b, type);
    // Kernels store whole groups of four elements: a result slice whose last group is partial
    // must end where its memory does (whose padding takes the rest), or the group would
    // overwrite the elements after it.
    if (auto* m = static_cast<const device_memory*>(b.memory);
        m && bytes % (4 * static_cast<std::size_t>(size_in_bytes(type))) != 0 &&
        static_cast<std::size_t>(b.offset) + bytes < m->bytes())
      throw error(errc::invalid_argument, "vulkan",
                  "result " + std::to_string(r + 1) + " is a buffer slice of " +
                      std::to_string(b.dims.element_count()) + " " + std::string(name(type)) +
                      " elements that ends inside its memory; kernels on " + ctx_.name() +
                      " write whole groups of 4 elements, which would overwrite the elements "
                      "after it: give a slice of a multiple of 4 elements, or one that ends "
                      "where its memory ends");
    return bind(result_info_[r], b, bytes, true, size_in_bytes(type));
  }
  // Transient t of the call's arena on the device (asked for at the first use).
  VkDescriptorBufferInfo transient(int t) {
    if (!arena_.memory) arena_ = (*arenas_)(plan_, true);
    const allocation& range = static_cast<const device_memory*>(arena_.memory)->range();
    auto at = static_cast<VkDeviceSize>(arena_.offset + arena_.layout.offsets[t]);
    check_alignment(range.offset + at, "the workspace");
    return {range.buffer(), range.offset + at,
            static_cast<VkDeviceSize>(arena_.offset + arena_.layout.bytes) - at};
  }
  // Input slot s of a region (a parameter, a transient, or a view: its base's), and output slot s.
  VkDescriptorBufferInfo input(int s) {
    int n = static_cast<int>(args_.size());
    int views = n + static_cast<int>(plan_.transients.size());
    if (s >= views) s = plan_.view_bases[s - views];
    return s < n ? arg(s) : transient(s - n);
  }
  VkDescriptorBufferInfo output(int s) {
    int n = static_cast<int>(results_.size());
    return s < n ? result(s) : transient(s - n);
  }
  // Copies the staged results to the host (after the device finished).
  void copy_back() const {
    for (const staged& s : staged_results_)
      runtime::unpack(s.range.host(), *s.ref, s.element_bytes);
  }

 private:
  struct staged {
    const runtime::buffer_ref* ref;
    allocation range;
    int element_bytes;
  };
  VkDescriptorBufferInfo bind(VkDescriptorBufferInfo& info, const runtime::buffer_ref& b,
                              std::size_t bytes, bool is_result, int element_bytes) {
    if (info.buffer) return info;  // bound by an earlier region of this call
    if (auto* m = static_cast<const device_memory*>(b.memory)) {  // checked by check_devices
      // Kernels access whole groups of four elements: the last one must lie within the memory
      // kiln may touch (its allocations are padded for it; a wrapped VkBuffer's range is not).
      const auto group = 4 * static_cast<std::size_t>(element_bytes);
      const std::size_t reach =
          static_cast<std::size_t>(b.offset) + (bytes + group - 1) / group * group;
      if (reach > m->range().size)
        throw error(errc::invalid_argument, "vulkan",
                    std::string(is_result ? "a result" : "an argument") + " reaches byte " +
                        std::to_string(reach) +
                        " of its memory in whole groups of 4 elements, "
                        "but the memory holds " +
                        std::to_string(m->range().size) +
                        ": wrap a range with room for the last group");
      // A slice from its start (an empty one reads nothing: the block's start serves).
      auto at = bytes ? static_cast<VkDeviceSize>(b.offset) : 0;
      check_alignment(m->range().offset + at, is_result ? "a result" : "an argument");
      info = {m->range().buffer(), m->range().offset + at, m->range().size - at};
    } else {
      allocation s = ctx_.ring().take(bytes);
      // Host data is staged row-major: a strided view is packed on the way in (and unpacked on
      // the way out), in the one copy every host buffer gets.
      if (is_result)
        staged_results_.push_back({&b, s, element_bytes});
      else if (bytes)
        runtime::pack(b, s.host(), element_bytes);
      info = {s.buffer(), s.offset, s.size};
    }
    return info;
  }

  // A binding starts at a multiple of the device's minStorageBufferOffsetAlignment: a buffer
  // slice (or a workspace made from one) whose start is not one cannot be bound.
  void check_alignment(VkDeviceSize at, const char* what) const {
    if (at % ctx_.storage_offset_alignment() == 0) return;
    throw error(errc::invalid_argument, "vulkan",
                std::string(what) + " is a buffer slice that starts " + std::to_string(at) +
                    " bytes into its device memory block; " + ctx_.name() +
                    " binds storage buffers at multiples of " +
                    std::to_string(ctx_.storage_offset_alignment()) +
                    " bytes (minStorageBufferOffsetAlignment): slice at such a multiple");
  }

  context& ctx_;
  std::span<const runtime::buffer_ref> args_, results_;
  const compiler::plan& plan_;
  const ir::graph& g_;
  const runtime::arena_source* arenas_;
  std::vector<VkDescriptorBufferInfo> arg_info_, result_info_;  // null buffer: not bound yet
  runtime::arena arena_;
  std::vector<staged> staged_results_;
};

// What dispatch i of c runs, for the profiler: the region of the call's plan it came from and its
// members' ops, e.g. "region 3: matmul add relu".
inline std::string dispatch_label(const compiler::plan& p, const call_plan& c, std::size_t i) {
  std::string text = "region " + std::to_string(c.device->origin[i]) + ":";
  for (int m : c.regions[i].members) text += compiler::region_ops(p, static_cast<std::size_t>(m));
  return text;
}

// Records the call's dispatches into one command buffer of ctx's queue, between a barrier that
// makes earlier submissions' writes visible and one that makes this call's visible to the host.
// False when no region runs on the device (nothing recorded).
// With a profiler, each dispatch is timed (profiler.hpp).
inline bool record_call(context& ctx, const call_plan& c, call_bindings& bindings,
                        dispatch_profiler* profiler = nullptr) {
  if (c.sets == 0) return false;
  const compiler::plan& p = c.device->plan;
  const std::uint32_t wg = ctx.target().workgroup_size();
  // The call's pipelines, in dispatch order; those that do not exist yet made at once (a first
  // call's wait).
  std::vector<std::pair<const spirv::kernel*, std::uint32_t>> kernels;
  for (std::size_t i = 0; i < p.regions.size(); ++i)
    if (c.dispatched(i)) {
      const spirv::kernel& k = *c.regions[i].kernel;
      kernels.emplace_back(&k, k.workgroup ? k.workgroup
                               : k.per_workgroup
                                   ? reduction_workgroup(ctx.target(), c.regions[i].call)
                                   : wg);
    }
  const std::vector<const pipeline*> pipelines = ctx.pipelines().get_all(kernels);
  std::size_t dispatch = 0;
  vulkan::queue& q = ctx.queue();
  VkCommandBuffer cb = q.begin(c.sets, c.descriptors);
  if (profiler) profiler->begin(cb, static_cast<std::uint32_t>(p.regions.size()));
  auto before = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  before.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &before, 0, nullptr, 0, nullptr);
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    if (!c.dispatched(i)) continue;
    const call_plan::region& r = c.regions[i];
    const spirv::kernel& k = *r.kernel;
    const pipeline& pl = *pipelines[dispatch++];
    std::vector<VkDescriptorBufferInfo> infos;
    for (const spirv::kernel_binding& b : spirv::kernel_bindings(p, r.members))
      infos.push_back(b.result ? bindings.result(b.slot) : bindings.input(b.slot));
    bool reads = false;  // what the regions before have written
    for (int m : r.members)
      reads = reads || !p.regions[m].reads.empty() || !p.regions[m].view_reads.empty();
    if (reads) {
      auto between = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
      between.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
      between.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
      vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &between, 0, nullptr, 0,
                           nullptr);
    }
    if (k.metadata_in_buffer) {
      allocation m = ctx.ring().take(r.call.metadata.size() * 4);
      std::memcpy(m.host(), r.call.metadata.data(), r.call.metadata.size() * 4);
      infos.push_back({m.buffer(), m.offset, m.size});
    }
    VkDescriptorSet set = q.descriptor_set(pl.set_layout.get());
    std::vector<VkWriteDescriptorSet> writes(infos.size());
    for (std::size_t b = 0; b < infos.size(); ++b) {
      writes[b] = vk_struct<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
      writes[b].dstSet = set;
      writes[b].dstBinding = static_cast<std::uint32_t>(b);
      writes[b].descriptorCount = 1;
      writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[b].pBufferInfo = &infos[b];
    }
    vkUpdateDescriptorSets(ctx.device(), static_cast<std::uint32_t>(writes.size()), writes.data(),
                           0, nullptr);
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl.handle.get());
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl.layout.get(), 0, 1, &set, 0,
                            nullptr);
    if (pl.push_bytes)
      vkCmdPushConstants(cb, pl.layout.get(), VK_SHADER_STAGE_COMPUTE_BIT, 0, pl.push_bytes,
                         r.call.metadata.data());
    if (profiler) profiler->before(cb, dispatch_label(p, c, i));
    if (k.per_tile) {
      vkCmdDispatch(cb, r.grid[0], r.grid[1], r.grid[2]);
    } else {
      std::uint64_t groups = (static_cast<std::uint64_t>(r.total) + 3) / 4;
      std::uint64_t count =
          k.per_workgroup
              ? reduction_workgroups(ctx.target(), r.call)
              : std::min<std::uint64_t>((groups + wg - 1) / wg, ctx.target().max_workgroup_count_x);
      vkCmdDispatch(cb, static_cast<std::uint32_t>(count), 1, 1);
    }
    if (profiler) profiler->after(cb);
  }
  auto after = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
  after.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  after.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                       &after, 0, nullptr, 0, nullptr);
  return true;
}

// Runs the regions marked in c.on_cpu through `cpu`, on host data: device buffers through their
// mapping. Device-only memory (a discrete GPU's) is refused rather than copied behind the
// caller's back.
inline void run_on_host(const runtime::program& prog, const call_plan& c,
                        std::span<const runtime::buffer_ref> args,
                        std::span<const runtime::buffer_ref> results, runtime::host_regions cpu,
                        const runtime::arena& transients) {
  std::vector<runtime::buffer_ref> host_args(args.begin(), args.end());
  std::vector<runtime::buffer_ref> host_results(results.begin(), results.end());
  auto host_of = [&](runtime::buffer_ref& b, const std::string& what) {
    if (!b.memory) return;
    unsigned char* h = dynamic_cast<const device_memory*>(b.memory)->range().host();
    if (!h)
      throw error(errc::unsupported, prog.name(),
                  what +
                      " is in device-only memory but a region the device cannot run needs it on "
                      "the CPU; pass host data instead");
    b.data = h + b.offset;
    b.memory = nullptr;
    b.offset = 0;
  };
  // Every argument a CPU region reads: loaded, under a view, or as a gather's indices.
  const compiler::plan& p = prog.plan();
  const auto n_args = static_cast<std::int32_t>(host_args.size());
  auto host_arg = [&](std::int32_t a) {
    if (a < n_args) host_of(host_args[a], "argument " + std::to_string(a + 1));
  };
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    if (!c.on_cpu[i]) continue;
    for (auto a : p.regions[i].args) host_arg(a);
    for (auto v : p.regions[i].views) host_arg(p.view_bases[v]);
    for (auto s : p.regions[i].indices) host_arg(s);
    for (auto r : p.regions[i].results) host_of(host_results[r], "result " + std::to_string(r + 1));
  }
  cpu(std::span<const runtime::buffer_ref>(host_args),
      std::span<const runtime::buffer_ref>(host_results), &c.on_cpu, transients);
}

}  // namespace detail

KILN_RUNTIME_API void run(const runtime::program& prog, context& ctx,
                          std::span<const runtime::buffer_ref> args,
                          std::span<const runtime::buffer_ref> results, const std::int64_t* sym,
                          runtime::host_regions cpu, runtime::arena_source arenas) {
  detail::check_devices(prog, ctx, args, results);
  std::lock_guard lock(ctx.mutex());
  ctx.finish_submitted();  // the staging ring starts over: nothing submitted may still read it
  ctx.ring().reset();
  detail::call_plan c = detail::plan_call(prog, ctx, args, results, sym);
  detail::call_bindings bindings(ctx, args, results, c.device->plan, &arenas);
  std::uint64_t done = 0;
  dispatch_profiler* profiler = ctx.profiler();
  if (detail::record_call(ctx, c, bindings, profiler)) {
    done = ctx.queue().submit();
    ctx.pipelines().save();
  } else {
    profiler = nullptr;
  }
  // The CPU regions run while the device works; the device is waited for even when they fail.
  std::exception_ptr cpu_failure;
  if (c.any_on_cpu()) {
    try {
      detail::run_on_host(
          prog, c, args, results, cpu,
          prog.plan().transients.empty() ? runtime::arena{} : arenas(prog.plan(), false));
    } catch (...) {
      cpu_failure = std::current_exception();
    }
  }
  if (done) ctx.queue().wait(done);
  if (profiler) profiler->print(prog.name());
  bindings.copy_back();
  ctx.ring().end_call();
  ctx.check_validation(prog.name() + " call");
  if (cpu_failure) std::rethrow_exception(cpu_failure);
}

KILN_RUNTIME_API std::uint64_t submit(
    const runtime::program& prog, context& ctx, std::span<const runtime::buffer_ref> args,
    std::span<const runtime::buffer_ref> results, const std::int64_t* sym,
    std::span<const semaphore_value> wait, std::span<const semaphore_value> signal,
    const runtime::arena_source* arenas, std::string* needs_host) {
  detail::check_devices(prog, ctx, args, results);
  auto refuse = [&](errc code, std::string why) -> std::uint64_t {
    if (!needs_host) throw error(code, prog.name(), why);
    *needs_host = std::move(why);
    return 0;
  };
  auto host_data = [&](std::span<const runtime::buffer_ref> refs, const char* what) {
    for (std::size_t i = 0; i < refs.size(); ++i)
      if (!refs[i].memory)
        return std::string(what) + " " + std::to_string(i + 1) +
               " is host data; a call submitted without a host wait takes device buffers only "
               "(device::upload / device::alloc)";
    return std::string();
  };
  for (const std::string& why : {host_data(args, "argument"), host_data(results, "result")})
    if (!why.empty()) return refuse(errc::invalid_argument, why);
  if (!prog.plan().transients.empty() && !arenas)
    return refuse(errc::unsupported,
                  "passes values between regions through a transient arena, which this "
                  "submission was given none for; use a call that waits");
  std::lock_guard lock(ctx.mutex());
  detail::call_plan c = detail::plan_call(prog, ctx, args, results, sym);
  for (std::size_t i = 0; i < c.regions.size(); ++i)
    if (c.regions[i].total > 0 &&
        (c.on_cpu[c.device->origin[i]] || c.regions[i].kernel->metadata_in_buffer))
      return refuse(errc::unsupported,
                    "region " + std::to_string(c.device->origin[i]) +
                        " needs the host (it runs on the CPU, or its metadata is staged), so "
                        "this call cannot be submitted without a host wait");
  detail::call_bindings bindings(ctx, args, results, c.device->plan, arenas);
  if (!detail::record_call(ctx, c, bindings)) ctx.queue().begin(0, 0);  // an empty submission
  std::uint64_t value = ctx.queue().submit(wait, signal);
  ctx.pipelines().save();
  ctx.check_validation(prog.name() + " submission");
  return value;
}

#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::vulkan
