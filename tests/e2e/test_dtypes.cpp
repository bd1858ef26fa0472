// Every dtype end to end: arithmetic in each integer type (wrapping as that type), the narrow
// floats (computed in f32, rounded when stored), f64, bool, and casts between them.
#include <limits>

#include "../support/e2e.hpp"
#include "../support/errors.hpp"

using namespace kiln;

// x * y + x - y in type T, wrapped modulo 2^bits exactly as the type does.
template <class T>
void check_integer_arith(double lo, double hi) {
  constexpr auto f =
      fn<tensor<T, dyn>, tensor<T, dyn>>([](auto x, auto y) { return x * y + x - y; });
  for (auto n : ref::sizes)
    ref::check<T>(
        f,
        [](T x, T y) {
          using U = std::make_unsigned_t<std::conditional_t<sizeof(T) < 4, std::int32_t, T>>;
          return static_cast<T>(U(U(x) * U(y)) + U(x) - U(y));
        },
        ref::exact, ref::make_arg<T>({n}, lo, hi, 3), ref::make_arg<T>({n}, lo, hi, 4));
}

TEST(Dtypes, I8Wraps) { check_integer_arith<i8>(-128, 128); }
TEST(Dtypes, I16Wraps) { check_integer_arith<i16>(-32768, 32768); }
TEST(Dtypes, I32Wraps) { check_integer_arith<i32>(-2147483648.0, 2147483647.0); }
TEST(Dtypes, I64) { check_integer_arith<i64>(-3e18, 3e18); }
TEST(Dtypes, U8Wraps) { check_integer_arith<u8>(0, 256); }
TEST(Dtypes, U16Wraps) { check_integer_arith<u16>(0, 65536); }
TEST(Dtypes, U64Wraps) { check_integer_arith<u64>(-9e18, 9e18); }  // the high bit set or not
TEST(Dtypes, U32Wraps) { check_integer_arith<u32>(0, 4294967295.0); }

// Division truncates toward zero; x / 0 is 0 and MIN / -1 wraps (kiln's definition).
template <class T>
void check_integer_div() {
  constexpr auto f = fn<tensor<T, dyn>, tensor<T, dyn>>([](auto x, auto y) { return x / y; });
  std::vector<T> x = {
      7,  static_cast<T>(-7), 0, 5, std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), 9,
      100};
  std::vector<T> y = {2, 2, 3, 0, static_cast<T>(-1), static_cast<T>(-1), static_cast<T>(-4), 7};
  std::vector<T> out(x.size());
  f(x, y, into(out));
  for (std::size_t i = 0; i < x.size(); ++i) {
    T want;
    if (y[i] == 0)
      want = 0;
    else if (std::is_signed_v<T> && y[i] == static_cast<T>(-1))
      want = static_cast<T>(0 - std::make_unsigned_t<T>(x[i]));
    else
      want = static_cast<T>(x[i] / y[i]);
    EXPECT_EQ(out[i], want) << i;
  }
}
TEST(Dtypes, I32Division) { check_integer_div<i32>(); }
TEST(Dtypes, I64Division) { check_integer_div<i64>(); }
TEST(Dtypes, I8Division) { check_integer_div<i8>(); }
TEST(Dtypes, U16Division) { check_integer_div<u16>(); }
TEST(Dtypes, U64Division) { check_integer_div<u64>(); }

TEST(Dtypes, IntegerMinMaxAbsNegRelu) {
  constexpr auto f = fn<tensor<i32, dyn>, tensor<i32, dyn>>(
      [](auto x, auto y) { return min(x, y) + max(abs(x), -y) - relu(x); });
  for (auto n : ref::sizes)
    ref::check<i32>(
        f, [](i32 x, i32 y) { return std::min(x, y) + std::max(std::abs(x), -y) - std::max(x, 0); },
        ref::exact, ref::make_arg<i32>({n}, -1000, 1000, 5),
        ref::make_arg<i32>({n}, -1000, 1000, 6));
}

