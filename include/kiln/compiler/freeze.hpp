// The frozen plan: the same plan in fixed-size arrays, a structural type, so it can be a constant
// expression and a template argument (the compile-time CPU kernels instantiate from it).
#pragma once

#include <array>
#include <span>

#include "kiln/compiler/plan.hpp"
#include "kiln/core/runtime_boundary.hpp"

namespace kiln::compiler {

struct plan_sizes {
  int inputs = 0, nodes = 0, symbols = 0, constraints = 0, outputs = 0;
  int regions = 0, region_nodes = 0, region_args = 0, region_results = 0;
  int transients = 0, region_reads = 0, region_writes = 0;
  int views = 0, region_views = 0, region_view_reads = 0, region_indices = 0;
  int tensors = 0, tensor_values = 0;
  int traces = 0;
};

constexpr plan_sizes sizes_of(const plan& p) {
  plan_sizes s{
      static_cast<int>(p.graph.inputs.size()),  static_cast<int>(p.graph.nodes.size()),
      static_cast<int>(p.graph.symbols.size()), static_cast<int>(p.graph.constraints.size()),
      static_cast<int>(p.graph.outputs.size()), static_cast<int>(p.regions.size())};
  s.transients = static_cast<int>(p.transients.size());
  s.views = static_cast<int>(p.views.size());
  if (!p.graph.positions.empty())  // (graph::positions: the runtime supplies them at the call)
    throw error(errc::unsupported, "fn", "positions of a run-time length are the graph API's");
  s.tensors = static_cast<int>(p.graph.tensors.size());
  for (const auto& t : p.graph.tensors) s.tensor_values += static_cast<int>(t.values.size());
  s.traces = static_cast<int>(p.graph.traces.size());
  for (const auto& r : p.regions) {
    s.region_nodes += static_cast<int>(r.nodes.size());
    s.region_args += static_cast<int>(r.args.size());
    s.region_results += static_cast<int>(r.results.size());
    s.region_reads += static_cast<int>(r.reads.size());
    s.region_writes += static_cast<int>(r.writes.size());
    s.region_views += static_cast<int>(r.views.size());
    s.region_view_reads += static_cast<int>(r.view_reads.size());
    s.region_indices += static_cast<int>(r.indices.size());
  }
  return s;
}

// A region as index ranges into the frozen plan's flat arrays.
struct frozen_region {
  shape space;
  int node_begin = 0, node_count = 0;
  int arg_begin = 0, arg_count = 0;
  int result_begin = 0, result_count = 0;
  std::int32_t root = -1;
  int read_begin = 0, read_count = 0;
  int write_begin = 0, write_count = 0;
  std::int32_t group = 0;
  int view_begin = 0, view_count = 0;
  int view_read_begin = 0, view_read_count = 0;
  int index_begin = 0, index_count = 0;
  std::int32_t contraction = -1;
};

// A tensor constant as a range of the frozen plan's tensor_values.
struct frozen_tensor {
  std::int32_t arg = 0;
  int begin = 0, count = 0;
};

// A frozen plan's arrays, whatever its sizes: what thaw reads.
struct frozen_parts {
  std::span<const ir::input_decl> inputs;
  std::span<const ir::node> nodes;
  std::span<const ir::symbol> symbols;
  std::span<const ir::constraint> constraints;
  std::span<const std::int32_t> outputs;
  std::span<const frozen_region> regions;
  std::span<const std::int32_t> region_nodes, region_args, region_results, transients, region_reads,
      region_writes, views, view_bases, region_views, region_view_reads, region_indices;
  std::span<const frozen_tensor> tensors;
  std::span<const scalar> tensor_values;
  std::span<const ir::trace_point> traces;
};

KILN_RUNTIME_API plan thaw(const frozen_parts& f);

template <plan_sizes S>
struct frozen_plan {
  static constexpr plan_sizes sizes = S;
  std::array<ir::input_decl, S.inputs> inputs;
  std::array<ir::node, S.nodes> nodes;
  std::array<ir::symbol, S.symbols> symbols;
  std::array<ir::constraint, S.constraints> constraints;
  std::array<std::int32_t, S.outputs> outputs;
  std::array<frozen_region, S.regions> regions;
  std::array<std::int32_t, S.region_nodes> region_nodes;
  std::array<std::int32_t, S.region_args> region_args;
  std::array<std::int32_t, S.region_results> region_results;
  std::array<std::int32_t, S.transients> transients;
  std::array<std::int32_t, S.region_reads> region_reads;
  std::array<std::int32_t, S.region_writes> region_writes;
  std::array<std::int32_t, S.views> views;
  std::array<std::int32_t, S.views> view_bases;
  std::array<std::int32_t, S.region_views> region_views;
  std::array<std::int32_t, S.region_view_reads> region_view_reads;
  std::array<std::int32_t, S.region_indices> region_indices;
  std::array<frozen_tensor, S.tensors> tensors;
  std::array<scalar, S.tensor_values> tensor_values;
  std::array<ir::trace_point, S.traces> traces;
  std::int64_t static_transient_bytes = 0;

  constexpr int dispatch_count() const {
    return S.regions == 0 ? 0 : regions[S.regions - 1].group + 1;
  }
  // The bytes of transient memory a call needs; -1 where they depend on run-time sizes.
  constexpr std::int64_t transient_bytes() const { return static_transient_bytes; }

