// Contraction prologues: a matmul operand computed from parameters by elementwise ops (a weight's
// dequantization: cast, zero point, scale) is evaluated by the CPU block by block as the GEMM
// packs it (compiler::packed_into), not stored whole and read back. Checked against a double
// reference, with the bits of the same plan run region by region (the operand materialized),
// across KC and NC blocks, both packing paths (shared B, B per tile), a computed A, batches, and
// the cases that must stay materialized. Runs on the default device and, as
// e2e.cpu.test_prologues, on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "../support/products.hpp"
#include "../support/regions.hpp"

namespace {

using kiln::dtype;
using ref::dims_t;

// Integers of i8 in [-128, 127].
std::vector<std::int8_t> random_i8(std::int64_t n, unsigned seed) {
  auto f = ref::random_data<float>(n, -128, 128, seed);
  std::vector<std::int8_t> q(f.size());
  for (std::size_t i = 0; i < f.size(); ++i)
    q[i] = static_cast<std::int8_t>(std::clamp(std::floor(f[i]), -128.0f, 127.0f));
  return q;
}

// y[b] = x[b] [M, K] times w[b] [K, N], w = (q - zp) scale per column, as f32 computes it (the
// difference exact, one rounding of the product), each element's sum of |terms| beside it.
struct dequantized_case {
  std::int64_t batch, M, K, N;
};
struct dequantized_ref {
  std::vector<float> w;
  std::vector<double> y, magnitude;
};
dequantized_ref reference(const dequantized_case& c, const std::vector<float>& x,
                          const std::vector<std::int8_t>& q, const std::vector<std::int8_t>& zp,
                          const std::vector<float>& scale) {
  dequantized_ref r{std::vector<float>(q.size()), std::vector<double>(c.batch * c.M * c.N),
                    std::vector<double>(c.batch * c.M * c.N)};
  for (std::size_t i = 0; i < q.size(); ++i) {
    const std::int64_t j = static_cast<std::int64_t>(i) % c.N;
    r.w[i] = static_cast<float>(double(q[i]) - double(zp[j])) * scale[j];
  }
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.M; ++i)
      for (std::int64_t j = 0; j < c.N; ++j) {
        double s = 0, m = 0;
        for (std::int64_t k = 0; k < c.K; ++k) {
          const double t = double(x[(b * c.M + i) * c.K + k]) * r.w[(b * c.K + k) * c.N + j];
          s += t;
          m += std::fabs(t);
        }
        r.y[(b * c.M + i) * c.N + j] = s;
        r.magnitude[(b * c.M + i) * c.N + j] = m;
      }
  return r;
}

// The region a plan's matmul is in, and the region that packing computes, or -1.
struct packing_of {
  int matmul = -1, computed = -1, operand = -1;
};
packing_of packing_in(const kiln::compiler::plan& p) {
  packing_of r;
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    if (p.regions[i].contraction >= 0) r.matmul = static_cast<int>(i);
    if (const kiln::compiler::packing into = kiln::compiler::packed_into(p, i); into.region >= 0) {
      r.computed = static_cast<int>(i);
      r.operand = into.operand;
    }
  }
  return r;
}

