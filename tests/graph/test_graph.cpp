// The run-time door: kiln::graph built at run time, kiln::compile, executable::run by name and by
// position on the CPU (tiled interpreter) and on Vulkan, checked against hand-written scalar loops;
// and every mistake a framework can make, as a kiln::error naming what is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <thread>

#include <kiln/executable.hpp>
#include <kiln/runtime/vulkan/context.hpp>

#include "../support/errors.hpp"
#include "../support/on_device.hpp"
#include "../support/reference.hpp"
#include "../support/subnormals.hpp"

using namespace kiln;

namespace {

// "x12": a name and a number (two appends: GCC 12 misreads "x" + to_string(...), -Wrestrict).
std::string numbered(const char* name, int i) {
  std::string s = name;
  s += std::to_string(i);
  return s;
}

std::vector<float> ramp(std::size_t n, float start, float step) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

// y = tanh(x * w + b) over x[rows, cols], w[cols] (broadcast over rows), b a scalar; and x > 0.
struct layer {
  graph g;
  layer() {
    auto x = g.input("x", dtype::f32, {dyn, dyn});
    auto w = g.input("w", dtype::f32, {dyn});
    auto b = g.input("b", dtype::f32, {});
    g.output("y", g.tanh(g.add(g.mul(x, w), b)));
    g.output("positive", g.gt(x, g.constant(0.0)));
  }
};

void expect_layer(const std::vector<float>& x, const std::vector<float>& w, float b,
                  const std::vector<float>& y, const bool* positive) {
  std::size_t cols = w.size();
  for (std::size_t i = 0; i < x.size(); ++i) {
    float want = std::tanh(x[i] * w[i % cols] + b);
    ASSERT_NEAR(y[i], want, 2e-6 * std::fabs(want) + 1e-7) << "element " << i;
    ASSERT_EQ(positive[i], x[i] > 0) << "element " << i;
  }
}

class GraphOnDevice : public ref::on_device {};

TEST_P(GraphOnDevice, RunsByNameAtManySizes) {
  layer l;
  executable exe = compile(l.g);
  // Two spaces: y's is x's broadcast with w's size (x may be [rows, 1]), positive's is x's.
  EXPECT_EQ(exe.dispatch_count(), 2);
  // Rows x cols: empty, a single element, below and past a SIMD width, past one tile (256), and
  // large enough for threads.
  const std::pair<std::int64_t, std::int64_t> sizes[] = {{0, 5},   {1, 1},    {3, 7},
                                                         {2, 300}, {5, 1027}, {300, 700}};
  for (auto [rows, cols] : sizes) {
    auto x = ramp(static_cast<std::size_t>(rows * cols), -3.f, 0.0007f);
    auto w = ramp(static_cast<std::size_t>(cols), -1.f, 0.013f);
    float b = 0.25f;
    std::vector<float> y(x.size());
    std::unique_ptr<bool[]> positive(new bool[x.size() + 1]);
    exe.run({{"w", view(w.data(), {cols})}, {"x", view(x.data(), {rows, cols})}, {"b", b}},
            {{"positive", view(positive.get(), {rows, cols})}, {"y", view(y.data(), {rows, cols})}},
            dev());
    expect_layer(x, w, b, y, positive.get());
  }
}

// Rows of four elements whose inputs are read across them (a detector's boxes: [576, 4] from a
// transposed [4, 576]) run a block of rows as one row: every kind of input (transposed f32, i8
// and f64, one value per row, row-major, one value for all) against a scalar loop, at sizes on
// one thread and on several.
TEST_P(GraphOnDevice, ShortRowsReadAcrossTheirInputsMatchAScalarLoop) {
  constexpr std::int64_t side = 4;
  graph g;
  auto deltas = g.input("deltas", dtype::f32, {side, dyn});
  auto codes = g.input("codes", dtype::i8, {side, dyn});
  auto wide = g.input("wide", dtype::f64, {side, dyn});
  auto per_row = g.input("per_row", dtype::f32, {dyn, 1});
  auto anchors = g.input("anchors", dtype::f32, {dyn, side});
  auto boxes = g.add(g.mul(g.transpose(deltas, {1, 0}), per_row), anchors);
  g.output("boxes",
           g.add(boxes, g.mul(g.cast(g.transpose(codes, {1, 0}), dtype::f32), g.constant(0.5))));
  g.output("wide_t", g.mul(g.transpose(wide, {1, 0}), g.constant(3.0, dtype::f64)));
  executable exe = compile(g);
  // Rows: past a 128-row block and not a multiple of it; past the threads' threshold.
  for (const std::int64_t cells : {std::int64_t{579}, std::int64_t{10007}}) {
    const auto n = static_cast<std::size_t>(side * cells);
    auto d = ramp(n, -2.f, 0.001f), r = ramp(static_cast<std::size_t>(cells), 0.5f, 0.01f);
    auto a = ramp(n, 1.f, -0.0003f);
    std::vector<std::int8_t> c(n);
    std::vector<double> w(n);
    for (std::size_t i = 0; i < n; ++i) {
      c[i] = static_cast<std::int8_t>(static_cast<int>(i * 37 % 255) - 127);
      w[i] = 0.125 * static_cast<double>(i) - 7.0;
    }
    std::vector<float> boxes_out(n, -1.f);
    std::vector<double> wide_out(n, -1.0);
    exe.run({{"deltas", view(d.data(), {side, cells})},
             {"codes", view(c.data(), {side, cells})},
             {"wide", view(w.data(), {side, cells})},
             {"per_row", view(r.data(), {cells, 1})},
             {"anchors", view(a.data(), {cells, side})}},
            {{"boxes", view(boxes_out.data(), {cells, side})},
             {"wide_t", view(wide_out.data(), {cells, side})}},
            dev());
    for (std::int64_t i = 0; i < cells; ++i)
      for (std::int64_t j = 0; j < side; ++j) {
        const float box = d[j * cells + i] * r[i] + a[i * side + j];
        ASSERT_EQ(boxes_out[i * side + j], box + static_cast<float>(c[j * cells + i]) * 0.5f)
            << cells << " rows: row " << i << ", element " << j;
        ASSERT_EQ(wide_out[i * side + j], w[j * cells + i] * 3.0)
            << cells << " rows: row " << i << ", element " << j;
      }
  }
}

TEST_P(GraphOnDevice, RunsByPositionWithTypeErasedData) {
  layer l;
  executable exe = compile(l.g);
  auto x = ramp(4 * 9, -2.f, 0.1f), w = ramp(9, 0.5f, 0.1f);
  float b = -0.5f;
  std::vector<float> y(x.size());
  std::unique_ptr<bool[]> positive(new bool[x.size()]);
  // As a framework holding only pointers and dtypes would call it.
  std::vector<tensor_ref> args = {
      tensor_ref(static_cast<const void*>(x.data()), dtype::f32, {4, 9}),
      tensor_ref(static_cast<const void*>(w.data()), dtype::f32, {9}),
      tensor_ref(static_cast<const void*>(&b), dtype::f32, {})};
  std::vector<tensor_ref> results = {
      tensor_ref(static_cast<void*>(y.data()), dtype::f32, {4, 9}),
      tensor_ref(static_cast<void*>(positive.get()), dtype::boolean, {4, 9})};
  exe.run(args, results, dev());
  expect_layer(x, w, b, y, positive.get());
}

TEST_P(GraphOnDevice, LongChainsReuseSlotsAndKeepEveryResult) {
  // 40 ops of mixed dtypes in one region: slots are recycled as values die; results stay.
  graph g;
  auto x = g.input("x", dtype::f32, {dyn});
  auto v = x;
  for (int i = 0; i < 10; ++i) {
    v = g.add(g.mul(v, g.constant(0.5)), g.constant(1.0 + i));
    v = g.sin(v);
  }
  auto wide = g.cast(v, dtype::f64);  // widening: a slot of 8-byte lanes
  auto n = g.cast(g.mul(x, g.constant(10.0)), dtype::i64);
  g.output("v", v);
  g.output("wide", g.sqrt(g.add(g.mul(wide, wide), g.constant(1.0, dtype::f64))));
  g.output("n", g.sub(n, g.constant(3, dtype::i64)));
  executable exe = compile(g);
  EXPECT_EQ(exe.dispatch_count(), 1);
  auto xs = ramp(1000, -5.f, 0.01f);
  std::vector<float> vs(xs.size());
  std::vector<double> wides(xs.size());
  std::vector<std::int64_t> ns(xs.size());
  exe.run({{"x", xs}}, {{"v", vs}, {"wide", wides}, {"n", ns}}, dev());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    float r = xs[i];
    for (int k = 0; k < 10; ++k) r = std::sin(r * 0.5f + (1.f + k));
    ASSERT_NEAR(vs[i], r, 2e-5) << i;
    double d = static_cast<double>(vs[i]);
    ASSERT_NEAR(wides[i], std::sqrt(d * d + 1), 1e-12) << i;
    ASSERT_EQ(ns[i], static_cast<std::int64_t>(xs[i] * 10.f) - 3) << i;
  }
}

