// End-to-end test helper: runs a kiln function on generated data and checks every element
// against the scalar reference (a plain C++ lambda evaluated with the tests' own broadcasting).
#pragma once

#include <memory>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>

#include "reference.hpp"

namespace ref {

// Storage for test data; bool gets its own buffer because std::vector<bool> has no data().
template <class T>
struct buffer {
  std::unique_ptr<T[]> ptr;
  std::size_t n = 0;
  explicit buffer(std::size_t count = 0) : ptr(new T[count > 0 ? count : 1]()), n(count) {}
  explicit buffer(const std::vector<T>& v) : buffer(v.size()) {
    std::copy(v.begin(), v.end(), ptr.get());
  }
  T* data() const { return ptr.get(); }
  std::size_t size() const { return n; }
  T& operator[](std::size_t i) const { return ptr[i]; }
  std::vector<T> to_vector() const { return std::vector<T>(ptr.get(), ptr.get() + n); }
};
template <>
inline buffer<bool>::buffer(const std::vector<bool>& v) : buffer(v.size()) {
  for (std::size_t i = 0; i < v.size(); ++i) ptr[i] = v[i];
}

template <class T>
struct arg {
  buffer<T> data;
  dims_t dims;
};

template <class T>
arg<T> make_arg(const dims_t& dims, double lo, double hi, unsigned seed) {
  return {buffer<T>(random_data<T>(count(dims), lo, hi, seed)), dims};
}

inline kiln::shape to_shape(const dims_t& d) {
  kiln::shape s;
  s.rank = static_cast<int>(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) s.dims[i] = d[i];
  return s;
}

template <class T>
kiln::tensor_view<T> view_of(const buffer<T>& b, const dims_t& d) {
  return {b.data(), to_shape(d), false};
}

inline std::string dims_text(const dims_t& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i) s += ',';  // two appends: GCC 12 misreads "," + to_string(...) (-Wrestrict)
    s += std::to_string(d[i]);
  }
  return s + "]";
}

// The reference result: scalar_fn applied at every index of the broadcast shape.
template <class Fn, class... T>
std::vector<double> evaluate(Fn scalar_fn, const dims_t& out, const arg<T>&... args) {
  std::int64_t n = count(out);
  std::vector<double> r(static_cast<std::size_t>(n));
  dims_t idx(out.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rest = i;
    for (std::size_t k = out.size(); k-- > 0;) {
      idx[k] = rest % out[k];
      rest /= out[k];
    }
    r[i] = to_double(scalar_fn(args.data[source_index(args.dims, idx)]...));
  }
  return r;
}

// Runs f (one result of element type R) and compares with the reference.
template <class R, class F, class Fn, class... T>
void check(const F& f, Fn scalar_fn, tolerance tol, const arg<T>&... args) {
  dims_t out = broadcast({args.dims...});
  buffer<R> result(static_cast<std::size_t>(count(out)));
  f(view_of(args.data, args.dims)..., kiln::into(view_of(result, out)));
  std::string what = "output " + dims_text(out);
  ((what += " arg " + dims_text(args.dims)), ...);
  auto want = evaluate(scalar_fn, out, args...);
  expect_near(result.to_vector(), want, tol, what);
  // The same plan through the run-time door: the CPU's tiled interpreter.
  buffer<R> interpreted(static_cast<std::size_t>(count(out)));
  kiln::compile(f).run({kiln::tensor_ref(view_of(args.data, args.dims))...},
                       {kiln::tensor_ref(view_of(interpreted, out))}, kiln::device::cpu());
  expect_near(interpreted.to_vector(), want, tol, what + " (cpu interpreter)");
}

// The sizes every one-dimensional expression runs at: empty, one, below, at and past the SIMD
// width, large, and not a multiple of any SIMD width.
inline const std::vector<std::int64_t> sizes = {0, 1, 7, 16, 1000, 1027, 70001};

inline constexpr tolerance exact{0, 0};
inline constexpr tolerance arith{1e-6, 1e-30};  // contraction into FMA may differ in the last bit
inline constexpr tolerance approx{2e-6, 1e-7};  // vectorized transcendental functions
// Formulas that cancel (1 + erf(x) near -1, log(1 + e) near 0): one ulp of the operand becomes a
// large relative error of a result near zero, so the bound is absolute there.
inline constexpr tolerance cancelling{2e-6, 1e-6};
// Ten chained approximations: each step's ulp is amplified by the next step's slope (up to 1.5).
inline constexpr tolerance chained{1e-5, 1e-5};

// What fn() throws as a kiln::error's text, or "no error".
template <class Fn>
std::string error_message(Fn fn) {
  try {
    fn();
  } catch (const kiln::error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace ref
