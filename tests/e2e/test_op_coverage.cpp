// Completeness: every row of the op list (ir/op.hpp's KILN_IR_OPS) reaches every layer. For each
// op this test calls its DSL function and its graph method (a missing one does not compile), runs
// it on the default device, on the CPU's compiled kernel (the e2e.cpu run of this suite) and on the
// CPU interpreter, and compares with this file's scalar reference, whose switch must name every
// op (a missing entry is a compile error). An op without a CPU primitive or a SPIR-V lowering
// fails here at its first call.
#include <gtest/gtest.h>

#include <cmath>

#include <kiln/executable.hpp>

#include "../support/e2e.hpp"

using namespace kiln;
using ir::op;

namespace {

#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
// The reference value of op o on scalars (bools as 0/1), in double.
double scalar(op o, double a, double b, double c = 0) {
  switch (o) {
    case op::input:
    case op::constant:
    case op::cast:
    case op::transpose:  // views move elements, each keeps its value (test_views.cpp)
    case op::reshape:
    case op::expand:
    case op::slice:
    case op::shift:  // (test_moves.cpp)
    case op::gather:
    case op::gather_elements:
      return a;
    case op::matmul:  // a 1 x 1 product (sizes: tests/e2e/test_contractions.cpp)
    case op::conv:    // a 1 x 1 kernel on one cell (windows: tests/e2e/test_convolutions.cpp)
    case op::conv_transpose:
      return a * b;
    case op::add:
      return a + b;
    case op::sub:
      return a - b;
    case op::mul:
      return a * b;
    case op::div:
      return a / b;
    case op::neg:
      return -a;
    case op::abs:
      return std::fabs(a);
    case op::min:
      return std::fmin(a, b);
    case op::max:
      return std::fmax(a, b);
    case op::pow:
      return std::pow(a, b);
    case op::exp:
      return std::exp(a);
    case op::log:
      return std::log(a);
    case op::sqrt:
      return std::sqrt(a);
    case op::rsqrt:
      return 1 / std::sqrt(a);
    case op::tanh:
      return std::tanh(a);
    case op::sigmoid:
      return 1 / (1 + std::exp(-a));
    case op::relu:
      return a < 0 ? 0 : a;
    case op::erf:
      return std::erf(a);
    case op::sin:
      return std::sin(a);
    case op::cos:
      return std::cos(a);
    case op::floor:
      return std::floor(a);
    case op::ceil:
      return std::ceil(a);
    case op::round:
      return std::nearbyint(a);
    case op::reciprocal:
      return 1 / a;
    case op::sign:
      return a > 0 ? 1 : a < 0 ? -1 : a;
    case op::softsign:
      return a / (1 + std::fabs(a));
    case op::eq:
      return a == b;
    case op::ne:
      return a != b;
    case op::lt:
      return a < b;
    case op::le:
      return a <= b;
    case op::gt:
      return a > b;
    case op::ge:
      return a >= b;
    case op::logical_and:
      return a != 0 && b != 0;
    case op::logical_or:
      return a != 0 || b != 0;
    case op::logical_not:
      return a == 0;
    case op::select:
      return a != 0 ? b : c;
    // Reductions: one step of the fold, accumulated value a and element b (see check_reduction).
    case op::reduce_sum:
    case op::reduce_mean:
      return a + b;
    case op::reduce_max:
      return std::fmax(a, b);
    case op::reduce_min:
      return std::fmin(a, b);
    case op::reduce_prod:
      return a * b;
    case op::reduce_l1:
      return a + std::fabs(b);
    case op::reduce_l2:
    case op::reduce_sum_square:
      return a + b * b;
    // argmax / argmin: whether b (later) replaces a as the extreme.
    case op::argmax:
      return b > a;
    case op::argmin:
      return b < a;
    case op::tan:
      return std::tan(a);
    case op::asin:
      return std::asin(a);
    case op::acos:
      return std::acos(a);
    case op::atan:
      return std::atan(a);
    case op::sinh:
      return std::sinh(a);
    case op::cosh:
      return std::cosh(a);
    case op::asinh:
      return std::asinh(a);
    case op::acosh:
      return std::acosh(a);
    case op::atanh:
      return std::atanh(a);
    case op::exp2:
      return std::exp2(a);
    case op::expm1:
      return std::expm1(a);
    case op::log2:
      return std::log2(a);
    case op::log1p:
      return std::log1p(a);
    case op::softplus:
      return std::log1p(std::exp(a));
    case op::erfc:
      return std::erfc(a);
    case op::mod: {  // Python's: the divisor's sign
      double r = std::fmod(a, b);
      return r != 0 && (r < 0) != (b < 0) ? r + b : r;
    }
    case op::fmod:
      return std::fmod(a, b);
    case op::clip:
      return std::fmin(std::fmax(a, b), c);
    case op::isnan:
      return std::isnan(a);
    case op::isinf:
      return std::isinf(a);
    // Integer ops, on i32 operands: counts out of [0, 32) shift every bit out (numpy's rule).
    case op::bitwise_and:
      return static_cast<std::int32_t>(a) & static_cast<std::int32_t>(b);
    case op::bitwise_or:
      return static_cast<std::int32_t>(a) | static_cast<std::int32_t>(b);
    case op::bitwise_xor:
      return static_cast<std::int32_t>(a) ^ static_cast<std::int32_t>(b);
    case op::bitwise_not:
      return ~static_cast<std::int32_t>(a);
    case op::shift_left:
      return b < 0 || b >= 32
                 ? 0
                 : static_cast<std::int32_t>(static_cast<std::uint32_t>(a) << static_cast<int>(b));
    case op::shift_right:
      return b < 0 || b >= 32 ? (a < 0 ? -1 : 0)
                              : static_cast<std::int32_t>(a) >> static_cast<int>(b);
  }
  ADD_FAILURE() << "no reference for op " << static_cast<int>(o);
  return NAN;
}
#pragma GCC diagnostic pop

// Where each op is checked: floats in [0.25, 3] by default (every float op is defined there),
// in (-1, 1) for asin, acos and atanh, from 1 for acosh, across zero for remainders; integers
// across zero, shift counts past the width on both sides.
struct domain {
  double lo = 0.25, hi = 3;
};
constexpr domain domain_of(op o) {
  switch (o) {
    case op::asin:
    case op::acos:
    case op::atanh:
      return {-0.95, 0.95};
    case op::acosh:
      return {1, 5};
    case op::mod:
    case op::fmod:
      return {-5, 5};
    case op::shift_left:
    case op::shift_right:
      return {-40, 40};
    case op::reduce_prod:  // a product of 1027 factors stays finite
      return {0.99, 1.01};
    default:
      return {};
  }
}

// Operands: bools for bool-only ops, else values of the op's domain with repeats (comparisons
// also see equal values) and, for the float tests, NaN and infinities.
template <class T>
ref::arg<T> operand(std::int64_t n, unsigned seed, op o = op::add) {
  if constexpr (std::is_same_v<T, bool>) {
    return ref::make_arg<bool>({n}, 0, 1, seed);
  } else if constexpr (std::is_integral_v<T>) {
    domain d = domain_of(o);
    return ref::make_arg<T>({n}, d.lo == 0.25 ? -1000 : d.lo, d.hi == 3 ? 1000 : d.hi, seed);
  } else {
    domain d = domain_of(o);
    auto a = ref::make_arg<float>({n}, d.lo, d.hi, seed);
    for (std::size_t i = 0; i < a.data.size(); i += 3) a.data[i] = std::round(a.data[i]);
    if (ir::info(o).cls == ir::op_class::test && a.data.size() > 8) {
      a.data[1] = NAN;
      a.data[4] = INFINITY;
      a.data[7] = -INFINITY;
    }
    return a;
  }
}

template <op O, class T, class F>
void check_unary(const F& f) {
  using R = std::conditional_t<ir::result_dtype(O, dtype_of<T>) == dtype::boolean, bool, T>;
  SCOPED_TRACE(std::string(ir::name(O)));
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{1027}})
    ref::check<R>(
        f, [](T a) { return scalar(O, a, 0); }, ref::approx, operand<T>(n, 1, O));
}

