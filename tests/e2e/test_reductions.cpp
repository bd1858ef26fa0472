// Reductions end to end: every kind over sets of axes, ranks 0 to 6 and sizes 0 to 4097, with and
// without keepdims, through both doors, checked against the tests' own reduction (double or
// 64-bit integer accumulation, written here without kiln). Runs on the default device (Vulkan on
// lavapipe) and, as e2e.cpu.test_reductions, on the CPU.
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "../support/e2e.hpp"

namespace {

using kiln::dtype;
using kiln::ir::op;
using ref::dims_t;

constexpr op all_kinds[] = {op::reduce_sum, op::reduce_mean,      op::reduce_max,
                            op::reduce_min, op::reduce_prod,      op::reduce_l1,
                            op::reduce_l2,  op::reduce_sum_square};

// The reduced dims: axes dropped, or kept with size 1.
dims_t reduced(const dims_t& dims, std::uint32_t axes, bool keepdims) {
  dims_t out;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (!((axes >> i) & 1u))
      out.push_back(dims[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

// The reference: per result, its elements in order, folded in double (floats) or in 64-bit
// integers wrapped to the type at the end. `scale`: the sum of |terms| per result, for the
// float tolerance.
template <class T>
struct expected {
  std::vector<double> values, scale;
};

template <class T>
expected<T> reference(op kind, const std::vector<T>& x, const dims_t& dims, std::uint32_t axes) {
  dims_t out_dims = reduced(dims, axes, false);
  std::int64_t outputs = ref::count(out_dims), n = ref::count(dims);
  std::int64_t per = outputs > 0 ? n / std::max<std::int64_t>(outputs, 1) : 0;
  if (outputs > 0 && n == 0) {
    per = 1;
    for (std::size_t i = 0; i < dims.size(); ++i)
      if ((axes >> i) & 1u) per *= dims[i];
  }
  constexpr bool is_int = std::is_integral_v<T>;
  double init = kind == op::reduce_max    ? -INFINITY
                : kind == op::reduce_min  ? INFINITY
                : kind == op::reduce_prod ? 1.0
                                          : 0.0;
  std::vector<double> acc(outputs, init), scale(outputs, 0);
  std::vector<std::uint64_t> iacc(outputs, kind == op::reduce_prod ? 1 : 0);
  std::vector<std::int64_t> imax(outputs, kind == op::reduce_max
                                              ? std::numeric_limits<std::int64_t>::min()
                                              : std::numeric_limits<std::int64_t>::max());
  dims_t idx(dims.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rest = i, o = 0;
    for (std::size_t k = dims.size(); k-- > 0;) {
      idx[k] = rest % dims[k];
      rest /= dims[k];
    }
    for (std::size_t k = 0; k < dims.size(); ++k)
      if (!((axes >> k) & 1u)) o = o * dims[k] + idx[k];
    double v = ref::to_double(x[i]);
    if constexpr (is_int) {
      auto u = static_cast<std::uint64_t>(static_cast<std::int64_t>(x[i]));
      switch (kind) {
        case op::reduce_max:
          imax[o] = std::max<std::int64_t>(imax[o], x[i]);
          break;
        case op::reduce_min:
          imax[o] = std::min<std::int64_t>(imax[o], x[i]);
          break;
        case op::reduce_prod:
          iacc[o] *= u;
          break;
        case op::reduce_l1:
          iacc[o] += x[i] < 0 ? 0 - u : u;
          break;
        case op::reduce_sum_square:
          iacc[o] += u * u;
          break;
        default:
          iacc[o] += u;
      }
      continue;
    }
    switch (kind) {
      case op::reduce_max:
        acc[o] = std::max(acc[o], v);
        break;
      case op::reduce_min:
        acc[o] = std::min(acc[o], v);
        break;
      case op::reduce_prod:
        acc[o] *= v;
        scale[o] += 1;  // counts the factors: each rounding is relative
        break;
      case op::reduce_l1:
        acc[o] += std::fabs(v);
        scale[o] += std::fabs(v);
        break;
      case op::reduce_l2:
      case op::reduce_sum_square:
        acc[o] += v * v;
        scale[o] += v * v;
        break;
      default:
        acc[o] += v;
        scale[o] += std::fabs(v);
    }
  }
  expected<T> e;
  for (std::int64_t o = 0; o < outputs; ++o) {
    if constexpr (is_int) {
      bool minmax = kind == op::reduce_max || kind == op::reduce_min;
      if (minmax && per == 0)
        e.values.push_back(kind == op::reduce_max ? double(std::numeric_limits<T>::lowest())
                                                  : double(std::numeric_limits<T>::max()));
      else
        e.values.push_back(minmax ? double(imax[o]) : double(static_cast<T>(iacc[o])));
    } else {
      double v = acc[o];
      if (kind == op::reduce_mean) v = per ? v / per : NAN;
      if (kind == op::reduce_l2) v = std::sqrt(v);
      if (kind == op::reduce_mean) scale[o] /= std::max<std::int64_t>(per, 1);
      if (kind == op::reduce_l2) scale[o] = std::sqrt(scale[o]);
      e.values.push_back(v);
    }
    e.scale.push_back(scale[o]);
  }
  return e;
}

// Machine epsilon of the type a result is accumulated in (narrow floats: f32), and of its storage.
template <class T>
double accumulation_eps() {
  return std::is_same_v<T, double> ? 0x1p-52 : 0x1p-23;
}
template <class T>
double storage_eps() {
  if constexpr (std::is_same_v<T, kiln::float16>) return 0x1p-10;
  if constexpr (std::is_same_v<T, kiln::bfloat16>) return 0x1p-7;
  return accumulation_eps<T>();
}

template <class T>
void expect_reduction(op kind, const std::vector<T>& got, const expected<T>& want, std::int64_t per,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.values.size()) << what;
  int reported = 0;
  // Floats: a tree's bound on the accumulated rounding (the device's compensated sums do
  // better), relative to the sum of |terms|; products: one rounding per factor; then one
  // rounding to the storage type.
  double steps = std::log2(static_cast<double>(std::max<std::int64_t>(per, 2))) + 2;
  for (std::size_t i = 0; i < got.size() && reported < 5; ++i) {
    double g = ref::to_double(got[i]), w = want.values[i];
    bool ok;
    if constexpr (std::is_integral_v<T>) {
      ok = g == w;
    } else {
      double bound = kind == op::reduce_prod ? 2 * (per + 1) * accumulation_eps<T>() * std::fabs(w)
                                             : 4 * steps * accumulation_eps<T>() * want.scale[i];
      if (kind == op::reduce_l2) bound = 4 * steps * accumulation_eps<T>() * std::fabs(w);
      bound += storage_eps<T>() * std::fabs(w);
      ok = std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w : std::fabs(g - w) <= bound;
    }
    if (!ok) {
      ++reported;
      ADD_FAILURE() << what << ": result " << i << " is " << g << ", expected " << w;
    }
  }
}

std::string axes_text(std::uint32_t axes) {
  std::string s = "{";
  for (int i = 0; i < 32; ++i)
    if ((axes >> i) & 1u) s.append(s.size() > 1 ? "," : "").append(std::to_string(i));
  return s + "}";
}

// Builds y = kind(x, axes, keepdims) through the graph door, runs it on the default device and
// checks it. Values in [lo, hi).
template <class T>
void check_graph(op kind, const dims_t& dims, std::uint32_t axes, bool keepdims, double lo,
                 double hi, unsigned seed) {
  constexpr dtype t = kiln::dtype_of<T>;
  kiln::graph g;
  auto x = g.input("x", t, ref::to_shape(dims));
  std::vector<std::int64_t> list;
  for (std::size_t i = 0; i < dims.size(); ++i)
    if ((axes >> i) & 1u) list.push_back(static_cast<std::int64_t>(i));
  if (axes == 0 && !dims.empty()) axes = (1u << dims.size()) - 1;  // no axes: every axis
  g.output("y", g.reduce(kind, x, list, keepdims));
  auto e = kiln::compile(g);
  auto in = ref::make_arg<T>(dims, lo, hi, seed);
  dims_t out_dims = reduced(dims, axes, keepdims);
  ref::buffer<T> out(static_cast<std::size_t>(ref::count(out_dims)));
  e.run({ref::view_of(in.data, dims)},
        {kiln::tensor_ref(static_cast<void*>(out.data()), t, ref::to_shape(out_dims))});
  std::int64_t per = 1;
  for (std::size_t i = 0; i < dims.size(); ++i)
    if ((axes >> i) & 1u) per *= dims[i];
  std::string what = std::string(kiln::ir::name(kind)) + " of " + std::string(kiln::name(t)) +
                     ref::dims_text(dims) + " over " + axes_text(axes) +
                     (keepdims ? " keepdims" : "");
  expect_reduction(kind, out.to_vector(), reference(kind, in.data.to_vector(), dims, axes), per,
                   what);
}

// Every subset of axes for ranks up to 3, single axes and a few pairs beyond.
std::vector<std::uint32_t> axes_sets(int rank) {
  std::vector<std::uint32_t> sets;
  if (rank <= 3) {
    for (std::uint32_t m = 0; m < (1u << rank); ++m) sets.push_back(m);
    return sets;
  }
  for (int i = 0; i < rank; ++i) sets.push_back(1u << i);
  sets.push_back((1u << rank) - 1);
  sets.push_back(0b101);
  sets.push_back((1u << (rank - 1)) | 1u);
  return sets;
}

const std::vector<dims_t> shapes = {{},        {0},      {1},          {7},
                                    {1000},    {4097},   {3, 0, 2},    {2, 3, 4},
                                    {7, 1, 5}, {65, 63}, {2, 3, 1, 4}, {2, 1, 3, 2, 2, 3}};

TEST(Reductions, EveryKindOverEveryAxisSetF32) {
  unsigned seed = 1;
  for (op kind : all_kinds)
    for (const auto& dims : shapes)
      for (auto axes : axes_sets(static_cast<int>(dims.size())))
        for (bool keep : {false, true}) {
          bool prod = kind == op::reduce_prod;
          check_graph<float>(kind, dims, axes, keep, prod ? 0.9 : -2, prod ? 1.1 : 2, seed++);
        }
}

TEST(Reductions, LargeRowsAndColumns) {
  // Rows longer than one 4096-element piece, columns wider than one 256-element chunk, and a
  // whole-tensor reduction split across threads.
  for (op kind : {op::reduce_sum, op::reduce_max, op::reduce_l2, op::reduce_mean}) {
    check_graph<float>(kind, {3, 10000}, 0b10, false, -1, 1, 7);
    check_graph<float>(kind, {300, 700}, 0b01, true, -1, 1, 8);
    check_graph<float>(kind, {256, 1024}, 0b11, false, -1, 1, 9);
    check_graph<float>(kind, {40, 30, 50}, 0b101, false, -1, 1, 10);
  }
}

TEST(Reductions, IntegersAreExactAndWrap) {
  unsigned seed = 100;
  for (op kind : all_kinds) {
    if (kind == op::reduce_mean || kind == op::reduce_l2) continue;  // floating only
    for (const dims_t& dims :
         {dims_t{7}, dims_t{4097}, dims_t{3, 0, 2}, dims_t{5, 6, 7}, dims_t{3, 5, 8}})
      for (auto axes : axes_sets(static_cast<int>(dims.size()))) {
        bool prod = kind == op::reduce_prod;
        check_graph<std::int32_t>(kind, dims, axes, false, prod ? -3 : -100000, prod ? 4 : 100000,
                                  seed++);
        check_graph<std::int8_t>(kind, dims, axes, true, -128, 128, seed++);
        check_graph<std::uint8_t>(kind, dims, axes, false, 0, 256, seed++);
        check_graph<std::int64_t>(kind, dims, axes, false, -1e12, 1e12, seed++);
      }
  }
}

TEST(Reductions, NarrowFloatsAccumulateInF32) {
  unsigned seed = 200;
  for (op kind : all_kinds)
    for (const dims_t& dims : {dims_t{4097}, dims_t{33, 65}}) {
      bool prod = kind == op::reduce_prod;
      double lo = prod ? 0.99 : -2, hi = prod ? 1.01 : 2;
      check_graph<kiln::float16>(kind, dims, 0b1, false, lo, hi, seed++);
      check_graph<kiln::bfloat16>(kind, dims, 0, true, lo, hi, seed++);
    }
  // Rows of whole groups of four (folded four consecutive elements at a time on Vulkan).
  for (op kind : all_kinds) {
    bool prod = kind == op::reduce_prod;
    double lo = prod ? 0.99 : -2, hi = prod ? 1.01 : 2;
    check_graph<kiln::float16>(kind, {33, 64}, 0b10, false, lo, hi, seed++);
    check_graph<kiln::bfloat16>(kind, {4, 3, 8}, 0b110, true, lo, hi, seed++);
  }
}

TEST(Reductions, F64) {
  unsigned seed = 300;
  for (op kind : all_kinds)
    for (const dims_t& dims : {dims_t{4097}, dims_t{33, 65}, dims_t{4096}}) {
      bool prod = kind == op::reduce_prod;
      check_graph<double>(kind, dims, 0b1, false, prod ? 0.9 : -2, prod ? 1.1 : 2, seed++);
    }
}

// ONNX's edge cases: the empty set gives the identity (max: -inf, min: +inf; integers: their
// lowest and highest), mean of nothing is NaN, NaN propagates through max and min.
TEST(Reductions, EmptyAxesAndNaN) {
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {2, 0});
  g.output("sum", g.reduce_sum(x, {1}, false));
  g.output("max", g.reduce_max(x, {1}, false));
  g.output("min", g.reduce_min(x, {-1}, false));
  g.output("prod", g.reduce_prod(x, {1}, false));
  g.output("mean", g.reduce_mean(x, {1}, false));
  auto e = kiln::compile(g);
  std::vector<float> none, sum(2), max(2), min(2), prod(2), mean(2);
  e.run({kiln::tensor_ref(none.data(), dtype::f32, {2, 0})}, {sum, max, min, prod, mean});
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(sum[i], 0.0f);
    EXPECT_EQ(max[i], -INFINITY);
    EXPECT_EQ(min[i], INFINITY);
    EXPECT_EQ(prod[i], 1.0f);
    EXPECT_TRUE(std::isnan(mean[i]));
  }
  kiln::graph h;
  auto y = h.input("y", dtype::f32, {2, 3});
  h.output("max", h.reduce_max(y, {1}, false));
  h.output("min", h.reduce_min(y, {1}, false));
  auto f = kiln::compile(h);
  std::vector<float> data = {1, NAN, 3, -1, -2, -3}, mx(2), mn(2);
  f.run({data}, {mx, mn});
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_EQ(mx[1], -1.0f);
  EXPECT_EQ(mn[1], -3.0f);
  // Infinities sum as IEEE adds them (a compensated sum must not turn inf into NaN), also past a
  // workgroup's and a SIMD block's worth of elements.
  for (std::int64_t n : {2, 300, 5000}) {
    kiln::graph k;
    auto z = k.input("z", dtype::f32, {3, n});
    k.output("sum", k.reduce_sum(z, {1}, false));
    k.output("l1", k.reduce_l1(z, {1}, false));
    std::vector<float> values(3 * n, 1.0f), sums(3), l1(3);
    values[0] = INFINITY;
    values[n] = -INFINITY;
    values[2 * n] = INFINITY;
    values[3 * n - 1] = -INFINITY;
    kiln::compile(k).run({kiln::tensor_ref(values.data(), dtype::f32, {3, n})}, {sums, l1});
    EXPECT_EQ(sums[0], INFINITY) << n;
    EXPECT_EQ(sums[1], -INFINITY) << n;
    EXPECT_TRUE(std::isnan(sums[2])) << n;
    for (float v : l1) EXPECT_EQ(v, INFINITY) << n;
  }
}

// The DSL door: extents computed at compile time, axes negative or none, keepdims, fusion.
TEST(Reductions, DslDoor) {
  using kiln::tensor;
  constexpr auto row_sum = kiln::fn<tensor<float, 5, 7>, tensor<float, 7>>(
      [](auto x, auto b) { return kiln::reduce_sum<1>(kiln::exp(x) * b); });
  static_assert(row_sum.plan.dispatch_count() == 1);  // exp and * fused into the reduction's loads
  static_assert(row_sum.plan.transient_bytes() == 0);
  static_assert(std::is_same_v<std::tuple_element_t<0, decltype(row_sum)::result_values>,
                               kiln::value<float, kiln::extents<5>>>);
  constexpr auto col_max =
      kiln::fn<tensor<float, 5, 7>>([](auto x) { return kiln::reduce_max<-2>(x, kiln::keepdims); });
  static_assert(std::is_same_v<std::tuple_element_t<0, decltype(col_max)::result_values>,
                               kiln::value<float, kiln::extents<1, 7>>>);
  constexpr auto total =
      kiln::fn<tensor<float, kiln::dyn, 3>>([](auto x) { return kiln::reduce_l1<>(x); });
  static_assert(std::is_same_v<std::tuple_element_t<0, decltype(total)::result_values>,
                               kiln::value<float, kiln::extents<>>>);

  auto x = ref::make_arg<float>({5, 7}, -1, 1, 11);
  auto b = ref::make_arg<float>({7}, -1, 1, 12);
  auto got = row_sum(ref::view_of(x.data, x.dims), ref::view_of(b.data, b.dims));
  ASSERT_EQ(got.size(), 5u);
  for (int r = 0; r < 5; ++r) {
    double want = 0, scale = 0;
    for (int c = 0; c < 7; ++c) {
      double term = std::exp(double(x.data[r * 7 + c])) * b.data[c];
      want += term;
      scale += std::fabs(term);
    }
    EXPECT_NEAR(got[r], want, 1e-6 * scale) << "row " << r;
  }
  auto cm = col_max(ref::view_of(x.data, x.dims));
  for (int c = 0; c < 7; ++c) {
    float want = -INFINITY;
    for (int r = 0; r < 5; ++r) want = std::max(want, x.data[r * 7 + c]);
    EXPECT_EQ(cm[c], want) << "column " << c;
  }
  auto y = ref::make_arg<float>({11, 3}, -1, 1, 13);
  auto t = total(ref::view_of(y.data, y.dims));
  double want = 0;
  for (std::size_t i = 0; i < y.data.size(); ++i) want += std::fabs(y.data[i]);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_NEAR(t[0], want, 1e-6 * want);
}

// A reduction's result read by an elementwise region (x - max) passes through a transient; both
// regions are one row group, so one dispatch.
TEST(Reductions, ResultReadByAnotherRegion) {
  using kiln::tensor;
  constexpr auto centered = kiln::fn<tensor<float, kiln::dyn, 9>>(
      [](auto x) { return x - kiln::reduce_max<1>(x, kiln::keepdims); });
  static_assert(centered.plan.dispatch_count() == 1);
  static_assert(centered.plan.sizes.regions == 2);
  static_assert(centered.plan.sizes.transients == 1);
  static_assert(centered.plan.transient_bytes() == -1);  // its size is known at the call
  auto x = ref::make_arg<float>({13, 9}, -5, 5, 21);
  auto got = centered(ref::view_of(x.data, x.dims));
  ASSERT_EQ(got.size(), 13u * 9);
  for (int r = 0; r < 13; ++r) {
    float m = -INFINITY;
    for (int c = 0; c < 9; ++c) m = std::max(m, x.data[r * 9 + c]);
    for (int c = 0; c < 9; ++c) EXPECT_EQ(got[r * 9 + c], x.data[r * 9 + c] - m);
  }
}

// An operand broadcast along the rows' last axis (b: [n, 5, 1] or [n, 1]) inside a sum over
// the trailing axes. Over one axis it is constant along each row, and a Vulkan kernel reads it
// once per row; over two it varies along the row's first axis and must be read per group of
// four. Both against the tests' own double sums.
TEST(Reductions, OperandRepeatedAlongTheRow) {
  using kiln::dyn;
  using kiln::tensor;
  constexpr auto two_axes = kiln::fn<tensor<float, dyn, 5, 8>, tensor<float, dyn, 5, 1>>(
      [](auto x, auto b) { return kiln::reduce_sum<1, 2>(x * b); });
  constexpr auto one_axis = kiln::fn<tensor<float, dyn, 8>, tensor<float, dyn, 1>>(
      [](auto x, auto b) { return kiln::reduce_sum<1>(x * b); });
  const std::int64_t n = 7;
  auto x = ref::make_arg<float>({n, 5, 8}, -2, 2, 31);
  auto b = ref::make_arg<float>({n, 5, 1}, -2, 2, 32);
  auto got = two_axes(ref::view_of(x.data, x.dims), ref::view_of(b.data, b.dims));
  ASSERT_EQ(got.size(), std::size_t(n));
  for (std::int64_t i = 0; i < n; ++i) {
    double want = 0, size = 0;
    for (int c = 0; c < 5; ++c)
      for (int k = 0; k < 8; ++k) {
        double v = double(x.data[(i * 5 + c) * 8 + k]) * b.data[i * 5 + c];
        want += v;
        size += std::fabs(v);
      }
    EXPECT_NEAR(got[i], want, 1e-6 * size + 1e-30) << "two axes, result " << i;
  }
  auto rows = one_axis(ref::view_of(x.data, {n * 5, 8}), ref::view_of(b.data, {n * 5, 1}));
  ASSERT_EQ(rows.size(), std::size_t(n * 5));
  for (std::int64_t r = 0; r < n * 5; ++r) {
    double want = 0, size = 0;
    for (int k = 0; k < 8; ++k) {
      double v = double(x.data[r * 8 + k]) * b.data[r];
      want += v;
      size += std::fabs(v);
    }
    EXPECT_NEAR(rows[r], want, 1e-6 * size + 1e-30) << "one axis, row " << r;
  }
}

// x / sum(x) along rows, one row group: each quotient rounded once, as IEEE's f32 division
// rounds it (a GPU's quotients are taken in f64; the row's divisor is read once per row). The
// sums come from kiln's own reduce_sum, which folds in the row group's order.
TEST(Reductions, QuotientsByARowSumAreRoundedOnce) {
  using kiln::dyn;
  using kiln::tensor;
  constexpr auto shares = kiln::fn<tensor<float, dyn, dyn>>(
      [](auto x) { return x / kiln::reduce_sum<1>(x, kiln::keepdims); });
  constexpr auto sums = kiln::fn<tensor<float, dyn, dyn>>(
      [](auto x) { return kiln::reduce_sum<1>(x, kiln::keepdims); });
  static_assert(shares.plan.dispatch_count() == 1);
  for (std::int64_t cols : {1000, 7}) {
    const std::int64_t rows = 37;
    auto x = ref::make_arg<float>({rows, cols}, 0.5, 3, 41);
    auto got = shares(ref::view_of(x.data, x.dims));
    auto s = sums(ref::view_of(x.data, x.dims));
    ASSERT_EQ(got.size(), std::size_t(rows * cols));
    int wrong = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const float want = x.data[r * cols + c] / s[r];
        wrong += std::memcmp(&got[r * cols + c], &want, sizeof want) != 0;
      }
    EXPECT_EQ(wrong, 0) << cols << " columns";
  }
}

