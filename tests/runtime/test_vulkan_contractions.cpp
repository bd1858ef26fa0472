// Contractions on the Vulkan device (lavapipe): the tiled GEMM kernel (matmul, and convolution,
// plain or transposed, as implicit GEMM) and its fused epilogue run there, not on the CPU (no
// fallback notice, a kernel per contraction region, and a submission without a host wait, which
// refuses host work, computes it), across tile edges, batches, transposed operands and rows that
// are not whole groups of four, against a double reference; what the device leaves to the CPU
// says why. (e2e_test_contractions and e2e_test_convolutions run their full suites on the default
// device, this one.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>
#include <kiln/runtime/vulkan/context.hpp>
#include <kiln/runtime/vulkan/executor.hpp>

#include "../support/products.hpp"

using namespace kiln;
using ref::dims_t;

namespace {

// y[b] = relu(a[b] x w[b] + bias) for row-major a [batch, M, K], w [batch, K, N], bias [N]; each
// element's sum of |terms| for the rounding bound.
struct dense_ref {
  std::vector<double> y, magnitude;
};
dense_ref dense(const std::vector<float>& a, const std::vector<float>& w,
                const std::vector<float>& bias, std::int64_t batch, std::int64_t M, std::int64_t K,
                std::int64_t N) {
  dense_ref r{std::vector<double>(batch * M * N), std::vector<double>(batch * M * N)};
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        double s = bias[j], m = std::fabs(bias[j]);
        for (std::int64_t k = 0; k < K; ++k) {
          double t = double(a[(b * M + i) * K + k]) * w[(b * K + k) * N + j];
          s += t;
          m += std::fabs(t);
        }
        r.y[(b * M + i) * N + j] = std::max(s, 0.0);
        r.magnitude[(b * M + i) * N + j] = m;
      }
  return r;
}

// Runs f on the Vulkan device and gives what it printed to stderr.
template <class F>
std::string said_while(F&& f) {
  testing::internal::CaptureStderr();
  f();
  return testing::internal::GetCapturedStderr();
}

int tiled_kernels(const executable& e) {
  int n = 0;
  for (const spirv::kernel& k : e.kernels()) n += k.per_tile && k.unsupported.empty();
  return n;
}

}  // namespace

TEST(VulkanMatmul, DescribesItsTilesFromTheDeviceLimits) {
  const spirv::target& t = device::vulkan().context()->target();
  EXPECT_LE(t.gemm().shared_bytes(4), t.shared_memory_bytes);  // the device's own tiles fit
  spirv::target cpu = t;  // lavapipe: invocations are SIMD lanes, blocks of 16 x 4
  cpu.cpu_device = true;
  spirv::target::gemm_tile tile = cpu.gemm();
  EXPECT_EQ(tile.rows(), 64u);
  EXPECT_EQ(tile.cols(), 64u);
  EXPECT_EQ(tile.block_rows, 16u);
  EXPECT_EQ(tile.invocations(), 64u);
  EXPECT_LE(tile.shared_bytes(4), 16384u);  // the shared memory Vulkan promises
  spirv::target gpu = t;  // a GPU with 1024 invocations per workgroup: 16 x 16 of 4 x 4
  gpu.cpu_device = false;
  gpu.max_workgroup_size_x = 1024;
  EXPECT_EQ(gpu.gemm().rows(), 64u);
  EXPECT_EQ(gpu.gemm().block_rows, 4u);
  EXPECT_EQ(gpu.gemm().invocations(), 256u);
  gpu.max_workgroup_size_x = 128;  // what Vulkan promises: half the rows
  EXPECT_EQ(gpu.gemm().rows(), 32u);
  EXPECT_EQ(gpu.gemm().invocations(), 128u);
}

// relu(matmul(a, w) + bias) is one dispatch of the tiled kernel, over sizes below, at and past
// the 64 x 64 tile and the 16-deep steps along K, with N a multiple of 4 or not.
TEST(VulkanMatmul, TiledKernelWithItsEpilogueRunsOnTheDevice) {
  const device d = device::vulkan();
  const std::int64_t shapes[][3] = {{1, 1, 1},      {7, 37, 29},  {63, 64, 65}, {64, 16, 64},
                                    {65, 300, 257}, {130, 17, 6}, {5, 0, 4},    {128, 33, 128}};
  unsigned seed = 5;
  for (auto [M, K, N] : shapes) {
    SCOPED_TRACE(std::to_string(M) + " x " + std::to_string(K) + " x " + std::to_string(N));
    graph g;
    auto a = g.input("a", dtype::f32, {M, K});
    auto w = g.input("w", dtype::f32, {K, N});
    auto bias = g.input("bias", dtype::f32, {N});
    g.output("y", g.relu(g.add(g.matmul(a, w), bias)));
    auto e = compile(g);
    EXPECT_EQ(e.dispatch_count(), 1);
    auto av = ref::floats(ref::random_tensor({M, K}, seed += 3));
    auto wv = ref::floats(ref::random_tensor({K, N}, seed + 1));
    auto bv = ref::floats(ref::random_tensor({N}, seed + 2));
    std::vector<float> y(M * N, -7.0f);
    std::string said = said_while([&] {
      e.run({ref::view_of(av, {M, K}), ref::view_of(wv, {K, N}), ref::view_of(bv, {N})},
            {ref::view_of(y, {M, N})}, d);
    });
    EXPECT_EQ(said.find("runs on the CPU"), std::string::npos) << said;
    EXPECT_EQ(tiled_kernels(e), 1);
    dense_ref want = dense(av, wv, bv, 1, M, K, N);
    ref::expect_within_bound(y, want.y, want.magnitude, K + 1, "relu(a w + bias)");
  }
}

