// Whether the default device flushes f32 subnormals, and the values a flushing device may give:
// the README's rule for such a device (a GPU without shaderDenormPreserveFloat32, NVIDIA's among
// them) is that a kernel may read a subnormal operand as ±0 and give ±0 for a subnormal result.
// Every other device (the CPU, lavapipe) is held to the exact rule.
#pragma once

#include <cfloat>
#include <cmath>

#include <kiln/kiln.hpp>
#include <kiln/runtime/vulkan/context.hpp>

namespace ref {

inline bool device_flushes_subnormals() {
  kiln::device d = kiln::device::default_device();
  return d.type() == kiln::device::kind::vulkan && !d.context()->target().keeps_subnormals32();
}

// x read as a flushing device may read it: a subnormal as the zero of its sign.
inline float flushed(float x) {
  return std::fabs(x) < FLT_MIN && x != 0 ? std::copysign(0.f, x) : x;
}

// Whether `got` is what a flushing device may give where `want` is a subnormal result.
inline bool flushed_result(double got, long double want) {
  return got == 0 && want != 0 && std::fabs(want) < FLT_MIN;
}

}  // namespace ref
