// The call signature at run time: checks actual arguments against the declared parameters,
// resolves every symbolic size, and gives each result its concrete extents.
#pragma once

#include <span>
#include <string>

#include "kiln/core/error.hpp"
#include "kiln/ir/graph.hpp"
#include "kiln/ir/print.hpp"
#include "kiln/runtime/buffer.hpp"

namespace kiln::runtime {

// A type-erased argument or result: host data or device memory, extents, and whether it came
// from a flat range.
struct buffer_ref {
  const void* data = nullptr;
  shape dims;
  bool flat = false;
  const device_memory* memory = nullptr;  // a kiln::buffer's memory (then data is null)
};

inline std::string declared_text(const ir::input_decl& d) {
  return std::string(name(d.type)) + to_string(d.dims);
}

// Fills sym[i] with the run-time size of symbol i. `who` names the function in messages.
inline void resolve_symbols(std::span<const ir::input_decl> inputs, std::span<const ir::node> nodes,
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
                      to_string(b.dims) + ") but the function declares " + declared_text(d));
    for (int i = 0; i < d.dims.rank; ++i)
      if (d.dims[i] >= 0 && d.dims[i] != b.dims[i])
        throw error(errc::shape_mismatch, who,
                    arg() + " has extents " + to_string(b.dims) + " but the function declares " +
                        declared_text(d) + " (size " + std::to_string(i) + " must be " +
                        std::to_string(d.dims[i]) + ")");
  }
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    const ir::symbol& s = symbols[i];
    if (s.kind == ir::symbol_kind::input) {
      sym[i] = args[s.a].dims[s.b];
      continue;
    }
    std::int64_t x = sym[s.a], y = sym[s.b];
    if (x != y && x != 1 && y != 1)
      throw error(errc::shape_mismatch, std::string(ir::name(nodes[s.node].kind)),
                  "run-time sizes " + std::to_string(x) + " and " + std::to_string(y) +
                      " do not broadcast (in %" + std::to_string(s.node) + " of " + who + ")");
    sym[i] = x == 1 ? y : x;
  }
  for (const ir::constraint& c : constraints)
    if (sym[c.sym] != 1 && sym[c.sym] != c.size)
      throw error(errc::shape_mismatch, std::string(ir::name(nodes[c.node].kind)),
                  "run-time size " + std::to_string(sym[c.sym]) + " does not broadcast with " +
                      std::to_string(c.size) + " (in %" + std::to_string(c.node) + " of " + who +
                      ")");
}

// Concrete extents of a symbolic shape.
inline shape concrete(const shape& s, const std::int64_t* sym) {
  shape r = s;
  for (int i = 0; i < s.rank; ++i)
    if (ir::is_symbol(s.dims[i])) r.dims[i] = sym[ir::symbol_of(s.dims[i])];
  return r;
}

// The caller's buffer for a result must have exactly the result's extents (a flat range: the same
// element count).
inline void check_result(const buffer_ref& b, dtype t, const shape& expected, std::size_t index,
                         const std::string& who) {
  auto res = [&] { return "result " + std::to_string(index + 1); };
  std::int64_t count = expected.element_count();
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
}

// Results must not overlap arguments, except in place: safe only where every element is read
// before it is written, so one region, and the result and the argument identical in address (or
// device memory), type and extents.
inline void check_overlap(std::span<const ir::input_decl> inputs, std::span<const ir::node> nodes,
                          std::span<const std::int32_t> outputs, int region_count,
                          std::span<const buffer_ref> args, std::span<const buffer_ref> results,
                          const std::string& who) {
  for (std::size_t r = 0; r < results.size(); ++r) {
    dtype result_type = nodes[outputs[r]].type;
    for (std::size_t a = 0; a < args.size(); ++a) {
      dtype arg_type = inputs[a].type;
      bool same_type = result_type == arg_type && region_count == 1;
      std::int64_t result_count = results[r].dims.element_count();
      std::int64_t arg_count = args[a].dims.element_count();
      if (results[r].memory || args[a].memory) {
        if (results[r].memory != args[a].memory) continue;
        if (same_type && result_count == arg_count) continue;
      } else {
        auto* lo = static_cast<const unsigned char*>(results[r].data);
        auto* hi = lo + result_count * size_in_bytes(result_type);
        auto* alo = static_cast<const unsigned char*>(args[a].data);
        auto* ahi = alo + arg_count * size_in_bytes(arg_type);
        if (lo >= ahi || alo >= hi || lo == hi || alo == ahi) continue;
        // Same address, same end and same type imply the same element count.
        if (lo == alo && hi == ahi && same_type) continue;
      }
      throw error(errc::invalid_argument, who,
                  "result " + std::to_string(r + 1) + " overlaps argument " +
                      std::to_string(a + 1) +
                      "; writing in place needs identical buffers (same address, type and "
                      "extents) in a single-region function");
    }
  }
}

// Every check of a call, for both doors: arguments against their declarations (filling sym with
// the run-time sizes), results against their extents, and no overlap but exact in-place.
inline void check_call(std::span<const ir::input_decl> inputs, std::span<const ir::node> nodes,
                       std::span<const ir::symbol> symbols,
                       std::span<const ir::constraint> constraints,
                       std::span<const std::int32_t> outputs, int region_count,
                       std::span<const buffer_ref> args, std::span<const buffer_ref> results,
                       std::int64_t* sym, const std::string& who) {
  resolve_symbols(inputs, nodes, symbols, constraints, args, sym, who);
  for (std::size_t r = 0; r < results.size(); ++r) {
    const ir::node& n = nodes[outputs[r]];
    check_result(results[r], n.type, concrete(n.dims, sym), r, who);
  }
  check_overlap(inputs, nodes, outputs, region_count, args, results, who);
}

// A call on the CPU takes host data only (a kiln::buffer is read back with download()).
inline void check_host(std::span<const buffer_ref> args, std::span<const buffer_ref> results,
                       const std::string& who) {
  auto check = [&](const buffer_ref& b, const char* what, std::size_t i) {
    if (b.memory)
      throw error(errc::invalid_argument, who,
                  std::string(what) + " " + std::to_string(i + 1) + " lives on " +
                      b.memory->device_name() + " but the call runs on the cpu");
  };
  for (std::size_t a = 0; a < args.size(); ++a) check(args[a], "argument", a);
  for (std::size_t r = 0; r < results.size(); ++r) check(results[r], "result", r);
}

}  // namespace kiln::runtime
