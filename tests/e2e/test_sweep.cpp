// Unary f32 functions over their whole range: every 4093rd bit pattern of all
// 2^32 (about a million values: every binade and sign, subnormals, ±0, ±inf and
// NaNs; KILN_SWEEP_STRIDE=1 takes them all), against std:: in long double. Each
// function has its documented bound (README, "What holds on which device"): ulp
// of the correctly rounded result, or an absolute bound where the result is
// tiny. Runs on Vulkan and (by ctest) again on the CPU. On a device that
// flushes subnormals (support/subnormals.hpp) a subnormal input may be read as
// ±0 and a subnormal result given as ±0; every other value is held to the same
// bound.
#include <cfloat>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>

#include "../support/e2e.hpp"
#include "../support/subnormals.hpp"

using namespace kiln;

namespace {

// Every KILN_SWEEP_STRIDE-th bit pattern (default 4093; 1 sweeps all 2^32,
// which takes minutes per function).
std::uint64_t stride() {
  const char* v = std::getenv("KILN_SWEEP_STRIDE");
  std::uint64_t n = v ? std::strtoull(v, nullptr, 10) : 4093;
  return n > 0 ? n : 4093;
}

std::vector<float> sweep() {
  std::vector<float> x;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += stride()) {
    auto bits = static_cast<std::uint32_t>(b);
    float v;
    std::memcpy(&v, &bits, 4);
    x.push_back(v);
  }
  return x;
}

// Distance in units in the last place of `want` (as T: float or double), NaN
// and infinities matched exactly.
template <class T>
double ulp_error(T got, long double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e30;
  auto w = static_cast<T>(want);
  if (std::isinf(w)) return got == w ? 0 : 1e30;
  if (std::isnan(got) || std::isinf(got)) return 1e30;
  T ulp = std::nextafter(std::fabs(w), T(INFINITY)) - std::fabs(w);
  if (std::fabs(w) < std::numeric_limits<T>::min()) ulp = std::numeric_limits<T>::denorm_min();
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
}

struct bound {
  double ulps;          // allowed error in ulp of the result
  double absolute = 0;  // or this much absolute error (results near zero of
                        // cancelling formulas)
};

// Runs f on x and compares every result with reference (in long double) within
// bound b.
template <class T, class F, class Ref>
void check_values(const F& f, const std::vector<T>& x, Ref reference, bound b, const char* name) {
  std::vector<T> out(x.size());
  f(x, into(out));
  const bool flush = std::is_same_v<T, float> && ref::device_flushes_subnormals();
  double worst = 0;
  T worst_at = 0;
  int failures = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    long double want = reference(static_cast<long double>(x[i]));
    double e = ulp_error(out[i], want);
    auto within = [&](double err, long double w) {
      return err <= b.ulps || (std::isfinite(out[i]) && std::fabs(out[i] - w) <= b.absolute);
    };
    bool ok = within(e, want);
    if (!ok && flush) {  // the input read as ±0, or a subnormal result given as ±0
      long double want0 = reference(static_cast<long double>(ref::flushed(float(x[i]))));
      double e0 = ulp_error(out[i], want0);
      if (within(e0, want0)) {
        ok = true;
        e = e0;
        want = want0;
      } else if (ref::flushed_result(out[i], want) || ref::flushed_result(out[i], want0)) {
        continue;
      }
    }
    if (e > worst && std::isfinite(static_cast<double>(want))) {
      worst = e;
      worst_at = x[i];
    }
    if (!ok && ++failures <= 3)
      ADD_FAILURE() << name << "(" << x[i] << ") = " << out[i] << ", expected "
                    << static_cast<double>(want) << " (" << e << " ulp)";
  }
  std::printf("%s %-8s worst %.2f ulp at %g over %zu values%s\n",
              std::is_same_v<T, float> ? "f32" : "f64", name, worst, static_cast<double>(worst_at),
              x.size(), flush ? " (subnormals flushed)" : "");
  EXPECT_EQ(failures, 0) << name;
}

template <class F, class Ref>
void check_sweep(const F& f, Ref reference, bound b, const char* name, float lo = -INFINITY,
                 float hi = INFINITY) {
  std::vector<float> x;
  for (float v : sweep())
    if (std::isnan(v) || (v >= lo && v <= hi)) x.push_back(v);
  check_values(f, x, reference, b, name);
}

}  // namespace

