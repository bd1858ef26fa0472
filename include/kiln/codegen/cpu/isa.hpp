// The SIMD instruction set a file is compiled for, as the name of an inline namespace around the
// CPU code that depends on it (packs, primitives, kernels, the interpreter): files compiled for
// different sets, and a kiln_runtime built apart from the program, then link without one taking
// the other's inline functions (a pack<float> is 4 lanes in one and 8 in the other).
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define KILN_CPU_ISA isa_avx512bw
#elif defined(__AVX512F__)
#define KILN_CPU_ISA isa_avx512f
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KILN_CPU_ISA isa_avx2_fma_f16c
#elif defined(__AVX2__) && defined(__FMA__)
#define KILN_CPU_ISA isa_avx2_fma
#elif defined(__AVX2__)
#define KILN_CPU_ISA isa_avx2
#elif defined(__AVX__)
#define KILN_CPU_ISA isa_avx
#elif defined(__SSE4_2__)
#define KILN_CPU_ISA isa_sse4_2
#elif defined(__SSE4_1__)
#define KILN_CPU_ISA isa_sse4_1
#elif defined(__SSSE3__)
#define KILN_CPU_ISA isa_ssse3
#elif defined(__SSE3__)
#define KILN_CPU_ISA isa_sse3
#elif defined(__SSE2__)
#define KILN_CPU_ISA isa_sse2
#elif defined(__ARM_FEATURE_SVE)
#define KILN_CPU_ISA isa_sve
#elif defined(__ARM_NEON)
#define KILN_CPU_ISA isa_neon
#else
#define KILN_CPU_ISA isa_generic
#endif

#include "kiln/core/runtime_boundary.hpp"

// The set's name as a string ("isa_avx2_fma_f16c"): this file's.
#define KILN_CPU_ISA_NAME KILN_CPU_ISA_NAME_OF(KILN_CPU_ISA)
#define KILN_CPU_ISA_NAME_OF(isa) KILN_CPU_ISA_TEXT(isa)
#define KILN_CPU_ISA_TEXT(isa) #isa

namespace kiln::cpu {
// The set kiln's runtime was compiled for (its interpreter, the CPU executor's contractions and
// folds). A file built with -march=native against a baseline library has a wider one; its
// compiled kernels may then differ from the interpreter in the last bits of functions whose
// polynomials fuse multiplies and adds (exp, tanh ...).
KILN_RUNTIME_API const char* runtime_isa();
#if KILN_RUNTIME_BODY
KILN_RUNTIME_API const char* runtime_isa() { return KILN_CPU_ISA_NAME; }
#endif
}  // namespace kiln::cpu
