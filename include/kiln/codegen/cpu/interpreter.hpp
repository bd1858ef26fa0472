// The run-time kernel driver: a region of a plan known only at run time becomes a list of
// instructions, each one per-op SIMD primitive applied to a tile of elements held in scratch
// slots. The same primitives as the compile-time driver, so both give the same bits.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>
#include "kiln/codegen/cpu/isa.hpp"

#include "kiln/codegen/cpu/primitives.hpp"
#include "kiln/compiler/plan.hpp"
#include "kiln/core/runtime_boundary.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {

// Elements one instruction works on per dispatch: enough to hide the indirect call, few enough
// that a region's live slots stay in the L1 cache (at most 8 bytes a lane: 1 KiB a slot); 64 to
// 256 measured within noise of each other, 1024 clearly slower (docs/PERFORMANCE.md).
inline constexpr std::int64_t tile_elements = 128;
static_assert(tile_elements % lanes == 0);
// Slots start on cache lines (a vector that straddles two lines costs two accesses), a line apart
// from a multiple of 4 KiB (a load whose address matches a recent store's in its low 12 bits
// waits for it).
inline constexpr std::int64_t slot_bytes = tile_elements * 8 + 64;

// One tile of one row: where the row's operands are, which elements, and the slots.
struct tile_frame {
  const void* const* in;     // per parameter: the row's first element
  const std::int64_t* step;  // per parameter: 1, or 0 where broadcast along the row
  void* const* out;          // per result: the row's first element
  std::int64_t first;        // the tile's first element in the row
  std::int64_t count;        // elements in this tile (<= tile_elements)
  unsigned char* scratch;    // slot s is written at scratch + s * slot_bytes
  // Slot s is read at view[s]: its scratch, or a contiguous input's own data (no copy).
  const unsigned char** view;
  template <class L>
  L* slot(std::int32_t s) const {
    return reinterpret_cast<L*>(scratch + s * slot_bytes);
  }
  template <class L>
  const L* read_slot(std::int32_t s) const {
    return reinterpret_cast<const L*>(view[s]);
  }
  std::int64_t packs() const { return (count + std::int64_t(lanes) - 1) / std::int64_t(lanes); }
};

struct instruction;
using instruction_fn = void (*)(const instruction&, const tile_frame&);

struct instruction {
  instruction_fn fn = nullptr;
  std::int32_t out = -1;                       // slot written (a result's index, for stores)
  std::array<std::int32_t, 3> in{-1, -1, -1};  // slots read
  std::int32_t param = -1;                     // loads: the input slot read
  scalar value;                                // constants
  std::array<float, 4> coeffs{};               // fused instructions: their constants
  std::int32_t result = -1;                    // one that stores its value: the result
  // A load, a constant, or a value computed from those alone: its slot is its own (no other
  // instruction writes it), so where its lanes repeat along the row (a constant; a load whose
  // step is 0; a value of such) the row's first tile computes it and the others skip it.
  bool repeatable = false;
  // The input slots the value depends on (bit p: slot p; bit 63 also stands for any slot past
  // 62): it repeats along a row where each of them has step 0 there.
  std::uint64_t varies_with = 0;
};

