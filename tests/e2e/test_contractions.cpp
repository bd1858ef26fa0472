// Contractions: ONNX MatMul and Gemm through both doors, checked against a double-accumulation
// reference within the classic error bound of a K-term dot product (|error| <= K u sum |a b|); the
// fusion of their epilogues (one dispatch, no transient) and their materialization where a root
// or another contraction reads them. Runs on the default device and, as e2e.cpu.test_contractions,
// on the CPU.
#include <gmock/gmock.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "../support/products.hpp"

namespace {

using kiln::dtype;
using kiln::tensor;
using ref::dims_t;
using ref::expect_within_bound;
using ref::floats;
using ref::host_tensor;
using ref::random_tensor;
using ref::view_of;

// numpy's matmul: batch dims broadcast, a 1-D a is a row and a 1-D b a column (dropped again).
// Also gives each element's sum of |a b|, which bounds the rounding error of any order of sums.
struct product {
  host_tensor value, magnitude;
};
product ref_matmul(const host_tensor& a, const host_tensor& b) {
  dims_t ad = a.dims, bd = b.dims;
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  const std::int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  dims_t ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  dims_t batch = ref::broadcast({ab, bb});
  dims_t out = batch;
  out.push_back(M);
  out.push_back(N);
  product p{{out, std::vector<double>(ref::count(out))},
            {out, std::vector<double>(ref::count(out))}};
  dims_t idx(batch.size());
  for (std::int64_t bi = 0; bi < ref::count(batch); ++bi) {
    for (std::int64_t r = bi, k = static_cast<std::int64_t>(batch.size()) - 1; k >= 0; --k) {
      idx[k] = r % batch[k];
      r /= batch[k];
    }
    const std::int64_t a0 = ref::source_index(ab, idx) * M * K,
                       b0 = ref::source_index(bb, idx) * K * N;
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        double s = 0, m = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          double t = a.v[a0 + i * K + k] * b.v[b0 + k * N + j];
          s += t;
          m += std::fabs(t);
        }
        p.value.v[(bi * M + i) * N + j] = s;
        p.magnitude.v[(bi * M + i) * N + j] = m;
      }
  }
  if (a.dims.size() == 1) p.value.dims.erase(p.value.dims.end() - 2);
  if (b.dims.size() == 1) p.value.dims.pop_back();
  p.magnitude.dims = p.value.dims;
  return p;
}

// matmul(a, b) of the given dims through the graph API, checked against the reference.
void check_matmul(const dims_t& ad, const dims_t& bd, unsigned seed) {
  SCOPED_TRACE(ref::dims_text(ad) + " x " + ref::dims_text(bd));
  host_tensor a = random_tensor(ad, seed), b = random_tensor(bd, seed + 1);
  product want = ref_matmul(a, b);
  kiln::graph g;
  auto av = g.input("a", dtype::f32, ref::to_shape(ad));  // declared in order
  auto bv = g.input("b", dtype::f32, ref::to_shape(bd));
  g.output("y", g.matmul(av, bv));
  auto e = kiln::compile(g);
  // A 1-D operand's dropped axis is a reshape of the product: a copy, for now.
  EXPECT_EQ(e.dispatch_count(), ad.size() > 1 && bd.size() > 1 ? 1 : 2);
  std::vector<float> a32 = floats(a), b32 = floats(b), y(want.value.v.size());
  e.run({view_of(a32, ad), view_of(b32, bd)}, {view_of(y, want.value.dims)});
  expect_within_bound(y, want.value.v, want.magnitude.v, ad.back(), "matmul");
}

TEST(Matmul, EverySizeClassAgainstTheReference) {
  // 1, 7: below a register tile; 63, 64, 65: around SIMD and block edges; 1000: several blocks.
  const std::int64_t sizes[] = {1, 7, 63, 64, 65, 1000};
  unsigned seed = 1;
  for (std::int64_t s : sizes) {
    check_matmul({s, 37}, {37, 29}, seed += 2);  // M
    check_matmul({23, 37}, {37, s}, seed += 2);  // N
    check_matmul({23, s}, {s, 29}, seed += 2);   // K
  }
  check_matmul({65, 300}, {300, 257}, 97);  // K across two blocks, N across two panels
  // K short of a block: column blocks wider than NC (three of 1696 here), several row blocks.
  check_matmul({300, 20}, {20, 5000}, 96);
  check_matmul({3, 0}, {0, 4}, 98);          // nothing to sum: zeros (ONNX, numpy)
  check_matmul({0, 5}, {5, 4}, 98);          // no rows
  check_matmul({256, 256}, {256, 256}, 99);  // enough work for every thread
}

