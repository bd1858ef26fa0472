// A scalar Threefry-2x32 with 20 rounds, written from Salmon et al. (SC 2011) and checked against
// Random123's known-answer vectors (test_graph_random.cpp): the reference for kiln's random draws.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace ref {

// Rotations 13 15 26 6 17 29 16 24; the key schedule's third word k0 ^ k1 ^ 0x1BD11BDA; every four
// rounds two of the three added, the second with the injection's number.
inline std::array<std::uint32_t, 2> threefry(std::uint32_t c0, std::uint32_t c1, std::uint32_t k0,
                                             std::uint32_t k1) {
  const std::uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  const int r[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  std::uint32_t x0 = c0 + ks[0], x1 = c1 + ks[1];
  for (int i = 0; i < 20; ++i) {
    x0 += x1;
    x1 = std::rotl(x1, r[i % 8]) ^ x0;
    if (i % 4 == 3) {
      const auto s = static_cast<std::uint32_t>((i + 1) / 4);
      x0 += ks[s % 3];
      x1 += ks[(s + 1) % 3] + s;
    }
  }
  return {x0, x1};
}

// The uniform draw of [0, 1) at row-major position `at` under `seed`, as graph::random_uniform
// makes it: the first word's top 24 bits.
inline float uniform(std::uint64_t seed, std::uint32_t at) {
  const auto w =
      threefry(at, 0, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
  return static_cast<float>(w[0] >> 8) * 0x1p-24f;
}

}  // namespace ref