namespace detail {

template <dtype D>
using slot_t = std::conditional_t<D == dtype::boolean, bool, lane_t<D>>;

// An instruction's operand lanes and its result's, their slot pointers taken once before its
// loop over the tile: a SIMD store may alias anything, so pointers read inside the loop (the
// slot's view, the instruction's slot numbers) would be read again for every pack.
template <dtype D>
struct slot_in {
  const slot_t<D>* p;
  slot_in(const instruction& s, const tile_frame& f, int operand)
      : p(f.read_slot<slot_t<D>>(s.in[operand])) {}
  compute_t<D> operator[](std::int64_t k) const {
    return compute_t<D>::load(p + k * std::int64_t(lanes));
  }
};
template <dtype D>
struct slot_out {
  slot_t<D>* p;
  slot_out(const instruction& s, const tile_frame& f) : p(f.slot<slot_t<D>>(s.out)) {}
  void put(std::int64_t k, const compute_t<D>& v) const { v.store(p + k * std::int64_t(lanes)); }
};

template <dtype D>
void load_input(const instruction& s, const tile_frame& f) {
  auto* p = static_cast<const storage_t<D>*>(f.in[s.param]);
  std::int64_t packs = f.packs();
  const slot_out<D> out(s, f);
  if (f.step[s.param] == 0) {
    auto v = splat<D>(p);
    for (std::int64_t k = 0; k < packs; ++k) out.put(k, v);
    return;
  }
  p += f.first;
  std::int64_t full = f.count / std::int64_t(lanes);
  if (std::is_same_v<storage_t<D>, slot_t<D>> && full == packs) {
    f.view[s.out] = reinterpret_cast<const unsigned char*>(p);  // read in place
    return;
  }
  for (std::int64_t k = 0; k < full; ++k) out.put(k, load<D>(p + k * lanes));
  if (full == packs) return;
  // The tail: a zero-padded copy, so no lane reads past the caller's data.
  storage_t<D> padded[lanes] = {};
  std::memcpy(padded, p + full * lanes, (f.count - full * lanes) * sizeof(storage_t<D>));
  out.put(full, load<D>(padded));
}

template <dtype D>
void store_result(const instruction& s, const tile_frame& f) {
  auto* p = static_cast<storage_t<D>*>(f.out[s.out]) + f.first;
  std::int64_t full = f.count / std::int64_t(lanes), packs = f.packs();
  const slot_in<D> x(s, f, 0);
  for (std::int64_t k = 0; k < full; ++k) store<D>(x[k], p + k * lanes);
  if (full == packs) return;
  storage_t<D> padded[lanes];
  store<D>(x[full], padded);
  std::memcpy(p + full * lanes, padded, (f.count - full * lanes) * sizeof(storage_t<D>));
}

template <dtype D>
void fill_constant(const instruction& s, const tile_frame& f) {
  auto v = compute_t<D>::splat(lane_value<D>(s.value));
  const slot_out<D> out(s, f);
  for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, v);
}

// A view that broadcasting already gives (compiler::computed_view): its operand's lanes.
template <dtype D>
void copy_value(const instruction& s, const tile_frame& f) {
  const slot_in<D> x(s, f, 0);
  const slot_out<D> out(s, f);
  for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, x[k]);
}

