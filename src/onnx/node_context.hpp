// What one ONNX node's lowering sees: its inputs (graph values, or tensors known at import),
// its attributes read per the ONNX spec, and where its outputs go. Internal to kiln::onnx.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/graph/graph.hpp"

namespace kiln::onnx {
struct continuation;
}

namespace kiln::onnx_import {

// A tensor whose elements are known at import: an initializer, a Constant node, a folded node.
struct host_tensor {
  dtype type = dtype::f32;
  shape dims;
  std::vector<unsigned char> bytes;  // row-major

  std::int64_t count() const;
  // The elements as integers or doubles (any numeric dtype).
  std::vector<std::int64_t> ints() const;
  std::vector<double> doubles() const;
};

// A known tensor as slots hold it: shared, not copied, by every slot that reads it (folding
// copies its inputs' slots) and by the graph constant made of it, so that a model's weights are
// held once while importing.
class known_tensor {
 public:
  known_tensor() = default;
  known_tensor(std::nullopt_t) {}
  known_tensor(host_tensor t) : p_(std::make_shared<const host_tensor>(std::move(t))) {}
  const host_tensor* operator->() const { return p_.get(); }
  const host_tensor& operator*() const { return *p_; }
  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  void reset() { p_.reset(); }
  // Its elements, kept alive by whoever holds them (a graph constant).
  shared_bytes bytes() const { return {p_, p_->bytes.data(), p_->bytes.size()}; }

 private:
  std::shared_ptr<const host_tensor> p_;
};

// Element types: ONNX's TensorProto_DataType to kiln's; nullopt where kiln has none.
std::optional<dtype> dtype_from_onnx(int onnx_type);
std::string onnx_type_name(int onnx_type);
// An initializer or attribute tensor (raw or typed fields; external data already read in).
host_tensor tensor_of(const ::onnx::TensorProto& t, const std::string& who);

struct slot;
// A sequence whose length is known only at the call: a list of tensors the call keeps on the host
// under the value's name (made by a Loop at the call that appends to it; read at the call by
// SequenceAt, SequenceLength and ConcatFromSequence).
struct call_list {
  dtype type = dtype::f32;
  shape dims;        // its tensors' extents (kiln::dyn where they differ)
  bool open = true;  // no tensor seen yet: the element type and extents come with the first
  // Inside a Loop's body at the call: the carried value (its position among the carried ones)
  // this list continues, and what one step appends to it.
  int carried = -1;
  std::vector<slot> appended;
  std::string held_as;  // the name the call keeps it under (outside a body)
};

// One ONNX value while importing: a graph value, a known tensor, or both (a known tensor once
// used by a graph op is materialized as a constant, once); or a sequence of such tensors, whose
// length and positions are known at import (sequences exist only while importing).
struct slot {
  std::optional<graph::value> value;
  known_tensor known;
  std::optional<std::vector<slot>> sequence;
  // An i64 shape whose sizes are not all known at import (Shape of a value with run-time sizes,
  // and what Gather, Concat, Mul... make of it: lower_extents.cpp): one element per extent, a
  // scalar where `scalar`.
  std::optional<std::vector<graph::extent>> extents;
  bool scalar = false;
  // An optional value: whether it holds its element (the tensor or sequence above); unset where
  // the value is not an optional (an element read where ONNX declares an optional is present).
  std::optional<bool> present;
  // Where the model is cut (cut_model.hpp): the graph that computed `value` (graph 0 otherwise).
  int part = 0;
  std::optional<call_list> list;
};

// A tensor slot's graph value, a known tensor made a constant of the graph where it has none.
graph::value value_of(graph& g, const slot& s);
// A known i64 tensor of `values` (row-major) and `dims`.
host_tensor i64_tensor(const std::vector<std::int64_t>& values, const shape& dims);

// The values a graph's nodes see while importing: its own, then those of the graphs around it (a
// subgraph reads its enclosing graphs' values by name).
class model_cutter;
struct scope {
  std::unordered_map<std::string, slot> own;
  scope* outer = nullptr;
  model_cutter* cutter = nullptr;  // the model's own scope: values of earlier graphs brought over
  // Around a body lowered onto a graph of its own: a value it reads from around it, made a
  // parameter of that graph (node_context::subgraph_apart).
  std::function<slot*(const std::string&)> capture;
  slot* find(const std::string& name);
};

// A refusal that cutting the model at the node lifts (a Loop whose trip count or condition is
// computed at run time, a Scan of a run-time length, an If whose branches' extents differ): outside
// a subgraph the importer runs the node at the call instead.
struct call_values_needed : error {
  using error::error;
};

// A subgraph (a Loop's body, an If's branch) lowered onto g in a scope of its own inside `outer`,
// its inputs bound to `inputs` in order: its outputs in order. `prefix` names it in errors
// (import.cpp).
std::vector<slot> import_subgraph(graph& g, const ::onnx::GraphProto& body, scope* outer,
                                  std::int64_t opset, std::vector<slot> inputs,
                                  const std::string& prefix, model_cutter* cutter = nullptr);

class node_context {
 public:
  // `where`: the scope the node is lowered in (null for a node folded on its own); `prefix`: the
  // subgraph it is in, for errors.
  node_context(graph& g, const ::onnx::NodeProto& node, int index, std::int64_t opset,
               std::vector<slot*> inputs, scope* where = nullptr, std::string prefix = {})
      : g(g),
        node_(node),
        index_(index),
        opset_(opset),
        inputs_(std::move(inputs)),
        scope_(where),
        prefix_(std::move(prefix)) {}

