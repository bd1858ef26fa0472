// ONNX's control flow, resolved at import: If with a condition known then takes its branch (with
// a run-time condition, both branches are lowered and their results selected); Loop with a trip
// count and conditions known then, and Scan over its static sequence length, are unrolled, each
// step's body lowered onto the graph as ordinary ops. Where that needs values known only at the
// call, the node runs then instead (lower_at_call.cpp). Internal to kiln::onnx.
#include <algorithm>
#include <string>
#include <vector>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;
using ints = std::vector<std::int64_t>;

// Steps an unrolled Loop or Scan may take (each lowers its body once more onto the graph).
constexpr std::int64_t unroll_limit = 4096;

// A Loop body's iteration number (i64) and condition (bool), known at import.
slot known_iteration(std::int64_t i) {
  slot s;
  s.known = i64_tensor({i}, shape{});
  return s;
}
slot known_true() {
  slot s;
  s.known = host_tensor{dtype::boolean, shape{}, {1}};
  return s;
}

// A condition known at import: its single element, true or false.
bool truth(const node_context& c, const host_tensor& t, const std::string& what) {
  if (t.count() != 1)
    c.fail(errc::shape_mismatch,
           what + " holds " + std::to_string(t.count()) + " elements, expected 1");
  return t.type == dtype::boolean ? t.bytes[0] != 0 : t.doubles()[0] != 0;
}

// Per-step values stacked along a new axis `axis` (negative: counted from the end of the
// result), in step order or reversed.
value stacked(node_context& c, const std::vector<slot>& steps, std::int64_t axis, bool reverse,
              const std::string& what) {
  graph& g = c.g;
  if (steps.empty())
    c.fail(errc::unsupported, what + " of no steps (its extents would not be known)");
  std::vector<value> parts;
  for (const slot& s : steps) {
    if (s.sequence) c.fail(errc::unsupported, what + " is a sequence");
    value v = value_of(g, s);
    const std::int64_t rank = g.dims_of(v).rank;
    const std::int64_t at = axis < 0 ? axis + rank + 1 : axis;
    if (at < 0 || at > rank)
      c.fail(errc::invalid_argument, what + ": axis " + std::to_string(axis) +
                                         " for steps of rank " + std::to_string(rank));
    const std::int64_t where[] = {at};
    parts.push_back(g.unsqueeze(v, where));
  }
  if (reverse) std::reverse(parts.begin(), parts.end());
  const std::int64_t rank = g.dims_of(parts[0]).rank;
  return parts.size() == 1 ? parts[0] : g.concat(parts, axis < 0 ? axis + rank : axis);
}

// Output o of an If whose cond is known at the call: each branch's tensor selected by cond, item
// by item for sequences (of one length) and optionals (present in both, or in neither).
slot selected(node_context& c, value cond, const slot& a, const slot& b, std::size_t o) {
  graph& g = c.g;
  if (a.present.value_or(true) != b.present.value_or(true) ||
      a.sequence.has_value() != b.sequence.has_value() ||
      (a.sequence && a.sequence->size() != b.sequence->size()))
    c.known_input(0, "cond, where the branches give output " + std::to_string(o) +
                         " as optionals or sequences that differ in presence or length,");
  slot s;
  s.present = a.present;
  if (!a.present.value_or(true)) return s;
  if (a.sequence) {
    s.sequence.emplace();
    for (std::size_t k = 0; k < a.sequence->size(); ++k)
      s.sequence->push_back(selected(c, cond, (*a.sequence)[k], (*b.sequence)[k], o));
    return s;
  }
  const value x = value_of(g, a), y = value_of(g, b);
  if (g.dims_of(x) != g.dims_of(y) || g.type_of(x) != g.type_of(y))
    c.needs_call_values("cond is computed at run time and the branches give " +
                        std::string(kiln::name(g.type_of(x))) + to_string(g.dims_of(x)) + " and " +
                        std::string(kiln::name(g.type_of(y))) + to_string(g.dims_of(y)) +
                        " for output " + std::to_string(o) +
                        " (kiln computes both branches and selects: they must agree)");
  s.value = g.select(cond, x, y);
  return s;
}

void lower_if(node_context& c) {
  c.only_attrs({"then_branch", "else_branch"});
  if (const host_tensor* t = c.known(0)) {
    const bool taken = truth(c, *t, "cond");
    std::vector<slot> out = c.subgraph(taken ? "then_branch" : "else_branch", {}, "");
    for (std::size_t o = 0; o < out.size(); ++o) c.out_slot(static_cast<int>(o), out[o]);
    return;
  }
  // A condition known at the call: both branches computed, each result selected.
  graph& g = c.g;
  std::vector<slot> then_out = c.subgraph("then_branch", {}, "");
  std::vector<slot> else_out = c.subgraph("else_branch", {}, "");
  if (then_out.size() != else_out.size())
    c.fail(errc::invalid_argument, "the branches give " + std::to_string(then_out.size()) +
                                       " and " + std::to_string(else_out.size()) + " outputs");
  const value cond = g.reshape(c.in(0), ints{});
  for (std::size_t o = 0; o < then_out.size(); ++o)
    c.out_slot(static_cast<int>(o), selected(c, cond, then_out[o], else_out[o], o));
}