// A chain of reductions each reading the one before, along alternating axes (so each is a
// dispatch of its own: a row group's transients live through all of it): three transients, but
// the first is dead once the second's dispatch has run, so the third takes its place.
constexpr auto reduction_chain = kiln::fn<kiln::tensor<float, 64, 100>>([](auto x) {
  auto a = kiln::reduce_sum<1>(x, kiln::keepdims);      // [64, 1]
  auto b = kiln::reduce_sum<0>(x - a, kiln::keepdims);  // [1, 100]
  auto c = kiln::reduce_sum<1>(x * b, kiln::keepdims);  // [64, 1]
  return kiln::reduce_max<0>(x + c);                    // [100]
});

// The chain's values by the tests' own sums (double): the transients b and c, the result, and
// the result's tolerance (kiln sums in f32, to a tree's bound).
struct chain_values {
  std::vector<double> b, c, result, tolerance;
};
chain_values chain_reference(const std::vector<float>& x) {
  auto at = [&](int r, int col) { return static_cast<double>(x[r * 100 + col]); };
  chain_values v{std::vector<double>(100), std::vector<double>(64), std::vector<double>(100),
                 std::vector<double>(100)};
  std::vector<double> a(64);
  for (int r = 0; r < 64; ++r)
    for (int i = 0; i < 100; ++i) a[r] += at(r, i);
  for (int i = 0; i < 100; ++i)
    for (int r = 0; r < 64; ++r) v.b[i] += at(r, i) - static_cast<float>(a[r]);
  for (int r = 0; r < 64; ++r)
    for (int i = 0; i < 100; ++i) v.c[r] += at(r, i) * static_cast<float>(v.b[i]);
  for (int i = 0; i < 100; ++i) {
    double m = -INFINITY, scale = 0;
    for (int r = 0; r < 64; ++r) {
      m = std::max(m, at(r, i) + static_cast<float>(v.c[r]));
      scale = std::max(scale, std::fabs(v.c[r]));
    }
    v.result[i] = m;
    v.tolerance[i] = 1e-4 * (scale + 1);
  }
  return v;
}

