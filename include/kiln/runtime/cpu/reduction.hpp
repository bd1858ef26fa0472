// Runs a reduction's region on the CPU: the region's row function evaluates the root's operand
// (its fused producers) a piece at a time into scratch, and this folds the pieces in a fixed,
// pairwise order, so the result has a tree's error bound and the same bits for any thread count.
#pragma once

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "kiln/codegen/cpu/fold_order.hpp"
#include "kiln/codegen/cpu/row_function.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/ir/attributes.hpp"
#include "kiln/ir/op.hpp"
#include "kiln/runtime/cpu/executor.hpp"

namespace kiln::cpu {

// Reduces the row function's values over the axes set in attrs.axes of `space` (the root's
// operand dims) with reduction `kind` on elements of `type`, and stores the result (an i64 index
// for argmax and argmin) to every output slot of the region. Output layouts are over `space`, with
// stride 0 along the reduced axes. direct: the input slot the root's operand is loaded from when
// the region computes nothing before it (a parameter or a transient reduced as it is), else -1: the
// fold then reads that memory directly where it is contiguous, with no pass through scratch.
// rows: the kept indices to reduce (a row group's block), or all of them. Either way each result
// is folded in the same order, so it has the same bits. fold: the row function's own fold (null
// where it has none), used for pieces along a reduced contiguous dim that it reads without
// gathering.
KILN_RUNTIME_API void run_reduction(row_ref row, fold_fn fold, ir::op kind, dtype type,
                                    const shape& space, const ir::attributes& attrs,
                                    std::span<const std::int32_t> in_slots,
                                    std::span<const operand_layout> ins,
                                    std::span<const std::int32_t> out_slots,
                                    std::span<const operand_layout> outs, int direct,
                                    row_block rows = {});

// run_reduction over rows [rows.first, rows.last) of a row group whose operands each walk the rows
// affinely (row_walks): row_size elements a row, folded in the same order, so to the same bits;
// by `fold` where the region has one (not null).
KILN_RUNTIME_API void reduce_rows(row_ref row, fold_fn fold, ir::op kind, dtype type,
                                  const ir::attributes& attrs, std::span<const row_walk> walks,
                                  std::size_t in_slots, std::size_t out_slots, int direct,
                                  std::int64_t row_size, row_block rows);

}  // namespace kiln::cpu

// This instruction set's kernels (runtime/cpu/kernels.hpp chooses among the sets).
#if KILN_CPU_KERNELS_BODY
#include "kiln/codegen/cpu/isa.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {
namespace detail {

// The type a reduction folds elements of dtype t in: narrow floats widen to f32 (exactly), every
// integer type to i64 (exactly; sums and products then wrap as t once narrowed back). One fold per
// (reduction, fold type) rather than per element type keeps the driver's instantiations few.
constexpr dtype fold_dtype(dtype t) {
  if (t == dtype::f64) return dtype::f64;
  return is_floating(t) ? dtype::f32 : dtype::i64;
}

// How one reduction folds elements of fold type S: value(x) maps an element, combine() joins two
// partial results, finish() turns the total into the result.
template <ir::op Kind, class S>
struct reducer {
  static constexpr bool is_float = std::is_floating_point_v<S>;
  // Floats fold in their own type; integers in 64-bit unsigned arithmetic for sums and products
  // (they wrap as their type once narrowed), in i64 for max and min.
  static constexpr bool is_extreme = Kind == ir::op::reduce_max || Kind == ir::op::reduce_min;
  using acc_t = std::conditional_t<is_float || is_extreme, S, std::uint64_t>;

