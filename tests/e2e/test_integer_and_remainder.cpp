// Remainders (mod as Python, fmod as C), bitwise ops and shifts, clip and float classification,
// on every integer dtype and on floats, through both doors: exact results against C++'s own
// operators and std::fmod, and numbers worked out by hand at the edges.
#include <cmath>
#include <cstring>
#include <random>

#include <kiln/executable.hpp>

#include "../support/e2e.hpp"
#include "../support/subnormals.hpp"

using namespace kiln;

namespace {

bool same_float(float got, float want) {
  return std::isnan(want) ? std::isnan(got)
                          : got == want && std::signbit(got) == std::signbit(want);
}

// Pairs of floats over the whole exponent range (every bit pattern class: subnormals, zeros,
// infinities, NaN) and some with small quotients.
std::pair<std::vector<float>, std::vector<float>> float_pairs(std::size_t n) {
  std::mt19937 gen(42);
  std::vector<float> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t a = gen(), b = gen();
    if (i % 3 == 0) b = (a & 0xFF800000u) | (b & 0x007FFFFFu);  // same binade: small quotient
    if (i % 7 == 0) b = (b & 0x807FFFFFu) | ((a & 0x7F800000u) - (i % 5 << 23));
    std::memcpy(&x[i], &a, 4);
    std::memcpy(&y[i], &b, 4);
  }
  const float special[][2] = {{5.f, 3.f},       {-5.f, 3.f},      {5.f, -3.f},     {-5.f, -3.f},
                              {6.f, 3.f},       {-6.f, 3.f},      {6.f, -3.f},     {0.f, 2.f},
                              {-0.f, 2.f},      {1.f, 0.f},       {INFINITY, 2.f}, {2.f, INFINITY},
                              {-2.f, INFINITY}, {2.f, -INFINITY}, {NAN, 1.f},      {1.f, NAN},
                              {3e38f, 1e-45f},  {1e-45f, 3e38f},  {-7.5f, 2.f},    {1e30f, 3.f}};
  for (std::size_t i = 0; i < std::size(special); ++i) {
    x[i] = special[i][0];
    y[i] = special[i][1];
  }
  return {x, y};
}

// numpy's float mod from the remainder r = fmod(x, y): plus y where the signs differ; a zero
// takes y's sign.
float mod_from_remainder(float r, float y) {
  if (r != 0 && (r < 0) != (y < 0)) r += y;
  if (r == 0) r = std::copysign(0.f, y);
  return r;
}
float python_mod(float x, float y) { return mod_from_remainder(std::fmod(x, y), y); }
// python_mod on a device that flushes subnormals: there a subnormal fmod is ±0 before y is added.
float python_mod_flushed(float x, float y) {
  return mod_from_remainder(ref::flushed(std::fmod(x, y)), y);
}

}  // namespace

TEST(Remainder, FloatExactlyAsC) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<f32, dyn>>([](auto x, auto y) {
    return std::tuple{fmod(x, y), mod(x, y)};
  });
  auto [x, y] = float_pairs(20011);
  std::vector<float> r(x.size()), m(x.size());
  f(x, y, into(r, m));
  int failures = 0;
  // On a device that flushes subnormals, operands may be read as ±0 and subnormal results be ±0.
  const bool flush = ref::device_flushes_subnormals();
  auto as_flushed = [&](float got, float want, float (*g)(float, float), std::size_t i) {
    return flush && (ref::flushed_result(got, want) ||
                     same_float(got, g(ref::flushed(x[i]), ref::flushed(y[i]))));
  };
  for (std::size_t i = 0; i < x.size() && failures < 5; ++i) {
    float want = std::fmod(x[i], y[i]);
    auto c_fmod = [](float a, float b) { return std::fmod(a, b); };
    if (!same_float(r[i], want) && !as_flushed(r[i], want, c_fmod, i) && ++failures)
      ADD_FAILURE() << "fmod(" << x[i] << ", " << y[i] << ") = " << r[i] << ", expected " << want;
    float want_mod = python_mod(x[i], y[i]);
    if (!same_float(m[i], want_mod) && !as_flushed(m[i], want_mod, python_mod_flushed, i) &&
        ++failures)
      ADD_FAILURE() << "mod(" << x[i] << ", " << y[i] << ") = " << m[i] << ", expected "
                    << want_mod;
  }
  // By hand: fmod takes the dividend's sign, mod the divisor's.
  EXPECT_EQ(r[1], -2.f);                         // fmod(-5, 3)
  EXPECT_EQ(m[1], 1.f);                          // mod(-5, 3)
  EXPECT_EQ(r[2], 2.f);                          // fmod(5, -3)
  EXPECT_EQ(m[2], -1.f);                         // mod(5, -3)
  EXPECT_TRUE(std::signbit(m[6]) && m[6] == 0);  // mod(6, -3) = -0
  EXPECT_EQ(m[12], INFINITY);                    // mod(-2, inf), as numpy
}

