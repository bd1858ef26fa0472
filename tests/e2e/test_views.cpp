// Index maps (transpose, reshape, expand, slice, flatten, squeeze, unsqueeze): read in place by the
// region that consumes them, checked against a reference that moves the elements one by one with
// numpy's rules. Runs on the default device and, as e2e.cpu.test_views, on the CPU.
#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "../support/e2e.hpp"

namespace {

using kiln::dtype;
using kiln::tensor;
using ref::dims_t;

// A dense row-major tensor of doubles: the reference's values.
struct host_tensor {
  dims_t dims;
  std::vector<double> v;
  std::int64_t at(const std::vector<std::int64_t>& idx) const {
    std::int64_t o = 0;
    for (std::size_t i = 0; i < dims.size(); ++i) o = o * dims[i] + idx[i];
    return o;
  }
};

std::int64_t count_of(const dims_t& d) {
  return std::accumulate(d.begin(), d.end(), std::int64_t{1}, std::multiplies<>());
}

// Calls fn(index) for every multi-index of dims, in row-major order.
template <class Fn>
void each_index(const dims_t& dims, Fn fn) {
  std::vector<std::int64_t> idx(dims.size(), 0);
  for (std::int64_t e = 0, n = count_of(dims); e < n; ++e) {
    fn(idx);
    for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
      if (++idx[i] < dims[i]) break;
      idx[i] = 0;
    }
  }
}

host_tensor ref_transpose(const host_tensor& x, const std::vector<std::int64_t>& perm) {
  host_tensor r;
  for (auto p : perm) r.dims.push_back(x.dims[p]);
  each_index(r.dims, [&](const std::vector<std::int64_t>& idx) {
    std::vector<std::int64_t> from(x.dims.size());
    for (std::size_t i = 0; i < perm.size(); ++i) from[perm[i]] = idx[i];
    r.v.push_back(x.v[x.at(from)]);
  });
  return r;
}

// Python's slice(start, stop, step).indices(n): the indices a slice visits.
std::vector<std::int64_t> slice_indices(std::int64_t start, std::int64_t stop, std::int64_t step,
                                        std::int64_t n) {
  std::int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
  auto fix = [&](std::int64_t v) {
    if (v < 0) return std::max(v + n, lower);
    return std::min(v, upper);
  };
  std::vector<std::int64_t> r;
  for (std::int64_t i = fix(start); step > 0 ? i < fix(stop) : i > fix(stop); i += step)
    r.push_back(i);
  return r;
}

host_tensor ref_slice(const host_tensor& x, const std::vector<std::int64_t>& starts,
                      const std::vector<std::int64_t>& ends, const std::vector<std::int64_t>& axes,
                      const std::vector<std::int64_t>& steps) {
  std::vector<std::vector<std::int64_t>> picks(x.dims.size());
  for (std::size_t i = 0; i < x.dims.size(); ++i)
    for (std::int64_t k = 0; k < x.dims[i]; ++k) picks[i].push_back(k);
  for (std::size_t k = 0; k < starts.size(); ++k) {
    std::int64_t a = axes[k] < 0 ? axes[k] + static_cast<std::int64_t>(x.dims.size()) : axes[k];
    picks[a] = slice_indices(starts[k], ends[k], steps[k], x.dims[a]);
  }
  host_tensor r;
  for (auto& p : picks) r.dims.push_back(static_cast<std::int64_t>(p.size()));
  each_index(r.dims, [&](const std::vector<std::int64_t>& idx) {
    std::vector<std::int64_t> from(idx.size());
    for (std::size_t i = 0; i < idx.size(); ++i) from[i] = picks[i][idx[i]];
    r.v.push_back(x.v[x.at(from)]);
  });
  return r;
}

host_tensor iota(const dims_t& dims, double scale = 1) {
  host_tensor t{dims, {}};
  for (std::int64_t i = 0; i < count_of(dims); ++i) t.v.push_back(scale * static_cast<double>(i));
  return t;
}

