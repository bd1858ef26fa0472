// Comparisons, logic and select end to end, on floats and integers, with literals.
#include "../support/e2e.hpp"

using namespace kiln;

TEST(Logic, ComparisonsF32) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) {
    return std::tuple{x == y, x != y, x<y, x <= y, x> y, x >= y};
  });
  for (auto n : ref::sizes) {
    // Few distinct values so that equality happens often.
    auto x = ref::random_data<float>(n, -3, 3, 1), y = ref::random_data<float>(n, -3, 3, 2);
    for (auto& v : x) v = std::round(v);
    for (auto& v : y) v = std::round(v);
    std::vector<ref::buffer<bool>> out;
    for (int k = 0; k < 6; ++k) out.emplace_back(static_cast<std::size_t>(n));
    auto v = [&](int k) { return ref::view_of(out[k], {n}); };
    f(x, y, into(v(0), v(1), v(2), v(3), v(4), v(5)));
    for (std::int64_t i = 0; i < n; ++i) {
      bool want[] = {x[i] == y[i], x[i] != y[i], x[i]<y[i], x[i] <= y[i], x[i]> y[i], x[i] >= y[i]};
      for (int k = 0; k < 6; ++k)
        ASSERT_EQ(out[k][i], want[k]) << "comparison " << k << " at " << i;
    }
  }
}

TEST(Logic, ComparisonsI64AndU8) {
  constexpr auto f = fn<tensor<i64, dyn>, tensor<u8, dyn>>([](auto x, auto y) {
    return std::tuple{x < 5, y >= 200};
  });
  for (auto n : ref::sizes) {
    auto x = ref::make_arg<i64>({n}, -10, 10, 3);
    auto y = ref::make_arg<u8>({n}, 0, 256, 4);
    ref::buffer<bool> a(n), b(n);
    f(ref::view_of(x.data, x.dims), ref::view_of(y.data, y.dims),
      into(ref::view_of(a, {n}), ref::view_of(b, {n})));
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(a[i], x.data[i] < 5) << i;
      ASSERT_EQ(b[i], y.data[i] >= 200) << i;
    }
  }
}

TEST(Logic, SelectWithLiteral) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, dyn>>(
      [](auto x, auto y) { return select(x > y, x - y, 0.f) + where(x < 0.f, -1.f, y); });
  for (auto n : ref::sizes)
    ref::check<float>(
        f, [](float x, float y) { return (x > y ? x - y : 0.f) + (x < 0.f ? -1.f : y); },
        ref::arith, ref::make_arg<float>({n}, -5, 5, 5), ref::make_arg<float>({n}, -5, 5, 6));
}

TEST(Logic, SelectF64ByIntegerCompare) {
  constexpr auto f = fn<tensor<i32, dyn>, tensor<f64, dyn>>(
      [](auto k, auto v) { return select(k == 2 || k < 0, v * 2.0, -v); });
  for (auto n : ref::sizes)
    ref::check<double>(
        f, [](i32 k, double v) { return (k == 2 || k < 0) ? v * 2.0 : -v; }, ref::exact,
        ref::make_arg<i32>({n}, -3, 4, 7), ref::make_arg<double>({n}, -5, 5, 8));
}

TEST(Logic, SelectOnBoolAndIntegers) {
  constexpr auto f =
      fn<tensor<bool, dyn>, tensor<i16, dyn>, tensor<i16, dyn>>([](auto c, auto a, auto b) {
        return std::tuple{select(c, a, b), select(!c, c, a > b)};
      });
  for (auto n : ref::sizes) {
    auto c = ref::make_arg<bool>({n}, 0, 1, 9);
    auto a = ref::make_arg<i16>({n}, -100, 100, 10), b = ref::make_arg<i16>({n}, -100, 100, 11);
    ref::buffer<i16> r1(n);
    ref::buffer<bool> r2(n);
    f(ref::view_of(c.data, c.dims), ref::view_of(a.data, a.dims), ref::view_of(b.data, b.dims),
      into(ref::view_of(r1, {n}), ref::view_of(r2, {n})));
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(r1[i], c.data[i] ? a.data[i] : b.data[i]) << i;
      ASSERT_EQ(r2[i], !c.data[i] ? c.data[i] : a.data[i] > b.data[i]) << i;
    }
  }
}