TEST(Dtypes, F64) {
  constexpr auto f = fn<tensor<f64, dyn>, tensor<f64, dyn>>(
      [](auto x, auto y) { return exp(x) * y + sqrt(abs(y)) / (1.0 + x * x); });
  for (auto n : ref::sizes)
    // Positive terms only (y > 0), so no cancellation: a relative bound of a few ulps holds.
    ref::check<f64>(
        f,
        [](double x, double y) {
          return std::exp(x) * y + std::sqrt(std::fabs(y)) / (1.0 + x * x);
        },
        ref::tolerance{1e-14, 1e-300}, ref::make_arg<f64>({n}, -5, 5, 7),
        ref::make_arg<f64>({n}, 0.1, 5, 8));
}

// Narrow floats: the reference computes in float from the decoded inputs and rounds the result
// with its own brute-force rounding; the result must be that exact value.
template <class T>
void check_narrow(double lo, double hi) {
  constexpr auto f =
      fn<tensor<T, dyn>, tensor<T, dyn>>([](auto x, auto y) { return x * y + 0.5f * x; });
  for (auto n : ref::sizes) {
    auto x = ref::make_arg<T>({n}, lo, hi, 9), y = ref::make_arg<T>({n}, lo, hi, 10);
    ref::buffer<T> out(static_cast<std::size_t>(n));
    f(ref::view_of(x.data, x.dims), ref::view_of(y.data, y.dims), into(ref::view_of(out, x.dims)));
    std::vector<double> want(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      float a = static_cast<float>(ref::to_double(x.data[i])),
            b = static_cast<float>(ref::to_double(y.data[i]));
      want[i] = ref::round_to<T>(a * b + 0.5f * a);
    }
    ref::expect_near(out.to_vector(), want, ref::exact, "narrow float, n=" + std::to_string(n));
  }
}
TEST(Dtypes, F16) { check_narrow<f16>(-100, 100); }
TEST(Dtypes, BF16) { check_narrow<bf16>(-100, 100); }
TEST(Dtypes, F8E4M3) { check_narrow<f8e4m3>(-20, 20); }
TEST(Dtypes, F8E5M2) { check_narrow<f8e5m2>(-200, 200); }

TEST(Dtypes, BoolLogic) {
  constexpr auto f = fn<tensor<bool, dyn>, tensor<bool, dyn>>(
      [](auto a, auto b) { return (a && !b) || (a == b); });
  for (auto n : ref::sizes)
    ref::check<bool>(
        f, [](bool a, bool b) { return (a && !b) || (a == b); }, ref::exact,
        ref::make_arg<bool>({n}, 0, 1, 11), ref::make_arg<bool>({n}, 0, 1, 12));
}

// Casts: float to integer truncates and saturates (NaN -> 0), integer to narrower integer wraps,
// anything to bool is "!= 0", bool to number is 0 or 1.
TEST(Dtypes, CastFloatToIntegers) {
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) {
    return std::tuple{cast<i32>(x), cast<i8>(x),  cast<u8>(x),
                      cast<u32>(x), cast<i64>(x), cast<bool>(x)};
  });
  std::vector<float> x = {1.9f,  -1.9f, 300.f, -300.f, NAN,     3e9f,
                          -3e9f, 0.f,   1e20f, -0.5f,  INFINITY};
  std::size_t n = x.size();
  std::vector<i32> a(n);
  std::vector<i8> b(n);
  std::vector<u8> c(n);
  std::vector<u32> d(n);
  std::vector<i64> e(n);
  ref::buffer<bool> g(n);
  f(x, into(a, b, c, d, e, ref::view_of(g, {std::int64_t(n)})));
  const i32 wa[] = {1, -1, 300, -300, 0, 2147483647, -2147483647 - 1, 0, 2147483647, 0, 2147483647};
  const i8 wb[] = {1, -1, 127, -128, 0, 127, -128, 0, 127, 0, 127};
  const u8 wc[] = {1, 0, 255, 0, 0, 255, 0, 0, 255, 0, 255};
  const u32 wd[] = {1, 0, 300, 0, 0, 3000000000u, 0, 0, 4294967295u, 0, 4294967295u};
  const i64 we[] = {1,
                    -1,
                    300,
                    -300,
                    0,
                    3000000000LL,
                    -3000000000LL,
                    0,
                    9223372036854775807LL,
                    0,
                    9223372036854775807LL};
  const bool wg[] = {true, true, true, true, true, true, true, false, true, true, true};
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(a[i], wa[i]) << i;
    EXPECT_EQ(b[i], wb[i]) << i;
    EXPECT_EQ(c[i], wc[i]) << i;
    EXPECT_EQ(d[i], wd[i]) << i;
    EXPECT_EQ(e[i], we[i]) << i;
    EXPECT_EQ(g[i], wg[i]) << i;
  }
}

