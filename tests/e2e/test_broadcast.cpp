// Broadcasting (static, dynamic, mixed, rank 0..4), scalar parameters, several outputs, shared
// subexpressions and functions that need several regions.
#include <algorithm>
#include <limits>
#include <string>

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

// Rows of whole groups of four (the last extent a multiple of 4), in every storage width: on
// Vulkan a group of four lanes reads a broadcast row as one vector (consecutive), a column's
// value once (repeated), and a slice that starts off a multiple of four lane by lane (strided);
// a reduction along such rows folds four consecutive elements at a time, with the same reads.
// Small integers in every type, so every result is exact.
template <class T>
void check_whole_rows(unsigned seed) {
  using kiln::ir::op;
  constexpr kiln::dtype t = kiln::dtype_of<T>;
  constexpr std::int64_t R = 5, C = 12;
  const bool is_unsigned = std::is_unsigned_v<T>;
  auto values = [&](std::int64_t n, unsigned s) {
    ref::buffer<T> b(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      b[i] = ref::from_double<T>(double((i * 7 + s) % 16) - (is_unsigned ? 0 : 8));
    return b;
  };
  auto x = values(R * C, seed), row = values(C, seed + 1), col = values(R, seed + 2),
       wide = values(R * (C + 4), seed + 3);
  kiln::graph g;
  auto gx = g.input("x", t, {R, C});
  auto grow = g.input("row", t, {C});
  auto gcol = g.input("col", t, {R, 1});
  auto shifted = g.slice(g.input("wide", t, {R, C + 4}), {1}, {C + 1}, {1});  // from column 1
  g.output("a", g.apply(op::add, {gx, grow}));
  g.output("b", g.apply(op::mul, {gx, gcol}));
  g.output("c", g.apply(op::sub, {shifted, gx}));
  g.output("s", g.reduce(op::reduce_sum, g.apply(op::add, {gx, grow}), {1}, false));
  g.output("m", g.reduce(op::reduce_max, g.apply(op::add, {shifted, gcol}), {1}, false));
  auto e = kiln::compile(g);
  ref::buffer<T> a(R * C), b(R * C), c(R * C), s(R), m(R);
  auto at = [](const ref::buffer<T>& v, const ref::dims_t& d) {
    return kiln::tensor_ref(ref::view_of(v, d));
  };
  e.run({at(x, {R, C}), at(row, {C}), at(col, {R, 1}), at(wide, {R, C + 4})},
        {at(a, {R, C}), at(b, {R, C}), at(c, {R, C}), at(s, {R}), at(m, {R})});
  // The reference in 64-bit integers, wrapped to the type as kiln's integers wrap.
  auto in = [](const ref::buffer<T>& v, std::int64_t i) {
    return static_cast<std::int64_t>(ref::to_double(v[i]));
  };
  auto as_t = [](std::int64_t v) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<double>(static_cast<T>(v));
    else
      return ref::to_double(ref::from_double<T>(static_cast<double>(v)));
  };
  const std::string what = std::string(kiln::name(t));
  for (std::int64_t r = 0; r < R; ++r) {
    std::int64_t sum = 0, max = std::numeric_limits<std::int64_t>::min();
    for (std::int64_t j = 0; j < C; ++j) {
      const std::int64_t i = r * C + j, sh = in(wide, r * (C + 4) + j + 1);
      ASSERT_EQ(ref::to_double(a[i]), as_t(in(x, i) + in(row, j))) << what << " a " << i;
      ASSERT_EQ(ref::to_double(b[i]), as_t(in(x, i) * in(col, r))) << what << " b " << i;
      ASSERT_EQ(ref::to_double(c[i]), as_t(sh - in(x, i))) << what << " c " << i;
      sum += static_cast<std::int64_t>(as_t(in(x, i) + in(row, j)));
      max = std::max<std::int64_t>(max, static_cast<std::int64_t>(as_t(sh + in(col, r))));
    }
    ASSERT_EQ(ref::to_double(s[r]), as_t(sum)) << what << " s " << r;
    ASSERT_EQ(ref::to_double(m[r]), as_t(max)) << what << " m " << r;
  }
}

TEST(Broadcast, RowsOfWholeGroupsOfFourInEveryWidth) {
  check_whole_rows<float>(1);
  check_whole_rows<double>(2);
  check_whole_rows<kiln::float16>(3);
  check_whole_rows<kiln::bfloat16>(4);
  check_whole_rows<std::int8_t>(5);
  check_whole_rows<std::uint8_t>(6);
  check_whole_rows<std::int16_t>(7);
  check_whole_rows<std::int32_t>(8);
  check_whole_rows<std::int64_t>(9);
}