TEST(Prologues, DequantizedWeightsArePackedAsComputed) {
  const kiln::device cpu = kiln::device::cpu();
  // Around KC (256) and NC (512 f32): several K and column blocks; 130 rows share a packed B
  // among the threads, 7 rows and a batch of 3 pack B per tile.
  const dequantized_case cases[] = {
      {1, 7, 40, 9}, {1, 130, 300, 600}, {1, 1, 257, 1030}, {3, 20, 70, 45}};
  unsigned seed = 10;
  for (const dequantized_case& c : cases) {
    SCOPED_TRACE("batch " + std::to_string(c.batch) + " M " + std::to_string(c.M) + " K " +
                 std::to_string(c.K) + " N " + std::to_string(c.N));
    const dims_t xd = c.batch == 1 ? dims_t{c.M, c.K} : dims_t{c.batch, c.M, c.K};
    const dims_t qd = c.batch == 1 ? dims_t{c.K, c.N} : dims_t{c.batch, c.K, c.N};
    const dims_t yd = c.batch == 1 ? dims_t{c.M, c.N} : dims_t{c.batch, c.M, c.N};
    kiln::graph g;
    auto x = g.input("x", dtype::f32, ref::to_shape(xd));
    auto q = g.input("q", dtype::i8, ref::to_shape(qd));
    auto zp = g.input("zp", dtype::i8, {c.N});
    auto scale = g.input("scale", dtype::f32, {c.N});
    auto w = g.mul(g.sub(g.cast(q, dtype::f32), g.cast(zp, dtype::f32)), scale);
    g.output("y", g.matmul(x, w));
    auto e = kiln::compile(g);
    const packing_of packing = packing_in(e.plan());
    EXPECT_GE(packing.matmul, 0);
    EXPECT_GE(packing.computed, 0) << kiln::compiler::print(e.plan());
    EXPECT_EQ(packing.operand, 1);
    EXPECT_EQ(kiln::compiler::packed_into(e.plan(), packing.computed).region, packing.matmul);

    auto xv = ref::floats(ref::random_tensor(xd, seed += 5));
    auto qv = random_i8(ref::count(qd), seed + 1);
    auto zv = random_i8(c.N, seed + 2);
    auto sv = ref::random_data<float>(c.N, 0.001f, 0.02f, seed + 3);
    const dequantized_ref want = reference(c, xv, qv, zv, sv);
    std::vector<float> y(ref::count(yd)), on_cpu(y.size()), by_region(y.size());
    const std::vector<kiln::tensor_ref> in{
        kiln::tensor_ref(xv.data(), dtype::f32, ref::to_shape(xd)),
        kiln::tensor_ref(qv.data(), dtype::i8, ref::to_shape(qd)),
        kiln::tensor_ref(zv.data(), dtype::i8, {c.N}),
        kiln::tensor_ref(sv.data(), dtype::f32, {c.N})};
    const std::vector<kiln::tensor_ref> out{
        kiln::tensor_ref(y.data(), dtype::f32, ref::to_shape(yd))},
        out_cpu{kiln::tensor_ref(on_cpu.data(), dtype::f32, ref::to_shape(yd))};
    e.run(in, out);
    ref::expect_within_bound(y, want.y, want.magnitude, c.K, "default device");
    // On the CPU the weight is never stored: in a caller's workspace, its place in the arena
    // keeps the bytes it had.
    const auto layout = e.plan().arena();
    const std::int32_t weight = e.plan().regions[packing.computed].writes[0];
    std::vector<std::byte> host(layout.bytes + 64, std::byte{0xab});
    e.run(in, out_cpu, cpu, std::span<std::byte>(host));
    const auto at = (reinterpret_cast<std::uintptr_t>(host.data()) + 63) / 64 * 64 -
                    reinterpret_cast<std::uintptr_t>(host.data()) + layout.offsets[weight];
    EXPECT_EQ(
        std::count(host.begin() + at, host.begin() + at + ref::count(qd) * 4, std::byte{0xab}),
        ref::count(qd) * 4);
    ref::expect_within_bound(on_cpu, want.y, want.magnitude, c.K, "cpu");
    // The regions one by one (the weight stored whole, then read by the matmul): the same bits.
    ref::run_region_by_region(e.plan(),
                              {{xv.data(), ref::to_shape(xd)},
                               {qv.data(), ref::to_shape(qd)},
                               {zv.data(), kiln::shape{c.N}},
                               {sv.data(), kiln::shape{c.N}}},
                              {{by_region.data(), ref::to_shape(yd)}});
    EXPECT_EQ(on_cpu, by_region);
  }
}