// u16: a float truncates and saturates into [0, 65535] (NaN -> 0), an i32 wraps modulo 2^16, and
// a u16 widens to i32 and f32 exactly.
TEST(Dtypes, CastToAndFromU16) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<i32, dyn>>([](auto x, auto i) {
    auto u = cast<u16>(i);
    return std::tuple{cast<u16>(x), u, cast<i32>(u) - 1, cast<f32>(u) * 0.5f};
  });
  const std::vector<float> x = {1.9f, -1.9f, 300.f, 70000.f, NAN, -0.5f, INFINITY, 65535.5f};
  const std::vector<i32> i = {1, -1, 65535, 65536, 70000, -65536, 32768, 0};
  const std::size_t n = x.size();
  std::vector<u16> a(n), b(n);
  std::vector<i32> c(n);
  std::vector<f32> d(n);
  f(x, i, into(a, b, c, d));
  const u16 wa[] = {1, 0, 300, 65535, 0, 0, 65535, 65535};
  const u16 wb[] = {1, 65535, 65535, 0, 4464, 0, 32768, 0};
  for (std::size_t k = 0; k < n; ++k) {
    EXPECT_EQ(a[k], wa[k]) << k;
    EXPECT_EQ(b[k], wb[k]) << k;
    EXPECT_EQ(c[k], i32(wb[k]) - 1) << k;
    EXPECT_EQ(d[k], float(wb[k]) * 0.5f) << k;
  }
}

// u64 beyond i64's range: ordered, divided and converted as unsigned (a signed reading of the
// same bits would put 2^63 + 5 below 3), a float saturating into [0, 2^64 - 1], an i64 taken as
// its bits; the same through scalar constants, which the compiler folds.
TEST(Dtypes, U64AboveTheHighBit) {
  constexpr auto f = fn<tensor<u64, dyn>, tensor<u64, dyn>, tensor<f32, dyn>, tensor<i64, dyn>>(
      [](auto x, auto y, auto r, auto s) {
        return std::tuple{x > y,        min(x, y),    max(x, y),
                          x / y,        mod(x, y),    shift_right(x, u64(60)),
                          cast<f64>(x), cast<u64>(r), cast<u64>(s),
                          cast<i64>(x)};
      });
  constexpr u64 high = (u64{1} << 63) + 5, all = ~u64{0};
  const std::vector<u64> x = {high, 3, all, 7, all - 1};
  const std::vector<u64> y = {3, high, 2, all, 0};
  const std::vector<f32> r = {1.9f, -1.9f, 3e19f, NAN, 1.5e19f};
  const std::vector<i64> s = {-1, 5, -9223372036854775807LL - 1, 0, 42};
  const std::size_t n = x.size();
  ref::buffer<bool> gt(n);
  std::vector<u64> lo(n), hi(n), q(n), m(n), sh(n), from_f(n), from_i(n);
  std::vector<f64> d(n);
  std::vector<i64> back(n);
  f(x, y, r, s,
    into(ref::view_of(gt, {std::int64_t(n)}), lo, hi, q, m, sh, d, from_f, from_i, back));
  for (std::size_t k = 0; k < n; ++k) {
    EXPECT_EQ(gt[k], x[k] > y[k]) << k;
    EXPECT_EQ(lo[k], std::min(x[k], y[k])) << k;
    EXPECT_EQ(hi[k], std::max(x[k], y[k])) << k;
    EXPECT_EQ(q[k], y[k] ? x[k] / y[k] : 0) << k;
    EXPECT_EQ(m[k], y[k] ? x[k] % y[k] : 0) << k;
    EXPECT_EQ(sh[k], x[k] >> 60) << k;
    EXPECT_EQ(d[k], static_cast<double>(x[k])) << k;
    EXPECT_EQ(from_i[k], static_cast<u64>(s[k])) << k;
    EXPECT_EQ(back[k], static_cast<i64>(x[k])) << k;
  }
  const u64 wr[] = {1, 0, all, 0, static_cast<u64>(1.5e19f)};
  for (std::size_t k = 0; k < n; ++k) EXPECT_EQ(from_f[k], wr[k]) << k;

  graph g;
  auto a = g.constant(high, dtype::u64), b = g.constant(3, dtype::u64);
  g.output("gt", g.gt(a, b));
  g.output("max", g.max(a, b));
  g.output("as_f32", g.cast(a, dtype::f32));
  executable e = compile(g);
  ref::buffer<bool> folded_gt(1);
  u64 folded_max = 0;
  f32 as_f32 = 0;
  const std::vector<tensor_ref> results = {
      tensor_ref(static_cast<void*>(&folded_gt[0]), dtype::boolean, shape{}),
      tensor_ref(static_cast<void*>(&folded_max), dtype::u64, shape{}),
      tensor_ref(static_cast<void*>(&as_f32), dtype::f32, shape{})};
  e.run({}, results);
  EXPECT_TRUE(folded_gt[0]);
  EXPECT_EQ(folded_max, high);
  EXPECT_EQ(as_f32, static_cast<f32>(static_cast<double>(high)));
  EXPECT_EQ(error_of([] {
              graph h;
              h.constant(-1, dtype::u64);
            }),
            "kiln: constant: -1 is outside the range of u64");
}

