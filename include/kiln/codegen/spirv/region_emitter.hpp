// The region emitter's class: what every kernel family shares (the device check, declarations,
// bindings, metadata, loads and stores of groups of four elements, the evaluation of a region's
// nodes, loops and barriers) and the function's entry, which hands a reduction or row group to
// emit_row_group.hpp and a contraction to emit_contraction.hpp. emit_region.hpp is the entry point.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/codegen/spirv/kernel.hpp"
#include "kiln/codegen/spirv/lowering.hpp"
#include "kiln/codegen/spirv/target.hpp"
#include "kiln/compiler/plan.hpp"
#include "kiln/compiler/view_layout.hpp"
#include "kiln/core/function_ref.hpp"

namespace kiln::spirv {

// The tile of contraction node c's GEMM on target t: on the matrix units where both operands are
// f16 and the device has them (target::gemm), else the tiled kernel's.
inline target::gemm_tile contraction_tile(const target& t, const ir::graph& g, const ir::node& c) {
  return t.gemm(g.nodes[c.operands[0]].type == dtype::f16 &&
                g.nodes[c.operands[1]].type == dtype::f16);
}

// A binding of a kernel: an input slot of the plan (a parameter, transient or view) or a result.
// A transient that a region writes is named by its input slot, so that in a row group's kernel
// the member that writes it and the members that read it share one binding.
struct kernel_binding {
  std::int32_t slot;
  bool result;
  bool operator==(const kernel_binding&) const = default;
};

// Region r's bindings in its own kernel's order: input slots, index tensors, output slots. A
// view is named by its base (its own layout is in the metadata), so views of one tensor (a
// pool's windows, a concat of slices) share its binding.
inline std::vector<kernel_binding> region_bindings(const compiler::plan& p,
                                                   const compiler::region& r) {
  const auto n_args = static_cast<std::int32_t>(p.graph.inputs.size());
  const auto n_results = static_cast<std::int32_t>(p.graph.outputs.size());
  const auto first_view = n_args + static_cast<std::int32_t>(p.transients.size());
  std::vector<kernel_binding> out;
  for (auto s : compiler::input_slots(p, r))
    out.push_back({s < first_view ? s : p.view_bases[s - first_view], false});
  for (auto s : r.indices) out.push_back({s, false});
  for (auto s : compiler::output_slots(p, r))
    out.push_back(s < n_results ? kernel_binding{s, true}
                                : kernel_binding{n_args + (s - n_results), false});
  return out;
}

// The bindings of the kernel of regions `members` (one region, or a row group's): each member's
// in turn, every buffer once.
inline std::vector<kernel_binding> kernel_bindings(const compiler::plan& p,
                                                   std::span<const int> members) {
  std::vector<kernel_binding> out;
  for (int m : members)
    for (const kernel_binding& b : region_bindings(p, p.regions[m]))
      if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  return out;
}

// Whether member region m of a row group whose first region is `root` runs over the rows'
// elements (else over one value per row: an epilogue of the reductions).
inline bool over_rows(const compiler::plan& p, const compiler::region& root,
                      const compiler::region& m) {
  return m.root >= 0 || compiler::same_rows(p.graph, m.space, root.space);
}

namespace detail {

class region_emitter final : public op_lowering {
 public:
  // The kernel of regions `members` of p (one region; a row group's regions in order; or a
  // contraction's region and the prologues it computes), with one operand_kind per argument of
  // each.
  // whole_quads: the rows along the last axis of the first member's space are whole groups of
  // four elements: a contraction's (N % 4 == 0), so its epilogue reads and writes them as the
  // elementwise kernels do; a reduction's last reduced axis, so it folds along its rows.
  region_emitter(const compiler::plan& p, std::span<const int> members,
                 std::span<const std::vector<operand_kind>> kinds, const target& t,
                 bool whole_quads = true)
      : p_(p), g_(p.graph), t_(t), all_(kernel_bindings(p, members)), whole_quads_(whole_quads) {
    divide_in_f64_ = t.divides_in_f64();
    for (std::size_t i = 0; i < members.size(); ++i)
      members_.push_back(make_member(p.regions[members[i]], kinds[i]));
    mb_ = &members_[0];
  }

  kernel run() {
    kernel k;
    for (member& m : members_) {
      mb_ = &m;
      k.unsupported = check();
      if (!k.unsupported.empty()) return k;
    }
    std::uint32_t at = 0;
    for (member& m : members_) {
      int strided = 0, terms = 0;
      for (std::size_t a = 0; a < m.kinds.size(); ++a)
        if (is_strided(m.kinds[a])) {
          ++strided;
          terms += static_cast<int>(m.input_terms[a].size());
        }
      m.rank = m.r->space.rank;
      m.base = at;
      m.words = metadata_words(m.rank, strided, terms, m.r->root >= 0);
      m.gemm_at = m.words;
      if (m.r->contraction >= 0)
        m.words += contraction_words(m.rank, ir::is_convolution(g_.nodes[m.r->contraction].kind));
      at += m.words;
    }
    constants_at_ = at;
    for (const member& m : members_)
      for (auto id : m.r->nodes) {
        const ir::node& n = g_.nodes[id];
        lane_kind lk = lane_of(n.type);
        if (!is_float_lane(lk)) continue;
        if (n.kind == ir::op::constant) register_opaque(k, lk, n.value.f);
        if (n.kind == ir::op::cast && g_.nodes[n.operands[0]].type == dtype::boolean) {
          register_opaque(k, lk, 0.0);  // bool -> float picks between these two
          register_opaque(k, lk, 1.0);
        }
      }
    k.metadata = constants_at_ + static_cast<std::uint32_t>(k.constants.size());
    k.metadata_in_buffer = k.metadata * 4 > t_.push_constant_bytes;
    k.per_workgroup = members_[0].r->root >= 0;
    k.per_tile = members_[0].r->contraction >= 0;
    if (k.per_tile) k.workgroup = tile().invocations();
    k.regions = static_cast<std::uint32_t>(members_.size());
    k.bindings = static_cast<std::uint32_t>(all_.size()) + (k.metadata_in_buffer ? 1 : 0);
    mb_ = &members_[0];
    declare(k);
    body();
    k.code = m_.assemble();
    return k;
  }

 private:
  // The contraction's tile (contraction_tile).
  target::gemm_tile tile() const {
    return contraction_tile(t_, g_, g_.nodes[members_[0].r->contraction]);
  }

  // ---- what the device can run --------------------------------------------------------------
  std::string check() const {
    auto needs = [&](dtype t) -> std::string {
      if (t == dtype::f64 && !t_.float64) return "f64 needs shaderFloat64, which the device lacks";
      if ((t == dtype::i64 || t == dtype::u64) && !t_.int64)
        return std::string(name(t)) + " needs shaderInt64, which the device lacks";
      return "";
    };
    if (mb_->r->contraction >= 0) {
      const ir::node& c = g_.nodes[mb_->r->contraction];
      const std::string what(ir::name(c.kind));
      if (c.kind != ir::op::matmul && !ir::is_convolution(c.kind))
        return what + ": no Vulkan kernel yet";
      if (tile().shared_bytes(c.type == dtype::f64 ? 8 : 4) > t_.shared_memory_bytes)
        return what + ": its tiles need more shared memory than the device has";
      // Rows that are not whole groups of four are stored a lane at a time: a narrow element
      // shares its word with the next row's, which another invocation writes.
      if (!whole_quads_)
        for (const compiler::store& st : mb_->stores)
          if (size_in_bytes(g_.nodes[st.node].type) < 4)
            return what + ": a " + std::string(name(g_.nodes[st.node].type)) +
                   " result whose rows are not a multiple of 4 elements";
    }
    // Ops first (the message names the op), then the leaves (an argument or constant alone).
    std::vector<std::int32_t> order;
    for (int leaves = 0; leaves < 2; ++leaves)
      for (auto id : mb_->r->nodes)
        if ((ir::info(g_.nodes[id].kind).cls == ir::op_class::leaf) == (leaves == 1))
          order.push_back(id);
    for (auto id : order) {
      const ir::node& n = g_.nodes[id];
      std::string what = std::string(ir::name(n.kind)) + " on " + std::string(name(n.type));
      if (auto s = needs(n.type); !s.empty()) return what + ": " + s;
      if (n.kind == ir::op::cast) {
        dtype from = g_.nodes[n.operands[0]].type;
        if (auto s = needs(from); !s.empty()) return what + ": " + s;
        if (size_in_bytes(from) == 8 && !is_floating(from) && lane_of(n.type) == lane_kind::f32 &&
            !t_.float64)
          return what + ": " + std::string(name(from)) +
                 " to float rounds through f64, which needs shaderFloat64";
      }
      if (n.type == dtype::f64 && needs_32bit_float(n.kind))
        return what + ": GLSL.std.450 has no 64-bit form of " + std::string(ir::name(n.kind));
    }
    return "";
  }

