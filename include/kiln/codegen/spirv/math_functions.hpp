// kiln's f32 functions built on the math library's cores (exp_split, log_reduce, reduce_half_pi,
// erfc_tail): inverse trigonometric and hyperbolic functions, exp2/expm1/log2/log1p, softplus,
// erfc and the exact float remainders. Drivers' GLSL.std.450 forms are as loose as the Vulkan
// spec allows (lavapipe's atan was 30 ulp off); these hold the README's bounds on every device.
#pragma once

#include <cmath>

#include "kiln/codegen/spirv/math.hpp"

namespace kiln::spirv::detail {

class function_library : public math_library {
 protected:
  id keep_zero(id x, id r) { return fsel(fcmp(Op::OpFOrdEqual, x, fc(0)), x, r); }  // f(-0) = -0

  // tan |x| = sin y / cos y, or -cos y / sin y in an odd quadrant; tan is odd.
  id tan32(id x) {
    auto [y, q] = reduce_half_pi(x);
    id s = sin_poly(y), c = cos_poly(y);
    id r = fsel(odd_quadrant(q), m_.emit(Op::OpFNegate, vec(lane_kind::f32), {fdiv(c, s)}),
                fdiv(s, c));
    return nan_beyond_finite(x, odd_sign(r, x));
  }

  // atan(n / d) for n, d >= 0 with one division: reduced by pi/4 or pi/2 to a quotient t with
  // |t| <= tan(pi/8), then atan(t) by its Taylor series to t^19 (truncation below 2^-26 of t);
  // the multiples of pi/4 in two parts.
  id atan_ratio(id n, id d) {
    id big = fcmp(Op::OpFOrdGreaterThan, n, fmul(d, fc(2.414213562373095)));    // > tan(3pi/8)
    id mid = fcmp(Op::OpFOrdGreaterThan, n, fmul(d, fc(0.41421356237309503)));  // > tan(pi/8)
    id num = fsel(big, m_.emit(Op::OpFNegate, vec(lane_kind::f32), {d}), fsel(mid, fsub(n, d), n));
    id den = fsel(big, n, fsel(mid, fadd(n, d), d));
    id t = fdiv(num, den);
    id z = fmul(t, t);
    id p = horner(z, {-1.0 / 3, 1.0 / 5, -1.0 / 7, 1.0 / 9, -1.0 / 11, 1.0 / 13, -1.0 / 15,
                      1.0 / 17, -1.0 / 19});
    id atan_t = fadd(t, fmul(fmul(t, z), p));
    const double half_pi = 1.5707963267948966, half_pi_hi = static_cast<float>(half_pi);
    id base_hi = fsel(big, fc(half_pi_hi), fsel(mid, fc(half_pi_hi / 2), fc(0)));
    id base_lo =
        fsel(big, fc(half_pi - half_pi_hi), fsel(mid, fc((half_pi - half_pi_hi) / 2), fc(0)));
    return fadd(base_hi, fadd(base_lo, atan_t));
  }
  id atan32(id x) { return copysign32(atan_ratio(fabs32(x), fc(1.0)), x); }
  // sqrt(1 - a^2) as sqrt((1 - a)(1 + a)): no cancellation near |a| = 1; NaN beyond.
  id cosine_of_sine(id a) {
    id s = fmul(fsub(fc(1.0), a), fadd(fc(1.0), a));
    return fsel(fcmp(Op::OpFOrdLessThan, s, fc(0)), fc(NAN),
                m_.ext(vec(lane_kind::f32), GLSLstd450Sqrt, {s}));
  }
  id asin32(id x) {
    id a = fabs32(x);
    return copysign32(atan_ratio(a, cosine_of_sine(a)), x);
  }
  id acos32(id x) {
    id a = fabs32(x);
    id r = atan_ratio(cosine_of_sine(a), a);
    const double pi = 3.141592653589793, pi_hi = static_cast<float>(pi);
    id negative = fsub(fc(pi_hi), fsub(r, fc(pi - pi_hi)));
    return fsel(fcmp(Op::OpFOrdLessThan, x, fc(0)), negative, r);
  }