// Loop: unrolled while the trip count (input 0) and the condition (input 1, then the body's
// first output after each step) allow; each must be known at import.
void lower_loop(node_context& c) {
  c.only_attrs({"body"});
  const int carried = c.inputs() - 2;
  if (carried < 0) c.fail(errc::invalid_argument, "Loop takes a trip count and a condition first");
  std::int64_t trips = -1;  // none: until the condition is false
  if (c.has(0)) {
    if (!c.known(0))
      c.needs_call_values("M (the trip count) is computed at run time; kiln needs it at import");
    const ints m = c.ints_input(0, "M (the trip count)");
    if (m.size() != 1) c.fail(errc::shape_mismatch, "M (the trip count) is not a scalar");
    trips = std::max<std::int64_t>(m[0], 0);
  }
  bool go = true;
  if (c.has(1)) {
    const host_tensor* t = c.known(1);
    if (!t) c.needs_call_values("cond (input 1) is computed at run time; kiln needs it at import");
    go = truth(c, *t, "cond");
  } else if (trips < 0) {
    c.fail(errc::invalid_argument, "neither a trip count nor a condition: the loop never ends");
  }
  std::vector<slot> state;
  for (int k = 0; k < carried; ++k) state.push_back(c.input_slot(2 + k));
  std::vector<std::vector<slot>> scans;
  std::int64_t i = 0;
  for (; go && (trips < 0 || i < trips); ++i) {
    if (i == unroll_limit)
      c.needs_call_values("more than " + std::to_string(unroll_limit) +
                          " iterations (kiln unrolls a Loop at import)");
    std::vector<slot> in = {known_iteration(i), known_true()};
    in.insert(in.end(), state.begin(), state.end());
    std::vector<slot> out = c.subgraph("body", std::move(in), "iteration " + std::to_string(i));
    if (out.size() < static_cast<std::size_t>(1 + carried))
      c.fail(errc::invalid_argument, "the body gives " + std::to_string(out.size()) +
                                         " outputs for " + std::to_string(carried) +
                                         " loop-carried values and a condition");
    if (!out[0].known)
      c.needs_call_values("the body's condition is computed at run time (iteration " +
                          std::to_string(i) + ")");
    go = truth(c, *out[0].known, "the body's condition");
    std::copy(out.begin() + 1, out.begin() + 1 + carried, state.begin());
    scans.resize(out.size() - 1 - static_cast<std::size_t>(carried));
    for (std::size_t k = 0; k < scans.size(); ++k)
      scans[k].push_back(out[1 + static_cast<std::size_t>(carried) + k]);
  }
  for (int k = 0; k < carried; ++k) c.out_slot(k, state[static_cast<std::size_t>(k)]);
  for (int k = carried; k < c.outputs(); ++k) {
    const auto u = static_cast<std::size_t>(k - carried);
    if (u >= scans.size())
      c.fail(errc::unsupported, "scan output " + std::to_string(u) + " of a loop of no iterations");
    c.out(k, stacked(c, scans[u], 0, false, "scan output " + std::to_string(u)));
  }
}

// One Scan over states and scan inputs (each read along its axis, forward or reversed): the
// final states and the scan outputs, each stacked along its axis.
std::vector<slot> scan_steps(node_context& c, std::vector<slot> state, const std::vector<value>& xs,
                             const ints& in_axes, const ints& in_reverse, const ints& out_axes,
                             const ints& out_reverse, const std::string& label) {
  graph& g = c.g;
  std::int64_t steps = -1;
  std::vector<int> axes;
  for (std::size_t j = 0; j < xs.size(); ++j) {
    const shape d = g.dims_of(xs[j]);
    const std::int64_t a = in_axes[j] < 0 ? in_axes[j] + d.rank : in_axes[j];
    if (a < 0 || a >= d.rank)
      c.fail(errc::invalid_argument, "scan input " + std::to_string(j) + ": axis " +
                                         std::to_string(in_axes[j]) + " for dims " + to_string(d));
    if (d.dims[a] == dyn)
      c.needs_call_values("scan input " + std::to_string(j) +
                          " has a run-time length (kiln unrolls a Scan at import)");
    if (steps >= 0 && d.dims[a] != steps)
      c.fail(errc::shape_mismatch, "scan inputs of lengths " + std::to_string(steps) + " and " +
                                       std::to_string(d.dims[a]));
    steps = d.dims[a];
    axes.push_back(static_cast<int>(a));
  }
  if (steps > unroll_limit)
    c.needs_call_values("a sequence of " + std::to_string(steps) + " steps (kiln unrolls a Scan " +
                        "at import, at most " + std::to_string(unroll_limit) + ")");
  const std::size_t n = state.size();
  std::vector<std::vector<slot>> scans;
  for (std::int64_t t = 0; t < steps; ++t) {
    std::vector<slot> in = state;
    for (std::size_t j = 0; j < xs.size(); ++j) {
      const std::int64_t at = in_reverse[j] ? steps - 1 - t : t;
      const std::int64_t from[] = {at}, to[] = {at + 1}, along[] = {axes[j]};
      slot s;
      s.value = g.squeeze(g.slice(xs[j], from, to, along), along);
      in.push_back(s);
    }
    std::vector<slot> out = c.subgraph("body", std::move(in), label + "step " + std::to_string(t));
    if (out.size() < n)
      c.fail(errc::invalid_argument, "the body gives " + std::to_string(out.size()) +
                                         " outputs for " + std::to_string(n) + " states");
    std::copy(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n), state.begin());
    scans.resize(out.size() - n);
    for (std::size_t k = 0; k < scans.size(); ++k) scans[k].push_back(out[n + k]);
  }
  for (std::size_t k = 0; k < scans.size(); ++k) {
    slot s;
    s.value =
        stacked(c, scans[k], k < out_axes.size() ? out_axes[k] : 0,
                k < out_reverse.size() && out_reverse[k] != 0, "scan output " + std::to_string(k));
    state.push_back(s);
  }
  return state;
}

