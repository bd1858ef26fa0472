// ONNX's control flow, resolved at import: If with a condition known then takes its branch (with
// a run-time condition, both branches are lowered and their results selected); Loop with a trip
// count and conditions known then, and Scan over its static sequence length, are unrolled, each
// step's body lowered onto the graph as ordinary ops. Where a Loop's count or condition, or a
// Scan's length, is known only at the call, the body is lowered onto a graph of its own instead
// (lower_at_call), which kiln::onnx::model runs once per step. Internal to kiln::onnx.
#include <algorithm>
#include <string>
#include <vector>

#include "cut_model.hpp"
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

// An attribute of one value per scan input or output, 0 for each where absent.
ints per_value(node_context& c, const char* name, std::size_t count) {
  ints v = c.attr_ints(name);
  if (v.empty()) return ints(count, 0);
  if (v.size() != count)
    c.fail(errc::invalid_argument, std::string(name) + " has " + std::to_string(v.size()) +
                                       " values, expected " + std::to_string(count));
  return v;
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

// The node's graph attribute `attribute` lowered onto a new body of b with parameters of these
// types and extents (then what it reads around it), but where `lists` gives a sequence of
// run-time length (a Loop's carried list, which the body only appends to); its outputs, each
// tensor a result of that body (a list's appends are the caller's to add).
struct apart {
  std::vector<slot> out;
  std::vector<std::pair<dtype, shape>> types;  // per tensor output
};
apart body_apart(node_context& c, body_at_call& b, const char* attribute,
                 const std::vector<std::pair<dtype, shape>>& parameters,
                 const std::vector<std::optional<call_list>>& lists = {}) {
  const ::onnx::AttributeProto* a = c.attr(attribute);
  if (!a || a->type() != ::onnx::AttributeProto::GRAPH ||
      a->g().input_size() != static_cast<int>(parameters.size()))
    c.fail(errc::invalid_argument, std::string("its ") + attribute + " takes " +
                                       std::to_string(a && a->has_g() ? a->g().input_size() : 0) +
                                       " inputs, expected " + std::to_string(parameters.size()));
  graph body;
  body.set_name(c.g.name());
  model_cutter cutter(body);  // (a body needing values known only at the call is cut itself)
  std::vector<slot> in;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    in.emplace_back();
    if (i < lists.size() && lists[i]) {
      in.back().list = lists[i];
      continue;
    }
    const auto& [t, d] = parameters[i];
    const std::vector<graph::extent> sizes(d.dims.begin(), d.dims.begin() + d.rank);
    const std::string& name = a->g().input(static_cast<int>(i)).name();
    in.back().value = body.input(name, t, sizes);
    cutter.declare_input(name, t, d);
  }
  std::vector<slot> out =
      c.subgraph_apart(attribute, cutter, std::move(in), b.captured.emplace_back());
  std::vector<std::pair<dtype, shape>> types(out.size());
  for (std::size_t o = 0; o < out.size(); ++o) {
    if (out[o].list) {
      if (cutter.cut())
        c.fail(errc::unsupported, std::string(attribute) +
                                      " is cut at the call and appends to a "
                                      "sequence it carries");
      continue;
    }
    if (out[o].sequence || (!out[o].known && !out[o].value))
      c.fail(errc::unsupported, std::string(attribute) + " output " + std::to_string(o) +
                                    " is a sequence or an optional (a body at the call gives "
                                    "tensors, and appends to a sequence it carries)");
    const std::string name = "result." + std::to_string(o);
    graph* holder = &body;
    if (cutter.cut()) {
      holder = &cutter.output(out[o], name, out[o].part);
    } else {
      out[o].value = value_of(body, out[o]);
      body.output(name, *out[o].value);
    }
    types[o] = {holder->type_of(*out[o].value), holder->dims_of(*out[o].value)};
  }
  b.rests.push_back(cutter.finish());
  b.bodies.push_back(std::move(body));
  return {std::move(out), std::move(types)};
}

// A tensor input's element type and extents (a sequence or an absent optional refused).
std::pair<dtype, shape> tensor_type(node_context& c, int i, const std::string& what) {
  const slot& v = c.input_slot(i);
  if (v.sequence || (!v.known && !v.value))
    c.fail(errc::unsupported, what +
                                  " is a sequence or an optional (a body at the call carries "
                                  "tensors)");
  if (v.known) return {v.known->type, v.known->dims};
  return {c.g.type_of(*v.value), c.g.dims_of(*v.value)};
}