TEST(Matmul, OneRowReadsBInPlaceWithTheGemmsBits) {
  // One row of A (a classifier's head, a decoder's step) streams B's rows where the GEMM would
  // pack B: against the reference, and bit for bit the first row of the GEMM's two-row product
  // (same sums in the same order) on the CPU. K across KC blocks of 256; N across column blocks
  // and threads, with a ragged last block.
  unsigned seed = 300;
  for (std::int64_t K : {1, 37, 300, 600})
    for (std::int64_t N : {1, 70, 1000, 1500}) {
      SCOPED_TRACE("K " + std::to_string(K) + ", N " + std::to_string(N));
      check_matmul({1, K}, {K, N}, seed += 2);
      host_tensor a = random_tensor({2, K}, seed), b = random_tensor({K, N}, seed + 1);
      std::vector<float> a32 = floats(a), b32 = floats(b);
      kiln::graph g;
      auto av = g.input("a", dtype::f32, {kiln::dyn, K});
      g.output("y", g.matmul(av, g.input("b", dtype::f32, {K, N})));
      auto e = kiln::compile(g);
      std::vector<float> one(N), two(2 * N);
      e.run({view_of(a32, {1, K}), view_of(b32, {K, N})}, {view_of(one, {1, N})},
            kiln::device::cpu());
      e.run({view_of(a32, {2, K}), view_of(b32, {K, N})}, {view_of(two, {2, N})},
            kiln::device::cpu());
      for (std::int64_t j = 0; j < N; ++j)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(one[j]), std::bit_cast<std::uint32_t>(two[j]))
            << "column " << j;
    }
  check_matmul({3, 1, 300}, {3, 300, 700}, 400);  // batched rows
  check_matmul({2, 1, 40}, {40, 90}, 402);        // rows of a batch over one B
}

// A constant B (a model's weights) is packed once per executable and read packed by every later
// call: bit for bit what the same product computes with B passed as an input, at the first call
// and later ones, from several threads at once. K across KC blocks with a short last one; N
// across column blocks with a ragged last panel; M one row block (each tile reads its blocks) and
// several (shared by the threads); a batched A over one B; B read through a transposed view and,
// in the same graph, directly; f16 weights (packed widened).
TEST(Matmul, ConstantWeightsArePackedOnceWithAnInputsBits) {
  struct shape_case {
    dims_t a;
    std::int64_t K, N;
    dtype weights;
  };
  unsigned seed = 500;
  for (const shape_case& c :
       {shape_case{{128, 300}, 300, 257, dtype::f32}, shape_case{{600, 520}, 520, 96, dtype::f32},
        shape_case{{3, 40, 64}, 64, 1000, dtype::f32}, shape_case{{70, 96}, 96, 96, dtype::f16}}) {
    SCOPED_TRACE(ref::dims_text(c.a) + " x " + std::to_string(c.K) + "x" + std::to_string(c.N));
    const std::int64_t K = c.K, N = c.N;
    host_tensor a = random_tensor(c.a, seed), w = random_tensor({K, N}, seed + 1);
    seed += 2;
    std::vector<float> a32 = floats(a), w32 = floats(w);
    std::vector<kiln::float16> w16;
    for (float v : w32) w16.push_back(kiln::float16(v));
    dims_t y_dims = c.a;
    y_dims.back() = N;
    // y = a x w, and where w is square also a x transpose(w). (f16 weights are widened first: a
    // cast of a constant, folded into an f32 constant.)
    auto build = [&](bool constant) {
      kiln::graph g;
      auto av = g.input("a", dtype::f32, ref::to_shape(c.a));
      kiln::graph::value wv = !constant                 ? g.input("w", c.weights, {K, N})
                              : c.weights == dtype::f16 ? g.constant(w16, {K, N})
                                                        : g.constant(w32, {K, N});
      if (c.weights != dtype::f32) wv = g.cast(wv, dtype::f32);
      g.output("y", g.matmul(av, wv));
      if (K == N) g.output("t", g.matmul(av, g.transpose(wv)));
      return kiln::compile(g);
    };
    auto from_input = build(false), from_constant = build(true);
    const std::size_t outputs = K == N ? 2 : 1, n = static_cast<std::size_t>(ref::count(y_dims));
    std::vector<std::vector<float>> want(outputs, std::vector<float>(n));
    std::vector<kiln::tensor_ref> want_refs;
    for (auto& v : want) want_refs.push_back(view_of(v, y_dims));
    const std::vector<kiln::tensor_ref> input_args{
        view_of(a32, c.a), c.weights == dtype::f16
                               ? kiln::tensor_ref(w16.data(), dtype::f16, kiln::shape{K, N})
                               : view_of(w32, {K, N})};
    from_input.run(input_args, want_refs, kiln::device::cpu());
    const std::vector<kiln::tensor_ref> constant_args{view_of(a32, c.a)};
    auto check = [&](int call) {
      std::vector<std::vector<float>> got(outputs, std::vector<float>(n));
      std::vector<kiln::tensor_ref> got_refs;
      for (auto& v : got) got_refs.push_back(view_of(v, y_dims));
      from_constant.run(constant_args, got_refs, kiln::device::cpu());
      for (std::size_t o = 0; o < outputs; ++o)
        for (std::size_t i = 0; i < n; ++i)
          if (std::bit_cast<std::uint32_t>(got[o][i]) != std::bit_cast<std::uint32_t>(want[o][i]))
            return ::testing::AssertionFailure()
                   << "call " << call << ", output " << o << ", element " << i << ": " << got[o][i]
                   << " against " << want[o][i];
      return ::testing::AssertionSuccess();
    };
    EXPECT_TRUE(check(0));
    EXPECT_TRUE(check(1));
    std::vector<std::thread> threads;
    std::vector<char> ok(4);
    for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { ok[t] = bool(check(2 + t)); });
    for (auto& t : threads) t.join();
    EXPECT_EQ(ok, std::vector<char>(4, 1));
    // And the product itself against the reference.
    if (c.weights == dtype::f32 && c.a.size() == 2) {
      product p = ref_matmul(a, w);
      expect_within_bound(want[0], p.value.v, p.magnitude.v, K, "matmul");
    }
  }
}

