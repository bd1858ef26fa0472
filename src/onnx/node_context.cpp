// ONNX tensors read into host tensors, and the node context's accessors.
#include "node_context.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cut_model.hpp"
#include "kiln/core/minifloat.hpp"

namespace kiln::onnx_import {

namespace {

using ::onnx::TensorProto;

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Element i of a host tensor as a double (every integer kiln's shapes use fits exactly).
double element(const host_tensor& t, std::int64_t i) {
  const unsigned char* p = t.bytes.data() + i * size_in_bytes(t.type);
  switch (t.type) {
    case dtype::f32:
      return load<float>(p);
    case dtype::f64:
      return load<double>(p);
    case dtype::f16:
      return static_cast<float>(float16::from_bits(load<std::uint16_t>(p)));
    case dtype::bf16:
      return static_cast<float>(bfloat16::from_bits(load<std::uint16_t>(p)));
    case dtype::f8e4m3:
      return static_cast<float>(float8_e4m3::from_bits(*p));
    case dtype::f8e5m2:
      return static_cast<float>(float8_e5m2::from_bits(*p));
    case dtype::i8:
      return load<std::int8_t>(p);
    case dtype::i16:
      return load<std::int16_t>(p);
    case dtype::i32:
      return load<std::int32_t>(p);
    case dtype::i64:
      return static_cast<double>(load<std::int64_t>(p));
    case dtype::u8:
    case dtype::boolean:
      return *p;
    case dtype::u16:
      return load<std::uint16_t>(p);
    case dtype::u32:
      return load<std::uint32_t>(p);
    case dtype::u64:
      return static_cast<double>(load<std::uint64_t>(p));
  }
  return 0;
}

// Typed fields: values of `field` narrowed (or bit-copied, for f16 / bf16) into the tensor.
template <class Field>
void copy_typed(const Field& field, host_tensor& t, const std::string& who) {
  if (static_cast<std::int64_t>(field.size()) != t.count())
    throw error(errc::invalid_argument, "onnx import",
                who + " holds " + std::to_string(field.size()) + " values, expected " +
                    std::to_string(t.count()) + " for dims " + to_string(t.dims));
  const int size = size_in_bytes(t.type);
  for (int i = 0; i < field.size(); ++i) {
    unsigned char* p = t.bytes.data() + static_cast<std::size_t>(i) * size;
    auto v = field.Get(i);
    switch (t.type) {
      case dtype::f32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case dtype::f64: {
        double d = static_cast<double>(v);
        std::memcpy(p, &d, 8);
        break;
      }
      case dtype::i64: {
        auto x = static_cast<std::int64_t>(v);
        std::memcpy(p, &x, 8);
        break;
      }
      default: {  // little-endian narrowing: the low bytes (f16 / bf16 are stored as their bits)
        auto x = static_cast<std::uint64_t>(v);
        std::memcpy(p, &x, static_cast<std::size_t>(size));
      }
    }
  }
}

}  // namespace

std::int64_t host_tensor::count() const { return dims.element_count(); }

std::vector<std::int64_t> host_tensor::ints() const {
  std::vector<std::int64_t> v(static_cast<std::size_t>(count()));
  for (std::int64_t i = 0; i < count(); ++i)
    v[static_cast<std::size_t>(i)] = type == dtype::i64 || type == dtype::u64  // every bit
                                         ? load<std::int64_t>(bytes.data() + i * 8)
                                         : static_cast<std::int64_t>(element(*this, i));
  return v;
}

std::vector<double> host_tensor::doubles() const {
  std::vector<double> v(static_cast<std::size_t>(count()));
  for (std::int64_t i = 0; i < count(); ++i) v[static_cast<std::size_t>(i)] = element(*this, i);
  return v;
}

std::optional<dtype> dtype_from_onnx(int t) {
  switch (t) {
    case TensorProto::FLOAT:
      return dtype::f32;
    case TensorProto::UINT8:
      return dtype::u8;
    case TensorProto::UINT16:
      return dtype::u16;
    case TensorProto::INT8:
      return dtype::i8;
    case TensorProto::INT16:
      return dtype::i16;
    case TensorProto::INT32:
      return dtype::i32;
    case TensorProto::INT64:
      return dtype::i64;
    case TensorProto::BOOL:
      return dtype::boolean;
    case TensorProto::FLOAT16:
      return dtype::f16;
    case TensorProto::DOUBLE:
      return dtype::f64;
    case TensorProto::UINT32:
      return dtype::u32;
    case TensorProto::UINT64:
      return dtype::u64;
    case TensorProto::BFLOAT16:
      return dtype::bf16;
    default:
      return std::nullopt;
  }
}

std::string onnx_type_name(int t) {
  if (::onnx::TensorProto_DataType_IsValid(t))
    return ::onnx::TensorProto_DataType_Name(static_cast<TensorProto::DataType>(t));
  return "data type " + std::to_string(t);
}

host_tensor tensor_of(const TensorProto& p, const std::string& who) {
  auto type = dtype_from_onnx(p.data_type());
  if (!type)
    throw error(
        errc::unsupported, "onnx import",
        who + " has element type " + onnx_type_name(p.data_type()) +
            ", which kiln does not have (kiln: f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64 "
            "bool)");
  if (p.data_location() == TensorProto::EXTERNAL)
    throw error(errc::invalid_argument, "onnx import", who + ": external data was not read in");
  host_tensor t;
  t.type = *type;
  if (p.dims_size() > max_rank)
    throw error(errc::unsupported, "onnx import",
                who + " has rank " + std::to_string(p.dims_size()) + ", above kiln::max_rank (" +
                    std::to_string(max_rank) + ")");
  t.dims.rank = p.dims_size();
  for (int i = 0; i < p.dims_size(); ++i) t.dims.dims[i] = p.dims(i);
  const std::int64_t n = checked_element_count(t.dims, size_in_bytes(t.type), "onnx import", who);
  const auto bytes = static_cast<std::size_t>(n) * static_cast<std::size_t>(size_in_bytes(t.type));
  if (p.has_raw_data()) {
    if (p.raw_data().size() != bytes)
      throw error(errc::invalid_argument, "onnx import",
                  who + " holds " + std::to_string(p.raw_data().size()) + " bytes, expected " +
                      std::to_string(bytes) + " for " + std::string(name(t.type)) + " dims " +
                      to_string(t.dims));
    t.bytes.assign(p.raw_data().begin(), p.raw_data().end());
    return t;
  }
  t.bytes.assign(bytes, 0);
  switch (p.data_type()) {
    case TensorProto::FLOAT:
      copy_typed(p.float_data(), t, who);
      break;
    case TensorProto::DOUBLE:
      copy_typed(p.double_data(), t, who);
      break;
    case TensorProto::INT64:
      copy_typed(p.int64_data(), t, who);
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      copy_typed(p.uint64_data(), t, who);
      break;
    default:  // INT32, INT16, INT8, UINT16, UINT8, BOOL, FLOAT16, BFLOAT16: int32_data
      copy_typed(p.int32_data(), t, who);
  }
  if (t.type == dtype::boolean)  // any nonzero is true; kiln's bool is 0 or 1
    for (auto& b : t.bytes) b = b != 0;
  return t;
}

std::string node_context::who() const {
  std::string s = prefix_ + "node " + std::to_string(index_);
  if (!node_.name().empty()) s += " '" + node_.name() + "'";
  return s + " (" + node_.op_type() + ")";
}

void node_context::fail(errc code, const std::string& message) const {
  throw error(code, "onnx import", who() + ": " + message);
}

graph::value value_of(graph& g, const slot& s) {
  if (s.value) return *s.value;
  if (s.extents) {  // sizes read as numbers: each counted at the call where it is a run-time size
    if (s.scalar) return g.size_value(s.extents->front());
    std::vector<graph::value> sizes;
    for (const graph::extent& e : *s.extents) sizes.push_back(g.reshape(g.size_value(e), {1}));
    return g.concat(sizes, 0);
  }
  return g.constant(s.known.bytes(), s.known->type, s.known->dims);
}

host_tensor i64_tensor(const std::vector<std::int64_t>& values, const shape& dims) {
  host_tensor t{dtype::i64, dims, std::vector<unsigned char>(values.size() * 8)};
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

graph::value node_context::in(int i) {
  slot& s = tensor_slot(i);
  if (!s.value) s.value = value_of(g, s);  // made once, for every reader
  return *s.value;
}

const host_tensor* node_context::known(int i) const {
  if (!has(i)) return nullptr;
  const slot& s = *inputs_[static_cast<std::size_t>(i)];
  return s.known ? &*s.known : nullptr;
}

const host_tensor& node_context::known_input(int i, std::string_view what) const {
  if (!has(i))
    fail(errc::invalid_argument,
         std::string(what) + " (input " + std::to_string(i) + ") is required and absent");
  const host_tensor* t = known(i);
  if (!t)
    fail(errc::unsupported,
         std::string(what) + " (input " + std::to_string(i) + " '" + node_.input(i) +
             "') is computed at run time; kiln needs it at import. It depends on a run-time size "
             "or on the data: bind the model's symbolic dimensions (import_options::dims)");
  return *t;
}

std::vector<std::int64_t> node_context::ints_input(int i, std::string_view what) const {
  const host_tensor& t = known_input(i, what);
  if (is_floating(t.type))
    fail(errc::dtype_mismatch, std::string(what) + " (input " + std::to_string(i) + ") is " +
                                   std::string(name(t.type)) + ", expected an integer type");
  return t.ints();
}

double node_context::scalar_input(int i, std::string_view what) const {
  const host_tensor& t = known_input(i, what);
  if (t.count() != 1)
    fail(errc::shape_mismatch, std::string(what) + " (input " + std::to_string(i) + ") has dims " +
                                   to_string(t.dims) + ", expected one element");
  return t.doubles()[0];
}

slot& node_context::present_slot(int i) const {
  if (!has(i))
    fail(errc::invalid_argument, "input " + std::to_string(i) + " is required and absent");
  slot& s = *inputs_[static_cast<std::size_t>(i)];
  if (s.list && s.list->carried < 0 && op() != "SequenceAt" && op() != "SequenceLength" &&
      op() != "ConcatFromSequence" && op() != "SequenceInsert" && op() != "SequenceErase" &&
      op() != "Loop" && op() != "Identity")
    fail(errc::unsupported, "input " + std::to_string(i) + " '" + node_.input(i) +
                                "' is a sequence whose length is known only at the call (kiln "
                                "reads one with SequenceAt, SequenceLength and "
                                "ConcatFromSequence, changes one with SequenceInsert and "
                                "SequenceErase, and a Loop at the call appends to one)");
  return s;
}

slot& node_context::tensor_slot(int i) const {
  slot& s = present_slot(i);
  if (s.sequence || s.list)
    fail(errc::invalid_argument,
         "input " + std::to_string(i) + " '" + node_.input(i) + "' is a sequence, not a tensor");
  return s;
}

dtype node_context::type_of(int i) const {
  const slot& s = tensor_slot(i);
  return s.known ? s.known->type : g.type_of(*s.value);
}

dtype node_context::element_type(std::int64_t onnx_type) const {
  const auto t = onnx_type < INT32_MIN || onnx_type > INT32_MAX
                     ? std::nullopt
                     : dtype_from_onnx(static_cast<int>(onnx_type));
  if (!t)
    fail(errc::unsupported,
         "element type " + onnx_type_name(static_cast<int>(onnx_type)) + " is not kiln's");
  return *t;
}

shape node_context::dims_of(int i) const {
  const slot& s = tensor_slot(i);
  return s.known ? s.known->dims : g.dims_of(*s.value);
}

std::vector<graph::value> node_context::present_inputs() {
  std::vector<graph::value> v;
  for (int i = 0; i < inputs(); ++i)
    if (has(i)) v.push_back(in(i));
  return v;
}

const ::onnx::AttributeProto* node_context::attr(std::string_view name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::int64_t node_context::attr_int(std::string_view name, std::int64_t otherwise) const {
  const auto* a = attr(name);
  if (!a) return otherwise;
  if (a->type() != ::onnx::AttributeProto::INT)
    fail(errc::invalid_argument, "attribute '" + std::string(name) + "' is not an integer");
  return a->i();
}

double node_context::attr_float(std::string_view name, double otherwise) const {
  const auto* a = attr(name);
  if (!a) return otherwise;
  if (a->type() != ::onnx::AttributeProto::FLOAT)
    fail(errc::invalid_argument, "attribute '" + std::string(name) + "' is not a float");
  return a->f();
}

std::string node_context::attr_string(std::string_view name, std::string_view otherwise) const {
  const auto* a = attr(name);
  if (!a) return std::string(otherwise);
  if (a->type() != ::onnx::AttributeProto::STRING)
    fail(errc::invalid_argument, "attribute '" + std::string(name) + "' is not a string");
  return a->s();
}

std::vector<std::int64_t> node_context::attr_ints(std::string_view name) const {
  const auto* a = attr(name);
  if (!a) return {};
  if (a->type() != ::onnx::AttributeProto::INTS)
    fail(errc::invalid_argument, "attribute '" + std::string(name) + "' is not a list of integers");
  return {a->ints().begin(), a->ints().end()};
}

std::vector<double> node_context::attr_floats(std::string_view name) const {
  const auto* a = attr(name);
  if (!a) return {};
  if (a->type() != ::onnx::AttributeProto::FLOATS)
    fail(errc::invalid_argument, "attribute '" + std::string(name) + "' is not a list of floats");
  return {a->floats().begin(), a->floats().end()};
}

void node_context::only_attrs(std::initializer_list<std::string_view> read) const {
  for (const auto& a : node_.attribute())
    // consumed_inputs (opsets before 6) was a memory hint with no effect on the result.
    if (a.name() != "consumed_inputs" &&
        std::find(read.begin(), read.end(), a.name()) == read.end())
      fail(errc::unsupported, "attribute '" + a.name() + "' is not supported by kiln's " + op());
}

slot& node_context::produced_at(int o) {
  if (produced_.size() <= static_cast<std::size_t>(o))
    produced_.resize(static_cast<std::size_t>(o) + 1);
  return produced_[static_cast<std::size_t>(o)];
}

void node_context::out(int o, graph::value v) {
  if (wants(o)) produced_at(o).value = v;
}

void node_context::out_known(int o, host_tensor t) {
  if (wants(o)) produced_at(o).known = std::move(t);
}

void node_context::out_extents(int o, std::vector<graph::extent> e, bool scalar) {
  if (!wants(o)) return;
  if (std::all_of(e.begin(), e.end(), [](const graph::extent& x) { return x.is_static(); })) {
    std::vector<std::int64_t> v;
    for (const auto& x : e) v.push_back(x.size());
    shape d = scalar ? shape{} : shape{static_cast<std::int64_t>(v.size())};
    return out_known(o, i64_tensor(v, d));
  }
  slot& s = produced_at(o);
  s.extents = std::move(e);
  s.scalar = scalar;
}

std::optional<std::vector<graph::extent>> node_context::extents_input(int i, bool* scalar) const {
  if (!has(i)) return std::nullopt;
  const slot& s = *inputs_[static_cast<std::size_t>(i)];
  if (s.extents) {
    if (scalar) *scalar = s.scalar;
    return s.extents;
  }
  if (!s.known || s.known->dims.rank > 1 || is_floating(s.known->type)) return std::nullopt;
  if (scalar) *scalar = s.known->dims.rank == 0;
  std::vector<graph::extent> e;
  for (std::int64_t v : s.known->ints()) e.emplace_back(v);
  return e;
}

std::vector<slot> node_context::subgraph(std::string_view attribute, std::vector<slot> inputs,
                                         const std::string& label) {
  const ::onnx::AttributeProto* a = attr(attribute);
  if (!a || a->type() != ::onnx::AttributeProto::GRAPH)
    fail(errc::invalid_argument, "the graph attribute '" + std::string(attribute) + "' is missing");
  if (!scope_) fail(errc::invalid_argument, "a subgraph outside a graph's scope");
  return import_subgraph(
      g, a->g(), scope_, opset_, std::move(inputs),
      who() + " " + std::string(attribute) + (label.empty() ? "" : " (" + label + ")") + ": ");
}

std::vector<slot> node_context::subgraph_apart(
    std::string_view attribute, model_cutter& body, std::vector<slot> inputs,
    std::vector<std::pair<std::string, slot*>>& captured) {
  const ::onnx::AttributeProto* a = attr(attribute);
  if (!a || a->type() != ::onnx::AttributeProto::GRAPH)
    fail(errc::invalid_argument, "the graph attribute '" + std::string(attribute) + "' is missing");
  if (!scope_) fail(errc::invalid_argument, "a subgraph outside a graph's scope");
  scope around;
  around.capture = [&](const std::string& name) -> slot* {
    slot* s = scope_->find(name);
    if (!s) return nullptr;
    slot& mine = around.own[name];
    if (s->known) {
      mine.known = s->known;
    } else if (s->value && !s->sequence && !s->extents) {
      const shape d = g.dims_of(*s->value);
      const std::vector<graph::extent> sizes(d.dims.begin(), d.dims.begin() + d.rank);
      mine.value = body.part(0).input(name, g.type_of(*s->value), sizes);
      body.declare_input(name, g.type_of(*s->value), d);
      captured.emplace_back(name, s);
    } else {
      fail(errc::unsupported, "its " + std::string(attribute) + " reads '" + name +
                                  "', a sequence, an optional or a shape of run-time sizes, " +
                                  "from around it at the call");
    }
    return &mine;
  };
  return import_subgraph(body.part(0), a->g(), &around, opset_, std::move(inputs),
                         who() + " " + std::string(attribute) + " (at the call): ", &body);
}

void node_context::needs_call_values(const std::string& message) const {
  throw call_values_needed(errc::unsupported, "onnx import", who() + ": " + message);
}

const slot& node_context::input_slot(int i) const { return present_slot(i); }

slot* scope::find(const std::string& name) {
  // What is found from the nearest scope of a cut graph outward is brought into its current part
  // (a value of an earlier part; what a body reads around it, a parameter of its first part).
  model_cutter* cutter = nullptr;
  for (scope* s = this; s; s = s->outer) {
    if (!cutter) cutter = s->cutter;
    if (auto it = s->own.find(name); it != s->own.end()) {
      if (cutter) cutter->bring(it->second, name);
      return &it->second;
    }
    if (s->capture) {
      slot* captured = s->capture(name);
      if (captured && cutter) cutter->bring(*captured, name);
      return captured;
    }
  }
  return nullptr;
}

const std::vector<slot>& node_context::sequence_in(int i) const {
  const slot& s = present_slot(i);
  if (s.list)
    fail(errc::unsupported, "input " + std::to_string(i) + " '" + node_.input(i) +
                                "' is a sequence whose length is known only at the call, read "
                                "here as one of a length known at import");
  if (!s.sequence)
    fail(errc::invalid_argument,
         "input " + std::to_string(i) + " '" + node_.input(i) + "' is a tensor, not a sequence");
  return *s.sequence;
}

void node_context::out_sequence(int o, std::vector<slot> items) {
  slot s;
  s.sequence = std::move(items);
  out_slot(o, std::move(s));
}

void node_context::out_slot(int o, slot s) { produced_at(o) = std::move(s); }

}  // namespace kiln::onnx_import