  // sinh and cosh: e^a (exp32) and its reciprocal up to a = 88; beyond, e^(a/2) e^(a/2) / 2,
  // finite to 89.4. sinh below 1 by its Taylor series (no cancellation).
  id sinh32(id x) {
    id a = fabs32(x);
    id z = fmul(a, a);
    id small = fadd(a, fmul(fmul(a, z), horner(z, {1.0 / 6, 1.0 / 120, 1.0 / 5040, 1.0 / 362880,
                                                   1.0 / 39916800, 1.0 / 6227020800})));
    id e = exp32(a);
    id mid = fmul(fsub(e, fdiv(fc(1.0), e)), fc(0.5));
    id r = fsel(fcmp(Op::OpFOrdLessThan, a, fc(1.0)), small,
                fsel(fcmp(Op::OpFOrdLessThanEqual, a, fc(88.0)), mid, beyond_88(a)));
    return fsel(is_nan(x), x, copysign32(r, x));
  }
  id cosh32(id x) {
    id a = fabs32(x);
    id e = exp32(a);
    id mid = fmul(fadd(e, fdiv(fc(1.0), e)), fc(0.5));
    id r = fsel(fcmp(Op::OpFOrdLessThanEqual, a, fc(88.0)), mid, beyond_88(a));
    return fsel(is_nan(x), x, r);
  }
  id beyond_88(id a) {
    id h = exp32(fmul(a, fc(0.5)));
    return fmul(fmul(h, fc(0.5)), h);
  }

  // asinh |x| = log1p(a + a^2 / (1 + sqrt(1 + a^2))) (exact for small a), log(a) + ln 2 from
  // a = 2^12 (a^2 + 1 is a^2 there); acosh x = log1p(t + sqrt(t (x + 1))), t = x - 1, the same
  // way; atanh |x| = log1p(2a / (1 - a)) / 2.
  id asinh32(id x) {
    id a = fabs32(x);
    id z = fmul(a, a);
    id inner = fadd(
        a, fdiv(z, fadd(fc(1.0), m_.ext(vec(lane_kind::f32), GLSLstd450Sqrt, {fadd(fc(1.0), z)}))));
    id r = fsel(fcmp(Op::OpFOrdGreaterThan, a, fc(4096.0)), log_plus_ln2(a), log1p32(inner));
    return fsel(is_nan(x), x, copysign32(r, x));
  }
  id acosh32(id x) {
    id t = fsub(x, fc(1.0));
    id root =
        m_.ext(vec(lane_kind::f32), GLSLstd450Sqrt,
               {m_.ext(vec(lane_kind::f32), GLSLstd450FMax, {fmul(t, fadd(x, fc(1.0))), fc(0)})});
    id r =
        fsel(fcmp(Op::OpFOrdGreaterThan, x, fc(4096.0)), log_plus_ln2(x), log1p32(fadd(t, root)));
    r = fsel(fcmp(Op::OpFOrdLessThan, x, fc(1.0)), fc(NAN), r);
    return fsel(is_nan(x), x, r);
  }
  id atanh32(id x) {
    id a = fabs32(x);
    id r = fmul(log1p32(fdiv(fmul(a, fc(2.0)), fsub(fc(1.0), a))), fc(0.5));
    return fsel(is_nan(x), x, copysign32(r, x));
  }
  id log_plus_ln2(id a) {  // log(2a) for large a
    auto [e, log_m] = log_reduce(a);
    return log_from(fadd(e, fc(1.0)), log_m);
  }