TEST(Reductions, ArenaReusesTransientsWhoseReadersHaveRun) {
  static_assert(reduction_chain.plan.dispatch_count() == 4);
  static_assert(reduction_chain.plan.sizes.transients == 3);
  // a and c are 64 floats (256 bytes), b 100 floats (512 bytes aligned): 1024 bytes apart, 768
  // with c where a was.
  static_assert(reduction_chain.plan.transient_bytes() == 768);
  auto x = ref::make_arg<float>({64, 100}, -1, 1, 31);
  auto got = reduction_chain(ref::view_of(x.data, x.dims));
  ASSERT_EQ(got.size(), 100u);
  chain_values want = chain_reference(x.data.to_vector());
  for (int i = 0; i < 100; ++i)
    EXPECT_NEAR(got[i], want.result[i], want.tolerance[i]) << "column " << i;
}

// A caller's workspace holds the call's transients instead of the function's own arena: after
// the call, b and c are where the plan's arena layout puts them (c where a was), in the
// caller's memory (host bytes on the CPU, a device buffer on Vulkan), for both doors.
TEST(Reductions, WorkspaceHoldsTheTransients) {
  auto dev = kiln::device::default_device();
  const bool on_cpu = dev.type() == kiln::device::kind::cpu;
  auto x = ref::make_arg<float>({64, 100}, -1, 1, 37);
  chain_values want = chain_reference(x.data.to_vector());
  const auto layout = reduction_chain.plan.thaw().arena();
  ASSERT_EQ(layout.bytes, 768);
  // The transients are a, b, c in the plan's order (a and c [64, 1], b [1, 100]).
  auto check_arena = [&](const unsigned char* arena, const char* door) {
    std::vector<float> b(100), c(64);
    std::memcpy(b.data(), arena + layout.offsets[1], sizeof(float) * 100);
    std::memcpy(c.data(), arena + layout.offsets[2], sizeof(float) * 64);
    for (int i = 0; i < 100; ++i) EXPECT_NEAR(b[i], want.b[i], 1e-3) << door << " b " << i;
    for (int r = 0; r < 64; ++r)
      EXPECT_NEAR(c[r], want.c[r], 1e-3 * (std::fabs(want.c[r]) + 1)) << door << " c " << r;
  };
  kiln::graph g;
  auto gx = g.input("x", dtype::f32, {64, 100});
  auto ga = g.reduce_sum(gx, {1}, true);
  auto gb = g.reduce_sum(g.sub(gx, ga), {0}, true);
  auto gc = g.reduce_sum(g.mul(gx, gb), {1}, true);
  g.output("y", g.reduce_max(g.add(gx, gc), {0}, false));
  auto e = kiln::compile(g);
  ASSERT_EQ(e.plan().arena().bytes, 768);
  for (const char* door : {"fn", "graph"}) {
    std::vector<float> got(100);
    auto run_on = [&](const kiln::device& d, const kiln::workspace& ws) {
      if (door[0] == 'f')
        reduction_chain.on(d).with(ws)(ref::view_of(x.data, x.dims), kiln::into(got));
      else
        e.run({ref::view_of(x.data, x.dims)}, {kiln::tensor_ref(got)}, d, ws);
    };
    auto run = [&](const kiln::workspace& ws) { run_on(dev, ws); };
    if (on_cpu) {
      // One byte past a 64-byte boundary: the arena starts at the next boundary.
      alignas(64) std::array<std::byte, 64 + 1 + 768> host;
      host.fill(std::byte{0xab});
      std::span<std::byte> ws(host.data() + 1, host.size() - 1);
      run(ws);
      check_arena(reinterpret_cast<const unsigned char*>(host.data()) + 64, door);
      // Too small once aligned: the error says how many bytes the call needs.
      std::string message = ref::error_message([&] { run(ws.first(768)); });
      EXPECT_NE(message.find("need 768"), std::string::npos) << message;
    } else {
      auto ws = dev.alloc<std::uint8_t>(1024);
      run(ws);
      std::vector<std::uint8_t> arena(1024);
      ws.download(arena);
      check_arena(arena.data(), door);
      std::string message = ref::error_message([&] { run(dev.alloc<std::uint8_t>(767)); });
      EXPECT_NE(message.find("need 768"), std::string::npos) << message;
      std::vector<std::byte> host(1024);
      message = ref::error_message([&] { run(std::span<std::byte>(host)); });
      EXPECT_NE(message.find("workspace is host memory"), std::string::npos) << message;
      // A device buffer for a call on the CPU (here, where Vulkan is open anyway).
      message = ref::error_message([&] { run_on(kiln::device::cpu(), ws); });
      EXPECT_NE(message.find("the workspace is on vulkan"), std::string::npos) << message;
    }
    for (int i = 0; i < 100; ++i)
      EXPECT_NEAR(got[i], want.result[i], want.tolerance[i]) << door << " column " << i;
  }
}

