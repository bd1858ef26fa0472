// Numpy broadcasting as constexpr functions: over type-level shapes (with dyn) and concrete ones.
#pragma once

#include <optional>

#include "kiln/core/shape.hpp"

namespace kiln {

// Broadcasts two sizes where either may be dyn. A dyn against a static N > 1 gives N (the run-time
// size must then be 1 or N, checked at the call); dyn against dyn stays dyn.
constexpr std::optional<std::int64_t> broadcast_dim(std::int64_t a, std::int64_t b) {
  if (a == b) return a;
  if (a == 1) return b;
  if (b == 1) return a;
  if (a == dyn) return b;
  if (b == dyn) return a;
  return std::nullopt;
}

// Right-aligned numpy broadcasting; nullopt when two static sizes differ and neither is 1.
constexpr std::optional<shape> broadcast_shapes(const shape& a, const shape& b) {
  shape r;
  r.rank = a.rank > b.rank ? a.rank : b.rank;
  for (int i = 0; i < r.rank; ++i) {
    int ia = a.rank - r.rank + i, ib = b.rank - r.rank + i;
    std::int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    auto d = broadcast_dim(da, db);
    if (!d) return std::nullopt;
    r.dims[i] = *d;
  }
  return r;
}

constexpr bool broadcastable(const shape& a, const shape& b) {
  return broadcast_shapes(a, b).has_value();
}

}  // namespace kiln