// Batches (one broadcast), a transposed weight read in place and Gemm's scaling: each a tiled
// kernel on the device, each right.
TEST(VulkanMatmul, BatchesAndTransposedOperandsAreReadThroughTheirStrides) {
  const device d = device::vulkan();
  const std::int64_t B = 3, M = 70, K = 19, N = 36;
  auto av = ref::floats(ref::random_tensor({B, M, K}, 41));
  auto wv = ref::floats(ref::random_tensor({K, N}, 42));  // shared by every batch
  auto bv = ref::floats(ref::random_tensor({N}, 43));
  std::vector<float> w_batched;
  for (std::int64_t b = 0; b < B; ++b) w_batched.insert(w_batched.end(), wv.begin(), wv.end());
  dense_ref want = dense(av, w_batched, bv, B, M, K, N);
  {
    graph g;
    auto a = g.input("a", dtype::f32, {B, M, K});
    auto w = g.input("w", dtype::f32, {K, N});
    auto bias = g.input("bias", dtype::f32, {N});
    g.output("y", g.relu(g.add(g.matmul(a, w), bias)));
    auto e = compile(g);
    std::vector<float> y(B * M * N);
    std::string said = said_while([&] {
      e.run({ref::view_of(av, {B, M, K}), ref::view_of(wv, {K, N}), ref::view_of(bv, {N})},
            {ref::view_of(y, {B, M, N})}, d);
    });
    EXPECT_EQ(said.find("runs on the CPU"), std::string::npos) << said;
    EXPECT_EQ(tiled_kernels(e), 1);
    ref::expect_within_bound(y, want.y, want.magnitude, K + 1, "batched");
  }
  {  // the weight given transposed, [N, K], and read through the transpose's strides
    std::vector<float> wt(N * K);
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t j = 0; j < N; ++j) wt[j * K + k] = wv[k * N + j];
    graph g;
    auto a = g.input("a", dtype::f32, {B, M, K});
    auto w = g.input("wt", dtype::f32, {N, K});
    auto bias = g.input("bias", dtype::f32, {N});
    g.output("y", g.relu(g.add(g.matmul(a, g.transpose(w, {1, 0})), bias)));
    auto e = compile(g);
    EXPECT_EQ(e.dispatch_count(), 1);
    std::vector<float> y(B * M * N);
    std::string said = said_while([&] {
      e.run({ref::view_of(av, {B, M, K}), ref::view_of(wt, {N, K}), ref::view_of(bv, {N})},
            {ref::view_of(y, {B, M, N})}, d);
    });
    EXPECT_EQ(said.find("runs on the CPU"), std::string::npos) << said;
    EXPECT_EQ(tiled_kernels(e), 1);
    ref::expect_within_bound(y, want.y, want.magnitude, K + 1, "transposed weight");
  }
}

// An MLP block: two contraction regions and the hidden layer in the transient arena, all on the
// device.
TEST(VulkanMatmul, AnMlpBlockRunsBothProductsOnTheDevice) {
  const device d = device::vulkan();
  const std::int64_t T = 33, W = 48, H = 96;
  auto xv = ref::floats(ref::random_tensor({T, W}, 51));
  auto w1 = ref::floats(ref::random_tensor({W, H}, 52));
  auto w2 = ref::floats(ref::random_tensor({H, W}, 53));
  graph g;
  auto x = g.input("x", dtype::f32, {T, W});
  auto a = g.input("w1", dtype::f32, {W, H});
  auto b = g.input("w2", dtype::f32, {H, W});
  g.output("y", g.add(g.matmul(g.relu(g.matmul(x, a)), b), x));
  auto e = compile(g);
  EXPECT_EQ(e.dispatch_count(), 2);
  std::vector<float> y(T * W);
  std::string said = said_while([&] {
    e.run({ref::view_of(xv, {T, W}), ref::view_of(w1, {W, H}), ref::view_of(w2, {H, W})},
          {ref::view_of(y, {T, W})}, d);
  });
  EXPECT_EQ(said.find("runs on the CPU"), std::string::npos) << said;
  EXPECT_EQ(tiled_kernels(e), 2);
  // The hidden layer as the device computes it is within f32 rounding of the exact one; the
  // reference takes it exact, and the bound takes the hidden rounding in through its magnitude.
  std::vector<double> hidden(T * H), hidden_mag(T * H);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < H; ++h) {
      double s = 0, m = 0;
      for (std::int64_t k = 0; k < W; ++k) {
        s += double(xv[t * W + k]) * w1[k * H + h];
        m += std::fabs(double(xv[t * W + k]) * w1[k * H + h]);
      }
      hidden[t * H + h] = std::max(s, 0.0);
      hidden_mag[t * H + h] = m;
    }
  const double u = std::ldexp(1.0, -24);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t j = 0; j < W; ++j) {
      double s = xv[t * W + j], bound = 2 * u * std::fabs(s);
      for (std::int64_t h = 0; h < H; ++h) {
        s += hidden[t * H + h] * w2[h * W + j];
        bound += (H + 3) * u * std::fabs(hidden[t * H + h] * w2[h * W + j]) +
                 (W + 2) * u * hidden_mag[t * H + h] * std::fabs(w2[h * W + j]);
      }
      ASSERT_LE(std::fabs(y[t * W + j] - s), bound) << t << ", " << j;
    }
}