// Runs a one-input, one-output graph on x (as T) and returns the result as doubles.
template <class T>
std::vector<double> run1(kiln::graph& g, const host_tensor& x, const dims_t& out_dims) {
  auto e = kiln::compile(g);
  std::vector<T> in(x.v.begin(), x.v.end());
  ref::buffer<T> xb(in), yb(static_cast<std::size_t>(count_of(out_dims)));
  e.run({ref::view_of(xb, x.dims)}, {ref::view_of(yb, out_dims)});
  std::vector<double> r;
  for (std::size_t i = 0; i < yb.size(); ++i) r.push_back(static_cast<double>(yb[i]));
  return r;
}

void expect_values(const std::vector<double>& got, const host_tensor& want) {
  ASSERT_EQ(got.size(), want.v.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want.v[i]) << "element " << i;
}

TEST(Views, EveryTransposeOfRankThreeAndFour) {
  host_tensor x = iota({2, 3, 4});
  std::vector<std::int64_t> perm = {0, 1, 2};
  do {
    kiln::graph g;
    auto in = g.input("x", dtype::f32, {2, 3, 4});
    g.output("y", g.transpose(in, perm));
    host_tensor want = ref_transpose(x, perm);
    SCOPED_TRACE(ref::dims_text(perm));
    expect_values(run1<float>(g, x, want.dims), want);
  } while (std::next_permutation(perm.begin(), perm.end()));
  // Rank 4 with long rows (a transpose's reads stride through memory), i32 and i8.
  host_tensor big = iota({3, 5, 7, 300});
  for (auto p : std::vector<std::vector<std::int64_t>>{{3, 2, 1, 0}, {0, 3, 1, 2}, {1, 0, 3, 2}}) {
    kiln::graph g;
    auto in = g.input("x", dtype::i32, {3, 5, 7, 300});
    g.output("y", g.transpose(in, p));
    host_tensor want = ref_transpose(big, p);
    expect_values(run1<std::int32_t>(g, big, want.dims), want);
  }
  host_tensor small = iota({4, 33});
  for (auto& v : small.v) v = std::fmod(v, 100.0) - 50;
  kiln::graph g;
  auto in = g.input("x", dtype::i8, {4, 33});
  g.output("y", g.transpose(in));  // no perm: reversed
  expect_values(run1<std::int8_t>(g, small, {33, 4}), ref_transpose(small, {1, 0}));
}

TEST(Views, LargeTransposeAddRunsOnEveryThread) {
  // 528,390 elements: above the size where a region is cut into tasks for kiln's threads, each
  // gathering its strided rows into its own buffer.
  const std::int64_t rows = 513, cols = 1030;
  auto xv = ref::random_data<float>(rows * cols, -1, 1, 41);
  auto yv = ref::random_data<float>(rows * cols, -1, 1, 42);
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {rows, cols});
  auto y = g.input("y", dtype::f32, {cols, rows});
  g.output("z", g.add(g.transpose(x), y));
  auto e = kiln::compile(g);
  EXPECT_EQ(e.plan().transient_bytes(), 0);
  std::vector<float> z(rows * cols);
  e.run({kiln::view(xv.data(), {rows, cols}), kiln::view(yv.data(), {cols, rows})},
        {kiln::view(z.data(), {cols, rows})});
  for (std::int64_t i = 0; i < cols; ++i)
    for (std::int64_t j = 0; j < rows; ++j)
      ASSERT_EQ(z[i * rows + j], xv[j * cols + i] + yv[i * rows + j]) << i << "," << j;
}

TEST(Views, SlicesFollowOnnxClampingAndNegativeSteps) {
  host_tensor x = iota({7, 1000});
  struct slice_case {
    std::vector<std::int64_t> starts, ends, axes, steps;
  };
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  const std::int64_t small = std::numeric_limits<std::int64_t>::min();
  std::vector<slice_case> cases = {
      {{1, 5}, {4, 900}, {0, 1}, {1, 1}},
      {{0, 3}, {7, 1000}, {0, 1}, {2, 7}},
      {{-1}, {small}, {1}, {-1}},  // the whole row, reversed
      {{6, 998}, {-8, 2}, {0, 1}, {-2, -3}},
      {{-3}, {big}, {-2}, {1}},  // axis -2: the last three rows
      {{10}, {20}, {0}, {1}},    // past the end: empty
      {{500}, {400}, {1}, {1}},  // end before start: empty
      {{-2000}, {2000}, {1}, {999}},
  };
  for (const auto& c : cases) {
    kiln::graph g;
    auto in = g.input("x", dtype::f32, {7, 1000});
    // exp of the slice: an elementwise op over the view, in one region.
    g.output("y", g.neg(g.slice(in, c.starts, c.ends, c.axes, c.steps)));
    host_tensor want = ref_slice(x, c.starts, c.ends, c.axes, c.steps);
    for (auto& v : want.v) v = -v;
    SCOPED_TRACE(ref::dims_text(c.starts) + " " + ref::dims_text(c.ends) + " " +
                 ref::dims_text(c.steps));
    expect_values(run1<float>(g, x, want.dims), want);
  }
}