TEST(Reductions, GraphErrorsNameOpAxisAndRank) {
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {2, 3});
  auto message = [&](auto&& fn) {
    try {
      fn();
    } catch (const kiln::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto out_of_range = message([&] { g.reduce_sum(x, {2}); });
  EXPECT_NE(out_of_range.find("reduce_sum"), std::string::npos) << out_of_range;
  EXPECT_NE(out_of_range.find("axis 2 is out of range"), std::string::npos) << out_of_range;
  EXPECT_NE(out_of_range.find("rank 2"), std::string::npos) << out_of_range;
  auto twice = message([&] { g.reduce_max(x, {1, -1}); });
  EXPECT_NE(twice.find("given twice"), std::string::npos) << twice;
  auto via_apply = message([&] { g.apply(op::reduce_sum, {x}); });
  EXPECT_NE(via_apply.find("graph::reduce"), std::string::npos) << via_apply;
  auto bool_sum = message([&] { g.reduce_sum(g.lt(x, x), {0}); });
  EXPECT_NE(bool_sum.find("does not accept element type bool"), std::string::npos) << bool_sum;
  auto int_mean = message([&] { g.reduce_mean(g.cast(x, dtype::i32), {0}); });
  EXPECT_NE(int_mean.find("reduce_mean"), std::string::npos) << int_mean;
}

// Both CPU drivers (compile-time kernels, interpreter) and the device agree with each other to
// the reference's bound; the CPU drivers share the reduction, so they agree bit for bit where
// this file and the runtime's chosen kernels are built for one instruction set (the suite runs
// once more with KILN_CPU_ISA=sse2, this file's); with FMA on one side only, to a few ulps.
TEST(Reductions, CompiledAndInterpretedCpuAgreeBitForBit) {
  using kiln::tensor;
  constexpr auto f = kiln::fn<tensor<float, kiln::dyn, kiln::dyn>>([](auto x) {
    return std::tuple{kiln::reduce_sum<0>(kiln::tanh(x)), kiln::reduce_l2<1>(x * 3.0f)};
  });
  auto x = ref::make_arg<float>({300, 301}, -2, 2, 41);
  auto cpu = kiln::device::cpu();
  auto [a, b] = f.on(cpu)(ref::view_of(x.data, x.dims));
  auto e = kiln::compile(f);
  std::vector<float> a2(a.size()), b2(b.size());
  e.run({ref::view_of(x.data, x.dims)}, {a2, b2}, cpu);
  if (std::string_view(kiln::cpu::runtime_isa()) == KILN_CPU_ISA_NAME) {
    EXPECT_EQ(a, a2);
    EXPECT_EQ(b, b2);
  } else {
    ASSERT_EQ(a.size(), a2.size());
    ASSERT_EQ(b.size(), b2.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], a2[i], 1e-5f * 300) << i;
    for (std::size_t i = 0; i < b.size(); ++i) EXPECT_NEAR(b[i], b2[i], 1e-6f * b[i]) << i;
  }
}