TEST(Dtypes, CastIntegersAndBool) {
  constexpr auto f = fn<tensor<i32, dyn>, tensor<bool, dyn>>([](auto x, auto m) {
    return std::tuple{cast<i8>(x), cast<f32>(x) * 0.5f, cast<i32>(m) + x, cast<f16>(cast<f32>(x))};
  });
  std::vector<i32> x = {1, -1, 200, -200, 70000, 0, 2049, 65519};
  ref::buffer<bool> m(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) m[i] = i % 2;
  std::size_t n = x.size();
  std::vector<i8> a(n);
  std::vector<f32> b(n);
  std::vector<i32> c(n);
  std::vector<f16> d(n);
  f(x, ref::view_of(m, {std::int64_t(n)}), into(a, b, c, d));
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(a[i], static_cast<i8>(x[i])) << i;
    EXPECT_EQ(b[i], static_cast<float>(x[i]) * 0.5f) << i;
    EXPECT_EQ(c[i], x[i] + (m[i] ? 1 : 0)) << i;
    EXPECT_EQ(static_cast<float>(d[i]), ref::round_to<f16>(x[i])) << i;
  }
}

TEST(Dtypes, CastBetweenFloatWidths) {
  constexpr auto f = fn<tensor<f64, dyn>>([](auto x) {
    return std::tuple{cast<f32>(x), cast<bf16>(x), cast<f8e4m3>(x), cast<f8e5m2>(cast<f32>(x))};
  });
  auto x = ref::random_data<double>(1001, -500, 500, 13);
  std::size_t n = x.size();
  std::vector<f32> a(n);
  std::vector<bf16> b(n);
  std::vector<f8e4m3> c(n);
  std::vector<f8e5m2> d(n);
  f(x, into(a, b, c, d));
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(a[i], static_cast<float>(x[i])) << i;
    // Casts to narrow floats round from the f32 compute value.
    float xf = static_cast<float>(x[i]);
    EXPECT_EQ(static_cast<float>(b[i]), ref::round_to<bf16>(xf)) << i;
    EXPECT_EQ(static_cast<float>(c[i]), ref::round_to<f8e4m3>(xf)) << i;
    EXPECT_EQ(static_cast<float>(d[i]), ref::round_to<f8e5m2>(xf)) << i;
  }
}
