// The compile-time kernel driver: a frozen plan's region becomes one fused loop, instantiated by
// the C++ compiler from the plan (a template argument): SIMD body, padded tail, broadcast strides.
#pragma once

#include <cstring>
#include <limits>
#include <tuple>
#include <utility>
#include "kiln/codegen/cpu/isa.hpp"

#include "kiln/codegen/cpu/fold_order.hpp"
#include "kiln/codegen/cpu/primitives.hpp"
#include "kiln/codegen/cpu/row_function.hpp"
#include "kiln/compiler/freeze.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {

template <const auto& Plan, int R>
struct region_kernel {
  static constexpr const compiler::frozen_region& reg = Plan.regions[R];
  static constexpr int size = reg.node_count;
  static constexpr int first_view_slot = Plan.sizes.inputs + Plan.sizes.transients;
  // A contraction's finished tile is read from the slot after the views'
  // (compiler::accumulator_slot).
  static constexpr int accumulator_slot = first_view_slot + Plan.sizes.views;
  static constexpr int n_in = accumulator_slot + 1;
  static constexpr int n_out = Plan.sizes.outputs + Plan.sizes.transients;
  // (output slot, node stored there)
  static constexpr auto stores = [] {
    constexpr int n = reg.root >= 0 ? 1 : reg.result_count + reg.write_count;
    std::array<std::pair<int, std::int32_t>, n> s{};
    if constexpr (reg.root >= 0) {
      int slot = reg.result_count > 0 ? Plan.region_results[reg.result_begin]
                                      : Plan.sizes.outputs + Plan.region_writes[reg.write_begin];
      s[0] = {slot, Plan.nodes[reg.root].operands[0]};
    } else {
      for (int k = 0; k < reg.result_count; ++k) {
        int r = Plan.region_results[reg.result_begin + k];
        s[k] = {r, Plan.outputs[r]};
      }
      for (int k = 0; k < reg.write_count; ++k) {
        int t = Plan.region_writes[reg.write_begin + k];
        s[reg.result_count + k] = {Plan.sizes.outputs + t, Plan.transients[t]};
      }
    }
    return s;
  }();
  // The input slot a node is loaded from: its parameter's, its transient's, or its view's;
  // -1: computed.
  static constexpr int load_slot(std::int32_t id) {
    const ir::node& n = Plan.nodes[id];
    if (id == reg.contraction) return accumulator_slot;
    if (n.kind == ir::op::input) return n.arg;
    for (int k = 0; k < reg.read_count; ++k)
      if (int t = Plan.region_reads[reg.read_begin + k]; Plan.transients[t] == id)
        return Plan.sizes.inputs + t;
    for (int k = 0; k < reg.view_count; ++k)
      if (int v = Plan.region_views[reg.view_begin + k]; Plan.views[v] == id)
        return first_view_slot + v;
    return -1;
  }

  static constexpr std::int32_t node_at(int k) { return Plan.region_nodes[reg.node_begin + k]; }
  static constexpr int position_of(std::int32_t id) {
    for (int k = 0; k < size; ++k)
      if (node_at(k) == id) return k;
    return -1;
  }
  // Which nodes the row evaluates: all, but in a contraction's region only its epilogue
  // (compiler::evaluated_nodes).
  static constexpr auto evaluated = [] {
    std::array<bool, size> e{};
    for (int k = 0; k < size; ++k) e[k] = reg.contraction < 0;
    if (reg.contraction < 0) return e;
    for (auto [slot, id] : stores) e[position_of(id)] = true;
    for (int k = size - 1; k >= 0; --k)
      if (e[k] && load_slot(node_at(k)) < 0)
        for (int i = 0; i < Plan.nodes[node_at(k)].arity(); ++i)
          e[position_of(Plan.nodes[node_at(k)].operands[i])] = true;
    return e;
  }();
  // The input slots the row reads (each once).
  static constexpr auto in_slot_list = [] {
    std::array<int, size> s{};
    int n = 0;
    for (int k = 0; k < size; ++k) {
      int slot = load_slot(node_at(k));
      bool seen = false;
      for (int j = 0; j < n; ++j) seen = seen || s[j] == slot;
      if (evaluated[k] && slot >= 0 && !seen) s[n++] = slot;
    }
    return std::pair{s, n};
  }();
  static constexpr auto in_slots = [] {
    std::array<int, in_slot_list.second> s{};
    for (int k = 0; k < in_slot_list.second; ++k) s[k] = in_slot_list.first[k];
    return s;
  }();