// A matmul operand that elementwise ops compute from parameters (a weight's dequantization, (q -
// zp) x scale per column; activations scaled per column), which the CPU computes as it packs
// (compiler::packed_into), is evaluated on the device as the GEMM stages its blocks where that
// computes each element once (a weight under one tile row of 64, per batch; an A under one tile
// column): one kernel runs the product and the prologues, no kernel of a prologue's own is
// emitted, the transient is never written (a workspace filled with a sentinel keeps it there).
// Elsewhere (130 rows: 3 tile rows; 70: 2, in each of 3 batches) the prologue is a kernel that
// stores it. Either way the result has the bits of the same product with the operands passed in
// whole (the kernel sums in the same order).
TEST(VulkanMatmul, ProloguesAreEvaluatedAsTheBlocksAreStaged) {
  const device d = device::vulkan();
  struct prologue_case {
    std::int64_t batch, M, K, N;
    bool computed_a;
    bool fused;  // the product's kernel computes the prologues (else each stores its operand)
  };
  const prologue_case cases[] = {{1, 7, 40, 9, false, true},    {1, 64, 300, 70, false, true},
                                 {3, 20, 33, 45, false, true},  {1, 60, 70, 60, true, true},
                                 {1, 130, 40, 9, false, false}, {3, 70, 33, 45, false, false},
                                 {1, 65, 70, 66, true, false}};
  unsigned seed = 70;
  for (const prologue_case& c : cases) {
    SCOPED_TRACE("batch " + std::to_string(c.batch) + " M " + std::to_string(c.M) + " K " +
                 std::to_string(c.K) + " N " + std::to_string(c.N) +
                 (c.computed_a ? ", A computed" : ""));
    const bool batched = c.batch > 1;
    const dims_t xd = batched ? dims_t{c.batch, c.M, c.K} : dims_t{c.M, c.K};
    const dims_t qd = batched ? dims_t{c.batch, c.K, c.N} : dims_t{c.K, c.N};
    const dims_t yd = batched ? dims_t{c.batch, c.M, c.N} : dims_t{c.M, c.N};
    graph g;
    auto x = g.input("x", dtype::f32, ref::to_shape(xd));
    auto x_scale = g.input("x_scale", dtype::f32, {c.K});
    auto q = g.input("q", dtype::i8, ref::to_shape(qd));
    auto zp = g.input("zp", dtype::i8, {c.N});
    auto scale = g.input("scale", dtype::f32, {c.N});
    auto w = g.mul(g.sub(g.cast(q, dtype::f32), g.cast(zp, dtype::f32)), scale);
    g.output("y", g.matmul(c.computed_a ? g.mul(x, x_scale) : x, w));
    const executable e = compile(g);
    ASSERT_EQ(e.dispatch_count(), c.computed_a ? 3 : 2) << compiler::print(e.plan());

    // The operands as f32 computes them, and the product with them passed in whole.
    auto xv = ref::floats(ref::random_tensor(xd, seed += 7));
    auto xs = ref::random_data<float>(c.K, 0.5f, 2.0f, seed + 1);
    auto qf = ref::random_data<float>(ref::count(qd), -128, 128, seed + 2);
    auto zf = ref::random_data<float>(c.N, -128, 128, seed + 3);
    auto sv = ref::random_data<float>(c.N, 0.001f, 0.02f, seed + 4);
    std::vector<std::int8_t> qv(qf.size()), zv(zf.size());
    for (std::size_t i = 0; i < qf.size(); ++i) qv[i] = static_cast<std::int8_t>(std::floor(qf[i]));
    for (std::size_t i = 0; i < zf.size(); ++i) zv[i] = static_cast<std::int8_t>(std::floor(zf[i]));
    std::vector<float> a_whole(xv), w_whole(qv.size());
    if (c.computed_a)
      for (std::size_t i = 0; i < xv.size(); ++i) a_whole[i] = xv[i] * xs[i % c.K];
    for (std::size_t i = 0; i < qv.size(); ++i)
      w_whole[i] = (float(qv[i]) - float(zv[i % c.N])) * sv[i % c.N];
    graph whole;
    auto a_in = whole.input("a", dtype::f32, ref::to_shape(xd));
    auto w_in = whole.input("w", dtype::f32, ref::to_shape(qd));
    whole.output("y", whole.matmul(a_in, w_in));
    std::vector<float> want_bits(ref::count(yd));
    compile(whole).run({tensor_ref(a_whole.data(), dtype::f32, ref::to_shape(xd)),
                        tensor_ref(w_whole.data(), dtype::f32, ref::to_shape(qd))},
                       {ref::view_of(want_bits, yd)}, d);

    // Through a workspace of sentinels: the computed operands' places keep them.
    const auto layout = e.plan().arena();
    std::vector<float> sentinel(static_cast<std::size_t>(layout.bytes / 4 + 16), 77.0f);
    buffer<float> block = d.upload(sentinel);
    std::vector<float> y(ref::count(yd), -7.0f);
    std::string said = said_while([&] {
      e.run({tensor_ref(xv.data(), dtype::f32, ref::to_shape(xd)),
             tensor_ref(xs.data(), dtype::f32, {c.K}),
             tensor_ref(qv.data(), dtype::i8, ref::to_shape(qd)),
             tensor_ref(zv.data(), dtype::i8, {c.N}), tensor_ref(sv.data(), dtype::f32, {c.N})},
            {ref::view_of(y, yd)}, d, workspace(block));
    });
    EXPECT_EQ(said.find("runs on the CPU"), std::string::npos) << said;
    const std::size_t prologues = c.computed_a ? 2 : 1;
    ASSERT_EQ(e.kernels().size(), c.fused ? 1u : 1 + prologues);
    for (const spirv::kernel& k : e.kernels())
      EXPECT_EQ(k.regions, k.per_tile && c.fused ? 1 + prologues : 1u);
    EXPECT_EQ(tiled_kernels(e), 1);
    EXPECT_EQ(y, want_bits);
    std::vector<float> back(sentinel.size());
    block.download(back);
    std::size_t checked = 0;
    for (std::size_t r = 0; r < e.plan().regions.size(); ++r) {
      if (compiler::packed_into(e.plan(), r).region < 0) continue;
      const std::int32_t t = e.plan().regions[r].writes[0];
      const auto first = static_cast<std::size_t>(layout.offsets[t] / 4);
      const auto n = static_cast<std::ptrdiff_t>(
          e.plan().graph.nodes[e.plan().transients[t]].dims.element_count());
      const auto kept = std::count(back.begin() + first, back.begin() + first + n, 77.0f);
      if (c.fused)
        EXPECT_EQ(kept, n) << "t" << t << " was written";
      else
        EXPECT_LT(kept, n) << "t" << t << " was not stored";
      ++checked;
    }
    EXPECT_EQ(checked, prologues);
    // And against the definition, in double.
    std::vector<double> want(y.size()), magnitude(y.size());
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t i = 0; i < c.M; ++i)
        for (std::int64_t j = 0; j < c.N; ++j) {
          double s = 0, m = 0;
          for (std::int64_t k = 0; k < c.K; ++k) {
            const double term =
                double(a_whole[(b * c.M + i) * c.K + k]) * double(w_whole[(b * c.K + k) * c.N + j]);
            s += term;
            m += std::fabs(term);
          }
          want[(b * c.M + i) * c.N + j] = s;
          magnitude[(b * c.M + i) * c.N + j] = m;
        }
    ref::expect_within_bound(y, want, magnitude, c.K, "matmul of the computed operands");
  }
}