template <ir::op O, dtype D>
void apply_unary(const instruction& s, const tile_frame& f) {
  const slot_in<D> x(s, f, 0);
  const slot_out<D> out(s, f);
  for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, unary<O, D>(x[k]));
}
template <ir::op O, dtype D>
void apply_binary(const instruction& s, const tile_frame& f) {
  const slot_in<D> x(s, f, 0), y(s, f, 1);
  const slot_out<D> out(s, f);
  for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, binary<O, D>(x[k], y[k]));
}
template <ir::op O, dtype D>
void apply_compare(const instruction& s, const tile_frame& f) {
  const slot_in<D> x(s, f, 0), y(s, f, 1);
  const slot_out<dtype::boolean> out(s, f);
  for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, compare<O>(x[k], y[k]));
}
template <ir::op O, dtype D>
void apply_test(const instruction& s, const tile_frame& f) {
  const slot_in<D> x(s, f, 0);
  const slot_out<dtype::boolean> out(s, f);
  for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, test<O>(x[k]));
}
template <ir::op O, dtype D>
void apply_ternary(const instruction& s, const tile_frame& f) {
  const slot_in<D> x(s, f, 0), y(s, f, 1), z(s, f, 2);
  const slot_out<D> out(s, f);
  for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, ternary<O, D>(x[k], y[k], z[k]));
}
template <ir::op O>
void apply_logical(const instruction& s, const tile_frame& f) {
  constexpr dtype B = dtype::boolean;
  const slot_in<B> x(s, f, 0);
  const slot_out<B> out(s, f);
  if constexpr (O == ir::op::logical_not) {
    for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, logical_not(x[k]));
  } else {
    const slot_in<B> y(s, f, 1);
    for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, logical<O>(x[k], y[k]));
  }
}
template <dtype D>
void apply_select(const instruction& s, const tile_frame& f) {
  const slot_in<dtype::boolean> c(s, f, 0);
  const slot_in<D> x(s, f, 1), y(s, f, 2);
  const slot_out<D> out(s, f);
  for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, select(c[k], x[k], y[k]));
}
// clip(x a + b, lo, hi), times x where `times_input` (ONNX's HardSigmoid and HardSwish, as
// graph::hard_sigmoid and hard_swish spell them): one pass over the tile where the four
// instructions of the chain would each read and write a slot. `biased`: x is the sum of the
// instruction's two operands (a convolution's bias); `to_result`: the value goes straight to
// result s.result (it has no other reader), where a store instruction would copy it.
template <bool times_input, bool biased, bool to_result>
void apply_hard_sigmoid(const instruction& s, const tile_frame& f) {
  constexpr dtype D = dtype::f32;
  using P = compute_t<D>;
  const P a = P::splat(s.coeffs[0]), b = P::splat(s.coeffs[1]), lo = P::splat(s.coeffs[2]),
          hi = P::splat(s.coeffs[3]);
  const slot_in<D> x(s, f, 0), bias(s, f, biased ? 1 : 0);
  auto value = [&](std::int64_t k) {
    const P v = biased ? binary<ir::op::add, D>(x[k], bias[k]) : x[k];
    const P h =
        ternary<ir::op::clip, D>(binary<ir::op::add, D>(binary<ir::op::mul, D>(v, a), b), lo, hi);
    if constexpr (times_input)
      return binary<ir::op::mul, D>(v, h);
    else
      return h;
  };
  if constexpr (to_result) {
    float* p = static_cast<float*>(f.out[s.result]) + f.first;
    const std::int64_t full = f.count / std::int64_t(lanes);
    for (std::int64_t k = 0; k < full; ++k) store<D>(value(k), p + k * lanes);
    if (full == f.packs()) return;
    float padded[lanes];
    store<D>(value(full), padded);
    std::memcpy(p + full * lanes, padded, (f.count - full * lanes) * sizeof(float));
  } else {
    const slot_out<D> out(s, f);
    for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, value(k));
  }
}

// The function for a chain's flags.
inline instruction_fn hard_sigmoid_function(bool times_input, bool biased, bool to_result) {
  instruction_fn table[8] = {
      &apply_hard_sigmoid<false, false, false>, &apply_hard_sigmoid<false, false, true>,
      &apply_hard_sigmoid<false, true, false>,  &apply_hard_sigmoid<false, true, true>,
      &apply_hard_sigmoid<true, false, false>,  &apply_hard_sigmoid<true, false, true>,
      &apply_hard_sigmoid<true, true, false>,   &apply_hard_sigmoid<true, true, true>};
  return table[times_input * 4 + biased * 2 + to_result];
}

template <dtype From, dtype To>
void apply_cast(const instruction& s, const tile_frame& f) {
  const slot_in<From> x(s, f, 0);
  const slot_out<To> out(s, f);
  for (std::int64_t k = 0, n = f.packs(); k < n; ++k) out.put(k, cast<From, To>(x[k]));
}

// Calls fn(std::integral_constant<dtype, D>) for the run-time dtype t.
template <class Fn>
instruction_fn with_dtype(dtype t, Fn&& fn) {
  return [&]<int... I>(std::integer_sequence<int, I...>) {
    instruction_fn r = nullptr;
    ((static_cast<int>(t) == I ? (r = fn(std::integral_constant<dtype, dtype(I)>{}), 0) : 0), ...);
    return r;
  }
  (std::make_integer_sequence<int, dtype_count>{});
}

// Calls fn(std::integral_constant<ir::op, O>) for the run-time op o.
template <class Fn>
instruction_fn with_op(ir::op o, Fn&& fn) {
  return [&]<int... I>(std::integer_sequence<int, I...>) {
    instruction_fn r = nullptr;
    ((static_cast<int>(o) == I ? (r = fn(std::integral_constant<ir::op, ir::op(I)>{}), 0) : 0),
     ...);
    return r;
  }
  (std::make_integer_sequence<int, ir::op_count>{});
}

