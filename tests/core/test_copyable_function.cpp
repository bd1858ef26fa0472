// copyable_function: owns a copy of its callable, copies clone it, moves take it, and each held
// object is destroyed exactly once.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include <kiln/core/copyable_function.hpp>

namespace {

// Counts the live copies of itself in `alive`, and how often it has been called in `calls`.
struct counted {
  int* alive;
  int calls = 0;
  explicit counted(int* a) : alive(a) { ++*alive; }
  counted(const counted& o) : alive(o.alive), calls(o.calls) { ++*alive; }
  counted(counted&& o) noexcept : alive(o.alive), calls(o.calls) { ++*alive; }
  ~counted() { --*alive; }
  int operator()(int x) { return x + ++calls; }
};

}  // namespace

TEST(CopyableFunction, CallsWhatItHoldsWithItsArguments) {
  // A reference passed through as a reference (the same object), a value as a value.
  kiln::copyable_function<const std::string*(const std::string&, std::unique_ptr<int>)> f =
      [](const std::string& s, std::unique_ptr<int> p) { return *p == 42 ? &s : nullptr; };
  ASSERT_TRUE(f);
  const std::string name = "x";
  EXPECT_EQ(f(name, std::make_unique<int>(42)), &name);
  EXPECT_EQ(f(name, std::make_unique<int>(7)), nullptr);
}

TEST(CopyableFunction, EmptyUntilGivenACallable) {
  kiln::copyable_function<void()> a;
  kiln::copyable_function<void()> b = nullptr;
  kiln::copyable_function<void()> c = {};
  EXPECT_FALSE(a);
  EXPECT_FALSE(b);
  EXPECT_FALSE(c);
  int hits = 0;
  c = [&] { ++hits; };
  ASSERT_TRUE(c);
  c();
  EXPECT_EQ(hits, 1);
  c = nullptr;
  EXPECT_FALSE(c);
  // A function pointer holds its function, a null one nothing (std::function's rule).
  int (*const plus_one)(int) = [](int x) { return x + 1; };
  int (*const none)(int) = nullptr;
  kiln::copyable_function<int(int)> d = plus_one, e = none;
  ASSERT_TRUE(d);
  EXPECT_EQ(d(2), 3);
  EXPECT_FALSE(e);
}

TEST(CopyableFunction, ACopyHasItsOwnStateAndEachObjectDiesOnce) {
  int alive = 0;
  {
    kiln::copyable_function<int(int)> f = counted(&alive);
    EXPECT_EQ(alive, 1);  // the temporary is gone: only the held object remains
    EXPECT_EQ(f(10), 11);
    kiln::copyable_function<int(int)> g = f;
    EXPECT_EQ(alive, 2);
    EXPECT_EQ(g(10), 12);  // the copy carries the state so far (one call) ...
    EXPECT_EQ(g(10), 13);
    EXPECT_EQ(f(10), 12);  // ... and the original does not see the copy's calls
    f = g;                 // assigning replaces (destroys) f's object with a copy of g's
    EXPECT_EQ(alive, 2);
    EXPECT_EQ(f(0), 4);  // g had been called three times
  }
  EXPECT_EQ(alive, 0);
}

TEST(CopyableFunction, AMoveTakesTheObjectAndLeavesTheSourceEmpty) {
  int alive = 0;
  {
    kiln::copyable_function<int(int)> f = counted(&alive);
    kiln::copyable_function<int(int)> g = std::move(f);
    EXPECT_EQ(alive, 1);  // the object itself moved: no copy made
    EXPECT_FALSE(f);      // NOLINT(bugprone-use-after-move): the state after a move is specified
    ASSERT_TRUE(g);
    EXPECT_EQ(g(1), 2);
    kiln::copyable_function<int(int)> h;
    h = std::move(g);
    EXPECT_EQ(alive, 1);
    EXPECT_FALSE(g);  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(h(1), 3);
  }
  EXPECT_EQ(alive, 0);
}

TEST(CopyableFunction, HoldsWhatItCapturesUntilDestroyed) {
  auto shared = std::make_shared<int>(7);
  std::weak_ptr<int> watch = shared;
  {
    kiln::copyable_function<int()> f = [p = std::move(shared)] { return *p; };
    EXPECT_EQ(f(), 7);
    EXPECT_FALSE(watch.expired());
  }
  EXPECT_TRUE(watch.expired());
}

TEST(CopyableFunction, ConvertsTheResultAsDeclared) {
  kiln::copyable_function<double(int)> half = [](int x) { return x / 2.0f; };
  EXPECT_EQ(half(3), 1.5);
  kiln::copyable_function<void(int)> ignores = [](int x) { return x; };  // result dropped
  ignores(1);
}
