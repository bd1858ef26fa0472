// kiln::compile(graph), the run-time door: the same passes as kiln::fn, then per device the same
// executables (SPIR-V regions on Vulkan; on the CPU a tiled interpreter over the same primitives).
#pragma once

#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/codegen/spirv/kernel.hpp"
#include "kiln/core/result.hpp"
#include "kiln/function.hpp"
#include "kiln/graph/graph.hpp"
#include "kiln/interop/arguments.hpp"
#include "kiln/runtime/abi.hpp"
#include "kiln/runtime/device.hpp"
#include "kiln/runtime/execute.hpp"
#include "kiln/runtime/program.hpp"
#include "kiln/runtime/trace.hpp"
#include "kiln/runtime/variable.hpp"

namespace kiln {

// Tensor data for a run-time call, its element type known only at run time: a std::vector, a
// std::span, a contiguous range, kiln::view(...), a kiln::buffer, or a number for a scalar.
struct tensor_ref {
  runtime::buffer_ref ref;
  dtype type = dtype::f32;
  bool writable = false;

  // Type-erased data (a framework's tensor): row-major, contiguous, `dims` extents of `t`.
  tensor_ref(const void* data, dtype t, const shape& dims)
      : ref{data, dims, false, nullptr}, type(t) {
    check();
  }
  tensor_ref(void* data, dtype t, const shape& dims)
      : ref{data, dims, false, nullptr}, type(t), writable(true) {
    check();
  }
  tensor_ref(const void* data, dtype t, std::initializer_list<std::int64_t> dims)
      : tensor_ref(data, t, shape_of(dims, "tensor_ref", "the tensor")) {}
  tensor_ref(void* data, dtype t, std::initializer_list<std::int64_t> dims)
      : tensor_ref(data, t, shape_of(dims, "tensor_ref", "the tensor")) {}
  // A reference a door has already made (a kiln::fn's argument), and its element type.
  tensor_ref(const runtime::buffer_ref& r, dtype t, bool can_write)
      : ref(r), type(t), writable(can_write) {}

  template <tensor_argument A>
  tensor_ref(A&& a) {  // NOLINT: implicit, so {"x", data} reads naturally
    using D = std::remove_cvref_t<A>;
    type = dtype_of<argument_element_t<A>>;
    if constexpr (device_buffer<D>) {
      ref = {nullptr, a.dims(), a.flat(), a.memory(), a.offset_bytes()};
      writable = true;
    } else {
      auto v = as_view(a);
      ref = {v.data, v.dims, v.flat, nullptr};
      writable =
          !std::is_const_v<std::remove_pointer_t<decltype(v.data)>> && !std::is_arithmetic_v<D>;
    }
  }

 private:
  void check() const {
    if (!is_valid(type))
      throw error(
          errc::invalid_argument, "tensor_ref",
          "dtype value " + std::to_string(static_cast<int>(type)) + " is not a kiln::dtype");
    checked_element_count(ref.dims, size_in_bytes(type), "tensor_ref", "the tensor");
  }
};

// A tensor_ref under the name of a graph input or output.
struct named_tensor {
  std::string_view name;
  tensor_ref tensor;
};

class executable {
 public:
  // Takes a compiled plan, the names of its inputs and outputs, its tensor constants and
  // variables (the plan's inputs that are not parameters; a variable's `assigned` is the plan's
  // result that it takes, after `outputs`) and its trace points (the plan's last results): what
  // compile() does. `prefix` starts its name.
  KILN_RUNTIME_API executable(compiler::plan p, const ir::graph& traced,
                              std::vector<std::string> inputs, std::vector<std::string> outputs,
                              std::vector<graph::tensor_constant> constants = {},
                              std::vector<graph::variable_slot> variables = {},
                              std::vector<std::string> traces = {}, const char* prefix = "graph");

  KILN_RUNTIME_API const compiler::plan& plan() const;
  int dispatch_count() const { return plan().dispatch_count(); }
  KILN_RUNTIME_API const std::vector<std::string>& input_names() const;
  KILN_RUNTIME_API const std::vector<std::string>& output_names() const;
  // The trace points it records at each call (none when compiled with tracing off).
  KILN_RUNTIME_API const std::vector<std::string>& trace_names() const;