TEST(Sweep, Exp) {
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) { return exp(x); });
  check_sweep(
      f, [](long double x) { return std::exp(x); }, {2, 1.5e-45}, "exp");
}

TEST(Sweep, Log) {
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) { return log(x); });
  check_sweep(
      f, [](long double x) { return std::log(x); }, {2}, "log");
}

TEST(Sweep, SqrtAndRsqrt) {
  constexpr auto s = fn<tensor<f32, dyn>>([](auto x) { return sqrt(x); });
  constexpr auto r = fn<tensor<f32, dyn>>([](auto x) { return rsqrt(x); });
  check_sweep(
      s, [](long double x) { return std::sqrt(x); }, {1}, "sqrt");
  check_sweep(
      r, [](long double x) { return 1 / std::sqrt(x); }, {3}, "rsqrt");
}

TEST(Sweep, TanhSigmoidErf) {
  constexpr auto t = fn<tensor<f32, dyn>>([](auto x) { return tanh(x); });
  constexpr auto s = fn<tensor<f32, dyn>>([](auto x) { return sigmoid(x); });
  constexpr auto e = fn<tensor<f32, dyn>>([](auto x) { return erf(x); });
  check_sweep(
      t, [](long double x) { return std::tanh(x); }, {4, 1e-7}, "tanh");
  check_sweep(
      s, [](long double x) { return 1 / (1 + std::exp(-x)); }, {4, 1e-7}, "sigmoid");
  check_sweep(
      e, [](long double x) { return std::erf(x); }, {8, 1e-7}, "erf");
}

TEST(Sweep, SinCos) {
  // Over the whole range: kiln reduces the argument itself on Vulkan
  // (lavapipe's sin(1e10) was -1).
  constexpr auto s = fn<tensor<f32, dyn>>([](auto x) { return sin(x); });
  constexpr auto c = fn<tensor<f32, dyn>>([](auto x) { return cos(x); });
  check_sweep(
      s, [](long double x) { return std::sin(x); }, {4, 2e-7}, "sin");
  check_sweep(
      c, [](long double x) { return std::cos(x); }, {4, 2e-7}, "cos");
  std::vector<float> x = {1e10f, -1e10f, 3.4e38f, 1e20f, 1e30f}, sx(5), cx(5);
  s(x, into(sx));
  c(x, into(cx));
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(sx[i], std::sin(static_cast<long double>(x[i])), 2e-7) << "sin(" << x[i] << ")";
    EXPECT_NEAR(cx[i], std::cos(static_cast<long double>(x[i])), 2e-7) << "cos(" << x[i] << ")";
  }
}

TEST(Sweep, ReciprocalAndSoftsign) {
  // Vulkan's OpFDiv may be 2.5 ulp off (the spec's precision) and flush
  // subnormal results.
  constexpr auto r = fn<tensor<f32, dyn>>([](auto x) { return reciprocal(x); });
  constexpr auto s = fn<tensor<f32, dyn>>([](auto x) { return softsign(x); });
  check_sweep(
      r, [](long double x) { return 1 / x; }, {2.5, 1.2e-38}, "recip");
  check_sweep(
      s, [](long double x) { return x / (1 + std::fabs(x)); }, {3}, "softsign");
}

TEST(Sweep, RoundingExactly) {
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) {
    return std::tuple{floor(x), ceil(x), round(x)};
  });
  auto x = sweep();
  std::vector<float> fl(x.size()), ce(x.size()), ro(x.size());
  f(x, into(fl, ce, ro));
  for (std::size_t i = 0; i < x.size(); ++i) {
    auto same = [](float a, float b) {
      return std::isnan(b) ? std::isnan(a) : a == b && std::signbit(a) == std::signbit(b);
    };
    ASSERT_TRUE(same(fl[i], std::floor(x[i]))) << "floor(" << x[i] << ")";
    ASSERT_TRUE(same(ce[i], std::ceil(x[i]))) << "ceil(" << x[i] << ")";
    ASSERT_TRUE(same(ro[i], std::nearbyint(x[i]))) << "round(" << x[i] << ")";
  }
}

