// Indirect index maps (gather, gather_elements) and what is built from them (pad in every mode,
// concat): read in place by the consuming region, checked against a reference that moves the
// elements one by one by ONNX's rules. Runs on the default device and, as e2e.cpu.test_moves, on
// the CPU.
#include <gmock/gmock.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <tuple>

#include "../support/e2e.hpp"

namespace {

using kiln::dtype;
using ref::dims_t;
using index_t = std::vector<std::int64_t>;

struct host_tensor {  // row-major doubles: the reference's values
  dims_t dims;
  std::vector<double> v;
  std::int64_t offset(const index_t& idx) const {
    std::int64_t o = 0;
    for (std::size_t i = 0; i < dims.size(); ++i) o = o * dims[i] + idx[i];
    return o;
  }
  double at(const index_t& idx) const { return v[offset(idx)]; }
};

std::int64_t count_of(const dims_t& d) {
  return std::accumulate(d.begin(), d.end(), std::int64_t{1}, std::multiplies<>());
}

template <class Fn>
host_tensor build(const dims_t& dims, Fn value_at) {  // value_at(index) for every index, in order
  host_tensor r{dims, {}};
  index_t idx(dims.size(), 0);
  for (std::int64_t e = 0, n = count_of(dims); e < n; ++e) {
    r.v.push_back(value_at(idx));
    for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
      if (++idx[i] < dims[i]) break;
      idx[i] = 0;
    }
  }
  return r;
}

host_tensor iota(const dims_t& dims, double scale = 1, double start = 0) {
  host_tensor t{dims, {}};
  for (std::int64_t i = 0; i < count_of(dims); ++i)
    t.v.push_back(start + scale * static_cast<double>(i));
  return t;
}

// ONNX's position rule, with kiln's clamp where ONNX leaves positions outside the axis undefined.
std::int64_t position(double v, std::int64_t n) {
  auto p = static_cast<std::int64_t>(v);
  if (p < 0) p += n;
  return std::clamp<std::int64_t>(p, 0, n - 1);
}

host_tensor ref_gather(const host_tensor& x, const host_tensor& idx, int axis) {
  dims_t d(x.dims.begin(), x.dims.begin() + axis);
  d.insert(d.end(), idx.dims.begin(), idx.dims.end());
  d.insert(d.end(), x.dims.begin() + axis + 1, x.dims.end());
  const auto q = idx.dims.size();
  return build(d, [&](const index_t& o) {
    index_t from(o.begin(), o.begin() + axis), at(o.begin() + axis, o.begin() + axis + q);
    from.push_back(position(idx.at(at), x.dims[axis]));
    from.insert(from.end(), o.begin() + axis + q, o.end());
    return x.at(from);
  });
}

host_tensor ref_gather_elements(const host_tensor& x, const host_tensor& idx, int axis) {
  return build(idx.dims, [&](const index_t& o) {
    index_t from = o;
    from[axis] = position(idx.at(o), x.dims[axis]);
    return x.at(from);
  });
}

// ONNX Pad by its definition: each output index maps back per axis, by the mode.
host_tensor ref_pad(const host_tensor& x, const index_t& pads, const std::string& mode,
                    double value = 0) {
  const auto r = x.dims.size();
  dims_t d;
  for (std::size_t i = 0; i < r; ++i) d.push_back(x.dims[i] + pads[i] + pads[i + r]);
  return build(d, [&](const index_t& o) {
    index_t from(r);
    for (std::size_t i = 0; i < r; ++i) {
      std::int64_t n = x.dims[i], p = o[i] - pads[i];
      if (p < 0 || p >= n) {
        if (mode == "constant") return value;
        if (mode == "edge") p = p < 0 ? 0 : n - 1;
        if (mode == "wrap") p = ((p % n) + n) % n;
        if (mode == "reflect")
          while (p < 0 || p >= n) p = p < 0 ? -p : 2 * (n - 1) - p;
      }
      from[i] = p;
    }
    return x.at(from);
  });
}

host_tensor ref_concat(const std::vector<host_tensor>& pieces, int axis) {
  dims_t d = pieces[0].dims;
  d[axis] = 0;
  for (const auto& p : pieces) d[axis] += p.dims[axis];
  return build(d, [&](index_t o) {
    for (const auto& p : pieces) {
      if (o[axis] < p.dims[axis]) return p.at(o);
      o[axis] -= p.dims[axis];
    }
    return 0.0;
  });
}