  static constexpr acc_t identity() {
    constexpr bool max = Kind == ir::op::reduce_max;
    if constexpr (is_extreme && is_float)
      return max ? -std::numeric_limits<S>::infinity() : std::numeric_limits<S>::infinity();
    else if constexpr (is_extreme)
      return max ? std::numeric_limits<S>::lowest() : std::numeric_limits<S>::max();
    else if constexpr (Kind == ir::op::reduce_prod)
      return acc_t(1);
    else
      return acc_t(0);
  }
  static acc_t value(S x, std::int64_t = 0) {
    if constexpr (is_float) {
      if constexpr (Kind == ir::op::reduce_l1) return std::fabs(x);
      if constexpr (Kind == ir::op::reduce_l2 || Kind == ir::op::reduce_sum_square) return x * x;
      return x;
    } else if constexpr (is_extreme) {
      return x;
    } else {
      auto u = static_cast<std::uint64_t>(x);
      if constexpr (Kind == ir::op::reduce_l1) return x < 0 ? std::uint64_t(0) - u : u;
      if constexpr (Kind == ir::op::reduce_sum_square) return u * u;
      return u;
    }
  }
  static acc_t combine(acc_t a, acc_t b) {
    if constexpr (is_extreme) {
      // b wins when it is beyond a, or NaN; a NaN a never loses: NaN propagates, as ONNX's
      // reference does. One select, so the fold vectorizes.
      bool beyond = Kind == ir::op::reduce_max ? b > a : b < a;
      if constexpr (is_float) beyond = beyond | (b != b);
      return beyond ? b : a;
    } else if constexpr (Kind == ir::op::reduce_prod) {
      return a * b;
    } else {
      return a + b;
    }
  }
  // The result of `count` elements' total, stored as element type `type`.
  static void store(acc_t a, std::int64_t count, dtype type, void* out) {
    if constexpr (Kind == ir::op::reduce_mean) a = a / static_cast<acc_t>(count);
    if constexpr (Kind == ir::op::reduce_l2) a = std::sqrt(a);
    visit_dtype(type, [&]<dtype D>() {
      using T = storage_t<D>;
      if constexpr (ir::accepts(ir::info(Kind).types, D) && fold_dtype(D) == dtype_of<S>) {
        if constexpr (is_extreme && !is_float)
          if (count == 0)
            a = Kind == ir::op::reduce_max ? std::numeric_limits<T>::lowest()
                                           : std::numeric_limits<T>::max();
        if constexpr (!std::is_arithmetic_v<T>)  // narrow floats convert from f32
          *static_cast<T*>(out) = static_cast<T>(static_cast<float>(a));
        else
          *static_cast<T*>(out) = static_cast<T>(a);  // truncation: sums and products wrap as T
      }
    });
  }

