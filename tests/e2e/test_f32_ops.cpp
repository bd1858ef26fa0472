// Every float op of the IR, end to end on f32, against std:: scalar math at every test size.
#include "../support/e2e.hpp"

using namespace kiln;

#define KILN_UNARY_CASE(NAME, LO, HI, TOL, KILN_EXPR, REF_EXPR)                \
  TEST(F32Ops, NAME) {                                                         \
    constexpr auto f = fn<tensor<f32, dyn>>([](auto x) { return KILN_EXPR; }); \
    static_assert(f.plan.dispatch_count() == 1);                               \
    for (auto n : ref::sizes)                                                  \
      ref::check<float>(                                                       \
          f, [](float x) -> float { return REF_EXPR; }, TOL,                   \
          ref::make_arg<float>({n}, LO, HI, 11));                              \
  }

#define KILN_BINARY_CASE(NAME, LO, HI, TOL, KILN_EXPR, REF_EXPR)                          \
  TEST(F32Ops, NAME) {                                                                    \
    constexpr auto f =                                                                    \
        fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) { return KILN_EXPR; }); \
    static_assert(f.plan.dispatch_count() == 1);                                          \
    for (auto n : ref::sizes)                                                             \
      ref::check<float>(                                                                  \
          f, [](float x, float y) -> float { return REF_EXPR; }, TOL,                     \
          ref::make_arg<float>({n}, LO, HI, 21), ref::make_arg<float>({n}, LO, HI, 22));  \
  }

KILN_BINARY_CASE(Add, -100, 100, ref::arith, x + y, x + y)
KILN_BINARY_CASE(Sub, -100, 100, ref::arith, x - y, x - y)
KILN_BINARY_CASE(Mul, -100, 100, ref::arith, x* y, x* y)
KILN_BINARY_CASE(Div, 0.5, 100, ref::arith, x / y, x / y)
KILN_BINARY_CASE(Min, -100, 100, ref::exact, min(x, y), std::fmin(x, y))
KILN_BINARY_CASE(Max, -100, 100, ref::exact, max(x, y), std::fmax(x, y))
KILN_BINARY_CASE(Pow, 0.1, 4, ref::approx, pow(x, y), std::pow(x, y))
KILN_UNARY_CASE(Neg, -100, 100, ref::exact, -x, -x)
KILN_UNARY_CASE(Abs, -100, 100, ref::exact, abs(x), std::fabs(x))
KILN_UNARY_CASE(Exp, -80, 80, ref::approx, exp(x), std::exp(x))
KILN_UNARY_CASE(Log, 1e-6, 1e6, ref::approx, log(x), std::log(x))
KILN_UNARY_CASE(Sqrt, 0, 1e6, ref::arith, sqrt(x), std::sqrt(x))
KILN_UNARY_CASE(Rsqrt, 1e-3, 1e6, ref::arith, rsqrt(x), 1.f / std::sqrt(x))
KILN_UNARY_CASE(Tanh, -10, 10, ref::approx, tanh(x), std::tanh(x))
KILN_UNARY_CASE(Sigmoid, -30, 30, ref::approx, sigmoid(x), 1.f / (1.f + std::exp(-x)))
KILN_UNARY_CASE(Relu, -100, 100, ref::exact, relu(x), x < 0 ? 0.f : x)
KILN_UNARY_CASE(Erf, -5, 5, ref::approx, erf(x), std::erf(x))
KILN_UNARY_CASE(Sin, -10, 10, ref::approx, sin(x), std::sin(x))
KILN_UNARY_CASE(Cos, -10, 10, ref::approx, cos(x), std::cos(x))
KILN_UNARY_CASE(Floor, -100, 100, ref::exact, floor(x), std::floor(x))
KILN_UNARY_CASE(Ceil, -100, 100, ref::exact, ceil(x), std::ceil(x))
KILN_UNARY_CASE(Round, -100, 100, ref::exact, round(x), std::nearbyint(x))
KILN_UNARY_CASE(RoundHalfToEven, -4, 4, ref::exact, round(floor(x * 4.f) * 0.5f),
                std::nearbyint(std::floor(x * 4.f) * 0.5f))