template <op O, class T, class F>
void check_ternary(const F& f) {
  SCOPED_TRACE(std::string(ir::name(O)));
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{1027}})
    ref::check<T>(
        f, [](T a, T b, T c) { return scalar(O, a, b, c); }, ref::exact, operand<T>(n, 1, O),
        operand<T>(n, 2, O), operand<T>(n, 3, O));
}

template <op O, class T, class F>
void check_binary(const F& f) {
  using R = std::conditional_t<ir::result_dtype(O, dtype_of<T>) == dtype::boolean, bool, T>;
  SCOPED_TRACE(std::string(ir::name(O)));
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{1027}})
    ref::check<R>(
        f, [](T a, T b) { return scalar(O, a, b); }, ref::approx, operand<T>(n, 1, O),
        operand<T>(n, 2, O));
}

// A reduction over every axis of a 1027-element vector, on the default device and on the CPU
// interpreter, against the fold of scalar() in double.
template <op O, class T, class F>
void check_reduction(const F& f) {
  SCOPED_TRACE(std::string(ir::name(O)));
  auto x = operand<T>(1027, 1, O);
  double want = O == op::reduce_max    ? -INFINITY
                : O == op::reduce_min  ? INFINITY
                : O == op::reduce_prod ? 1
                                       : 0;
  double scale = 0;  // what the rounding error is relative to
  for (std::size_t i = 0; i < x.data.size(); ++i) {
    double v = x.data[i];
    want = scalar(O, want, v);
    scale += O == op::reduce_prod ? 0 : std::fabs(scalar(O, 0, v));
  }
  if (O == op::reduce_mean) want /= 1027, scale /= 1027;
  if (O == op::reduce_l2) want = std::sqrt(want), scale = want;
  if (O == op::reduce_prod) scale = std::fabs(want) * 1027;   // one rounding per factor
  if (O == op::reduce_max || O == op::reduce_min) scale = 0;  // exact
  auto got = f(ref::view_of(x.data, x.dims));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NEAR(got[0], want, 1e-6 * scale);
  std::vector<T> interpreted(1);
  kiln::compile(f).run({ref::view_of(x.data, x.dims)}, {interpreted}, kiln::device::cpu());
  EXPECT_NEAR(interpreted[0], want, 1e-6 * scale) << "(cpu interpreter)";
}

