// Storage-only floating types (f16, bf16, fp8 e4m3fn, fp8 e5m2) with exact, round-to-nearest-even
// conversions to and from float. Arithmetic on them happens in f32.
#pragma once

#include <bit>
#include <cstdint>

namespace kiln {

// A binary floating format with one sign bit, exp exponent bits and man mantissa bits, as values
// (the SPIR-V codec emits its decode and encode from the same layout). has_inf: an all-ones
// exponent with zero mantissa is infinity (IEEE-like); otherwise the format is "fn" (finite +
// NaN only): only the all-ones pattern is NaN. saturate: values beyond the largest finite number,
// infinities included, become that number (ONNX's saturate=1 for fp8), else infinity.
struct minifloat_layout {
  int exp, man;
  bool has_inf, saturate;
  constexpr std::uint32_t bias() const { return (1u << (exp - 1)) - 1; }
  constexpr std::uint32_t exp_mask() const { return (1u << exp) - 1; }
  constexpr std::uint32_t sign_bit() const { return 1u << (exp + man); }
  constexpr std::uint32_t inf_bits() const { return exp_mask() << man; }
  constexpr std::uint32_t nan_bits() const {
    return has_inf ? inf_bits() | (1u << (man - 1)) : (exp_mask() << man) | ((1u << man) - 1);
  }
  constexpr std::uint32_t max_finite_bits() const {
    return has_inf ? inf_bits() - 1 : nan_bits() - 1;
  }
};

namespace detail {

// Exact conversions between float and the format of layout L, stored in Bits.
template <minifloat_layout L, class Bits>
struct minifloat_format {
  static constexpr int Exp = L.exp, Man = L.man;
  static constexpr bool HasInf = L.has_inf, Saturate = L.saturate;
  static constexpr int bias = static_cast<int>(L.bias());
  static constexpr std::uint32_t exp_mask = L.exp_mask();
  static constexpr std::uint32_t sign_bit = L.sign_bit();
  static constexpr std::uint32_t inf_bits = L.inf_bits();
  static constexpr std::uint32_t nan_bits = L.nan_bits();
  static constexpr std::uint32_t max_finite_bits = L.max_finite_bits();

  static constexpr float decode(Bits b) {
    std::uint32_t bits = b;
    std::uint32_t sign = (bits & sign_bit) ? 0x80000000u : 0u;
    std::uint32_t e = (bits >> Man) & exp_mask;
    std::uint32_t m = bits & ((1u << Man) - 1);
    if (HasInf && e == exp_mask)
      return std::bit_cast<float>(sign | (m ? 0x7FC00000u : 0x7F800000u));
    if (!HasInf && (bits & ~sign_bit) == nan_bits) return std::bit_cast<float>(sign | 0x7FC00000u);
    if (e == 0) {
      if (m == 0) return std::bit_cast<float>(sign);
      if (bias == 127) return std::bit_cast<float>(sign | (m << (23 - Man)));  // float subnormal
      int exponent = 1 - bias;  // normalize the subnormal into a float normal
      while ((m & (1u << Man)) == 0) {
        m <<= 1;
        --exponent;
      }
      m &= (1u << Man) - 1;
      return std::bit_cast<float>(sign | std::uint32_t(exponent + 127) << 23 | m << (23 - Man));
    }
    return std::bit_cast<float>(sign | std::uint32_t(int(e) - bias + 127) << 23 | m << (23 - Man));
  }

  static constexpr Bits encode(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    std::uint32_t sign = (u & 0x80000000u) ? sign_bit : 0u;
    u &= 0x7FFFFFFFu;
    if (u > 0x7F800000u) return Bits(sign | nan_bits);
    if (u == 0x7F800000u)  // ONNX's saturate: infinity too becomes the largest finite value
      return Bits(sign | (Saturate ? max_finite_bits : (HasInf ? inf_bits : nan_bits)));
    std::uint32_t fe = u >> 23;
    std::uint64_t mant = (u & 0x7FFFFFu) | (fe ? 0x800000u : 0u);  // value = mant * 2^(e - 23)
    int e = fe ? int(fe) - 127 : -126;
    constexpr int emin = 1 - bias;
    int shift = (23 - Man) + (e < emin ? emin - e : 0);
    std::uint64_t q = 0;
    if (shift < 40) {
      q = mant >> shift;
      std::uint64_t rem = mant & ((std::uint64_t(1) << shift) - 1);
      std::uint64_t half = std::uint64_t(1) << (shift - 1);
      if (rem > half || (rem == half && (q & 1))) ++q;
    }
    // Subnormal results are q itself; normal ones put the implicit bit into the exponent field,
    // so a carry out of the mantissa moves to the next binade by plain addition.
    std::uint64_t enc = (e < emin ? 0 : std::uint64_t(e + bias - 1) << Man) + q;
    if (enc > max_finite_bits) enc = Saturate ? max_finite_bits : (HasInf ? inf_bits : nan_bits);
    return Bits(sign | std::uint32_t(enc));
  }
};

}  // namespace detail

// Declares a storage type: a wrapper over its bits with explicit conversions from and to float.
#define KILN_DEFINE_MINIFLOAT(NAME, BITS, EXP, MAN, HAS_INF, SATURATE)            \
  struct NAME {                                                                   \
    static constexpr minifloat_layout layout = {EXP, MAN, HAS_INF, SATURATE};     \
    using format = detail::minifloat_format<layout, BITS>;                        \
    BITS bits = 0;                                                                \
    NAME() = default;                                                             \
    constexpr explicit NAME(float f) : bits(format::encode(f)) {}                 \
    static constexpr NAME from_bits(BITS b) {                                     \
      NAME r;                                                                     \
      r.bits = b;                                                                 \
      return r;                                                                   \
    }                                                                             \
    constexpr explicit operator float() const { return format::decode(bits); }    \
    friend constexpr bool operator==(NAME a, NAME b) { return a.bits == b.bits; } \
  };

KILN_DEFINE_MINIFLOAT(float16, std::uint16_t, 5, 10, true, false)
KILN_DEFINE_MINIFLOAT(bfloat16, std::uint16_t, 8, 7, true, false)
KILN_DEFINE_MINIFLOAT(float8_e4m3, std::uint8_t, 4, 3, false, true)
KILN_DEFINE_MINIFLOAT(float8_e5m2, std::uint8_t, 5, 2, true, true)

#undef KILN_DEFINE_MINIFLOAT

}  // namespace kiln