// Chains: several ops fused into one loop, literals on either side. Gelu's 1 + tanh(z) cancels
// near z = -4 as ErfGelu's 1 + erf does: half an ulp of tanh there is 1e-7 of the result.
KILN_UNARY_CASE(Gelu, -6, 6, ref::cancelling,
                0.5f * x * (1.f + tanh(0.7978845608f * (x + 0.044715f * x * x * x))),
                0.5f * x * (1.f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x))))
KILN_UNARY_CASE(ErfGelu, -6, 6, ref::cancelling, x * 0.5f * (1.f + erf(x * 0.70710678f)),
                x * 0.5f * (1.f + std::erf(x * 0.70710678f)))
KILN_UNARY_CASE(Swish, -20, 20, ref::approx, x* sigmoid(x), x*(1.f / (1.f + std::exp(-x))))
KILN_UNARY_CASE(Softplus, -20, 20, ref::cancelling, log(1.f + exp(x)), std::log(1.f + std::exp(x)))
KILN_BINARY_CASE(LiteralLeftDivide, 0.5, 10, ref::arith, 2.f / x - y, 2.f / x - y)
KILN_BINARY_CASE(Hypot, -10, 10, ref::arith, sqrt(x* x + y * y), std::sqrt(x* x + y * y))

TEST(F32Ops, ReluOfMulAdd) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, dyn>, tensor<f32, dyn>>(
      [](auto x, auto y, auto z) { return relu(x * y + z); });
  static_assert(f.plan.dispatch_count() == 1);
  for (auto n : ref::sizes)
    ref::check<float>(
        f, [](float x, float y, float z) { return std::max(x * y + z, 0.f); }, ref::arith,
        ref::make_arg<float>({n}, -3, 3, 1), ref::make_arg<float>({n}, -3, 3, 2),
        ref::make_arg<float>({n}, -3, 3, 3));
}

// A loop in the lambda and v = f(v): 30 ops traced into one region.
TEST(F32Ops, LoopBuiltChain) {
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) {
    auto v = x;
    for (int i = 0; i < 10; ++i) v = tanh(v * 1.5f + 0.25f);
    return v;
  });
  static_assert(f.plan.dispatch_count() == 1);
  for (auto n : ref::sizes)
    ref::check<float>(
        f,
        [](float x) {
          float v = x;
          for (int i = 0; i < 10; ++i) v = std::tanh(v * 1.5f + 0.25f);
          return v;
        },
        ref::chained, ref::make_arg<float>({n}, -3, 3, 5));
}

// Special values: NaN propagates through min/max/relu, infinities through exp/log.
TEST(F32Ops, SpecialValues) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) {
    return std::tuple{min(x, y), max(x, y), relu(x), exp(x), log(x)};
  });
  std::vector<float> x = {NAN, 1.f, -INFINITY, INFINITY, 0.f, -0.f, -1.f};
  std::vector<float> y = {1.f, NAN, 2.f, 3.f, -0.f, 0.f, NAN};
  std::vector<float> mn(7), mx(7), rl(7), ex(7), lg(7);
  f(x, y, into(mn, mx, rl, ex, lg));
  for (int i = 0; i < 7; ++i) {
    bool any_nan = std::isnan(x[i]) || std::isnan(y[i]);
    EXPECT_EQ(std::isnan(mn[i]), any_nan) << i;
    EXPECT_EQ(std::isnan(mx[i]), any_nan) << i;
    if (!any_nan) {
      EXPECT_EQ(mn[i], std::fmin(x[i], y[i])) << i;
      EXPECT_EQ(mx[i], std::fmax(x[i], y[i])) << i;
    }
    EXPECT_EQ(std::isnan(rl[i]), std::isnan(x[i])) << i;
    if (!std::isnan(x[i])) {
      EXPECT_EQ(rl[i], x[i] < 0 ? 0.f : x[i]) << i;
    }
  }
  EXPECT_EQ(ex[2], 0.f);
  EXPECT_EQ(ex[3], INFINITY);
  EXPECT_EQ(lg[4], -INFINITY);
  EXPECT_TRUE(std::isnan(lg[6]));
}