  // ---- declarations ---------------------------------------------------------------------------
  void declare(const kernel& k) {
    m_.capability(spv::Capability::Shader);
    bool f64 = false, i64 = false;
    for (const member& m : members_)
      for (auto id : m.r->nodes) {
        f64 = f64 || g_.nodes[id].type == dtype::f64;
        i64 = i64 || g_.nodes[id].type == dtype::i64 || g_.nodes[id].type == dtype::u64;
        const dtype from = g_.nodes[id].kind == ir::op::cast
                               ? g_.nodes[g_.nodes[id].operands[0]].type
                               : dtype::f32;
        if (from == dtype::i64 || from == dtype::u64)
          f64 = f64 || lane_of(g_.nodes[id].type) == lane_kind::f32;
      }
    f64 = f64 || divide_in_f64_;  // f32 quotients (values.hpp's divide)
    if (f64) m_.capability(spv::Capability::Float64);
    if (i64) m_.capability(spv::Capability::Int64);

    // Every binding: struct { uvec4 words[]; }, Block, in the StorageBuffer class.
    id array = m_.type_runtime_array(uvec4());
    m_.decorate(array, spv::Decoration::ArrayStride, {16});
    id block = m_.type_struct({array});
    m_.decorate(block, spv::Decoration::Block);
    m_.member_decorate(block, 0, spv::Decoration::Offset, {0});
    id ptr = m_.type_pointer(spv::StorageClass::StorageBuffer, block);
    // A buffer that no member writes is NonWritable (the metadata buffer too, past all_), so the
    // driver need not read it again after a store; one that a member writes for a later one to
    // read (a row group's transient) is Coherent, so its stores reach the other invocations of
    // the workgroup at the barrier between them.
    std::vector<bool> written(all_.size(), false);
    for (const member& m : members_)
      for (std::size_t b = m.n_inputs + m.r->indices.size(); b < m.binding.size(); ++b)
        written[m.binding[b]] = true;
    for (std::uint32_t b = 0; b < k.bindings; ++b) {
      id var = m_.global(Op::OpVariable, ptr,
                         {static_cast<std::uint32_t>(spv::StorageClass::StorageBuffer)});
      m_.decorate(var, spv::Decoration::DescriptorSet, {0});
      m_.decorate(var, spv::Decoration::Binding, {b});
      if (b >= all_.size() || !written[b]) m_.decorate(var, spv::Decoration::NonWritable);
      if (b < all_.size() && written[b] && !all_[b].result && members_.size() > 1)
        m_.decorate(var, spv::Decoration::Coherent);
      bindings_.push_back(var);
    }
    if (!k.metadata_in_buffer) {
      id arr = m_.type_array(u32(), cu(k.metadata));
      m_.decorate(arr, spv::Decoration::ArrayStride, {4});
      id pc = m_.type_struct({arr});
      m_.decorate(pc, spv::Decoration::Block);
      m_.member_decorate(pc, 0, spv::Decoration::Offset, {0});
      push_ = m_.global(Op::OpVariable, m_.type_pointer(spv::StorageClass::PushConstant, pc),
                        {static_cast<std::uint32_t>(spv::StorageClass::PushConstant)});
    }
    id uvec3 = m_.type_vector(u32(), 3);
    id in_ptr = m_.type_pointer(spv::StorageClass::Input, uvec3);
    global_id_ =
        m_.global(Op::OpVariable, in_ptr, {static_cast<std::uint32_t>(spv::StorageClass::Input)});
    m_.decorate(global_id_, spv::Decoration::BuiltIn,
                {static_cast<std::uint32_t>(spv::BuiltIn::GlobalInvocationId)});
    groups_id_ =
        m_.global(Op::OpVariable, in_ptr, {static_cast<std::uint32_t>(spv::StorageClass::Input)});
    m_.decorate(groups_id_, spv::Decoration::BuiltIn,
                {static_cast<std::uint32_t>(spv::BuiltIn::NumWorkgroups)});
    // Workgroup size: specialization constant 0, set from the device at pipeline creation.
    wg_size_ = m_.global(Op::OpSpecConstant, u32(), {64});
    m_.decorate(wg_size_, spv::Decoration::SpecId, {0});
    id wg = m_.global(Op::OpSpecConstantComposite, uvec3, {wg_size_, cu(1), cu(1)});
    m_.decorate(wg, spv::Decoration::BuiltIn,
                {static_cast<std::uint32_t>(spv::BuiltIn::WorkgroupSize)});

    std::vector<id> interface = {global_id_, groups_id_};
    // A reduction's or a contraction's workgroup works together: its ids, and shared partials
    // or tiles.
    if (members_[0].r->root >= 0 || members_[0].r->contraction >= 0) {
      for (auto [var, builtin] : {std::pair{&local_id_, spv::BuiltIn::LocalInvocationId},
                                  std::pair{&group_id_, spv::BuiltIn::WorkgroupId}}) {
        *var = m_.global(Op::OpVariable, in_ptr,
                         {static_cast<std::uint32_t>(spv::StorageClass::Input)});
        m_.decorate(*var, spv::Decoration::BuiltIn, {static_cast<std::uint32_t>(builtin)});
        interface.push_back(*var);
      }
      if (t_.subgroup_arithmetic && members_[0].r->root >= 0) {  // subgroups join their
                                                                 // partials first
        m_.capability(spv::Capability::GroupNonUniform);
        m_.capability(spv::Capability::GroupNonUniformArithmetic);
        id u32_in = m_.type_pointer(spv::StorageClass::Input, u32());
        for (auto [var, builtin] :
             {std::pair{&subgroup_local_id_, spv::BuiltIn::SubgroupLocalInvocationId},
              std::pair{&subgroup_id_, spv::BuiltIn::SubgroupId},
              std::pair{&subgroups_id_, spv::BuiltIn::NumSubgroups}}) {
          *var = m_.global(Op::OpVariable, u32_in,
                           {static_cast<std::uint32_t>(spv::StorageClass::Input)});
          m_.decorate(*var, spv::Decoration::BuiltIn, {static_cast<std::uint32_t>(builtin)});
          interface.push_back(*var);
        }
      }
    }
    // The partials' shared arrays: the folded values, and for argmax/argmin their indices; the
    // reductions of a row group share them by type and use (they run one after another).
    std::map<std::pair<id, std::size_t>, std::size_t> shared_of_type;
    for (member& m : members_) {
      if (m.r->root < 0) continue;
      const ir::node& root = g_.nodes[m.r->root];
      std::vector<id> types = {vec(lane_of(compute_dtype(g_.nodes[root.operands[0]].type)))};
      if (ir::info(root.kind).cls == ir::op_class::index_reduction) types.push_back(uvec4());
      for (std::size_t use = 0; use < types.size(); ++use) {
        id t = types[use];
        auto [it, added] = shared_of_type.emplace(std::pair{t, use}, shared_.size());
        if (added)
          shared_.push_back(
              m_.global(Op::OpVariable,
                        m_.type_pointer(spv::StorageClass::Workgroup, m_.type_array(t, wg_size_)),
                        {static_cast<std::uint32_t>(spv::StorageClass::Workgroup)}));
        m.shared.push_back(it->second);
      }
    }
    if (members_[0].r->contraction >= 0) {  // the blocks of A and B of one step along K
      const target::gemm_tile tile = this->tile();
      auto shared_array = [&](id element, std::uint32_t n) {
        shared_.push_back(
            m_.global(Op::OpVariable,
                      m_.type_pointer(spv::StorageClass::Workgroup, m_.type_array(element, cu(n))),
                      {static_cast<std::uint32_t>(spv::StorageClass::Workgroup)}));
      };
      if (tile.on_matrix_units()) {  // as f16, and a scratch matrix per subgroup
        m_.capability(spv::Capability::Float16);
        m_.capability(spv::Capability::GroupNonUniform);
        m_.capability(spv::Capability::CooperativeMatrixNV);
        m_.extension("SPV_NV_cooperative_matrix");
        id u32_in = m_.type_pointer(spv::StorageClass::Input, u32());
        subgroup_id_ = m_.global(Op::OpVariable, u32_in,
                                 {static_cast<std::uint32_t>(spv::StorageClass::Input)});
        m_.decorate(subgroup_id_, spv::Decoration::BuiltIn,
                    {static_cast<std::uint32_t>(spv::BuiltIn::SubgroupId)});
        interface.push_back(subgroup_id_);
        shared_array(m_.type_float(16), (tile.rows() + tile.pad) * tile.depth);
        shared_array(m_.type_float(16), tile.depth * (tile.cols() + tile.pad));
        shared_array(m_.type_float(32),
                     tile.subgroups_x * tile.subgroups_y * tile.matrix_m * tile.matrix_n);
      } else {
        id v = vec(lane_of(g_.nodes[members_[0].r->contraction].type));
        shared_array(v, tile.rows() / 4 * tile.depth);
        shared_array(v, tile.depth * tile.threads_x);
      }
    }
    main_ = m_.fresh();
    m_.entry_point(spv::ExecutionModel::GLCompute, main_, "main", interface);
    m_.name(main_, "main");
    float_controls(f64);
  }

