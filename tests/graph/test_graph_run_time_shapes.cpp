// Shapes computed from run-time sizes (graph::extent): an attention block's head split and merge,
// a flatten for a matmul and its inverse, reshapes that infer a size, all compiled once and run at
// several batch and sequence sizes on the CPU and on Vulkan against scalar loops; a saved module
// keeps the sizes; a quotient that does not divide is refused at the call.
#include <gmock/gmock.h>

#include <cmath>
#include <string>
#include <vector>

#include <kiln/executable.hpp>

#include "../support/errors.hpp"
#include "../support/on_device.hpp"

using namespace kiln;

namespace {

class RunTimeShapes : public ref::on_device {};

KILN_ON_BOTH_DEVICES(RunTimeShapes);

std::vector<float> wave(std::size_t n, double f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(std::sin(f * double(i) + 0.37 * double(i % 5)));
  return v;
}

// x [B, S, 8] with B and S known at the call:
//   heads: x split into 2 heads of 4, each head's rows scaled by its head number + 1, merged
//          again ([B, S, 2, 4] -> [B, 2, S, 4] -> [B, S, 2, 4] -> [B, S, 8]);
//   dense: x flattened to [B x S, 8] (the -1 inferred), times w [8, 3], back to [B, S, 3] with B
//          as the quotient (B x S) / S;
//   pairs: x as [B x S x 2, 4] (sizes given as extents).
struct attention_shapes {
  graph g;
  attention_shapes() {
    auto x = g.input("x", dtype::f32, {dyn, dyn, 8});
    auto w = g.input("w", dtype::f32, {8, 3});
    const graph::extent b = g.extent_of(x, 0), s = g.extent_of(x, 1);
    const std::vector<graph::extent> split = {b, s, 2, 4};
    auto per_head = g.transpose(g.reshape(x, split), {0, 2, 1, 3});
    std::vector<float> scale = {1.f, 2.f};
    auto scaled = g.mul(per_head, g.constant(scale.data(), dtype::f32, 2, shape{1, 2, 1, 1}));
    const std::vector<graph::extent> merged = {0, 0, 8};
    g.output("heads", g.reshape(g.transpose(scaled, {0, 2, 1, 3}), merged));
    const std::vector<graph::extent> flat = {-1, 8};
    auto rows = g.reshape(x, flat);
    const graph::extent tokens = g.extent_of(rows, 0);
    const std::vector<graph::extent> back = {g.quotient(tokens, s), s, 3};
    g.output("dense", g.reshape(g.matmul(rows, w), back));
    const std::vector<graph::extent> pairs = {g.product(tokens, 2), 4};
    g.output("pairs", g.reshape(x, pairs));
  }
};

TEST_P(RunTimeShapes, AnAttentionBlocksReshapesRunAtAnySize) {
  attention_shapes a;
  executable e = compile(a.g);
  const std::vector<float> w = wave(24, 0.61);
  for (auto [b, s] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {2, 5}, {3, 17}}) {
    SCOPED_TRACE("B " + std::to_string(b) + ", S " + std::to_string(s));
    const std::vector<float> x = wave(static_cast<std::size_t>(b * s * 8), 0.3);
    std::vector<float> heads(x.size()), dense(static_cast<std::size_t>(b * s * 3)), pairs(x.size());
    e.run({tensor_ref(x.data(), dtype::f32, {b, s, 8}), tensor_ref(w.data(), dtype::f32, {8, 3})},
          {tensor_ref(heads.data(), dtype::f32, {b, s, 8}),
           tensor_ref(dense.data(), dtype::f32, {b, s, 3}),
           tensor_ref(pairs.data(), dtype::f32, {b * s * 2, 4})},
          dev());
    for (std::int64_t i = 0; i < b * s * 8; ++i) {
      const float head_scale = i % 8 < 4 ? 1.f : 2.f;  // feature i % 8 is in head (i % 8) / 4
      ASSERT_EQ(heads[i], x[i] * head_scale) << "element " << i;
      ASSERT_EQ(pairs[i], x[i]) << "element " << i;
    }
    for (std::int64_t t = 0; t < b * s; ++t)
      for (int j = 0; j < 3; ++j) {
        double want = 0, bound = 0;
        for (int k = 0; k < 8; ++k) {
          want += double(x[t * 8 + k]) * w[k * 3 + j];
          bound += std::fabs(double(x[t * 8 + k]) * w[k * 3 + j]);
        }
        ASSERT_NEAR(dense[t * 3 + j], want, 8 * 6e-8 * bound + 1e-7) << "token " << t;
      }
  }
}

