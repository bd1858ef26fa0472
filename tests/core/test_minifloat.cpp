// The narrow float types against the tests' brute-force reference: every bit pattern decodes to
// the textbook value and re-encodes to itself; rounding matches nearest-even over all values.
#include "../support/reference.hpp"

#include <kiln/core/minifloat.hpp>

// inf_saturates_to: the pattern +inf encodes to where the format saturates (ONNX's fp8 e5m2: the
// largest finite value, 0x7B), or 0 where infinity is kept.
template <class T, class Bits>
void check_all_patterns(std::uint32_t inf_saturates_to = 0) {
  constexpr int total = ref::format_bits<T>::total;
  for (std::uint32_t b = 0; b < (1u << total); ++b) {
    T v = T::from_bits(static_cast<Bits>(b));
    double want = ref::decode<T>(b);
    float got = static_cast<float>(v);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want) << "bits " << b;
    constexpr std::uint32_t sign = 1u << (total - 1);
    std::uint32_t back = std::isinf(want) && inf_saturates_to ? (b & sign) | inf_saturates_to : b;
    ASSERT_EQ(T(got).bits, static_cast<Bits>(back)) << "round trip of bits " << b;
  }
}

template <class T>
void check_rounding(double range, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-range, range);
  for (int i = 0; i < 200000; ++i) {
    float x = static_cast<float>(d(gen));
    if (i % 4 == 1) x = std::ldexp(x, -20);  // subnormal territory
    double want = ref::round_to<T>(x);
    ASSERT_EQ(static_cast<double>(static_cast<float>(T(x))), want) << "x = " << x;
  }
  // Exact midpoints between neighbours go to the even pattern.
  const auto& t = ref::positive_values<T>();
  for (std::size_t i = 0; i + 1 < t.size(); i += 1 + t.size() / 3000) {
    float mid = static_cast<float>((t[i].first + t[i + 1].first) / 2);
    if (mid != (t[i].first + t[i + 1].first) / 2) continue;  // not representable in f32
    ASSERT_EQ(static_cast<double>(static_cast<float>(T(mid))), ref::round_to<T>(mid)) << mid;
  }
}

TEST(Minifloat, F16AllPatterns) { check_all_patterns<kiln::float16, std::uint16_t>(); }
TEST(Minifloat, BF16AllPatterns) { check_all_patterns<kiln::bfloat16, std::uint16_t>(); }
TEST(Minifloat, E4M3AllPatterns) { check_all_patterns<kiln::float8_e4m3, std::uint8_t>(); }
TEST(Minifloat, E5M2AllPatterns) { check_all_patterns<kiln::float8_e5m2, std::uint8_t>(0x7B); }

TEST(Minifloat, F16Rounding) { check_rounding<kiln::float16>(70000, 1); }
TEST(Minifloat, BF16Rounding) { check_rounding<kiln::bfloat16>(3e38, 2); }
TEST(Minifloat, E4M3Rounding) { check_rounding<kiln::float8_e4m3>(500, 3); }
TEST(Minifloat, E5M2Rounding) { check_rounding<kiln::float8_e5m2>(70000, 4); }

TEST(Minifloat, SpecialValuesByHand) {
  using namespace kiln;
  EXPECT_EQ(float16(1.0f).bits, 0x3C00);
  EXPECT_EQ(float16(65504.f).bits, 0x7BFF);
  EXPECT_EQ(float16(65520.f).bits, 0x7C00);        // halfway past the top rounds to infinity
  EXPECT_EQ(float16(5.9604645e-8f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(bfloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(float8_e4m3(448.f).bits, 0x7E);
  EXPECT_EQ(float8_e4m3(1e6f).bits, 0x7E);      // saturates
  EXPECT_EQ(float8_e4m3(INFINITY).bits, 0x7E);  // no infinity in e4m3fn: saturates
  EXPECT_EQ(float8_e4m3(NAN).bits & 0x7F, 0x7F);
  EXPECT_EQ(float8_e5m2(57344.f).bits, 0x7B);
  EXPECT_EQ(float8_e5m2(1e6f).bits, 0x7B);       // saturates
  EXPECT_EQ(float8_e5m2(-INFINITY).bits, 0xFB);  // ONNX saturate: -inf becomes -57344
  EXPECT_EQ(float8_e5m2(INFINITY).bits, 0x7B);
  EXPECT_TRUE(std::isinf(static_cast<float>(float8_e5m2::from_bits(0xFC))));  // still decodes
  static_assert(static_cast<float>(float16(0.5f)) == 0.5f, "conversions are constexpr");
}