  // Its variable `name` (graph::variable): load and save its value, or give it to another
  // executable. Copies of the executable share their variables.
  KILN_RUNTIME_API kiln::variable variable(std::string_view name) const;
  // Makes variable `name` the given one (of the same dtype and extents), shared from now on: two
  // executables given one variable read and update the same tensor.
  KILN_RUNTIME_API void share_variable(std::string_view name, const kiln::variable& v) const;
  KILN_RUNTIME_API std::vector<std::string> variable_names() const;
  // Whether a call writes variable `name`'s new value into its memory in place (else into a
  // temporary, copied in after the call succeeded).
  KILN_RUNTIME_API bool assigns_in_place(std::string_view name) const;
  // "graph-<hash>": in notices, errors and dump paths.
  KILN_RUNTIME_API const std::string& name() const;
  // The SPIR-V kernels emitted so far (one per region and operand layout), for inspection.
  KILN_RUNTIME_API std::vector<spirv::kernel> kernels() const;

  // The function's signature (runtime/abi.hpp): to_string(exe.signature()) is its raw-ABI string.
  KILN_RUNTIME_API kiln::signature signature() const;
  // Whether a buffer described so can be argument i (result r), answered before any call.
  KILN_RUNTIME_API acceptance accepts(int i, const buffer_description& given) const;
  KILN_RUNTIME_API acceptance accepts_result(int r, const buffer_description& given) const;

  // Runs on `d`: arguments in the graph's input order, results in its output order. The call's
  // transients live in the executable's arena for `d`, or in `ws` when the caller gives one.
  void run(std::span<const tensor_ref> args, std::span<const tensor_ref> results,
           const device& d = device::default_device(), const workspace& ws = {}) const {
    run_on(d, args, results, ws);
  }
  void run(std::initializer_list<tensor_ref> args, std::initializer_list<tensor_ref> results,
           const device& d = device::default_device(), const workspace& ws = {}) const {
    run_on(d, std::span(args.begin(), args.size()), std::span(results.begin(), results.size()), ws);
  }
  // Runs a function of no parameters and no results (one that assigns variables).
  void run(const device& d) const { run_on(d, {}, {}, {}); }
  // Runs with arguments and results by name, in any order.
  void run(std::initializer_list<named_tensor> args, std::initializer_list<named_tensor> results,
           const device& d = device::default_device(), const workspace& ws = {}) const {
    auto a = by_position(args, input_names(), "argument");
    auto r = by_position(results, output_names(), "result");
    run_on(d, a, r, ws);
  }

  // Submits a run on `d` and returns at once (runtime/fence.hpp): the fence is reached when it is
  // done, and its wait() throws the run's kiln::error. Runs on one device happen in submission
  // order; a leading kiln::after(f, ...) makes this one wait for other fences as well (on the
  // device where it can). Mistakes in the arguments throw here, before anything is queued.
  // kiln::buffers and the workspace are kept alive until the fence; host data must be (numbers
  // for scalars are copied).
  fence submit(const submission_order& order, std::span<const tensor_ref> args,
               std::span<const tensor_ref> results, const device& d = device::default_device(),
               const workspace& ws = {}) const {
    return run_on(d, args, results, ws, &order);
  }
  fence submit(const submission_order& order, std::initializer_list<tensor_ref> args,
               std::initializer_list<tensor_ref> results,
               const device& d = device::default_device(), const workspace& ws = {}) const {
    return run_on(d, std::span(args.begin(), args.size()),
                  std::span(results.begin(), results.size()), ws, &order);
  }
  fence submit(const submission_order& order, std::initializer_list<named_tensor> args,
               std::initializer_list<named_tensor> results,
               const device& d = device::default_device(), const workspace& ws = {}) const {
    auto a = by_position(args, input_names(), "argument");
    auto r = by_position(results, output_names(), "result");
    return run_on(d, a, r, ws, &order);
  }
  fence submit(std::span<const tensor_ref> args, std::span<const tensor_ref> results,
               const device& d = device::default_device(), const workspace& ws = {}) const {
    return submit(submission_order{}, args, results, d, ws);
  }
  fence submit(std::initializer_list<tensor_ref> args, std::initializer_list<tensor_ref> results,
               const device& d = device::default_device(), const workspace& ws = {}) const {
    return submit(submission_order{}, args, results, d, ws);
  }
  fence submit(std::initializer_list<named_tensor> args,
               std::initializer_list<named_tensor> results,
               const device& d = device::default_device(), const workspace& ws = {}) const {
    return submit(submission_order{}, args, results, d, ws);
  }