// kiln's fold order, written out here as plain scalar code from fold_order.hpp's description:
// pieces of 4096 elements; a piece's blocks of 256 each folded into 32 interleaved partials
// (element k into partial k % 32); each block joins the one before it when both cover as many
// blocks, what is left joins from the last down; then the 32 as a tree (k with k + 16, then
// k + 8, ...); the pieces' sums joined by halves.
float sum_in_kilns_order(const float* x, std::int64_t n) {
  using partials = std::array<float, 32>;
  auto piece_sum = [](const float* p, std::int64_t m) {
    std::vector<std::pair<partials, int>> stack;  // partials and the level they cover
    for (std::int64_t b = 0; b < m; b += 256) {
      partials block{};
      for (std::int64_t k = 0; k < std::min<std::int64_t>(256, m - b); ++k)
        block[k % 32] = k < 32 ? p[b + k] : block[k % 32] + p[b + k];
      int level = 0;
      while (!stack.empty() && stack.back().second == level) {
        for (int k = 0; k < 32; ++k) block[k] = stack.back().first[k] + block[k];
        stack.pop_back();
        ++level;
      }
      stack.push_back({block, level});
    }
    while (stack.size() > 1) {
      partials right = stack.back().first;
      stack.pop_back();
      for (int k = 0; k < 32; ++k) stack.back().first[k] += right[k];
    }
    partials q = stack.back().first;
    for (int w = 16; w > 0; w /= 2)
      for (int k = 0; k < w; ++k) q[k] = q[k] + q[k + w];
    return q[0];
  };
  auto halves = [&](auto& self, std::int64_t first, std::int64_t count) -> float {
    if (count == 1)
      return piece_sum(x + first * 4096, std::min<std::int64_t>(4096, n - first * 4096));
    const std::int64_t half = count / 2;
    return self(self, first, half) + self(self, first + half, count - half);
  };
  return halves(halves, 0, (n + 4095) / 4096);
}