// relu(conv(x, w) + b) as implicit GEMM on the device: strides, padding, dilation and groups
// (depthwise included), each one tiled kernel, against the definition summed in double.
TEST(VulkanConv, ImplicitGemmWithItsEpilogueRunsOnTheDevice) {
  const device d = device::vulkan();
  struct conv_case {
    std::int64_t n, c, h, w, m, kh, kw, groups, sh, sw, ph, pw, dh, dw;
  };
  const conv_case cases[] = {{1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1},
                             {2, 4, 9, 7, 6, 3, 2, 2, 2, 1, 1, 0, 1, 2},
                             {1, 8, 10, 10, 8, 3, 3, 8, 1, 1, 1, 1, 1, 1},  // depthwise
                             {1, 3, 6, 6, 5, 1, 1, 1, 1, 1, 0, 0, 1, 1},    // 1 x 1
                             {1, 2, 3, 3, 4, 5, 5, 1, 1, 1, 2, 2, 1, 1},    // kernel > input
                             {3, 16, 14, 14, 70, 3, 3, 1, 2, 2, 1, 1, 1, 1}};
  unsigned seed = 90;
  for (const conv_case& s : cases) {
    const std::int64_t oh = (s.h + 2 * s.ph - s.dh * (s.kh - 1) - 1) / s.sh + 1;
    const std::int64_t ow = (s.w + 2 * s.pw - s.dw * (s.kw - 1) - 1) / s.sw + 1;
    const std::int64_t cg = s.c / s.groups, mg = s.m / s.groups;
    SCOPED_TRACE("c " + std::to_string(s.c) + " m " + std::to_string(s.m) + " groups " +
                 std::to_string(s.groups));
    graph g;
    auto x = g.input("x", dtype::f32, {s.n, s.c, s.h, s.w});
    auto w = g.input("w", dtype::f32, {s.m, cg, s.kh, s.kw});
    auto b = g.input("b", dtype::f32, {s.m, 1, 1});
    g.output("y", g.relu(g.add(g.conv(x, w,
                                      conv_params{.strides = {s.sh, s.sw},
                                                  .pads = {s.ph, s.pw, s.ph, s.pw},
                                                  .dilations = {s.dh, s.dw},
                                                  .groups = s.groups}),
                               b)));
    auto e = compile(g);
    EXPECT_EQ(e.dispatch_count(), 1);
    auto xv = ref::floats(ref::random_tensor({s.n, s.c, s.h, s.w}, seed += 3));
    auto wv = ref::floats(ref::random_tensor({s.m, cg, s.kh, s.kw}, seed + 1));
    auto bv = ref::floats(ref::random_tensor({s.m}, seed + 2));
    std::vector<float> y(s.n * s.m * oh * ow);
    std::string said = said_while([&] {
      e.run({ref::view_of(xv, {s.n, s.c, s.h, s.w}), ref::view_of(wv, {s.m, cg, s.kh, s.kw}),
             ref::view_of(bv, {s.m, 1, 1})},
            {ref::view_of(y, {s.n, s.m, oh, ow})}, d);
    });
    EXPECT_EQ(said.find("runs on the CPU"), std::string::npos) << said;
    EXPECT_EQ(tiled_kernels(e), 1);
    std::vector<double> want(y.size()), magnitude(y.size());
    for (std::int64_t n = 0; n < s.n; ++n)
      for (std::int64_t m = 0; m < s.m; ++m)
        for (std::int64_t i = 0; i < oh; ++i)
          for (std::int64_t j = 0; j < ow; ++j) {
            double acc = bv[m], mag = std::fabs(bv[m]);
            const std::int64_t group = m / mg;
            for (std::int64_t c = 0; c < cg; ++c)
              for (std::int64_t p = 0; p < s.kh; ++p)
                for (std::int64_t q = 0; q < s.kw; ++q) {
                  const std::int64_t yi = i * s.sh - s.ph + p * s.dh,
                                     xj = j * s.sw - s.pw + q * s.dw;
                  if (yi < 0 || yi >= s.h || xj < 0 || xj >= s.w) continue;
                  double t = double(xv[((n * s.c + group * cg + c) * s.h + yi) * s.w + xj]) *
                             wv[((m * cg + c) * s.kh + p) * s.kw + q];
                  acc += t;
                  mag += std::fabs(t);
                }
            const std::int64_t at = ((n * s.m + m) * oh + i) * ow + j;
            want[at] = std::max(acc, 0.0);
            magnitude[at] = mag;
          }
    ref::expect_within_bound(y, want, magnitude, cg * s.kh * s.kw + 1, "relu(conv + b)");
  }
}