// Per-step results stacked along `axis` (negative: counted from the end of the result): their
// extents with the run-time count there.
call_sized_result stacked_type(node_context& c, dtype t, const shape& row, std::int64_t axis,
                               const std::string& what) {
  const std::int64_t at = axis < 0 ? axis + row.rank + 1 : axis;
  if (at < 0 || at > row.rank || row.rank == max_rank)
    c.fail(errc::unsupported,
           what + ": axis " + std::to_string(axis) + " for steps of dims " + to_string(row));
  shape d;
  d.rank = row.rank + 1;
  for (int k = 0, from = 0; k < d.rank; ++k) d.dims[k] = k == at ? dyn : row.dims[from++];
  return {t, d, static_cast<int>(at)};
}

// Loop: parameters iteration, condition, carried values; results the carried values' last, then
// the scan outputs stacked along axis 0. A carried sequence (empty at first, or one a Loop at the
// call made) is a list the call keeps on the host: the body appends to it, and its results
// after the rest are what one step appends.
body_at_call loop_at_call(node_context& c) {
  c.only_attrs({"body"});
  const int carried = c.inputs() - 2;
  if (carried < 0) c.fail(errc::invalid_argument, "Loop takes a trip count and a condition first");
  body_at_call b;
  std::vector<std::pair<dtype, shape>> parameters{{dtype::i64, shape{}}, {dtype::boolean, shape{}}};
  std::vector<std::optional<call_list>> lists(2);
  for (int k = 0; k < carried; ++k) {
    const slot& v = c.input_slot(2 + k);
    if (v.list || (v.sequence && v.sequence->empty())) {
      call_list l = v.list ? *v.list : call_list{};
      l.carried = k;
      lists.push_back(std::move(l));
      parameters.emplace_back(dtype::f32, shape{});
      b.results.push_back({});
      continue;
    }
    lists.emplace_back();
    parameters.push_back(tensor_type(c, 2 + k, "carried value " + std::to_string(k)));
    b.results.push_back({parameters.back().first, parameters.back().second, -1});
  }
  const apart body = body_apart(c, b, "body", parameters, lists);
  const std::vector<slot>& out = body.out;
  if (out.size() < static_cast<std::size_t>(1 + carried) ||
      out.size() - 1 < static_cast<std::size_t>(c.outputs()))
    c.fail(errc::invalid_argument, "the body gives " + std::to_string(out.size()) +
                                       " outputs for a condition, " + std::to_string(carried) +
                                       " carried values and " +
                                       std::to_string(c.outputs() - carried) + " scan outputs");
  for (int k = carried; k < c.outputs(); ++k) {
    const slot& v = out[static_cast<std::size_t>(1 + k)];
    if (v.list)
      c.fail(errc::unsupported, "scan output " + std::to_string(k - carried) + " is a sequence");
    const auto& [t, d] = body.types[static_cast<std::size_t>(1 + k)];
    b.results.push_back(stacked_type(c, t, d, 0, "scan output " + std::to_string(k - carried)));
  }
  // Each carried list's appends, after the body's other results; the list's type from them.
  for (int k = 0; k < carried; ++k) {
    const auto u = static_cast<std::size_t>(k);
    if (!lists[2 + u]) {
      b.appends.push_back(-1);
      if (out[1 + u].list)
        c.fail(errc::unsupported, "carried value " + std::to_string(k) +
                                      " is a tensor, and the body gives a sequence for it");
      continue;
    }
    const slot& v = out[1 + u];
    if (!v.list || v.list->carried != k)
      c.fail(errc::unsupported, "carried value " + std::to_string(k) +
                                    " is a sequence: the body must give it back with tensors "
                                    "appended (SequenceInsert without a position)");
    for (std::size_t j = 0; j < v.list->appended.size(); ++j)
      b.bodies[0].output("append." + std::to_string(k) + "." + std::to_string(j),
                         value_of(b.bodies[0], v.list->appended[j]));
    b.appends.push_back(static_cast<int>(v.list->appended.size()));
    b.results[u] = {v.list->type, v.list->dims, -1, true};
    if (v.list->open)
      c.fail(errc::unsupported, "carried value " + std::to_string(k) +
                                    ", a sequence, has nothing appended to it (its element type "
                                    "and extents would not be known)");
  }
  return b;
}