TEST(Matmul, BatchesBroadcastAndOneDimensionalOperandsAsNumpy) {
  const std::vector<std::pair<dims_t, dims_t>> cases = {{{2, 1, 5, 7}, {3, 7, 4}},
                                                        {{1, 5, 7}, {4, 7, 3}},
                                                        {{3, 5, 7}, {3, 7, 6}},
                                                        {{7}, {7, 4}},
                                                        {{5, 7}, {7}},
                                                        {{7}, {7}},
                                                        {{3, 5, 7}, {7}},
                                                        {{7}, {2, 7, 3}},
                                                        {{2, 3, 1, 5, 9}, {9, 2}}};
  unsigned seed = 200;
  for (const auto& [ad, bd] : cases) check_matmul(ad, bd, seed += 2);
}

TEST(Matmul, GemmTransposesScalesAndBroadcastsC) {
  const std::int64_t M = 19, K = 33, N = 21;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const dims_t& cd : std::vector<dims_t>{{}, {N}, {M, 1}, {M, N}}) {
        SCOPED_TRACE(std::string(ta ? "A^T " : "A ") + (tb ? "B^T " : "B ") + ref::dims_text(cd));
        const double alpha = 0.75, beta = -1.5;
        dims_t ad = ta ? dims_t{K, M} : dims_t{M, K}, bd = tb ? dims_t{N, K} : dims_t{K, N};
        host_tensor a = random_tensor(ad, 300), b = random_tensor(bd, 301),
                    c = random_tensor(cd, 302);
        std::vector<double> want(M * N), magnitude(M * N);
        for (std::int64_t i = 0; i < M; ++i)
          for (std::int64_t j = 0; j < N; ++j) {
            double s = 0, m = 0;
            for (std::int64_t k = 0; k < K; ++k) {
              double t = a.v[ta ? k * M + i : i * K + k] * b.v[tb ? j * K + k : k * N + j];
              s += t;
              m += std::fabs(t);
            }
            double cv = c.v[ref::source_index(cd, {i, j})];
            want[i * N + j] = alpha * s + beta * cv;
            magnitude[i * N + j] = alpha * m + std::fabs(beta * cv);
          }
        kiln::graph g;
        auto av = g.input("a", dtype::f32, ref::to_shape(ad));
        auto bv = g.input("b", dtype::f32, ref::to_shape(bd));
        auto cv = g.input("c", dtype::f32, ref::to_shape(cd));
        g.output("y", g.gemm(av, bv, cv, alpha, beta, ta, tb));
        auto e = kiln::compile(g);
        EXPECT_EQ(e.dispatch_count(), 1);  // transposes read in place, the rest an epilogue
        EXPECT_EQ(e.plan().transient_bytes(), 0);
        std::vector<float> a32 = floats(a), b32 = floats(b), c32 = floats(c), y(M * N);
        e.run({view_of(a32, ad), view_of(b32, bd), view_of(c32, cd)}, {view_of(y, {M, N})});
        expect_within_bound(y, want, magnitude, K, "gemm");
      }
}

double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

kiln::graph::value gelu(kiln::graph& g, kiln::graph::value x) {
  using kiln::ir::op;
  auto half = g.constant(0.5), one = g.constant(1.0), root = g.constant(1 / std::sqrt(2.0));
  return g.apply(op::mul,
                 {g.apply(op::mul, {half, x}),
                  g.apply(op::add, {one, g.apply(op::erf, {g.apply(op::mul, {x, root})})})});
}