  // The pairwise fold of n (at most fold_piece) elements in kiln's order (fold_order.hpp):
  // blocks of 256 folded into 32 interleaved partials (four SIMD registers' worth, so the loop
  // vectorizes), the blocks' partials joined as a binary counter does, then the 32 joined as a
  // tree. The error grows with 8 + log n, not with n.
  static acc_t fold(const S* x, std::int64_t n, std::int64_t = 0) {
    using order = block_partials<acc_t, 32>;
    auto join = [](acc_t a, acc_t b) { return combine(a, b); };
    order partials;
    for (std::int64_t i = 0; i < n; i += order::block) {
      fold_block(x + i, std::min<std::int64_t>(order::block, n - i), partials.next());
      partials.push(join);
    }
    acc_t* joined = partials.result(join);
    return joined ? join_tree(joined) : identity();
  }
  // The m (at most 256) elements at x folded into the 32 partials at p: element k into partial
  // k % 32, in order. The first 32 start from the identity where they are folded (filling p with
  // identities first was a `rep stos` per block: a tenth of a row's fold of 768).
  static void fold_block(const S* __restrict x, std::int64_t m, acc_t* __restrict p) {
    constexpr int ways = 32;
    if (m < ways) {
      for (int k = 0; k < ways; ++k) p[k] = k < m ? combine(identity(), value(x[k])) : identity();
      return;
    }
    for (int k = 0; k < ways; ++k) p[k] = combine(identity(), value(x[k]));
    if (m == 256) {  // a whole block: a fixed trip count, unrolled
      for (int j = ways; j < 256; j += ways)
        for (int k = 0; k < ways; ++k) p[k] = combine(p[k], value(x[j + k]));
      return;
    }
    std::int64_t i = ways;
    for (; i + ways <= m; i += ways)
      for (int k = 0; k < ways; ++k) p[k] = combine(p[k], value(x[i + k]));
    for (int k = 0; i < m; ++i, ++k) p[k] = combine(p[k], value(x[i]));
  }
  // The 32 partials at p joined as fold_order's tree: its widths of 32 bytes or more on 32-byte
  // vectors (GCC's vector extension, one code for every acc_t; kept in registers, never passed
  // to a function, so no ABI note), the last vector's lanes then as scalars.
  static acc_t join_tree(acc_t* p) {
    constexpr int lanes = 32 / int(sizeof(acc_t)), vectors = 32 / lanes;
    typedef acc_t vec __attribute__((vector_size(32)));
    vec v[vectors];
    std::memcpy(v, p, sizeof v);
    for (int w = vectors / 2; w > 0; w /= 2)
      for (int q = 0; q < w; ++q) {
        if constexpr (is_extreme) {  // combine's select, lane by lane: b where it is beyond a
          auto beyond = Kind == ir::op::reduce_max ? v[q + w] > v[q] : v[q + w] < v[q];
          if constexpr (is_float) beyond = beyond | (v[q + w] != v[q + w]);
          using bits = decltype(beyond);
          v[q] = (vec)(((bits)v[q + w] & beyond) | ((bits)v[q] & ~beyond));
        } else if constexpr (Kind == ir::op::reduce_prod) {
          v[q] = v[q] * v[q + w];
        } else {
          v[q] = v[q] + v[q + w];
        }
      }
    acc_t last[lanes];
    std::memcpy(last, &v[0], sizeof last);
    return join_partials(last, lanes, [](acc_t a, acc_t b) { return combine(a, b); });
  }
  static acc_t fold_partials(const acc_t* p, std::int64_t n) {
    if (n == 0) return identity();
    if (n == 1) return p[0];
    std::int64_t half = n / 2;
    return combine(fold_partials(p, half), fold_partials(p + half, n - half));
  }
};

// argmax / argmin over elements of fold type S: the accumulator is (value, index), index -1 for
// "nothing yet"; NaN counts as the extreme (as numpy's argmax and argmin); equal extremes keep the
// first index, or the last with SelectLast. Partials may be joined in any grouping: ties are
// broken by the indices themselves.
template <ir::op Kind, class S, bool SelectLast>
struct index_reducer {
  struct acc_t {
    S v{};
    std::int64_t i = -1;
  };
  static constexpr acc_t identity() { return {}; }
  static acc_t value(S s, std::int64_t index) { return {s, index}; }
  static bool is_nan(S v) {
    if constexpr (std::is_floating_point_v<S>)
      return v != v;
    else
      return false;
  }
  static acc_t combine(acc_t a, acc_t b) {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    bool na = is_nan(a.v), nb = is_nan(b.v);
    bool tie = (na && nb) || (!na && !nb && a.v == b.v);
    if (tie) return (b.i < a.i) != SelectLast ? b : a;
    bool b_wins = nb || (!na && (Kind == ir::op::argmax ? b.v > a.v : b.v < a.v));
    return b_wins ? b : a;
  }
  static acc_t fold(const S* x, std::int64_t n, std::int64_t first) {
    acc_t best = identity();
    for (std::int64_t k = 0; k < n; ++k) best = combine(best, value(x[k], first + k));
    return best;
  }
  static acc_t fold_partials(const acc_t* p, std::int64_t n) {
    acc_t best = identity();
    for (std::int64_t k = 0; k < n; ++k) best = combine(best, p[k]);
    return best;
  }
  static void store(acc_t a, std::int64_t, dtype, void* out) {
    if (a.i < 0)
      throw error(errc::shape_mismatch, std::string(ir::name(Kind)),
                  "the axis has size 0 at this call: there is no index to give");
    *static_cast<std::int64_t*>(out) = a.i;
  }
};

// The largest accumulator: argmax's (value, index).
inline constexpr int max_acc_bytes = 16;

// A reducer behind function pointers, so the driver below is compiled once rather than once per
// (reduction, element type): it calls these per piece of hundreds of elements, never per element.
// Accumulators are opaque arrays of acc_bytes each; values are of the fold type.
struct reducer_ops {
  int acc_bytes;
  void (*fill)(void* acc, std::int64_t n);  // n identities
  // *acc = the fold of n values; first: the index of x[0] within the reduced set.
  void (*fold)(const void* x, std::int64_t n, std::int64_t first, void* acc);
  void (*fold_partials)(const void* partials, std::int64_t n, void* acc);
  // acc[i] = combine(acc[i], value(x[i])) for i < n, every x[i] at reduced index `index`.
  void (*accumulate)(void* acc, const void* x, std::int64_t n, std::int64_t index);
  void (*combine)(void* acc, const void* right, std::int64_t n);  // acc[i] with right[i]
  void (*store)(const void* acc, std::int64_t count, dtype type, void* out);
};

template <class R, class S>
requires(sizeof(typename R::acc_t) <= max_acc_bytes) constexpr reducer_ops ops_of{
    sizeof(typename R::acc_t),
    [](void* acc, std::int64_t n) {
      auto* a = static_cast<typename R::acc_t*>(acc);
      for (std::int64_t i = 0; i < n; ++i) a[i] = R::identity();
    },
    [](const void* x, std::int64_t n, std::int64_t first, void* acc) {
      *static_cast<typename R::acc_t*>(acc) = R::fold(static_cast<const S*>(x), n, first);
    },
    [](const void* p, std::int64_t n, void* acc) {
      *static_cast<typename R::acc_t*>(acc) =
          R::fold_partials(static_cast<const typename R::acc_t*>(p), n);
    },
    [](void* acc, const void* x, std::int64_t n, std::int64_t index) {
      auto* a = static_cast<typename R::acc_t*>(acc);
      auto* v = static_cast<const S*>(x);
      for (std::int64_t i = 0; i < n; ++i) a[i] = R::combine(a[i], R::value(v[i], index));
    },
    [](void* acc, const void* right, std::int64_t n) {
      auto* a = static_cast<typename R::acc_t*>(acc);
      auto* b = static_cast<const typename R::acc_t*>(right);
      for (std::int64_t i = 0; i < n; ++i) a[i] = R::combine(a[i], b[i]);
    },
    [](const void* acc, std::int64_t count, dtype type, void* out) {
      R::store(*static_cast<const typename R::acc_t*>(acc), count, type, out);
    },
};

// The reducer of reduction `kind` on elements of `type`, or nullptr where kind does not take it.
inline const reducer_ops* reducer_for(ir::op kind, dtype type, bool select_last) {
  const reducer_ops* found = nullptr;
  visit_dtype(fold_dtype(type), [&]<dtype F>() {
    if constexpr (F == dtype::f32 || F == dtype::f64 || F == dtype::i64) {
      using S = storage_t<F>;
      auto with = [&]<ir::op Kind>() {
        if (kind != Kind || !ir::accepts(ir::info(Kind).types, type)) return;
        if constexpr (ir::info(Kind).cls == ir::op_class::index_reduction)
          found = select_last ? &ops_of<index_reducer<Kind, S, true>, S>
                              : &ops_of<index_reducer<Kind, S, false>, S>;
        else if constexpr (ir::accepts(ir::info(Kind).types, F))
          found = &ops_of<reducer<Kind, S>, S>;
      };
      // Every reduction of the op list.
#define KILN_REDUCER_FOR(NAME, ARITY, CLASS, ...) \
  if constexpr (ir::is_reduction(ir::op_class::CLASS)) with.template operator()<ir::op::NAME>();
      KILN_IR_OPS(KILN_REDUCER_FOR)
#undef KILN_REDUCER_FOR
    }
  });
  return found;
}

// Widens n elements of `type` at x to its fold type at out.
inline void widen(dtype type, const void* x, std::int64_t n, void* out) {
  visit_dtype(type, [&]<dtype D>() {
    if constexpr (D != dtype::boolean) {
      using T = storage_t<D>;
      using F = storage_t<fold_dtype(D)>;
      auto* from = static_cast<const T*>(x);
      auto* to = static_cast<F*>(out);
      for (std::int64_t i = 0; i < n; ++i) to[i] = static_cast<F>(from[i]);
    }
  });
}

// Memory for accumulators: words of 16 bytes, every accumulator's alignment.
struct alignas(16) acc_word {
  unsigned char bytes[16];
};
inline std::size_t words_for(std::int64_t bytes) {
  return static_cast<std::size_t>(bytes + 15) / 16;
}

// An array of accumulators (opaque, up to max_acc_bytes each): in the object up to 8 words of 16
// bytes (a row group's reduction makes two per block of rows), else on the heap.
class acc_array {
 public:
  acc_array(const reducer_ops& r, std::int64_t n) : r_(r) {
    const std::size_t words = words_for(n * r.acc_bytes);
    if (words > local_.size()) heap_.resize(words);
    data_ = heap_.empty() ? local_.data() : heap_.data();
  }
  acc_array(const acc_array&) = delete;  // data_ may point into local_
  acc_array& operator=(const acc_array&) = delete;
  void* at(std::int64_t i) { return reinterpret_cast<unsigned char*>(data_) + i * r_.acc_bytes; }

