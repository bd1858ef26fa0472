// Strided views (kiln::view(ptr, sizes, strides), strided tensor_refs and DLTensors) as arguments
// and results: read and written in place on the CPU, staged on Vulkan, and giving the same bits
// as row-major copies of the same elements; the oracle's answers for them; the errors.
#include <gtest/gtest.h>

#include <dlpack/dlpack.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <kiln/dlpack.hpp>
#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>

#include "../support/errors.hpp"

using namespace kiln;

namespace {

// A strided layout inside a larger host buffer: extents, strides and the first element's index.
struct layout {
  std::string name;
  std::vector<std::int64_t> dims, steps;
  std::int64_t first = 0;
};

// The layouts frameworks hand over, over a 2-D [rows, cols] tensor in a buffer of `room`
// elements.
std::vector<layout> layouts_2d(std::int64_t rows, std::int64_t cols) {
  return {
      {"transposed", {rows, cols}, {1, rows}, 0},  // column-major
      {"slice of a larger tensor", {rows, cols}, {cols + 9, 1}, 3 * (cols + 9) + 5},
      {"slice with steps", {rows, cols}, {3 * (cols + 2), 2}, 7},
      {"channel 1 of NHWC, C=3", {rows, cols}, {cols * 3, 3}, 1},
      {"reversed rows", {rows, cols}, {-cols, 1}, (rows - 1) * cols},  // negative stride
      {"broadcast row", {rows, cols}, {0, 1}, 2},                      // stride 0: one row
  };
}

std::int64_t room_for(const layout& l) {
  std::int64_t high = l.first;
  for (std::size_t i = 0; i < l.dims.size(); ++i)
    if (l.steps[i] > 0) high += l.steps[i] * (l.dims[i] - 1);
  return high + 1;
}

// The elements of l in row-major order, by an index walk of its own.
template <class T>
std::vector<T> packed(const std::vector<T>& base, const layout& l) {
  std::vector<T> out;
  std::function<void(std::size_t, std::int64_t)> walk = [&](std::size_t axis, std::int64_t at) {
    if (axis == l.dims.size()) {
      out.push_back(base[static_cast<std::size_t>(at)]);
      return;
    }
    for (std::int64_t i = 0; i < l.dims[axis]; ++i) walk(axis + 1, at + i * l.steps[axis]);
  };
  walk(0, l.first);
  return out;
}

shape shape_of_dims(const std::vector<std::int64_t>& d) {
  shape s;
  s.rank = static_cast<int>(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) s.dims[i] = d[i];
  return s;
}
stride_list steps_of(const layout& l) {
  stride_list s{};
  for (std::size_t i = 0; i < l.steps.size(); ++i) s[i] = l.steps[i];
  return s;
}

tensor_ref strided_ref(std::vector<float>& base, const layout& l) {
  return tensor_ref(base.data() + l.first, dtype::f32, shape_of_dims(l.dims), steps_of(l));
}

std::vector<float> filled(std::int64_t n, float scale = 1.0f) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = scale * (float(int(i * 37 % 101)) - 50.0f) / 16.0f;
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<device> devices() { return {device::cpu(), device::vulkan()}; }

// One function of two [?, ?] f32 arguments per region kind (and its result's extents).
struct function_case {
  std::string name;
  std::function<executable()> make;
  std::function<std::vector<std::int64_t>(std::int64_t, std::int64_t)> result_dims;
};

std::vector<function_case> functions() {
  auto two_inputs = [](graph& g) {
    return std::pair{g.input("x", dtype::f32, {dyn, dyn}), g.input("y", dtype::f32, {dyn, dyn})};
  };
  auto same = [](std::int64_t r, std::int64_t c) { return std::vector<std::int64_t>{r, c}; };
  return {
      {"elementwise",
       [=] {
         graph g;
         auto [x, y] = two_inputs(g);
         g.output("z", g.add(g.mul(g.sin(x), g.constant(3.0)), y));
         return compile(g);
       },
       same},
      {"row sums",
       [=] {
         graph g;
         auto [x, y] = two_inputs(g);
         g.output("z", g.reduce(ir::op::reduce_sum, g.mul(x, y), {1}, false));
         return compile(g);
       },
       [](std::int64_t r, std::int64_t) { return std::vector<std::int64_t>{r}; }},
      {"column sums",
       [=] {
         graph g;
         auto [x, y] = two_inputs(g);
         g.output("z", g.reduce(ir::op::reduce_sum, g.sub(x, y), {0}, true));
         return compile(g);
       },
       [](std::int64_t, std::int64_t c) {
         return std::vector<std::int64_t>{1, c};
       }},
      {"softmax plus",
       [=] {
         graph g;
         auto [x, y] = two_inputs(g);
         g.output("z", g.add(g.softmax(x, -1), y));
         return compile(g);
       },
       same},
      {"matmul by the transpose",
       [=] {
         graph g;
         auto x = g.input("x", dtype::f32, {dyn, 70}), y = g.input("y", dtype::f32, {dyn, 70});
         g.output("z", g.matmul(x, g.transpose(y, {1, 0})));
         return compile(g);
       },
       [](std::int64_t r, std::int64_t) {
         return std::vector<std::int64_t>{r, r};
       }},
      {"a transposed and sliced view of it",
       [=] {
         graph g;
         auto x = g.input("x", dtype::f32, {dyn, 70}), y = g.input("y", dtype::f32, {dyn, 70});
         g.output("z", g.add(g.slice(g.transpose(x, {1, 0}), {1}, {1000}, {0}),
                             g.slice(g.transpose(y, {1, 0}), {1}, {1000}, {0})));
         return compile(g);
       },
       [](std::int64_t r, std::int64_t c) {
         return std::vector<std::int64_t>{c - 1, r};
       }},
      {"a reshape of it (copied row-major)",
       [=] {
         graph g;
         auto x = g.input("x", dtype::f32, {dyn, 70}), y = g.input("y", dtype::f32, {dyn, 70});
         g.output("z", g.add(g.reshape(x, {0, 7, 10}), g.reshape(y, {0, 7, 10})));
         return compile(g);
       },
       [](std::int64_t r, std::int64_t) {
         return std::vector<std::int64_t>{r, 7, 10};
       }},
      {"a reshaped result",
       [=] {
         graph g;
         auto x = g.input("x", dtype::f32, {dyn, 70}), y = g.input("y", dtype::f32, {dyn, 70});
         g.output("z", g.reshape(g.mul(g.exp(x), y), {0, 10, 7}));
         return compile(g);
       },
       [](std::int64_t r, std::int64_t) {
         return std::vector<std::int64_t>{r, 10, 7};
       }},
  };
}

}  // namespace

