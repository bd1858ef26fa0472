// kiln's math library in SPIR-V: the functions kiln implements itself where drivers' GLSL.std.450
// forms are looser than the README's bounds (or undefined at C's edges), each with its bound.
// They run on f32 lanes (lowering.hpp's needs_32bit_float sends f64 regions of them to the CPU).
#pragma once

#include <cmath>
#include <initializer_list>
#include <vector>

#include "kiln/codegen/spirv/narrow_codec.hpp"

namespace kiln::spirv::detail {

class math_library : public narrow_codec {
 protected:
  // Small helpers on f32 lanes (each rounds as IEEE says: see exact()).
  id fc(double v) { return fsplat(lane_kind::f32, v); }
  id fop(Op o, id a, id b) { return exact(m_.emit(o, vec(lane_kind::f32), {a, b})); }
  id fadd(id a, id b) { return fop(Op::OpFAdd, a, b); }
  id fsub(id a, id b) { return fop(Op::OpFSub, a, b); }
  id fmul(id a, id b) { return fop(Op::OpFMul, a, b); }
  id fdiv(id a, id b) { return divide(lane_kind::f32, a, b); }
  id fabs32(id x) { return m_.ext(vec(lane_kind::f32), GLSLstd450FAbs, {x}); }
  id fsel(id c, id a, id b) { return select(lane_kind::f32, c, a, b); }
  id fcmp(Op o, id a, id b) { return m_.emit(o, bvec4(), {a, b}); }
  id is_nan(id x) { return m_.emit(Op::OpIsNan, bvec4(), {x}); }
  // |r| with the sign bit of s.
  id copysign32(id r, id s) {
    auto bits = [&](id v) { return m_.emit(Op::OpBitcast, uvec4(), {v}); };
    id mag = m_.emit(Op::OpBitwiseAnd, uvec4(), {bits(r), usplat(0x7FFFFFFF)});
    id sign = m_.emit(Op::OpBitwiseAnd, uvec4(), {bits(s), usplat(0x80000000)});
    return m_.emit(Op::OpBitcast, vec(lane_kind::f32),
                   {m_.emit(Op::OpBitwiseOr, uvec4(), {mag, sign})});
  }
  // Horner's rule: c[0] + z (c[1] + z (c[2] + ...)).
  id horner(id z, std::initializer_list<double> c) {
    const double* first = c.begin();
    id p = fc(first[c.size() - 1]);
    for (std::size_t i = c.size() - 1; i-- > 0;) p = fadd(fmul(p, z), fc(first[i]));
    return p;
  }

  // p 2^k for an s32 k whose halves are in [-126, 127]: 2^k applied in two halves, each from its
  // exponent bits, so that results near the top of the range stay finite and those below 2^-126
  // come out as subnormals, rounded once.
  id scale_pow2(id p, id k) {
    id iv = vec(lane_kind::s32);
    id half = m_.emit(Op::OpShiftRightArithmetic, iv, {k, usplat(1)});
    id rest = m_.emit(Op::OpISub, iv, {k, half});
    auto pow2 = [&](id e) {
      id biased = m_.emit(Op::OpIAdd, iv, {e, isplat(lane_kind::s32, 127)});
      return m_.emit(Op::OpBitcast, vec(lane_kind::f32),
                     {m_.emit(Op::OpShiftLeftLogical, iv, {biased, usplat(23)})});
    };
    return fmul(fmul(p, pow2(half)), pow2(rest));
  }

  // e^r 2^k for |r| <= 0.35 and an integral kf in [-152, 128]: e^r by its Taylor series to r^7
  // (truncation below 1e-8), then scale_pow2.
  id exp_scaled(id kf, id r) {
    id p = horner(r, {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040});
    return scale_pow2(p, m_.emit(Op::OpConvertFToS, vec(lane_kind::s32), {kf}));
  }

  // e^(hi + lo) for |lo| much smaller than |hi|, hi + lo in [-104, 89]: k = round((hi + lo) /
  // ln 2), r = hi - k ln 2 + lo with ln 2 in two parts (k ln2_hi is exact, and so is hi minus it).
  // An argument given in two parts keeps the bits a single f32 would round away (erfc's -x^2).
  id exp_split(id hi, id lo) {
    id kf = m_.ext(vec(lane_kind::f32), GLSLstd450RoundEven,
                   {fmul(fadd(hi, lo), fc(1.4426950408889634))});
    id r = fadd(fsub(hi, fmul(kf, fc(0.693145751953125))), lo);
    return exp_scaled(kf, fsub(r, fmul(kf, fc(1.4286068203094172e-06))));
  }