  // 2^x = 2^k e^(f ln 2), k = round(x), f = x - k (exact).
  id exp2_32(id x) {
    id xc = m_.ext(vec(lane_kind::f32), GLSLstd450FClamp, {x, fc(-151.0), fc(129.0)});
    id kf = m_.ext(vec(lane_kind::f32), GLSLstd450RoundEven, {xc});
    id f = fsub(xc, kf);
    id r = fadd(fmul(f, fc(0.693145751953125)), fmul(f, fc(1.4286068203094172e-06)));
    return fsel(is_nan(x), x, exp_scaled(kf, r));
  }

  // e^x - 1 = 2^k (e^r - 1) + (2^k - 1) with exp's reduction, e^r - 1 by its Taylor series
  // without the 1 (so small x keep every bit); e^x itself beyond x = 40.
  id expm1_32(id x) {
    id xc = m_.ext(vec(lane_kind::f32), GLSLstd450FClamp, {x, fc(-104.0), fc(40.0)});
    id kf = m_.ext(vec(lane_kind::f32), GLSLstd450RoundEven, {fmul(xc, fc(1.4426950408889634))});
    id r = fsub(fsub(xc, fmul(kf, fc(0.693145751953125))), fmul(kf, fc(1.4286068203094172e-06)));
    id q = fmul(r, horner(r, {1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                              1.0 / 40320}));
    id scale = scale_pow2(fc(1.0), m_.emit(Op::OpConvertFToS, vec(lane_kind::s32), {kf}));  // 2^k
    id small = fadd(fmul(scale, q), fsub(scale, fc(1.0)));
    id y = fsel(fcmp(Op::OpFOrdGreaterThan, x, fc(40.0)), exp32(x), small);
    return fsel(is_nan(x), x, keep_zero(x, y));
  }

  // log2 x = e + log(m) log2(e), log2(e) in two parts: exact at powers of two.
  id log2_32(id x) {
    auto [e, log_m] = log_reduce(x);
    id r =
        fadd(e, fadd(fmul(log_m, fc(static_cast<float>(1.4426950408889634))),
                     fmul(log_m, fc(1.4426950408889634 - static_cast<float>(1.4426950408889634)))));
    return log_edges(x, r);
  }

  // log1p x = log(u) + (x - (u - 1)) / u, u = 1 + x rounded: the quotient restores what the
  // rounding of u lost.
  id log1p32(id x) {
    id u = fadd(fc(1.0), x);
    id r = fadd(log32(u), fdiv(fsub(x, fsub(u, fc(1.0))), u));
    r = keep_zero(x, fsel(fcmp(Op::OpFOrdEqual, u, fc(0)), fc(-HUGE_VAL), r));
    r = fsel(fcmp(Op::OpFOrdEqual, x, fc(HUGE_VAL)), x, r);
    return fsel(fcmp(Op::OpFOrdLessThan, x, fc(-1.0)), fc(NAN), fsel(is_nan(x), x, r));
  }

  // log(1 + e^x) = max(x, 0) + log1p(e^-|x|): neither overflows nor cancels.
  id softplus32(id x) {
    id positive = fsel(fcmp(Op::OpFOrdGreaterThan, x, fc(0)), x, fc(0));
    id r = fadd(positive, log1p32(exp32(m_.emit(Op::OpFNegate, vec(lane_kind::f32), {fabs32(x)}))));
    return fsel(is_nan(x), x, r);
  }

  // erfc: 1 - erf below 0.5 (no cancellation there), the fitted tail beyond.
  id erfc32(id x) {
    id r = fsel(fcmp(Op::OpFOrdLessThan, x, fc(0.5)), fsub(fc(1.0), erf32(x)), erfc_tail(x));
    return fsel(is_nan(x), x, r);
  }

