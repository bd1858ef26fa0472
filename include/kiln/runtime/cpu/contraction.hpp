// Runs a contraction on the CPU: a packed, cache-blocked GEMM in the BLIS design (an MR x NR
// register tile, KC / MC / NC blocks, A and B packed into panels), threaded over tiles of the
// result, each finished tile handed to the region's epilogue while it is in cache. A matmul packs
// its operands through their strides; convolution.hpp packs a convolution's from its windows.
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
// multi-index `origin`, over the space's dims row_axis and col_axis (the tile's rows and
// columns).
inline operand_layout tile_layout(const operand_layout& l,
                                  const std::array<std::int64_t, max_rank>& origin, int rank,
                                  int row_axis, int col_axis) {
  operand_layout t{l.data, l.bytes, {}, l.terms};
  std::int64_t offset = 0;
  for (int d = 0; d < rank; ++d) offset += origin[d] * l.stride[d];
  t.data += offset * l.bytes;
  t.stride[0] = l.stride[row_axis];
  t.stride[1] = l.stride[col_axis];
  for (index_term& term : t.terms) {
    std::int64_t at = 0;  // the tile origin's place among the term's positions
    for (int d = 0; d < rank; ++d) at += origin[d] * term.stride[d];
    if (term.positions)
      term.positions += at * (term.wide ? 8 : 4);
    else
      term.shift += at;
    const std::int64_t rows = term.stride[row_axis], cols = term.stride[col_axis];
    term.stride = {};
    term.stride[0] = rows;
    term.stride[1] = cols;
  }
  return t;
}

// An operand computed as the packing asks for it (a weight's dequantization): fill(batch, r0,
// rows, c0, cols, to) writes its rows [r0, r0 + rows) x columns [c0, c0 + cols) of batch `batch`
// (a flat index over the product's batch dims) to `to`, row-major, `cols` elements of the
// contraction's dtype per row. Called by the packing threads, several at once.
using operand_fill_ref = function_ref<void(std::int64_t batch, std::int64_t r0, std::int64_t rows,
                                           std::int64_t c0, std::int64_t cols, void* to)>;

// A matmul operand [batch..., rows, cols]: read through its layout's strides (over its dims, in
// elements; index terms are not read: the region formation gives a contraction affine operands),
// or, where `fill` is set, computed block by block.
struct matmul_operand {
  shape dims;
  operand_layout layout;
  const operand_fill_ref* fill = nullptr;
  // B packed beforehand by pack_weights (the chosen kernels' layout), read in place of packing
  // it at this call; null: packed as the product runs.
  const void* packed = nullptr;
};

// C[b] = A[b] x B[b] for every batch index b: A [batch..., M, K] and B [batch..., K, N], elements
// of dtype `type` (f32, f64; the narrow floats accumulate in f32). `epilogue` receives every tile
// of C once.
KILN_RUNTIME_API void run_matmul(dtype type, const matmul_operand& a, const matmul_operand& b,
                                 tile_ref epilogue);

// Whether computing operand `operand` (0: A, 1: B) of a matmul of dtype `type` with N columns as
// it is packed evaluates each element about once, as storing it would: B's blocks are packed
// once (shared by the threads, or by a row block's tiles), A's once per column block, so A only
// where the N columns are one block.
KILN_RUNTIME_API bool packing_computes_once(dtype type, int operand, std::int64_t n);

// B of a matmul of dtype `type` packed whole as the GEMM packs its blocks (every KC block of rows
// as NR-column panels across all N columns), for matmul_operand::packed: a constant weight packed
// once instead of at every call. Writes to `to` (64-byte aligned) where it is not null; returns
// the bytes it takes, or 0 where B cannot be read so: not the same matrix for every batch index
// (its batch dims must have stride 0), computed (fill), or a type the GEMM does not pack.
KILN_RUNTIME_API std::size_t pack_weights(dtype type, const matmul_operand& b, void* to);

}  // namespace kiln::cpu

