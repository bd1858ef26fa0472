// ONNX's Gradient (ai.onnx.preview.training): the derivatives of y with respect to each of xs,
// by reverse-mode differentiation of the nodes before it, built as ordinary graph ops (so the
// backward pass fuses and runs as the forward one does). Where y is not a scalar, the gradient
// is that of the sum of its elements (the seed is all ones). Internal to kiln::onnx.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;

constexpr std::string_view differentiated =
    "Add, Sub, Mul, Div, Neg, Identity, Relu, Sigmoid, Tanh, Exp, Log, Sqrt, MatMul";

// The gradient of an operand that broadcasting stretched to `grad`'s extents: summed over the
// axes it lacks or holds once, then shaped as the operand.
value unbroadcast(graph& g, value grad, const shape& target) {
  const shape have = g.dims_of(grad);
  if (have == target) return grad;
  std::vector<std::int64_t> axes;
  const int lead = have.rank - target.rank;
  for (int i = 0; i < have.rank; ++i)
    if (i < lead || (target.dims[i - lead] == 1 && have.dims[i] != 1)) axes.push_back(i);
  if (!axes.empty()) grad = g.reduce(ir::op::reduce_sum, grad, axes, true);
  return g.dims_of(grad) == target ? grad
                                   : g.reshape(grad, std::span(target.dims.data(), target.rank));
}

// v's extents, as expand takes them (run-time ones too).
std::vector<graph::extent> extents_of(const graph& g, value v) {
  std::vector<graph::extent> e;
  for (int a = 0; a < g.dims_of(v).rank; ++a) e.push_back(g.extent_of(v, a));
  return e;
}

value transpose_last_two(graph& g, value x) {
  const int r = g.dims_of(x).rank;
  std::vector<std::int64_t> perm;
  for (int i = 0; i < r; ++i) perm.push_back(i < r - 2 ? i : i == r - 2 ? r - 1 : r - 2);
  return g.transpose(x, perm);
}

}  // namespace

std::vector<slot> lower_gradient(node_context& c, const ::onnx::GraphProto& gp, int at,
                                 scope& values) {
  c.only_attrs({"xs", "y", "zs"});
  graph& g = c.g;
  const ::onnx::AttributeProto* xs_attr = c.attr("xs");
  const std::string y = c.attr_string("y", "");
  if (!xs_attr || xs_attr->strings_size() == 0 || y.empty())
    c.fail(errc::invalid_argument, "needs the attributes xs (the inputs) and y (the output)");
  std::vector<std::string> xs(xs_attr->strings().begin(), xs_attr->strings().end());
  if (c.outputs() != static_cast<int>(xs.size()))
    c.fail(errc::invalid_argument, "has " + std::to_string(c.outputs()) + " outputs for " +
                                       std::to_string(xs.size()) + " xs");

  auto forward = [&](const std::string& name) {
    slot* s = values.find(name);
    if (!s || s->sequence || s->extents || (!s->value && !s->known))
      c.fail(errc::unsupported, "'" + name + "' is not a tensor kiln can differentiate through");
    return value_of(g, *s);
  };
  // What depends on xs, in node order; then, backwards from y, each value's gradient.
  std::set<std::string> depends(xs.begin(), xs.end());
  for (int j = 0; j < at; ++j) {
    const auto& n = gp.node(j);
    bool any = false;
    for (const auto& in : n.input()) any = any || depends.count(in);
    if (any)
      for (const auto& out : n.output()) depends.insert(out);
  }
  if (!depends.count(y))
    c.fail(errc::invalid_argument, "y '" + y + "' is not computed from xs before the node");
  std::map<std::string, value> grads;
  const value y_value = forward(y);
  grads.emplace(y, g.expand(g.constant(1.0, g.type_of(y_value)), extents_of(g, y_value)));
  auto add_grad = [&](const std::string& name, value grad) {
    auto [it, fresh] = grads.emplace(name, grad);
    if (!fresh) it->second = g.add(it->second, grad);
  };

  for (int j = at - 1; j >= 0; --j) {
    const auto& n = gp.node(j);
    std::optional<value> out_grad;
    for (int o = 0; o < n.output_size(); ++o)
      if (auto it = grads.find(n.output(o)); it != grads.end()) {
        if (o > 0)
          c.fail(errc::unsupported, "node " + std::to_string(j) + " (" + n.op_type() +
                                        ") is on the path to y through its output " +
                                        std::to_string(o) + "; kiln differentiates " +
                                        std::string(differentiated));
        out_grad = it->second;
      }
    if (!out_grad) continue;
    const std::string& op = n.op_type();
    auto refuse = [&] {
      c.fail(errc::unsupported, "node " + std::to_string(j) + " (" + op +
                                    ") is on the path from xs to y; kiln differentiates " +
                                    std::string(differentiated));
    };
    if (!n.domain().empty() && n.domain() != "ai.onnx") refuse();
    const value gy = *out_grad;
    auto input = [&](int i) { return forward(n.input(i)); };
    auto give = [&](int i, value grad) {
      if (i < n.input_size() && depends.count(n.input(i)))
        add_grad(n.input(i), unbroadcast(g, grad, g.dims_of(input(i))));
    };
    const value yv = forward(n.output(0));
    auto one = [&] { return g.constant(1.0, g.type_of(yv)); };
    if (op == "Add") {
      give(0, gy);
      give(1, gy);
    } else if (op == "Sub") {
      give(0, gy);
      give(1, g.neg(gy));
    } else if (op == "Mul") {
      give(0, g.mul(gy, input(1)));
      give(1, g.mul(gy, input(0)));
    } else if (op == "Div") {
      give(0, g.div(gy, input(1)));
      give(1, g.neg(g.div(g.mul(gy, yv), input(1))));  // -gy * a / b^2 = -gy * y / b
    } else if (op == "Neg") {
      give(0, g.neg(gy));
    } else if (op == "Identity") {
      give(0, gy);
    } else if (op == "Relu") {
      give(0, g.select(g.gt(input(0), g.constant(0.0, g.type_of(yv))), gy,
                       g.constant(0.0, g.type_of(yv))));
    } else if (op == "Sigmoid") {
      give(0, g.mul(gy, g.mul(yv, g.sub(one(), yv))));
    } else if (op == "Tanh") {
      give(0, g.mul(gy, g.sub(one(), g.mul(yv, yv))));
    } else if (op == "Exp") {
      give(0, g.mul(gy, yv));
    } else if (op == "Log") {
      give(0, g.div(gy, input(0)));
    } else if (op == "Sqrt") {
      give(0, g.div(gy, g.add(yv, yv)));
    } else if (op == "MatMul") {
      const value a = input(0), b = input(1);
      if (g.dims_of(a).rank < 2 || g.dims_of(b).rank < 2)
        c.fail(errc::unsupported, "node " + std::to_string(j) +
                                      " (MatMul) has an operand of rank 1; kiln differentiates "
                                      "products of matrices (rank 2 or more)");
      give(0, g.matmul(gy, transpose_last_two(g, b)));
      give(1, g.matmul(transpose_last_two(g, a), gy));
    } else {
      refuse();
    }
  }

  std::vector<slot> out(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    auto it = grads.find(xs[i]);
    if (it != grads.end()) {
      out[i].value = it->second;
    } else {  // y does not depend on this x
      const value x = forward(xs[i]);
      out[i].value = g.expand(g.constant(0.0, g.type_of(x)), extents_of(g, x));
    }
  }
  return out;
}

}  // namespace kiln::onnx_import
