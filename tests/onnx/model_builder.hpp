// Test models built with ONNX's protobuf classes: inputs and outputs with static or named
// dimensions, nodes, initializers, integer attributes.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace kiln_test {

using dim = std::variant<std::int64_t, std::string>;

struct model_builder {
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g;

  explicit model_builder(std::int64_t opset = 17) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g = m.mutable_graph();
    g->set_name("test");
  }
  static void typed(::onnx::ValueInfoProto* v, const std::string& name, int elem,
                    const std::vector<dim>& dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* s = t->mutable_shape();
    for (const auto& d : dims) {
      auto* x = s->add_dim();
      if (std::holds_alternative<std::int64_t>(d))
        x->set_dim_value(std::get<std::int64_t>(d));
      else
        x->set_dim_param(std::get<std::string>(d));
    }
  }
  void input(const std::string& name, const std::vector<dim>& dims,
             int elem = ::onnx::TensorProto::FLOAT) {
    typed(g->add_input(), name, elem, dims);
  }
  void output(const std::string& name, const std::vector<dim>& dims,
              int elem = ::onnx::TensorProto::FLOAT) {
    typed(g->add_output(), name, elem, dims);
  }
  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out, const std::string& name = "") {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return n;
  }
  ::onnx::TensorProto* ints(const std::string& name, const std::vector<std::int64_t>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
    return t;
  }
  ::onnx::TensorProto* scalar_int(const std::string& name, std::int64_t v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_int64_data(v);
    return t;
  }
  ::onnx::TensorProto* floats(const std::string& name, const std::vector<float>& v,
                              const std::vector<std::int64_t>& dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    return t;
  }
  std::vector<std::uint8_t> bytes() const {
    std::string s = m.SerializeAsString();
    return {s.begin(), s.end()};
  }
};

// Sets node n's integer attribute `name`.
inline void int_attr(::onnx::NodeProto* n, const char* name, std::int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

// A graph attribute of node n, built by the same builder (its g pointed there meanwhile).
template <class Build>
void subgraph(model_builder& b, ::onnx::NodeProto* n, const std::string& name, Build build) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::GRAPH);
  ::onnx::GraphProto* outer = b.g;
  b.g = a->mutable_g();
  b.g->set_name(name);
  build();
  b.g = outer;
}

}  // namespace kiln_test