// A sum along rows on the CPU has exactly that order's bits, through both CPU drivers, whether the
// rows are many (folded a row at a time, over the threads) or few (a row's pieces shared among
// the threads), and fused into a row group (softmax-like: x / sum(x) reads the sum).
TEST(Reductions, CpuRowSumsHaveTheDocumentedOrdersBits) {
  auto cpu = kiln::device::cpu();
  for (std::int64_t cols : {1, 7, 255, 256, 257, 768, 4096, 4097, 10000, 20000}) {
    for (std::int64_t rows : {1, 3, 300}) {
      SCOPED_TRACE(testing::Message() << "rows " << rows << ", cols " << cols);
      auto x = ref::make_arg<float>({rows, cols}, -3, 3, 61);
      std::vector<float> expected(rows);
      for (std::int64_t r = 0; r < rows; ++r)
        expected[r] = sum_in_kilns_order(x.data.data() + r * cols, cols);
      kiln::graph g;
      auto in = g.input("x", dtype::f32, {rows, cols});
      auto sum = g.reduce_sum(in, {1}, true);
      g.output("sum", sum);
      g.output("share", g.div(in, sum));
      auto e = kiln::compile(g);
      std::vector<float> got(rows), share(rows * cols);
      e.run({ref::view_of(x.data, x.dims)}, {got, share}, cpu);
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), rows * 4), 0);
      kiln::graph alone;
      alone.output("sum", alone.reduce_sum(alone.input("x", dtype::f32, {rows, cols}), {1}));
      auto only = kiln::compile(alone);
      std::fill(got.begin(), got.end(), 0.f);
      only.run({ref::view_of(x.data, x.dims)}, {got}, cpu);
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), rows * 4), 0);
      constexpr auto row_sums = kiln::fn<kiln::tensor<float, kiln::dyn, kiln::dyn>>(
          [](auto v) { return kiln::reduce_sum<1>(v); });
      std::fill(got.begin(), got.end(), 0.f);
      row_sums.on(cpu)(ref::view_of(x.data, x.dims), kiln::into(got));
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), rows * 4), 0) << "compiled";
      for (std::int64_t k = 0; k < rows * cols; k += 97)
        ASSERT_EQ(share[k], x.data[k] / expected[k / cols]) << "element " << k;
    }
  }
}