TEST(Matmul, EpiloguesReadViewsAndGathersOnEachTile) {
  // y = gelu(x w + bias) + x + transpose(r) + table[idx]: every consumer of the product runs on
  // its tiles, reading the residual in place, the transposed matrix with strides and the gathered
  // rows through their positions.
  const std::int64_t M = 130, K = 70, N = 70, V = 9;
  host_tensor x = random_tensor({M, K}, 400), w = random_tensor({K, N}, 401),
              bias = random_tensor({N}, 402), r = random_tensor({N, M}, 403),
              table = random_tensor({V, N}, 404);
  std::vector<std::int64_t> idx(M);
  for (std::int64_t i = 0; i < M; ++i) idx[i] = (i * 5) % V - (i % 2 ? V : 0);  // negative too
  product xw = ref_matmul(x, w);
  std::vector<double> want(M * N), magnitude(M * N);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      std::int64_t row = idx[i] < 0 ? idx[i] + V : idx[i];
      double z = xw.value.v[i * N + j] + bias.v[j];
      want[i * N + j] = gelu(z) + x.v[i * K + j] + r.v[j * M + i] + table.v[row * N + j];
      magnitude[i * N + j] = 2 * (xw.magnitude.v[i * N + j] + std::fabs(bias.v[j])) + 8;
    }
  kiln::graph g;
  auto xv = g.input("x", dtype::f32, {M, K});
  auto wv = g.input("w", dtype::f32, {K, N});
  auto bv = g.input("bias", dtype::f32, {N});
  auto rv = g.input("r", dtype::f32, {N, M});
  auto tv = g.input("table", dtype::f32, {V, N});
  auto iv = g.input("idx", dtype::i64, {M});
  using kiln::ir::op;
  auto h = gelu(g, g.apply(op::add, {g.matmul(xv, wv), bv}));
  g.output("y", g.apply(op::add, {g.apply(op::add, {g.apply(op::add, {h, xv}), g.transpose(rv)}),
                                  g.gather(tv, iv, 0)}));
  auto e = kiln::compile(g);
  EXPECT_EQ(e.dispatch_count(), 1) << kiln::compiler::print(e.plan());
  EXPECT_EQ(e.plan().transient_bytes(), 0);
  std::vector<float> x32 = floats(x), w32 = floats(w), b32 = floats(bias), r32 = floats(r),
                     t32 = floats(table), y(M * N);
  e.run({view_of(x32, {M, K}), view_of(w32, {K, N}), kiln::view(b32.data(), {N}),
         view_of(r32, {N, M}), view_of(t32, {V, N}), kiln::view(idx.data(), {M})},
        {view_of(y, {M, N})});
  expect_within_bound(y, want, magnitude, K, "epilogue");
}

TEST(Matmul, ARootOrAnotherContractionReadsItMaterialized) {
  // Attention scores: softmax(q k^T / 8) over the keys: the product is materialized for the
  // softmax's row group. And an MLP: matmul -> gelu -> matmul, two dispatches, one transient.
  const std::int64_t T = 37, D = 16, H = 48;
  host_tensor q = random_tensor({T, D}, 500), k = random_tensor({T, D}, 501),
              w1 = random_tensor({D, H}, 502), w2 = random_tensor({H, D}, 503);
  kiln::graph g;
  auto qv = g.input("q", dtype::f32, {T, D});
  auto kv = g.input("k", dtype::f32, {T, D});
  // Inputs the attention never reads (a graph may take them; the call passes them).
  g.input("w1", dtype::f32, {D, H});
  g.input("w2", dtype::f32, {H, D});
  using kiln::ir::op;
  g.output("attention",
           g.softmax(g.apply(op::mul, {g.matmul(qv, g.transpose(kv)), g.constant(0.125)}), -1));
  auto e = kiln::compile(g);
  kiln::graph mlp;
  auto xv = mlp.input("x", dtype::f32, {T, D});
  auto m1 = mlp.input("w1", dtype::f32, {D, H});
  auto m2 = mlp.input("w2", dtype::f32, {H, D});
  mlp.output("y", mlp.matmul(gelu(mlp, mlp.matmul(xv, m1)), m2));
  auto m = kiln::compile(mlp);
  EXPECT_EQ(m.dispatch_count(), 2) << kiln::compiler::print(m.plan());
  EXPECT_EQ(m.plan().transients.size(), 1u);
  EXPECT_EQ(m.plan().transient_bytes(), (T * H * 4 + 255) / 256 * 256);  // the arena aligns it

  std::vector<float> q32 = floats(q), k32 = floats(k), w132 = floats(w1), w232 = floats(w2);
  std::vector<float> att(T * T), y(T * D);
  e.run({view_of(q32, {T, D}), view_of(k32, {T, D}), view_of(w132, {D, H}), view_of(w232, {H, D})},
        {view_of(att, {T, T})});
  m.run({view_of(q32, {T, D}), view_of(w132, {D, H}), view_of(w232, {H, D})}, {view_of(y, {T, D})});
  host_tensor kt{{D, T}, std::vector<double>(T * D)};
  for (std::int64_t i = 0; i < T; ++i)
    for (std::int64_t j = 0; j < D; ++j) kt.v[j * T + i] = k.v[i * D + j];
  product s = ref_matmul(q, kt);
  std::vector<double> want(T * T);
  for (std::int64_t i = 0; i < T; ++i) {
    double top = -INFINITY, sum = 0;
    for (std::int64_t j = 0; j < T; ++j) top = std::max(top, s.value.v[i * T + j] / 8);
    for (std::int64_t j = 0; j < T; ++j) sum += std::exp(s.value.v[i * T + j] / 8 - top);
    for (std::int64_t j = 0; j < T; ++j)
      want[i * T + j] = std::exp(s.value.v[i * T + j] / 8 - top) / sum;
  }
  ref::expect_near(att, want, {1e-5, 1e-6}, "attention");
  product h = ref_matmul(q, w1);
  for (double& v : h.value.v) v = gelu(v);
  product out = ref_matmul(h.value, w2);
  // The hidden values are rounded to f32 once more than the reference's: a relative 2^-23 of
  // each hidden value, times |w2|, on top of the second product's own bound.
  expect_within_bound(y, out.value.v, out.magnitude.v, H + 4 * D, "mlp");
}

