// IEEE special values end to end (run on Vulkan, and again on the CPU by ctest): comparisons with
// NaN, ±0 and ±inf; division by a zero the driver could fold; pow's edges as C defines them; the
// sign of zero through floor/ceil/round; exp, log and erf at the ends of their ranges.
#include <cfloat>
#include <limits>

#include "../support/e2e.hpp"
#include "../support/subnormals.hpp"

using namespace kiln;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float qnan = std::numeric_limits<float>::quiet_NaN();
const std::vector<float> specials = {qnan, -inf, -3.f, -2.5f, -2.f, -1.f, -0.5f, -0.f,
                                     0.f,  0.5f, 1.f,  2.f,   2.5f, 3.f,  inf};

// Same value, NaN equal to NaN, and the sign of zero compared.
bool same(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

// Every pair (x, y) of the specials, as two flat vectors.
std::pair<std::vector<float>, std::vector<float>> pairs() {
  std::vector<float> x, y;
  for (float a : specials)
    for (float b : specials) {
      x.push_back(a);
      y.push_back(b);
    }
  return {x, y};
}

}  // namespace

TEST(Ieee, ComparisonsWithSpecialValues) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) {
    return std::tuple{x == y, x != y, x<y, x <= y, x> y, x >= y, x != x};
  });
  auto [x, y] = pairs();
  auto n = static_cast<std::int64_t>(x.size());
  std::vector<ref::buffer<bool>> out;
  for (int k = 0; k < 7; ++k) out.emplace_back(static_cast<std::size_t>(n));
  auto v = [&](int k) { return ref::view_of(out[k], {n}); };
  f(x, y, into(v(0), v(1), v(2), v(3), v(4), v(5), v(6)));
  for (std::int64_t i = 0; i < n; ++i) {
    float a = x[i], b = y[i];
    bool want[] = {a == b, a != b, a<b, a <= b, a> b, a >= b, a != a};
    for (int k = 0; k < 7; ++k)
      ASSERT_EQ(out[k][i], want[k]) << "comparison " << k << " of " << a << " and " << b;
  }
}

TEST(Ieee, ComparisonsF64WithSpecialValues) {
  constexpr auto f = fn<tensor<f64, dyn>, tensor<f64, dyn>>([](auto x, auto y) {
    return std::tuple{x == y, x != y, x < y, x >= y};
  });
  auto [xf, yf] = pairs();
  std::vector<double> x(xf.begin(), xf.end()), y(yf.begin(), yf.end());
  auto n = static_cast<std::int64_t>(x.size());
  std::vector<ref::buffer<bool>> out;
  for (int k = 0; k < 4; ++k) out.emplace_back(static_cast<std::size_t>(n));
  auto v = [&](int k) { return ref::view_of(out[k], {n}); };
  f(x, y, into(v(0), v(1), v(2), v(3)));
  for (std::int64_t i = 0; i < n; ++i) {
    bool want[] = {x[i] == y[i], x[i] != y[i], x[i] < y[i], x[i] >= y[i]};
    for (int k = 0; k < 4; ++k)
      ASSERT_EQ(out[k][i], want[k]) << "comparison " << k << " of " << x[i] << " and " << y[i];
  }
}

TEST(Ieee, BoolEqualityAndXor) {
  // ONNX's Xor is a != b on bools; Equal on bools is a == b.
  constexpr auto f = fn<tensor<bool, dyn>, tensor<bool, dyn>>([](auto a, auto b) {
    return std::tuple{a == b, a != b, (a != b) == !(a == b)};
  });
  std::vector<bool> as = {false, false, true, true}, bs = {false, true, false, true};
  ref::buffer<bool> a(as), b(bs), eq(4), ne(4), agree(4);
  f(ref::view_of(a, {4}), ref::view_of(b, {4}),
    into(ref::view_of(eq, {4}), ref::view_of(ne, {4}), ref::view_of(agree, {4})));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(eq[i], as[i] == bs[i]) << i;
    EXPECT_EQ(ne[i], as[i] != bs[i]) << i;
    EXPECT_TRUE(agree[i]) << i;
  }
}

TEST(Ieee, DivisionByAZeroTheCompilerCanSee) {
  // x / float(x < x) divides by a zero a driver can fold (x < x is always false); 0 / 0 and
  // log(x) * 0 must stay NaN where IEEE says so.
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) {
    return std::tuple{x / cast<f32>(x < x), 0.f / select(x < x, x, 0.f), log(x) * 0.f, x * 0.f,
                      x + -0.f};
  });
  auto n = static_cast<std::int64_t>(specials.size());
  std::vector<std::vector<float>> out(5, std::vector<float>(n));
  f(specials, into(out[0], out[1], out[2], out[3], out[4]));
  for (std::int64_t i = 0; i < n; ++i) {
    float x = specials[i];
    volatile float zero = 0.f;  // keeps the host compiler honest too
    double want[] = {x / zero, 0.f / zero, std::log(x) * zero, x * zero, x + -zero};
    for (int k = 0; k < 5; ++k)
      EXPECT_TRUE(same(out[k][i], want[k]))
          << "expression " << k << " at x = " << x << ": " << out[k][i] << ", expected " << want[k];
  }
}