  // inf, NaN and -0 survive, and subnormals are not flushed, where the device can promise it
  // (SPV_KHR_float_controls); f32 lanes exist in every kernel (narrow floats and casts compute in
  // them). No 16-bit float type is declared, so where the widths' denormal modes are tied
  // (denorm_widths < 2) only a 32-bit mode independent of the others is declared.
  void float_controls(bool f64) {
    bool nan32 = t_.preserve_inf_nan32, nan64 = f64 && t_.preserve_inf_nan64;
    bool denorm32 = t_.denorm_preserve32 && t_.denorm_widths >= 1;
    bool denorm64 = f64 && t_.denorm_preserve64 && t_.denorm_widths == 2;
    if (!(nan32 || nan64 || denorm32 || denorm64)) return;
    m_.extension("SPV_KHR_float_controls");
    auto mode = [&](bool on, spv::Capability c, spv::ExecutionMode e, std::uint32_t width) {
      if (!on) return;
      m_.capability(c);
      m_.execution_mode(main_, e, {width});
    };
    using C = spv::Capability;
    using E = spv::ExecutionMode;
    mode(nan32, C::SignedZeroInfNanPreserve, E::SignedZeroInfNanPreserve, 32);
    mode(nan64, C::SignedZeroInfNanPreserve, E::SignedZeroInfNanPreserve, 64);
    mode(denorm32, C::DenormPreserve, E::DenormPreserve, 32);
    mode(denorm64, C::DenormPreserve, E::DenormPreserve, 64);
  }

  // ---- memory access --------------------------------------------------------------------------
  // Word i of the current member's metadata.
  id metadata(std::uint32_t i) { return metadata_word(mb_->base + i); }
  // Word w of the kernel's metadata.
  id metadata_word(std::uint32_t w) {
    if (push_) {
      id p = m_.emit(Op::OpAccessChain, m_.type_pointer(spv::StorageClass::PushConstant, u32()),
                     {push_, m_.constant_i32(0), cu(w)});
      return m_.emit(Op::OpLoad, u32(), {p});
    }
    return word(bindings_.back(), cu(w));
  }
  // The variable of the current member's binding k (in its own order: region_bindings).
  id binding(std::size_t k) const { return bindings_[mb_->binding[k]]; }
  // Word w (u32 index) of binding var.
  id word_ptr(id var, id w) {
    id q = m_.emit(Op::OpShiftRightLogical, u32(), {w, cu(2)});
    id c = m_.emit(Op::OpBitwiseAnd, u32(), {w, cu(3)});
    return m_.emit(Op::OpAccessChain, m_.type_pointer(spv::StorageClass::StorageBuffer, u32()),
                   {var, m_.constant_i32(0), q, c});
  }
  id word(id var, id w) { return m_.emit(Op::OpLoad, u32(), {word_ptr(var, w)}); }
  id quad_ptr(id var, id q) {
    return m_.emit(Op::OpAccessChain, m_.type_pointer(spv::StorageClass::StorageBuffer, uvec4()),
                   {var, m_.constant_i32(0), q});
  }
  id quad(id var, id q) { return m_.emit(Op::OpLoad, uvec4(), {quad_ptr(var, q)}); }
  // The bits of one element (size 1, 2 or 4 bytes) at element index e, zero-extended.
  id element_bits(id var, id e, int bytes) {
    if (bytes == 4) return word(var, e);
    std::uint32_t per_word_log = bytes == 2 ? 1 : 2;
    id w = word(var, m_.emit(Op::OpShiftRightLogical, u32(), {e, cu(per_word_log)}));
    id slot = m_.emit(Op::OpBitwiseAnd, u32(), {e, cu((1u << per_word_log) - 1)});
    id shift = m_.emit(Op::OpIMul, u32(), {slot, cu(bytes * 8)});
    id v = m_.emit(Op::OpShiftRightLogical, u32(), {w, shift});
    return m_.emit(Op::OpBitwiseAnd, u32(), {v, cu(bytes == 2 ? 0xFFFF : 0xFF)});
  }
  // A 64-bit element at index e, as the lane type.
  id element64(id var, id e, lane_kind k) {
    id w = m_.emit(Op::OpShiftLeftLogical, u32(), {e, cu(1)});
    id lo = word(var, w);
    id hi = word(var, m_.emit(Op::OpIAdd, u32(), {w, cu(1)}));
    id pair = m_.emit(Op::OpCompositeConstruct, m_.type_vector(u32(), 2), {lo, hi});
    return m_.emit(Op::OpBitcast, scalar_type(k), {pair});
  }

  // x + lane in each lane: four consecutive indices from x.
  id consecutive_from(id x) {
    return m_.emit(Op::OpIAdd, uvec4(),
                   {compose(uvec4(), x, x, x, x),
                    m_.constant_composite(uvec4(), {cu(0), cu(1), cu(2), cu(3)})});
  }