KILN_ON_BOTH_DEVICES(GraphOnDevice);

// top_k against a stable sort of each row's positions (a NaN above every number, equal elements
// by position): ties, NaN, infinities, each axis, largest and smallest, k of 0, 2 and the whole
// axis; and an integer tensor.
TEST_P(GraphOnDevice, TopKOrdersAsAStableSortDoes) {
  const std::int64_t dims[3] = {3, 7, 5};
  const float inf = INFINITY, nan = NAN;
  const float pool[] = {1.5f, -2, 1.5f, nan, 0, -inf, inf, 1.5f, -0.5f, nan, 3, 0};
  std::vector<float> x(3 * 7 * 5);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = pool[(i * 7 + i / 5) % 12];
  auto before = [](float a, float b, bool largest) {  // a strictly before b
    if (std::isnan(a) || std::isnan(b))
      return largest ? std::isnan(a) && !std::isnan(b) : std::isnan(b) && !std::isnan(a);
    return largest ? a > b : a < b;
  };
  for (int axis : {0, 1, -1})
    for (bool largest : {true, false})
      for (std::int64_t k : {std::int64_t{0}, std::int64_t{2}, std::int64_t{-1}}) {
        const int a = axis < 0 ? 2 : axis;
        const std::int64_t n = dims[a], kk = k < 0 ? n : k;
        SCOPED_TRACE("axis " + std::to_string(axis) + (largest ? " largest" : " smallest") + " k " +
                     std::to_string(kk));
        graph g;
        auto [values, indices] = g.top_k(g.input("x", dtype::f32, {3, 7, 5}), kk, axis, largest);
        g.output("values", values);
        g.output("indices", indices);
        auto e = compile(g);
        std::int64_t out_dims[3] = {3, 7, 5};
        out_dims[a] = kk;
        const std::size_t count = static_cast<std::size_t>(out_dims[0] * out_dims[1] * out_dims[2]);
        std::vector<float> got(count, -7);
        std::vector<std::int64_t> at(count, -7);
        e.run({tensor_ref(x.data(), dtype::f32, {3, 7, 5})},
              {tensor_ref(got.data(), dtype::f32, {out_dims[0], out_dims[1], out_dims[2]}),
               tensor_ref(at.data(), dtype::i64, {out_dims[0], out_dims[1], out_dims[2]})},
              dev());
        const std::int64_t stride[3] = {35, 5, 1},
                           out_stride[3] = {out_dims[1] * out_dims[2], out_dims[2], 1};
        for (std::int64_t p = 0; p < 3; ++p)
          for (std::int64_t q = 0; q < 7; ++q)
            for (std::int64_t r = 0; r < 5; ++r) {
              const std::int64_t idx[3] = {p, q, r};
              if (idx[a] != 0) continue;  // one row per position with axis a at 0
              const std::int64_t base = p * stride[0] + q * stride[1] + r * stride[2];
              std::vector<std::int64_t> order(static_cast<std::size_t>(n));
              std::iota(order.begin(), order.end(), 0);
              std::stable_sort(order.begin(), order.end(), [&](std::int64_t u, std::int64_t v) {
                return before(x[base + u * stride[a]], x[base + v * stride[a]], largest);
              });
              const std::int64_t out_base =
                  p * out_stride[0] + q * out_stride[1] + r * out_stride[2];
              for (std::int64_t j = 0; j < kk; ++j) {
                const std::size_t o = static_cast<std::size_t>(out_base + j * out_stride[a]);
                const float want = x[base + order[j] * stride[a]];
                ASSERT_EQ(at[o], order[j])
                    << "row at " << p << "," << q << "," << r << " place " << j;
                if (std::isnan(want))
                  ASSERT_TRUE(std::isnan(got[o])) << o;
                else
                  ASSERT_EQ(got[o], want) << o;
              }
            }
      }
  // Integers: the two smallest of each row of an i32 [2, 6], ties by position.
  graph g;
  auto [values, indices] = g.top_k(g.input("x", dtype::i32, {2, 6}), 2, 1, false);
  g.output("values", values);
  g.output("indices", indices);
  auto e = compile(g);
  std::vector<std::int32_t> xi{4, -1, 7, -1, 0, 9, 5, 5, 5, 2, 8, 2}, vi(4);
  std::vector<std::int64_t> ii(4);
  e.run({tensor_ref(xi.data(), dtype::i32, {2, 6})},
        {tensor_ref(vi.data(), dtype::i32, {2, 2}), tensor_ref(ii.data(), dtype::i64, {2, 2})},
        dev());
  EXPECT_EQ(vi, (std::vector<std::int32_t>{-1, -1, 2, 2}));
  EXPECT_EQ(ii, (std::vector<std::int64_t>{1, 3, 3, 5}));
  // k beyond the axis, a bool tensor: refused naming top_k.
  graph bad;
  EXPECT_THROW(bad.top_k(bad.input("x", dtype::f32, {4}), 5), kiln::error);
  EXPECT_THROW(bad.top_k(bad.input("b", dtype::boolean, {4}), 1), kiln::error);
}