// A column's sum in kiln's order where the contiguous dim is kept (reduction.hpp): the reduced
// range [a, b) halved (the left half the smaller), the halves' sums added, down to runs of at
// most 8 added in order from +0. Elements `stride` apart.
float column_sum_in_kilns_order(const float* x, std::int64_t stride, std::int64_t a,
                                std::int64_t b) {
  if (b - a > 8) {
    const std::int64_t mid = a + (b - a) / 2;
    return column_sum_in_kilns_order(x, stride, a, mid) +
           column_sum_in_kilns_order(x, stride, mid, b);
  }
  float s = 0;
  for (std::int64_t j = a; j < b; ++j) s = s + x[j * stride];
  return s;
}

// A sum down columns on the CPU has exactly that order's bits, through both CPU drivers: columns
// in one strip (whose tree the threads share), in several (wider than a strip of 4096, and a 3-D
// tensor's strips at each outer index), and one or few reduced rows.
TEST(Reductions, CpuColumnSumsHaveTheDocumentedOrdersBits) {
  auto cpu = kiln::device::cpu();
  constexpr auto column_sums = kiln::fn<kiln::tensor<float, kiln::dyn, kiln::dyn, kiln::dyn>>(
      [](auto v) { return kiln::reduce_sum<1>(v); });
  const dims_t shapes[] = {{1, 1, 9000},    {1, 8, 4097},   {1, 9, 300},    {1, 17, 7},
                           {1, 300, 4097},  {1, 4097, 2},   {1, 4097, 300}, {1, 20000, 7},
                           {1, 1000, 1030}, {3, 100, 5000}, {7, 2000, 30}};
  for (const dims_t& dims : shapes) {
    SCOPED_TRACE(testing::Message() << "shape " << ref::dims_text(dims));
    const std::int64_t outer = dims[0], rows = dims[1], cols = dims[2];
    auto x = ref::make_arg<float>(dims, -3, 3, 62);
    std::vector<float> expected(outer * cols);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t c = 0; c < cols; ++c)
        expected[o * cols + c] =
            column_sum_in_kilns_order(x.data.data() + o * rows * cols + c, cols, 0, rows);
    kiln::graph g;
    g.output("sum", g.reduce_sum(g.input("x", dtype::f32, ref::to_shape(dims)), {1}));
    std::vector<float> got(outer * cols);
    kiln::compile(g).run({ref::view_of(x.data, x.dims)}, {got}, cpu);
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * 4), 0) << "interpreted";
    std::fill(got.begin(), got.end(), 0.f);
    column_sums.on(cpu)(ref::view_of(x.data, x.dims), kiln::into(got));
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * 4), 0) << "compiled";
  }
}

// The same bits from run to run on one device: every fold has a fixed order.
TEST(Reductions, SameBitsFromRunToRun) {
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {257, 1031});
  g.output("rows", g.reduce_sum(x, {1}));
  g.output("cols", g.reduce_l2(x, {0}));
  g.output("all", g.reduce_mean(g.exp(x), {}));
  auto e = kiln::compile(g);
  auto in = ref::make_arg<float>({257, 1031}, -2, 2, 51);
  auto run = [&] {
    std::vector<float> rows(257), cols(1031), all(1);
    e.run({ref::view_of(in.data, in.dims)}, {rows, cols, all});
    rows.insert(rows.end(), cols.begin(), cols.end());
    rows.push_back(all[0]);
    return rows;
  };
  auto first = run();
  for (int k = 0; k < 3; ++k) {
    auto again = run();
    EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * 4), 0) << "run " << k + 2;
  }
}

