// Typed SPIR-V values of a kernel: the scalar and 4-lane vector type of each lane kind, constants
// (remembered), and the few instructions whose opcode depends on the lane kind (OpF*/OpS*/OpU*:
// less, select, the wrap of narrow integers), chosen here and nowhere else.
#pragma once

#include <bit>
#include <map>
#include <tuple>

#include "kiln/codegen/spirv/module.hpp"
#include "kiln/core/lanes.hpp"

namespace kiln::spirv::detail {

class value_builder {
 protected:
  using Op = spv::Op;

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
      case lane_kind::u64:
        return m_.type_int(64, false);
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
      case lane_kind::u64:
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

  id lane(id v, id type, std::uint32_t i) { return m_.emit(Op::OpCompositeExtract, type, {v, i}); }
  id compose(id type, id a, id b, id c, id d) {
    return m_.emit(Op::OpCompositeConstruct, type, {a, b, c, d});
  }

  // Float arithmetic of the graph is never fused into FMA: every op rounds as IEEE says, as on
  // the CPU path, so results agree bit for bit.
  id exact(id v) {
    m_.decorate(v, spv::Decoration::NoContraction);
    return v;
  }

  // a / b of lane kind k, rounded once as IEEE says. Where the target's OpFDiv may not be exact
  // (target::divides_in_f64: a GPU's, allowed 2.5 ulp and undefined beyond 2^126), an f32
  // quotient is taken in f64 and rounded back: no quotient of two f32 values lies on a midpoint
  // of f32 (subnormal ones included), they all lie at least 2^-48 of it away, relatively, and an
  // f64 quotient within 2.5 of its own ulps (2^-51) stays on the same side of every midpoint.
  id divide(lane_kind k, id a, id b) {
    if (k != lane_kind::f32 || !divide_in_f64_) return exact(m_.emit(Op::OpFDiv, vec(k), {a, b}));
    id d = vec(lane_kind::f64);
    id q = exact(
        m_.emit(Op::OpFDiv, d, {m_.emit(Op::OpFConvert, d, {a}), m_.emit(Op::OpFConvert, d, {b})}));
    return m_.emit(Op::OpFConvert, vec(k), {q});
  }

  // Narrow integers live in 32-bit lanes and are wrapped into their range after each op.
  id wrap(dtype t, id v) {
    if (t == dtype::i8 || t == dtype::i16) {
      std::uint32_t s = t == dtype::i8 ? 24 : 16;
      id l = m_.emit(Op::OpShiftLeftLogical, vec(lane_kind::s32), {v, usplat(s)});
      return m_.emit(Op::OpShiftRightArithmetic, vec(lane_kind::s32), {l, usplat(s)});
    }
    if (t == dtype::u8 || t == dtype::u16)
      return m_.emit(Op::OpBitwiseAnd, vec(lane_kind::u32),
                     {v, usplat(t == dtype::u8 ? 0xFF : 0xFFFF)});
    return v;
  }

  id less(lane_kind k, id a, id b) {
    Op o = is_float_lane(k)    ? Op::OpFOrdLessThan
           : is_signed_lane(k) ? Op::OpSLessThan
                               : Op::OpULessThan;
    return m_.emit(o, bvec4(), {a, b});
  }
  id select(lane_kind k, id c, id a, id b) { return m_.emit(Op::OpSelect, vec(k), {c, a, b}); }

  module m_;
  bool divide_in_f64_ = false;  // set by the emitter from its target

 private:
  id scalar_types_[7] = {}, vector_types_[7] = {};  // by lane_kind
  std::map<std::tuple<int, std::uint64_t, std::int64_t>, id> splats_;
};

}  // namespace kiln::spirv::detail