  // The same, returning the kiln::error instead of throwing it.
  result<void> try_run(std::span<const tensor_ref> args, std::span<const tensor_ref> results,
                       const device& d = device::default_device(), const workspace& ws = {}) const {
    return try_call([&] { run(args, results, d, ws); });
  }
  result<void> try_run(std::initializer_list<tensor_ref> args,
                       std::initializer_list<tensor_ref> results,
                       const device& d = device::default_device(), const workspace& ws = {}) const {
    return try_call([&] { run(args, results, d, ws); });
  }
  result<void> try_run(std::initializer_list<named_tensor> args,
                       std::initializer_list<named_tensor> results,
                       const device& d = device::default_device(), const workspace& ws = {}) const {
    return try_call([&] { run(args, results, d, ws); });
  }

 private:
  struct state;  // the runtime program, the CPU's tile programs, the names

  KILN_RUNTIME_API std::vector<tensor_ref> by_position(std::initializer_list<named_tensor> given,
                                                       const std::vector<std::string>& names,
                                                       const char* what) const;
  // Runs, or submits with `order` (then returns the fence).
  KILN_RUNTIME_API fence run_on(const device& d, std::span<const tensor_ref> given_args,
                                std::span<const tensor_ref> given_results, const workspace& ws,
                                const submission_order* order = nullptr) const;
  // The state, or a clear error for a moved-from executable (whose state went with the move).
  KILN_RUNTIME_API state& st() const;

  std::shared_ptr<state> s_;  // copies share the compiled kernels
};

namespace detail {
// compile()'s work on an IR graph: tensor constants (`constants` and the graph's own) become the
// plan's last inputs, and its trace points results after its own when tracing is on.
inline executable compile_ir(ir::graph ir, std::vector<graph::tensor_constant> constants,
                             std::vector<graph::variable_slot> variables,
                             std::vector<std::string> inputs, std::vector<std::string> outputs,
                             compiler::options opt, const char* prefix) {
  // Tensor constants go after the parameters, so that a parameter's position in the IR is its
  // position in a call (and in every message about it).
  for (const ir::tensor_data& t : ir.tensors)  // the builder's own (pad's and concat's positions)
    constants.push_back({t.arg, runtime::tensor_bytes(ir.inputs[t.arg].type, t.values)});
  ir.tensors.clear();
  std::vector<std::int32_t> moved_to(ir.inputs.size(), -1);
  std::int32_t next = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t a = 0; a < ir.inputs.size(); ++a) {
      bool supplied = false;  // by the executable: a tensor constant or a variable
      for (const auto& c : constants) supplied = supplied || c.arg == static_cast<std::int32_t>(a);
      for (const auto& v : variables) supplied = supplied || v.arg == static_cast<std::int32_t>(a);
      if (supplied == (pass == 1)) moved_to[a] = next++;
    }
  std::vector<ir::input_decl> decls(ir.inputs.size());
  for (std::size_t a = 0; a < ir.inputs.size(); ++a) decls[moved_to[a]] = ir.inputs[a];
  ir.inputs = std::move(decls);
  for (auto& n : ir.nodes)
    if (n.kind == ir::op::input) n.arg = moved_to[n.arg];
  for (auto& sym : ir.symbols)
    if (sym.kind == ir::symbol_kind::input) sym.a = moved_to[sym.a];
  for (auto& c : constants) c.arg = moved_to[c.arg];
  // Assignments are results after the function's own; trace points follow them.
  for (auto& v : variables) {
    v.arg = moved_to[v.arg];
    if (v.assigned < 0) continue;
    ir.outputs.push_back(v.assigned);
    v.assigned = static_cast<std::int32_t>(ir.outputs.size() - 1);
  }
  auto traces = runtime::expose_traces(ir);
  return executable(compiler::compile(ir, opt), ir, std::move(inputs), std::move(outputs),
                    std::move(constants), std::move(variables), std::move(traces), prefix);
}
}  // namespace detail