  // The element index of each lane: e = 4g + lane, clamped to the last element (the last group
  // may be partial).
  id lane_elements() {
    if (lanes_) return lanes_;  // a contraction's row, lane by lane
    id e = consecutive_from(m_.emit(Op::OpIMul, u32(), {g_index_, cu(4)}));
    id last = m_.emit(Op::OpISub, u32(), {mb_->total, cu(1)});
    return m_.ext(uvec4(), GLSLstd450UMin,
                  {e, m_.emit(Op::OpCompositeConstruct, uvec4(), {last, last, last, last})});
  }

  // Whether the four lanes are consecutive elements of one row of the current member's space,
  // where the host's consecutive and repeated operands are (operand_kind): an elementwise
  // member's group of four, an epilogue's of a row of whole groups, or a reduction folding along
  // its rows. Elsewhere those operands are read as strided.
  bool lanes_in_a_row() const { return lanes_ == 0 && (elements_ == 0 || along_); }

  // Lane 0's coordinates in the member's space (kernel order), as scalars.
  // Folding along a row, the kept axes' are the row's (row_coords_, once per row) and the
  // reduced axes' come from the reduced index along_r_.
  const std::vector<id>& first_lane_coords() {
    if (!coords0_.empty()) return coords0_;
    const int from = along_ ? static_cast<int>(row_coords_.size()) : 0;
    coords0_ = along_ ? row_coords_ : std::vector<id>{};
    coords0_.resize(mb_->rank, 0);
    id e = along_      ? along_r_
           : elements_ ? lane(elements_, u32(), 0)
                       : m_.emit(Op::OpIMul, u32(), {g_index_, cu(4)});
    split_index(e, from, mb_->rank, coords0_);
    return coords0_;
  }
  // coords[from, to) of index e over the space's axes [from, to) (e below their product).
  void split_index(id e, int from, int to, std::vector<id>& coords) {
    for (int i = to - 1; i > from; --i) {
      coords[i] = m_.emit(Op::OpUMod, u32(), {e, mb_->dims[i]});
      e = m_.emit(Op::OpUDiv, u32(), {e, mb_->dims[i]});
    }
    if (from < to) coords[from] = e;
  }
  // Lane 0's element index of a strided argument (no index terms).
  id first_lane_index(int strided_slot) {
    const std::vector<id>& c = first_lane_coords();
    const std::vector<id>& words = mb_->strides[strided_slot];
    id idx = words[mb_->rank];
    for (int i = 0; i < mb_->rank; ++i)
      idx = m_.emit(Op::OpIAdd, u32(), {idx, m_.emit(Op::OpIMul, u32(), {c[i], words[i]})});
    return idx;
  }
  void forget_coordinates() {
    coords_.clear();
    coords0_.clear();
  }

  id strided_index(int strided_slot) {
    if (coords_.empty() && along_) {  // lane l: lane 0's coordinates, + l along the row
      const std::vector<id>& c = first_lane_coords();
      for (int i = 0; i + 1 < mb_->rank; ++i)
        coords_.push_back(compose(uvec4(), c[i], c[i], c[i], c[i]));
      coords_.push_back(consecutive_from(c.back()));
    }
    if (coords_.empty()) {
      // A reduction's lanes index its operand's space (elements_), else the result's.
      id e = elements_ ? elements_ : lane_elements();
      coords_.assign(mb_->rank, 0);
      for (int i = mb_->rank - 1; i >= 0; --i) {
        id d = mb_->dims[i];
        id dv = m_.emit(Op::OpCompositeConstruct, uvec4(), {d, d, d, d});
        coords_[i] = m_.emit(Op::OpUMod, uvec4(), {e, dv});
        e = m_.emit(Op::OpUDiv, uvec4(), {e, dv});
      }
    }
    id idx = affine_index(mb_->strides[strided_slot]);
    for (const term_words& t : mb_->terms[strided_slot]) {
      // The positions' index, each lane's position (as i32: an i64's low word, or the nearest
      // i32 where it does not fit; a read index counts from the end when negative), folded into
      // the axis.
      id at = affine_index(t.words);
      id s32 = scalar_type(lane_kind::s32), ivec4 = vec(lane_kind::s32);
      id l[4];
      for (std::uint32_t i = 0; i < 4 && t.binding != no_binding; ++i) {
        id e = lane(at, u32(), i);
        if (!t.wide) {
          l[i] = m_.emit(Op::OpBitcast, s32, {word(binding(t.binding), e)});
          continue;
        }
        id w = m_.emit(Op::OpShiftLeftLogical, u32(), {e, cu(1)});
        id lo = m_.emit(Op::OpBitcast, s32, {word(binding(t.binding), w)});
        id hi = m_.emit(Op::OpBitcast, s32,
                        {word(binding(t.binding), m_.emit(Op::OpIAdd, u32(), {w, cu(1)}))});
        id fits = m_.emit(Op::OpIEqual, m_.type_bool(),
                          {hi, m_.emit(Op::OpShiftRightArithmetic, s32, {lo, cu(31)})});
        id far = m_.emit(Op::OpSelect, s32,
                         {m_.emit(Op::OpSLessThan, m_.type_bool(), {hi, m_.constant_i32(0)}),
                          m_.constant_i32(INT32_MIN), m_.constant_i32(INT32_MAX)});
        l[i] = m_.emit(Op::OpSelect, s32, {fits, lo, far});
      }
      id v = t.binding == no_binding ? m_.emit(Op::OpBitcast, ivec4, {at})  // computed
                                     : compose(ivec4, l[0], l[1], l[2], l[3]);
      id extent = m_.emit(Op::OpBitcast, s32, {t.words[mb_->rank + 2]});
      id ev = compose(ivec4, extent, extent, extent, extent);
      id zero = isplat(lane_kind::s32, 0), one = isplat(lane_kind::s32, 1);
      id last = m_.emit(Op::OpISub, ivec4, {ev, one});
      if (t.binding != no_binding) {
        id negative = m_.emit(Op::OpSLessThan, bvec4(), {v, zero});
        v = m_.emit(Op::OpSelect, ivec4, {negative, m_.emit(Op::OpIAdd, ivec4, {v, ev}), v});
      }
      switch (t.fold) {
        case ir::position_fold::clamp:
          v = m_.ext(ivec4, GLSLstd450SClamp, {v, zero, last});
          break;
        case ir::position_fold::wrap:
          v = positive_mod(v, ev);
          break;
        case ir::position_fold::reflect: {  // period 2(n - 1), the second half mirrored
          id period = m_.ext(ivec4, GLSLstd450SMax,
                             {m_.emit(Op::OpIMul, ivec4, {last, isplat(lane_kind::s32, 2)}), one});
          id m = positive_mod(v, period);
          id back = m_.emit(Op::OpSGreaterThanEqual, bvec4(), {m, ev});
          v = m_.emit(Op::OpSelect, ivec4, {back, m_.emit(Op::OpISub, ivec4, {period, m}), m});
          break;
        }
      }
      id data_stride = t.words[mb_->rank + 1];
      id dv = compose(uvec4(), data_stride, data_stride, data_stride, data_stride);
      idx =
          m_.emit(Op::OpIAdd, uvec4(),
                  {idx, m_.emit(Op::OpIMul, uvec4(), {m_.emit(Op::OpBitcast, uvec4(), {v}), dv})});
    }
    return idx;
  }

  // v mod n in [0, n) for every sign of v (n > 0), in unsigned arithmetic: lavapipe's OpSMod
  // gives wrong results for negative dividends.
  id positive_mod(id v, id n) {
    id ivec4 = vec(lane_kind::s32);
    id negative = m_.emit(Op::OpSLessThan, bvec4(), {v, isplat(lane_kind::s32, 0)});
    id magnitude =
        m_.emit(Op::OpBitcast, uvec4(),
                {m_.emit(Op::OpSelect, ivec4, {negative, m_.emit(Op::OpSNegate, ivec4, {v}), v})});
    id un = m_.emit(Op::OpBitcast, uvec4(), {n});
    id m = m_.emit(Op::OpUMod, uvec4(), {magnitude, un});
    id wraps = m_.emit(Op::OpLogicalAnd, bvec4(),
                       {negative, m_.emit(Op::OpINotEqual, bvec4(), {m, usplat(0)})});
    id r = m_.emit(Op::OpSelect, uvec4(), {wraps, m_.emit(Op::OpISub, uvec4(), {un, m}), m});
    return m_.emit(Op::OpBitcast, ivec4, {r});
  }

