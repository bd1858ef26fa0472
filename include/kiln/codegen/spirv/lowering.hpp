// The lowering table of the SPIR-V back end: one case per op of ir/op.hpp's list (unary, binary,
// compare, cast), each a GLSL.std.450 instruction, a core instruction, or kiln's own function
// from math.hpp. An op without a case throws "no lowering" at its first kernel.
#pragma once

#include <string>

#include "kiln/codegen/spirv/math_functions.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::spirv::detail {

// The width limit of the table below: these lower to f32-only code (kiln's own functions, or
// GLSL.std.450's 16/32-bit forms), so a 64-bit float region of them runs on the CPU.
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
    case op::tan:
    case op::asin:
    case op::acos:
    case op::atan:
    case op::sinh:
    case op::cosh:
    case op::asinh:
    case op::acosh:
    case op::atanh:
    case op::exp2:
    case op::expm1:
    case op::log2:
    case op::log1p:
    case op::softplus:
    case op::erfc:
    case op::mod:  // the exact remainder works on f32's bits
    case op::fmod:
      return true;
    default:
      return false;
  }
}

class op_lowering : public function_library {
 protected:
  virtual ~op_lowering() = default;
  // A float the kernel reads at run time rather than as a SPIR-V constant (see kernel::constants).
  virtual id opaque(lane_kind k, double v) = 0;

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
        return divide(k, fsplat(k, 1.0), sqrt_of(k, x));
      case op::tanh:
        return tanh32(x);
      case op::sigmoid: {
        id e = exp_of(k, m_.emit(Op::OpFNegate, t, {x}));
        return divide(k, fsplat(k, 1.0), m_.emit(Op::OpFAdd, t, {fsplat(k, 1.0), e}));
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
      case op::reciprocal:
        return divide(k, fsplat(k, 1.0), x);
      case op::sign: {  // by comparisons: NaN and the sign of zero stay (FSign leaves them open)
        id zero = splat(k, 0, 0);
        id r = select(k, less(k, x, zero), splat(k, -1, -1), fl ? x : zero);
        return select(k, less(k, zero, x), splat(k, 1, 1), r);
      }
      case op::softsign: {
        id den = exact(m_.emit(Op::OpFAdd, t, {fsplat(k, 1.0), m_.ext(t, GLSLstd450FAbs, {x})}));
        return divide(k, x, den);
      }
      case op::tan:
        return tan32(x);
      case op::asin:
        return asin32(x);
      case op::acos:
        return acos32(x);
      case op::atan:
        return atan32(x);
      case op::sinh:
        return sinh32(x);
      case op::cosh:
        return cosh32(x);
      case op::asinh:
        return asinh32(x);
      case op::acosh:
        return acosh32(x);
      case op::atanh:
        return atanh32(x);
      case op::exp2:
        return exp2_32(x);
      case op::expm1:
        return expm1_32(x);
      case op::log2:
        return log2_32(x);
      case op::log1p:
        return log1p32(x);
      case op::softplus:
        return softplus32(x);
      case op::erfc:
        return erfc32(x);
      case op::bitwise_not:
        return wrap(n.type, m_.emit(Op::OpNot, t, {x}));
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
        if (fl) return divide(k, x, y);
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
      case op::mod:
      case op::fmod:
        if (fl) return n.kind == op::mod ? mod32(x, y) : fmod32(x, y);
        return integer_remainder(n, x, y);
      case op::bitwise_and:
        return m_.emit(Op::OpBitwiseAnd, t, {x, y});
      case op::bitwise_or:
        return m_.emit(Op::OpBitwiseOr, t, {x, y});
      case op::bitwise_xor:
        return m_.emit(Op::OpBitwiseXor, t, {x, y});
      case op::shift_left:
      case op::shift_right:
        return shift(n, x, y);
      default:
        throw error(errc::unsupported, "spirv", "no lowering for " + std::string(ir::name(n.kind)));
    }
  }

  // clip(x, lo, hi) = min(max(x, lo), hi), through the binary ops' lowering.
  id ternary(const ir::node& n, id x, id lo, id hi) {
    if (n.kind != ir::op::clip)
      throw error(errc::unsupported, "spirv", "no lowering for " + std::string(ir::name(n.kind)));
    ir::node step = n;
    step.kind = ir::op::max;
    id at_least = binary(step, x, lo);
    step.kind = ir::op::min;
    return binary(step, at_least, hi);
  }

  id test(const ir::node& n, id x) {
    if (n.kind == ir::op::isnan) return m_.emit(Op::OpIsNan, bvec4(), {x});
    return m_.emit(Op::OpIsInf, bvec4(), {x});
  }

  // Integer remainders: x % 0 == 0 (SPIR-V leaves it undefined); mod adds y where the truncated
  // remainder's sign differs from y's (Python's rule). Signed remainders are taken on the
  // magnitudes in unsigned arithmetic, the sign of x put back: Vulkan leaves OpSRem and OpSMod
  // undefined for negative operands, and NVIDIA's compiler takes them as non-negative (its
  // mod(67, -45) came out 22). MIN's magnitude is exact as unsigned, so MIN % -1 is 0.
  id integer_remainder(const ir::node& n, id x, id y) {
    lane_kind k = lane_of(n.type);
    id t = vec(k), zero = isplat(k, 0), one = isplat(k, 1);
    id by_zero = m_.emit(Op::OpIEqual, bvec4(), {y, zero});
    if (!is_signed_lane(k)) {
      id r = m_.emit(Op::OpUMod, t, {x, select(k, by_zero, one, y)});
      return select(k, by_zero, zero, r);
    }
    id ut = k == lane_kind::s64 ? vec(lane_kind::u64) : uvec4();
    id x_negative = less(k, x, zero);
    auto magnitude = [&](id v, id negative) {
      return m_.emit(Op::OpBitcast, ut, {select(k, negative, m_.emit(Op::OpSNegate, t, {v}), v)});
    };
    id safe_y = select(k, by_zero, one, y);
    id um =
        m_.emit(Op::OpUMod, ut, {magnitude(x, x_negative), magnitude(safe_y, less(k, y, zero))});
    id r = m_.emit(Op::OpBitcast, t, {um});
    r = select(k, x_negative, m_.emit(Op::OpSNegate, t, {r}), r);
    r = select(k, by_zero, zero, r);
    if (n.kind == ir::op::fmod) return r;
    id differ = m_.emit(Op::OpLogicalNotEqual, bvec4(), {less(k, r, zero), less(k, y, zero)});
    id fix =
        m_.emit(Op::OpLogicalAnd, bvec4(), {m_.emit(Op::OpINotEqual, bvec4(), {r, zero}), differ});
    return wrap(n.type, select(k, fix, m_.emit(Op::OpIAdd, t, {r, y}), r));
  }

  // Shifts with numpy's rule: a count of the type's width or more (or a negative one, read as
  // unsigned) shifts every bit out; SPIR-V leaves counts of the lane width or more undefined.
  id shift(const ir::node& n, id x, id count) {
    lane_kind k = lane_of(n.type);
    id t = vec(k);
    std::int64_t bits = size_in_bytes(n.type) * 8;
    id c = count;
    if (bits < 32) c = m_.emit(Op::OpBitwiseAnd, t, {c, isplat(k, (std::int64_t{1} << bits) - 1)});
    id out = m_.emit(Op::OpUGreaterThanEqual, bvec4(), {c, isplat(k, bits)});
    id safe = select(k, out, isplat(k, 0), c);
    if (n.kind == ir::op::shift_left)
      return wrap(n.type,
                  select(k, out, isplat(k, 0), m_.emit(Op::OpShiftLeftLogical, t, {x, safe})));
    if (!is_signed_lane(k))
      return select(k, out, isplat(k, 0), m_.emit(Op::OpShiftRightLogical, t, {x, safe}));
    id fill = select(k, less(k, x, isplat(k, 0)), isplat(k, -1), isplat(k, 0));
    return select(k, out, fill, m_.emit(Op::OpShiftRightArithmetic, t, {x, safe}));
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
      const std::int64_t lowest = integer_min(to),
                         top = static_cast<std::int64_t>(unsigned_max(to));
      id small =
          m_.emit(Op::OpFOrdLessThanEqual, bvec4(), {x, fsplat(fk, static_cast<double>(lowest))});
      id big = m_.emit(Op::OpFOrdGreaterThanEqual, bvec4(), {x, fsplat(fk, integer_end(to))});
      id nan = m_.emit(Op::OpIsNan, bvec4(), {x});
      id out =
          m_.emit(Op::OpLogicalOr, bvec4(), {m_.emit(Op::OpLogicalOr, bvec4(), {small, big}), nan});
      id safe = select(fk, out, fsplat(fk, 0), x);
      id conv = m_.emit(is_signed_lane(tk) ? Op::OpConvertFToS : Op::OpConvertFToU, tt, {safe});
      id r = select(tk, small, isplat(tk, lowest), select(tk, big, isplat(tk, top), conv));
      return select(tk, nan, isplat(tk, 0), r);
    }
    const bool from64 = fk == lane_kind::s64 || fk == lane_kind::u64,
               to64 = tk == lane_kind::s64 || tk == lane_kind::u64;
    if (is_float_lane(tk)) {  // integer -> float, through f64 for 64-bit ones as the CPU does
      Op conv = is_signed_lane(fk) ? Op::OpConvertSToF : Op::OpConvertUToF;
      if (from64 && tk == lane_kind::f32) {
        id d = m_.emit(conv, vec(lane_kind::f64), {x});
        return round_narrow(to, m_.emit(Op::OpFConvert, tt, {d}));
      }
      return round_narrow(to, m_.emit(conv, tt, {x}));
    }
    // integer -> integer: truncate or extend by the source's signedness, then wrap.
    id v = x;
    if (from64 && !to64) {
      v = m_.emit(Op::OpSConvert, vec(lane_kind::s32), {v});
      if (tk == lane_kind::u32) v = m_.emit(Op::OpBitcast, tt, {v});
    } else if (!from64 && to64) {
      // Zero-extended, then (from a signed type) sign-extended by two shifts: llvmpipe (Mesa 22,
      // LLVM 15) compares an OpSConvert result as though it were zero-extended (sext(x) < 0 is
      // false for x = -1), where the stored value is right; the shifts compare correctly.
      if (is_signed_lane(fk)) v = m_.emit(Op::OpBitcast, uvec4(), {v});
      v = m_.emit(Op::OpUConvert, vec(lane_kind::u64), {v});
      if (tk != lane_kind::u64) v = m_.emit(Op::OpBitcast, tt, {v});
      if (is_signed_lane(fk)) {
        id by = isplat(tk, 32);
        v = m_.emit(Op::OpShiftRightArithmetic, tt,
                    {m_.emit(Op::OpShiftLeftLogical, tt, {v, by}), by});
      }
    } else if (fk != tk) {
      v = m_.emit(Op::OpBitcast, tt, {v});
    }
    return wrap(to, v);
  }
};

}  // namespace kiln::spirv::detail
