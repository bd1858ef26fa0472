// What the Vulkan back end keeps of a runtime::program (its kernels per region and operand
// layout, emitted at first use, validated and dumped; its plan as each binding limit runs it),
// and the program's naming and IR dumps (KILN_DUMP_DIR).
#pragma once

#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kiln/codegen/spirv/emit_region.hpp"
#include "kiln/codegen/spirv/tools.hpp"
#include "kiln/compiler/view_layout.hpp"
#include "kiln/core/hash.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/program.hpp"
#include "kiln/runtime/reproducer.hpp"
#include "kiln/runtime/signature.hpp"
#include "kiln/runtime/vulkan/instance.hpp"

namespace kiln::vulkan {

// KILN_DUMP_DIR, read once (empty: no dumps).
inline const std::filesystem::path& dump_directory() {
  static const std::filesystem::path dir = [] {
    const char* d = std::getenv("KILN_DUMP_DIR");
    return d && *d ? std::filesystem::path(d) : std::filesystem::path();
  }();
  return dir;
}

// What the Vulkan back end keeps of a runtime::program: its kernels per region and operand
// layout, its plan as each binding limit runs it, and the fallbacks it has already noticed.
struct kernel_cache {
  // The plan as a device with `max_bindings` storage buffers per stage runs it: `plan` itself,
  // its regions formed again so that none binds more (one binding kept for spilled metadata), or
  // with its row-local values computed where they are read (compiler::inline_row_locals).
  // origin[k]: the region of `plan` that computes region k's results.
  struct device_plan {
    compiler::plan plan;
    std::vector<int> origin;
  };
  const device_plan& for_device(const compiler::plan& plan, std::uint32_t max_bindings);