  // exp in f32 with its own range reduction: drivers may be as loose as 3 + 2|x| ulp (lavapipe's
  // is 2.6e-6 relative near x = 70); this one stays within 2 ulp, as the CPU path does.
  // exp(x) = 2^k e^r, k = round(x / ln 2), r = x - k ln 2 (two-part ln 2, so k * hi is exact).
  // exp_split's reduction without its low part (adding a zero is no identity a driver may drop).
  id exp32(id x) {
    id xc = m_.ext(vec(lane_kind::f32), GLSLstd450FClamp, {x, fc(-104.0), fc(89.0)});
    id kf = m_.ext(vec(lane_kind::f32), GLSLstd450RoundEven, {fmul(xc, fc(1.4426950408889634))});
    id r = fsub(fsub(xc, fmul(kf, fc(0.693145751953125))), fmul(kf, fc(1.4286068203094172e-06)));
    return fsel(is_nan(x), x, exp_scaled(kf, r));
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
    id u = divide(k, m_.emit(Op::OpFMul, t, {fsplat(k, 2.0), e}),
                  m_.emit(Op::OpFAdd, t, {fsplat(k, 1.0), e}));
    id big = m_.emit(Op::OpFSub, t, {fsplat(k, 1.0), u});
    big = m_.emit(Op::OpFMul, t, {m_.ext(t, GLSLstd450FSign, {x}), big});
    return select(k, less(k, ax, fsplat(k, 0.3)), small, big);
  }

  // erfc(a) for a >= 0.5: t e^(-a^2 + P(t)), t = 1 / (1 + a/2), P of degree 9 from a
  // rational-exponential fit with a fractional error below 1.2e-7 (the erfcc formula of Numerical
  // Recipes). -a^2 is kept in two parts (a = ah + al, ah with 12 significant bits, so ah^2 is
  // exact), since rounding it alone would cost up to 64 ulp near a = 9. 0 beyond a = 10.5.
  id erfc_tail(id a) {
    id ac = m_.ext(vec(lane_kind::f32), GLSLstd450FMin, {a, fc(10.5)});
    id t = fdiv(fc(1.0), fadd(fc(1.0), fmul(fc(0.5), ac)));
    id poly = horner(t, {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
                         -1.13520398, 1.48851587, -0.82215223, 0.17087277});
    id ah = m_.emit(Op::OpBitcast, vec(lane_kind::f32),
                    {m_.emit(Op::OpBitwiseAnd, uvec4(),
                             {m_.emit(Op::OpBitcast, uvec4(), {ac}), usplat(0xFFFFF000)})});
    id al = fsub(ac, ah);
    id hi = m_.emit(Op::OpFNegate, vec(lane_kind::f32), {fmul(ah, ah)});
    id lo = fsub(poly, fmul(al, fadd(ac, ah)));
    id r = fmul(t, exp_split(hi, lo));
    return fsel(fcmp(Op::OpFOrdLessThan, a, fc(10.5)), r, fc(0));
  }

  // erf: Taylor series below 0.5; 1 - erfc beyond.
  id erf32(id x) {
    id ax = fabs32(x);
    id x2 = fmul(x, x);
    // 2/sqrt(pi) * (-1)^n / (n! (2n + 1))
    double fact = 1;
    std::vector<double> c;
    for (int n = 0; n <= 7; ++n) {
      if (n > 0) fact *= n;
      c.push_back(1.1283791670955126 * (n % 2 ? -1 : 1) / (fact * (2 * n + 1)));
    }
    id p = fc(c.back());
    for (int i = static_cast<int>(c.size()) - 2; i >= 0; --i) p = fadd(fmul(p, x2), fc(c[i]));
    id small = fmul(x, p);
    id big = copysign32(fsub(fc(1.0), erfc_tail(ax)), x);
    return fsel(fcmp(Op::OpFOrdLessThan, ax, fc(0.5)), small, fsel(is_nan(x), x, big));
  }

