// The run-time door's executable: a compiled function as the runtime runs it (by name or
// position, on any device, synchronously or submitted; its tensor constants, variables and trace
// points), and compiled modules saved from it and loaded back. A program that only runs saved
// modules includes this header alone: it brings neither the compiler's passes, nor the graph
// API, nor the DSL (tests/runtime/modules/runner.cpp proves it).
#pragma once

#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/codegen/spirv/kernel.hpp"
#include "kiln/core/result.hpp"
#include "kiln/interop/arguments.hpp"
#include "kiln/runtime/abi.hpp"
#include "kiln/runtime/constants.hpp"
#include "kiln/runtime/device.hpp"
#include "kiln/runtime/execute.hpp"
#include "kiln/runtime/module_format.hpp"
#include "kiln/runtime/program.hpp"
#include "kiln/runtime/reproducer.hpp"
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
  // Type-erased strided data: extents `dims` with strides `steps` in elements (read in place,
  // and written in place as a result).
  tensor_ref(const void* data, dtype t, const shape& dims, const stride_list& steps)
      : tensor_ref(data, t, dims) {
    set_strides(steps);
  }
  tensor_ref(void* data, dtype t, const shape& dims, const stride_list& steps)
      : tensor_ref(data, t, dims) {
    set_strides(steps);
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
      ref = runtime::ref_of(v);
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
  void set_strides(const stride_list& steps) {
    ref.steps = steps;
    ref.strided =
        strided_layout_of(ref.dims, ref.steps, size_in_bytes(type), "tensor_ref", "the tensor");
  }
};

// A tensor_ref under the name of a graph input or output.
struct named_tensor {
  std::string_view name;
  tensor_ref tensor;
};

class executable {
 public:
  // Takes a compiled plan and its parts (names, tensor constants, variables, trace points:
  // runtime/module_format.hpp): what compile() and load() do. `prefix` starts its name;
  // `traced` is the graph before the passes, for KILN_DUMP_DIR.
  KILN_RUNTIME_API executable(compiler::plan p, const ir::graph& traced,
                              runtime::function_parts parts, const char* prefix = "graph");

  // The compiled module (runtime/module_format.hpp): the plan, names, tensor constants,
  // variables' values now and trace points, which load() runs from <kiln/runtime.hpp> alone.
  KILN_RUNTIME_API void save(const std::string& path) const;
  KILN_RUNTIME_API std::vector<std::uint8_t> to_bytes() const;
  // A saved module; a damaged file is a kiln::error naming the problem (and `source`). Its SPIR-V
  // kernels are emitted again from its plan, unless `trust_kernels` (a file of one's own): then a
  // device of their fingerprint runs the stored ones, checked by spirv-val only.
  KILN_RUNTIME_API static executable load(const std::string& path, bool trust_kernels = false);
  KILN_RUNTIME_API static executable from_bytes(std::span<const std::uint8_t> bytes,
                                                const std::string& source = "module bytes",
                                                bool trust_kernels = false);

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
  // The extents of its results for arguments of these extents (run-time sizes resolved), before
  // any call: what to allocate. Argument extents that do not fit are the call's kiln::error.
  KILN_RUNTIME_API std::vector<shape> result_dims(std::span<const shape> argument_dims) const;

  // At most `threads` CPU threads for its calls (0, the default: the process's count,
  // KILN_NUM_THREADS), as ONNX Runtime's intra-op setting; copies share it. A kiln::thread_limit
  // scope limits the calls a thread makes instead; the lower of the two holds.
  KILN_RUNTIME_API void set_threads(int threads) const;

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

  // With KILN_REPRO_DIR set, writes what reproduces a failed call (the module, the arguments as
  // .npy, the plan, the kernels emitted so far, the device, a kiln-run command) to a fresh folder
  // there and throws e again naming it; else returns.
  KILN_RUNTIME_API void write_reproducer(const device& d, std::span<const tensor_ref> given_args,
                                         const error& e) const;

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

// A saved function: kiln::module::load(path), then run as any executable.
using module = executable;

}  // namespace kiln

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>

#include "kiln/runtime/cpu/kernels.hpp"
#include "kiln/runtime/files.hpp"
#include "kiln/runtime/npy.hpp"
#include "kiln/runtime/vulkan/executor.hpp"

