// Shared by the contraction suites (matmul, convolution): operands as doubles, their float
// copies, and the rounding bound of K-term dot products against a double reference.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "e2e.hpp"

namespace ref {

// Row-major values with their dims.
struct host_tensor {
  dims_t dims;
  std::vector<double> v;
};

// Values in [-1, 1), exactly representable in f32.
inline host_tensor random_tensor(const dims_t& dims, unsigned seed) {
  auto f = random_data<float>(count(dims), -1, 1, seed);
  return {dims, std::vector<double>(f.begin(), f.end())};
}

inline std::vector<float> floats(const host_tensor& t) { return {t.v.begin(), t.v.end()}; }

inline kiln::tensor_view<float> view_of(std::vector<float>& v, const dims_t& d) {
  return {v.data(), to_shape(d), false};
}

// |got - want| <= (k + 2) u sum |a b| + 2 u |want|, u f32's unit roundoff: the rounding of any
// order of k products and their sums (magnitude: each element's sum of |a b|).
inline void expect_within_bound(const std::vector<float>& got, const std::vector<double>& want,
                                const std::vector<double>& magnitude, std::int64_t k,
                                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double u = std::ldexp(1.0, -24);
  int reported = 0;
  for (std::size_t i = 0; i < got.size() && reported < 5; ++i) {
    double bound = double(k + 2) * u * magnitude[i] + 2 * u * std::fabs(want[i]) + 1e-30;
    if (!(std::fabs(got[i] - want[i]) <= bound)) {
      ++reported;
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i]
                    << " within " << bound;
    }
  }
}

}  // namespace ref