TEST(Matmul, AnEpilogueValueARootReadsIsWrittenOnceByTheProduct) {
  // A squeeze-excite's shape: h = relu(x w + b), read by a mean over its rows and by h * mean.
  // The product's region writes h; the mean and the scaling load it (neither evaluates the bias
  // and relu again). Where the epilogue also gives another result (x w * 2), the product itself
  // is what its region writes, and its readers evaluate h from it.
  const std::int64_t M = 23, K = 19, N = 40;
  host_tensor x = random_tensor({M, K}, 510), w = random_tensor({K, N}, 511),
              b = random_tensor({N}, 512);
  using kiln::ir::op;
  auto build = [&](bool second_result) {
    kiln::graph g;
    auto xv = g.input("x", dtype::f32, {M, K});
    auto wv = g.input("w", dtype::f32, {K, N});
    auto bv = g.input("b", dtype::f32, {N});
    auto s = g.matmul(xv, wv);
    auto h = g.apply(op::relu, {g.apply(op::add, {s, bv})});
    auto pooled = g.reduce(op::reduce_mean, h, {1});
    g.output("pooled", pooled);
    g.output("scaled", g.apply(op::mul, {h, pooled}));
    if (second_result) g.output("doubled", g.apply(op::mul, {s, g.constant(2.0)}));
    return kiln::compile(g);
  };
  product p = ref_matmul(x, w);
  std::vector<double> h(M * N), pooled(M, 0.0), scaled(M * N), doubled(M * N);
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      h[i * N + j] = std::max(p.value.v[i * N + j] + b.v[j], 0.0);
      pooled[i] += h[i * N + j] / N;
      doubled[i * N + j] = 2 * p.value.v[i * N + j];
    }
    for (std::int64_t j = 0; j < N; ++j) scaled[i * N + j] = h[i * N + j] * pooled[i];
  }
  std::vector<float> x32 = floats(x), w32 = floats(w), b32 = floats(b);
  for (bool second_result : {false, true}) {
    SCOPED_TRACE(second_result ? "the epilogue gives another result" : "one epilogue value");
    auto e = build(second_result);
    const auto& plan = e.plan();
    for (const auto& r : plan.regions) {
      if (r.contraction >= 0) {
        ASSERT_EQ(r.writes.size(), 1u) << kiln::compiler::print(plan);
        EXPECT_EQ(plan.graph.nodes[plan.transients[r.writes[0]]].kind,
                  second_result ? op::matmul : op::relu)
            << kiln::compiler::print(plan);
      } else if (!second_result) {  // loads of h (and of the mean), and the region's own op
        for (auto id : r.nodes)
          EXPECT_NE(plan.graph.nodes[id].kind, op::add) << kiln::compiler::print(plan);
      }
    }
    std::vector<float> got_pooled(M), got_scaled(M * N), got_doubled(M * N);
    std::vector<kiln::tensor_ref> outs{view_of(got_pooled, {M, 1}), view_of(got_scaled, {M, N})};
    if (second_result) outs.push_back(view_of(got_doubled, {M, N}));
    const std::vector<kiln::tensor_ref> ins{view_of(x32, {M, K}), view_of(w32, {K, N}),
                                            kiln::view(b32.data(), {N})};
    e.run(ins, outs);
    ref::expect_near(got_pooled, pooled, {1e-5, 1e-5}, "pooled");
    ref::expect_near(got_scaled, scaled, {1e-5, 1e-5}, "scaled");
    if (second_result) expect_within_bound(got_doubled, doubled, p.magnitude.v, K, "doubled");
  }
}

TEST(Matmul, AContractionIsADispatchOfItsOwnBesideARowGroup) {
  // A softmax's row group and a product over the same dims: the product's region never joins
  // the group (a group runs its regions a block of rows at a time; a contraction runs by tiles).
  const std::int64_t R = 6, C = 8, K = 5;
  host_tensor x = random_tensor({R, C}, 800), a = random_tensor({R, K}, 801),
              w = random_tensor({K, C}, 802);
  kiln::graph g;
  auto xv = g.input("x", dtype::f32, {R, C});
  auto av = g.input("a", dtype::f32, {R, K});
  auto wv = g.input("w", dtype::f32, {K, C});
  g.output("s", g.softmax(xv, -1));
  g.output("m", g.matmul(av, wv));
  auto e = kiln::compile(g);
  for (const auto& r : e.plan().regions) {
    if (r.contraction < 0) continue;
    for (const auto& other : e.plan().regions)
      EXPECT_TRUE(&other == &r || other.group != r.group) << kiln::compiler::print(e.plan());
  }
  std::vector<float> x32 = floats(x), a32 = floats(a), w32 = floats(w), s(R * C), m(R * C);
  e.run({view_of(x32, {R, C}), view_of(a32, {R, K}), view_of(w32, {K, C})},
        {view_of(s, {R, C}), view_of(m, {R, C})});
  product p = ref_matmul(a, w);
  expect_within_bound(m, p.value.v, p.magnitude.v, K, "matmul");
  std::vector<double> want(R * C);
  for (std::int64_t i = 0; i < R; ++i) {
    double top = -INFINITY, sum = 0;
    for (std::int64_t j = 0; j < C; ++j) top = std::max(top, x.v[i * C + j]);
    for (std::int64_t j = 0; j < C; ++j) sum += std::exp(x.v[i * C + j] - top);
    for (std::int64_t j = 0; j < C; ++j) want[i * C + j] = std::exp(x.v[i * C + j] - top) / sum;
  }
  ref::expect_near(s, want, {1e-5, 1e-6}, "softmax");
}