// Runs a compiled graph on inputs (as the graph's declared types) into one output of `dtype`.
struct runner {
  kiln::graph g;
  std::vector<std::pair<dtype, host_tensor>> inputs;
  kiln::graph::value input(dtype t, const host_tensor& x) {
    inputs.push_back({t, x});
    return g.input("in" + std::to_string(inputs.size()), t, ref::to_shape(x.dims));
  }
  std::vector<double> run(dtype out_type, const dims_t& out_dims) {
    auto e = kiln::compile(g);
    std::vector<std::vector<unsigned char>> data;
    std::vector<kiln::tensor_ref> args;
    for (auto& [t, x] : inputs) {
      data.push_back(ref::bytes_of(t, x.v));
      args.emplace_back(static_cast<const void*>(data.back().data()), t, ref::to_shape(x.dims));
    }
    std::vector<unsigned char> out(
        static_cast<std::size_t>(count_of(out_dims) * kiln::size_in_bytes(out_type)) + 1);
    std::vector<kiln::tensor_ref> results = {
        kiln::tensor_ref(static_cast<void*>(out.data()), out_type, ref::to_shape(out_dims))};
    e.run(args, results);
    std::vector<double> r;
    for (std::int64_t i = 0; i < count_of(out_dims); ++i)
      r.push_back(ref::value_at(out, out_type, static_cast<std::size_t>(i)));
    return r;
  }
};

void expect_values(const std::vector<double>& got, const host_tensor& want) {
  ASSERT_EQ(got.size(), want.v.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want.v[i]) << "element " << i;
}

host_tensor map(host_tensor t, double scale, double add) {
  for (auto& v : t.v) v = v * scale + add;
  return t;
}

TEST(Gather, EveryAxisIndexRankAndIndexType) {
  host_tensor x = iota({4, 5, 6});
  // Positions with negatives, and (kiln's clamp) past either end.
  std::vector<host_tensor> indices = {
      {{}, {-2}}, {{3}, {0, -1, 2}}, {{2, 3}, {1, 0, -3, 3, 3, -4}}, {{2}, {9, -9}}};
  for (int axis = 0; axis < 3; ++axis)
    for (const auto& idx : indices)
      for (dtype it : {dtype::i32, dtype::i64}) {
        SCOPED_TRACE("axis " + std::to_string(axis) + " indices " + ref::dims_text(idx.dims) + " " +
                     std::string(kiln::name(it)));
        runner r;
        auto xv = r.input(dtype::f32, x);
        auto iv = r.input(it, idx);
        // An elementwise consumer: the gather is its load.
        r.g.output(
            "y", r.g.add(r.g.mul(r.g.gather(xv, iv, axis), r.g.constant(2.0)), r.g.constant(1.0)));
        host_tensor want = map(ref_gather(x, idx, axis), 2, 1);
        expect_values(r.run(dtype::f32, want.dims), want);
      }
}

TEST(Gather, EmbeddingRowsAndLastAxisOnEveryThread) {
  // An embedding lookup: [8, 50] token ids into a [1000, 64] table (rows chosen per row), and
  // positions along the contiguous axis (chosen per element), both large enough for the pool.
  host_tensor table = iota({1000, 64}, 0.5, -7);
  host_tensor ids{{8, 50}, {}};
  for (int i = 0; i < 400; ++i) ids.v.push_back((i * 7919) % 1000 - (i % 3 == 0 ? 1000 : 0));
  runner r;
  auto t = r.input(dtype::f32, table);
  auto i = r.input(dtype::i64, ids);
  r.g.output("y", r.g.neg(r.g.gather(t, i, 0)));
  host_tensor want = map(ref_gather(table, ids, 0), -1, 0);
  expect_values(r.run(dtype::f32, want.dims), want);

  host_tensor cols{{300}, {}};
  for (int k = 0; k < 300; ++k) cols.v.push_back(63 - k % 64);
  runner c;
  auto tv = c.input(dtype::f32, table);
  auto cv = c.input(dtype::i32, cols);
  c.g.output("y", c.g.gather(tv, cv, 1));
  expect_values(c.run(dtype::f32, {1000, 300}), ref_gather(table, cols, 1));
}

