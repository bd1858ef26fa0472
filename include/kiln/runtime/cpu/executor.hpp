// Runs one region's row function over its iteration space: broadcast strides, collapsed
// dimensions, and kiln's worker threads (parallel.hpp, KILN_NUM_THREADS) for large spaces.
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "kiln/codegen/cpu/kernel.hpp"
#include "kiln/core/function_ref.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/cpu/parallel.hpp"
#include "kiln/runtime/signature.hpp"

namespace kiln::cpu {

// Per-row pointer lists: on the stack up to 64 entries (every function seen so far), else on the
// heap; a run-time graph may have any number of inputs and outputs.
template <class T>
class row_list {
 public:
  explicit row_list(std::size_t n) : data_(n <= local_.size() ? local_.data() : nullptr) {
    if (!data_) {
      heap_.resize(n);
      data_ = heap_.data();
    }
  }
  T& operator[](std::size_t i) { return data_[i]; }
  T* data() { return data_; }

 private:
  std::array<T, 64> local_;  // entries a region does not use are never read
  std::vector<T> heap_;
  T* data_;
};

// Below this many elements a region runs on the calling thread: waking threads costs more.
inline constexpr std::int64_t parallel_threshold = 1 << 16;
// The fewest elements a thread claims at a time: far more work than the claim (one atomic add).
inline constexpr std::int64_t task_grain = 1 << 13;

// One operand of a region: where its data starts, its element size, and its stride (in elements)
// along each dimension of the iteration space (0 where it is broadcast).
struct operand_layout {
  const unsigned char* data = nullptr;
  int bytes = 0;
  std::array<std::int64_t, max_rank> stride{};
};

// Strides of a row-major tensor of extents `actual` read over iteration space `space` (numpy
// broadcasting: right-aligned, size-1 dimensions repeat).
inline operand_layout layout_over(const void* data, int bytes, const shape& actual,
                                  const shape& space) {
  operand_layout l{static_cast<const unsigned char*>(data), bytes, {}};
  std::int64_t s = 1;
  for (int i = actual.rank - 1; i >= 0; --i) {
    int si = space.rank - actual.rank + i;
    l.stride[si] = actual.dims[i] == 1 ? 0 : s;
    s *= actual.dims[i];
  }
  return l;
}

// A region's row function as run_region takes it: a cpu::row_fn, or anything callable like one.
using row_ref = function_ref<void(const void* const* in, const std::int64_t* step, void* const* out,
                                  std::int64_t count)>;

// Runs `row` over `space`. ins/outs are indexed by parameter / result, only those of the region
// set. Behind the runtime boundary: one copy per program, not one per file that calls a function.
KILN_RUNTIME_API void run_region(row_ref row, const shape& space,
                                 std::span<const std::int32_t> args,
                                 std::span<const operand_layout> ins,
                                 std::span<const std::int32_t> results,
                                 std::span<const operand_layout> outs);

#if KILN_RUNTIME_BODY
KILN_RUNTIME_API void run_region(row_ref row, const shape& space,
                                 std::span<const std::int32_t> args,
                                 std::span<const operand_layout> ins,
                                 std::span<const std::int32_t> results,
                                 std::span<const operand_layout> outs) {
  std::int64_t total = space.element_count();
  if (total == 0) return;
  // Collapse: drop size-1 dimensions, merge neighbours that every operand walks contiguously.
  std::vector<operand_layout> ops;
  for (auto a : args) ops.push_back(ins[a]);
  for (auto r : results) ops.push_back(outs[r]);
  std::array<std::int64_t, max_rank> dims{};
  std::vector<std::array<std::int64_t, max_rank>> strides(ops.size());
  int rank = 0;
  for (int i = 0; i < space.rank; ++i) {
    if (space.dims[i] == 1) continue;
    bool merge = rank > 0;
    for (std::size_t k = 0; merge && k < ops.size(); ++k)
      merge = strides[k][rank - 1] == ops[k].stride[i] * space.dims[i];
    if (merge) {
      dims[rank - 1] *= space.dims[i];
      for (std::size_t k = 0; k < ops.size(); ++k) strides[k][rank - 1] = ops[k].stride[i];
    } else {
      dims[rank] = space.dims[i];
      for (std::size_t k = 0; k < ops.size(); ++k) strides[k][rank] = ops[k].stride[i];
      ++rank;
    }
  }
  if (rank == 0) {  // a single element
    dims[0] = 1;
    for (auto& s : strides) s[0] = 1;
    rank = 1;
  }
  std::int64_t inner = dims[rank - 1];
  std::int64_t rows = total / inner;
  bool parallel = total >= parallel_threshold;
  int threads = parallel ? thread_count() : 1;
  // Tasks of about total / (32 x threads) elements (at least task_grain): a thread that finishes
  // its last task early then idles for at most 1/32 of the call. Long rows are cut into pieces of
  // whole steps; short rows are claimed several at a time.
  std::int64_t grain = std::max<std::int64_t>(total / (std::int64_t{threads} * 32), task_grain);
  std::int64_t piece = inner;
  if (threads > 1 && inner > grain) piece = (grain + lanes - 1) / lanes * lanes;
  std::int64_t pieces = (inner + piece - 1) / piece;
  std::int64_t tasks = rows * pieces;
  std::int64_t chunk = std::max<std::int64_t>(grain / piece, 1);
  std::size_t n_args = args.size();

  // Runs tasks [first, last) on the calling thread.
  auto run_tasks = [&](std::int64_t first, std::int64_t last) {
    row_list<const void*> in_ptr(ins.size());
    row_list<std::int64_t> step(ins.size());
    row_list<void*> out_ptr(outs.size());
    for (std::int64_t t = first; t < last; ++t) {
      std::int64_t r = t / pieces, p = t % pieces;
      std::int64_t begin = p * piece, count = std::min(piece, inner - begin);
      for (std::size_t k = 0; k < ops.size(); ++k) {
        // Offset of row r: its multi-index over the outer dimensions, times the strides.
        std::int64_t offset = 0, rest = r;
        for (int i = rank - 2; i >= 0; --i) {
          offset += (rest % dims[i]) * strides[k][i];
          rest /= dims[i];
        }
        offset += begin * strides[k][rank - 1];
        const unsigned char* base = ops[k].data + offset * ops[k].bytes;
        if (k < n_args) {
          in_ptr[args[k]] = base;
          step[args[k]] = strides[k][rank - 1] ? 1 : 0;
        } else {
          out_ptr[results[k - n_args]] = const_cast<unsigned char*>(base);
        }
      }
      row(in_ptr.data(), step.data(), out_ptr.data(), count);
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