TEST(Matmul, TheDslDoorFusesAndPlansAtCompileTime) {
  constexpr std::int64_t M = 67, K = 40, H = 72, N = 40;
  static constexpr auto dense =
      kiln::fn<tensor<float, M, K>, tensor<float, K, H>, tensor<float, H>>(
          [](auto x, auto w, auto b) { return relu(matmul(x, w) + b); });
  static_assert(dense.plan.dispatch_count() == 1 && dense.plan.transient_bytes() == 0);
  static constexpr auto mlp =
      kiln::fn<tensor<float, M, K>, tensor<float, K, H>, tensor<float, H, N>>(
          [](auto x, auto w1, auto w2) { return matmul(tanh(matmul(x, w1)), w2) + x; });
  static_assert(mlp.plan.dispatch_count() == 2 &&
                mlp.plan.transient_bytes() == (M * H * 4 + 255) / 256 * 256);  // aligned

  host_tensor x = random_tensor({M, K}, 600), w1 = random_tensor({K, H}, 601),
              b = random_tensor({H}, 602), w2 = random_tensor({H, N}, 603);
  std::vector<float> x32 = floats(x), w132 = floats(w1), b32 = floats(b), w232 = floats(w2);
  std::vector<float> y1(M * H), y2(M * N);
  dense(x32, w132, b32, kiln::into(y1));
  mlp(x32, w132, w232, kiln::into(y2));
  product p = ref_matmul(x, w1);
  std::vector<double> want1(M * H), mag1(M * H);
  for (std::int64_t i = 0; i < M * H; ++i) {
    want1[i] = std::max(p.value.v[i] + b.v[i % H], 0.0);
    mag1[i] = p.magnitude.v[i] + std::fabs(b.v[i % H]);
  }
  expect_within_bound(y1, want1, mag1, K, "dense");
  for (double& v : p.value.v) v = std::tanh(v);
  product q = ref_matmul(p.value, w2);
  for (std::int64_t i = 0; i < M * N; ++i) q.value.v[i] += x.v[i];
  expect_within_bound(y2, q.value.v, q.magnitude.v, H + 4 * K + 8, "mlp");
}

TEST(Matmul, WideAndNarrowFloats) {
  // f64 accumulates in f64; f16 and bf16 in f32, rounded once to their type at the end.
  const std::int64_t M = 33, K = 70, N = 45;
  host_tensor a = random_tensor({M, K}, 700), b = random_tensor({K, N}, 701);
  auto run_as = [&](dtype t) {
    kiln::graph g;
    auto av = g.input("a", t, {M, K});
    auto bv = g.input("b", t, {K, N});
    g.output("y", g.matmul(av, bv));
    auto e = kiln::compile(g);
    auto ab = ref::bytes_of(t, a.v), bb = ref::bytes_of(t, b.v);
    std::vector<unsigned char> y(M * N * kiln::size_in_bytes(t) + 1);
    e.run({kiln::tensor_ref(static_cast<const void*>(ab.data()), t, {M, K}),
           kiln::tensor_ref(static_cast<const void*>(bb.data()), t, {K, N})},
          {kiln::tensor_ref(static_cast<void*>(y.data()), t, {M, N})});
    // The reference multiplies the operands as the type holds them.
    host_tensor ar{a.dims, {}}, br{b.dims, {}};
    for (std::size_t i = 0; i < a.v.size(); ++i) ar.v.push_back(ref::value_at(ab, t, i));
    for (std::size_t i = 0; i < b.v.size(); ++i) br.v.push_back(ref::value_at(bb, t, i));
    product p = ref_matmul(ar, br);
    const double u = t == dtype::f64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
    const double out_u = t == dtype::f16    ? std::ldexp(1.0, -11)
                         : t == dtype::bf16 ? std::ldexp(1.0, -8)
                                            : u;
    int bad = 0;
    for (std::int64_t i = 0; i < M * N && bad < 5; ++i) {
      double got = ref::value_at(y, t, i), want = p.value.v[i];
      double bound = double(K + 2) * u * p.magnitude.v[i] + out_u * std::fabs(want) + 1e-300;
      if (!(std::fabs(got - want) <= bound)) {
        ++bad;
        ADD_FAILURE() << kiln::name(t) << " element " << i << ": " << got << " vs " << want;
      }
    }
  };
  for (dtype t : {dtype::f64, dtype::f16, dtype::bf16}) run_as(t);
}