// Every region kind reads every layout in place: the result's bits are those of the call on
// row-major copies of the same elements, on the CPU and on lavapipe.
TEST(Strided, InputsGiveTheBitsOfRowMajorCopies) {
  const std::int64_t rows = 37, cols = 70;
  for (const function_case& fc : functions()) {
    executable e = fc.make();
    const auto out_dims = fc.result_dims(rows, cols);
    std::int64_t out_count = 1;
    for (auto d : out_dims) out_count *= d;
    for (const layout& lx : layouts_2d(rows, cols)) {
      // y is strided too, another way: the transposed layout's mirror.
      const layout ly =
          lx.name == "transposed" ? layouts_2d(rows, cols)[1] : layouts_2d(rows, cols)[0];
      std::vector<float> bx = filled(room_for(lx)), by = filled(room_for(ly), 0.5f);
      std::vector<float> px = packed(bx, lx), py = packed(by, ly);
      for (const device& d : devices()) {
        SCOPED_TRACE(fc.name + ", x " + lx.name + ", y " + ly.name + ", on " + d.name());
        std::vector<float> from_strided(static_cast<std::size_t>(out_count), -1.0f),
            from_copies(static_cast<std::size_t>(out_count), -2.0f);
        const shape od = shape_of_dims(out_dims);
        e.run({strided_ref(bx, lx), strided_ref(by, ly)},
              {tensor_ref(from_strided.data(), dtype::f32, od)}, d);
        e.run({tensor_ref(px.data(), dtype::f32, {rows, cols}),
               tensor_ref(py.data(), dtype::f32, {rows, cols})},
              {tensor_ref(from_copies.data(), dtype::f32, od)}, d);
        EXPECT_TRUE(same_bits(from_strided, from_copies));
      }
    }
  }
}

