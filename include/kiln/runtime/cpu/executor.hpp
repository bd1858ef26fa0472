// Runs one region's row function over its iteration space: broadcast strides, collapsed
// dimensions, and kiln's worker threads (parallel.hpp, KILN_NUM_THREADS) for large spaces.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <span>
#include <vector>

#include "kiln/codegen/cpu/kernel.hpp"
#include "kiln/core/function_ref.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/cpu/operands.hpp"
#include "kiln/runtime/cpu/parallel.hpp"
#include "kiln/runtime/cpu/streaming_stores.hpp"
#include "kiln/runtime/signature.hpp"

namespace kiln::cpu {

// Below this many elements a region runs on the calling thread: waking threads costs more.
inline constexpr std::int64_t parallel_threshold = 1 << 14;
// The fewest elements a thread claims at a time: far more work than the claim (one atomic add).
inline constexpr std::int64_t task_grain = 1 << 13;
// The elements a thread claims at a time from a job of `total` on `threads`: about 1/32 of a
// thread's share, so that a thread that finishes its last claim early idles for at most 1/32 of
// the call; at least task_grain.
inline std::int64_t claim_elements(std::int64_t total, int threads) {
  return std::max<std::int64_t>(total / (std::int64_t{threads} * 32), task_grain);
}

// Runs `row` over `space`. ins/outs are indexed by parameter / result, only those of the region
// set. Behind the runtime boundary: one copy per program, not one per file that calls a function.
KILN_RUNTIME_API void run_region(row_ref row, const shape& space,
                                 std::span<const std::int32_t> args,
                                 std::span<const operand_layout> ins,
                                 std::span<const std::int32_t> results,
                                 std::span<const operand_layout> outs);

// Runs `row` over rows [rows.first, rows.last) of `space` on the calling thread: a row is a kept
// index of reduced_axes (with none reduced, an element), the row group's unit of work.
KILN_RUNTIME_API void run_rows(row_ref row, const shape& space, std::uint32_t reduced_axes,
                               row_block rows, std::span<const std::int32_t> args,
                               std::span<const operand_layout> ins,
                               std::span<const std::int32_t> results,
                               std::span<const operand_layout> outs);

// Appends the walks of a region's operands over `space`, whose reduced axes (the trailing ones)
// make a row, to `walks`; false (appending none) when an operand has index terms, another stride
// along the row (an elementwise region's output: other than 1), or rows that are not one stride
// apart: the region then runs through run_rows or run_reduction. Found once per call: a row then
// costs a few multiplies.
KILN_RUNTIME_API bool row_walks(const shape& space, std::uint32_t reduced_axes, bool reduces,
                                std::span<const std::int32_t> args,
                                std::span<const operand_layout> ins,
                                std::span<const std::int32_t> results,
                                std::span<const operand_layout> outs, std::vector<row_walk>& walks);

// Appends the walks of an elementwise region over a row group's rows themselves (one element a
// row: the rsqrt between layer_norm's variance and its output) when every operand steps along
// them by one element (0 for a broadcast input): row r's element at data + r * row_stride, and a
// block of rows is one call of the row function (run_flat). False (appending none) otherwise.
KILN_RUNTIME_API bool flat_walks(const shape& space, std::span<const std::int32_t> args,
                                 std::span<const operand_layout> ins,
                                 std::span<const std::int32_t> results,
                                 std::span<const operand_layout> outs,
                                 std::vector<row_walk>& walks);

// Runs `row` over rows [rows.first, rows.last) of `walks`, row_size elements each, on the calling
// thread; in_slots/out_slots: the sizes of the row function's pointer lists. Outputs that stream
// are written a piece of a row at a time to a buffer of this thread, then copied out with
// streaming stores (an elementwise row may be cut anywhere: its elements are independent).
KILN_RUNTIME_API void run_walks(row_ref row, std::span<const row_walk> walks, std::size_t in_slots,
                                std::size_t out_slots, std::int64_t row_size, row_block rows);

// Runs `row` once over rows [rows.first, rows.last) of flat_walks.
KILN_RUNTIME_API void run_flat(row_ref row, std::span<const row_walk> walks, std::size_t in_slots,
                               std::size_t out_slots, row_block rows);

#if KILN_CPU_KERNELS_BODY
}  // namespace kiln::cpu