// The instruction function of one node (null where the op table rules the combination out).
// Arithmetic on storage-only floats happens in f32, as in the compile-time kernels, so it
// instantiates the f32 function.
inline instruction_fn function_for(const ir::node& n, dtype operand) {
  using ir::op_class;
  return with_op(n.kind, [&](auto o) -> instruction_fn {
    constexpr ir::op O = decltype(o)::value;
    constexpr op_class cls = ir::info(O).cls;
    if constexpr (cls == op_class::logical) {
      return &apply_logical<O>;
    } else if constexpr (cls == op_class::unary || cls == op_class::binary ||
                         cls == op_class::ternary || cls == op_class::test) {
      return with_dtype(compute_dtype(operand), [](auto d) -> instruction_fn {
        constexpr dtype D = decltype(d)::value;
        if constexpr (!ir::accepts(ir::info(O).types, D) || is_storage_only(D))
          return nullptr;
        else if constexpr (cls == op_class::unary)
          return &apply_unary<O, D>;
        else if constexpr (cls == op_class::binary)
          return &apply_binary<O, D>;
        else if constexpr (cls == op_class::ternary)
          return &apply_ternary<O, D>;
        else
          return &apply_test<O, D>;
      });
    } else if constexpr (cls == op_class::compare) {
      return with_dtype(compute_dtype(operand), [](auto d) -> instruction_fn {
        constexpr dtype D = decltype(d)::value;
        if constexpr (!ir::accepts(ir::info(O).types, D) || is_storage_only(D))
          return nullptr;
        else if constexpr (D == dtype::boolean && O != ir::op::eq && O != ir::op::ne)
          return nullptr;
        else
          return &apply_compare<O, D>;
      });
    } else if constexpr (cls == op_class::select) {
      return with_dtype(compute_dtype(n.type), [](auto d) -> instruction_fn {
        constexpr dtype D = decltype(d)::value;
        if constexpr (is_storage_only(D))
          return nullptr;
        else
          return &apply_select<D>;
      });
    } else if constexpr (cls == op_class::cast) {
      return with_dtype(operand, [&](auto from) {
        return with_dtype(n.type, [](auto to) -> instruction_fn {
          return &apply_cast<decltype(from)::value, decltype(to)::value>;
        });
      });
    } else if constexpr (cls == op_class::view) {
      return with_dtype(compute_dtype(n.type),
                        [](auto d) -> instruction_fn { return &copy_value<decltype(d)::value>; });
    } else {
      return nullptr;  // leaves are loads and fills, chosen by the program
    }
  });
}

}  // namespace detail

// One region of a run-time plan as instructions over tiles; row() has the compile-time driver's
// row signature, so the same executor runs both.
class tile_program {
 public:
  // Compiles region `reg` of plan `p` (its nodes, then its stores: compiler::region_stores).
  tile_program(const compiler::plan& p, const compiler::region& reg);

  // Evaluates `count` elements of one row (see cpu::row_fn).
  void row(const void* const* in, const std::int64_t* step, void* const* out,
           std::int64_t count) const {
    // Per thread, grown to the largest region it has run (loads and stores are unaligned).
    thread_local std::vector<std::uint64_t> scratch;
    thread_local std::vector<const unsigned char*> view;
    std::size_t words = static_cast<std::size_t>(slots_ * slot_bytes / 8) + 8;  // + a line
    if (scratch.size() < words) scratch.resize(words);
    if (view.size() < static_cast<std::size_t>(slots_)) view.resize(slots_);
    auto* base = reinterpret_cast<unsigned char*>(
        (reinterpret_cast<std::uintptr_t>(scratch.data()) + 63) / 64 * 64);
    tile_frame f{in, step, out, 0, 0, base, view.data()};
    std::uint64_t varying = 0;  // the input slots whose lanes change along this row
    if (count > tile_elements)
      for (std::int32_t q : loaded_)
        if (step[q] != 0) varying |= std::uint64_t{1} << std::min(q, 63);
    for (; f.first < count; f.first += tile_elements) {
      f.count = std::min(tile_elements, count - f.first);
      for (std::size_t i = 0; i < computed_; ++i) {
        const instruction& s = code_[i];
        if (f.first > 0 && s.repeatable && (s.varies_with & varying) == 0) continue;
        // An instruction writes its slot's scratch (a load may point the slot at its input).
        view[s.out] = base + s.out * slot_bytes;
        s.fn(s, f);
      }
      for (std::size_t i = computed_; i < code_.size(); ++i) code_[i].fn(code_[i], f);
    }
  }