  // The element type and dims of the value input slot s holds: a parameter's, a transient's, a
  // view's, or the contraction's tile.
  static constexpr ir::input_decl slot_value(int s) {
    auto of = [](const ir::node& n) { return ir::input_decl{n.type, n.dims}; };
    if (s == accumulator_slot) return of(Plan.nodes[reg.contraction]);
    if (s < Plan.sizes.inputs) return Plan.inputs[s];
    if (s < first_view_slot) return of(Plan.nodes[Plan.transients[s - Plan.sizes.inputs]]);
    return of(Plan.nodes[Plan.views[s - first_view_slot]]);
  }
  // Whether input slot s is expected to be the same along a row: a value of the region's rank
  // whose last extent is 1 where the space's is not (a row group's reduced values, read by the
  // regions after it). Where every slot steps as expected (steps_as_expected), the loops
  // read it without stepping and without the masks' `and` per load.
  static constexpr auto row_constant = [] {
    std::array<bool, n_in> c{};
    const int rank = reg.space.rank;
    for (int s : in_slots) {
      const shape d = slot_value(s).dims;
      c[s] = rank > 0 && d.rank == rank && d.dims[rank - 1] == 1 && reg.space.dims[rank - 1] != 1;
    }
    return c;
  }();

  template <int K>
  using value_t = compute_t<Plan.nodes[node_at(K)].type>;
  template <std::size_t... K>
  static auto values_for(std::index_sequence<K...>) -> std::tuple<value_t<K>...>;
  using values = decltype(values_for(std::make_index_sequence<size>{}));

  template <int K, int I>
  static const auto& operand(const values& v) {
    return std::get<position_of(Plan.nodes[node_at(K)].operands[I])>(v);
  }

  // b itself, as a value the compiler cannot see into: the multiply that made it is not fused
  // with an add after it. GCC contracts a * b + c into an FMA by default in GNU mode where the
  // target has one; kiln's semantics are the interpreter's and Vulkan's (NoContraction), which
  // round the product, and a fold's join must give the runtime reducer's bits, which adds
  // stored values. Itself no instruction: the product and the sum are then two.
  template <class B>
  [[gnu::always_inline]] static B unfused(B b) {
    auto r = static_cast<typename B::register_type>(b);
#if defined(__x86_64__) || defined(__i386__)
    asm("" : "+v"(r));
#elif defined(__aarch64__)
    asm("" : "+w"(r));
#endif
    return B(r);
  }
  template <class T>
  [[gnu::always_inline]] static pack<T> unfused(pack<T> v) {
    for (auto& b : v.p) b = unfused(b);
    return v;
  }