  // offset + sum of coordinate x stride, per lane (words: rank strides, then the offset).
  id affine_index(const std::vector<id>& words) {
    id offset = words[mb_->rank];
    id idx = m_.emit(Op::OpCompositeConstruct, uvec4(), {offset, offset, offset, offset});
    for (int i = 0; i < mb_->rank; ++i) {
      id s = words[i];
      id sv = m_.emit(Op::OpCompositeConstruct, uvec4(), {s, s, s, s});
      idx = m_.emit(Op::OpIAdd, uvec4(), {idx, m_.emit(Op::OpIMul, uvec4(), {coords_[i], sv})});
    }
    return idx;
  }

  // Loads argument k of the region for the four lanes, as its compute type.
  id load_argument(std::size_t k, dtype t) {
    if (auto it = row_values_.find({k, t}); it != row_values_.end()) return it->second;
    id var = binding(k);
    int bytes = size_in_bytes(t);
    lane_kind lk = lane_of(t);
    operand_kind kind = mb_->kinds[k];
    if (lanes_ && kind == operand_kind::full) kind = operand_kind::strided;  // a row, lane by lane
    if (is_strided(kind) && !lanes_in_a_row()) kind = operand_kind::strided;
    // Lane 0's index (the four lanes': it, consecutive; it alone, repeated).
    const id first = kind == operand_kind::consecutive || kind == operand_kind::repeated
                         ? first_lane_index(mb_->strided_slot[k])
                         : 0;
    auto each_lane = [&] { return first ? consecutive_from(first) : element_indices(k); };
    if (bytes == 8) {
      id l[4];
      if (kind == operand_kind::full) {
        id q = m_.emit(Op::OpShiftLeftLogical, u32(), {g_index_, cu(1)});
        id v0 = quad(var, q), v1 = quad(var, m_.emit(Op::OpIAdd, u32(), {q, cu(1)}));
        for (int i = 0; i < 4; ++i) {
          id v = i < 2 ? v0 : v1;
          std::uint32_t c = (i % 2) * 2;
          id pair = m_.emit(Op::OpVectorShuffle, m_.type_vector(u32(), 2), {v, v, c, c + 1});
          l[i] = m_.emit(Op::OpBitcast, scalar_type(lk), {pair});
        }
      } else if (kind == operand_kind::uniform || kind == operand_kind::repeated) {
        l[0] = l[1] = l[2] = l[3] = element64(var, first ? first : cu(0), lk);
      } else {
        id idx = each_lane();
        for (std::uint32_t i = 0; i < 4; ++i) l[i] = element64(var, lane(idx, u32(), i), lk);
      }
      return compose(vec(lk), l[0], l[1], l[2], l[3]);
    }
    id bits;
    if (kind == operand_kind::uniform || kind == operand_kind::repeated) {
      id b = element_bits(var, first ? first : cu(0), bytes);
      bits = compose(uvec4(), b, b, b, b);
    } else if (kind == operand_kind::consecutive && bytes == 4) {
      bits = quad(var, m_.emit(Op::OpShiftRightLogical, u32(), {first, cu(2)}));
    } else if (kind != operand_kind::full) {
      id idx = each_lane();
      id l[4];
      for (std::uint32_t i = 0; i < 4; ++i) l[i] = element_bits(var, lane(idx, u32(), i), bytes);
      bits = compose(uvec4(), l[0], l[1], l[2], l[3]);
    } else if (bytes == 4) {
      bits = quad(var, g_index_);
    } else if (bytes == 2) {
      id w = m_.emit(Op::OpShiftLeftLogical, u32(), {g_index_, cu(1)});
      id w0 = word(var, w), w1 = word(var, m_.emit(Op::OpIAdd, u32(), {w, cu(1)}));
      id pairs = compose(uvec4(), w0, w0, w1, w1);
      id shifted = m_.emit(Op::OpShiftRightLogical, uvec4(),
                           {pairs, m_.constant_composite(uvec4(), {cu(0), cu(16), cu(0), cu(16)})});
      bits = m_.emit(Op::OpBitwiseAnd, uvec4(), {shifted, usplat(0xFFFF)});
    } else {
      id w = word(var, g_index_);
      id all = compose(uvec4(), w, w, w, w);
      id shifted = m_.emit(Op::OpShiftRightLogical, uvec4(),
                           {all, m_.constant_composite(uvec4(), {cu(0), cu(8), cu(16), cu(24)})});
      bits = m_.emit(Op::OpBitwiseAnd, uvec4(), {shifted, usplat(0xFF)});
    }
    return from_bits(t, bits);
  }

  // The element indices of argument k's four lanes, read one by one: a strided argument's, or a
  // full one's in a contraction's row (lanes_).
  id element_indices(std::size_t k) {
    return is_strided(mb_->kinds[k]) ? strided_index(mb_->strided_slot[k]) : lanes_;
  }

  // Zero-extended storage bits (uvec4) to the compute type.
  id from_bits(dtype t, id bits) {
    switch (t) {
      case dtype::f32:
        return m_.emit(Op::OpBitcast, vec(lane_kind::f32), {bits});
      case dtype::u32:
      case dtype::u16:
      case dtype::u8:
        return bits;
      case dtype::i32:
        return m_.emit(Op::OpBitcast, vec(lane_kind::s32), {bits});
      case dtype::i8:
      case dtype::i16:
        return wrap(t, m_.emit(Op::OpBitcast, vec(lane_kind::s32), {bits}));
      case dtype::boolean:
        return m_.emit(Op::OpINotEqual, bvec4(), {bits, usplat(0)});
      default:
        return decode(narrow_layout(t), bits);
    }
  }

  // The compute type to the storage bits (uvec4, each lane in the low bytes).
  id to_bits(dtype t, id v) {
    switch (t) {
      case dtype::f32:
      case dtype::i32:
        return m_.emit(Op::OpBitcast, uvec4(), {v});
      case dtype::u32:
        return v;
      case dtype::u8:
      case dtype::u16:
        return m_.emit(Op::OpBitwiseAnd, uvec4(), {v, usplat(t == dtype::u8 ? 0xFF : 0xFFFF)});
      case dtype::i8:
      case dtype::i16:
        return m_.emit(
            Op::OpBitwiseAnd, uvec4(),
            {m_.emit(Op::OpBitcast, uvec4(), {v}), usplat(t == dtype::i8 ? 0xFF : 0xFFFF)});
      case dtype::boolean:
        return m_.emit(Op::OpSelect, uvec4(), {v, usplat(1), usplat(0)});
      default:
        return encode(narrow_layout(t), v);
    }
  }

