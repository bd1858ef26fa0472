// The tests' own scalar reference: numpy broadcasting, narrow-float rounding and tolerance
// checks written independently of kiln (only kiln's storage structs are used, as bit holders).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "kiln/core/dtype.hpp"

namespace ref {

using dims_t = std::vector<std::int64_t>;

inline std::int64_t count(const dims_t& d) {
  std::int64_t n = 1;
  for (auto v : d) n *= v;
  return n;
}

// numpy broadcasting of several shapes (throws std::invalid_argument when they do not broadcast).
inline dims_t broadcast(const std::vector<dims_t>& shapes) {
  std::size_t rank = 0;
  for (auto& s : shapes) rank = std::max(rank, s.size());
  dims_t out(rank, 1);
  for (auto& s : shapes)
    for (std::size_t i = 0; i < s.size(); ++i) {
      auto& o = out[rank - s.size() + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o != 1) throw std::invalid_argument("shapes do not broadcast");
      o = s[i];
    }
  return out;
}

// Flat index into a tensor of extents `d` for the multi-index `idx` of a (larger) output.
inline std::int64_t source_index(const dims_t& d, const dims_t& idx) {
  std::int64_t flat = 0;
  std::size_t off = idx.size() - d.size();
  for (std::size_t i = 0; i < d.size(); ++i) flat = flat * d[i] + (d[i] == 1 ? 0 : idx[off + i]);
  return flat;
}

// ---- narrow floats, decoded and rounded by brute force over every value of the format ----

template <class T>
struct format_bits {
  static constexpr int exp = std::is_same_v<T, kiln::float16>       ? 5
                             : std::is_same_v<T, kiln::bfloat16>    ? 8
                             : std::is_same_v<T, kiln::float8_e4m3> ? 4
                                                                    : 5;
  static constexpr int man = std::is_same_v<T, kiln::float16>       ? 10
                             : std::is_same_v<T, kiln::bfloat16>    ? 7
                             : std::is_same_v<T, kiln::float8_e4m3> ? 3
                                                                    : 2;
  static constexpr bool fn = std::is_same_v<T, kiln::float8_e4m3>;  // no infinities
  static constexpr int total = 1 + exp + man;
};

// The value of bit pattern b, from the textbook formula.
template <class T>
double decode(std::uint32_t b) {
  using F = format_bits<T>;
  int bias = (1 << (F::exp - 1)) - 1;
  bool neg = (b >> (F::exp + F::man)) & 1;
  std::uint32_t e = (b >> F::man) & ((1u << F::exp) - 1), m = b & ((1u << F::man) - 1);
  double s = neg ? -1 : 1;
  std::uint32_t all = (1u << F::exp) - 1;
  if (!F::fn && e == all) return m ? NAN : s * INFINITY;
  if (F::fn && e == all && m == (1u << F::man) - 1) return NAN;
  if (e == 0) return s * std::ldexp(double(m), 1 - bias - F::man);
  return s * std::ldexp(double(m + (1u << F::man)), int(e) - bias - F::man);
}

// Every finite non-negative value with its bits, sorted.
template <class T>
const std::vector<std::pair<double, std::uint32_t>>& positive_values() {
  static const auto table = [] {
    std::vector<std::pair<double, std::uint32_t>> t;
    using F = format_bits<T>;
    for (std::uint32_t b = 0; b < (1u << (F::total - 1)); ++b) {
      double v = decode<T>(b);
      if (std::isfinite(v)) t.push_back({v, b});
    }
    std::sort(t.begin(), t.end());
    return t;
  }();
  return table;
}

// Round to nearest, ties to the even bit pattern; beyond the largest value (infinity included):
// infinity for f16 and bf16, the largest value for fp8 (ONNX saturation), NaN stays NaN.
template <class T>
double round_to(double x) {
  if (std::isnan(x)) return NAN;
  using F = format_bits<T>;
  bool saturate = std::is_same_v<T, kiln::float8_e4m3> || std::is_same_v<T, kiln::float8_e5m2>;
  double a = std::fabs(x), s = std::signbit(x) ? -1 : 1;
  const auto& t = positive_values<T>();
  double top = t.back().first;
  if (std::isinf(a)) return F::fn || saturate ? s * top : s * INFINITY;
  // Halfway above the top: the next (virtual) step has the top's spacing.
  double step = top - t[t.size() - 2].first;
  if (a >= top + step / 2) return saturate ? s * top : s * INFINITY;
  if (a >= top) return s * top;
  auto it = std::lower_bound(t.begin(), t.end(), std::make_pair(a, 0u));
  if (it->first == a) return s * a;
  auto lo = it - 1;
  double dl = a - lo->first, dh = it->first - a;
  if (dl < dh || (dl == dh && (lo->second & 1) == 0)) return s * lo->first;
  return s * it->first;
}

// ---- test data and comparison ----

template <class T>
T from_double(double v) {
  if constexpr (std::is_class_v<T>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

template <class T>
double to_double(T v) {
  if constexpr (std::is_class_v<T>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

// Deterministic data in [lo, hi): integers for integer types, spread values for floats.
template <class T>
std::vector<T> random_data(std::int64_t n, double lo, double hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<T> v(static_cast<std::size_t>(n));
  if constexpr (std::is_same_v<T, bool>) {
    std::bernoulli_distribution d(0.5);
    for (auto&& x : v) x = d(gen);
  } else if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<std::int64_t> d(static_cast<std::int64_t>(lo),
                                                  static_cast<std::int64_t>(hi) - 1);
    for (auto& x : v) x = static_cast<T>(d(gen));
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& x : v) x = from_double<T>(d(gen));
  }
  return v;
}

struct tolerance {
  double rel = 0, abs = 0;
};

// Expects got == want element by element, within tol for floats (NaN matches NaN, inf matches
// the same inf); reports the first few differences with their index.
template <class T>
void expect_near(const std::vector<T>& got, const std::vector<double>& want, tolerance tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < got.size() && reported < 5; ++i) {
    double g = to_double(got[i]), w = want[i];
    bool ok = std::isnan(w)   ? std::isnan(g)
              : std::isinf(w) ? g == w
                              : std::fabs(g - w) <= tol.abs + tol.rel * std::fabs(w);
    if (!ok) {
      ++reported;
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", expected " << w;
    }
  }
}

// Values as the bytes of dtype t (narrow floats rounded from f32), and back: how the tests that
// build run-time graphs pass data of any dtype (one spare byte: bool's empty data has an address).
inline std::vector<unsigned char> bytes_of(kiln::dtype t, const std::vector<double>& v) {
  std::vector<unsigned char> b(v.size() * kiln::size_in_bytes(t) + 1);
  for (std::size_t i = 0; i < v.size(); ++i)
    kiln::visit_dtype(t, [&]<kiln::dtype D>() {
      using T = kiln::storage_t<D>;
      T x;
      if constexpr (std::is_arithmetic_v<T>)
        x = static_cast<T>(v[i]);
      else
        x = T(static_cast<float>(v[i]));
      std::memcpy(b.data() + i * sizeof(T), &x, sizeof(T));
    });
  return b;
}
inline double value_at(const std::vector<unsigned char>& b, kiln::dtype t, std::size_t i) {
  double r = 0;
  kiln::visit_dtype(t, [&]<kiln::dtype D>() {
    using T = kiln::storage_t<D>;
    T x;
    std::memcpy(&x, b.data() + i * sizeof(T), sizeof(T));
    if constexpr (std::is_arithmetic_v<T>)
      r = static_cast<double>(x);
    else
      r = static_cast<double>(static_cast<float>(x));
  });
  return r;
}

}  // namespace ref
