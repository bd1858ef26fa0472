// Per-op SIMD primitives on packs: one function per op, the same semantics as the compiler's
// constant folding (NaN-propagating min/max, integer x / 0 == 0, saturating float-to-int casts).
#pragma once

#include <cmath>
#include <limits>
#include "kiln/codegen/cpu/isa.hpp"

#include "kiln/codegen/cpu/math.hpp"
#include "kiln/codegen/cpu/narrow.hpp"
#include "kiln/codegen/cpu/pack.hpp"
#include "kiln/ir/op.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {

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

// Lane by lane through arrays, for ops with no SIMD instruction (the compiler may still
// vectorize the loop).
template <class T, class Fn>
pack<T> lanewise(const pack<T>& a, const pack<T>& b, Fn fn) {
  auto x = to_array(a), y = to_array(b);
  for (std::size_t i = 0; i < lanes; ++i) x[i] = fn(x[i], y[i]);
  return from_array(x);
}

// fmod as C's (exact; the dividend's sign) and mod as Python's (the divisor's sign: r + y when
// the signs differ, and a zero takes y's sign). Integers: x % 0 == 0 and MIN % -1 == 0.
template <ir::op O, class T>
T remainder(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(x, y);
    if constexpr (O == ir::op::mod) {
      if (r != 0 && (r < 0) != (y < 0)) r += y;
      if (r == 0) r = std::copysign(T(0), y);
    }
    return r;
  } else {
    if (y == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      T r = y == -1 ? 0 : T(x % y);
      if (O == ir::op::mod && r != 0 && (r < 0) != (y < 0)) r += y;
      return r;
    } else {
      return x % y;
    }
  }
}

// A shift by n bits of dtype D (narrow types live sign- or zero-extended in 32-bit lanes); a count
// of D's width or more, or a negative one, shifts every bit out (numpy's definition): 0, or -1
// for a negative value shifted right.
template <ir::op O, dtype D, class T>
T shift(T x, T n) {
  using U = std::make_unsigned_t<T>;
  constexpr int bits = size_in_bytes(D) * 8;
  U count = static_cast<U>(n);
  if constexpr (bits < int(sizeof(T) * 8)) count &= (U(1) << bits) - 1;
  bool out = count >= U(bits);
  if constexpr (O == ir::op::shift_left)
    return out ? T(0) : T(static_cast<U>(x) << count);
  else if constexpr (std::is_signed_v<T>)
    return out ? T(x < 0 ? -1 : 0) : T(x >> count);
  else
    return out ? T(0) : T(x >> count);
}

}  // namespace detail

// Narrow integers live in 32-bit lanes; after each op the value is wrapped into its own type.
template <dtype D, class T>
pack<T> wrap(const pack<T>& v) {
  if constexpr (D == dtype::i8 || D == dtype::i16) {
    constexpr int shift = D == dtype::i8 ? 24 : 16;
    return detail::map(v, [](auto x) { return (x << shift) >> shift; });
  } else if constexpr (D == dtype::u8 || D == dtype::u16) {
    constexpr auto mask = D == dtype::u8 ? 0xFF : 0xFFFF;
    return detail::map(v, [](auto x) { return x & decltype(x)(mask); });
  } else {
    return v;
  }
}

