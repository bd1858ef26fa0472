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

// One row of a region: `count` elements. in[a] points at parameter a's first element for this
// row and advances by step[a] (1, or 0 for a broadcast parameter); out[r] at result r's.
using row_fn = void (*)(const void* const* in, const std::int64_t* step, void* const* out,
                        std::int64_t count);

template <const auto& Plan, int R>
struct region_kernel {
  static constexpr const compiler::frozen_region& reg = Plan.regions[R];
  static constexpr int size = reg.node_count;

  static constexpr std::int32_t node_at(int k) { return Plan.region_nodes[reg.node_begin + k]; }
  static constexpr int position_of(std::int32_t id) {
    for (int k = 0; k < size; ++k)
      if (node_at(k) == id) return k;
    return -1;
  }
  template <int K>
  using value_t = compute_t<Plan.nodes[node_at(K)].type>;
  template <std::size_t... K>
  static auto values_for(std::index_sequence<K...>) -> std::tuple<value_t<K>...>;
  using values = decltype(values_for(std::make_index_sequence<size>{}));

  template <int K, int I>
  static const auto& operand(const values& v) {
    return std::get<position_of(Plan.nodes[node_at(K)].operands[I])>(v);
  }

  template <int K, bool Contiguous>
  static value_t<K> compute(const values& v, const void* const* in, const std::int64_t* step,
                            std::int64_t j) {
    constexpr ir::node n = Plan.nodes[node_at(K)];
    using ir::op;
    if constexpr (n.kind == op::input) {
      auto* p = static_cast<const storage_t<n.type>*>(in[n.arg]);
      if constexpr (Contiguous)
        return load<n.type>(p + j);
      else
        return step[n.arg] ? load<n.type>(p + j) : splat<n.type>(p);
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

  // Evaluates every node of the region for lanes [j, j + lanes) and stores the results.
  template <bool Contiguous>
  static void step_at(const void* const* in, const std::int64_t* step, void* const* out,
                      std::int64_t j) {
    values v;
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      ((std::get<K>(v) = compute<K, Contiguous>(v, in, step, j)), ...);
    }
    (std::make_index_sequence<size>{});
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (store_result<Plan.region_results[reg.result_begin + I]>(v, out, j), ...);
    }
    (std::make_integer_sequence<int, reg.result_count>{});
  }

  template <std::int32_t Result>
  static void store_result(const values& v, void* const* out, std::int64_t j) {
    constexpr std::int32_t id = Plan.outputs[Result];
    constexpr dtype t = Plan.nodes[id].type;
    store<t>(std::get<position_of(id)>(v), static_cast<storage_t<t>*>(out[Result]) + j);
  }

  static void row(const void* const* in, const std::int64_t* step, void* const* out,
                  std::int64_t count) {
    constexpr auto n_in = Plan.sizes.inputs, n_out = Plan.sizes.outputs;
    bool contiguous = true;
    for (int k = 0; k < reg.arg_count; ++k)
      contiguous = contiguous && step[Plan.region_args[reg.arg_begin + k]] == 1;
    // Local copies of the pointer lists: the stores cannot alias them, so the loop keeps the
    // pointers in registers instead of reloading them after every store.
    const void* in_local[n_in > 0 ? n_in : 1] = {};
    void* out_local[n_out];
    for (int k = 0; k < reg.arg_count; ++k) {
      int a = Plan.region_args[reg.arg_begin + k];
      in_local[a] = in[a];
    }
    for (int k = 0; k < reg.result_count; ++k) {
      int r = Plan.region_results[reg.result_begin + k];
      out_local[r] = out[r];
    }
    std::int64_t j = 0;
    if (contiguous)
      for (; j + std::int64_t(lanes) <= count; j += lanes)
        step_at<true>(in_local, step, out_local, j);
    else
      for (; j + std::int64_t(lanes) <= count; j += lanes)
        step_at<false>(in_local, step, out_local, j);
    if (j == count) return;
    // Tail: copy the last elements into padded buffers and run one more full step there.
    std::int64_t rest = count - j;
    alignas(64) unsigned char in_tail[n_in > 0 ? n_in : 1][lanes * 8] = {};
    alignas(64) unsigned char out_tail[n_out][lanes * 8];
    const void* tail_in[n_in > 0 ? n_in : 1] = {};
    void* tail_out[n_out];
    for (int k = 0; k < reg.arg_count; ++k) {
      int a = Plan.region_args[reg.arg_begin + k];
      auto bytes = size_in_bytes(Plan.inputs[a].type);
      auto* src = static_cast<const unsigned char*>(in[a]);
      tail_in[a] = step[a] ? in_tail[a] : in[a];
      if (step[a]) std::memcpy(in_tail[a], src + j * bytes, rest * bytes);
    }
    for (int r = 0; r < n_out; ++r) tail_out[r] = out_tail[r];
    step_at<false>(tail_in, step, tail_out, 0);
    for (int k = 0; k < reg.result_count; ++k) {
      int r = Plan.region_results[reg.result_begin + k];
      auto bytes = size_in_bytes(Plan.nodes[Plan.outputs[r]].type);
      std::memcpy(static_cast<unsigned char*>(out[r]) + j * bytes, out_tail[r], rest * bytes);
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