TEST_P(RunTimeShapes, ASavedModuleKeepsTheComputedSizes) {
  attention_shapes a;
  executable loaded = executable::from_bytes(compile(a.g).to_bytes());
  const std::int64_t b = 2, s = 3;
  const std::vector<float> x = wave(b * s * 8, 0.2), w = wave(24, 0.5);
  std::vector<float> heads(x.size()), dense(b * s * 3), pairs(x.size());
  loaded.run(
      {tensor_ref(x.data(), dtype::f32, {b, s, 8}), tensor_ref(w.data(), dtype::f32, {8, 3})},
      {tensor_ref(heads.data(), dtype::f32, {b, s, 8}),
       tensor_ref(dense.data(), dtype::f32, {b, s, 3}),
       tensor_ref(pairs.data(), dtype::f32, {b * s * 2, 4})},
      dev());
  for (std::int64_t i = 0; i < b * s * 8; ++i) ASSERT_EQ(pairs[i], x[i]) << "element " << i;
  // A result buffer of the wrong computed extent is refused, naming the extents it must have.
  std::vector<float> short_pairs(x.size() - 8);
  EXPECT_THAT(error_of([&] {
                loaded.run({tensor_ref(x.data(), dtype::f32, {b, s, 8}),
                            tensor_ref(w.data(), dtype::f32, {8, 3})},
                           {tensor_ref(heads.data(), dtype::f32, {b, s, 8}),
                            tensor_ref(dense.data(), dtype::f32, {b, s, 3}),
                            tensor_ref(short_pairs.data(), dtype::f32, {b * s * 2 - 2, 4})},
                           dev());
              }),
              ::testing::HasSubstr("result 3 is f32[12, 4]"));
}

TEST_P(RunTimeShapes, AQuotientThatDoesNotDivideIsRefusedAtTheCall) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn});
  const std::vector<graph::extent> thirds = {g.quotient(g.extent_of(x, 0), 3), 3};
  g.output("y", g.reshape(x, thirds));
  g.quotient(g.extent_of(x, 0), 5);  // a size no node uses: no check at the call
  executable e = compile(g);
  std::vector<float> nine = wave(9, 0.4), y(9);
  e.run({tensor_ref(nine.data(), dtype::f32, {9})}, {tensor_ref(y.data(), dtype::f32, {3, 3})},
        dev());
  EXPECT_EQ(y, nine);
  std::vector<float> ten(10);
  EXPECT_THAT(error_of([&] {
                e.run({tensor_ref(ten.data(), dtype::f32, {10})},
                      {tensor_ref(y.data(), dtype::f32, {3, 3})}, dev());
              }),
              ::testing::HasSubstr("argument 1 axis 0 has size 10, which a shape of the graph "
                                   "divides by 3: not a multiple of it"));
}

TEST(RunTimeShapeErrors, ReshapesThatCannotHoldNameTheSizes) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn, dyn, 8});
  const std::vector<graph::extent> lost = {g.extent_of(x, 0), 8};
  EXPECT_THAT(error_of([&] { g.reshape(x, lost); }),
              ::testing::HasSubstr("the run-time sizes of the two differ"));
  const std::vector<graph::extent> two_inferred = {-1, -1};
  EXPECT_THAT(error_of([&] { g.reshape(x, two_inferred); }),
              ::testing::HasSubstr("more than one size of -1"));
  EXPECT_THAT(error_of([&] { g.quotient(g.extent_of(x, 0), g.extent_of(x, 1)); }),
              ::testing::HasSubstr("kiln divides run-time sizes by static sizes"));
  EXPECT_THAT(error_of([&] { g.extent_of(x, 3); }), ::testing::HasSubstr("axis 3"));
  // A static -1 inferred against run-time sizes (the sizes list of ints, as before extents).
  auto rows = g.reshape(x, {-1, 4});
  EXPECT_FALSE(g.extent_of(rows, 0).is_static());
  EXPECT_EQ(g.extent_of(rows, 1).size(), 4);
  // The product of the same sizes in any order is one size: the sum of the two flattenings has
  // it (no broadcast of two run-time sizes).
  const std::vector<graph::extent> flat = {g.product(g.extent_of(x, 1), g.extent_of(x, 0)), 8};
  auto inferred = g.reshape(x, {-1, 8});
  auto sum = g.add(g.reshape(x, flat), inferred);
  EXPECT_EQ(g.extent_of(sum, 0), g.extent_of(inferred, 0));
  EXPECT_EQ(g.extent_of(sum, 0), flat[0]);
}

}  // namespace