TEST(Gather, ElementsAlongEachAxis) {
  host_tensor x = iota({4, 5}, 1, 10);
  host_tensor idx0{{2, 5}, {0, 3, -1, 2, 1, 3, 3, 0, -4, 2}};
  host_tensor idx1{{3, 4}, {4, 0, 1, -1, 2, 2, 0, 3, -5, 1, 4, 0}};  // fewer rows and columns
  for (auto [axis, idx] : {std::pair{0, idx0}, std::pair{1, idx1}})
    for (dtype it : {dtype::i32, dtype::i64}) {
      runner r;
      auto xv = r.input(dtype::i32, x);
      auto iv = r.input(it, idx);
      r.g.output("y", r.g.gather_elements(xv, iv, axis));
      expect_values(r.run(dtype::i32, idx.dims), ref_gather_elements(x, idx, axis));
    }
}

TEST(Pad, EveryModeOnEveryAxisWithCrops) {
  host_tensor x = iota({3, 4, 5}, 1, 1);
  std::vector<index_t> pads = {{1, 0, 0, 0, 0, 0},   {0, 2, 1, 0, 1, 3},  {2, 3, 4, 2, 3, 4},
                               {0, -1, 2, 1, 0, -2}, {-1, 1, 0, 0, 2, 0}, {0, 0, 0, 0, 0, 0}};
  for (std::string mode : {"constant", "edge", "reflect", "wrap"})
    for (const auto& p : pads) {
      SCOPED_TRACE(mode + " " + ref::dims_text(p));
      runner r;
      auto xv = r.input(dtype::f32, x);
      r.g.output("y", r.g.pad(xv, p, mode));
      host_tensor want = ref_pad(x, p, mode);
      expect_values(r.run(dtype::f32, want.dims), want);
    }
  // A constant value given as a tensor, narrow element types (several per 32-bit word on
  // Vulkan), and a reduction over the padded value.
  for (dtype t : {dtype::u8, dtype::f16, dtype::i64}) {
    runner r;
    auto xv = r.input(t, x);
    auto v = r.input(t, host_tensor{{}, {7}});
    index_t p = {0, 1, 2, 1, 2, 0};
    r.g.output("y", r.g.pad(xv, p, v));
    expect_values(r.run(t, {4, 7, 7}), ref_pad(x, p, "constant", 7));
  }
  runner s;
  auto xv = s.input(dtype::f32, x);
  s.g.output("y", s.g.reduce_sum(s.g.pad(xv, {1, 1, 1, 1, 1, 1}, "reflect"), {0, 2}));
  host_tensor padded = ref_pad(x, {1, 1, 1, 1, 1, 1}, "reflect");
  host_tensor want = build({1, 6, 1}, [&](const index_t& o) {
    double sum = 0;
    for (std::int64_t i = 0; i < 5; ++i)
      for (std::int64_t k = 0; k < 7; ++k) sum += padded.at({i, o[1], k});
    return sum;
  });
  expect_values(s.run(dtype::f32, want.dims), want);
}