// An i32 widened to i64 then compared: llvmpipe compared an OpSConvert result as though it were
// zero-extended (sext(-1) < 0 false), so the SPIR-V lowering sign-extends by two shifts instead.
TEST_P(GraphOnDevice, WidenedSignedIntegersCompareAsSigned) {
  graph g;
  auto x = g.cast(g.input("x", dtype::i32, {6}), dtype::i64);
  g.output("negative", g.lt(x, g.constant(0, dtype::i64)));
  g.output("wrapped",
           g.select(g.lt(x, g.constant(0, dtype::i64)), g.add(x, g.constant(5, dtype::i64)), x));
  auto e = compile(g);
  std::vector<std::int32_t> xv{-1, 2, 5, -3, 0, std::numeric_limits<std::int32_t>::min()};
  bool negative[6] = {};
  std::vector<std::int64_t> wrapped(6);
  e.run({tensor_ref(xv.data(), dtype::i32, {6})},
        {tensor_ref(static_cast<void*>(negative), dtype::boolean, {6}),
         tensor_ref(wrapped.data(), dtype::i64, {6})},
        dev());
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(negative[i], xv[i] < 0) << i;
    EXPECT_EQ(wrapped[i], xv[i] < 0 ? std::int64_t{xv[i]} + 5 : xv[i]) << i;
  }
}

// scatter_elements against a loop applying each update in turn (row-major over the indices, so
// along the axis in order): every reduction, repeated and negative indices, an index outside the
// axis (updates nothing), indices smaller than data off the axis, each axis, i32 indices.
TEST_P(GraphOnDevice, ScatterElementsAsALoopInOrder) {
  const std::int64_t D[3] = {3, 5, 4}, S[3] = {2, 3, 3};
  std::vector<float> data(60), updates(18);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = float(int(i * 7 % 11) - 5) * 0.5f;
  for (std::size_t i = 0; i < updates.size(); ++i) updates[i] = float(int(i * 5 % 9) - 3);
  for (int axis : {0, 1, -1})
    for (const char* reduction : {"none", "add", "mul", "max", "min"}) {
      const int a = axis < 0 ? 2 : axis;
      SCOPED_TRACE(std::string("axis ") + std::to_string(axis) + " " + reduction);
      // Indices along the axis: repeats, a negative one, one past the axis (every 7th).
      std::vector<std::int32_t> at(18);
      for (std::size_t i = 0; i < at.size(); ++i) {
        const auto n = static_cast<std::int32_t>(D[a]);
        at[i] = i % 7 == 6 ? n : static_cast<std::int32_t>(i * 3 % 5) % n - (i % 4 == 3 ? n : 0);
      }
      graph g;  // (inputs one by one: their order is the arguments')
      auto x = g.input("data", dtype::f32, {3, 5, 4});
      auto where = g.input("at", dtype::i32, {2, 3, 3});
      auto u = g.input("u", dtype::f32, {2, 3, 3});
      g.output("y", g.scatter_elements(x, where, u, axis, reduction));
      auto e = compile(g);
      std::vector<float> got(60, -99), want = data;
      e.run({tensor_ref(data.data(), dtype::f32, {3, 5, 4}),
             tensor_ref(at.data(), dtype::i32, {2, 3, 3}),
             tensor_ref(updates.data(), dtype::f32, {2, 3, 3})},
            {tensor_ref(got.data(), dtype::f32, {3, 5, 4})}, dev());
      for (std::int64_t p = 0; p < S[0]; ++p)
        for (std::int64_t q = 0; q < S[1]; ++q)
          for (std::int64_t r = 0; r < S[2]; ++r) {
            const std::size_t i = static_cast<std::size_t>((p * S[1] + q) * S[2] + r);
            std::int64_t pos[3] = {p, q, r};
            std::int64_t to = at[i] < 0 ? at[i] + D[a] : at[i];
            if (to < 0 || to >= D[a]) continue;
            pos[a] = to;
            float& y = want[static_cast<std::size_t>((pos[0] * D[1] + pos[1]) * D[2] + pos[2])];
            const std::string_view how = reduction;
            y = how == "none"  ? updates[i]
                : how == "add" ? y + updates[i]
                : how == "mul" ? y * updates[i]
                : how == "max" ? std::max(y, updates[i])
                               : std::min(y, updates[i]);
          }
      EXPECT_EQ(got, want);
    }
  // Refusals: a reduction kiln does not know, indices larger than data off the axis.
  graph bad;
  auto x = bad.input("x", dtype::f32, {2, 2});
  auto i = bad.input("i", dtype::i64, {2, 2});
  EXPECT_THROW(bad.scatter_elements(x, i, x, 0, "mean"), kiln::error);
  auto wide = bad.input("w", dtype::i64, {2, 3});
  EXPECT_THROW(bad.scatter_elements(x, wide, bad.input("u", dtype::f32, {2, 3}), 0), kiln::error);
}

