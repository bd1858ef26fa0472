// The pointer lists that a region's row function is called with, and the collapsed iteration
// spaces they walk: the CPU executors' machinery. Only the runtime's bodies include it
// (executor.hpp under KILN_CPU_KERNELS_BODY), so a file that calls a kiln::fn does not compile it.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "kiln/compiler/view_layout.hpp"
#include "kiln/core/thread_kept.hpp"
#include "kiln/runtime/cpu/operands.hpp"

namespace kiln::cpu {

inline std::int64_t index_term::position(std::int64_t at) const {
  std::int64_t v = at + shift;
  if (positions && wide) {
    std::memcpy(&v, positions + at * 8, 8);
  } else if (positions) {
    std::int32_t w;
    std::memcpy(&w, positions + at * 4, 4);
    v = w;
  }
  return compiler::term_position(v, extent, fold, positions != nullptr);
}

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
  row_list(const row_list&) = delete;  // data_ may point into local_
  row_list& operator=(const row_list&) = delete;
  T& operator[](std::size_t i) { return data_[i]; }
  T* data() { return data_; }

 private:
  std::array<T, 64> local_;  // entries a region does not use are never read
  std::vector<T> heap_;
  T* data_;
};

// A view's layout (compiler::view_layout) over iteration space `space`, broadcast as numpy does;
// data: its base's first element; slot_data(s): input slot s's first element (index tensors).
template <class SlotData>
operand_layout layout_over(const void* data, int bytes, const compiler::strided_layout& v,
                           const shape& space, SlotData slot_data) {
  operand_layout l{static_cast<const unsigned char*>(data) + v.offset * bytes, bytes, {}, {}};
  for (const auto& t : v.terms) {
    const int index_bytes = size_in_bytes(t.type);
    if (t.slot < 0)  // computed positions: the place is the position, offset included
      l.terms.push_back({nullptr, false, t.fold, t.extent, t.data_stride, t.offset, {}});
    else
      l.terms.push_back(
          {static_cast<const unsigned char*>(slot_data(t.slot)) + t.offset * index_bytes,
           index_bytes == 8,
           t.fold,
           t.extent,
           t.data_stride,
           0,
           {}});
  }
  for (int i = 0; i < v.dims.rank; ++i) {
    int si = space.rank - v.dims.rank + i;
    if (si < 0) continue;
    bool broadcast = v.dims.dims[i] == 1;
    l.stride[si] = broadcast ? 0 : v.strides[i];
    for (std::size_t k = 0; k < v.terms.size(); ++k)
      l.terms[k].stride[si] = broadcast ? 0 : v.terms[k].strides[i];
  }
  return l;
}
// A row-major tensor of extents `actual` read over iteration space `space`.
inline operand_layout layout_over(const void* data, int bytes, const shape& actual,
                                  const shape& space) {
  return layout_over(data, bytes, compiler::row_major(actual), space,
                     [](std::int32_t) -> const void* { return nullptr; });
}

// Some of a collapsed space's dims, in order (at most max_rank: no allocation).
class dim_list {
 public:
  void push_back(int d) { dims_[size_++] = d; }
  std::size_t size() const { return static_cast<std::size_t>(size_); }
  bool empty() const { return size_ == 0; }
  int operator[](std::size_t i) const { return dims_[i]; }
  const int* begin() const { return dims_.data(); }
  const int* end() const { return dims_.data() + size_; }

 private:
  std::array<int, max_rank> dims_{};
  int size_ = 0;
};

// An iteration space with size-1 dims dropped and neighbours merged where every operand walks them
// contiguously and both are kept or both reduced (`reduced`: a reduction's axes, or none).
// strides: per operand, along the collapsed dims, then per index term of the operands (in
// operand order; their positions' strides). At least one dim: a single element is [1].
struct collapsed_space {
  int rank = 0;
  std::array<std::int64_t, max_rank> dims{};
  std::array<bool, max_rank> reduced{};
  std::vector<std::array<std::int64_t, max_rank>> strides;
  // The number of entries (operands, then index terms): the size of an offsets vector.
  std::size_t entries() const { return strides.size(); }
  // The dims before the contiguous one, kept and reduced: a kept index (row) is a multi-index over
  // kept, then the contiguous dim where it is kept.
  dim_list kept, reduced_dims;

