// Streaming (non-temporal) stores for results too large to stay in cache: written around the
// caches, a line skips the read that a plain store makes first (its read for ownership), a third
// of the memory traffic of a call that reads one value and writes one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/core/runtime_boundary.hpp"

namespace kiln::cpu {

// The last-level cache size the CPU path assumes, read once: KILN_CACHE_BYTES where it is a
// non-negative integer (0: never stream), else the largest cache Linux reports for CPU 0 in sysfs
// (a VM's cpuid may say otherwise: 256 MiB on the development VM, whose sysfs says 32 MiB), else
// 0. A value that is not used says so once.
KILN_RUNTIME_API std::int64_t cache_bytes();

// Whether a row group that reads and writes `bytes` of the call's arguments and results writes its
// results with streaming stores: more than the last-level cache holds, so a result line that a
// plain store brought in would be evicted before it is read again.
inline bool streams_results(std::int64_t bytes) {
  const std::int64_t cache = cache_bytes();
  return cache > 0 && bytes > cache;
}

// `bytes` from `from` to `to`: with streaming stores where the CPU has them (x86-64), memcpy
// elsewhere. Another thread may read them only after this thread's fence_streams().
KILN_RUNTIME_API void stream_copy(void* to, const void* from, std::size_t bytes);

// Whether this CPU has 32-byte streaming stores (AVX), which stream_copy then uses: checked at
// run time, so that the prebuilt runtime library, built for every x86-64, uses them too.
KILN_RUNTIME_API bool wide_streams();

// stream_copy with 32-byte streaming stores (wide; only where wide_streams()) or 16-byte ones,
// apart so that the tests reach both.
KILN_RUNTIME_API void stream_copy(void* to, const void* from, std::size_t bytes, bool wide);

// Orders this thread's streaming stores before its later stores (the pool's completion flag): a
// streaming store is weakly ordered.
KILN_RUNTIME_API void fence_streams();

// KILN_CACHE_BYTES' value, or `fallback` (with a notice) where env is not a non-negative integer.
KILN_RUNTIME_API std::int64_t parse_cache_bytes(const char* env, std::int64_t fallback);

}  // namespace kiln::cpu

#if KILN_RUNTIME_BODY
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kiln::cpu {

KILN_RUNTIME_API std::int64_t parse_cache_bytes(const char* env, std::int64_t fallback) {
  if (!env) return fallback;
  std::string_view v = env;
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n < 0) {
    std::fprintf(stderr,
                 "kiln: KILN_CACHE_BYTES='%s' is not a non-negative integer; using %lld bytes\n",
                 env, static_cast<long long>(fallback));
    return fallback;
  }
  return n;
}

namespace detail {
// The largest data or unified cache sysfs lists for CPU 0 ("32768K"), or 0.
inline std::int64_t sysfs_cache_bytes() {
  std::int64_t largest = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    char type[32] = {}, size[32] = {};
    auto read = [](const std::string& path, char* to, std::size_t n) {
      std::FILE* f = std::fopen(path.c_str(), "r");
      if (!f) return false;
      const bool got = std::fgets(to, static_cast<int>(n), f) != nullptr;
      std::fclose(f);
      return got;
    };
    if (!read(dir + "/size", size, sizeof size)) break;
    if (read(dir + "/type", type, sizeof type) && std::strncmp(type, "Instruction", 11) == 0)
      continue;
    char* unit = nullptr;
    std::int64_t n = std::strtoll(size, &unit, 10);
    if (*unit == 'K') n <<= 10;
    if (*unit == 'M') n <<= 20;
    if (*unit == 'G') n <<= 30;
    if (n > largest) largest = n;
  }
  return largest;
}
}  // namespace detail

KILN_RUNTIME_API std::int64_t cache_bytes() {
  static const std::int64_t n =
      parse_cache_bytes(std::getenv("KILN_CACHE_BYTES"), detail::sysfs_cache_bytes());
  return n;
}

namespace detail {
#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
// Streams whole lines, from a 16-byte boundary of d on, 32 bytes a store: compiled for AVX
// whatever the rest is compiled for, and called only where the CPU has it. A 16-byte store first
// where d is not on a 32-byte boundary: a plain store there would read the line that the
// streaming stores then write around. Written in assembly: the intrinsics' header,
// <immintrin.h>, is 44 MB of GCC's memory in every file that compiles the runtime inline.
__attribute__((target("avx"))) inline void stream_lines_32(unsigned char*& d,
                                                           const unsigned char*& s,
                                                           std::size_t& bytes) {
  if (reinterpret_cast<std::uintptr_t>(d) % 32 != 0 && bytes >= 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
    d += 16, s += 16, bytes -= 16;
  }
  if (bytes < 64) return;
  for (; bytes >= 64; d += 64, s += 64, bytes -= 64)
    asm volatile(
        "vmovdqu (%1), %%ymm0\n\t"
        "vmovdqu 32(%1), %%ymm1\n\t"
        "vmovntdq %%ymm0, (%0)\n\t"
        "vmovntdq %%ymm1, 32(%0)"
        :
        : "r"(d), "r"(s)
        : "xmm0", "xmm1", "memory");
  // The upper halves cleared, as compiled AVX code does before SSE code runs.
  asm volatile("vzeroupper" ::: "memory");
}
#endif
}  // namespace detail

KILN_RUNTIME_API bool wide_streams() {
#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
  static const bool avx = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") != 0;
  }();
  return avx;
#else
  return false;
#endif
}

KILN_RUNTIME_API void stream_copy(void* to, const void* from, std::size_t bytes) {
  stream_copy(to, from, bytes, wide_streams());
}

KILN_RUNTIME_API void stream_copy(void* to, const void* from, std::size_t bytes, bool wide) {
  auto* d = static_cast<unsigned char*>(to);
  auto* s = static_cast<const unsigned char*>(from);
#if defined(__SSE2__)
  // Plain stores up to the first 16-byte boundary, streaming ones from there.
  std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16;
  if (head >= bytes) {
    std::memcpy(d, s, bytes);
    return;
  }
  std::memcpy(d, s, head);
  d += head, s += head, bytes -= head;
#if defined(__GNUC__) || defined(__clang__)
  // 32-byte stores: 1-7 % less time than 16-byte ones for layer_norm 8192x768 on the development
  // VM's Zen 3, timed in one process (docs/PERFORMANCE.md, "Normalizations").
  if (wide) detail::stream_lines_32(d, s, bytes);
#endif
  // A line (64 bytes) a trip: with one store a trip the loop's own instructions outnumbered the
  // copy's, a third of a layer_norm call's.
  for (; bytes >= 64; d += 64, s += 64, bytes -= 64)
    for (std::size_t i = 0; i < 64; i += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  for (; bytes >= 16; d += 16, s += 16, bytes -= 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
#else
  (void)wide;
#endif
  std::memcpy(d, s, bytes);
}

KILN_RUNTIME_API void fence_streams() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace kiln::cpu
#endif  // KILN_RUNTIME_BODY
