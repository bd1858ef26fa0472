// ONNX's own backend test data (Debian's libonnx-testdata: model.onnx with its inputs and expected
// outputs as .pb tensors, sequences and optionals), each model imported by kiln::onnx (a sequence's
// length and an optional's presence as the first data set gives them), run on the default device
// and compared as ONNX's runner compares (rtol 1e-3, atol 1e-7; integers and booleans exactly).
// Every model passes, or is listed with why in expected_failures.txt (KILN_ONNX_EXPECTED): a
// listed model that passes, or an unlisted one that does not, fails the test, and so does a listed
// refusal that turns into a wrong result. KILN_ONNX_DATA names the data folder.
#include <gtest/gtest.h>

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <kiln/onnx.hpp>

#include "../support/reference.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::onnx::tensor_data;

// The model's declared inputs, or outputs: names and types.
std::vector<::onnx::ValueInfoProto> declared(const fs::path& dir, bool outputs) {
  ::onnx::ModelProto model;
  std::ifstream in(dir / "model.onnx", std::ios::binary);
  std::vector<::onnx::ValueInfoProto> v;
  if (model.ParseFromIstream(&in))
    for (const auto& x : outputs ? model.graph().output() : model.graph().input()) v.push_back(x);
  return v;
}

// A value of the test data as the model declares it: a tensor, a sequence of values, or an
// optional (one item where present).
struct data_value {
  ::onnx::TypeProto type;
  tensor_data tensor;
  std::vector<data_value> items;
};

