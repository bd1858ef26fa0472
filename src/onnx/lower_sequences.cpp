// ONNX's sequence ops where the sequence's length and the positions used are known at import:
// the sequence is a list of the importer's tensors (graph values or known tensors) and exists only
// while importing, so SequenceAt, ConcatFromSequence and SequenceLength leave ordinary graph ops
// (or constants) behind. Optionals likewise: whether one holds its element is known at import.
// Internal to kiln::onnx.
#include <algorithm>
#include <string>
#include <vector>

#include "node_context.hpp"

namespace kiln::onnx_import {

namespace {

using value = graph::value;

// A position input (a scalar, negative from the end) checked against [-n, n - 1], or [-n, n]
// where the position may be one past the end (SequenceInsert).
std::int64_t position(const node_context& c, int i, std::int64_t n, bool past_end) {
  const auto v = c.ints_input(i, "position");
  if (v.size() != 1) c.fail(errc::shape_mismatch, "position is not a scalar");
  const std::int64_t p = v[0] < 0 ? v[0] + n : v[0];
  if (p < 0 || p > (past_end ? n : n - 1))
    c.fail(errc::invalid_argument, "position " + std::to_string(v[0]) + " in a sequence of " +
                                       std::to_string(n) + " tensors");
  return p;
}

// The input as the importer holds it (a graph value, a known tensor, or both).
slot tensor_of_input(node_context& c, int i) {
  slot s;
  if (const host_tensor* t = c.known(i))
    s.known = *t;
  else
    s.value = c.in(i);
  return s;
}

void lower_sequence_empty(node_context& c) {
  c.only_attrs({"dtype"});
  c.out_sequence(0, {});
}

void lower_sequence_construct(node_context& c) {
  c.only_attrs({});
  std::vector<slot> items;
  for (int i = 0; i < c.inputs(); ++i) items.push_back(tensor_of_input(c, i));
  c.out_sequence(0, std::move(items));
}

// Inside a Loop's body at the call, an append to the list the loop carries: one more tensor each
// step, of one element type and rank (extents run-time sizes where they differ).
void append_to_list(node_context& c) {
  if (c.has(2)) c.fail(errc::unsupported, "a position into a sequence of run-time length");
  slot out = c.input_slot(0);
  call_list& l = *out.list;
  const dtype t = c.type_of(1);
  const shape d = c.dims_of(1);
  if (!l.open && (t != l.type || d.rank != l.dims.rank))
    c.fail(errc::dtype_mismatch, "appending " + std::string(kiln::name(t)) + to_string(d) +
                                     " to a sequence of " + std::string(kiln::name(l.type)) +
                                     to_string(l.dims));
  if (l.open) {
    l.type = t;
    l.dims = d;
  }
  for (int a = 0; a < d.rank; ++a)
    if (l.dims.dims[a] != d.dims[a]) l.dims.dims[a] = dyn;
  l.open = false;
  l.appended.push_back(tensor_of_input(c, 1));
  c.out_slot(0, std::move(out));
}

void lower_sequence_insert(node_context& c) {
  c.only_attrs({});
  if (c.input_slot(0).list) return append_to_list(c);  // (in a Loop's body at the call)
  std::vector<slot> items = c.sequence_in(0);
  const auto n = static_cast<std::int64_t>(items.size());
  const std::int64_t p = c.has(2) ? position(c, 2, n, true) : n;
  items.insert(items.begin() + p, tensor_of_input(c, 1));
  c.out_sequence(0, std::move(items));
}

void lower_sequence_erase(node_context& c) {
  c.only_attrs({});
  std::vector<slot> items = c.sequence_in(0);
  const auto n = static_cast<std::int64_t>(items.size());
  if (n == 0) c.fail(errc::invalid_argument, "erasing from an empty sequence");
  const std::int64_t p = c.has(1) ? position(c, 1, n, false) : n - 1;
  items.erase(items.begin() + p);
  c.out_sequence(0, std::move(items));
}

void lower_sequence_at(node_context& c) {
  c.only_attrs({});
  const std::vector<slot>& items = c.sequence_in(0);
  const auto n = static_cast<std::int64_t>(items.size());
  c.out_slot(0, items[static_cast<std::size_t>(position(c, 1, n, false))]);
}

void lower_sequence_length(node_context& c) {
  c.only_attrs({});
  c.out_known(0, i64_tensor({static_cast<std::int64_t>(c.sequence_in(0).size())}, shape{}));
}

// The sequence's tensors joined along axis (new_axis: stacked along a new axis there).
void lower_concat_from_sequence(node_context& c) {
  c.only_attrs({"axis", "new_axis"});
  graph& g = c.g;
  const std::vector<slot>& items = c.sequence_in(0);
  if (items.empty()) c.fail(errc::invalid_argument, "the sequence is empty");
  const bool stack = c.attr_int("new_axis", 0) != 0;
  if (!c.has_attr("axis")) c.fail(errc::invalid_argument, "the axis attribute is required");
  std::int64_t axis = c.attr_int("axis", 0);
  std::vector<value> parts;
  for (const slot& s : items) {
    value v = value_of(g, s);
    if (stack) {
      const std::int64_t rank = g.dims_of(v).rank;
      const std::int64_t at = axis < 0 ? axis + rank + 1 : axis;
      if (at < 0 || at > rank)
        c.fail(errc::invalid_argument, "axis " + std::to_string(axis) + " for new_axis over rank " +
                                           std::to_string(rank) + " tensors");
      const std::int64_t where[] = {at};
      v = g.unsqueeze(v, where);
    }
    parts.push_back(v);
  }
  c.out(0, g.concat(parts, axis));
}

// The input's parts along axis: of the sizes `split` lists, of `split` elements each (the last
// smaller), or of 1 element each (squeezed unless keepdims).
void lower_split_to_sequence(node_context& c) {
  c.only_attrs({"axis", "keepdims"});
  graph& g = c.g;
  const shape d = c.dims_of(0);
  std::int64_t axis = c.attr_int("axis", 0);
  if (axis < -d.rank || axis >= d.rank)
    c.fail(errc::invalid_argument,
           "axis " + std::to_string(axis) + " for an input of rank " + std::to_string(d.rank));
  if (axis < 0) axis += d.rank;
  // A run-time split or size: a list of run-time length, split at the call.
  if (c.has(1) && !c.known(1))
    c.needs_call_values("split (input 1) is computed at run time; kiln needs it at import");
  const std::vector<std::int64_t> split =
      c.has(1) ? c.ints_input(1, "split") : std::vector<std::int64_t>{};
  const std::int64_t size = d.dims[axis];
  if (size == dyn) c.needs_call_values("splitting a run-time size");
  std::vector<std::int64_t> sizes;
  bool squeeze = false;
  if (!c.has(1)) {
    sizes.assign(static_cast<std::size_t>(size), 1);
    squeeze = c.attr_int("keepdims", 1) == 0;
  } else if (c.dims_of(1).rank == 0) {
    const std::int64_t each = split[0];
    if (each < 1) c.fail(errc::invalid_argument, "split " + std::to_string(each));
    for (std::int64_t at = 0; at < size; at += each) sizes.push_back(std::min(each, size - at));
  } else {
    sizes = split;
  }
  std::vector<slot> items;
  if (!sizes.empty() || size != 0) {
    for (value v : g.split(c.in(0), sizes, axis)) {
      const std::int64_t at[] = {axis};
      items.push_back(slot{squeeze ? g.squeeze(v, at) : v, std::nullopt, std::nullopt});
    }
  }
  c.out_sequence(0, std::move(items));
}

// SequenceMap: its body run once per position of the sequences (of one length), each run given
// the sequences' tensors there and the other inputs whole; each output a sequence of the runs'.
void lower_sequence_map(node_context& c) {
  c.only_attrs({"body"});
  std::size_t n = 0;
  bool any = false;
  for (int i = 0; i < c.inputs(); ++i) {
    if (!c.has(i) || !c.input_slot(i).sequence) continue;
    const std::size_t length = c.sequence_in(i).size();
    if (any && length != n)
      c.fail(errc::invalid_argument, "the sequences hold " + std::to_string(n) + " and " +
                                         std::to_string(length) + " tensors");
    n = length, any = true;
  }
  if (!c.has(0) || !c.input_slot(0).sequence)
    c.fail(errc::invalid_argument, "input 0 is not a sequence");
  std::vector<std::vector<slot>> outputs(static_cast<std::size_t>(c.outputs()));
  for (std::size_t k = 0; k < n; ++k) {
    std::vector<slot> given;
    for (int i = 0; i < c.inputs(); ++i)
      given.push_back(c.input_slot(i).sequence ? c.sequence_in(i)[k] : c.input_slot(i));
    std::vector<slot> out = c.subgraph("body", std::move(given), "position " + std::to_string(k));
    if (out.size() != outputs.size())
      c.fail(errc::invalid_argument, "the body gives " + std::to_string(out.size()) +
                                         " outputs for the node's " +
                                         std::to_string(outputs.size()));
    for (std::size_t o = 0; o < out.size(); ++o) outputs[o].push_back(std::move(out[o]));
  }
  for (std::size_t o = 0; o < outputs.size(); ++o)
    c.out_sequence(static_cast<int>(o), std::move(outputs[o]));
}

// Optional: its input, present; with none, absent (its `type` attribute names what it would hold).
void lower_optional(node_context& c) {
  c.only_attrs({"type"});
  slot s = c.has(0) ? c.input_slot(0) : slot{};
  s.present = c.has(0);
  c.out_slot(0, std::move(s));
}

void lower_optional_has_element(node_context& c) {
  c.only_attrs({});
  const bool has = c.has(0) && c.input_slot(0).present.value_or(true);
  c.out_known(0, host_tensor{dtype::boolean, shape{}, {static_cast<unsigned char>(has)}});
}

// The element of a present optional (a tensor or sequence given as it is, from opset 18, passes).
void lower_optional_get_element(node_context& c) {
  c.only_attrs({});
  slot s = c.input_slot(0);
  if (!s.present.value_or(true)) c.fail(errc::invalid_argument, "the optional input is empty");
  s.present.reset();
  c.out_slot(0, std::move(s));
}

}  // namespace

body_at_call split_to_sequence_at_call(node_context& c) {
  c.only_attrs({"axis", "keepdims"});
  shape d = c.dims_of(0);
  std::int64_t axis = c.attr_int("axis", 0);
  if (axis < -d.rank || axis >= d.rank)
    c.fail(errc::invalid_argument,
           "axis " + std::to_string(axis) + " for an input of rank " + std::to_string(d.rank));
  if (axis < 0) axis += d.rank;
  if (c.has(1)) {  // parts of run-time sizes
    d.dims[axis] = dyn;
  } else if (c.attr_int("keepdims", 1) != 0) {  // parts of one
    d.dims[axis] = 1;
  } else {  // parts of one, squeezed
    for (std::int64_t a = axis; a + 1 < d.rank; ++a) d.dims[a] = d.dims[a + 1];
    d.rank -= 1;
  }
  body_at_call b;
  b.results.push_back({c.type_of(0), d, -1, true});
  return b;
}

void add_sequence_lowerings(lowering_table& t) {
  t["SequenceMap"] = lower_sequence_map;
  t["Optional"] = lower_optional;
  t["OptionalHasElement"] = lower_optional_has_element;
  t["OptionalGetElement"] = lower_optional_get_element;
  t["SequenceEmpty"] = lower_sequence_empty;
  t["SequenceConstruct"] = lower_sequence_construct;
  t["SequenceInsert"] = lower_sequence_insert;
  t["SequenceErase"] = lower_sequence_erase;
  t["SequenceAt"] = lower_sequence_at;
  t["SequenceLength"] = lower_sequence_length;
  t["ConcatFromSequence"] = lower_concat_from_sequence;
  t["SplitToSequence"] = lower_split_to_sequence;
}

}  // namespace kiln::onnx_import