// Compiles a run-time graph: verify, canonicalize, dispatch regions, plan; CPU tile programs
// now, Vulkan kernels at the first call on a Vulkan device. With tracing on (runtime/trace.hpp)
// its trace points are recorded at each call.
inline executable compile(const graph& g, compiler::options opt = {}) {
  bool assigns = false;
  for (const auto& v : g.variables()) assigns = assigns || v.assigned >= 0;
  if (g.ir().outputs.empty() && !assigns)
    throw error(errc::invalid_graph, "compile",
                "the graph has no outputs (graph::output) and assigns no variable");
  return detail::compile_ir(g.ir(), g.constants(), g.variables(), g.input_names(), g.output_names(),
                            opt, "graph");
}

// A kiln::fn through the run-time door (inputs "arg1", ..., results "result1", ...): the same
// plan, run on the CPU by the tiled interpreter instead of the compile-time kernels.
template <class F, class... P>
executable compile(const function<F, P...>& f) {
  if (detail::frozen_trace_v<F, P...>.sizes.traces > 0 && tracing_enabled())
    return *detail::compile_traced_fn(detail::frozen_trace_v<F, P...>.thaw().graph,
                                      f.parameter_count, f.result_count);
  std::vector<std::string> inputs, outputs;
  for (int a = 1; a <= f.parameter_count; ++a) inputs.push_back("arg" + std::to_string(a));
  for (int r = 1; r <= f.result_count; ++r) outputs.push_back("result" + std::to_string(r));
  return executable(f.plan.thaw(), detail::frozen_trace_v<F, P...>.thaw().graph, std::move(inputs),
                    std::move(outputs));
}

inline result<executable> try_compile(const graph& g, compiler::options opt = {}) {
  return try_call([&] { return compile(g, opt); });
}

}  // namespace kiln

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "kiln/runtime/cpu/interpreted.hpp"
#include "kiln/runtime/vulkan/executor.hpp"

namespace kiln {

// The plan and its Vulkan kernels (emitted at the first call on a device), the CPU's tile
// programs, and the names of inputs and outputs.
struct executable::state {
  state(compiler::plan p, const ir::graph& traced, std::vector<std::string> in,
        std::vector<std::string> out, std::vector<graph::tensor_constant> consts,
        std::vector<graph::variable_slot> vars, std::vector<std::string> trace_points,
        const char* prefix)
      : program(prefix, traced, std::move(p)),
        inputs(std::move(in)),
        outputs(std::move(out)),
        traces(std::move(trace_points)),
        cpu(cpu::tile_programs(program.plan())) {
    std::vector<bool> constant(program.plan().graph.inputs.size(), false);
    for (auto& c : consts) {
      constant[c.arg] = true;
      constant_args.push_back(c.arg);
      constant_bytes.push_back(std::move(c.bytes));
    }
    const ir::graph& g = program.plan().graph;
    for (auto& v : vars) {
      constant[v.arg] = true;
      bool in_place =
          v.assigned >= 0 && compiler::writes_in_place(program.plan(), v.arg, v.assigned);
      variables.push_back({v.name, v.arg, v.assigned, in_place,
                           kiln::variable(v.name, g.inputs[v.arg].type, g.inputs[v.arg].dims)});
    }
    for (std::size_t a = 0; a < constant.size(); ++a)
      if (!constant[a]) parameters.push_back(static_cast<std::int32_t>(a));
  }
  runtime::program program;
  std::vector<std::string> inputs, outputs;
  std::vector<std::string> traces;  // the plan's last results
  std::atomic<std::uint64_t> trace_calls{0};
  struct variable_use {
    std::string name;
    std::int32_t arg;       // the plan's input it is read as
    std::int32_t assigned;  // the plan's result it takes (-1: none)
    bool in_place;          // written into its own memory
    kiln::variable value;
  };
  mutable std::mutex variables_mutex;  // (share_variable replaces values)
  std::vector<variable_use> variables;
  std::vector<std::int32_t> constant_args;                // the plan's input of each constant
  std::vector<std::vector<std::uint8_t>> constant_bytes;  // and its data
  std::vector<std::int32_t> parameters;  // the plan's input of each parameter, in order
  std::vector<cpu::tile_program> cpu;
  runtime::constant_uploads uploads;