// conv_transpose as implicit GEMM on the device: an output cell reads the input cells that land
// on it (none where stride does not divide its offset), with its epilogue, one tiled kernel.
TEST(VulkanConv, TransposedConvolutionRunsOnTheDevice) {
  const device d = device::vulkan();
  {  // x [1, 2, 3, 3], w [2, 1, 2, 2], stride 2 -> y [1, 1, 6, 6]: by hand, each output cell has
     // exactly one input cell per channel.
    graph g;
    auto x = g.input("x", dtype::f32, {1, 2, 3, 3});
    auto w = g.input("w", dtype::f32, {2, 1, 2, 2});
    g.output("y", g.conv_transpose(x, w, ir::conv_window{.strides = {2, 2}}));
    auto e = compile(g);
    auto xv = ref::floats(ref::random_tensor({1, 2, 3, 3}, 81));
    auto wv = ref::floats(ref::random_tensor({2, 1, 2, 2}, 82));
    std::vector<float> y(36);
    std::string said = said_while([&] {
      e.run({ref::view_of(xv, {1, 2, 3, 3}), ref::view_of(wv, {2, 1, 2, 2})},
            {ref::view_of(y, {1, 1, 6, 6})}, d);
    });
    EXPECT_EQ(said.find("runs on the CPU"), std::string::npos) << said;
    EXPECT_EQ(tiled_kernels(e), 1);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) {
        double want = 0;
        for (int c = 0; c < 2; ++c)
          want += double(xv[c * 9 + (i / 2) * 3 + j / 2]) * wv[c * 4 + (i % 2) * 2 + j % 2];
        EXPECT_NEAR(y[i * 6 + j], want, 1e-6) << i << ", " << j;
      }
  }
  // relu(conv_transpose(x, w) + b): strides per axis, pads, dilation, output_padding, groups
  // (depthwise included), a kernel smaller than the stride (cells no input reaches) and a tile
  // edge (70 output channels), against the scatter definition summed in double.
  struct case_t {
    std::int64_t n, c, h, w, mg, kh, kw, groups, sh, sw, ph, pw, dh, dw, eh, ew;
  };
  const case_t cases[] = {{1, 3, 4, 5, 2, 3, 3, 1, 1, 1, 0, 0, 1, 1, 0, 0},
                          {2, 4, 5, 6, 3, 3, 2, 2, 2, 3, 1, 0, 1, 2, 1, 2},
                          {1, 6, 7, 7, 1, 3, 3, 6, 2, 2, 1, 1, 1, 1, 0, 0},  // depthwise
                          {1, 2, 4, 4, 3, 1, 1, 1, 3, 3, 0, 0, 1, 1, 0, 0},  // 1 x 1, stride 3
                          {2, 5, 6, 5, 70, 2, 2, 1, 2, 2, 0, 1, 1, 1, 0, 0}};
  unsigned seed = 110;
  for (const case_t& s : cases) {
    const std::int64_t m = s.mg * s.groups, cg = s.c / s.groups;
    const std::int64_t oh = s.sh * (s.h - 1) + s.eh + (s.kh - 1) * s.dh + 1 - 2 * s.ph;
    const std::int64_t ow = s.sw * (s.w - 1) + s.ew + (s.kw - 1) * s.dw + 1 - 2 * s.pw;
    SCOPED_TRACE("c " + std::to_string(s.c) + " m " + std::to_string(m) + " groups " +
                 std::to_string(s.groups) + " strides " + std::to_string(s.sh) + "x" +
                 std::to_string(s.sw));
    graph g;
    auto x = g.input("x", dtype::f32, {s.n, s.c, s.h, s.w});
    auto w = g.input("w", dtype::f32, {s.c, s.mg, s.kh, s.kw});
    auto b = g.input("b", dtype::f32, {m, 1, 1});
    g.output("y", g.relu(g.add(g.conv_transpose(x, w,
                                                ir::conv_window{.strides = {s.sh, s.sw},
                                                                .pads = {s.ph, s.pw, s.ph, s.pw},
                                                                .dilations = {s.dh, s.dw},
                                                                .groups = s.groups,
                                                                .output_padding = {s.eh, s.ew}}),
                               b)));
    auto e = compile(g);
    EXPECT_EQ(e.dispatch_count(), 1);
    auto xv = ref::floats(ref::random_tensor({s.n, s.c, s.h, s.w}, seed += 3));
    auto wv = ref::floats(ref::random_tensor({s.c, s.mg, s.kh, s.kw}, seed + 1));
    auto bv = ref::floats(ref::random_tensor({m}, seed + 2));
    std::vector<float> y(s.n * m * oh * ow);
    std::string said = said_while([&] {
      e.run({ref::view_of(xv, {s.n, s.c, s.h, s.w}), ref::view_of(wv, {s.c, s.mg, s.kh, s.kw}),
             ref::view_of(bv, {m, 1, 1})},
            {ref::view_of(y, {s.n, m, oh, ow})}, d);
    });
    EXPECT_EQ(said.find("runs on the CPU"), std::string::npos) << said;
    EXPECT_EQ(tiled_kernels(e), 1);
    // Each input cell scatters its kernel, weighted, into the outputs it lands on.
    std::vector<double> acc(y.size()), magnitude(y.size());
    for (std::int64_t n = 0; n < s.n; ++n)
      for (std::int64_t c = 0; c < s.c; ++c)
        for (std::int64_t i = 0; i < s.h; ++i)
          for (std::int64_t j = 0; j < s.w; ++j)
            for (std::int64_t q = 0; q < s.mg; ++q)
              for (std::int64_t p = 0; p < s.kh; ++p)
                for (std::int64_t r = 0; r < s.kw; ++r) {
                  const std::int64_t yi = i * s.sh - s.ph + p * s.dh,
                                     xj = j * s.sw - s.pw + r * s.dw;
                  if (yi < 0 || yi >= oh || xj < 0 || xj >= ow) continue;
                  const double t = double(xv[((n * s.c + c) * s.h + i) * s.w + j]) *
                                   wv[((c * s.mg + q) * s.kh + p) * s.kw + r];
                  const std::int64_t at = ((n * m + c / cg * s.mg + q) * oh + yi) * ow + xj;
                  acc[at] += t;
                  magnitude[at] += std::fabs(t);
                }
    std::vector<double> want(y.size());
    for (std::size_t at = 0; at < y.size(); ++at) {
      const double bias = bv[at / (oh * ow) % m];
      want[at] = std::max(acc[at] + bias, 0.0);
      magnitude[at] += std::fabs(bias);
    }
    ref::expect_within_bound(y, want, magnitude, cg * s.kh * s.kw + 1, "relu(conv_transpose + b)");
  }
}