// The elementwise case against numbers worked out independently (so both calls above are right,
// not merely equal).
TEST(Strided, ElementwiseMatchesAScalarReference) {
  const std::int64_t rows = 5, cols = 9;
  executable e = functions()[0].make();
  for (const layout& l : layouts_2d(rows, cols)) {
    std::vector<float> bx = filled(room_for(l)), y(rows * cols), z(rows * cols);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = float(i);
    std::vector<float> px = packed(bx, l);
    for (const device& d : devices()) {
      SCOPED_TRACE(l.name + " on " + d.name());
      e.run({strided_ref(bx, l), tensor_ref(y.data(), dtype::f32, {rows, cols})},
            {tensor_ref(z.data(), dtype::f32, {rows, cols})}, d);
      for (std::size_t i = 0; i < z.size(); ++i)
        EXPECT_NEAR(z[i], std::sin(double(px[i])) * 3.0 + double(i), 1e-5) << "element " << i;
    }
  }
}

// Results written through strides: a channel of NHWC data, a transposed matrix, a strided row
// sum; the same bits as a row-major result on the same device, and the elements between them
// left as they were.
TEST(Strided, ResultsAreWrittenInPlaceAndNothingElse) {
  const std::int64_t rows = 33, cols = 70;
  std::vector<function_case> fs = functions();
  for (std::size_t f : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{4},
                        std::size_t{6}, std::size_t{7}}) {
    executable e = fs[f].make();
    const auto out_dims = fs[f].result_dims(rows, cols);
    const shape od = shape_of_dims(out_dims);
    std::vector<float> x = filled(rows * cols), y = filled(rows * cols, 0.25f);

    // The result as channel 2 of 3 interleaved ones, then (2-D results) transposed.
    std::vector<layout> outs;
    layout channel{"channel 2 of 3", out_dims, {}, 2};
    channel.steps.resize(out_dims.size());
    for (std::int64_t i = static_cast<std::int64_t>(out_dims.size()) - 1, s = 3; i >= 0; --i) {
      channel.steps[static_cast<std::size_t>(i)] = s;
      s *= out_dims[static_cast<std::size_t>(i)];
    }
    outs.push_back(channel);
    if (out_dims.size() == 2) outs.push_back({"transposed", out_dims, {1, out_dims[0]}, 0});
    for (const layout& lo : outs)
      for (const device& d : devices()) {
        SCOPED_TRACE(fs[f].name + " into " + lo.name + " on " + d.name());
        std::vector<float> want(static_cast<std::size_t>(od.element_count()));
        e.run({tensor_ref(x.data(), dtype::f32, {rows, cols}),
               tensor_ref(y.data(), dtype::f32, {rows, cols})},
              {tensor_ref(want.data(), dtype::f32, od)}, d);
        std::vector<float> base(static_cast<std::size_t>(room_for(lo)) + 2, 1234.5f);
        e.run({tensor_ref(x.data(), dtype::f32, {rows, cols}),
               tensor_ref(y.data(), dtype::f32, {rows, cols})},
              {tensor_ref(base.data() + lo.first, dtype::f32, od, steps_of(lo))}, d);
        EXPECT_TRUE(same_bits(packed(base, lo), want));
        // Every other element untouched.
        std::vector<bool> written(base.size());
        std::function<void(std::size_t, std::int64_t)> mark = [&](std::size_t a, std::int64_t at) {
          if (a == lo.dims.size()) {
            written[static_cast<std::size_t>(at)] = true;
            return;
          }
          for (std::int64_t i = 0; i < lo.dims[a]; ++i) mark(a + 1, at + i * lo.steps[a]);
        };
        mark(0, lo.first);
        std::size_t touched = 0;
        for (std::size_t i = 0; i < base.size(); ++i)
          if (!written[i] && base[i] != 1234.5f) ++touched;
        EXPECT_EQ(touched, 0u);
      }
  }
}

// The DSL door: kiln::view(ptr, sizes, strides) for arguments and into(...).
TEST(Strided, TheDslDoorTakesStridedViews) {
  constexpr auto f =
      fn<tensor<f32, dyn, dyn>, tensor<f32, dyn, dyn>>([](auto x, auto y) { return x * 2.0f - y; });
  const std::int64_t rows = 19, cols = 23;
  std::vector<float> a = filled(rows * cols), b = filled(rows * cols * 2, 0.5f);
  std::vector<float> want(rows * cols);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)  // x: a transposed; y: every other column of b
      want[i * cols + j] = a[j * rows + i] * 2.0f - b[i * cols * 2 + j * 2];
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    std::vector<float> out(rows * cols * 3, 7.0f);
    f.on(d)(view(a.data(), {rows, cols}, {1, rows}), view(b.data(), {rows, cols}, {cols * 2, 2}),
            into(view(out.data() + 1, {rows, cols}, {cols * 3, 3})));
    for (std::int64_t k = 0; k < rows * cols; ++k) {
      EXPECT_EQ(out[k * 3 + 1], want[k]) << "element " << k;
      EXPECT_EQ(out[k * 3], 7.0f);
      EXPECT_EQ(out[k * 3 + 2], 7.0f);
    }
  }
  // A row-major view made with strides is a plain view.
  std::vector<float> c(6);
  EXPECT_FALSE(view(c.data(), {2, 3}, {3, 1}).strided);
  EXPECT_FALSE(view(c.data(), {2, 1}, {1, 99}).strided);
  EXPECT_TRUE(view(c.data(), {3, 2}, {1, 3}).strided);
}

