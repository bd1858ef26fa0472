// Compiler passes: folding, identities, CSE, dead code, region formation, binding limits; and the
// DSL's compile-time plan equals the plan the same passes give a graph built at run time.
#include <gmock/gmock.h>

#include <kiln/kiln.hpp>

using namespace kiln;
using ir::op;

namespace {
int count_ops(const ir::graph& g, op o) {
  int n = 0;
  for (const auto& node : g.nodes) n += node.kind == o;
  return n;
}
}  // namespace

TEST(Canonicalize, FoldsConstantsAndDropsDeadNodes) {
  ir::builder b;
  auto x = b.input(dtype::f32, {dyn});
  auto two = b.constant(scalar::of_float(dtype::f32, 2));
  auto three = b.constant(scalar::of_float(dtype::f32, 3));
  auto six = b.binary(op::mul, two, three);  // folds to 6
  b.unary(op::exp, x);                       // dead
  b.output(b.binary(op::add, x, six));
  auto p = compiler::compile(b.get());
  EXPECT_EQ(count_ops(p.graph, op::exp), 0);
  EXPECT_EQ(count_ops(p.graph, op::mul), 0);
  ASSERT_EQ(count_ops(p.graph, op::constant), 1);
  for (const auto& n : p.graph.nodes)
    if (n.kind == op::constant) {
      EXPECT_EQ(n.value.f, 6.0);
    }
}

TEST(Canonicalize, IntegerFoldingWrapsAndDividesByZeroAsZero) {
  ir::builder b;
  auto big = b.constant(scalar::of_integer(dtype::i8, 100));
  auto zero = b.constant(scalar::of_integer(dtype::i8, 0));
  auto sum = b.binary(op::add, big, big);  // 200 wraps to -56 in i8
  b.output(sum);
  b.output(b.binary(op::div, big, zero));
  auto p = compiler::compile(b.get());
  EXPECT_EQ(p.graph.nodes[p.graph.outputs[0]].value.i, -56);
  EXPECT_EQ(p.graph.nodes[p.graph.outputs[1]].value.i, 0);
}

TEST(Canonicalize, IdentitiesAndCse) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<i32, dyn>>([](auto x, auto k) {
    auto a = exp(x) * 1.f;  // -> exp(x)
    auto b = exp(x) - 0.f;  // -> exp(x), the same node
    auto c = -(-(a + b));   // -> a + b
    return std::tuple{c, k + 0};
  });
  auto p = f.plan.thaw();
  EXPECT_EQ(count_ops(p.graph, op::exp), 1);
  EXPECT_EQ(count_ops(p.graph, op::mul), 0);
  EXPECT_EQ(count_ops(p.graph, op::neg), 0);
  EXPECT_EQ(count_ops(p.graph, op::add), 1);
  EXPECT_EQ(p.graph.nodes[p.graph.outputs[1]].kind, op::input);
}

TEST(Regions, GroupedByIterationSpace) {
  ir::builder b;
  auto col = b.input(dtype::f32, {dyn, 1});
  auto row = b.input(dtype::f32, {dyn});
  auto e = b.unary(op::exp, col);
  b.output(e);
  b.output(b.binary(op::mul, e, row));
  b.output(b.unary(op::neg, e));
  auto p = compiler::compile(b.get());
  ASSERT_EQ(p.dispatch_count(), 2);
  EXPECT_EQ(p.regions[0].results, (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(p.regions[0].args, (std::vector<std::int32_t>{0}));
  EXPECT_EQ(p.regions[1].results, (std::vector<std::int32_t>{1}));
  EXPECT_EQ(p.regions[1].args, (std::vector<std::int32_t>{0, 1}));
}

TEST(Regions, RespectTheBindingLimit) {
  ir::builder b;
  std::vector<std::int32_t> in;
  for (int i = 0; i < 4; ++i) in.push_back(b.input(dtype::f32, {8}));
  b.output(b.binary(op::add, in[0], in[1]));
  b.output(b.binary(op::add, in[2], in[3]));
  auto unlimited = compiler::compile(b.get());
  EXPECT_EQ(unlimited.dispatch_count(), 1);
  compiler::options opt;
  opt.regions.max_bindings = 4;
  auto limited = compiler::compile(b.get(), opt);
  ASSERT_EQ(limited.dispatch_count(), 2);
  for (const auto& r : limited.regions) EXPECT_LE(r.binding_count(), 4);
  opt.regions.max_bindings = 2;
  EXPECT_THROW(compiler::compile(b.get(), opt), kiln::error);
}

// The DSL traces at compile time; the graph API builds at run time; the plans must be the same.
constexpr auto traced =
    fn<tensor<f32, dyn, 768>, tensor<f32, 768>, tensor<f32>>([](auto x, auto bias, auto scale) {
      auto y = (x + bias) * scale;
      return std::tuple{relu(y), y > 0.f};
    });

TEST(Plan, CompileTimeAndRunTimePathsAgree) {
  ir::builder b;
  auto x = b.input(dtype::f32, {dyn, 768});
  auto bias = b.input(dtype::f32, {768});
  auto scale = b.input(dtype::f32, {});
  auto y = b.binary(op::mul, b.binary(op::add, x, bias), scale);
  b.output(b.unary(op::relu, y));
  b.output(b.binary(op::gt, y, b.constant(scalar::of_float(dtype::f32, 0))));
  auto runtime_plan = compiler::compile(b.get());
  auto frozen = traced.plan.thaw();
  EXPECT_EQ(compiler::print(runtime_plan), compiler::print(frozen));
  EXPECT_EQ(runtime_plan.dispatch_count(), 1);
  static_assert(traced.plan.dispatch_count() == 1);
}

// The frozen plan is a structural type: it can be a template argument.
template <auto Plan>
constexpr int regions_of = Plan.dispatch_count();
static_assert(regions_of<traced.plan> == 1);
