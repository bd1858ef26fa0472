// The plan: the canonical graph, its dispatch regions and buffer bindings, and the facts about
// them both back ends ask (slots, stores, the arena, in-place writes). Data only: compile.hpp makes
// plans, and the runtime reads them without including the passes.
#pragma once

#include <algorithm>
#include <string>

#include "kiln/compiler/region.hpp"
#include "kiln/ir/print.hpp"

namespace kiln::compiler {

// Where each transient lives in a call's arena, and the arena's size (bytes).
struct arena_layout {
  std::vector<std::int64_t> offsets;
  std::int64_t bytes = 0;
  // Per transient: row-local (plan::row_local), and so not placed here; all false in an arena
  // that keeps them (plan::arena).
  std::vector<bool> row_local;
};

// Offsets in the arena are multiples of this (Vulkan's minStorageBufferOffsetAlignment is at most
// 256; SIMD loads want 64).
inline constexpr std::int64_t arena_alignment = 256;

// Places transients in one arena: each at the lowest offset that overlaps no transient alive at
// the same time (alive: from the dispatch that writes it to the last dispatch that reads it; a
// row group's regions run interleaved, so its transients live through all of it), so a buffer is
// reused once its last reader has run. bytes[t]: transient t's size.
template <class Regions>
constexpr arena_layout plan_arena(const Regions& regions, const std::vector<std::int64_t>& bytes) {
  std::size_t n = bytes.size();
  std::vector<int> first(n, 0), last(n, 0);
  for (std::size_t k = 0; k < regions.size(); ++k) {
    int group = regions[k].group;
    for (auto t : regions[k].writes) first[t] = last[t] = group;
    for (auto t : regions[k].reads) last[t] = std::max(last[t], group);
    for (auto t : regions[k].view_reads) last[t] = std::max(last[t], group);
  }
  arena_layout a;
  a.offsets.assign(n, 0);
  for (std::size_t t = 0; t < n; ++t) {
    std::int64_t size = (bytes[t] + arena_alignment - 1) / arena_alignment * arena_alignment;
    std::int64_t at = 0;
    for (bool moved = true; moved;) {  // first fit: move past every live overlap, until none
      moved = false;
      for (std::size_t u = 0; u < t; ++u) {
        bool alive_together = first[u] <= last[t] && first[t] <= last[u];
        std::int64_t u_size = (bytes[u] + arena_alignment - 1) / arena_alignment * arena_alignment;
        if (alive_together && at < a.offsets[u] + u_size && a.offsets[u] < at + size) {
          at = a.offsets[u] + u_size;
          moved = true;
        }
      }
    }
    a.offsets[t] = at;
    a.bytes = std::max(a.bytes, at + size);
  }
  return a;
}

// Resolves a size: static as it is, a symbol from `sym` (the call's resolved symbols).
constexpr std::int64_t size_at(std::int64_t d, const std::int64_t* sym) {
  return ir::is_symbol(d) ? sym[ir::symbol_of(d)] : d;
}

struct plan {
  ir::graph graph;                       // canonical: verified, folded, deduplicated, no dead nodes
  std::vector<region> regions;           // in execution order; one dispatch per row group
  std::vector<std::int32_t> transients;  // values passed between regions (roots' results,
                                         // row values, row-local values)
  std::vector<std::int32_t> views;       // view nodes regions load (region::views)
  std::vector<std::int32_t> view_bases;  // per view: the input slot of the value it maps
  constexpr int dispatch_count() const { return regions.empty() ? 0 : regions.back().group + 1; }