TEST(Views, ReshapeFlattenSqueezeUnsqueezeBroadcastInPlace) {
  host_tensor x = iota({2, 3, 4});
  auto check = [&](auto make, const dims_t& out) {
    kiln::graph g;
    auto in = g.input("x", dtype::f64, {2, 3, 4});
    g.output("y", make(g, in));
    host_tensor want{out, x.v};  // the same elements in the same order
    expect_values(run1<double>(g, x, out), want);
  };
  using value = kiln::graph::value;
  check([](kiln::graph& g, value v) { return g.reshape(v, {4, 0, -1}); }, {4, 3, 2});
  check([](kiln::graph& g, value v) { return g.reshape(v, {24}); }, {24});
  check([](kiln::graph& g, value v) { return g.flatten(v, 2); }, {6, 4});
  check([](kiln::graph& g, value v) { return g.flatten(v, 0); }, {1, 24});
  check([](kiln::graph& g, value v) { return g.unsqueeze(v, {0, -1}); }, {1, 2, 3, 4, 1});
  check([](kiln::graph& g, value v) { return g.squeeze(g.unsqueeze(v, {1, 3})); }, {2, 3, 4});
  // A reshaped vector broadcast against a matrix: b [4] as [4, 1] plus x [4, 5].
  kiln::graph g;
  auto xm = g.input("x", dtype::f32, {4, 5});
  auto b = g.input("b", dtype::f32, {4});
  g.output("y", g.add(xm, g.reshape(b, {4, 1})));
  auto e = kiln::compile(g);
  EXPECT_EQ(e.dispatch_count(), 1);
  EXPECT_EQ(e.plan().transient_bytes(), 0);
  std::vector<float> xv(20), bv = {1, 2, 3, 4}, y(20);
  std::iota(xv.begin(), xv.end(), 0.0f);
  e.run({kiln::view(xv.data(), {4, 5}), kiln::view(bv.data(), {4})},
        {kiln::view(y.data(), {4, 5})});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(y[i], xv[i] + bv[i / 5]) << i;
}

TEST(Views, ExpandBroadcastsBothWays) {
  host_tensor x = iota({3, 1});
  kiln::graph g;
  auto in = g.input("x", dtype::i64, {3, 1});
  g.output("y", g.expand(in, {2, 1, 4}));  // [3, 1] with [2, 1, 4]: [2, 3, 4]
  host_tensor want{{2, 3, 4}, {}};
  each_index(want.dims, [&](const auto& idx) { want.v.push_back(x.v[idx[1]]); });
  expect_values(run1<std::int64_t>(g, x, want.dims), want);
}

