// The cut nodes of a model at the call: a node computed on its inputs, now known, as a node is
// folded at import; a Loop's or Scan's body run once per step, its scan outputs stacked.
#include <cstring>

#include "cut_model.hpp"

namespace kiln::onnx {

using onnx_import::host_tensor;
using onnx_import::slot;

compiled_graph compile_graph(graph&& g, const compiler::options& opt) {
  compiled_graph c{kiln::compile(std::move(g), opt), {}};
  for (const signature_buffer& r : c.exe.signature().results) c.types.push_back(r.type);
  return c;
}

void fail_at_call(errc code, const std::string& message) {
  throw error(code, "onnx::model", message);
}

host_tensor host_copy(const tensor_ref& t, const std::string& name) {
  host_tensor h{t.type, t.ref.dims, {}};
  h.bytes.resize(static_cast<std::size_t>(t.ref.dims.element_count() * size_in_bytes(t.type)));
  if (!t.ref.data && t.ref.memory) {  // a device buffer (the graphs before have finished with it)
    if (t.ref.strided)
      fail_at_call(errc::unsupported, "'" + name +
                                          "' is a strided device buffer, which a node computed " +
                                          "on the host at the call cannot read");
    t.ref.memory->read(h.bytes.data(), h.bytes.size(), static_cast<std::size_t>(t.ref.offset));
    return h;
  }
  runtime::pack(t.ref, h.bytes.data(), size_in_bytes(t.type));
  return h;
}

tensor_ref ref_of(const std::vector<unsigned char>& bytes, dtype t, const shape& dims) {
  return {static_cast<const void*>(bytes.data()), t, dims};
}

std::vector<tensor_data> run_allocating(const compiled_graph& c, std::span<const tensor_ref> args,
                                        const device& d) {
  std::vector<shape> dims;
  for (const tensor_ref& a : args) dims.push_back(a.ref.dims);
  const std::vector<shape> result_dims = c.exe.result_dims(dims);
  std::vector<tensor_data> results(result_dims.size());
  std::vector<tensor_ref> refs;
  for (std::size_t r = 0; r < results.size(); ++r) {
    results[r] = {c.types[r], result_dims[r], {}};
    results[r].bytes.resize(
        static_cast<std::size_t>(result_dims[r].element_count() * size_in_bytes(c.types[r])));
    refs.emplace_back(static_cast<void*>(results[r].bytes.data()), c.types[r], result_dims[r]);
  }
  c.exe.run(args, refs, d);
  return results;
}

namespace {

// The cut node itself on its inputs, now known (as a node is folded at import): tensors, or
// sequences of them (lists).
std::vector<call_value> run_node(const host_step& h, std::vector<slot>& inputs) {
  std::vector<slot*> pointers;
  for (slot& s : inputs) pointers.push_back(s.known || s.sequence ? &s : nullptr);
  const onnx_import::lowering* lower = onnx_import::find_lowering(h.node.op_type());
  std::vector<slot> out = onnx_import::fold(h.node, h.index, h.opset, *lower, pointers);
  std::vector<call_value> results;
  for (const slot& s : out) {
    results.emplace_back();
    if (s.known) results.back().tensor = *s.known;
    if (!s.sequence) continue;
    results.back().list.emplace();
    for (const slot& item : *s.sequence)
      if (item.known)
        results.back().list->push_back({item.known->type, item.known->dims, item.known->bytes});
  }
  return results;
}

bool truth(const tensor_data& t) {
  return !t.bytes.empty() &&
         std::any_of(t.bytes.begin(), t.bytes.end(), [](unsigned char b) { return b != 0; });
}

// An attribute of one value per scan input or output, 0 for each where absent.
std::vector<std::int64_t> per_value(const ::onnx::NodeProto& node, const char* name,
                                    std::size_t count) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return {a.ints().begin(), a.ints().end()};
  return std::vector<std::int64_t>(count, 0);
}

// The element counts before and after `axis` of dims.
std::pair<std::int64_t, std::int64_t> around(const shape& dims, int axis) {
  std::int64_t outer = 1, inner = 1;
  for (int a = 0; a < axis; ++a) outer *= dims.dims[a];
  for (int a = axis + 1; a < dims.rank; ++a) inner *= dims.dims[a];
  return {outer, inner};
}

// Step `at` of x along `axis` (that axis dropped).
tensor_data step_of(const host_tensor& x, int axis, std::int64_t at) {
  const auto [outer, inner] = around(x.dims, axis);
  const auto size = static_cast<std::int64_t>(size_in_bytes(x.type));
  tensor_data row{
      x.type, {}, std::vector<unsigned char>(static_cast<std::size_t>(outer * inner * size))};
  row.dims.rank = x.dims.rank - 1;
  for (int a = 0, to = 0; a < x.dims.rank; ++a)
    if (a != axis) row.dims.dims[to++] = x.dims.dims[a];
  for (std::int64_t o = 0; o < outer; ++o)
    std::memcpy(row.bytes.data() + o * inner * size,
                x.bytes.data() + (o * x.dims.dims[axis] + at) * inner * size,
                static_cast<std::size_t>(inner * size));
  return row;
}

// Output o of host step h: per-step rows stacked along a new axis `axis` (negative: from the
// end), in order or reversed; of no steps, the extents the model was imported for with its
// unknown sizes 0.
host_tensor stack(const host_step& h, const std::vector<tensor_data>& rows, std::int64_t axis,
                  bool reverse, std::size_t o) {
  if (rows.empty()) {
    host_tensor none{h.types[o], h.dims[o], {}};
    for (int a = 0; a < none.dims.rank; ++a)
      none.dims.dims[a] = std::max<std::int64_t>(none.dims.dims[a], 0);
    return none;
  }
  const shape& row = rows[0].dims;
  for (std::size_t t = 1; t < rows.size(); ++t)
    if (rows[t].dims != row)
      fail_at_call(errc::shape_mismatch,
                   "node " + std::to_string(h.index) + " (" + h.node.op_type() + ") output '" +
                       h.outputs[o] + "': step " + std::to_string(t) + " gives " +
                       to_string(rows[t].dims) + ", step 0 " + to_string(row));
  const int at = static_cast<int>(axis < 0 ? axis + row.rank + 1 : axis);
  host_tensor all{rows[0].type, {}, {}};
  all.dims.rank = row.rank + 1;
  for (int a = 0, from = 0; a < all.dims.rank; ++a)
    all.dims.dims[a] = a == at ? static_cast<std::int64_t>(rows.size()) : row.dims[from++];
  const auto [outer, inner] = around(all.dims, at);
  const auto size = static_cast<std::int64_t>(size_in_bytes(all.type));
  const auto n = static_cast<std::int64_t>(rows.size());
  all.bytes.resize(static_cast<std::size_t>(outer * n * inner * size));
  for (std::int64_t t = 0; t < n; ++t) {
    const tensor_data& r = rows[static_cast<std::size_t>(reverse ? n - 1 - t : t)];
    for (std::int64_t k = 0; k < outer; ++k)
      std::memcpy(all.bytes.data() + (k * n + t) * inner * size, r.bytes.data() + k * inner * size,
                  static_cast<std::size_t>(inner * size));
  }
  return all;
}

// Body k's arguments for one step: `first` (the step's own), then what it reads around the node
// (its share of the step's inputs after the node's).
std::vector<tensor_ref> body_args(const host_step& h, const std::vector<slot>& inputs,
                                  const std::vector<const tensor_data*>& first, std::size_t k = 0) {
  std::vector<tensor_ref> args;
  for (const tensor_data* v : first) args.push_back(ref_of(v->bytes, v->type, v->dims));
  std::size_t from = static_cast<std::size_t>(h.node.input_size());
  for (std::size_t b = 0; b < k; ++b) from += h.captured[b];
  for (std::size_t i = from; i < from + h.captured[k]; ++i)
    args.push_back(ref_of(inputs[i].known->bytes, inputs[i].known->type, inputs[i].known->dims));
  return args;
}

tensor_data data_of(const host_tensor& t) { return {t.type, t.dims, t.bytes}; }

// A Loop: its body run while the trip count (input 0) and the condition (input 1, then the
// body's first result) allow; the carried values' last values (a carried list with what each step
// appended) and the scan outputs stacked.
std::vector<call_value> run_loop(const host_step& h, const std::vector<slot>& inputs,
                                 const model& body, const device& d) {
  std::int64_t trips = -1;
  if (inputs[0].known) {
    const std::vector<std::int64_t> m = inputs[0].known->ints();
    if (m.size() != 1) fail_at_call(errc::shape_mismatch, "a Loop's trip count is not a scalar");
    trips = std::max<std::int64_t>(m[0], 0);
  }
  bool go = !inputs[1].known || truth(data_of(*inputs[1].known));
  const std::size_t carried = static_cast<std::size_t>(h.node.input_size()) - 2;
  std::vector<call_value> state(carried);
  for (std::size_t k = 0; k < carried; ++k) {
    const slot& v = inputs[2 + k];
    if (h.appends[k] < 0) {
      state[k].tensor = *v.known;
      continue;
    }
    state[k].list.emplace();  // (absent: the empty sequence it starts as)
    if (v.sequence)
      for (const slot& item : *v.sequence) state[k].list->push_back(data_of(*item.known));
  }
  std::size_t tensors = 0;  // carried values that are tensors
  for (int a : h.appends) tensors += a < 0;
  const std::size_t scans = h.outputs.size() - carried;
  std::vector<std::vector<tensor_data>> rows(scans);
  for (std::int64_t i = 0; go && (trips < 0 || i < trips); ++i) {
    tensor_data iteration{dtype::i64, shape{}, std::vector<unsigned char>(8)},
        condition{dtype::boolean, shape{}, {1}};
    std::memcpy(iteration.bytes.data(), &i, 8);
    std::vector<tensor_data> now;
    for (std::size_t k = 0; k < carried; ++k)
      if (h.appends[k] < 0) now.push_back(data_of(state[k].tensor));
    std::vector<const tensor_data*> first{&iteration, &condition};
    for (const tensor_data& v : now) first.push_back(&v);
    std::vector<tensor_data> out = body.run(body_args(h, inputs, first), d);
    go = truth(out[0]);
    // The results: the condition, the carried tensors, the scan outputs, then the appends.
    std::size_t next = 1, appended = 1 + tensors + scans;
    for (std::size_t k = 0; k < carried; ++k) {
      if (h.appends[k] < 0) {
        tensor_data& v = out[next++];
        state[k].tensor = {v.type, v.dims, std::move(v.bytes)};
        continue;
      }
      for (int j = 0; j < h.appends[k]; ++j) state[k].list->push_back(std::move(out[appended++]));
    }
    for (std::size_t k = 0; k < scans; ++k) rows[k].push_back(std::move(out[next++]));
  }
  for (std::size_t k = 0; k < scans; ++k)
    state.push_back({stack(h, rows[k], 0, false, carried + k), std::nullopt});
  return state;
}

// An If: the branch its condition takes, run.
std::vector<host_tensor> run_if(const host_step& h, const std::vector<slot>& inputs,
                                const std::vector<model>& branches, const device& d) {
  const std::size_t taken = truth(data_of(*inputs[0].known)) ? 0 : 1;
  std::vector<host_tensor> results;
  for (tensor_data& v : branches[taken].run(body_args(h, inputs, {}, taken), d))
    results.push_back({v.type, v.dims, std::move(v.bytes)});
  return results;
}

// A Scan (opset 9 on): its body run over each step of the scan inputs (forward or reversed), the
// states' last values and the scan outputs stacked along their axes.
std::vector<host_tensor> run_scan(const host_step& h, const std::vector<slot>& inputs,
                                  const model& body, const device& d) {
  std::int64_t m = 0;
  for (const auto& a : h.node.attribute())
    if (a.name() == "num_scan_inputs") m = a.i();
  const auto scanned = static_cast<std::size_t>(m);
  const std::size_t states = static_cast<std::size_t>(h.node.input_size()) - scanned;
  const std::size_t scans = h.outputs.size() - states;
  const auto in_axes = per_value(h.node, "scan_input_axes", scanned);
  const auto in_reverse = per_value(h.node, "scan_input_directions", scanned);
  const auto out_axes = per_value(h.node, "scan_output_axes", scans);
  const auto out_reverse = per_value(h.node, "scan_output_directions", scans);
  std::vector<tensor_data> state;
  for (std::size_t k = 0; k < states; ++k) state.push_back(data_of(*inputs[k].known));
  std::int64_t steps = -1;
  std::vector<int> axes;
  for (std::size_t j = 0; j < scanned; ++j) {
    const shape& x = inputs[states + j].known->dims;
    axes.push_back(static_cast<int>(in_axes[j] < 0 ? in_axes[j] + x.rank : in_axes[j]));
    if (steps >= 0 && x.dims[axes.back()] != steps)
      fail_at_call(errc::shape_mismatch,
                   "node " + std::to_string(h.index) + " (Scan): scan inputs of " + "lengths " +
                       std::to_string(steps) + " and " + std::to_string(x.dims[axes.back()]));
    steps = x.dims[axes.back()];
  }
  std::vector<std::vector<tensor_data>> rows(scans);
  for (std::int64_t t = 0; t < steps; ++t) {
    std::vector<tensor_data> slices;
    for (std::size_t j = 0; j < scanned; ++j)
      slices.push_back(
          step_of(*inputs[states + j].known, axes[j], in_reverse[j] ? steps - 1 - t : t));
    std::vector<const tensor_data*> first;
    for (const tensor_data& v : state) first.push_back(&v);
    for (const tensor_data& v : slices) first.push_back(&v);
    std::vector<tensor_data> out = body.run(body_args(h, inputs, first), d);
    for (std::size_t k = 0; k < states; ++k) state[k] = std::move(out[k]);
    for (std::size_t k = 0; k < scans; ++k) rows[k].push_back(std::move(out[states + k]));
  }
  std::vector<host_tensor> results;
  for (tensor_data& v : state) results.push_back({v.type, v.dims, std::move(v.bytes)});
  for (std::size_t k = 0; k < scans; ++k)
    results.push_back(stack(h, rows[k], out_axes[k], out_reverse[k] != 0, states + k));
  return results;
}

}  // namespace