  // Whether transient t is row-local (compiler::row_local_values): an elementwise value over its
  // row group's space that only later regions of the group read, each at the elements it would
  // compute. A back end runs the group a block of rows at a time (the CPU keeps the value in a
  // block-sized buffer) or computes it again where it is read (Vulkan's device plan): it takes
  // no place in the arena.
  constexpr bool row_local(std::int32_t t) const {
    const region* writer = writer_of(t);
    if (!writer || writer->root >= 0 || writer->contraction >= 0 ||
        !(writer->space == graph.nodes[transients[t]].dims))
      return false;
    bool grouped = false, read = false;
    for (const region& r : regions) {
      grouped = grouped || (r.group == writer->group && r.root >= 0);
      for (auto v : r.view_reads)
        if (v == t) return false;
      for (auto u : r.reads)
        if (u == t) {
          if (r.group != writer->group || !(r.space == writer->space)) return false;
          read = true;
        }
    }
    return grouped && read;
  }
  // The region that writes transient t, or null (none does in a plan whose row-local values
  // are computed where they are read: inline_row_locals).
  constexpr const region* writer_of(std::int32_t t) const {
    for (const region& r : regions)
      for (auto w : r.writes)
        if (w == t) return &r;
    return nullptr;
  }
  // The arena of one call (sym: its resolved symbols; null for a plan of static sizes). With
  // keep_row_local, row-local transients have their place in it too: for a caller that runs a
  // row group's regions one call at a time (cpu::run_plan then keeps them there).
  constexpr arena_layout arena(const std::int64_t* sym = nullptr,
                               bool keep_row_local = false) const {
    std::vector<std::int64_t> bytes;
    std::vector<bool> local(transients.size(), false);
    for (std::size_t t = 0; t < transients.size(); ++t) {
      const ir::node& n = graph.nodes[transients[t]];
      local[t] = !keep_row_local && row_local(static_cast<std::int32_t>(t));
      std::int64_t count = 1;
      if (local[t] || !writer_of(static_cast<std::int32_t>(t)))
        count = 0;
      else
        for (int i = 0; i < n.dims.rank; ++i) count *= size_at(n.dims.dims[i], sym);
      bytes.push_back(count * size_in_bytes(n.type));
    }
    arena_layout a = plan_arena(regions, bytes);
    a.row_local = std::move(local);
    return a;
  }
  // The bytes of transient memory a call needs; -1 where they depend on run-time sizes.
  constexpr std::int64_t transient_bytes() const {
    for (std::size_t t = 0; t < transients.size(); ++t)
      if (!graph.nodes[transients[t]].dims.is_static() && !row_local(static_cast<std::int32_t>(t)))
        return -1;
    return arena().bytes;
  }
};

// A region's buffers by slot. Input slots: parameter a is slot a, transient t is slot
// inputs + t, view v is slot inputs + transients + v (its base's buffer, through its index map);
// output slots: result r is slot r, transient t is slot outputs + t.
constexpr int input_slot_count(const plan& p) {
  return static_cast<int>(p.graph.inputs.size() + p.transients.size() + p.views.size());
}
constexpr int view_slot(const plan& p, std::int32_t v) {
  return static_cast<int>(p.graph.inputs.size() + p.transients.size()) + v;
}
constexpr int output_slot_count(const plan& p) {
  return static_cast<int>(p.graph.outputs.size() + p.transients.size());
}
// The input slots region r reads, and the output slots it writes. (The index tensors its views
// read, region::indices, are input slots too, bound after these.) The forms taking `s` fill it,
// keeping its memory: a CPU call prepares each region.
constexpr void input_slots(const plan& p, const region& r, std::vector<std::int32_t>& s) {
  s.assign(r.args.begin(), r.args.end());
  for (auto t : r.reads) s.push_back(static_cast<std::int32_t>(p.graph.inputs.size()) + t);
  for (auto v : r.views) s.push_back(view_slot(p, v));
}
constexpr std::vector<std::int32_t> input_slots(const plan& p, const region& r) {
  std::vector<std::int32_t> s;
  s.reserve(r.args.size() + r.reads.size() + r.views.size());
  input_slots(p, r, s);
  return s;
}
constexpr void output_slots(const plan& p, const region& r, std::vector<std::int32_t>& s) {
  s.assign(r.results.begin(), r.results.end());
  for (auto t : r.writes) s.push_back(static_cast<std::int32_t>(p.graph.outputs.size()) + t);
}
constexpr std::vector<std::int32_t> output_slots(const plan& p, const region& r) {
  std::vector<std::int32_t> s;
  s.reserve(r.results.size() + r.writes.size());
  output_slots(p, r, s);
  return s;
}
// A contraction region's finished tile (the contraction's value, for its epilogue) is read as
// one more input slot, after every other.
constexpr int accumulator_slot(const plan& p) { return input_slot_count(p); }

// The input slot node `id` of region r is loaded from (a parameter's, a transient's, a view's, or
// the contraction's tile); -1 where the region computes it.
constexpr int load_slot(const plan& p, const region& r, std::int32_t id) {
  const ir::node& n = p.graph.nodes[id];
  if (id == r.contraction) return accumulator_slot(p);
  if (n.kind == ir::op::input) return n.arg;
  for (auto t : r.reads)
    if (p.transients[t] == id) return static_cast<int>(p.graph.inputs.size()) + t;
  for (auto v : r.views)
    if (p.views[v] == id) return view_slot(p, v);
  return -1;
}

// The input slot of node `id` when it is a parameter or a transient, else -1.
constexpr std::int32_t value_slot(const ir::graph& g, const std::vector<std::int32_t>& transients,
                                  std::int32_t id) {
  if (g.nodes[id].kind == ir::op::input) return g.nodes[id].arg;
  for (std::size_t t = 0; t < transients.size(); ++t)
    if (transients[t] == id) return static_cast<std::int32_t>(g.inputs.size() + t);
  return -1;
}
// The input slot of the value view node `id` maps: the first parameter or transient below it.
constexpr std::int32_t base_slot(const ir::graph& g, const std::vector<std::int32_t>& transients,
                                 std::int32_t id) {
  for (std::int32_t o = g.nodes[id].operands[0];; o = g.nodes[o].operands[0])
    if (auto s = value_slot(g, transients, o); s >= 0) return s;
}
// What region r stores, as (output slot, node): its results and transients; a reduction's region
// stores its root's operand to its first output slot, for the reduction driver to reduce.
struct store {
  std::int32_t slot = 0, node = 0;
};
constexpr std::vector<store> region_stores(const plan& p, const region& r) {
  auto slots = output_slots(p, r);
  if (r.root >= 0) return {{slots[0], p.graph.nodes[r.root].operands[0]}};
  std::vector<store> s;
  for (auto res : r.results) s.push_back({res, p.graph.outputs[res]});
  for (auto t : r.writes)
    s.push_back({static_cast<std::int32_t>(p.graph.outputs.size()) + t, p.transients[t]});
  return s;
}

// Which of region r's nodes (by node id) its row function evaluates: every one, except in a
// contraction's region, whose row function is the epilogue: the nodes its stores read, the
// contraction's value loaded (its operands are read by the contraction's packing instead).
constexpr std::vector<bool> evaluated_nodes(const plan& p, const region& r) {
  std::vector<bool> used(p.graph.nodes.size(), false);
  if (r.contraction < 0) {
    for (auto id : r.nodes) used[id] = true;
    return used;
  }
  for (const store& st : region_stores(p, r)) used[st.node] = true;
  for (auto it = r.nodes.rbegin(); it != r.nodes.rend(); ++it)
    if (used[*it] && load_slot(p, r, *it) < 0)
      for (int k = 0; k < p.graph.nodes[*it].arity(); ++k)
        used[p.graph.nodes[*it].operands[k]] = true;
  return used;
}

// The input slots region r's row function reads: input_slots(p, r), or for a contraction's
// region those its epilogue loads, then the accumulator slot.
constexpr std::vector<std::int32_t> row_input_slots(const plan& p, const region& r) {
  if (r.contraction < 0) return input_slots(p, r);
  auto used = evaluated_nodes(p, r);
  std::vector<std::int32_t> s;
  for (auto id : r.nodes)
    if (int slot = load_slot(p, r, id); used[id] && slot >= 0 && slot != accumulator_slot(p))
      s.push_back(slot);
  s.push_back(accumulator_slot(p));
  return s;
}

// Whether region i is a dispatch group of its own (no row group's member).
constexpr bool alone_in_group(const plan& p, std::size_t i) {
  return (i == 0 || p.regions[i - 1].group != p.regions[i].group) &&
         (i + 1 == p.regions.size() || p.regions[i + 1].group != p.regions[i].group);
}

// A region whose values a contraction's packing computes: operand `operand` (of the contraction's
// node: a matmul's 0 is A, 1 is B; a convolution's 0 is x, 1 is w) of the contraction in region
// `region`; region -1 where none does.
struct packing {
  std::int32_t region = -1;
  int operand = -1;
};
// Whether region i is the prologue of a contraction's operand (a weight's dequantization: cast,
// zero point, scale; activations scaled and shifted per channel): elementwise over that operand's
// dims, alone in its dispatch, reading parameters only (so nothing the arena reuses can change
// before the contraction runs), writing one transient that only the contraction's region reads,
// as nothing but that operand. The back ends then evaluate it as the contraction asks for blocks
// of the operand (the CPU a matmul's, as it packs them; Vulkan any, as it stages them), instead
// of storing it whole and reading it back; the transient keeps its place in the arena.
constexpr packing packed_into(const plan& p, std::size_t i) {
  const region& r = p.regions[i];
  if (r.root >= 0 || r.contraction >= 0 || !r.results.empty() || r.writes.size() != 1 ||
      !r.reads.empty() || !r.view_reads.empty())
    return {};
  if (!alone_in_group(p, i)) return {};
  const std::int32_t t = r.writes[0];
  if (!(p.graph.nodes[p.transients[t]].dims == r.space)) return {};
  std::int32_t reader = -1;
  for (std::size_t k = 0; k < p.regions.size(); ++k) {
    for (auto v : p.regions[k].view_reads)
      if (v == t) return {};
    for (auto v : p.regions[k].reads)
      if (v == t) {
        if (reader >= 0) return {};
        reader = static_cast<std::int32_t>(k);
      }
  }
  if (reader < 0) return {};
  const region& c = p.regions[reader];
  if (c.contraction < 0) return {};
  const int slot = static_cast<int>(p.graph.inputs.size()) + t;
  for (auto s : row_input_slots(p, c))
    if (s == slot) return {};  // the epilogue reads it too
  const ir::node& m = p.graph.nodes[c.contraction];
  const bool a = load_slot(p, c, m.operands[0]) == slot, b = load_slot(p, c, m.operands[1]) == slot;
  if (a == b) return {};  // x x x, or read through a view
  return {reader, a ? 0 : 1};
}

// Whether result r may be written into the memory of parameter a while the call reads a, given
// that the two hold the same number of elements (the caller checks: identical buffers, or a
// variable and its assigned value): a and r have the same type, and no region reads a except the
// plain elementwise region that stores r, which reads it directly (not through a view nor as
// indices). a broadcasts to that region's space, r's extents, with as many elements: so it is not
// replicated, and every element of a is read by the one invocation that writes it, before it
// writes it.
constexpr bool writes_in_place(const plan& p, std::int32_t a, std::int32_t r) {
  const ir::graph& g = p.graph;
  const ir::node& out = g.nodes[g.outputs[r]];
  if (out.type != g.inputs[a].type) return false;
  auto contains = [](const std::vector<std::int32_t>& v, std::int32_t x) {
    for (auto y : v)
      if (y == x) return true;
    return false;
  };
  const region* writer = nullptr;
  for (const region& reg : p.regions)
    if (contains(reg.results, r)) writer = &reg;
  if (!writer) return false;
  for (const region& reg : p.regions) {
    bool through_view = false;
    for (auto v : reg.views) through_view = through_view || p.view_bases[v] == a;
    if (!through_view && !contains(reg.indices, a) && !contains(reg.args, a)) continue;
    if (&reg != writer || through_view || contains(reg.indices, a) || reg.root >= 0 ||
        reg.contraction >= 0)
      return false;
  }
  return true;
}

// p with each row-local transient (plan::row_local) computed again by the regions that read it:
// its writer's nodes and loads joined to theirs, and the writer gone where it writes nothing else.
// For a back end that would rather recompute such a value than keep it (Vulkan: a workgroup's
// rows are no block of memory it owns). The transients keep their numbers; those no region
// writes now take no place in the arena. origin[k]: the region of p that new region k is.
constexpr plan inline_row_locals(const plan& p, std::vector<int>& origin) {
  plan q = p;
  auto join = [](std::vector<std::int32_t>& to, const std::vector<std::int32_t>& from) {
    for (auto x : from)
      if (std::find(to.begin(), to.end(), x) == to.end()) to.push_back(x);
  };
  std::vector<bool> gone(p.regions.size(), false);
  for (std::size_t t = 0; t < p.transients.size(); ++t) {
    const auto local = static_cast<std::int32_t>(t);
    if (!q.row_local(local)) continue;
    const auto w = static_cast<std::size_t>(q.writer_of(local) - q.regions.data());
    for (region& r : q.regions) {
      auto at = std::find(r.reads.begin(), r.reads.end(), local);
      if (at == r.reads.end()) continue;
      r.reads.erase(at);
      const region& from = q.regions[w];
      join(r.nodes, from.nodes);
      std::sort(r.nodes.begin(), r.nodes.end());  // node ids are in topological order
      join(r.args, from.args);
      join(r.reads, from.reads);
      join(r.views, from.views);
      join(r.view_reads, from.view_reads);
      join(r.indices, from.indices);
    }
    region& writer = q.regions[w];
    writer.writes.erase(std::find(writer.writes.begin(), writer.writes.end(), local));
    gone[w] = writer.writes.empty() && writer.results.empty();
  }
  std::vector<region> kept;
  origin.clear();
  for (std::size_t k = 0; k < q.regions.size(); ++k)
    if (!gone[k]) {
      kept.push_back(std::move(q.regions[k]));
      origin.push_back(static_cast<int>(k));
    }
  q.regions = std::move(kept);
  return q;
}

// An input slot as the printed plan names it: argN or tN.
inline std::string slot_text(const plan& p, std::int32_t slot) {
  const auto n_inputs = static_cast<std::int32_t>(p.graph.inputs.size());
  return slot < n_inputs ? "arg" + std::to_string(slot) : "t" + std::to_string(slot - n_inputs);
}

// What region r computes, for profiles: its ops in order, e.g. " matmul add relu" (not what it
// reads from another region).
inline std::string region_ops(const plan& p, std::size_t r) {
  const region& reg = p.regions[r];
  std::string text;
  for (auto id : reg.nodes)
    if (ir::info(p.graph.nodes[id].kind).cls != ir::op_class::leaf &&
        (id == reg.contraction || id == reg.root || load_slot(p, reg, id) < 0)) {
      text += ' ';
      text += ir::name(p.graph.nodes[id].kind);
    }
  return text;
}

// The region part of the textual form (the graph part is ir::print).
inline std::string print_regions(const plan& p) {
  std::string out;
  for (std::size_t r = 0; r < p.regions.size(); ++r) {
    const region& reg = p.regions[r];
    out += "region " + std::to_string(r) + " (dispatch " + std::to_string(reg.group) + ") over " +
           ir::dims_text(reg.space);
    if (reg.root >= 0) out += " reducing %" + std::to_string(reg.root);
    if (reg.contraction >= 0) out += " contracting %" + std::to_string(reg.contraction);
    out += ": nodes";
    for (auto n : reg.nodes) out += " %" + std::to_string(n);
    out += "; reads";
    for (auto a : reg.args) out += " arg" + std::to_string(a);
    for (auto t : reg.reads) out += " t" + std::to_string(t);
    for (auto v : reg.views) out += " view %" + std::to_string(p.views[v]);
    for (auto i : reg.indices) out += " indices " + slot_text(p, i);
    out += "; writes";
    for (auto res : reg.results) out += " result" + std::to_string(res);
    for (auto t : reg.writes) out += " t" + std::to_string(t);
    out += "\n";
  }
  if (p.transients.empty()) return out;
  // The arena: static offsets, or those of all-ones sizes where sizes are known only at the call.
  std::vector<std::int64_t> ones(p.graph.symbols.size() + 1, 1);
  arena_layout a = p.arena(ones.data());
  out += "arena";
  if (p.transient_bytes() < 0) out += " (offsets for run-time sizes of 1)";
  out += ": " + std::to_string(a.bytes) + " bytes\n";
  for (std::size_t t = 0; t < p.transients.size(); ++t) {
    const ir::node& n = p.graph.nodes[p.transients[t]];
    out += "  t" + std::to_string(t) + " = %" + std::to_string(p.transients[t]) + " : " +
           ir::type_text(n.type, n.dims);
    out += a.row_local[t] ? " row-local (a block of rows at a time, not in the arena)\n"
                          : " at " + std::to_string(a.offsets[t]) + "\n";
  }
  return out;
}

inline std::string print(const plan& p) { return ir::print(p.graph) + print_regions(p); }

}  // namespace kiln::compiler