  std::mutex mutex;
  // By variant key: the target's fingerprint (spirv::fingerprint), '/', the region's key.
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
  std::int64_t reduced = 0;  // a reduction: the elements folded into each result
  bool whole_quads = true;   // the space's last axis is whole groups of four (a reduction's
                             // last reduced axis; a contraction's N)
  std::array<std::int64_t, 4> gemm{};  // a contraction's GEMM: batches, M, N, K
};

// Region `index` of p for one call: its operands' layouts (from their extents) and metadata.
// space: the region's space with the call's sizes; sym: the call's resolved symbols.
inline region_call layout_call(const compiler::plan& p, int index, const shape& space,
                               std::span<const runtime::buffer_ref> args, const std::int64_t* sym) {
  const compiler::region& reg = p.regions[index];
  region_call c;
  // A reduction's space is its operand's with the kept axes first, then the reduced ones; its
  // elements are its results.
  std::array<int, max_rank> order{};
  int n = 0;
  std::int64_t total = space.element_count(), count = 1, kept = 1;
  std::uint32_t axes = reg.root >= 0 ? p.graph.nodes[reg.root].attrs.axes : 0;
  for (int reduced = 0; reduced < 2; ++reduced)
    for (int i = 0; i < space.rank; ++i)
      if (((axes >> i) & 1u) == static_cast<std::uint32_t>(reduced)) order[n++] = i;
  for (int i = 0; i < space.rank; ++i) ((axes >> i) & 1u ? count : kept) *= space.dims[i];
  std::int64_t elements = reg.root >= 0 ? kept : total;
  c.metadata = {static_cast<std::uint32_t>((elements + 3) / 4),
                static_cast<std::uint32_t>(elements)};
  for (int i = 0; i < space.rank; ++i)
    c.metadata.push_back(static_cast<std::uint32_t>(space.dims[order[i]]));
  c.key = std::to_string(index) + ":";
  auto slots = compiler::input_slots(p, reg);
  const auto n_inputs = static_cast<std::int32_t>(p.graph.inputs.size());
  const auto first_view = n_inputs + static_cast<std::int32_t>(p.transients.size());
  auto dims_of = [&](std::int32_t slot) {  // a parameter's or transient's extents at the call
    return slot < n_inputs
               ? runtime::argument_dims(args[slot], p.graph.inputs[slot].dims)
               : runtime::concrete(p.graph.nodes[p.transients[slot - n_inputs]].dims, sym);
  };
  // Where a slot's elements are: row-major, or a view's index map over its base.
  auto layout_of = [&](std::int32_t slot) {
    return slot < first_view
               ? compiler::row_major(dims_of(slot))
               : compiler::view_layout(
                     p, slot - first_view,
                     compiler::row_major(dims_of(p.view_bases[slot - first_view])), sym);
  };
  // Whether the kernel's last axis (a reduction's last reduced one) holds whole groups of four,
  // so that a group of four lanes is four consecutive elements of one row: the kernel reads
  // strided operands by their first lane then (consecutive, repeated) and folds a reduction
  // along its rows. A contraction's is its N (below).
  const bool reduces = (axes & ((1u << space.rank) - 1)) != 0;
  c.whole_quads =
      space.rank > 0 && space.dims[order[space.rank - 1]] % 4 == 0 && (reg.root < 0 || reduces);
  for (auto slot : slots) {
    compiler::strided_layout l = layout_of(slot);
    std::int64_t size = l.dims.element_count();
    bool plain =
        l.offset == 0 && l.strides == compiler::row_major(l.dims).strides && l.terms.empty();
    // Strides over the space in the kernel's axis order, right-aligned numpy broadcasting:
    // size-1 dimensions repeat (stride 0). Negative strides wrap, as the kernel's index
    // arithmetic does.
    auto in_order = [&](const std::array<std::int64_t, max_rank>& strides) {
      std::vector<std::int64_t> stride(space.rank, 0), out(space.rank);
      for (int i = 0; i < l.dims.rank; ++i) {
        int si = space.rank - l.dims.rank + i;
        if (si >= 0) stride[si] = l.dims.dims[i] == 1 ? 0 : strides[i];
      }
      for (int i = 0; i < space.rank; ++i) out[i] = stride[order[i]];
      return out;
    };
    spirv::operand_kind k = reg.root >= 0 || !plain ? spirv::operand_kind::strided
                            : size == 1             ? spirv::operand_kind::uniform
                            : size == total         ? spirv::operand_kind::full
                                                    : spirv::operand_kind::strided;
    std::vector<std::int64_t> strides = in_order(l.strides);
    if (k == spirv::operand_kind::strided && c.whole_quads && l.terms.empty()) {
      const std::int64_t last = strides.back();
      bool aligned = l.offset % 4 == 0;
      for (std::size_t i = 0; i + 1 < strides.size(); ++i) aligned = aligned && strides[i] % 4 == 0;
      if (last == 0)
        k = spirv::operand_kind::repeated;
      else if (last == 1 && aligned)
        k = spirv::operand_kind::consecutive;
    }
    c.kinds.push_back(k);
    c.key += "fuscr"[static_cast<int>(k)];
    if (!spirv::is_strided(k)) continue;
    // The data's strides, then each index term's positions' the same way.
    auto push_strides = [&](const std::vector<std::int64_t>& s) {
      for (std::int64_t w : s) c.metadata.push_back(static_cast<std::uint32_t>(w));
    };
    push_strides(strides);
    c.metadata.push_back(static_cast<std::uint32_t>(l.offset));
    for (const compiler::index_term& t : l.terms) {
      push_strides(in_order(t.strides));
      for (std::int64_t w : {t.offset, t.data_stride, t.extent})
        c.metadata.push_back(static_cast<std::uint32_t>(w));
    }
  }
  if (reg.root >= 0) {
    c.metadata.push_back(static_cast<std::uint32_t>(count));
    c.reduced = count;
    c.key += c.whole_quads ? "q" : "e";
  }
  if (reg.contraction >= 0) {  // spirv::contraction_words
    const ir::node& m = p.graph.nodes[reg.contraction];
    const bool conv = ir::is_convolution(m.kind);
    const int rank = space.rank;
    compiler::strided_layout l[2];  // A and B: a convolution's weights, then its input
    for (int o = 0; o < 2; ++o) {
      const int k = conv ? 1 - o : o;
      l[o] = layout_of(compiler::load_slot(p, reg, m.operands[k]));
      if (l[o].dims.rank != rank || !l[o].terms.empty())
        throw error(
            errc::invalid_graph, std::string(ir::name(m.kind)),
            "operand " + std::to_string(k + 1) + " is not an affine view of its result's rank");
    }
    std::int64_t kernel_cells = 1, cells = 1, batches = 1;
    for (int a = 2; a < rank; ++a) {
      kernel_cells *= l[0].dims.dims[a];
      cells *= space.dims[a];
    }
    for (int d = 0; d + 2 < rank; ++d) batches *= space.dims[d];
    const std::int64_t groups = conv ? m.attrs.groups : 1;
    c.gemm = conv ? std::array<std::int64_t, 4>{space.dims[0] * groups, space.dims[1] / groups,
                                                cells, l[1].dims.dims[1] / groups * kernel_cells}
                  : std::array<std::int64_t, 4>{batches, space.dims[rank - 2], space.dims[rank - 1],
                                                l[0].dims.dims[rank - 1]};
    for (int i : {3, 1, 2}) c.metadata.push_back(static_cast<std::uint32_t>(c.gemm[i]));  // K M N
    for (const compiler::strided_layout& o : l) {
      for (int i = 0; i < rank; ++i)
        c.metadata.push_back(static_cast<std::uint32_t>(o.dims.dims[i] == 1 ? 0 : o.strides[i]));
      c.metadata.push_back(static_cast<std::uint32_t>(o.offset));
    }
    if (conv) {
      for (std::int64_t w : {groups, l[1].dims.dims[1] / groups, kernel_cells})
        c.metadata.push_back(static_cast<std::uint32_t>(w));
      for (int a = 2; a < rank; ++a)
        for (std::int64_t w :
             {std::int64_t(m.attrs.steps[a]), std::int64_t(m.attrs.starts[a]),
              std::int64_t(m.attrs.dilations[a]), l[0].dims.dims[a], l[1].dims.dims[a]})
          c.metadata.push_back(static_cast<std::uint32_t>(w));
    }
    c.whole_quads = c.gemm[2] % 4 == 0;
    c.key += c.whole_quads ? "q" : "e";
  }
  return c;
}

// Keeps a newly emitted kernel under `key`: checked by spirv-val (KILN_VALIDATE) and written to
// KILN_DUMP_DIR as <stem>.spv / .spvasm. Callers hold cache.mutex.
inline const spirv::kernel& keep_kernel(const runtime::program& prog, const std::string& key,
                                        spirv::kernel k, const std::string& what,
                                        const std::string& stem, const spirv::target& t) {
  k.vulkan_version = t.vulkan_version;
  if (!k.code.empty()) {
    if (validate_enabled())
      if (auto msg = spirv::validate(k.code, t.vulkan_version); !msg.empty())
        throw error(errc::device_error, "spirv-val", prog.name() + " " + what + ": " + msg);
    if (const auto& dir = dump_directory(); !dir.empty()) {
      auto base = dir / prog.name() / stem;
      runtime::write_file(base.string() + ".spv", k.code.data(), k.code.size() * 4,
                          "KILN_DUMP_DIR");
      std::string text = spirv::disassemble(k.code);
      if (!text.empty())
        runtime::write_file(base.string() + ".spvasm", text.data(), text.size(), "KILN_DUMP_DIR");
    }
  }
  return prog.vulkan_kernels().kernels.emplace(key, std::move(k)).first->second;
}

inline const spirv::kernel& kernel_for(const runtime::program& prog, const compiler::plan& p,
                                       const region_call& call, int index, const spirv::target& t) {
  kernel_cache& cache = prog.vulkan_kernels();
  std::lock_guard lock(cache.mutex);
  auto it = cache.kernels.find(call.key);
  if (it != cache.kernels.end()) return it->second;
  return keep_kernel(
      prog, call.key, spirv::emit_region(p, p.regions[index], call.kinds, t, call.whole_quads),
      "region " + std::to_string(index),
      "region" + std::to_string(index) + "-" + call.key.substr(call.key.find(':') + 1), t);
}

// The kernel of several regions, region members[m] called as calls[m]: a row group's, or a
// contraction's with the prologues it computes (spirv::emit_kernel).
inline const spirv::kernel& kernel_of_regions(const runtime::program& prog, const compiler::plan& p,
                                              std::span<const int> members,
                                              std::span<const region_call> calls,
                                              const spirv::target& t) {
  std::string key = "group";
  for (const region_call& c : calls) key += " " + c.key;
  kernel_cache& cache = prog.vulkan_kernels();
  std::lock_guard lock(cache.mutex);
  auto it = cache.kernels.find(key);
  if (it != cache.kernels.end()) return it->second;
  // A new kernel: its members' operand kinds, and the names its messages and dump take.
  std::string what = "kernel of regions", stem = "group";
  std::vector<std::vector<spirv::operand_kind>> kinds;
  for (std::size_t m = 0; m < calls.size(); ++m) {
    what += (m ? ", " : " ") + std::to_string(members[m]);
    stem += (m ? "+" : "") + std::to_string(members[m]);
    kinds.push_back(calls[m].kinds);
  }
  for (const region_call& c : calls) stem += "-" + c.key.substr(c.key.find(':') + 1);
  return keep_kernel(prog, key, spirv::emit_kernel(p, members, kinds, t, calls[0].whole_quads),
                     what, stem, t);
}

}  // namespace detail

