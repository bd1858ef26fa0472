// The call signature at run time: checks actual arguments against the declared parameters,
// resolves every symbolic size, and gives each result its concrete extents.
#pragma once

#include <cstring>
#include <span>
#include <string>

#include "kiln/compiler/plan.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/core/view.hpp"
#include "kiln/ir/graph.hpp"
#include "kiln/ir/print.hpp"
#include "kiln/runtime/buffer.hpp"

namespace kiln::runtime {

// A type-erased argument or result: host data or device memory, extents, whether it came from a
// flat range, and its strides in elements when it is not row-major (host data only).
struct buffer_ref {
  const void* data = nullptr;
  shape dims;
  bool flat = false;
  const device_memory* memory = nullptr;  // a kiln::buffer's memory (then data is null)
  std::int64_t offset = 0;                // where the buffer starts in memory, in bytes
  bool strided = false;
  stride_list steps{};
};

// A view as a call's argument or result.
template <class T>
buffer_ref ref_of(const tensor_view<T>& v) {
  return {v.data, v.dims, v.flat, nullptr, 0, v.strided, v.steps};
}

// Copies host buffer b's elements (`element_bytes` each) row-major to `to`: packs a strided one.
inline void pack(const buffer_ref& b, void* to, int element_bytes) {
  if (b.strided)
    copy_strided(b.data, b.steps, to, row_major_strides(b.dims), b.dims, element_bytes);
  else if (const std::int64_t n = b.dims.element_count(); n > 0)  // empty data may have no address
    std::memcpy(to, b.data, static_cast<std::size_t>(n * element_bytes));
}
// The other way: row-major elements at `from` into host buffer b (unpacks into a strided one).
inline void unpack(const void* from, const buffer_ref& b, int element_bytes) {
  void* to = const_cast<void*>(b.data);
  if (b.strided)
    copy_strided(from, row_major_strides(b.dims), to, b.steps, b.dims, element_bytes);
  else if (const std::int64_t n = b.dims.element_count(); n > 0)
    std::memcpy(to, from, static_cast<std::size_t>(n * element_bytes));
}

// The extents an argument is read with: its own, or the declared (static) ones for a flat range
// of another rank, which check_arguments accepts when the element counts agree.
inline shape argument_dims(const buffer_ref& b, const shape& declared) {
  return b.dims.rank == declared.rank ? b.dims : declared;
}

KILN_RUNTIME_API std::string declared_text(const ir::input_decl& d);

// "the graph" for an executable (named graph-<hash>), else "the function": who declared it.
KILN_RUNTIME_API std::string declarer(const std::string& who);

// "argument 2 axis 0": an input size among those symbol `sym` joins whose run-time value is
// `size` (the argument a broadcast error is about).
KILN_RUNTIME_API std::string symbol_source(std::span<const ir::symbol> symbols,
                                           const std::int64_t* values, std::int32_t sym,
                                           std::int64_t size);

// Fills sym[i] with the run-time size of symbol i. `who` names the function in messages.
KILN_RUNTIME_API void resolve_symbols(std::span<const ir::input_decl> inputs,
                                      std::span<const ir::node> nodes,
                                      std::span<const ir::symbol> symbols,
                                      std::span<const ir::constraint> constraints,
                                      std::span<const buffer_ref> args, std::int64_t* sym,
                                      const std::string& who);

// The caller's buffer for a result must have exactly the result's extents (a flat range: the same
// element count), and a strided one an element for each index.
KILN_RUNTIME_API void check_result(const buffer_ref& b, dtype t, const shape& expected,
                                   std::size_t index, const std::string& who);

// Results must not overlap each other, nor arguments except in place: the result and the argument
// identical in address (or device memory), type and extents, and the plan writing that result
// only where it has read the argument (compiler::writes_in_place).
KILN_RUNTIME_API void check_overlap(std::span<const ir::input_decl> inputs,
                                    std::span<const ir::node> nodes,
                                    std::span<const std::int32_t> outputs,
                                    const compiler::plan& plan, std::span<const buffer_ref> args,
                                    std::span<const buffer_ref> results, const std::string& who);

// Every check of a call, for both doors: arguments against their declarations (filling sym with
// the run-time sizes), results against their extents, and no overlap but exact in-place.
KILN_RUNTIME_API void check_call(std::span<const ir::input_decl> inputs,
                                 std::span<const ir::node> nodes,
                                 std::span<const ir::symbol> symbols,
                                 std::span<const ir::constraint> constraints,
                                 std::span<const std::int32_t> outputs, const compiler::plan& plan,
                                 std::span<const buffer_ref> args,
                                 std::span<const buffer_ref> results, std::int64_t* sym,
                                 const std::string& who);

// A call on the CPU takes host data only (a kiln::buffer is read back with download()).
KILN_RUNTIME_API void check_host(std::span<const buffer_ref> args,
                                 std::span<const buffer_ref> results, const std::string& who);

// Concrete extents of a symbolic shape.
inline shape concrete(const shape& s, const std::int64_t* sym) {
  shape r = s;
  for (int i = 0; i < s.rank; ++i)
    if (ir::is_symbol(s.dims[i])) r.dims[i] = sym[ir::symbol_of(s.dims[i])];
  return r;
}

// The bytes a buffer of `element_bytes` elements spans, [low, high): host addresses, or offsets
// in its device memory; empty when it holds no element.
struct byte_span {
  std::uintptr_t low = 0, high = 0;
};
inline byte_span span_of(const buffer_ref& b, int element_bytes) {
  const std::uintptr_t start =
      b.memory ? static_cast<std::uintptr_t>(b.offset) : reinterpret_cast<std::uintptr_t>(b.data);
  if (b.dims.element_count() == 0) return {start, start};
  if (!b.strided)
    return {start, start + static_cast<std::uintptr_t>(b.dims.element_count() * element_bytes)};
  const element_range r = reach_of(b.dims, b.steps);
  return {start + static_cast<std::uintptr_t>(r.low * element_bytes),
          start + static_cast<std::uintptr_t>((r.high + 1) * element_bytes)};
}

// Whether two spans share a byte (empty ones never).
inline bool intersect(const byte_span& x, const byte_span& y) {
  return x.low < x.high && y.low < y.high && x.low < y.high && y.low < x.high;
}
// Whether two buffers' spans share any byte (device memory: the same memory and overlapping
// ranges of it).
inline bool overlaps(const buffer_ref& a, int a_bytes, const buffer_ref& b, int b_bytes) {
  return a.memory == b.memory && intersect(span_of(a, a_bytes), span_of(b, b_bytes));
}

#if KILN_RUNTIME_BODY
KILN_RUNTIME_API std::string declared_text(const ir::input_decl& d) {
  return std::string(name(d.type)) + to_string(d.dims);
}

KILN_RUNTIME_API std::string declarer(const std::string& who) {
  return who.rfind("graph", 0) == 0 ? "the graph" : "the function";
}

KILN_RUNTIME_API std::string symbol_source(std::span<const ir::symbol> symbols,
                                           const std::int64_t* values, std::int32_t sym,
                                           std::int64_t size) {
  const ir::symbol& s = symbols[sym];
  if (s.kind == ir::symbol_kind::input)
    return "argument " + std::to_string(s.a + 1) + " axis " + std::to_string(s.b);
  if (s.kind == ir::symbol_kind::exactly) return symbol_source(symbols, values, s.a, size);
  if (ir::is_computed_size(s.kind)) return "a size computed from run-time sizes";
  return symbol_source(symbols, values, values[s.a] == size ? s.a : s.b, size);
}

KILN_RUNTIME_API void resolve_symbols(std::span<const ir::input_decl> inputs,
                                      std::span<const ir::node> nodes,
                                      std::span<const ir::symbol> symbols,
                                      std::span<const ir::constraint> constraints,
                                      std::span<const buffer_ref> args, std::int64_t* sym,
                                      const std::string& who) {
  for (std::size_t a = 0; a < inputs.size(); ++a) {
    const ir::input_decl& d = inputs[a];
    const buffer_ref& b = args[a];
    // Messages are built only on failure: the checks run on every call.
    auto arg = [&] { return "argument " + std::to_string(a + 1); };
    std::int64_t count = b.dims.element_count();
    if (b.data == nullptr && b.memory == nullptr && count != 0)
      throw error(errc::invalid_argument, who,
                  arg() + " has null data for " + std::to_string(count) + " elements");
    bool rank_ok = b.dims.rank == d.dims.rank;
    // A flat range (std::vector, std::span) may stand for any shape whose sizes are all static.
    if (!rank_ok && b.flat && d.dims.is_static() && count == d.dims.element_count()) continue;
    if (!rank_ok)
      throw error(errc::shape_mismatch, who,
                  arg() + " has rank " + std::to_string(b.dims.rank) + " (extents " +
                      to_string(b.dims) + ") but " + declarer(who) + " declares " +
                      declared_text(d));
    for (int i = 0; i < d.dims.rank; ++i)
      if (d.dims[i] >= 0 && d.dims[i] != b.dims[i])
        throw error(errc::shape_mismatch, who,
                    arg() + " has extents " + to_string(b.dims) + " but " + declarer(who) +
                        " declares " + declared_text(d) + " (axis " + std::to_string(i) +
                        " must be " + std::to_string(d.dims[i]) + ")");
    for (int i = 0; i < d.dims.rank; ++i) {
      if (d.same_as[i] == 0) continue;
      const auto from = static_cast<std::size_t>((d.same_as[i] - 1) / max_rank);
      const int axis = (d.same_as[i] - 1) % max_rank;
      if (b.dims[i] != args[from].dims[axis])
        throw error(errc::shape_mismatch, who,
                    arg() + " has extents " + to_string(b.dims) + ", but its axis " +
                        std::to_string(i) + " is the size of argument " + std::to_string(from + 1) +
                        " axis " + std::to_string(axis) + " (" +
                        std::to_string(args[from].dims[axis]) + ")");
    }
  }
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    const ir::symbol& s = symbols[i];
    if (s.kind == ir::symbol_kind::input) {
      sym[i] = args[s.a].dims[s.b];
      continue;
    }
    auto op = [&] { return s.node >= 0 ? std::string(ir::name(nodes[s.node].kind)) : "a node"; };
    if (ir::is_computed_size(s.kind)) {
      const std::int64_t x = sym[s.a],
                         y = s.kind == ir::symbol_kind::product || s.kind == ir::symbol_kind::sum
                                 ? sym[s.b]
                                 : s.b;
      if (s.kind == ir::symbol_kind::floor_quotient) {
        sym[i] = x / y;
      } else if (s.kind == ir::symbol_kind::at_most) {
        if (x > y)
          throw error(errc::shape_mismatch, who,
                      symbol_source(symbols, sym, s.a, x) + " has size " + std::to_string(x) +
                          ", which reads past the end of " + std::to_string(y) + " in " + op());
        sym[i] = x;
      } else if (s.kind == ir::symbol_kind::minimum) {
        sym[i] = std::min(x, y);
      } else if (s.kind == ir::symbol_kind::maximum) {
        sym[i] = std::max(x, y);
      } else if (s.kind == ir::symbol_kind::sum || s.kind == ir::symbol_kind::offset) {
        if (__builtin_add_overflow(x, y, &sym[i]) || sym[i] < 0)
          throw error(errc::shape_mismatch, who,
                      symbol_source(symbols, sym, s.a, x) + " has size " + std::to_string(x) +
                          ", to which a shape of the graph adds " + std::to_string(y) +
                          (sym[i] < 0 ? ": below zero" : ": past 2^63"));
      } else if (s.kind == ir::symbol_kind::quotient) {
        if (x % y != 0)
          throw error(errc::shape_mismatch, who,
                      symbol_source(symbols, sym, s.a, x) + " has size " + std::to_string(x) +
                          ", which a shape of the graph divides by " + std::to_string(y) +
                          ": not a multiple of it");
        sym[i] = x / y;
      } else if (y != 0 && x > std::numeric_limits<std::int64_t>::max() / y) {
        throw error(errc::shape_mismatch, who,
                    "sizes " + std::to_string(x) + " and " + std::to_string(y) +
                        " multiply past 2^63 (a size computed from run-time sizes)");
      } else {
        sym[i] = x * y;
      }
      continue;
    }
    if (s.kind == ir::symbol_kind::exactly) {
      if (sym[s.a] != s.b)
        throw error(errc::shape_mismatch, who,
                    symbol_source(symbols, sym, s.a, sym[s.a]) + " has size " +
                        std::to_string(sym[s.a]) + ", but " + op() +
                        " contracts it with a size of " + std::to_string(s.b));
      sym[i] = s.b;
      continue;
    }
    std::int64_t x = sym[s.a], y = sym[s.b];
    if (s.kind == ir::symbol_kind::equal && x != y)
      throw error(errc::shape_mismatch, who,
                  symbol_source(symbols, sym, s.a, x) + " (size " + std::to_string(x) + ") and " +
                      symbol_source(symbols, sym, s.b, y) + " (size " + std::to_string(y) +
                      ") must be equal: " + op() + " contracts them");
    if (x != y && x != 1 && y != 1)
      throw error(errc::shape_mismatch, who,
                  symbol_source(symbols, sym, s.a, x) + " (size " + std::to_string(x) + ") and " +
                      symbol_source(symbols, sym, s.b, y) + " (size " + std::to_string(y) +
                      ") do not broadcast in " + std::string(ir::name(nodes[s.node].kind)));
    sym[i] = x == 1 ? y : x;
  }
  for (const ir::constraint& c : constraints)
    if (sym[c.sym] != 1 && sym[c.sym] != c.size)
      throw error(errc::shape_mismatch, who,
                  symbol_source(symbols, sym, c.sym, sym[c.sym]) + " has size " +
                      std::to_string(sym[c.sym]) + ", which does not broadcast with " +
                      std::to_string(c.size) + " in " + std::string(ir::name(nodes[c.node].kind)) +
                      " (it must be 1 or " + std::to_string(c.size) + ")");
}

