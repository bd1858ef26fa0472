// kiln::compile(graph), the run-time door: the same passes as kiln::fn, then per device the same
// executables (SPIR-V regions on Vulkan; on the CPU a tiled interpreter over the same primitives).
// The executable itself, and loading saved modules, are <kiln/runtime.hpp>'s.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kiln/compiler/compile.hpp"
#include "kiln/function.hpp"
#include "kiln/graph/graph.hpp"
#include "kiln/runtime.hpp"

namespace kiln {

namespace detail {
// A kiln::fn's plan as an executable: inputs "arg1", ..., results "result1", ..., its tables as
// tensor constants (compile(f), f.save). Its frozen plan and trace are thawed here, once in the
// runtime, not in each file that compiles a fn.
KILN_RUNTIME_API executable fn_executable(const compiler::frozen_parts& plan,
                                          const compiler::frozen_parts& traced, int parameters,
                                          int results, const char* name);
KILN_RUNTIME_API std::shared_ptr<const void> compile_traced_fn(const compiler::frozen_parts& traced,
                                                               int parameters, int results,
                                                               const char* name);
KILN_RUNTIME_API void save_fn(const compiler::plan& plan, const compiler::frozen_parts& traced,
                              int parameters, int results, const std::string& path,
                              const char* name);
KILN_RUNTIME_API fence run_traced_fn(const void* compiled, const device& d,
                                     std::span<const runtime::buffer_ref> args,
                                     std::span<const runtime::buffer_ref> results,
                                     const workspace& ws, const submission_order* order);
KILN_RUNTIME_API void reproduce_fn(const compiler::plan& plan, const compiler::frozen_parts& traced,
                                   int parameters, int results, const device& d,
                                   std::span<const runtime::buffer_ref> args, const error& e,
                                   const char* name);
// A failed compile(): with KILN_REPRO_DIR set, the graph and the error written to a fresh folder
// there, and e thrown again naming it; else e.
[[noreturn]] KILN_RUNTIME_API void compile_failed(const ir::graph& ir, const error& e);
#if !defined(KILN_SEPARATE_RUNTIME)
// Gives kiln::fn what only this door has (function.hpp, detail::fn_door), once per program. With
// the runtime library, its object src/fn_door.cpp does (linked by the programs that use kiln::fn).
inline const bool fn_door_given = [] {
  fn_door_services = {&compile_traced_fn, &run_traced_fn, &save_fn, &reproduce_fn};
  return true;
}();
#endif
}  // namespace detail

namespace detail {
// compile()'s work on an IR graph: tensor constants (`constants` and the graph's own) become the
// plan's last inputs, and its trace points results after its own when tracing is on.
KILN_RUNTIME_API executable compile_ir(ir::graph ir, std::vector<graph::tensor_constant> constants,
                                       std::vector<graph::variable_slot> variables,
                                       std::vector<std::string> inputs,
                                       std::vector<std::string> outputs, compiler::options opt,
                                       const char* prefix);
}  // namespace detail

// Compiles a run-time graph: verify, canonicalize, dispatch regions, plan; CPU tile programs
// now, Vulkan kernels at the first call on a Vulkan device. With tracing on (runtime/trace.hpp)
// its trace points are recorded at each call. Compiled once with the runtime (the passes are
// the bulk of a graph-building file's code otherwise).
KILN_RUNTIME_API executable compile(const graph& g, compiler::options opt = {});
// The same, taking the graph's tensor constants over instead of copying them (the graph keeps
// everything else): the weights are then held once, by the executable.
KILN_RUNTIME_API executable compile(graph&& g, compiler::options opt = {});

// A kiln::fn through the run-time door (inputs "arg1", ..., results "result1", ...): the same
// plan, run on the CPU by the tiled interpreter instead of the compile-time kernels.
template <class F, class... P>
executable compile(const function<F, P...>& f) {
  if (detail::frozen_trace_v<F, P...>.sizes.traces > 0 && tracing_enabled())
    return *std::static_pointer_cast<const executable>(
        detail::compile_traced_fn(compiler::parts_of<detail::frozen_trace_v<F, P...>>,
                                  f.parameter_count, f.result_count, detail::fn_prefix<F, P...>()));
  return detail::fn_executable(compiler::parts_of<detail::frozen_plan_v<F, P...>>,
                               compiler::parts_of<detail::frozen_trace_v<F, P...>>,
                               f.parameter_count, f.result_count, detail::fn_prefix<F, P...>());
}

inline result<executable> try_compile(const graph& g, compiler::options opt = {}) {
  return try_call([&] { return compile(g, opt); });
}

}  // namespace kiln

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
namespace kiln {

namespace detail {
[[noreturn]] KILN_RUNTIME_API void compile_failed(const ir::graph& ir, const error& e) {
  const std::string folder = runtime::reproducer_folder("graph");
  if (folder.empty()) throw e;
  bool whole = true;
  for (const auto& [file, body] : {std::pair<std::string, std::string>{"graph.ir", ir::print(ir)},
                                   {"error.txt", std::string(e.what()) + "\n"}})
    whole = runtime::write_file(folder + "/" + file, body.data(), body.size(), "KILN_REPRO_DIR") &&
            whole;
  runtime::rethrow_naming(e, folder, whole);
}

KILN_RUNTIME_API executable compile_ir(ir::graph ir, std::vector<graph::tensor_constant> constants,
                                       std::vector<graph::variable_slot> variables,
                                       std::vector<std::string> inputs,
                                       std::vector<std::string> outputs, compiler::options opt,
                                       const char* prefix) {
  runtime::function_parts parts{std::move(inputs), std::move(outputs), {}, {}, {}};
  for (auto& c : constants) parts.constants.push_back({c.arg, std::move(c.bytes)});
  // Tensor constants go after the parameters, so that a parameter's position in the IR is its
  // position in a call (and in every message about it).
  for (const ir::tensor_data& t : ir.tensors)  // the builder's own (pad's and concat's positions)
    parts.constants.push_back(
        {t.arg, shared_bytes(runtime::tensor_bytes(ir.inputs[t.arg].type, t.values))});
  ir.tensors.clear();
  std::vector<std::int32_t> moved_to(ir.inputs.size(), -1);
  std::int32_t next = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t a = 0; a < ir.inputs.size(); ++a) {
      bool supplied = false;  // by the executable: a tensor constant, a variable or positions
      for (const auto& c : parts.constants)
        supplied = supplied || c.arg == static_cast<std::int32_t>(a);
      for (const auto& v : variables) supplied = supplied || v.arg == static_cast<std::int32_t>(a);
      for (std::int32_t p : ir.positions) supplied = supplied || p == static_cast<std::int32_t>(a);
      if (supplied == (pass == 1)) moved_to[a] = next++;
    }
  std::vector<ir::input_decl> decls(ir.inputs.size());
  for (std::size_t a = 0; a < ir.inputs.size(); ++a) {
    decls[moved_to[a]] = ir.inputs[a];
    for (std::int32_t& s : decls[moved_to[a]].same_as)  // parameters keep their order
      if (s != 0) s = ir::same_as_code(moved_to[(s - 1) / max_rank], (s - 1) % max_rank);
  }
  ir.inputs = std::move(decls);
  for (auto& n : ir.nodes)
    if (n.kind == ir::op::input) n.arg = moved_to[n.arg];
  for (auto& sym : ir.symbols)
    if (sym.kind == ir::symbol_kind::input) sym.a = moved_to[sym.a];
  for (auto& c : parts.constants) c.arg = moved_to[c.arg];
  for (std::int32_t& p : ir.positions) p = moved_to[p];
  // Assignments are results after the function's own; trace points follow them.
  for (const auto& v : variables) {
    std::int32_t assigned = -1;
    if (v.assigned >= 0) {
      ir.outputs.push_back(v.assigned);
      assigned = static_cast<std::int32_t>(ir.outputs.size() - 1);
    }
    parts.variables.push_back({v.name, moved_to[v.arg], assigned, {}});
  }
  parts.traces = runtime::expose_traces(ir);
  compiler::plan plan;
  try {
    plan = compiler::compile(ir, opt);
  } catch (const error& e) {
    compile_failed(ir, e);
  }
  return executable(std::move(plan), ir, std::move(parts), prefix);
}

// A kiln::fn's parts as the run-time door names them: inputs "arg1", ..., results "result1", ...
inline runtime::function_parts fn_names(int parameters, int results) {
  runtime::function_parts parts;
  for (int a = 1; a <= parameters; ++a) parts.inputs.push_back("arg" + std::to_string(a));
  for (int r = 1; r <= results; ++r) parts.outputs.push_back("result" + std::to_string(r));
  return parts;
}

inline executable fn_executable(compiler::plan plan, const ir::graph& traced, int parameters,
                                int results, const char* name) {
  runtime::function_parts parts = fn_names(parameters, results);
  // The function's tables (kiln::table), its last inputs, as the executable's tensor constants.
  for (const ir::tensor_data& t : plan.graph.tensors)
    parts.constants.push_back(
        {t.arg, shared_bytes(runtime::tensor_bytes(plan.graph.inputs[t.arg].type, t.values))});
  plan.graph.tensors.clear();
  return executable(std::move(plan), traced, std::move(parts), name);
}

KILN_RUNTIME_API executable fn_executable(const compiler::frozen_parts& plan,
                                          const compiler::frozen_parts& traced, int parameters,
                                          int results, const char* name) {
  return fn_executable(compiler::thaw(plan), compiler::thaw(traced).graph, parameters, results,
                       name);
}

KILN_RUNTIME_API std::shared_ptr<const void> compile_traced_fn(const compiler::frozen_parts& traced,
                                                               int parameters, int results,
                                                               const char* name) {
  runtime::function_parts names = fn_names(parameters, results);
  return std::make_shared<const executable>(compile_ir(compiler::thaw(traced).graph, {}, {},
                                                       std::move(names.inputs),
                                                       std::move(names.outputs), {}, name));
}

KILN_RUNTIME_API void save_fn(const compiler::plan& plan, const compiler::frozen_parts& traced,
                              int parameters, int results, const std::string& path,
                              const char* name) {
  fn_executable(plan, compiler::thaw(traced).graph, parameters, results, name).save(path);
}

KILN_RUNTIME_API void reproduce_fn(const compiler::plan& plan, const compiler::frozen_parts& traced,
                                   int parameters, int results, const device& d,
                                   std::span<const runtime::buffer_ref> args, const error& e,
                                   const char* name) {
  const char* root = std::getenv("KILN_REPRO_DIR");
  if (!root || !*root) return;  // no executable made for nothing
  std::vector<tensor_ref> given;
  for (std::size_t k = 0; k < args.size(); ++k)
    given.emplace_back(args[k], plan.graph.inputs[k].type, false);
  fn_executable(plan, compiler::thaw(traced).graph, parameters, results, name)
      .write_reproducer(d, given, e);
}

KILN_RUNTIME_API fence run_traced_fn(const void* compiled, const device& d,
                                     std::span<const runtime::buffer_ref> args,
                                     std::span<const runtime::buffer_ref> results,
                                     const workspace& ws, const submission_order* order) {
  const auto& exe = *static_cast<const executable*>(compiled);
  const ir::graph& g = exe.plan().graph;
  std::vector<tensor_ref> a, r;
  for (std::size_t k = 0; k < args.size(); ++k) a.emplace_back(args[k], g.inputs[k].type, false);
  for (std::size_t k = 0; k < results.size(); ++k)
    r.emplace_back(results[k], g.nodes[g.outputs[k]].type, true);
  if (order) return exe.submit(*order, a, r, d, ws);
  exe.run(a, r, d, ws);
  return {};
}
}  // namespace detail

namespace detail {
inline void check_compilable(const graph& g) {
  bool assigns = false;
  for (const auto& v : g.variables()) assigns = assigns || v.assigned >= 0;
  if (g.ir().outputs.empty() && !assigns)
    throw error(errc::invalid_graph, "compile",
                "the graph has no outputs (graph::output) and assigns no variable");
}
}  // namespace detail

KILN_RUNTIME_API executable compile(const graph& g, compiler::options opt) {
  detail::check_compilable(g);
  return detail::compile_ir(g.ir(), g.constants(), g.variables(), g.input_names(), g.output_names(),
                            opt, g.name().c_str());
}

KILN_RUNTIME_API executable compile(graph&& g, compiler::options opt) {
  detail::check_compilable(g);
  return detail::compile_ir(g.ir(), g.take_constants(), g.variables(), g.input_names(),
                            g.output_names(), opt, g.name().c_str());
}

}  // namespace kiln
#endif  // KILN_RUNTIME_BODY