// This instruction set's kernels, in its namespace (codegen/cpu/isa.hpp): the runtime library
// holds one copy per set, and runtime/cpu/kernels.hpp calls the chosen one.
#if KILN_CPU_KERNELS_BODY
#include "kiln/codegen/cpu/isa.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {
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
  // MC: 16 register tiles (128 rows on AVX-512: an MLP's 128 tokens are one row block, 1.03–1.20
  // -> 1.15–1.23x Eigen; 96 on AVX2, as measured there before).
  static constexpr int KC = 256;
  static constexpr int MC = 16 * MR;
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

// Packs m rows x columns [p0, p0 + kc) of A, from its row at `first_row` (row stride sm; column
// p at element offset at(p) in a row), as MR-row micro-panels: panel r holds, for each p, MR
// consecutive rows' values (0 past the m rows).
template <class S, class T, class Offset>
void pack_a(const unsigned char* first_row, std::int64_t sm, Offset at, std::int64_t m,
            std::int64_t p0, std::int64_t kc, S* to) {
  constexpr int MR = gemm_shape<S>::MR;
  const T* base = reinterpret_cast<const T*>(first_row);
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
        for (int i = 0; i < MR; ++i) panel[p * MR + i] = as_fold<S>(row[i][at(p0 + p)]);
    else
      for (std::int64_t p = 0; p < kc; ++p)
        for (int i = 0; i < rows; ++i) panel[p * MR + i] = as_fold<S>(row[i][at(p0 + p)]);
  }
}

// Packs rows [first, last) of a KC block of B (kc rows) x n columns as NR-column micro-panels (0
// past the n columns), from its element at row `first`, column 0, `from` (strides sk, sn).
template <class S, class T>
void pack_b(const unsigned char* from, std::int64_t sk, std::int64_t sn, std::int64_t kc,
            std::int64_t first, std::int64_t last, std::int64_t n, S* to) {
  using G = gemm_shape<S>;
  constexpr int NR = G::NR;
  const T* base = reinterpret_cast<const T*>(from);
  for (std::int64_t c = 0; c < n; c += NR) {
    const int cols = static_cast<int>(std::min<std::int64_t>(NR, n - c));
    S* panel = to + c * kc;
    if (std::is_same_v<S, T> && sn == 1 && cols == NR) {  // two vectors per row
      for (std::int64_t p = first; p < last; ++p) {
        const S* row = reinterpret_cast<const S*>(base + (p - first) * sk + c);
        G::batch::load_unaligned(row).store_aligned(panel + p * NR);
        G::batch::load_unaligned(row + G::L).store_aligned(panel + p * NR + G::L);
      }
      continue;
    }
    for (std::int64_t p = first; p < last; ++p) {
      const T* row = base + (p - first) * sk + c * sn;
      for (int j = 0; j < cols; ++j) panel[p * NR + j] = as_fold<S>(row[j * sn]);
      for (int j = cols; j < NR; ++j) panel[p * NR + j] = S(0);
    }
  }
}