#include "kiln/runtime/cpu/row_pointers.hpp"

namespace kiln::cpu {
#endif

#if KILN_RUNTIME_BODY
namespace detail {
// Whether a region collapsed to [rows, inner] may run a block of rows as one row
// (run_short_rows): no operand goes through index terms, and every output is written row after
// row without a gap.
inline bool short_rows_flatten(const collapsed_space& c, std::span<const std::int32_t> args,
                               std::span<const operand_layout* const> ops) {
  for (std::size_t k = 0; k < ops.size(); ++k) {
    if (!ops[k]->terms.empty()) return false;
    if (k >= args.size() && (c.strides[k][1] != 1 || c.strides[k][0] != c.dims[1])) return false;
  }
  return true;
}

// A region over [rows, inner] with short rows (a few elements: [576, 4] boxes from a transposed
// [4, 576]), a block of rows as one row of the row function (blocks shared among the threads
// where the region is large): an input laid out row after row (or one element for all) is read
// in place, any other is first gathered into a buffer in the rows' order. A call per row cost
// more than its elements (46 µs for the detector's 2,304 boxes, 4 to a row).
inline void run_short_rows(row_ref row, const collapsed_space& c,
                           std::span<const std::int32_t> args, std::size_t in_slots,
                           std::span<const std::int32_t> results, std::size_t out_slots,
                           std::span<const operand_layout* const> ops) {
  const std::int64_t rows = c.dims[0], inner = c.dims[1];
  const std::int64_t block = std::max<std::int64_t>(512 / inner, 1);
  const auto piece = static_cast<std::size_t>(block * inner);
  auto run_blocks = [&](std::int64_t first, std::int64_t last) {
    row_pointers p(in_slots, out_slots);
    thread_local std::vector<std::uint64_t> buffer;  // an input's block: 512 elements of 8 bytes
    if (buffer.size() < args.size() * piece) buffer.resize(args.size() * piece);
    for (std::int64_t b = first; b < last; ++b) {
      const std::int64_t r0 = b * block, n = std::min(block, rows - r0);
      for (std::size_t k = 0; k < ops.size(); ++k) {
        const operand_layout& o = *ops[k];
        const std::int64_t across = c.strides[k][0], along = c.strides[k][1];
        const unsigned char* at = o.data + r0 * across * o.bytes;
        if (k >= args.size()) {
          p.out[results[k - args.size()]] = const_cast<unsigned char*>(at);
          continue;
        }
        const std::int32_t slot = args[k];
        if ((along == 1 && across == inner) || (along == 0 && across == 0)) {
          p.in[slot] = at;
          p.step[slot] = along;
          continue;
        }
        auto* to = reinterpret_cast<unsigned char*>(buffer.data() + k * piece);
        for (std::int64_t r = 0; r < n; ++r)
          row_pointers::gather(at + r * across * o.bytes, along, o.bytes, inner,
                               to + r * inner * o.bytes);
        p.in[slot] = to;
        p.step[slot] = 1;
      }
      row(p.in.data(), p.step.data(), p.out.data(), n * inner);
    }
  };
  const std::int64_t blocks = (rows + block - 1) / block;
  if (rows * inner >= parallel_threshold)
    parallel_for(
        blocks,
        std::max<std::int64_t>(
            claim_elements(rows * inner, split_threads()) / static_cast<std::int64_t>(piece), 1),
        run_blocks);
  else
    run_blocks(0, blocks);
}

// Whether an operand of a region is read or written through index terms (a gather): it walks no
// rows.
inline bool has_index_terms(std::span<const std::int32_t> args, std::span<const operand_layout> ins,
                            std::span<const std::int32_t> results,
                            std::span<const operand_layout> outs) {
  for (auto a : args)
    if (!ins[a].terms.empty()) return true;
  for (auto r : results)
    if (!outs[r].terms.empty()) return true;
  return false;
}

// Appends a walk per operand of ops (collapsed space s): its stride along collapsed dim row_dim
// from row to row (0 where row_dim is -1), along step_dim within a row.
inline void push_walks(std::span<const operand_layout* const> ops, const collapsed_space& s,
                       std::span<const std::int32_t> args, std::span<const std::int32_t> results,
                       int row_dim, int step_dim, std::vector<row_walk>& walks) {
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const bool output = k >= args.size();
    walks.push_back({output ? results[k - args.size()] : args[k], output, ops[k]->data,
                     ops[k]->bytes, row_dim < 0 ? 0 : s.strides[k][row_dim],
                     s.strides[k][step_dim]});
  }
}
}  // namespace detail