// argmax / argmin along each axis: the index of the first extreme (or the last with
// select_last_index), NaN counting as the extreme, against a scan written here.
template <class T>
void check_index(op kind, const dims_t& dims, int axis, bool keepdims, bool last, double lo,
                 double hi, unsigned seed, bool with_nan = false) {
  constexpr dtype t = kiln::dtype_of<T>;
  kiln::graph g;
  auto x = g.input("x", t, ref::to_shape(dims));
  g.output("i", g.index_reduce(kind, x, axis, keepdims, last));
  auto e = kiln::compile(g);
  auto in = ref::make_arg<T>(dims, lo, hi, seed);
  if constexpr (std::is_floating_point_v<T>)
    if (with_nan)
      for (std::size_t i = 0; i < in.data.size(); i += 7) in.data[i] = NAN;
  std::uint32_t axes = 1u << axis;
  dims_t out_dims = reduced(dims, axes, keepdims);
  std::vector<std::int64_t> got(static_cast<std::size_t>(ref::count(out_dims)), -7);
  e.run({ref::view_of(in.data, dims)},
        {kiln::tensor_ref(static_cast<void*>(got.data()), dtype::i64, ref::to_shape(out_dims))});
  // The reference: walk each result's elements along the axis.
  std::int64_t inner = 1;
  for (std::size_t i = axis + 1; i < dims.size(); ++i) inner *= dims[i];
  std::int64_t len = dims[axis], outer = ref::count(dims) / std::max<std::int64_t>(len * inner, 1);
  std::string what = std::string(kiln::ir::name(kind)) + " of " + std::string(kiln::name(t)) +
                     ref::dims_text(dims) + " axis " + std::to_string(axis) +
                     (last ? " last" : "") + (with_nan ? " with NaN" : "");
  int reported = 0;
  for (std::int64_t o = 0; o < outer && reported < 5; ++o)
    for (std::int64_t c = 0; c < inner && reported < 5; ++c) {
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < len; ++k) {
        double a = ref::to_double(in.data[(o * len + best) * inner + c]);
        double b = ref::to_double(in.data[(o * len + k) * inner + c]);
        bool na = std::isnan(a), nb = std::isnan(b);
        bool tie = (na && nb) || (!na && !nb && a == b);
        bool wins = tie ? last : nb || (!na && (kind == op::argmax ? b > a : b < a));
        if (wins) best = k;
      }
      if (got[o * inner + c] != best) {
        ++reported;
        ADD_FAILURE() << what << ": result " << o * inner + c << " is " << got[o * inner + c]
                      << ", expected " << best;
      }
    }
}

TEST(Reductions, ArgmaxArgminFirstOrLastOfTies) {
  unsigned seed = 400;
  for (op kind : {op::argmax, op::argmin})
    for (const dims_t& dims : {dims_t{1}, dims_t{7}, dims_t{4097}, dims_t{3, 1, 5}, dims_t{65, 63},
                               dims_t{2, 3, 4, 5}, dims_t{300, 301}, dims_t{6, 8}, dims_t{3, 4096}})
      for (int axis = 0; axis < static_cast<int>(dims.size()); ++axis)
        for (bool last : {false, true}) {
          // Few distinct values, so ties are everywhere.
          check_index<std::int32_t>(kind, dims, axis, !last, last, -3, 3, seed++);
          check_index<float>(kind, dims, axis, last, last, -2, 2, seed++);
          check_index<float>(kind, dims, axis, false, last, -2, 2, seed++, true);
          check_index<std::uint8_t>(kind, dims, axis, false, last, 0, 4, seed++);
          check_index<kiln::float16>(kind, dims, axis, true, last, -1, 1, seed++);
        }
}

TEST(Reductions, ArgmaxThroughTheDsl) {
  using kiln::tensor;
  constexpr auto f = kiln::fn<tensor<float, 4, 6>>([](auto x) {
    return std::tuple{kiln::argmax<1>(kiln::abs(x)), kiln::argmin<-2>(x, kiln::keepdims)};
  });
  static_assert(f.plan.dispatch_count() == 2);
  static_assert(std::is_same_v<std::tuple_element_t<0, decltype(f)::result_values>,
                               kiln::value<std::int64_t, kiln::extents<4>>>);
  static_assert(std::is_same_v<std::tuple_element_t<1, decltype(f)::result_values>,
                               kiln::value<std::int64_t, kiln::extents<1, 6>>>);
  std::vector<float> x = {1,  -5, 5,  2,  0, 3, 7, 7, 1, -9, 1, 0,
                          -1, -2, -3, -3, 9, 0, 0, 0, 0, 0,  0, 0};
  auto [a, b] = f(x);
  EXPECT_EQ(a, (std::vector<std::int64_t>{1, 3, 4, 0}));        // |-5| first of the tie with 5
  EXPECT_EQ(b, (std::vector<std::int64_t>{2, 0, 2, 1, 0, 1}));  // first of equal minima
}

TEST(Reductions, ArgmaxOfAnEmptyAxisIsAnError) {
  kiln::graph g;
  auto x = g.input("x", dtype::f32, {3, 0});
  EXPECT_THROW(g.argmax(x, 1), kiln::error);  // static size 0: at the graph
  kiln::graph h;
  auto y = h.input("y", dtype::f32, {3, kiln::dyn});
  h.output("i", h.argmin(y, 1, false));
  auto e = kiln::compile(h);
  std::vector<float> none;
  std::vector<std::int64_t> out(3);
  try {
    e.run({kiln::tensor_ref(none.data(), dtype::f32, {3, 0})}, {out});
    ADD_FAILURE() << "no error for an empty axis at the call";
  } catch (const kiln::error& err) {
    EXPECT_NE(std::string(err.what()).find("argmin"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("size 0"), std::string::npos) << err.what();
  }
}

}  // namespace
