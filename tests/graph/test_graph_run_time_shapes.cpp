// Shapes computed from run-time sizes (graph::extent): an attention block's head split and merge,
// a flatten for a matmul and its inverse, reshapes that infer a size, all compiled once and run at
// several batch and sequence sizes on the CPU and on Vulkan against scalar loops; a saved module
// keeps the sizes; a quotient that does not divide is refused at the call. Sums of run-time sizes:
// a key-value cache grown by a concat of run-time lengths and attended over, pieces of static and
// run-time sizes joined, a size below zero refused at the call.
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

// A decoder step's cache: past [P, 4] and new [T, 4] (P and T known at the call) joined into
// present [P + T, 4], then attended over by q [1, 4]: scores q present' [1, P + T], their row
// softmax, times present. The softmax and products run over the sum of the two run-time sizes.
struct kv_cache {
  graph g;
  kv_cache() {
    auto past = g.input("past", dtype::f32, {dyn, 4});
    auto fresh = g.input("new", dtype::f32, {dyn, 4});
    auto q = g.input("q", dtype::f32, {1, 4});
    auto present = g.concat({past, fresh}, 0);
    g.output("present", present);
    auto probs = g.softmax(g.matmul(q, g.transpose(present)), -1);
    g.output("attended", g.matmul(probs, present));
  }
};

TEST_P(RunTimeShapes, ACacheGrownByRunTimeLengthsRunsAtAnyLength) {
  kv_cache c;
  executable e = compile(c.g);
  const std::vector<float> q = wave(4, 0.9);
  for (auto [p, t] : {std::pair<std::int64_t, std::int64_t>{3, 1}, {1, 1}, {9, 2}, {0, 3}}) {
    SCOPED_TRACE("P " + std::to_string(p) + ", T " + std::to_string(t));
    const std::vector<float> past = wave(static_cast<std::size_t>(p * 4), 0.3),
                             fresh = wave(static_cast<std::size_t>(t * 4), 0.7);
    std::vector<float> present(static_cast<std::size_t>((p + t) * 4)), attended(4);
    e.run({tensor_ref(past.data(), dtype::f32, {p, 4}),
           tensor_ref(fresh.data(), dtype::f32, {t, 4}), tensor_ref(q.data(), dtype::f32, {1, 4})},
          {tensor_ref(present.data(), dtype::f32, {p + t, 4}),
           tensor_ref(attended.data(), dtype::f32, {1, 4})},
          dev());
    std::vector<float> want = past;
    want.insert(want.end(), fresh.begin(), fresh.end());
    ASSERT_EQ(present, want);
    std::vector<double> score(static_cast<std::size_t>(p + t));
    double top = -1e300, total = 0;
    for (std::int64_t j = 0; j < p + t; ++j) {
      for (int k = 0; k < 4; ++k) score[j] += double(q[k]) * want[j * 4 + k];
      top = std::max(top, score[j]);
    }
    for (double& x : score) total += x = std::exp(x - top);
    for (int k = 0; k < 4; ++k) {
      double r = 0;
      for (std::int64_t j = 0; j < p + t; ++j) r += score[j] / total * want[j * 4 + k];
      ASSERT_NEAR(attended[k], r, 1e-5) << "feature " << k;
    }
  }
  // A saved module keeps the sums.
  executable loaded = executable::from_bytes(e.to_bytes());
  const std::vector<float> past = wave(8, 0.1), fresh = wave(4, 0.2);
  std::vector<float> present(12), attended(4);
  loaded.run(
      {tensor_ref(past.data(), dtype::f32, {2, 4}), tensor_ref(fresh.data(), dtype::f32, {1, 4}),
       tensor_ref(q.data(), dtype::f32, {1, 4})},
      {tensor_ref(present.data(), dtype::f32, {3, 4}),
       tensor_ref(attended.data(), dtype::f32, {1, 4})},
      dev());
  std::vector<float> want = past;
  want.insert(want.end(), fresh.begin(), fresh.end());
  EXPECT_EQ(present, want);
  // Its result extents follow from the argument extents before any call.
  const std::vector<shape> args = {shape{5, 4}, shape{2, 4}, shape{1, 4}};
  EXPECT_EQ(e.result_dims(args)[0], (shape{7, 4}));
}

