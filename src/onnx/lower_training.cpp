// The optimizers of ONNX's ai.onnx.preview.training domain (Adagrad, Adam, Momentum), each an
// elementwise update of every tensor it is given, as their specs define it. Internal to kiln::onnx.
#include <string>
#include <vector>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;

// The node's inputs after R and T in `groups` runs of equal length (X..., G..., then the
// optimizer's states), the run length; and R and T. x is the element type of the first X.
struct optimizer_inputs {
  value r, t;
  int n = 0;
  dtype x = dtype::f32;
  std::vector<value> in;
  value at(int group, int i) const { return in[static_cast<std::size_t>(group * n + i)]; }
};

optimizer_inputs inputs_of(node_context& c, int groups) {
  optimizer_inputs o;
  const int rest = c.inputs() - 2;
  if (rest < groups || rest % groups != 0)
    c.fail(errc::invalid_argument, "takes R, T and " + std::to_string(groups) +
                                       " runs of tensors of equal length, got " +
                                       std::to_string(c.inputs()) + " inputs");
  o.n = rest / groups;
  if (c.outputs() != (groups - 1) * o.n)
    c.fail(errc::invalid_argument, "gives " + std::to_string((groups - 1) * o.n) +
                                       " outputs for these inputs, not " +
                                       std::to_string(c.outputs()));
  o.x = c.type_of(2);
  if (o.x != dtype::f32 && o.x != dtype::f64)
    c.fail(errc::unsupported, "X is " + std::string(kiln::name(o.x)) + " (f32 or f64 only)");
  o.r = c.g.cast(c.in(0), o.x);
  o.t = c.g.cast(c.in(1), o.x);
  for (int i = 2; i < c.inputs(); ++i) o.in.push_back(c.in(i));
  return o;
}

// G_i plus the gradient of the regularization term: norm_coefficient X_i.
value regularized_gradient(node_context& c, const optimizer_inputs& o, int i) {
  return c.g.add(c.g.mul(c.g.constant(c.attr_float("norm_coefficient", 0), o.x), o.at(0, i)),
                 o.at(1, i));
}

void lower_adagrad(node_context& c) {
  c.only_attrs({"decay_factor", "epsilon", "norm_coefficient"});
  const optimizer_inputs o = inputs_of(c, 3);  // X, G, H
  graph& g = c.g;
  auto k = [&](double v) { return g.constant(v, o.x); };
  // The learning rate decayed by the update count.
  const value r = g.div(o.r, g.add(k(1), g.mul(o.t, k(c.attr_float("decay_factor", 0)))));
  for (int i = 0; i < o.n; ++i) {
    const value x = o.at(0, i), grad = regularized_gradient(c, o, i);
    const value h = g.add(o.at(2, i), g.mul(grad, grad));
    const value scale = g.add(g.sqrt(h), k(c.attr_float("epsilon", 1e-6)));
    c.out(i, g.sub(x, g.div(g.mul(r, grad), scale)));
    c.out(o.n + i, h);
  }
}

void lower_momentum(node_context& c) {
  c.only_attrs({"alpha", "beta", "mode", "norm_coefficient"});
  const std::string mode = c.attr_string("mode", "");
  if (mode != "standard" && mode != "nesterov")
    c.fail(errc::invalid_argument, "mode is '" + mode + "', expected standard or nesterov");
  const optimizer_inputs o = inputs_of(c, 3);  // X, G, V
  graph& g = c.g;
  auto k = [&](double v) { return g.constant(v, o.x); };
  const value alpha = k(c.attr_float("alpha", 0));
  // The gradient's coefficient is 1 at the first update (T = 0).
  const value beta = g.select(g.gt(o.t, k(0)), k(c.attr_float("beta", 0)), k(1));
  for (int i = 0; i < o.n; ++i) {
    const value x = o.at(0, i), grad = regularized_gradient(c, o, i);
    const value v = g.add(g.mul(alpha, o.at(2, i)), g.mul(beta, grad));
    const value step = mode == "standard" ? v : g.add(grad, g.mul(alpha, v));
    c.out(i, g.sub(x, g.mul(o.r, step)));
    c.out(o.n + i, v);
  }
}

void lower_adam(node_context& c) {
  c.only_attrs({"alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"});
  const optimizer_inputs o = inputs_of(c, 4);  // X, G, V, H
  graph& g = c.g;
  auto k = [&](double v) { return g.constant(v, o.x); };
  const double alpha = c.attr_float("alpha", 0.9), beta = c.attr_float("beta", 0.999);
  // After the first update, the learning rate corrects both momentums' bias.
  const value corrected = g.div(g.mul(o.r, g.sqrt(g.sub(k(1), g.pow(k(beta), o.t)))),
                                g.sub(k(1), g.pow(k(alpha), o.t)));
  const value r = g.select(g.gt(o.t, k(0)), corrected, o.r);
  for (int i = 0; i < o.n; ++i) {
    const value x = o.at(0, i), grad = regularized_gradient(c, o, i);
    const value v = g.add(g.mul(k(alpha), o.at(2, i)), g.mul(k(1 - alpha), grad));
    const value h = g.add(g.mul(k(beta), o.at(3, i)), g.mul(k(1 - beta), g.mul(grad, grad)));
    const value scale = g.add(g.sqrt(h), k(c.attr_float("epsilon", 1e-6)));
    const value updated = g.sub(x, g.mul(r, g.div(v, scale)));
    c.out(i, g.mul(k(1 - c.attr_float("norm_coefficient_post", 0)), updated));
    c.out(o.n + i, v);
    c.out(2 * o.n + i, h);
  }
}

}  // namespace

void add_training_lowerings(lowering_table& t) {
  t[std::string(preview_training) + ".Adagrad"] = lower_adagrad;
  t[std::string(preview_training) + ".Adam"] = lower_adam;
  t[std::string(preview_training) + ".Momentum"] = lower_momentum;
}

}  // namespace kiln::onnx_import
