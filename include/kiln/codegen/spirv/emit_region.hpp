// The region emitter: one dispatch region of a plan becomes one SPIR-V compute shader. Each
// invocation computes four consecutive elements of the iteration space as 4-wide vectors, in a
// grid-stride loop; every buffer is an array of uvec4 words, so narrow types (8/16-bit ints, f16,
// bf16, fp8, bool) are packed and unpacked in 32-bit words and need no 8/16-bit storage feature.
#pragma once

#include <bit>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/codegen/spirv/module.hpp"
#include "kiln/codegen/spirv/target.hpp"
#include "kiln/compiler/plan.hpp"

namespace kiln::spirv {

// How a region argument is laid out over the iteration space (chosen per call from the extents).
enum class operand_kind : std::uint8_t {
  full,     // the argument has the space's extents: element e is at index e
  uniform,  // a single element, read once
  strided,  // broadcast: index from the coordinates and per-dimension strides
};

// Metadata words (push constants, or a small buffer past the device's push-constant size):
// [0] 4-element groups, [1] elements, [2, 2+rank) the space's extents, then rank strides for each
// strided argument in order, then the region's float constants (kernel::constants).
inline std::uint32_t metadata_words(int rank, int strided_args) {
  return 2 + static_cast<std::uint32_t>(rank) * (1 + static_cast<std::uint32_t>(strided_args));
}

struct kernel {
  words code;                  // the module; empty when the device cannot run the region
  std::string unsupported;     // why not, naming the op and dtype
  std::uint32_t bindings = 0;  // region arguments, then results, then the metadata buffer if any
  std::uint32_t metadata = 0;  // metadata words, the constants' included
  bool metadata_in_buffer = false;
  // The float constants of the region, as words that end the metadata: a kernel reads them at run
  // time rather than as SPIR-V constants, so no driver can fold them against IEEE rules (llvmpipe
  // turns x * 0.0 into 0 and x / 0.0 into 0 when 0.0 is a shader constant), and kernels that
  // differ only in their constants are one kernel.
  std::vector<std::uint32_t> constants;
};

namespace detail {

// Lanes of each dtype: f32 for every float of 32 bits or less, 32-bit ints for narrow ints.
enum class lane_kind : std::uint8_t { f32, f64, s32, u32, s64, boolean };

constexpr lane_kind lane_of(dtype t) {
  switch (t) {
    case dtype::f64:
      return lane_kind::f64;
    case dtype::i8:
    case dtype::i16:
    case dtype::i32:
      return lane_kind::s32;
    case dtype::u8:
    case dtype::u32:
      return lane_kind::u32;
    case dtype::i64:
      return lane_kind::s64;
    case dtype::boolean:
      return lane_kind::boolean;
    default:
      return lane_kind::f32;
  }
}
constexpr bool is_float_lane(lane_kind k) { return k == lane_kind::f32 || k == lane_kind::f64; }
constexpr bool is_signed_lane(lane_kind k) { return k == lane_kind::s32 || k == lane_kind::s64; }

// A storage-only float format (mirrors core/minifloat.hpp's minifloat_format, bit for bit).
struct narrow_format {
  int exp, man;
  bool has_inf, saturate;
  std::uint32_t bias() const { return (1u << (exp - 1)) - 1; }
  std::uint32_t exp_mask() const { return (1u << exp) - 1; }
  std::uint32_t sign_bit() const { return 1u << (exp + man); }
  std::uint32_t inf_bits() const { return exp_mask() << man; }
  std::uint32_t nan_bits() const {
    return has_inf ? inf_bits() | (1u << (man - 1)) : (exp_mask() << man) | ((1u << man) - 1);
  }
  std::uint32_t max_finite_bits() const { return has_inf ? inf_bits() - 1 : nan_bits() - 1; }
};
constexpr narrow_format format_of(dtype t) {
  switch (t) {
    case dtype::f16:
      return {5, 10, true, false};
    case dtype::bf16:
      return {8, 7, true, false};
    case dtype::f8e4m3:
      return {4, 3, false, true};
    default:
      return {5, 2, true, true};
  }
}

// GLSL.std.450 has only 16/32-bit forms of these: a 64-bit float region falls back to the CPU.
constexpr bool needs_32bit_float(ir::op o) {
  using ir::op;
  switch (o) {
    case op::exp:
    case op::log:
    case op::tanh:
    case op::sigmoid:
    case op::erf:
    case op::sin:
    case op::cos:
    case op::pow:
      return true;
    default:
      return false;
  }
}

class region_emitter {
 public:
  region_emitter(const ir::graph& g, const compiler::region& r,
                 const std::vector<operand_kind>& kinds, const target& t)
      : g_(g), r_(r), kinds_(kinds), t_(t) {}