TEST_P(RunTimeShapes, PiecesOfStaticAndRunTimeSizesJoin) {
  graph g;
  auto a = g.input("a", dtype::i32, {dyn});
  auto b = g.input("b", dtype::i32, {dyn});
  const std::int32_t mid[] = {-1, -2};
  auto joined = g.concat({a, g.constant(mid, dtype::i32, 2, shape{2}), b, a}, 0);
  g.output("y", g.add(joined, g.constant(std::int64_t{100}, dtype::i32)));
  executable e = compile(g);
  for (auto [n, m] : {std::pair<std::int64_t, std::int64_t>{2, 3}, {5, 1}, {1, 0}}) {
    std::vector<std::int32_t> x(static_cast<std::size_t>(n)), z(static_cast<std::size_t>(m));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::int32_t>(10 + i);
    for (std::size_t i = 0; i < z.size(); ++i) z[i] = static_cast<std::int32_t>(20 + i);
    std::vector<std::int32_t> want;
    for (std::int32_t v : x) want.push_back(v + 100);
    want.insert(want.end(), {99, 98});
    for (std::int32_t v : z) want.push_back(v + 100);
    for (std::int32_t v : x) want.push_back(v + 100);
    std::vector<std::int32_t> y(want.size());
    e.run({tensor_ref(x.data(), dtype::i32, {n}), tensor_ref(z.data(), dtype::i32, {m})},
          {tensor_ref(y.data(), dtype::i32, {2 * n + m + 2})}, dev());
    EXPECT_EQ(y, want) << "n " << n << ", m " << m;
  }
}

TEST_P(RunTimeShapes, ASizeBelowZeroIsRefusedAtTheCall) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn});
  const graph::extent n = g.extent_of(x, 0);
  const std::vector<graph::extent> shorter = {g.difference(n, 2)};
  g.output("y", g.expand(g.constant(1.5, dtype::f32), shorter));
  executable e = compile(g);
  std::vector<float> five(5), y(3);
  e.run({tensor_ref(five.data(), dtype::f32, {5})}, {tensor_ref(y.data(), dtype::f32, {3})}, dev());
  EXPECT_EQ(y, (std::vector<float>{1.5f, 1.5f, 1.5f}));
  EXPECT_THAT(error_of([&] {
                e.run({tensor_ref(five.data(), dtype::f32, {1})},
                      {tensor_ref(y.data(), dtype::f32, {0})}, dev());
              }),
              ::testing::HasSubstr("argument 1 axis 0 has size 1, to which a shape of the graph "
                                   "adds -2: below zero"));
}

// Two parameters that share a run-time size (ONNX inputs naming one dimension "batch") meet
// without a broadcast: their sum reshapes to the first one's extents; a call whose sizes differ
// there is refused naming both; a saved module keeps the sharing.
TEST_P(RunTimeShapes, ParametersThatShareASizeHaveOneSymbol) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn, dyn});
  const std::vector<graph::extent> rows = {g.extent_of(x, 0), 1};
  auto bias = g.input("bias", dtype::f32, rows);
  auto y = g.add(x, bias);
  EXPECT_EQ(g.extent_of(y, 0), g.extent_of(x, 0));
  const std::vector<graph::extent> flat = {g.product(g.extent_of(x, 0), g.extent_of(x, 1))};
  g.output("y", g.reshape(y, flat));
  executable e = executable::from_bytes(compile(g).to_bytes());
  const std::vector<float> xs = wave(6, 0.4), bs = {10.f, 20.f, 30.f};
  std::vector<float> ys(6);
  e.run({tensor_ref(xs.data(), dtype::f32, {3, 2}), tensor_ref(bs.data(), dtype::f32, {3, 1})},
        {tensor_ref(ys.data(), dtype::f32, {6})}, dev());
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(ys[i], xs[i] + bs[i / 2]) << "element " << i;
  EXPECT_THAT(error_of([&] {
                e.run({tensor_ref(xs.data(), dtype::f32, {3, 2}),
                       tensor_ref(bs.data(), dtype::f32, {1, 1})},
                      {tensor_ref(ys.data(), dtype::f32, {6})}, dev());
              }),
              ::testing::HasSubstr("argument 2 has extents [1, 1], but its axis 0 is the size of "
                                   "argument 1 axis 0 (3)"));
}