  // mask[s]: -1 where input slot s steps along the row, 0 where it is broadcast (and then points
  // at `lanes` copies of its element): one load either way, with no branch. Contiguous: every
  // slot steps as expected (0 where row_constant, else 1), so no mask is needed.
  template <int K, bool Contiguous>
  static value_t<K> compute(const values& v, const void* const* in, const std::int64_t* mask,
                            std::int64_t j) {
    constexpr ir::node n = Plan.nodes[node_at(K)];
    constexpr int slot = load_slot(node_at(K));
    using ir::op;
    if constexpr (slot >= 0) {
      auto* p = static_cast<const storage_t<n.type>*>(in[slot]);
      if constexpr (Contiguous && row_constant[slot])
        return load<n.type>(p);
      else
        return load<n.type>(p + (Contiguous ? j : j & mask[slot]));
    } else if constexpr (node_at(K) == reg.root) {
      // Reduced by run_reduction, not here; a defined value keeps the compiler's
      // maybe-uninitialized analysis quiet.
      return value_t<K>::splat(lane_value<n.type>(scalar::computed(n.type, 0.0)));
    } else if constexpr (ir::info(n.kind).cls == ir::op_class::view) {
      return operand<K, 0>(v);  // a view broadcasting already gives (compiler::computed_view)
    } else if constexpr (n.kind == op::constant) {
      return value_t<K>::splat(lane_value<n.type>(n.value));
    } else if constexpr (n.kind == op::cast) {
      return cast<Plan.nodes[n.operands[0]].type, n.type>(operand<K, 0>(v));
    } else if constexpr (n.kind == op::select) {
      return select(operand<K, 0>(v), operand<K, 1>(v), operand<K, 2>(v));
    } else if constexpr (n.kind == op::logical_not) {
      return logical_not(operand<K, 0>(v));
    } else if constexpr (ir::info(n.kind).cls == ir::op_class::logical) {
      return logical<n.kind>(operand<K, 0>(v), operand<K, 1>(v));
    } else if constexpr (ir::info(n.kind).cls == ir::op_class::compare) {
      return cpu::compare<n.kind>(operand<K, 0>(v), operand<K, 1>(v));
    } else if constexpr (ir::info(n.kind).cls == ir::op_class::test) {
      return cpu::test<n.kind>(operand<K, 0>(v));
    } else if constexpr (ir::info(n.kind).cls == ir::op_class::ternary) {
      return ternary<n.kind, n.type>(operand<K, 0>(v), operand<K, 1>(v), operand<K, 2>(v));
    } else if constexpr (ir::info(n.kind).arity == 1) {
      return unary<n.kind, n.type>(operand<K, 0>(v));
    } else if constexpr (n.kind == op::mul && is_floating(n.type)) {
      return unfused(binary<n.kind, n.type>(operand<K, 0>(v), operand<K, 1>(v)));
    } else {
      return binary<n.kind, n.type>(operand<K, 0>(v), operand<K, 1>(v));
    }
  }

  // The nodes loaded from a row_constant slot: a contiguous loop loads them once, before it
  // (load_row_constants), and keeps them in registers. Loaded at every step, they were loaded
  // again after every store (a vector store may alias anything): two loads more a step
  // (layer_norm's output row of 768 in L2: 147 -> 126-131 ns).
  static constexpr auto hoisted = [] {
    std::array<bool, size> h{};
    for (int k = 0; k < size; ++k) {
      const int slot = load_slot(node_at(k));
      h[k] = evaluated[k] && slot >= 0 && row_constant[slot];
    }
    return h;
  }();

