// Seeded random elementwise graphs, built through the run-time graph API, compiled by the same
// passes, run on Vulkan and on the CPU (the tiled interpreter), each compared with this file's own
// scalar evaluator; every module is checked by spirv-val. A failure prints its seed and plan.
// How many and from which seed: the environment's KILN_RANDOM_GRAPHS and KILN_RANDOM_SEED (else
// the build's KILN_RANDOM_GRAPHS, 500 in CI, from seed 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

#include <kiln/codegen/spirv/tools.hpp>
#include <kiln/executable.hpp>
#include <kiln/runtime/vulkan/context.hpp>

#include "../support/reference.hpp"

#ifndef KILN_RANDOM_GRAPHS
#define KILN_RANDOM_GRAPHS 500
#endif

using namespace kiln;
using ir::op;

namespace {

// A value of the reference: floats in float and in double (their gap estimates how much the
// graph amplifies rounding), integers wrapped to 32 bits, bools.
struct rv {
  float f = 0;
  double d = 0;
  std::int32_t i = 0;
  // The value hangs on a discontinuity the reference cannot decide: a float within rounding
  // distance of an integer boundary cast to an integer, or two such floats compared. Every
  // function is within its bound, yet truncation can move the result by one; such elements (and
  // all that depends on them) are not compared.
  bool undecided = false;
};

// How far a kernel's float may be from the reference's float w (the comparison's tolerance).
double slack(const rv& w) {
  return 1e-5 * std::fabs(w.f) + 1e-6 + 8 * std::fabs(double(w.f) - w.d);
}

float narrow_round(dtype t, float v) {
  switch (t) {
    case dtype::f16:
      return static_cast<float>(ref::round_to<float16>(v));
    case dtype::bf16:
      return static_cast<float>(ref::round_to<bfloat16>(v));
    default:
      return v;
  }
}

std::int32_t wrap(dtype t, std::int64_t v) {
  auto u = static_cast<std::uint32_t>(v);
  if (t == dtype::i8) return static_cast<std::int8_t>(u & 0xFF);
  if (t == dtype::u8) return static_cast<std::int32_t>(u & 0xFF);
  return static_cast<std::int32_t>(u);
}

std::int32_t saturate_i32(double v) {
  if (std::isnan(v)) return 0;
  if (v <= -2147483648.0) return INT32_MIN;
  if (v >= 2147483648.0) return INT32_MAX;
  return static_cast<std::int32_t>(v);
}

struct random_graph {
  kiln::graph g;
  std::vector<shape> arg_dims;  // actual extents per input
  shape out;
};

// Builds a graph of float (f32), integer (i32) and bool values; narrow dtypes enter and leave
// through casts.
random_graph make_graph(unsigned seed) {
  std::mt19937 gen(seed);
  auto pick = [&](int n) { return static_cast<int>(gen() % static_cast<unsigned>(n)); };
  random_graph rg;
  int rank = pick(4);
  shape space;
  space.rank = rank;
  for (int i = 0; i < rank; ++i) space.dims[i] = 1 + pick(9);
  if (rank == 1 && pick(3) == 0) space.dims[0] = 1000 + pick(5000);
  rg.out = space;
  kiln::graph& b = rg.g;
  using value = kiln::graph::value;
  std::vector<value> floats, ints, bools;
  int inputs = 1 + pick(4);
  const dtype kinds[] = {dtype::f32,  dtype::f32, dtype::i32, dtype::f16,
                         dtype::bf16, dtype::i8,  dtype::u8,  dtype::boolean};
  for (int k = 0; k < inputs; ++k) {
    dtype t = kinds[pick(8)];
    shape actual = space, declared;
    int form = pick(3);  // full, broadcast (size-1 dims), scalar
    if (form == 1)
      for (int i = 0; i < rank; ++i)
        if (pick(2)) actual.dims[i] = 1;
    if (form == 2) actual = shape{};
    declared = actual;
    if (pick(2))  // dynamic extents resolved at the call
      for (int i = 0; i < declared.rank; ++i) declared.dims[i] = dyn;
    value id = b.input("in" + std::to_string(k), t, declared);
    rg.arg_dims.push_back(actual);
    if (t == dtype::boolean) {
      bools.push_back(id);
    } else if (is_floating(t)) {
      floats.push_back(t == dtype::f32 ? id : b.cast(id, dtype::f32));
    } else {
      ints.push_back(t == dtype::i32 ? id : b.cast(id, dtype::i32));
    }
  }
  auto any = [&](std::vector<value>& v) { return v[pick(static_cast<int>(v.size()))]; };
  if (floats.empty()) floats.push_back(b.constant(1.5, dtype::f32));
  if (ints.empty()) ints.push_back(b.constant(7, dtype::i32));
  if (bools.empty()) bools.push_back(b.lt(any(floats), any(floats)));
  // The ops drawn, from the op list by class and type rule: a new elementwise op joins by itself.
  auto ops_where = [](ir::op_class cls, dtype t) {
    std::vector<op> r;
    for (int k = 0; k < ir::op_count; ++k)
      if (ir::op_table[k].cls == cls && ir::accepts(ir::op_table[k].types, t))
        r.push_back(static_cast<op>(k));
    return r;
  };
  auto float_unary = ops_where(ir::op_class::unary, dtype::f32);
  auto float_binary = ops_where(ir::op_class::binary, dtype::f32);
  auto int_binary = ops_where(ir::op_class::binary, dtype::i32);
  auto compares = ops_where(ir::op_class::compare, dtype::f32);
  auto logicals = ops_where(ir::op_class::logical, dtype::boolean);
  auto float_tests = ops_where(ir::op_class::test, dtype::f32);
  auto float_ternary = ops_where(ir::op_class::ternary, dtype::f32);
  auto int_ternary = ops_where(ir::op_class::ternary, dtype::i32);
  auto int_unary = ops_where(ir::op_class::unary, dtype::i32);
  auto float_reductions = ops_where(ir::op_class::reduction, dtype::f32);
  auto int_reductions = ops_where(ir::op_class::reduction, dtype::i32);
  auto index_reductions = ops_where(ir::op_class::index_reduction, dtype::f32);
  auto any_op = [&](const std::vector<op>& v) { return v[pick(static_cast<int>(v.size()))]; };
  int steps = 2 + pick(8);
  for (int s = 0; s < steps; ++s) {
    switch (pick(10)) {
      case 8: {  // a reduction over some axes; kept with size 1, so it broadcasts back
        bool integer = pick(4) == 0;
        value x = any(integer ? ints : floats);
        int r = b.dims_of(x).rank;
        if (r == 0) break;
        std::vector<std::int64_t> axes;
        for (int i = 0; i < r; ++i)
          if (pick(2)) axes.push_back(pick(2) ? i : i - r);
        if (axes.empty()) axes.push_back(pick(r));
        // Leading axes alone may also be dropped: the rest still aligns on the right.
        bool leading = true;
        for (std::size_t k = 0; k < axes.size(); ++k)
          leading = leading && (axes[k] < 0 ? axes[k] + r : axes[k]) == static_cast<int>(k);
        bool keep = !leading || pick(2);
        if (!integer && pick(6) == 0) {  // a softmax: its row group of max, sum and divide
          floats.push_back(pick(2) ? b.softmax(x, axes[0]) : b.log_softmax(x, axes[0]));
          break;
        }
        if (pick(4) == 0) {  // argmax / argmin along one of the axes, as an i32
          bool last = pick(2);
          ints.push_back(
              b.cast(b.index_reduce(any_op(index_reductions), x, axes[0], keep, last), dtype::i32));
          break;
        }
        if (!integer && r >= 3 && pick(6) == 0) {
          // A convolution with constant weights, kernel 3 and padding 1 on every spatial axis
          // (static): x's dims kept. Dense, depthwise, or transposed.
          shape d = b.dims_of(x);
          bool fixed = true;
          for (int a = 1; a < r; ++a) fixed = fixed && d.dims[a] > 0;
          if (fixed) {
            const std::int64_t C = d.dims[1];
            const int kind = pick(3);  // 0: conv, 1: depthwise conv, 2: conv_transpose
            kiln::ir::conv_window c;
            c.groups = kind == 1 ? C : 1;
            shape wd = d;
            wd.dims[0] = C;
            wd.dims[1] = kind == 1 ? 1 : C;
            for (int a = 2; a < r; ++a) {
              wd.dims[a] = 3;
              c.pads.push_back(1);
            }
            for (int a = 2; a < r; ++a) c.pads.push_back(1);
            std::vector<float> w(static_cast<std::size_t>(wd.element_count()));
            for (auto& e : w) e = static_cast<float>(pick(9) - 4) * 0.125f;
            value wv = b.constant(w.data(), dtype::f32, w.size(), wd);
            floats.push_back(kind == 2 ? b.conv_transpose(x, wv, c) : b.conv(x, wv, c));
            break;
          }
        }
        if (!integer && pick(5) == 0) {
          // A contraction with a constant square matrix over the last (static) axis: x's dims
          // kept, so it broadcasts on; its consumers become its epilogue.
          std::int64_t n = b.dims_of(x).dims[r - 1];
          if (n > 0) {
            std::vector<float> w(static_cast<std::size_t>(n * n));
            for (auto& e : w) e = static_cast<float>(pick(9) - 4) * 0.25f;
            floats.push_back(b.matmul(x, b.constant(w.data(), dtype::f32, w.size(), shape{n, n})));
            break;
          }
        }
        op kind = any_op(integer ? int_reductions : float_reductions);
        (integer ? ints : floats).push_back(b.reduce(kind, x, axes, keep));
        break;
      }
      case 0:
        if (pick(3) == 0) {  // a view that keeps the extents, so it still broadcasts
          auto& from = pick(4) == 0 ? ints : floats;
          value x = any(from);
          shape d = b.dims_of(x);
          std::vector<int> reversible, swaps;
          for (int i = 0; i < d.rank; ++i)
            if (d.dims[i] >= 0) reversible.push_back(i);
          int a = d.rank > 1 ? pick(d.rank) : 0, c = d.rank > 1 ? pick(d.rank) : 0;
          value y;
          if (!reversible.empty() && pick(2)) {  // an axis reversed: a slice with step -1
            std::int64_t axis = reversible[pick(static_cast<int>(reversible.size()))];
            y = b.slice(x, {-1}, {std::numeric_limits<std::int64_t>::min()}, {axis}, {-1});
          } else if (d.rank < 4 && reversible.size() == std::size_t(d.rank) && pick(3) == 0) {
            // a leading 1: broadcasting's own view
            std::vector<std::int64_t> sizes = {1};
            for (int i = 0; i < d.rank; ++i) sizes.push_back(d.dims[i]);
            y = b.reshape(x, sizes);
          } else if (!reversible.empty() && pick(2)) {
            // An index map along a static axis that keeps its extent n: a gather by constant
            // positions (repeats, negatives from the end), a pad that shifts by k and crops k
            // (each mode), or a rotation by k as the concat of two slices.
            std::int64_t axis = reversible[pick(static_cast<int>(reversible.size()))];
            std::int64_t n = d.dims[axis], k = n > 1 ? 1 + pick(static_cast<int>(n - 1)) : 0;
            switch (pick(3)) {
              case 0: {
                std::vector<std::int64_t> at(static_cast<std::size_t>(n));
                for (auto& i : at) i = pick(static_cast<int>(2 * n)) - n;
                dtype t = pick(2) ? dtype::i32 : dtype::i64;
                std::vector<std::int32_t> at32(at.begin(), at.end());
                value positions = t == dtype::i64
                                      ? b.constant(at.data(), t, at.size(), shape{n})
                                      : b.constant(at32.data(), t, at32.size(), shape{n});
                y = b.gather(x, positions, axis);
                break;
              }
              case 1: {
                std::vector<std::int64_t> pads(2 * static_cast<std::size_t>(d.rank), 0);
                bool left = pick(2);
                pads[axis + (left ? 0 : d.rank)] = k;
                pads[axis + (left ? d.rank : 0)] = -k;
                const char* modes[] = {"constant", "edge", "reflect", "wrap"};
                y = b.pad(x, pads, modes[pick(4)]);
                break;
              }
              default:
                y = b.concat({b.slice(x, {k}, {n}, {axis}), b.slice(x, {0}, {k}, {axis})}, axis);
            }
          } else if (a != c && d.dims[a] == d.dims[c] && d.dims[a] >= 0) {  // two axes swapped
            std::vector<std::int64_t> perm(d.rank);
            std::iota(perm.begin(), perm.end(), 0);
            std::swap(perm[a], perm[c]);
            y = b.transpose(x, perm);
          } else {  // broadcast to the whole space
            std::vector<std::int64_t> full(space.dims.begin(), space.dims.begin() + space.rank);
            y = b.expand(x, full);
          }
          from.push_back(y);
          break;
        }
        floats.push_back(b.apply(any_op(float_unary), {any(floats)}));
        break;
      case 1:
        floats.push_back(b.apply(any_op(float_unary), {any(floats)}));
        break;
      case 2:
      case 3:
        floats.push_back(b.apply(any_op(float_binary), {any(floats), any(floats)}));
        break;
      case 4:
        ints.push_back(b.apply(any_op(int_binary), {any(ints), any(ints)}));
        break;
      case 5:
        if (pick(4) == 0) {
          op o = any_op(logicals);
          bools.push_back(ir::info(o).arity == 1 ? b.apply(o, {any(bools)})
                                                 : b.apply(o, {any(bools), any(bools)}));
        } else {
          bools.push_back(pick(2) ? b.apply(any_op(compares), {any(floats), any(floats)})
                                  : b.apply(any_op(compares), {any(ints), any(ints)}));
        }
        break;
      case 6:
        if (pick(3) == 0)
          floats.push_back(b.apply(any_op(float_ternary), {any(floats), any(floats), any(floats)}));
        else if (pick(4) == 0)
          ints.push_back(b.apply(any_op(int_ternary), {any(ints), any(ints), any(ints)}));
        else
          floats.push_back(b.select(any(bools), any(floats), any(floats)));
        break;
      case 7:
        if (pick(4) == 0)
          bools.push_back(b.apply(any_op(float_tests), {any(floats)}));
        else
          ints.push_back(pick(2) ? b.cast(any(floats), dtype::i32)
                                 : b.apply(any_op(int_unary), {any(ints)}));
        break;
      default:
        floats.push_back(b.cast(any(pick(2) ? ints : bools), dtype::f32));
        break;
    }
  }
  // One to three results, each broadcast to the full space, some cast to narrow types.
  int results = 1 + pick(3);
  for (int r = 0; r < results; ++r) {
    value v = pick(3) == 0 ? any(ints) : any(floats);
    // Broadcast to the space with a zero of the right shape: an input of the full extents.
    switch (pick(5)) {
      case 0:
        v = b.cast(v, dtype::f16);
        break;
      case 1:
        v = b.cast(v, dtype::u8);
        break;
      default:
        break;
    }
    b.output("out" + std::to_string(r), v);
  }
  return rg;
}

// Index of `point` (over `space`) in a tensor of extents `dims`, right-aligned, size 1 repeats.
std::int64_t source_index(const shape& dims, const shape& space, const std::int64_t* point) {
  std::int64_t idx = 0;
  for (int i = 0; i < dims.rank; ++i) {
    int si = space.rank - dims.rank + i;
    // An input a result does not read may have more dimensions than it: any element will do.
    std::int64_t at = si < 0 ? 0 : point[si] % dims.dims[i];
    idx = idx * dims.dims[i] + (dims.dims[i] == 1 ? 0 : at);
  }
  return idx;
}

// The reference value of elementwise node n of g from its operands' values at the same point.
rv apply_node(const ir::graph& g, const ir::node& n, const rv* operand) {
  {
    auto in = [&](int i) { return operand[i]; };
    rv r;
    bool fl = is_floating(n.type);
    switch (n.kind) {
      case op::constant:
        r = {float(n.value.f), n.value.f, std::int32_t(n.value.i)};
        break;
      case op::neg:
        r = fl ? rv{-in(0).f, -in(0).d} : rv{0, 0, wrap(n.type, -std::int64_t(in(0).i))};
        break;
      case op::abs:
        r = fl ? rv{std::fabs(in(0).f), std::fabs(in(0).d)}
               : rv{0, 0, wrap(n.type, std::abs(std::int64_t(in(0).i)))};
        break;
      case op::relu:
        r = fl ? rv{in(0).f < 0 ? 0.f : in(0).f, in(0).d < 0 ? 0. : in(0).d}
               : rv{0, 0, std::max(in(0).i, 0)};
        break;
      case op::exp:
        r = {std::exp(in(0).f), std::exp(in(0).d)};
        break;
      case op::tanh:
        r = {std::tanh(in(0).f), std::tanh(in(0).d)};
        break;
      case op::sigmoid:
        r = {1 / (1 + std::exp(-in(0).f)), 1 / (1 + std::exp(-in(0).d))};
        break;
      case op::sqrt:
        r = {std::sqrt(in(0).f), std::sqrt(in(0).d)};
        break;
      case op::reciprocal:
        r = {1 / in(0).f, 1 / in(0).d};
        break;
      case op::sign:
        if (!fl) {
          r.i = (in(0).i > 0) - (in(0).i < 0);
          break;
        }
        r = {in(0).f > 0   ? 1.f
             : in(0).f < 0 ? -1.f
                           : in(0).f,
             in(0).d > 0   ? 1.
             : in(0).d < 0 ? -1.
                           : in(0).d};
        break;
      case op::softsign:
        r = {in(0).f / (1 + std::fabs(in(0).f)), in(0).d / (1 + std::fabs(in(0).d))};
        break;
      case op::rsqrt:
        r = {1 / std::sqrt(in(0).f), 1 / std::sqrt(in(0).d)};
        break;
      case op::ceil:
        r = {std::ceil(in(0).f), std::ceil(in(0).f)};
        break;
      case op::cos:
        r = {std::cos(in(0).f), std::cos(in(0).d)};
        break;
      case op::pow:
        r = {std::pow(in(0).f, in(1).f), std::pow(in(0).d, in(1).d)};
        break;
      case op::logical_and:
        r.i = in(0).i && in(1).i;
        break;
      case op::logical_or:
        r.i = in(0).i || in(1).i;
        break;
      case op::logical_not:
        r.i = !in(0).i;
        break;
      case op::floor:
        r = {std::floor(in(0).f), std::floor(in(0).f)};
        break;
      case op::round:
        r = {std::nearbyint(in(0).f), std::nearbyint(in(0).f)};
        break;
      case op::log:
        r = {std::log(in(0).f), std::log(in(0).d)};
        break;
      case op::sin:
        r = {std::sin(in(0).f), std::sin(in(0).d)};
        break;
      case op::erf:
        r = {std::erf(in(0).f), std::erf(in(0).d)};
        break;
      case op::tan:
        r = {std::tan(in(0).f), std::tan(in(0).d)};
        break;
      case op::asin:
        r = {std::asin(in(0).f), std::asin(in(0).d)};
        break;
      case op::acos:
        r = {std::acos(in(0).f), std::acos(in(0).d)};
        break;
      case op::atan:
        r = {std::atan(in(0).f), std::atan(in(0).d)};
        break;
      case op::sinh:
        r = {std::sinh(in(0).f), std::sinh(in(0).d)};
        break;
      case op::cosh:
        r = {std::cosh(in(0).f), std::cosh(in(0).d)};
        break;
      case op::asinh:
        r = {std::asinh(in(0).f), std::asinh(in(0).d)};
        break;
      case op::acosh:
        r = {std::acosh(in(0).f), std::acosh(in(0).d)};
        break;
      case op::atanh:
        r = {std::atanh(in(0).f), std::atanh(in(0).d)};
        break;
      case op::exp2:
        r = {std::exp2(in(0).f), std::exp2(in(0).d)};
        break;
      case op::expm1:
        r = {std::expm1(in(0).f), std::expm1(in(0).d)};
        break;
      case op::log2:
        r = {std::log2(in(0).f), std::log2(in(0).d)};
        break;
      case op::log1p:
        r = {std::log1p(in(0).f), std::log1p(in(0).d)};
        break;
      case op::softplus: {
        auto sp = [](auto x) {
          return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
        };
        r = {sp(in(0).f), sp(in(0).d)};
        break;
      }
      case op::erfc:
        r = {std::erfc(in(0).f), std::erfc(in(0).d)};
        break;
      case op::isnan:
        r.i = std::isnan(in(0).f);
        break;
      case op::isinf:
        r.i = std::isinf(in(0).f);
        break;
      case op::clip: {
        auto c = [](auto x, auto lo, auto hi) {
          return x != x || lo != lo || hi != hi ? x + lo + hi : std::min(std::max(x, lo), hi);
        };
        if (fl)
          r = {c(in(0).f, in(1).f, in(2).f), c(in(0).d, in(1).d, in(2).d)};
        else
          r.i = std::min(std::max(in(0).i, in(1).i), in(2).i);
        break;
      }
      case op::mod:
      case op::fmod: {
        bool python = n.kind == op::mod;
        if (fl) {
          auto m = [python](auto x, auto y) {
            auto q = std::fmod(x, y);
            if (python && q != 0 && (q < 0) != (y < 0)) q += y;
            return q;
          };
          r = {m(in(0).f, in(1).f), m(in(0).d, in(1).d)};
          // Near a multiple of y the remainder jumps by y: rounding of either operand decides it.
          double s = slack(in(0)) + slack(in(1)) * std::fabs(double(in(0).f) / in(1).f);
          double q = std::fabs(std::fmod(double(in(0).f), double(in(1).f)));
          r.undecided = q <= s || std::fabs(std::fabs(double(in(1).f)) - q) <= s;
        } else {
          std::int64_t a = in(0).i, b = in(1).i;
          std::int64_t q = b == 0 ? 0 : a % b;
          if (python && q != 0 && (q < 0) != (b < 0)) q += b;
          r.i = wrap(n.type, q);
        }
        break;
      }
      case op::bitwise_and:
        r.i = in(0).i & in(1).i;
        break;
      case op::bitwise_or:
        r.i = in(0).i | in(1).i;
        break;
      case op::bitwise_xor:
        r.i = in(0).i ^ in(1).i;
        break;
      case op::bitwise_not:
        r.i = ~in(0).i;
        break;
      case op::shift_left:
      case op::shift_right: {  // i32 values; counts outside [0, 32) shift every bit out
        auto count = static_cast<std::uint32_t>(in(1).i);
        std::int32_t a = in(0).i;
        if (n.kind == op::shift_left)
          r.i = count >= 32 ? 0 : static_cast<std::int32_t>(static_cast<std::uint32_t>(a) << count);
        else
          r.i = count >= 32 ? (a < 0 ? -1 : 0) : a >> count;
        break;
      }
      case op::add:
        r = fl ? rv{in(0).f + in(1).f, in(0).d + in(1).d}
               : rv{0, 0, wrap(n.type, std::int64_t(in(0).i) + in(1).i)};
        break;
      case op::sub:
        r = fl ? rv{in(0).f - in(1).f, in(0).d - in(1).d}
               : rv{0, 0, wrap(n.type, std::int64_t(in(0).i) - in(1).i)};
        break;
      case op::mul:
        r = fl ? rv{in(0).f * in(1).f, in(0).d * in(1).d}
               : rv{0, 0, wrap(n.type, std::int64_t(in(0).i) * in(1).i)};
        break;
      case op::div:
        if (fl)
          r = {in(0).f / in(1).f, in(0).d / in(1).d};
        else
          r = {0, 0, in(1).i == 0 ? 0 : wrap(n.type, std::int64_t(in(0).i) / in(1).i)};
        break;
      case op::min:
      case op::max: {
        bool mn = n.kind == op::min;
        if (fl) {
          rv a = in(0), c = in(1);
          bool nan = std::isnan(a.f) || std::isnan(c.f);
          bool pick_a = mn ? a.f < c.f : a.f > c.f;
          r = nan ? rv{NAN, NAN} : pick_a ? a : c;
        } else {
          r.i = mn ? std::min(in(0).i, in(1).i) : std::max(in(0).i, in(1).i);
        }
        break;
      }
      case op::lt:
      case op::le:
      case op::gt:
      case op::ge:
      case op::eq:
      case op::ne: {
        dtype t = g.nodes[n.operands[0]].type;
        double a = is_floating(t) ? in(0).f : in(0).i, c = is_floating(t) ? in(1).f : in(1).i;
        bool res = n.kind == op::lt   ? a < c
                   : n.kind == op::le ? a <= c
                   : n.kind == op::gt ? a > c
                   : n.kind == op::ge ? a >= c
                   : n.kind == op::eq ? a == c
                                      : a != c;
        r.i = res;
        break;
      }
      case op::select:
        r = in(0).i ? in(1) : in(2);
        break;
      case op::cast: {
        dtype from = g.nodes[n.operands[0]].type;
        rv a = in(0);
        if (n.type == dtype::f32) {
          r = is_floating(from) ? a : rv{float(a.i), double(float(a.i))};
        } else if (n.type == dtype::f16) {
          // Rounds the float; the drift from the double evaluation the operand carried stays.
          float x = is_floating(from) ? a.f : float(a.i);
          float h = narrow_round(dtype::f16, x);
          r = {h, h + (is_floating(from) ? a.d - double(a.f) : 0.0)};
        } else if (n.type == dtype::i32) {
          r.i = is_floating(from) ? saturate_i32(a.f) : a.i;
        } else if (n.type == dtype::u8) {
          if (is_floating(from)) {
            float x = a.f;
            r.i = std::isnan(x) ? 0 : x <= 0 ? 0 : x >= 256 ? 255 : std::int32_t(x);
          } else {
            r.i = wrap(dtype::u8, a.i);
          }
        }
        break;
      }
      default:
        ADD_FAILURE() << "no reference for " << ir::name(n.kind);
        break;
    }
    for (int o = 0; o < ir::info(n.kind).arity; ++o) r.undecided = r.undecided || in(o).undecided;
    if (n.kind == op::cast && is_floating(g.nodes[n.operands[0]].type) && !is_floating(n.type) &&
        n.type != dtype::boolean)
      r.undecided = r.undecided || std::fabs(in(0).f - std::trunc(in(0).f)) <= slack(in(0)) ||
                    std::fabs(in(0).f - std::trunc(in(0).f)) >= 1 - slack(in(0));
    // Functions defined on part of the line: an operand within rounding of the edge may fall on
    // either side (a value or NaN).
    auto near = [&](double edge) { return std::fabs(in(0).f - edge) <= slack(in(0)); };
    switch (n.kind) {
      case op::asin:
      case op::acos:
      case op::atanh:
        r.undecided = r.undecided || near(1) || near(-1);
        break;
      case op::acosh:
        r.undecided = r.undecided || near(1);
        break;
      case op::log1p:
        r.undecided = r.undecided || near(-1);
        break;
      default:
        break;
    }
    if (ir::info(n.kind).cls == ir::op_class::compare && is_floating(g.nodes[n.operands[0]].type))
      r.undecided =
          r.undecided || std::fabs(double(in(0).f) - in(1).f) <= slack(in(0)) + slack(in(1));
    return r;
  }
}

// Reduction n of g over the operand values `x` that fold into one result, in any order: doubles
// exactly enough, floats as the double result moved by the worst rounding of a float fold (n
// steps of half an ulp of the running |sum|), so that the float-double gap, which every later
// comparison allows for, covers however the kernel ordered the fold.
rv fold(const ir::graph& g, const ir::node& n, const std::vector<rv>& x) {
  bool fl = is_floating(n.type);
  rv r;
  if (ir::info(n.kind).cls == ir::op_class::index_reduction) {
    // The extreme's index: NaN counts as the extreme, ties keep the first (or last) index. Two
    // floats within rounding distance of each other may come out in either order: undecided.
    bool floats = is_floating(g.nodes[n.operands[0]].type);
    std::int64_t best = -1;
    rv bv;
    for (std::size_t k = 0; k < x.size(); ++k) {
      const rv& v = x[k];
      r.undecided = r.undecided || v.undecided;
      if (best < 0) {
        best = static_cast<std::int64_t>(k);
        bv = v;
        continue;
      }
      double a = floats ? bv.f : bv.i, b = floats ? v.f : v.i;
      bool na = std::isnan(a), nb = std::isnan(b);
      bool tie = (na && nb) || (!na && !nb && a == b);
      bool wins = tie ? n.attrs.select_last : nb || (!na && (n.kind == op::argmax ? b > a : b < a));
      if (floats && !tie && !na && !nb && std::fabs(a - b) <= slack(bv) + slack(v))
        r.undecided = true;
      if (wins) {
        best = static_cast<std::int64_t>(k);
        bv = v;
      }
    }
    r.i = static_cast<std::int32_t>(best);
    return r;
  }
  double d = 0, magnitude = 0;
  float fm = 0;  // max and min: of the floats themselves
  std::int64_t i = 0;
  bool minmax = n.kind == op::reduce_max || n.kind == op::reduce_min;
  bool is_max = n.kind == op::reduce_max;
  if (minmax) {
    d = fm = is_max ? -INFINITY : INFINITY;
    i = is_max ? INT32_MIN : INT32_MAX;
  }
  if (n.kind == op::reduce_prod) d = i = 1;
  bool nan = false;
  for (const rv& v : x) {
    r.undecided = r.undecided || v.undecided;
    double e = v.d;
    std::int64_t ie = v.i;
    switch (n.kind) {
      case op::reduce_sum:
      case op::reduce_mean:
        break;
      case op::reduce_l1:
        e = std::fabs(e), ie = ie < 0 ? -ie : ie;
        break;
      case op::reduce_l2:
      case op::reduce_sum_square:
        e = e * e, ie = ie * ie;
        break;
      case op::reduce_max:
      case op::reduce_min:
      case op::reduce_prod:
        break;
      default:
        ADD_FAILURE() << "no reference for " << ir::name(n.kind);
    }
    nan = nan || std::isnan(v.f);
    if (minmax) {
      d = is_max ? std::max(d, e) : std::min(d, e);
      fm = is_max ? std::max(fm, v.f) : std::min(fm, v.f);
      i = is_max ? std::max(i, ie) : std::min(i, ie);
    } else if (n.kind == op::reduce_prod) {
      d *= e, i = static_cast<std::int64_t>(static_cast<std::uint64_t>(i) *
                                            static_cast<std::uint64_t>(ie));
      magnitude += 1;  // relative roundings, one per factor
    } else {
      d += e, i = static_cast<std::int64_t>(static_cast<std::uint64_t>(i) +
                                            static_cast<std::uint64_t>(ie));
      magnitude += std::fabs(e);
    }
  }
  auto count = static_cast<double>(x.size());
  if (n.kind == op::reduce_mean) d /= count, magnitude /= count;
  double bound =
      n.kind == op::reduce_prod ? magnitude * 0x1p-24 * std::fabs(d) : count * 0x1p-24 * magnitude;
  if (n.kind == op::reduce_l2) {
    d = std::sqrt(d);
    bound = d > 0 ? bound / (2 * d) : std::sqrt(bound);
  }
  if (!fl) {
    r.i = wrap(n.type, i);
    return r;
  }
  if (nan) return {NAN, NAN, 0, r.undecided};
  r.d = d;
  r.f = minmax ? fm : static_cast<float>(d + (d < 0 ? -bound : bound));
  return r;
}

// Every node's reference value at every point of its own extents (sym: the call's sizes).
std::vector<std::vector<rv>> evaluate(const ir::graph& g, const std::vector<std::vector<rv>>& args,
                                      const std::int64_t* sym) {
  std::vector<std::vector<rv>> v(g.nodes.size());
  auto unravel = [](std::int64_t e, const shape& dims, std::int64_t* point) {
    for (int i = dims.rank - 1; i >= 0; --i) {
      point[i] = e % dims.dims[i];
      e /= dims.dims[i];
    }
  };
  for (std::size_t k = 0; k < g.nodes.size(); ++k) {
    const ir::node& n = g.nodes[k];
    shape dims = runtime::concrete(n.dims, sym);
    std::int64_t count = dims.element_count();
    if (n.kind == op::input) {
      v[k] = args[n.arg];
      continue;
    }
    v[k].resize(static_cast<std::size_t>(count));
    if (ir::info(n.kind).cls == ir::op_class::contraction) {
      // Sums of K products, floats as the double result moved by the rounding of any order of
      // float sums and by the operands' own float-double gaps.
      shape ad = runtime::concrete(g.nodes[n.operands[0]].dims, sym);
      shape wd = runtime::concrete(g.nodes[n.operands[1]].dims, sym);
      const int rank = dims.rank;
      const std::vector<rv>&a = v[n.operands[0]], &w = v[n.operands[1]];
      // Element e's products: visit(index in a, index in w) for each.
      auto products = [&](std::int64_t e, auto visit) {
        if (n.kind == op::matmul) {
          const std::int64_t M = dims.dims[rank - 2], N = dims.dims[rank - 1];
          const std::int64_t K = ad.dims[rank - 1];
          const std::int64_t batch = e / (M * N), i = e / N % M, j = e % N;
          for (std::int64_t k = 0; k < K; ++k)
            visit((batch * M + i) * K + k, (batch * K + k) * N + j);
          return;
        }
        // conv: x [N, C, ...] w [M, C / g, kernel...]; conv_transpose: w [C, M / g, kernel...].
        const bool transposed = n.kind == op::conv_transpose;
        const std::int64_t groups = n.attrs.groups, C = ad.dims[1], M = dims.dims[1];
        const std::int64_t Cg = C / groups, Mg = M / groups;
        std::int64_t out[max_rank] = {}, cell[max_rank] = {};
        unravel(e, dims, out);
        const std::int64_t grp = out[1] / Mg;
        std::int64_t cells = 1;
        for (int a2 = 2; a2 < rank; ++a2) cells *= wd.dims[a2];
        for (std::int64_t ci = 0; ci < Cg; ++ci)
          for (std::int64_t c = 0; c < cells; ++c) {
            std::int64_t rest = c, xi = out[0] * C + grp * Cg + ci;
            for (int a2 = rank - 1; a2 >= 2; --a2) {
              cell[a2] = rest % wd.dims[a2];
              rest /= wd.dims[a2];
            }
            std::int64_t wi = transposed ? (grp * Cg + ci) * Mg + out[1] % Mg : out[1] * Cg + ci;
            bool inside = true;
            for (int a2 = 2; a2 < rank; ++a2) {
              const std::int64_t shift = n.attrs.starts[a2] + cell[a2] * n.attrs.dilations[a2];
              const std::int64_t s2 = n.attrs.steps[a2];
              std::int64_t i = out[a2] * s2 + shift;
              if (transposed) i = (out[a2] - shift) % s2 == 0 ? (out[a2] - shift) / s2 : -1;
              inside = inside && i >= 0 && i < ad.dims[a2];
              xi = xi * ad.dims[a2] + i;
              wi = wi * wd.dims[a2] + cell[a2];
            }
            if (inside) visit(xi, wi);
          }
      };
      for (std::int64_t e = 0; e < count; ++e) {
        double d = 0, magnitude = 0, gap = 0;
        std::int64_t terms = 0;
        bool nan = false, undecided = false;
        products(e, [&](std::int64_t i, std::int64_t j) {
          const rv &x = a[i], &y = w[j];
          d += x.d * y.d;
          magnitude += std::fabs(x.d * y.d);
          gap += std::fabs(y.d) * std::fabs(x.f - x.d) + std::fabs(x.d) * std::fabs(y.f - y.d);
          nan = nan || std::isnan(x.f) || std::isnan(y.f);
          undecided = undecided || x.undecided || y.undecided;
          ++terms;
        });
        double bound = double(terms + 1) * 0x1p-24 * magnitude + gap;
        v[k][e] = nan ? rv{NAN, NAN, 0, undecided}
                      : rv{static_cast<float>(d + (d < 0 ? -bound : bound)), d, 0, undecided};
      }
      continue;
    }
    if (ir::is_reduction(ir::info(n.kind).cls)) {
      const std::vector<rv>& x = v[n.operands[0]];
      shape xd = runtime::concrete(g.nodes[n.operands[0]].dims, sym);
      std::vector<std::vector<rv>> groups(static_cast<std::size_t>(count));
      std::int64_t point[max_rank] = {};
      for (std::int64_t e = 0; e < xd.element_count(); ++e) {
        unravel(e, xd, point);
        std::int64_t o = 0;
        for (int i = 0; i < xd.rank; ++i)
          if (!ir::reduces(n.attrs, i)) o = o * xd.dims[i] + point[i];
        groups[o].push_back(x[e]);
      }
      for (std::int64_t o = 0; o < count; ++o) v[k][o] = fold(g, n, groups[o]);
      continue;
    }
    std::int64_t point[max_rank] = {};
    if (ir::is_gather(n.kind)) {  // positions read from the indices (clamped, as kiln does)
      const ir::node& o = g.nodes[n.operands[0]];
      shape od = runtime::concrete(o.dims, sym);
      shape id = runtime::concrete(g.nodes[n.operands[1]].dims, sym);
      const int axis = n.attrs.axis, q = n.kind == op::gather ? id.rank : 1;
      for (std::int64_t e = 0; e < count; ++e) {
        unravel(e, dims, point);
        std::int64_t at_index = e;  // gather_elements: the indices have the result's dims
        if (n.kind == op::gather) {
          at_index = 0;
          for (int i = 0; i < q; ++i) at_index = at_index * id.dims[i] + point[axis + i];
        }
        std::int64_t p = v[n.operands[1]][at_index].i, size = od.dims[axis];
        if (p < 0) p += size;
        p = std::clamp<std::int64_t>(p, 0, size - 1);
        std::int64_t at = 0;
        for (int i = 0; i < od.rank; ++i) {
          std::int64_t c = i < axis ? point[i] : i == axis ? p : point[i + q - 1];
          at = at * od.dims[i] + c;
        }
        v[k][e] = v[n.operands[0]][at];
      }
      continue;
    }
    if (ir::info(n.kind).cls == ir::op_class::view) {  // where each element comes from
      const ir::node& o = g.nodes[n.operands[0]];
      shape od = runtime::concrete(o.dims, sym);
      for (std::int64_t e = 0; e < count; ++e) {
        unravel(e, dims, point);
        std::int64_t from[max_rank] = {}, at = 0;
        for (int i = 0; i < dims.rank; ++i) {
          if (n.kind == op::transpose) from[n.attrs.perm[i]] = point[i];
          if (n.kind == op::slice) from[i] = n.attrs.starts[i] + point[i] * n.attrs.steps[i];
          if (n.kind == op::shift) from[i] = point[i];
        }
        if (n.kind == op::shift)
          from[n.attrs.axis] = ir::folded_position(
              point[n.attrs.axis] - n.attrs.starts[n.attrs.axis], od.dims[n.attrs.axis],
              static_cast<ir::position_fold>(n.attrs.fold));
        if (n.kind == op::reshape)
          at = e;  // the same row-major order
        else if (n.kind == op::expand)
          at = source_index(od, dims, point);
        else
          for (int i = 0; i < od.rank; ++i) at = at * od.dims[i] + from[i];
        v[k][e] = v[n.operands[0]][at];
      }
      continue;
    }
    for (std::int64_t e = 0; e < count; ++e) {
      unravel(e, dims, point);
      rv ops[3];
      for (int i = 0; i < n.arity(); ++i) {
        const ir::node& o = g.nodes[n.operands[i]];
        ops[i] = v[n.operands[i]][source_index(runtime::concrete(o.dims, sym), dims, point)];
      }
      v[k][e] = apply_node(g, n, ops);
    }
  }
  return v;
}

rv input_value(dtype t, std::mt19937& gen) {
  std::uniform_real_distribution<double> d(-4, 4);
  switch (t) {
    case dtype::boolean:
      return {0, 0, std::int32_t(gen() % 2)};
    case dtype::i32:
      return {0, 0, std::int32_t(gen() % 41) - 20};
    case dtype::i8:
      return {0, 0, std::int32_t(gen() % 256) - 128};
    case dtype::u8:
      return {0, 0, std::int32_t(gen() % 256)};
    default: {
      float x = narrow_round(t, static_cast<float>(d(gen)));
      return {x, x};
    }
  }
}

void store(dtype t, const rv& v, unsigned char* p) {
  switch (t) {
    case dtype::boolean:
      *reinterpret_cast<bool*>(p) = v.i != 0;
      break;
    case dtype::i32:
      std::memcpy(p, &v.i, 4);
      break;
    case dtype::i8:
      *reinterpret_cast<std::int8_t*>(p) = std::int8_t(v.i);
      break;
    case dtype::u8:
      *p = std::uint8_t(v.i);
      break;
    case dtype::f16: {
      float16 h(v.f);
      std::memcpy(p, &h, 2);
      break;
    }
    case dtype::bf16: {
      bfloat16 h(v.f);
      std::memcpy(p, &h, 2);
      break;
    }
    default:
      std::memcpy(p, &v.f, 4);
      break;
  }
}
double load(dtype t, const unsigned char* p) {
  switch (t) {
    case dtype::u8:
      return *p;
    case dtype::i32: {
      std::int32_t i;
      std::memcpy(&i, p, 4);
      return i;
    }
    case dtype::f16: {
      float16 h;
      std::memcpy(&h, p, 2);
      return static_cast<float>(h);
    }
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

// Runs one seed on Vulkan and on the CPU; returns false (with failures added) when either
// differs from the reference.
bool run_seed(unsigned seed, const device& vk) {
  random_graph rg = make_graph(seed);
  executable exe = compile(rg.g);
  const compiler::plan& p = exe.plan();
  std::mt19937 gen(seed * 7919u + 1);
  // Argument data.
  std::vector<std::vector<unsigned char>> arg_data;
  std::vector<std::vector<rv>> arg_values;
  std::vector<tensor_ref> args;
  // Tensor constants (a gather's positions; pad's and concat's masks) are the plan's inputs after
  // the parameters, in the order of their inputs in the graph; the reference reads their values.
  const std::size_t parameters = exe.input_names().size();
  std::vector<std::pair<std::int32_t, std::vector<unsigned char>>> constants;
  for (const auto& c : rg.g.constants())
    constants.emplace_back(c.arg, std::vector<unsigned char>(c.bytes.begin(), c.bytes.end()));
  for (const ir::tensor_data& c : rg.g.ir().tensors)
    constants.emplace_back(c.arg, runtime::tensor_bytes(rg.g.ir().inputs[c.arg].type, c.values));
  std::sort(constants.begin(), constants.end());
  std::vector<runtime::buffer_ref> refs;
  for (std::size_t a = 0; a < p.graph.inputs.size(); ++a) {
    dtype t = p.graph.inputs[a].type;
    arg_values.emplace_back();
    if (a >= parameters) {
      const std::vector<unsigned char>& bytes = constants.at(a - parameters).second;
      const shape& dims = p.graph.inputs[a].dims;
      for (std::int64_t i = 0; i < dims.element_count(); ++i) {
        const unsigned char* at = bytes.data() + i * size_in_bytes(t);
        std::int64_t v = t == dtype::boolean ? *at : 0;
        if (t == dtype::i32) v = *reinterpret_cast<const std::int32_t*>(at);
        if (t == dtype::i64) v = *reinterpret_cast<const std::int64_t*>(at);
        float f = 0;  // a contraction's matrix
        if (t == dtype::f32) std::memcpy(&f, at, 4);
        arg_values.back().push_back({f, f, static_cast<std::int32_t>(v)});
      }
      refs.push_back({bytes.data(), dims});
      continue;
    }
    std::int64_t n = rg.arg_dims[a].element_count();
    arg_data.emplace_back(static_cast<std::size_t>(n * size_in_bytes(t)) + 1);
    for (std::int64_t i = 0; i < n; ++i) {
      arg_values.back().push_back(input_value(t, gen));
      store(t, arg_values.back().back(), arg_data.back().data() + i * size_in_bytes(t));
    }
    args.emplace_back(static_cast<const void*>(arg_data.back().data()), t, rg.arg_dims[a]);
    refs.push_back(args.back().ref);
  }
  std::vector<std::int64_t> sym(p.graph.symbols.size() + 1);
  runtime::resolve_symbols(p.graph.inputs, p.graph.nodes, p.graph.symbols, p.graph.constraints,
                           refs, sym.data(), "random");
  std::string context = "seed " + std::to_string(seed) + "\n" + compiler::print(p);
  auto reference = evaluate(p.graph, arg_values, sym.data());
  const device devices[] = {vk, device::cpu()};
  for (const device& dev : devices) {
    std::vector<std::vector<unsigned char>> result_data;
    std::vector<tensor_ref> results;
    for (auto o : p.graph.outputs) {
      dtype t = p.graph.nodes[o].type;
      shape dims = runtime::concrete(p.graph.nodes[o].dims, sym.data());
      result_data.emplace_back(static_cast<std::size_t>(dims.element_count() * size_in_bytes(t)) +
                               1);
      results.emplace_back(static_cast<void*>(result_data.back().data()), t, dims);
    }
    exe.run(args, results, dev);
    if (dev == vk) {
      for (const spirv::kernel& k : exe.kernels()) {
        if (!k.unsupported.empty()) {
          ADD_FAILURE() << "a region fell back to the CPU (" << k.unsupported << "): " << context;
          return false;
        }
        std::string msg = spirv::validate(k.code, vk.context()->target().vulkan_version);
        if (!msg.empty()) {
          ADD_FAILURE() << "spirv-val: " << msg << context;
          return false;
        }
      }
    }
    // Compare every element of every result.
    for (std::size_t r = 0; r < results.size(); ++r) {
      std::int32_t o = p.graph.outputs[r];
      dtype t = p.graph.nodes[o].type;
      std::int64_t count = results[r].ref.dims.element_count();
      for (std::int64_t e = 0; e < count; ++e) {
        const rv& want = reference[o][e];
        if (want.undecided) continue;
        double got = load(t, result_data[r].data() + e * size_in_bytes(t));
        bool ok;
        if (!is_floating(t) && t != dtype::f16) {
          ok = got == want.i;
        } else if (std::isnan(want.f) || std::isnan(want.d)) {
          ok = std::isnan(got) || std::isnan(want.f) != std::isnan(want.d);
        } else {
          // Relative 1e-5 plus how far float and double evaluation of the same graph drift apart.
          double w = want.f, gap = std::fabs(double(want.f) - want.d);
          if (std::isinf(w))
            ok = got == w || gap > 1e30;
          else
            ok = std::fabs(got - w) <=
                 1e-5 * std::fabs(w) + 1e-6 + 8 * gap + (t == dtype::f16 ? 1e-3 * std::fabs(w) : 0);
        }
        if (!ok) {
          ADD_FAILURE() << "result " << r << " element " << e << ": " << dev.name() << " " << got
                        << ", reference " << (is_floating(t) ? double(want.f) : double(want.i))
                        << "\n"
                        << context;
          return false;
        }
      }
    }
  }
  return true;
}

}  // namespace

// A positive number from the environment, or `fallback`.
unsigned from_environment(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long n = std::strtoul(v, &end, 10);
  if (*end != 0 || n == 0) throw std::invalid_argument(std::string(name) + " is not a count");
  return static_cast<unsigned>(n);
}

TEST(RandomGraphs, VulkanAndCpuMatchTheReference) {
  auto dev = device::vulkan();
  int failed = 0;
  std::string seeds;
  unsigned first = from_environment("KILN_RANDOM_SEED", 1);
  unsigned count = from_environment("KILN_RANDOM_GRAPHS", KILN_RANDOM_GRAPHS);
  for (unsigned seed = first; seed < first + count; ++seed) {
    if (!run_seed(seed, dev)) {
      ++failed;
      seeds += ' ';  // two appends: GCC 12 misreads " " + to_string(...) (-Wrestrict)
      seeds += std::to_string(seed);
      if (failed > 10) break;
    }
  }
  EXPECT_EQ(failed, 0) << "failing seeds:" << seeds;
}

// Completeness of this file: every op of the list is one the generator can draw (by its class and
// type rule, on the f32, i32 and bool values it builds) and one the evaluator knows.
TEST(RandomGraphs, EveryOpIsDrawnAndEvaluated) {
  using ir::op_class;
  const op_class drawn[] = {
      op_class::unary,      op_class::binary,    op_class::ternary,         op_class::test,
      op_class::compare,    op_class::logical,   op_class::select,          op_class::cast,
      op_class::leaf,       op_class::reduction, op_class::index_reduction, op_class::view,
      op_class::contraction};
  for (int k = 0; k < ir::op_count; ++k) {
    const ir::op_info& info = ir::op_table[k];
    auto o = static_cast<op>(k);
    SCOPED_TRACE(std::string(info.name));
    EXPECT_NE(std::find(std::begin(drawn), std::end(drawn), info.cls), std::end(drawn))
        << "the generator draws no op of this class";
    if (info.cls == op_class::leaf) continue;
    dtype t = ir::accepts(info.types, dtype::f32)   ? dtype::f32
              : ir::accepts(info.types, dtype::i32) ? dtype::i32
                                                    : dtype::boolean;
    EXPECT_TRUE(t != dtype::boolean || info.types == ir::operand_types::bool_only ||
                info.cls == op_class::select)
        << "accepts neither f32 nor i32, which the generator builds";
    kiln::graph g;
    // Reduced: two elements into one; moved: two elements.
    bool reduction = ir::is_root(info.cls) || info.cls == op_class::view;
    shape dims = reduction ? shape{2} : shape{};
    auto x = g.input("x", t, dims);
    auto c = g.input("c", dtype::boolean, {});
    kiln::graph::value r = x;
    switch (info.cls) {
      case op_class::cast:
        r = g.cast(x, t == dtype::f32 ? dtype::i32 : dtype::f32);
        break;
      case op_class::select:
        r = g.select(c, x, x);
        break;
      case op_class::reduction:
        r = g.reduce(o, x, {0});
        break;
      case op_class::index_reduction:
        r = g.index_reduce(o, x, 0);
        break;
      case op_class::contraction:  // [2] x [2]: a dot product; [1, 1, 2] by a 1-cell kernel
        if (ir::is_convolution(o)) {
          auto cell = g.reshape(g.slice(x, {0}, {1}, {0}, {1}), {1, 1, 1});
          auto row = g.reshape(x, {1, 1, 2});
          r = o == op::conv ? g.conv(row, cell, kiln::ir::conv_window{})
                            : g.conv_transpose(row, cell, kiln::ir::conv_window{});
        } else {
          r = g.matmul(x, x);
        }
        break;
      case op_class::view:
        if (o == op::transpose) r = g.transpose(g.reshape(x, {1, 2}));
        if (o == op::reshape) r = g.reshape(x, {2, 1});
        if (o == op::expand) r = g.expand(x, {3, 2});
        if (o == op::slice) r = g.slice(x, {1}, {0}, {0}, {-1});
        if (o == op::gather) r = g.gather(x, g.cast(x, dtype::i32), 0);
        if (o == op::shift) r = g.pad(x, {1, -1}, "reflect");
        if (o == op::gather_elements) r = g.gather_elements(x, g.cast(x, dtype::i32), 0);
        break;
      default:
        r = info.arity == 1   ? g.apply(o, {x})
            : info.arity == 2 ? g.apply(o, {x, x})
                              : g.apply(o, {x, x, x});
    }
    g.output("r", r);
    rv one = t == dtype::f32 ? rv{1.5f, 1.5} : rv{0, 0, t == dtype::i32 ? 3 : 1};
    std::vector<std::vector<rv>> in = {std::vector<rv>(reduction ? 2 : 1, one), {rv{0, 0, 1}}};
    bool before = ::testing::Test::HasNonfatalFailure();
    std::int64_t no_symbols[1] = {};
    evaluate(g.ir(), in, no_symbols);
    EXPECT_EQ(::testing::Test::HasNonfatalFailure(), before) << "the evaluator has no case";
  }
}