TEST(Remainder, IntegersByHand) {
  constexpr auto f = fn<tensor<i32, dyn>, tensor<i32, dyn>>([](auto x, auto y) {
    return std::tuple{mod(x, y), fmod(x, y)};
  });
  std::vector<i32> x = {7, -7, 7, -7, 6, 5, INT32_MIN, INT32_MIN, 0};
  std::vector<i32> y = {3, 3, -3, -3, 3, 0, -1, 7, -4};
  std::vector<i32> m(x.size()), r(x.size());
  f(x, y, into(m, r));
  EXPECT_EQ(m, (std::vector<i32>{1, 2, -2, -1, 0, 0, 0, 5, 0}));
  EXPECT_EQ(r, (std::vector<i32>{1, -1, 1, -1, 0, 0, 0, -2, 0}));
}

template <class T>
void check_integer_ops() {
  SCOPED_TRACE(std::string(name(dtype_of<T>)));
  constexpr auto f = fn<tensor<T, dyn>, tensor<T, dyn>>([](auto x, auto y) {
    return std::tuple{mod(x, y),        fmod(x, y),        bitwise_and(x, y),
                      bitwise_or(x, y), bitwise_xor(x, y), bitwise_not(x),
                      shift_left(x, y), shift_right(x, y), clip(x, y, T(50))};
  });
  constexpr int bits = sizeof(T) * 8;
  // Wide enough for every operand here (u64's own type for u64); results wrap into T below.
  using W = std::conditional_t<std::is_same_v<T, u64>, std::uint64_t, std::int64_t>;
  std::mt19937 gen(7);
  std::int64_t n = 1031;
  std::vector<T> x(n), y(n);
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<T>(gen());
    // Counts and divisors: small, around the width, negative, zero.
    y[i] = i % 2 ? static_cast<T>(static_cast<int>(gen() % (2 * bits + 8)) - 4)
                 : static_cast<T>(gen());
  }
  x[0] = std::numeric_limits<T>::min();
  y[0] = static_cast<T>(-1);
  std::vector<std::vector<T>> out(9, std::vector<T>(n));
  f(x, y, into(out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7], out[8]));
  for (std::int64_t i = 0; i < n; ++i) {
    W a = x[i], b = y[i];
    W trunc = b == 0 ? 0 : (std::is_signed_v<T> && b == -1) ? 0 : a % b;
    W py = trunc != 0 && (trunc < 0) != (b < 0) ? trunc + b : trunc;
    using U = std::make_unsigned_t<T>;
    auto count = static_cast<std::uint64_t>(static_cast<U>(y[i]));
    T left = count >= bits ? T(0) : static_cast<T>(static_cast<U>(static_cast<U>(x[i]) << count));
    T right = count >= bits ? T(x[i] < 0 ? -1 : 0) : static_cast<T>(x[i] >> count);
    T lo_clipped = std::max(x[i], y[i]);
    T want[] = {static_cast<T>(py),
                static_cast<T>(trunc),
                T(x[i] & y[i]),
                T(x[i] | y[i]),
                T(x[i] ^ y[i]),
                T(~x[i]),
                left,
                right,
                std::min(lo_clipped, T(50))};
    for (int k = 0; k < 9; ++k)
      ASSERT_EQ(W(out[k][i]), W(want[k])) << "result " << k << " of " << W(x[i]) << ", " << b;
  }
}

TEST(IntegerOps, EveryIntegerType) {
  check_integer_ops<i8>();
  check_integer_ops<i16>();
  check_integer_ops<i32>();
  check_integer_ops<i64>();
  check_integer_ops<u8>();
  check_integer_ops<u16>();
  check_integer_ops<u64>();
  check_integer_ops<u32>();
}