  // C's fmod, exactly, in integers: |x| = mx 2^ex, |y| = my 2^ey (24-bit mantissas), and
  // mx 2^(ex - ey) mod my by at most 8 bits a step (r < 2^24, so r << 8 fits 32 bits); 32 steps
  // cover every exponent difference. The result takes x's sign; fmod(x, 0), fmod(±inf, y) and
  // NaNs give NaN, fmod(x, ±inf) = x.
  id fmod32(id x, id y) {
    auto u = [&](Op o, id a, id b) { return m_.emit(o, uvec4(), {a, b}); };
    auto usel = [&](id c, id a, id b) { return select(lane_kind::u32, c, a, b); };
    auto ucmp = [&](Op o, id a, std::uint32_t v) { return m_.emit(o, bvec4(), {a, usplat(v)}); };
    id bx = m_.emit(Op::OpBitcast, uvec4(), {x}), by = m_.emit(Op::OpBitcast, uvec4(), {y});
    id ax = u(Op::OpBitwiseAnd, bx, usplat(0x7FFFFFFF)),
       ay = u(Op::OpBitwiseAnd, by, usplat(0x7FFFFFFF));
    auto mantissa = [&](id a, id e) {
      id m = u(Op::OpBitwiseAnd, a, usplat(0x7FFFFF));
      return usel(ucmp(Op::OpIEqual, e, 0), m, u(Op::OpBitwiseOr, m, usplat(0x800000)));
    };
    id ex = u(Op::OpShiftRightLogical, ax, usplat(23)),
       ey = u(Op::OpShiftRightLogical, ay, usplat(23));
    id mx = mantissa(ax, ex), my = mantissa(ay, ey);
    ex = m_.ext(uvec4(), GLSLstd450UMax, {ex, usplat(1)});
    ey = m_.ext(uvec4(), GLSLstd450UMax, {ey, usplat(1)});
    id safe_my = usel(ucmp(Op::OpIEqual, my, 0), usplat(1), my);
    id d = usel(m_.emit(Op::OpUGreaterThan, bvec4(), {ex, ey}), u(Op::OpISub, ex, ey), usplat(0));
    id r = u(Op::OpUMod, mx, safe_my);
    for (int step = 0; step < 32; ++step) {
      id s = m_.ext(uvec4(), GLSLstd450UMin, {d, usplat(8)});
      r = u(Op::OpUMod, u(Op::OpShiftLeftLogical, r, s), safe_my);
      d = u(Op::OpISub, d, s);
    }
    // |result| = r 2^(ey - 150), scaled in two exact steps (the result is representable).
    id iv = vec(lane_kind::s32);
    id e = m_.emit(Op::OpISub, iv, {m_.emit(Op::OpBitcast, iv, {ey}), isplat(lane_kind::s32, 150)});
    id magnitude = scale_pow2(m_.emit(Op::OpConvertUToF, vec(lane_kind::f32), {r}), e);
    id result = copysign32(magnitude, x);
    result = fsel(m_.emit(Op::OpULessThan, bvec4(), {ax, ay}), x, result);
    id nan = m_.emit(Op::OpLogicalOr, bvec4(),
                     {ucmp(Op::OpIEqual, ay, 0), ucmp(Op::OpUGreaterThanEqual, ax, 0x7F800000)});
    nan = m_.emit(Op::OpLogicalOr, bvec4(), {nan, ucmp(Op::OpUGreaterThan, ay, 0x7F800000)});
    return fsel(nan, fc(NAN), result);
  }
  // Python's mod: fmod, plus y where the signs differ; a zero takes y's sign.
  id mod32(id x, id y) {
    id r = fmod32(x, y);
    id differ = m_.emit(Op::OpLogicalNotEqual, bvec4(),
                        {fcmp(Op::OpFOrdLessThan, r, fc(0)), fcmp(Op::OpFOrdLessThan, y, fc(0))});
    id nonzero = fcmp(Op::OpFOrdNotEqual, r, fc(0));
    r = fsel(m_.emit(Op::OpLogicalAnd, bvec4(), {nonzero, differ}), fadd(r, y), r);
    return fsel(fcmp(Op::OpFOrdEqual, r, fc(0)), copysign32(fc(0), y), r);
  }
};

}  // namespace kiln::spirv::detail
