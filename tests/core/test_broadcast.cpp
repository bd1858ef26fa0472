// Broadcasting rules as constexpr functions, checked against numbers worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include <kiln/core/broadcast.hpp>
#include <kiln/core/convert.hpp>

using kiln::dyn;
using kiln::shape;

static_assert(*kiln::broadcast_shapes(shape{4, 1, 3}, shape{5, 1}) == shape{4, 5, 3});
static_assert(*kiln::broadcast_shapes(shape{}, shape{7}) == shape{7});
static_assert(*kiln::broadcast_shapes(shape{dyn, 768}, shape{768}) == shape{dyn, 768});
static_assert(*kiln::broadcast_shapes(shape{dyn}, shape{5}) == shape{5});
static_assert(*kiln::broadcast_shapes(shape{dyn}, shape{1}) == shape{dyn});
static_assert(!kiln::broadcastable(shape{3}, shape{4}));
static_assert(!kiln::broadcastable(shape{2, 3}, shape{3, 3}));

TEST(Broadcast, ToString) {
  EXPECT_EQ(kiln::to_string(shape{dyn, 768}), "[?, 768]");
  EXPECT_EQ(kiln::to_string(shape{}), "[]");
}

TEST(Convert, FloatToIntegerSaturates) {
  using kiln::dtype;
  static_assert(kiln::float_to_integer(dtype::i8, 1000.0) == 127);
  static_assert(kiln::float_to_integer(dtype::i8, -1000.0) == -128);
  static_assert(kiln::float_to_integer(dtype::u8, -3.5) == 0);
  static_assert(kiln::float_to_integer(dtype::i32, -2.9) == -2);
  static_assert(kiln::float_to_integer(dtype::i64, 1e300) == INT64_MAX);
  static_assert(kiln::float_to_integer(dtype::i64, -9223372036854775808.0) == INT64_MIN);
  EXPECT_EQ(kiln::float_to_integer(dtype::i32, NAN), 0);
  static_assert(kiln::wrap_integer(dtype::i8, 200) == -56);
  static_assert(kiln::wrap_integer(dtype::u8, -1) == 255);
  static_assert(kiln::scalar::of_integer(dtype::boolean, 5).to(dtype::f32).f == 1.0);
}