KILN_RUNTIME_API void check_result(const buffer_ref& b, dtype t, const shape& expected,
                                   std::size_t index, const std::string& who) {
  auto res = [&] { return "result " + std::to_string(index + 1); };
  std::int64_t count = checked_element_count(expected, size_in_bytes(t), who, res());
  bool ok = b.flat ? b.dims.element_count() == count : b.dims == expected;
  if (!ok)
    throw error(errc::shape_mismatch, who,
                res() + " is " + std::string(name(t)) + to_string(expected) +
                    " but its buffer has " +
                    (b.flat ? std::to_string(b.dims.element_count()) + " elements"
                            : "extents " + to_string(b.dims)));
  if (b.data == nullptr && b.memory == nullptr && count != 0)
    throw error(errc::invalid_argument, who,
                res() + " has null data for " + std::to_string(count) + " elements");
  if (b.strided && shares_elements(b.dims, b.steps)) {
    std::string st;
    for (int i = 0; i < b.dims.rank; ++i) st += (i ? ", " : "") + std::to_string(b.steps[i]);
    throw error(errc::invalid_argument, who,
                res() + " is a strided view (extents " + to_string(b.dims) + ", strides [" + st +
                    "]) in which two indices name the same element; a result needs an element "
                    "of its own for each index");
  }
}