// scatter_nd against a loop over the index tuples in order: tuples of 1, 2 and 3 components into
// data [4, 3, 2], with a repeat, a negative component and one outside its axis (nothing lands).
TEST_P(GraphOnDevice, ScatterNdAsALoopInOrder) {
  const std::int64_t D[3] = {4, 3, 2};
  std::vector<float> data(24);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = float(int(i * 5 % 7) - 3);
  for (std::int64_t k : {1, 2, 3})
    for (const char* reduction : {"none", "add", "max"}) {
      SCOPED_TRACE(std::to_string(k) + " components, " + reduction);
      // Five tuples: the first repeated as the fourth, a negative component, one outside.
      const std::int64_t tuples[5][3] = {{1, 2, 1}, {-1, 0, 0}, {0, 1, -2}, {1, 2, 1}, {2, 3, 2}};
      std::vector<std::int64_t> at;
      for (const auto& t : tuples)
        for (std::int64_t j = 0; j < k; ++j) at.push_back(t[j] == 3 && j > 0 ? D[j] : t[j]);
      std::int64_t rest = 1;
      for (std::int64_t j = k; j < 3; ++j) rest *= D[j];
      std::vector<float> updates(static_cast<std::size_t>(5 * rest));
      for (std::size_t i = 0; i < updates.size(); ++i) updates[i] = float(10 + i);
      std::vector<std::int64_t> u_dims{5};
      for (std::int64_t j = k; j < 3; ++j) u_dims.push_back(D[j]);
      graph g;
      auto x = g.input("data", dtype::f32, {4, 3, 2});
      auto where = g.input("at", dtype::i64, {5, k});
      auto u = g.input("u", dtype::f32, shape(u_dims));
      g.output("y", g.scatter_nd(x, where, u, reduction));
      auto e = compile(g);
      std::vector<float> got(24, -99), want = data;
      e.run({tensor_ref(data.data(), dtype::f32, {4, 3, 2}),
             tensor_ref(at.data(), dtype::i64, {5, k}),
             tensor_ref(updates.data(), dtype::f32, shape(u_dims))},
            {tensor_ref(got.data(), dtype::f32, {4, 3, 2})}, dev());
      for (std::int64_t t = 0; t < 5; ++t) {
        std::int64_t first = 0;
        bool inside = true;
        for (std::int64_t j = 0; j < k; ++j) {
          std::int64_t c = at[static_cast<std::size_t>(t * k + j)];
          c = c < 0 ? c + D[j] : c;
          inside = inside && c >= 0 && c < D[j];
          first = first * D[j] + c;
        }
        if (!inside) continue;
        for (std::int64_t r = 0; r < rest; ++r) {
          float& y = want[static_cast<std::size_t>(first * rest + r)];
          const float v = updates[static_cast<std::size_t>(t * rest + r)];
          const std::string_view how = reduction;
          y = how == "none" ? v : how == "add" ? y + v : std::max(y, v);
        }
      }
      EXPECT_EQ(got, want);
    }
}

// det against Laplace's expansion in double (not elimination, as kiln computes it): matrices that
// need a row swap (a zero first element), a singular one, n of 1 to 5, a batch, f32 and f64;
// within 1e-5 (f32) or 1e-12 (f64) of Hadamard's bound, the product of the rows' norms.
double laplace(const std::vector<double>& m, std::int64_t n) {
  if (n == 1) return m[0];
  double sum = 0;
  for (std::int64_t c = 0; c < n; ++c) {
    std::vector<double> minor;
    for (std::int64_t r = 1; r < n; ++r)
      for (std::int64_t k = 0; k < n; ++k)
        if (k != c) minor.push_back(m[static_cast<std::size_t>(r * n + k)]);
    sum += (c % 2 ? -1 : 1) * m[static_cast<std::size_t>(c)] * laplace(minor, n - 1);
  }
  return sum;
}

TEST_P(GraphOnDevice, DetAsLaplacesExpansion) {
  for (auto [t, n] :
       {std::pair{dtype::f32, std::int64_t{1}}, std::pair{dtype::f32, std::int64_t{2}},
        std::pair{dtype::f32, std::int64_t{5}}, std::pair{dtype::f64, std::int64_t{3}}}) {
    const std::int64_t batch = 3;
    SCOPED_TRACE(std::string(kiln::name(t)) + " n " + std::to_string(n));
    std::vector<double> m(static_cast<std::size_t>(batch * n * n));
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = std::sin(0.7 * double(i) + 0.3) * 2;
    m[0] = 0;   // matrix 0 needs a row swap
    if (n > 1)  // matrix 1 is singular: its last row repeats its first
      for (std::int64_t k = 0; k < n; ++k)
        m[static_cast<std::size_t>(n * n + (n - 1) * n + k)] =
            m[static_cast<std::size_t>(n * n + k)];
    graph g;
    g.output("det", g.det(g.input("x", t, {batch, n, n})));
    auto e = compile(g);
    std::vector<double> got(batch);
    if (t == dtype::f32) {
      std::vector<float> x(m.begin(), m.end()), y(batch);
      for (std::size_t i = 0; i < x.size(); ++i) m[i] = x[i];  // the reference sees the floats
      e.run({tensor_ref(x.data(), t, {batch, n, n})}, {tensor_ref(y.data(), t, {batch})}, dev());
      got.assign(y.begin(), y.end());
    } else {
      std::vector<double> y(batch);
      e.run({tensor_ref(m.data(), t, {batch, n, n})}, {tensor_ref(y.data(), t, {batch})}, dev());
      got = y;
    }
    for (std::int64_t b = 0; b < batch; ++b) {
      std::vector<double> one(m.begin() + b * n * n, m.begin() + (b + 1) * n * n);
      double bound = 1;
      for (std::int64_t r = 0; r < n; ++r) {
        double norm = 0;
        for (std::int64_t k = 0; k < n; ++k) norm += one[r * n + k] * one[r * n + k];
        bound *= std::sqrt(norm);
      }
      EXPECT_NEAR(got[b], laplace(one, n), (t == dtype::f32 ? 1e-5 : 1e-12) * bound) << b;
    }
  }
  graph bad;
  EXPECT_THROW(bad.det(bad.input("x", dtype::f32, {2, 3})), kiln::error);
  EXPECT_THROW(bad.det(bad.input("i", dtype::i32, {2, 2})), kiln::error);
}

TEST(Graph, DeviceBuffersStayOnTheVulkanDevice) {
  graph g;
  auto a = g.input("a", dtype::i32, {dyn});
  g.output("twice", g.add(a, a));
  executable exe = compile(g);
  device d = device::vulkan();
  std::vector<std::int32_t> host(5000);
  std::iota(host.begin(), host.end(), -2500);
  auto in = d.upload(host);
  auto out = d.alloc<std::int32_t>(5000);
  exe.run({{"a", in}}, {{"twice", out}}, d);
  exe.run({{"a", out}}, {{"twice", in}}, d);  // the result of one call feeds the next
  std::vector<std::int32_t> back(5000);
  in.download(back);
  for (std::size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], 4 * host[i]) << i;
}