  // Stores v to the region's output binding `slot` (its position among the output slots).
  void store_result(std::size_t slot, dtype t, id v) {
    id var = binding(mb_->n_inputs + mb_->r->indices.size() + slot);
    int bytes = size_in_bytes(t);
    auto store = [&](id ptr, id value) { m_.inst(Op::OpStore, {ptr, value}); };
    if (lanes_) {  // a contraction's row, lane by lane where it holds an element (check(): not
                   // narrow, whose words the next row shares)
      id bits = bytes == 8 ? 0 : to_bits(t, v);
      for (std::uint32_t i = 0; i < 4; ++i) {
        auto one = [&] {
          id e = lane(lanes_, u32(), i);
          if (bytes == 4) return store(word_ptr(var, e), lane(bits, u32(), i));
          id pair = m_.emit(Op::OpBitcast, m_.type_vector(u32(), 2),
                            {lane(v, scalar_type(lane_of(t)), i)});
          id w = m_.emit(Op::OpShiftLeftLogical, u32(), {e, cu(1)});
          store(word_ptr(var, w), lane(pair, u32(), 0));
          store(word_ptr(var, m_.emit(Op::OpIAdd, u32(), {w, cu(1)})), lane(pair, u32(), 1));
        };
        if (i == 0)
          one();  // the row's first lane is always in it
        else
          only_where(lane(lane_ok_, m_.type_bool(), i), one);
      }
      return;
    }
    if (bytes == 8) {
      id l[4];
      for (std::uint32_t i = 0; i < 4; ++i)
        l[i] =
            m_.emit(Op::OpBitcast, m_.type_vector(u32(), 2), {lane(v, scalar_type(lane_of(t)), i)});
      id q = m_.emit(Op::OpShiftLeftLogical, u32(), {g_index_, cu(1)});
      id v0 = m_.emit(Op::OpVectorShuffle, uvec4(), {l[0], l[1], 0, 1, 2, 3});
      id v1 = m_.emit(Op::OpVectorShuffle, uvec4(), {l[2], l[3], 0, 1, 2, 3});
      store(quad_ptr(var, q), v0);
      store(quad_ptr(var, m_.emit(Op::OpIAdd, u32(), {q, cu(1)})), v1);
      return;
    }
    id bits = to_bits(t, v);
    if (bytes == 4) {
      store(quad_ptr(var, g_index_), bits);
    } else if (bytes == 2) {
      id hi = m_.emit(Op::OpShiftLeftLogical, uvec4(), {bits, usplat(16)});
      id w0 = m_.emit(Op::OpBitwiseOr, u32(), {lane(bits, u32(), 0), lane(hi, u32(), 1)});
      id w1 = m_.emit(Op::OpBitwiseOr, u32(), {lane(bits, u32(), 2), lane(hi, u32(), 3)});
      id w = m_.emit(Op::OpShiftLeftLogical, u32(), {g_index_, cu(1)});
      store(word_ptr(var, w), w0);
      store(word_ptr(var, m_.emit(Op::OpIAdd, u32(), {w, cu(1)})), w1);
    } else {
      id sh = m_.emit(Op::OpShiftLeftLogical, uvec4(),
                      {bits, m_.constant_composite(uvec4(), {cu(0), cu(8), cu(16), cu(24)})});
      id a = m_.emit(Op::OpBitwiseOr, u32(), {lane(sh, u32(), 0), lane(sh, u32(), 1)});
      id b = m_.emit(Op::OpBitwiseOr, u32(), {lane(sh, u32(), 2), lane(sh, u32(), 3)});
      store(word_ptr(var, g_index_), m_.emit(Op::OpBitwiseOr, u32(), {a, b}));
    }
  }

  // Float values the kernel reads from the metadata (see kernel::constants): the graph's float
  // constants, and the 0 and 1 a bool -> float cast selects from (a driver that folds the
  // condition would otherwise see a literal 0.0 divisor).
  static std::pair<int, std::uint64_t> opaque_key(lane_kind k, double v) {
    return {static_cast<int>(k), k == lane_kind::f64
                                     ? std::bit_cast<std::uint64_t>(v)
                                     : std::bit_cast<std::uint32_t>(static_cast<float>(v))};
  }
  void register_opaque(kernel& k, lane_kind lk, double v) {
    auto key = opaque_key(lk, v);
    if (opaque_word_.contains(key)) return;
    opaque_word_[key] = constants_at_ + static_cast<std::uint32_t>(k.constants.size());
    k.constants.push_back(static_cast<std::uint32_t>(key.second));
    if (lk == lane_kind::f64) k.constants.push_back(static_cast<std::uint32_t>(key.second >> 32));
  }
  // Loads every registered value once, at the kernel's entry.
  void load_opaque() {
    for (const auto& [key, w] : opaque_word_) {
      auto k = static_cast<lane_kind>(key.first);
      id v;
      if (k == lane_kind::f64) {
        id pair = m_.emit(Op::OpCompositeConstruct, m_.type_vector(u32(), 2),
                          {metadata_word(w), metadata_word(w + 1)});
        v = m_.emit(Op::OpBitcast, scalar_type(k), {pair});
      } else {
        v = m_.emit(Op::OpBitcast, scalar_type(k), {metadata_word(w)});
      }
      opaque_value_[key] = compose(vec(k), v, v, v, v);
    }
  }
  id opaque(lane_kind k, double v) override { return opaque_value_.at(opaque_key(k, v)); }

  id constant(const ir::node& n) {
    lane_kind k = lane_of(n.type);
    if (is_float_lane(k)) return opaque(k, n.value.f);
    return isplat(k, n.value.i);
  }

  // ---- the function ---------------------------------------------------------------------------
  void body() {
    id void_t = m_.type_void();
    m_.inst(Op::OpFunction,
            {void_t, main_, static_cast<std::uint32_t>(spv::FunctionControlMask::MaskNone),
             m_.type_function(void_t)});
    id entry = m_.label();
    id uvec3 = m_.type_vector(u32(), 3);
    if (mb_->r->contraction >= 0) {
      for (member& m : members_) {  // the product's, then its prologues'
        mb_ = &m;
        read_layout();
      }
      mb_ = &members_[0];
      load_opaque();
      current_label_ = entry;
      contraction_body();
      m_.inst(Op::OpReturn, {});
      m_.inst(Op::OpFunctionEnd, {});
      return;
    }
    // Elementwise: each invocation takes every (invocations)th group of four elements; a
    // reduction or a row group: each workgroup every (workgroups)th group of four results.
    id nx = lane(m_.emit(Op::OpLoad, uvec3, {groups_id_}), u32(), 0);
    id gx = 0, stride = nx;
    if (members_[0].r->root >= 0) {
      gx = lane(m_.emit(Op::OpLoad, uvec3, {group_id_}), u32(), 0);
      local_ = lane(m_.emit(Op::OpLoad, uvec3, {local_id_}), u32(), 0);
    } else {
      gx = lane(m_.emit(Op::OpLoad, uvec3, {global_id_}), u32(), 0);
      stride = m_.emit(Op::OpIMul, u32(), {nx, wg_size_});
    }
    for (member& m : members_) {
      mb_ = &m;
      read_layout();
    }
    mb_ = &members_[0];
    id groups = metadata(0);
    load_opaque();
    current_label_ = entry;
    counted_loop(gx, groups, stride, {}, {}, [&](id g, const carried&) -> carried {
      g_index_ = g;
      if (members_.size() > 1)
        group_step(g);
      else if (mb_->r->root >= 0)
        reduction_loop();
      else
        store_all(evaluate());
      return {};
    });
    m_.inst(Op::OpReturn, {});
    m_.inst(Op::OpFunctionEnd, {});
  }

  // The current member's extents, operand strides and index terms, from its metadata.
  void read_layout() {
    member& m = *mb_;
    m.total = metadata(1);
    for (int i = 0; i < m.rank; ++i) m.dims.push_back(metadata(2 + i));
    std::uint32_t next = 2 + m.rank;
    for (std::size_t a = 0; a < m.kinds.size(); ++a) {
      m.strided_slot.push_back(static_cast<int>(m.strides.size()));
      if (!is_strided(m.kinds[a])) continue;
      m.strides.emplace_back();
      for (int i = 0; i <= m.rank; ++i) m.strides.back().push_back(metadata(next++));  // + offset
      auto& terms = m.terms.emplace_back();
      for (const term_source& src : m.input_terms[a]) {
        term_words& t = terms.emplace_back(term_words{src.binding, src.wide, src.fold, {}});
        for (int i = 0; i < m.rank + 3; ++i) t.words.push_back(metadata(next++));
      }
    }
  }

