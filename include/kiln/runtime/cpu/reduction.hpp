// Runs a reduction's region on the CPU: the region's row function evaluates the root's operand
// (its fused producers) a piece at a time into scratch, and this folds the pieces in a fixed,
// pairwise order, so the result has a tree's error bound and the same bits for any thread count.
#pragma once

#include <cmath>
#include <limits>
#include <span>
#include <vector>

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
KILN_RUNTIME_API void run_reduction(row_ref row, ir::op kind, dtype type, const shape& space,
                                    const ir::attributes& attrs,
                                    std::span<const std::int32_t> in_slots,
                                    std::span<const operand_layout> ins,
                                    std::span<const std::int32_t> out_slots,
                                    std::span<const operand_layout> outs, int direct);

#if KILN_RUNTIME_BODY
namespace detail {

// How one reduction folds elements of storage type S: acc(x) maps an element, combine() joins two
// partial results, finish() turns the total into the result.
template <ir::op Kind, class S>
struct reducer {
  using out_t = S;
  static constexpr bool is_float = std::is_floating_point_v<S> || !std::is_arithmetic_v<S>;
  // Floats fold in float (narrow ones too) or double; integers in 64-bit unsigned arithmetic for
  // sums and products (they wrap as their type once truncated), in their own type for max/min.
  using acc_t =
      std::conditional_t<std::is_same_v<S, double>, double,
                         std::conditional_t<is_float, float,
                                            std::conditional_t<Kind == ir::op::reduce_max ||
                                                                   Kind == ir::op::reduce_min,
                                                               S, std::uint64_t>>>;

  static constexpr acc_t identity() {
    if constexpr (Kind == ir::op::reduce_max && is_float)
      return -std::numeric_limits<acc_t>::infinity();
    else if constexpr (Kind == ir::op::reduce_max)
      return std::numeric_limits<S>::lowest();
    else if constexpr (Kind == ir::op::reduce_min && is_float)
      return std::numeric_limits<acc_t>::infinity();
    else if constexpr (Kind == ir::op::reduce_min)
      return std::numeric_limits<S>::max();
    else if constexpr (Kind == ir::op::reduce_prod)
      return acc_t(1);
    else
      return acc_t(0);
  }
  static acc_t value(S s, std::int64_t = 0) {
    if constexpr (is_float) {
      acc_t x = static_cast<acc_t>(s);
      if constexpr (Kind == ir::op::reduce_l1) return std::fabs(x);
      if constexpr (Kind == ir::op::reduce_l2 || Kind == ir::op::reduce_sum_square) return x * x;
      return x;
    } else if constexpr (Kind == ir::op::reduce_max || Kind == ir::op::reduce_min) {
      return s;
    } else {
      auto x = static_cast<std::uint64_t>(static_cast<std::int64_t>(s));
      if constexpr (Kind == ir::op::reduce_l1)
        return std::is_signed_v<S> && s < 0 ? std::uint64_t(0) - x : x;
      if constexpr (Kind == ir::op::reduce_sum_square) return x * x;
      return x;
    }
  }
  static acc_t combine(acc_t a, acc_t b) {
    if constexpr (Kind == ir::op::reduce_max || Kind == ir::op::reduce_min) {
      if constexpr (is_float)
        if (a != a || b != b) return a + b;  // NaN propagates, as ONNX's reference does
      return Kind == ir::op::reduce_max ? (b > a ? b : a) : (b < a ? b : a);
    } else if constexpr (Kind == ir::op::reduce_prod) {
      return a * b;
    } else {
      return a + b;
    }
  }
  static S finish(acc_t a, std::int64_t count) {
    if constexpr (Kind == ir::op::reduce_mean) a = a / static_cast<acc_t>(count);
    if constexpr (Kind == ir::op::reduce_l2) a = std::sqrt(a);
    return static_cast<S>(a);  // integers: truncation, so sums and products wrap as S
  }

