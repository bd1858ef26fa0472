// Runs a contraction (matmul) on the CPU: a packed, cache-blocked GEMM in the BLIS design (an
// MR x NR register tile, KC / MC / NC blocks, A and B packed into panels), threaded over tiles of
// the result, each finished tile handed to the region's epilogue while it is in cache.
#pragma once

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "kiln/codegen/cpu/pack.hpp"
#include "kiln/core/function_ref.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/cpu/executor.hpp"

namespace kiln::cpu {

// A finished tile of the result: rows [row, row + rows) and columns [col, col + cols) of batch
// `batch` (a flat index over the batch dims), its values (of the contraction's dtype) at `tile`,
// `ld` elements from one row to the next. Runs on the thread that computed it.
struct finished_tile {
  std::int64_t batch, row, rows, col, cols;
  const void* tile;
  std::int64_t ld;
};
using tile_ref = function_ref<void(const finished_tile&)>;

// Operand l (over a space of `rank` dims) read over one tile of that space: from the element at
// multi-index `origin`, over the space's last two dims (the tile's rows and columns).
inline operand_layout tile_layout(const operand_layout& l,
                                  const std::array<std::int64_t, max_rank>& origin, int rank) {
  operand_layout t{l.data, l.bytes, {}, l.terms};
  std::int64_t offset = 0;
  for (int d = 0; d < rank; ++d) offset += origin[d] * l.stride[d];
  t.data += offset * l.bytes;
  t.stride[0] = l.stride[rank - 2];
  t.stride[1] = l.stride[rank - 1];
  for (index_term& term : t.terms) {
    std::int64_t at = 0;  // the tile origin's place among the term's positions
    for (int d = 0; d < rank; ++d) at += origin[d] * term.stride[d];
    if (term.positions)
      term.positions += at * (term.wide ? 8 : 4);
    else
      term.shift += at;
    const std::int64_t rows = term.stride[rank - 2], cols = term.stride[rank - 1];
    term.stride = {};
    term.stride[0] = rows;
    term.stride[1] = cols;
  }
  return t;
}

// C[b] = A[b] x B[b] for every batch index b: A [batch..., M, K] and B [batch..., K, N] read
// through their strides (a.stride / b.stride over [batch..., M, K] / [batch..., K, N], in
// elements; index terms are not read: the region formation gives a contraction affine operands),
// elements of dtype `type` (f32, f64; the narrow floats accumulate in f32). `epilogue` receives
// every tile of C once.
KILN_RUNTIME_API void run_matmul(dtype type, const shape& a_dims, const operand_layout& a,
                                 const shape& b_dims, const operand_layout& b, tile_ref epilogue);

#if KILN_RUNTIME_BODY
namespace detail {

// Register tile: MR rows x two SIMD registers of columns; 8 rows where there are 32 vector
// registers (AVX-512: 16 accumulators), else 6 (12 accumulators of 16 registers).
template <class S>
struct gemm_shape {
  using batch = xsimd::batch<S>;
  static constexpr int L = static_cast<int>(batch::size);
  static constexpr int NR = 2 * L;
  static constexpr int MR = L * sizeof(S) >= 64 ? 8 : 6;
  // Measured on AVX-512 (docs/PERFORMANCE.md): a KC x NR micro-panel of B in L1, an MC x KC
  // block of A and a KC x NC block of B in L2, MC rows splitting into many tiles per thread.
  static constexpr int KC = 256;
  static constexpr int MC = 96;
  static constexpr int NC = 2048 / int(sizeof(S));
};

// An element of storage type T as fold type S (narrow floats through float).
template <class S, class T>
S as_fold(const T& v) {
  if constexpr (std::is_same_v<S, T>)
    return v;
  else
    return static_cast<S>(static_cast<float>(v));
}

// Packs rows [i0, i0 + m) x columns [p0, p0 + kc) of A (strides sm, sk) as MR-row micro-panels:
// panel r holds, for each p, MR consecutive rows' values (0 past the m rows).
template <class S, class T>
void pack_a(const unsigned char* a, std::int64_t sm, std::int64_t sk, std::int64_t i0,
            std::int64_t m, std::int64_t p0, std::int64_t kc, S* to) {
  constexpr int MR = gemm_shape<S>::MR;
  const T* base = reinterpret_cast<const T*>(a) + i0 * sm + p0 * sk;
  for (std::int64_t r = 0; r < m; r += MR) {
    const int rows = static_cast<int>(std::min<std::int64_t>(MR, m - r));
    S* panel = to + r * kc;
    if (rows < MR)
      for (std::int64_t p = 0; p < kc; ++p)
        for (int i = rows; i < MR; ++i) panel[p * MR + i] = S(0);
    // MR rows read side by side, each in order (contiguous where sk is 1); the panel written in
    // order.
    const T* row[MR];
    for (int i = 0; i < MR; ++i) row[i] = base + (r + std::min(i, rows - 1)) * sm;
    if (rows == MR)
      for (std::int64_t p = 0; p < kc; ++p)
        for (int i = 0; i < MR; ++i) panel[p * MR + i] = as_fold<S>(row[i][p * sk]);
    else
      for (std::int64_t p = 0; p < kc; ++p)
        for (int i = 0; i < rows; ++i) panel[p * MR + i] = as_fold<S>(row[i][p * sk]);
  }
}

// Packs rows [p0, p0 + kc) x columns [j0, j0 + n) of B (strides sk, sn) as NR-column
// micro-panels (0 past the n columns).
template <class S, class T>
void pack_b(const unsigned char* b, std::int64_t sk, std::int64_t sn, std::int64_t p0,
            std::int64_t kc, std::int64_t j0, std::int64_t n, S* to) {
  using G = gemm_shape<S>;
  constexpr int NR = G::NR;
  const T* base = reinterpret_cast<const T*>(b) + p0 * sk + j0 * sn;
  for (std::int64_t c = 0; c < n; c += NR) {
    const int cols = static_cast<int>(std::min<std::int64_t>(NR, n - c));
    S* panel = to + c * kc;
    if (std::is_same_v<S, T> && sn == 1 && cols == NR) {  // two vectors per row
      for (std::int64_t p = 0; p < kc; ++p) {
        const S* row = reinterpret_cast<const S*>(base + p * sk + c);
        G::batch::load_unaligned(row).store_aligned(panel + p * NR);
        G::batch::load_unaligned(row + G::L).store_aligned(panel + p * NR + G::L);
      }
      continue;
    }
    for (std::int64_t p = 0; p < kc; ++p) {
      const T* row = base + p * sk + c * sn;
      for (int j = 0; j < cols; ++j) panel[p * NR + j] = as_fold<S>(row[j * sn]);
      for (int j = cols; j < NR; ++j) panel[p * NR + j] = S(0);
    }
  }
}

// C[MR x NR] (+)= A panel x B panel over kc: the accumulators live in registers for the whole
// loop; `add` adds to what C holds (a later KC block), else overwrites it.
template <class S>
void micro_kernel(std::int64_t kc, const S* ap, const S* bp, S* c, std::int64_t ldc, int rows,
                  int cols, bool add) {
  using G = gemm_shape<S>;
  using batch = typename G::batch;
  constexpr int MR = G::MR, L = G::L;
  batch acc0[MR], acc1[MR];
  // One loop over k with every row's two FMAs in its body (written out, so that the compiler
  // neither splits it into a loop per register column nor spills the accumulators).
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((acc0[I] = acc1[I] = batch(S(0))), ...);
    for (std::int64_t p = 0; p < kc; ++p) {
      const batch b0 = batch::load_aligned(bp + p * G::NR);
      const batch b1 = batch::load_aligned(bp + p * G::NR + L);
      const S* a = ap + p * MR;
      (
          [&] {
            const batch av(a[I]);
            acc0[I] = xsimd::fma(av, b0, acc0[I]);
            acc1[I] = xsimd::fma(av, b1, acc1[I]);
          }(),
          ...);
    }
  }
  (std::make_integer_sequence<int, MR>{});
  if (rows == MR && cols == G::NR) {
    for (int i = 0; i < MR; ++i) {
      S* row = c + i * ldc;
      if (add) {
        (acc0[i] + batch::load_unaligned(row)).store_unaligned(row);
        (acc1[i] + batch::load_unaligned(row + L)).store_unaligned(row + L);
      } else {
        acc0[i].store_unaligned(row);
        acc1[i].store_unaligned(row + L);
      }
    }
    return;
  }
  alignas(64) S part[MR * G::NR];
  for (int i = 0; i < MR; ++i) {
    acc0[i].store_aligned(part + i * G::NR);
    acc1[i].store_aligned(part + i * G::NR + L);
  }
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      c[i * ldc + j] = add ? c[i * ldc + j] + part[i * G::NR + j] : part[i * G::NR + j];
}

// Fold type S, storage type T.
template <class S, class T>
void matmul_as(const shape& a_dims, const operand_layout& a, const shape& b_dims,
               const operand_layout& b, tile_ref epilogue) {
  using G = gemm_shape<S>;
  const int rank = a_dims.rank;
  const std::int64_t M = a_dims.dims[rank - 2], K = a_dims.dims[rank - 1];
  const std::int64_t N = b_dims.dims[rank - 1];
  std::int64_t batches = 1;
  for (int i = 0; i + 2 < rank; ++i) batches *= a_dims.dims[i];
  if (batches == 0 || M == 0 || N == 0) return;
  const std::int64_t row_blocks = (M + G::MC - 1) / G::MC, col_blocks = (N + G::NC - 1) / G::NC;
  const std::int64_t tasks = batches * row_blocks * col_blocks;
  // The element offsets of batch b's first element in A and B.
  auto batch_offset = [&](const operand_layout& l, std::int64_t bi) {
    std::int64_t off = 0;
    for (int d = rank - 3; d >= 0; --d) {
      off += (bi % a_dims.dims[d]) * l.stride[d];
      bi /= a_dims.dims[d];
    }
    return off;
  };
  constexpr std::int64_t a_size = std::int64_t{G::MC} * G::KC, b_size = std::int64_t{G::KC} * G::NC;
  constexpr std::int64_t c_size = std::int64_t{G::MC} * G::NC;
  const std::int64_t k_blocks = (K + G::KC - 1) / G::KC;
  auto aligned = [](S* p) {
    auto at = reinterpret_cast<std::uintptr_t>(p);
    return reinterpret_cast<S*>((at + 63) / 64 * 64);
  };
  // Packs KC block kb of B's column block cb of batch bi to `to`.
  auto pack_b_blocks = [&](std::int64_t bi, std::int64_t cb, std::int64_t kb, S* to) {
    const unsigned char* bb = b.data + batch_offset(b, bi) * sizeof(T);
    const std::int64_t j0 = cb * G::NC, n = std::min<std::int64_t>(G::NC, N - j0);
    const std::int64_t p0 = kb * G::KC, kc = std::min<std::int64_t>(G::KC, K - p0);
    pack_b<S, T>(bb, b.stride[rank - 2], b.stride[rank - 1], p0, kc, j0, n, to);
  };
  // The tile (rb, cb) of batch bi: every KC block of A packed and multiplied into the thread's
  // tile, then the epilogue. packed_b(kb): B's KC block kb of this column block, packed.
  auto run_tile = [&](std::int64_t bi, std::int64_t rb, std::int64_t mc, std::int64_t cb,
                      S* packed_a, S* tile, auto packed_b) {
    const std::int64_t i0 = rb * mc, m = std::min<std::int64_t>(mc, M - i0);
    const std::int64_t j0 = cb * G::NC, n = std::min<std::int64_t>(G::NC, N - j0);
    const unsigned char* ab = a.data + batch_offset(a, bi) * sizeof(T);
    const std::int64_t ldc = G::NC;
    if (K == 0) std::fill(tile, tile + m * ldc, S(0));
    for (std::int64_t kb = 0; kb < k_blocks; ++kb) {
      const std::int64_t p0 = kb * G::KC, kc = std::min<std::int64_t>(G::KC, K - p0);
      const S* bp = packed_b(kb);
      pack_a<S, T>(ab, a.stride[rank - 2], a.stride[rank - 1], i0, m, p0, kc, packed_a);
      for (std::int64_t c = 0; c < n; c += G::NR)
        for (std::int64_t r = 0; r < m; r += G::MR)
          micro_kernel<S>(kc, packed_a + r * kc, bp + c * kc, tile + r * ldc + c, ldc,
                          static_cast<int>(std::min<std::int64_t>(G::MR, m - r)),
                          static_cast<int>(std::min<std::int64_t>(G::NR, n - c)), kb > 0);
    }
    if constexpr (std::is_same_v<S, T>) {
      epilogue({bi, i0, m, j0, n, tile, ldc});
    } else {  // rounded to the contraction's narrow type, as its value is
      T* narrow = reinterpret_cast<T*>(tile + c_size);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) narrow[i * ldc + j] = T(tile[i * ldc + j]);
      epilogue({bi, i0, m, j0, n, narrow, ldc});
    }
  };
  // Per thread: a packed A block, one KC block of B (when each tile packs its own) and the tile
  // being accumulated (and its narrow copy), 64-byte aligned.
  auto thread_buffers = [&] {
    thread_local std::vector<S> buffer;
    const std::size_t want = a_size + b_size + 2 * c_size + 64;
    if (buffer.size() < want) buffer.resize(want);
    return aligned(buffer.data());
  };
  // About 2 x M x N x K flops: below a few million, waking threads costs more than it saves.
  const bool parallel = tasks > 1 && double(M) * double(N) * double(K) * double(batches) > 1e6;
  const int threads = parallel ? thread_count() : 1;
  if (parallel && M >= std::int64_t{threads} * G::MR) {
    // Rows for every thread: each column block of B is packed once, by all threads, and shared
    // by the tiles under it (else each row block would pack it again: with few rows, as an MLP's
    // 128 tokens, packing B costs as much as the product). The rows split into blocks of at most
    // MC, as many for each thread, of equal size (whole register tiles).
    const std::int64_t blocks = (row_blocks + threads - 1) / threads * threads;
    const std::int64_t mc = ((M + blocks - 1) / blocks + G::MR - 1) / G::MR * G::MR;
    const std::int64_t used_blocks = (M + mc - 1) / mc;
    // The calling thread's, kept between calls (zeroed once, when it grows).
    thread_local std::vector<S> shared;
    if (shared.size() < static_cast<std::size_t>(k_blocks * b_size + 16))
      shared.resize(static_cast<std::size_t>(k_blocks * b_size + 16));
    S* packed_b = aligned(shared.data());
    for (std::int64_t bi = 0; bi < batches; ++bi)
      for (std::int64_t cb = 0; cb < col_blocks; ++cb) {
        parallel_for(k_blocks, 1, [&](std::int64_t first, std::int64_t last) {
          for (std::int64_t kb = first; kb < last; ++kb)
            pack_b_blocks(bi, cb, kb, packed_b + kb * b_size);
        });
        parallel_for(used_blocks, 1, [&](std::int64_t first, std::int64_t last) {
          S* packed_a = thread_buffers();
          for (std::int64_t rb = first; rb < last; ++rb)
            run_tile(bi, rb, mc, cb, packed_a, packed_a + a_size + b_size,
                     [&](std::int64_t kb) { return packed_b + kb * b_size; });
        });
      }
    return;
  }
  // Few rows (a small or batched product): every tile on its own, packing its B blocks.
  auto run_tasks = [&](std::int64_t first, std::int64_t last) {
    S* packed_a = thread_buffers();
    S* own_b = packed_a + a_size;
    for (std::int64_t t = first; t < last; ++t) {
      const std::int64_t bi = t / (row_blocks * col_blocks);
      const std::int64_t rb = (t / col_blocks) % row_blocks, cb = t % col_blocks;
      run_tile(bi, rb, G::MC, cb, packed_a, own_b + b_size, [&](std::int64_t kb) {
        pack_b_blocks(bi, cb, kb, own_b);
        return own_b;
      });
    }
  };
  if (parallel)
    parallel_for(tasks, 1, run_tasks);
  else
    run_tasks(0, tasks);
}

}  // namespace detail

KILN_RUNTIME_API void run_matmul(dtype type, const shape& a_dims, const operand_layout& a,
                                 const shape& b_dims, const operand_layout& b, tile_ref epilogue) {
  switch (type) {
    case dtype::f32:
      return detail::matmul_as<float, float>(a_dims, a, b_dims, b, epilogue);
    case dtype::f64:
      return detail::matmul_as<double, double>(a_dims, a, b_dims, b, epilogue);
    case dtype::f16:
      return detail::matmul_as<float, storage_t<dtype::f16>>(a_dims, a, b_dims, b, epilogue);
    case dtype::bf16:
      return detail::matmul_as<float, storage_t<dtype::bf16>>(a_dims, a, b_dims, b, epilogue);
    case dtype::f8e4m3:
      return detail::matmul_as<float, storage_t<dtype::f8e4m3>>(a_dims, a, b_dims, b, epilogue);
    case dtype::f8e5m2:
      return detail::matmul_as<float, storage_t<dtype::f8e5m2>>(a_dims, a, b_dims, b, epilogue);
    default:
      throw error(errc::unsupported, "matmul",
                  "no CPU contraction for element type " + std::string(name(type)));
  }
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::cpu
