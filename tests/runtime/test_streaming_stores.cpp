// stream_copy: every byte of the range arrives and none around it changes, whatever the
// addresses' alignment, with 16-byte and (where the CPU has AVX) 32-byte streaming stores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <kiln/runtime/cpu/streaming_stores.hpp>

namespace {

constexpr unsigned char untouched = 0xA5;

// Copies n bytes from offset `from_at` of a source to offset `to_at` of a destination (both
// 64-byte aligned buffers, so the offsets are the alignments) and checks the destination byte by
// byte against the source and the bytes left alone.
void check_copy(bool wide, std::size_t to_at, std::size_t from_at, std::size_t n) {
  alignas(64) static unsigned char from[8192], to[8192];
  for (std::size_t i = 0; i < sizeof from; ++i) {  // 250 values, none equal to `untouched`
    const auto v = static_cast<unsigned char>((i * 131 + 7) % 250);
    from[i] = v < untouched ? v : static_cast<unsigned char>(v + 1);
  }
  std::fill(std::begin(to), std::end(to), untouched);
  kiln::cpu::stream_copy(to + to_at, from + from_at, n, wide);
  kiln::cpu::fence_streams();
  for (std::size_t i = 0; i < sizeof to; ++i) {
    const bool inside = i >= to_at && i < to_at + n;
    const unsigned char expected = inside ? from[from_at + (i - to_at)] : untouched;
    ASSERT_EQ(to[i], expected) << (wide ? "32" : "16") << "-byte stores, to offset " << to_at
                               << ", from offset " << from_at << ", " << n << " bytes: byte " << i;
  }
}

void check_every_alignment(bool wide) {
  const std::size_t sizes[] = {0,  1,  15,  16,  17,  31,  32,  33,  48,   63,  64,
                               65, 95, 100, 127, 128, 129, 200, 255, 1000, 3088};
  for (std::size_t to_at = 0; to_at < 64; ++to_at)
    for (std::size_t from_at : {0, 1, 4, 16, 33})
      for (std::size_t n : sizes) check_copy(wide, to_at, from_at, n);
}

}  // namespace

TEST(StreamingStores, SixteenByteStoresCopyEveryByteAndNoOther) { check_every_alignment(false); }

TEST(StreamingStores, ThirtyTwoByteStoresCopyEveryByteAndNoOther) {
  if (!kiln::cpu::wide_streams()) GTEST_SKIP() << "this CPU has no AVX";
  check_every_alignment(true);
}

TEST(StreamingStores, TheDefaultCopyIsOneOfThem) {
  std::vector<float> from(1000), to(1000, -1.f);
  for (std::size_t i = 0; i < from.size(); ++i) from[i] = 0.5f * static_cast<float>(i);
  kiln::cpu::stream_copy(to.data() + 1, from.data() + 3, 900 * sizeof(float));
  kiln::cpu::fence_streams();
  EXPECT_EQ(to[0], -1.f);
  for (std::size_t i = 1; i <= 900; ++i) ASSERT_EQ(to[i], 0.5f * static_cast<float>(i + 2)) << i;
  EXPECT_EQ(to[901], -1.f);
}