  kernel run() {
    kernel k;
    k.unsupported = check();
    if (!k.unsupported.empty()) return k;
    int strided = 0;
    for (auto kind : kinds_) strided += kind == operand_kind::strided;
    rank_ = r_.space.rank;
    constants_at_ = metadata_words(rank_, strided);
    for (auto id : r_.nodes) {
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
    k.bindings = static_cast<std::uint32_t>(r_.args.size() + r_.results.size()) +
                 (k.metadata_in_buffer ? 1 : 0);
    declare(k);
    body();
    k.code = m_.assemble();
    return k;
  }

 private:
  using Op = spv::Op;

  // ---- what the device can run --------------------------------------------------------------
  std::string check() const {
    auto needs = [&](dtype t) -> std::string {
      if (t == dtype::f64 && !t_.float64) return "f64 needs shaderFloat64, which the device lacks";
      if (t == dtype::i64 && !t_.int64) return "i64 needs shaderInt64, which the device lacks";
      return "";
    };
    // Ops first (the message names the op), then the leaves (an argument or constant alone).
    std::vector<std::int32_t> order;
    for (int leaves = 0; leaves < 2; ++leaves)
      for (auto id : r_.nodes)
        if ((ir::info(g_.nodes[id].kind).cls == ir::op_class::leaf) == (leaves == 1))
          order.push_back(id);
    for (auto id : order) {
      const ir::node& n = g_.nodes[id];
      std::string what = std::string(ir::name(n.kind)) + " on " + std::string(name(n.type));
      if (auto s = needs(n.type); !s.empty()) return what + ": " + s;
      if (n.kind == ir::op::cast) {
        dtype from = g_.nodes[n.operands[0]].type;
        if (auto s = needs(from); !s.empty()) return what + ": " + s;
        if (from == dtype::i64 && lane_of(n.type) == lane_kind::f32 && !t_.float64)
          return what + ": i64 to float rounds through f64, which needs shaderFloat64";
      }
      if (n.type == dtype::f64 && needs_32bit_float(n.kind))
        return what + ": GLSL.std.450 has no 64-bit form of " + std::string(ir::name(n.kind));
    }
    return "";
  }

  // ---- types ----------------------------------------------------------------------------------
  id scalar_type(lane_kind k) {
    // Types are asked for at nearly every instruction: remembered per lane kind.
    id& cached = scalar_types_[static_cast<int>(k)];
    if (!cached) cached = declare_scalar(k);
    return cached;
  }
  id declare_scalar(lane_kind k) {
    switch (k) {
      case lane_kind::f32:
        return m_.type_float(32);
      case lane_kind::f64:
        return m_.type_float(64);
      case lane_kind::s32:
        return m_.type_int(32, true);
      case lane_kind::u32:
        return m_.type_int(32, false);
      case lane_kind::s64:
        return m_.type_int(64, true);
      default:
        return m_.type_bool();
    }
  }
  id vec(lane_kind k) {
    id& cached = vector_types_[static_cast<int>(k)];
    if (!cached) cached = m_.type_vector(scalar_type(k), 4);
    return cached;
  }
  id u32() { return scalar_type(lane_kind::u32); }
  id uvec4() { return vec(lane_kind::u32); }
  id bvec4() { return vec(lane_kind::boolean); }
  id cu(std::uint32_t v) { return m_.constant_u32(v); }
  // A constant of lane kind k, as 4 lanes (remembered: the same few constants recur).
  id splat(lane_kind k, double fv, std::int64_t iv) {
    auto key = std::tuple{static_cast<int>(k), std::bit_cast<std::uint64_t>(fv), iv};
    if (auto it = splats_.find(key); it != splats_.end()) return it->second;
    return splats_[key] = declare_splat(k, fv, iv);
  }
  id declare_splat(lane_kind k, double fv, std::int64_t iv) {
    id s = 0;
    switch (k) {
      case lane_kind::f32:
        s = m_.constant_f32(static_cast<float>(fv));
        break;
      case lane_kind::f64:
        s = m_.constant_64(scalar_type(k), std::bit_cast<std::uint64_t>(fv));
        break;
      case lane_kind::s32:
        s = m_.constant_i32(static_cast<std::int32_t>(iv));
        break;
      case lane_kind::u32:
        s = m_.constant_u32(static_cast<std::uint32_t>(iv));
        break;
      case lane_kind::s64:
        s = m_.constant_64(scalar_type(k), static_cast<std::uint64_t>(iv));
        break;
      case lane_kind::boolean:
        s = m_.constant_bool(iv != 0);
        break;
    }
    return m_.splat_constant(vec(k), s, 4);
  }
  id fsplat(lane_kind k, double v) { return splat(k, v, 0); }
  id isplat(lane_kind k, std::int64_t v) { return splat(k, 0, v); }
  id usplat(std::uint32_t v) { return isplat(lane_kind::u32, v); }

  // ---- declarations ---------------------------------------------------------------------------
  void declare(const kernel& k) {
    m_.capability(spv::Capability::Shader);
    bool f64 = false, i64 = false;
    for (auto id : r_.nodes) {
      f64 = f64 || g_.nodes[id].type == dtype::f64;
      i64 = i64 || g_.nodes[id].type == dtype::i64;
      if (g_.nodes[id].kind == ir::op::cast &&
          g_.nodes[g_.nodes[id].operands[0]].type == dtype::i64)
        f64 = f64 || lane_of(g_.nodes[id].type) == lane_kind::f32;
    }
    if (f64) m_.capability(spv::Capability::Float64);
    if (i64) m_.capability(spv::Capability::Int64);

    // Every binding: struct { uvec4 words[]; }, Block, in the StorageBuffer class.
    id array = m_.type_runtime_array(uvec4());
    m_.decorate(array, spv::Decoration::ArrayStride, {16});
    id block = m_.type_struct({array});
    m_.decorate(block, spv::Decoration::Block);
    m_.member_decorate(block, 0, spv::Decoration::Offset, {0});
    id ptr = m_.type_pointer(spv::StorageClass::StorageBuffer, block);
    for (std::uint32_t b = 0; b < k.bindings; ++b) {
      id var = m_.global(Op::OpVariable, ptr,
                         {static_cast<std::uint32_t>(spv::StorageClass::StorageBuffer)});
      m_.decorate(var, spv::Decoration::DescriptorSet, {0});
      m_.decorate(var, spv::Decoration::Binding, {b});
      if (b < r_.args.size()) m_.decorate(var, spv::Decoration::NonWritable);
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

    main_ = m_.fresh();
    m_.entry_point(spv::ExecutionModel::GLCompute, main_, "main", {global_id_, groups_id_});
    m_.name(main_, "main");
    // inf, NaN and -0 survive where the device can promise it (SPV_KHR_float_controls); f32
    // lanes exist in every kernel (narrow floats and casts compute in them).
    bool preserve32 = t_.preserve_inf_nan32, preserve64 = f64 && t_.preserve_inf_nan64;
    if (preserve32 || preserve64) {
      m_.extension("SPV_KHR_float_controls");
      m_.capability(spv::Capability::SignedZeroInfNanPreserve);
      if (preserve32) m_.execution_mode(main_, spv::ExecutionMode::SignedZeroInfNanPreserve, {32});
      if (preserve64) m_.execution_mode(main_, spv::ExecutionMode::SignedZeroInfNanPreserve, {64});
    }
  }

  // ---- memory access --------------------------------------------------------------------------
  id metadata(std::uint32_t i) {
    if (push_) {
      id p = m_.emit(Op::OpAccessChain, m_.type_pointer(spv::StorageClass::PushConstant, u32()),
                     {push_, m_.constant_i32(0), cu(i)});
      return m_.emit(Op::OpLoad, u32(), {p});
    }
    return word(bindings_.back(), cu(i));
  }
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
  id lane(id v, id type, std::uint32_t i) { return m_.emit(Op::OpCompositeExtract, type, {v, i}); }
  id compose(id type, id a, id b, id c, id d) {
    return m_.emit(Op::OpCompositeConstruct, type, {a, b, c, d});
  }

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

  // The element index of each of the four lanes of a broadcast argument.
  id strided_index(int strided_slot) {
    if (coords_.empty()) {
      // e = 4g + lane, clamped to the last element (the last group may be partial).
      id base = m_.emit(Op::OpIMul, u32(), {g_index_, cu(4)});
      id e = m_.emit(Op::OpIAdd, uvec4(),
                     {m_.emit(Op::OpCompositeConstruct, uvec4(), {base, base, base, base}),
                      m_.constant_composite(uvec4(), {cu(0), cu(1), cu(2), cu(3)})});
      id last = m_.emit(Op::OpISub, u32(), {total_, cu(1)});
      e = m_.ext(uvec4(), GLSLstd450UMin,
                 {e, m_.emit(Op::OpCompositeConstruct, uvec4(), {last, last, last, last})});
      coords_.assign(rank_, 0);
      for (int i = rank_ - 1; i >= 0; --i) {
        id d = dims_[i];
        id dv = m_.emit(Op::OpCompositeConstruct, uvec4(), {d, d, d, d});
        coords_[i] = m_.emit(Op::OpUMod, uvec4(), {e, dv});
        e = m_.emit(Op::OpUDiv, uvec4(), {e, dv});
      }
    }
    id idx = usplat(0);
    for (int i = 0; i < rank_; ++i) {
      id s = strides_[strided_slot][i];
      id sv = m_.emit(Op::OpCompositeConstruct, uvec4(), {s, s, s, s});
      idx = m_.emit(Op::OpIAdd, uvec4(), {idx, m_.emit(Op::OpIMul, uvec4(), {coords_[i], sv})});
    }
    return idx;
  }

  // Loads argument k of the region for the four lanes, as its compute type.
  id load_argument(std::size_t k, dtype t) {
    id var = bindings_[k];
    int bytes = size_in_bytes(t);
    lane_kind lk = lane_of(t);
    operand_kind kind = kinds_[k];
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
      } else if (kind == operand_kind::uniform) {
        l[0] = l[1] = l[2] = l[3] = element64(var, cu(0), lk);
      } else {
        id idx = strided_index(strided_slot_[k]);
        for (std::uint32_t i = 0; i < 4; ++i) l[i] = element64(var, lane(idx, u32(), i), lk);
      }
      return compose(vec(lk), l[0], l[1], l[2], l[3]);
    }
    id bits;
    if (kind == operand_kind::uniform) {
      id b = element_bits(var, cu(0), bytes);
      bits = compose(uvec4(), b, b, b, b);
    } else if (kind == operand_kind::strided) {
      id idx = strided_index(strided_slot_[k]);
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

  // Zero-extended storage bits (uvec4) to the compute type.
  id from_bits(dtype t, id bits) {
    switch (t) {
      case dtype::f32:
        return m_.emit(Op::OpBitcast, vec(lane_kind::f32), {bits});
      case dtype::u32:
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
        return decode(format_of(t), bits);
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
        return m_.emit(Op::OpBitwiseAnd, uvec4(), {v, usplat(0xFF)});
      case dtype::i8:
      case dtype::i16:
        return m_.emit(
            Op::OpBitwiseAnd, uvec4(),
            {m_.emit(Op::OpBitcast, uvec4(), {v}), usplat(t == dtype::i8 ? 0xFF : 0xFFFF)});
      case dtype::boolean:
        return m_.emit(Op::OpSelect, uvec4(), {v, usplat(1), usplat(0)});
      default:
        return encode(format_of(t), v);
    }
  }

  void store_result(std::size_t slot, dtype t, id v) {
    id var = bindings_[r_.args.size() + slot];
    int bytes = size_in_bytes(t);
    auto store = [&](id ptr, id value) { m_.inst(Op::OpStore, {ptr, value}); };
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

  // ---- narrow floats: the exact decode and round-to-nearest-even encode of core/minifloat -----
  id decode(const narrow_format& f, id bits) {
    id fv = vec(lane_kind::f32);
    auto shl = [&](id v, std::uint32_t s) {
      return m_.emit(Op::OpShiftLeftLogical, uvec4(), {v, usplat(s)});
    };
    auto shr = [&](id v, std::uint32_t s) {
      return m_.emit(Op::OpShiftRightLogical, uvec4(), {v, usplat(s)});
    };
    auto band = [&](id v, std::uint32_t mk) {
      return m_.emit(Op::OpBitwiseAnd, uvec4(), {v, usplat(mk)});
    };
    auto bor = [&](id a, id b) { return m_.emit(Op::OpBitwiseOr, uvec4(), {a, b}); };
    auto eq = [&](id a, id b) { return m_.emit(Op::OpIEqual, bvec4(), {a, b}); };
    auto sel = [&](id c, id a, id b) { return m_.emit(Op::OpSelect, uvec4(), {c, a, b}); };
    if (f.bias() == 127) return m_.emit(Op::OpBitcast, fv, {shl(bits, 16)});  // bf16
    id sign = shl(band(bits, f.sign_bit()), 31 - (f.exp + f.man));
    id e = band(shr(bits, f.man), f.exp_mask());
    id m = band(bits, (1u << f.man) - 1);
    id normal = bor(bor(sign, shl(m_.emit(Op::OpIAdd, uvec4(), {e, usplat(127 - f.bias())}), 23)),
                    shl(m, 23 - f.man));
    // Subnormal: m * 2^(1 - bias - man), exact in f32; the sign or'ed in keeps -0.
    id sub =
        m_.emit(Op::OpFMul, fv,
                {m_.emit(Op::OpConvertUToF, fv, {m}),
                 fsplat(lane_kind::f32, std::ldexp(1.0, 1 - static_cast<int>(f.bias()) - f.man))});
    id subnormal = bor(sign, m_.emit(Op::OpBitcast, uvec4(), {sub}));
    id r = sel(eq(e, usplat(0)), subnormal, normal);
    if (f.has_inf) {
      id special = bor(sign, sel(eq(m, usplat(0)), usplat(0x7F800000), usplat(0x7FC00000)));
      r = sel(eq(e, usplat(f.exp_mask())), special, r);
    } else {
      id nan = eq(band(bits, f.sign_bit() - 1), usplat(f.nan_bits()));
      r = sel(nan, bor(sign, usplat(0x7FC00000)), r);
    }
    return m_.emit(Op::OpBitcast, fv, {r});
  }

  id encode(const narrow_format& f, id x) {
    auto bin = [&](Op o, id a, id b) { return m_.emit(o, uvec4(), {a, b}); };
    auto lt = [&](id a, id b) { return m_.emit(Op::OpULessThan, bvec4(), {a, b}); };
    auto gt = [&](id a, id b) { return m_.emit(Op::OpUGreaterThan, bvec4(), {a, b}); };
    auto eq = [&](id a, id b) { return m_.emit(Op::OpIEqual, bvec4(), {a, b}); };
    auto sel = [&](id c, id a, id b) { return m_.emit(Op::OpSelect, uvec4(), {c, a, b}); };
    id u = m_.emit(Op::OpBitcast, uvec4(), {x});
    id sign = bin(Op::OpShiftLeftLogical, bin(Op::OpShiftRightLogical, u, usplat(31)),
                  usplat(f.exp + f.man));
    id a = bin(Op::OpBitwiseAnd, u, usplat(0x7FFFFFFF));
    id fe = bin(Op::OpShiftRightLogical, a, usplat(23));
    id fe_zero = eq(fe, usplat(0));
    id mant = bin(Op::OpBitwiseOr, bin(Op::OpBitwiseAnd, a, usplat(0x7FFFFF)),
                  sel(fe_zero, usplat(0), usplat(0x800000)));
    // e + 127 (unsigned), with f32 subnormals at e = -126.
    id eb = sel(fe_zero, usplat(1), fe);
    std::uint32_t emin_b = 127 + 1 - f.bias();  // emin + 127
    id below = lt(eb, usplat(emin_b));
    id extra = sel(below, bin(Op::OpISub, usplat(emin_b), eb), usplat(0));
    id shift =
        m_.ext(uvec4(), GLSLstd450UMin, {bin(Op::OpIAdd, usplat(23 - f.man), extra), usplat(31)});
    id q = bin(Op::OpShiftRightLogical, mant, shift);
    id one_sh = bin(Op::OpShiftLeftLogical, usplat(1), shift);
    id rem = bin(Op::OpBitwiseAnd, mant, bin(Op::OpISub, one_sh, usplat(1)));
    id half = bin(Op::OpShiftRightLogical, one_sh, usplat(1));
    id odd = eq(bin(Op::OpBitwiseAnd, q, usplat(1)), usplat(1));
    id up = m_.emit(Op::OpLogicalOr, bvec4(),
                    {gt(rem, half), m_.emit(Op::OpLogicalAnd, bvec4(), {eq(rem, half), odd})});
    q = bin(Op::OpIAdd, q, sel(up, usplat(1), usplat(0)));
    // Normal results put the implicit bit into the exponent: (e + bias - 1) << man, plus q.
    id ebias =
        bin(Op::OpShiftLeftLogical, bin(Op::OpISub, eb, usplat(127 + 1 - f.bias())), usplat(f.man));
    id enc = bin(Op::OpIAdd, sel(below, usplat(0), ebias), q);
    std::uint32_t overflow =
        f.saturate ? f.max_finite_bits() : (f.has_inf ? f.inf_bits() : f.nan_bits());
    enc = sel(gt(enc, usplat(f.max_finite_bits())), usplat(overflow), enc);
    std::uint32_t inf =
        f.saturate ? f.max_finite_bits() : (f.has_inf ? f.inf_bits() : f.nan_bits());
    enc = sel(eq(a, usplat(0x7F800000)), usplat(inf), enc);
    enc = sel(gt(a, usplat(0x7F800000)), usplat(f.nan_bits()), enc);
    return bin(Op::OpBitwiseOr, sign, enc);
  }

  // ---- ops ------------------------------------------------------------------------------------
  // Float arithmetic of the graph is never fused into FMA: every op rounds as IEEE says, as on
  // the CPU path, so results agree bit for bit.
  id exact(id v) {
    m_.decorate(v, spv::Decoration::NoContraction);
    return v;
  }

  // Narrow integers live in 32-bit lanes and are wrapped into their range after each op.
  id wrap(dtype t, id v) {
    if (t == dtype::i8 || t == dtype::i16) {
      std::uint32_t s = t == dtype::i8 ? 24 : 16;
      id l = m_.emit(Op::OpShiftLeftLogical, vec(lane_kind::s32), {v, usplat(s)});
      return m_.emit(Op::OpShiftRightArithmetic, vec(lane_kind::s32), {l, usplat(s)});
    }
    if (t == dtype::u8) return m_.emit(Op::OpBitwiseAnd, vec(lane_kind::u32), {v, usplat(0xFF)});
    return v;
  }

  id less(lane_kind k, id a, id b) {
    Op o = is_float_lane(k)    ? Op::OpFOrdLessThan
           : is_signed_lane(k) ? Op::OpSLessThan
                               : Op::OpULessThan;
    return m_.emit(o, bvec4(), {a, b});
  }
  id select(lane_kind k, id c, id a, id b) { return m_.emit(Op::OpSelect, vec(k), {c, a, b}); }

  // exp in f32 with its own range reduction: drivers may be as loose as 3 + 2|x| ulp (lavapipe's
  // is 2.6e-6 relative near x = 70); this one stays within 2 ulp, as the CPU path does.
  // exp(x) = 2^k e^r, k = round(x / ln 2), r = x - k ln 2 (two-part ln 2, so k * hi is exact),
  // e^r by its Taylor series to r^7 (|r| <= 0.347: truncation below 1e-8), 2^k in two halves.
  id exp32(id x) {
    lane_kind k = lane_kind::f32;
    id t = vec(k), iv = vec(lane_kind::s32);
    auto mul = [&](id a, id b) { return exact(m_.emit(Op::OpFMul, t, {a, b})); };
    auto add = [&](id a, id b) { return exact(m_.emit(Op::OpFAdd, t, {a, b})); };
    id xc = m_.ext(t, GLSLstd450FClamp, {x, fsplat(k, -104.0), fsplat(k, 89.0)});
    id kf = m_.ext(t, GLSLstd450RoundEven, {mul(xc, fsplat(k, 1.4426950408889634))});
    id r = exact(m_.emit(Op::OpFSub, t, {xc, mul(kf, fsplat(k, 0.693145751953125))}));
    r = exact(m_.emit(Op::OpFSub, t, {r, mul(kf, fsplat(k, 1.4286068203094172e-06))}));
    double c = 1;
    std::vector<double> coef;
    for (int n = 0; n <= 7; ++n) {
      if (n > 0) c /= n;
      coef.push_back(c);
    }
    id p = fsplat(k, coef[7]);
    for (int n = 6; n >= 0; --n) p = add(mul(p, r), fsplat(k, coef[n]));
    id ki = m_.emit(Op::OpConvertFToS, iv, {kf});
    id half = m_.emit(Op::OpShiftRightArithmetic, iv, {ki, usplat(1)});
    id rest = m_.emit(Op::OpISub, iv, {ki, half});
    auto pow2 = [&](id e) {  // 2^e for e in [-126, 127], from its exponent bits
      id biased = m_.emit(Op::OpIAdd, iv, {e, isplat(lane_kind::s32, 127)});
      return m_.emit(Op::OpBitcast, t, {m_.emit(Op::OpShiftLeftLogical, iv, {biased, usplat(23)})});
    };
    id y = mul(mul(p, pow2(half)), pow2(rest));
    return select(k, m_.emit(Op::OpIsNan, bvec4(), {x}), x, y);
  }
  id exp_of(lane_kind k, id x) {
    return k == lane_kind::f32 ? exp32(x) : m_.ext(vec(k), GLSLstd450Exp, {x});
  }

  // tanh: odd Taylor polynomial near 0 (no cancellation), 1 - 2e^-2|x| / (1 + e^-2|x|) beyond.
  id tanh32(id x) {
    lane_kind k = lane_kind::f32;
    id t = vec(k);
    id ax = m_.ext(t, GLSLstd450FAbs, {x});
    id x2 = m_.emit(Op::OpFMul, t, {x, x});
    const double c[] = {1.0,         -1.0 / 3,         2.0 / 15,         -17.0 / 315,
                        62.0 / 2835, -1382.0 / 155925, 21844.0 / 6081075};
    id p = fsplat(k, c[6]);
    for (int i = 5; i >= 0; --i)
      p = m_.emit(Op::OpFAdd, t, {m_.emit(Op::OpFMul, t, {p, x2}), fsplat(k, c[i])});
    id small = m_.emit(Op::OpFMul, t, {x, p});
    id e = exp32(m_.emit(Op::OpFMul, t, {ax, fsplat(k, -2.0)}));
    // 1 - 2t / (1 + t): one rounding at the end, so values near 1 come out correctly rounded.
    id u = m_.emit(
        Op::OpFDiv, t,
        {m_.emit(Op::OpFMul, t, {fsplat(k, 2.0), e}), m_.emit(Op::OpFAdd, t, {fsplat(k, 1.0), e})});
    id big = m_.emit(Op::OpFSub, t, {fsplat(k, 1.0), u});
    big = m_.emit(Op::OpFMul, t, {m_.ext(t, GLSLstd450FSign, {x}), big});
    return select(k, less(k, ax, fsplat(k, 0.3)), small, big);
  }

  // erf: Taylor series below 0.5; 1 - erfc beyond, erfc from a rational-exponential fit with a
  // fractional error below 1.2e-7 (Numerical Recipes' erfcc formula).
  id erf32(id x) {
    lane_kind k = lane_kind::f32;
    id t = vec(k);
    auto mul = [&](id a, id b) { return m_.emit(Op::OpFMul, t, {a, b}); };
    auto add = [&](id a, id b) { return m_.emit(Op::OpFAdd, t, {a, b}); };
    id ax = m_.ext(t, GLSLstd450FAbs, {x});
    id x2 = mul(x, x);
    // 2/sqrt(pi) * (-1)^n / (n! (2n + 1))
    double fact = 1;
    std::vector<double> c;
    for (int n = 0; n <= 7; ++n) {
      if (n > 0) fact *= n;
      c.push_back(1.1283791670955126 * (n % 2 ? -1 : 1) / (fact * (2 * n + 1)));
    }
    id p = fsplat(k, c.back());
    for (int i = static_cast<int>(c.size()) - 2; i >= 0; --i) p = add(mul(p, x2), fsplat(k, c[i]));
    id small = mul(x, p);
    const double r[] = {-1.26551223, 1.00002368,  0.37409196, 0.09678418,  -0.18628806,
                        0.27886807,  -1.13520398, 1.48851587, -0.82215223, 0.17087277};
    id tt = m_.emit(Op::OpFDiv, t, {fsplat(k, 1.0), add(fsplat(k, 1.0), mul(fsplat(k, 0.5), ax))});
    id poly = fsplat(k, r[9]);
    for (int i = 8; i >= 0; --i) poly = add(mul(poly, tt), fsplat(k, r[i]));
    id arg = m_.emit(Op::OpFSub, t, {poly, mul(ax, ax)});
    id erfc = mul(tt, exp32(arg));
    id big = mul(m_.ext(t, GLSLstd450FSign, {x}), m_.emit(Op::OpFSub, t, {fsplat(k, 1.0), erfc}));
    return select(k, less(k, ax, fsplat(k, 0.5)), small, big);
  }

  // log in f32 with its own reduction (drivers' GLSL.std.450 Log may be far looser: lavapipe's is
  // 2,400 ulp off near x = 1): x = m 2^e with m in [sqrt(1/2), sqrt(2)), s = (m - 1) / (m + 1),
  // log(m) = 2 atanh(s) = 2s + s z (2/3 + z (2/5 + ...)), z = s^2, |s| <= 0.172, and
  // log(x) = e ln 2 (two parts) + log(m): within 2 ulp, as the CPU's. Subnormal inputs are scaled
  // in integers (their bits as an integer, e - 149), since drivers may flush them to zero.
  // Edges as C: log(±0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN stays.
  id log32(id x) {
    lane_kind k = lane_kind::f32;
    id t = vec(k), iv = vec(lane_kind::s32);
    auto mul = [&](id a, id b) { return exact(m_.emit(Op::OpFMul, t, {a, b})); };
    auto add = [&](id a, id b) { return exact(m_.emit(Op::OpFAdd, t, {a, b})); };
    auto ubin = [&](Op o, id a, id b) { return m_.emit(o, uvec4(), {a, b}); };
    id bits = m_.emit(Op::OpBitcast, uvec4(), {x});
    id subnormal = m_.emit(Op::OpULessThan, bvec4(), {bits, usplat(0x00800000)});  // +0 too
    id normal_bits = m_.emit(Op::OpBitcast, uvec4(),
                             {m_.emit(Op::OpConvertUToF, t, {bits})});  // exact below 2^23
    id u = select(lane_kind::u32, subnormal, normal_bits, bits);
    id mantissa = ubin(Op::OpBitwiseAnd, u, usplat(0x7FFFFF));
    id above = m_.emit(Op::OpUGreaterThan, bvec4(), {mantissa, usplat(0x3504F3)});  // m > sqrt 2
    id m = m_.emit(Op::OpBitcast, t,
                   {ubin(Op::OpBitwiseOr, mantissa,
                         select(lane_kind::u32, above, usplat(0x3F000000), usplat(0x3F800000)))});
    id e = m_.emit(Op::OpISub, iv,
                   {m_.emit(Op::OpBitcast, iv, {ubin(Op::OpShiftRightLogical, u, usplat(23))}),
                    isplat(lane_kind::s32, 127)});
    e = m_.emit(
        Op::OpIAdd, iv,
        {e, select(lane_kind::s32, above, isplat(lane_kind::s32, 1), isplat(lane_kind::s32, 0))});
    e = m_.emit(Op::OpIAdd, iv,
                {e, select(lane_kind::s32, subnormal, isplat(lane_kind::s32, -149),
                           isplat(lane_kind::s32, 0))});
    id f = exact(m_.emit(Op::OpFSub, t, {m, fsplat(k, 1.0)}));  // exact (Sterbenz)
    id sv = exact(m_.emit(Op::OpFDiv, t, {f, add(f, fsplat(k, 2.0))}));
    id z = mul(sv, sv);
    id p = fsplat(k, 2.0 / 13);
    for (int n = 11; n >= 3; n -= 2) p = add(mul(p, z), fsplat(k, 2.0 / n));
    id log_m = add(mul(sv, fsplat(k, 2.0)), mul(mul(sv, z), p));
    id ef = m_.emit(Op::OpConvertSToF, t, {e});
    id r = add(mul(ef, fsplat(k, 0.693145751953125)),
               add(mul(ef, fsplat(k, 1.4286068203094172e-06)), log_m));
    id magnitude = m_.emit(Op::OpBitwiseAnd, uvec4(), {bits, usplat(0x7FFFFFFF)});
    r = select(k, m_.emit(Op::OpIEqual, bvec4(), {magnitude, usplat(0)}), fsplat(k, -HUGE_VAL), r);
    r = select(k, m_.emit(Op::OpFOrdLessThan, bvec4(), {x, fsplat(k, 0)}), fsplat(k, NAN), r);
    r = select(k, m_.emit(Op::OpFOrdEqual, bvec4(), {x, fsplat(k, HUGE_VAL)}), x, r);
    return select(k, m_.emit(Op::OpIsNan, bvec4(), {x}), x, r);
  }

  // sin or cos in f32 over the whole range, with kiln's own argument reduction (drivers' may fail
  // for large |x|: lavapipe's sin(1e10) was -1). |x| = M 2^E (M the 24-bit mantissa) is reduced
  // exactly in integers (Payne-Hanek): the 96 bits of 2/pi that matter modulo 4 for this E,
  // times M, give the quadrant q and a 62-bit fraction f of pi/2; y = f pi/2 in [-pi/4, pi/4]
  // (|x| < pi/4 is its own y), and sin/cos of y by their Taylor series. Within 4 ulp or 2e-7.
  id sincos32(id x, bool is_sin) {
    lane_kind k = lane_kind::f32;
    id t = vec(k);
    auto u = [&](Op o, id a, id b) { return m_.emit(o, uvec4(), {a, b}); };
    auto usel = [&](id c, id a, id b) { return select(lane_kind::u32, c, a, b); };
    auto eq = [&](id a, std::uint32_t v) { return m_.emit(Op::OpIEqual, bvec4(), {a, usplat(v)}); };
    auto mul = [&](id a, id b) { return exact(m_.emit(Op::OpFMul, t, {a, b})); };
    auto add = [&](id a, id b) { return exact(m_.emit(Op::OpFAdd, t, {a, b})); };
    id ax = m_.ext(t, GLSLstd450FAbs, {x});
    id bits = m_.emit(Op::OpBitcast, uvec4(), {ax});
    id mant = u(Op::OpBitwiseOr, u(Op::OpBitwiseAnd, bits, usplat(0x7FFFFF)), usplat(0x800000));
    // The table holds 2/pi's fraction bits b1, b2, ... from bit 63 (b_i at bit i + 62), so that the
    // window for exponent field e starts at bit e - 89 (= E - 1 + 62 with E = e - 150) >= 0 for
    // every |x| >= pi/4.
    static constexpr std::uint32_t two_over_pi[] = {0x00000000, 0x00000001, 0x45F306DC, 0x9C882A53,
                                                    0xF84EAFA3, 0xEA69BB81, 0xB6C52B32, 0x78872083,
                                                    0xFCA2C757, 0xBD778AC3};
    id small = m_.emit(Op::OpFOrdLessThan, bvec4(), {ax, fsplat(k, 0.78539816339744831)});
    id e = u(Op::OpShiftRightLogical, bits, usplat(23));
    id start = u(Op::OpISub, usel(small, usplat(126), e), usplat(89));  // any valid start if small
    id word = u(Op::OpShiftRightLogical, start, usplat(5));
    id shift = u(Op::OpBitwiseAnd, start, usplat(31));
    auto table = [&](id index) {  // two_over_pi[index], lane by lane, by selects
      id r = usplat(two_over_pi[0]);
      for (std::uint32_t i = 1; i < 10; ++i) r = usel(eq(index, i), usplat(two_over_pi[i]), r);
      return r;
    };
    id w[4];
    for (std::uint32_t i = 0; i < 4; ++i) w[i] = table(u(Op::OpIAdd, word, usplat(i)));
    auto window = [&](id hi, id lo) {  // (hi:lo) << shift, top word; shift 0 needs no lo
      id right = u(Op::OpShiftRightLogical, lo, u(Op::OpISub, usplat(32), shift));
      return u(Op::OpBitwiseOr, u(Op::OpShiftLeftLogical, hi, shift),
               usel(eq(shift, 0), usplat(0), right));
    };
    id w0 = window(w[0], w[1]), w1 = window(w[1], w[2]), w2 = window(w[2], w[3]);
    // P = mant * (w0:w1:w2), 120 bits; q = bits 94-95, fraction = bits 32-93.
    id pair = m_.type_struct({uvec4(), uvec4()});
    auto mul_ext = [&](id a, id b, id& lo, id& hi) {
      id r = m_.emit(Op::OpUMulExtended, pair, {a, b});
      lo = m_.emit(Op::OpCompositeExtract, uvec4(), {r, 0});
      hi = m_.emit(Op::OpCompositeExtract, uvec4(), {r, 1});
    };
    id l0, h0, l1, h1, l2, h2;
    mul_ext(mant, w0, l0, h0);
    mul_ext(mant, w1, l1, h1);
    mul_ext(mant, w2, l2, h2);
    (void)h0;
    id a = u(Op::OpIAdd, l1, h2);
    id carry = usel(m_.emit(Op::OpULessThan, bvec4(), {a, l1}), usplat(1), usplat(0));
    id b = u(Op::OpIAdd, u(Op::OpIAdd, l0, h1), carry);
    id q = u(Op::OpShiftRightLogical, b, usplat(30));
    id fb = u(Op::OpBitwiseAnd, b, usplat(0x3FFFFFFF));
    // A fraction of a half or more: take 1 - f (two's complement on 62 bits) and the next quadrant.
    id upper =
        m_.emit(Op::OpINotEqual, bvec4(), {u(Op::OpBitwiseAnd, fb, usplat(0x20000000)), usplat(0)});
    id na = u(Op::OpIAdd, m_.emit(Op::OpNot, uvec4(), {a}), usplat(1));
    id nb =
        u(Op::OpBitwiseAnd,
          u(Op::OpIAdd, m_.emit(Op::OpNot, uvec4(), {fb}), usel(eq(a, 0), usplat(1), usplat(0))),
          usplat(0x3FFFFFFF));
    id fa = usel(upper, na, a);
    fb = usel(upper, nb, fb);
    q = u(Op::OpIAdd, q, usel(upper, usplat(1), usplat(0)));
    id f = add(mul(m_.emit(Op::OpConvertUToF, t, {fb}), fsplat(k, std::ldexp(1.0, -30))),
               mul(m_.emit(Op::OpConvertUToF, t, {fa}), fsplat(k, std::ldexp(1.0, -62))));
    f = select(k, upper, m_.emit(Op::OpFNegate, t, {f}), f);
    id y = add(mul(f, fsplat(k, 1.5707963705062866)), mul(f, fsplat(k, -4.3711388286737929e-08)));
    y = select(k, small, ax, y);
    q = usel(small, usplat(0), u(Op::OpBitwiseAnd, q, usplat(3)));
    // sin y and cos y, |y| <= pi/4.
    id y2 = mul(y, y);
    id ps = fsplat(k, 1.0 / 362880);
    for (double c : {-1.0 / 5040, 1.0 / 120, -1.0 / 6}) ps = add(mul(ps, y2), fsplat(k, c));
    id sin_y = add(y, mul(mul(y, y2), ps));
    id pc = fsplat(k, -1.0 / 3628800);
    for (double c : {1.0 / 40320, -1.0 / 720, 1.0 / 24, -0.5}) pc = add(mul(pc, y2), fsplat(k, c));
    id cos_y = add(fsplat(k, 1.0), mul(y2, pc));
    // sin |x| = [sin y, cos y, -sin y, -cos y][q]; cos |x| = [cos y, -sin y, -cos y, sin y][q].
    id odd = eq(u(Op::OpBitwiseAnd, q, usplat(1)), 1);
    id r = is_sin ? select(k, odd, cos_y, sin_y) : select(k, odd, sin_y, cos_y);
    id negate = is_sin ? m_.emit(Op::OpUGreaterThanEqual, bvec4(), {q, usplat(2)})
                       : m_.emit(Op::OpLogicalOr, bvec4(), {eq(q, 1), eq(q, 2)});
    r = select(k, negate, m_.emit(Op::OpFNegate, t, {r}), r);
    if (is_sin)  // sin is odd: the sign of x (and -0 stays -0)
      r = m_.emit(
          Op::OpBitcast, t,
          {u(Op::OpBitwiseXor, m_.emit(Op::OpBitcast, uvec4(), {r}),
             u(Op::OpBitwiseAnd, m_.emit(Op::OpBitcast, uvec4(), {x}), usplat(0x80000000)))});
    id special = m_.emit(Op::OpLogicalOr, bvec4(),
                         {m_.emit(Op::OpIsInf, bvec4(), {x}), m_.emit(Op::OpIsNan, bvec4(), {x})});
    return select(k, special, fsplat(k, NAN), r);
  }

  // sqrt with C's edges (GLSL leaves x < 0 undefined): sqrt(-0) = -0, sqrt(x < 0) = NaN.
  id sqrt_of(lane_kind k, id x) {
    id t = vec(k);
    id r = m_.ext(t, GLSLstd450Sqrt, {x});
    r = select(k, m_.emit(Op::OpFOrdLessThan, bvec4(), {x, fsplat(k, 0)}), fsplat(k, NAN), r);
    return select(k, m_.emit(Op::OpFOrdEqual, bvec4(), {x, fsplat(k, 0)}), x, r);
  }

  // pow with C's (and ONNX's) semantics at every edge (GLSL's pow is undefined for x < 0 and for
  // x = 0, y <= 0): the same rules as the CPU's cpu::detail::pow_c, over GLSL's pow of |x|.
  id pow32(id x, id y) {
    lane_kind k = lane_kind::f32;
    id t = vec(k);
    auto fsel = [&](id c, id a, id b) { return select(k, c, a, b); };
    auto cmp = [&](Op o, id a, id b) { return m_.emit(o, bvec4(), {a, b}); };
    auto both = [&](id a, id b) { return m_.emit(Op::OpLogicalAnd, bvec4(), {a, b}); };
    auto either = [&](id a, id b) { return m_.emit(Op::OpLogicalOr, bvec4(), {a, b}); };
    auto no = [&](id a) { return m_.emit(Op::OpLogicalNot, bvec4(), {a}); };
    id zero = fsplat(k, 0), one = fsplat(k, 1), inf = fsplat(k, HUGE_VAL);
    id ax = m_.ext(t, GLSLstd450FAbs, {x}), ay = m_.ext(t, GLSLstd450FAbs, {y});
    id r = m_.ext(t, GLSLstd450Pow, {ax, y});
    id y_negative = cmp(Op::OpFOrdLessThan, y, zero);
    r = fsel(cmp(Op::OpFOrdEqual, ax, zero), fsel(y_negative, inf, zero), r);
    r = fsel(cmp(Op::OpFOrdEqual, ax, inf), fsel(y_negative, zero, inf), r);
    id below_one = cmp(Op::OpFOrdLessThan, ax, one);
    r = fsel(cmp(Op::OpFOrdEqual, ay, inf),
             fsel(m_.emit(Op::OpLogicalEqual, bvec4(), {below_one, y_negative}), inf, zero), r);
    id integer = cmp(Op::OpFOrdEqual, m_.ext(t, GLSLstd450Floor, {y}), y);  // inf too
    id half = exact(m_.emit(Op::OpFMul, t, {y, fsplat(k, 0.5)}));
    id odd = both(integer, cmp(Op::OpFOrdNotEqual, m_.ext(t, GLSLstd450Floor, {half}), half));
    id sign_set = m_.emit(Op::OpUGreaterThanEqual, bvec4(),
                          {m_.emit(Op::OpBitcast, uvec4(), {x}), usplat(0x80000000u)});
    r = fsel(both(sign_set, odd), m_.emit(Op::OpFNegate, t, {r}), r);
    id negative_finite = both(cmp(Op::OpFOrdLessThan, x, zero), cmp(Op::OpFOrdLessThan, ax, inf));
    r = fsel(both(negative_finite, no(integer)), fsplat(k, NAN), r);
    id nan = either(m_.emit(Op::OpIsNan, bvec4(), {x}), m_.emit(Op::OpIsNan, bvec4(), {y}));
    r = fsel(nan, exact(m_.emit(Op::OpFAdd, t, {x, y})), r);
    id minus_one_to_inf =
        both(cmp(Op::OpFOrdEqual, x, fsplat(k, -1)), cmp(Op::OpFOrdEqual, ay, inf));
    id is_one = either(either(cmp(Op::OpFOrdEqual, y, zero), cmp(Op::OpFOrdEqual, x, one)),
                       minus_one_to_inf);
    return fsel(is_one, one, r);
  }

  id unary(const ir::node& n, id x) {
    using ir::op;
    lane_kind k = lane_of(n.type);
    id t = vec(k);
    bool fl = is_float_lane(k);
    switch (n.kind) {
      case op::neg:
        return fl ? m_.emit(Op::OpFNegate, t, {x}) : wrap(n.type, m_.emit(Op::OpSNegate, t, {x}));
      case op::abs:
        if (fl) return m_.ext(t, GLSLstd450FAbs, {x});
        if (!is_signed_lane(k)) return x;
        return wrap(n.type, select(k, less(k, x, isplat(k, 0)), m_.emit(Op::OpSNegate, t, {x}), x));
      case op::relu:
        return select(k, less(k, x, splat(k, 0, 0)), splat(k, 0, 0), x);
      case op::exp:
        return exp_of(k, x);
      case op::log:
        return log32(x);
      case op::sqrt:
        return sqrt_of(k, x);
      case op::rsqrt:
        return m_.emit(Op::OpFDiv, t, {fsplat(k, 1.0), sqrt_of(k, x)});
      case op::tanh:
        return tanh32(x);
      case op::sigmoid: {
        id e = exp_of(k, m_.emit(Op::OpFNegate, t, {x}));
        return m_.emit(Op::OpFDiv, t,
                       {fsplat(k, 1.0), m_.emit(Op::OpFAdd, t, {fsplat(k, 1.0), e})});
      }
      case op::erf:
        return erf32(x);
      case op::sin:  // f32 only: GLSL.std.450 has no 64-bit sin (such regions run on the CPU)
      case op::cos:
        return sincos32(x, n.kind == op::sin);
      case op::floor:
        return m_.ext(t, GLSLstd450Floor, {x});
      case op::ceil:
        return m_.ext(t, GLSLstd450Ceil, {x});
      case op::round:
        return m_.ext(t, GLSLstd450RoundEven, {x});
      default:
        throw error(errc::unsupported, "spirv", "no lowering for " + std::string(ir::name(n.kind)));
    }
  }

  id binary(const ir::node& n, id x, id y) {
    using ir::op;
    lane_kind k = lane_of(n.type);
    id t = vec(k);
    bool fl = is_float_lane(k), sg = is_signed_lane(k);
    auto arith = [&](Op f, Op i) {
      return fl ? exact(m_.emit(f, t, {x, y})) : wrap(n.type, m_.emit(i, t, {x, y}));
    };
    switch (n.kind) {
      case op::add:
        return arith(Op::OpFAdd, Op::OpIAdd);
      case op::sub:
        return arith(Op::OpFSub, Op::OpISub);
      case op::mul:
        return arith(Op::OpFMul, Op::OpIMul);
      case op::div: {
        if (fl) return exact(m_.emit(Op::OpFDiv, t, {x, y}));
        // x / 0 == 0; MIN / -1 wraps (SPIR-V leaves both undefined).
        id zero = isplat(k, 0), one = isplat(k, 1);
        id by_zero = m_.emit(Op::OpIEqual, bvec4(), {y, zero});
        if (!sg) {
          id q = m_.emit(Op::OpUDiv, t, {x, select(k, by_zero, one, y)});
          return wrap(n.type, select(k, by_zero, zero, q));
        }
        id by_m1 = m_.emit(Op::OpIEqual, bvec4(), {y, isplat(k, -1)});
        id safe = select(k, m_.emit(Op::OpLogicalOr, bvec4(), {by_zero, by_m1}), one, y);
        id q = m_.emit(Op::OpSDiv, t, {x, safe});
        q = select(k, by_m1, m_.emit(Op::OpSNegate, t, {x}), q);
        return wrap(n.type, select(k, by_zero, zero, q));
      }
      case op::min:
      case op::max: {
        // As the CPU: x < y ? x : y (x > y for max), and NaN in either operand propagates.
        id pick = n.kind == op::min ? less(k, x, y) : less(k, y, x);
        id r = select(k, pick, x, y);
        if (!fl) return r;
        id nan = m_.emit(Op::OpLogicalOr, bvec4(),
                         {m_.emit(Op::OpIsNan, bvec4(), {x}), m_.emit(Op::OpIsNan, bvec4(), {y})});
        return select(k, nan, m_.emit(Op::OpFAdd, t, {x, y}), r);
      }
      case op::pow:
        return pow32(x, y);
      default:
        throw error(errc::unsupported, "spirv", "no lowering for " + std::string(ir::name(n.kind)));
    }
  }

  id compare(const ir::node& n, dtype operand, id x, id y) {
    using ir::op;
    lane_kind k = lane_of(operand);
    if (k == lane_kind::boolean)
      return m_.emit(n.kind == op::eq ? Op::OpLogicalEqual : Op::OpLogicalNotEqual, bvec4(),
                     {x, y});
    bool fl = is_float_lane(k), sg = is_signed_lane(k);
    Op o = Op::OpIEqual;
    switch (n.kind) {
      case op::eq:
        o = fl ? Op::OpFOrdEqual : Op::OpIEqual;
        break;
      case op::ne:
        o = fl ? Op::OpFUnordNotEqual : Op::OpINotEqual;
        break;
      case op::lt:
        o = fl ? Op::OpFOrdLessThan : sg ? Op::OpSLessThan : Op::OpULessThan;
        break;
      case op::le:
        o = fl ? Op::OpFOrdLessThanEqual : sg ? Op::OpSLessThanEqual : Op::OpULessThanEqual;
        break;
      case op::gt:
        o = fl ? Op::OpFOrdGreaterThan : sg ? Op::OpSGreaterThan : Op::OpUGreaterThan;
        break;
      default:
        o = fl   ? Op::OpFOrdGreaterThanEqual
            : sg ? Op::OpSGreaterThanEqual
                 : Op::OpUGreaterThanEqual;
        break;
    }
    return m_.emit(o, bvec4(), {x, y});
  }

  // Rounds an f32 lane value to a storage-only float's values (still as f32).
  id round_narrow(dtype t, id v) {
    if (!is_storage_only(t)) return v;
    return decode(format_of(t), encode(format_of(t), v));
  }

  // Casts with kiln's scalar semantics (core/convert.hpp): saturating float -> int, NaN -> 0,
  // integers wrap, narrow floats round to nearest even.
  id cast(dtype from, dtype to, id x) {
    lane_kind fk = lane_of(from), tk = lane_of(to);
    id tt = vec(tk);
    if (tk == lane_kind::boolean) {
      if (fk == lane_kind::boolean) return x;
      if (is_float_lane(fk)) return m_.emit(Op::OpFUnordNotEqual, bvec4(), {x, fsplat(fk, 0)});
      return m_.emit(Op::OpINotEqual, bvec4(), {x, isplat(fk, 0)});
    }
    if (fk == lane_kind::boolean)
      return is_float_lane(tk) ? select(tk, x, opaque(tk, 1.0), opaque(tk, 0.0))
                               : select(tk, x, splat(tk, 1, 1), splat(tk, 0, 0));
    if (is_float_lane(fk) && is_float_lane(tk)) {
      id v = fk == tk ? x : m_.emit(Op::OpFConvert, tt, {x});
      return round_narrow(to, v);
    }
    if (is_float_lane(fk)) {  // float -> integer
      double lo = static_cast<double>(integer_min(to));
      double hi =
          to == dtype::i64 ? 9223372036854775808.0 : static_cast<double>(integer_max(to)) + 1.0;
      id small = m_.emit(Op::OpFOrdLessThanEqual, bvec4(), {x, fsplat(fk, lo)});
      id big = m_.emit(Op::OpFOrdGreaterThanEqual, bvec4(), {x, fsplat(fk, hi)});
      id nan = m_.emit(Op::OpIsNan, bvec4(), {x});
      id out =
          m_.emit(Op::OpLogicalOr, bvec4(), {m_.emit(Op::OpLogicalOr, bvec4(), {small, big}), nan});
      id safe = select(fk, out, fsplat(fk, 0), x);
      id conv = m_.emit(is_signed_lane(tk) ? Op::OpConvertFToS : Op::OpConvertFToU, tt, {safe});
      id r = select(tk, small, isplat(tk, integer_min(to)),
                    select(tk, big, isplat(tk, integer_max(to)), conv));
      return select(tk, nan, isplat(tk, 0), r);
    }
    if (is_float_lane(tk)) {  // integer -> float, through f64 for i64 as the CPU does
      Op conv = is_signed_lane(fk) ? Op::OpConvertSToF : Op::OpConvertUToF;
      if (fk == lane_kind::s64 && tk == lane_kind::f32) {
        id d = m_.emit(conv, vec(lane_kind::f64), {x});
        return round_narrow(to, m_.emit(Op::OpFConvert, tt, {d}));
      }
      return round_narrow(to, m_.emit(conv, tt, {x}));
    }
    // integer -> integer: truncate or extend by the source's signedness, then wrap.
    id v = x;
    bool from64 = fk == lane_kind::s64, to64 = tk == lane_kind::s64;
    if (from64 && !to64) {
      v = m_.emit(Op::OpSConvert, vec(lane_kind::s32), {v});
      if (tk == lane_kind::u32) v = m_.emit(Op::OpBitcast, tt, {v});
    } else if (!from64 && to64) {
      if (is_signed_lane(fk)) {
        v = m_.emit(Op::OpSConvert, tt, {v});
      } else {
        id u64 = m_.type_vector(m_.type_int(64, false), 4);
        v = m_.emit(Op::OpBitcast, tt, {m_.emit(Op::OpUConvert, u64, {v})});
      }
    } else if (fk != tk) {
      v = m_.emit(Op::OpBitcast, tt, {v});
    }
    return wrap(to, v);
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
                          {metadata(w), metadata(w + 1)});
        v = m_.emit(Op::OpBitcast, scalar_type(k), {pair});
      } else {
        v = m_.emit(Op::OpBitcast, scalar_type(k), {metadata(w)});
      }
      opaque_value_[key] = compose(vec(k), v, v, v, v);
    }
  }
  id opaque(lane_kind k, double v) { return opaque_value_.at(opaque_key(k, v)); }

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
    id gx = lane(m_.emit(Op::OpLoad, uvec3, {global_id_}), u32(), 0);
    id nx = lane(m_.emit(Op::OpLoad, uvec3, {groups_id_}), u32(), 0);
    id stride = m_.emit(Op::OpIMul, u32(), {nx, wg_size_});
    id groups = metadata(0);
    total_ = metadata(1);
    for (int i = 0; i < rank_; ++i) dims_.push_back(metadata(2 + i));
    load_opaque();
    std::uint32_t next = 2 + rank_;
    for (std::size_t a = 0; a < kinds_.size(); ++a) {
      strided_slot_.push_back(static_cast<int>(strides_.size()));
      if (kinds_[a] != operand_kind::strided) continue;
      strides_.emplace_back();
      for (int i = 0; i < rank_; ++i) strides_.back().push_back(metadata(next++));
    }
    id header = m_.fresh(), check = m_.fresh(), loop_body = m_.fresh(), cont = m_.fresh(),
       merge = m_.fresh(), g_next = m_.fresh();
    m_.inst(Op::OpBranch, {header});
    m_.label(header);
    g_index_ = m_.emit(Op::OpPhi, u32(), {gx, entry, g_next, cont});
    m_.inst(Op::OpLoopMerge,
            {merge, cont, static_cast<std::uint32_t>(spv::LoopControlMask::MaskNone)});
    m_.inst(Op::OpBranch, {check});
    m_.label(check);
    id more = m_.emit(Op::OpULessThan, m_.type_bool(), {g_index_, groups});
    m_.inst(Op::OpBranchConditional, {more, loop_body, merge});
    m_.label(loop_body);