TEST(Concat, PiecesAlongEveryAxisReadInPlace) {
  for (int axis = 0; axis < 3; ++axis) {
    std::vector<host_tensor> pieces;
    for (std::int64_t k = 1; k <= 4; ++k) {
      dims_t d = {2, 3, 4};
      d[axis] = k == 3 ? 0 : k;  // one piece is empty along the axis
      pieces.push_back(iota(d, 1, 100.0 * static_cast<double>(k)));
    }
    runner r;
    std::vector<kiln::graph::value> in;
    for (const auto& p : pieces) in.push_back(r.input(dtype::f32, p));
    r.g.output("y", r.g.sub(r.g.concat(in, axis - 3), r.g.constant(1.0)));
    host_tensor want = map(ref_concat(pieces, axis), 1, -1);
    auto e = kiln::compile(r.g);
    EXPECT_EQ(e.dispatch_count(), 1);
    EXPECT_EQ(e.plan().transient_bytes(), 0);
    expect_values(r.run(dtype::f32, want.dims), want);
  }
  // Long rows along the joined axis: pieces that start and end inside the CPU's 512-element
  // pieces of a row, one of them transposed (read with a stride between its clamped ends), and
  // an edge pad of it.
  {
    host_tensor p0 = iota({3, 700}, 1, 1), p1 = iota({3, 1}, 1, -5), p2 = iota({300, 3}, 2, 7);
    runner r;
    auto a0 = r.input(dtype::f32, p0);
    auto a1 = r.input(dtype::f32, p1);
    auto a2 = r.input(dtype::f32, p2);
    auto t2 = r.g.transpose(a2);
    r.g.output("y", r.g.concat({a0, a1, t2, r.g.pad(t2, {0, 200, 0, 100}, "edge")}, 1));
    host_tensor p2t = build({3, 300}, [&](const index_t& o) { return p2.at({o[1], o[0]}); });
    host_tensor want = ref_concat({p0, p1, p2t, ref_pad(p2t, {0, 200, 0, 100}, "edge")}, 1);
    expect_values(r.run(dtype::f32, want.dims), want);
  }
  // bool and i64 pieces, one of them transposed, one computed (materialized for the gather).
  host_tensor a = iota({3, 2}), b = iota({2, 2}, 1, 6), c = iota({2, 1}, 1, 10);
  runner r;
  auto av = r.input(dtype::i64, a);
  auto bv = r.input(dtype::i64, b);
  auto cv = r.input(dtype::i64, c);
  auto joined = r.g.concat({r.g.transpose(av), r.g.mul(bv, bv), cv}, 1);
  r.g.output("y", r.g.gt(joined, r.g.constant(std::int64_t{4}, dtype::i64)));
  host_tensor bb = b;
  for (auto& v : bb.v) v *= v;
  host_tensor want = ref_concat({build({2, 3},
                                       [&](const index_t& o) {
                                         return a.at({o[1], o[0]});
                                       }),
                                 bb, c},
                                1);
  for (auto& v : want.v) v = v > 4;
  expect_values(r.run(dtype::boolean, want.dims), want);
}

TEST(Moves, ChainsAndComputedIndices) {
  host_tensor x = iota({6, 7});
  // A transpose of a gather of a gather along the same axis (positions of positions: the inner
  // gather is materialized once), and a slice of a concat.
  runner s;
  auto xs = s.input(dtype::f32, x);
  auto is = s.input(dtype::i32, host_tensor{{4}, {5, 0, -1, 2}});
  auto js = s.input(dtype::i64, host_tensor{{3}, {3, 3, 0}});
  s.g.output("y", s.g.transpose(s.g.gather(s.g.gather(xs, is, 1), js, 1)));
  expect_values(s.run(dtype::f32, {3, 6}), build({3, 6}, [&](const index_t& o) {
                  const std::int64_t inner[] = {5, 0, 6, 2}, outer[] = {3, 3, 0};
                  return x.at({o[1], inner[outer[o[0]]]});
                }));
  runner c;
  auto xc = c.input(dtype::f32, x);
  c.g.output("y", c.g.slice(c.g.concat({xc, c.g.neg(xc)}, 0), {5}, {8}, {0}));
  expect_values(c.run(dtype::f32, {3, 7}), build({3, 7}, [&](const index_t& o) {
                  std::int64_t row = 5 + o[0];
                  return row < 6 ? x.at({row, o[1]}) : -x.at({row - 6, o[1]});
                }));
  // Indices computed by the graph (an argmax): materialized, then read whole.
  runner a;
  auto xa = a.input(dtype::f32, x);
  auto w = a.input(dtype::f32, host_tensor{{3, 6},
                                           std::vector<double>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8,
                                                               9, 7, 9, 3, 2, 3}});
  a.g.output("y", a.g.gather(xa, a.g.argmax(w, 1, false), 1));
  const std::int64_t best[] = {5, 5, 0};
  expect_values(a.run(dtype::f32, {6, 3}), build({6, 3}, [&](const index_t& o) {
                  return x.at({o[0], best[o[1]]});
                }));
}