TEST(Sweep, InverseTrigonometric) {
  constexpr auto t = fn<tensor<f32, dyn>>([](auto x) { return tan(x); });
  constexpr auto as = fn<tensor<f32, dyn>>([](auto x) { return asin(x); });
  constexpr auto ac = fn<tensor<f32, dyn>>([](auto x) { return acos(x); });
  constexpr auto at = fn<tensor<f32, dyn>>([](auto x) { return atan(x); });
  check_sweep(
      t, [](long double x) { return std::tan(x); }, {6}, "tan");
  check_sweep(
      as, [](long double x) { return std::asin(x); }, {4}, "asin");
  check_sweep(
      ac, [](long double x) { return std::acos(x); }, {4}, "acos");
  check_sweep(
      at, [](long double x) { return std::atan(x); }, {4}, "atan");
}

TEST(Sweep, Hyperbolic) {
  constexpr auto sh = fn<tensor<f32, dyn>>([](auto x) { return sinh(x); });
  constexpr auto ch = fn<tensor<f32, dyn>>([](auto x) { return cosh(x); });
  constexpr auto ash = fn<tensor<f32, dyn>>([](auto x) { return asinh(x); });
  constexpr auto ach = fn<tensor<f32, dyn>>([](auto x) { return acosh(x); });
  constexpr auto ath = fn<tensor<f32, dyn>>([](auto x) { return atanh(x); });
  check_sweep(
      sh, [](long double x) { return std::sinh(x); }, {4}, "sinh");
  check_sweep(
      ch, [](long double x) { return std::cosh(x); }, {4}, "cosh");
  check_sweep(
      ash, [](long double x) { return std::asinh(x); }, {4}, "asinh");
  check_sweep(
      ach, [](long double x) { return std::acosh(x); }, {4}, "acosh");
  check_sweep(
      ath, [](long double x) { return std::atanh(x); }, {4}, "atanh");
}

TEST(Sweep, ExpAndLogRelatives) {
  constexpr auto e2 = fn<tensor<f32, dyn>>([](auto x) { return exp2(x); });
  constexpr auto em1 = fn<tensor<f32, dyn>>([](auto x) { return expm1(x); });
  constexpr auto l2 = fn<tensor<f32, dyn>>([](auto x) { return log2(x); });
  constexpr auto l1p = fn<tensor<f32, dyn>>([](auto x) { return log1p(x); });
  constexpr auto sp = fn<tensor<f32, dyn>>([](auto x) { return softplus(x); });
  constexpr auto ec = fn<tensor<f32, dyn>>([](auto x) { return erfc(x); });
  check_sweep(
      e2, [](long double x) { return std::exp2(x); }, {2, 1.5e-45}, "exp2");
  check_sweep(
      em1, [](long double x) { return std::expm1(x); }, {3}, "expm1");
  check_sweep(
      l2, [](long double x) { return std::log2(x); }, {3}, "log2");
  check_sweep(
      l1p, [](long double x) { return std::log1p(x); }, {3}, "log1p");
  check_sweep(
      sp,
      [](long double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); },
      {3}, "softplus");
  check_sweep(
      ec, [](long double x) { return std::erfc(x); }, {6}, "erfc");
}

// pow(x, y) = e^(y ln x) over every binade of x > 0 and exponents that keep the result a normal
// f32 (|y log2 x| up to 126, both signs), against powl. Its bound is not a fixed number of ulps:
// the exponent y ln x is computed in f32 (the product's rounding and the logarithm's few ulps),
// and its absolute error is the result's relative error: 2 ulp + 2^-22 |y ln x|, up to 2.1e-5
// for results near f32's largest (pow(10, 38) is 4.0e-6 off on the CPU).
TEST(Sweep, Pow) {
  constexpr auto f =
      fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) { return pow(x, y); });
  std::vector<float> xs, ys;
  for (float x : sweep()) {
    if (!(x > 0) || std::isinf(x) || x == 1.0f || x < FLT_MIN) continue;
    const double l2 = std::log2(double(x));
    for (double part : {-1.0, -0.61, -0.25, -0.03, 0.02, 0.37, 0.8, 1.0}) {
      xs.push_back(x);
      ys.push_back(static_cast<float>(part * 125.5 / std::fabs(l2)));
    }
  }
  xs.push_back(10.0f);
  ys.push_back(38.0f);
  std::vector<float> out(xs.size());
  f(xs, ys, into(out));
  double worst = 0, worst_x = 0, worst_y = 0;
  int failures = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const long double want =
        std::pow(static_cast<long double>(xs[i]), static_cast<long double>(ys[i]));
    if (!(std::fabs(want) >= FLT_MIN && std::fabs(want) <= FLT_MAX)) continue;
    const double t = std::fabs(double(ys[i]) * std::log(double(xs[i])));
    const double rel = static_cast<double>(std::fabs((out[i] - want) / want));
    const double allowed = 2 * 5.96046448e-8 + t * 2.38418579e-7;
    if (rel / allowed > worst) worst = rel / allowed, worst_x = xs[i], worst_y = ys[i];
    if (!(rel <= allowed) && ++failures <= 3)
      ADD_FAILURE() << "pow(" << xs[i] << ", " << ys[i] << ") = " << out[i] << ", expected "
                    << static_cast<double>(want) << ": " << rel << " relative, above " << allowed;
  }
  std::printf("f32 pow      worst %.2f of the bound at pow(%g, %g) over %zu pairs\n", worst,
              worst_x, worst_y, xs.size());
  EXPECT_EQ(failures, 0);
}