// The definitions behind the runtime boundary (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
}  // namespace kiln::vulkan

#include "kiln/compiler/dispatch.hpp"
#include "kiln/runtime/cpu/kernels.hpp"

namespace kiln::runtime {

KILN_RUNTIME_API program::program(const char* prefix, const ir::graph& traced, compiler::plan p)
    : plan_(std::move(p)), vulkan_(std::make_unique<vulkan::kernel_cache>()) {
  std::string text = compiler::print(plan_);
  char name[48];
  std::snprintf(name, sizeof name, "%s-%016llx", prefix,
                static_cast<unsigned long long>(kiln::detail::fnv1a(text)));
  name_ = name;
  if (const auto& dir = vulkan::dump_directory(); !dir.empty()) {
    std::string files[][2] = {{"0-traced.ir", ir::print(traced)},
                              // The plan's graph is the canonical one (compiler::compile): a
                              // program does not run the canonicalizer, so a module runner
                              // links none of it.
                              {"1-canonical.ir", ir::print(plan_.graph)},
                              {"2-regions.txt", compiler::print_regions(plan_)},
                              {"3-plan.txt", text},
                              {"4-cpu.txt", cpu::describe_plan(plan_)}};
    for (auto& [file, body] : files)
      runtime::write_file((dir / name_ / file).string(), body.data(), body.size(), "KILN_DUMP_DIR");
  }
}

KILN_RUNTIME_API program::program(const char* prefix, const compiler::frozen_parts& traced,
                                  const compiler::frozen_parts& p)
    : program(prefix, compiler::thaw(traced).graph, compiler::thaw(p)) {}

KILN_RUNTIME_API program::~program() = default;

}  // namespace kiln::runtime