// C[MR x NR] (+)= A panel x B panel over kc: the accumulators live in registers for the whole
// loop; `add` adds to what C holds (a later KC block), else overwrites it. Meanwhile
// `fetch_lines` cache lines from `fetch` are fetched into L2, spread over the k steps: issued
// together (32 for a 256-deep panel) they filled the core's line buffers and stalled it (13 % of
// an MLP's time on the prefetch instructions).
template <class S>
void micro_kernel(std::int64_t kc, const S* ap, const S* bp, S* c, std::int64_t ldc, int rows,
                  int cols, bool add, const char* fetch = nullptr, std::int64_t fetch_lines = 0) {
  using G = gemm_shape<S>;
  using batch = typename G::batch;
  constexpr int MR = G::MR, L = G::L;
  batch acc0[MR], acc1[MR];
  // Lines a fetch, k steps from one fetch to the next, and the step of the next.
  const std::int64_t per = kc > 0 ? (fetch_lines + kc - 1) / kc : 0;
  const std::int64_t every =
      per > 0 ? std::max<std::int64_t>(kc / ((fetch_lines + per - 1) / per), 1) : 0;
  std::int64_t next_fetch = per > 0 ? 0 : kc;
  // One loop over k with every row's two FMAs in its body (written out, so that the compiler
  // neither splits it into a loop per register column nor spills the accumulators).
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((acc0[I] = acc1[I] = batch(S(0))), ...);
    for (std::int64_t p = 0; p < kc; ++p) {
      if (p == next_fetch) {
        for (std::int64_t l = 0; l < std::min(per, fetch_lines); ++l)
          __builtin_prefetch(fetch + l * 64, 0, 2);
        fetch += per * 64;
        fetch_lines -= per;
        next_fetch = fetch_lines > 0 ? p + every : kc;
      }
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

// The GEMM: C[b] = A[b] x B[b] for b < batches, A [M, K], B [K, N], in fold type S from storage
// type T. pack_a_block(b, i0, m, p0, kc, to) packs A's rows [i0, i0 + m) x columns [p0, p0 + kc)
// as pack_a does; pack_b_block(b, p0, kc, first, last, j0, n, to) packs B's rows [p0, p0 + kc) x
// columns [j0, j0 + n) as pack_b does (rows p0 + first to p0 + last of them); a_computed: A's
// packing computes it (keep the packings of each row few). Every tile of C goes to the epilogue
// once.
// A packed whole beforehand (a_whole: batch b's A is A[b % a_period], each KC block's rows, padded
// to whole MR-row panels, as pack_a packs them) is read in place of packing it.
template <class S, class T, class PackA, class PackB>
void gemm(std::int64_t batches, std::int64_t M, std::int64_t N, std::int64_t K, PackA pack_a_block,
          PackB pack_b_block, tile_ref epilogue, bool a_computed = false,
          const S* packed_whole = nullptr, const S* a_whole = nullptr, std::int64_t a_period = 1) {
  using G = gemm_shape<S>;
  if (batches == 0 || M == 0 || N == 0) return;
  // About 2 x M x N x K flops: below half a million, handing out the work to the threads (held
  // awake through a call) costs more than it saves (thread_pool.hpp).
  const bool worth_threads = double(M) * double(N) * double(K) * double(batches) > 2e5;
  const int threads = worth_threads ? split_threads() : 1;
  const std::int64_t row_blocks = (M + G::MC - 1) / G::MC;
  // Column blocks of equal width (whole NR panels, at most NC; where K is short of a KC block, as
  // many more columns as keep B's block within KC x NC, up to 4 NC: a convolution's few input
  // channels leave B's block small, and each column block costs a barrier and an epilogue call
  // per row block, whose rows are then runs of NC elements in memory; 16 -> 72 channels over
  // 112 x 112 took 0.84-0.89 of the time). Where the rows are one block, as many as share out
  // evenly over the threads, each packing its own B in L2 (an MLP's second product, 128 x 768,
  // took 1.4x as long split by rows over a shared B); not where A is computed as it is packed: each
  // column block would compute it again.
  const std::int64_t widest =
      G::NC * std::clamp<std::int64_t>(G::KC / std::max<std::int64_t>(K, 1), 1, 4);
  std::int64_t col_blocks = (N + widest - 1) / widest;
  if (row_blocks == 1 && batches == 1 && threads > 1 && !a_computed)
    col_blocks = (col_blocks + threads - 1) / threads * threads;
  const std::int64_t nc = ((N + col_blocks - 1) / col_blocks + G::NR - 1) / G::NR * G::NR;
  col_blocks = (N + nc - 1) / nc;
  const std::int64_t tasks = batches * row_blocks * col_blocks;
  const bool parallel = worth_threads && tasks > 1;
  constexpr std::int64_t a_size = std::int64_t{G::MC} * G::KC, b_size = std::int64_t{G::KC} * G::NC;
  const std::int64_t c_size = std::int64_t{G::MC} * nc;  // a tile, nc apart from row to row
  const std::int64_t k_blocks = (K + G::KC - 1) / G::KC;
  const std::int64_t a_rows = (M + G::MR - 1) / G::MR * G::MR;
  auto aligned = [](S* p) {
    auto at = reinterpret_cast<std::uintptr_t>(p);
    return reinterpret_cast<S*>((at + 63) / 64 * 64);
  };
  // Packs KC block kb of B's column block cb of batch bi to `to`: its rows [first, last), or
  // all.
  auto pack_b_blocks = [&](std::int64_t bi, std::int64_t cb, std::int64_t kb, S* to,
                           std::int64_t first = 0, std::int64_t last = G::KC) {
    const std::int64_t j0 = cb * nc, n = std::min<std::int64_t>(nc, N - j0);
    const std::int64_t p0 = kb * G::KC, kc = std::min<std::int64_t>(G::KC, K - p0);
    pack_b_block(bi, p0, kc, first, std::min(last, kc), j0, n, to);
  };
  // Column block cb of KC block kb in B packed whole (pack_weights): its panels are the ones from
  // column cb x nc of that block's, which hold every column's.
  const std::int64_t whole_width = (N + G::NR - 1) / G::NR * G::NR;
  auto packed_block = [&](std::int64_t cb, std::int64_t kb) {
    const std::int64_t p0 = kb * G::KC, kc = std::min<std::int64_t>(G::KC, K - p0);
    return packed_whole + p0 * whole_width + cb * nc * kc;
  };
  // The tile (rb, cb) of batch bi: every KC block of A packed and multiplied into the thread's
  // tile, then the epilogue. packed_b(kb): B's KC block kb of this column block, packed.
  auto run_tile = [&](std::int64_t bi, std::int64_t rb, std::int64_t mc, std::int64_t cb,
                      S* packed_a, S* tile, auto packed_b) {
    const std::int64_t i0 = rb * mc, m = std::min<std::int64_t>(mc, M - i0);
    const std::int64_t j0 = cb * nc, n = std::min<std::int64_t>(nc, N - j0);
    const std::int64_t ldc = nc;
    if (K == 0) std::fill(tile, tile + m * ldc, S(0));
    for (std::int64_t kb = 0; kb < k_blocks; ++kb) {
      const std::int64_t p0 = kb * G::KC, kc = std::min<std::int64_t>(G::KC, K - p0);
      const S* bp = packed_b(kb);
      const S* ap = packed_a;
      if (a_whole)  // rows padded to whole panels: KC block kb starts at p0 x the padded rows
        ap = a_whole + (bi % a_period) * a_rows * K + p0 * a_rows + i0 * kc;
      else
        pack_a_block(bi, i0, m, p0, kc, packed_a);
      // B packed beforehand comes from memory, not from this thread's cache as a block packed
      // now would: the next panel is fetched into L2 a slice per register tile.
      const std::int64_t panel_lines = kc * G::NR * std::int64_t{sizeof(S)} / 64;
      const std::int64_t slice = (panel_lines * G::MR + m - 1) / m;
      for (std::int64_t c = 0; c < n; c += G::NR) {
        const bool fetch = packed_whole && c + G::NR < n;
        const char* next = fetch ? reinterpret_cast<const char*>(bp + (c + G::NR) * kc) : nullptr;
        for (std::int64_t r = 0; r < m; r += G::MR) {
          const std::int64_t l0 = std::min(panel_lines, r / G::MR * slice);
          const std::int64_t l1 = std::min(panel_lines, l0 + slice);
          micro_kernel<S>(kc, ap + r * kc, bp + c * kc, tile + r * ldc + c, ldc,
                          static_cast<int>(std::min<std::int64_t>(G::MR, m - r)),
                          static_cast<int>(std::min<std::int64_t>(G::NR, n - c)), kb > 0,
                          fetch ? next + l0 * 64 : nullptr, fetch ? l1 - l0 : 0);
        }
      }
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
  // Where every B block belongs to one row block and there are tiles enough to share out, each
  // tile packs its own B (once, as the shared path would) with no barrier between: a batched
  // convolution's images, each a few column blocks.
  const bool tiles_suffice =
      row_blocks == 1 && (tasks % threads == 0 || tasks >= 2 * std::int64_t{threads});
  if (!packed_whole && parallel && M >= std::int64_t{threads} * G::MR && !tiles_suffice) {
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
        // In slices of a block's rows, so that a few blocks share out evenly (3 blocks on 2
        // threads would leave one idle a third of the time).
        constexpr std::int64_t slice = 32, slices = G::KC / slice;
        parallel_for(k_blocks * slices, 1, [&](std::int64_t first, std::int64_t last) {
          for (std::int64_t t = first; t < last; ++t) {
            const std::int64_t kb = t / slices, row = t % slices * slice;
            if (kb * G::KC + row < K)
              pack_b_blocks(bi, cb, kb, packed_b + kb * b_size, row, row + slice);
          }
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
  // Few rows (a small or batched product), or B packed whole beforehand: every tile on its own,
  // packing its B blocks or reading them where they are.
  auto run_tasks = [&](std::int64_t first, std::int64_t last) {
    S* packed_a = thread_buffers();
    S* own_b = packed_a + a_size;
    for (std::int64_t t = first; t < last; ++t) {
      const std::int64_t bi = t / (row_blocks * col_blocks);
      const std::int64_t rb = (t / col_blocks) % row_blocks, cb = t % col_blocks;
      run_tile(bi, rb, G::MC, cb, packed_a, own_b + b_size, [&](std::int64_t kb) -> const S* {
        if (packed_whole) return packed_block(cb, kb);
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

// C[b] = a[b] x B[b] for b < batches where A has one row (a classifier's head, a decoder's step):
// B read in place along its rows (b_at(bi): row 0; column stride 1; row stride sb), where the
// GEMM would pack all of B to use one row of each register tile. The GEMM's sums in its order
// (fused multiply-adds over each KC block from zero, the blocks added), so the bits match it.
template <class S, class ARow, class BRows>
void gemv(std::int64_t batches, std::int64_t N, std::int64_t K, ARow a_at, std::int64_t sa,
          BRows b_at, std::int64_t sb, tile_ref epilogue) {
  using G = gemm_shape<S>;
  using batch = typename G::batch;
  constexpr int L = G::L, V = 4;  // four accumulators of columns
  constexpr std::int64_t width = V * L;
  // Column blocks of at most NC, as many as share out evenly when threads pay off.
  const bool worth_threads = double(N) * double(K) * double(batches) > 2e5;
  const int threads = worth_threads ? split_threads() : 1;
  std::int64_t blocks = (N + G::NC - 1) / G::NC;
  if (batches == 1 && threads > 1) blocks = std::max<std::int64_t>(blocks, threads);
  const std::int64_t nc = ((N + blocks - 1) / blocks + width - 1) / width * width;
  blocks = (N + nc - 1) / nc;
  auto run = [&](std::int64_t first, std::int64_t last) {
    thread_local std::vector<S> row;
    if (row.size() < static_cast<std::size_t>(nc)) row.resize(static_cast<std::size_t>(nc));
    alignas(64) S padded[width];
    for (std::int64_t t = first; t < last; ++t) {
      const std::int64_t bi = t / blocks, j0 = t % blocks * nc, n = std::min(nc, N - j0);
      const S* ap = a_at(bi);
      const S* bp = b_at(bi) + j0;
      for (std::int64_t c = 0; c < n; c += width) {
        const std::int64_t w = std::min(width, n - c);
        batch total[V];
        for (std::int64_t p0 = 0; p0 < K || p0 == 0; p0 += G::KC) {
          batch acc[V];
          for (int v = 0; v < V; ++v) acc[v] = batch(S(0));
          for (std::int64_t p = p0, end = std::min(K, p0 + G::KC); p < end; ++p) {
            const batch av(ap[p * sa]);
            const S* from = bp + p * sb + c;
            if (w < width) {  // the last columns, zero-padded
              std::fill(std::copy(from, from + w, padded), padded + width, S(0));
              from = padded;
            }
            for (int v = 0; v < V; ++v)
              acc[v] = xsimd::fma(av, batch::load_unaligned(from + v * L), acc[v]);
          }
          for (int v = 0; v < V; ++v) total[v] = p0 == 0 ? acc[v] : total[v] + acc[v];
        }
        for (int v = 0; v < V; ++v) total[v].store_aligned(padded + v * L);
        std::copy(padded, padded + w, row.data() + c);
      }
      epilogue({bi, 0, 1, j0, n, row.data(), nc});
    }
  };
  if (threads > 1 && batches * blocks > 1)
    parallel_for(batches * blocks, 1, run);
  else
    run(0, batches * blocks);
}

// Fold type S, storage type T.
template <class S, class T>
void matmul_as(const matmul_operand& a, const matmul_operand& b, tile_ref epilogue) {
  const int rank = a.dims.rank;
  const std::int64_t M = a.dims.dims[rank - 2], K = a.dims.dims[rank - 1];
  const std::int64_t N = b.dims.dims[rank - 1];
  std::int64_t batches = 1;
  for (int i = 0; i + 2 < rank; ++i) batches *= a.dims.dims[i];
  // The element offsets of batch b's first element in A and B.
  auto batch_offset = [&](const operand_layout& l, std::int64_t bi) {
    std::int64_t off = 0;
    for (int d = rank - 3; d >= 0; --d) {
      off += (bi % a.dims.dims[d]) * l.stride[d];
      bi /= a.dims.dims[d];
    }
    return off;
  };
  if constexpr (std::is_same_v<S, T> && std::is_floating_point_v<S>) {
    if (M == 1 && N > 0 && !a.fill && !b.fill && a.layout.terms.empty() && b.layout.terms.empty() &&
        b.layout.stride[rank - 1] == 1) {
      auto at = [&](const operand_layout& l) {
        return [&](std::int64_t bi) {
          return reinterpret_cast<const S*>(l.data) + batch_offset(l, bi);
        };
      };
      return gemv<S>(batches, N, K, at(a.layout), a.layout.stride[rank - 1], at(b.layout),
                     b.layout.stride[rank - 2], epilogue);
    }
  }
  // Rows [r0, r0 + rows) x columns [c0, c0 + cols) of a computed operand, in this thread's
  // memory (row-major), until its next call.
  auto computed = [](const matmul_operand& o, std::int64_t bi, std::int64_t r0, std::int64_t rows,
                     std::int64_t c0, std::int64_t cols) {
    thread_local std::vector<T> block;
    if (block.size() < static_cast<std::size_t>(rows * cols))
      block.resize(static_cast<std::size_t>(rows * cols));
    (*o.fill)(bi, r0, rows, c0, cols, block.data());
    return reinterpret_cast<const unsigned char*>(block.data());
  };
  gemm<S, T>(
      batches, M, N, K,
      [&](std::int64_t bi, std::int64_t i0, std::int64_t m, std::int64_t p0, std::int64_t kc,
          S* to) {
        if (a.fill) {
          pack_a<S, T>(
              computed(a, bi, i0, m, p0, kc), kc, [p0](std::int64_t p) { return p - p0; }, m, p0,
              kc, to);
          return;
        }
        const std::int64_t sm = a.layout.stride[rank - 2], sk = a.layout.stride[rank - 1];
        pack_a<S, T>(
            a.layout.data + (batch_offset(a.layout, bi) + i0 * sm) * sizeof(T), sm,
            [sk](std::int64_t p) { return p * sk; }, m, p0, kc, to);
      },
      [&](std::int64_t bi, std::int64_t p0, std::int64_t kc, std::int64_t first, std::int64_t last,
          std::int64_t j0, std::int64_t n, S* to) {
        if (b.fill) {
          pack_b<S, T>(computed(b, bi, p0 + first, last - first, j0, n), n, 1, kc, first, last, n,
                       to);
          return;
        }
        const std::int64_t sk = b.layout.stride[rank - 2], sn = b.layout.stride[rank - 1];
        pack_b<S, T>(
            b.layout.data + (batch_offset(b.layout, bi) + (p0 + first) * sk + j0 * sn) * sizeof(T),
            sk, sn, kc, first, last, n, to);
      },
      epilogue, a.fill != nullptr, static_cast<const S*>(b.packed));
}

// B [batch..., K, N] packed whole for gemm's packed_whole, where every batch index reads the same
// matrix.
template <class S, class T>
std::size_t pack_weights_as(const matmul_operand& b, void* to) {
  using G = gemm_shape<S>;
  const int rank = b.dims.rank;
  if (b.fill || rank < 2 || !b.layout.terms.empty()) return 0;
  for (int d = 0; d + 2 < rank; ++d)
    if (b.dims.dims[d] > 1 && b.layout.stride[d] != 0) return 0;
  const std::int64_t K = b.dims.dims[rank - 2], N = b.dims.dims[rank - 1];
  const std::int64_t width = (N + G::NR - 1) / G::NR * G::NR;
  const auto bytes = static_cast<std::size_t>(K * width) * sizeof(S);
  if (!to || bytes == 0) return bytes;
  // On the pool, a KC block's NC columns a task (packed at the first call, which would otherwise
  // pack them on every thread).
  const std::int64_t sk = b.layout.stride[rank - 2], sn = b.layout.stride[rank - 1];
  const std::int64_t k_blocks = (K + G::KC - 1) / G::KC, col_blocks = (N + G::NC - 1) / G::NC;
  auto pack = [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t t = first; t < last; ++t) {
      const std::int64_t p0 = t / col_blocks * G::KC, j0 = t % col_blocks * G::NC;
      const std::int64_t kc = std::min<std::int64_t>(G::KC, K - p0);
      pack_b<S, T>(b.layout.data + (p0 * sk + j0 * sn) * static_cast<std::int64_t>(sizeof(T)), sk,
                   sn, kc, 0, kc, std::min<std::int64_t>(G::NC, N - j0),
                   static_cast<S*>(to) + p0 * width + j0 * kc);
    }
  };
  if (K * N > (1 << 16))
    parallel_for(k_blocks * col_blocks, 1, pack);
  else
    pack(0, k_blocks * col_blocks);
  return bytes;
}

}  // namespace detail

namespace detail {

// Calls f.template operator()<S, T>() for element type `type`: storage type T, fold type S (the
// narrow floats fold in f32); i32 only where `integers` (matmul_integer's products).
template <class F>
void with_types(dtype type, bool integers, const char* op, const char* what, F f) {
  switch (type) {
    case dtype::f32:
      return f.template operator()<float, float>();
    case dtype::f64:
      return f.template operator()<double, double>();
    case dtype::i32:  // wrapping as the type does
      if (integers) return f.template operator()<std::int32_t, std::int32_t>();
      break;
    case dtype::f16:
      return f.template operator()<float, storage_t<dtype::f16>>();
    case dtype::bf16:
      return f.template operator()<float, storage_t<dtype::bf16>>();
    case dtype::f8e4m3:
      return f.template operator()<float, storage_t<dtype::f8e4m3>>();
    case dtype::f8e5m2:
      return f.template operator()<float, storage_t<dtype::f8e5m2>>();
    default:
      break;
  }
  throw error(errc::unsupported, op,
              std::string("no CPU ") + what + " for element type " + std::string(name(type)));
}

}  // namespace detail

namespace kernels {

inline void run_matmul(dtype type, const matmul_operand& a, const matmul_operand& b,
                       tile_ref epilogue) {
  detail::with_types(type, true, "matmul", "contraction",
                     [&]<class S, class T> { detail::matmul_as<S, T>(a, b, epilogue); });
}

inline std::size_t pack_weights(dtype type, const matmul_operand& b, void* to) {
  if (type == dtype::i32) return 0;  // matmul_integer's products are packed as they run
  std::size_t bytes = 0;
  detail::with_types(type, false, "matmul", "contraction",
                     [&]<class S, class T> { bytes = detail::pack_weights_as<S, T>(b, to); });
  return bytes;
}

inline bool packing_computes_once(dtype type, int operand, std::int64_t n) {
  bool once = operand == 1;
  detail::with_types(type, true, "matmul", "contraction",
                     [&]<class S, class T> { once = once || n <= detail::gemm_shape<S>::NC; });
  return once;
}

}  // namespace kernels
}  // namespace kiln::cpu::inline KILN_CPU_ISA
#endif  // KILN_CPU_KERNELS_BODY
