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
  // Takes a compiled plan, the names of its inputs and outputs, and its tensor constants (the
  // plan's inputs that are not parameters): what compile() does.
  KILN_RUNTIME_API executable(compiler::plan p, const ir::graph& traced,
                              std::vector<std::string> inputs, std::vector<std::string> outputs,
                              std::vector<graph::tensor_constant> constants = {});

  KILN_RUNTIME_API const compiler::plan& plan() const;
  int dispatch_count() const { return plan().dispatch_count(); }
  KILN_RUNTIME_API const std::vector<std::string>& input_names() const;
  KILN_RUNTIME_API const std::vector<std::string>& output_names() const;
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

// Compiles a run-time graph: verify, canonicalize, dispatch regions, plan; CPU tile programs
// now, Vulkan kernels at the first call on a Vulkan device.
inline executable compile(const graph& g, compiler::options opt = {}) {
  if (g.ir().outputs.empty())
    throw error(errc::invalid_graph, "compile", "the graph has no outputs (graph::output)");
  // Tensor constants go after the parameters, so that a parameter's position in the IR is its
  // position in a call (and in every message about it).
  ir::graph ir = g.ir();
  auto constants = g.constants();
  for (const ir::tensor_data& t : ir.tensors)  // the builder's own (pad's and concat's positions)
    constants.push_back({t.arg, runtime::tensor_bytes(ir.inputs[t.arg].type, t.values)});
  ir.tensors.clear();
  std::vector<std::int32_t> moved_to(ir.inputs.size(), -1);
  std::int32_t next = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t a = 0; a < ir.inputs.size(); ++a) {
      bool constant = false;
      for (const auto& c : constants) constant = constant || c.arg == static_cast<std::int32_t>(a);
      if (constant == (pass == 1)) moved_to[a] = next++;
    }
  std::vector<ir::input_decl> inputs(ir.inputs.size());
  for (std::size_t a = 0; a < ir.inputs.size(); ++a) inputs[moved_to[a]] = ir.inputs[a];
  ir.inputs = std::move(inputs);
  for (auto& n : ir.nodes)
    if (n.kind == ir::op::input) n.arg = moved_to[n.arg];
  for (auto& sym : ir.symbols)
    if (sym.kind == ir::symbol_kind::input) sym.a = moved_to[sym.a];
  for (auto& c : constants) c.arg = moved_to[c.arg];
  return executable(compiler::compile(ir, opt), ir, g.input_names(), g.output_names(),
                    std::move(constants));
}

// A kiln::fn through the run-time door (inputs "arg1", ..., results "result1", ...): the same
// plan, run on the CPU by the tiled interpreter instead of the compile-time kernels.
template <class F, class... P>
executable compile(const function<F, P...>& f) {
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
        std::vector<std::string> out, std::vector<graph::tensor_constant> consts)
      : program("graph", traced, std::move(p)),
        inputs(std::move(in)),
        outputs(std::move(out)),
        cpu(cpu::tile_programs(program.plan())) {
    std::vector<bool> constant(program.plan().graph.inputs.size(), false);
    for (auto& c : consts) {
      constant[c.arg] = true;
      constant_args.push_back(c.arg);
      constant_bytes.push_back(std::move(c.bytes));
    }
    for (std::size_t a = 0; a < constant.size(); ++a)
      if (!constant[a]) parameters.push_back(static_cast<std::int32_t>(a));
  }
  runtime::program program;
  std::vector<std::string> inputs, outputs;
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
                                        std::vector<graph::tensor_constant> constants)
    : s_(std::make_shared<state>(std::move(p), traced, std::move(inputs), std::move(outputs),
                                 std::move(constants))) {}

KILN_RUNTIME_API const compiler::plan& executable::plan() const { return st().program.plan(); }
KILN_RUNTIME_API const std::vector<std::string>& executable::input_names() const {
  return st().inputs;
}
KILN_RUNTIME_API const std::vector<std::string>& executable::output_names() const {
  return st().outputs;
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
  for (auto o : g.outputs) results.push_back({g.nodes[o].type, g.nodes[o].dims});
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
  count(given_results.size(), g.outputs.size(), "result", st().outputs);
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
  runtime::check_call(g.inputs, g.nodes, g.symbols, g.constraints, g.outputs, p.dispatch_count(),
                      args, results, sym.data(), who);
  if (order) {  // the interpreter's state and the sizes go with the call
    runtime::owned_call call{args, results, sym, who, {}, ws, s_};
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
  return {};
}

KILN_RUNTIME_API executable::state& executable::st() const {
  if (!s_)
    throw error(errc::invalid_argument, "executable",
                "this executable was moved from; use the one it was moved to (or copy it: "
                "copies share the compiled kernels)");
  return *s_;
}

}  // namespace kiln
#endif  // KILN_RUNTIME_BODY