namespace kiln::vulkan {

KILN_RUNTIME_API const kernel_cache::device_plan& kernel_cache::for_device(
    const compiler::plan& plan, std::uint32_t max_bindings) {
  std::lock_guard lock(mutex);
  auto it = by_bindings.find(max_bindings);
  if (it != by_bindings.end()) return it->second;
  device_plan d{plan, {}};
  // Row-local values are computed again where they are read: a workgroup's rows are no block of
  // memory the kernel owns, and the plan's arena has no place for them.
  for (std::size_t t = 0; t < plan.transients.size(); ++t)
    if (plan.row_local(static_cast<std::int32_t>(t))) {
      d.plan = compiler::inline_row_locals(plan, d.origin);
      return by_bindings.emplace(max_bindings, std::move(d)).first->second;
    }
  bool fits = true;
  for (const auto& r : plan.regions)
    fits = fits && static_cast<std::uint32_t>(r.binding_count()) + 1 <= max_bindings;
  // A plan with reductions stays as it is (a region that binds too many runs on the CPU).
  // So does one with transients or views (their numbering is the plan's).
  for (const auto& r : plan.regions) fits = fits || r.root >= 0;
  fits = fits || !plan.transients.empty() || !plan.views.empty();
  if (!fits) {
    try {
      compiler::region_options opt{static_cast<int>(max_bindings) - 1};
      d.plan.regions = compiler::form_dispatch_regions(plan.graph, opt);
    } catch (const error&) {
      d.plan.regions = plan.regions;  // one result alone binds too many: that region falls back
    }
  }
  // Regions group results by iteration space, so every new region lies inside one old one.
  if (d.plan.regions.size() == plan.regions.size())
    for (std::size_t o = 0; o < plan.regions.size(); ++o) d.origin.push_back(static_cast<int>(o));
  else
    for (const auto& r : d.plan.regions)
      for (std::size_t o = 0; o < plan.regions.size(); ++o)
        if (std::ranges::find(plan.regions[o].results, r.results[0]) !=
            plan.regions[o].results.end())
          d.origin.push_back(static_cast<int>(o));
  return by_bindings.emplace(max_bindings, std::move(d)).first->second;
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::vulkan