namespace kiln {

// The plan and its Vulkan kernels (emitted at the first call on a device), the CPU's tile
// programs, and the names of inputs and outputs.
struct executable::state {
  state(compiler::plan p, const ir::graph& traced, runtime::function_parts parts,
        const char* name_prefix)
      : program(name_prefix, traced, std::move(p)),
        prefix(name_prefix),
        inputs(std::move(parts.inputs)),
        outputs(std::move(parts.outputs)),
        traces(std::move(parts.traces)),
        cpu(program.plan()) {
    std::vector<bool> constant(program.plan().graph.inputs.size(), false);
    for (auto& c : parts.constants) {
      constant[c.arg] = true;
      constant_args.push_back(c.arg);
      constant_bytes.push_back(std::move(c.bytes));
    }
    const ir::graph& g = program.plan().graph;
    for (std::int32_t a : g.positions) {
      constant[a] = true;
      for (const ir::node& n : g.nodes)  // (a rebuild keeps every input)
        if (n.kind == ir::op::input && n.arg == a) positions.push_back({a, n.dims.dims[0]});
    }
    for (auto& v : parts.variables) {
      constant[v.arg] = true;
      bool in_place =
          v.assigned >= 0 && compiler::writes_in_place(program.plan(), v.arg, v.assigned);
      kiln::variable value(v.name, g.inputs[v.arg].type, g.inputs[v.arg].dims);
      if (!v.value.empty()) value.load_bytes(v.value.data(), v.value.size());
      variables.push_back({v.name, v.arg, v.assigned, in_place, std::move(value)});
    }
    for (std::size_t a = 0; a < constant.size(); ++a)
      if (!constant[a]) parameters.push_back(static_cast<std::int32_t>(a));
    std::vector<bool> unchanging(constant.size(), false);
    for (auto a : constant_args) unchanging[a] = true;
    weights = std::make_unique<cpu::packed_weights>(std::move(unchanging));
  }
  runtime::program program;
  std::string prefix;
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
  std::vector<std::int32_t> constant_args;   // the plan's input of each constant
  std::vector<shared_bytes> constant_bytes;  // and its data
  std::vector<std::int32_t> parameters;      // the plan's input of each parameter, in order
  struct positions_input {
    std::int32_t arg;   // ir::graph::positions: the plan's input
    std::int64_t size;  // its one extent, a run-time size
  };
  std::vector<positions_input> positions;
  std::atomic<int> threads{0};  // set_threads (0: no limit of its own)
  cpu::interpreted_plan cpu;
  std::unique_ptr<cpu::packed_weights> weights;  // the constants the CPU's products read as B
  runtime::constant_uploads uploads;

  // Variable `name`, or the error naming the function (callers that read or replace its value
  // hold variables_mutex).
  variable_use& find_variable(std::string_view name) {
    for (auto& v : variables)
      if (v.name == name) return v;
    throw error(errc::invalid_argument, program.name(),
                "has no variable named '" + std::string(name) + "'");
  }

  // Constant c as an argument on device d.
  runtime::buffer_ref constant_ref(const device& d, std::size_t c) {
    return uploads.ref(d, c, constant_bytes, program.plan().graph.inputs[constant_args[c]].dims);
  }
};

KILN_RUNTIME_API executable::executable(compiler::plan p, const ir::graph& traced,
                                        runtime::function_parts parts, const char* prefix)
    : s_(std::make_shared<state>(std::move(p), traced, std::move(parts), prefix)) {}

KILN_RUNTIME_API std::vector<std::uint8_t> executable::to_bytes() const {
  runtime::module_contents m;
  m.prefix = st().prefix;
  m.plan = plan();
  runtime::function_parts& f = m.parts;
  f.inputs = st().inputs;
  f.outputs = st().outputs;
  f.traces = st().traces;
  for (std::size_t c = 0; c < st().constant_args.size(); ++c)
    f.constants.push_back({st().constant_args[c], st().constant_bytes[c]});
  std::lock_guard lock(st().variables_mutex);
  for (const auto& v : st().variables) {
    std::vector<std::uint8_t> value(
        static_cast<std::size_t>(v.value.dims().element_count() * size_in_bytes(v.value.type())));
    v.value.save_bytes(value.data(), value.size());
    f.variables.push_back({v.name, v.arg, v.assigned, std::move(value)});
  }
  vulkan::kernel_cache& cache = st().program.vulkan_kernels();
  std::lock_guard kernels_lock(cache.mutex);
  m.kernels.assign(cache.kernels.begin(), cache.kernels.end());
  return runtime::encode_module(m);
}

KILN_RUNTIME_API void executable::save(const std::string& path) const {
  std::vector<std::uint8_t> bytes = to_bytes();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw error(errc::invalid_argument, name(), "could not write the module to " + path);
}

KILN_RUNTIME_API executable executable::from_bytes(std::span<const std::uint8_t> bytes,
                                                   const std::string& source, bool trust_kernels) {
  runtime::module_contents m = runtime::decode_module(bytes, source, trust_kernels);
  // Its kernels are run as they are on a device of their fingerprint: checked as kiln checks what
  // it emits (spirv-val, where kiln has SPIRV-Tools).
  for (const auto& [key, k] : m.kernels)
    if (!k.code.empty())
      if (std::string msg = spirv::validate(k.code, k.vulkan_version); !msg.empty())
        throw error(errc::invalid_argument, "module",
                    source + ": kernel '" + key + "' is not valid SPIR-V: " + msg);
  ir::graph traced = m.plan.graph;
  executable e(std::move(m.plan), traced, std::move(m.parts), m.prefix.c_str());
  e.st().program.vulkan_kernels().kernels.insert(m.kernels.begin(), m.kernels.end());
  return e;
}

KILN_RUNTIME_API executable executable::load(const std::string& path, bool trust_kernels) {
  return from_bytes(runtime::read_file(path, "module"), path, trust_kernels);
}

KILN_RUNTIME_API const compiler::plan& executable::plan() const { return st().program.plan(); }
KILN_RUNTIME_API void executable::set_threads(int threads) const {
  if (threads < 0)
    throw error(
        errc::invalid_argument, st().program.name(),
        "set_threads takes 0 (the process's count) or more, got " + std::to_string(threads));
  st().threads.store(threads, std::memory_order_relaxed);
}
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
  return accept_entry(signature().inputs, i, given, name(), "argument", input_names(),
                      runtime::argument_uses(plan(), st().parameters));
}

