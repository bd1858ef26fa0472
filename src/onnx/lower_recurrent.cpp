// ONNX's recurrent layers (RNN, GRU, LSTM), unrolled at import over their static sequence
// length: each step's products and gates are ordinary graph ops, so kiln fuses and runs them as
// any other region. Internal to kiln::onnx.
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;

enum class cell { rnn, gru, lstm };

// One direction's weights: W^T [I, G H], R^T [H, G H], the biases Wb, Rb [G H] (zero where B is
// absent), and an LSTM's peepholes P [3 H] (i, o, f).
struct direction_weights {
  value w, r, wb, rb;
  std::optional<value> p;
};

// Gate k of the G H columns of `gates` [batch, G H].
value gate(graph& g, value gates, std::int64_t k, std::int64_t hidden) {
  return g.slice(gates, {k * hidden}, {(k + 1) * hidden}, {1});
}

void lower_recurrent(node_context& c, cell kind) {
  if (kind == cell::lstm)
    c.only_attrs({"activations", "clip", "direction", "hidden_size", "layout", "input_forget"});
  else if (kind == cell::gru)
    c.only_attrs(
        {"activations", "clip", "direction", "hidden_size", "layout", "linear_before_reset"});
  else
    c.only_attrs({"activations", "clip", "direction", "hidden_size", "layout"});
  graph& g = c.g;
  const std::int64_t gates = kind == cell::lstm ? 4 : kind == cell::gru ? 3 : 1;
  // The default activations only (f, g, h of the spec: sigmoid, tanh, tanh; an RNN's tanh).
  const std::vector<std::string> defaults =
      kind == cell::lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
      : kind == cell::gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                          : std::vector<std::string>{"Tanh"};
  if (const auto* a = c.attr("activations")) {
    for (int i = 0; i < a->strings_size(); ++i)
      if (a->strings(i) != defaults[static_cast<std::size_t>(i) % defaults.size()])
        c.fail(errc::unsupported,
               "activation " + a->strings(i) + " (kiln runs the default activations only)");
  }
  if (kind == cell::lstm && c.attr_int("input_forget", 0) != 0)
    c.fail(errc::unsupported, "input_forget = 1 (coupled input and forget gates)");
  const std::string direction = c.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    c.fail(errc::invalid_argument,
           "direction '" + direction + "' is not forward, reverse or bidirectional");
  const std::int64_t dirs = direction == "bidirectional" ? 2 : 1;
  const bool batch_first = c.attr_int("layout", 0) != 0;
  const bool linear_before_reset = c.attr_int("linear_before_reset", 0) != 0;
  const dtype t = c.type_of(0);

  value x = c.in(0);
  if (batch_first) x = g.transpose(x, {1, 0, 2});  // [seq, batch, input]
  const shape xd = g.dims_of(x), wd = c.dims_of(1);
  const std::int64_t steps = xd.dims[0], batch = xd.dims[1], input = xd.dims[2];
  if (xd.rank != 3 || steps == dyn || batch == dyn || input == dyn)
    c.fail(errc::unsupported,
           "X must be 3-D with static sizes (the layer is unrolled over its sequence), got " +
               to_string(xd));
  // Each step is some twenty graph ops: a declared length beyond this is refused rather than
  // unrolled into a graph that would exhaust memory (a model's sizes are untrusted input).
  constexpr std::int64_t most_steps = 4096;
  if (steps < 1 || steps > most_steps)
    c.fail(errc::unsupported, "a sequence of " + std::to_string(steps) +
                                  " steps (kiln unrolls 1 to " + std::to_string(most_steps) + ")");
  if (wd.rank != 3 || wd.dims[0] != dirs || wd.dims[1] % gates != 0)
    c.fail(errc::shape_mismatch, "W " + to_string(wd) + " is not [" + std::to_string(dirs) + ", " +
                                     std::to_string(gates) + " x hidden_size, input]");
  const std::int64_t hidden = c.attr_int("hidden_size", wd.dims[1] / gates);
  if (hidden * gates != wd.dims[1])
    c.fail(errc::shape_mismatch,
           "hidden_size " + std::to_string(hidden) + " does not match W " + to_string(wd));
  if (c.has(4)) {  // sequence_lens: kiln unrolls the whole sequence
    for (std::int64_t n : c.ints_input(4, "sequence_lens"))
      if (n != steps)
        c.fail(errc::unsupported, "sequence_lens " + std::to_string(n) + " below the sequence's " +
                                      std::to_string(steps) + " (kiln runs whole sequences)");
  }
  const std::optional<double> clip =
      c.has_attr("clip") ? std::optional(c.attr_float("clip", 0)) : std::nullopt;
  auto clipped = [&](value v) {
    return clip ? g.clip(v, g.constant(-*clip, t), g.constant(*clip, t)) : v;
  };
  auto zeros = [&](std::int64_t n) { return g.expand(g.constant(0.0, t), {batch, n}); };
  // Direction d's slice [1, ...] of an input, reshaped to `to`.
  auto of_direction = [&](value v, std::int64_t d, std::initializer_list<std::int64_t> to) {
    return g.reshape(g.slice(v, {d}, {d + 1}, {0}), to);
  };

  value x_rows = g.reshape(x, {steps * batch, input});
  std::vector<value> y_dirs, h_last, c_last;
  for (std::int64_t d = 0; d < dirs; ++d) {
    direction_weights dw{g.transpose(of_direction(c.in(1), d, {gates * hidden, input})),
                         g.transpose(of_direction(c.in(2), d, {gates * hidden, hidden})),
                         g.expand(g.constant(0.0, t), {gates * hidden}),
                         g.expand(g.constant(0.0, t), {gates * hidden}), std::nullopt};
    if (c.has(3)) {
      value b = of_direction(c.in(3), d, {2 * gates * hidden});
      dw.wb = g.slice(b, {0}, {gates * hidden});
      dw.rb = g.slice(b, {gates * hidden}, {2 * gates * hidden});
    }
    if (kind == cell::lstm && c.has(7)) dw.p = of_direction(c.in(7), d, {3 * hidden});
    // X W^T + Wb for every step at once: [seq x batch, G H].
    value projected = g.add(g.matmul(x_rows, dw.w), dw.wb);
    value h = c.has(5) ? of_direction(c.in(5), d, {batch, hidden}) : zeros(hidden);
    value cell_state =
        kind == cell::lstm && c.has(6) ? of_direction(c.in(6), d, {batch, hidden}) : zeros(hidden);
    // A GRU whose reset gate scales h before its product (linear_before_reset = 0) takes R's
    // z and r columns in the step's joint product, and R_h^T [H, H] in one of its own.
    const bool apart = kind == cell::gru && !linear_before_reset;
    const value r_joint = apart ? g.slice(dw.r, {0}, {2 * hidden}, {1}) : dw.r;
    const value rb_joint = apart ? g.slice(dw.rb, {0}, {2 * hidden}) : dw.rb;
    const value r_h = apart ? g.slice(dw.r, {2 * hidden}, {3 * hidden}, {1}) : dw.r;
    const value rb_h = apart ? g.slice(dw.rb, {2 * hidden}, {3 * hidden}) : dw.rb;
    const bool reverse = direction == "reverse" || d == 1;
    std::vector<value> y(static_cast<std::size_t>(steps), h);
    for (std::int64_t k = 0; k < steps; ++k) {
      const std::int64_t s = reverse ? steps - 1 - k : k;
      value xt = g.slice(projected, {s * batch}, {(s + 1) * batch}, {0});
      if (kind == cell::rnn) {
        h = g.tanh(clipped(g.add(g.add(xt, g.matmul(h, dw.r)), dw.rb)));
      } else if (kind == cell::gru) {  // gates z, r, h
        value rh = g.add(g.matmul(h, r_joint), rb_joint);
        value z = g.sigmoid(clipped(g.add(gate(g, xt, 0, hidden), gate(g, rh, 0, hidden))));
        value r = g.sigmoid(clipped(g.add(gate(g, xt, 1, hidden), gate(g, rh, 1, hidden))));
        value candidate;
        if (linear_before_reset) {
          candidate = g.add(gate(g, xt, 2, hidden), g.mul(r, gate(g, rh, 2, hidden)));
        } else {
          candidate = g.add(gate(g, xt, 2, hidden), g.add(g.matmul(g.mul(r, h), r_h), rb_h));
        }
        value n = g.tanh(clipped(candidate));
        h = g.add(g.mul(g.sub(g.constant(1.0, t), z), n), g.mul(z, h));
      } else {  // gates i, o, f, c; peepholes i, o, f
        value all = g.add(g.add(xt, g.matmul(h, dw.r)), dw.rb);
        auto peep = [&](value pre, std::int64_t k2, value state) {
          return dw.p ? g.add(pre, g.mul(g.slice(*dw.p, {k2 * hidden}, {(k2 + 1) * hidden}), state))
                      : pre;
        };
        value i = g.sigmoid(clipped(peep(gate(g, all, 0, hidden), 0, cell_state)));
        value f = g.sigmoid(clipped(peep(gate(g, all, 2, hidden), 2, cell_state)));
        value cand = g.tanh(clipped(gate(g, all, 3, hidden)));
        cell_state = g.add(g.mul(f, cell_state), g.mul(i, cand));
        value o = g.sigmoid(clipped(peep(gate(g, all, 1, hidden), 1, cell_state)));
        h = g.mul(o, g.tanh(cell_state));
      }
      y[static_cast<std::size_t>(s)] = g.unsqueeze(h, {0});  // at its own time step
    }
    y_dirs.push_back(g.unsqueeze(g.concat(y, 0), {1}));  // [seq, 1, batch, hidden]
    h_last.push_back(g.unsqueeze(h, {0}));
    c_last.push_back(g.unsqueeze(cell_state, {0}));
  }
  value y = g.concat(y_dirs, 1), y_h = g.concat(h_last, 0), y_c = g.concat(c_last, 0);
  if (batch_first) {
    y = g.transpose(y, {2, 0, 1, 3});  // [batch, seq, dirs, hidden]
    y_h = g.transpose(y_h, {1, 0, 2});
    y_c = g.transpose(y_c, {1, 0, 2});
  }
  if (c.wants(0)) c.out(0, y);
  if (c.wants(1)) c.out(1, y_h);
  if (kind == cell::lstm && c.wants(2)) c.out(2, y_c);
}

}  // namespace

void add_recurrent_lowerings(lowering_table& t) {
  t["RNN"] = [](node_context& c) { lower_recurrent(c, cell::rnn); };
  t["GRU"] = [](node_context& c) { lower_recurrent(c, cell::gru); };
  t["LSTM"] = [](node_context& c) { lower_recurrent(c, cell::lstm); };
}

}  // namespace kiln::onnx_import
