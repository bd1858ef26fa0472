// The lane rule, one for every back end: the register type each dtype computes in. Floats of 32
// bits or less compute in f32 lanes, narrow integers in 32-bit lanes (wrapped into their range
// after each op), the rest in their own type.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kiln/core/dtype.hpp"

namespace kiln {

enum class lane_kind : std::uint8_t { f32, f64, s32, u32, s64, u64, boolean };

constexpr lane_kind lane_of(dtype t) {
  switch (t) {
    case dtype::f64:
      return lane_kind::f64;
    case dtype::i8:
    case dtype::i16:
    case dtype::i32:
      return lane_kind::s32;
    case dtype::u8:
    case dtype::u16:
    case dtype::u32:
      return lane_kind::u32;
    case dtype::i64:
      return lane_kind::s64;
    case dtype::u64:
      return lane_kind::u64;
    case dtype::boolean:
      return lane_kind::boolean;
    default:
      return lane_kind::f32;
  }
}
constexpr bool is_float_lane(lane_kind k) { return k == lane_kind::f32 || k == lane_kind::f64; }
constexpr bool is_signed_lane(lane_kind k) { return k == lane_kind::s32 || k == lane_kind::s64; }

// The C++ type of a lane kind (the CPU's registers hold these).
template <lane_kind K>
using lane_type_t = std::conditional_t<
    K == lane_kind::f32, float,
    std::conditional_t<
        K == lane_kind::f64, double,
        std::conditional_t<
            K == lane_kind::s32, std::int32_t,
            std::conditional_t<K == lane_kind::u32, std::uint32_t,
                               std::conditional_t<K == lane_kind::s64, std::int64_t,
                                                  std::conditional_t<K == lane_kind::u64,
                                                                     std::uint64_t, bool>>>>>>;

}  // namespace kiln
