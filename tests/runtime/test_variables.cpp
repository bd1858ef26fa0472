// Variables (graph::variable, kiln::variable): persistent tensors an executable reads and assigns
// across calls. An SGD step updates its weights in place in one dispatch on the device; an update
// that reads the variable other than element by element goes through a temporary; variables are
// shared between executables and move between devices with their value; loads, saves and every
// mistake are checked. Also the in-place rule for a call's own arguments and results.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>

#include "../support/errors.hpp"

using namespace kiln;

namespace {

std::vector<device> devices() { return {device::cpu(), device::vulkan()}; }

// w <- w - lr * g, with the loss-free form of an SGD step: no results, one assignment.
executable sgd_step(std::int64_t n) {
  graph g;
  auto w = g.variable("w", dtype::f32, {n});
  auto grad = g.input("grad", dtype::f32, {n});
  auto lr = g.input("lr", dtype::f32, {});
  g.assign(w, g.sub(w, g.mul(lr, grad)));
  return compile(g);
}

TEST(Variables, SgdStepsUpdateInPlaceOnEachDevice) {
  const std::int64_t n = 1000;
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    executable exe = sgd_step(n);
    EXPECT_EQ(exe.dispatch_count(), 1);
    EXPECT_TRUE(exe.assigns_in_place("w"));
    EXPECT_EQ(exe.variable_names(), std::vector<std::string>{"w"});
    EXPECT_TRUE(exe.signature().results.empty());
    std::vector<float> w0(n), grad(n), want(n);
    for (std::int64_t i = 0; i < n; ++i) {
      w0[i] = 0.5f - 0.001f * float(i);
      grad[i] = std::sin(0.01f * float(i));
    }
    exe.variable("w").load(w0);
    EXPECT_EQ(exe.variable("w").device_name(), "host");
    want = w0;
    const float lr = 0.125f;
    for (int step = 0; step < 3; ++step) {
      exe.run({grad, lr}, {}, d);
      for (std::int64_t i = 0; i < n; ++i) want[i] = want[i] - lr * grad[i];
    }
    EXPECT_EQ(exe.variable("w").device_name(), d.name());
    std::vector<float> got(n);
    exe.variable("w").save(got);
    for (std::int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6f * std::max(1.0f, std::abs(want[i]))) << "at " << i;
    // Submitted steps on device data chain on the device, each after the one before.
    auto grad_on_device = d.upload(grad);
    fence last;
    for (int step = 0; step < 4; ++step) {
      last = exe.submit({grad_on_device, lr}, {}, d);
      for (std::int64_t i = 0; i < n; ++i) want[i] = want[i] - lr * grad[i];
    }
    last.wait();
    exe.variable("w").save(got);
    for (std::int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6f * std::max(1.0f, std::abs(want[i]))) << "at " << i;
  }
}

TEST(Variables, AnUpdateThatReadsOtherElementsGoesThroughATemporary) {
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    graph g;
    auto m = g.variable("m", dtype::f32, {3, 3});
    auto s = g.input("s", dtype::f32, {});
    g.output("before", g.reduce_sum(m, {}, false));
    g.assign(m, g.mul(g.transpose(m, {1, 0}), s));
    executable exe = compile(g);
    EXPECT_FALSE(exe.assigns_in_place("m"));
    std::vector<float> m0{1, 2, 3, 4, 5, 6, 7, 8, 9};
    exe.variable("m").load(m0);
    float before = 0;
    exe.run({2.0f}, {std::span(&before, 1)}, d);
    EXPECT_EQ(before, 45.0f);
    std::vector<float> got(9);
    exe.variable("m").save(got);
    EXPECT_EQ(got, (std::vector<float>{2, 8, 14, 4, 10, 16, 6, 12, 18}));
    exe.run({0.5f}, {std::span(&before, 1)}, d);
    EXPECT_EQ(before, 90.0f);
    exe.variable("m").save(got);
    EXPECT_EQ(got, m0);
    // A call that fails leaves the variable as it was.
    EXPECT_NE(error_of([&] {
                exe.run({std::vector<float>{1, 2}}, {std::span(&before, 1)}, d);
              }),
              "");
    exe.variable("m").save(got);
    EXPECT_EQ(got, m0);
  }
}

TEST(Variables, SharedBetweenExecutablesAndDevices) {
  graph inc;
  auto w = inc.variable("w", dtype::i32, {5});
  inc.assign(w, inc.add(w, inc.constant(1, dtype::i32)));
  executable step = compile(inc);
  graph read;
  auto r = read.variable("weights", dtype::i32, {5});
  auto x = read.input("x", dtype::i32, {5});
  read.output("y", read.mul(r, x));
  executable use = compile(read);
  use.share_variable("weights", step.variable("w"));
  EXPECT_TRUE(use.variable("weights") == step.variable("w"));
  step.variable("w").load(std::vector<std::int32_t>{10, 20, 30, 40, 50});
  std::vector<std::int32_t> xs{1, -1, 2, -2, 3}, y(5);
  step.run(device::vulkan());
  use.run({xs}, {y}, device::cpu());  // moves w to the CPU, with its value
  EXPECT_EQ(y, (std::vector<std::int32_t>{11, -21, 62, -82, 153}));
  step.run(device::cpu());
  step.run(device::vulkan());  // and back
  use.run({xs}, {y}, device::vulkan());
  EXPECT_EQ(y, (std::vector<std::int32_t>{13, -23, 66, -86, 159}));
  // A copy of an executable shares its variables.
  executable copy = step;
  copy.run(device::cpu());
  std::vector<std::int32_t> got(5);
  step.variable("w").save(got);
  EXPECT_EQ(got, (std::vector<std::int32_t>{14, 24, 34, 44, 54}));
}