  // Constant c as an argument on device d.
  runtime::buffer_ref constant_ref(const device& d, std::size_t c) {
    return uploads.ref(d, c, constant_bytes, program.plan().graph.inputs[constant_args[c]].dims);
  }
};

KILN_RUNTIME_API executable::executable(compiler::plan p, const ir::graph& traced,
                                        std::vector<std::string> inputs,
                                        std::vector<std::string> outputs,
                                        std::vector<graph::tensor_constant> constants,
                                        std::vector<graph::variable_slot> variables,
                                        std::vector<std::string> traces, const char* prefix)
    : s_(std::make_shared<state>(std::move(p), traced, std::move(inputs), std::move(outputs),
                                 std::move(constants), std::move(variables), std::move(traces),
                                 prefix)) {}

KILN_RUNTIME_API const compiler::plan& executable::plan() const { return st().program.plan(); }
KILN_RUNTIME_API const std::vector<std::string>& executable::input_names() const {
  return st().inputs;
}
KILN_RUNTIME_API const std::vector<std::string>& executable::output_names() const {
  return st().outputs;
}
KILN_RUNTIME_API const std::vector<std::string>& executable::trace_names() const {
  return st().traces;
}
KILN_RUNTIME_API const std::string& executable::name() const { return st().program.name(); }

KILN_RUNTIME_API std::vector<spirv::kernel> executable::kernels() const {
  std::vector<spirv::kernel> out;
  vulkan::kernel_cache& cache = st().program.vulkan_kernels();
  std::lock_guard lock(cache.mutex);
  for (const auto& [key, k] : cache.kernels) out.push_back(k);
  return out;
}

KILN_RUNTIME_API kiln::signature executable::signature() const {
  const ir::graph& g = plan().graph;
  std::vector<ir::input_decl> results;
  for (std::size_t r = 0; r < output_names().size(); ++r)  // (trace points follow them)
    results.push_back({g.nodes[g.outputs[r]].type, g.nodes[g.outputs[r]].dims});
  // The parameters: the plan's first inputs (tensor constants follow them).
  return make_signature(std::span(g.inputs).first(input_names().size()), results);
}

KILN_RUNTIME_API acceptance executable::accepts(int i, const buffer_description& given) const {
  return accept_entry(signature().inputs, i, given, name(), "argument", input_names());
}

KILN_RUNTIME_API acceptance executable::accepts_result(int r,
                                                       const buffer_description& given) const {
  return accept_entry(signature().results, r, given, name(), "result", output_names());
}

KILN_RUNTIME_API std::vector<tensor_ref> executable::by_position(
    std::initializer_list<named_tensor> given, const std::vector<std::string>& names,
    const char* what) const {
  std::vector<tensor_ref> out;
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "'" : ", '") + n + "'";
  for (const named_tensor& g : given) {
    bool known = false;
    for (const auto& n : names) known = known || n == g.name;
    if (!known)
      throw error(errc::invalid_argument, st().program.name(),
                  "no " + std::string(what) + " is named '" + std::string(g.name) +
                      "' (the graph has " + all + ")");
  }
  for (const auto& n : names) {
    const tensor_ref* found = nullptr;
    for (const named_tensor& g : given) {
      if (g.name != n) continue;
      if (found)
        throw error(errc::invalid_argument, st().program.name(),
                    std::string(what) + " '" + n + "' is given twice");
      found = &g.tensor;
    }
    if (!found)
      throw error(errc::invalid_argument, st().program.name(),
                  std::string(what) + " '" + n + "' is missing (the graph has " + all + ")");
    out.push_back(*found);
  }
  return out;
}

