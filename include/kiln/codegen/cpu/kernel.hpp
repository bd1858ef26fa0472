// The compile-time kernel driver: a frozen plan's region becomes one fused loop, instantiated by
// the C++ compiler from the plan (a template argument): SIMD body, padded tail, broadcast strides.
#pragma once

#include <cstring>
#include <tuple>
#include <utility>
#include "kiln/codegen/cpu/isa.hpp"

#include "kiln/codegen/cpu/primitives.hpp"
#include "kiln/compiler/freeze.hpp"

namespace kiln::cpu::inline KILN_CPU_ISA {

// One row of a region: `count` elements. in[s] points at input slot s's first element for this
// row and advances by step[s] (1, or 0 where broadcast); out[s] at output slot s's. Input slots:
// the parameters, then the transients; output slots: the results, then the transients
// (compiler::input_slot / output_slot). A reduction's region stores its root's operand, to the
// region's first output slot: the reduction itself is run_reduction's.
using row_fn = void (*)(const void* const* in, const std::int64_t* step, void* const* out,
                        std::int64_t count);

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

  template <int K>
  using value_t = compute_t<Plan.nodes[node_at(K)].type>;
  template <std::size_t... K>
  static auto values_for(std::index_sequence<K...>) -> std::tuple<value_t<K>...>;
  using values = decltype(values_for(std::make_index_sequence<size>{}));

  template <int K, int I>
  static const auto& operand(const values& v) {
    return std::get<position_of(Plan.nodes[node_at(K)].operands[I])>(v);
  }

  // mask[s]: -1 where input slot s steps along the row, 0 where it is broadcast (and then points
  // at `lanes` copies of its element): one load either way, with no branch.
  template <int K, bool Contiguous>
  static value_t<K> compute(const values& v, const void* const* in, const std::int64_t* mask,
                            std::int64_t j) {
    constexpr ir::node n = Plan.nodes[node_at(K)];
    constexpr int slot = load_slot(node_at(K));
    using ir::op;
    if constexpr (slot >= 0) {
      auto* p = static_cast<const storage_t<n.type>*>(in[slot]);
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
    } else {
      return binary<n.kind, n.type>(operand<K, 0>(v), operand<K, 1>(v));
    }
  }

  // Bytes of one element of input slot s.
  static constexpr int slot_bytes_of(int s) {
    if (s == accumulator_slot) return size_in_bytes(Plan.nodes[reg.contraction].type);
    if (s < Plan.sizes.inputs) return size_in_bytes(Plan.inputs[s].type);
    if (s < first_view_slot)
      return size_in_bytes(Plan.nodes[Plan.transients[s - Plan.sizes.inputs]].type);
    return size_in_bytes(Plan.nodes[Plan.views[s - first_view_slot]].type);
  }

  // Evaluates every node of the region for lanes [j, j + lanes) and stores the results.
  template <bool Contiguous>
  static void step_at(const void* const* in, const std::int64_t* mask, void* const* out,
                      std::int64_t j) {
    values v;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (
          [&] {
            if constexpr (evaluated[K]) std::get<K>(v) = compute<K, Contiguous>(v, in, mask, j);
          }(),
          ...);
    }
    (std::make_index_sequence<size>{});
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

  static void row(const void* const* in, const std::int64_t* step, void* const* out,
                  std::int64_t count) {
    bool contiguous = true;
    for (int s : in_slots) contiguous = contiguous && step[s] == 1;
    // Local copies of the pointer lists: the stores cannot alias them, so the loop keeps the
    // pointers in registers instead of reloading them after every store. A broadcast slot's
    // element is copied to `lanes` places, so that it loads as the others do.
    const void* in_local[n_in > 0 ? n_in : 1] = {};
    std::int64_t mask[n_in > 0 ? n_in : 1] = {};
    alignas(64) unsigned char copies[n_in > 0 ? n_in : 1][lanes * 8];
    void* out_local[n_out];
    for (int s : in_slots) {
      in_local[s] = in[s];
      mask[s] = step[s] ? -1 : 0;
      if (!step[s]) {
        copy_lanes(in[s], slot_bytes_of(s), copies[s]);
        in_local[s] = copies[s];
      }
    }
    for (auto [s, id] : stores) out_local[s] = out[s];
    std::int64_t j = 0;
    if (contiguous)
      for (; j + std::int64_t(lanes) <= count; j += lanes)
        step_at<true>(in_local, mask, out_local, j);
    else
      for (; j + std::int64_t(lanes) <= count; j += lanes)
        step_at<false>(in_local, mask, out_local, j);
    if (j == count) return;
    // Tail: copy the last elements into padded buffers and run one more full step there.
    std::int64_t rest = count - j;
    alignas(64) unsigned char in_tail[n_in > 0 ? n_in : 1][lanes * 8] = {};
    alignas(64) unsigned char out_tail[n_out][lanes * 8];
    const void* tail_in[n_in > 0 ? n_in : 1] = {};
    void* tail_out[n_out];
    for (int s : in_slots) {
      auto bytes = slot_bytes_of(s);
      auto* src = static_cast<const unsigned char*>(in[s]);
      tail_in[s] = in_local[s];
      if (step[s]) {
        std::memcpy(in_tail[s], src + j * bytes, rest * bytes);
        tail_in[s] = in_tail[s];
      }
    }
    for (int r = 0; r < n_out; ++r) tail_out[r] = out_tail[r];
    step_at<false>(tail_in, mask, tail_out, 0);
    for (auto [s, id] : stores) {
      auto bytes = size_in_bytes(Plan.nodes[id].type);
      std::memcpy(static_cast<unsigned char*>(out[s]) + j * bytes, out_tail[s], rest * bytes);
    }
  }
};

// The row function of every region of a frozen plan, indexed by region.
template <const auto& Plan>
inline constexpr auto region_rows = []<int... R>(std::integer_sequence<int, R...>) {
  return std::array<row_fn, sizeof...(R)>{&region_kernel<Plan, R>::row...};
}
(std::make_integer_sequence<int, Plan.sizes.regions>{});

}  // namespace kiln::cpu::inline KILN_CPU_ISA
