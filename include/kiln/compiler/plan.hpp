// The plan: the canonical graph, its dispatch regions and buffer bindings. compile() runs every
// pass; the DSL calls it during constant evaluation and the graph API at run time.
#pragma once

#include <string>

#include "kiln/compiler/canonicalize.hpp"
#include "kiln/compiler/dispatch.hpp"
#include "kiln/ir/print.hpp"
#include "kiln/ir/verify.hpp"

namespace kiln::compiler {

struct options {
  region_options regions;
};

struct plan {
  ir::graph graph;              // canonical: verified, folded, deduplicated, no dead nodes
  std::vector<region> regions;  // one dispatch each, in execution order
  constexpr int dispatch_count() const { return static_cast<int>(regions.size()); }
};

constexpr plan compile(const ir::graph& g, options opt = {}) {
  ir::verify_or_throw(g);
  plan p{canonicalize(g), {}};
  ir::verify_or_throw(p.graph);
  p.regions = form_dispatch_regions(p.graph, opt.regions);
  return p;
}

// The region part of the textual form (the graph part is ir::print).
inline std::string print_regions(const plan& p) {
  std::string out;
  for (std::size_t r = 0; r < p.regions.size(); ++r) {
    const region& reg = p.regions[r];
    out += "region " + std::to_string(r) + " over " + ir::dims_text(reg.space) + ": nodes";
    for (auto n : reg.nodes) out += " %" + std::to_string(n);
    out += "; reads";
    for (auto a : reg.args) out += " arg" + std::to_string(a);
    out += "; writes";
    for (auto res : reg.results) out += " result" + std::to_string(res);
    out += "\n";
  }
  return out;
}

inline std::string print(const plan& p) { return ir::print(p.graph) + print_regions(p); }

}  // namespace kiln::compiler