  // Rows: the kept indices, the contiguous dim's included where it is kept.
  std::int64_t kept_count() const {
    std::int64_t n = reduced[rank - 1] ? 1 : dims[rank - 1];
    for (int d : kept) n *= dims[d];
    return n;
  }
  // Reduced indices outside the contiguous dim.
  std::int64_t outer_reduced_count() const {
    std::int64_t n = 1;
    for (int d : reduced_dims) n *= dims[d];
    return n;
  }
  // Adds the offsets (in elements, per operand) of multi-index `index` over dims `which`.
  void add_offsets(const dim_list& which, std::int64_t index,
                   std::span<std::int64_t> offsets) const {
    for (int w = static_cast<int>(which.size()) - 1; w >= 0; --w) {
      int d = which[w];
      std::int64_t i = index % dims[d];
      index /= dims[d];
      for (std::size_t k = 0; k < offsets.size(); ++k) offsets[k] += i * strides[k][d];
    }
  }
};

// Collapses `space` for operands ops into s (whose memory it reuses).
inline void collapse(const shape& space, std::uint32_t reduced_axes,
                     std::span<const operand_layout* const> ops, collapsed_space& s) {
  s.rank = 0;
  s.dims = {};
  s.reduced = {};
  s.kept = {};
  s.reduced_dims = {};
  s.strides.clear();
  // Every entry's strides, collapsed in place: dim i's are read before anything is written at
  // i or beyond (the collapsed dims are at most as many as those seen).
  std::size_t entries = ops.size();
  for (const operand_layout* o : ops) entries += o->terms.size();
  s.strides.reserve(entries);
  for (const operand_layout* o : ops) s.strides.push_back(o->stride);
  for (const operand_layout* o : ops)
    for (const auto& t : o->terms) s.strides.push_back(t.stride);
  for (int i = 0; i < space.rank; ++i) {
    if (space.dims[i] == 1) continue;
    bool red = (reduced_axes >> i) & 1u;
    bool merge = s.rank > 0 && s.reduced[s.rank - 1] == red;
    for (std::size_t k = 0; merge && k < entries; ++k)
      merge = s.strides[k][s.rank - 1] == s.strides[k][i] * space.dims[i];
    int at = merge ? s.rank - 1 : s.rank++;
    s.dims[at] = merge ? s.dims[at] * space.dims[i] : space.dims[i];
    s.reduced[at] = red;
    for (std::size_t k = 0; k < entries; ++k) s.strides[k][at] = s.strides[k][i];
  }
  if (s.rank == 0) {  // one element, kept
    s.rank = 1;
    s.dims[0] = 1;
    for (auto& st : s.strides) st[0] = 0;
  }
  for (auto& st : s.strides) std::fill(st.begin() + s.rank, st.end(), 0);
  for (int d = 0; d < s.rank - 1; ++d) (s.reduced[d] ? s.reduced_dims : s.kept).push_back(d);
}

// A region's operands in its row function's order, into ops: its inputs (by slot), then its
// outputs.
inline void region_operands(std::span<const std::int32_t> args, std::span<const operand_layout> ins,
                            std::span<const std::int32_t> results,
                            std::span<const operand_layout> outs,
                            std::vector<const operand_layout*>& ops) {
  ops.clear();
  for (auto a : args) ops.push_back(&ins[a]);
  for (auto r : results) ops.push_back(&outs[r]);
}

// A region's operands (its layouts, which outlive it) and their collapsed space, in memory this
// thread keeps.
struct collapsed_region {
  thread_kept<std::vector<const operand_layout*>> ops;
  thread_kept<collapsed_space> space;
  collapsed_region(const shape& space_, std::uint32_t reduced_axes,
                   std::span<const std::int32_t> args, std::span<const operand_layout> ins,
                   std::span<const std::int32_t> results, std::span<const operand_layout> outs) {
    region_operands(args, ins, results, outs, *ops);
    collapse(space_, reduced_axes, *ops, *space);
  }
};