  graph& g;

  std::int64_t opset() const { return opset_; }
  const std::string& op() const { return node_.op_type(); }
  // "node 12 'Conv_12' (Conv)": how errors name the node.
  std::string who() const;
  [[noreturn]] void fail(errc code, const std::string& message) const;

  // Inputs: count (trailing optional ones included), presence (an empty name is absent).
  int inputs() const { return static_cast<int>(inputs_.size()); }
  bool has(int i) const { return i < inputs() && inputs_[static_cast<std::size_t>(i)] != nullptr; }
  graph::value in(int i);                 // as a graph value (a known tensor becomes a constant)
  const host_tensor* known(int i) const;  // the tensor when known at import, else null
  // An input that kiln needs at import (shapes, axes, pads): its elements as integers, naming the
  // input in the error where it is computed at run time.
  std::vector<std::int64_t> ints_input(int i, std::string_view what) const;
  // An input kiln needs at import whatever its type (a size that depends on its values).
  const host_tensor& known_input(int i, std::string_view what) const;
  double scalar_input(int i, std::string_view what) const;
  dtype type_of(int i) const;
  // An element type an attribute names (Cast's `to`, EyeLike's `dtype`): kiln's, or the refusal.
  dtype element_type(std::int64_t onnx_type) const;
  shape dims_of(int i) const;
  std::vector<graph::value> present_inputs();

  // Attributes, with the spec's default where absent.
  bool has_attr(std::string_view name) const { return attr(name) != nullptr; }
  std::int64_t attr_int(std::string_view name, std::int64_t otherwise) const;
  double attr_float(std::string_view name, double otherwise) const;
  std::string attr_string(std::string_view name, std::string_view otherwise) const;
  std::vector<std::int64_t> attr_ints(std::string_view name) const;
  std::vector<double> attr_floats(std::string_view name) const;
  const ::onnx::AttributeProto* attr(std::string_view name) const;
  // Refuses attributes the node sets that its lowering does not read (never silently ignored).
  void only_attrs(std::initializer_list<std::string_view> read) const;

  // An input as the importer holds it (a tensor, a sequence or an optional), or the refusal where
  // absent; read in place (its readers copy what they keep).
  const slot& input_slot(int i) const;
  // A sequence input's tensors, or the refusal where the input is a tensor.
  const std::vector<slot>& sequence_in(int i) const;

  int outputs() const { return node_.output_size(); }
  bool wants(int o) const { return o < outputs() && !node_.output(o).empty(); }
  void out(int o, graph::value v);
  void out_known(int o, host_tensor t);
  void out_sequence(int o, std::vector<slot> items);
  void out_slot(int o, slot s);  // a tensor as it is: a graph value, known, or both
  // An i64 shape (a scalar where `scalar`): known where every extent is static.
  void out_extents(int o, std::vector<graph::extent> e, bool scalar);
  // Input i as extents: its own, or a known i64 tensor of rank 0 or 1 (scalar: its rank is 0);
  // empty where it is neither.
  std::optional<std::vector<graph::extent>> extents_input(int i, bool* scalar = nullptr) const;

  // The node's graph attribute `attribute` lowered with its inputs bound to `inputs`
  // (import_subgraph in the node's scope); `label` says which run it is in errors ("iteration 3").
  std::vector<slot> subgraph(std::string_view attribute, std::vector<slot> inputs,
                             const std::string& label);
  // The node's graph attribute lowered onto `body`, graphs of its own (cut where a node needs
  // values known only at the call), its inputs bound to `inputs`: each value it reads from
  // around it (not known at import) becomes a parameter of body's first graph under its name,
  // listed in `captured` with its slot around.
  std::vector<slot> subgraph_apart(std::string_view attribute, model_cutter& body,
                                   std::vector<slot> inputs,
                                   std::vector<std::pair<std::string, slot*>>& captured);
  // The refusal a cut at this node lifts (call_values_needed).
  [[noreturn]] void needs_call_values(const std::string& message) const;
  // What the lowering produced, by output position.
  std::vector<slot>& produced() { return produced_; }

 private:
  slot& present_slot(int i) const;  // present, or the refusal
  slot& tensor_slot(int i) const;   // present and a tensor, or the refusal
  slot& produced_at(int o);         // output o's slot (made where it is not yet)