// 70 results of one space: on Vulkan (at most 64 storage buffers a stage here) the region is
// formed again for the device, in two dispatches; on the CPU more pointers than a row keeps on
// the stack.
TEST_P(GraphOnDevice, MoreResultsThanTheDeviceBindsSplitTheRegion) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn});
  for (int r = 0; r < 70; ++r)
    g.output(numbered("y", r), g.add(g.mul(x, g.constant(r)), g.constant(1.0)));
  executable exe = compile(g);
  EXPECT_EQ(exe.dispatch_count(), 1);
  auto xs = ramp(3000, -1.f, 0.01f);
  std::vector<std::vector<float>> ys(70, std::vector<float>(xs.size()));
  std::vector<tensor_ref> results(ys.begin(), ys.end());
  std::vector<tensor_ref> args = {xs};
  exe.run(args, results, dev());
  for (int r = 0; r < 70; ++r)
    for (std::size_t i = 0; i < xs.size(); ++i)
      ASSERT_EQ(ys[r][i], xs[i] * float(r) + 1.f) << "result " << r << " element " << i;
  if (GetParam()) {
    std::uint32_t limit = device::vulkan().context()->target().max_storage_buffers;
    auto kernels = exe.kernels();
    EXPECT_EQ(kernels.size(), (70 + limit - 3) / (limit - 2)) << "limit " << limit;
    for (const auto& k : kernels) {
      EXPECT_TRUE(k.unsupported.empty()) << k.unsupported;
      EXPECT_LE(k.bindings, limit);
    }
  }
}

// 70 parameters summed into one result: no split helps, so that region runs on the CPU (with a
// notice) on Vulkan; the answer is the same.
TEST_P(GraphOnDevice, OneResultReadingMoreThanTheDeviceBindsStillRuns) {
  graph g;
  std::vector<graph::value> xs;
  for (int a = 0; a < 70; ++a) xs.push_back(g.input(numbered("x", a), dtype::i32, {dyn}));
  auto sum = xs[0];
  for (int a = 1; a < 70; ++a) sum = g.add(sum, xs[a]);
  g.output("sum", sum);
  executable exe = compile(g);
  std::vector<std::vector<std::int32_t>> data(70, std::vector<std::int32_t>(100));
  for (int a = 0; a < 70; ++a)
    for (int i = 0; i < 100; ++i) data[a][i] = a * 1000 + i;
  std::vector<tensor_ref> args(data.begin(), data.end());
  std::vector<std::int32_t> out(100);
  std::vector<tensor_ref> results = {out};
  exe.run(args, results, dev());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(out[i], 1000 * (69 * 70 / 2) + 70 * i) << i;
}

// Where this file and the runtime's chosen CPU kernels are built for one instruction set (CI runs
// these once more with KILN_CPU_ISA=sse2, this file's): elsewhere the two may differ where one of
// them fuses a multiply into an add.
bool same_cpu_isa() { return std::string_view(kiln::cpu::runtime_isa()) == KILN_CPU_ISA_NAME; }

TEST(Graph, InterpreterMatchesTheCompiledKernelsBitForBit) {
  // The same expression as a kiln::fn (compile-time kernels) and through the run-time door: the
  // same primitives, so the same bits (no op here can be contracted into an FMA) for one
  // instruction set; across sets, to the functions' bound.
  constexpr auto f = fn<tensor<f32, dyn>>(
      [](auto x) { return select(x > 0.f, tanh(x), exp(x) - 1.f) + sigmoid(x) * erf(x); });
  auto xs = ramp(4099, -20.f, 0.01f);
  std::vector<float> compiled(xs.size()), interpreted(xs.size());
  f.on(device::cpu())(xs, into(compiled));
  compile(f).run({xs}, {interpreted}, device::cpu());
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (same_cpu_isa())
      ASSERT_EQ(std::bit_cast<std::uint32_t>(compiled[i]),
                std::bit_cast<std::uint32_t>(interpreted[i]))
          << "x = " << xs[i];
    else
      ASSERT_NEAR(compiled[i], interpreted[i], 4e-6f * std::fabs(compiled[i]) + 1e-7f)
          << "x = " << xs[i];
}

// The interpreter fills a value that repeats along the row (r, one per row; the constants) in
// a row's first tile only, so no other value may share its slot: here the product's slot is
// free again when the constant 3 is filled, and the product is computed into it again in every
// later tile.
TEST(Graph, InterpreterKeepsARowsRepeatedValuesAcrossItsTiles) {
  constexpr auto f = fn<tensor<f32, dyn, dyn>, tensor<f32, dyn, 1>>(
      [](auto x, auto r) { return exp(exp(x) * 0.5f) * 3.f - r; });
  const std::int64_t rows = 5, cols = 1000;  // eight tiles a row
  auto xs = ramp(rows * cols, -2.f, 0.001f);
  std::vector<float> rs = {1.f, -2.f, 30.f, 0.5f, 7.f};
  auto x = view(xs.data(), {rows, cols});
  auto r = view(rs.data(), {rows, 1});
  std::vector<float> compiled, interpreted(xs.size());
  for (float e : f.on(device::cpu())(x, r)) compiled.push_back(e);
  compile(f).run({x, r}, {interpreted}, device::cpu());
  ASSERT_EQ(compiled.size(), xs.size());
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    float want = static_cast<float>(std::exp(std::exp(double(xs[i])) * 0.5) * 3.0 - rs[i / cols]);
    ASSERT_NEAR(interpreted[i], want, 1e-5f * (std::fabs(want) + 1.f)) << "element " << i;
    if (same_cpu_isa()) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(compiled[i]),
                std::bit_cast<std::uint32_t>(interpreted[i]))
          << "element " << i;
    }
  }
}

