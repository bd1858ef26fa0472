// compile(): every pass, from a traced graph to its plan (verify, canonicalize, dispatch regions).
// The DSL calls it during constant evaluation and the graph API at run time.
#pragma once

#include "kiln/compiler/canonicalize.hpp"
#include "kiln/compiler/dispatch.hpp"
#include "kiln/compiler/plan.hpp"
#include "kiln/ir/verify.hpp"

namespace kiln::compiler {

struct options {
  region_options regions;
};

constexpr plan compile(const ir::graph& g, options opt = {}) {
  ir::verify_or_throw(g);
  plan p{canonicalize(g), {}, {}, {}, {}};
  ir::verify_or_throw(p.graph);
  p.regions = form_dispatch_regions(p.graph, p.transients, p.views, opt.regions);
  for (auto v : p.views) p.view_bases.push_back(base_slot(p.graph, p.transients, v));
  return p;
}

}  // namespace kiln::compiler