// The pointer lists of row function calls: each operand's pointer at its offset (in elements),
// an input's step along the contiguous dim 1, or 0 where it is broadcast. in/out are indexed by
// slot; a region's operands are its inputs (listed in `args`) then its outputs (in `results`).
// An input read with another stride (a view: a transpose, a slice by steps), or through a gather
// whose positions change along the row, is gathered into a contiguous buffer a piece at a time,
// and the row function reads it there with step 1.
struct row_pointers {
  row_list<const void*> in;
  row_list<std::int64_t> step;
  row_list<void*> out;
  row_pointers(std::size_t ins, std::size_t outs) : in(ins), step(ins), out(outs) {}
  // Points args.size() inputs and results.size() outputs of ops (over collapsed space s);
  // offsets: per entry of s (all of ops, then their index terms; a reduction points its inputs
  // only).
  void point(std::span<const operand_layout* const> ops, const collapsed_space& s,
             std::span<const std::int32_t> args, std::span<const std::int32_t> results,
             std::span<const std::int64_t> offsets) {
    const int inner = s.rank - 1;
    const std::size_t n_ops = args.size() + results.size();
    gathers_ = false;
    for (std::size_t k = 0, entry = ops.size(); k < n_ops; ++k) {
      const operand_layout& o = *ops[k];
      const unsigned char* at = o.data + offsets[k] * o.bytes;
      if (k >= args.size()) {
        out[results[k - args.size()]] = const_cast<unsigned char*>(at);
        // A strided result (a view the caller gave) whose elements along the row are apart: the
        // row is written to a buffer and scattered.
        gathers_ = gathers_ || s.strides[k][inner] != 1;
        continue;
      }
      std::int64_t stride = s.strides[k][inner];
      const bool varying = varies(s, entry, o.terms.size());
      if (!varying)
        for (const index_term& t : o.terms)
          at += t.data_stride * t.position(offsets[entry++]) * o.bytes;
      else
        entry += o.terms.size();
      in[args[k]] = at;
      step[args[k]] = stride || varying ? 1 : 0;
      gathers_ = gathers_ || varying || (stride != 0 && stride != 1);
    }
    if (!gathers_) return;  // the common case: nothing more to note (point runs once per row)
    inputs_.clear();
    outputs_.clear();
    terms_.clear();
    for (std::size_t k = 0, entry = ops.size(); k < n_ops; ++k) {
      bool input = k < args.size();
      std::int32_t slot = input ? args[k] : results[k - args.size()];
      const void* at = input ? in[slot] : out[slot];
      operand o{slot, ops[k]->bytes, s.strides[k][inner], at, terms_.size(), 0};
      if (varies(s, entry, ops[k]->terms.size())) {  // every term is applied per element, from the
                                                     // untermed pointer
        o.at = ops[k]->data + offsets[k] * ops[k]->bytes;
        for (const index_term& t : ops[k]->terms) {
          terms_.push_back({&t, offsets[entry], s.strides[entry][inner]});
          ++entry;
        }
        o.term_count = ops[k]->terms.size();
      } else {
        entry += ops[k]->terms.size();
      }
      (input ? inputs_ : outputs_).push_back(o);
    }
  }
  // Points output slot `slot` (elements of `bytes`) at p.
  void set_out(std::int32_t slot, void* p, int bytes) {
    out[slot] = p;
    if (gathers_) outputs_.push_back({slot, bytes, 1, p, 0, 0});
  }
  // Whether the last point() found operands to gather (call runs the row through buffers).
  bool gathers() const { return gathers_; }
  void call(row_ref row, std::int64_t n) {
    if (gathers_)
      call_gathered(row, n);
    else
      row(in.data(), step.data(), out.data(), n);
  }
  // m elements of `bytes` from `from`, `stride` elements apart, to consecutive ones at `to`.
  static void gather(const unsigned char* from, std::int64_t stride, int bytes, std::int64_t m,
                     void* to) {
    copy_apart(from, stride, 1, bytes, m, to);
  }