KILN_RUNTIME_API void check_overlap(std::span<const ir::input_decl> inputs,
                                    std::span<const ir::node> nodes,
                                    std::span<const std::int32_t> outputs,
                                    const compiler::plan& plan, std::span<const buffer_ref> args,
                                    std::span<const buffer_ref> results, const std::string& who) {
  auto result_bytes = [&](std::size_t r) { return size_in_bytes(nodes[outputs[r]].type); };
  for (std::size_t r = 0; r < results.size(); ++r)
    for (std::size_t q = 0; q < r; ++q)
      if (overlaps(results[q], result_bytes(q), results[r], result_bytes(r)))
        throw error(
            errc::invalid_argument, who,
            "result " + std::to_string(r + 1) + " overlaps result " + std::to_string(q + 1) +
                "; every result needs memory of its own" +
                (results[q].strided || results[r].strided ? " (strided results may not interleave)"
                                                          : ""));
  for (std::size_t r = 0; r < results.size(); ++r) {
    dtype result_type = nodes[outputs[r]].type;
    for (std::size_t a = 0; a < args.size(); ++a) {
      dtype arg_type = inputs[a].type;
      if (results[r].memory != args[a].memory) continue;
      const byte_span x = span_of(results[r], size_in_bytes(result_type)),
                      y = span_of(args[a], size_in_bytes(arg_type));
      if (!intersect(x, y)) continue;
      // The same elements in the same places: the same span, type, extents and strides.
      const buffer_ref &res = results[r], &arg = args[a];
      const bool identical = x.low == y.low && x.high == y.high && result_type == arg_type &&
                             res.dims.element_count() == arg.dims.element_count() &&
                             res.strided == arg.strided &&
                             (!res.strided || (res.dims == arg.dims && res.steps == arg.steps));
      if (identical && compiler::writes_in_place(plan, static_cast<std::int32_t>(a),
                                                 static_cast<std::int32_t>(r)))
        continue;
      throw error(errc::invalid_argument, who,
                  "result " + std::to_string(r + 1) + " overlaps argument " +
                      std::to_string(a + 1) +
                      (identical ? "; the function reads that argument other than element by "
                                   "element where it writes the result (through a view, a "
                                   "reduction, a contraction or a broadcast, or in another "
                                   "region), so it cannot write it in place: give the result "
                                   "memory of its own"
                                 : "; writing in place needs identical buffers (same address, "
                                   "type, extents and strides)"));
    }
  }
}

