// Bad input at the call: each mistake gives a kiln::error naming the argument and the extents.
#include <gmock/gmock.h>

#include "../support/e2e.hpp"

using namespace kiln;
using ::testing::HasSubstr;

template <class Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const kiln::error& e) {
    return e.what();
  }
  return "no error";
}

constexpr auto add2 =
    fn<tensor<f32, dyn, 3>, tensor<f32, dyn, 3>>([](auto x, auto y) { return x + y; });

TEST(CallErrors, WrongStaticExtent) {
  std::vector<float> x(8), y(6), out(6);
  auto msg = error_of([&] { add2(view(x.data(), {2, 4}), view(y.data(), {2, 3}), into(out)); });
  EXPECT_THAT(msg, HasSubstr("argument 1 has extents [2, 4]"));
  EXPECT_THAT(msg, HasSubstr("f32[?, 3]"));
}

TEST(CallErrors, WrongRank) {
  std::vector<float> x(6), y(6), out(6);
  auto msg = error_of([&] { add2(view(x.data(), {6}), view(y.data(), {2, 3}), into(out)); });
  EXPECT_THAT(msg, HasSubstr("argument 1 has rank 1"));
}

TEST(CallErrors, RunTimeSizesDoNotBroadcast) {
  std::vector<float> x(6), y(9), out(9);
  auto msg = error_of([&] { add2(view(x.data(), {2, 3}), view(y.data(), {3, 3}), into(out)); });
  EXPECT_THAT(msg, HasSubstr("kiln: fn: argument 1 axis 0 (size 2) and argument 2 axis 0 (size 3) "
                             "do not broadcast in add"));
}

TEST(CallErrors, OutputOfWrongSize) {
  std::vector<float> x(6), y(6), out(5);
  auto msg = error_of([&] { add2(view(x.data(), {2, 3}), view(y.data(), {2, 3}), into(out)); });
  EXPECT_THAT(msg, HasSubstr("result 1 is f32[2, 3] but its buffer has 5 elements"));
  std::vector<float> wide(6);
  msg = error_of([&] {
    add2(view(x.data(), {2, 3}), view(y.data(), {2, 3}), into(view(wide.data(), {3, 2})));
  });
  EXPECT_THAT(msg, HasSubstr("but its buffer has extents [3, 2]"));
}

TEST(CallErrors, NullData) {
  std::vector<float> y(6), out(6);
  auto msg = error_of([&] {
    add2(view<float>(nullptr, {2, 3}), view(y.data(), {2, 3}), into(out));
  });
  EXPECT_THAT(msg, HasSubstr("argument 1 has null data for 6 elements"));
  msg = error_of([&] {
    add2(view(y.data(), {2, 3}), view(y.data(), {2, 3}), into(view<float>(nullptr, {2, 3})));
  });
  EXPECT_THAT(msg, HasSubstr("result 1 has null data"));
}

TEST(CallErrors, EmptyNullDataIsFine) {
  std::vector<float> out;
  EXPECT_NO_THROW(add2(view<float>(nullptr, {0, 3}), view<float>(nullptr, {0, 3}), into(out)));
}

TEST(CallErrors, StaticConstraintAtRunTime) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, 4>>([](auto x, auto y) { return x * y; });
  std::vector<float> x(5), y(4), out(4);
  auto msg = error_of([&] { f(x, y, into(out)); });
  EXPECT_THAT(msg, HasSubstr("kiln: fn: argument 1 axis 0 has size 5, which does not broadcast "
                             "with 4 in mul (it must be 1 or 4)"));
}

TEST(CallErrors, PartialOverlapIsRefused) {
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) { return x + 1.f; });
  std::vector<float> x(10);
  auto msg = error_of([&] { f(std::span(x).subspan(0, 8), into(std::span(x).subspan(2, 8))); });
  EXPECT_THAT(msg, HasSubstr("result 1 overlaps argument 1"));
}

TEST(CallErrors, ViewOfTooLargeRank) {
  float v = 0;
  auto msg = error_of([&] { view(&v, {1, 1, 1, 1, 1, 1, 1, 1, 1}); });
  EXPECT_THAT(msg, HasSubstr("kiln: view: the view has rank 9, above kiln::max_rank (8)"));
  std::vector<float> small(5);
  msg = error_of([&] { view(small, {2, 3}); });
  EXPECT_THAT(msg, HasSubstr("extents [2, 3] hold 6 elements but the range has 5"));
}