TEST(Variables, MistakesAreNamed) {
  graph g;
  auto w = g.variable("w", dtype::f32, {4});
  auto x = g.input("x", dtype::f32, {4});
  EXPECT_EQ(error_of([&] { g.variable("v", dtype::f32, {dyn}); }),
            "kiln: variable: 'v' needs static extents, got [?]");
  EXPECT_EQ(error_of([&] { g.variable("w", dtype::f32, {4}); }),
            "kiln: variable: the name 'w' is used twice");
  EXPECT_EQ(error_of([&] { g.assign(x, x); }),
            "kiln: assign: operand 1 is not a variable (graph::variable gives them)");
  EXPECT_EQ(error_of([&] { g.assign(w, g.cast(x, dtype::f64)); }),
            "kiln: assign: variable 'w' is f32 but the value is f64");
  EXPECT_EQ(error_of([&] { g.assign(w, g.reduce_sum(x, {}, true)); }),
            "kiln: assign: variable 'w' has extents [4] but the value has [1]");
  g.assign(w, g.add(w, x));
  EXPECT_EQ(error_of([&] { g.assign(w, x); }), "kiln: assign: variable 'w' is assigned twice");
  executable exe = compile(g);
  EXPECT_EQ(exe.input_names(), std::vector<std::string>{"x"});  // a variable is no argument
  EXPECT_EQ(error_of([&] { exe.variable("v"); }),
            "kiln: " + exe.name() + ": has no variable named 'v'");
  EXPECT_EQ(error_of([&] { exe.variable("w").load(std::vector<float>(3)); }),
            "kiln: variable::load: 'w' holds 4 elements (f32[4]) but the host data has 3");
  EXPECT_EQ(error_of([&] { exe.variable("w").load(std::vector<double>(4)); }),
            "kiln: variable::load: 'w' is f32[4] but the host data is f64");
  EXPECT_EQ(error_of([&] { exe.share_variable("w", kiln::variable("u", dtype::f32, {5})); }),
            "kiln: " + exe.name() + ": variable 'w' is f32[4] but the one given ('u') is f32[5]");
  // The code says which of the two differs.
  try {
    exe.share_variable("w", kiln::variable("u", dtype::f32, {5}));
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
  }
  try {
    exe.share_variable("w", kiln::variable("u", dtype::f64, {4}));
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::dtype_mismatch);
  }
  EXPECT_EQ(error_of([&] { exe.variable("w").load_bytes(nullptr, 16); }),
            "kiln: variable::load: 'w': the data pointer is null (16 bytes)");
  EXPECT_EQ(error_of([&] { exe.variable("w").save_bytes(nullptr, 16); }),
            "kiln: variable::save: 'w': the data pointer is null (16 bytes)");
  kiln::variable u("u", std::vector<float>{1, 2, 3, 4}, {4});
  exe.share_variable("w", u);
  std::vector<float> xs{1, 1, 1, 1};
  exe.run({xs}, {});
  std::vector<float> got(4);
  u.save(got);
  EXPECT_EQ(got, (std::vector<float>{2, 3, 4, 5}));
}

// The DSL's door: a variable is a buffer (buffer_on), updated in place with into(...).
constexpr auto dsl_sgd = fn<tensor<f32, 64>, tensor<f32, 64>, tensor<f32>>(
    [](auto w, auto grad, auto lr) { return w - lr * grad; });
static_assert(dsl_sgd.plan.dispatch_count() == 1);

TEST(Variables, DslUpdatesThroughItsBuffer) {
  kiln::variable w("w", std::vector<float>(64, 1.0f), {64});
  std::vector<float> grad(64);
  for (int i = 0; i < 64; ++i) grad[i] = float(i) / 8;
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    auto wb = w.buffer_on<float>(d);
    dsl_sgd.on(d)(wb, grad, 0.5f, into(wb));
    dsl_sgd.on(d)(wb, grad, 0.5f, into(wb));
  }
  std::vector<float> got(64);
  w.save(got);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(got[i], 1.0f - 4 * (0.5f * grad[i])) << "at " << i;
  EXPECT_EQ(error_of([&] { w.buffer_on<double>(device::cpu()); }),
            "kiln: variable::buffer_on: 'w' is f32[64], not f64");
}

// A call's own result in the memory of its argument: allowed where the plan reads each element
// before writing it, refused (with the reason) where it reads others.
TEST(Variables, InPlaceArgumentsFollowThePlan) {
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    graph g;
    auto x = g.input("x", dtype::f32, {3, 3});
    g.output("y", g.add(g.mul(x, g.constant(2.0)), g.constant(1.0)));
    executable twice = compile(g);
    graph t;
    auto tx = t.input("x", dtype::f32, {3, 3});
    t.output("y", t.add(t.transpose(tx, {1, 0}), t.constant(0.0)));
    executable transpose = compile(t);
    EXPECT_EQ(transpose.dispatch_count(), 1);
    auto buf = d.upload(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}, shape{3, 3});
    twice.run({buf}, {buf}, d);
    std::vector<float> got(9);
    buf.download(got);
    EXPECT_EQ(got, (std::vector<float>{3, 5, 7, 9, 11, 13, 15, 17, 19}));
    EXPECT_NE(error_of([&] { transpose.run({buf}, {buf}, d); })
                  .find("result 1 overlaps argument 1; the function reads that argument other "
                        "than element by element"),
              std::string::npos);
    buf.download(got);
    EXPECT_EQ(got, (std::vector<float>{3, 5, 7, 9, 11, 13, 15, 17, 19}));
  }
}

}  // namespace