  // log in f32 with its own reduction (drivers' GLSL.std.450 Log may be far looser: lavapipe's is
  // 2,400 ulp off near x = 1): x = m 2^e with m in [sqrt(1/2), sqrt(2)), s = (m - 1) / (m + 1),
  // log(m) = 2 atanh(s) = 2s + s z (2/3 + z (2/5 + ...)), z = s^2, |s| <= 0.172, and
  // log(x) = e ln 2 (two parts) + log(m): within 2 ulp, as the CPU's. Subnormal inputs are scaled
  // in integers (their bits as an integer, e - 149), since drivers may flush them to zero.
  // Edges as C: log(±0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN stays.
  // x = m 2^e as above: e as a float and log(m) (within an ulp), for log, log2 and log1p.
  struct log_parts {
    id e, log_m;
  };
  log_parts log_reduce(id x) {
    id t = vec(lane_kind::f32), iv = vec(lane_kind::s32);
    auto ubin = [&](Op o, id a, id b) { return m_.emit(o, uvec4(), {a, b}); };
    auto ival = [&](std::int64_t v) { return isplat(lane_kind::s32, v); };
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
    id e = m_.emit(
        Op::OpISub, iv,
        {m_.emit(Op::OpBitcast, iv, {ubin(Op::OpShiftRightLogical, u, usplat(23))}), ival(127)});
    e = m_.emit(Op::OpIAdd, iv, {e, select(lane_kind::s32, above, ival(1), ival(0))});
    e = m_.emit(Op::OpIAdd, iv, {e, select(lane_kind::s32, subnormal, ival(-149), ival(0))});
    id f = fsub(m, fc(1.0));  // exact (Sterbenz)
    id sv = fdiv(f, fadd(f, fc(2.0)));
    id z = fmul(sv, sv);
    id p = horner(z, {2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13});
    id log_m = fadd(fmul(sv, fc(2.0)), fmul(fmul(sv, z), p));
    return {m_.emit(Op::OpConvertSToF, t, {e}), log_m};
  }
  // C's edges of a logarithm: f(±0) = -inf, f(x < 0) = NaN, f(inf) = inf, NaN stays. Zero and
  // the sign are read from the bits: a device that flushes subnormals compares -1e-40 equal to 0.
  id log_edges(id x, id r) {
    id bits = m_.emit(Op::OpBitcast, uvec4(), {x});
    id magnitude = m_.emit(Op::OpBitwiseAnd, uvec4(), {bits, usplat(0x7FFFFFFF)});
    r = fsel(m_.emit(Op::OpUGreaterThan, bvec4(), {bits, usplat(0x80000000)}), fc(NAN), r);
    r = fsel(m_.emit(Op::OpIEqual, bvec4(), {magnitude, usplat(0)}), fc(-HUGE_VAL), r);
    r = fsel(fcmp(Op::OpFOrdEqual, x, fc(HUGE_VAL)), x, r);
    return fsel(is_nan(x), x, r);
  }
  // e ln 2 + log(m), ln 2 in two parts.
  id log_from(id e, id log_m) {
    return fadd(fmul(e, fc(0.693145751953125)), fadd(fmul(e, fc(1.4286068203094172e-06)), log_m));
  }
  id log32(id x) {
    auto [e, log_m] = log_reduce(x);
    return log_edges(x, log_from(e, log_m));
  }

  // sin or cos in f32 over the whole range, with kiln's own argument reduction (drivers' may fail
  // for large |x|: lavapipe's sin(1e10) was -1). |x| = M 2^E (M the 24-bit mantissa) is reduced
  // exactly in integers (Payne-Hanek): the 96 bits of 2/pi that matter modulo 4 for this E,
  // times M, give the quadrant q and a 62-bit fraction f of pi/2; y = f pi/2 in [-pi/4, pi/4]
  // (|x| < pi/4 is its own y), and sin/cos of y by their Taylor series. Within 4 ulp or 2e-7.
  struct quadrant {
    id y, q;  // |x| = q pi/2 + y (q modulo 4), |y| <= pi/4
  };
  quadrant reduce_half_pi(id x) {
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
    return {y, q};
  }

