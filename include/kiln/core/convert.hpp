// Scalar conversions between dtypes, with kiln's defined semantics for every pair.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#include "kiln/core/dtype.hpp"

namespace kiln {

// Wraps an integer into dtype t modulo 2^bits (two's complement), as C++ does since C++20.
constexpr std::int64_t wrap_integer(dtype t, std::int64_t v) {
  switch (t) {
    case dtype::i8:
      return static_cast<std::int8_t>(v);
    case dtype::i16:
      return static_cast<std::int16_t>(v);
    case dtype::i32:
      return static_cast<std::int32_t>(v);
    case dtype::u8:
      return static_cast<std::uint8_t>(v);
    case dtype::u16:
      return static_cast<std::uint16_t>(v);
    case dtype::u32:
      return static_cast<std::uint32_t>(v);
    case dtype::boolean:
      return v != 0;
    default:
      return v;
  }
}

constexpr std::int64_t integer_min(dtype t) {
  switch (t) {
    case dtype::i8:
      return -128;
    case dtype::i16:
      return -32768;
    case dtype::i32:
      return std::numeric_limits<std::int32_t>::min();
    case dtype::i64:
      return std::numeric_limits<std::int64_t>::min();
    default:
      return 0;
  }
}

constexpr std::int64_t integer_max(dtype t) {
  switch (t) {
    case dtype::i8:
      return 127;
    case dtype::i16:
      return 32767;
    case dtype::i32:
      return std::numeric_limits<std::int32_t>::max();
    case dtype::i64:
      return std::numeric_limits<std::int64_t>::max();
    case dtype::u8:
      return 255;
    case dtype::u16:
      return 65535;
    case dtype::u32:
      return std::numeric_limits<std::uint32_t>::max();
    case dtype::u64:  // the largest u64 an i64 holds: where the whole range matters, u64_max
      return std::numeric_limits<std::int64_t>::max();
    default:
      return 1;
  }
}

// The largest value of integer dtype t (u64's too, which an int64 cannot hold).
constexpr std::uint64_t unsigned_max(dtype t) {
  return t == dtype::u64 ? std::numeric_limits<std::uint64_t>::max()
                         : static_cast<std::uint64_t>(integer_max(t));
}

// The smallest double above every value of integer dtype t, exact: 2^63 for i64, 2^64 for u64,
// the largest value + 1 for the others (a float at or above it saturates).
constexpr double integer_end(dtype t) {
  return t == dtype::i64   ? 9223372036854775808.0
         : t == dtype::u64 ? 18446744073709551616.0
                           : static_cast<double>(integer_max(t)) + 1.0;
}

// Float to integer: truncates toward zero, saturates at the type's range, NaN becomes 0; a u64
// is its bits. (C++ leaves out-of-range conversions undefined; kiln defines them so every back
// end agrees.)
constexpr std::int64_t float_to_integer(dtype t, double v) {
  if (v != v) return 0;
  if (t == dtype::boolean) return v != 0;
  if (v <= static_cast<double>(integer_min(t))) return integer_min(t);
  if (v >= integer_end(t)) return static_cast<std::int64_t>(unsigned_max(t));
  return t == dtype::u64 ? static_cast<std::int64_t>(static_cast<std::uint64_t>(v))
                         : static_cast<std::int64_t>(v);
}

// Rounds a double to the values representable in floating dtype t (f32 or narrower via f32).
constexpr double round_to_float(dtype t, double v) {
  float f = static_cast<float>(v);
  switch (t) {
    case dtype::f64:
      return v;
    case dtype::f32:
      return f;
    case dtype::f16:
      return static_cast<float>(float16(f));
    case dtype::bf16:
      return static_cast<float>(bfloat16(f));
    case dtype::f8e4m3:
      return static_cast<float>(float8_e4m3(f));
    case dtype::f8e5m2:
      return static_cast<float>(float8_e5m2(f));
    default:
      return v;
  }
}

// A scalar of any dtype: floats keep a double, integers and bool an int64 (u32 fits; a u64 is
// its bits, so above 2^63 it reads negative: compare and convert it as unsigned).
struct scalar {
  dtype type = dtype::f32;
  double f = 0;
  std::int64_t i = 0;

  static constexpr scalar of_float(dtype t, double v) {
    if (!is_floating(t)) return {t, 0, float_to_integer(t, v)};
    return {t, round_to_float(t, v), 0};
  }
  static constexpr scalar of_integer(dtype t, std::int64_t v) {
    if (is_floating(t)) return {t, round_to_float(t, static_cast<double>(v)), 0};
    return {t, 0, wrap_integer(t, v)};
  }
  // A float literal or a folded result beside values of floating dtype t, as arithmetic holds it:
  // the storage-only floats compute in f32, so their literals keep f32 precision and are rounded
  // to t only where a result is stored (or by an explicit cast).
  static constexpr scalar computed(dtype t, double v) {
    if (!is_floating(t)) return of_float(t, v);
    return {t, round_to_float(compute_dtype(t), v), 0};
  }
  constexpr double as_double() const {
    if (type == dtype::u64) return static_cast<double>(static_cast<std::uint64_t>(i));
    return is_floating(type) ? f : static_cast<double>(i);
  }
  // Converts to dtype t with kiln's cast semantics.
  constexpr scalar to(dtype t) const {
    if (type == dtype::boolean) return of_integer(t, i);
    if (t == dtype::boolean) return {t, 0, is_floating(type) ? (f != 0 || f != f) : i != 0};
    if (type == dtype::u64 && is_floating(t)) return of_float(t, as_double());
    return is_floating(type) ? of_float(t, f) : of_integer(t, i);
  }
  // Identity of the stored value, bit for bit (so -0.0 and 0.0 differ, NaN equals itself).
  friend constexpr bool same_bits(const scalar& a, const scalar& b) {
    return a.type == b.type &&
           std::bit_cast<std::uint64_t>(a.f) == std::bit_cast<std::uint64_t>(b.f) && a.i == b.i;
  }
};

// 1 / v where that is exact in dtype t and x / v is x * (1 / v) for every x, else 0: t f32 or f64
// and v = +-2^e with 2^-e a normal number of t. Quotient and product are then the same real
// number, rounded once, so they have the same bits; the product is cheaper everywhere, and on a
// GPU that divides f32 in f64 (spirv::target::divides_in_f64) much cheaper.
constexpr double exact_reciprocal(dtype t, double v) {
  if (t != dtype::f32 && t != dtype::f64) return 0;
  const int limit = t == dtype::f32 ? 126 : 1022;
  double m = v < 0 ? -v : v;
  if (!(m > 0) || m > 1.7976931348623157e308) return 0;  // zero, NaN or infinite
  int e = 0;
  while (m >= 2 && e <= limit) m /= 2, ++e;
  while (m < 1 && e >= -limit) m *= 2, --e;
  if (m != 1 || e > limit || e < -limit) return 0;
  return 1 / v;  // a power of two within f64's normal range: exact
}

}  // namespace kiln
