// What each C++ block of README.md uses without declaring it (its data, a function it calls, a
// model file): one struct per block, whose run() is the block itself (extract_blocks.py). The
// README test compiles and runs every block.
#pragma once

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <vector>

#include <kiln/executable.hpp>
#include <kiln/kiln.hpp>
#include <kiln/onnx.hpp>

namespace readme {

inline std::vector<float> ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i));
  return v;
}

// A graph executable whose result needs a transient (a product of a product).
inline kiln::executable product_of_products(std::int64_t n) {
  kiln::graph g;
  auto x = g.input("x", kiln::dtype::f32, {n, n});
  g.output("y", g.matmul(g.matmul(x, x), x));
  return kiln::compile(g);
}

struct dsl_intro {
  std::int64_t rows = 4;
  std::vector<float> x = ramp(4 * 768), b = ramp(768), out = std::vector<float>(4 * 768);
  void run();
};

struct workspace {
  static constexpr auto f = kiln::fn<kiln::tensor<kiln::f32, 16, 16>>(
      [](auto x) { return kiln::matmul(kiln::matmul(x, x), x); });
  std::vector<float> xs = ramp(256), ys = std::vector<float>(256);
  decltype(kiln::view(xs.data(), {16, 16})) x = kiln::view(xs.data(), {16, 16});
  decltype(kiln::view(ys.data(), {16, 16})) y = kiln::view(ys.data(), {16, 16});
  kiln::executable exe = product_of_products(16);
  void run();
};

struct dense {
  void run();
};

struct conv_block {
  void run();
};

struct graph_api {
  std::int64_t rows = 4;
  std::vector<float> weights = ramp(768), xs = ramp(4 * 768), bs = ramp(768);
  std::vector<float> ys = std::vector<float>(4 * 768), ss = std::vector<float>(4),
                     ps = std::vector<float>(4 * 768), zs = std::vector<float>(4 * 768);
  kiln::tensor_ref x_ref{static_cast<const void*>(xs.data()), kiln::dtype::f32, {4, 768}};
  kiln::tensor_ref b_ref{static_cast<const void*>(bs.data()), kiln::dtype::f32, {768}};
  kiln::tensor_ref y_ref{static_cast<void*>(ys.data()), kiln::dtype::f32, {4, 768}};
  kiln::tensor_ref s_ref{static_cast<void*>(ss.data()), kiln::dtype::f32, {4, 1}};
  kiln::tensor_ref p_ref{static_cast<void*>(ps.data()), kiln::dtype::f32, {4, 768}};
  kiln::tensor_ref z_ref{static_cast<void*>(zs.data()), kiln::dtype::f32, {4, 768}};
  void run();
};

struct variables {
  kiln::device dev = kiln::device::cpu();
  std::vector<float> initial = ramp(768), trained = std::vector<float>(768), values = ramp(768);
  kiln::buffer<float> grad_buffer = dev.upload(ramp(768));
  kiln::executable other = [] {
    kiln::graph g;
    auto w = g.variable("weights", kiln::dtype::f32, {768});
    g.output("twice", g.add(w, w));
    return kiln::compile(g);
  }();
  void run();
};

struct modules {
  std::int64_t rows = 4;
  kiln::device dev = kiln::device::cpu();
  std::vector<float> xs = ramp(4 * 8), b = ramp(8), ys = std::vector<float>(4 * 8),
                     s = std::vector<float>(8);
  decltype(kiln::view(xs.data(), {4, 8})) x = kiln::view(xs.data(), {4, 8});
  decltype(kiln::view(ys.data(), {4, 8})) y = kiln::view(ys.data(), {4, 8});
  kiln::executable exe = [] {
    kiln::graph g;
    auto x = g.input("x", kiln::dtype::f32, {kiln::dyn, 8});
    auto b = g.input("b", kiln::dtype::f32, {8});
    g.output("y", g.relu(g.add(x, b)));
    g.output("s", g.reduce_sum(x, {0}, false));
    return kiln::compile(g);
  }();
  void run();
};

