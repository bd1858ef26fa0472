// What a Vulkan device can run, as codegen and region formation need it: read from the device by
// the runtime, written here without Vulkan types so codegen stays free of the Vulkan headers.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "kiln/core/hash.hpp"

namespace kiln::spirv {

struct target {
  std::uint32_t vulkan_version = 0x00401000;  // VK_API_VERSION_1_1 and up: SPIR-V 1.3 accepted
  std::uint32_t subgroup_size = 32;
  std::uint32_t max_workgroup_size_x = 128;  // maxComputeWorkGroupSize[0] (and invocations)
  std::uint32_t max_workgroup_count_x = 65535;
  std::uint32_t max_workgroup_count_y = 65535, max_workgroup_count_z = 65535;
  std::uint32_t shared_memory_bytes = 16384;
  std::uint32_t max_storage_buffers = 4;  // maxPerStageDescriptorStorageBuffers
  std::uint32_t push_constant_bytes = 128;
  std::uint64_t max_storage_buffer_range = 1u << 27;
  bool float64 = false;  // shaderFloat64
  bool int64 = false;    // shaderInt64
  bool int16 = false;    // shaderInt16 (not needed: narrow types travel in 32-bit words)
  // Subgroup operations in compute shaders: basic and arithmetic (Vulkan 1.1's
  // subgroupSupportedOperations and subgroupSupportedStages). Reductions then join a workgroup's
  // partials within each subgroup first, and only the subgroups' totals through shared memory.
  bool subgroup_arithmetic = false;
  // shaderSignedZeroInfNanPreserveFloat32/64 (float controls, Vulkan 1.2): kernels then declare
  // that inf, NaN and -0 must survive, which stops drivers from assuming finite math.
  bool preserve_inf_nan32 = false;
  bool preserve_inf_nan64 = false;
  // shaderDenormPreserveFloat32/64: kernels then keep subnormal operands and results, which GPUs
  // otherwise flush to zero (NVIDIA's do: exp(-100) came out 0, 1 / 3e-39 inf). Under
  // denormBehaviorIndependence the widths' modes are tied: denorm_widths says which may differ
  // (2: all, 1: 32-bit alone, 0: none, so kiln declares no mode).
  bool denorm_preserve32 = false;
  bool denorm_preserve64 = false;
  std::uint32_t denorm_widths = 0;
  bool cpu_device = false;  // VK_PHYSICAL_DEVICE_TYPE_CPU (lavapipe, SwiftShader)
  // VK_NV_cooperative_matrix with shaderFloat16: the shape of the subgroup's product of an m x k
  // f16 matrix by a k x n one into m x n f32 that the device runs on its matrix units (the tensor
  // cores); 0 x 0 x 0: none. The NV extension rather than the KHR one: its SPIR-V is what the
  // SPIRV-Tools that kiln builds against validate (docs/ARCHITECTURE.md).
  std::uint32_t f16_matrix_m = 0, f16_matrix_n = 0, f16_matrix_k = 0;

  // Whether f32 subnormals survive in kernels: a CPU implementation computes with its host's
  // IEEE arithmetic; a GPU keeps them where kernels may declare DenormPreserve. Elsewhere
  // (NVIDIA's driver, for one, offers no such mode) an operand may be read as ±0 and a subnormal
  // result given as ±0.
  bool keeps_subnormals32() const {
    return cpu_device || (denorm_preserve32 && denorm_widths >= 1);
  }

  // Whether f32 quotients are taken in f64 and rounded back once. A CPU implementation of Vulkan
  // divides as its host does, correctly rounded; a GPU's OpFDiv may be 2.5 ulp off and is
  // undefined for divisors beyond 2^126 (NVIDIA's x / x is 0 there), so there, where the device
  // has f64, each quotient is rounded once from f64 (README, "What holds on which device").
  bool divides_in_f64() const { return !cpu_device && float64; }