// A convolution's operands computed from parameters: weights dequantized per output channel ((q -
// zp) x scale of i8) and the input normalized per channel (relu(x s + t), an inference batch norm
// before the convolution), plain and transposed. On the device the convolution's kernel computes
// each as it stages its blocks where that computes each element once (one image under one tile
// column for the weights; windows that do not overlap for the input: a 3 x 3 kernel at stride 3,
// its padding zero after the prologue, or a 1 x 1 one), else a kernel stores it first. Either way,
// and on the CPU (which stores them), the bits of the same convolution with the operands passed
// whole.
TEST(VulkanConv, ProloguesAreEvaluatedAsTheBlocksAreStaged) {
  const device vk = device::vulkan();
  struct prologue_case {
    bool transposed;
    std::int64_t N, C, H, W, M, kh, kw, groups;
    ir::conv_window window;
    std::uint32_t fused;  // of the two prologues
  };
  const prologue_case cases[] = {
      {false, 1, 6, 9, 9, 10, 3, 3, 2, {.strides = {3, 3}, .pads = {1, 1, 1, 1}, .groups = 2}, 2},
      {true, 1, 6, 3, 3, 10, 1, 1, 2, {.groups = 2}, 2},
      {true, 1, 6, 3, 3, 10, 2, 2, 2, {.strides = {2, 2}, .groups = 2}, 1},  // the weights
      {false,
       2,
       6,
       9,
       8,
       10,
       3,
       2,
       2,
       {.strides = {2, 1}, .pads = {1, 0, 1, 1}, .dilations = {1, 2}, .groups = 2},
       0}};
  unsigned seed = 120;
  for (const prologue_case& c : cases) {
    SCOPED_TRACE(std::string(c.transposed ? "conv_transpose" : "conv") + " of " +
                 std::to_string(c.N) + " images, " + std::to_string(c.H) + " x " +
                 std::to_string(c.W) + ", kernel " + std::to_string(c.kh) + " x " +
                 std::to_string(c.kw));
    const std::int64_t N = c.N, C = c.C, H = c.H, W = c.W, M = c.M, groups = c.groups;
    // w: [M, C / groups, kh, kw], or transposed [C, M / groups, kh, kw]; the per-channel
    // parameters broadcast along its axis of output channels.
    const dims_t wd =
        c.transposed ? dims_t{C, M / groups, c.kh, c.kw} : dims_t{M, C / groups, c.kh, c.kw};
    const dims_t pd = c.transposed ? dims_t{M / groups, 1, 1} : dims_t{M, 1, 1, 1};
    const std::int64_t channels_of_w = c.transposed ? M / groups : M;
    graph g;
    auto x = g.input("x", dtype::f32, {N, C, H, W});
    auto s = g.input("s", dtype::f32, {C, 1, 1});
    auto t = g.input("t", dtype::f32, {C, 1, 1});
    auto q = g.input("q", dtype::i8, ref::to_shape(wd));
    auto zp = g.input("zp", dtype::i8, ref::to_shape(pd));
    auto scale = g.input("scale", dtype::f32, ref::to_shape(pd));
    auto xn = g.relu(g.add(g.mul(x, s), t));
    auto w = g.mul(g.sub(g.cast(q, dtype::f32), g.cast(zp, dtype::f32)), scale);
    g.output("y", c.transposed ? g.conv_transpose(xn, w, c.window) : g.conv(xn, w, c.window));
    const executable e = compile(g);
    ASSERT_EQ(e.dispatch_count(), 3) << compiler::print(e.plan());

    auto xv = ref::floats(ref::random_tensor({N, C, H, W}, seed += 7));
    auto sv = ref::random_data<float>(C, 0.5f, 1.5f, seed + 1);
    auto tv = ref::random_data<float>(C, -0.5f, 0.5f, seed + 2);
    auto qf = ref::random_data<float>(ref::count(wd), -128, 128, seed + 3);
    auto zf = ref::random_data<float>(channels_of_w, -128, 128, seed + 4);
    auto scv = ref::random_data<float>(channels_of_w, 0.001f, 0.02f, seed + 5);
    std::vector<std::int8_t> qv(qf.size()), zv(zf.size());
    for (std::size_t i = 0; i < qf.size(); ++i) qv[i] = static_cast<std::int8_t>(std::floor(qf[i]));
    for (std::size_t i = 0; i < zf.size(); ++i) zv[i] = static_cast<std::int8_t>(std::floor(zf[i]));
    // The operands as f32 computes them (no contraction into fma: kiln keeps each rounding).
    std::vector<float> x_whole(xv.size()), w_whole(qv.size());
    for (std::size_t i = 0; i < xv.size(); ++i) {
      const auto ch = static_cast<std::size_t>(static_cast<std::int64_t>(i) / (H * W) % C);
      const float scaled = xv[i] * sv[ch];
      x_whole[i] = std::max(scaled + tv[ch], 0.0f);
    }
    const auto cells = static_cast<std::size_t>(c.kh * c.kw);
    const std::size_t per_w_channel =
        c.transposed ? cells : static_cast<std::size_t>(C / groups) * cells;
    for (std::size_t i = 0; i < qv.size(); ++i) {
      const std::size_t m = i / per_w_channel % static_cast<std::size_t>(channels_of_w);
      w_whole[i] = (float(qv[i]) - float(zv[m])) * scv[m];
    }
    graph whole;
    auto x_in = whole.input("x", dtype::f32, {N, C, H, W});
    auto w_in = whole.input("w", dtype::f32, ref::to_shape(wd));
    whole.output("y", c.transposed ? whole.conv_transpose(x_in, w_in, c.window)
                                   : whole.conv(x_in, w_in, c.window));
    const executable plain = compile(whole);
    const kiln::shape y_dims = e.plan().graph.nodes[e.plan().graph.outputs[0]].dims;
    const dims_t yd(y_dims.dims.begin(), y_dims.dims.begin() + y_dims.rank);
    for (const device& d : {vk, device::cpu()}) {
      SCOPED_TRACE(d.name());
      std::vector<float> y(ref::count(yd), -7.0f), want_bits(y.size());
      plain.run({tensor_ref(x_whole.data(), dtype::f32, {N, C, H, W}),
                 tensor_ref(w_whole.data(), dtype::f32, ref::to_shape(wd))},
                {ref::view_of(want_bits, yd)}, d);
      std::string said = said_while([&] {
        e.run({tensor_ref(xv.data(), dtype::f32, {N, C, H, W}),
               tensor_ref(sv.data(), dtype::f32, {C, 1, 1}),
               tensor_ref(tv.data(), dtype::f32, {C, 1, 1}),
               tensor_ref(qv.data(), dtype::i8, ref::to_shape(wd)),
               tensor_ref(zv.data(), dtype::i8, ref::to_shape(pd)),
               tensor_ref(scv.data(), dtype::f32, ref::to_shape(pd))},
              {ref::view_of(y, yd)}, d);
      });
      EXPECT_EQ(said.find("runs on the CPU"), std::string::npos) << said;
      EXPECT_EQ(y, want_bits);
    }
    ASSERT_EQ(e.kernels().size(), 3u - c.fused);
    for (const spirv::kernel& k : e.kernels()) EXPECT_EQ(k.regions, k.per_tile ? 1 + c.fused : 1u);
    EXPECT_EQ(tiled_kernels(e), 1);
  }
}