  int slot_count() const { return slots_; }
  std::size_t size() const { return code_.size(); }

 private:
  std::vector<instruction> code_;  // the region's nodes, then one store per stored value
  std::size_t computed_ = 0;       // instructions before the stores
  std::int32_t slots_ = 0;
  // The input slots it loads, each once (a plan's slots number its parameters, constants and
  // transients: a row asks only about these).
  std::vector<std::int32_t> loaded_;
};

// Behind the runtime boundary (core/runtime_boundary.hpp): building the instruction table
// instantiates every (op, dtype) primitive, once per instruction set the runtime is built for.
#if KILN_CPU_KERNELS_BODY
namespace detail {

// A chain clip(x a + b, lo, hi), times x where times_input, over f32 with constant a, b, lo and
// hi: what graph::hard_sigmoid and hard_swish build. `inner`: the nodes one instruction replaces
// (the last: x, where x is a sum absorbed too).
struct hard_sigmoid_chain {
  std::int32_t x = -1;
  std::array<float, 4> coeffs{};
  bool times_input = false;
  std::array<std::int32_t, 4> inner{-1, -1, -1, -1};
  std::int32_t result = -1;  // the result slot it stores to, or -1
  bool biased() const { return inner[3] >= 0; }
};

// The chain that ends at node `id`, where each inner node is `absorbable` (read by the chain
// alone, neither stored nor loaded).
template <class Absorbable>
bool match_hard_sigmoid(const ir::graph& g, std::int32_t id, Absorbable&& absorbable,
                        hard_sigmoid_chain& c) {
  auto is = [&](std::int32_t n, ir::op k) {
    return g.nodes[n].kind == k && g.nodes[n].type == dtype::f32;
  };
  auto constant = [&](std::int32_t n, float& v) {
    if (!is(n, ir::op::constant)) return false;
    v = static_cast<float>(g.nodes[n].value.f);
    return true;
  };
  // Node n's operand beside a constant v (either side: f32 sums and products commute exactly).
  auto beside_constant = [&](std::int32_t n, float& v) -> std::int32_t {
    const ir::node& b = g.nodes[n];
    if (constant(b.operands[1], v)) return b.operands[0];
    if (constant(b.operands[0], v)) return b.operands[1];
    return -1;
  };
  auto clip_chain = [&](std::int32_t clip) {
    if (!is(clip, ir::op::clip) || !constant(g.nodes[clip].operands[1], c.coeffs[2]) ||
        !constant(g.nodes[clip].operands[2], c.coeffs[3]))
      return false;
    const std::int32_t add = g.nodes[clip].operands[0];
    if (!is(add, ir::op::add) || !absorbable(add)) return false;
    const std::int32_t mul = beside_constant(add, c.coeffs[1]);
    if (mul < 0 || !is(mul, ir::op::mul) || !absorbable(mul)) return false;
    c.x = beside_constant(mul, c.coeffs[0]);
    c.inner = {mul, add, -1, -1};
    return c.x >= 0;
  };
  c = {};
  if (clip_chain(id)) return true;
  if (!is(id, ir::op::mul)) return false;
  for (int side = 0; side < 2; ++side) {
    const std::int32_t h = g.nodes[id].operands[side];
    if (absorbable(h) && clip_chain(h) && c.x == g.nodes[id].operands[1 - side]) {
      c.times_input = true;
      c.inner[2] = h;
      return true;
    }
  }
  c = {};
  return false;
}

}  // namespace detail