// ONNX 1.12's data stores bfloat16 tensors as UINT16 (their bits): read as bf16 where declared.
tensor_data tensor_from(const ::onnx::TensorProto& p, const ::onnx::TypeProto& type) {
  const std::string bytes = p.SerializeAsString();
  tensor_data t = kiln::onnx::parse_tensor(
      std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
  if (t.type == kiln::dtype::u16 && type.tensor_type().elem_type() == ::onnx::TensorProto::BFLOAT16)
    t.type = kiln::dtype::bf16;
  return t;
}

data_value sequence_from(const ::onnx::SequenceProto& p, const ::onnx::TypeProto& type) {
  data_value v{type, {}, {}};
  const ::onnx::TypeProto& item = type.sequence_type().elem_type();
  for (const auto& t : p.tensor_values()) v.items.push_back({item, tensor_from(t, item), {}});
  for (const auto& q : p.sequence_values()) v.items.push_back(sequence_from(q, item));
  return v;
}

data_value value_from(const std::string& bytes, const ::onnx::TypeProto& type) {
  if (type.has_sequence_type()) {
    ::onnx::SequenceProto p;
    p.ParseFromString(bytes);
    return sequence_from(p, type);
  }
  if (type.has_optional_type()) {
    ::onnx::OptionalProto p;
    p.ParseFromString(bytes);
    data_value v{type, {}, {}};
    const ::onnx::TypeProto& item = type.optional_type().elem_type();
    if (p.has_tensor_value()) v.items.push_back({item, tensor_from(p.tensor_value(), item), {}});
    if (p.has_sequence_value()) v.items.push_back(sequence_from(p.sequence_value(), item));
    return v;
  }
  ::onnx::TensorProto p;
  p.ParseFromString(bytes);
  return {type, tensor_from(p, type), {}};
}

// A data set's "input" or "output" values, each read as the model declares it.
std::vector<data_value> read_set(const fs::path& folder, const std::string& prefix) {
  const auto types = declared(folder.parent_path(), prefix == "output");
  std::vector<data_value> v;
  for (std::size_t i = 0;; ++i) {
    fs::path f = folder / (prefix + "_" + std::to_string(i) + ".pb");
    if (!fs::exists(f)) return v;
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    v.push_back(value_from(bytes, i < types.size() ? types[i].type() : ::onnx::TypeProto{}));
  }
}

// The tensors a value is at the call (import_options::sequence_lengths, optionals_present): a
// sequence's in order, an optional's where present.
void flatten(const data_value& v, std::vector<tensor_data>& out) {
  if (!v.type.has_sequence_type() && !v.type.has_optional_type()) return out.push_back(v.tensor);
  for (const data_value& item : v.items) flatten(item, out);
}

// What import needs to know of input `name` given as v: sequences' lengths and their tensors'
// extents, optionals' presence.
void describe(const std::string& name, const std::string& parameter, const data_value& v,
              kiln::onnx::import_options& opt) {
  if (v.type.has_optional_type()) {
    opt.optionals_present[name] = !v.items.empty();
    if (!v.items.empty()) describe(name, parameter, v.items[0], opt);
  } else if (v.type.has_sequence_type()) {
    opt.sequence_lengths[name] = static_cast<std::int64_t>(v.items.size());
    for (std::size_t k = 0; k < v.items.size(); ++k)
      describe(name, parameter + "." + std::to_string(k), v.items[k], opt);
  } else if (name != parameter) {  // a sequence's tensor: its extents, which may differ
    opt.input_dims[parameter] = v.tensor.dims;
  }
}

std::vector<double> doubles(const tensor_data& t) {
  std::vector<double> v(t.bytes.size() / static_cast<std::size_t>(kiln::size_in_bytes(t.type)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = ref::value_at(t.bytes, t.type, i);
  return v;
}

// Empty when `got` matches `want` as ONNX's runner compares; else what differs.
std::string compare(const tensor_data& got, const tensor_data& want) {
  if (got.type != want.type)
    return "dtype " + std::string(kiln::name(got.type)) + ", expected " +
           std::string(kiln::name(want.type));
  if (got.dims.rank != want.dims.rank ||
      !std::equal(got.dims.dims.begin(), got.dims.dims.begin() + got.dims.rank,
                  want.dims.dims.begin()))
    return "dims " + kiln::to_string(got.dims) + ", expected " + kiln::to_string(want.dims);
  auto g = doubles(got), w = doubles(want);
  const bool floating = kiln::is_floating(want.type);
  for (std::size_t i = 0; i < w.size(); ++i) {
    bool ok = !floating          ? g[i] == w[i]
              : std::isnan(w[i]) ? std::isnan(g[i])
              : std::isinf(w[i]) ? g[i] == w[i]
                                 : std::fabs(g[i] - w[i]) <= 1e-7 + 1e-3 * std::fabs(w[i]);
    if (!ok)
      return "element " + std::to_string(i) + " is " + std::to_string(g[i]) + ", expected " +
             std::to_string(w[i]);
  }
  return "";
}

struct outcome {
  std::string failure;  // a wrong result or an error other than a refusal
  std::string refusal;  // errc::unsupported at import: what kiln does not run
  bool bound = false;   // run with its small inputs given at import
};

std::vector<std::string> model_inputs(const fs::path& dir) {
  ::onnx::ModelProto model;
  std::ifstream in(dir / "model.onnx", std::ios::binary);
  std::vector<std::string> names;
  if (model.ParseFromIstream(&in))
    for (const auto& i : model.graph().input()) names.push_back(i.name());
  return names;
}

// Inputs of rank 0 or 1 that the model needs at import (a shape, axes, pads given as graph
// inputs, as ONNX's node tests give them), from the first data set.
std::map<std::string, tensor_data> small_inputs(const fs::path& dir) {
  auto names = model_inputs(dir);
  auto data = read_set(dir / "test_data_set_0", "input");
  std::map<std::string, tensor_data> bound;
  for (std::size_t i = 0; i < names.size() && i < data.size(); ++i)
    if (data[i].type.has_tensor_type() && data[i].tensor.dims.rank <= 1)
      bound[names[i]] = data[i].tensor;
  return bound;
}

outcome run_case(const fs::path& dir) {
  outcome r;
  kiln::onnx::imported m;
  kiln::onnx::import_options opt;
  const auto inputs = declared(dir, false);
  if (std::any_of(inputs.begin(), inputs.end(), [](const ::onnx::ValueInfoProto& v) {
        return v.type().has_sequence_type() || v.type().has_optional_type();
      })) {  // sequences and optionals as the first data set gives them
    const auto data = read_set(dir / "test_data_set_0", "input");
    for (std::size_t i = 0; i < inputs.size() && i < data.size(); ++i)
      describe(inputs[i].name(), inputs[i].name(), data[i], opt);
  }
  try {
    try {
      m = kiln::onnx::import(dir / "model.onnx", opt);
    } catch (const kiln::error& e) {
      if (std::string(e.what()).find("needs it at import") == std::string::npos) throw;
      for (auto& [name, t] : small_inputs(dir)) opt.input_values[name] = t;
      m = kiln::onnx::import(dir / "model.onnx", opt);
      r.bound = true;
    }
  } catch (const kiln::error& e) {
    (e.code() == kiln::errc::unsupported ? r.refusal : r.failure) = e.what();
    return r;
  }
  try {
    // Through kiln::onnx::model: a model cut at a node sized by its values runs whole.
    const kiln::onnx::model model(std::move(m));
    for (const auto& set : fs::directory_iterator(dir)) {
      if (!set.is_directory()) continue;
      std::vector<tensor_data> inputs, wanted;
      auto names = model_inputs(dir);
      auto data = read_set(set.path(), "input");
      for (std::size_t i = 0; i < data.size(); ++i)
        if (i >= names.size() || !opt.input_values.count(names[i])) flatten(data[i], inputs);
      for (const data_value& v : read_set(set.path(), "output")) flatten(v, wanted);
      std::vector<kiln::tensor_ref> args;
      for (auto& t : inputs)
        args.emplace_back(static_cast<const void*>(t.bytes.data()), t.type, t.dims);
      if (wanted.size() != model.output_names().size()) {
        r.failure = "has " + std::to_string(model.output_names().size()) + " outputs, the data " +
                    std::to_string(wanted.size());
        return r;
      }
      const std::vector<tensor_data> got = model.run(args);
      for (std::size_t k = 0; k < wanted.size(); ++k) {
        std::string d = compare(got[k], wanted[k]);
        if (!d.empty()) {
          r.failure = set.path().filename().string() + " output " + std::to_string(k) + ": " + d;
          return r;
        }
      }
    }
  } catch (const kiln::error& e) {
    r.failure = e.what();
  }
  return r;
}

// The models kiln does not pass, with why (tests/onnx/expected_failures.txt, KILN_ONNX_EXPECTED).
std::map<std::string, std::string> expected_failures() {
  std::map<std::string, std::string> listed;
  const char* path = std::getenv("KILN_ONNX_EXPECTED");
  if (!path) return listed;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto colon = line.find(": ");
    listed[line.substr(0, colon)] = colon == std::string::npos ? "" : line.substr(colon + 2);
  }
  return listed;
}

void run_suite(const char* suite) {
  const char* root = std::getenv("KILN_ONNX_DATA");
  ASSERT_NE(root, nullptr) << "KILN_ONNX_DATA names libonnx-testdata's data folder";
  fs::path folder = fs::path(root) / suite;
  ASSERT_TRUE(fs::is_directory(folder)) << folder;
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(folder))
    if (fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  const auto expected = expected_failures();
  ASSERT_FALSE(expected.empty()) << "KILN_ONNX_EXPECTED names tests/onnx/expected_failures.txt";
  // KILN_ONNX_CASES: a comma-separated list of cases, the only ones run, each of which must pass
  // (the Vulkan run's selection: every model is a pipeline per region to compile on lavapipe).
  std::set<std::string> listed;
  if (const char* list = std::getenv("KILN_ONNX_CASES")) {
    std::string l = list;
    for (std::size_t at = 0; at <= l.size();) {
      std::size_t comma = std::min(l.find(',', at), l.size());
      if (comma > at) listed.insert(l.substr(at, comma - at));
      at = comma + 1;
    }
  }
  int passed = 0, bound = 0, run = 0;
  for (const auto& dir : cases) {
    const std::string name = dir.filename().string(), key = std::string(suite) + "/" + name;
    if (!listed.empty() && !listed.count(name)) continue;
    ++run;
    outcome r = run_case(dir);
    const std::string why = !r.failure.empty() ? r.failure : r.refusal;
    const auto expected_failure = expected.find(key);
    if (why.empty()) {
      ++passed;
      bound += r.bound;
      if (expected_failure != expected.end())
        ADD_FAILURE() << key << " passes: take its line out of expected_failures.txt";
    } else if (!listed.empty() || expected_failure == expected.end()) {
      ADD_FAILURE() << key << " does not pass (" << (r.failure.empty() ? "refused" : "failed")
                    << "): " << why;
    } else if (!r.failure.empty() && expected_failure->second.rfind("differs: ", 0) != 0) {
      // A listed refusal that now runs and gives a wrong result is not what was listed.
      ADD_FAILURE() << key << " gives a wrong result: " << r.failure;
    }
  }
  std::printf("%s: %d of %d models pass (%d with their small inputs given at import)\n", suite,
              passed, run, bound);
}

TEST(OnnxImport, NodeTests) { run_suite("node"); }
TEST(OnnxImport, PytorchConverted) { run_suite("pytorch-converted"); }
TEST(OnnxImport, PytorchOperator) { run_suite("pytorch-operator"); }
TEST(OnnxImport, Simple) { run_suite("simple"); }

}  // namespace