KILN_RUNTIME_API acceptance executable::accepts_result(int r,
                                                       const buffer_description& given) const {
  return accept_entry(signature().results, r, given, name(), "result", output_names());
}

KILN_RUNTIME_API std::vector<shape> executable::result_dims(
    std::span<const shape> argument_dims) const {
  const ir::graph& g = plan().graph;
  if (argument_dims.size() != st().parameters.size())
    throw error(errc::invalid_argument, name(),
                "takes " + std::to_string(st().parameters.size()) +
                    " arguments, got the extents of " + std::to_string(argument_dims.size()));
  static const unsigned char somewhere = 0;  // extents only: no data is read
  std::vector<runtime::buffer_ref> refs(g.inputs.size());
  for (std::size_t a = 0; a < g.inputs.size(); ++a) refs[a] = {&somewhere, g.inputs[a].dims};
  for (std::size_t a = 0; a < argument_dims.size(); ++a)
    refs[st().parameters[a]].dims = argument_dims[a];
  std::vector<std::int64_t> sym(g.symbols.size() + 1);
  runtime::resolve_symbols(g.inputs, g.nodes, g.symbols, g.constraints, refs, sym.data(), name());
  std::vector<shape> out;
  for (std::size_t r = 0; r < output_names().size(); ++r)
    out.push_back(runtime::concrete(g.nodes[g.outputs[r]].dims, sym.data()));
  return out;
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
  // Its thread count for what runs here (a submission carries it to its queue: execute.hpp).
  const int own = st().threads.load(std::memory_order_relaxed),
            caller = cpu::thread_limit_of_this_thread();
  const thread_limit threads(own > 0 && (caller == 0 || own < caller) ? own : caller);
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
  if (!st().variables.empty()) {  // (the list never changes length; share_variable, its values)
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
  // Positions: none while the sizes are resolved (theirs is the parameters'), then that many.
  for (const auto& q : st().positions) args[q.arg] = {nullptr, shape{0}};
  std::vector<std::int64_t> sym(g.symbols.size() + 1);
  runtime::check_call(g.inputs, g.nodes, g.symbols, g.constraints,
                      std::span(g.outputs).first(n_results), p, args, results, sym.data(), who);
  for (const auto& q : st().positions)
    args[q.arg] = runtime::positions_ref(runtime::concrete(shape{q.size}, sym.data())[0], who);
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
    runtime::owned_call call{args, results, sym, who, {}, ws, s_, {}, {}};
    if (!copies.empty() || traced) call.then = finish;
    call.reproduce = [exe = *this, d,
                      given = std::vector<tensor_ref>(given_args.begin(), given_args.end())](
                         const error& e) { exe.write_reproducer(d, given, e); };
    call.on_host = [s = s_, sym](std::span<const runtime::buffer_ref> host_args,
                                 std::span<const runtime::buffer_ref> host_results,
                                 const std::vector<bool>* only, const runtime::arena& transients) {
      s->cpu.run(s->program.plan(), host_args, host_results, sym.data(), only, transients,
                 s->program.name(), s->weights.get());
    };
    return runtime::submit(d, st().program, std::move(call), *order);
  }
  auto on_host = [&](std::span<const runtime::buffer_ref> host_args,
                     std::span<const runtime::buffer_ref> host_results,
                     const std::vector<bool>* only, const runtime::arena& transients) {
    st().cpu.run(p, host_args, host_results, sym.data(), only, transients, st().program.name(),
                 st().weights.get());
  };
  try {
    runtime::execute(d, st().program, args, results, sym.data(), who, on_host, ws);
  } catch (const error& e) {
    write_reproducer(d, given_args, e);  // rethrows naming it, where KILN_REPRO_DIR is set
    throw;
  }
  finish();
  return {};
}