// A submission without a host wait refuses any region that needs the host: a matmul with its
// epilogue submitted on device buffers is computed by the device alone.
TEST(VulkanMatmul, SubmittedWithoutAHostWaitOnDeviceBuffers) {
  device d = device::vulkan();
  vulkan::context& ctx = *d.context();
  const std::int64_t M = 50, K = 40, N = 72;
  graph g;
  auto a = g.input("a", dtype::f32, {M, K});
  auto w = g.input("w", dtype::f32, {K, N});
  auto bias = g.input("bias", dtype::f32, {N});
  g.output("y", g.relu(g.add(g.matmul(a, w), bias)));
  runtime::program prog("graph", g.ir(), compiler::compile(g.ir()));
  auto av = ref::floats(ref::random_tensor({M, K}, 61));
  auto wv = ref::floats(ref::random_tensor({K, N}, 62));
  auto bv = ref::floats(ref::random_tensor({N}, 63));
  buffer<float> ab = d.upload(av, {M, K}), wb = d.upload(wv, {K, N}), bb = d.upload(bv, {N}),
                yb = d.alloc<float>(shape{M, N});
  auto ref_of = [](const buffer<float>& b) {
    return runtime::buffer_ref{nullptr, b.dims(), false, b.memory()};
  };
  runtime::buffer_ref args[3] = {ref_of(ab), ref_of(wb), ref_of(bb)}, out = ref_of(yb);
  std::int64_t sym[1] = {0};
  std::uint64_t done = vulkan::submit(prog, ctx, args, std::span(&out, 1), sym, {}, {});
  vulkan::semaphore_value point{ctx.queue().timeline(), done};
  vulkan::queue::wait_all(ctx.device(), std::span(&point, 1));
  std::vector<float> y(M * N);
  yb.download(y);
  dense_ref want = dense(av, wv, bv, 1, M, K, N);
  ref::expect_within_bound(y, want.y, want.magnitude, K + 1, "submitted");
}