KILN_RUNTIME_API fence executable::run_on(const device& d, std::span<const tensor_ref> given_args,
                                          std::span<const tensor_ref> given_results,
                                          const workspace& ws,
                                          const submission_order* order) const {
  const compiler::plan& p = st().program.plan();
  const ir::graph& g = p.graph;
  const std::string& who = st().program.name();
  auto count = [&](std::size_t got, std::size_t want, const char* what,
                   const std::vector<std::string>& names) {
    if (got == want) return;
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    throw error(errc::invalid_argument, who,
                "takes " + std::to_string(want) + " " + what + "s (" + all + "), got " +
                    std::to_string(got));
  };
  const auto& parameters = st().parameters;
  count(given_args.size(), parameters.size(), "argument", st().inputs);
  const std::size_t n_results = st().outputs.size();  // the plan's first results
  count(given_results.size(), n_results, "result", st().outputs);
  std::vector<runtime::buffer_ref> args(g.inputs.size()), results;
  for (std::size_t a = 0; a < given_args.size(); ++a) {
    const ir::input_decl& decl = g.inputs[parameters[a]];
    dtype got = given_args[a].type;
    if (got != decl.type)
      throw error(errc::dtype_mismatch, who,
                  "argument " + std::to_string(a + 1) + " ('" + st().inputs[a] + "') is " +
                      std::string(kiln::name(got)) + " but the graph declares " +
                      runtime::declared_text(decl));
    args[parameters[a]] = given_args[a].ref;
  }
  for (std::size_t c = 0; c < st().constant_args.size(); ++c)
    args[st().constant_args[c]] = st().constant_ref(d, c);
  // Variables: read in their memory on d (moved there first if they were elsewhere).
  std::vector<state::variable_use> variables;
  {
    std::lock_guard lock(st().variables_mutex);
    variables = st().variables;
  }
  std::vector<std::shared_ptr<runtime::device_memory>> variable_memory;
  for (const auto& v : variables) {
    variable_memory.push_back(v.value.memory_on(d));
    args[v.arg] = {nullptr, g.inputs[v.arg].dims, false, variable_memory.back().get()};
  }
  for (std::size_t r = 0; r < given_results.size(); ++r) {
    dtype want = g.nodes[g.outputs[r]].type, got = given_results[r].type;
    auto what = [&] { return "result " + std::to_string(r + 1) + " ('" + st().outputs[r] + "')"; };
    if (got != want)
      throw error(errc::dtype_mismatch, who,
                  what() + " is " + std::string(kiln::name(want)) + " but its buffer holds " +
                      std::string(kiln::name(got)));
    if (!given_results[r].writable)
      throw error(errc::invalid_argument, who, what() + " is read-only (const data or a number)");
    results.push_back(given_results[r].ref);
  }
  std::vector<std::int64_t> sym(g.symbols.size() + 1);
  runtime::check_call(g.inputs, g.nodes, g.symbols, g.constraints,
                      std::span(g.outputs).first(n_results), p, args, results, sym.data(), who);
  // Assigned variables, the results after the function's own: written into the variable's memory
  // where the plan allows, else into a temporary copied in once the call has succeeded (so a
  // failed call leaves the variable as it was).
  struct copy_in {
    std::shared_ptr<runtime::device_memory> from, into;
    std::size_t bytes;
  };
  std::vector<copy_in> copies;
  for (std::size_t k = 0; k < variables.size(); ++k) {
    const auto& v = variables[k];
    if (v.assigned < 0) continue;
    if (v.in_place) {
      results.push_back(args[v.arg]);
      continue;
    }
    const ir::input_decl& decl = g.inputs[v.arg];
    auto bytes = static_cast<std::size_t>(decl.dims.element_count() * size_in_bytes(decl.type));
    auto temp = d.alloc<std::uint8_t>(static_cast<std::int64_t>(bytes));
    copies.push_back({temp.memory()->shared_from_this(), variable_memory[k], bytes});
    results.push_back({nullptr, decl.dims, false, temp.memory()});
  }
  // The trace points' values: host memory the call writes as its last results.
  std::shared_ptr<runtime::traced_values> traced;
  if (!st().traces.empty()) {
    traced = runtime::trace_memory(g, n_results, st().traces, sym.data(), who, ++st().trace_calls);
    results.insert(results.end(), traced->refs.begin(), traced->refs.end());
  }
  // What the host does once the call has succeeded.
  auto finish = [copies, traced] {
    std::vector<unsigned char> bytes;
    for (const copy_in& c : copies) {
      bytes.resize(c.bytes);
      c.from->read(bytes.data(), c.bytes, 0);
      c.into->write(bytes.data(), c.bytes, 0);
    }
    if (traced) runtime::deliver(*traced);
  };
  if (order) {  // the interpreter's state and the sizes go with the call
    runtime::owned_call call{args, results, sym, who, {}, ws, s_, {}};
    if (!copies.empty() || traced) call.then = finish;
    call.on_host = [s = s_, sym](std::span<const runtime::buffer_ref> host_args,
                                 std::span<const runtime::buffer_ref> host_results,
                                 const std::vector<bool>* only, const runtime::arena& transients) {
      cpu::run_interpreted(s->program.plan(), s->cpu, host_args, host_results, sym.data(), only,
                           transients);
    };
    return runtime::submit(d, st().program, std::move(call), *order);
  }
  auto on_host = [&](std::span<const runtime::buffer_ref> host_args,
                     std::span<const runtime::buffer_ref> host_results,
                     const std::vector<bool>* only, const runtime::arena& transients) {
    cpu::run_interpreted(p, st().cpu, host_args, host_results, sym.data(), only, transients);
  };
  runtime::execute(d, st().program, args, results, sym.data(), who, on_host, ws);
  finish();
  return {};
}