    std::vector<id> value(g_.nodes.size(), 0);
    for (auto nid : r_.nodes) {
      const ir::node& n = g_.nodes[nid];
      auto in = [&](int i) { return value[n.operands[i]]; };
      using ir::op_class;
      switch (ir::info(n.kind).cls) {
        case op_class::leaf:
          if (n.kind == ir::op::constant) {
            value[nid] = constant(n);
          } else {
            std::size_t slot = 0;
            while (r_.args[slot] != n.arg) ++slot;
            value[nid] = load_argument(slot, n.type);
          }
          break;
        case op_class::unary:
          value[nid] = unary(n, in(0));
          break;
        case op_class::binary:
          value[nid] = binary(n, in(0), in(1));
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
      }
    }
    for (std::size_t s = 0; s < r_.results.size(); ++s) {
      std::int32_t out = g_.outputs[r_.results[s]];
      store_result(s, g_.nodes[out].type, value[out]);
    }
    m_.inst(Op::OpBranch, {cont});
    m_.label(cont);
    m_.emit_to(g_next, Op::OpIAdd, u32(), {g_index_, stride});
    m_.inst(Op::OpBranch, {header});
    m_.label(merge);
    m_.inst(Op::OpReturn, {});
    m_.inst(Op::OpFunctionEnd, {});
  }