  // Stores what the current (elementwise) member stores, from its evaluated values.
  void store_all(const std::vector<id>& value) {
    for (std::size_t s = 0; s < mb_->stores.size(); ++s)
      store_result(s, g_.nodes[mb_->stores[s].node].type, value[mb_->stores[s].node]);
  }

  // Which argument of the member (inputs: its input slots) holds input slot `slot`.
  static std::size_t argument_of(const std::vector<std::int32_t>& inputs, int slot) {
    return static_cast<std::size_t>(std::find(inputs.begin(), inputs.end(), slot) - inputs.begin());
  }

  // Evaluates the region's nodes for the current lanes (a reduction's: its operand's
  // producers, not the root).
  std::vector<id> evaluate() {
    std::vector<id> value(g_.nodes.size(), 0);
    auto inputs = compiler::input_slots(p_, *mb_->r);
    for (auto nid : mb_->r->nodes) {
      if (nid == mb_->r->root) continue;
      if (mb_->r->contraction >= 0) {  // an epilogue: what the stores read, on the product
        if (!mb_->evaluated[nid]) continue;
        if (nid == mb_->r->contraction) {
          value[nid] = product_;
          continue;
        }
      }
      const ir::node& n = g_.nodes[nid];
      auto in = [&](int i) { return value[n.operands[i]]; };
      if (int slot = compiler::load_slot(p_, *mb_->r, nid); slot >= 0) {
        value[nid] = load_argument(argument_of(inputs, slot), n.type);
        continue;
      }
      using ir::op_class;
      switch (ir::info(n.kind).cls) {
        case op_class::leaf:
          value[nid] = constant(n);
          break;
        case op_class::unary:
          value[nid] = unary(n, in(0));
          break;
        case op_class::binary:
          value[nid] = binary(n, in(0), in(1));
          break;
        case op_class::ternary:
          value[nid] = ternary(n, in(0), in(1), in(2));
          break;
        case op_class::test:
          value[nid] = test(n, in(0));
          break;
        case op_class::compare:
          value[nid] = compare(n, g_.nodes[n.operands[0]].type, in(0), in(1));
          break;
        case op_class::logical:
          value[nid] =
              n.kind == ir::op::logical_not
                  ? m_.emit(Op::OpLogicalNot, bvec4(), {in(0)})
                  : m_.emit(n.kind == ir::op::logical_and ? Op::OpLogicalAnd : Op::OpLogicalOr,
                            bvec4(), {in(0), in(1)});
          break;
        case op_class::select:
          value[nid] = select(lane_of(n.type), in(0), in(1), in(2));
          break;
        case op_class::cast:
          value[nid] = cast(g_.nodes[n.operands[0]].type, n.type, in(0));
          break;
        case op_class::view:  // one broadcasting already gives (compiler::computed_view)
          value[nid] = in(0);
          break;
        case op_class::reduction:
        case op_class::index_reduction:
        case op_class::contraction:  // the product (above)
          break;                     // loaded (above) or the root (reduction_loop)
      }
    }
    return value;
  }

  // ---- loops, barriers and shared memory -------------------------------------------------------
  // The values a fold carries around its loops.
  using carried = std::vector<id>;

  // for (r = local; r < count; r += W) now = step(r, now); gives the final values.
  carried strided_loop(id count, const carried& init, const std::vector<id>& types,
                       function_ref<carried(id r, const carried& now)> step) {
    return counted_loop(local_, count, wg_size_, init, types, step);
  }

  // for (r = first; r < count; r += stride) now = step(r, now); gives the final values. Starts
  // from current_label_ (the block it is emitted in) and leaves it at the loop's merge block.
  carried counted_loop(id first, id count, id stride, const carried& init,
                       const std::vector<id>& types,
                       function_ref<carried(id r, const carried& now)> step) {
    id before = current_label_;
    id header = m_.fresh(), check = m_.fresh(), body = m_.fresh(), cont = m_.fresh(),
       merge = m_.fresh(), r_next = m_.fresh();
    std::vector<id> next_ids;
    for (std::size_t k = 0; k < init.size(); ++k) next_ids.push_back(m_.fresh());
    m_.inst(Op::OpBranch, {header});
    m_.label(header);
    id r = m_.emit(Op::OpPhi, u32(), {first, before, r_next, cont});
    carried now;
    for (std::size_t k = 0; k < init.size(); ++k)
      now.push_back(m_.emit(Op::OpPhi, types[k], {init[k], before, next_ids[k], cont}));
    m_.inst(Op::OpLoopMerge,
            {merge, cont, static_cast<std::uint32_t>(spv::LoopControlMask::MaskNone)});
    m_.inst(Op::OpBranch, {check});
    m_.label(check);
    id more = m_.emit(Op::OpULessThan, m_.type_bool(), {r, count});
    m_.inst(Op::OpBranchConditional, {more, body, merge});
    m_.label(body);
    current_label_ = body;  // a loop in step starts from here
    carried next = step(r, now);
    m_.inst(Op::OpBranch, {cont});
    m_.label(cont);
    m_.emit_to(r_next, Op::OpIAdd, u32(), {r, stride});
    for (std::size_t k = 0; k < init.size(); ++k)
      m_.emit_to(next_ids[k], Op::OpCopyObject, types[k], {next[k]});
    m_.inst(Op::OpBranch, {header});
    m_.label(merge);
    current_label_ = merge;
    return now;
  }

  void barrier() {
    m_.inst(Op::OpControlBarrier,
            {cu(static_cast<std::uint32_t>(spv::Scope::Workgroup)),
             cu(static_cast<std::uint32_t>(spv::Scope::Workgroup)),
             cu(static_cast<std::uint32_t>(spv::MemorySemanticsMask::AcquireRelease |
                                           spv::MemorySemanticsMask::WorkgroupMemory))});
  }
  // Between a row group's members: shared memory and the buffers' stores (UniformMemory) of
  // every invocation are visible to the whole workgroup after it.
  void group_barrier() {
    m_.inst(Op::OpControlBarrier,
            {cu(static_cast<std::uint32_t>(spv::Scope::Workgroup)),
             cu(static_cast<std::uint32_t>(spv::Scope::Workgroup)),
             cu(static_cast<std::uint32_t>(spv::MemorySemanticsMask::AcquireRelease |
                                           spv::MemorySemanticsMask::UniformMemory |
                                           spv::MemorySemanticsMask::WorkgroupMemory))});
  }
  // Emits then() in invocation 0 of the workgroup only.
  void in_first_invocation(function_ref<void()> then) {
    only_where(m_.emit(Op::OpIEqual, m_.type_bool(), {local_, cu(0)}), then);
  }
  // Emits then() in the invocations where `condition` (a bool) holds.
  void only_where(id condition, function_ref<void()> then) {
    id then_label = m_.fresh(), merge = m_.fresh();
    m_.inst(Op::OpSelectionMerge,
            {merge, static_cast<std::uint32_t>(spv::SelectionControlMask::MaskNone)});
    m_.inst(Op::OpBranchConditional, {condition, then_label, merge});
    m_.label(then_label);
    current_label_ = then_label;
    then();
    m_.inst(Op::OpBranch, {merge});
    m_.label(merge);
    current_label_ = merge;
  }
  id builtin_u32(id var) { return m_.emit(Op::OpLoad, u32(), {var}); }
  id shared_slot(std::size_t array, id type, id i) {
    return m_.emit(Op::OpAccessChain, m_.type_pointer(spv::StorageClass::Workgroup, type),
                   {shared_[mb_->shared[array]], i});
  }