inline tile_program::tile_program(const compiler::plan& p, const compiler::region& reg) {
  const ir::graph& g = p.graph;
  // Operands the region evaluates: none for a loaded node (its producer ran in another region).
  auto arity = [&](std::int32_t id) {
    return compiler::load_slot(p, reg, id) >= 0 ? 0 : g.nodes[id].arity();
  };
  const std::vector<bool> evaluated = compiler::evaluated_nodes(p, reg);
  auto computed = [&](std::int32_t id) { return evaluated[id] && id != reg.root; };
  auto stores = compiler::region_stores(p, reg);
  std::vector<bool> stored(g.nodes.size(), false);
  for (auto st : stores) stored[st.node] = true;
  // Chains that one instruction evaluates: their head reads the chain's input alone, and their
  // inner nodes are not emitted.
  std::vector<std::int32_t> readers(g.nodes.size(), 0);
  for (std::int32_t id : reg.nodes)
    if (computed(id))
      for (int i = 0; i < arity(id); ++i) ++readers[g.nodes[id].operands[i]];
  // Read by `by` nodes of a chain and nothing else, neither stored nor loaded.
  auto absorbable = [&](std::int32_t id, int by = 1) {
    return computed(id) && readers[id] == by && !stored[id] && compiler::load_slot(p, reg, id) < 0;
  };
  std::vector<detail::hard_sigmoid_chain> chain_at(g.nodes.size());
  std::vector<bool> absorbed(g.nodes.size(), false);
  for (std::int32_t id : reg.nodes) {
    detail::hard_sigmoid_chain c;
    if (!computed(id) || compiler::load_slot(p, reg, id) >= 0 ||
        !detail::match_hard_sigmoid(g, id, absorbable, c))
      continue;
    // x = u + v, read by the chain alone (a convolution's bias): summed by the instruction.
    const ir::node& x = g.nodes[c.x];
    if (x.kind == ir::op::add && x.type == dtype::f32 && absorbable(c.x, c.times_input ? 2 : 1))
      c.inner[3] = c.x;
    // Stored once and read by nothing else: written to that result directly.
    int stores_of_id = 0;
    for (auto st : stores)
      if (st.node == id) {
        ++stores_of_id;
        c.result = st.slot;
      }
    if (stores_of_id != 1 || readers[id] != 0) c.result = -1;
    chain_at[id] = c;
    for (std::int32_t n : c.inner)
      if (n >= 0) absorbed[n] = true;
  }
  // The operands each emitted instruction reads.
  auto operands_of = [&](std::int32_t id) -> std::vector<std::int32_t> {
    if (absorbed[id]) return {};
    if (const detail::hard_sigmoid_chain& c = chain_at[id]; c.biased())
      return {g.nodes[c.x].operands[0], g.nodes[c.x].operands[1]};
    else if (c.x >= 0)
      return {c.x};
    const ir::node& n = g.nodes[id];
    return std::vector<std::int32_t>(n.operands.begin(), n.operands.begin() + arity(id));
  };
  std::vector<std::int32_t> slot_of(g.nodes.size(), -1), last_use(g.nodes.size(), -1),
      uses(g.nodes.size(), 0);
  for (std::size_t k = 0; k < reg.nodes.size(); ++k) {
    if (!computed(reg.nodes[k])) continue;
    for (std::int32_t o : operands_of(reg.nodes[k])) {
      last_use[o] = static_cast<std::int32_t>(k);
      ++uses[o];
    }
  }
  std::vector<std::uint64_t> varies_with(g.nodes.size(), 0);
  std::vector<std::int32_t> free_slots;
  std::vector<bool> own_slot(g.nodes.size(), false);
  for (std::size_t k = 0; k < reg.nodes.size(); ++k) {
    std::int32_t id = reg.nodes[k];
    if (!computed(id))
      continue;                  // the root: reduced by run_reduction; else a contraction's
                                 // operand, read by its packing
    if (absorbed[id]) continue;  // evaluated by its chain's instruction
    const ir::node& n = g.nodes[id];
    if (n.kind == ir::op::constant && uses[id] == 0 && !stored[id]) continue;  // a chain's
    const std::vector<std::int32_t> reads = operands_of(id);
    instruction s;
    for (std::size_t i = 0; i < reads.size(); ++i) {
      s.in[i] = slot_of[reads[i]];
      // A plan the compiler made never has one (a module's plan may: runtime/module_format.hpp).
      if (s.in[i] < 0)
        throw error(errc::invalid_graph, std::string(ir::name(n.kind)),
                    "node %" + std::to_string(id) + " of a region reads %" +
                        std::to_string(reads[i]) +
                        ", which the region neither computes before it nor loads");
    }
    dtype operand = n.arity() > 0 ? g.nodes[n.operands[0]].type : n.type;
    if (int in = compiler::load_slot(p, reg, id); in >= 0) {
      s.param = in;
      s.repeatable = true;
      s.varies_with = std::uint64_t{1} << std::min(in, 63);
      if (std::find(loaded_.begin(), loaded_.end(), in) == loaded_.end()) loaded_.push_back(in);
      s.fn = detail::with_dtype(
          n.type, [](auto d) -> instruction_fn { return &detail::load_input<decltype(d)::value>; });
    } else if (n.kind == ir::op::constant) {
      s.value = n.value;
      s.repeatable = true;
      s.fn = detail::with_dtype(n.type, [](auto d) -> instruction_fn {
        return &detail::fill_constant<decltype(d)::value>;
      });
    } else {
      if (const detail::hard_sigmoid_chain& c = chain_at[id]; c.x >= 0) {
        s.coeffs = c.coeffs;
        s.result = c.result;
        s.fn = detail::hard_sigmoid_function(c.times_input, c.biased(), c.result >= 0);
      } else {
        s.fn = detail::function_for(n, operand);
      }
      // A value of repeated values repeats too (the SE block's per-channel scale, a bias's
      // activation): computed in the row's first tile only. Not one over the whole space: its
      // lanes change along every row, and its own slot would only grow the scratch.
      s.repeatable = !reads.empty() && !(n.dims == reg.space) && s.result < 0;
      for (std::int32_t o : reads) {
        s.repeatable = s.repeatable && own_slot[o];
        s.varies_with |= varies_with[o];
      }
    }
    if (!s.fn)
      throw error(errc::unsupported, std::string(ir::name(n.kind)),
                  "no CPU primitive for element type " + std::string(name(operand)));
    // A slot is reused once its last reader has run (never by that reader itself: a widening
    // cast would overwrite lanes it has not read yet). A repeatable instruction's slot is
    // never shared: an earlier value in a reused slot would overwrite it in the next tile.
    if (free_slots.empty() || s.repeatable) {
      s.out = slots_++;
    } else {
      s.out = free_slots.back();
      free_slots.pop_back();
    }
    slot_of[id] = s.out;
    varies_with[id] = s.varies_with;
    code_.push_back(s);
    for (std::size_t i = 0; i < reads.size(); ++i) {
      std::int32_t o = reads[i];
      bool repeated = false;
      for (std::size_t j = 0; j < i; ++j) repeated = repeated || reads[j] == o;
      if (!repeated && last_use[o] == static_cast<std::int32_t>(k) && !stored[o] && !own_slot[o])
        free_slots.push_back(slot_of[o]);
    }
    own_slot[id] = s.repeatable;
    if (last_use[id] < 0 && !stored[id] && !s.repeatable) free_slots.push_back(s.out);
  }
  computed_ = code_.size();
  for (auto st : stores) {
    std::int32_t id = st.node;
    if (chain_at[id].result >= 0) continue;  // its instruction stored it
    instruction s;
    s.out = st.slot;
    s.in[0] = slot_of[id];
    if (s.in[0] < 0 && id != reg.root)
      throw error(errc::invalid_graph, std::string(ir::name(g.nodes[id].kind)),
                  "a region stores %" + std::to_string(id) + ", which it does not compute");
    s.fn = detail::with_dtype(g.nodes[id].type, [](auto d) -> instruction_fn {
      return &detail::store_result<decltype(d)::value>;
    });
    code_.push_back(s);
  }
}
#endif  // KILN_CPU_KERNELS_BODY

}  // namespace kiln::cpu::inline KILN_CPU_ISA
