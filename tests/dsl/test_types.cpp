// The DSL's types: values carry element type and extents; results are typed as expected.
#include <gtest/gtest.h>

#include <kiln/kiln.hpp>

using namespace kiln;

constexpr auto f =
    fn<tensor<f32, dyn, 768>, tensor<f32, 768>, tensor<i32, 4, 1>>([](auto x, auto b, auto k) {
      return std::tuple{x + b, x > 0.f, cast<f32>(k) * 2.f, k * 3};
    });
using results = decltype(f)::result_values;
static_assert(std::is_same_v<std::tuple_element_t<0, results>, value<f32, extents<dyn, 768>>>);
static_assert(std::is_same_v<std::tuple_element_t<1, results>, value<bool, extents<dyn, 768>>>);
static_assert(std::is_same_v<std::tuple_element_t<2, results>, value<f32, extents<4, 1>>>);
static_assert(std::is_same_v<std::tuple_element_t<3, results>, value<i32, extents<4, 1>>>);
static_assert(decltype(f)::parameter_count == 3 && decltype(f)::result_count == 4);

// Named concepts a user can test against.
static_assert(same_element_type<value<f32, extents<>>, value<f32, extents<3>>>);
static_assert(!same_element_type<value<f32, extents<>>, value<f64, extents<>>>);
static_assert(broadcastable_extents<extents<dyn, 1>, extents<5>>);
static_assert(!broadcastable_extents<extents<3>, extents<4>>);
static_assert(literal_fits<float, f16> && literal_fits<int, i8> && !literal_fits<double, i32>);
static_assert(traceable<decltype([](auto x) { return x; }), tensor<f32, 2>>);
static_assert(!traceable<decltype([](auto x, auto y) { return x + y; }), tensor<f32, 2>>);

TEST(Dsl, PlanIsAConstantExpression) {
  static_assert(f.plan.dispatch_count() == 2);  // [?, 768] and [4, 1] iteration spaces
  EXPECT_EQ(f.plan.thaw().dispatch_count(), 2);
}