  // Its arrays as spans: what the runtime's functions take, so that they are compiled once and
  // not once per function (parts_of below holds them as a constant).
  constexpr frozen_parts parts() const {
    return {inputs,         nodes,      symbols,       constraints,
            outputs,        regions,    region_nodes,  region_args,
            region_results, transients, region_reads,  region_writes,
            views,          view_bases, region_views,  region_view_reads,
            region_indices, tensors,    tensor_values, traces};
  }
  // Back to the vector form (for printing, comparison, and anything written against `plan`).
  plan thaw() const { return compiler::thaw(parts()); }
};

// A frozen plan's parts as a constant of the program: a call passes its address, where building
// the twenty spans would be code in every file.
template <const auto& Frozen>
inline constexpr frozen_parts parts_of = Frozen.parts();

template <plan_sizes S>
constexpr frozen_plan<S> freeze(const plan& p) {
  frozen_plan<S> f{};
  auto copy = [](const auto& from, auto& to) {
    for (std::size_t i = 0; i < from.size(); ++i) to[i] = from[i];
  };
  copy(p.graph.inputs, f.inputs);
  copy(p.graph.nodes, f.nodes);
  copy(p.graph.symbols, f.symbols);
  copy(p.graph.constraints, f.constraints);
  copy(p.graph.outputs, f.outputs);
  copy(p.transients, f.transients);
  copy(p.views, f.views);
  for (std::size_t t = 0, at = 0; t < p.graph.tensors.size(); ++t) {
    const auto& values = p.graph.tensors[t].values;
    f.tensors[t] = {p.graph.tensors[t].arg, static_cast<int>(at), static_cast<int>(values.size())};
    for (const scalar& v : values) f.tensor_values[at++] = v;
  }
  copy(p.view_bases, f.view_bases);
  copy(p.graph.traces, f.traces);
  f.static_transient_bytes = p.transient_bytes();
  int nodes = 0, args = 0, results = 0, reads = 0, writes = 0, views = 0, view_reads = 0,
      indices = 0;
  for (std::size_t i = 0; i < p.regions.size(); ++i) {
    const region& r = p.regions[i];
    f.regions[i] = {r.space,
                    nodes,
                    static_cast<int>(r.nodes.size()),
                    args,
                    static_cast<int>(r.args.size()),
                    results,
                    static_cast<int>(r.results.size()),
                    r.root,
                    reads,
                    static_cast<int>(r.reads.size()),
                    writes,
                    static_cast<int>(r.writes.size()),
                    r.group,
                    views,
                    static_cast<int>(r.views.size()),
                    view_reads,
                    static_cast<int>(r.view_reads.size()),
                    indices,
                    static_cast<int>(r.indices.size()),
                    r.contraction};
    for (auto v : r.nodes) f.region_nodes[nodes++] = v;
    for (auto v : r.args) f.region_args[args++] = v;
    for (auto v : r.results) f.region_results[results++] = v;
    for (auto v : r.reads) f.region_reads[reads++] = v;
    for (auto v : r.writes) f.region_writes[writes++] = v;
    for (auto v : r.views) f.region_views[views++] = v;
    for (auto v : r.view_reads) f.region_view_reads[view_reads++] = v;
    for (auto v : r.indices) f.region_indices[indices++] = v;
  }
  return f;
}

#if KILN_RUNTIME_BODY
KILN_RUNTIME_API plan thaw(const frozen_parts& f) {
  plan p;
  p.graph.inputs.assign(f.inputs.begin(), f.inputs.end());
  p.graph.nodes.assign(f.nodes.begin(), f.nodes.end());
  p.graph.symbols.assign(f.symbols.begin(), f.symbols.end());
  p.graph.constraints.assign(f.constraints.begin(), f.constraints.end());
  p.graph.outputs.assign(f.outputs.begin(), f.outputs.end());
  for (const frozen_tensor& t : f.tensors)
    p.graph.tensors.push_back(
        {t.arg, std::vector<scalar>(f.tensor_values.begin() + t.begin,
                                    f.tensor_values.begin() + t.begin + t.count)});
  p.graph.traces.assign(f.traces.begin(), f.traces.end());
  p.transients.assign(f.transients.begin(), f.transients.end());
  p.views.assign(f.views.begin(), f.views.end());
  p.view_bases.assign(f.view_bases.begin(), f.view_bases.end());
  auto range = [](std::span<const std::int32_t> all, int begin, int count) {
    return std::vector<std::int32_t>(all.begin() + begin, all.begin() + begin + count);
  };
  for (const frozen_region& fr : f.regions) {
    region r;
    r.space = fr.space;
    r.nodes = range(f.region_nodes, fr.node_begin, fr.node_count);
    r.args = range(f.region_args, fr.arg_begin, fr.arg_count);
    r.results = range(f.region_results, fr.result_begin, fr.result_count);
    r.root = fr.root;
    r.contraction = fr.contraction;
    r.group = fr.group;
    r.reads = range(f.region_reads, fr.read_begin, fr.read_count);
    r.writes = range(f.region_writes, fr.write_begin, fr.write_count);
    r.views = range(f.region_views, fr.view_begin, fr.view_count);
    r.view_reads = range(f.region_view_reads, fr.view_read_begin, fr.view_read_count);
    r.indices = range(f.region_indices, fr.index_begin, fr.index_count);
    p.regions.push_back(std::move(r));
  }
  return p;
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::compiler