 private:
  const reducer_ops& r_;
  std::array<acc_word, 8> local_;
  std::vector<acc_word> heap_;
  acc_word* data_;
};

// The reducer of reduction `kind` on elements of `type`; an error where there is none.
inline const reducer_ops& reducer_of(ir::op kind, dtype type, const ir::attributes& attrs) {
  const reducer_ops* r = reducer_for(kind, type, attrs.select_last);
  if (!r)
    throw error(errc::unsupported, std::string(ir::name(kind)),
                "no CPU reduction for element type " + std::string(name(type)));
  return *r;
}

// Scratch for one piece of n values: the row function's (type; none where `stored` is false: the
// values are read in place or folded in registers) and their widened form. Uninitialized: a
// piece is written before it is read.
struct scratch {
  std::unique_ptr<unsigned char[]> row, wide;
  scratch(std::int64_t n, int bytes, bool widens, bool stored = true)
      : row(stored ? new unsigned char[static_cast<std::size_t>((n + lanes * 2) * bytes)]
                   : nullptr),
        wide(widens ? new unsigned char[static_cast<std::size_t>(n * 8)] : nullptr) {}
};

// A row is folded in pieces of this many elements (fold_order.hpp), the pieces' partials then
// joined pairwise.
inline constexpr std::int64_t row_piece = fold_piece;

inline void reduce(row_ref row, fold_fn fold, const reducer_ops& r, dtype type, dtype result_type,
                   const shape& space, std::uint32_t axes, std::span<const std::int32_t> in_slots,
                   std::span<const operand_layout> ins, std::span<const std::int32_t> out_slots,
                   std::span<const operand_layout> outs, int direct, row_block rows) {
  const collapsed_region region(space, axes, in_slots, ins, out_slots, outs);
  const std::vector<const operand_layout*>& ops = *region.ops;
  const std::size_t n_in = in_slots.size();
  const collapsed_space& s = *region.space;
  const auto& kept = s.kept;
  const auto& reduced = s.reduced_dims;
  const int inner = s.rank - 1;
  const bool row_case = s.reduced[inner];  // the contiguous dim is reduced: fold along rows
  // in_count: reduced indices outside the contiguous dim; count: elements per output.
  const std::int64_t outputs = s.kept_count(), in_count = s.outer_reduced_count();
  const std::int64_t count = row_case ? in_count * s.dims[inner] : in_count;
  const std::int64_t first_row = rows.last < 0 ? 0 : rows.first;
  const std::int64_t last_row = rows.last < 0 ? outputs : rows.last;
  if (first_row >= last_row) return;

  const int bytes = size_in_bytes(type);
  const dtype folded = fold_dtype(type);
  const bool widens = folded != type;
  // The operand read in place: position of the direct slot among the inputs, if contiguous.
  int in_place = -1;
  for (std::size_t k = 0; k < n_in; ++k)
    if (in_slots[k] == direct && s.strides[k][inner] == 1 && ops[k]->terms.empty())
      in_place = static_cast<int>(k);
  // The operand's n values at `offsets`, in the fold type: read in place, or evaluated (and
  // widened) into scratch.
  auto call_row = [&](const std::vector<std::int64_t>& offsets, scratch& mem, std::int64_t n,
                      row_pointers& ptrs) -> const void* {
    const void* values = nullptr;
    if (in_place >= 0) {
      values = ops[in_place]->data + offsets[in_place] * bytes;
    } else {
      ptrs.point(ops, s, in_slots, {}, offsets);
      ptrs.set_out(out_slots[0], mem.row.get(), bytes);
      ptrs.call(row, n);
      values = mem.row.get();
    }
    if (!widens) return values;
    widen(type, values, n, mem.wide.get());
    return mem.wide.get();
  };
  auto store_all = [&](const std::vector<std::int64_t>& offsets, const void* acc) {
    for (std::size_t k = n_in; k < ops.size(); ++k)
      r.store(acc, count, result_type,
              const_cast<unsigned char*>(ops[k]->data) + offsets[k] * ops[k]->bytes);
  };
  const std::size_t in_size = ins.size(), out_size = outs.size();
  const std::int64_t total = (last_row - first_row) * count;
  const int threads = rows.last < 0 && total >= parallel_threshold ? split_threads() : 1;

  if (row_case) {
    // Pieces of whole rows: partial p of output o covers piece p % pieces of reduced row
    // p / pieces. Partials are joined pairwise in that order, whoever computed them.
    constexpr std::int64_t piece = row_piece;
    const std::int64_t n0 = s.dims[inner];
    const std::int64_t pieces = std::max<std::int64_t>((n0 + piece - 1) / piece, 1);
    const std::int64_t per_output = in_count * pieces;
    // Task t: piece t % per_output of output first_row + t / per_output.
    acc_array partials(r, (last_row - first_row) * per_output);
    auto run = [&](std::int64_t first, std::int64_t last) {
      row_pointers ptrs(in_size, out_size);
      scratch mem(std::min(piece, n0), bytes, widens);
      std::vector<std::int64_t> offsets(s.entries());
      for (std::int64_t t = first; t < last; ++t) {
        std::int64_t o = first_row + t / per_output, j = (t % per_output) / pieces, p = t % pieces;
        std::fill(offsets.begin(), offsets.end(), 0);
        s.add_offsets(kept, o, offsets);
        s.add_offsets(reduced, j, offsets);
        std::int64_t begin = p * piece, n = std::min(piece, n0 - begin);
        for (std::size_t k = 0; k < s.entries(); ++k)  // the inputs and their index terms
          if (k < n_in || k >= ops.size()) offsets[k] += begin * s.strides[k][inner];
        // The elements' index within the result's reduced set (argmax, argmin).
        std::int64_t first_index = j * n0 + begin;
        if (n <= 0) {
          r.fill(partials.at(t), 1);
          continue;
        }
        if (fold && in_place < 0 && !widens) {  // the row function folds what it reads in place
          ptrs.point(ops, s, in_slots, {}, offsets);
          if (!ptrs.gathers()) {
            fold(ptrs.in.data(), ptrs.step.data(), n, partials.at(t));
            continue;
          }
        }
        r.fold(call_row(offsets, mem, n, ptrs), n, first_index, partials.at(t));
      }
    };
    std::int64_t tasks = (last_row - first_row) * per_output;
    std::int64_t grain = claim_elements(total, threads);
    std::int64_t chunk =
        std::max<std::int64_t>(grain / std::min(piece, std::max<std::int64_t>(n0, 1)), 1);
    if (threads > 1)
      parallel_for(tasks, chunk, run);
    else
      run(0, tasks);
    std::vector<std::int64_t> offsets(s.entries());
    acc_array result(r, 1);
    for (std::int64_t o = first_row; o < last_row; ++o) {
      std::fill(offsets.begin(), offsets.end(), 0);
      s.add_offsets(kept, o, offsets);
      r.fold_partials(partials.at((o - first_row) * per_output), per_output, result.at(0));
      store_all(offsets, result.at(0));
    }
    return;
  }

  // The contiguous dim is kept (sums down columns): strips of consecutive outputs along it are
  // folded across every reduced index at once, each output's elements in one fixed tree: the
  // reduced range halved, halves joined pairwise, down to runs of at most 8 folded in order. So
  // the bits do not depend on how the work is cut. A strip is as wide as keeps its accumulators
  // in L1 (16 KiB a level), so each reduced index reads that many bytes in a row: strips of 1 KiB
  // read each row in a new page, and ran at 5 GB/s where the memory gives 15. Where the strips
  // are fewer than the threads, the tree's top levels are cut among them as well.
  constexpr std::int64_t leaf = 8;
  const std::int64_t c = s.dims[inner];
  const std::int64_t strip = std::max<std::int64_t>(16384 / r.acc_bytes, 1);
  const std::int64_t strips_per_row = (c + strip - 1) / strip;
  const std::int64_t first_strip = first_row / c * strips_per_row + first_row % c / strip;
  const std::int64_t strips = (last_row + c - 1) / c * strips_per_row - first_strip;
  // The tree's nodes `depth` levels down (or its leaves, where they come first), in order.
  int depth = 0;
  while (threads > 1 && strips << depth < threads && in_count >> depth > 2 * leaf) ++depth;
  std::vector<std::pair<std::int64_t, std::int64_t>> subtrees;
  auto cut = [&](auto& self, std::int64_t a, std::int64_t b, int d) -> void {
    if (d == 0 || b - a <= leaf) {
      subtrees.emplace_back(a, b);
      return;
    }
    const std::int64_t mid = a + (b - a) / 2;
    self(self, a, mid, d - 1);
    self(self, mid, b, d - 1);
  };
  cut(cut, 0, in_count, depth);
  const auto parts = static_cast<std::int64_t>(subtrees.size());
  // Levels of accumulators a subtree's fold needs (its root's, then one per halving).
  int levels = 1;
  for (std::int64_t n = in_count; n > leaf; n -= n / 2) ++levels;
  const std::int64_t level_bytes = std::min(strip, c) * r.acc_bytes;
  // Where the tree is cut, each part's accumulators until the parts are joined.
  std::vector<acc_word> joined(parts > 1 ? words_for(strips * parts * level_bytes) : 0);
  // Strip q (counted from first_strip): sets its outer index and first column, returns its width.
  auto strip_at = [&](std::int64_t q, std::int64_t& o, std::int64_t& begin) {
    const std::int64_t t = first_strip + q;
    o = t / strips_per_row;
    begin = std::max((t % strips_per_row) * strip, first_row - o * c);
    return std::min({(t % strips_per_row + 1) * strip, c, last_row - o * c}) - begin;
  };
  auto base_of = [&](std::int64_t o, std::int64_t begin, std::vector<std::int64_t>& base) {
    std::fill(base.begin(), base.end(), 0);
    s.add_offsets(kept, o, base);
    for (std::size_t k = 0; k < s.entries(); ++k) base[k] += begin * s.strides[k][inner];
  };
  // Stores a strip's n results from acc; offsets: a vector of s.entries() to use.
  auto store_strip = [&](const std::vector<std::int64_t>& base, std::int64_t n,
                         const unsigned char* acc, std::vector<std::int64_t>& offsets) {
    for (std::int64_t i = 0; i < n; ++i) {
      offsets = base;
      for (std::size_t k = n_in; k < ops.size(); ++k) offsets[k] += i * s.strides[k][inner];
      store_all(offsets, acc + i * r.acc_bytes);
    }
  };
  // Task t: part t % parts of strip t / parts.
  auto run = [&](std::int64_t first, std::int64_t last) {
    row_pointers ptrs(in_size, out_size);
    scratch mem(std::min(strip, c), bytes, widens);
    const std::unique_ptr<acc_word[]> memory(new acc_word[words_for(levels * level_bytes)]);
    auto* const acc_levels = reinterpret_cast<unsigned char*>(memory.get());
    std::vector<std::int64_t> base(s.entries()), offsets(s.entries());
    // Folds reduced indices [a, b) of the strip at `base` into acc (identities at first); the
    // right halves' accumulators from `spare` on, a level each.
    auto fold_range = [&](auto& self, std::int64_t a, std::int64_t b, std::int64_t n,
                          unsigned char* acc, unsigned char* spare) -> void {
      if (b - a > leaf) {
        const std::int64_t mid = a + (b - a) / 2;
        self(self, a, mid, n, acc, spare);
        r.fill(spare, n);
        self(self, mid, b, n, spare, spare + level_bytes);
        r.combine(acc, spare, n);
        return;
      }
      for (std::int64_t j = a; j < b; ++j) {
        offsets = base;
        s.add_offsets(reduced, j, offsets);
        r.accumulate(acc, call_row(offsets, mem, n, ptrs), n, j);
      }
    };
    for (std::int64_t t = first; t < last; ++t) {
      std::int64_t o, begin;
      const std::int64_t n = strip_at(t / parts, o, begin);
      if (n <= 0) continue;
      base_of(o, begin, base);
      const auto [a, b] = subtrees[t % parts];
      unsigned char* acc = parts > 1
                               ? reinterpret_cast<unsigned char*>(joined.data()) + t * level_bytes
                               : acc_levels;
      r.fill(acc, n);
      fold_range(fold_range, a, b, n, acc, acc_levels + level_bytes);
      if (parts == 1) store_strip(base, n, acc, offsets);
    }
  };
  if (threads > 1)
    parallel_for(
        strips * parts,
        std::max<std::int64_t>(claim_elements(total, threads) * parts /
                                   std::max<std::int64_t>(std::min(strip, c) * in_count, 1),
                               1),
        run);
  else
    run(0, strips * parts);
  if (parts == 1) return;
  // The parts joined up the tree as fold_range joins halves, into each strip's first part.
  std::vector<std::int64_t> base(s.entries()), offsets(s.entries());
  for (std::int64_t q = 0; q < strips; ++q) {
    std::int64_t o, begin;
    const std::int64_t n = strip_at(q, o, begin);
    if (n <= 0) continue;
    auto* part = reinterpret_cast<unsigned char*>(joined.data()) + q * parts * level_bytes;
    std::int64_t next = 0;
    auto join = [&](auto& self, std::int64_t a, std::int64_t b, int d) -> unsigned char* {
      if (d == 0 || b - a <= leaf) return part + next++ * level_bytes;
      const std::int64_t mid = a + (b - a) / 2;
      unsigned char* left = self(self, a, mid, d - 1);
      r.combine(left, self(self, mid, b, d - 1), n);
      return left;
    };
    join(join, 0, in_count, depth);
    base_of(o, begin, base);
    store_strip(base, n, part, offsets);
  }
}

}  // namespace detail

