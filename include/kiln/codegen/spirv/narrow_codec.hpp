// The storage-only floats (f16, bf16, fp8) in SPIR-V: the exact decode to f32 and the
// round-to-nearest-even encode of core/minifloat.hpp, on 4 lanes of bits, from the same layout.
#pragma once

#include <cmath>

#include "kiln/codegen/spirv/values.hpp"
#include "kiln/core/dtype.hpp"

namespace kiln::spirv::detail {

class narrow_codec : public value_builder {
 protected:
  id decode(const minifloat_layout& f, id bits) {
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

  id encode(const minifloat_layout& f, id x) {
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

  // Rounds an f32 lane value to a storage-only float's values (still as f32).
  id round_narrow(dtype t, id v) {
    if (!is_storage_only(t)) return v;
    return decode(narrow_layout(t), encode(narrow_layout(t), v));
  }
};

}  // namespace kiln::spirv::detail