TEST(Ieee, QuotientsByPowersOfTwoAreProductsWithTheQuotientsBits) {
  // x / 8 and x / -2^-4 become products by 2^-3 and -2^4 (the same real number, rounded once);
  // x / 3 and x / 2^-127 (whose reciprocal is no normal f32) stay quotients.
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) {
    return std::tuple{x / 8.f, x / -0.0625f, x / 3.f, x / 0x1p-127f};
  });
  int quotients = 0, products = 0;
  for (const auto& n : f.plan.thaw().graph.nodes) {
    quotients += n.kind == ir::op::div;
    products += n.kind == ir::op::mul;
  }
  EXPECT_EQ(quotients, 2);
  EXPECT_EQ(products, 2);
  std::vector<float> x = specials;
  for (float v : {0x1p-149f, -0x1.8p-149f, 0x1.234568p-130f, 0x1p-126f, 0x1.fffffep127f,
                  -0x1.fffffep127f, 12345.678f, 0x1.000002p-120f, 3e-39f, -7e-45f})
    x.push_back(v);
  auto n = static_cast<std::int64_t>(x.size());
  std::vector<std::vector<float>> out(4, std::vector<float>(n));
  f(x, into(out[0], out[1], out[2], out[3]));
  // A flushing device may read a subnormal operand (x, or the divisor 2^-127) as itself or as ±0
  // (README), and give ±0 for a subnormal result.
  const bool flushes = ref::device_flushes_subnormals();
  const float divisors[] = {8.f, -0.0625f, 3.f, 0x1p-127f};
  for (std::int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 4; ++k) {
      bool ok = same(out[k][i], x[i] / divisors[k]);
      if (flushes)
        for (float a : {x[i], ref::flushed(x[i])})
          for (float d : {divisors[k], ref::flushed(divisors[k])})
            ok = ok || same(out[k][i], a / d) || ref::flushed_result(out[k][i], a / d);
      EXPECT_TRUE(ok) << "quotient " << k << " at x = " << x[i] << ": " << out[k][i]
                      << ", expected " << x[i] / divisors[k];
    }
  }
}

TEST(Ieee, PowFollowsC) {
  constexpr auto f =
      fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) { return pow(x, y); });
  auto [x, y] = pairs();
  std::vector<float> out(x.size());
  f(x, y, into(out));
  for (std::size_t i = 0; i < x.size(); ++i) {
    double want = std::pow(static_cast<double>(x[i]), static_cast<double>(y[i]));
    want = static_cast<float>(want);
    if (std::isnan(want) || std::isinf(want) || want == 0)
      EXPECT_TRUE(same(out[i], want))
          << "pow(" << x[i] << ", " << y[i] << ") = " << out[i] << ", expected " << want;
    else
      EXPECT_NEAR(out[i], want, 2e-6 * std::fabs(want)) << "pow(" << x[i] << ", " << y[i] << ")";
  }
}

TEST(Ieee, RoundingKeepsTheSignOfZero) {
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) {
    return std::tuple{floor(x), ceil(x), round(x)};
  });
  std::vector<float> x = {-0.f,  0.f,  -0.5f, 0.5f, -0.3f, 0.3f,
                          -1.5f, 2.5f, -inf,  inf,  qnan,  -1e30f};
  std::vector<float> fl(x.size()), ce(x.size()), ro(x.size());
  f(x, into(fl, ce, ro));
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(same(fl[i], std::floor(x[i]))) << "floor(" << x[i] << ") = " << fl[i];
    EXPECT_TRUE(same(ce[i], std::ceil(x[i]))) << "ceil(" << x[i] << ") = " << ce[i];
    EXPECT_TRUE(same(ro[i], std::nearbyint(x[i]))) << "round(" << x[i] << ") = " << ro[i];
  }
}

