// kiln::graph's random numbers: Threefry-2x32 (Salmon, Moraes, Dror and Shaw, "Parallel random
// numbers: as easy as 1, 2, 3", SC 2011) built from u32 adds, rotations and xors, keyed by the
// seed and counted by each element's position, and the uniform, normal and Bernoulli draws made
// from its words. Included by graph.hpp where the runtime's bodies are compiled
// (core/runtime_boundary.hpp).
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>

#include "kiln/graph/graph.hpp"

#if KILN_RUNTIME_BODY
namespace kiln {

KILN_RUNTIME_API std::pair<graph::value, graph::value> graph::threefry(value c0, value c1,
                                                                       std::uint32_t k0,
                                                                       std::uint32_t k1) {
  for (value v : {c0, c1})
    if (type_of(v) != dtype::u32)
      throw error(errc::dtype_mismatch, "threefry",
                  "the counter words are u32, got " + std::string(kiln::name(type_of(v))));
  // The key schedule: the two key words and their parity with the constant 0x1BD11BDA; every
  // four rounds, two of the three are added in turn, the second with the injection's number.
  const std::uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  constexpr int rotation[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  auto u32 = [&](std::uint32_t v) { return constant(std::int64_t{v}, dtype::u32); };
  auto rotl = [&](value x, int r) {
    return bitwise_or(shift_left(x, u32(static_cast<std::uint32_t>(r))),
                      shift_right(x, u32(static_cast<std::uint32_t>(32 - r))));
  };
  value x0 = add(c0, u32(ks[0])), x1 = add(c1, u32(ks[1]));
  for (int round = 0; round < 20; ++round) {
    x0 = add(x0, x1);
    x1 = bitwise_xor(rotl(x1, rotation[round % 8]), x0);
    if (round % 4 == 3) {
      const int s = (round + 1) / 4;
      x0 = add(x0, u32(ks[s % 3]));
      x1 = add(x1, u32(ks[(s + 1) % 3] + static_cast<std::uint32_t>(s)));
    }
  }
  return {x0, x1};
}

namespace detail {

// Each element's row-major position among static extents `dims` as a u32 tensor of them: the
// sum of a position vector per axis times its stride (one small constant per axis, broadcast).
inline graph::value element_positions(graph& g, std::span<const std::int64_t> dims,
                                      std::string_view op) {
  std::int64_t count = 1;
  for (std::int64_t d : dims) {
    if (d < 0)
      throw error(errc::invalid_argument, std::string(op),
                  "extents must be static and non-negative, got " + std::to_string(d));
    if (d != 0 && count > (std::int64_t{1} << 32) / d)
      throw error(errc::unsupported, std::string(op),
                  "more than 2^32 elements (each element's position is a u32 counter)");
    count *= d;
  }
  // Rank 0: the one element at 0. Else the axes' position vectors, broadcast together.
  graph::value at = g.constant(std::int64_t{0}, dtype::u32);
  std::int64_t stride = 1;
  for (std::size_t a = dims.size(); a-- > 0;) {
    std::vector<std::int64_t> axis_shape(dims.size(), 1);
    axis_shape[a] = dims[a];
    const graph::value along = g.reshape(g.range(0, double(dims[a]), 1, dtype::u32), axis_shape);
    at = g.add(at, stride == 1 ? along : g.mul(along, g.constant(stride, dtype::u32)));
    stride *= dims[a];
  }
  return at;
}

// A u32 word's top 24 bits as a float of [0, 1) in dtype t (exact in f32), plus `offset` ulps
// of 2^-24 (1 gives (0, 1]).
inline graph::value unit_interval(graph& g, graph::value word, dtype t, int offset) {
  graph::value top = g.shift_right(word, g.constant(std::int64_t{8}, dtype::u32));
  graph::value f = g.cast(top, t);
  if (offset) f = g.add(f, g.constant(double(offset), t));
  return g.mul(f, g.constant(0x1p-24, t));
}

inline void check_float(std::string_view op, dtype t) {
  if (t != dtype::f32 && t != dtype::f64 && t != dtype::f16 && t != dtype::bf16)
    throw error(errc::dtype_mismatch, std::string(op),
                "draws floats (f32, f64, f16, bf16), not " + std::string(kiln::name(t)));
}

}  // namespace detail

KILN_RUNTIME_API graph::value graph::random_uniform(std::span<const std::int64_t> dims, double low,
                                                    double high, std::uint64_t seed, dtype t) {
  detail::check_float("random_uniform", t);
  const dtype c = t == dtype::f64 ? dtype::f64 : dtype::f32;  // narrow floats compute in f32
  const auto k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  const value at = detail::element_positions(*this, dims, "random_uniform");
  const value u = detail::unit_interval(
      *this, threefry(at, constant(std::int64_t{0}, dtype::u32), k0, k1).first, c, 0);
  const value v = add(constant(low, c), mul(constant(high - low, c), u));
  return c == t ? v : cast(v, t);
}

KILN_RUNTIME_API graph::value graph::random_normal(std::span<const std::int64_t> dims, double mean,
                                                   double scale, std::uint64_t seed, dtype t) {
  detail::check_float("random_normal", t);
  const dtype c = t == dtype::f64 ? dtype::f64 : dtype::f32;
  const auto k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  const value at = detail::element_positions(*this, dims, "random_normal");
  const auto [w0, w1] = threefry(at, constant(std::int64_t{0}, dtype::u32), k0, k1);
  // Box-Muller: sqrt(-2 ln u1) cos(2 pi u2), u1 in (0, 1] so that its log is finite.
  const value u1 = detail::unit_interval(*this, w0, c, 1);
  const value u2 = detail::unit_interval(*this, w1, c, 0);
  const value radius = sqrt(mul(constant(-2.0, c), log(u1)));
  const value z = mul(radius, cos(mul(constant(2 * std::numbers::pi, c), u2)));
  const value v = add(constant(mean, c), mul(constant(scale, c), z));
  return c == t ? v : cast(v, t);
}

KILN_RUNTIME_API graph::value graph::bernoulli(value p, std::uint64_t seed, dtype t) {
  const std::int32_t id = id_of(p, "bernoulli", 1);
  const dtype pt = b_.get().nodes[id].type;
  detail::check_float("bernoulli", pt);
  const shape d = dims_of(p);
  if (!d.is_static())
    throw error(errc::unsupported, "bernoulli",
                "p's extents " + to_string(d) + " are not static (each position is a counter)");
  const std::vector<std::int64_t> dims(d.dims.begin(), d.dims.begin() + d.rank);
  const value u = random_uniform(dims, 0, 1, seed, pt == dtype::f64 ? dtype::f64 : dtype::f32);
  const value below = lt(u, pt == dtype::f64 || pt == dtype::f32 ? p : cast(p, dtype::f32));
  return cast(below, t);
}

}  // namespace kiln
#endif  // KILN_RUNTIME_BODY