// The f64 forms (they run on the CPU on every device: GLSL.std.450 has no
// 64-bit forms): random bit patterns over every exponent, against std:: in long
// double, each within its stated bound (README: xsimd's functions with C's
// edges fixed).
namespace {
template <class F, class Ref>
void check_f64(const F& f, Ref reference, double bound, const char* name) {
  std::mt19937_64 gen(11);
  std::vector<double> x(200000);
  for (auto& v : x) {
    std::uint64_t b = gen();
    // Half of the values with small exponents, where these functions do their
    // work.
    if (b & 1) b = (b & 0x800FFFFFFFFFFFFFull) | ((0x3F0ull + (b >> 52) % 48) << 52);
    std::memcpy(&v, &b, 8);
  }
  check_values(f, x, reference, {bound}, name);
}
}  // namespace

TEST(Sweep, F64Functions) {
  using T = tensor<f64, dyn>;
  check_f64(
      fn<T>([](auto x) { return exp(x); }), [](long double x) { return std::exp(x); }, 2, "exp");
  check_f64(
      fn<T>([](auto x) { return tan(x); }), [](long double x) { return std::tan(x); }, 4, "tan");
  check_f64(
      fn<T>([](auto x) { return asin(x); }), [](long double x) { return std::asin(x); }, 4, "asin");
  check_f64(
      fn<T>([](auto x) { return acos(x); }), [](long double x) { return std::acos(x); }, 4, "acos");
  check_f64(
      fn<T>([](auto x) { return atan(x); }), [](long double x) { return std::atan(x); }, 4, "atan");
  check_f64(
      fn<T>([](auto x) { return sinh(x); }), [](long double x) { return std::sinh(x); }, 4, "sinh");
  check_f64(
      fn<T>([](auto x) { return cosh(x); }), [](long double x) { return std::cosh(x); }, 4, "cosh");
  check_f64(
      fn<T>([](auto x) { return asinh(x); }), [](long double x) { return std::asinh(x); }, 4,
      "asinh");
  check_f64(
      fn<T>([](auto x) { return acosh(x); }), [](long double x) { return std::acosh(x); }, 4,
      "acosh");
  check_f64(
      fn<T>([](auto x) { return atanh(x); }), [](long double x) { return std::atanh(x); }, 4,
      "atanh");
  check_f64(
      fn<T>([](auto x) { return exp2(x); }), [](long double x) { return std::exp2(x); }, 4, "exp2");
  check_f64(
      fn<T>([](auto x) { return expm1(x); }), [](long double x) { return std::expm1(x); }, 4,
      "expm1");
  check_f64(
      fn<T>([](auto x) { return log2(x); }), [](long double x) { return std::log2(x); }, 4, "log2");
  check_f64(
      fn<T>([](auto x) { return log1p(x); }), [](long double x) { return std::log1p(x); }, 4,
      "log1p");
  check_f64(
      fn<T>([](auto x) { return softplus(x); }),
      [](long double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); },
      4, "softplus");
  check_f64(
      fn<T>([](auto x) { return erfc(x); }), [](long double x) { return std::erfc(x); }, 5, "erfc");
}