TEST(Ieee, ExpAtTheEndsOfItsRange) {
  // Finite results up to 88.7228 (xsimd's exp gave inf from 88.3763) and subnormal results down
  // to -103.97 (it gave 0 below -87.34). Bound: 2 ulp of a normal result; a subnormal result
  // within one subnormal step (2^-149) of the exact value.
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) { return exp(x); });
  std::vector<float> x;
  for (float v = 88.3f; v < 88.7228f; v += 0.001f) x.push_back(v);
  for (float v = -103.9f; v < -87.3f; v += 0.01f) x.push_back(v);
  x.insert(x.end(), {-inf, inf, qnan, 0.f, -0.f, 88.72283f, 88.72284f, -104.f, -200.f});
  std::vector<float> out(x.size());
  f(x, into(out));
  const bool flush = ref::device_flushes_subnormals();  // subnormal results may be ±0 there
  for (std::size_t i = 0; i < x.size(); ++i) {
    long double want = std::exp(static_cast<long double>(x[i]));
    auto wf = static_cast<float>(want);
    if (std::isnan(wf) || std::isinf(wf) || wf == 0) {
      EXPECT_TRUE(same(out[i], wf)) << "exp(" << x[i] << ") = " << out[i];
    } else if (std::fabs(wf) < FLT_MIN) {
      if (flush && ref::flushed_result(out[i], want)) continue;
      EXPECT_LE(std::fabs(out[i] - want), std::ldexp(1.0L, -149)) << "exp(" << x[i] << ")";
    } else {
      float ulp = std::nextafter(wf, inf) - wf;
      EXPECT_LE(std::fabs(out[i] - want), 2.0L * ulp) << "exp(" << x[i] << ") = " << out[i];
    }
  }
}

TEST(Ieee, LogOfSubnormalsAndEdges) {
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) { return log(x); });
  std::vector<float> x = {1.4e-45f, 2.8e-45f, 1e-40f, 1.17e-38f, FLT_MIN, 0.f, -0.f,
                          -1.f,     -1e-40f,  inf,    -inf,      qnan,    1.f, 2.f};
  std::vector<float> out(x.size());
  f(x, into(out));
  for (std::size_t i = 0; i < x.size(); ++i) {
    auto want = static_cast<float>(std::log(static_cast<long double>(x[i])));
    if (std::isnan(want) || std::isinf(want) || want == 0)
      EXPECT_TRUE(same(out[i], want)) << "log(" << x[i] << ") = " << out[i];
    else
      EXPECT_NEAR(out[i], want, 4e-7 * std::fabs(want)) << "log(" << x[i] << ")";
  }
}

TEST(Ieee, F64AtTheEnds) {
  // erf of huge values is 1 (xsimd's f64 erf gave NaN); log of the smallest subnormal is -744.44.
  // (f64 log and erf run on the CPU: GLSL.std.450 has no 64-bit forms.)
  constexpr auto f = fn<tensor<f64, dyn>>([](auto x) { return std::tuple{erf(x), log(x)}; });
  std::vector<double> x = {1e300, -1e300, 6.0, 27.0, 4.9e-324, 1e-310, -1e-310, 1.0, 0.5};
  std::vector<double> e(x.size()), l(x.size());
  f(x, into(e, l));
  for (std::size_t i = 0; i < x.size(); ++i) {
    // Bounds: xsimd's f64 erf within 16 ulp, log within 4 ulp.
    EXPECT_NEAR(e[i], std::erf(x[i]), 16 * DBL_EPSILON * std::fabs(std::erf(x[i])))
        << "erf(" << x[i] << ")";
    double want = std::log(x[i]);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(l[i])) << "log(" << x[i] << ") = " << l[i];
    else
      EXPECT_NEAR(l[i], want, 4 * DBL_EPSILON * std::fabs(want)) << "log(" << x[i] << ")";
  }
}

TEST(Ieee, IntegerMultiplyWraps) {
  constexpr auto f = fn<tensor<i32, dyn>, tensor<i64, dyn>>([](auto a, auto b) {
    return std::tuple{a * a, b * b, a * -1};
  });
  std::vector<i32> a = {std::numeric_limits<i32>::max(), std::numeric_limits<i32>::min(), 65536,
                        -46341, 3};
  std::vector<i64> b = {std::numeric_limits<i64>::max(), std::numeric_limits<i64>::min(),
                        std::int64_t{1} << 32, -3037000500, 7};
  std::vector<i32> aa(a.size()), an(a.size());
  std::vector<i64> bb(b.size());
  f(a, b, into(aa, bb, an));
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto ua = static_cast<std::uint32_t>(a[i]);
    auto ub = static_cast<std::uint64_t>(b[i]);
    EXPECT_EQ(aa[i], static_cast<i32>(ua * ua)) << a[i];
    EXPECT_EQ(bb[i], static_cast<i64>(ub * ub)) << b[i];
    EXPECT_EQ(an[i], static_cast<i32>(0u - ua)) << a[i];
  }
}

