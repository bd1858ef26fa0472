// A model cut where a node's result size depends on values known only at the call (NonZero,
// Unique, Compress, NonMaxSuppression of computed values): its graphs in order, the cut nodes
// between them, and how the importer builds them (values of an earlier graph carried into the
// current one by name). Internal to kiln::onnx.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kiln/onnx.hpp"
#include "node_context.hpp"

namespace kiln::onnx {

// A cut node, computed at the call on the host (its lowering run on inputs known by then, as a
// node is folded at import), between graph k and graph k + 1.
struct host_step {
  ::onnx::NodeProto node;
  int index = 0;  // among the model's nodes (for errors)
  std::int64_t opset = 0;
  // Per input (the node's, then those each body reads around it): the name the call finds it
  // under, or its value where known at import; both empty for an absent optional input.
  std::vector<std::string> inputs;
  std::vector<onnx_import::known_tensor> known_inputs;
  std::vector<char> list_inputs;  // per input: a sequence of run-time length (a list, by name)
  // Per output: its name ("" where the model does not read it), and the element type and extents
  // the graphs after it were built for (kiln::dyn where its values decide).
  std::vector<std::string> outputs;
  std::vector<dtype> types;
  std::vector<shape> dims;
  std::vector<char> list_outputs;  // per output: a list (types and dims: its tensors')
  // A Loop's or Scan's body, run once per step at the call, or an If's two branches, one run
  // (lower_at_call); how many inputs after the node's each reads.
  std::vector<graph> bodies;
  std::vector<std::shared_ptr<continuation>> body_rests;  // per body: where it is cut itself
  std::vector<std::size_t> captured;
  std::vector<int> appends;  // a Loop's: per carried value, its list's appends a step (or -1)
};

struct continuation {
  std::vector<graph> graphs;     // graph k + 1 runs after steps[k] (imported::graph is graph 0)
  std::vector<host_step> steps;  // the model's cut nodes, in order
  // The model's inputs as the calls give them (parameters of graph 0), and its outputs, each
  // read by name from what the graphs and steps computed.
  std::vector<std::string> inputs, outputs;
  std::vector<dtype> input_types;
  std::vector<shape> input_dims;
};

// A call's refusal, as kiln::onnx::model's (host_steps.cpp).
[[noreturn]] void fail_at_call(errc code, const std::string& message);

// A compiled graph of a cut model (or a body run per step) with its results' element types, what
// a call allocates (host_steps.cpp).
struct compiled_graph {
  executable exe;
  std::vector<dtype> types;
};
compiled_graph compile_graph(graph&& g, const compiler::options& opt);
// Runs c on args, its results allocated for their extents.
std::vector<tensor_data> run_allocating(const compiled_graph& c, std::span<const tensor_ref> args,
                                        const device& d);
// A call's tensor on the host, row-major (a device buffer read back).
onnx_import::host_tensor host_copy(const tensor_ref& t, const std::string& name);
tensor_ref ref_of(const std::vector<unsigned char>& bytes, dtype t, const shape& dims);
// A host step's result: a tensor, or a list of them (a sequence of run-time length).
struct call_value {
  onnx_import::host_tensor tensor;
  std::optional<std::vector<tensor_data>> list;
};
// Host step h on the values the call has so far (found by name; its bodies compiled, each a
// model of its own): its results, checked against what the graphs after it were built for.
std::vector<call_value> run_host_step(
    const host_step& h, const std::vector<model>& bodies,
    const std::function<onnx_import::host_tensor(const std::string&)>& find,
    const std::function<const std::vector<tensor_data>&(const std::string&)>& find_list,
    const device& d);

}  // namespace kiln::onnx

namespace kiln::onnx_import {

// Builds the parts of a model while its nodes are lowered: the graph nodes lower onto now, and
// each earlier graph's values that a later node reads (scope::find brings them over): an output
// of the graph that computed it, an input of the current one, both under the value's name.
class model_cutter {
 public:
  explicit model_cutter(graph& first) : first_(first) {}

  graph& current() { return later_.empty() ? first_ : later_.back(); }
  int current_part() const { return static_cast<int>(later_.size()); }
  graph& part(int k) { return k == 0 ? first_ : later_[static_cast<std::size_t>(k - 1)]; }
  bool cut() const { return !later_.empty(); }

  // A model input (a parameter of graph 0): given by the call under its name.
  void declare_input(const std::string& name, dtype t, const shape& dims);
  // Makes s, found under `name`, a value of the current graph.
  void bring(slot& s, const std::string& name);
  // Cuts the model at node `index` of the top-level graph: its inputs (brought over already) are
  // outputs of the current graph or known; a new graph starts whose inputs are its outputs, of
  // the types and extents `results` says (kiln::dyn where its values decide, one run-time size
  // for every output's count_axis). Returns its outputs' slots.
  // A Loop's, Scan's or If's bodies (and the values they read around them) go with it.
  std::vector<slot> cut_at(const ::onnx::NodeProto& node, int index, std::int64_t opset,
                           const std::vector<slot*>& inputs,
                           const std::vector<call_sized_result>& results,
                           body_at_call* stepped = nullptr);
  // Where the model is cut: model output `name` (a tensor of slot s, whose value graph k holds)
  // read by name from the graph that computed it, or from what the call gives or a host step
  // computes; returns the graph that holds its value.
  graph& output(slot& s, const std::string& name, int k);
  // The parts after graph 0 (null where the model was not cut).
  std::shared_ptr<onnx::continuation> finish();

 private:
  void carry(slot& s, const std::string& name, int from);
  // The current graph's size for graph `from`'s run-time size e, where one was carried (else null).
  const graph::extent* carried_size(int from, graph::extent e) const;
  // A run-time size of graph `from` as one of the current graph (where no carried value has it,
  // an input `name` whose length it is).
  graph::extent carry_size(graph::extent e, int from, const std::string& name);
  void output_of(int part, const std::string& name, graph::value v);

  graph& first_;
  std::deque<graph> later_;  // (a deque: references to graphs stay valid as parts are added)
  onnx::continuation parts_;
  std::set<std::string> given_;                    // model inputs and host-step outputs
  std::vector<std::set<std::string>> outputs_{1};  // per graph, the names it outputs
  // The current graph's run-time size for each earlier graph's (that graph, its size) carried.
  std::vector<std::tuple<int, graph::extent, graph::extent>> sizes_;
};

}  // namespace kiln::onnx_import