 private:
  struct operand {
    std::int32_t slot;
    int bytes;
    std::int64_t stride;
    const void* at;
    std::size_t term_begin, term_count;  // its entries in terms_ (gathered through them)
  };
  // Whether one of `count` index terms from entry `first` of s changes along the row.
  static bool varies(const collapsed_space& s, std::size_t first, std::size_t count) {
    for (std::size_t t = first; t < first + count; ++t)
      if (s.strides[t][s.rank - 1] != 0) return true;
    return false;
  }
  struct term_at {  // an index term at a row: its positions' offset and step along the row
    const index_term* term;
    std::int64_t offset, step;
  };
  // Runs the row in pieces of at most 512 elements, each cut into segments where every shift
  // that clamps along the row (pad's edges, concat's pieces) is constant or steps by one: there
  // such an operand is read in place (step 0 or 1), or gathered with one stride; other operands
  // are gathered into a buffer.
  void call_gathered(row_ref row, std::int64_t n) {
    constexpr std::int64_t piece = 512;
    thread_local std::vector<std::uint64_t> buffer;
    const std::size_t pieces = inputs_.size() + outputs_.size();
    if (buffer.size() < pieces * piece) buffer.resize(pieces * piece);
    for (std::int64_t c = 0; c < n; c += piece) {
      for (std::int64_t s = c, last = c + std::min(piece, n - c); s < last;) {
        std::int64_t t = last;
        for (const operand& o : inputs_) t = std::min(t, regime_end(o, s));
        for (std::size_t k = 0; k < inputs_.size(); ++k) {
          const operand& o = inputs_[k];
          auto* from = static_cast<const unsigned char*>(o.at);
          void* to = buffer.data() + k * piece;
          const unsigned char* at = from + s * o.stride * o.bytes;
          std::int64_t stride = o.stride;
          if (o.term_count && !affine_at(o, s, at, stride)) {
            gather_positions(o, s, t - s, to);
            at = static_cast<const unsigned char*>(to);
            stride = 1;
          } else if (stride != 0 && stride != 1) {
            gather(at, stride, o.bytes, t - s, to);
            at = static_cast<const unsigned char*>(to);
            stride = 1;
          }
          in[o.slot] = at;
          step[o.slot] = stride;
        }
        for (std::size_t k = 0; k < outputs_.size(); ++k) {
          const operand& o = outputs_[k];
          out[o.slot] = o.stride == 1
                            ? static_cast<unsigned char*>(const_cast<void*>(o.at)) + s * o.bytes
                            : static_cast<void*>(buffer.data() + (inputs_.size() + k) * piece);
        }
        row(in.data(), step.data(), out.data(), t - s);
        for (std::size_t k = 0; k < outputs_.size(); ++k)
          if (const operand& o = outputs_[k]; o.stride != 1)
            scatter(buffer.data() + (inputs_.size() + k) * piece, o.stride, o.bytes, t - s,
                    static_cast<unsigned char*>(const_cast<void*>(o.at)) + s * o.stride * o.bytes);
        s = t;
      }
    }
  }
  // A term whose position is computed, clamped, and steps by one along the row: where it is
  // below the axis, inside it, and past it, the operand is read with one stride.
  static bool clamps_by_one(const term_at& ta) {
    return !ta.term->positions && ta.term->fold == ir::position_fold::clamp && ta.step == 1;
  }
  // The first element after e where one of o's clamping terms changes regime (or far past).
  std::int64_t regime_end(const operand& o, std::int64_t e) const {
    std::int64_t end = std::numeric_limits<std::int64_t>::max();
    for (std::size_t t = o.term_begin; t < o.term_begin + o.term_count; ++t) {
      const term_at& ta = terms_[t];
      if (!clamps_by_one(ta)) continue;
      std::int64_t v = ta.offset + e + ta.term->shift;  // the unclamped position at e
      if (v < 0)
        end = std::min(end, e - v);
      else if (v < ta.term->extent)
        end = std::min(end, e + ta.term->extent - v);
    }
    return end;
  }
  // Where o's element e is and its stride from there on, when every term of o that changes
  // along the row clamps by one (false: o is gathered element by element).
  bool affine_at(const operand& o, std::int64_t e, const unsigned char*& at,
                 std::int64_t& stride) const {
    std::int64_t place = e * o.stride;
    stride = o.stride;
    for (std::size_t t = o.term_begin; t < o.term_begin + o.term_count; ++t) {
      const term_at& ta = terms_[t];
      if (ta.step != 0 && !clamps_by_one(ta)) return false;
      const index_term& term = *ta.term;
      std::int64_t v = ta.offset + e * ta.step;
      place += term.data_stride * term.position(v);
      std::int64_t unclamped = v + term.shift;
      if (ta.step != 0 && unclamped >= 0 && unclamped < term.extent) stride += term.data_stride;
    }
    at = static_cast<const unsigned char*>(o.at) + place * o.bytes;
    return true;
  }
  // Elements [c, c + m) of operand o, read through its index terms, to `to`.
  void gather_positions(const operand& o, std::int64_t c, std::int64_t m, void* to) const {
    auto* from = static_cast<const unsigned char*>(o.at);
    auto* dst = static_cast<unsigned char*>(to);
    for (std::int64_t e = c; e < c + m; ++e) {
      std::int64_t at = e * o.stride;
      for (std::size_t t = o.term_begin; t < o.term_begin + o.term_count; ++t) {
        const term_at& ta = terms_[t];
        at += ta.term->data_stride * ta.term->position(ta.offset + e * ta.step);
      }
      std::memcpy(dst + (e - c) * o.bytes, from + at * o.bytes, static_cast<std::size_t>(o.bytes));
    }
  }
  // gather reversed: m consecutive elements at `from` to `stride` elements apart at `to`.
  static void scatter(const void* from, std::int64_t stride, int bytes, std::int64_t m,
                      unsigned char* to) {
    copy_apart(from, 1, stride, bytes, m, to);
  }
  static void copy_apart(const void* from, std::int64_t from_stride, std::int64_t to_stride,
                         int bytes, std::int64_t m, void* to) {
    auto copy = [&]<class T>(T*) {
      const T* src = static_cast<const T*>(from);
      T* dst = static_cast<T*>(to);
      for (std::int64_t e = 0; e < m; ++e)
        std::memcpy(dst + e * to_stride, src + e * from_stride, sizeof(T));
    };
    switch (bytes) {
      case 1:
        copy(static_cast<std::uint8_t*>(nullptr));
        break;
      case 2:
        copy(static_cast<std::uint16_t*>(nullptr));
        break;
      case 4:
        copy(static_cast<std::uint32_t*>(nullptr));
        break;
      default:
        copy(static_cast<std::uint64_t*>(nullptr));
        break;
    }
  }
  std::vector<operand> inputs_, outputs_;
  std::vector<term_at> terms_;
  bool gathers_ = false;
};

// Points p's lists at row r of `walks`, from element `at` along the row.
inline void point_row(row_pointers& p, std::span<const row_walk> walks, std::int64_t r,
                      std::int64_t at = 0) {
  for (const row_walk& w : walks) {
    const unsigned char* data = w.data + (r * w.row_stride + at * w.step) * w.bytes;
    if (w.output) {
      p.out[w.slot] = const_cast<unsigned char*>(data);
    } else {
      p.in[w.slot] = data;
      p.step[w.slot] = w.step;
    }
  }
}

// Moves p's lists, pointed at a row of `walks` (point_row), to the next row: an add a walk, where
// pointing each row anew was a fifth of the runtime's instructions per row of layer_norm.
inline void next_row(row_pointers& p, std::span<const row_walk> walks) {
  for (const row_walk& w : walks) {
    const std::int64_t by = w.row_stride * w.bytes;
    if (w.output)
      p.out[w.slot] = static_cast<unsigned char*>(p.out[w.slot]) + by;
    else
      p.in[w.slot] = static_cast<const unsigned char*>(p.in[w.slot]) + by;
  }
}
}  // namespace kiln::cpu