TEST(Moves, RunTimeSizesBesideTheGatheredAxis) {
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {kiln::dyn, 8});
  auto y = g.input("y", dtype::f32, {kiln::dyn, 2});
  auto i = g.input("i", dtype::i32, {3});
  g.output("z", g.concat({g.gather(x, i, 1), y}, 1));
  auto e = kiln::compile(g);
  for (std::int64_t rows : {1, 5, 3000}) {
    host_tensor xv = iota({rows, 8}), yv = iota({rows, 2}, -1);
    host_tensor iv{{3}, {7, -8, 4}};
    std::vector<float> xf(xv.v.begin(), xv.v.end()), yf(yv.v.begin(), yv.v.end()),
        z(static_cast<std::size_t>(rows * 5));
    std::vector<std::int32_t> ii = {7, -8, 4};
    e.run({kiln::view(xf.data(), {rows, 8}), kiln::view(yf.data(), {rows, 2}),
           kiln::view(ii.data(), {3})},
          {kiln::view(z.data(), {rows, 5})});
    host_tensor want = ref_concat({ref_gather(xv, iv, 1), yv}, 1);
    SCOPED_TRACE(rows);
    expect_values(std::vector<double>(z.begin(), z.end()), want);
  }
}

TEST(Moves, PlansReadPiecesWithoutCopies) {
  kiln::graph g;
  auto table = g.input("table", dtype::f32, {100, 16});
  auto ids = g.input("ids", dtype::i64, {4, 9});
  auto b = g.input("b", dtype::f32, {16});
  g.output("y", g.relu(g.add(g.gather(table, ids, 0), b)));
  auto e = kiln::compile(g);
  EXPECT_EQ(e.dispatch_count(), 1);
  EXPECT_EQ(e.plan().transient_bytes(), 0);
}

TEST(Moves, TheDslDoorWithExtentsAtCompileTime) {
  using kiln::tensor;
  // A gather, a piece of its own and an edge pad joined along axis 0, with an epilogue: one
  // dispatch, no transient memory.
  constexpr auto f = kiln::fn<tensor<float, 3, 4>, tensor<std::int64_t, 2>, tensor<float, 1, 2>>(
      [](auto x, auto i, auto y) {
        return kiln::relu(
            kiln::concat<0>(kiln::gather<1>(x, i), y,
                            kiln::pad<kiln::pad_mode::edge, 0, 1, 0, 0>(kiln::slice<1, 0, 1>(x))) -
            2.0f);
      });
  static_assert(f.plan.dispatch_count() == 1 && f.plan.transient_bytes() == 0);
  host_tensor x = iota({3, 4});
  std::vector<float> xf(x.v.begin(), x.v.end()), y = {10, 20}, out(7 * 2);
  std::vector<std::int64_t> i = {3, -4};
  f(kiln::view(xf.data(), {3, 4}), kiln::view(i.data(), {2}), kiln::view(y.data(), {1, 2}),
    kiln::into(kiln::view(out.data(), {7, 2})));
  host_tensor edge = build({3, 2}, [&](const index_t& o) { return x.at({o[0], 0}); });
  host_tensor want = ref_concat({ref_gather(x, {{2}, {3, -4}}, 1), {{1, 2}, {10, 20}}, edge}, 0);
  for (auto& v : want.v) v = std::max(v - 2, 0.0);
  expect_values(std::vector<double>(out.begin(), out.end()), want);
  // gather_elements and a constant pad.
  constexpr auto g = kiln::fn<tensor<float, 3, 4>, tensor<std::int32_t, 2, 4>>(
      [](auto x, auto i) { return kiln::pad<1, 0, 0, 1>(kiln::gather_elements<0>(x, i)); });
  std::vector<std::int32_t> j = {2, 1, 0, -1, 0, 0, 1, 2};
  std::vector<float> z(3 * 5);
  g(kiln::view(xf.data(), {3, 4}), kiln::view(j.data(), {2, 4}),
    kiln::into(kiln::view(z.data(), {3, 5})));
  host_tensor jt{{2, 4}, std::vector<double>(j.begin(), j.end())};
  expect_values(std::vector<double>(z.begin(), z.end()),
                ref_pad(ref_gather_elements(x, jt, 0), {1, 0, 0, 1}, "constant"));
}

