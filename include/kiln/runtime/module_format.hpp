// The compiled-module format, the meeting point of the compiler and the runtime (IREE's VMFB): a
// compiled function's plan, names, tensor constants, variables' values, trace points and the
// SPIR-V kernels emitted for it as one versioned, checksummed byte string. Decoding checks every
// field, so a damaged file is a kiln::error naming the problem, never a crash.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/codegen/spirv/kernel.hpp"
#include "kiln/compiler/plan.hpp"
#include "kiln/core/hash.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/core/shared_bytes.hpp"
#include "kiln/core/text.hpp"

namespace kiln::runtime {

// A compiled function besides its plan: the names of its parameters and results, what the
// executable supplies (tensor constants and variables: the plan's inputs after the parameters)
// and what its extra results are (variables' new values, after the function's own, then trace
// points).
struct function_parts {
  std::vector<std::string> inputs, outputs;
  struct constant {
    std::int32_t arg = 0;
    shared_bytes bytes;  // row-major elements of the input's dtype
  };
  std::vector<constant> constants;
  struct variable {
    std::string name;
    std::int32_t arg = -1;
    std::int32_t assigned = -1;       // the plan's result it takes, or -1
    std::vector<std::uint8_t> value;  // its value (empty: zeros)
  };
  std::vector<variable> variables;
  std::vector<std::string> traces;
};

// A module: the function's name prefix ("graph", "fn"), its plan and its parts, and the SPIR-V
// kernels emitted for it so far, by variant key (vulkan::kernel_cache: the target's fingerprint,
// then the region and its operand layouts), which a device with that fingerprint runs as they are.
struct module_contents {
  std::string prefix;
  compiler::plan plan;
  function_parts parts;
  std::vector<std::pair<std::string, spirv::kernel>> kernels;
};

inline constexpr std::uint32_t module_format_version = 6;  // 3: dtype u16; 4: u64; 5: sums,
                                                           // inputs' shared sizes; 6: positions

// The file: magic "KILNMOD\0", a byte-order mark (0x01020304 as the writer stores it), the format
// version, the payload's size and its FNV-1a 64 checksum, then the payload (native byte order).
KILN_RUNTIME_API std::vector<std::uint8_t> encode_module(const module_contents& m);
// `source` names the bytes in errors (a path). Every field is checked against what it indexes, the
// graph by ir::verify: a module edited with its checksum sealed again is a kiln::error, not a
// crash. The stored kernels are kept (for a device of their fingerprint to run as they are) only
// where `trust_kernels`, since a driver may crash on SPIR-V that spirv-val accepts; otherwise the
// runtime emits them again from the plan.
KILN_RUNTIME_API module_contents decode_module(std::span<const std::uint8_t> bytes,
                                               const std::string& source,
                                               bool trust_kernels = false);

}  // namespace kiln::runtime

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include <cstring>

#include "kiln/compiler/dispatch.hpp"
#include "kiln/ir/verify.hpp"