  // Evaluates every node of the region for lanes [j, j + lanes); where Contiguous, all but the
  // hoisted ones, which v holds from load_row_constants.
  template <bool Contiguous>
  static void evaluate(values& v, const void* const* in, const std::int64_t* mask, std::int64_t j) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (
          [&] {
            if constexpr (evaluated[K] && !(Contiguous && hoisted[K]))
              std::get<K>(v) = compute<K, Contiguous>(v, in, mask, j);
          }(),
          ...);
    }
    (std::make_index_sequence<size>{});
  }

  // Loads the hoisted nodes into v, for a contiguous loop's evaluate<true>: each a splat of the
  // element its slot points at.
  static void load_row_constants(values& v, const void* const* in) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (
          [&] {
            if constexpr (hoisted[K]) {
              constexpr ir::node n = Plan.nodes[node_at(K)];
              std::get<K>(v) =
                  splat<n.type>(static_cast<const storage_t<n.type>*>(in[load_slot(node_at(K))]));
            }
          }(),
          ...);
    }
    (std::make_index_sequence<size>{});
  }

  // Whether every input slot steps as expected: 0 where row_constant, else 1 (the loops then read
  // the slots in place, with no copies and no masks).
  static bool steps_as_expected(const std::int64_t* step) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (true && ... && (step[in_slots[I]] == (row_constant[in_slots[I]] ? 0 : 1)));
    }
    (std::make_index_sequence<in_slots.size()>{});
  }

  // Evaluates every node of the region for lanes [j, j + lanes) (in v: see evaluate) and stores
  // the results.
  template <bool Contiguous>
  static void step_at(values& v, const void* const* in, const std::int64_t* mask, void* const* out,
                      std::int64_t j) {
    evaluate<Contiguous>(v, in, mask, j);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (store_value<stores[I].first, stores[I].second>(v, out, j), ...);
    }
    (std::make_index_sequence<stores.size()>{});
  }

  template <int Slot, std::int32_t Id>
  static void store_value(const values& v, void* const* out, std::int64_t j) {
    constexpr dtype t = Plan.nodes[Id].type;
    store<t>(std::get<position_of(Id)>(v), static_cast<storage_t<t>*>(out[Slot]) + j);
  }

  // Bytes of an element of every input slot the row reads, for its run-time loops.
  static constexpr auto slot_bytes = [] {
    std::array<int, n_in> b{};
    for (int s : in_slots) b[s] = size_in_bytes(slot_value(s).type);
    return b;
  }();

  // `lanes` copies of the element of `bytes` at p, to `to`.
  static void copy_lanes(const void* p, int bytes, unsigned char* to) {
    auto fill = [&]<class T>(T*) {
      T v;
      std::memcpy(&v, p, sizeof(T));
      for (std::size_t l = 0; l < lanes; ++l) std::memcpy(to + l * sizeof(T), &v, sizeof(T));
    };
    if (bytes == 1) fill(static_cast<std::uint8_t*>(nullptr));
    if (bytes == 2) fill(static_cast<std::uint16_t*>(nullptr));
    if (bytes == 4) fill(static_cast<std::uint32_t*>(nullptr));
    if (bytes == 8) fill(static_cast<std::uint64_t*>(nullptr));
  }

  // A row's input pointers: each broadcast slot's element copied to `lanes` places so that it
  // loads as the others do, and (pad) padded copies of the last count % lanes elements. The loops
  // read copies of `at` and `mask` in local arrays whose address never escapes, so the pointers
  // stay in registers instead of being reloaded after every store.
  struct row_inputs {
    const void* at[n_in > 0 ? n_in : 1];
    const void* tail[n_in > 0 ? n_in : 1];
    std::int64_t mask[n_in > 0 ? n_in : 1];
    alignas(64) unsigned char copies[n_in > 0 ? n_in : 1][lanes * 8];
    alignas(64) unsigned char tail_copies[n_in > 0 ? n_in : 1][lanes * 8];

    // Uninitialized until point(): a fold declares one for the rare row that needs it (a
    // std::optional was zeroed whole, 1 KB, at every call, as GCC 12 constructs it).
    row_inputs() = default;
    row_inputs(const void* const* in, const std::int64_t* step) { point(in, step); }
    void point(const void* const* in, const std::int64_t* step) {
      for (int s : in_slots) {
        at[s] = in[s];
        mask[s] = step[s] ? -1 : 0;
        if (!step[s]) {
          copy_lanes(in[s], slot_bytes[s], copies[s]);
          at[s] = copies[s];
        }
      }
    }
    // Points `tail` at copies of elements [j, j + rest) (zeros after them).
    void pad(const std::int64_t* step, std::int64_t j, std::int64_t rest) {
      for (int s : in_slots) {
        tail[s] = at[s];
        if (!step[s]) continue;
        auto bytes = slot_bytes[s];
        std::memset(tail_copies[s], 0, sizeof tail_copies[s]);
        std::memcpy(tail_copies[s], static_cast<const unsigned char*>(at[s]) + j * bytes,
                    rest * bytes);
        tail[s] = tail_copies[s];
      }
    }
  };

  static void row(const void* const* in, const std::int64_t* step, void* const* out,
                  std::int64_t count) {
    void* out_local[n_out];
    for (auto [s, id] : stores) out_local[s] = out[s];
    std::int64_t j = 0;
    const bool contiguous = steps_as_expected(step);
    if (contiguous) {  // the common case, with nothing to set up (row_inputs' setup was 13 % of the
                       // instructions of layer_norm's output row of 768)
      // Its own values, whose address no call takes (see fold).
      values c;
      const void* at[n_in > 0 ? n_in : 1];
      for (int s : in_slots) at[s] = in[s];
      load_row_constants(c, at);
      for (; j + std::int64_t(lanes) <= count; j += lanes)
        step_at<true>(c, at, nullptr, out_local, j);
      if (j == count) return;
    }
    values v;
    row_inputs r(in, step);
    if (!contiguous) {
      // The loop's own copies (r's address escapes to pad).
      const void* at[n_in > 0 ? n_in : 1];
      std::int64_t mask[n_in > 0 ? n_in : 1];
      for (int s : in_slots) at[s] = r.at[s], mask[s] = r.mask[s];
      for (; j + std::int64_t(lanes) <= count; j += lanes)
        step_at<false>(v, at, mask, out_local, j);
      if (j == count) return;
    }
    // Tail: the last elements from padded copies, one more full step into a buffer.
    std::int64_t rest = count - j;
    r.pad(step, j, rest);
    alignas(64) unsigned char out_tail[n_out][lanes * 8];
    void* tail_out[n_out];
    for (int k = 0; k < n_out; ++k) tail_out[k] = out_tail[k];
    step_at<false>(v, r.tail, r.mask, tail_out, 0);
    for (auto [s, id] : stores) {
      auto bytes = size_in_bytes(Plan.nodes[id].type);
      std::memcpy(static_cast<unsigned char*>(out[s]) + j * bytes, out_tail[s], rest * bytes);
    }
  }

  // Whether the row folds its reduction in registers (fold below): sum, mean, max and min of an
  // f32 operand. Other reductions store the operand, and run_reduction folds it.
  static constexpr bool folds = [] {
    if (reg.root < 0) return false;
    using ir::op;
    const ir::node& r = Plan.nodes[reg.root];
    return Plan.nodes[r.operands[0]].type == dtype::f32 &&
           (r.kind == op::reduce_sum || r.kind == op::reduce_mean || r.kind == op::reduce_max ||
            r.kind == op::reduce_min);
  }();
  static constexpr ir::op root_kind = reg.root >= 0 ? Plan.nodes[reg.root].kind : ir::op::input;
  // The reduction's identity and its join of two partials, as the runtime's reducer<Kind, float>
  // has them (the partial first, the new value second: max and min keep the partial on ties and
  // take a NaN).
  static constexpr float fold_identity =
      root_kind == ir::op::reduce_max   ? -std::numeric_limits<float>::infinity()
      : root_kind == ir::op::reduce_min ? std::numeric_limits<float>::infinity()
                                        : 0.0f;
  template <class V>
  static V join(V a, V b) {
    if constexpr (root_kind == ir::op::reduce_max || root_kind == ir::op::reduce_min) {
      auto beyond = root_kind == ir::op::reduce_max ? b > a : b < a;
      if constexpr (std::is_same_v<V, float>)
        return beyond || b != b ? b : a;
      else  // not b != b: xsimd's AVX != is ordered, false for NaN
        return xsimd::select(beyond || xsimd::isnan(b), b, a);
    } else {
      return a + b;
    }
  }

  // Folds the root's operand over `count` elements into the float at acc, in the reducers' order
  // (fold_order.hpp), so to the same bits, with no pass through memory.
  static void fold(const void* const* in, const std::int64_t* step, std::int64_t count, void* acc) {
    if constexpr (folds) {
      using batch = xsimd::batch<float>;
      constexpr int batches = 32 / int(lanes);  // the order's 32 partials, a batch of lanes each
      using order = block_partials<batch, batches>;
      constexpr int ways = order::ways, block = order::block;
      static_assert(batches * int(lanes) == ways);
      constexpr int operand = position_of(stores[0].second);
      // The loop's own copies of the pointers (and masks), as row's: the row's own where every
      // slot steps as expected, else row_inputs' (made only then, or for a tail).
      row_inputs r;  // pointed where the row is not contiguous, else only for a tail
      const void* at[n_in > 0 ? n_in : 1];
      std::int64_t mask[n_in > 0 ? n_in : 1];
      const bool contiguous = steps_as_expected(step);
      if (contiguous) {
        for (int s : in_slots) at[s] = in[s];
      } else {
        r.point(in, step);
        for (int s : in_slots) at[s] = r.at[s], mask[s] = r.mask[s];
      }
      order partials;
      batch p[batches];
      const auto join_batches = [](batch a, batch b) { return join(a, b); };
      auto push = [&] {
        batch* slot = partials.next();
        for (int q = 0; q < batches; ++q) slot[q] = p[q];
        partials.push(join_batches);
      };
      // Each loop has values of its own. Where GCC calls evaluate<false> out of line (its
      // inlining budget is the translation unit's, so edits elsewhere flip it), the address of
      // the values it is given escapes, and they live in memory for the whole function: shared
      // with the contiguous loop, they doubled layer_norm's variance fold (504 -> 1050
      // instructions a row).
      values contiguous_values, strided_values;
      if (contiguous) load_row_constants(contiguous_values, at);
      auto value = [&]<bool Contiguous>(const void* const* from, std::int64_t j)
          __attribute__((always_inline)) {
        values& v = Contiguous ? contiguous_values : strided_values;
        evaluate<Contiguous>(v, from, mask, j);
        return unfused(std::get<operand>(v).p[0]);
      };
      std::int64_t j = 0;
      // Inlined, as value is, whatever GCC's budget says: called out of line, the loop reads v, p
      // and the pointers through the closure, and layer_norm ran 10-20 % slower in the builds
      // where GCC chose so (it did for edits to unrelated lines).
      auto blocks = [&]<bool Contiguous>() __attribute__((always_inline)) {
        for (; j + block <= count; j += block) {
          // The first batches start from the identity where they are folded (filling p with
          // identities first was a `rep stos` per block).
          for (int q = 0; q < batches; ++q)
            p[q] = join(batch(fold_identity),
                        value.template operator()<Contiguous>(at, j + q * lanes));
#pragma GCC unroll 1
          // Not unrolled whole: GCC unrolls the block's 32 steps, hoists their loads and spills
          // registers (layer_norm's variance fold spent a tenth of its time on one spill).
          for (int t = ways; t < block; t += ways)
            for (int q = 0; q < batches; ++q)
              p[q] = join(p[q], value.template operator()<Contiguous>(at, j + t + q * lanes));
          push();
        }
        if (j == count) return;
        for (auto& b : p) b = batch(fold_identity);
        int q = 0;
        for (; j + std::int64_t(lanes) <= count; j += lanes, q = (q + 1) % batches)
          p[q] = join(p[q], value.template operator()<Contiguous>(at, j));
        if (j < count) {  // the padded lanes keep their partials
          if (contiguous) {
            r.point(in, step);
            for (int s : in_slots) mask[s] = r.mask[s];
          }
          r.pad(step, j, count - j);
          batch v = value.template operator()<false>(r.tail, 0);
          alignas(64) float index[lanes];
          for (std::size_t l = 0; l < lanes; ++l) index[l] = float(l);
          p[q] = xsimd::select(batch::load_aligned(index) < batch(float(count - j)), join(p[q], v),
                               p[q]);
        }
        push();
      };
      if (contiguous)
        blocks.template operator()<true>();
      else
        blocks.template operator()<false>();
      float result = fold_identity;
      if (batch* joined = partials.result(join_batches)) {
        // The tree's widths of a batch or more join whole batches, in registers; the last
        // batch's lanes then join as floats.
        for (int w = batches / 2; w > 1; w /= 2)
          for (int q = 0; q < w; ++q) joined[q] = join(joined[q], joined[q + w]);
        const batch last = batches > 1 ? join(joined[0], joined[1]) : joined[0];
        alignas(64) float partial[lanes];
        last.store_aligned(partial);
        result = join_partials(partial, int(lanes), [](float a, float b) { return join(a, b); });
      }
      std::memcpy(acc, &result, sizeof result);
    }
  }
};

// The row function of every region of a frozen plan, indexed by region.
template <const auto& Plan>
inline constexpr auto region_rows = []<int... R>(std::integer_sequence<int, R...>) {
  return std::array<row_fn, sizeof...(R)>{&region_kernel<Plan, R>::row...};
}
(std::make_integer_sequence<int, Plan.sizes.regions>{});

// The fold function of every region of a frozen plan whose row folds its reduction
// (region_kernel::folds), else nullptr, indexed by region.
template <const auto& Plan>
inline constexpr auto region_folds = []<int... R>(std::integer_sequence<int, R...>) {
  return std::array<fold_fn, sizeof...(R)>{
      (region_kernel<Plan, R>::folds ? &region_kernel<Plan, R>::fold : nullptr)...};
}
(std::make_integer_sequence<int, Plan.sizes.regions>{});

}  // namespace kiln::cpu::inline KILN_CPU_ISA