KILN_RUNTIME_API bool row_walks(const shape& space, std::uint32_t reduced_axes, bool reduces,
                                std::span<const std::int32_t> args,
                                std::span<const operand_layout> ins,
                                std::span<const std::int32_t> results,
                                std::span<const operand_layout> outs,
                                std::vector<row_walk>& walks) {
  if (detail::has_index_terms(args, ins, results, outs)) return false;
  const collapsed_region c(space, reduced_axes, args, ins, results, outs);
  const std::vector<const operand_layout*>& ops = *c.ops;
  const collapsed_space& s = *c.space;
  const int inner = s.rank - 1;
  if (!s.reduced[inner] || !s.reduced_dims.empty() || s.kept.size() > 1) return false;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const std::int64_t step = s.strides[k][inner];
    if (step != 1 && (step != 0 || (k >= args.size() && !reduces))) return false;
  }
  detail::push_walks(ops, s, args, results, s.kept.empty() ? -1 : s.kept[0], inner, walks);
  return true;
}

KILN_RUNTIME_API bool flat_walks(const shape& space, std::span<const std::int32_t> args,
                                 std::span<const operand_layout> ins,
                                 std::span<const std::int32_t> results,
                                 std::span<const operand_layout> outs,
                                 std::vector<row_walk>& walks) {
  if (detail::has_index_terms(args, ins, results, outs)) return false;
  const collapsed_region c(space, 0, args, ins, results, outs);
  const std::vector<const operand_layout*>& ops = *c.ops;
  const collapsed_space& s = *c.space;
  if (s.rank != 1) return false;
  // One row: every operand steps by 0 there (collapse's [1]), an output's one element too.
  const bool one = s.dims[0] == 1;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const std::int64_t step = s.strides[k][0];
    if (step != 1 && (step != 0 || (k >= args.size() && !one))) return false;
  }
  detail::push_walks(ops, s, args, results, 0, 0, walks);
  return true;
}

KILN_RUNTIME_API void run_walks(row_ref row, std::span<const row_walk> walks, std::size_t in_slots,
                                std::size_t out_slots, std::int64_t row_size, row_block rows) {
  if (rows.first >= rows.last) return;
  row_pointers p(in_slots, out_slots);
  std::size_t streams = 0;
  for (const row_walk& w : walks) streams += w.output && w.stream;
  if (streams == 0) {
    point_row(p, walks, rows.first);
    for (std::int64_t r = rows.first; r < rows.last; ++r, next_row(p, walks))
      row(p.in.data(), p.step.data(), p.out.data(), row_size);
    return;
  }
  // Pieces of 8 KiB of an output at most (of 8-byte elements), in L1 until copied out.
  constexpr std::int64_t piece = 1024;
  thread_local std::vector<std::uint64_t> buffer;
  if (buffer.size() < streams * piece) buffer.resize(streams * piece);
  for (std::int64_t r = rows.first; r < rows.last; ++r)
    for (std::int64_t at = 0; at < row_size; at += piece) {
      const std::int64_t n = std::min(piece, row_size - at);
      point_row(p, walks, r, at);
      std::size_t k = 0;
      for (const row_walk& w : walks)
        if (w.output && w.stream) p.out[w.slot] = buffer.data() + piece * k++;
      row(p.in.data(), p.step.data(), p.out.data(), n);
      k = 0;
      for (const row_walk& w : walks)
        if (w.output && w.stream)
          stream_copy(const_cast<unsigned char*>(w.data) + (r * w.row_stride + at) * w.bytes,
                      buffer.data() + piece * k++, static_cast<std::size_t>(n * w.bytes));
    }
  fence_streams();
}