namespace kiln::runtime {
namespace detail {

constexpr char module_magic[8] = {'K', 'I', 'L', 'N', 'M', 'O', 'D', '\0'};
constexpr std::uint32_t byte_order_mark = 0x01020304;
constexpr std::size_t module_header_bytes = 32;

class module_writer {
 public:
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof v);
  }
  void count(std::size_t n) { put(static_cast<std::uint32_t>(n)); }
  void text(const std::string& s) {
    count(s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  void bytes(std::span<const std::uint8_t> b) {
    count(b.size());
    out.insert(out.end(), b.begin(), b.end());
  }
  void ints(const std::vector<std::int32_t>& v) {
    count(v.size());
    for (auto x : v) put(x);
  }
  void dims(const shape& s) {
    put(static_cast<std::uint8_t>(s.rank));
    for (int i = 0; i < s.rank; ++i) put(s.dims[i]);
  }
  void texts(const std::vector<std::string>& v) {
    count(v.size());
    for (const auto& s : v) text(s);
  }
  std::vector<std::uint8_t> out;
};

class module_reader {
 public:
  module_reader(std::span<const std::uint8_t> bytes, const std::string& source)
      : in_(bytes), source_(source) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw error(errc::invalid_argument, "module",
                source_ + ": " + what + " (payload byte " + std::to_string(at_) + ")");
  }
  template <class T>
  T get(const char* what) {
    T v;
    if (in_.size() - at_ < sizeof v) fail(std::string("truncated: the file ends inside ") + what);
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  // A count of items of at least `item_bytes` each, which the rest of the payload must hold.
  std::size_t count(const char* what, std::size_t item_bytes) {
    auto n = get<std::uint32_t>(what);
    if (item_bytes && n > (in_.size() - at_) / item_bytes)
      fail("truncated or corrupt: " + std::to_string(n) + " " + what + " do not fit in the " +
           std::to_string(in_.size() - at_) + " bytes left");
    return n;
  }
  std::string text(const char* what) {
    std::size_t n = count(what, 1);
    std::string s(reinterpret_cast<const char*>(in_.data() + at_), n);
    at_ += n;
    return s;
  }
  std::vector<std::uint8_t> bytes(const char* what) {
    std::size_t n = count(what, 1);
    std::vector<std::uint8_t> b(in_.begin() + static_cast<std::ptrdiff_t>(at_),
                                in_.begin() + static_cast<std::ptrdiff_t>(at_ + n));
    at_ += n;
    return b;
  }
  std::vector<std::int32_t> ints(const char* what) {
    std::vector<std::int32_t> v(count(what, 4));
    for (auto& x : v) x = get<std::int32_t>(what);
    return v;
  }
  shape dims(const char* what) {
    shape s;
    auto rank = get<std::uint8_t>(what);
    if (rank > max_rank) fail(std::string("corrupt: ") + what + " of rank " + std::to_string(rank));
    s.rank = rank;
    for (int i = 0; i < s.rank; ++i) s.dims[i] = get<std::int64_t>(what);
    return s;
  }
  std::vector<std::string> texts(const char* what) {
    std::vector<std::string> v(count(what, 4));
    for (auto& s : v) s = text(what);
    return v;
  }
  dtype type(const char* what) {
    auto t = static_cast<dtype>(get<std::uint8_t>(what));
    if (!is_valid(t)) fail(std::string("corrupt: ") + what + " has no valid dtype");
    return t;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  std::span<const std::uint8_t> in_;
  std::size_t at_ = 0;
  const std::string& source_;
};

inline void put_node(module_writer& w, const ir::node& n) {
  w.put(static_cast<std::uint8_t>(n.kind));
  w.put(static_cast<std::uint8_t>(n.type));
  w.dims(n.dims);
  for (auto o : n.operands) w.put(o);
  w.put(static_cast<std::uint8_t>(n.value.type));
  w.put(n.value.f);
  w.put(n.value.i);
  w.put(n.arg);
  const ir::attributes& a = n.attrs;
  w.put(a.axes);
  w.put(static_cast<std::uint8_t>(a.keepdims));
  w.put(static_cast<std::uint8_t>(a.select_last));
  w.put(a.axis);
  w.put(a.fold);
  for (int i = 0; i < max_rank; ++i) {
    w.put(a.perm[i]);
    w.put(a.starts[i]);
    w.put(a.steps[i]);
    w.put(a.dilations[i]);
  }
  w.put(a.groups);
  w.put(a.begin_symbol);
  w.put(static_cast<std::uint8_t>(a.window));
}

inline ir::node get_node(module_reader& r) {
  ir::node n;
  n.kind = static_cast<ir::op>(r.get<std::uint8_t>("a node"));
  if (!ir::is_valid(n.kind)) r.fail("corrupt: a node has no valid op");
  n.type = r.type("a node");
  n.dims = r.dims("a node's extents");
  for (auto& o : n.operands) o = r.get<std::int32_t>("a node");
  n.value.type = r.type("a node's constant");
  n.value.f = r.get<double>("a node's constant");
  n.value.i = r.get<std::int64_t>("a node's constant");
  n.arg = r.get<std::int32_t>("a node");
  ir::attributes& a = n.attrs;
  a.axes = r.get<std::uint32_t>("a node's attributes");
  a.keepdims = r.get<std::uint8_t>("a node's attributes") != 0;
  a.select_last = r.get<std::uint8_t>("a node's attributes") != 0;
  a.axis = r.get<std::int8_t>("a node's attributes");
  a.fold = r.get<std::uint8_t>("a node's attributes");
  for (int i = 0; i < max_rank; ++i) {
    a.perm[i] = r.get<std::int8_t>("a node's attributes");
    a.starts[i] = r.get<std::int32_t>("a node's attributes");
    a.steps[i] = r.get<std::int32_t>("a node's attributes");
    a.dilations[i] = r.get<std::int16_t>("a node's attributes");
  }
  a.groups = r.get<std::int32_t>("a node's attributes");
  a.begin_symbol = r.get<std::int32_t>("a node's attributes");
  a.window = r.get<std::uint8_t>("a node's attributes") != 0;
  return n;
}

// Every index the runtime follows, within range; the graph itself through ir::verify.
inline void check_plan(const module_contents& m, module_reader& r) {
  const compiler::plan& p = m.plan;
  const ir::graph& g = p.graph;
  auto problems = ir::verify(g);
  if (!problems.empty()) r.fail("corrupt plan: " + problems.front());
  auto within = [&](const std::vector<std::int32_t>& v, std::size_t n, const char* what) {
    for (auto x : v)
      if (x < 0 || static_cast<std::size_t>(x) >= n)
        r.fail(std::string("corrupt plan: ") + what + " " + std::to_string(x) + " is not below " +
               std::to_string(n));
  };
  const std::size_t nodes = g.nodes.size(), inputs = g.inputs.size(), outputs = g.outputs.size();
  within(p.transients, nodes, "a transient's node");
  within(p.views, nodes, "a view's node");
  if (p.view_bases.size() != p.views.size()) r.fail("corrupt plan: views and their bases differ");
  within(p.view_bases, inputs + p.transients.size(), "a view's base slot");
  int group = 0;
  // Each result and transient has one writer; no list names anything twice.
  std::vector<int> result_writers(outputs, 0), transient_writers(p.transients.size(), 0);
  auto unique = [&](std::vector<std::int32_t> v) {
    std::sort(v.begin(), v.end());
    if (std::adjacent_find(v.begin(), v.end()) != v.end())
      r.fail("corrupt plan: a region's list names " +
             std::to_string(*std::adjacent_find(v.begin(), v.end())) + " twice");
  };
  for (const compiler::region& reg : p.regions) {
    for (const auto* v : {&reg.nodes, &reg.args, &reg.results, &reg.reads, &reg.writes, &reg.views,
                          &reg.view_reads, &reg.indices})
      unique(*v);
    within(reg.nodes, nodes, "a region's node");
    within(reg.args, inputs, "a region's parameter");
    within(reg.results, outputs, "a region's result");
    within(reg.reads, p.transients.size(), "a region's transient");
    within(reg.writes, p.transients.size(), "a region's transient");
    within(reg.view_reads, p.transients.size(), "a region's transient");
    within(reg.views, p.views.size(), "a region's view");
    within(reg.indices, static_cast<std::size_t>(compiler::input_slot_count(p)),
           "a region's index slot");
    for (auto n : {reg.root, reg.contraction})
      if (n < -1 || n >= static_cast<std::int32_t>(nodes))
        r.fail("corrupt plan: a region's root " + std::to_string(n) + " is not a node");
    // The space the executors walk, against the nodes it is the space of: a reduction's operand, a
    // contraction's result, or (elementwise) one that every value the region stores broadcasts
    // to. The buffers are sized from the nodes, so a larger space would walk past them.
    bool space_ok = reg.space.rank >= 0 && reg.space.rank <= max_rank;
    for (int i = 0; space_ok && i < reg.space.rank; ++i)
      space_ok = reg.space.dims[i] >= -static_cast<std::int64_t>(g.symbols.size());
    auto in_region = [&](std::int32_t id) {
      return std::find(reg.nodes.begin(), reg.nodes.end(), id) != reg.nodes.end();
    };
    // What the region stores is written over its space (a reduction's, over its kept dims).
    shape written = reg.space;
    if (reg.root >= 0 && reg.contraction >= 0) space_ok = false;  // one root a region
    if (space_ok && reg.root >= 0) {
      const ir::node& root = g.nodes[reg.root];
      space_ok = ir::is_reduction(ir::info(root.kind).cls) && in_region(reg.root) &&
                 reg.space == g.nodes[root.operands[0]].dims;
      written = root.dims;
    } else if (space_ok && reg.contraction >= 0) {
      const ir::node& c = g.nodes[reg.contraction];
      space_ok =
          (ir::info(c.kind).cls == ir::op_class::contraction || ir::is_convolution(c.kind)) &&
          in_region(reg.contraction) && reg.space == c.dims;
    }
    for (auto out : reg.results) space_ok = space_ok && g.nodes[g.outputs[out]].dims == written;
    for (auto t : reg.writes) space_ok = space_ok && g.nodes[p.transients[t]].dims == written;
    if (!space_ok) r.fail("corrupt plan: a region's space is not that of its nodes");
    // What it reads, an earlier region wrote: the arena places a transient from its writer on
    // (one no region writes has no place there, and a read of it would run past the arena).
    for (const auto* v : {&reg.reads, &reg.view_reads})
      for (auto t : *v)
        if (transient_writers[t] == 0)
          r.fail("corrupt plan: a region reads transient " + std::to_string(t) +
                 " before any region writes it");
    for (auto out : reg.results) ++result_writers[out];
    for (auto t : reg.writes) ++transient_writers[t];
    // Each node the region loads comes from one of its slots, each node it computes from values
    // before it, and it stores at least one value (the back ends index these without checks).
    if (reg.results.empty() && reg.writes.empty()) r.fail("corrupt plan: a region stores nothing");
    // Every slot it lists is one of its nodes (the executors lay out and copy each), read over
    // the space: each of its sizes that size or 1, right-aligned, and any axes beyond the space's
    // rank of size 1 (a view of a reshape that adds leading 1s); a contraction's operands are
    // packed instead.
    auto fits_space = [&](std::int32_t id) {
      const shape& s = g.nodes[id].dims;
      const int extra = s.rank - reg.space.rank;
      bool ok = true;
      for (int i = 0; ok && i < s.rank; ++i) {
        const std::int64_t d = s.dims[i];
        ok = i < extra
                 ? d == 1
                 : d == reg.space.dims[reg.space.rank - s.rank + i] || d == 1 || ir::is_symbol(d);
      }
      return ok || reg.contraction >= 0;
    };
    for (auto a : reg.args) {
      bool used = false;
      for (auto id : reg.nodes)
        used =
            used || (g.nodes[id].kind == ir::op::input && g.nodes[id].arg == a && fits_space(id));
      if (!used) r.fail("corrupt plan: a region reads parameter " + std::to_string(a) + " wrongly");
    }
    for (auto t : reg.reads)
      if (!in_region(p.transients[t]) || !fits_space(p.transients[t]))
        r.fail("corrupt plan: a region reads transient " + std::to_string(t) + " wrongly");
    for (auto v : reg.views)
      if (!in_region(p.views[v]) || !fits_space(p.views[v]))
        r.fail("corrupt plan: a region reads view " + std::to_string(v) + " wrongly");
    const std::vector<std::int32_t> slots = compiler::input_slots(p, reg);
    const std::vector<bool> evaluated = compiler::evaluated_nodes(p, reg);
    std::vector<bool> seen(nodes, false);
    for (auto id : reg.nodes) {
      const int slot = compiler::load_slot(p, reg, id);
      if (slot >= 0 && slot != compiler::accumulator_slot(p) &&
          std::find(slots.begin(), slots.end(), slot) == slots.end())
        r.fail("corrupt plan: a region loads %" + std::to_string(id) + " from no slot of its own");
      if (slot < 0 && evaluated[id] && id != reg.root)
        for (int k = 0; k < ir::info(g.nodes[id].kind).arity; ++k)
          if (!seen[g.nodes[id].operands[k]])
            r.fail("corrupt plan: a region computes %" + std::to_string(id) +
                   " before its operands");
      seen[id] = true;
    }
    if (reg.group < group || reg.group > group + 1)
      r.fail("corrupt plan: region groups out of order");
    group = reg.group;
    if (reg.space.rank < 0) r.fail("corrupt plan: a region's space");
  }
  for (int w : result_writers)
    if (w != 1) r.fail("corrupt plan: a result is written by " + std::to_string(w) + " regions");
  for (int w : transient_writers)
    if (w > 1) r.fail("corrupt plan: a transient is written by " + std::to_string(w) + " regions");
  // Row groups (one dispatch running several regions a block of rows at a time) by the
  // compiler's own rule over these regions: the executors rely on what it guarantees of each.
  std::vector<compiler::region> regrouped = p.regions;
  compiler::form_row_groups(g, regrouped, p.transients);
  for (std::size_t i = 0; i < regrouped.size(); ++i)
    if (regrouped[i].group != p.regions[i].group)
      r.fail("corrupt plan: region " + std::to_string(i) + "'s row group is not the compiler's");
  const function_parts& f = m.parts;
  std::size_t assigned = 0;
  for (const auto& v : f.variables) assigned += v.assigned >= 0;
  for (std::int32_t a : g.positions)  // (verify: each an input of its own kind)
    if (a < static_cast<std::int32_t>(f.inputs.size()))
      r.fail("corrupt: parameter " + std::to_string(a) + " is declared positions");
  if (f.inputs.size() + f.constants.size() + f.variables.size() + g.positions.size() != inputs ||
      f.outputs.size() + assigned + f.traces.size() != outputs)
    r.fail("corrupt: the names do not match the plan's inputs and outputs");
  auto bytes_of = [&](std::int32_t arg) {
    if (arg < static_cast<std::int32_t>(f.inputs.size()) ||
        arg >= static_cast<std::int32_t>(inputs))
      r.fail("corrupt: a constant or variable names input " + std::to_string(arg));
    const ir::input_decl& d = g.inputs[arg];
    if (!d.dims.is_static()) r.fail("corrupt: a constant or variable of run-time extents");
    return static_cast<std::size_t>(d.dims.element_count() * size_in_bytes(d.type));
  };
  for (const auto& c : f.constants)
    if (c.bytes.size() != bytes_of(c.arg)) r.fail("corrupt: a tensor constant's size");
  for (const auto& v : f.variables) {
    if (!v.value.empty() && v.value.size() != bytes_of(v.arg))
      r.fail("corrupt: variable '" + v.name + "' has the wrong size");
    if (v.assigned != -1 && (v.assigned < static_cast<std::int32_t>(f.outputs.size()) ||
                             v.assigned >= static_cast<std::int32_t>(outputs)))
      r.fail("corrupt: variable '" + v.name + "' takes no result of the plan");
  }
}

}  // namespace detail

KILN_RUNTIME_API std::vector<std::uint8_t> encode_module(const module_contents& m) {
  detail::module_writer w;
  w.text(m.prefix);
  const ir::graph& g = m.plan.graph;
  w.count(g.inputs.size());
  for (const auto& in : g.inputs) {
    w.put(static_cast<std::uint8_t>(in.type));
    w.dims(in.dims);
    for (std::int32_t s : in.same_as) w.put(s);
  }
  w.count(g.nodes.size());
  for (const auto& n : g.nodes) detail::put_node(w, n);
  w.count(g.symbols.size());
  for (const auto& s : g.symbols) {
    w.put(static_cast<std::uint8_t>(s.kind));
    w.put(s.a);
    w.put(s.b);
    w.put(s.node);
  }
  w.count(g.constraints.size());
  for (const auto& c : g.constraints) {
    w.put(c.sym);
    w.put(c.size);
    w.put(c.node);
  }
  w.ints(g.outputs);
  w.ints(g.positions);
  w.count(m.plan.regions.size());
  for (const compiler::region& r : m.plan.regions) {
    w.dims(r.space);
    for (const auto* v :
         {&r.nodes, &r.args, &r.results, &r.reads, &r.writes, &r.views, &r.view_reads, &r.indices})
      w.ints(*v);
    w.put(r.root);
    w.put(r.contraction);
    w.put(r.group);
  }
  w.ints(m.plan.transients);
  w.ints(m.plan.views);
  w.ints(m.plan.view_bases);
  const function_parts& f = m.parts;
  w.texts(f.inputs);
  w.texts(f.outputs);
  w.texts(f.traces);
  w.count(f.constants.size());
  for (const auto& c : f.constants) {
    w.put(c.arg);
    w.bytes(c.bytes);
  }
  w.count(f.variables.size());
  for (const auto& v : f.variables) {
    w.text(v.name);
    w.put(v.arg);
    w.put(v.assigned);
    w.bytes(v.value);
  }
  w.count(m.kernels.size());
  for (const auto& [key, k] : m.kernels) {
    w.text(key);
    w.count(k.code.size());
    for (auto word : k.code) w.put(word);
    w.text(k.unsupported);
    for (auto v : {k.bindings, k.metadata, k.workgroup, k.regions, k.vulkan_version}) w.put(v);
    for (bool b : {k.metadata_in_buffer, k.per_workgroup, k.per_tile})
      w.put(static_cast<std::uint8_t>(b));
    w.count(k.constants.size());
    for (auto word : k.constants) w.put(word);
  }
  // Sized once: growing it by insert made GCC 12 warn (-Wstringop-overread) in users' -O3 builds.
  std::vector<std::uint8_t> file(detail::module_header_bytes + w.out.size());
  std::memcpy(file.data(), detail::module_magic, 8);
  std::uint32_t bom = detail::byte_order_mark, version = module_format_version;
  std::uint64_t size = w.out.size(), sum = kiln::detail::fnv1a(w.out);
  std::memcpy(file.data() + 8, &bom, 4);
  std::memcpy(file.data() + 12, &version, 4);
  std::memcpy(file.data() + 16, &size, 8);
  std::memcpy(file.data() + 24, &sum, 8);
  std::copy(w.out.begin(), w.out.end(), file.begin() + detail::module_header_bytes);
  return file;
}

KILN_RUNTIME_API module_contents decode_module(std::span<const std::uint8_t> bytes,
                                               const std::string& source, bool trust_kernels) {
  auto fail = [&](const std::string& what) {
    throw error(errc::invalid_argument, "module", source + ": " + what);
  };
  if (bytes.size() < detail::module_header_bytes)
    fail("truncated: " + std::to_string(bytes.size()) + " bytes, less than the " +
         std::to_string(detail::module_header_bytes) + "-byte header of a kiln module");
  if (std::memcmp(bytes.data(), detail::module_magic, 8) != 0)
    fail("not a kiln module (its first bytes are not \"KILNMOD\")");
  std::uint32_t bom, version;
  std::uint64_t size, sum;
  std::memcpy(&bom, bytes.data() + 8, 4);
  std::memcpy(&version, bytes.data() + 12, 4);
  std::memcpy(&size, bytes.data() + 16, 8);
  std::memcpy(&sum, bytes.data() + 24, 8);
  if (bom != detail::byte_order_mark)
    fail(bom == 0x04030201u  // the mark with its bytes reversed
             ? std::string("written with the other byte order (") +
                   (std::endian::native == std::endian::little ? "big" : "little") +
                   "-endian) than this machine's"
             : "corrupt byte-order mark");
  if (version != module_format_version)
    fail("format version " + std::to_string(version) + ", but this kiln reads version " +
         std::to_string(module_format_version));
  const std::size_t have = bytes.size() - detail::module_header_bytes;
  if (size != have)
    fail(size > have ? "truncated: the header promises " + std::to_string(size) +
                           " payload bytes, the file has " + std::to_string(have)
                     : std::to_string(have - size) + " bytes after the end of the module");
  auto payload = bytes.subspan(detail::module_header_bytes);
  if (kiln::detail::fnv1a(payload) != sum)
    fail("corrupt: the checksum does not match its contents");

  detail::module_reader r(payload, source);
  module_contents m;
  m.prefix = r.text("the name");
  if (!kiln::detail::is_function_name(m.prefix))
    r.fail("the function's name is not a plain name (1 to 63 letters, digits, '_', '-', '.')");
  ir::graph& g = m.plan.graph;
  g.inputs.resize(r.count("inputs", 2));
  for (auto& in : g.inputs) {
    in.type = r.type("an input");
    in.dims = r.dims("an input's extents");
    for (auto& s : in.same_as) s = r.get<std::int32_t>("an input's extents");
  }
  g.nodes.resize(r.count("nodes", 16));
  for (auto& n : g.nodes) n = detail::get_node(r);
  g.symbols.resize(r.count("symbols", 13));
  for (auto& s : g.symbols) {
    auto kind = r.get<std::uint8_t>("a symbol");
    if (kind > static_cast<std::uint8_t>(ir::symbol_kind::at_most))
      r.fail("corrupt: a symbol's kind");
    s.kind = static_cast<ir::symbol_kind>(kind);
    s.a = r.get<std::int32_t>("a symbol");
    s.b = r.get<std::int32_t>("a symbol");
    s.node = r.get<std::int32_t>("a symbol");
  }
  g.constraints.resize(r.count("constraints", 16));
  for (auto& c : g.constraints) {
    c.sym = r.get<std::int32_t>("a constraint");
    c.size = r.get<std::int64_t>("a constraint");
    c.node = r.get<std::int32_t>("a constraint");
  }
  g.outputs = r.ints("outputs");
  g.positions = r.ints("positions");
  m.plan.regions.resize(r.count("regions", 40));
  for (compiler::region& reg : m.plan.regions) {
    reg.space = r.dims("a region's space");
    for (auto* v : {&reg.nodes, &reg.args, &reg.results, &reg.reads, &reg.writes, &reg.views,
                    &reg.view_reads, &reg.indices})
      *v = r.ints("a region's list");
    reg.root = r.get<std::int32_t>("a region");
    reg.contraction = r.get<std::int32_t>("a region");
    reg.group = r.get<std::int32_t>("a region");
  }
  m.plan.transients = r.ints("transients");
  m.plan.views = r.ints("views");
  m.plan.view_bases = r.ints("view bases");
  function_parts& f = m.parts;
  f.inputs = r.texts("input names");
  f.outputs = r.texts("output names");
  f.traces = r.texts("trace names");
  f.constants.resize(r.count("tensor constants", 8));
  for (auto& c : f.constants) {
    c.arg = r.get<std::int32_t>("a tensor constant");
    c.bytes = shared_bytes(r.bytes("a tensor constant"));
  }
  f.variables.resize(r.count("variables", 16));
  for (auto& v : f.variables) {
    v.name = r.text("a variable");
    v.arg = r.get<std::int32_t>("a variable");
    v.assigned = r.get<std::int32_t>("a variable");
    v.value = r.bytes("a variable");
  }
  m.kernels.resize(r.count("kernels", 38));
  for (auto& [key, k] : m.kernels) {
    key = r.text("a kernel's key");
    k.code.resize(r.count("a kernel's words", 4));
    for (auto& word : k.code) word = r.get<std::uint32_t>("a kernel");
    if (!k.code.empty() && k.code[0] != 0x07230203u)
      r.fail("corrupt: kernel '" + key + "' is not SPIR-V (its first word is not the magic)");
    k.unsupported = r.text("a kernel");
    for (auto* v : {&k.bindings, &k.metadata, &k.workgroup, &k.regions, &k.vulkan_version})
      *v = r.get<std::uint32_t>("a kernel");
    for (bool* b : {&k.metadata_in_buffer, &k.per_workgroup, &k.per_tile}) {
      auto v = r.get<std::uint8_t>("a kernel");
      if (v > 1) r.fail("corrupt: kernel '" + key + "' has a flag of " + std::to_string(v));
      *b = v != 0;
    }
    k.constants.resize(r.count("a kernel's constants", 4));
    for (auto& word : k.constants) word = r.get<std::uint32_t>("a kernel");
    // What the executor sizes from them: a kernel's bindings are its region's slots, the
    // constants end its metadata, and it runs at least one of the plan's regions.
    if (k.bindings > 4096 || k.constants.size() > k.metadata || k.metadata > (1u << 20) ||
        k.regions == 0 || k.regions > m.plan.regions.size())
      r.fail("corrupt: kernel '" + key + "' has impossible bindings, metadata or regions");
  }
  if (!r.done()) r.fail("corrupt: bytes after the last field");
  detail::check_plan(m, r);
  if (!trust_kernels) m.kernels.clear();
  return m;
}

}  // namespace kiln::runtime
#endif  // KILN_RUNTIME_BODY