// The DSL door: kernels compiled for the plan (the prologue's row function a compiled one), a
// computed A (activations scaled per column) and a dequantized B in one product, with a bias.
TEST(Prologues, BothOperandsComputedThroughTheDslDoor) {
  constexpr std::int64_t M = 70, K = 300, N = 500;  // one column block: A packed once
  static constexpr auto f =
      kiln::fn<kiln::tensor<float, M, K>, kiln::tensor<float, K>, kiln::tensor<kiln::i8, K, N>,
               kiln::tensor<float, N>, kiln::tensor<float, N>>(
          [](auto x, auto s, auto q, auto scale, auto b) {
            return matmul(x * s, kiln::cast<kiln::f32>(q) * scale) + b;
          });
  static_assert(f.plan.dispatch_count() == 3);  // x * s, the weight, the product with its bias
  const kiln::compiler::plan p = f.plan.thaw();
  const packing_of packing = packing_in(p);
  int computed = 0;
  for (std::size_t i = 0; i < p.regions.size(); ++i)
    computed += kiln::compiler::packed_into(p, i).region == packing.matmul;
  EXPECT_EQ(computed, 2) << kiln::compiler::print(p);

  auto xv = ref::floats(ref::random_tensor({M, K}, 40));
  auto s = ref::random_data<float>(K, 0.5f, 2.0f, 41);
  auto qv = random_i8(K * N, 42);
  auto scale = ref::random_data<float>(N, 0.001f, 0.02f, 43);
  auto b = ref::floats(ref::random_tensor({N}, 44));
  std::vector<float> y(M * N);
  f.on(kiln::device::cpu())(xv, s, qv, scale, b, kiln::into(y));
  std::vector<double> want(M * N), magnitude(M * N);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double acc = b[j], mag = std::fabs(b[j]);
      for (std::int64_t k = 0; k < K; ++k) {
        const double t = double(xv[i * K + k] * s[k]) * double(float(qv[k * N + j]) * scale[j]);
        acc += t;
        mag += std::fabs(t);
      }
      want[i * N + j] = acc;
      magnitude[i * N + j] = mag;
    }
  ref::expect_within_bound(y, want, magnitude, K + 1, "x s x dequantized w + b");
}

// MatMulInteger's widened operands (u8 and i8 less scalar zero points, in i32) are both
// prologues of the product; the sums stay exact whether A is computed as it is packed (N = 500,
// one column block) or stored first (N = 600: A would be packed twice).
TEST(Prologues, IntegerOperandsAreWidenedAsTheyArePacked) {
  for (const std::int64_t N : {500, 600}) {
    const std::int64_t M = 130, K = 300;
    std::vector<std::uint8_t> a(M * K);
    std::vector<std::int8_t> b(K * N);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(i * 37 % 256);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::int8_t>(i * 91 % 256 - 128);
    const std::uint8_t a_zero = 131;
    const std::int8_t b_zero = -7;
    kiln::graph g;
    auto av = g.input("a", dtype::u8, {M, K});
    auto bv = g.input("b", dtype::i8, {K, N});
    auto az = g.input("a_zero", dtype::u8, kiln::shape{});
    auto bz = g.input("b_zero", dtype::i8, kiln::shape{});
    g.output("y", g.matmul_integer(av, bv, az, bz));
    auto e = kiln::compile(g);
    int operands = 0;
    for (std::size_t i = 0; i < e.plan().regions.size(); ++i)
      if (const kiln::compiler::packing into = kiln::compiler::packed_into(e.plan(), i);
          into.region >= 0)
        operands |= 1 << into.operand;
    EXPECT_EQ(operands, 3) << kiln::compiler::print(e.plan());
    std::vector<std::int32_t> y(M * N);
    const std::vector<kiln::tensor_ref> in{
        kiln::view(a.data(), {M, K}), kiln::view(b.data(), {K, N}),
        kiln::tensor_ref(static_cast<const void*>(&a_zero), dtype::u8, kiln::shape{}),
        kiln::tensor_ref(static_cast<const void*>(&b_zero), dtype::i8, kiln::shape{})};
    const std::vector<kiln::tensor_ref> out{kiln::view(y.data(), {M, N})};
    e.run(in, out, kiln::device::cpu());
    int bad = 0;
    for (std::int64_t i = 0; i < M && bad < 5; ++i)
      for (std::int64_t j = 0; j < N && bad < 5; ++j) {
        std::int64_t want = 0;
        for (std::int64_t k = 0; k < K; ++k)
          want += (std::int64_t{a[i * K + k]} - a_zero) * (std::int64_t{b[k * N + j]} - b_zero);
        if (y[i * N + j] != want) {
          ++bad;
          ADD_FAILURE() << "element (" << i << ", " << j << "): " << y[i * N + j] << " vs " << want;
        }
      }
  }
}

