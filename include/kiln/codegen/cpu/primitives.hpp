// Per-op SIMD primitives on packs: one function per op, the same semantics as the compiler's
// constant folding (NaN-propagating min/max, integer x / 0 == 0, saturating float-to-int casts).
#pragma once

#include <limits>

#include "kiln/codegen/cpu/narrow.hpp"
#include "kiln/codegen/cpu/pack.hpp"
#include "kiln/ir/op.hpp"

namespace kiln::cpu {

namespace detail {

template <class T, class Fn>
pack<T> map(const pack<T>& a, Fn fn) {
  pack<T> r;
  for (std::size_t i = 0; i < pack<T>::parts; ++i) r.p[i] = fn(a.p[i]);
  return r;
}
template <class T, class Fn>
pack<T> map(const pack<T>& a, const pack<T>& b, Fn fn) {
  pack<T> r;
  for (std::size_t i = 0; i < pack<T>::parts; ++i) r.p[i] = fn(a.p[i], b.p[i]);
  return r;
}

// Combines per-part batch_bools into one float-width mask (through memory when part widths differ).
template <class T, class Fn>
mask compare(const pack<T>& a, const pack<T>& b, Fn fn) {
  if constexpr (pack<T>::parts == 1 && std::is_same_v<T, float>) {
    return {fn(a.p[0], b.p[0])};
  } else {
    alignas(64) std::array<bool, lanes> bits;
    for (std::size_t i = 0; i < pack<T>::parts; ++i)
      fn(a.p[i], b.p[i]).store_unaligned(bits.data() + i * pack<T>::width);
    return mask::load(bits.data());
  }
}

// The mask as per-part batch_bools of element type T (for select on non-float values).
template <class T>
std::array<xsimd::batch_bool<T>, pack<T>::parts> split(const mask& c) {
  std::array<xsimd::batch_bool<T>, pack<T>::parts> r;
  if constexpr (std::is_same_v<T, float>) {
    r[0] = c.m;
  } else {
    alignas(64) std::array<bool, lanes> bits;
    c.store(bits.data());
    for (std::size_t i = 0; i < pack<T>::parts; ++i)
      r[i] = xsimd::batch_bool<T>::load_unaligned(bits.data() + i * pack<T>::width);
  }
  return r;
}

template <class B>
B nan_aware(const B& x, const B& y, const B& r) {
  if constexpr (std::is_floating_point_v<typename B::value_type>)
    return xsimd::select(xsimd::isnan(x) || xsimd::isnan(y), x + y, r);
  else
    return r;
}

// exp in f32 with kiln's own range reduction, the algorithm the SPIR-V emitter uses too:
// exp(x) = 2^k e^r, k = round(x / ln 2), r = x - k ln 2 (two-part ln 2), e^r by its Taylor series
// to r^7, and 2^k applied in two halves, so results near the top of the range (x up to 88.72)
// stay finite and those below 2^-126 come out as subnormals instead of 0. Within 2 ulp.
template <class B>
B exp32(const B& x) {
  using I = xsimd::batch<std::int32_t, typename B::arch_type>;
  B xc = xsimd::min(xsimd::max(x, B(-104.f)), B(89.f));
  B kf = xsimd::nearbyint(xc * B(1.4426950408889634f));
  B r = (xc - kf * B(0.693145751953125f)) - kf * B(1.4286068203094172e-06f);
  constexpr float c[] = {1.f, 1.f, 1.f / 2, 1.f / 6, 1.f / 24, 1.f / 120, 1.f / 720, 1.f / 5040};
  B p(c[7]);
  for (int n = 6; n >= 0; --n) p = p * r + B(c[n]);
  I k = xsimd::batch_cast<std::int32_t>(kf);
  I half = k >> 1, rest = k - half;
  auto pow2 = [](const I& e) { return xsimd::bitwise_cast<B>((e + I(127)) << 23); };
  return xsimd::select(xsimd::isnan(x), x, p * pow2(half) * pow2(rest));
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

// log with subnormal inputs handled exactly: log(m 2^-149) = log(m) - 149 ln 2 for f32 (1074 for
// f64), m the mantissa as an integer (xsimd's log treats subnormals as far too large).
template <class B>
B log_any(const B& x) {
  using T = typename B::value_type;
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  using UB = xsimd::batch<U, typename B::arch_type>;
  constexpr U mantissa = sizeof(T) == 4 ? 0x7FFFFFu : 0xFFFFFFFFFFFFFull;
  constexpr T shift = sizeof(T) == 4 ? T(149) : T(1074);
  auto subnormal = x < B(std::numeric_limits<T>::min()) && x > B(0);
  UB m = xsimd::bitwise_cast<UB>(x) & UB(mantissa);
  B scaled = xsimd::log(xsimd::batch_cast<T>(m)) - B(shift * T(0.6931471805599453094));
  return xsimd::select(subnormal, scaled, xsimd::log(x));
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
  r = xsimd::select(negative && odd, -r, r);
  r = xsimd::select(x < zero && ax < inf && !integer, B(std::numeric_limits<T>::quiet_NaN()), r);
  r = xsimd::select(xsimd::isnan(x) || xsimd::isnan(y), x + y, r);
  return xsimd::select(y == zero || x == one || (x == -one && ay == inf), one, r);
}

}  // namespace detail

// Narrow integers live in 32-bit lanes; after each op the value is wrapped into its own type.
template <dtype D, class T>
pack<T> wrap(const pack<T>& v) {
  if constexpr (D == dtype::i8 || D == dtype::i16) {
    constexpr int shift = D == dtype::i8 ? 24 : 16;
    return detail::map(v, [](auto x) { return (x << shift) >> shift; });
  } else if constexpr (D == dtype::u8) {
    return detail::map(v, [](auto x) { return x & decltype(x)(0xFF); });
  } else {
    return v;
  }
}

template <ir::op O, dtype D, class T>
pack<T> unary(const pack<T>& a) {
  using ir::op;
  using B = xsimd::batch<T>;
  if constexpr (O == op::neg)
    return wrap<D>(detail::map(a, [](B x) { return -x; }));
  else if constexpr (O == op::abs) {
    if constexpr (std::is_unsigned_v<T>)
      return a;
    else
      return wrap<D>(detail::map(a, [](B x) { return xsimd::abs(x); }));
  } else if constexpr (O == op::relu)
    return detail::map(a, [](B x) { return xsimd::select(x < B(0), B(0), x); });
  else if constexpr (O == op::exp) {
    if constexpr (std::is_same_v<T, float>)
      return detail::map(a, [](B x) { return detail::exp32(x); });
    else
      return detail::map(a, [](B x) { return xsimd::exp(x); });
  } else if constexpr (O == op::log)
    return detail::map(a, [](B x) { return detail::log_any(x); });
  else if constexpr (O == op::sqrt)
    return detail::map(a, [](B x) { return xsimd::sqrt(x); });
  else if constexpr (O == op::rsqrt)
    return detail::map(a, [](B x) { return B(1) / xsimd::sqrt(x); });
  else if constexpr (O == op::tanh) {
    if constexpr (std::is_same_v<T, float>)
      return detail::map(a, [](B x) { return detail::tanh32(x); });
    else
      return detail::map(a, [](B x) { return xsimd::tanh(x); });
  } else if constexpr (O == op::sigmoid) {
    if constexpr (std::is_same_v<T, float>)
      return detail::map(a, [](B x) { return B(1) / (B(1) + detail::exp32(-x)); });
    else
      return detail::map(a, [](B x) { return B(1) / (B(1) + xsimd::exp(-x)); });
  } else if constexpr (O == op::erf)  // |x| >= 6: erf is 1 to the last bit (xsimd's f64 gives NaN)
    return detail::map(a, [](B x) {
      return xsimd::select(xsimd::abs(x) >= B(6), xsimd::copysign(B(1), x), xsimd::erf(x));
    });
  else if constexpr (O == op::sin)
    return detail::map(a, [](B x) { return xsimd::sin(x); });
  else if constexpr (O == op::cos)
    return detail::map(a, [](B x) { return xsimd::cos(x); });
  // floor, ceil, round: the result has x's sign, as IEEE says (floor(-0) = -0, ceil(-0.5) = -0);
  // xsimd's SSE forms return +0 there.
  else if constexpr (O == op::floor)
    return detail::map(a, [](B x) { return xsimd::copysign(xsimd::floor(x), x); });
  else if constexpr (O == op::ceil)
    return detail::map(a, [](B x) { return xsimd::copysign(xsimd::ceil(x), x); });
  else if constexpr (O == op::round)
    return detail::map(a, [](B x) { return xsimd::copysign(xsimd::nearbyint(x), x); });
  else if constexpr (O == op::reciprocal)
    return detail::map(a, [](B x) { return B(1) / x; });
  else if constexpr (O == op::sign) {  // -1, 0 or 1; floats keep NaN and the sign of zero
    if constexpr (std::is_floating_point_v<T>)
      return detail::map(
          a, [](B x) { return xsimd::select(x > B(0), B(1), xsimd::select(x < B(0), B(-1), x)); });
    else if constexpr (std::is_unsigned_v<T>)
      return detail::map(a, [](B x) { return xsimd::select(x > B(0), B(1), B(0)); });
    else
      return detail::map(a, [](B x) {
        return xsimd::select(x > B(0), B(1), xsimd::select(x < B(0), B(-1), B(0)));
      });
  } else if constexpr (O == op::softsign)
    return detail::map(a, [](B x) { return x / (B(1) + xsimd::abs(x)); });
  else
    static_assert(O == op::neg, "kiln: no CPU primitive for this unary op");
}

template <ir::op O, dtype D, class T>
pack<T> binary(const pack<T>& a, const pack<T>& b) {
  using ir::op;
  using B = xsimd::batch<T>;
  if constexpr (O == op::add)
    return wrap<D>(detail::map(a, b, [](B x, B y) { return x + y; }));
  else if constexpr (O == op::sub)
    return wrap<D>(detail::map(a, b, [](B x, B y) { return x - y; }));
  else if constexpr (O == op::mul) {
    if constexpr (std::is_signed_v<T> && std::is_integral_v<T>) {
      // Wrap-around in unsigned arithmetic: xsimd's scalar fallback multiplies signed lanes, and
      // signed overflow is undefined.
      using U = xsimd::batch<std::make_unsigned_t<T>>;
      return wrap<D>(detail::map(a, b, [](B x, B y) {
        return xsimd::bitwise_cast<B>(xsimd::bitwise_cast<U>(x) * xsimd::bitwise_cast<U>(y));
      }));
    } else {
      return wrap<D>(detail::map(a, b, [](B x, B y) { return x * y; }));
    }
  } else if constexpr (O == op::div) {
    if constexpr (std::is_floating_point_v<T>) {
      return detail::map(a, b, [](B x, B y) { return x / y; });
    } else {
      // No integer division instruction; lanes one by one, with x / 0 == 0 and MIN / -1 wrapping.
      auto x = to_array(a), y = to_array(b);
      for (std::size_t i = 0; i < lanes; ++i) {
        if (y[i] == 0)
          x[i] = 0;
        else if constexpr (std::is_signed_v<T>)
          x[i] = y[i] == -1 ? T(0 - std::make_unsigned_t<T>(x[i])) : T(x[i] / y[i]);
        else
          x[i] = x[i] / y[i];
      }
      return wrap<D>(from_array(x));
    }
  } else if constexpr (O == op::min)
    return detail::map(a, b, [](B x, B y) { return detail::nan_aware(x, y, xsimd::min(x, y)); });
  else if constexpr (O == op::max)
    return detail::map(a, b, [](B x, B y) { return detail::nan_aware(x, y, xsimd::max(x, y)); });
  else if constexpr (O == op::pow)
    return detail::map(a, b, [](B x, B y) { return detail::pow_c(x, y); });
  else
    static_assert(O == op::add, "kiln: no CPU primitive for this binary op");
}

template <ir::op O, class T>
mask compare(const pack<T>& a, const pack<T>& b) {
  using ir::op;
  using B = xsimd::batch<T>;
  if constexpr (O == op::eq)
    return detail::compare(a, b, [](B x, B y) { return x == y; });
  else if constexpr (O ==
                     op::ne)  // not xsimd's !=: its AVX float form is ordered (NaN != NaN false)
    return detail::compare(a, b, [](B x, B y) { return !(x == y); });
  else if constexpr (O == op::lt)
    return detail::compare(a, b, [](B x, B y) { return x < y; });
  else if constexpr (O == op::le)
    return detail::compare(a, b, [](B x, B y) { return x <= y; });
  else if constexpr (O == op::gt)
    return detail::compare(a, b, [](B x, B y) { return x > y; });
  else
    return detail::compare(a, b, [](B x, B y) { return x >= y; });
}

// On bool masks by their bits: xsimd's SSE2 float-mask compare reads all-ones lanes as NaN.
template <ir::op O>
mask compare(const mask& a, const mask& b) {
  if constexpr (O == ir::op::eq)
    return {!(a.m ^ b.m)};
  else
    return {a.m ^ b.m};
}

template <ir::op O>
mask logical(const mask& a, const mask& b) {
  if constexpr (O == ir::op::logical_and)
    return {a.m && b.m};
  else
    return {a.m || b.m};
}
inline mask logical_not(const mask& a) { return {!a.m}; }

template <class T>
pack<T> select(const mask& c, const pack<T>& a, const pack<T>& b) {
  auto parts = detail::split<T>(c);
  pack<T> r;
  for (std::size_t i = 0; i < pack<T>::parts; ++i) r.p[i] = xsimd::select(parts[i], a.p[i], b.p[i]);
  return r;
}
inline mask select(const mask& c, const mask& a, const mask& b) {
  return {(c.m && a.m) || (!c.m && b.m)};
}

// The lane value of a scalar (kiln::scalar) in the compute type of its dtype.
template <dtype D>
lane_t<D> lane_value(const scalar& s) {
  if constexpr (is_floating(D))
    return static_cast<lane_t<D>>(s.f);
  else
    return static_cast<lane_t<D>>(s.i);
}

// Cast with kiln's scalar semantics, lane by lane (rounding to narrow floats included).
template <dtype From, dtype To, class In>
compute_t<To> cast(const In& v) {
  auto in = to_array(v);
  std::array<lane_t<To>, lanes> out;
  for (std::size_t i = 0; i < lanes; ++i) {
    scalar s = is_floating(From) ? scalar{From, static_cast<double>(in[i]), 0}
                                 : scalar{From, 0, static_cast<std::int64_t>(in[i])};
    out[i] = lane_value<To>(s.to(To));
  }
  return from_array(out);
}

// Loads and stores between a buffer's storage type and the compute type.
template <dtype D>
compute_t<D> load(const storage_t<D>* p) {
  using S = storage_t<D>;
  using L = lane_t<D>;
  if constexpr (std::is_same_v<S, L> || D == dtype::boolean) {
    return compute_t<D>::load(p);
  } else if constexpr (D == dtype::f16 || D == dtype::bf16) {
#if defined(__AVX2__) && defined(__F16C__)
    if constexpr (lanes == 8) {  // straight into the register, no trip through memory
      pack<float> r;
      r.p[0] = xsimd::batch<float>(widen8<D>(p));
      return r;
    }
#endif
    alignas(64) std::array<float, lanes> a;
    widen<D>(p, a.data());
    return from_array(a);
  } else {
    alignas(64) std::array<L, lanes> a;
    for (std::size_t i = 0; i < lanes; ++i) a[i] = static_cast<L>(p[i]);
    return from_array(a);
  }
}

template <dtype D>
compute_t<D> splat(const storage_t<D>* p) {
  return compute_t<D>::splat(static_cast<lane_t<D>>(*p));
}

template <dtype D>
void store(const compute_t<D>& v, storage_t<D>* p) {
  using S = storage_t<D>;
  using L = lane_t<D>;
  if constexpr (std::is_same_v<S, L> || D == dtype::boolean) {
    v.store(p);
  } else if constexpr (D == dtype::f16 || D == dtype::bf16) {
#if defined(__AVX2__) && defined(__F16C__)
    if constexpr (lanes == 8) {
      narrow8<D>(v.p[0], p);
      return;
    }
#endif
    narrow<D>(to_array(v).data(), p);
  } else {
    auto a = to_array(v);
    for (std::size_t i = 0; i < lanes; ++i) p[i] = static_cast<S>(a[i]);
  }
}

}  // namespace kiln::cpu
