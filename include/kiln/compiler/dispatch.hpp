// Dispatch-region formation: groups the graph's results by iteration space; each region is one
// fused kernel that recomputes what it needs, so no elementwise intermediate is materialized.
#pragma once

#include <string>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::compiler {

struct region {
  shape space;                        // iteration space: the dims (static or symbols) it writes
  std::vector<std::int32_t> nodes;    // node ids it evaluates, in topological order
  std::vector<std::int32_t> args;     // function parameters it reads
  std::vector<std::int32_t> results;  // function results it writes
  constexpr int binding_count() const { return static_cast<int>(args.size() + results.size()); }
};

struct region_options {
  int max_bindings = 0;  // buffers one dispatch may bind; 0 means no limit
};

constexpr std::vector<region> form_dispatch_regions(const ir::graph& g, region_options opt = {}) {
  std::vector<region> regions;
  auto needs = [&](const region& r, std::vector<bool>& used) {
    for (auto res : r.results) used[g.outputs[res]] = true;
    for (std::size_t i = g.nodes.size(); i-- > 0;)
      if (used[i])
        for (int k = 0; k < g.nodes[i].arity(); ++k) used[g.nodes[i].operands[k]] = true;
  };
  auto finish = [&](region& r) {
    std::vector<bool> used(g.nodes.size(), false);
    needs(r, used);
    r.nodes.clear();
    r.args.clear();
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      if (!used[i]) continue;
      r.nodes.push_back(static_cast<std::int32_t>(i));
      if (g.nodes[i].kind == ir::op::input) r.args.push_back(g.nodes[i].arg);
    }
  };
  for (std::size_t res = 0; res < g.outputs.size(); ++res) {
    const shape& space = g.nodes[g.outputs[res]].dims;
    region* target = nullptr;
    for (auto& r : regions)
      if (r.space == space) target = &r;
    if (target && opt.max_bindings > 0) {
      region trial = *target;
      trial.results.push_back(static_cast<std::int32_t>(res));
      finish(trial);
      if (trial.binding_count() > opt.max_bindings) target = nullptr;  // start another region
    }
    if (!target) {
      regions.push_back(region{space, {}, {}, {}});
      target = &regions.back();
    }
    target->results.push_back(static_cast<std::int32_t>(res));
    finish(*target);
    if (opt.max_bindings > 0 && target->binding_count() > opt.max_bindings)
      throw error(errc::unsupported, "form_dispatch_regions",
                  "result " + kiln::detail::to_text(static_cast<std::int64_t>(res)) + " reads " +
                      kiln::detail::to_text(static_cast<std::int64_t>(target->args.size())) +
                      " parameters, more than the " + kiln::detail::to_text(opt.max_bindings - 1) +
                      " a dispatch can bind beside its output");
  }
  return regions;
}

}  // namespace kiln::compiler
