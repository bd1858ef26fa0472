// Constant folding: evaluates an op on scalar constants with kiln's semantics (constexpr).
#pragma once

#include <optional>

#include "kiln/ir/graph.hpp"

namespace kiln::compiler {

// The folded value, or nullopt for ops left to run time (the transcendental functions, whose
// results would depend on the compiler's libm; the kernels compute them).
constexpr std::optional<scalar> fold(ir::op o, dtype result, const scalar* v) {
  using ir::op;
  const scalar& a = v[0];
  dtype t = a.type;
  bool fl = is_floating(t);
  // Narrow floats: f32 precision, as the kernels compute (rounded where stored).
  auto num = [&](double x) { return scalar::computed(result, x); };
  // Integers: compute in 64-bit two's complement, then wrap into the type.
  auto integer = [&](std::uint64_t x) {
    return scalar::of_integer(result, static_cast<std::int64_t>(x));
  };
  auto ua = static_cast<std::uint64_t>(a.i);
  auto ub = ir::info(o).arity > 1 ? static_cast<std::uint64_t>(v[1].i) : 0;
  double fa = a.f, fb = ir::info(o).arity > 1 ? v[1].f : 0;
  auto boolean = [](bool x) { return scalar{dtype::boolean, 0, x}; };
  // Integer order: a u64 above 2^63 is held as a negative int64 (its bits).
  const bool is_unsigned = is_unsigned_integer(t);
  auto below = [&](const scalar& x, const scalar& y) {
    return is_unsigned ? static_cast<std::uint64_t>(x.i) < static_cast<std::uint64_t>(y.i)
                       : x.i < y.i;
  };
  switch (o) {
    case op::add:
      return fl ? num(fa + fb) : integer(ua + ub);
    case op::sub:
      return fl ? num(fa - fb) : integer(ua - ub);
    case op::mul:
      return fl ? num(fa * fb) : integer(ua * ub);
    case op::div:
      if (fl) return num(fa / fb);
      if (v[1].i == 0) return integer(0);  // kiln defines x / 0 == 0 for integers
      if (is_unsigned_integer(t)) return integer(ua / ub);
      if (v[1].i == -1) return integer(0 - ua);  // avoids INT64_MIN / -1 overflow
      return integer(static_cast<std::uint64_t>(a.i / v[1].i));
    case op::neg:
      return fl ? num(-fa) : integer(0 - ua);
    case op::abs:
      if (fl) return num(fa == 0 ? 0.0 : fa < 0 ? -fa : fa);
      return integer(a.i < 0 && !is_unsigned ? 0 - ua : ua);
    case op::min:
      // As the kernels: x < y ? x : y (so min(-0, 0) is 0), NaN in either operand propagates.
      if (fl) return num(fa != fa || fb != fb ? fa + fb : (fa < fb ? fa : fb));
      return !below(v[1], a) ? a : v[1];
    case op::max:
      if (fl) return num(fa != fa || fb != fb ? fa + fb : (fb < fa ? fa : fb));
      return !below(a, v[1]) ? a : v[1];
    case op::reciprocal:  // one division, as the kernels do (double then f32 rounds correctly)
      return num(1.0 / fa);
    case op::sign:
      if (fl) return num(fa > 0 ? 1.0 : fa < 0 ? -1.0 : fa);  // keeps NaN and the zero's sign
      return scalar::of_integer(t, a.i == 0 ? 0 : below(a, scalar{t, 0, 0}) ? -1 : 1);
    case op::mod:  // integers only: float remainders are left to the kernels (exact there)
    case op::fmod: {
      if (fl) return std::nullopt;
      if (v[1].i == 0) return integer(0);  // as division: x % 0 == 0
      std::int64_t r = 0;
      if (is_unsigned_integer(t)) {
        r = static_cast<std::int64_t>(ua % ub);
      } else {
        r = v[1].i == -1 ? 0 : a.i % v[1].i;  // truncated; MIN % -1 is 0
        if (o == op::mod && r != 0 && (r < 0) != (v[1].i < 0)) r += v[1].i;
      }
      return integer(static_cast<std::uint64_t>(r));
    }
    case op::clip: {
      if (fl) {  // min(max(x, lo), hi), NaN in any operand propagates
        double lo = v[1].f, hi = v[2].f;
        if (fa != fa || lo != lo || hi != hi) return num(fa + lo + hi);
        double m = lo < fa ? fa : lo;  // max(x, lo), then min(m, hi), as the kernels order them
        return num(m < hi ? m : hi);
      }
      const scalar& m = !below(v[1], a) ? v[1] : a;
      return !below(m, v[2]) ? v[2] : m;
    }
    case op::bitwise_and:
      return integer(ua & ub);
    case op::bitwise_or:
      return integer(ua | ub);
    case op::bitwise_xor:
      return integer(ua ^ ub);
    case op::bitwise_not:
      return integer(~ua);
    case op::shift_left:
    case op::shift_right: {
      // The count as an unsigned value of the type's width; a count of the width or more (or a
      // negative one) shifts every bit out, as numpy defines it.
      int bits = size_in_bytes(t) * 8;
      std::uint64_t count = bits == 64 ? ub : ub & ((std::uint64_t{1} << bits) - 1);
      if (o == op::shift_left) return integer(count < std::uint64_t(bits) ? ua << count : 0);
      if (is_unsigned_integer(t)) return integer(count < std::uint64_t(bits) ? ua >> count : 0);
      if (count >= std::uint64_t(bits)) return integer(a.i < 0 ? ~std::uint64_t{0} : 0);
      return integer(static_cast<std::uint64_t>(a.i >> count));
    }
    case op::isnan:
      return boolean(fa != fa);
    case op::isinf:
      return boolean(fa - fa != fa - fa && fa == fa);
    case op::relu:
      if (fl) return num(fa < 0 ? 0.0 : fa);  // as the kernels: NaN and -0 stay
      return below(scalar{t, 0, 0}, a) ? a : scalar::of_integer(t, 0);
    case op::eq:
      return boolean(fl ? fa == fb : a.i == v[1].i);
    case op::ne:
      return boolean(fl ? fa != fb : a.i != v[1].i);
    case op::lt:
      return boolean(fl ? fa < fb : below(a, v[1]));
    case op::le:
      return boolean(fl ? fa <= fb : !below(v[1], a));
    case op::gt:
      return boolean(fl ? fa > fb : below(v[1], a));
    case op::ge:
      return boolean(fl ? fa >= fb : !below(a, v[1]));
    case op::logical_and:
      return boolean(a.i && v[1].i);
    case op::logical_or:
      return boolean(a.i || v[1].i);
    case op::logical_not:
      return boolean(!a.i);
    case op::select:
      return a.i ? v[1] : v[2];
    case op::cast:
      return a.to(result);
    default:
      return std::nullopt;
  }
}

}  // namespace kiln::compiler