  id sin_poly(id y) {  // |y| <= pi/4
    id y2 = fmul(y, y);
    return fadd(y, fmul(fmul(y, y2), horner(y2, {-1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880})));
  }
  id cos_poly(id y) {
    id y2 = fmul(y, y);
    return fadd(fc(1.0),
                fmul(y2, horner(y2, {-0.5, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800})));
  }
  id odd_quadrant(id q) {
    return m_.emit(Op::OpIEqual, bvec4(),
                   {m_.emit(Op::OpBitwiseAnd, uvec4(), {q, usplat(1)}), usplat(1)});
  }
  // The sign of x on r (an odd function of |x|): -0 stays -0.
  id odd_sign(id r, id x) {
    auto u = [&](Op o, id a, id b) { return m_.emit(o, uvec4(), {a, b}); };
    return m_.emit(
        Op::OpBitcast, vec(lane_kind::f32),
        {u(Op::OpBitwiseXor, m_.emit(Op::OpBitcast, uvec4(), {r}),
           u(Op::OpBitwiseAnd, m_.emit(Op::OpBitcast, uvec4(), {x}), usplat(0x80000000)))});
  }
  id nan_beyond_finite(id x, id r) {  // f(±inf) = f(NaN) = NaN
    id special = m_.emit(Op::OpLogicalOr, bvec4(), {m_.emit(Op::OpIsInf, bvec4(), {x}), is_nan(x)});
    return fsel(special, fc(NAN), r);
  }

  // sin or cos in f32 over the whole range: the reduction above, then sin/cos of y by their
  // Taylor series. Within 4 ulp or 2e-7.
  id sincos32(id x, bool is_sin) {
    auto [y, q] = reduce_half_pi(x);
    id sin_y = sin_poly(y), cos_y = cos_poly(y);
    auto eq = [&](id a, std::uint32_t v) { return m_.emit(Op::OpIEqual, bvec4(), {a, usplat(v)}); };
    // sin |x| = [sin y, cos y, -sin y, -cos y][q]; cos |x| = [cos y, -sin y, -cos y, sin y][q].
    id odd = odd_quadrant(q);
    id r = is_sin ? fsel(odd, cos_y, sin_y) : fsel(odd, sin_y, cos_y);
    id negate = is_sin ? m_.emit(Op::OpUGreaterThanEqual, bvec4(), {q, usplat(2)})
                       : m_.emit(Op::OpLogicalOr, bvec4(), {eq(q, 1), eq(q, 2)});
    r = fsel(negate, m_.emit(Op::OpFNegate, vec(lane_kind::f32), {r}), r);
    if (is_sin) r = odd_sign(r, x);  // sin is odd
    return nan_beyond_finite(x, r);
  }

  // sqrt with C's edges (GLSL leaves x < 0 undefined): sqrt(-0) = -0, sqrt(x < 0) = NaN. Where
  // x compares equal to 0, f32 gives the zero of x's sign, not x: a device that flushes
  // subnormals compares them equal to 0 too, and sqrt(1e-41) is not 1e-41.
  id sqrt_of(lane_kind k, id x) {
    id t = vec(k);
    id r = m_.ext(t, GLSLstd450Sqrt, {x});
    r = select(k, m_.emit(Op::OpFOrdLessThan, bvec4(), {x, fsplat(k, 0)}), fsplat(k, NAN), r);
    id zero = x;
    if (k == lane_kind::f32)
      zero = m_.emit(Op::OpBitcast, t,
                     {m_.emit(Op::OpBitwiseAnd, uvec4(),
                              {m_.emit(Op::OpBitcast, uvec4(), {x}), usplat(0x80000000)})});
    return select(k, m_.emit(Op::OpFOrdEqual, bvec4(), {x, fsplat(k, 0)}), zero, r);
  }

  // pow with C's (and ONNX's) semantics at every edge (GLSL's pow is undefined for x < 0 and for
  // x = 0, y <= 0): the same rules as the CPU's cpu::detail::pow_c, over e^(y ln |x|) with kiln's
  // own exp and log. Not GLSL's pow: Vulkan derives its precision from exp2(y log2 x) with log2's
  // error absolute (2^-21) near 1, which made pow(0.999844, -557424) 2 % off on lavapipe; kiln's
  // log is a few ulp relative there too, so the result is within 2 ulp + 2^-22 |y ln x|.
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
    id r = exp32(exact(m_.emit(Op::OpFMul, t, {y, log32(ax)})));
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
};

}  // namespace kiln::spirv::detail