// argmax/argmin along a 1027-element vector, on the default device and the CPU interpreter,
// against the first extreme found by scalar() (ties keep the first index, as ONNX's default).
template <op O, class T, class F>
void check_index_reduction(const F& f) {
  SCOPED_TRACE(std::string(ir::name(O)));
  auto x = operand<T>(1027, 1, O);
  std::int64_t want = 0;
  for (std::size_t i = 1; i < x.data.size(); ++i)
    if (scalar(O, x.data[want], x.data[i]) != 0) want = static_cast<std::int64_t>(i);
  auto got = f(ref::view_of(x.data, x.dims));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], want);
  std::vector<std::int64_t> interpreted(1);
  kiln::compile(f).run({ref::view_of(x.data, x.dims)}, {interpreted}, kiln::device::cpu());
  EXPECT_EQ(interpreted[0], want) << "(cpu interpreter)";
}

// The element type each op is checked on.
#define KILN_TEST_ELEMENT_any float
#define KILN_TEST_ELEMENT_numeric float
#define KILN_TEST_ELEMENT_floating float
#define KILN_TEST_ELEMENT_bool_only bool
#define KILN_TEST_ELEMENT_integer std::int32_t

// One check per row, by class and arity; the graph method must exist too.
#define KILN_TEST_FORM_unary_1(NAME, T)                                              \
  static_assert(                                                                     \
      requires(graph g, graph::value v) { g.NAME(v); }, "graph::" #NAME " missing"); \
  check_unary<op::NAME, T>(fn<tensor<T, dyn>>([](auto x) { return kiln::NAME(x); }));
#define KILN_TEST_FORM_logical_1 KILN_TEST_FORM_unary_1
#define KILN_TEST_FORM_test_1 KILN_TEST_FORM_unary_1
#define KILN_TEST_FORM_ternary_3(NAME, T)                                                  \
  static_assert(                                                                           \
      requires(graph g, graph::value v) { g.NAME(v, v, v); }, "graph::" #NAME " missing"); \
  check_ternary<op::NAME, T>(fn<tensor<T, dyn>, tensor<T, dyn>, tensor<T, dyn>>(           \
      [](auto x, auto y, auto z) { return kiln::NAME(x, y, z); }));
#define KILN_TEST_FORM_binary_2(NAME, T)                                                \
  static_assert(                                                                        \
      requires(graph g, graph::value v) { g.NAME(v, v); }, "graph::" #NAME " missing"); \
  check_binary<op::NAME, T>(                                                            \
      fn<tensor<T, dyn>, tensor<T, dyn>>([](auto x, auto y) { return kiln::NAME(x, y); }));
#define KILN_TEST_FORM_compare_2 KILN_TEST_FORM_binary_2
#define KILN_TEST_FORM_logical_2 KILN_TEST_FORM_binary_2
#define KILN_TEST_FORM_leaf_0(NAME, T) ++covered;    // every test's inputs and literals
#define KILN_TEST_FORM_select_3(NAME, T) ++covered;  // OpCoverage.SelectAndCast
#define KILN_TEST_FORM_cast_1(NAME, T) ++covered;    // OpCoverage.SelectAndCast
#define KILN_TEST_FORM_view_1(NAME, T) ++covered;    // every view: tests/e2e/test_views.cpp
#define KILN_TEST_FORM_view_2(NAME, T) ++covered;    // gathers: tests/e2e/test_moves.cpp
#define KILN_TEST_FORM_contraction_2(NAME, T)                                                \
  static_assert(                                                                             \
      []<class G = graph>() {                                                                \
        return requires(G g, typename G::value v) { g.NAME(v, v); }                          \
        || requires(G g, typename G::value v, kiln::ir::conv_window c) { g.NAME(v, v, c); }; \
      }(),                                                                                   \
      "graph::" #NAME " missing");                                                           \
  ++covered;  // every size, batch, window and epilogue: tests/e2e/test_contractions.cpp,
              // tests/e2e/test_convolutions.cpp
#define KILN_TEST_FORM_index_reduction_1(NAME, T)                                              \
  static_assert(                                                                               \
      requires(graph g, graph::value v) { g.NAME(v, 0, false); }, "graph::" #NAME " missing"); \
  check_index_reduction<op::NAME, T>(fn<tensor<T, dyn>>([](auto x) { return kiln::NAME<0>(x); }));
#define KILN_TEST_FORM_reduction_1(NAME, T)                                                      \
  static_assert(                                                                                 \
      requires(graph g, graph::value v) { g.NAME(v, {0}, false); }, "graph::" #NAME " missing"); \
  check_reduction<op::NAME, T>(fn<tensor<T, dyn>>([](auto x) { return kiln::NAME<>(x); }));
#define KILN_TEST_OP(NAME, ARITY, CLASS, TYPES, COMMUTATIVE) \
  { KILN_TEST_FORM_##CLASS##_##ARITY(NAME, KILN_TEST_ELEMENT_##TYPES)++ rows; }

TEST(OpCoverage, EveryRowOfTheOpList) {
  int rows = 0, covered = 0;
  KILN_IR_OPS(KILN_TEST_OP)
  EXPECT_EQ(rows, ir::op_count);
  // input, constant, select, cast (below), the seven views, matmul, conv and conv_transpose:
  // checked elsewhere.
  EXPECT_EQ(covered, 14);
}

TEST(OpCoverage, SelectAndCast) {
  constexpr auto s = fn<tensor<bool, dyn>, tensor<f32, dyn>, tensor<f32, dyn>>(
      [](auto c, auto a, auto b) { return select(c, a, b); });
  ref::check<float>(
      s, [](bool c, float a, float b) { return scalar(op::select, c, a, b); }, ref::exact,
      operand<bool>(1027, 3), operand<float>(1027, 4), operand<float>(1027, 5));
  constexpr auto to_int = fn<tensor<f32, dyn>>([](auto x) { return cast<std::int32_t>(x); });
  ref::check<std::int32_t>(
      to_int, [](float a) { return std::trunc(a); }, ref::exact, operand<float>(1027, 6));
}

}  // namespace