TEST(IntegerOps, ShiftsByHand) {
  constexpr auto f = fn<tensor<u8, dyn>, tensor<u8, dyn>>([](auto x, auto n) {
    return std::tuple{shift_left(x, n), shift_right(x, n)};
  });
  std::vector<u8> x = {1, 0x81, 0xFF, 16}, n = {7, 1, 8, 200};
  std::vector<u8> l(4), r(4);
  f(x, n, into(l, r));
  EXPECT_EQ(l, (std::vector<u8>{0x80, 0x02, 0, 0}));
  EXPECT_EQ(r, (std::vector<u8>{0, 0x40, 0, 0}));
  constexpr auto g = fn<tensor<i8, dyn>>([](auto x) { return shift_right(x, i8(9)); });
  std::vector<i8> s = {-128, -1, 5, 127}, o(4);
  g(s, into(o));
  EXPECT_EQ(o, (std::vector<i8>{-1, -1, 0, 0}));
}

TEST(Clip, FloatEdges) {
  constexpr auto f = fn<tensor<f32, dyn>>([](auto x) { return clip(x, -1.f, 6.f); });
  constexpr auto swapped = fn<tensor<f32, dyn>>([](auto x) { return clip(x, 6.f, -1.f); });
  std::vector<float> x = {-3.f, -1.f, 0.5f, 6.f, 9.f, NAN, INFINITY, -INFINITY}, r(8), s(8);
  f(x, into(r));
  swapped(x, into(s));
  std::vector<float> want = {-1.f, -1.f, 0.5f, 6.f, 6.f, NAN, 6.f, -1.f};
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(same_float(r[i], want[i])) << i << ": " << r[i];
    // lo > hi gives hi everywhere (min is applied last, as numpy and ONNX do).
    EXPECT_TRUE(same_float(s[i], std::isnan(x[i]) ? NAN : -1.f)) << i << ": " << s[i];
  }
}

TEST(Classify, IsNanIsInf) {
  constexpr auto f = fn<tensor<f32, dyn>, tensor<f16, dyn>>([](auto x, auto h) {
    return std::tuple{isnan(x), isinf(x), isnan(h) || isinf(h)};
  });
  std::vector<float> x = {0.f, -0.f, 1e-45f, 3e38f, INFINITY, -INFINITY, NAN, -NAN};
  std::vector<f16> h;
  for (float v : x) h.push_back(f16(v * 1e10f));  // finite floats beyond f16's range are inf
  ref::buffer<bool> a(8), b(8), c(8);
  f(x, h, into(ref::view_of(a, {8}), ref::view_of(b, {8}), ref::view_of(c, {8})));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(a[i], std::isnan(x[i])) << i;
    EXPECT_EQ(b[i], std::isinf(x[i])) << i;
    float hv = static_cast<float>(h[i]);
    EXPECT_EQ(c[i], std::isnan(hv) || std::isinf(hv)) << i;
  }
}

// The graph door: the same ops by name through an executable, on the default device and the CPU.
TEST(GraphDoor, RemaindersBitsClipAndClassify) {
  graph g;
  auto x = g.input("x", dtype::f32, {dyn});
  auto y = g.input("y", dtype::f32, {dyn});
  auto i = g.input("i", dtype::i32, {dyn});
  auto j = g.input("j", dtype::i32, {dyn});
  g.output("mod", g.mod(x, y));
  g.output("clip", g.clip(x, g.constant(-1.f), y));
  g.output("nan", g.isnan(g.fmod(x, y)));
  g.output("bits", g.shift_right(g.bitwise_xor(i, j), g.constant(1, dtype::i32)));
  auto exe = compile(g);
  std::vector<float> xv = {5.f, -5.f, 2.5f, -0.5f}, yv = {3.f, 3.f, 0.f, -2.f};
  std::vector<i32> iv = {6, -6, 1, 0}, jv = {3, 3, 1, -1};
  for (const device& dev : {device::default_device(), device::cpu()}) {
    std::vector<float> m(4), c(4);
    ref::buffer<bool> nan(4);
    std::vector<i32> b(4);
    exe.run({tensor_ref(xv), tensor_ref(yv), tensor_ref(iv), tensor_ref(jv)},
            {tensor_ref(m), tensor_ref(c), tensor_ref(ref::view_of(nan, {4})), tensor_ref(b)}, dev);
    EXPECT_TRUE(std::isnan(m[2])) << dev.name();  // mod(2.5, 0)
    m[2] = 0;
    EXPECT_EQ(m, (std::vector<float>{2.f, 1.f, 0.f, -0.5f})) << dev.name();
    EXPECT_EQ(c, (std::vector<float>{3.f, -1.f, 0.f, -2.f})) << dev.name();
    EXPECT_EQ(nan[0] + 2 * nan[1] + 4 * nan[2] + 8 * nan[3], 4) << dev.name();
    EXPECT_EQ(b, (std::vector<i32>{(6 ^ 3) >> 1, (-6 ^ 3) >> 1, 0, -1})) << dev.name();
  }
}
