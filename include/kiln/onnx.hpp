// kiln::onnx: ONNX models (.onnx files or their bytes) imported as a kiln::graph, compiled by the
// same compiler as a hand-built graph. Not included by kiln.hpp; link kiln::onnx
// (find_package(kiln COMPONENTS onnx)). The protobuf side is compiled once into that library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kiln/executable.hpp"
#include "kiln/graph/graph.hpp"

namespace kiln::onnx {

// A tensor's element type, extents and row-major elements: what an ONNX TensorProto holds.
struct tensor_data {
  dtype type = dtype::f32;
  shape dims;
  std::vector<unsigned char> bytes;
};

struct import_options {
  // Sizes for the model's named (symbolic) dimensions, by dim_param: a bound dimension is a
  // static size of the graph. An unbound one stays a run-time size (kiln::dyn) of its input.
  std::map<std::string, std::int64_t, std::less<>> dims;
  // Extents of graph inputs by name, in place of the declared ones (where a dimension has no name
  // to bind, or none is declared); each declared static size must agree.
  std::map<std::string, shape, std::less<>> input_dims;
  // The folder that external tensor data is read from; empty: the model file's own folder (for a
  // model given as bytes, a model with external data then needs it).
  std::filesystem::path external_data_folder;
  // Graph inputs given their values at import: each becomes a tensor constant (no longer an input
  // of the graph), so that what depends on it only (a shape, axes, pads) is computed then.
  std::map<std::string, tensor_data, std::less<>> input_values;
  // Graph inputs that are sequences or optionals, as the calls will give them (kiln keeps both as
  // what they hold, known at import). A sequence input of n tensors (sequence_lengths) is n
  // parameters 'NAME.0' ... 'NAME.n-1' of the element type and extents the model declares for
  // its tensors; an optional input (optionals_present) is, where present, its element under its
  // own name (a sequence's length then also from sequence_lengths), and where absent nothing.
  // Graph outputs likewise: a sequence is one result per tensor, 'NAME.0', ...; an absent
  // optional is no result.
  std::map<std::string, std::int64_t, std::less<>> sequence_lengths;
  std::map<std::string, bool, std::less<>> optionals_present;
  // ONNX's checker on the model before import (its verdict, when it refuses, is a kiln::error).
  bool check = true;
  // Initializers that become variables of the graph (graph::variable) instead of tensor
  // constants: read like inputs, kept by the executable, loaded, saved or shared through
  // executable::variable(name) (weights to update or swap without compiling again). compile()
  // and kiln-import-onnx's modules start them at the initializer's value; import() returns the
  // values in imported::variable_values. Their values are not known at import, so a node that
  // needs one then (a Reshape's shape) is refused naming it.
  std::set<std::string, std::less<>> variables;
};

// What import() learned about the model beside its graph.
struct model_info {
  std::int64_t opset = 0;         // the default domain's opset the model was written for
  std::string producer;           // producer_name and producer_version
  std::int64_t nodes = 0;         // nodes of the model's graph
  std::int64_t folded_nodes = 0;  // nodes computed at import (Shape, its arithmetic, constants)
  std::vector<std::string> symbolic_dims;  // named dimensions left as run-time sizes
};

struct continuation;  // (what follows a cut: its graphs and the nodes computed at the call)

struct imported {
  // The model's graph; where the model is cut (rest), its first part.
  kiln::graph graph;
  model_info info;
  // The model's outputs by name (already outputs of the graph; where the model is not cut): what
  // a program computes further from them becomes another output.
  std::map<std::string, graph::value, std::less<>> outputs;
  // Each import_options::variables initializer's value, by name (for executable::variable).
  std::map<std::string, tensor_data, std::less<>> variable_values;
  // Set where a node needs values known only at the call (NonZero, Unique, NonMaxSuppression of
  // a computed value, Compress by a computed condition; a Loop of a run-time trip count or
  // condition, a Scan of a run-time length, an If whose branches differ in extents; sequences of
  // run-time length): the model is then cut after the graph computing that node's inputs, the
  // node computed on the host at the call (a body run per step), and a graph taking its results
  // (their sizes run-time sizes) goes on. Such a model runs through kiln::onnx::model; compile()
  // and kiln-import-onnx refuse it.
  std::shared_ptr<continuation> rest;
};

// Sets each of m's variables (import_options::variables) in exe, compiled from m's graph, to its
// initializer's value.
void load_variables(executable& exe, const imported& m);

// The model's graph: inputs and outputs keep the model's names (initializers are not inputs),
// initializers and Constant nodes become tensor constants, nodes whose inputs are all known at
// import are computed then (on kiln's CPU path). Anything kiln cannot run (an op, an attribute
// value, a dtype) is a kiln::error naming the node: its index, name and op type.
imported import(const std::filesystem::path& model, const import_options& opt = {});
imported import_bytes(std::span<const std::uint8_t> model, const import_options& opt = {});

// A serialized ONNX TensorProto (the .pb files of ONNX's test data), or the file holding one.
tensor_data parse_tensor(std::span<const std::uint8_t> bytes);
tensor_data read_tensor(const std::filesystem::path& file);

// m's graph compiled with its variables loaded: the model as an executable for any device (chosen
// at the call). A model cut at a node sized by its values (imported::rest) is refused:
// kiln::onnx::model runs it.
executable compile(imported&& m);
// import() then compile().
executable compile(const std::filesystem::path& model, const import_options& opt = {});

// An imported model as one object to call: its graph compiled, or where the model is cut
// (imported::rest) each of its graphs compiled and the cut nodes computed on the host between
// them (a Loop's, Scan's or If's bodies compiled too, each a model of its own run per step).
// Each call allocates its results, whose sizes may depend on the values. A call on Vulkan waits
// for each graph before a cut node reads its results (one round trip per cut).
class model {
 public:
  explicit model(imported m, compiler::options opt = {});
  // Arguments in this order (the model's inputs; a sequence's tensors as 'NAME.0', ...).
  const std::vector<std::string>& input_names() const;
  // Each argument's element type and extents (-1: a run-time size), in that order.
  const std::vector<signature_buffer>& inputs() const;
  // Results in this order.
  const std::vector<std::string>& output_names() const;
  // The compiled graphs in order (one where the model is not cut).
  const std::vector<executable>& executables() const;
  std::vector<tensor_data> run(std::span<const tensor_ref> args,
                               const device& d = device::default_device()) const;
  std::vector<tensor_data> run(std::initializer_list<tensor_ref> args,
                               const device& d = device::default_device()) const {
    return run(std::span<const tensor_ref>(args.begin(), args.size()), d);
  }

 private:
  struct state;
  std::shared_ptr<const state> st_;
};

// import() then model(): the model as one object to call, cut or not.
model load(const std::filesystem::path& path, const import_options& opt = {});

}  // namespace kiln::onnx