// The SE block's pattern: a value computed from a row's repeated inputs alone (here the
// hard_sigmoid of r, one per row) is computed in the row's first tile only, so its slot must
// survive the later tiles; and the hard_sigmoid / hard_swish chains run as one instruction
// each, except where another node reads a link of the chain (then it runs as its four ops).
TEST(Graph, InterpreterComputesARowsRepeatedValuesOnceAndFusesHardSigmoidChains) {
  const std::int64_t rows = 4, cols = 1000;  // eight tiles a row
  graph g;
  auto x = g.input("x", dtype::f32, {rows, cols});
  auto r = g.input("r", dtype::f32, {rows, 1});
  // Created in this order, products of x free their slots before r + 1 and its hard_sigmoid
  // are computed: a repeated value placed in such a slot would be overwritten in later tiles.
  auto wave = g.exp(g.mul(x, g.constant(0.01, dtype::f32)));
  auto shifted = g.add(r, g.constant(1.0, dtype::f32));
  auto wave2 = g.exp(g.mul(x, g.constant(0.03, dtype::f32)));
  auto scale = g.hard_sigmoid(shifted);
  auto swish = g.hard_swish(x);
  g.output("y", g.add(g.add(wave, wave2), g.mul(swish, scale)));
  // hard_sigmoid(x, 0.25, 0.5) with its product x * 0.25 also an output.
  auto quarter = g.mul(x, g.constant(0.25, dtype::f32));
  g.output("h", g.clip(g.add(quarter, g.constant(0.5, dtype::f32)), g.constant(0.0, dtype::f32),
                       g.constant(1.0, dtype::f32)));
  g.output("q", quarter);
  executable e = compile(g);
  auto xs = ramp(rows * cols, -4.f, 0.008f);
  std::vector<float> rs = {-9.f, -3.f, 0.5f, 4.f};
  std::vector<float> y(xs.size()), h(xs.size()), q(xs.size());
  e.run({tensor_ref(xs.data(), dtype::f32, {rows, cols}),
         tensor_ref(rs.data(), dtype::f32, {rows, 1})},
        {y, h, q}, device::cpu());
  auto hard_sigmoid = [](double v, double a, double b) { return std::clamp(v * a + b, 0.0, 1.0); };
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    const double v = xs[i];
    const double want =
        std::exp(v * 0.01) + std::exp(v * 0.03) +
        v * hard_sigmoid(v, 1.0 / 6, 0.5) * hard_sigmoid(rs[i / cols] + 1.0, 0.2, 0.5);
    ASSERT_NEAR(y[i], want, 2e-6 * (std::fabs(want) + 1)) << "element " << i;
    ASSERT_NEAR(h[i], hard_sigmoid(v, 0.25, 0.5), 1e-6) << "element " << i;
    ASSERT_EQ(q[i], xs[i] * 0.25f) << "element " << i;
  }
}

// A tensor constant moved in is the buffer itself (no copy), and compile(std::move(g)) takes it
// over (the graph is left without it): a model's weights are held once.
TEST(Graph, ConstantsMovedInAreHeldOnce) {
  graph g;
  const std::vector<float> w = {1.5f, -2.0f, 3.0f, 0.25f};
  std::vector<unsigned char> bytes(sizeof(float) * w.size());
  std::memcpy(bytes.data(), w.data(), bytes.size());
  const unsigned char* where = bytes.data();
  auto x = g.input("x", dtype::f32, {4});
  auto c = g.constant(std::move(bytes), dtype::f32, {4});
  EXPECT_TRUE(bytes.empty());
  ASSERT_EQ(g.constants().size(), 1u);
  EXPECT_EQ(g.constants()[0].bytes.data(), where);
  g.output("y", g.mul(x, c));
  executable e = compile(std::move(g));
  EXPECT_TRUE(g.constants().empty());
  std::vector<float> xs = {2, 2, 4, 8}, y(4);
  e.run({xs}, {y}, device::cpu());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], xs[i] * w[i]) << i;
  graph h;
  EXPECT_EQ(error_of([&] { h.constant(std::vector<unsigned char>(12), dtype::f32, {4}); }),
            "kiln: constant: the extents [4] of f32 hold 16 bytes but the buffer has 12");
  EXPECT_EQ(error_of([&] { h.constant(nullptr, dtype::f32, 4, shape{4}); }),
            "kiln: constant: the data pointer is null (4 elements)");
}

// Constants of bytes held elsewhere: borrowed ones are read where they are (the graph and the
// executable point at the caller's memory), shared ones keep their owner alive after the caller
// drops it (ASan would see a read of freed memory), and a module saved from either holds its
// own copy, so that it runs after the caller's memory is gone.
TEST(Graph, ConstantsBorrowedOrSharedAreNotCopied) {
  auto weights = std::make_unique<std::vector<float>>(std::vector<float>{1.5f, -2.0f, 3.0f, 0.25f});
  const std::vector<float> w = *weights;
  auto shared = std::make_shared<std::vector<float>>(std::vector<float>{4.0f, 0.5f, -1.0f, 2.0f});
  const std::vector<float> s = *shared;
  graph g;
  auto x = g.input("x", dtype::f32, {4});
  auto borrowed = g.constant(shared_bytes::borrow(weights->data(), 16), dtype::f32, {4});
  auto held = g.constant(shared_bytes(shared, shared->data(), 16), dtype::f32, {4});
  ASSERT_EQ(g.constants().size(), 2u);
  EXPECT_EQ(g.constants()[0].bytes.data(), static_cast<const void*>(weights->data()));
  EXPECT_TRUE(g.constants()[0].bytes.borrowed());
  EXPECT_EQ(g.constants()[1].bytes.data(), static_cast<const void*>(shared->data()));
  // The same bytes again are the same constant; as other extents, another one.
  g.constant(shared_bytes::borrow(weights->data(), 16), dtype::f32, {4});
  EXPECT_EQ(g.constants().size(), 2u);
  g.constant(shared_bytes::borrow(weights->data(), 16), dtype::f32, {2, 2});
  EXPECT_EQ(g.constants().size(), 3u);
  g.output("y", g.add(g.mul(x, borrowed), held));
  executable e = compile(std::move(g));
  shared.reset();
  const std::vector<float> xs = {2, 2, 4, 8};
  std::vector<float> y(4);
  e.run({xs}, {y}, device::cpu());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], xs[i] * w[i] + s[i]) << i;
  const std::vector<std::uint8_t> module = e.to_bytes();
  weights.reset();
  executable loaded = executable::from_bytes(module);
  std::fill(y.begin(), y.end(), 0.0f);
  loaded.run({xs}, {y}, device::cpu());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], xs[i] * w[i] + s[i]) << i;

  graph h;
  alignas(8) unsigned char raw[24] = {};
  EXPECT_EQ(error_of([&] { h.constant(shared_bytes::borrow(raw + 2, 16), dtype::f32, {4}); }),
            "kiln: constant: the data of a f32 constant must be aligned to 4 bytes; it starts at "
            "an address 2 bytes past that");
}