// What the kernel does not cover runs on the CPU, right, with a notice naming the op and why: a
// narrow result whose rows are not whole words of four (their last word is the next row's too).
TEST(VulkanMatmul, WhatTheDeviceLeavesToTheCpuSaysWhy) {
  const device d = device::vulkan();
  {
    const std::int64_t M = 9, K = 8, N = 7;
    graph g;
    auto a = g.input("a", dtype::f32, {M, K});
    auto w = g.input("w", dtype::f32, {K, N});
    g.output("y", g.cast(g.matmul(a, w), dtype::f16));
    auto e = compile(g);
    auto av = ref::floats(ref::random_tensor({M, K}, 71));
    auto wv = ref::floats(ref::random_tensor({K, N}, 72));
    std::vector<kiln::f16> y(M * N);
    std::string said = said_while([&] {
      e.run({ref::view_of(av, {M, K}), ref::view_of(wv, {K, N})},
            {tensor_ref(y.data(), dtype::f16, {M, N})}, d);
    });
    EXPECT_NE(said.find("runs on the CPU: matmul: a f16 result whose rows are not a multiple of 4"),
              std::string::npos)
        << said;
    for (std::int64_t i = 0; i < M * N; ++i) {
      double exact = 0;
      for (std::int64_t k = 0; k < K; ++k) exact += double(av[i / N * K + k]) * wv[k * N + i % N];
      EXPECT_NEAR(static_cast<float>(y[i]), exact, std::fabs(exact) * 1e-3 + 1e-6) << i;
    }
  }
}

// f16 products on the matrix units where the device has them (VK_NV_cooperative_matrix: an
// NVIDIA GPU): relu(a w + bias) of f16 operands, a cooperative-matrix kernel, across the 128 x 128
// tiles' and the 32-deep steps' edges, batches, and rows that are whole groups of four or not,
// against a double reference of the f16 values rounded to the f16 result. Lavapipe has no such
// extension: skipped there.
TEST(VulkanMatmul, F16ProductsRunOnTheMatrixUnits) {
  const device d = device::vulkan();
  const spirv::target& t = d.context()->target();
  if (!t.gemm(true).on_matrix_units())
    GTEST_SKIP() << d.context()->name()
                 << " offers no f16 products on matrix units (VK_NV_cooperative_matrix)";
  const std::int64_t shapes[][4] = {{1, 1, 1, 4},      {1, 37, 29, 44},     {1, 128, 32, 128},
                                    {1, 129, 65, 132}, {1, 300, 1000, 260}, {3, 64, 48, 128},
                                    {1, 130, 17, 6}};
  unsigned seed = 91;
  for (auto [B, M, K, N] : shapes) {
    SCOPED_TRACE(std::to_string(B) + " x " + std::to_string(M) + " x " + std::to_string(K) + " x " +
                 std::to_string(N));
    graph g;
    auto a = g.input("a", dtype::f16, {B, M, K});
    auto w = g.input("w", dtype::f16, {B, K, N});
    auto bias = g.input("bias", dtype::f16, {N});
    // In f32 after the sum, so that rows that are not whole groups of four run on the device too.
    g.output("y", g.cast(g.relu(g.add(g.matmul(a, w), bias)), dtype::f32));
    auto e = compile(g);
    auto halves = [&](std::int64_t n, unsigned s) {
      std::vector<float> v = ref::floats(ref::random_tensor({n}, s));
      std::vector<kiln::f16> h(v.begin(), v.end());
      return h;
    };
    auto av = halves(B * M * K, seed += 3), wv = halves(B * K * N, seed + 1),
         bv = halves(N, seed + 2);
    std::vector<float> y(B * M * N, -7.0f);
    std::string said = said_while([&] {
      e.run({tensor_ref(av.data(), dtype::f16, {B, M, K}),
             tensor_ref(wv.data(), dtype::f16, {B, K, N}), tensor_ref(bv.data(), dtype::f16, {N})},
            {ref::view_of(y, {B, M, N})}, d);
    });
    EXPECT_EQ(said.find("runs on the CPU"), std::string::npos) << said;
    int matrix_kernels = 0;
    for (const spirv::kernel& k : e.kernels())
      for (std::size_t i = 5; i < k.code.size() && (k.code[i] >> 16) > 0; i += k.code[i] >> 16)
        matrix_kernels +=
            (k.code[i] & 0xFFFF) == std::uint32_t(spv::Op::OpCooperativeMatrixMulAddNV);
    EXPECT_GT(matrix_kernels, 0);
    int reported = 0;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N && reported < 5; ++j) {
          // The product summed in f32 (K + 2 roundings of at most its terms' magnitude), then
          // rounded to f16 (half an ulp: 2^-11 relative, 2^-25 below f16's normal range), the bias
          // added and rounded again.
          double product = 0, magnitude = 0;
          for (std::int64_t k = 0; k < K; ++k) {
            double term = double(float(av[(b * M + i) * K + k])) * float(wv[(b * K + k) * N + j]);
            product += term;
            magnitude += std::fabs(term);
          }
          const double want = std::max(product + float(bv[j]), 0.0);
          const double bound = double(K + 2) * std::ldexp(1.0, -24) * magnitude +
                               std::ldexp(1.0, -11) * (2 * std::fabs(product) + std::fabs(want)) +
                               std::ldexp(1.0, -24);
          const float got = y[(b * M + i) * N + j];
          if (!(std::fabs(got - want) <= bound)) {
            ++reported;
            ADD_FAILURE() << "y[" << b << "," << i << "," << j << "] is " << got << ", expected "
                          << want << " within " << bound;
          }
        }
  }
}