TEST(Moves, MistakesNameTheOpAndTheArgument) {
  auto message = [](auto fn) { return ref::error_message(fn); };
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {3, 4});
  auto f = g.input("f", dtype::f32, {2});
  auto i = g.input("i", dtype::i64, {2});
  auto d = g.input("d", dtype::f32, {kiln::dyn, 4});
  EXPECT_THAT(message([&] { g.gather(x, f, 0); }),
              testing::HasSubstr("gather: indices: expected i32 or i64, got f32"));
  EXPECT_THAT(message([&] { g.gather(x, i, 2); }),
              testing::HasSubstr("gather: axis 2 is out of range for data of rank 2"));
  EXPECT_THAT(message([&] {
                g.gather_elements(x, g.input("j", dtype::i32, {4, 4}), 1);
              }),
              testing::HasSubstr("gather_elements: indices [4, 4] do not fit data [3, 4]"));
  EXPECT_THAT(message([&] {
                g.concat({x, g.input("y", dtype::f32, {2, 5})}, 0);
              }),
              testing::HasSubstr("concat: piece 1 is f32[2, 5], piece 0 is f32[3, 4]"));
  EXPECT_THAT(message([&] {
                g.pad(d, {1, 0, 0, 0}, "edge");
              }),
              testing::HasSubstr("pad: axis 0 has a run-time size"));
  EXPECT_THAT(message([&] {
                g.pad(x, {0, 4, 0, 0}, "reflect");
              }),
              testing::HasSubstr("pad: reflect pads 4 and 0 must be below the axis's size 4"));
  EXPECT_THAT(message([&] {
                g.pad(x, {0, 1}, "edge");
              }),
              testing::HasSubstr("pad: pads has 2 entries for x of rank 2"));
  EXPECT_THAT(message([&] {
                g.pad(x, {0, 0, 0, 1}, "mirror");
              }),
              testing::HasSubstr("pad: mode is 'mirror'"));
}