TEST_P(GraphOnDevice, QuotientsByAScalarConstantThatIsAPowerOfTwoAreProducts) {
  // As exporters write attention's scale: scores / a one-element initializer. 8 and -0.25 become
  // products by their exact reciprocals, with the quotients' bits; 3 and the [2]-element constant
  // stay quotients.
  graph g;
  auto x = g.input("x", dtype::f32, {2, 5});
  const float eight = 8.f, quarter = -0.25f, three = 3.f, pair[] = {2.f, 4.f};
  g.output("by8", g.div(x, g.constant(&eight, dtype::f32, 1, shape{})));
  g.output("byq", g.div(x, g.constant(&quarter, dtype::f32, 1, shape{1, 1})));
  g.output("by3", g.div(x, g.constant(&three, dtype::f32, 1, shape{1})));
  g.output("bypair", g.div(g.input("z", dtype::f32, {5, 2}), g.constant(pair, dtype::f32, 2, {2})));
  int quotients = 0;
  for (const auto& n : g.ir().nodes) quotients += n.kind == ir::op::div;
  EXPECT_EQ(quotients, 2);  // by 3 and by the pair
  executable exe = compile(std::move(g));
  const std::vector<float> xs = {1.f,    -3.5f,      0x1p-149f,        0x1.fffffep127f,
                                 -0.f,   12345.678f, 0x1.234568p-130f, 7.f,
                                 -1e-3f, 0x1p-126f};
  std::vector<float> z = ramp(10, -2.f, 0.37f), by8(10), byq(10), by3(10), bypair(10);
  exe.run({{"x", view(xs.data(), {2, 5})}, {"z", view(z.data(), {5, 2})}},
          {{"by8", view(by8.data(), {2, 5})},
           {"byq", view(byq.data(), {2, 5})},
           {"by3", view(by3.data(), {2, 5})},
           {"bypair", view(bypair.data(), {5, 2})}},
          dev());
  const bool flushes = GetParam() && !dev().context()->target().keeps_subnormals32();
  auto same_bits = [&](float got, float want) {
    return std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want) ||
           (flushes && ref::flushed_result(got, want));
  };
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const float a = flushes ? ref::flushed(xs[i]) : xs[i];
    EXPECT_TRUE(same_bits(by8[i], a / 8.f)) << xs[i] << ": " << by8[i];
    EXPECT_TRUE(same_bits(byq[i], a / -0.25f)) << xs[i] << ": " << byq[i];
    EXPECT_TRUE(same_bits(by3[i], a / 3.f)) << xs[i] << ": " << by3[i];
    EXPECT_EQ(bypair[i], z[i] / pair[i % 2]) << i;
  }
}

TEST(Graph, ConcurrentCallsFromSeveralThreads) {
  // One executable, shared by four threads, two on each device, each with its own data: the
  // interpreter's scratch is per thread, the Vulkan queue is taken under the context's lock.
  layer l;
  executable exe = compile(l.g);
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      device d = t % 2 ? device::vulkan() : device::cpu();
      std::int64_t rows = 40 + t, cols = 301;
      auto x = ramp(static_cast<std::size_t>(rows * cols), -2.f + 0.1f * t, 0.0003f);
      auto w = ramp(static_cast<std::size_t>(cols), 0.5f, -0.002f);
      float b = 0.1f * t;
      std::vector<float> y(x.size());
      std::unique_ptr<bool[]> positive(new bool[x.size()]);
      for (int call = 0; call < 20; ++call) {
        exe.run(
            {{"x", view(x.data(), {rows, cols})}, {"w", w}, {"b", b}},
            {{"y", view(y.data(), {rows, cols})}, {"positive", view(positive.get(), {rows, cols})}},
            d);
        for (std::size_t i = 0; i < x.size(); ++i) {
          float want = std::tanh(x[i] * w[i % cols] + b);
          if (std::fabs(y[i] - want) > 2e-6 * std::fabs(want) + 1e-7 || positive[i] != (x[i] > 0)) {
            failures[t] = "thread " + std::to_string(t) + " call " + std::to_string(call) +
                          " element " + std::to_string(i);
            return;
          }
        }
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& f : failures) EXPECT_EQ(f, "");
}

TEST(Graph, CopiesShareTheCompiledKernels) {
  layer l;
  executable a = compile(l.g);
  executable b = a;
  EXPECT_EQ(a.name(), b.name());
  EXPECT_EQ(a.name().rfind("graph-", 0), 0u);
  EXPECT_EQ(a.input_names(), (std::vector<std::string>{"x", "w", "b"}));
  EXPECT_EQ(a.output_names(), (std::vector<std::string>{"y", "positive"}));
}

TEST(GraphErrors, BuildingNamesTheOpAndTheShapes) {
  graph g, other;
  auto a = g.input("a", dtype::f32, {3});
  auto b = g.input("b", dtype::f32, {4});
  auto i = g.input("i", dtype::i32, {3});
  EXPECT_EQ(error_of([&] { g.add(a, b); }), "kiln: add: shapes [3] and [4] do not broadcast");
  EXPECT_EQ(error_of([&] { g.mul(a, i); }),
            "kiln: mul: operand types differ: f32 and i32 (insert a cast)");
  EXPECT_EQ(error_of([&] { g.exp(i); }), "kiln: exp: does not accept element type i32");
  EXPECT_EQ(error_of([&] { g.select(a, a, a); }), "kiln: select: condition must be bool, got f32");
  auto foreign = other.input("z", dtype::f32, {3});
  EXPECT_EQ(error_of([&] { g.add(a, foreign); }), "kiln: add: operand 2 belongs to another graph");
  EXPECT_EQ(error_of([&] { g.neg(graph::value{}); }),
            "kiln: neg: operand 1 is an empty graph::value");
  EXPECT_EQ(error_of([&] { g.apply(ir::op::add, {a}); }), "kiln: add: takes 2 operands, got 1");
  EXPECT_EQ(error_of([&] { g.input("a", dtype::f32, {2}); }),
            "kiln: input: the name 'a' is already taken");
  EXPECT_EQ(error_of([&] { g.input("", dtype::f32, {2}); }), "kiln: input: the name is empty");
  EXPECT_EQ(error_of([&] {
              g.input("c", dtype::f32, {2, -7});
            }),
            "kiln: input: 'c' has extents [2, ?] (size -7 at axis 1); a size is >= 0 or kiln::dyn");
  g.output("y", a);
  EXPECT_EQ(error_of([&] { g.output("y", a); }), "kiln: output: the name 'y' is already taken");
  EXPECT_EQ(error_of([] { compile(graph{}); }),
            "kiln: compile: the graph has no outputs (graph::output) and assigns no variable");
  EXPECT_EQ(g.type_of(i), dtype::i32);
  EXPECT_EQ(g.dims_of(g.add(a, g.constant(1.0))), (shape{3}));
}