KILN_RUNTIME_API void check_call(std::span<const ir::input_decl> inputs,
                                 std::span<const ir::node> nodes,
                                 std::span<const ir::symbol> symbols,
                                 std::span<const ir::constraint> constraints,
                                 std::span<const std::int32_t> outputs, const compiler::plan& plan,
                                 std::span<const buffer_ref> args,
                                 std::span<const buffer_ref> results, std::int64_t* sym,
                                 const std::string& who) {
  resolve_symbols(inputs, nodes, symbols, constraints, args, sym, who);
  for (std::size_t r = 0; r < results.size(); ++r) {
    const ir::node& n = nodes[outputs[r]];
    check_result(results[r], n.type, concrete(n.dims, sym), r, who);
  }
  check_overlap(inputs, nodes, outputs, plan, args, results, who);
}

KILN_RUNTIME_API void check_host(std::span<const buffer_ref> args,
                                 std::span<const buffer_ref> results, const std::string& who) {
  auto check = [&](const buffer_ref& b, const char* what, std::size_t i) {
    if (b.memory)
      throw error(errc::invalid_argument, who,
                  std::string(what) + " " + std::to_string(i + 1) + " lives on " +
                      b.memory->device_name() + " but the call runs on the cpu");
  };
  for (std::size_t a = 0; a < args.size(); ++a) check(args[a], "argument", a);
  for (std::size_t r = 0; r < results.size(); ++r) check(results[r], "result", r);
}
#endif  // KILN_RUNTIME_BODY

}  // namespace kiln::runtime
