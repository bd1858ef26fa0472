// kiln::onnx::import: an ONNX model read with ONNX's own library (protobuf classes, checker,
// version converter, shape inference), its nodes lowered in order onto a kiln::graph, nodes whose
// inputs are all known computed at import on kiln's CPU path.
#include "kiln/onnx.hpp"

#include <onnx/checker.h>

#include <cctype>
#include <climits>
#include <fstream>
#include <map>
#include <unordered_map>

#include "cut_model.hpp"
#include "kiln/runtime/files.hpp"
#include "node_context.hpp"

namespace kiln::onnx_import {

const lowering* find_lowering(std::string_view op_type) {
  static const lowering_table table = [] {
    lowering_table t;
    add_elementwise_lowerings(t);
    add_tensor_lowerings(t);
    add_composite_lowerings(t);
    add_recurrent_lowerings(t);
    add_sampling_lowerings(t);
    add_spectral_lowerings(t);
    add_random_lowerings(t);
    add_training_lowerings(t);
    add_sequence_lowerings(t);
    add_control_flow_lowerings(t);
    add_ngram_lowerings(t);
    add_data_sized_lowerings(t);
    return t;
  }();
  auto it = table.find(op_type);
  return it == table.end() ? nullptr : &it->second;
}

bool foldable(std::string_view op_type) {
  // The sequence makers keep their items as they are (folding computes tensors, not sequences);
  // control flow lowers subgraphs, which read the scope around them.
  return op_type != "RandomNormal" && op_type != "RandomUniform" && op_type != "RandomNormalLike" &&
         op_type != "RandomUniformLike" && op_type != "Multinomial" && op_type != "Bernoulli" &&
         op_type != "SequenceConstruct" && op_type != "SplitToSequence" && op_type != "If" &&
         op_type != "Loop" && op_type != "Scan" && op_type != "SequenceMap" &&
         op_type != "Optional" && op_type != "OptionalGetElement" &&
         op_type != "OptionalHasElement";
}

std::vector<slot> fold(const ::onnx::NodeProto& node, int index, std::int64_t opset,
                       const lowering& lower, const std::vector<slot*>& inputs) {
  graph scratch;
  std::vector<slot> copies;
  copies.reserve(inputs.size());
  std::vector<slot*> pointers;
  for (slot* s : inputs) {
    copies.emplace_back();
    if (s) {  // (a sequence only at the call: a list of known tensors)
      copies.back().known = s->known;
      copies.back().sequence = s->sequence;
    }
    pointers.push_back(s ? &copies.back() : nullptr);
  }
  node_context c(scratch, node, index, opset, pointers);
  lower(c);
  std::vector<slot> out = std::move(c.produced());
  // What the lowering left as graph values (a sequence's tensors too), computed now.
  std::vector<slot*> computed;
  for (slot& o : out) {
    if (o.value && !o.known) computed.push_back(&o);
    if (o.sequence)
      for (slot& item : *o.sequence)
        if (item.value && !item.known) computed.push_back(&item);
  }
  if (computed.empty()) return out;
  std::vector<host_tensor> results;
  std::vector<tensor_ref> refs;
  for (const slot* o : computed) {
    scratch.output("o" + std::to_string(results.size()), *o->value);
    host_tensor t;
    t.type = scratch.type_of(*o->value);
    t.dims = scratch.dims_of(*o->value);
    t.bytes.resize(static_cast<std::size_t>(
        checked_element_count(t.dims, size_in_bytes(t.type), c.who(), "the folded result") *
        size_in_bytes(t.type)));
    results.push_back(std::move(t));
  }
  for (auto& t : results) refs.emplace_back(static_cast<void*>(t.bytes.data()), t.type, t.dims);
  executable e = kiln::compile(std::move(scratch));
  e.run({}, refs, device::cpu());
  for (std::size_t k = 0; k < computed.size(); ++k) {
    computed[k]->value.reset();
    computed[k]->known = std::move(results[k]);
  }
  return out;
}

}  // namespace kiln::onnx_import

