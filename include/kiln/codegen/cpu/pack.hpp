// pack<T>: the CPU kernels' unit of work, one float batch wide; wider element types span several
// xsimd batches so that every value of a fused loop has the same lane count.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include "kiln/codegen/cpu/isa.hpp"

#include <xsimd/xsimd.hpp>

#include "kiln/core/convert.hpp"
#include "kiln/core/lanes.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {

// Lanes per loop step: one native float batch (4 with SSE2, 8 with AVX2, 16 with AVX-512).
inline constexpr std::size_t lanes = xsimd::batch<float>::size;

template <class T>
struct pack {
  using batch = xsimd::batch<T>;
  static constexpr std::size_t width = batch::size;
  static constexpr std::size_t parts = lanes / width;
  static_assert(parts * width == lanes);
  std::array<batch, parts> p;

  // Left uninitialized, also when value-initialized (as a kernel's std::tuple of values is):
  // every value is assigned before it is read.
  pack() {}

  static pack load(const T* ptr) {
    pack r;
    for (std::size_t i = 0; i < parts; ++i) r.p[i] = batch::load_unaligned(ptr + i * width);
    return r;
  }
  static pack splat(T v) {
    pack r;
    for (auto& b : r.p) b = batch(v);
    return r;
  }
  void store(T* ptr) const {
    for (std::size_t i = 0; i < parts; ++i) p[i].store_unaligned(ptr + i * width);
  }
};

// The in-loop form of bool: a float-width mask.
struct mask {
  xsimd::batch_bool<float> m;
  mask() {}  // uninitialized, as pack
  mask(const xsimd::batch_bool<float>& bits) : m(bits) {}
  static mask load(const bool* ptr) { return {xsimd::batch_bool<float>::load_unaligned(ptr)}; }
  static mask splat(bool v) { return {xsimd::batch_bool<float>(v)}; }
  void store(bool* ptr) const { m.store_unaligned(ptr); }
};

// The C++ type arithmetic on dtype D happens in: core/lanes.hpp's rule (f32 for storage-only
// floats, 32-bit lanes for narrow integers, wrapped back into their range after each op).
template <dtype D>
using lane_t = lane_type_t<lane_of(D)>;

template <dtype D>
using compute_t = std::conditional_t<D == dtype::boolean, mask, pack<lane_t<D>>>;

// Lane-by-lane access through memory, for the few ops xsimd has no batch form of (integer
// division, casts between lane types); the compiler keeps the array in registers where it can.
template <class T>
std::array<T, lanes> to_array(const pack<T>& v) {
  alignas(64) std::array<T, lanes> a;
  v.store(a.data());
  return a;
}
inline std::array<bool, lanes> to_array(const mask& v) {
  std::array<bool, lanes> a;
  v.store(a.data());
  return a;
}
template <class T>
pack<T> from_array(const std::array<T, lanes>& a) {
  return pack<T>::load(a.data());
}
inline mask from_array(const std::array<bool, lanes>& a) { return mask::load(a.data()); }

}  // namespace kiln::cpu::inline KILN_CPU_ISA