// A gather's positions are read row-major: a strided index tensor is copied for the call, with
// the same result.
TEST(Strided, GatherPositionsFromAStridedTensor) {
  graph g;
  auto data = g.input("data", dtype::f32, {dyn, 4});
  auto idx = g.input("idx", dtype::i64, {dyn});
  g.output("y", g.gather(data, idx, 0));
  executable e = compile(g);
  std::vector<float> table = filled(10 * 4);
  std::vector<std::int64_t> positions = {9, -1, 0, 5, 3, 7};  // every other one: 9, 0, 3
  std::vector<float> y(3 * 4);
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    e.run({tensor_ref(table.data(), dtype::f32, {10, 4}),
           tensor_ref(positions.data(), dtype::i64, shape{3}, stride_list{2})},
          {tensor_ref(y.data(), dtype::f32, {3, 4})}, d);
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c)
        EXPECT_EQ(y[r * 4 + c], table[(r == 0 ? 9 : r == 1 ? 0 : 3) * 4 + c]);
  }
  EXPECT_EQ(e.accepts(1, {dtype::i64, {3}, {2}}).answer, acceptance::verdict::needs_conversion);
  EXPECT_EQ(e.accepts(0, {dtype::f32, {10, 4}, {1, 10}}).answer, acceptance::verdict::as_is);
}

// A host DLTensor with strides (a column-major matrix, as numpy's .T gives) is read in place.
TEST(Strided, DlpackTensorsWithStrides) {
  constexpr auto f = fn<tensor<f32, 3, 4>>([](auto x) { return x + 1.0f; });
  std::vector<float> column_major(12);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) column_major[j * 3 + i] = float(i * 10 + j);
  std::int64_t sizes[2] = {3, 4}, strides[2] = {1, 3};
  DLTensor t{};
  t.data = column_major.data();
  t.device = {kDLCPU, 0};
  t.ndim = 2;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = sizes;
  t.strides = strides;
  std::vector<float> out(12);
  f(dlpack_view<float>(t), into(out));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(out[i * 4 + j], float(i * 10 + j) + 1.0f);
  // And as a result, through the graph door.
  graph g;
  g.output("y", g.neg(g.input("x", dtype::f32, {3, 4})));
  executable e = compile(g);
  std::vector<float> x(12), back(12);
  for (int k = 0; k < 12; ++k) x[k] = float(k);
  t.data = back.data();
  e.run({tensor_ref(x.data(), dtype::f32, {3, 4})}, {from_dlpack(t)});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(back[j * 3 + i], -float(i * 4 + j));
}

