// Streaming stores for results larger than the caches: the cache size kiln plans with, and the
// copy that writes past the caches. (The normalization suite runs once more with every result
// streamed: e2e.cpu.streamed.)
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <kiln/runtime/cpu/streaming.hpp>

namespace cpu = kiln::cpu;

TEST(Streaming, CacheSizesAsSysfsListsThem) {
  EXPECT_EQ(cpu::parse_cache_size("32768K\n"), 32768 * 1024);
  EXPECT_EQ(cpu::parse_cache_size("512K"), 512 * 1024);
  EXPECT_EQ(cpu::parse_cache_size("8M"), 8 * 1024 * 1024);
  EXPECT_EQ(cpu::parse_cache_size("2G"), std::int64_t{2} << 30);
  EXPECT_EQ(cpu::parse_cache_size("4096"), 4096);
  // Not a size: none.
  EXPECT_EQ(cpu::parse_cache_size(""), 0);
  EXPECT_EQ(cpu::parse_cache_size("K"), 0);
  EXPECT_EQ(cpu::parse_cache_size("-4K"), 0);
  EXPECT_EQ(cpu::parse_cache_size("0K"), 0);
  EXPECT_EQ(cpu::parse_cache_size("12KB"), 0);
  EXPECT_EQ(cpu::parse_cache_size("99999999999999M"), 0);
}

TEST(Streaming, CacheBytesFromTheEnvironment) {
  // Not a positive integer: the listed size (with a notice).
  EXPECT_EQ(cpu::parse_cache_bytes(nullptr, 1 << 20), 1 << 20);
  EXPECT_EQ(cpu::parse_cache_bytes("4096", 1 << 20), 4096);
  EXPECT_EQ(cpu::parse_cache_bytes("0", 1 << 20), 1 << 20);
  EXPECT_EQ(cpu::parse_cache_bytes("-1", 1 << 20), 1 << 20);
  EXPECT_EQ(cpu::parse_cache_bytes("32M", 1 << 20), 1 << 20);
  EXPECT_EQ(cpu::parse_cache_bytes("", 1 << 20), 1 << 20);
}

TEST(Streaming, NothingStreamsBelowTheCache) {
  EXPECT_FALSE(cpu::streams_results(0));
  if (cpu::cache_bytes() > 0) EXPECT_FALSE(cpu::streams_results(cpu::cache_bytes()));
}

TEST(Streaming, CopiesEveryByteAndNoOther) {
  // Every alignment of the destination against 16 bytes, lengths around the 16-byte pieces.
  const std::size_t guard = 32;
  for (std::size_t offset = 0; offset < 17; ++offset)
    for (std::size_t n : {0, 1, 5, 15, 16, 17, 31, 32, 33, 100, 4097}) {
      std::vector<unsigned char> from(n + 3), to(guard + offset + n + guard, 0xEE);
      for (std::size_t i = 0; i < from.size(); ++i) from[i] = static_cast<unsigned char>(i * 7 + 1);
      cpu::stream_copy(to.data() + guard + offset, from.data() + 3, n);
      cpu::stream_fence();
      for (std::size_t i = 0; i < to.size(); ++i) {
        const bool copied = i >= guard + offset && i < guard + offset + n;
        const unsigned char expected = copied ? from[i - guard - offset + 3] : 0xEE;
        ASSERT_EQ(to[i], expected) << "offset " << offset << ", " << n << " bytes, byte " << i;
      }
    }
}