  // ---- row groups and reductions (emit_row_group.hpp) ------------------------------------------
  void group_step(id g);
  void over_whole_rows(id first, id end, id count);
  void enter_row(id row, std::uint32_t axes);
  void read_row_values(int reduced_axes);
  void workgroup_join(const carried& partial, const std::vector<id>& types,
                      function_ref<carried(const carried& mine, const carried& other)> join,
                      function_ref<void(const carried& total)> finish,
                      const function_ref<carried(const carried&)>* subgroup = nullptr);
  // A row's state for evaluate() (enter_row), kept to work on several rows side by side.
  struct row_state {
    id first;
    std::vector<id> coords;
    std::map<std::pair<std::size_t, dtype>, id> values;
  };
  row_state enter_row_state(id row, std::uint32_t axes, id first);
  void use_row(const row_state& r);
  carried along_rows(id count, const carried& start, const std::vector<id>& types,
                     function_ref<carried(id row, id q, const carried& now)> fold,
                     function_ref<carried(const carried& folded)> finish,
                     const std::vector<id>& totals);
  id result_firsts(id count);
  id operand_at(id firsts, id r);
  id operand_along(id row, id q);
  id operand_of(id elements, bool along);
  void reduction_loop();
  void index_reduction_loop(ir::op kind, bool select_last, lane_kind k, id count,
                            std::size_t outputs);

  // ---- contractions (emit_contraction.hpp)
  // -------------------------------------------------------
  void contraction_body();
  id evaluate_prologue(std::size_t which, id at);
  // An operand of a product on the matrix units read as whole groups of eight f16 (16-byte loads)
  // where `usable` holds at run time (0: never): its binding, offset and stride between its rows
  // (A's along M, B's along K), in elements.
  struct packed_operand {
    id var = 0, offset = 0, lead = 0, usable = 0;
  };
  void matrix_unit_steps(
      const target::gemm_tile& tile, id M, id N, id K, id row0, id col0,
      const packed_operand (&packed)[2],
      function_ref<void(id k0, int o, function_ref<void(id, id, id)> store)> stage,
      function_ref<void(id row, id col, id v)> epilogue);

  static std::int64_t lowest_of(dtype t) { return is_signed_integer(t) ? integer_min(t) : 0; }
  static std::int64_t highest_of(dtype t) {  // a u64's as its bits
    return static_cast<std::int64_t>(unsigned_max(t));
  }

  static constexpr std::size_t no_binding = ~std::size_t{0};
  struct term_source {    // an index term of a view (compiler::index_term)
    std::size_t binding;  // of its positions; no_binding: computed (a shift)
    bool wide;            // i64 positions, else i32
    ir::position_fold fold;
  };
  struct term_words {  // an index term's metadata
    std::size_t binding;
    bool wide;
    ir::position_fold fold;
    std::vector<id> words;  // positions' rank strides and offset, data stride, extent
  };
  // A region of the kernel (the only one, or a member of a row group) and what its code reads.
  struct member {
    const compiler::region* r = nullptr;
    std::vector<operand_kind> kinds;      // per input slot
    std::size_t n_inputs = 0;             // input bindings (parameters, transients, views);
                                          // region::indices are bound after them, then the outputs
    std::vector<compiler::store> stores;  // what an elementwise region stores, by output
    std::vector<std::vector<term_source>> input_terms;  // per input binding
    std::vector<std::size_t> binding;  // the kernel's binding of each of its own (all_)
    std::vector<std::size_t> shared;   // its partials' shared arrays (a reduction)
    std::vector<bool> evaluated;       // a contraction's: the nodes its epilogue evaluates, by id
    int rank = 0;
    std::uint32_t base = 0, words = 0;  // its metadata: first word, count (constants excluded)
    std::uint32_t gemm_at = 0;          // a contraction's words (contraction_words), from base
    id total = 0;                       // elements (a reduction: results)
    std::vector<id> dims;
    std::vector<std::vector<id>> strides;        // per strided argument: rank strides, offset
    std::vector<std::vector<term_words>> terms;  // per strided argument, as strides
    std::vector<int> strided_slot;               // per argument: its index in strides
  };

  member make_member(const compiler::region& r, const std::vector<operand_kind>& kinds) const {
    member m;
    m.r = &r;
    m.kinds = kinds;
    m.n_inputs = compiler::input_slots(p_, r).size();
    m.stores = compiler::region_stores(p_, r);
    if (r.contraction >= 0) m.evaluated = compiler::evaluated_nodes(p_, r);
    for (const kernel_binding& b : region_bindings(p_, r))
      m.binding.push_back(
          static_cast<std::size_t>(std::find(all_.begin(), all_.end(), b) - all_.begin()));
    // Each view's index terms: the binding of its positions (after the input slots; none for a
    // shift's computed positions), their element size, and how they fold into the axis.
    const auto n_args = static_cast<std::int32_t>(g_.inputs.size());
    const auto first_view = n_args + static_cast<std::int32_t>(p_.transients.size());
    for (auto slot : compiler::input_slots(p_, r)) {
      auto& terms = m.input_terms.emplace_back();
      if (slot < first_view) continue;
      for (auto [s, fold] : compiler::view_terms(p_, slot - first_view)) {
        if (s < 0) {
          terms.push_back({no_binding, false, fold});
          continue;
        }
        auto at = std::find(r.indices.begin(), r.indices.end(), s) - r.indices.begin();
        dtype t = s < n_args ? g_.inputs[s].type : g_.nodes[p_.transients[s - n_args]].type;
        terms.push_back({m.n_inputs + static_cast<std::size_t>(at), size_in_bytes(t) == 8, fold});
      }
    }
    return m;
  }

  const compiler::plan& p_;
  const ir::graph& g_;
  const target& t_;
  std::vector<kernel_binding> all_;  // the kernel's bindings (the metadata buffer's not included)
  std::vector<member> members_;
  member* mb_ = nullptr;  // the member whose code is being emitted
  id elements_ = 0;       // a reduction's operand elements of the current step
  id current_label_ = 0;  // the block a loop being emitted starts from
  std::vector<id> bindings_;
  id push_ = 0, global_id_ = 0, groups_id_ = 0, wg_size_ = 0, main_ = 0;
  id local_id_ = 0, group_id_ = 0, local_ = 0;  // reductions (see reduction_loop)
  id subgroup_local_id_ = 0, subgroup_id_ = 0, subgroups_id_ = 0;  // and their subgroups
  std::vector<id> shared_;  // their shared arrays of partials
  id g_index_ = 0;
  std::vector<id> coords_;
  std::vector<id> coords0_;     // lane 0's (first_lane_coords)
  bool along_ = false;          // a reduction's lanes are four consecutive elements of a row:
  std::vector<id> row_coords_;  // the row's coordinates (the kept axes')
  id along_r_ = 0;              // and lane 0's reduced index
  // The row's values of its repeated arguments (read_row_values), by argument and dtype.
  std::map<std::pair<std::size_t, dtype>, id> row_values_;
  bool whole_quads_ = true;         // (see the constructor)
  id lanes_ = 0, lane_ok_ = 0;      // a contraction's row when not whole quads: each lane's
                                    // element (clamped) and whether it holds one
  id product_ = 0;                  // the contraction's value in the lanes being evaluated
  std::uint32_t constants_at_ = 0;  // metadata word of the first opaque value
  std::map<std::pair<int, std::uint64_t>, std::uint32_t> opaque_word_;  // (lane, bits) -> word
  std::map<std::pair<int, std::uint64_t>, id> opaque_value_;            // (lane, bits) -> value
};

}  // namespace detail

}  // namespace kiln::spirv