namespace kernels {

inline void reduce_rows(row_ref row, fold_fn fold, ir::op kind, dtype type,
                        const ir::attributes& attrs, std::span<const row_walk> walks,
                        std::size_t in_slots, std::size_t out_slots, int direct,
                        std::int64_t row_size, row_block rows);

inline void run_reduction(row_ref row, fold_fn fold, ir::op kind, dtype type, const shape& space,
                          const ir::attributes& attrs, std::span<const std::int32_t> in_slots,
                          std::span<const operand_layout> ins,
                          std::span<const std::int32_t> out_slots,
                          std::span<const operand_layout> outs, int direct, row_block rows) {
  // Here, not on the threads: a reduction kiln has no reducer for is an error (parallel_for's
  // tasks must not throw).
  const detail::reducer_ops& r = detail::reducer_of(kind, type, attrs);
  // All of a reduction over trailing axes, on rows that every operand walks affinely (the
  // common [rows, C] reduced over C): reduce_rows, threaded over rows. Rows then cost a few
  // adds each; the general path below finds each row's offsets by integer division, which on
  // rows of 768 floats read from memory took a third of the time. Both fold each row in the same
  // order, so to the same bits. Too few rows to share among the threads keeps the general path:
  // it shares one row's pieces among them.
  if (rows.last < 0) {
    const std::int64_t total = space.element_count();
    const std::int64_t rows_total = ir::kept_dims(space, attrs).element_count();
    const std::int64_t row_size = rows_total > 0 ? total / rows_total : 0;
    const int threads = total >= parallel_threshold ? split_threads() : 1;
    if (row_size > 0 && rows_total >= 4 * std::int64_t{threads} &&
        ir::trailing_axes(attrs.axes, space.rank)) {
      thread_kept<std::vector<row_walk>> kept_walks;
      std::vector<row_walk>& walks = *kept_walks;
      walks.clear();
      if (row_walks(space, attrs.axes, true, in_slots, ins, out_slots, outs, walks)) {
        auto block = [&](std::int64_t first, std::int64_t last) {
          kernels::reduce_rows(row, fold, kind, type, attrs, walks, ins.size(), outs.size(), direct,
                               row_size, {first, last});
        };
        if (threads > 1)
          parallel_for(rows_total,
                       std::max<std::int64_t>(claim_elements(total, threads) / row_size, 1), block);
        else
          block(0, rows_total);
        return;
      }
    }
  }
  detail::reduce(row, fold, r, type, ir::result_dtype(kind, type), space, attrs.axes, in_slots, ins,
                 out_slots, outs, direct, rows);
}

inline void reduce_rows(row_ref row, fold_fn fold, ir::op kind, dtype type,
                        const ir::attributes& attrs, std::span<const row_walk> walks,
                        std::size_t in_slots, std::size_t out_slots, int direct,
                        std::int64_t row_size, row_block rows) {
  using namespace detail;
  const reducer_ops& r = reducer_of(kind, type, attrs);
  const dtype result_type = ir::result_dtype(kind, type);
  const int bytes = size_in_bytes(type);
  const bool widens = fold_dtype(type) != type;
  // The operand read in place (as reduce's), and the slot the row function stores it to.
  const row_walk* in_place = nullptr;
  std::int32_t first_out = -1;
  for (const row_walk& w : walks) {
    if (!w.output && w.slot == direct && w.step == 1) in_place = &w;
    if (w.output && first_out < 0) first_out = w.slot;
  }
  const std::int64_t pieces = std::max<std::int64_t>((row_size + row_piece - 1) / row_piece, 1);
  scratch mem(std::min(row_piece, row_size), bytes, widens, !in_place && !fold);
  acc_array partials(r, pieces), result(r, 1);
  row_pointers p(in_slots, out_slots);
  // Rows of one piece that the row function reads: pointed once, then moved a row at a time.
  const bool moves = pieces == 1 && !in_place && rows.first < rows.last;
  if (moves) point_row(p, walks, rows.first);
  for (std::int64_t o = rows.first; o < rows.last; ++o) {
    for (std::int64_t k = 0; k < pieces; ++k) {
      const std::int64_t begin = k * row_piece, n = std::min(row_piece, row_size - begin);
      void* acc = pieces == 1 ? result.at(0) : partials.at(k);
      if (n <= 0) {
        r.fill(acc, 1);
        continue;
      }
      const void* values;
      if (in_place) {
        values = in_place->data + (o * in_place->row_stride + begin) * bytes;
      } else {
        if (!moves) point_row(p, walks, o, begin);
        if (fold) {
          fold(p.in.data(), p.step.data(), n, acc);
          continue;
        }
        void* const out = p.out[first_out];  // the row's place, which next_row moves on
        p.out[first_out] = mem.row.get();
        row(p.in.data(), p.step.data(), p.out.data(), n);
        p.out[first_out] = out;
        values = mem.row.get();
      }
      if (widens) {
        widen(type, values, n, mem.wide.get());
        values = mem.wide.get();
      }
      r.fold(values, n, begin, acc);
    }
    if (pieces > 1) r.fold_partials(partials.at(0), pieces, result.at(0));
    for (const row_walk& w : walks)
      if (w.output)
        r.store(result.at(0), row_size, result_type,
                const_cast<unsigned char*>(w.data) + o * w.row_stride * w.bytes);
    if (moves) next_row(p, walks);
  }
}

}  // namespace kernels
}  // namespace kiln::cpu::inline KILN_CPU_ISA
#endif  // KILN_CPU_KERNELS_BODY
