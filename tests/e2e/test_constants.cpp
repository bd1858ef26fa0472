// Tensor constants in the run-time graph: host data of any rank and dtype kept by the
// executable, read as an argument is (fused, broadcast), never an input of the compiled function.
// Runs on the default device and, as e2e.cpu.test_constants, on the CPU.
#include <cmath>

#include "../support/e2e.hpp"

namespace {

using kiln::dtype;

TEST(Constants, WeightsAndTablesFuseLikeArguments) {
  // y = x * w + table, w [3, 4] and table [4] constants, x [?, 3, 4].
  std::vector<float> w(12), table = {0.5f, -1.0f, 2.0f, 0.25f};
  for (int i = 0; i < 12; ++i) w[i] = 0.1f * float(i) - 0.3f;
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {kiln::dyn, 3, 4});
  auto wc = g.constant(w, {3, 4});
  auto tc = g.constant(table, {4});
  g.output("y", g.add(g.mul(x, wc), tc));
  // The graph copied the data: changing it now changes nothing.
  w.assign(12, 100.0f);
  auto e = kiln::compile(g);
  EXPECT_EQ(e.input_names(), std::vector<std::string>{"x"});
  EXPECT_EQ(e.dispatch_count(), 1);
  for (int calls = 0; calls < 2; ++calls) {  // the second call reuses the uploaded constants
    auto in = ref::random_data<float>(5 * 12, -2, 2, 7 + calls);
    std::vector<float> y(5 * 12);
    e.run({kiln::view(in.data(), {5, 3, 4})}, {kiln::view(y.data(), {5, 3, 4})});
    for (int i = 0; i < 60; ++i) {
      float wi = 0.1f * float(i % 12) - 0.3f;
      EXPECT_NEAR(y[i], double(in[i]) * wi + table[i % 4], 1e-6) << i;
    }
  }
}

TEST(Constants, AnyDtypeAndRankAndInterleavedWithInputs) {
  // An i32 lookup of rank 0 and an i64 [2, 1] constant between two inputs: the parameters keep
  // their order, the constants take their places.
  kiln::graph g;
  auto a = g.input("a", dtype::i64, {2, 3});
  std::vector<std::int64_t> offsets = {1000, -1000};
  auto c = g.constant(offsets, {2, 1});
  std::vector<std::int32_t> seven = {7};
  auto s = g.constant(seven, {});
  auto b = g.input("b", dtype::i32, {3});
  g.output("y", g.add(g.add(a, c), g.cast(g.mul(b, s), dtype::i64)));
  auto e = kiln::compile(g);
  EXPECT_EQ(e.input_names(), (std::vector<std::string>{"a", "b"}));
  std::vector<std::int64_t> av = {1, 2, 3, 4, 5, 6}, y(6);
  std::vector<std::int32_t> bv = {1, -2, 3};
  e.run({kiln::view(av.data(), {2, 3}), kiln::view(bv.data(), {3})},
        {kiln::view(y.data(), {2, 3})});
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(y[r * 3 + k], av[r * 3 + k] + offsets[r] + 7 * bv[k]) << r << "," << k;
  // By name too; the constants are not among the names.
  e.run({{"b", kiln::view(bv.data(), {3})}, {"a", kiln::view(av.data(), {2, 3})}},
        {{"y", kiln::view(y.data(), {2, 3})}});
  EXPECT_EQ(y[0], 1 + 1000 + 7);
}

TEST(Constants, SameExecutableOnCpuAndDefaultDevice) {
  std::vector<float> w = {1.5f, -2.0f};
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {2});
  g.output("y", g.mul(x, g.constant(w, {2})));
  auto e = kiln::compile(g);
  std::vector<float> in = {2, 3}, y1(2), y2(2);
  e.run({kiln::view(in.data(), {2})}, {kiln::view(y1.data(), {2})}, kiln::device::cpu());
  e.run({kiln::view(in.data(), {2})}, {kiln::view(y2.data(), {2})});
  EXPECT_EQ(y1, (std::vector<float>{3, -6}));
  EXPECT_EQ(y2, y1);
}

// The DSL door: kiln::table literals in the lambda, kept by the function (one upload per
// device), fused like arguments.
TEST(Constants, DslTablesFuseLikeArguments) {
  constexpr auto f = kiln::fn<kiln::tensor<float, kiln::dyn, 4>>([](auto x) {
    return x * kiln::table<float, 4>{{0.5f, -1.0f, 2.0f, 0.25f}} +
           kiln::table<float, 3, 1>{{10, 20, 30}};
  });
  static_assert(f.plan.dispatch_count() == 1);
  static_assert(f.plan.sizes.inputs == 3 && f.plan.sizes.tensors == 2);
  const float scale[4] = {0.5f, -1.0f, 2.0f, 0.25f}, shift[3] = {10, 20, 30};
  std::vector<float> in(12), y(12);
  for (int i = 0; i < 12; ++i) in[i] = float(i) - 3.5f;
  for (auto d : {kiln::device::default_device(), kiln::device::cpu()})
    for (int calls = 0; calls < 2; ++calls) {  // the second call reuses what the first uploaded
      std::fill(y.begin(), y.end(), 0.0f);
      f.on(d)(kiln::view(in.data(), {3, 4}), kiln::into(kiln::view(y.data(), {3, 4})));
      for (int i = 0; i < 12; ++i) EXPECT_EQ(y[i], in[i] * scale[i % 4] + shift[i / 4]) << i;
    }
  // Integer tables, and the value returned by the call.
  constexpr auto g = kiln::fn<kiln::tensor<std::int32_t, 2, 3>>([](auto x) {
    return kiln::max(x, kiln::table<std::int32_t, 3>{{-1, 5, 100}});
  });
  std::vector<std::int32_t> xi = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(g(kiln::view(xi.data(), {2, 3})), (std::vector<std::int32_t>{0, 5, 100, 3, 5, 100}));
}

TEST(Constants, Errors) {
  kiln::graph g;
  std::vector<float> five(5);
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const kiln::error& e) {
      EXPECT_EQ(e.op(), "constant");
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              g.constant(five, {2, 3});
            }).find("hold 6 elements but the data has 5"),
            std::string::npos);
  EXPECT_NE(message([&] { g.constant(five, {kiln::dyn}); }).find("static extents"),
            std::string::npos);
  // The compiled function counts only its parameters.
  auto x = g.input("x", dtype::f32, {5});
  g.output("y", g.add(x, g.constant(five, {5})));
  auto e = kiln::compile(g);
  std::vector<float> y(5);
  try {
    e.run({}, {kiln::view(y.data(), {5})});
    ADD_FAILURE() << "no error";
  } catch (const kiln::error& err) {
    EXPECT_NE(std::string(err.what()).find("takes 1 arguments (x), got 0"), std::string::npos)
        << err.what();
  }
  // A constant made before a parameter does not shift the parameter's number in messages.
  kiln::graph h;
  auto k = h.constant(five, {5});
  auto z = h.input("z", dtype::f32, {5});
  h.output("y", h.add(z, k));
  std::vector<float> four(4);
  try {
    kiln::compile(h).run({kiln::view(four.data(), {4})}, {kiln::view(y.data(), {5})});
    ADD_FAILURE() << "no error";
  } catch (const kiln::error& err) {
    EXPECT_NE(std::string(err.what()).find("argument 1"), std::string::npos) << err.what();
  }
}

}  // namespace