TEST(Views, ChainsComposeAndMaterializeOnlyWhereNeeded) {
  host_tensor x = iota({6, 8}, 0.25);
  using value = kiln::graph::value;
  struct chain {
    const char* what;
    std::function<value(kiln::graph&, value)> make;
    std::function<host_tensor(const host_tensor&)> reference;
    int dispatches;
  };
  std::vector<chain> chains = {
      {"slice of a transpose",
       [](kiln::graph& g, value v) {
         return g.slice(g.transpose(v), {1, 5}, {7, 0}, {0, 1}, {2, -1});
       },
       [](const host_tensor& t) {
         return ref_slice(ref_transpose(t, {1, 0}), {1, 5}, {7, 0}, {0, 1}, {2, -1});
       },
       1},
      {"transpose of a slice of a slice",
       [](kiln::graph& g, value v) {
         return g.transpose(g.slice(g.slice(v, {1}, {6}, {0}), {-1}, {0}, {1}, {-3}));
       },
       [](const host_tensor& t) {
         return ref_transpose(ref_slice(ref_slice(t, {1}, {6}, {0}, {1}), {-1}, {0}, {1}, {-3}),
                              {1, 0});
       },
       1},
      {"reshape of a transpose (materialized: a reshape reads row-major order)",
       [](kiln::graph& g, value v) {
         return g.reshape(g.transpose(v), {4, 12});
       },
       [](const host_tensor& t) {
         host_tensor r = ref_transpose(t, {1, 0});
         r.dims = {4, 12};
         return r;
       },
       2},
      {"transpose of an elementwise value (materialized)",
       [](kiln::graph& g, value v) { return g.transpose(g.mul(v, v)); },
       [](const host_tensor& t) {
         host_tensor sq = t;
         for (auto& e : sq.v) e *= e;
         return ref_transpose(sq, {1, 0});
       },
       2},
      {"transpose of a transpose (one view, the identity)",
       [](kiln::graph& g, value v) { return g.neg(g.transpose(g.transpose(v))); },
       [](const host_tensor& t) {
         host_tensor r = t;
         for (auto& e : r.v) e = -e;
         return r;
       },
       1},
  };
  for (const auto& c : chains) {
    SCOPED_TRACE(c.what);
    kiln::graph g;
    auto in = g.input("x", dtype::f32, {6, 8});
    g.output("y", c.make(g, in));
    host_tensor want = c.reference(x);
    EXPECT_EQ(kiln::compile(g).dispatch_count(), c.dispatches);
    expect_values(run1<float>(g, x, want.dims), want);
  }
}

TEST(Views, ReductionsOverViewsAndViewsOfReductions) {
  // sum over axis 1 of transpose(x): the reduced axis strides through memory.
  dims_t dims = {37, 1029};
  auto xv = ref::random_data<float>(37 * 1029, -1, 1, 3);
  host_tensor x{dims, std::vector<double>(xv.begin(), xv.end())};
  for (int axis = 0; axis < 2; ++axis) {
    kiln::graph g;
    auto in = g.input("x", dtype::f32, {37, 1029});
    g.output("y", g.reduce(kiln::ir::op::reduce_max, g.transpose(in), {axis}, false));
    host_tensor t = ref_transpose(x, {1, 0});
    std::vector<double> want(axis == 0 ? 37 : 1029, -INFINITY);
    each_index(t.dims, [&](const auto& idx) {
      double& w = want[axis == 0 ? idx[1] : idx[0]];
      w = std::max(w, t.v[t.at(idx)]);
    });
    auto got = run1<float>(g, x, {static_cast<std::int64_t>(want.size())});
    for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
  }
  // A transposed softmax result: the view reads the row group's output (its own dispatch after).
  kiln::graph g;
  auto in = g.input("x", dtype::f32, {37, 1029});
  g.output("y", g.transpose(g.reduce(kiln::ir::op::reduce_sum, in, {1}, true)));
  auto got = run1<float>(g, x, {1, 37});
  for (int r = 0; r < 37; ++r) {
    double s = 0;
    for (int c = 0; c < 1029; ++c) s += x.v[r * 1029 + c];
    EXPECT_NEAR(got[r], s, 1e-4) << r;
  }
}

TEST(Views, RunTimeSizesPassThrough) {
  kiln::graph g;
  auto in = g.input("x", dtype::f32, {kiln::dyn, 12});
  auto t = g.transpose(g.reshape(in, {0, 3, 4}), {2, 0, 1});  // [4, ?, 3]
  g.output("y", g.add(t, g.constant(1.0, dtype::f32)));
  auto e = kiln::compile(g);
  for (std::int64_t rows : {1, 5, 40}) {
    host_tensor x = iota({rows, 12});
    host_tensor want = ref_transpose(host_tensor{{rows, 3, 4}, x.v}, {2, 0, 1});
    for (auto& v : want.v) v += 1;
    std::vector<float> xv(x.v.begin(), x.v.end()), y(want.v.size());
    e.run({kiln::view(xv.data(), {rows, 12})}, {kiln::view(y.data(), {4, rows, 3})});
    for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want.v[i]) << rows << ": " << i;
  }
}