// Pooling (ONNX's MaxPool and AveragePool) against a window-by-window reference: random windows
// over 1 to 3 spatial axes (kernel, stride, dilation, pads, ceil_mode, count_include_pad, every
// auto_pad), written from ONNX's output-size rules; max pooling of integers too.
TEST(Pool, RandomWindowsAgainstAWindowReference) {
  std::mt19937 gen(77);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(gen() % (hi - lo + 1)); };
  for (int trial = 0; trial < 40; ++trial) {
    const int n = pick(1, 3);
    dims_t dims = {pick(1, 2), pick(1, 3)};
    kiln::ir::pool_window w;
    w.auto_pad = static_cast<kiln::auto_pad>(trial % 5 == 4 ? pick(1, 3) : 0);
    w.ceil_mode = pick(0, 1) == 1;
    w.count_include_pad = pick(0, 1) == 1;
    for (int i = 0; i < n; ++i) {
      w.kernel.push_back(pick(1, 3));
      w.strides.push_back(pick(1, 3));
      w.dilations.push_back(w.auto_pad == kiln::auto_pad::notset ? pick(1, 2) : 1);
      dims.push_back(pick(1, 4) + (w.kernel.back() - 1) * w.dilations.back());
    }
    for (int i = 0; i < 2 * n; ++i)
      w.pads.push_back(std::min<std::int64_t>(pick(0, 2), w.kernel[i % n] - 1));
    const bool average = pick(0, 1) == 1;
    const dtype t = average || pick(0, 2) ? dtype::f32 : dtype::i32;
    SCOPED_TRACE("trial " + std::to_string(trial) + ref::dims_text(dims) +
                 (average ? " average" : " max") + " ceil " + std::to_string(w.ceil_mode) +
                 " auto_pad " + std::to_string(static_cast<int>(w.auto_pad)));
    // The reference's own sizes and pads.
    std::vector<std::int64_t> out(n), begin(n), end(n);
    for (int i = 0; i < n; ++i) {
      std::int64_t size = dims[2 + i], k = w.kernel[i], s = w.strides[i], d = w.dilations[i];
      std::int64_t span = (k - 1) * d + 1;
      begin[i] = w.pads[i];
      end[i] = w.pads[i + n];
      if (w.auto_pad == kiln::auto_pad::valid) {
        begin[i] = end[i] = 0;
        out[i] = (size - span) / s + 1;
      } else if (w.auto_pad != kiln::auto_pad::notset) {
        out[i] = (size + s - 1) / s;
        std::int64_t total = std::max<std::int64_t>((out[i] - 1) * s + span - size, 0);
        begin[i] = w.auto_pad == kiln::auto_pad::same_upper ? total / 2 : (total + 1) / 2;
        end[i] = total - begin[i];
      } else {
        double q = double(size + begin[i] + end[i] - span) / double(s);
        out[i] = static_cast<std::int64_t>(w.ceil_mode ? std::ceil(q) : std::floor(q)) + 1;
        if (w.ceil_mode && (out[i] - 1) * s >= size + begin[i]) --out[i];
      }
    }
    dims_t out_dims = {dims[0], dims[1]};
    for (int i = 0; i < n; ++i) out_dims.push_back(out[i]);
    auto x = ref::random_data<float>(ref::count(dims), -20, 20, 900 + trial);
    if (t == dtype::i32)
      for (auto& v : x) v = std::round(v);
    std::vector<double> want(static_cast<std::size_t>(ref::count(out_dims)));
    for (std::size_t o = 0; o < want.size(); ++o) {
      std::int64_t rest = static_cast<std::int64_t>(o);
      std::vector<std::int64_t> at(out_dims.size());
      for (std::size_t k = out_dims.size(); k-- > 0;) {
        at[k] = rest % out_dims[k];
        rest /= out_dims[k];
      }
      double acc = average ? 0 : -INFINITY;
      std::int64_t cells = 0, counted = 0;
      std::vector<std::int64_t> j(n, 0);
      for (;;) {
        std::int64_t offset = at[0] * dims[1] + at[1];
        bool inside = true, in_pads = true;
        for (int i = 0; i < n; ++i) {
          std::int64_t p = at[2 + i] * w.strides[i] - begin[i] + j[i] * w.dilations[i];
          inside = inside && p >= 0 && p < dims[2 + i];
          in_pads = in_pads && p >= -begin[i] && p < dims[2 + i] + end[i];
          offset = offset * dims[2 + i] + p;
        }
        if (inside) {
          double v = x[static_cast<std::size_t>(offset)];
          acc = average ? acc + v : std::max(acc, v);
          ++cells;
        }
        counted += (w.count_include_pad ? in_pads : inside) ? 1 : 0;
        int i = n;
        while (i > 0 && ++j[i - 1] == w.kernel[i - 1]) j[--i] = 0;
        if (i == 0) break;
      }
      want[o] = average ? acc / double(counted) : acc;
      (void)cells;
    }
    kiln::graph g;
    auto gx = g.input("x", t, ref::to_shape(dims));
    g.output("y", average ? g.average_pool(gx, w) : g.max_pool(gx, w));
    auto e = kiln::compile(g);
    if (t == dtype::f32) {
      ref::buffer<float> xb(x), yb(want.size());
      e.run({ref::view_of(xb, dims)}, {ref::view_of(yb, out_dims)});
      for (std::size_t o = 0; o < want.size(); ++o)
        EXPECT_NEAR(yb[o], want[o], 2e-6 * (std::fabs(want[o]) + 20)) << "output " << o;
    } else {
      std::vector<std::int32_t> xi(x.begin(), x.end());
      ref::buffer<std::int32_t> xb(xi), yb(want.size());
      e.run({ref::view_of(xb, dims)}, {ref::view_of(yb, out_dims)});
      for (std::size_t o = 0; o < want.size(); ++o) EXPECT_EQ(yb[o], want[o]) << "output " << o;
    }
  }
}

