// kiln's own float functions on xsimd batches where xsimd's are looser than the README's bounds
// or wrong at C's edges (exp, exp2, tanh, erfc in f32; log of subnormals; pow): the same
// algorithms as the SPIR-V math library (codegen/spirv/math.hpp), so both devices agree.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>
#include "kiln/codegen/cpu/isa.hpp"

#include <xsimd/xsimd.hpp>

namespace kiln::cpu::inline KILN_CPU_ISA::detail {

// p 2^k for an integral kf whose halves are normal exponents of T: applied in two halves, so
// results near the top stay finite and those below the normal range come out subnormal, rounded
// once.
template <class B>
B scale_pow2(const B& p, const B& kf) {
  using T = typename B::value_type;
  using S = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  using I = xsimd::batch<S, typename B::arch_type>;
  constexpr int mantissa_bits = sizeof(T) == 4 ? 23 : 52;
  constexpr S bias = sizeof(T) == 4 ? 127 : 1023;
  I k = xsimd::batch_cast<S>(kf);
  I half = k >> 1, rest = k - half;
  auto pow2 = [](const I& e) { return xsimd::bitwise_cast<B>((e + I(bias)) << mantissa_bits); };
  return p * pow2(half) * pow2(rest);
}

// e^r 2^k in f32 for |r| <= 0.35 and an integral kf in [-152, 128]: e^r by its Taylor series to
// r^7, 2^k applied in two halves (results near the top stay finite, those below 2^-126 come out
// as subnormals). The SPIR-V emitter's exp_scaled is the same algorithm.
template <class B>
B exp_scaled(const B& kf, const B& r) {
  constexpr float c[] = {1.f, 1.f, 1.f / 2, 1.f / 6, 1.f / 24, 1.f / 120, 1.f / 720, 1.f / 5040};
  B p(c[7]);
  for (int n = 6; n >= 0; --n) p = p * r + B(c[n]);
  return scale_pow2(p, kf);
}

// e^(hi + lo) for |lo| much smaller than |hi|, hi + lo in [-104, 89]: k = round((hi + lo) / ln 2),
// r = hi - k ln 2 + lo, ln 2 in two parts (k ln2_hi is exact, and so is hi minus it).
template <class B>
B exp_split(const B& hi, const B& lo) {
  B kf = xsimd::nearbyint((hi + lo) * B(1.4426950408889634f));
  B r = ((hi - kf * B(0.693145751953125f)) + lo) - kf * B(1.4286068203094172e-06f);
  return exp_scaled(kf, r);
}

// exp in f32 with kiln's own range reduction, the algorithm the SPIR-V emitter uses too:
// exp(x) = 2^k e^r, k = round(x / ln 2), r = x - k ln 2 (two-part ln 2): finite up to 88.72,
// subnormal results below 2^-126 instead of 0. Within 2 ulp.
//
// The clamp puts x second: min and max give their second operand when one is NaN (x86's and the
// generic select form; Arm's give NaN either way), so a NaN x stays NaN through the reduction and
// the polynomial, with no test for it. Two fewer operations per batch than exp_split(xc, 0) and a
// NaN select, the largest part of a softmax's time.
template <class B>
B exp32(const B& x) {
  B xc = xsimd::min(B(89.f), xsimd::max(B(-104.f), x));
  B kf = xsimd::nearbyint(xc * B(1.4426950408889634f));
  B r = (xc - kf * B(0.693145751953125f)) - kf * B(1.4286068203094172e-06f);
  return exp_scaled(kf, r);
}

// 2^x in f32: 2^k e^(f ln 2), k = round(x), f = x - k (exact).
template <class B>
B exp2_32(const B& x) {
  B xc = xsimd::min(xsimd::max(x, B(-151.f)), B(129.f));
  B kf = xsimd::nearbyint(xc);
  B f = xc - kf;
  B r = f * B(0.693145751953125f) + f * B(1.4286068203094172e-06f);
  return xsimd::select(xsimd::isnan(x), x, exp_scaled(kf, r));
}

// erfc in f32 for a >= 0.5: t e^(-a^2 + P(t)), t = 1 / (1 + a/2), with -a^2 in two parts (a = ah
// + al, ah of 12 significant bits so ah^2 is exact); the SPIR-V emitter's erfc_tail.
template <class B>
B erfc_tail32(const B& a) {
  using U = xsimd::batch<std::uint32_t, typename B::arch_type>;
  B ac = xsimd::min(a, B(10.5f));
  B t = B(1.f) / (B(1.f) + B(0.5f) * ac);
  constexpr float c[] = {-1.26551223f, 1.00002368f,  0.37409196f, 0.09678418f,  -0.18628806f,
                         0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
  B p(c[9]);
  for (int n = 8; n >= 0; --n) p = p * t + B(c[n]);
  B ah = xsimd::bitwise_cast<B>(xsimd::bitwise_cast<U>(ac) & U(0xFFFFF000u));
  B al = ac - ah;
  B r = t * exp_split(-(ah * ah), p - al * (ac + ah));
  return xsimd::select(a < B(10.5f), r, B(0.f));
}

// tanh in f32 with one division for both of its forms. Below |x| = 0.625, tanh(x) = x + x t N(t)
// / Q(t), t = x^2: a rational of degrees 2/1 in t fitted by kiln (scripts/fit_tanh.py 0.625 2 1,
// 4e-9 relative), written as x plus a small correction so that its rounding barely shows. Above,
// tanh(x) = 1 - 2 / (1 + e^2x), with e^2x from kiln's reduction and a degree-6 Taylor polynomial:
// the quotient is small there, so results near 1 keep their last bit (gelu's 1 + tanh(z) for
// negative z cancels to it). Within 1.6 ulp over every f32 (the sweep test holds it to 4 ulp).
template <class B>
B tanh32(const B& x) {
  using I = xsimd::batch<std::int32_t, typename B::arch_type>;
  B a = xsimd::min(xsimd::abs(x), B(10.f));  // tanh(10) is 1 in f32; e^20 stays finite
  auto small = a < B(0.625f);
  B t = a * a;
  B n = xsimd::fma(B(-1.53973015273e-3f), t, B(-0.333332987918f));
  B q = xsimd::fma(B(0.404605182553f), t, B(1.f));
  B y = a + a;
  B k = xsimd::nearbyint(y * B(1.4426950408889634f));
  B r = xsimd::fnma(k, B(1.4286068203094172e-06f), xsimd::fnma(k, B(0.693145751953125f), y));
  constexpr float c[] = {1.f, 1.f, 1.f / 2, 1.f / 6, 1.f / 24, 1.f / 120, 1.f / 720};
  B p(c[6]);
  for (int i = 5; i >= 0; --i) p = xsimd::fma(p, r, B(c[i]));
  B e2x = p * xsimd::bitwise_cast<B>((xsimd::batch_cast<std::int32_t>(k) + I(127)) << 23);
  B base = xsimd::select(small, a, B(1.f));
  B num = xsimd::select(small, a * t * n, B(-2.f));
  B den = xsimd::select(small, q, B(1.f) + e2x);
  return xsimd::select(xsimd::isnan(x), x, xsimd::copysign(base + num / den, x));
}

// log (or, with Base2, log2) with subnormal inputs handled exactly: log(m 2^-149) = log(m) -
// 149 ln 2 for f32 (1074 for f64), m the mantissa as an integer (xsimd's log and log2 treat
// subnormals as far too large).
template <bool Base2, class B>
B log_any(const B& x) {
  using T = typename B::value_type;
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  using UB = xsimd::batch<U, typename B::arch_type>;
  constexpr U mantissa = sizeof(T) == 4 ? 0x7FFFFFu : 0xFFFFFFFFFFFFFull;
  constexpr T shift = sizeof(T) == 4 ? T(149) : T(1074);
  auto log = [](const B& v) {
    if constexpr (Base2)
      return xsimd::log2(v);
    else
      return xsimd::log(v);
  };
  auto subnormal = x < B(std::numeric_limits<T>::min()) && x > B(0);
  UB m = xsimd::bitwise_cast<UB>(x) & UB(mantissa);
  B scaled = log(xsimd::batch_cast<T>(m)) - B(Base2 ? shift : shift * T(0.6931471805599453094));
  return xsimd::select(subnormal, scaled, log(x));
}

// e^x in f64 with subnormal results kept (xsimd's flushes them below 2^-1022): 2^k e^r, k =
// round(x / ln 2), r = x - k ln 2 (ln 2 in two parts), e^r by xsimd.
template <class B>
B exp_f64(const B& x) {
  B xc = xsimd::min(xsimd::max(x, B(-746.0)), B(710.0));
  B kf = xsimd::nearbyint(xc * B(1.4426950408889634));
  B r = (xc - kf * B(0.693145751953125)) - kf * B(1.4286068203094172321e-06);
  return xsimd::select(xsimd::isnan(x), x, scale_pow2(xsimd::exp(r), kf));
}

// 2^x in f64: 2^k 2^f, k = round(x), f = x - k (exact); finite to just below 1024, subnormal
// results kept (xsimd's overflows early and flushes).
template <class B>
B exp2_f64(const B& x) {
  B xc = xsimd::min(xsimd::max(x, B(-1076.0)), B(1025.0));
  B kf = xsimd::nearbyint(xc);
  return xsimd::select(xsimd::isnan(x), x, scale_pow2(xsimd::exp2(xc - kf), kf));
}

// -x as IEEE negation (the sign bit flipped: -0 for 0): xsimd's AVX-512 unary minus is 0 - x.
template <class B>
B negated(const B& x) {
  using T = typename B::value_type;
  if constexpr (std::is_floating_point_v<T>)
    return xsimd::bitwise_xor(x, B(T(-0.0)));
  else
    return -x;
}

// pow with C's (and ONNX's) semantics at every edge: pow(x, 0) = 1 and pow(1, y) = 1 even for
// NaN, pow(-1, ±inf) = 1, odd integer powers keep the sign of a negative base, pow(0, y < 0) = inf,
// a negative finite base with a non-integer exponent is NaN, infinities as C99 Annex F. In between,
// xsimd's pow of |x|.
template <class B>
B pow_c(const B& x, const B& y) {
  using T = typename B::value_type;
  const B inf(std::numeric_limits<T>::infinity()), zero(0), one(1);
  B ax = xsimd::abs(x), ay = xsimd::abs(y);
  B r = xsimd::pow(ax, y);
  auto y_negative = y < zero;
  r = xsimd::select(ax == zero, xsimd::select(y_negative, inf, zero), r);
  r = xsimd::select(ax == inf, xsimd::select(y_negative, zero, inf), r);
  r = xsimd::select(ay == inf, xsimd::select((ax < one) == y_negative, inf, zero), r);
  auto integer = xsimd::floor(y) == y;  // true for infinite y too
  B half = y * B(0.5);
  auto odd = integer && !(xsimd::floor(half) == half);
  auto negative = xsimd::copysign(one, x) < zero;  // the sign bit, -0 included
  r = xsimd::select(negative && odd, negated(r), r);
  r = xsimd::select(x < zero && ax < inf && !integer, B(std::numeric_limits<T>::quiet_NaN()), r);
  r = xsimd::select(xsimd::isnan(x) || xsimd::isnan(y), x + y, r);
  return xsimd::select(y == zero || x == one || (x == -one && ay == inf), one, r);
}

}  // namespace kiln::cpu::inline KILN_CPU_ISA::detail