struct tracing {
  kiln::graph g;
  kiln::graph::value x = g.input("x", kiln::dtype::f32, {4, 8});
  kiln::graph::value w = g.input("w", kiln::dtype::f32, {8, 8});
  template <class... A>
  static void log(const A&...) {}
  ~tracing() { kiln::set_trace_sink({}); }
  void run();
};

// Writes model.onnx (x [batch, 4] -> Relu -> times the initializer classifier.weight [4] ->
// logits) and input_0.pb into the working folder.
struct onnx_models {
  std::vector<float> xs = ramp(4), ls = std::vector<float>(4), new_weights = ramp(4);
  decltype(kiln::view(xs.data(), {1, 4})) x = kiln::view(xs.data(), {1, 4});
  decltype(kiln::view(ls.data(), {1, 4})) logits = kiln::view(ls.data(), {1, 4});
  onnx_models() {
    ::onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto* g = m.mutable_graph();
    g->set_name("readme");
    auto typed = [](::onnx::ValueInfoProto* v, const char* name) {
      v->set_name(name);
      auto* t = v->mutable_type()->mutable_tensor_type();
      t->set_elem_type(::onnx::TensorProto::FLOAT);
      t->mutable_shape()->add_dim()->set_dim_param("batch");
      t->mutable_shape()->add_dim()->set_dim_value(4);
    };
    typed(g->add_input(), "x");
    typed(g->add_output(), "logits");
    auto* n = g->add_node();
    n->set_op_type("Relu");
    n->add_input("x");
    n->add_output("r");
    auto* w = g->add_initializer();
    w->set_name("classifier.weight");
    w->set_data_type(::onnx::TensorProto::FLOAT);
    w->add_dims(4);
    for (int i = 0; i < 4; ++i) w->add_float_data(1.0f);
    n = g->add_node();
    n->set_op_type("Mul");
    n->add_input("r");
    n->add_input("classifier.weight");
    n->add_output("logits");
    std::ofstream("model.onnx", std::ios::binary) << m.SerializeAsString();
    ::onnx::TensorProto t;
    t.set_data_type(::onnx::TensorProto::FLOAT);
    t.add_dims(4);
    for (float v : xs) t.add_float_data(v);
    std::ofstream("input_0.pb", std::ios::binary) << t.SerializeAsString();
  }
  void run();
};

// The same model run through kiln::onnx::model.
struct onnx_model_object : onnx_models {
  void run();
};

struct devices {
  static constexpr auto f = kiln::fn<kiln::tensor<kiln::f32, 1024>, kiln::tensor<kiln::f32, 1024>>(
      [](auto x, auto y) { return x * y + 1.0f; });
  std::vector<float> x = ramp(1024), y = ramp(1024), out = std::vector<float>(1024);
  kiln::buffer<float> yb = kiln::device::vulkan().upload(y);
  void run();
};

struct async_calls {
  static constexpr auto f =
      kiln::fn<kiln::tensor<kiln::f32, 1024>>([](auto x) { return kiln::exp(x) + 1.0f; });
  kiln::device dev = kiln::device::vulkan();
  kiln::buffer<float> xb = dev.upload(ramp(1024)), yb = dev.alloc<float>(1024),
                      zb = dev.alloc<float>(1024);
  kiln::executable exe = [] {
    kiln::graph g;
    g.output("z", g.neg(g.input("y", kiln::dtype::f32, {1024})));
    return kiln::compile(g);
  }();
  void run();
};

template <class Block>
int run_block(const char* name, int line) {
  try {
    Block b;
    b.run();
    std::printf("README.md:%d (%s): ran\n", line, name);
    return 0;
  } catch (const std::exception& e) {
    std::printf("README.md:%d (%s): %s\n", line, name, e.what());
    return 1;
  }
}

}  // namespace readme