  // The pairwise fold of n elements: blocks of 256 folded into 32 interleaved partials (four
  // SIMD registers' worth, so the loop vectorizes), the blocks' partial vectors joined pairwise
  // as a binary counter does (a block joins the one before it when both cover as many blocks),
  // then the 32 lanes joined as a tree. The error grows with 8 + log n, not with n.
  static acc_t fold(const S* x, std::int64_t n, std::int64_t = 0) {
    constexpr int ways = 32, block = 256;
    acc_t stack[48][ways];
    int level[48], top = 0;
    auto push = [&](acc_t* p, int l) {
      while (top > 0 && level[top - 1] == l) {
        --top;
        for (int k = 0; k < ways; ++k) p[k] = combine(stack[top][k], p[k]);
        ++l;
      }
      for (int k = 0; k < ways; ++k) stack[top][k] = p[k];
      level[top++] = l;
    };
    std::int64_t i = 0;
    acc_t p[ways];
    for (; i + block <= n; i += block) {
      for (auto& v : p) v = identity();
      for (int j = 0; j < block; j += ways)
        for (int k = 0; k < ways; ++k) p[k] = combine(p[k], value(x[i + j + k]));
      push(p, 0);
    }
    if (i < n) {
      for (auto& v : p) v = identity();
      for (int k = 0; i < n; ++i, k = (k + 1) % ways) p[k] = combine(p[k], value(x[i]));
      push(p, 0);
    }
    if (top == 0) return identity();
    for (int k = 0; k < ways; ++k) p[k] = stack[top - 1][k];
    for (int t = top - 2; t >= 0; --t)
      for (int k = 0; k < ways; ++k) p[k] = combine(stack[t][k], p[k]);
    for (int width = ways / 2; width > 0; width /= 2)
      for (int k = 0; k < width; ++k) p[k] = combine(p[k], p[k + width]);
    return p[0];
  }
  static acc_t fold_partials(const acc_t* p, std::int64_t n) {
    if (n == 0) return identity();
    if (n == 1) return p[0];
    std::int64_t half = n / 2;
    return combine(fold_partials(p, half), fold_partials(p + half, n - half));
  }
};

// argmax / argmin over elements of storage type S: the accumulator is (value, index), index -1
// for "nothing yet"; NaN counts as the extreme (as numpy's argmax and argmin); equal extremes
// keep the first index, or the last with SelectLast. Partials may be joined in any grouping:
// ties are broken by the indices themselves.
template <ir::op Kind, class S, bool SelectLast>
struct index_reducer {
  using out_t = std::int64_t;
  using cmp_t = std::conditional_t<std::is_arithmetic_v<S>, S, float>;
  struct acc_t {
    cmp_t v{};
    std::int64_t i = -1;
  };
  static constexpr acc_t identity() { return {}; }
  static acc_t value(S s, std::int64_t index) { return {static_cast<cmp_t>(s), index}; }
  static bool is_nan(cmp_t v) {
    if constexpr (std::is_floating_point_v<cmp_t>)
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
  static std::int64_t finish(acc_t a, std::int64_t) {
    if (a.i < 0)
      throw error(errc::shape_mismatch, std::string(ir::name(Kind)),
                  "the axis has size 0 at this call: there is no index to give");
    return a.i;
  }
};

// The collapsed form of a reduction's space: size-1 dims dropped, neighbours of the same kind
// (kept or reduced) merged where every operand walks them contiguously.
struct reduction_space {
  int rank = 0;
  std::array<std::int64_t, max_rank> dims{};
  std::array<bool, max_rank> reduced{};
  std::vector<std::array<std::int64_t, max_rank>> strides;  // per operand (ins, then outs)
};

inline reduction_space collapse(const shape& space, std::uint32_t axes,
                                const std::vector<const operand_layout*>& ops) {
  reduction_space s;
  s.strides.resize(ops.size());
  for (int i = 0; i < space.rank; ++i) {
    if (space.dims[i] == 1) continue;
    bool red = (axes >> i) & 1u;
    bool merge = s.rank > 0 && s.reduced[s.rank - 1] == red;
    for (std::size_t k = 0; merge && k < ops.size(); ++k)
      merge = s.strides[k][s.rank - 1] == ops[k]->stride[i] * space.dims[i];
    int at = merge ? s.rank - 1 : s.rank++;
    s.dims[at] = merge ? s.dims[at] * space.dims[i] : space.dims[i];
    s.reduced[at] = red;
    for (std::size_t k = 0; k < ops.size(); ++k) s.strides[k][at] = ops[k]->stride[i];
  }
  if (s.rank == 0) {  // one element, kept
    s.rank = 1;
    s.dims[0] = 1;
    for (auto& st : s.strides) st[0] = 0;
  }
  return s;
}

// Offsets (in elements, per operand) of multi-index `index` over the dims listed in `which`.
inline void add_offsets(const reduction_space& s, const std::vector<int>& which, std::int64_t index,
                        std::vector<std::int64_t>& offsets) {
  for (int w = static_cast<int>(which.size()) - 1; w >= 0; --w) {
    int d = which[w];
    std::int64_t i = index % s.dims[d];
    index /= s.dims[d];
    for (std::size_t k = 0; k < offsets.size(); ++k) offsets[k] += i * s.strides[k][d];
  }
}

template <class R, class S>
void reduce_with(row_ref row, const shape& space, std::uint32_t axes,
                 std::span<const std::int32_t> in_slots, std::span<const operand_layout> ins,
                 std::span<const std::int32_t> out_slots, std::span<const operand_layout> outs,
                 int direct) {
  using acc_t = typename R::acc_t;
  using out_t = typename R::out_t;
  std::vector<const operand_layout*> ops;
  for (auto s : in_slots) ops.push_back(&ins[s]);
  for (auto s : out_slots) ops.push_back(&outs[s]);
  const std::size_t n_in = in_slots.size();
  reduction_space s = collapse(space, axes, ops);
  std::vector<int> kept, reduced;
  for (int d = 0; d < s.rank - 1; ++d) (s.reduced[d] ? reduced : kept).push_back(d);
  const int inner = s.rank - 1;
  const bool row_case = s.reduced[inner];  // the contiguous dim is reduced: fold along rows
  // in_count: reduced indices outside the contiguous dim; count: elements per output.
  std::int64_t outputs = 1, in_count = 1;
  for (int d : kept) outputs *= s.dims[d];
  for (int d : reduced) in_count *= s.dims[d];
  if (!row_case) outputs *= s.dims[inner];
  const std::int64_t count = row_case ? in_count * s.dims[inner] : in_count;
  if (outputs == 0) return;

  // Pointers for one call of the row function: inputs at `offsets`, the root's operand into
  // `scratch` (the region's first output slot).
  // The operand read in place: position of the direct slot among the inputs, if contiguous.
  int in_place = -1;
  for (std::size_t k = 0; k < n_in; ++k)
    if (in_slots[k] == direct && s.strides[k][inner] == 1) in_place = static_cast<int>(k);
  // The operand's n values at `offsets`: in place, or evaluated into scratch.
  auto call_row = [&](const std::vector<std::int64_t>& offsets, S* scratch, std::int64_t n,
                      row_list<const void*>& in_ptr, row_list<std::int64_t>& step,
                      row_list<void*>& out_ptr) -> const S* {
    if (in_place >= 0) return reinterpret_cast<const S*>(ops[in_place]->data) + offsets[in_place];
    for (std::size_t k = 0; k < n_in; ++k) {
      in_ptr[in_slots[k]] = ops[k]->data + offsets[k] * ops[k]->bytes;
      step[in_slots[k]] = s.strides[k][inner] ? 1 : 0;
    }
    out_ptr[out_slots[0]] = scratch;
    row(in_ptr.data(), step.data(), out_ptr.data(), n);
    return scratch;
  };
  auto store_all = [&](const std::vector<std::int64_t>& offsets, out_t v) {
    for (std::size_t k = n_in; k < ops.size(); ++k)
      *reinterpret_cast<out_t*>(const_cast<unsigned char*>(ops[k]->data) +
                                offsets[k] * ops[k]->bytes) = v;
  };
  const std::size_t in_size = ins.size(), out_size = outs.size();
  const std::int64_t total = outputs * count;
  const int threads = total >= parallel_threshold ? thread_count() : 1;

  if (row_case) {
    // Pieces of whole rows: partial p of output o covers piece p % pieces of reduced row
    // p / pieces. Partials are joined pairwise in that order, whoever computed them.
    constexpr std::int64_t piece = 4096;
    const std::int64_t n0 = s.dims[inner];
    const std::int64_t pieces = std::max<std::int64_t>((n0 + piece - 1) / piece, 1);
    const std::int64_t per_output = in_count * pieces;
    std::vector<acc_t> partials(static_cast<std::size_t>(outputs * per_output));
    auto run = [&](std::int64_t first, std::int64_t last) {
      row_list<const void*> in_ptr(in_size);
      row_list<std::int64_t> step(in_size);
      row_list<void*> out_ptr(out_size);
      std::vector<S> scratch(static_cast<std::size_t>(std::min(piece, n0) + lanes * 2));
      std::vector<std::int64_t> offsets(ops.size());
      for (std::int64_t t = first; t < last; ++t) {
        std::int64_t o = t / per_output, j = (t % per_output) / pieces, p = t % pieces;
        std::fill(offsets.begin(), offsets.end(), 0);
        add_offsets(s, kept, o, offsets);
        add_offsets(s, reduced, j, offsets);
        std::int64_t begin = p * piece, n = std::min(piece, n0 - begin);
        for (std::size_t k = 0; k < n_in; ++k) offsets[k] += begin * s.strides[k][inner];
        // The elements' index within the result's reduced set (argmax, argmin).
        std::int64_t first_index = j * n0 + begin;
        partials[t] = n > 0 ? R::fold(call_row(offsets, scratch.data(), n, in_ptr, step, out_ptr),
                                      n, first_index)
                            : R::identity();
      }
    };
    std::int64_t tasks = outputs * per_output;
    // Claims of about 1/32 of a thread's share (as run_region's), at least task_grain elements.
    std::int64_t grain = std::max<std::int64_t>(total / (std::int64_t{threads} * 32), task_grain);
    std::int64_t chunk =
        std::max<std::int64_t>(grain / std::min(piece, std::max<std::int64_t>(n0, 1)), 1);
    if (threads > 1)
      parallel_for(tasks, chunk, run);
    else
      run(0, tasks);
    std::vector<std::int64_t> offsets(ops.size());
    for (std::int64_t o = 0; o < outputs; ++o) {
      std::fill(offsets.begin(), offsets.end(), 0);
      add_offsets(s, kept, o, offsets);
      store_all(offsets,
                R::finish(R::fold_partials(partials.data() + o * per_output, per_output), count));
    }
    return;
  }

  // The contiguous dim is kept: chunks of it are folded across every reduced index at once,
  // halves of the reduced range joined pairwise.
  constexpr std::int64_t chunk = 256;
  const std::int64_t c = s.dims[inner];
  const std::int64_t chunks = (c + chunk - 1) / chunk;
  const std::int64_t outer = outputs / c;
  auto run = [&](std::int64_t first, std::int64_t last) {
    row_list<const void*> in_ptr(in_size);
    row_list<std::int64_t> step(in_size);
    row_list<void*> out_ptr(out_size);
    std::vector<S> scratch(chunk + lanes * 2);
    std::vector<std::int64_t> base(ops.size()), offsets(ops.size());
    // Folds reduced indices [a, b) of the chunk at `base` into acc.
    auto fold_range = [&](auto& self, std::int64_t a, std::int64_t b, std::int64_t n,
                          acc_t* acc) -> void {
      if (b - a > 8) {
        std::int64_t mid = a + (b - a) / 2;
        acc_t right[chunk];
        for (std::int64_t i = 0; i < n; ++i) right[i] = R::identity();
        self(self, a, mid, n, acc);
        self(self, mid, b, n, right);
        for (std::int64_t i = 0; i < n; ++i) acc[i] = R::combine(acc[i], right[i]);
        return;
      }
      for (std::int64_t j = a; j < b; ++j) {
        offsets = base;
        add_offsets(s, reduced, j, offsets);
        const S* x = call_row(offsets, scratch.data(), n, in_ptr, step, out_ptr);
        for (std::int64_t i = 0; i < n; ++i) acc[i] = R::combine(acc[i], R::value(x[i], j));
      }
    };
    for (std::int64_t t = first; t < last; ++t) {
      std::int64_t o = t / chunks, q = t % chunks;
      std::int64_t begin = q * chunk, n = std::min(chunk, c - begin);
      std::fill(base.begin(), base.end(), 0);
      add_offsets(s, kept, o, base);
      for (std::size_t k = 0; k < ops.size(); ++k) base[k] += begin * s.strides[k][inner];
      acc_t acc[chunk];
      for (std::int64_t i = 0; i < n; ++i) acc[i] = R::identity();
      fold_range(fold_range, 0, in_count, n, acc);
      for (std::int64_t i = 0; i < n; ++i) {
        offsets = base;
        for (std::size_t k = n_in; k < ops.size(); ++k) offsets[k] += i * s.strides[k][inner];
        store_all(offsets, R::finish(acc[i], count));
      }
    }
  };
  std::int64_t tasks = outer * chunks;
  if (threads > 1)
    parallel_for(tasks, 1, run);
  else
    run(0, tasks);
}

}  // namespace detail

KILN_RUNTIME_API void run_reduction(row_ref row, ir::op kind, dtype type, const shape& space,
                                    const ir::attributes& attrs,
                                    std::span<const std::int32_t> in_slots,
                                    std::span<const operand_layout> ins,
                                    std::span<const std::int32_t> out_slots,
                                    std::span<const operand_layout> outs, int direct) {
  bool done = false;
  auto with_kind = [&]<ir::op Kind>() {
    auto with_type = [&]<dtype D>() {
      if constexpr (ir::accepts(ir::info(Kind).types, D)) {
        if (type != D || kind != Kind) return;
        using S = storage_t<D>;
        auto run = [&]<class R>() {
          detail::reduce_with<R, S>(row, space, attrs.axes, in_slots, ins, out_slots, outs, direct);
        };
        if constexpr (ir::info(Kind).cls == ir::op_class::index_reduction) {
          if (attrs.select_last)
            run.template operator()<detail::index_reducer<Kind, S, true>>();
          else
            run.template operator()<detail::index_reducer<Kind, S, false>>();
        } else {
          run.template operator()<detail::reducer<Kind, S>>();
        }
        done = true;
      }
    };
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (with_type.template operator()<dtype(I)>(), ...);
    }
    (std::make_integer_sequence<int, dtype_count>{});
  };
  using ir::op;
  with_kind.template operator()<op::reduce_sum>();
  with_kind.template operator()<op::reduce_mean>();
  with_kind.template operator()<op::reduce_max>();
  with_kind.template operator()<op::reduce_min>();
  with_kind.template operator()<op::reduce_prod>();
  with_kind.template operator()<op::reduce_l1>();
  with_kind.template operator()<op::reduce_l2>();
  with_kind.template operator()<op::reduce_sum_square>();
  with_kind.template operator()<op::argmax>();
  with_kind.template operator()<op::argmin>();
  if (!done)
    throw error(errc::unsupported, std::string(ir::name(kind)),
                "no CPU reduction for element type " + std::string(name(type)));
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::cpu