  const ::onnx::NodeProto& node_;
  int index_;
  std::int64_t opset_;
  std::vector<slot*> inputs_;
  scope* scope_;
  std::string prefix_;
  std::vector<slot> produced_;
};

// Attributes that several lowerings read (lower_tensors.cpp): ONNX's auto_pad, and a Conv's
// window (strides, pads, dilations, group, auto_pad; kernel_shape checked against the weight).
kiln::auto_pad auto_pad_of(const node_context& c);
ir::conv_window conv_window_of(node_context& c);
// An attribute of one value per scan input or output (a Scan's axes and directions), 0 for each
// where absent (lower_control_flow.cpp).
std::vector<std::int64_t> per_value(node_context& c, const char* name, std::size_t count);

// One lowering per op type; each reads what its opset defines.
using lowering = void (*)(node_context&);
using lowering_table = std::map<std::string, lowering, std::less<>>;
void add_elementwise_lowerings(lowering_table& table);   // lower_elementwise.cpp
void add_tensor_lowerings(lowering_table& table);        // lower_tensors.cpp
void add_composite_lowerings(lowering_table& table);     // lower_composites.cpp
void add_recurrent_lowerings(lowering_table& table);     // lower_recurrent.cpp
void add_sampling_lowerings(lowering_table& table);      // lower_sampling.cpp
void add_spectral_lowerings(lowering_table& table);      // lower_spectral.cpp
void add_random_lowerings(lowering_table& table);        // lower_random.cpp
void add_training_lowerings(lowering_table& table);      // lower_training.cpp
void add_sequence_lowerings(lowering_table& table);      // lower_sequences.cpp
void add_control_flow_lowerings(lowering_table& table);  // lower_control_flow.cpp
void add_ngram_lowerings(lowering_table& table);         // lower_ngrams.cpp
void add_data_sized_lowerings(lowering_table& table);    // lower_data_sized.cpp
// A node one of whose inputs is a shape with run-time sizes (lower_extents.cpp): Gather, Slice,
// Concat, Unsqueeze, Squeeze, Cast, Identity and arithmetic over such shapes, Reshape, Expand,
// Tile, ConstantOfShape and Range to one, Slice of data at its positions; any other op reads the
// sizes as numbers.
void lower_on_extents(node_context& c);
// MaxPool asked for its Indices output too (lower_sampling.cpp).
void lower_max_pool_with_indices(node_context& c, const ir::pool_window& w);
// ONNX's Gradient, node `at` of gp: the derivatives of its y with respect to its xs, from the
// nodes before it and their values in `values` (lower_gradient.cpp).
std::vector<slot> lower_gradient(node_context& c, const ::onnx::GraphProto& gp, int at,
                                 scope& values);
// Dropout in training mode, ratio in (0, 1) (lower_random.cpp).
void lower_training_dropout(node_context& c, double ratio);
// The one domain besides the default whose ops kiln reads (its optimizers, lower_training.cpp):
// their lowerings are found as "<domain>.<op>".
inline constexpr std::string_view preview_training = "ai.onnx.preview.training";
const lowering* find_lowering(std::string_view op_type);
// Runs a node whose inputs are all known on kiln's CPU path (at import, or at the call for a cut
// node); its outputs become known tensors.
std::vector<slot> fold(const ::onnx::NodeProto& node, int index, std::int64_t opset,
                       const lowering& lower, const std::vector<slot*>& inputs);
// Whether the node's result size depends on an input kiln knows only at the call, so that the
// model is cut there (NonZero, Unique, NonMaxSuppression of a computed value; Compress of a
// computed condition); then its outputs' types and extents (lower_data_sized.cpp).
bool sized_by_call_values(std::string_view op_type, const std::vector<slot*>& inputs);
struct call_sized_result {
  dtype type;
  shape dims;           // kiln::dyn where the values decide
  int count_axis = -1;  // the axis whose size the values decide (one size for all outputs)
  bool list = false;    // a sequence of run-time length (type and dims: its tensors')
};
std::vector<call_sized_result> call_sized_results(node_context& c);
// A node run at the call (a Loop, Scan or If: its bodies as graphs of their own, an If's two
// branches; a SplitToSequence: none), each body with parameters (a Loop's iteration number,
// condition and carried values; a Scan's states and one step of each scan input; then the values
// it reads around it, `captured`) and results (a Loop's condition first, then as the body gives
// them); and the node's results' types and extents (lower_at_call.cpp).
struct body_at_call {
  std::vector<graph> bodies;
  std::vector<std::shared_ptr<onnx::continuation>> rests;            // per body: where it is cut
  std::vector<std::vector<std::pair<std::string, slot*>>> captured;  // per body
  std::vector<call_sized_result> results;
  // A Loop's: per carried value, how many tensors one step appends to it where it is a list of
  // run-time length (its results after the others), else -1.
  std::vector<int> appends;
};
body_at_call lower_at_call(node_context& c);
// SplitToSequence of a run-time length or split: a list of run-time length (lower_sequences.cpp).
body_at_call split_to_sequence_at_call(node_context& c);
// Ops whose result depends only on their inputs' values, so that known inputs give a known
// result (everything but the random generators and the ops that make sequences).
bool foldable(std::string_view op_type);

}  // namespace kiln::onnx_import