TEST(Matmul, IntegerProductsWithZeroPointsAreExact) {
  // ONNX MatMulInteger: u8 and i8 operands less their zero points (scalars, per row of a, per
  // column of b), summed in i32: every result exact.
  for (auto [M, K, N] : {std::array<std::int64_t, 3>{1, 1, 1}, {7, 63, 65}, {65, 300, 33}}) {
    SCOPED_TRACE(std::to_string(M) + " x " + std::to_string(K) + " x " + std::to_string(N));
    std::vector<std::uint8_t> a(M * K), a_zero(M);
    std::vector<std::int8_t> b(K * N), b_zero(N);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(i * 37 % 256);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::int8_t>(i * 91 % 256 - 128);
    for (std::size_t i = 0; i < a_zero.size(); ++i) a_zero[i] = static_cast<std::uint8_t>(i * 13);
    for (std::size_t i = 0; i < b_zero.size(); ++i)
      b_zero[i] = static_cast<std::int8_t>(i * 7 % 50 - 25);
    for (bool per_row : {false, true}) {
      kiln::graph g;
      auto av = g.input("a", dtype::u8, {M, K});
      auto bv = g.input("b", dtype::i8, {K, N});
      auto az = g.input("a_zero", dtype::u8, per_row ? kiln::shape{M} : kiln::shape{});
      auto bz = g.input("b_zero", dtype::i8, per_row ? kiln::shape{N} : kiln::shape{});
      g.output("y", g.matmul_integer(av, bv, az, bz));
      auto e = kiln::compile(g);
      std::vector<std::int32_t> y(M * N);
      e.run({kiln::view(a.data(), {M, K}), kiln::view(b.data(), {K, N}),
             kiln::tensor_ref(static_cast<const void*>(a_zero.data()), dtype::u8,
                              per_row ? kiln::shape{M} : kiln::shape{}),
             kiln::tensor_ref(static_cast<const void*>(b_zero.data()), dtype::i8,
                              per_row ? kiln::shape{N} : kiln::shape{})},
            {kiln::view(y.data(), {M, N})});
      int bad = 0;
      for (std::int64_t i = 0; i < M && bad < 5; ++i)
        for (std::int64_t j = 0; j < N && bad < 5; ++j) {
          std::int64_t want = 0;
          for (std::int64_t k = 0; k < K; ++k)
            want += (std::int64_t{a[i * K + k]} - a_zero[per_row ? i : 0]) *
                    (std::int64_t{b[k * N + j]} - b_zero[per_row ? j : 0]);
          if (y[i * N + j] != want) {
            ++bad;
            ADD_FAILURE() << "element (" << i << ", " << j << "): " << y[i * N + j] << " vs "
                          << want << (per_row ? " (per-row zero points)" : "");
          }
        }
    }
  }
  // Without zero points; and operands that are not u8 / i8.
  kiln::graph g;
  auto a = g.input("a", dtype::i8, {2, 3});
  auto b = g.input("b", dtype::u8, {3, 2});
  g.output("y", g.matmul_integer(a, b));
  auto e = kiln::compile(g);
  std::int8_t av[] = {-128, 127, -1, 5, 0, 3};
  std::uint8_t bv[] = {255, 0, 1, 2, 254, 7};
  std::int32_t y[4];
  e.run({kiln::view(av, {2, 3}), kiln::view(bv, {3, 2})}, {kiln::view(y, {2, 2})});
  // Worked by hand: rows (-128, 127, -1) and (5, 0, 3) by columns (255, 1, 254) and (0, 2, 7).
  EXPECT_EQ(y[0], -128 * 255 + 127 * 1 - 254);
  EXPECT_EQ(y[1], 254 - 7);
  EXPECT_EQ(y[2], 5 * 255 + 3 * 254);
  EXPECT_EQ(y[3], 21);
  kiln::graph bad;
  auto f = bad.input("f", dtype::f32, {2, 2});
  try {
    bad.matmul_integer(f, f);
    ADD_FAILURE() << "no error";
  } catch (const kiln::error& err) {
    EXPECT_THAT(err.what(), testing::HasSubstr("not u8 or i8"));
  }
}