KILN_RUNTIME_API void run_flat(row_ref row, std::span<const row_walk> walks, std::size_t in_slots,
                               std::size_t out_slots, row_block rows) {
  if (rows.first >= rows.last) return;
  row_pointers p(in_slots, out_slots);
  point_row(p, walks, rows.first);
  row(p.in.data(), p.step.data(), p.out.data(), rows.last - rows.first);
}

KILN_RUNTIME_API void run_rows(row_ref row, const shape& space, std::uint32_t reduced_axes,
                               row_block rows, std::span<const std::int32_t> args,
                               std::span<const operand_layout> ins,
                               std::span<const std::int32_t> results,
                               std::span<const operand_layout> outs) {
  if (space.element_count() == 0 || rows.first >= rows.last) return;
  const collapsed_region region(space, reduced_axes, args, ins, results, outs);
  const std::vector<const operand_layout*>& ops = *region.ops;
  const collapsed_space& s = *region.space;
  const int inner = s.rank - 1;
  const std::int64_t c = s.dims[inner], reduced = s.outer_reduced_count();
  row_pointers ptrs(ins.size(), outs.size());
  row_list<std::int64_t> base_list(s.entries()), offsets_list(s.entries());
  const std::span<std::int64_t> base(base_list.data(), s.entries()),
      offsets(offsets_list.data(), s.entries());
  // n elements along the contiguous dim from `offsets`.
  auto call = [&](std::int64_t n) {
    ptrs.point(ops, s, args, results, offsets);
    ptrs.call(row, n);
  };
  if (s.reduced[inner]) {  // a row: its reduced elements, the contiguous dim among them
    for (std::int64_t o = rows.first; o < rows.last; ++o) {
      std::fill(base.begin(), base.end(), 0);
      s.add_offsets(s.kept, o, base);
      for (std::int64_t j = 0; j < reduced; ++j) {
        std::copy(base.begin(), base.end(), offsets.begin());
        s.add_offsets(s.reduced_dims, j, offsets);
        call(c);
      }
    }
    return;
  }
  // The contiguous dim is kept: runs of consecutive rows along it, at every reduced index.
  // Two dims, nothing reduced (a product's tile): whole rows step by the outer strides. (The
  // general loop's two 64-bit divisions per row, tens of cycles each, were 7 % of a MobileNet
  // block's time, its tiles' rows being many and short.)
  if (s.rank == 2 && reduced == 1 && rows.first % c == 0 && rows.last % c == 0) {
    for (std::size_t k = 0; k < s.entries(); ++k) offsets[k] = rows.first / c * s.strides[k][0];
    for (std::int64_t o = rows.first; o < rows.last; o += c) {
      call(c);
      for (std::size_t k = 0; k < s.entries(); ++k) offsets[k] += s.strides[k][0];
    }
    return;
  }
  for (std::int64_t o = rows.first; o < rows.last;) {
    std::int64_t outer = o / c, begin = o % c, n = std::min(c - begin, rows.last - o);
    std::fill(base.begin(), base.end(), 0);
    s.add_offsets(s.kept, outer, base);
    for (std::size_t k = 0; k < s.entries(); ++k) base[k] += begin * s.strides[k][inner];
    for (std::int64_t j = 0; j < reduced; ++j) {
      std::copy(base.begin(), base.end(), offsets.begin());
      s.add_offsets(s.reduced_dims, j, offsets);
      call(n);
    }
    o += n;
  }
}