// A computed operand stays stored whole where the packing cannot own it: the weight is also a
// result, two products read it, it reads a value another region computes, or the product reads
// it through a transpose. Each still right.
TEST(Prologues, WhatCannotBePackedIsStillMaterialized) {
  const std::int64_t M = 9, K = 20, N = 12;
  auto xv = ref::floats(ref::random_tensor({M, K}, 50));
  auto qv = random_i8(K * N, 51);                          // [K, N], or [N, K] for the transpose
  auto sv = ref::random_data<float>(K, 0.01f, 0.02f, 52);  // per column: N of them, or per row
  for (int which = 0; which < 4; ++which) {
    SCOPED_TRACE(which);
    const bool transposed = which == 3;
    // The weight at row k, column j of the product's B.
    auto weight = [&](std::int64_t k, std::int64_t j) {
      return transposed ? float(qv[j * K + k]) * sv[k] : float(qv[k * N + j]) * sv[j];
    };
    kiln::graph g;
    auto x = g.input("x", dtype::f32, {M, K});
    auto q = g.input("q", dtype::i8, transposed ? kiln::shape{N, K} : kiln::shape{K, N});
    auto s = g.input("s", dtype::f32, {transposed ? K : N});
    auto w = g.mul(g.cast(q, dtype::f32), s);
    if (which == 0) {  // also a result
      g.output("y", g.matmul(x, w));
      g.output("w", w);
    } else if (which == 1) {  // two products
      g.output("y", g.matmul(x, w));
      g.output("z", g.matmul(g.mul(x, g.constant(2.0)), w));
    } else if (which == 2) {  // scaled by a reduction's result: a value another region computes
      g.output("y", g.matmul(x, g.div(w, g.reduce_max(s, {0}, true))));
    } else {
      g.output("y", g.matmul(x, g.transpose(w, {1, 0})));
    }
    auto e = kiln::compile(g);
    // (x 2, the second product's A, is computed from a parameter for that product alone: packed.)
    for (std::size_t i = 0; i < e.plan().regions.size(); ++i) {
      const bool doubled_x = which == 1 && e.plan().regions[i].space == kiln::shape{M, K};
      EXPECT_EQ(kiln::compiler::packed_into(e.plan(), i).operand, doubled_x ? 0 : -1)
          << i << "\n"
          << kiln::compiler::print(e.plan());
    }
    std::vector<float> y(M * N), second(which == 0 ? K * N : M * N);
    std::vector<kiln::tensor_ref> outs{kiln::tensor_ref(y.data(), dtype::f32, {M, N})};
    if (which == 0) outs.push_back(kiln::tensor_ref(second.data(), dtype::f32, {K, N}));
    if (which == 1) outs.push_back(kiln::tensor_ref(second.data(), dtype::f32, {M, N}));
    const std::vector<kiln::tensor_ref> in{
        kiln::tensor_ref(xv.data(), dtype::f32, {M, K}),
        kiln::tensor_ref(qv.data(), dtype::i8, transposed ? kiln::shape{N, K} : kiln::shape{K, N}),
        kiln::tensor_ref(sv.data(), dtype::f32, {transposed ? K : N})};
    e.run(in, outs, kiln::device::cpu());
    const float top = *std::max_element(sv.begin(), sv.begin() + N);
    std::vector<double> want(M * N), magnitude(M * N);
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j)
        for (std::int64_t k = 0; k < K; ++k) {
          const float wk = which == 2 ? weight(k, j) / top : weight(k, j);
          const double t = double(xv[i * K + k]) * wk;
          want[i * N + j] += t;
          magnitude[i * N + j] += std::fabs(t);
        }
    ref::expect_within_bound(y, want, magnitude, K, "y");
    if (which == 0) {
      for (std::int64_t k = 0; k < K * N; ++k) EXPECT_EQ(second[k], weight(k / N, k % N)) << k;
    }
    if (which == 1) {
      for (double& v : want) v *= 2;
      for (double& v : magnitude) v *= 2;
      ref::expect_within_bound(second, want, magnitude, K, "z");
    }
  }
}

}  // namespace
