// f16 and bf16 storage to f32 lanes and back, with the CPU's conversion instructions where the
// build has them (F16C for f16, AVX2 for both), else element by element; bit for bit the
// conversions of core/minifloat.hpp (round to nearest even, NaN made kiln's quiet NaN).
#pragma once

#include <cstddef>
#include "kiln/codegen/cpu/isa.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "kiln/codegen/cpu/pack.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {

#if defined(__AVX2__) && defined(__F16C__)
inline constexpr bool hardware_narrow = true;

// Eight narrow floats at p as f32 lanes (any NaN becomes the quiet NaN with its sign, as
// minifloat's decode gives it).
template <dtype D>
__m256 widen8(const storage_t<D>* p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m256 f;
  if constexpr (D == dtype::bf16)
    f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  else
    f = _mm256_cvtph_ps(h);
  __m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
  __m256 quiet = _mm256_or_ps(_mm256_and_ps(f, _mm256_set1_ps(-0.f)),
                              _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)));
  return _mm256_blendv_ps(f, quiet, nan);
}

// Eight f32 lanes to narrow floats at p (round to nearest even; f16 and bf16 overflow to
// infinity; NaN becomes sign | the format's quiet NaN).
template <dtype D>
void narrow8(__m256 f, storage_t<D>* p) {
  __m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
  __m128i h;
  if constexpr (D == dtype::bf16) {
    __m256i u = _mm256_castps_si256(f);
    __m256i high = _mm256_srli_epi32(u, 16);
    __m256i odd = _mm256_and_si256(high, _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd), 16);
    __m256i quiet = _mm256_or_si256(_mm256_and_si256(high, _mm256_set1_epi32(0x8000)),
                                    _mm256_set1_epi32(0x7FC0));
    r = _mm256_blendv_epi8(r, quiet, _mm256_castps_si256(nan));
    // Eight 32-bit values (each below 2^16) to eight 16-bit ones: pack within each 128-bit half,
    // then take the low quadword of each half.
    h = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0b1000));
  } else {
    __m256 quiet = _mm256_or_ps(_mm256_and_ps(f, _mm256_set1_ps(-0.f)),
                                _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)));
    h = _mm256_cvtps_ph(_mm256_blendv_ps(f, quiet, nan),
                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
}
#else
inline constexpr bool hardware_narrow = false;
#endif

// `lanes` narrow floats at p to f32 at out.
template <dtype D>
void widen(const storage_t<D>* p, float* out) {
  static_assert(D == dtype::f16 || D == dtype::bf16);
  std::size_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
  for (; i + 8 <= lanes; i += 8) _mm256_storeu_ps(out + i, widen8<D>(p + i));
#endif
  for (; i < lanes; ++i) out[i] = static_cast<float>(p[i]);
}

// `lanes` f32 values at in to narrow floats at p.
template <dtype D>
void narrow(const float* in, storage_t<D>* p) {
  static_assert(D == dtype::f16 || D == dtype::bf16);
  std::size_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
  for (; i + 8 <= lanes; i += 8) narrow8<D>(_mm256_loadu_ps(in + i), p + i);
#endif
  for (; i < lanes; ++i) p[i] = storage_t<D>(in[i]);
}

}  // namespace kiln::cpu::inline KILN_CPU_ISA