  // The tiled GEMM of a contraction region on this device: a workgroup of threads_x x threads_y
  // invocations, each keeping a block_rows x 4 block of the result in registers, so a tile of
  // block_rows threads_y rows x 4 threads_x columns; K advances `depth` at a time through shared
  // memory (a rows x depth block of A and a depth x cols block of B).
  //
  // On the matrix units (matrix_m > 0), the same workgroup shape holds the epilogue's blocks, but
  // the products are the subgroups': 2 x 4 subgroups, each a rows() / 2 x cols() / 4 part of the
  // tile in matrix_m x matrix_n accumulators, its blocks staged as f16 (a row of `pad` halves
  // beyond each, against shared-memory bank conflicts), and each accumulator passed to the
  // epilogue through a scratch matrix per subgroup.
  struct gemm_tile {
    std::uint32_t threads_x = 16, threads_y = 16, depth = 16, block_rows = 4;
    std::uint32_t matrix_m = 0, matrix_n = 0, matrix_k = 0;
    static constexpr std::uint32_t subgroups_y = 2, subgroups_x = 4, pad = 8;
    std::uint32_t rows() const { return block_rows * threads_y; }
    std::uint32_t cols() const { return 4 * threads_x; }
    std::uint32_t invocations() const { return threads_x * threads_y; }
    bool on_matrix_units() const { return matrix_m != 0; }
    std::uint32_t shared_bytes(std::uint32_t element_bytes) const {
      if (on_matrix_units())
        return ((rows() + pad) + (cols() + pad)) * depth * 2 +
               subgroups_x * subgroups_y * matrix_m * matrix_n * 4;
      return (rows() + cols()) * depth * element_bytes;
    }
  };
  // On a GPU, 16 x 16 invocations with 4 x 4 blocks (64 x 64 tiles) where a workgroup may have
  // 256 invocations, else 16 x 8 (32 x 64 tiles; Vulkan promises 128). On a CPU device (lavapipe),
  // whose SIMD lanes are invocations, so that every read of shared memory is a gather: 16 x 4
  // invocations with 16 x 4 blocks, four times the products per read of A (1.4-1.5x the 4 x 4
  // kernel on lavapipe). Both tiles' blocks of 16 steps take 8 KiB (16 KiB in f64) of the 16 KiB of
  // shared memory Vulkan promises. A GPU with 32 KiB of it or more steps K 32 at a time (16 KiB,
  // 32 in f64): half the barriers and loop turns per product (4096^3 f32 on an H200: 23.3 ->
  // 24.1 TFLOP/s; 64 a step took 32 KiB a workgroup and fell to 13.1).
  //
  // f16 operands go to the matrix units where the device has them, in 128 x 128 tiles of 32
  // x 8 invocations (8 subgroups of 32) with 16 x 4 blocks, K 32 a step.
  gemm_tile gemm(bool f16_operands = false) const {
    gemm_tile g;
    if (f16_operands && f16_matrix_m && subgroup_size == 32 && max_workgroup_size_x >= 256 &&
        64 % f16_matrix_m == 0 && 32 % f16_matrix_n == 0 && 32 % f16_matrix_k == 0) {
      g.threads_x = 32;
      g.threads_y = 8;
      g.block_rows = 16;
      g.depth = 32;
      g.matrix_m = f16_matrix_m;
      g.matrix_n = f16_matrix_n;
      g.matrix_k = f16_matrix_k;
      if (g.shared_bytes(2) <= shared_memory_bytes) return g;
      g = gemm_tile{};
    }
    if (cpu_device) {
      g.threads_y = 4;
      g.block_rows = 16;
    } else if (max_workgroup_size_x < 256) {
      g.threads_y = 8;
    } else if (shared_memory_bytes >= 32768) {
      g.depth = 32;
    }
    return g;
  }

  // The workgroup size kiln dispatches with (a specialization constant of every kernel). On a
  // GPU, 256 invocations where the device allows them and has 32 KiB of shared memory for the
  // reductions' partials (16 or 32 bytes an invocation per folded value): a reduction's workgroup
  // takes four rows, so 64 invocations ran a 4096-row softmax on a quarter of the threads an H100
  // keeps resident (256: 0.52 -> 0.48 ms for 16384 x 4096 there; elementwise kernels the same,
  // docs/PERFORMANCE.md). On a CPU device, whose invocations are SIMD lanes, twice the subgroup
  // and at least 64.
  std::uint32_t workgroup_size() const {
    std::uint32_t w = subgroup_size * 2 > 64 ? subgroup_size * 2 : 64;
    if (!cpu_device && shared_memory_bytes >= 32768) w = 256;
    return w < max_workgroup_size_x ? w : max_workgroup_size_x;
  }
};

// The target as kernels depend on it, every field hashed: a kernel emitted for one serves every
// device with the same fingerprint, in this process or loaded from a compiled module.
inline std::string fingerprint(const target& t) {
  const std::initializer_list<std::uint64_t> fields = {t.vulkan_version,
                                                       t.subgroup_size,
                                                       t.max_workgroup_size_x,
                                                       t.max_workgroup_count_x,
                                                       t.max_workgroup_count_y,
                                                       t.max_workgroup_count_z,
                                                       t.shared_memory_bytes,
                                                       t.max_storage_buffers,
                                                       t.push_constant_bytes,
                                                       t.max_storage_buffer_range,
                                                       t.float64,
                                                       t.int64,
                                                       t.int16,
                                                       t.subgroup_arithmetic,
                                                       t.preserve_inf_nan32,
                                                       t.preserve_inf_nan64,
                                                       t.denorm_preserve32,
                                                       t.denorm_preserve64,
                                                       t.denorm_widths,
                                                       t.cpu_device,
                                                       t.f16_matrix_m,
                                                       t.f16_matrix_n,
                                                       t.f16_matrix_k};
  std::uint64_t h = kiln::detail::fnv1a(fields);
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4)
    text[static_cast<std::size_t>(i)] = "0123456789abcdef"[h & 15];
  return text;
}

}  // namespace kiln::spirv
