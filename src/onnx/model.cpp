// kiln::onnx::model: an imported model as one object to call, its graphs compiled and, where the
// model is cut, the cut nodes computed on the host between them at each call (host_steps.cpp).
#include <algorithm>
#include <map>

#include "cut_model.hpp"

namespace kiln::onnx {

struct model::state {
  std::vector<executable> executables;
  std::vector<compiled_graph> graphs;  // per graph that computes something, in order
  std::vector<int> graph_of;           // per graph of the model: its index in `graphs` (-1: none)
  std::vector<std::vector<model>> bodies;  // per host step: its bodies
  std::vector<std::string> inputs, outputs;
  std::vector<signature_buffer> input_types;
  std::shared_ptr<const continuation> rest;  // (its graphs moved into `graphs`)
};

using onnx_import::host_tensor;

model::model(imported m, compiler::options opt) {
  auto st = std::make_shared<state>();
  std::vector<graph*> graphs{&m.graph};
  if (m.rest)
    for (graph& g : m.rest->graphs) graphs.push_back(&g);
  for (graph* g : graphs) {
    if (m.rest && g->output_names().empty()) {  // (all it reads goes to host steps)
      st->graph_of.push_back(-1);
      continue;
    }
    st->graph_of.push_back(static_cast<int>(st->graphs.size()));
    st->graphs.push_back(compile_graph(std::move(*g), opt));
    st->executables.push_back(st->graphs.back().exe);
  }
  if (st->graph_of[0] >= 0) load_variables(st->executables[0], m);
  if (m.rest) {
    m.rest->graphs.clear();
    for (host_step& h : m.rest->steps) {
      st->bodies.emplace_back();
      for (std::size_t k = 0; k < h.bodies.size(); ++k) {
        imported body;
        body.graph = std::move(h.bodies[k]);
        body.rest = std::move(h.body_rests[k]);
        st->bodies.back().emplace_back(std::move(body), opt);
      }
      h.bodies.clear();
      h.body_rests.clear();
    }
    st->inputs = m.rest->inputs;
    st->outputs = m.rest->outputs;
    for (std::size_t i = 0; i < m.rest->inputs.size(); ++i) {
      const shape& d = m.rest->input_dims[i];
      signature_buffer b{m.rest->input_types[i], {}};
      for (int a = 0; a < d.rank; ++a) b.dims.push_back(d.dims[a] == dyn ? -1 : d.dims[a]);
      st->input_types.push_back(std::move(b));
    }
    st->rest = std::move(m.rest);
  } else {
    st->inputs = st->executables[0].input_names();
    st->outputs = st->executables[0].output_names();
    st->input_types = st->executables[0].signature().inputs;
  }
  st_ = std::move(st);
}

const std::vector<std::string>& model::input_names() const { return st_->inputs; }
const std::vector<signature_buffer>& model::inputs() const { return st_->input_types; }
const std::vector<std::string>& model::output_names() const { return st_->outputs; }
const std::vector<executable>& model::executables() const { return st_->executables; }

std::vector<tensor_data> model::run(std::span<const tensor_ref> args, const device& d) const {
  const state& s = *st_;
  if (!s.rest) return run_allocating(s.graphs[0], args, d);
  const continuation& c = *s.rest;
  if (args.size() != c.inputs.size())
    fail_at_call(errc::invalid_argument, "the model takes " + std::to_string(c.inputs.size()) +
                                             " arguments, given " + std::to_string(args.size()));
  std::map<std::string, tensor_ref, std::less<>> given;
  for (std::size_t i = 0; i < args.size(); ++i) {
    // (Graphs check what they read; an input read by a host step alone is checked here.)
    bool fits = args[i].type == c.input_types[i] && args[i].ref.dims.rank == c.input_dims[i].rank;
    for (int a = 0; fits && a < c.input_dims[i].rank; ++a)
      fits = c.input_dims[i].dims[a] == dyn || c.input_dims[i].dims[a] == args[i].ref.dims.dims[a];
    if (!fits)
      fail_at_call(errc::shape_mismatch, "argument " + std::to_string(i) + " '" + c.inputs[i] +
                                             "' is " + std::string(name(args[i].type)) + " " +
                                             to_string(args[i].ref.dims) + ", the model takes " +
                                             std::string(name(c.input_types[i])) + " " +
                                             to_string(c.input_dims[i]));
    given.emplace(c.inputs[i], args[i]);
  }
  std::map<std::string, tensor_data, std::less<>> computed;
  std::map<std::string, std::vector<tensor_data>, std::less<>>
      lists;  // sequences of run-time length
  auto ref_named = [&](const std::string& name) -> tensor_ref {
    if (auto it = computed.find(name); it != computed.end())
      return ref_of(it->second.bytes, it->second.type, it->second.dims);
    if (auto it = given.find(name); it != given.end()) return it->second;
    fail_at_call(errc::invalid_graph, "'" + name + "' is read before it is computed");
  };
  for (std::size_t k = 0; k < s.graph_of.size(); ++k) {
    if (const int e = s.graph_of[k]; e >= 0) {
      const compiled_graph& g = s.graphs[static_cast<std::size_t>(e)];
      std::vector<tensor_ref> refs;
      for (const std::string& name : g.exe.input_names()) refs.push_back(ref_named(name));
      std::vector<tensor_data> results = run_allocating(g, refs, d);
      for (std::size_t r = 0; r < results.size(); ++r)
        computed[g.exe.output_names()[r]] = std::move(results[r]);
    }
    if (k >= c.steps.size()) continue;
    const host_step& h = c.steps[k];
    std::vector<call_value> results = run_host_step(
        h, s.bodies[k], [&](const std::string& name) { return host_copy(ref_named(name), name); },
        [&](const std::string& name) -> const std::vector<tensor_data>& {
          auto it = lists.find(name);
          if (it == lists.end())
            fail_at_call(errc::invalid_graph, "'" + name + "' is read before it is computed");
          return it->second;
        },
        d);
    for (std::size_t o = 0; o < results.size() && o < h.outputs.size(); ++o) {
      if (h.outputs[o].empty()) continue;
      if (results[o].list) {
        lists[h.outputs[o]] = std::move(*results[o].list);
        continue;
      }
      host_tensor& t = results[o].tensor;
      computed[h.outputs[o]] = {t.type, t.dims, std::move(t.bytes)};
    }
  }
  std::vector<tensor_data> out;
  for (auto name = s.outputs.begin(); name != s.outputs.end(); ++name) {
    // A computed result is handed over where no later output names it again; the call's own
    // arguments (an input given back as an output) are copied.
    auto it = computed.find(*name);
    if (it != computed.end() && std::find(name + 1, s.outputs.end(), *name) == s.outputs.end()) {
      out.push_back(std::move(it->second));
      continue;
    }
    host_tensor h = host_copy(ref_named(*name), *name);
    out.push_back({h.type, h.dims, std::move(h.bytes)});
  }
  return out;
}

model load(const std::filesystem::path& path, const import_options& opt) {
  return model(import(path, opt));
}

}  // namespace kiln::onnx
