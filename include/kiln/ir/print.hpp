// The stable textual form of an ir::graph: one op per line with its type, used by tests and dumps.
#pragma once

#include <charconv>
#include <string>

#include "kiln/ir/graph.hpp"

namespace kiln::ir {

// "[4, s0]": static sizes as numbers, symbols as s<id>.
inline std::string dims_text(const shape& s) {
  std::string out = "[";
  for (int i = 0; i < s.rank; ++i) {
    if (i) out += ", ";
    // Two appends rather than "s" + to_string(...), which GCC 12 misreads (-Wrestrict).
    if (is_symbol(s.dims[i])) out += 's';
    out += std::to_string(is_symbol(s.dims[i]) ? symbol_of(s.dims[i]) : s.dims[i]);
  }
  return out + "]";
}

// "f32[4, s0]"
inline std::string type_text(dtype t, const shape& s) {
  return std::string(name(t)) + dims_text(s);
}

// Shortest text that reads back to the same value.
inline std::string scalar_text(const scalar& v) {
  if (!is_floating(v.type))
    return v.type == dtype::boolean ? (v.i ? "true" : "false") : std::to_string(v.i);
  char buf[64];
  // Shortest for the dtype's own precision: an f32 constant prints as 0.1, not 0.100000001490116.
  auto r = v.type == dtype::f64 ? std::to_chars(buf, buf + sizeof buf, v.f)
                                : std::to_chars(buf, buf + sizeof buf, static_cast<float>(v.f));
  return std::string(buf, r.ptr);
}

inline std::string print(const graph& g) {
  std::string out = "graph(";
  for (std::size_t i = 0; i < g.inputs.size(); ++i) {
    if (i) out += ", ";
    out += std::string(name(g.inputs[i].type)) + to_string(g.inputs[i].dims);
  }
  out += ")\n";
  for (std::size_t i = 0; i < g.symbols.size(); ++i) {
    const symbol& s = g.symbols[i];
    out += "  s" + std::to_string(i) + " = ";
    const std::string a = "s" + std::to_string(s.a), b = "s" + std::to_string(s.b);
    switch (s.kind) {
      case symbol_kind::input:
        out += "size of input " + std::to_string(s.a) + " axis " + std::to_string(s.b);
        break;
      case symbol_kind::broadcast:
        out += "broadcast " + a + ", " + b;
        break;
      case symbol_kind::equal:
        out += a + ", which must equal " + b;
        break;
      case symbol_kind::exactly:
        out += a + ", which must be " + std::to_string(s.b);
        break;
      case symbol_kind::product:
        out += a + " x " + b;
        break;
      case symbol_kind::scaled:
        out += a + " x " + std::to_string(s.b);
        break;
      case symbol_kind::quotient:
        out += a + " / " + std::to_string(s.b) + ", which must divide";
        break;
      case symbol_kind::sum:
        out += a + " + " + b;
        break;
      case symbol_kind::floor_quotient:
        out += a + " / " + std::to_string(s.b) + ", rounded down";
        break;
      case symbol_kind::minimum:
        out += "min(" + a + ", " + std::to_string(s.b) + ")";
        break;
      case symbol_kind::maximum:
        out += "max(" + a + ", " + std::to_string(s.b) + ")";
        break;
      case symbol_kind::at_most:
        out += a + ", which must not pass " + std::to_string(s.b);
        break;
      case symbol_kind::offset:
        out += a +
               (s.b < 0 ? " - " + std::to_string(-std::int64_t{s.b}) : " + " + std::to_string(s.b));
        break;
    }
    out += "\n";
  }
  for (const constraint& c : g.constraints)
    out += "  require s" + std::to_string(c.sym) + " in {1, " + std::to_string(c.size) + "}\n";
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const node& n = g.nodes[i];
    out += "  %" + std::to_string(i) + " = " + std::string(name(n.kind));
    if (n.kind == op::input) out += " " + std::to_string(n.arg);
    if (n.kind == op::constant) out += " " + scalar_text(n.value);
    for (int k = 0; k < n.arity(); ++k) out += (k ? ", %" : " %") + std::to_string(n.operands[k]);
    if (is_reduction(info(n.kind).cls)) {
      out += " axes [";
      for (int a = 0, first = 1; a < 32; ++a)
        if (reduces(n.attrs, a)) {
          out += (first ? "" : ", ") + std::to_string(a);
          first = 0;
        }
      out += n.attrs.keepdims ? "] keepdims" : "]";
      if (n.attrs.select_last) out += " last";
    }
    if (n.kind == op::transpose) {
      out += " perm [";
      for (int a = 0; a < n.dims.rank; ++a)
        out += (a ? ", " : "") + std::to_string(n.attrs.perm[a]);
      out += "]";
    }
    if (n.kind == op::slice) {
      out += " starts [";
      for (int a = 0; a < n.dims.rank; ++a)
        out += (a ? ", " : "") + std::to_string(n.attrs.starts[a]);
      out += "] steps [";
      for (int a = 0; a < n.dims.rank; ++a)
        out += (a ? ", " : "") + std::to_string(n.attrs.steps[a]);
      out += "]";
    }
    if (is_convolution(n.kind)) {
      auto list = [&](const char* what, auto at) {
        out += std::string(" ") + what + " [";
        for (int a = 2; a < n.dims.rank; ++a) out += (a > 2 ? ", " : "") + std::to_string(at(a));
        out += "]";
      };
      list("strides", [&](int a) { return n.attrs.steps[a]; });
      list("pads", [&](int a) { return -std::int64_t{n.attrs.starts[a]}; });
      list("dilations", [&](int a) { return n.attrs.dilations[a]; });
      out += " groups " + std::to_string(n.attrs.groups);
    }
    if (is_gather(n.kind)) out += " axis " + std::to_string(n.attrs.axis);
    if (n.kind == op::shift) {
      constexpr const char* folds[] = {"clamp", "reflect", "wrap"};
      out += " axis " + std::to_string(n.attrs.axis) + " from " +
             std::to_string(n.attrs.starts[n.attrs.axis]) +
             (n.attrs.begin_symbol >= 0
                  ? (n.attrs.window ? " - s" : " + s") + std::to_string(n.attrs.begin_symbol)
                  : "") +
             (n.attrs.window ? " window" : "") + " " +
             (n.attrs.fold < 3 ? folds[n.attrs.fold] : "?");
    }
    out += " : " + type_text(n.type, n.dims) + "\n";
  }
  for (const trace_point& t : g.traces)
    out += "  trace '" + std::string(t.text()) + "' %" + std::to_string(t.node) + "\n";
  out += "  return";
  for (std::size_t i = 0; i < g.outputs.size(); ++i)
    out += (i ? ", %" : " %") + std::to_string(g.outputs[i]);
  return out + "\n";
}

}  // namespace kiln::ir