// The DSL door: extents at compile time, the pool and its epilogue, global pools; mistakes name
// the op.
TEST(Pool, TheDslDoorAndMistakes) {
  using kiln::tensor;
  constexpr kiln::pool_params window{.kernel = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}};
  constexpr auto f = kiln::fn<tensor<float, 2, 3, 9, 8>>(
      [](auto x) { return kiln::relu(kiln::max_pool2d<window>(x) - 0.5f); });
  static_assert(f.plan.dispatch_count() == 1 && f.plan.transient_bytes() == 0,
                "the windows are read in place, with the epilogue, in one dispatch");
  using result = std::tuple_element_t<0, decltype(f)::result_values>;
  static_assert(result::extents_type::value() == kiln::shape{2, 3, 5, 4});
  auto x = ref::random_data<float>(2 * 3 * 9 * 8, -2, 2, 5);
  auto y = f(x);
  ASSERT_EQ(y.size(), 2u * 3 * 5 * 4);
  for (int c = 0; c < 6; ++c)
    for (int oh = 0; oh < 5; ++oh)
      for (int ow = 0; ow < 4; ++ow) {
        float m = -INFINITY;
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) {
            int h = oh * 2 - 1 + i, w = ow * 2 - 1 + j;
            if (h >= 0 && h < 9 && w >= 0 && w < 8) m = std::max(m, x[c * 72 + h * 8 + w]);
          }
        EXPECT_EQ(y[(c * 5 + oh) * 4 + ow], std::max(m - 0.5f, 0.f));
      }
  constexpr auto avg = kiln::fn<tensor<float, 1, 2, 4, 4>>([](auto x) {
    return kiln::avg_pool2d<kiln::pool_params{.kernel = {2, 2}, .strides = {2, 2}}>(x);
  });
  auto a = avg(std::vector<float>(32, 1.5f));
  EXPECT_THAT(a, testing::Each(1.5f));
  kiln::graph g;
  auto gx = g.input("x", dtype::f32, {2, 3, 4, 5});
  g.output("max", g.global_max_pool(gx));
  g.output("mean", g.global_average_pool(gx));
  auto e = kiln::compile(g);
  auto gin = ref::random_data<float>(120, -3, 3, 6);
  ref::buffer<float> xb(gin), mx(6), mean(6);
  e.run({ref::view_of(xb, {2, 3, 4, 5})},
        {ref::view_of(mx, {2, 3, 1, 1}), ref::view_of(mean, {2, 3, 1, 1})});
  for (int c = 0; c < 6; ++c) {
    double m = -INFINITY, s = 0;
    for (int i = 0; i < 20; ++i) {
      m = std::max<double>(m, gin[c * 20 + i]);
      s += gin[c * 20 + i];
    }
    EXPECT_EQ(mx[c], m);
    EXPECT_NEAR(mean[c], s / 20, 1e-6);
  }
  kiln::graph bad;
  auto bx = bad.input("x", dtype::f32, {1, 1, 2, 2});
  EXPECT_THAT(ref::error_message([&] {
                bad.max_pool(bx, kiln::pool_params{.kernel = {3, 3}});
              }),
              testing::HasSubstr("max_pool: spatial axis 0 of size 2"));
  EXPECT_THAT(ref::error_message([&] {
                bad.average_pool(bad.input("i", dtype::i32, {1, 1, 4, 4}), kiln::pool_params{});
              }),
              testing::HasSubstr("average_pool: the input is i32, not a float type"));
  EXPECT_THAT(ref::error_message([&] {
                bad.max_pool(bad.input("v", dtype::f32, {4, 4}), kiln::pool_params{});
              }),
              testing::HasSubstr("max_pool: the input must be [N, C, spatial...]"));
}

// A region the Vulkan device cannot run (exp on f64) goes to the CPU, which then reads the pad's
// mask tables (tensor constants uploaded to the device) through their views: through the
// device memory's host mapping, as it reads the region's direct arguments.
TEST(Moves, CpuFallbackReadsTablesThroughViews) {
  if (kiln::device::default_device().type() == kiln::device::kind::cpu)
    GTEST_SKIP() << "a Vulkan test (e2e.cpu runs the suite on the CPU)";
  kiln::graph g;
  auto x = g.input("x", dtype::f64, {3, 4});
  g.output("y", g.exp(g.pad(x, {1, 0, 0, 2}, "constant")));
  auto e = kiln::compile(g);
  std::vector<double> in(12);
  for (int i = 0; i < 12; ++i) in[i] = 0.25 * i - 1;
  std::vector<double> y(4 * 6);
  e.run({kiln::tensor_ref(in.data(), dtype::f64, {3, 4})},
        {kiln::tensor_ref(y.data(), dtype::f64, {4, 6})}, kiln::device::vulkan());
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) {
      double v = r >= 1 && c < 4 ? in[(r - 1) * 4 + c] : 0.0;
      EXPECT_NEAR(y[r * 6 + c], std::exp(v), 1e-15 * std::exp(v)) << r << ", " << c;
    }
}

}  // namespace