KILN_RUNTIME_API void executable::write_reproducer(const device& d,
                                                   std::span<const tensor_ref> given_args,
                                                   const error& e) const {
  const std::string folder = runtime::reproducer_folder(name());
  if (folder.empty()) return;
  bool whole = true;  // every part written: only then does the error name the folder
  auto text = [&](const std::string& file, const std::string& body) {
    whole = runtime::write_file(folder + "/" + file, body.data(), body.size(), "KILN_REPRO_DIR") &&
            whole;
  };
  text("error.txt", std::string(e.what()) + "\n");
  std::string device_name = d.name();  // "vulkan:0 (llvmpipe ...)": kiln-run takes "vulkan:0"
  text("device.txt", device_name + "\n");
  device_name = device_name.substr(0, device_name.find(' '));
  text("plan.txt", compiler::print(plan()));
  std::vector<spirv::kernel> emitted = kernels();
  for (std::size_t k = 0; k < emitted.size(); ++k)
    whole = runtime::write_file(folder + "/kernel-" + std::to_string(k) + ".spv",
                                emitted[k].code.data(),
                                emitted[k].code.size() * sizeof(std::uint32_t), "KILN_REPRO_DIR") &&
            whole;
  std::string command = "kiln-run module.kiln --device " + device_name;
  try {
    save(folder + "/module.kiln");
    const ir::graph& g = plan().graph;
    for (std::size_t a = 0; a < given_args.size(); ++a) {
      const runtime::buffer_ref& r = given_args[a].ref;
      const shape dims = runtime::argument_dims(r, g.inputs[st().parameters[a]].dims);
      const std::size_t bytes =
          static_cast<std::size_t>(dims.element_count() * size_in_bytes(given_args[a].type));
      std::vector<std::uint8_t> host(bytes);
      if (r.memory)
        r.memory->read(host.data(), bytes, static_cast<std::size_t>(r.offset));
      else if (bytes)
        runtime::pack(r, host.data(), size_in_bytes(given_args[a].type));
      const std::string file = std::to_string(a + 1) + "-" + st().inputs[a] + ".npy";
      runtime::write_npy(folder + "/" + file, given_args[a].type, dims, host.data());
      command += " --input '" + st().inputs[a] + "=" + file + "'";
    }
  } catch (const error&) {
    command = "# the module or an argument could not be written: " + command;
    whole = false;
  }
  text("command.sh", "#!/bin/sh\n# Reproduces: " + std::string(e.what()) +
                         "\ncd \"$(dirname \"$0\")\" && " + command + "\n");
  runtime::rethrow_naming(e, folder, whole);
}

KILN_RUNTIME_API kiln::variable executable::variable(std::string_view name) const {
  std::lock_guard lock(st().variables_mutex);
  return st().find_variable(name).value;
}

KILN_RUNTIME_API void executable::share_variable(std::string_view name,
                                                 const kiln::variable& given) const {
  std::lock_guard lock(st().variables_mutex);
  state::variable_use& v = st().find_variable(name);
  if (given.type() != v.value.type() || !(given.dims() == v.value.dims()))
    throw error(given.type() != v.value.type() ? errc::dtype_mismatch : errc::shape_mismatch,
                st().program.name(),
                "variable '" + v.name + "' is " + std::string(kiln::name(v.value.type())) +
                    to_string(v.value.dims()) + " but the one given ('" + given.name() + "') is " +
                    std::string(kiln::name(given.type())) + to_string(given.dims()));
  v.value = given;
}

KILN_RUNTIME_API std::vector<std::string> executable::variable_names() const {
  std::vector<std::string> names;
  for (const auto& v : st().variables) names.push_back(v.name);
  return names;
}

KILN_RUNTIME_API bool executable::assigns_in_place(std::string_view name) const {
  const state::variable_use& v = st().find_variable(name);  // (name and in_place never change)
  return v.assigned >= 0 && v.in_place;
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