KILN_RUNTIME_API kiln::variable executable::variable(std::string_view name) const {
  std::lock_guard lock(st().variables_mutex);
  for (const auto& v : st().variables)
    if (v.name == name) return v.value;
  throw error(errc::invalid_argument, st().program.name(),
              "has no variable named '" + std::string(name) + "'");
}

KILN_RUNTIME_API void executable::share_variable(std::string_view name,
                                                 const kiln::variable& given) const {
  std::lock_guard lock(st().variables_mutex);
  for (auto& v : st().variables) {
    if (v.name != name) continue;
    if (given.type() != v.value.type() || !(given.dims() == v.value.dims()))
      throw error(errc::dtype_mismatch, st().program.name(),
                  "variable '" + v.name + "' is " + std::string(kiln::name(v.value.type())) +
                      to_string(v.value.dims()) + " but the one given ('" + given.name() +
                      "') is " + std::string(kiln::name(given.type())) + to_string(given.dims()));
    v.value = given;
    return;
  }
  throw error(errc::invalid_argument, st().program.name(),
              "has no variable named '" + std::string(name) + "'");
}

KILN_RUNTIME_API std::vector<std::string> executable::variable_names() const {
  std::vector<std::string> names;
  for (const auto& v : st().variables) names.push_back(v.name);
  return names;
}

KILN_RUNTIME_API bool executable::assigns_in_place(std::string_view name) const {
  for (const auto& v : st().variables)
    if (v.name == name) return v.assigned >= 0 && v.in_place;
  throw error(errc::invalid_argument, st().program.name(),
              "has no variable named '" + std::string(name) + "'");
}

KILN_RUNTIME_API executable::state& executable::st() const {
  if (!s_)
    throw error(errc::invalid_argument, "executable",
                "this executable was moved from; use the one it was moved to (or copy it: "
                "copies share the compiled kernels)");
  return *s_;
}

namespace detail {
KILN_RUNTIME_API std::shared_ptr<const executable> compile_traced_fn(const ir::graph& traced,
                                                                     int parameters, int results) {
  std::vector<std::string> inputs, outputs;
  for (int a = 1; a <= parameters; ++a) inputs.push_back("arg" + std::to_string(a));
  for (int r = 1; r <= results; ++r) outputs.push_back("result" + std::to_string(r));
  return std::make_shared<const executable>(
      compile_ir(traced, {}, {}, std::move(inputs), std::move(outputs), {}, "fn"));
}

KILN_RUNTIME_API fence run_traced_fn(const executable& exe, const device& d,
                                     std::span<const runtime::buffer_ref> args,
                                     std::span<const runtime::buffer_ref> results,
                                     const workspace& ws, const submission_order* order) {
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

}  // namespace kiln
#endif  // KILN_RUNTIME_BODY
