// ONNX nodes run at the call, where what they compute depends on values known only then: a Loop
// whose trip count or condition is computed at run time, a Scan of a run-time length, an If whose
// branches' extents differ (each body lowered onto graphs of its own, cut in turn where it needs
// to be, for kiln::onnx::model to run per step), a SplitToSequence into a list of run-time
// length. Internal to kiln::onnx.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cut_model.hpp"
#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;
using ints = std::vector<std::int64_t>;

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

}  // namespace kiln::onnx_import
