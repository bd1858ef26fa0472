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

// The set's name in KILN_CPU_ISA (runtime/cpu/kernels.hpp): the x86-64 levels the runtime
// library is built for ("avx512": x86-64-v4, "avx2": x86-64-v3, "sse2": the baseline), else the
// namespace's name.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define KILN_CPU_LEVEL "avx512"
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KILN_CPU_LEVEL "avx2"
#elif defined(__SSE2__) && defined(__x86_64__)
#define KILN_CPU_LEVEL "sse2"
#else
#define KILN_CPU_LEVEL KILN_CPU_ISA_NAME
#endif

namespace kiln::cpu {
// The set whose kernels the runtime runs (its interpreter, the CPU executor's contractions and
// folds): the widest the CPU runs of those the runtime library was built for, or KILN_CPU_ISA's
// (runtime/cpu/kernels.hpp). A file built for another set (-march=native against the library,
// or the library choosing AVX-512 for a file built for the baseline) may then differ from the
// interpreter in the last bits of functions whose polynomials fuse multiplies and adds (exp,
// tanh ...) and of folds whose lanes differ.
KILN_RUNTIME_API const char* runtime_isa();
}  // namespace kiln::cpu
