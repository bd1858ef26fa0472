// The CPU kernels' instruction sets (runtime/cpu/kernels.hpp): the runtime library holds one table
// per x86-64 level, uses the widest this CPU runs (checked against the CPU's features, read here
// feature by feature), takes KILN_CPU_ISA's by name or refuses it naming what there is, and every
// set this CPU runs computes the same product as a scalar loop.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <kiln/kiln.hpp>
#include <kiln/runtime/cpu/kernels.hpp>

namespace {

using kiln::cpu::built_kernel;
using kiln::cpu::kernel_table;

// The widest level this CPU runs, from its features one by one (not from the runtime's check).
std::string widest_level_of_this_cpu() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                  __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("avx");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return v4 ? "avx512" : v3 ? "avx2" : "sse2";
#else
  return "";
#endif
}

std::string error_of(const char* requested, const std::vector<built_kernel>& built) {
  try {
    kiln::cpu::choose_kernels(requested, built);
  } catch (const kiln::error& e) {
    return e.what();
  }
  return "";
}

TEST(CpuKernels, TheLibraryHoldsEveryX86Level) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  std::vector<std::string> levels;
  for (const built_kernel& k : kiln::cpu::built_kernels()) levels.push_back(k.table->level);
  EXPECT_EQ(levels, (std::vector<std::string>{"sse2", "avx2", "avx512"}));
#else
  GTEST_SKIP() << "the per-level objects are built on x86-64 with GCC";
#endif
}

TEST(CpuKernels, TheChosenSetIsTheWidestThisCpuRunsOrTheOneAskedFor) {
  const kernel_table& chosen = kiln::cpu::chosen_kernels();
  EXPECT_STREQ(kiln::cpu::runtime_isa(), chosen.isa);
  const char* requested = std::getenv("KILN_CPU_ISA");
  if (requested && *requested) {
    EXPECT_STREQ(chosen.level, requested);
    return;
  }
  const std::string widest = widest_level_of_this_cpu();
  if (widest.empty()) GTEST_SKIP() << "not x86-64";
  EXPECT_EQ(chosen.level, widest);
  for (const built_kernel& k : kiln::cpu::built_kernels())
    if (std::string(k.table->level) == widest) {
      EXPECT_TRUE(k.runs);
      EXPECT_EQ(k.table, &chosen);
    }
}

TEST(CpuKernels, ARequestIsTakenByNameOrRefusedNamingWhatThereIs) {
  const std::vector<built_kernel> built = kiln::cpu::built_kernels();
  EXPECT_EQ(&kiln::cpu::choose_kernels(built.front().table->level, built), built.front().table);
  std::string unknown = error_of("avx9", built);
  EXPECT_NE(unknown.find("KILN_CPU_ISA"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("'avx9'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find(std::string("built: ") + built.front().table->level), std::string::npos)
      << unknown;
  // A set this CPU cannot run: the last one, as if the CPU lacked it.
  std::vector<built_kernel> lacking = built;
  lacking.push_back({built.back().table, false});
  lacking.erase(lacking.end() - 2);
  if (lacking.size() > 1) {
    std::string refused = error_of(lacking.back().table->level, lacking);
    EXPECT_NE(refused.find("this CPU cannot run"), std::string::npos) << refused;
    // Unset: the widest it runs, which is now the one before.
    EXPECT_EQ(&kiln::cpu::choose_kernels(nullptr, lacking), lacking[lacking.size() - 2].table);
    EXPECT_EQ(&kiln::cpu::choose_kernels("", lacking), lacking[lacking.size() - 2].table);
  }
}

// C = A x B through one table's GEMM, f32, over sizes that leave partial register tiles and
// several KC blocks.
std::vector<float> product(const kernel_table& k, const std::vector<float>& a,
                           const std::vector<float>& b, std::int64_t m, std::int64_t n,
                           std::int64_t kk) {
  kiln::cpu::matmul_operand x, y;
  x.dims = kiln::shape{m, kk};
  x.layout.data = reinterpret_cast<const unsigned char*>(a.data());
  x.layout.bytes = 4;
  x.layout.stride[0] = kk;
  x.layout.stride[1] = 1;
  y.dims = kiln::shape{kk, n};
  y.layout.data = reinterpret_cast<const unsigned char*>(b.data());
  y.layout.bytes = 4;
  y.layout.stride[0] = n;
  y.layout.stride[1] = 1;
  std::vector<float> c(m * n, NAN);
  auto store = [&](const kiln::cpu::finished_tile& t) {
    const float* tile = static_cast<const float*>(t.tile);
    for (std::int64_t i = 0; i < t.rows; ++i)
      for (std::int64_t j = 0; j < t.cols; ++j) c[(t.row + i) * n + t.col + j] = tile[i * t.ld + j];
  };
  k.run_matmul(kiln::dtype::f32, x, y, store);
  return c;
}

TEST(CpuKernels, EverySetThisCpuRunsMultipliesAsAScalarLoopDoes) {
  const std::int64_t m = 67, n = 45, kk = 600;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(m * kk), b(kk * n);
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  for (const built_kernel& k : kiln::cpu::built_kernels()) {
    if (!k.runs) continue;
    const std::vector<float> c = product(*k.table, a, b, m, n, kk);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double want = 0, magnitude = 0;
        for (std::int64_t p = 0; p < kk; ++p) {
          want += double(a[i * kk + p]) * b[p * n + j];
          magnitude += std::fabs(double(a[i * kk + p]) * b[p * n + j]);
        }
        ASSERT_NEAR(c[i * n + j], want, 1e-6 * magnitude + 1e-6)
            << k.table->level << " C[" << i << "][" << j << "]";
      }
  }
}

}  // namespace
