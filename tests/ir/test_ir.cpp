// The IR: builder (type rules, deduplication, broadcast symbols), verifier messages, printer.
#include <gmock/gmock.h>

#include <kiln/ir/builder.hpp>
#include <kiln/ir/print.hpp>
#include <kiln/ir/verify.hpp>

using namespace kiln;
using ir::op;
using ::testing::HasSubstr;

TEST(Builder, DeduplicatesAndOrdersCommutativeOperands) {
  ir::builder b;
  auto x = b.input(dtype::f32, {dyn});
  auto y = b.input(dtype::f32, {dyn});
  auto s1 = b.binary(op::add, x, y);
  auto s2 = b.binary(op::add, y, x);
  EXPECT_EQ(s1, s2);
  auto d1 = b.binary(op::sub, x, y);
  auto d2 = b.binary(op::sub, y, x);
  EXPECT_NE(d1, d2);
  EXPECT_EQ(b.constant(scalar::of_float(dtype::f32, 0.5)),
            b.constant(scalar::of_float(dtype::f32, 0.5)));
  EXPECT_NE(b.constant(scalar::of_float(dtype::f32, 0.0)),
            b.constant(scalar::of_float(dtype::f32, -0.0)));
}

TEST(Builder, TypeRules) {
  ir::builder b;
  auto x = b.input(dtype::f32, {4});
  auto i = b.input(dtype::i32, {4});
  auto m = b.input(dtype::boolean, {4});
  EXPECT_EQ(b.get().nodes[b.binary(op::lt, x, x)].type, dtype::boolean);
  EXPECT_EQ(b.get().nodes[b.select(m, i, i)].type, dtype::i32);
  EXPECT_EQ(b.cast(x, dtype::f32), x);
  try {
    b.binary(op::add, x, i);
    FAIL();
  } catch (const kiln::error& e) {
    EXPECT_EQ(e.code(), errc::dtype_mismatch);
    EXPECT_THAT(e.what(), HasSubstr("kiln: add: operand types differ: f32 and i32"));
  }
  EXPECT_THROW(b.unary(op::exp, i), kiln::error);
  EXPECT_THROW(b.binary(op::logical_and, x, x), kiln::error);
  EXPECT_THROW(b.binary(op::add, m, m), kiln::error);
  try {
    b.binary(op::mul, x, b.input(dtype::f32, {3}));
    FAIL();
  } catch (const kiln::error& e) {
    EXPECT_THAT(e.what(), HasSubstr("kiln: mul: shapes [4] and [3] do not broadcast"));
  }
}

TEST(Builder, BroadcastSymbolsAreSets) {
  ir::builder b;
  auto x = b.input(dtype::f32, {dyn});
  auto y = b.input(dtype::f32, {dyn});
  auto z = b.input(dtype::f32, {dyn});
  auto xy = b.binary(op::add, x, y);
  auto xyy = b.binary(op::mul, xy, y);
  EXPECT_EQ(b.get().nodes[xy].dims, b.get().nodes[xyy].dims);
  auto left = b.binary(op::add, xy, z);
  auto right = b.binary(op::add, x, b.binary(op::add, y, z));
  EXPECT_EQ(b.get().nodes[left].dims, b.get().nodes[right].dims);
  auto s = b.binary(op::add, x, b.input(dtype::f32, {5}));
  EXPECT_EQ(b.get().nodes[s].dims, shape{5});
  EXPECT_EQ(b.get().constraints.size(), 1u);
}

TEST(Verifier, ReportsEachViolation) {
  ir::builder b;
  auto x = b.input(dtype::f32, {4});
  auto e = b.unary(op::exp, x);
  b.output(e);
  ir::graph g = b.take();
  EXPECT_TRUE(ir::verify(g).empty());
  g.nodes[1].operands[0] = 5;    // operand after its user
  g.nodes[0].type = dtype::i32;  // input disagrees with its declaration
  g.outputs.push_back(9);        // result names no node
  auto problems = ir::verify(g);
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_THAT(problems[0], HasSubstr("%0 (input): type differs from its parameter's declaration"));
  EXPECT_THAT(problems[1], HasSubstr("%1 (exp): operand 0 (%5) must name an earlier node"));
  EXPECT_THAT(problems[2], HasSubstr("output 1 names no node"));
  EXPECT_THROW(ir::verify_or_throw(g), kiln::error);
}

TEST(Printer, StableText) {
  ir::builder b;
  auto x = b.input(dtype::f32, {dyn, 3});
  auto c = b.constant(scalar::of_float(dtype::f32, 0.1));
  auto m = b.binary(op::mul, x, c);
  b.output(b.unary(op::relu, m));
  EXPECT_EQ(ir::print(b.get()),
            "graph(f32[?, 3])\n"
            "  s0 = size of input 0 axis 0\n"
            "  %0 = input 0 : f32[s0, 3]\n"
            "  %1 = constant 0.1 : f32[]\n"
            "  %2 = mul %0, %1 : f32[s0, 3]\n"
            "  %3 = relu %2 : f32[s0, 3]\n"
            "  return %3\n");
}