  const ir::graph& g_;
  const compiler::region& r_;
  const std::vector<operand_kind>& kinds_;
  const target& t_;
  module m_;
  int rank_ = 0;
  std::vector<id> bindings_;
  id push_ = 0, global_id_ = 0, groups_id_ = 0, wg_size_ = 0, main_ = 0;
  id g_index_ = 0, total_ = 0;
  std::vector<id> dims_, coords_;
  std::vector<std::vector<id>> strides_;
  std::vector<int> strided_slot_;
  id scalar_types_[6] = {}, vector_types_[6] = {};
  std::map<std::tuple<int, std::uint64_t, std::int64_t>, id> splats_;
  std::uint32_t constants_at_ = 0;  // metadata word of the first opaque value
  std::map<std::pair<int, std::uint64_t>, std::uint32_t> opaque_word_;  // (lane, bits) -> word
  std::map<std::pair<int, std::uint64_t>, id> opaque_value_;            // (lane, bits) -> value
};

}  // namespace detail

// Emits region r of plan p for target t, with one operand_kind per region argument.
inline kernel emit_region(const compiler::plan& p, const compiler::region& r,
                          const std::vector<operand_kind>& kinds, const target& t) {
  return detail::region_emitter(p.graph, r, kinds, t).run();
}

}  // namespace kiln::spirv
