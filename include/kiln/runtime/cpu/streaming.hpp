// Results larger than the caches, written with streaming (non-temporal) stores: a call whose
// operands and results together exceed the last-level cache keeps none of its results there, so
// writing them past the caches saves reading each result line before overwriting it (a third of
// the memory traffic of a layer_norm over such rows).
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/runtime_boundary.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kiln::cpu {

// The last-level cache's bytes, read once: KILN_CACHE_BYTES when it is a positive integer, else
// the largest cache Linux lists for CPU 0 (sysfs); 0 where neither says (nothing then streams).
KILN_RUNTIME_API std::int64_t cache_bytes();

// Whether a call that reads and writes `bytes` in all writes its results with streaming stores:
// more than the last-level cache holds, on a CPU that has the stores.
inline bool streams_results(std::int64_t bytes) {
#if defined(__SSE2__)
  const std::int64_t cache = cache_bytes();
  return cache > 0 && bytes > cache;
#else
  (void)bytes;
  return false;
#endif
}

// Copies n bytes from src to dst, dst's aligned 16-byte pieces with streaming stores (the
// unaligned ends with plain ones). The stores are weakly ordered: stream_fence() must follow
// before another thread reads dst.
inline void stream_copy(void* dst, const void* src, std::size_t n) {
  auto* to = static_cast<unsigned char*>(dst);
  auto* from = static_cast<const unsigned char*>(src);
#if defined(__SSE2__)
  const std::size_t head = std::min(n, (16 - reinterpret_cast<std::uintptr_t>(to) % 16) % 16);
  std::memcpy(to, from, head);
  std::size_t i = head;
  for (; i + 16 <= n; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i)));
  std::memcpy(to + i, from + i, n - i);
#else
  std::memcpy(to, from, n);
#endif
}

// Orders this thread's streaming stores before its later stores (the thread pool's "done").
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// This thread's buffer of at least `bytes` (64-byte aligned) that a row function writes a piece of
// a streamed result to, in L1 cache, before stream_copy moves it out.
inline unsigned char* stream_buffer(std::size_t bytes) {
  struct alignas(64) line {
    unsigned char bytes[64];
  };
  thread_local std::vector<line> memory;
  const std::size_t lines = (bytes + 63) / 64;
  if (memory.size() < lines) memory.resize(lines);
  return reinterpret_cast<unsigned char*>(memory.data());
}

// "32768K", "512K", "8M" (the sizes sysfs lists for caches) in bytes; 0 if it is none of those.
inline std::int64_t parse_cache_size(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || value <= 0 || value >= (std::int64_t{1} << 32)) return 0;
  const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (unit.empty()) return value;
  if (unit == "K") return value << 10;
  if (unit == "M") return value << 20;
  if (unit == "G") return value << 30;
  return 0;
}

// The cache bytes kiln plans with: KILN_CACHE_BYTES (env) when it is a positive integer, else
// `listed` (the system's). A value that is not used says so.
inline std::int64_t parse_cache_bytes(const char* env, std::int64_t listed) {
  if (!env) return listed;
  const std::string_view v = env;
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (!v.empty() && ec == std::errc() && end == v.data() + v.size() && n > 0) return n;
  std::fprintf(stderr, "kiln: KILN_CACHE_BYTES='%s' is not a positive integer; using %lld\n", env,
               static_cast<long long>(listed));
  return listed;
}

#if KILN_RUNTIME_BODY
namespace detail {
// The largest cache Linux lists for CPU 0; 0 where it lists none.
inline std::int64_t largest_listed_cache() {
  std::int64_t largest = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string path =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size";
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (!f) continue;
    char text[32] = {};
    const std::size_t n = std::fread(text, 1, sizeof text - 1, f);
    std::fclose(f);
    largest = std::max(largest, parse_cache_size(std::string_view(text, n)));
  }
  return largest;
}
}  // namespace detail

KILN_RUNTIME_API std::int64_t cache_bytes() {
  static const std::int64_t bytes =
      parse_cache_bytes(std::getenv("KILN_CACHE_BYTES"), detail::largest_listed_cache());
  return bytes;
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::cpu