namespace kiln::onnx {

namespace {

using namespace kiln::onnx_import;
using ::onnx::ModelProto;

// The default domain's opsets kiln reads, each op as its spec for that opset defines it (ONNX's
// version converter is not used: it crashes on some damaged models, and its adapters need shape
// inference, which crashes on others). Newer ones are beyond this build's ONNX.
constexpr std::int64_t oldest_opset = 1;
constexpr std::int64_t newest_opset = 17;

[[noreturn]] void fail(errc code, const std::string& message) {
  throw error(code, "onnx import", message);
}

ModelProto parse(std::span<const std::uint8_t> bytes) {
  if (bytes.size() > static_cast<std::size_t>(INT_MAX))
    fail(errc::unsupported, "the model is " + std::to_string(bytes.size()) +
                                " bytes; protobuf reads at most 2 GiB (keep the weights as "
                                "external data)");
  ModelProto m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    fail(errc::invalid_argument, "the bytes are not an ONNX model (protobuf could not parse them)");
  if (!m.has_graph()) fail(errc::invalid_argument, "the model has no graph");
  return m;
}

std::int64_t default_opset(const ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

// Reads a tensor's external data (location, offset, length) from inside `folder` into raw_data.
void read_external(::onnx::TensorProto& t, const std::filesystem::path& folder) {
  if (t.data_location() != ::onnx::TensorProto::EXTERNAL) return;
  std::string location;
  std::int64_t offset = 0, length = -1;
  for (const auto& e : t.external_data()) {
    try {
      if (e.key() == "location") location = e.value();
      if (e.key() == "offset") offset = std::stoll(e.value());
      if (e.key() == "length") length = std::stoll(e.value());
    } catch (const std::exception&) {
      fail(errc::invalid_argument, "tensor '" + t.name() + "': external data " + e.key() + " is '" +
                                       e.value() + "', not a number");
    }
  }
  const std::string who = "tensor '" + t.name() + "'";
  if (folder.empty())
    fail(errc::invalid_argument,
         who + " keeps its data in '" + location + "': give import_options::external_data_folder");
  const std::filesystem::path rel(location);
  if (location.empty() || rel.is_absolute())
    fail(errc::invalid_argument,
         who + ": external data location '" + location + "' is not a relative path");
  for (const auto& part : rel)
    if (part == "..")
      fail(errc::invalid_argument,
           who + ": external data location '" + location + "' leaves the model's folder");
  const std::filesystem::path file = folder / rel;
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(errc::invalid_argument, who + ": cannot open external data file " + file.string());
  in.seekg(0, std::ios::end);
  const std::int64_t size = in.tellg();
  if (offset < 0 || offset > size || (length >= 0 && length > size - offset))
    fail(errc::invalid_argument, who + ": external data [" + std::to_string(offset) + ", +" +
                                     std::to_string(length) + ") lies outside " + file.string() +
                                     " (" + std::to_string(size) + " bytes)");
  if (length < 0) length = size - offset;
  std::string data(static_cast<std::size_t>(length), '\0');
  in.seekg(offset);
  in.read(data.data(), length);
  t.set_raw_data(std::move(data));
  t.clear_external_data();
  t.set_data_location(::onnx::TensorProto::DEFAULT);
}

void read_external(ModelProto& m, const std::filesystem::path& folder) {
  for (auto& t : *m.mutable_graph()->mutable_initializer()) read_external(t, folder);
  for (auto& n : *m.mutable_graph()->mutable_node())
    for (auto& a : *n.mutable_attribute())
      if (a.has_t()) read_external(*a.mutable_t(), folder);
}

// ONNX's checker, its exception as a kiln::error. ONNX's shape inference is not run: kiln's graph
// computes every type and extent itself (and the model's declared outputs are checked against
// them), and ONNX 1.12's inference stops the process on some damaged models (a Conv stride of 0:
// SIGFPE in convPoolShapeInference).
void prepare(ModelProto& m, const import_options& opt, model_info& info) {
  info.opset = default_opset(m);
  // A model of the training domain's optimizers alone: no op of the default domain to read.
  if (info.opset == 0 && std::any_of(m.opset_import().begin(), m.opset_import().end(),
                                     [](const auto& o) { return o.domain() == preview_training; }))
    info.opset = newest_opset;
  if (info.opset == 0)
    fail(
        errc::unsupported,
        "the model imports no opset of the default domain (kiln reads ai.onnx "
        "ops only; its domains: " +
            [&] {
              std::string d;
              for (const auto& o : m.opset_import()) d += " " + o.domain();
              return d;
            }() +
            ")");
  if (opt.check) try {
      ::onnx::checker::check_model(m);
    } catch (const std::exception& e) {
      fail(errc::invalid_argument, std::string("ONNX's checker refuses the model: ") + e.what());
    }
  if (info.opset > newest_opset)
    fail(errc::unsupported, "opset " + std::to_string(info.opset) + " is newer than kiln reads (" +
                                std::to_string(oldest_opset) + " to " +
                                std::to_string(newest_opset) + ")");
}

// A value_info's tensor type: kiln's dtype and its dims (symbolic ones bound by the options or
// left dyn). Nullopt where the value_info says nothing of its shape.
struct declared {
  dtype type;
  std::optional<shape> dims;
  std::array<std::string, max_rank> names{};  // the named dimensions left to the call
};

declared declared_tensor(const std::string& name, const ::onnx::TypeProto& type,
                         const import_options& opt, model_info& info, bool is_input) {
  const std::string who = "graph value '" + name + "'";
  if (type.has_sequence_type() || type.has_optional_type())
    fail(errc::unsupported, who + " is a " + (type.has_sequence_type() ? "sequence" : "optional") +
                                " where " + "a tensor is expected (an input needs its " +
                                "import_options::sequence_lengths or optionals_present)");
  if (!type.has_tensor_type())
    fail(errc::unsupported, who + " is not a tensor (maps are not kiln's)");
  const auto& tt = type.tensor_type();
  auto t = dtype_from_onnx(tt.elem_type());
  if (!t)
    fail(errc::unsupported, who + " has element type " + onnx_type_name(tt.elem_type()) +
                                ", which kiln does not have");
  declared d{*t, std::nullopt};
  if (auto given = opt.input_dims.find(name); is_input && given != opt.input_dims.end()) {
    // Extents given for the input replace the declared ones, which they must agree with.
    const shape& s = given->second;
    bool agree = !tt.has_shape() || tt.shape().dim_size() == s.rank;
    for (int i = 0; agree && tt.has_shape() && i < s.rank; ++i)
      agree = s.dims[i] >= 0 &&
              (!tt.shape().dim(i).has_dim_value() || tt.shape().dim(i).dim_value() == s.dims[i]);
    if (!agree)
      fail(errc::shape_mismatch, "import_options::input_dims['" + name + "'] is " + to_string(s) +
                                     ", which the model's " + who + " does not allow");
    d.dims = s;
    return d;
  }
  if (!tt.has_shape()) return d;
  if (tt.shape().dim_size() > max_rank)
    fail(errc::unsupported,
         who + " has rank " + std::to_string(tt.shape().dim_size()) + ", above kiln::max_rank");
  shape s;
  s.rank = tt.shape().dim_size();
  for (int i = 0; i < s.rank; ++i) {
    const auto& dim = tt.shape().dim(i);
    s.dims[i] = dyn;
    if (dim.has_dim_value()) {
      if (dim.dim_value() < 0)
        fail(errc::invalid_argument, who + " has size " + std::to_string(dim.dim_value()) +
                                         " at axis " + std::to_string(i));
      s.dims[i] = dim.dim_value();
    } else if (dim.has_dim_param()) {
      auto bound = opt.dims.find(dim.dim_param());
      if (bound != opt.dims.end()) {
        if (bound->second < 0)
          fail(errc::invalid_argument, "import_options::dims binds '" + dim.dim_param() + "' to " +
                                           std::to_string(bound->second));
        s.dims[i] = bound->second;
      } else if (is_input) {
        d.names[static_cast<std::size_t>(i)] = dim.dim_param();
        if (std::find(info.symbolic_dims.begin(), info.symbolic_dims.end(), dim.dim_param()) ==
            info.symbolic_dims.end())
          info.symbolic_dims.push_back(dim.dim_param());
      }
    }
  }
  d.dims = s;
  return d;
}

declared declared_type(const ::onnx::ValueInfoProto& v, const import_options& opt, model_info& info,
                       bool is_input) {
  return declared_tensor(v.name(), v.type(), opt, info, is_input);
}

// Lowers gp's nodes in order onto g: each node's inputs found by name in `values` (or the
// scopes around it), its outputs added to `values`. `where` prefixes the names of the nodes of a
// subgraph in errors; `folded` counts the nodes computed at import. The model's own graph
// (values.cutter set) is cut at a node sized by values known only at the call, and its nodes
// then go onto the cutter's current graph.
void lower_nodes(graph& onto, const ::onnx::GraphProto& gp, scope& values, std::int64_t opset,
                 std::int64_t* folded, const std::string& prefix) {
  for (int k = 0; k < gp.node_size(); ++k) {
    const auto& node = gp.node(k);
    graph& g = values.cutter ? values.cutter->current() : onto;
    auto where = [&] {
      return prefix + "node " + std::to_string(k) +
             (node.name().empty() ? "" : " '" + node.name() + "'") + " (" + node.op_type() + ")";
    };
    const bool training = node.domain() == preview_training;
    if (!node.domain().empty() && node.domain() != "ai.onnx" && !training)
      fail(errc::unsupported, where() + ": domain '" + node.domain() + "' is not kiln's");
    // Gradient reads the nodes before it, not only its inputs.
    const bool gradient = training && node.op_type() == "Gradient";
    const lowering* lower =
        gradient ? nullptr
                 : find_lowering(training ? std::string(preview_training) + "." + node.op_type()
                                          : node.op_type());
    if (!lower && !gradient)
      fail(errc::unsupported, where() + ": kiln has no lowering for " + node.op_type() +
                                  " (opset " + std::to_string(opset) + ")");
    std::vector<slot*> inputs;
    bool all_known = node.input_size() > 0;
    for (const auto& name : node.input()) {
      if (name.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      slot* found = values.find(name);
      if (!found)
        fail(errc::invalid_argument, where() + ": input '" + name + "' is not computed before it");
      inputs.push_back(found);
      all_known = all_known && found->known.has_value();
    }
    const bool on_extents =
        std::any_of(inputs.begin(), inputs.end(), [](const slot* s) { return s && s->extents; });
    std::vector<slot> out;
    try {
      if (gradient) {
        node_context c(g, node, k, opset, inputs, &values, prefix);
        out = lower_gradient(c, gp, k, values);
      } else if (on_extents) {
        node_context c(g, node, k, opset, inputs, &values, prefix);
        lower_on_extents(c);
        out = std::move(c.produced());
      } else if (sized_by_call_values(node.op_type(), inputs)) {
        node_context c(g, node, k, opset, inputs, &values, prefix);
        // Inside a subgraph lowered inline: the node around it runs at the call instead, its
        // bodies apart (and cut there).
        if (!values.cutter)
          c.needs_call_values("its result's size depends on values known only at the call");
        out = values.cutter->cut_at(node, k, opset, inputs, call_sized_results(c));
      } else if (all_known && foldable(node.op_type())) {
        out = fold(node, k, opset, *lower, inputs);
      } else {
        try {
          node_context c(g, node, k, opset, inputs, &values, prefix);
          (*lower)(c);
          out = std::move(c.produced());
        } catch (const call_values_needed& needed) {
          // A Loop, Scan, If or SplitToSequence resolved at import meets a value known only at
          // the call: it runs then, where it can (else both refusals are the error).
          if (!values.cutter) throw;
          node_context c(g, node, k, opset, inputs, &values, prefix);
          body_at_call stepped;
          try {
            stepped = lower_at_call(c);
          } catch (const error& e) {
            throw error(needed.code(), needed.op(),
                        std::string(needed.what()).substr(needed.op().size() + 8) +
                            "; nor can it run at the call: " +
                            std::string(e.what()).substr(e.op().size() + 8));
          }
          out = values.cutter->cut_at(node, k, opset, inputs, stepped.results, &stepped);
        }
      }
    } catch (const error& e) {
      // A graph method's refusal, named after the node that called it.
      if (e.op() == "onnx import") throw;
      std::string what = e.what();
      if (what.rfind("kiln: ", 0) == 0) what.erase(0, 6);
      fail(e.code(), where() + ": " + what);
    }
    if (folded && !out.empty() &&
        std::all_of(out.begin(), out.end(), [](const slot& s) { return s.known || !s.value; }))
      ++*folded;
    for (int o = 0; o < node.output_size(); ++o) {
      if (node.output(o).empty()) continue;
      const auto u = static_cast<std::size_t>(o);
      if (u >= out.size() || (!out[u].value && !out[u].known && !out[u].sequence &&
                              !out[u].extents && !out[u].present && !out[u].list))
        fail(errc::unsupported, where() + ": output " + std::to_string(o) + " '" + node.output(o) +
                                    "' is not produced by kiln's lowering");
      out[u].part = values.cutter ? values.cutter->current_part() : 0;
      values.own[node.output(o)] = std::move(out[u]);
    }
  }
}

imported import_model(ModelProto m, const import_options& opt,
                      const std::filesystem::path& folder) {
  imported result;
  model_info& info = result.info;
  info.producer =
      m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version());
  read_external(m, folder);
  prepare(m, opt, info);
  const auto& gp = m.graph();
  graph& g = result.graph;
  // The executable is named after the model's graph (its characters outside a plain name as '_').
  std::string graph_name;
  for (char c : gp.name().substr(0, 63))
    graph_name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  g.set_name(kiln::detail::is_function_name(graph_name) ? graph_name : "onnx");
  model_cutter cutter(g);
  scope values;
  values.cutter = &cutter;

  // Each initializer's bytes leave the model as they become a known tensor, so that the weights
  // are held once (plus one tensor) while importing.
  for (auto& init : *m.mutable_graph()->mutable_initializer()) {
    host_tensor t = tensor_of(init, "initializer '" + init.name() + "'");
    std::unique_ptr<std::string>(init.release_raw_data());
    if (opt.variables.count(init.name())) {
      values.own[init.name()].value = g.variable(init.name(), t.type, t.dims);
      result.variable_values[init.name()] = {t.type, t.dims, std::move(t.bytes)};
    } else {
      values.own[init.name()].known = std::move(t);
    }
  }
  for (const auto& name : opt.variables)
    if (!result.variable_values.count(name))
      fail(errc::invalid_argument,
           "import_options::variables names '" + name + "', which is not an initializer");
  for (const auto& entry : opt.input_dims)  // (a sequence's tensors: 'NAME.0', ...)
    if (std::none_of(gp.input().begin(), gp.input().end(), [&](const auto& in) {
          return in.name() == entry.first || (opt.sequence_lengths.count(in.name()) &&
                                              entry.first.rfind(in.name() + ".", 0) == 0);
        }))
      fail(errc::invalid_argument, "import_options::input_dims names '" + entry.first +
                                       "', which is not an input of the model");
  for (const auto& [name, t] : opt.input_values) {
    auto it = std::find_if(gp.input().begin(), gp.input().end(),
                           [&](const auto& in) { return in.name() == name; });
    if (it == gp.input().end())
      fail(errc::invalid_argument,
           "import_options::input_values names '" + name + "', which is not an input of the model");
    declared d = declared_type(*it, opt, info, false);
    if (d.type != t.type)
      fail(errc::dtype_mismatch, "import_options::input_values['" + name + "'] is " +
                                     std::string(kiln::name(t.type)) + ", the input " +
                                     std::string(kiln::name(d.type)));
    checked_element_count(t.dims, size_in_bytes(t.type), "onnx import",
                          "input_values['" + name + "']");
    if (static_cast<std::size_t>(t.dims.element_count() * size_in_bytes(t.type)) != t.bytes.size())
      fail(errc::shape_mismatch, "import_options::input_values['" + name + "'] holds " +
                                     std::to_string(t.bytes.size()) + " bytes for dims " +
                                     to_string(t.dims));
    values.own[name].known = host_tensor{t.type, t.dims, t.bytes};
  }
  // A dimension named in several inputs is one run-time size: the first input's, which the
  // others share (checked at the call), so that their values meet without a broadcast.
  std::map<std::string, graph::extent> named_sizes;
  // A graph input as the calls give it (import_options::sequence_lengths, optionals_present).
  // A sequence's tensors share no named size: each may have extents of its own.
  auto input_of = [&](auto& self, const std::string& name, const std::string& parameter,
                      const ::onnx::TypeProto& type, bool item = false) -> slot {
    slot s;
    if (type.has_optional_type()) {
      auto given = opt.optionals_present.find(name);
      if (given == opt.optionals_present.end())
        fail(errc::unsupported, "graph input '" + name +
                                    "' is an optional: import_options::optionals_present says "
                                    "whether the calls give its value");
      if (given->second) s = self(self, name, parameter, type.optional_type().elem_type(), item);
      s.present = given->second;
      return s;
    }
    if (type.has_sequence_type()) {
      auto length = opt.sequence_lengths.find(name);
      if (length == opt.sequence_lengths.end() || length->second < 0)
        fail(errc::unsupported, "graph input '" + name +
                                    "' is a sequence: import_options::sequence_lengths gives the "
                                    "number of tensors the calls give for it");
      s.sequence.emplace();
      for (std::int64_t k = 0; k < length->second; ++k)
        s.sequence->push_back(self(self, name, parameter + "." + std::to_string(k),
                                   type.sequence_type().elem_type(), true));
      return s;
    }
    declared d = declared_tensor(parameter, type, opt, info, true);
    if (!d.dims)
      fail(errc::unsupported,
           "graph input '" + parameter +
               "' declares no shape: import_options::input_dims gives its extents");
    if (item) d.names = {};
    std::vector<graph::extent> sizes;
    for (int i = 0; i < d.dims->rank; ++i) {
      auto named = named_sizes.find(d.names[static_cast<std::size_t>(i)]);
      sizes.push_back(named != named_sizes.end() && d.dims->dims[i] == dyn ? named->second
                                                                           : d.dims->dims[i]);
    }
    s.value = g.input(parameter, d.type, sizes);
    cutter.declare_input(parameter, d.type, *d.dims);
    for (int i = 0; i < d.dims->rank; ++i)
      if (!d.names[static_cast<std::size_t>(i)].empty() && d.dims->dims[i] == dyn)
        named_sizes.emplace(d.names[static_cast<std::size_t>(i)], g.extent_of(*s.value, i));
    return s;
  };
  for (const auto& in : gp.input()) {
    // An initializer listed as an input (IR < 4), or an input given its value.
    if (values.own.count(in.name())) continue;
    values.own[in.name()] = input_of(input_of, in.name(), in.name(), in.type());
  }
  std::vector<std::string> described;  // (the inputs options name as sequences or optionals)
  for (const auto& [name, length] : opt.sequence_lengths) described.push_back(name);
  for (const auto& [name, present] : opt.optionals_present) described.push_back(name);
  for (const auto& name : described)
    if (std::none_of(gp.input().begin(), gp.input().end(),
                     [&](const auto& in) { return in.name() == name; }))
      fail(errc::invalid_argument, "import_options names '" + name +
                                       "' as a sequence or optional, which is not an input of "
                                       "the model");

  info.nodes = gp.node_size();
  lower_nodes(g, gp, values, info.opset, &info.folded_nodes, "");

  // A graph output: a tensor is a result of its name, a sequence one per tensor ('NAME.0', ...),
  // an optional its element where present (import_options). Where the model is cut, each is read
  // by name from the graph (graph k, the slot's) or host step that computed it.
  auto output_of = [&](auto& self, const std::string& name, slot& s, const ::onnx::TypeProto& type,
                       int k) -> void {
    if (type.has_optional_type()) {
      if (s.present.value_or(true)) self(self, name, s, type.optional_type().elem_type(), k);
      return;
    }
    if (s.list)
      fail(errc::unsupported,
           "graph output '" + name + "' is a sequence whose length is known " +
               "only at the call (kiln's results are tensors: " + "ConcatFromSequence gives one)");
    if (type.has_sequence_type() != s.sequence.has_value())
      fail(errc::dtype_mismatch, "graph output '" + name + "' is a " +
                                     (s.sequence ? "sequence" : "tensor") + " in kiln, not in " +
                                     "the model");
    if (s.sequence) {
      for (std::size_t i = 0; i < s.sequence->size(); ++i)
        self(self, name + "." + std::to_string(i), (*s.sequence)[i],
             type.sequence_type().elem_type(), k);
      return;
    }
    if (!s.present.value_or(true))
      fail(errc::invalid_argument, "graph output '" + name + "' is an empty optional");
    graph& holder = cutter.cut() ? cutter.output(s, name, k) : g;
    if (!s.value) s.value = value_of(g, s);
    // What the model declares for its outputs is checked against what kiln computed: a
    // difference is an error here, never a silently different result.
    declared d = declared_tensor(name, type, opt, info, false);
    if (d.type != holder.type_of(*s.value))
      fail(errc::dtype_mismatch,
           "graph output '" + name + "' is " + std::string(kiln::name(holder.type_of(*s.value))) +
               " in kiln, " + std::string(kiln::name(d.type)) + " in the model");
    shape got = holder.dims_of(*s.value);
    if (d.dims) {
      bool same = d.dims->rank == got.rank;
      for (int i = 0; same && i < got.rank; ++i)
        same = d.dims->dims[i] == dyn || got.dims[i] == dyn || d.dims->dims[i] == got.dims[i];
      if (!same)
        fail(errc::shape_mismatch, "graph output '" + name + "' has dims " + to_string(got) +
                                       " in kiln, " + to_string(*d.dims) + " in the model");
    }
    if (cutter.cut()) return;
    g.output(name, *s.value);
    result.outputs[name] = *s.value;
  };
  for (const auto& o : gp.output()) {
    auto found = values.own.find(o.name());  // (not brought into the last graph: read where it is)
    if (found == values.own.end())
      fail(errc::invalid_argument, "graph output '" + o.name() + "' is not computed by any node");
    output_of(output_of, o.name(), found->second, o.type(), found->second.part);
  }
  result.rest = cutter.finish();
  return result;
}

}  // namespace

}  // namespace kiln::onnx

namespace kiln::onnx_import {

std::vector<slot> import_subgraph(graph& g, const ::onnx::GraphProto& body, scope* outer,
                                  std::int64_t opset, std::vector<slot> inputs,
                                  const std::string& prefix, model_cutter* cutter) {
  scope s;
  s.outer = outer;
  s.cutter = cutter;
  if (body.input_size() != static_cast<int>(inputs.size()))
    onnx::fail(errc::invalid_argument, prefix + "the graph takes " +
                                           std::to_string(body.input_size()) + " inputs, given " +
                                           std::to_string(inputs.size()));
  for (int i = 0; i < body.input_size(); ++i)
    s.own[body.input(i).name()] = std::move(inputs[static_cast<std::size_t>(i)]);
  for (const auto& init : body.initializer())
    s.own[init.name()].known = tensor_of(init, prefix + "initializer '" + init.name() + "'");
  onnx::lower_nodes(g, body, s, opset, nullptr, prefix);
  std::vector<slot> out;
  for (const auto& o : body.output()) {
    const slot* found = s.find(o.name());
    if (!found)
      onnx::fail(errc::invalid_argument,
                 prefix + "graph output '" + o.name() + "' is not computed by any node");
    out.push_back(*found);
  }
  return out;
}

}  // namespace kiln::onnx_import

namespace kiln::onnx {

tensor_data parse_tensor(std::span<const std::uint8_t> bytes) {
  ::onnx::TensorProto t;
  if (bytes.size() > static_cast<std::size_t>(INT_MAX) ||
      !t.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    fail(errc::invalid_argument, "the bytes are not an ONNX TensorProto");
  host_tensor h = tensor_of(t, "tensor '" + t.name() + "'");
  return {h.type, h.dims, std::move(h.bytes)};
}

tensor_data read_tensor(const std::filesystem::path& file) {
  return parse_tensor(runtime::read_file(file.string(), "onnx::read_tensor"));
}

imported import_bytes(std::span<const std::uint8_t> model, const import_options& opt) {
  return import_model(parse(model), opt, opt.external_data_folder);
}

imported import(const std::filesystem::path& model, const import_options& opt) {
  std::vector<std::uint8_t> bytes = runtime::read_file(model.string(), "onnx import");
  ModelProto m = parse(bytes);
  std::vector<std::uint8_t>().swap(bytes);  // the file is not held beside what it became
  const auto folder =
      opt.external_data_folder.empty() ? model.parent_path() : opt.external_data_folder;
  return import_model(std::move(m), opt, folder.empty() ? std::filesystem::path(".") : folder);
}

void load_variables(executable& exe, const imported& m) {
  for (const auto& [name, t] : m.variable_values)
    exe.variable(name).load_bytes(t.bytes.data(), t.bytes.size());
}

executable compile(imported&& m) {
  if (m.rest)
    fail(errc::unsupported,
         "the model is cut at node " + std::to_string(m.rest->steps[0].index) + " (" +
             m.rest->steps[0].node.op_type() +
             "), whose result size depends on values known only at the call: one executable "
             "cannot run it; kiln::onnx::load does (a kiln::onnx::model)");
  executable exe = kiln::compile(std::move(m.graph));
  load_variables(exe, m);
  return exe;
}

executable compile(const std::filesystem::path& model, const import_options& opt) {
  return compile(import(model, opt));
}

}  // namespace kiln::onnx