// A K known only at the call: two run-time sizes (both doors), a run-time size against a static
// one, a batched product; every size class through one compiled function, and a call whose Ks
// differ refused naming both arguments' axes.
TEST(Matmul, ContractedSizesKnownAtTheCall) {
  using kiln::dyn;
  static constexpr auto dense =
      kiln::fn<tensor<float, dyn, dyn>, tensor<float, dyn, dyn>, tensor<float, dyn>>(
          [](auto a, auto b, auto bias) { return relu(matmul(a, b) + bias); });
  static constexpr auto against_static = kiln::fn<tensor<float, dyn, dyn>, tensor<float, 24, 5>>(
      [](auto a, auto w) { return matmul(a, w); });
  kiln::graph g;
  auto ga = g.input("a", dtype::f32, {dyn, dyn, dyn});
  auto gb = g.input("b", dtype::f32, {dyn, dyn});
  g.output("y", g.matmul(ga, gb));
  auto batched = kiln::compile(g);
  unsigned seed = 700;
  for (auto [m, k, n] :
       {std::array<std::int64_t, 3>{1, 1, 1}, {3, 5, 4}, {7, 300, 9}, {67, 40, 33}}) {
    SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(k) + " x " + std::to_string(n));
    host_tensor a = random_tensor({m, k}, seed++), b = random_tensor({k, n}, seed++),
                bias = random_tensor({n}, seed++);
    std::vector<float> a32 = floats(a), b32 = floats(b), bias32 = floats(bias), y(m * n);
    dense(view_of(a32, {m, k}), view_of(b32, {k, n}), view_of(bias32, {n}),
          kiln::into(view_of(y, {m, n})));
    product p = ref_matmul(a, b);
    for (std::int64_t i = 0; i < m * n; ++i) {
      p.value.v[i] = std::max(p.value.v[i] + bias.v[i % n], 0.0);
      p.magnitude.v[i] += std::fabs(bias.v[i % n]);
    }
    expect_within_bound(y, p.value.v, p.magnitude.v, k + 1, "dsl");
    // The same a as two batches of [m, k / 2] where k is even, through the graph door.
    if (k % 2 == 0) {
      host_tensor halves = a;
      halves.dims = {2, m, k / 2};
      for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < k / 2; ++j)
            halves.v[(h * m + i) * (k / 2) + j] = a.v[i * k + h * (k / 2) + j];
      host_tensor top = random_tensor({k / 2, n}, seed++);
      std::vector<float> h32 = floats(halves), t32 = floats(top), z(2 * m * n);
      batched.run({view_of(h32, {2, m, k / 2}), view_of(t32, {k / 2, n})}, {view_of(z, {2, m, n})});
      product q = ref_matmul(halves, top);
      expect_within_bound(z, q.value.v, q.magnitude.v, k / 2, "graph");
    }
  }
  host_tensor a = random_tensor({6, 24}, 720), w = random_tensor({24, 5}, 721);
  std::vector<float> a32 = floats(a), w32 = floats(w), y(30);
  against_static(view_of(a32, {6, 24}), w32, kiln::into(view_of(y, {6, 5})));
  product p = ref_matmul(a, w);
  expect_within_bound(y, p.value.v, p.magnitude.v, 24, "against a static K");

  auto message = [](auto&& call) { return ref::error_message(call); };
  std::vector<float> a35(15), b45(20), bias5(5), out(15);
  EXPECT_THAT(message([&] {
                dense(view_of(a35, {3, 5}), view_of(b45, {4, 5}), view_of(bias5, {5}),
                      kiln::into(view_of(out, {3, 5})));
              }),
              testing::AllOf(testing::HasSubstr("argument 1 axis 1 (size 5)"),
                             testing::HasSubstr("argument 2 axis 0 (size 4)"),
                             testing::HasSubstr("must be equal: matmul contracts them")));
  std::vector<float> a623(6 * 23), y65(30);
  EXPECT_THAT(message([&] {
                against_static(view_of(a623, {6, 23}), w32, kiln::into(view_of(y65, {6, 5})));
              }),
              testing::HasSubstr("argument 1 axis 1 has size 23, but matmul contracts it with a "
                                 "size of 24"));
  // A module keeps the checks: saved and loaded, it runs and refuses as the function did.
  const std::string file = testing::TempDir() + "kiln_contracted_k.kiln";
  against_static.save(file);
  auto loaded = kiln::executable::load(file);
  std::remove(file.c_str());
  std::vector<float> again(30);
  loaded.run({view_of(a32, {6, 24}), view_of(w32, {24, 5})}, {view_of(again, {6, 5})});
  EXPECT_EQ(again, y);
  EXPECT_THAT(message([&] {
                loaded.run({view_of(a623, {6, 23}), view_of(w32, {24, 5})}, {view_of(y65, {6, 5})});
              }),
              testing::HasSubstr("has size 23, but matmul contracts it with a size of 24"));
  auto batched_again = kiln::executable::from_bytes(batched.to_bytes());
  std::vector<float> h(2 * 3 * 4), t(5 * 2), z(2 * 3 * 2);
  EXPECT_THAT(
      message([&] {
        batched_again.run({view_of(h, {2, 3, 4}), view_of(t, {5, 2})}, {view_of(z, {2, 3, 2})});
      }),
      testing::HasSubstr("must be equal: matmul contracts them"));
}

TEST(Matmul, MistakesNameTheOpAndTheSizes) {
  kiln::graph g;
  auto a = g.input("a", dtype::f32, {4, 5});
  auto b = g.input("b", dtype::f32, {6, 3});
  auto i = g.input("i", dtype::i32, {5, 3});
  auto s = g.input("s", dtype::f32, {});
  auto message = [](auto&& call) { return ref::error_message(call); };
  EXPECT_THAT(message([&] { g.matmul(a, b); }),
              testing::AllOf(testing::HasSubstr("matmul"), testing::HasSubstr("[4, 5]"),
                             testing::HasSubstr("[6, 3]"), testing::HasSubstr("5 columns")));
  EXPECT_THAT(message([&] { g.matmul(a, i); }), testing::HasSubstr("operand types differ"));
  EXPECT_THAT(message([&] { g.matmul(s, a); }), testing::HasSubstr("scalar"));
  EXPECT_THAT(message([&] {
                g.matmul(g.input("x", dtype::i16, {2, 5}), g.input("z", dtype::i16, {5, 3}));
              }),
              testing::HasSubstr("integer products are of i32"));
  EXPECT_THAT(message([&] { g.gemm(g.input("v", dtype::f32, {5}), a); }),
              testing::HasSubstr("not a matrix"));
}

}  // namespace
