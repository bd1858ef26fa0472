// thread_kept: memory a thread keeps from one use to the next, none shared between threads or
// with a use inside a use.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include <kiln/core/thread_kept.hpp>

namespace {

// A type of this test's own, so no kiln code shares its kept value.
struct numbers {
  std::vector<int> values;
};

}  // namespace

TEST(ThreadKept, TheNextUseOnAThreadFindsItsMemory) {
  const int* first = nullptr;
  {
    kiln::thread_kept<numbers> a;
    a->values.assign(100, 7);
    first = a->values.data();
  }
  kiln::thread_kept<numbers> b;
  EXPECT_EQ(b->values.data(), first);  // the same allocation, not a new one
  EXPECT_EQ(b->values.size(), 100u);   // and what was left in it: users clear what they reuse
}

TEST(ThreadKept, AUseInsideAUseStartsEmptyAndTheOuterOneIsKept) {
  {
    kiln::thread_kept<numbers> warm;
    warm->values.assign(10, 1);
  }
  const int* outer_data = nullptr;
  {
    kiln::thread_kept<numbers> outer;
    ASSERT_EQ(outer->values.size(), 10u);
    outer_data = outer->values.data();
    {
      kiln::thread_kept<numbers> inner;
      EXPECT_TRUE(inner->values.empty());
      inner->values.assign(3, 2);
      EXPECT_EQ(outer->values.data(), outer_data);  // untouched by the inner use
      EXPECT_EQ(outer->values[0], 1);
    }
    outer->values.assign(20, 5);
    outer_data = outer->values.data();
  }
  // The inner one was given back first; the outer one, given back last, is what stays kept.
  kiln::thread_kept<numbers> after;
  EXPECT_EQ(after->values.data(), outer_data);
  EXPECT_EQ(after->values.size(), 20u);
}

TEST(ThreadKept, EachThreadKeepsItsOwn) {
  {
    kiln::thread_kept<numbers> here;
    here->values.assign(50, 3);
  }
  std::size_t seen_there = 1;
  std::thread([&] {
    kiln::thread_kept<numbers> there;
    seen_there = there->values.size();
  }).join();
  EXPECT_EQ(seen_there, 0u);
  kiln::thread_kept<numbers> here;
  EXPECT_EQ(here->values.size(), 50u);
}