KILN_RUNTIME_API void run_region(row_ref row, const shape& space,
                                 std::span<const std::int32_t> args,
                                 std::span<const operand_layout> ins,
                                 std::span<const std::int32_t> results,
                                 std::span<const operand_layout> outs) {
  std::int64_t total = space.element_count();
  if (total == 0) return;
  const collapsed_region region(space, 0, args, ins, results, outs);
  const std::vector<const operand_layout*>& ops = *region.ops;
  const collapsed_space& c = *region.space;
  const int rank = c.rank;
  const auto& dims = c.dims;
  const auto& strides = c.strides;
  std::int64_t inner = dims[rank - 1];
  std::int64_t rows = total / inner;
  if (rank == 2 && inner < 32 && rows > 1 && detail::short_rows_flatten(c, args, ops)) {
    detail::run_short_rows(row, c, args, ins.size(), results, outs.size(), ops);
    return;
  }
  bool parallel = total >= parallel_threshold;
  int threads = parallel ? split_threads() : 1;
  // Tasks of claim_elements: long rows are cut into pieces of whole steps; short rows are claimed
  // several at a time.
  std::int64_t grain = claim_elements(total, threads);
  std::int64_t piece = inner;
  if (threads > 1 && inner > grain) piece = (grain + lanes - 1) / lanes * lanes;
  // An input read across rows (a transposed matrix: its elements along a row a cache line or
  // more apart, the next row's next to them) is read in tiles, block rows a piece at a time, so
  // the lines one row's piece brings in serve the rows after it, as a blocked transpose does.
  constexpr std::int64_t tile_rows = 16, tile_piece = 256;
  std::int64_t block = 1;
  for (std::size_t k = 0; rank >= 2 && k < args.size(); ++k) {
    const std::int64_t along = std::abs(strides[k][rank - 1]),
                       across = std::abs(strides[k][rank - 2]);
    if (along >= 16 && across > 0 && across < 16 && inner > tile_piece && rows > 1) {
      block = tile_rows;
      piece = std::min(piece, tile_piece);
    }
  }
  std::int64_t pieces = (inner + piece - 1) / piece;
  // Task t: piece p of row r, the rows in blocks of `block`, a block's rows piece by piece.
  std::int64_t tasks = (rows + block - 1) / block * block * pieces;
  std::int64_t chunk = std::max<std::int64_t>(grain / piece, 1);

  // Runs tasks [first, last) on the calling thread.
  auto run_tasks = [&](std::int64_t first, std::int64_t last) {
    row_pointers ptrs(ins.size(), outs.size());
    row_list<std::int64_t> offsets(c.entries());
    for (std::int64_t t = first; t < last; ++t) {
      const std::int64_t in_block = t % (block * pieces);
      std::int64_t r = t / (block * pieces) * block + in_block % block, p = in_block / block;
      if (r >= rows) continue;
      std::int64_t begin = p * piece, count = std::min(piece, inner - begin);
      for (std::size_t k = 0; k < c.entries(); ++k) {
        // Offset of row r: its multi-index over the outer dimensions, times the strides.
        std::int64_t offset = 0, rest = r;
        for (int i = rank - 2; i >= 0; --i) {
          offset += (rest % dims[i]) * strides[k][i];
          rest /= dims[i];
        }
        offsets[k] = offset + begin * strides[k][rank - 1];
      }
      ptrs.point(ops, c, args, results, {offsets.data(), c.entries()});
      ptrs.call(row, count);
    }
  };
  if (!parallel) {
    run_tasks(0, tasks);
    return;
  }
  // Chunks of tasks are claimed by whichever thread is free, which also balances the work when
  // another process holds some cores.
  parallel_for(tasks, chunk, run_tasks);
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::cpu