TEST(GraphErrors, CallsNameTheArgumentExpectedAndActual) {
  layer l;
  executable exe = compile(l.g);
  std::string who = "kiln: " + exe.name() + ": ";
  std::vector<float> x(6), w(3), y(6);
  std::vector<std::int32_t> wi(3);
  bool pos[6];
  float b = 1;
  auto cpu = device::cpu();
  EXPECT_EQ(error_of([&] {
              exe.run({{"x", view(x.data(), {2, 3})}, {"w", w}},
                      {{"y", view(y.data(), {2, 3})}, {"positive", view(pos, {2, 3})}}, cpu);
            }),
            who + "argument 'b' is missing (the graph has 'x', 'w', 'b')");
  EXPECT_EQ(error_of([&] {
              exe.run({{"x", view(x.data(), {2, 3})}, {"w", w}, {"b", b}, {"bias", b}},
                      {{"y", view(y.data(), {2, 3})}, {"positive", view(pos, {2, 3})}}, cpu);
            }),
            who + "no argument is named 'bias' (the graph has 'x', 'w', 'b')");
  EXPECT_EQ(error_of([&] {
              exe.run({{"x", view(x.data(), {2, 3})}, {"w", w}, {"b", b}, {"b", b}},
                      {{"y", view(y.data(), {2, 3})}, {"positive", view(pos, {2, 3})}}, cpu);
            }),
            who + "argument 'b' is given twice");
  EXPECT_EQ(error_of([&] {
              exe.run({{"x", view(x.data(), {2, 3})}, {"w", wi}, {"b", b}},
                      {{"y", view(y.data(), {2, 3})}, {"positive", view(pos, {2, 3})}}, cpu);
            }),
            who + "argument 2 ('w') is i32 but the graph declares f32[?]");
  EXPECT_EQ(
      error_of([&] {
        exe.run({{"x", view(x.data(), {3, 2})}, {"w", w}, {"b", b}},
                {{"y", view(y.data(), {2, 3})}, {"positive", view(pos, {2, 3})}}, cpu);
      }),
      who + "argument 1 axis 1 (size 2) and argument 2 axis 0 (size 3) do not broadcast in mul");
  EXPECT_EQ(error_of([&] {
              exe.run({{"x", view(x.data(), {2, 3})}, {"w", w}, {"b", b}},
                      {{"y", view(y.data(), {3, 2})}, {"positive", view(pos, {2, 3})}}, cpu);
            }),
            who + "result 1 is f32[2, 3] but its buffer has extents [3, 2]");
  const std::vector<float>& cy = y;
  EXPECT_EQ(error_of([&] {
              exe.run({{"x", view(x.data(), {2, 3})}, {"w", w}, {"b", b}},
                      {{"y", cy}, {"positive", view(pos, {2, 3})}}, cpu);
            }),
            who + "result 1 ('y') is read-only (const data or a number)");
  EXPECT_EQ(error_of([&] {
              exe.run({{"x", view(x.data(), {2, 3})}, {"w", w}, {"b", b}},
                      {{"y", view(pos, {2, 3})}, {"positive", view(pos, {2, 3})}}, cpu);
            }),
            who + "result 1 ('y') is f32 but its buffer holds bool");
  EXPECT_EQ(error_of([&] {
              exe.run({x, w}, {y}, cpu);
            }),
            who + "takes 3 arguments (x, w, b), got 2");
  // In place needs the very same buffer; a result shifted by one element against x is refused.
  std::vector<float> big(7);
  EXPECT_EQ(error_of([&] {
              exe.run({{"x", view(big.data(), {2, 3})}, {"w", w}, {"b", b}},
                      {{"y", view(big.data() + 1, {2, 3})}, {"positive", view(pos, {2, 3})}}, cpu);
            }),
            who +
                "result 1 overlaps argument 1; writing in place needs identical buffers (same "
                "address, type, extents and strides)");
}

TEST(GraphErrors, TryFormsReturnTheErrorInsteadOfThrowing) {
  graph g;
  auto a = g.input("a", dtype::f32, {dyn});
  auto r = try_compile(g);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().code(), errc::invalid_graph);
  g.output("b", g.abs(a));
  auto exe = try_compile(g);
  ASSERT_TRUE(exe.ok());
  std::vector<float> in = {-1.5f, 2.f, -0.f}, out(3), wrong(4);
  auto bad = exe.value().try_run({{"a", in}}, {{"b", wrong}}, device::cpu());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.failure().code(), errc::shape_mismatch);
  auto good = exe.value().try_run({{"a", in}}, {{"b", out}}, device::cpu());
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(out, (std::vector<float>{1.5f, 2.f, 0.f}));
  auto built = try_call([&] { return g.add(a, g.input("i", dtype::i32, {dyn})); });
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.failure().code(), errc::dtype_mismatch);
}

TEST(GraphErrors, DeviceMemoryOnTheCpuIsRefused) {
  graph g;
  g.output("b", g.neg(g.input("a", dtype::f32, {dyn})));
  executable exe = compile(g);
  auto buf = device::vulkan().upload(std::vector<float>{1, 2, 3});
  std::vector<float> out(3);
  std::string msg = error_of([&] { exe.run({{"a", buf}}, {{"b", out}}, device::cpu()); });
  EXPECT_NE(msg.find("argument 1 lives on vulkan:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("but the call runs on the cpu"), std::string::npos) << msg;
}

}  // namespace

// A graph's name starts its executable's (and so its dumps', traces' and modules') name; names
// that would not be a plain folder name are refused, in a graph and in a module file alike.
TEST(Graph, NamesItsExecutable) {
  kiln::graph g;
  EXPECT_EQ(g.name(), "graph");
  g.set_name("encoder_layer.1");
  g.output("y", g.relu(g.input("x", kiln::dtype::f32, {4})));
  kiln::executable e = kiln::compile(g);
  EXPECT_EQ(e.name().rfind("encoder_layer.1-", 0), 0u) << e.name();
  EXPECT_EQ(kiln::executable::from_bytes(e.to_bytes()).name(), e.name());
  for (const char* bad : {"", ".hidden", "-dash", "a/b", "../up", "with space",
                          "a_name_of_sixty_four_characters_is_one_character_too_long_for_it"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(g.set_name(bad), kiln::error);
  }
  EXPECT_EQ(g.name(), "encoder_layer.1");
}