// Shape arithmetic as exporters compute it: n / 3 rounded down, min(n, 4), max(n, 2).
TEST_P(RunTimeShapes, QuotientsRoundedDownAndBoundsRunAtAnySize) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn});
  const graph::extent n = g.extent_of(x, 0);
  const std::vector<graph::extent> sizes = {g.floor_quotient(n, 3), g.minimum(n, 4),
                                            g.maximum(2, n)};
  g.output("y", g.expand(g.constant(0.5, dtype::f32), sizes));
  executable e = compile(g);
  for (std::int64_t size : {7, 1, 12}) {
    const shape want{size / 3, std::min<std::int64_t>(size, 4), std::max<std::int64_t>(size, 2)};
    const std::vector<shape> args = {shape{size}};
    ASSERT_EQ(e.result_dims(args)[0], want) << "n " << size;
    std::vector<float> xs(static_cast<std::size_t>(size)),
        y(static_cast<std::size_t>(want.element_count()), -1.f);
    e.run({tensor_ref(xs.data(), dtype::f32, {size})}, {tensor_ref(y.data(), dtype::f32, want)},
          dev());
    EXPECT_EQ(y, std::vector<float>(y.size(), 0.5f)) << "n " << size;
  }
  EXPECT_EQ(g.floor_quotient(g.product(n, 6), 3), g.product(n, 2));  // exact where it can be
  EXPECT_THAT(error_of([&] { g.minimum(n, n); }), ::testing::HasSubstr("one must be static"));
}

// Ranges of run-time length (graph::range over extents): a decoder step's position ids [P, P + T)
// looked up in a table and added to the new tokens; even numbers up to T as f32 (delta 2); P down
// to 1 as i32 (delta -1); 0 to P + T as i64 on its own. Worked out by hand at each (P, T), T and
// P of 0 included, the last large enough that the runtime's table of positions grows; from a
// saved module as well.
TEST_P(RunTimeShapes, RangesOfRunTimeLengthCountAtEachCall) {
  graph g;
  auto past = g.input("past", dtype::f32, {dyn});
  auto x = g.input("x", dtype::f32, {dyn, 3});
  const graph::extent p = g.extent_of(past, 0), t = g.extent_of(x, 0), total = g.sum(p, t);
  std::vector<float> table(16 * 3);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) * 0.5f;
  auto ids = g.range(p, total);
  g.output("y", g.add(x, g.gather(g.constant(table.data(), dtype::f32, table.size(), shape{16, 3}),
                                  ids, 0)));
  g.output("evens", g.range(0, t, 2, dtype::f32));
  g.output("down", g.range(p, 0, -1, dtype::i32));
  g.output("all", g.range(0, total));
  executable compiled = compile(g);
  executable loaded = executable::from_bytes(compiled.to_bytes());
  for (const executable* e : {&compiled, &loaded})
    for (auto [np, nt] :
         {std::pair<std::int64_t, std::int64_t>{2, 3}, {0, 5}, {7, 1}, {4, 0}, {9, 3000}}) {
      SCOPED_TRACE("P " + std::to_string(np) + ", T " + std::to_string(nt));
      const bool looked_up = np + nt <= 16;  // (the table's rows; past them gather clamps)
      std::vector<float> pv(static_cast<std::size_t>(np)),
          xv = wave(std::size_t(nt * 3), 0.3), y(xv.size()), evens(std::size_t((nt + 1) / 2));
      std::vector<std::int32_t> down(static_cast<std::size_t>(np));
      std::vector<std::int64_t> all(static_cast<std::size_t>(np + nt));
      e->run({tensor_ref(pv.data(), dtype::f32, {np}), tensor_ref(xv.data(), dtype::f32, {nt, 3})},
             {tensor_ref(y.data(), dtype::f32, {nt, 3}),
              tensor_ref(evens.data(), dtype::f32, {std::int64_t(evens.size())}),
              tensor_ref(down.data(), dtype::i32, {np}),
              tensor_ref(all.data(), dtype::i64, {np + nt})},
             dev());
      if (looked_up)
        for (std::int64_t i = 0; i < nt * 3; ++i)
          ASSERT_EQ(y[i], xv[i] + 0.5f * static_cast<float>((np + i / 3) * 3 + i % 3)) << i;
      for (std::size_t i = 0; i < evens.size(); ++i)
        ASSERT_EQ(evens[i], static_cast<float>(2 * i)) << i;
      for (std::int64_t i = 0; i < np; ++i) ASSERT_EQ(down[i], np - i) << i;
      for (std::int64_t i = 0; i < np + nt; ++i) ASSERT_EQ(all[i], i) << i;
    }
}