template <ir::op O, dtype D, class T>
pack<T> unary(const pack<T>& a) {
  using ir::op;
  using B = xsimd::batch<T>;
  if constexpr (O == op::neg)
    return wrap<D>(detail::map(a, [](B x) { return detail::negated(x); }));
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
    else  // subnormal results kept, as in f32
      return detail::map(a, [](B x) { return detail::exp_f64(x); });
  } else if constexpr (O == op::log)
    return detail::map(a, [](B x) { return detail::log_any<false>(x); });
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
      return detail::map(a, [](B x) { return B(1) / (B(1) + detail::exp_f64(-x)); });
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
  else if constexpr (O == op::tan)
    return detail::map(a, [](B x) { return xsimd::tan(x); });
  else if constexpr (O == op::asin)
    return detail::map(a, [](B x) { return xsimd::asin(x); });
  else if constexpr (O == op::acos)
    return detail::map(a, [](B x) { return xsimd::acos(x); });
  else if constexpr (O == op::atan)
    return detail::map(a, [](B x) { return xsimd::atan(x); });
  else if constexpr (O == op::sinh)
    return detail::map(a, [](B x) { return xsimd::sinh(x); });
  else if constexpr (O == op::cosh)
    return detail::map(a, [](B x) { return xsimd::cosh(x); });
  else if constexpr (O == op::asinh)
    return detail::map(a, [](B x) { return xsimd::asinh(x); });
  else if constexpr (O == op::acosh)  // NaN below 1 (xsimd's gives -inf for x <= -1)
    return detail::map(a, [](B x) {
      return xsimd::select(x < B(1), B(std::numeric_limits<T>::quiet_NaN()), xsimd::acosh(x));
    });
  else if constexpr (O == op::atanh)
    return detail::map(a, [](B x) { return xsimd::atanh(x); });
  else if constexpr (O == op::exp2) {  // xsimd's f32 form overflows from 127
    if constexpr (std::is_same_v<T, float>)
      return detail::map(a, [](B x) { return detail::exp2_32(x); });
    else
      return detail::map(a, [](B x) { return detail::exp2_f64(x); });
  } else if constexpr (O == op::expm1) {  // e^x itself from 40 (xsimd's overflows early)
    if constexpr (std::is_same_v<T, float>)
      return detail::map(
          a, [](B x) { return xsimd::select(x > B(40), detail::exp32(x), xsimd::expm1(x)); });
    else
      return detail::map(
          a, [](B x) { return xsimd::select(x > B(40), xsimd::exp(x), xsimd::expm1(x)); });
  } else if constexpr (O == op::log2)  // subnormal inputs exactly (xsimd's are far off)
    return detail::map(a, [](B x) { return detail::log_any<true>(x); });
  else if constexpr (O == op::log1p)
    return detail::map(a, [](B x) { return xsimd::log1p(x); });
  else if constexpr (O == op::softplus) {  // max(x, 0) + log1p(e^-|x|): no overflow
    return detail::map(a, [](B x) {
      B e;
      if constexpr (std::is_same_v<T, float>)
        e = detail::exp32(-xsimd::abs(x));  // subnormal results kept
      else
        e = detail::exp_f64(-xsimd::abs(x));
      return xsimd::select(xsimd::isnan(x), x, xsimd::max(x, B(0)) + xsimd::log1p(e));
    });
  } else if constexpr (O == op::erfc) {
    if constexpr (std::is_same_v<T, float>)  // xsimd's f32 erfc is 1e5 ulp off near 9
      return detail::map(a, [](B x) {
        B r = xsimd::select(x < B(0.5f), B(1.f) - xsimd::erf(x), detail::erfc_tail32(x));
        return xsimd::select(xsimd::isnan(x), x, r);
      });
    else {  // f64: the C library's, lane by lane (xsimd's is 3,000 ulp off near 4.6, NaN for huge
            // x)
      auto v = to_array(a);
      for (auto& x : v) x = std::erfc(x);
      return from_array(v);
    }
  } else if constexpr (O == op::bitwise_not)
    return wrap<D>(detail::map(a, [](B x) { return ~x; }));
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
  else if constexpr (O == op::mod || O == op::fmod)
    return wrap<D>(detail::lanewise(a, b, [](T x, T y) { return detail::remainder<O>(x, y); }));
  else if constexpr (O == op::bitwise_and)
    return detail::map(a, b, [](B x, B y) { return x & y; });
  else if constexpr (O == op::bitwise_or)
    return detail::map(a, b, [](B x, B y) { return x | y; });
  else if constexpr (O == op::bitwise_xor)
    return detail::map(a, b, [](B x, B y) { return x ^ y; });
  else if constexpr (O == op::shift_left || O == op::shift_right)
    return wrap<D>(detail::lanewise(a, b, [](T x, T n) { return detail::shift<O, D>(x, n); }));
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

// On bool masks by and, or and not: xsimd's SSE2 float-mask compare reads all-ones lanes as NaN,
// and its AVX-512 mask xor (xsimd 10) gives true for two true lanes.
template <ir::op O>
mask compare(const mask& a, const mask& b) {
  const xsimd::batch_bool<float> both = a.m && b.m, either = a.m || b.m;
  if constexpr (O == ir::op::eq)
    return {both || !either};
  else
    return {either && !both};
}

// Float classification (-> bool).
template <ir::op O, class T>
mask test(const pack<T>& a) {
  using B = xsimd::batch<T>;
  auto fn = [](B x, B) {
    if constexpr (O == ir::op::isnan)
      return xsimd::isnan(x);
    else
      return xsimd::abs(x) == B(std::numeric_limits<T>::infinity());
  };
  return detail::compare(a, a, fn);
}

// clip(x, lo, hi) = min(max(x, lo), hi), with the binary ops' NaN rule.
template <ir::op O, dtype D, class T>
pack<T> ternary(const pack<T>& x, const pack<T>& lo, const pack<T>& hi) {
  static_assert(O == ir::op::clip, "kiln: no CPU primitive for this ternary op");
  return binary<ir::op::min, D>(binary<ir::op::max, D>(x, lo), hi);
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

// Cast with kiln's scalar semantics, lane by lane (rounding to narrow floats included). To f32 or
// f64 from a number that scalar reads as a double (every type but bool), scalar's conversion is
// the double rounded once to the target: written so, the compiler vectorizes it (through
// scalar::to, an int8 weight's dequantization called a conversion function per element).
template <dtype From, dtype To, class In>
compute_t<To> cast(const In& v) {
  auto in = to_array(v);
  std::array<lane_t<To>, lanes> out;
  if constexpr ((To == dtype::f32 || To == dtype::f64) && From != dtype::boolean) {
    for (std::size_t i = 0; i < lanes; ++i)
      out[i] = static_cast<lane_t<To>>(static_cast<double>(in[i]));
  } else {
    for (std::size_t i = 0; i < lanes; ++i) {
      scalar s = is_floating(From) ? scalar{From, static_cast<double>(in[i]), 0}
                                   : scalar{From, 0, static_cast<std::int64_t>(in[i])};
      out[i] = lane_value<To>(s.to(To));
    }
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

}  // namespace kiln::cpu::inline KILN_CPU_ISA