TEST(Views, DslTransposePlusBiasIsOneDispatchWithNoTransient) {
  constexpr auto f = kiln::fn<tensor<float, 65, 33>, tensor<float, 65>>(
      [](auto x, auto b) { return kiln::relu(kiln::transpose<1, 0>(x) + b); });
  static_assert(f.plan.dispatch_count() == 1);
  static_assert(f.plan.transient_bytes() == 0);
  constexpr auto s = kiln::fn<tensor<float, 65, 33>>(
      [](auto x) { return kiln::reshape<33, 65>(kiln::slice<1, -1, -34, -1>(x)) * 2.0f; });
  static_assert(std::is_same_v<std::tuple_element_t<0, decltype(s)::result_values>,
                               kiln::value<float, kiln::extents<33, 65>>>);
  auto xv = ref::random_data<float>(65 * 33, -2, 2, 5);
  auto bv = ref::random_data<float>(65, -1, 1, 6);
  ref::buffer<float> xb(xv), bb(bv), y(65 * 33), z(65 * 33);
  f(ref::view_of(xb, {65, 33}), ref::view_of(bb, {65}), kiln::into(ref::view_of(y, {33, 65})));
  for (int i = 0; i < 33; ++i)
    for (int j = 0; j < 65; ++j)
      ASSERT_EQ(y[i * 65 + j], std::max(0.0f, xv[j * 33 + i] + bv[j])) << i << "," << j;
  // The reversed columns (a slice with step -1 of the whole axis) reshaped: materialized once.
  s(ref::view_of(xb, {65, 33}), kiln::into(ref::view_of(z, {33, 65})));
  for (int e = 0; e < 65 * 33; ++e) {
    int r = e / 33, c = e % 33;
    ASSERT_EQ(z[e], 2.0f * xv[r * 33 + (32 - c)]) << e;
  }
}

TEST(Views, BadIndexMapsNameTheOpAndTheArgument) {
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {2, 3});
  auto d = g.input("d", dtype::f32, {kiln::dyn, 3});
  auto message = [](auto fn) { return ref::error_message(fn); };
  EXPECT_THAT(message([&] {
                g.transpose(x, {0, 0});
              }),
              testing::HasSubstr("transpose: perm names axis 0 twice"));
  EXPECT_THAT(message([&] {
                g.transpose(x, {0, 1, 2});
              }),
              testing::HasSubstr("perm has 3 entries for an operand of rank 2"));
  EXPECT_THAT(message([&] {
                g.reshape(x, {4, 2});
              }),
              testing::HasSubstr("reshape: operand [2, 3] cannot be reshaped to [4, 2]"));
  EXPECT_THAT(message([&] {
                g.reshape(x, {-1, -1});
              }),
              testing::HasSubstr("more than one size of -1"));
  // [?, 3] as [3, -1] infers the run-time size (3 x ? elements as 3 rows); as [3, 4] it cannot.
  EXPECT_EQ(g.dims_of(g.reshape(d, {3, -1})), (kiln::shape{3, kiln::dyn}));
  EXPECT_THAT(message([&] {
                g.reshape(d, {3, 4});
              }),
              testing::HasSubstr("the run-time sizes of the two differ"));
  EXPECT_THAT(message([&] { g.slice(x, {0}, {1}, {0}, {0}); }),
              testing::HasSubstr("slice: step along axis 0 is 0"));
  EXPECT_THAT(message([&] { g.slice(d, {0}, {1}); }),
              testing::HasSubstr("a sliced axis needs a static size"));
  EXPECT_THAT(message([&] { g.slice(x, {0}, {1}, {2}); }),
              testing::HasSubstr("axis 2 is out of range for an operand of rank 2"));
  EXPECT_THAT(message([&] {
                g.expand(x, {4, 3});
              }),
              testing::HasSubstr("expand: shapes [2, 3] and [4, 3] do not broadcast"));
  EXPECT_THAT(message([&] { g.squeeze(x, {0}); }),
              testing::HasSubstr("squeeze: axis 0 of [2, 3] is not of size 1"));
  EXPECT_THAT(message([&] { g.apply(kiln::ir::op::transpose, {x}); }),
              testing::HasSubstr("takes an index map"));
}

}  // namespace