// Slices at run-time positions (graph::slice over extents): rows [P, P + T) of a static table
// added to the new tokens (a decoder's causal mask rows), and x[2:] of a run-time length; read in
// place, from a saved module as well; a window past the table's end is refused at the call.
TEST_P(RunTimeShapes, SlicesAtRunTimePositionsReadInPlace) {
  graph g;
  auto past = g.input("past", dtype::f32, {dyn});
  auto x = g.input("x", dtype::f32, {dyn, 4});
  const graph::extent p = g.extent_of(past, 0), t = g.extent_of(x, 0);
  std::vector<float> table(16 * 4);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  auto rows =
      g.slice(g.constant(table.data(), dtype::f32, table.size(), shape{16, 4}), 0, p, g.sum(p, t));
  g.output("y", g.add(x, rows));
  g.output("tail", g.mul(g.slice(past, 0, 2, p), g.constant(2.0)));
  executable compiled = compile(g);
  executable loaded = executable::from_bytes(compiled.to_bytes());
  for (const executable* e : {&compiled, &loaded})
    for (auto [np, nt] : {std::pair<std::int64_t, std::int64_t>{2, 3}, {5, 11}, {16, 0}, {3, 1}}) {
      SCOPED_TRACE("P " + std::to_string(np) + ", T " + std::to_string(nt));
      const std::vector<float> pv = wave(std::size_t(np), 0.7), xv = wave(std::size_t(nt * 4), 0.3);
      std::vector<float> y(xv.size()), tail(std::size_t(np - 2));
      e->run({tensor_ref(pv.data(), dtype::f32, {np}), tensor_ref(xv.data(), dtype::f32, {nt, 4})},
             {tensor_ref(y.data(), dtype::f32, {nt, 4}),
              tensor_ref(tail.data(), dtype::f32, {np - 2})},
             dev());
      for (std::int64_t i = 0; i < nt * 4; ++i)
        ASSERT_EQ(y[i], xv[i] + static_cast<float>(np * 4 + i)) << i;
      for (std::int64_t i = 0; i + 2 < np; ++i) ASSERT_EQ(tail[i], 2.0f * pv[i + 2]) << i;
    }
  std::vector<float> pv(9), xv(8 * 4), y(xv.size()), tail(7);
  EXPECT_THAT(
      error_of([&] {
        compiled.run(
            {tensor_ref(pv.data(), dtype::f32, {9}), tensor_ref(xv.data(), dtype::f32, {8, 4})},
            {tensor_ref(y.data(), dtype::f32, {8, 4}), tensor_ref(tail.data(), dtype::f32, {7})},
            dev());
      }),
      ::testing::HasSubstr("has size 17, which reads past the end of 16"));
  std::vector<float> one(1), none;
  EXPECT_THAT(
      error_of([&] {
        compiled.run(
            {tensor_ref(one.data(), dtype::f32, {1}), tensor_ref(none.data(), dtype::f32, {0, 4})},
            {tensor_ref(none.data(), dtype::f32, {0, 4}), tensor_ref(none.data(), dtype::f32, {0})},
            dev());
      }),
      ::testing::HasSubstr("adds -2: below zero"));
}

TEST(RunTimeShapeErrors, SumsAreOneSizeAndDifferencesNeedTheirPieces) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn, dyn});
  const graph::extent p = g.extent_of(x, 0), t = g.extent_of(x, 1);
  // p + t + 1 in any order is one size; taking p out again leaves t + 1, taking t + 1 leaves p.
  const graph::extent total = g.sum(g.sum(p, 1), t);
  EXPECT_EQ(total, g.sum(t, g.sum(1, p)));
  EXPECT_EQ(g.difference(total, p), g.sum(t, 1));
  EXPECT_EQ(g.difference(total, g.sum(t, 1)), p);
  EXPECT_EQ(g.difference(g.sum(p, 3), p).size(), 3);
  EXPECT_EQ(g.sum(4, 5).size(), 9);
  EXPECT_THAT(error_of([&] { g.difference(p, t); }),
              ::testing::HasSubstr("kiln subtracts run-time sizes only from sums that hold them"));
  EXPECT_THAT(error_of([&] { g.difference(2, 3); }), ::testing::HasSubstr("below zero"));
  const std::vector<graph::extent> computed = {total};
  EXPECT_THAT(error_of([&] { g.input("y", dtype::f32, computed); }),
              ::testing::HasSubstr("shares only another parameter's own run-time size"));
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
