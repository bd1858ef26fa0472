// kiln::onnx::model: an imported model as one object to call, its graphs compiled and, where the
// model is cut, the cut nodes computed on the host between them at each call.
#include <functional>
#include <map>

#include "cut_model.hpp"

namespace kiln::onnx {

struct model::state {
  std::vector<executable> executables;
  std::vector<int> executable_of;  // per graph, its executable (-1: it computes nothing)
  std::vector<std::vector<dtype>> result_types;  // per executable
  std::vector<std::string> inputs, outputs;
  std::vector<signature_buffer> input_types;
  std::shared_ptr<const continuation> rest;  // (its graphs moved into the executables)
};

namespace {

using onnx_import::host_tensor;
using onnx_import::slot;

[[noreturn]] void fail(errc code, const std::string& message) {
  throw error(code, "onnx::model", message);
}

// A call's tensor on the host, row-major.
host_tensor host_copy(const tensor_ref& t, const std::string& name) {
  if (!t.ref.data && t.ref.memory)
    fail(errc::invalid_argument, "'" + name + "' is a device buffer; a node computed on the host " +
                                     "at the call reads it, so give it in host memory");
  host_tensor h{t.type, t.ref.dims, {}};
  h.bytes.resize(static_cast<std::size_t>(t.ref.dims.element_count() * size_in_bytes(t.type)));
  runtime::pack(t.ref, h.bytes.data(), size_in_bytes(t.type));
  return h;
}

tensor_ref ref_of(const tensor_data& t) {
  return {static_cast<const void*>(t.bytes.data()), t.type, t.dims};
}

// Runs exe on args, its results allocated for their extents.
std::vector<tensor_data> run_allocating(const executable& exe, const std::vector<dtype>& types,
                                        std::span<const tensor_ref> args, const device& d) {
  std::vector<shape> dims;
  for (const tensor_ref& a : args) dims.push_back(a.ref.dims);
  const std::vector<shape> result_dims = exe.result_dims(dims);
  std::vector<tensor_data> results(result_dims.size());
  std::vector<tensor_ref> refs;
  for (std::size_t r = 0; r < results.size(); ++r) {
    results[r] = {types[r], result_dims[r], {}};
    results[r].bytes.resize(
        static_cast<std::size_t>(result_dims[r].element_count() * size_in_bytes(types[r])));
    refs.emplace_back(static_cast<void*>(results[r].bytes.data()), types[r], result_dims[r]);
  }
  exe.run(args, refs, d);
  return results;
}

// Host step h on the tensors the call has so far: its results, checked against what the graphs
// after it were built for.
std::vector<host_tensor> run_step(const host_step& h,
                                  const std::function<host_tensor(const std::string&)>& find) {
  std::vector<slot> inputs(h.inputs.size());
  std::vector<slot*> pointers;
  for (std::size_t i = 0; i < h.inputs.size(); ++i) {
    if (!h.inputs[i].empty())
      inputs[i].known = find(h.inputs[i]);
    else
      inputs[i].known = h.known_inputs[i];
    pointers.push_back(inputs[i].known ? &inputs[i] : nullptr);
  }
  const onnx_import::lowering* lower = onnx_import::find_lowering(h.node.op_type());
  std::vector<slot> out;
  try {
    out = onnx_import::fold(h.node, h.index, h.opset, *lower, pointers);
  } catch (const error& e) {
    throw error(e.code(), "onnx::model", std::string("at the call: ") + e.what());
  }
  std::vector<host_tensor> results(h.outputs.size());
  for (std::size_t o = 0; o < h.outputs.size(); ++o) {
    if (h.outputs[o].empty()) continue;
    const std::string who = "node " + std::to_string(h.index) + " (" + h.node.op_type() +
                            ") output '" + h.outputs[o] + "'";
    if (o >= out.size() || !out[o].known) fail(errc::invalid_graph, who + " was not computed");
    const host_tensor& t = *out[o].known;
    bool fits = t.type == h.types[o] && t.dims.rank == h.dims[o].rank;
    for (int a = 0; fits && a < t.dims.rank; ++a)
      fits = h.dims[o].dims[a] == dyn || h.dims[o].dims[a] == t.dims.dims[a];
    if (!fits)
      fail(errc::shape_mismatch, who + " is " + std::string(name(t.type)) + " " +
                                     to_string(t.dims) + ", the model was imported for " +
                                     std::string(name(h.types[o])) + " " + to_string(h.dims[o]));
    results[o] = t;
  }
  return results;
}

}  // namespace

model::model(imported m, compiler::options opt) {
  auto st = std::make_shared<state>();
  std::vector<graph*> graphs{&m.graph};
  if (m.rest)
    for (graph& g : m.rest->graphs) graphs.push_back(&g);
  for (graph* g : graphs) {
    if (g->output_names().empty()) {  // (all it reads goes to host steps)
      st->executable_of.push_back(-1);
      continue;
    }
    st->executable_of.push_back(static_cast<int>(st->executables.size()));
    st->executables.push_back(kiln::compile(std::move(*g), opt));
    std::vector<dtype> types;
    for (const signature_buffer& r : st->executables.back().signature().results)
      types.push_back(r.type);
    st->result_types.push_back(std::move(types));
  }
  if (st->executable_of[0] >= 0) load_variables(st->executables[0], m);
  if (m.rest) {
    m.rest->graphs.clear();
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
  if (!s.rest) return run_allocating(s.executables[0], s.result_types[0], args, d);
  const continuation& c = *s.rest;
  if (args.size() != c.inputs.size())
    fail(errc::invalid_argument, "the model takes " + std::to_string(c.inputs.size()) +
                                     " arguments, given " + std::to_string(args.size()));
  std::map<std::string, tensor_ref, std::less<>> given;
  for (std::size_t i = 0; i < args.size(); ++i) {
    // (Graphs check what they read; an input read by a host step alone is checked here.)
    bool fits = args[i].type == c.input_types[i] && args[i].ref.dims.rank == c.input_dims[i].rank;
    for (int a = 0; fits && a < c.input_dims[i].rank; ++a)
      fits = c.input_dims[i].dims[a] == dyn || c.input_dims[i].dims[a] == args[i].ref.dims.dims[a];
    if (!fits)
      fail(errc::shape_mismatch, "argument " + std::to_string(i) + " '" + c.inputs[i] + "' is " +
                                     std::string(name(args[i].type)) + " " +
                                     to_string(args[i].ref.dims) + ", the model takes " +
                                     std::string(name(c.input_types[i])) + " " +
                                     to_string(c.input_dims[i]));
    given.emplace(c.inputs[i], args[i]);
  }
  std::map<std::string, tensor_data, std::less<>> computed;
  auto ref_named = [&](const std::string& name) -> tensor_ref {
    if (auto it = computed.find(name); it != computed.end()) return ref_of(it->second);
    if (auto it = given.find(name); it != given.end()) return it->second;
    fail(errc::invalid_graph, "'" + name + "' is read before it is computed");
  };
  for (std::size_t k = 0; k < s.executable_of.size(); ++k) {
    if (const int e = s.executable_of[k]; e >= 0) {
      const executable& exe = s.executables[static_cast<std::size_t>(e)];
      std::vector<tensor_ref> refs;
      for (const std::string& name : exe.input_names()) refs.push_back(ref_named(name));
      std::vector<tensor_data> results =
          run_allocating(exe, s.result_types[static_cast<std::size_t>(e)], refs, d);
      for (std::size_t r = 0; r < results.size(); ++r)
        computed[exe.output_names()[r]] = std::move(results[r]);
    }
    if (k >= c.steps.size()) continue;
    const host_step& h = c.steps[k];
    std::vector<host_tensor> results =
        run_step(h, [&](const std::string& name) { return host_copy(ref_named(name), name); });
    for (std::size_t o = 0; o < results.size(); ++o)
      if (!h.outputs[o].empty())
        computed[h.outputs[o]] = {results[o].type, results[o].dims, std::move(results[o].bytes)};
  }
  std::vector<tensor_data> out;
  for (const std::string& name : s.outputs) {
    const host_tensor h = host_copy(ref_named(name), name);
    out.push_back({h.type, h.dims, h.bytes});
  }
  return out;
}

model load(const std::filesystem::path& path, const import_options& opt) {
  return model(import(path, opt));
}

}  // namespace kiln::onnx
