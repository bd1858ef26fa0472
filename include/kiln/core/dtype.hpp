// Element types: the dtype enum, the C++ type of each, and the facts the IR and back ends ask of
// them.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kiln/core/minifloat.hpp"

namespace kiln {

enum class dtype : std::uint8_t {
  f32,
  f64,
  f16,
  bf16,
  f8e4m3,
  f8e5m2,
  i8,
  i16,
  i32,
  i64,
  u8,
  u16,
  u32,
  u64,
  boolean,
};
inline constexpr int dtype_count = 15;

// The element types a user writes in tensor<...> and passes as data.
using f32 = float;
using f64 = double;
using f16 = float16;
using bf16 = bfloat16;
using f8e4m3 = float8_e4m3;
using f8e5m2 = float8_e5m2;
using i8 = std::int8_t;
using i16 = std::int16_t;
using i32 = std::int32_t;
using i64 = std::int64_t;
using u8 = std::uint8_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

// The bit layout of a storage-only float dtype (f16, bf16, f8e4m3, f8e5m2).
constexpr minifloat_layout narrow_layout(dtype t) {
  switch (t) {
    case dtype::f16:
      return float16::layout;
    case dtype::bf16:
      return bfloat16::layout;
    case dtype::f8e4m3:
      return float8_e4m3::layout;
    default:
      return float8_e5m2::layout;
  }
}

namespace detail {
template <class T>
struct dtype_of_impl;
template <dtype D>
struct type_of_impl;
// Each (C++ type, dtype) pair once; both directions of the mapping come from it.
#define KILN_DTYPE_PAIR(T, D)                \
  template <>                                \
  struct dtype_of_impl<T> {                  \
    static constexpr dtype value = dtype::D; \
  };                                         \
  template <>                                \
  struct type_of_impl<dtype::D> {            \
    using type = T;                          \
  };
KILN_DTYPE_PAIR(float, f32)
KILN_DTYPE_PAIR(double, f64)
KILN_DTYPE_PAIR(float16, f16)
KILN_DTYPE_PAIR(bfloat16, bf16)
KILN_DTYPE_PAIR(float8_e4m3, f8e4m3)
KILN_DTYPE_PAIR(float8_e5m2, f8e5m2)
KILN_DTYPE_PAIR(std::int8_t, i8)
KILN_DTYPE_PAIR(std::int16_t, i16)
KILN_DTYPE_PAIR(std::int32_t, i32)
KILN_DTYPE_PAIR(std::int64_t, i64)
KILN_DTYPE_PAIR(std::uint8_t, u8)
KILN_DTYPE_PAIR(std::uint16_t, u16)
KILN_DTYPE_PAIR(std::uint32_t, u32)
KILN_DTYPE_PAIR(std::uint64_t, u64)
KILN_DTYPE_PAIR(bool, boolean)
#undef KILN_DTYPE_PAIR
}  // namespace detail

// An element type kiln knows: one of the aliases above.
template <class T>
concept element_type = requires {
  detail::dtype_of_impl<std::remove_cv_t<T>>::value;
};

template <element_type T>
inline constexpr dtype dtype_of = detail::dtype_of_impl<std::remove_cv_t<T>>::value;

// The storage type of a dtype (what one element of a buffer is).
template <dtype D>
using storage_t = typename detail::type_of_impl<D>::type;

// Calls fn.template operator()<D>() for the run-time dtype t (nothing for a value outside the
// enum): one instantiation of fn per dtype.
template <class Fn>
constexpr void visit_dtype(dtype t, Fn&& fn) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((static_cast<int>(t) == I ? (fn.template operator()<dtype(I)>(), 0) : 0), ...);
  }
  (std::make_integer_sequence<int, dtype_count>{});
}

// False for a value outside the enum (an importer casting integers can make one).
constexpr bool is_valid(dtype t) { return static_cast<int>(t) < dtype_count; }

constexpr std::string_view name(dtype t) {
  if (!is_valid(t)) return "(not a dtype)";
  constexpr std::string_view names[] = {"f32",    "f64", "f16", "bf16", "f8e4m3",
                                        "f8e5m2", "i8",  "i16", "i32",  "i64",
                                        "u8",     "u16", "u32", "u64",  "bool"};
  return names[static_cast<int>(t)];
}

constexpr int size_in_bytes(dtype t) {
  if (!is_valid(t)) return 1;
  constexpr int sizes[] = {4, 8, 2, 2, 1, 1, 1, 2, 4, 8, 1, 2, 4, 8, 1};
  return sizes[static_cast<int>(t)];
}

constexpr bool is_floating(dtype t) { return t <= dtype::f8e5m2; }
constexpr bool is_integer(dtype t) { return t >= dtype::i8 && t <= dtype::u64; }
constexpr bool is_signed_integer(dtype t) { return t >= dtype::i8 && t <= dtype::i64; }
constexpr bool is_unsigned_integer(dtype t) { return t >= dtype::u8 && t <= dtype::u64; }

// Floats narrower than f32 are storage types: values are computed in f32 and rounded when stored.
constexpr bool is_storage_only(dtype t) { return t >= dtype::f16 && t <= dtype::f8e5m2; }

// The dtype arithmetic happens in: f32 for the storage-only floats, the dtype itself otherwise.
// Integer types narrower than 32 bits keep their own width: results wrap as in that type.
constexpr dtype compute_dtype(dtype t) { return is_storage_only(t) ? dtype::f32 : t; }

}  // namespace kiln