// The oracle answers for strided buffers before any call.
TEST(Strided, TheOracleAnswersForStridedBuffers) {
  using verdict = acceptance::verdict;
  executable elementwise = functions()[0].make(), reshaping = functions()[6].make();
  EXPECT_EQ(elementwise.accepts(0, {dtype::f32, {4, 5}, {1, 4}}).answer, verdict::as_is);
  EXPECT_EQ(elementwise.accepts(0, {dtype::f32, {4, 5}, {1, 4}}).wanted.strides,
            (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(elementwise.accepts(1, {dtype::f32, {4, 5}, {0, -1}}).answer, verdict::as_is);
  EXPECT_EQ(elementwise.accepts_result(0, {dtype::f32, {4, 5}, {15, 3}}).answer, verdict::as_is);
  acceptance shared = elementwise.accepts_result(0, {dtype::f32, {4, 5}, {0, 1}});
  EXPECT_EQ(shared.answer, verdict::unsupported);
  EXPECT_EQ(shared.why,
            "result 1 ('z'): strides [0, 1] give two indices the same element; a result needs an "
            "element of its own for each index");
  acceptance copied = reshaping.accepts(0, {dtype::f32, {4, 70}, {1, 4}});
  EXPECT_EQ(copied.answer, verdict::needs_conversion);
  EXPECT_EQ(copied.wanted.strides, (std::vector<std::int64_t>{70, 1}));
  EXPECT_EQ(copied.why,
            "argument 1 ('x'): strides [1, 4] (elements); the function reads it row-major "
            "(strides [70, 1]) through a reshape or a gather, so a call copies it into that "
            "layout: pass it so to save the copy");
  // A reshaped result is still written through its strides (the region walks the result's
  // axes).
  executable reshaped = functions()[7].make();
  EXPECT_EQ(reshaped.accepts_result(0, {dtype::f32, {4, 10, 7}, {210, 21, 3}}).answer,
            verdict::as_is);
  EXPECT_EQ(reshaped.accepts(0, {dtype::f32, {4, 70}, {1, 4}}).answer, verdict::as_is);
  constexpr auto f = fn<tensor<f32, 4, 5>>([](auto x) { return x * 2.0f; });
  EXPECT_EQ(f.accepts(0, {dtype::f32, {4, 5}, {1, 4}}).answer, verdict::as_is);
  EXPECT_EQ(f.accepts_result(0, {dtype::f32, {4, 5}, {5, 0}}).answer, verdict::unsupported);
}

// Row sums reshaped to [2, 2] as the result: the reducing region writes the caller's strided view
// in place, on both devices.
TEST(Strided, AReshapedReductionIsWrittenThroughStrides) {
  graph g;
  g.output("y",
           g.reshape(g.reduce(ir::op::reduce_sum, g.input("x", dtype::f32, {4, 70}), {1}, false),
                     {2, 2}));
  executable e = compile(g);
  EXPECT_EQ(e.accepts_result(0, {dtype::f32, {2, 2}, {1, 4}}).answer, acceptance::verdict::as_is);
  std::vector<float> x = filled(4 * 70);
  for (const device& d : devices()) {
    SCOPED_TRACE(d.name());
    std::vector<float> want(4), out(8, 5.0f);
    e.run({tensor_ref(x.data(), dtype::f32, {4, 70})},
          {tensor_ref(want.data(), dtype::f32, {2, 2})}, d);
    e.run({tensor_ref(x.data(), dtype::f32, {4, 70})},
          {tensor_ref(out.data(), dtype::f32, shape{2, 2}, stride_list{1, 4})}, d);
    EXPECT_EQ((std::vector<float>{out[0], out[4], out[1], out[5]}), want);  // transposed
    EXPECT_EQ((std::vector<float>{out[2], out[3], out[6], out[7]}), (std::vector<float>(4, 5.0f)));
    double row0 = 0;
    for (int j = 0; j < 70; ++j) row0 += x[j];
    EXPECT_NEAR(want[0], row0, 1e-4);
  }
}

// What cannot be: a result whose indices share elements, interleaved results, strides for the
// wrong rank, a view past the address space.
TEST(Strided, ClearErrors) {
  std::vector<float> x(20), y(20);
  executable e = functions()[0].make();
  EXPECT_EQ(
      error_of([&] {
        e.run({tensor_ref(x.data(), dtype::f32, {4, 5}), tensor_ref(x.data(), dtype::f32, {4, 5})},
              {tensor_ref(y.data(), dtype::f32, shape{4, 5}, stride_list{0, 1})});
      }),
      "kiln: " + e.name() +
          ": result 1 is a strided view (extents [4, 5], strides [0, 1]) in which two "
          "indices name the same element; a result needs an element of its own for each "
          "index");
  graph g;
  auto in = g.input("x", dtype::f32, {2, 3});
  g.output("a", g.neg(in));
  g.output("b", g.abs(in));
  executable two = compile(g);
  std::vector<float> out(12);
  EXPECT_NE(error_of([&] {
              two.run({tensor_ref(x.data(), dtype::f32, {2, 3})},
                      {tensor_ref(out.data(), dtype::f32, shape{2, 3}, stride_list{6, 2}),
                       tensor_ref(out.data() + 1, dtype::f32, shape{2, 3}, stride_list{6, 2})});
            }).find("result 2 overlaps result 1"),
            std::string::npos);
  EXPECT_EQ(error_of([&] {
              (void)view(x.data(), {4, 5}, {1});
            }),
            "kiln: view: the view has 2 extents but 1 strides; give one per axis");
  EXPECT_NE(error_of([&] {
              (void)view(x.data(), {4, 5}, {std::int64_t{1} << 61, 1});
            }).find("reaches beyond the address space"),
            std::string::npos);
}