void lower_scan(node_context& c) {
  const bool batched = c.opset() < 9;  // opset 8: a batch axis first, then the sequence
  if (batched)
    c.only_attrs({"body", "num_scan_inputs", "directions"});
  else
    c.only_attrs({"body", "num_scan_inputs", "scan_input_axes", "scan_input_directions",
                  "scan_output_axes", "scan_output_directions"});
  graph& g = c.g;
  const int first = batched ? 1 : 0;
  if (batched && c.has(0))
    c.fail(errc::unsupported, "sequence_lens (kiln: every sequence runs its whole length)");
  const std::int64_t m = c.attr_int("num_scan_inputs", -1);
  const int states = c.inputs() - first - static_cast<int>(m);
  if (m < 1 || states < 0)
    c.fail(errc::invalid_argument, "num_scan_inputs " + std::to_string(m) + " for " +
                                       std::to_string(c.inputs() - first) + " inputs");
  const auto scan_outputs = static_cast<std::size_t>(c.outputs() - states);
  const auto inputs = static_cast<std::size_t>(m);
  std::vector<slot> state;
  std::vector<value> xs;
  for (int k = 0; k < states; ++k) state.push_back(c.input_slot(first + k));
  for (int j = 0; j < m; ++j) xs.push_back(c.in(first + states + j));
  if (!batched) {
    std::vector<slot> out = scan_steps(c, state, xs, per_value(c, "scan_input_axes", inputs),
                                       per_value(c, "scan_input_directions", inputs),
                                       per_value(c, "scan_output_axes", scan_outputs),
                                       per_value(c, "scan_output_directions", scan_outputs), "");
    for (std::size_t o = 0; o < out.size(); ++o) c.out_slot(static_cast<int>(o), out[o]);
    return;
  }
  // Opset 8: each batch entry scanned on its own (states [batch, ...], scan inputs [batch,
  // sequence, ...]), the results stacked along the batch axis again.
  const ints directions = per_value(c, "directions", inputs);
  const shape d = g.dims_of(xs[0]);
  if (d.rank < 2 || d.dims[0] == dyn)
    c.fail(errc::unsupported, "scan input dims " + to_string(d) + " (kiln: a static batch)");
  const std::int64_t batch = d.dims[0];
  std::vector<std::vector<slot>> per_batch;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t from[] = {b}, to[] = {b + 1}, along[] = {0};
    auto entry = [&](value v) { return g.squeeze(g.slice(v, from, to, along), along); };
    std::vector<slot> s;
    for (const slot& x : state) {
      slot e;
      e.value = entry(value_of(g, x));
      s.push_back(e);
    }
    std::vector<value> x;
    for (value v : xs) x.push_back(entry(v));
    per_batch.push_back(scan_steps(c, s, x, ints(inputs, 0), directions, ints(scan_outputs, 0),
                                   ints(scan_outputs, 0),
                                   "batch entry " + std::to_string(b) + ", "));
  }
  for (std::size_t o = 0; o < per_batch[0].size(); ++o) {
    std::vector<slot> entries;
    for (const auto& r : per_batch) entries.push_back(r[o]);
    c.out(static_cast<int>(o), stacked(c, entries, 0, false, "output " + std::to_string(o)));
  }
}

}  // namespace

std::vector<std::int64_t> per_value(node_context& c, const char* name, std::size_t count) {
  std::vector<std::int64_t> v = c.attr_ints(name);
  if (v.empty()) return std::vector<std::int64_t>(count, 0);
  if (v.size() != count)
    c.fail(errc::invalid_argument, std::string(name) + " has " + std::to_string(v.size()) +
                                       " values, expected " + std::to_string(count));
  return v;
}

void add_control_flow_lowerings(lowering_table& t) {
  t["If"] = lower_if;
  t["Loop"] = lower_loop;
  t["Scan"] = lower_scan;
}

}  // namespace kiln::onnx_import
