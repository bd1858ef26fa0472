// Broadcasting (static, dynamic, mixed, rank 0..4), scalar parameters, several outputs, shared
// subexpressions and functions that need several regions.
#include "../support/e2e.hpp"

using namespace kiln;

TEST(Broadcast, RowAndColumnDynamic) {
  constexpr auto f = fn<tensor<f32, dyn, dyn>, tensor<f32, dyn>, tensor<f32, dyn, 1>>(
      [](auto m, auto row, auto col) { return m * row + col; });
  static_assert(f.plan.dispatch_count() == 1);
  for (ref::dims_t d : {ref::dims_t{3, 5}, {1, 1}, {7, 1000}, {0, 4}, {130, 9}})
    ref::check<float>(
        f, [](float m, float r, float c) { return m * r + c; }, ref::arith,
        ref::make_arg<float>(d, -2, 2, 1), ref::make_arg<float>({d[1]}, -2, 2, 2),
        ref::make_arg<float>({d[0], 1}, -2, 2, 3));
}

TEST(Broadcast, StaticExtents) {
  constexpr auto f =
      fn<tensor<f32, 4, 1, 3>, tensor<f32, 5, 1>>([](auto a, auto b) { return a - b; });
  using result = std::tuple_element_t<0, decltype(f)::result_values>;
  static_assert(std::is_same_v<result::extents_type, extents<4, 5, 3>>);
  ref::check<float>(
      f, [](float a, float b) { return a - b; }, ref::exact,
      ref::make_arg<float>({4, 1, 3}, -2, 2, 4), ref::make_arg<float>({5, 1}, -2, 2, 5));
}

TEST(Broadcast, MixedStaticAndDynamicRank4) {
  constexpr auto f = fn<tensor<f32, dyn, 1, dyn, 8>, tensor<f32, 1, dyn, 1, 8>>(
      [](auto a, auto b) { return max(a, b) * 2.f; });
  for (auto [n, m, k] : {std::tuple{2, 3, 5}, std::tuple{1, 1, 1}, std::tuple{3, 7, 33}})
    ref::check<float>(
        f, [](float a, float b) { return std::max(a, b) * 2.f; }, ref::exact,
        ref::make_arg<float>({n, 1, k, 8}, -2, 2, 6), ref::make_arg<float>({1, m, 1, 8}, -2, 2, 7));
}

// A dynamic size that is 1 at run time broadcasts like a static 1.
TEST(Broadcast, DynamicSizeOneAtRunTime) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) { return x + y; });
  ref::check<float>(
      f, [](float x, float y) { return x + y; }, ref::exact, ref::make_arg<float>({1}, -2, 2, 8),
      ref::make_arg<float>({1000}, -2, 2, 9));
  ref::check<float>(
      f, [](float x, float y) { return x + y; }, ref::exact, ref::make_arg<float>({77}, -2, 2, 8),
      ref::make_arg<float>({1}, -2, 2, 9));
}

// A run-time scalar (learning rate) passed as a plain number.
TEST(Broadcast, ScalarParameter) {
  constexpr auto sgd = fn<tensor<f32, dyn>, tensor<f32, dyn>, tensor<f32>>(
      [](auto w, auto g, auto lr) { return w - lr * g; });
  for (auto n : ref::sizes) {
    auto w = ref::random_data<float>(n, -1, 1, 10), g = ref::random_data<float>(n, -1, 1, 11);
    std::vector<float> out(n);
    float lr = 0.125f;
    sgd(w, g, lr, into(out));
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], w[i] - lr * g[i]) << i;
  }
}

TEST(Broadcast, ThreeOutputsOneRegionSharedSubexpression) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) {
    auto s = exp(x - y);  // shared by all three results
    return std::tuple{s + 1.f, s * y, relu(s - 2.f)};
  });
  static_assert(f.plan.dispatch_count() == 1);
  // One exp node, not three: the shared subexpression is computed once.
  static_assert([] {
    int exps = 0;
    for (const auto& n : f.plan.nodes) exps += n.kind == ir::op::exp;
    return exps;
  }() == 1);
  for (auto n : ref::sizes) {
    auto x = ref::random_data<float>(n, -2, 2, 12), y = ref::random_data<float>(n, -2, 2, 13);
    std::vector<float> a(n), b(n), c(n);
    f(x, y, into(a, b, c));
    for (std::int64_t i = 0; i < n; ++i) {
      float s = std::exp(x[i] - y[i]);
      ASSERT_NEAR(a[i], s + 1.f, 2e-6 * (s + 1.f)) << i;
      ASSERT_NEAR(b[i], s * y[i], 2e-6 * std::fabs(s * y[i]) + 1e-7) << i;
      ASSERT_NEAR(c[i], std::max(s - 2.f, 0.f), 4e-6 * s) << i;
    }
  }
}

// Results over different iteration spaces become separate regions.
TEST(Broadcast, ResultsOverDifferentSpacesMakeTwoRegions) {
  constexpr auto f = fn<tensor<f32, dyn, 1>, tensor<f32, dyn>>([](auto col, auto row) {
    return std::tuple{exp(col), exp(col) * row};
  });
  static_assert(f.plan.dispatch_count() == 2);
  auto col = ref::random_data<float>(6, -1, 1, 14), row = ref::random_data<float>(9, -1, 1, 15);
  std::vector<float> a(6), b(54);
  f(view(col.data(), {6, 1}), row, into(view(a.data(), {6, 1}), view(b.data(), {6, 9})));
  for (int i = 0; i < 6; ++i) {
    ASSERT_NEAR(a[i], std::exp(col[i]), 2e-6 * std::exp(col[i]));
    for (int j = 0; j < 9; ++j)
      ASSERT_NEAR(b[i * 9 + j], std::exp(col[i]) * row[j],
                  2e-6 * std::fabs(std::exp(col[i]) * row[j]) + 1e-7);
  }
}

// Returning results by value allocates them with the right size.
TEST(Broadcast, ReturnByValue) {
  constexpr auto f = fn<tensor<i32, dyn>>([](auto x) { return std::tuple{x * 2, x > 0}; });
  std::vector<i32> x = {-1, 0, 5};
  auto [twice, positive] = f(x);
  EXPECT_EQ(twice, (std::vector<i32>{-2, 0, 10}));
  ASSERT_EQ(positive.size(), 3u);
  EXPECT_EQ(positive[2], true);
  EXPECT_EQ(positive[0], false);
  constexpr auto g = fn<tensor<f32, dyn>>([](auto x) { return x + x; });
  EXPECT_EQ(g(std::vector<float>{1.5f, 2.f}), (std::vector<float>{3.f, 4.f}));
}

// Outputs that are inputs unchanged, and constant folding down to a constant result.
TEST(Broadcast, IdentityAndConstantResults) {
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) {
    return std::tuple{x * 1.f, x - x + 0.f * x};
  });
  std::vector<float> x = {1, 2, 3}, a(3), b(3);
  f(x, into(a, b));
  EXPECT_EQ(a, x);
  EXPECT_EQ(b, (std::vector<float>{0, 0, 0}));
}

// In place: the result written over its own argument.
TEST(Broadcast, InPlaceUpdate) {
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) { return x * 3.f + 1.f; });
  std::vector<float> x(1027);
  for (int i = 0; i < 1027; ++i) x[i] = float(i);
  f(x, into(x));
  for (int i = 0; i < 1027; ++i) ASSERT_EQ(x[i], float(i) * 3.f + 1.f);
}
