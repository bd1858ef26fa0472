// The importer's cuts: a model split where a node's result size depends on values known only at
// the call, each later graph reading what earlier ones computed as parameters of its own.
#include "cut_model.hpp"

#include <algorithm>

namespace kiln::onnx_import {

void model_cutter::declare_input(const std::string& name, dtype t, const shape& dims) {
  given_.insert(name);
  parts_.inputs.push_back(name);
  parts_.input_types.push_back(t);
  parts_.input_dims.push_back(dims);
}

void model_cutter::output_of(int k, const std::string& name, graph::value v) {
  // What the call gives or a host step computes is found by name; anything else once per graph.
  if (given_.count(name) || !outputs_[static_cast<std::size_t>(k)].insert(name).second) return;
  part(k).output(name, v);
}

void model_cutter::bring(slot& s, const std::string& name) {
  if (s.part == current_part()) return;
  if (s.extents)
    for (std::size_t k = 0; k < s.extents->size(); ++k)
      (*s.extents)[k] = carry_size((*s.extents)[k], s.part, name + ".size." + std::to_string(k));
  carry(s, name, s.part);
  s.part = current_part();
}

const graph::extent* model_cutter::carried_size(int from, graph::extent e) const {
  auto same = std::find_if(sizes_.begin(), sizes_.end(), [&](const auto& t) {
    return std::get<0>(t) == from && std::get<1>(t) == e;
  });
  return same == sizes_.end() ? nullptr : &std::get<2>(*same);
}

graph::extent model_cutter::carry_size(graph::extent e, int from, const std::string& name) {
  if (e.is_static()) return e;
  if (const graph::extent* same = carried_size(from, e)) return *same;
  // No value carried so far has it: the earlier graph counts to it (a range of that length, the
  // one way a size crosses from one executable to another), whose length is the new size.
  output_of(from, name, part(from).range(graph::extent(0), e));
  graph& now = current();
  const graph::extent size =
      now.extent_of(now.input(name, dtype::i64, std::vector<graph::extent>{graph::extent(dyn)}), 0);
  sizes_.emplace_back(from, e, size);
  return size;
}

void model_cutter::carry(slot& s, const std::string& name, int from) {
  if (s.sequence)
    for (std::size_t k = 0; k < s.sequence->size(); ++k)
      carry((*s.sequence)[k], name + "." + std::to_string(k), from);
  if (s.known) {  // a constant of each graph that reads it
    s.value.reset();
    return;
  }
  if (!s.value) return;  // (an absent optional)
  graph& earlier = part(from);
  const graph::value v = *s.value;
  output_of(from, name, v);
  // Its run-time sizes: the current graph's for those carried before, else sizes of their own.
  const int rank = earlier.dims_of(v).rank;
  std::vector<graph::extent> sizes;
  std::vector<int> fresh;
  for (int i = 0; i < rank; ++i) {
    const graph::extent e = earlier.extent_of(v, i);
    const graph::extent* same = e.is_static() ? nullptr : carried_size(from, e);
    if (e.is_static()) {
      sizes.push_back(e);
    } else if (same) {
      sizes.push_back(*same);
    } else {
      sizes.push_back(graph::extent(dyn));
      fresh.push_back(i);
    }
  }
  graph& now = current();
  s.value = now.input(name, earlier.type_of(v), sizes);
  for (int i : fresh)
    sizes_.emplace_back(from, earlier.extent_of(v, i), now.extent_of(*s.value, i));
}

std::vector<slot> model_cutter::cut_at(const ::onnx::NodeProto& node, int index, std::int64_t opset,
                                       const std::vector<slot*>& inputs,
                                       const std::vector<call_sized_result>& results,
                                       body_at_call* stepped) {
  onnx::host_step step;
  step.node = node;
  step.index = index;
  step.opset = opset;
  std::vector<std::pair<std::string, const slot*>> read;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    read.emplace_back(inputs[i] ? node.input(static_cast<int>(i)) : "", inputs[i]);
  if (stepped) {
    for (const auto& captured : stepped->captured) {
      read.insert(read.end(), captured.begin(), captured.end());
      step.captured.push_back(captured.size());
    }
    step.bodies = std::move(stepped->bodies);
    step.body_rests = std::move(stepped->rests);
    step.appends = stepped->appends;
  }
  for (const auto& [name, s] : read) {
    const bool computed = s && !s->known && s->value;
    const bool list = s && s->list;  // (kept by the call under the name it was made under)
    step.inputs.push_back(list ? s->list->held_as : computed ? name : "");
    step.list_inputs.push_back(list);
    step.known_inputs.push_back(s ? s->known : known_tensor{});
    if (computed) output_of(current_part(), name, *s->value);
  }
  later_.emplace_back();
  later_.back().set_name(first_.name());
  outputs_.emplace_back();
  sizes_.clear();
  graph& now = current();
  std::vector<slot> out(static_cast<std::size_t>(node.output_size()));
  std::optional<graph::extent> count;  // the one size the values decide
  for (int o = 0; o < node.output_size(); ++o) {
    const auto u = static_cast<std::size_t>(o);
    const std::string& name = node.output(o);
    step.outputs.push_back(u < results.size() ? name : "");
    step.types.push_back(u < results.size() ? results[u].type : dtype::f32);
    step.dims.push_back(u < results.size() ? results[u].dims : shape{});
    step.list_outputs.push_back(u < results.size() && results[u].list);
    if (name.empty() || u >= results.size()) continue;
    const call_sized_result& r = results[u];
    out[u].part = current_part();
    given_.insert(name);
    if (r.list) {
      out[u].list = call_list{r.type, r.dims, false, -1, {}, name};
      continue;
    }
    std::vector<graph::extent> sizes;
    for (int a = 0; a < r.dims.rank; ++a)
      sizes.push_back(a == r.count_axis && count ? *count : graph::extent(r.dims.dims[a]));
    out[u].value = now.input(name, r.type, sizes);
    if (r.count_axis >= 0 && !count) count = now.extent_of(*out[u].value, r.count_axis);
  }
  parts_.steps.push_back(std::move(step));
  return out;
}

graph& model_cutter::output(slot& s, const std::string& name, int k) {
  parts_.outputs.push_back(name);
  if (s.known) {  // a constant of the last graph
    if (k != current_part()) s.value.reset();
    s.value = value_of(current(), s);
    output_of(current_part(), name, *s.value);
    return current();
  }
  // (A value carried into a later graph is read from the graph that computed it.)
  if (std::none_of(outputs_.begin(), outputs_.end(),
                   [&](const auto& names) { return names.count(name) != 0; }))
    output_of(k, name, *s.value);
  return part(k);
}

std::shared_ptr<onnx::continuation> model_cutter::finish() {
  if (!cut()) return nullptr;
  for (graph& g : later_) parts_.graphs.push_back(std::move(g));
  later_.clear();
  return std::make_shared<onnx::continuation>(std::move(parts_));
}

}  // namespace kiln::onnx_import