TEST(Ieee, NarrowFloatLiteralsKeepF32Precision) {
  // Narrow floats compute in f32: 0.7978845608f stays that f32 value beside a bf16 tensor
  // (rounded to bf16 it is 0.796875, and 6% of a bf16 GELU's results were then more than one
  // bf16 step off). Reference: the same formula in f32, rounded to bf16 once, at the store.
  constexpr auto gelu = fn<tensor<bf16, dyn>>(
      [](auto y) { return 0.5f * y * (1.f + tanh(0.7978845608f * (y + 0.044715f * y * y * y))); });
  const std::int64_t n = 24576;
  auto x = ref::random_data<bf16>(n, -4, 4, 11);
  std::vector<bf16> out(n);
  gelu(x, into(out));
  int off = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    float y = static_cast<float>(x[i]);
    float want = 0.5f * y * (1.f + std::tanh(0.7978845608f * (y + 0.044715f * y * y * y)));
    double rounded = ref::round_to<bf16>(want);
    // One bf16 step: f32 rounding of tanh may put the value on the other side of a bf16 midpoint.
    double step = std::ldexp(1.0, std::ilogb(rounded == 0 ? 1e-30 : rounded) - 7);
    off += std::fabs(static_cast<float>(out[i]) - rounded) > step;
  }
  EXPECT_EQ(off, 0) << "results more than one bf16 step from the f32 formula";
}

TEST(Ieee, Fp8E5M2SaturatesInfinity) {
  // ONNX's Cast with saturate=1: ±inf and out-of-range values become ±57344 (0x7B / 0xFB).
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) { return cast<f8e5m2>(x); });
  std::vector<float> x = {inf, -inf, 1e6f, -1e6f, 57344.f, qnan};
  std::vector<f8e5m2> out(x.size());
  f(x, into(out));
  EXPECT_EQ(out[0].bits, 0x7B);
  EXPECT_EQ(out[1].bits, 0xFB);
  EXPECT_EQ(out[2].bits, 0x7B);
  EXPECT_EQ(out[3].bits, 0xFB);
  EXPECT_EQ(out[4].bits, 0x7B);
  EXPECT_TRUE(std::isnan(static_cast<float>(out[5])));
}

TEST(Ieee, HalfAndBfloatConversionsAreExact) {
  // Every f16 and bf16 pattern to f32 and back, and f32 values near every rounding boundary to
  // both: the CPU's vector conversions (F16C/AVX2 in the native build) against the tests' own
  // rounding (ties to even, NaN stays NaN, beyond the range infinity).
  constexpr auto widen = fn<tensor<f16, dyn>, tensor<bf16, dyn>>([](auto h, auto b) {
    return std::tuple{cast<f32>(h), cast<f32>(b)};
  });
  constexpr auto round = fn<tensor<f32, dyn>>([](auto x) {
    return std::tuple{cast<f16>(x), cast<bf16>(x)};
  });
  const std::int64_t n = 65536;
  std::vector<f16> h(n);
  std::vector<bf16> b(n);
  for (std::int64_t i = 0; i < n; ++i) {
    h[i] = f16::from_bits(static_cast<std::uint16_t>(i));
    b[i] = bf16::from_bits(static_cast<std::uint16_t>(i));
  }
  std::vector<float> hf(n), bfl(n);
  widen(h, b, into(hf, bfl));
  for (std::int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same(hf[i], ref::decode<f16>(static_cast<std::uint32_t>(i)))) << "f16 bits " << i;
    ASSERT_TRUE(same(bfl[i], ref::decode<bf16>(static_cast<std::uint32_t>(i))))
        << "bf16 bits " << i;
  }
  // Values at and around midpoints: each pattern's value, and a little above and below.
  std::vector<float> x;
  for (float v : hf)
    if (std::isfinite(v)) x.insert(x.end(), {v, std::nextafter(v, inf), std::nextafter(v, -inf)});
  for (std::int64_t i = 0; i < n; i += 7) {
    float v = bfl[i];
    if (std::isfinite(v)) x.insert(x.end(), {v * 1.00390625f, v * 0.998046875f});
  }
  x.insert(x.end(), {inf, -inf, qnan, -qnan, 65520.f, -65520.f, 3.4e38f, 1e-45f, -0.f});
  std::vector<f16> xh(x.size());
  std::vector<bf16> xb(x.size());
  round(x, into(xh, xb));
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(same(static_cast<float>(xh[i]), ref::round_to<f16>(x[i]))) << "f16 of " << x[i];
    ASSERT_TRUE(same(static_cast<float>(xb[i]), ref::round_to<bf16>(x[i]))) << "bf16 of " << x[i];
    if (std::isnan(x[i])) {
      EXPECT_EQ(xh[i].bits & 0x7FFF, 0x7E00) << "the quiet NaN of f16";
      EXPECT_EQ(xb[i].bits & 0x7FFF, 0x7FC0) << "the quiet NaN of bf16";
    }
  }
}