std::vector<call_value> run_host_step(
    const host_step& h, const std::vector<model>& bodies,
    const std::function<host_tensor(const std::string&)>& find,
    const std::function<const std::vector<tensor_data>&(const std::string&)>& find_list,
    const device& d) {
  std::vector<slot> inputs(h.inputs.size());
  for (std::size_t i = 0; i < h.inputs.size(); ++i) {
    if (h.list_inputs[i]) {  // a list: a sequence of known tensors, as folding reads one
      inputs[i].sequence.emplace();
      for (const tensor_data& t : find_list(h.inputs[i]))
        inputs[i].sequence->emplace_back().known = host_tensor{t.type, t.dims, t.bytes};
      continue;
    }
    inputs[i].known = h.inputs[i].empty() ? h.known_inputs[i] : find(h.inputs[i]);
  }
  std::vector<call_value> results;
  auto tensors = [&](std::vector<host_tensor> v) {
    for (host_tensor& t : v) results.push_back({std::move(t), std::nullopt});
  };
  try {
    const std::string& op = h.node.op_type();
    if (bodies.empty())
      results = run_node(h, inputs);
    else if (op == "If")
      tensors(run_if(h, inputs, bodies, d));
    else if (op == "Scan")
      tensors(run_scan(h, inputs, bodies[0], d));
    else
      results = run_loop(h, inputs, bodies[0], d);
  } catch (const error& e) {
    if (e.op() == "onnx::model") throw;
    throw error(e.code(), "onnx::model", std::string("at the call: ") + e.what());
  }
  for (std::size_t o = 0; o < h.outputs.size(); ++o) {
    if (h.outputs[o].empty()) continue;
    const std::string who = "node " + std::to_string(h.index) + " (" + h.node.op_type() +
                            ") output '" + h.outputs[o] + "'";
    if (o >= results.size() || results[o].list.has_value() != (h.list_outputs[o] != 0))
      fail_at_call(errc::invalid_graph, who + " was not computed");
    auto check = [&](dtype type, const shape& dims) {
      bool fits = type == h.types[o] && dims.rank == h.dims[o].rank;
      for (int a = 0; fits && a < dims.rank; ++a)
        fits = h.dims[o].dims[a] == dyn || h.dims[o].dims[a] == dims.dims[a];
      if (!fits)
        fail_at_call(errc::shape_mismatch, who + " is " + std::string(name(type)) + " " +
                                               to_string(dims) + ", the model was imported for " +
                                               std::string(name(h.types[o])) + " " +
                                               to_string(h.dims[o]));
    };
    if (results[o].list)
      for (const tensor_data& t : *results[o].list) check(t.type, t.dims);
    else
      check(results[o].tensor.type, results[o].tensor.dims);
  }
  return results;
}

}  // namespace kiln::onnx