// Scan (opset 9 on): parameters states, one step of each scan input; results the states' last,
// then the scan outputs stacked along their axes.
body_at_call scan_at_call(node_context& c) {
  if (c.opset() < 9) c.fail(errc::unsupported, "a Scan of opset 8 (its batch axis) at the call");
  c.only_attrs({"body", "num_scan_inputs", "scan_input_axes", "scan_input_directions",
                "scan_output_axes", "scan_output_directions"});
  const std::int64_t m = c.attr_int("num_scan_inputs", -1);
  const int states = c.inputs() - static_cast<int>(m);
  if (m < 1 || states < 0)
    c.fail(errc::invalid_argument, "num_scan_inputs " + std::to_string(m) + " for " +
                                       std::to_string(c.inputs()) + " inputs");
  const ints in_axes = per_value(c, "scan_input_axes", static_cast<std::size_t>(m));
  const ints out_axes =
      per_value(c, "scan_output_axes", static_cast<std::size_t>(c.outputs() - states));
  body_at_call b;
  std::vector<std::pair<dtype, shape>> parameters;
  for (int k = 0; k < states; ++k) {
    parameters.push_back(tensor_type(c, k, "state " + std::to_string(k)));
    b.results.push_back({parameters.back().first, parameters.back().second, -1});
  }
  for (int j = 0; j < m; ++j) {
    auto [t, d] = tensor_type(c, states + j, "scan input " + std::to_string(j));
    const std::int64_t a = in_axes[static_cast<std::size_t>(j)] < 0
                               ? in_axes[static_cast<std::size_t>(j)] + d.rank
                               : in_axes[static_cast<std::size_t>(j)];
    if (a < 0 || a >= d.rank)
      c.fail(errc::invalid_argument, "scan input " + std::to_string(j) + ": axis " +
                                         std::to_string(in_axes[static_cast<std::size_t>(j)]) +
                                         " for dims " + to_string(d));
    shape step;
    step.rank = d.rank - 1;
    for (int k = 0, to = 0; k < d.rank; ++k)
      if (k != a) step.dims[to++] = d.dims[k];
    parameters.emplace_back(t, step);
  }
  const apart body = body_apart(c, b, "body", parameters);
  if (body.out.size() != static_cast<std::size_t>(c.outputs()))
    c.fail(errc::invalid_argument, "the body gives " + std::to_string(body.out.size()) +
                                       " outputs for the node's " + std::to_string(c.outputs()));
  for (int k = states; k < c.outputs(); ++k) {
    const auto u = static_cast<std::size_t>(k);
    if (body.out[u].list) c.fail(errc::unsupported, "a Scan's body gives a sequence");
    b.results.push_back(stacked_type(c, body.types[u].first, body.types[u].second,
                                     out_axes[static_cast<std::size_t>(k - states)],
                                     "scan output " + std::to_string(k - states)));
  }
  return b;
}

// If: both branches apart, one run; each result of the branches' type and rank, its extents
// the branches' where they agree, else a run-time size.
body_at_call if_at_call(node_context& c) {
  c.only_attrs({"then_branch", "else_branch"});
  body_at_call b;
  const apart taken = body_apart(c, b, "then_branch", {}),
              other = body_apart(c, b, "else_branch", {});
  if (taken.out.size() != other.out.size() ||
      taken.out.size() < static_cast<std::size_t>(c.outputs()))
    c.fail(errc::invalid_argument, "the branches give " + std::to_string(taken.out.size()) +
                                       " and " + std::to_string(other.out.size()) + " outputs");
  for (std::size_t o = 0; o < taken.out.size(); ++o) {
    if (taken.out[o].list || other.out[o].list)
      c.fail(errc::unsupported, "the branches give a sequence for output " + std::to_string(o));
    auto [t, d] = taken.types[o];
    const auto& [u, e] = other.types[o];
    if (t != u || d.rank != e.rank)
      c.fail(errc::unsupported, "the branches give " + std::string(kiln::name(t)) + to_string(d) +
                                    " and " + std::string(kiln::name(u)) + to_string(e) +
                                    " for output " + std::to_string(o) +
                                    " (kiln needs one element type and rank)");
    for (int a = 0; a < d.rank; ++a)
      if (d.dims[a] != e.dims[a]) d.dims[a] = dyn;
    b.results.push_back({t, d, -1});
  }
  return b;
}

}  // namespace

body_at_call lower_at_call(node_context& c) {
  if (c.op() == "SplitToSequence") return split_to_sequence_at_call(c);
  if (c.op() == "Scan") return scan_at_call(c);
  if (c.op() == "If") return if_at_call(c);
  if (c.op() == "Loop") return loop_at_call(c);
  c.fail(errc::unsupported, "it cannot run at the call");
}

void add_control_flow_lowerings(lowering_table& t) {
  t["If"] = lower_if;
  t["Loop"] = lower_loop;
  t["Scan"] = lower_scan;
}

}  // namespace kiln::onnx_import
