// kiln::fn, the DSL's door: a lambda over tensor parameters becomes a compiled function whose
// plan is a constant expression and whose kernels are instantiated per device.
#pragma once

#include <atomic>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "kiln/core/text.hpp"
#include "kiln/dsl/trace.hpp"
#include "kiln/interop/arguments.hpp"
#include "kiln/runtime/abi.hpp"
#include "kiln/runtime/constants.hpp"
#include "kiln/runtime/cpu/run_plan.hpp"
#include "kiln/runtime/device.hpp"
#include "kiln/runtime/execute.hpp"
#include "kiln/runtime/program.hpp"
#include "kiln/runtime/trace.hpp"

namespace kiln {

template <class F, class... P>
class function;

namespace detail {

// What a kiln::fn needs of the run-time door, which executable.hpp gives when any translation
// unit of the program includes it (kiln's runtime library does): so the DSL's files do not
// compile the interpreter.
struct fn_door {
  // With tracing on, a fn with trace points runs its traced graph compiled at run time with them
  // as results (its plan, fixed at compile time, has none), made at the first such call.
  // Each takes the function's name (fn_prefix) for what it names: dumps, modules, reproducers.
  std::shared_ptr<const void> (*compile_traced)(const compiler::frozen_parts& traced,
                                                int parameters, int results,
                                                const char* name) = nullptr;
  // A call of it with a kiln::fn's checked references (parameters only), or its submission.
  fence (*run_traced)(const void* compiled, const device& d,
                      std::span<const runtime::buffer_ref> args,
                      std::span<const runtime::buffer_ref> results, const workspace& ws,
                      const submission_order* order) = nullptr;
  // f.save(path): the fn's plan as a compiled module.
  void (*save)(const compiler::plan& plan, const compiler::frozen_parts& traced, int parameters,
               int results, const std::string& path, const char* name) = nullptr;
  // A failed call's reproducer (KILN_REPRO_DIR; then e is thrown naming it, else this returns).
  void (*reproduce)(const compiler::plan& plan, const compiler::frozen_parts& traced,
                    int parameters, int results, const device& d,
                    std::span<const runtime::buffer_ref> args, const error& e,
                    const char* name) = nullptr;
};
inline fn_door fn_door_services;
#if defined(KILN_SEPARATE_RUNTIME)
// Defined by the runtime library's object that fills fn_door_services (src/fn_door.cpp). Every
// use of the services reads it, so a program that uses kiln::fn links that object, and one that
// only runs modules links neither it nor the compiler that compile_traced_fn brings.
extern const bool fn_door_registered;
#endif
inline const fn_door& fn_door_linked() {
#if defined(KILN_SEPARATE_RUNTIME)
  [[maybe_unused]] volatile bool linked = fn_door_registered;
#endif
  return fn_door_services;
}
inline const fn_door& need_fn_door(const char* what) {
  if (!fn_door_linked().save)
    throw error(errc::unsupported, "fn",
                std::string(what) +
                    " needs <kiln/executable.hpp> in one translation unit of the program "
                    "(header-only builds; kiln's CMake package always has it)");
  return fn_door_services;
}

template <class R>
struct result_list {
  using type = std::tuple<R>;
};
template <class... V>
struct result_list<std::tuple<V...>> {
  using type = std::tuple<V...>;
};

// Checks a call's arguments and results against the plan and resolves its symbolic sizes.
template <const auto& Plan>
std::array<std::int64_t, Plan.sizes.symbols + 1> bind_call(
    const compiler::plan& thawed, std::span<const runtime::buffer_ref> args,
    std::span<const runtime::buffer_ref> results) {
  std::array<std::int64_t, Plan.sizes.symbols + 1> sym{};
  runtime::check_call(Plan.inputs, Plan.nodes, Plan.symbols, Plan.constraints, Plan.outputs, thawed,
                      args, results, sym.data(), "fn");
  return sym;
}

// A function's tensor constants (kiln::table) as arguments on device d: their bytes, converted
// once from the plan (runtime::tensor_bytes), on the CPU as they are, on Vulkan uploaded at the
// first call on each device and kept.
template <const auto& Plan>
void tensor_constant_refs(const device& d, std::span<runtime::buffer_ref> args) {
  if constexpr (Plan.sizes.tensors > 0) {
    static const std::vector<shared_bytes> host = [] {
      std::vector<shared_bytes> all;
      for (const auto& t : Plan.tensors)
        all.push_back(shared_bytes(runtime::tensor_bytes(
            Plan.inputs[t.arg].type,
            std::span<const scalar>(Plan.tensor_values.data() + t.begin, t.count))));
      return all;
    }();
    static runtime::constant_uploads uploads;
    for (int k = 0; k < Plan.sizes.tensors; ++k)
      args[Plan.tensors[k].arg] =
          uploads.ref(d, static_cast<std::size_t>(k), host, Plan.inputs[Plan.tensors[k].arg].dims);
  }
}

// A kiln::fn's name (function::set_name; empty: "fn"), and whether its program exists yet.
template <class F, class... P>
struct fn_name {
  static inline std::string text;
  static inline std::atomic<bool> taken = false;
};

// What names the function's program, module, dumps and reproducers: its name, else "fn".
template <class F, class... P>
const char* fn_prefix() {
  const std::string& name = fn_name<F, P...>::text;
  return name.empty() ? "fn" : name.c_str();
}

// A function's runtime program: its plan in vector form, named (and dumped) at the first call.
template <class F, class... P>
const runtime::program& program_of() {
  static const runtime::program prog = [] {
    fn_name<F, P...>::taken = true;
    return runtime::program(fn_prefix<F, P...>(), compiler::parts_of<frozen_trace_v<F, P...>>,
                            compiler::parts_of<frozen_plan_v<F, P...>>);
  }();
  return prog;
}

// A result returned by value: a std::vector<T> (for bool, filled from a bool array after the
// call, since std::vector<bool> stores bits).
template <class T>
struct result_storage {
  std::vector<T> data;
  explicit result_storage(std::int64_t n) : data(static_cast<std::size_t>(n)) {}
  tensor_view<T> view() {
    return {data.data(), shape{static_cast<std::int64_t>(data.size())}, true};
  }
  std::vector<T> take() { return std::move(data); }
};
template <>
struct result_storage<bool> {
  std::unique_ptr<bool[]> data;
  std::int64_t n;
  explicit result_storage(std::int64_t count) : data(new bool[count > 0 ? count : 1]()), n(count) {}
  tensor_view<bool> view() { return {data.get(), shape{n}, true}; }
  std::vector<bool> take() { return std::vector<bool>(data.get(), data.get() + n); }
};

// Whether a traced lambda returned a value an op rejected (see rejected_extents).
template <class R>
struct returns_rejected : std::bool_constant<rejected_value<R>> {};
template <class... V>
struct returns_rejected<std::tuple<V...>> : std::bool_constant<(rejected_value<V> || ...)> {};

// What kiln::fn gives for a lambda a static_assert has already rejected: it takes any use
// quietly, so that the compile error already given stays the only one.
struct rejected_function {
  struct rejected_plan {
    static constexpr int dispatch_count() { return 0; }
  };
  static constexpr rejected_plan plan{};
  template <class... A>
  void operator()(A&&...) const {}
  template <class... A>
  fence submit(A&&...) const {
    return {};
  }
  template <class D>
  const rejected_function& on(const D&) const {
    return *this;
  }
  template <class W>
  const rejected_function& with(const W&) const {
    return *this;
  }
  template <class S>
  void save(const S&) const {}
};

}  // namespace detail

// A compiled function bound to a device: call it like the function itself. with(ws) gives its
// calls the caller's workspace for their transients instead of the function's own arena.
template <class Function>
class bound_function {
 public:
  explicit bound_function(device d) : device_(d) {}
  template <class... Args>
  auto operator()(Args&&... args) const {
    return Function::call(device_, workspace_, std::forward<Args>(args)...);
  }
  // Submits a call and returns at once: submit([kiln::after(f, ...),] args..., into(outs...)).
  template <class... Args>
  fence submit(Args&&... args) const {
    return Function::submit_on(device_, workspace_, std::forward<Args>(args)...);
  }
  bound_function with(const workspace& ws) const {
    bound_function b = *this;
    b.workspace_ = ws;
    return b;
  }
  const kiln::device& target() const { return device_; }

 private:
  kiln::device device_;
  workspace workspace_;
};

// A function with its leading parameters bound once (f.bind(w, b)): called with the rest, on the
// default device or on(d)'s. The bound arguments are kept as given: a kiln::buffer stays on its
// device and is passed as is at every call, a view refers to the caller's memory, a container is
// copied into the binding.
template <class Function, class... Bound>
class bound_arguments {
 public:
  explicit bound_arguments(Bound... bound)
      : bound_(std::make_shared<const std::tuple<Bound...>>(std::move(bound)...)) {}
  template <class... Args>
  auto operator()(Args&&... args) const {
    return std::apply(
        [&](const Bound&... b) {
          return Function::call(device_ ? *device_ : device::default_device(), workspace{}, b...,
                                std::forward<Args>(args)...);
        },
        *bound_);
  }
  // Submits a call and returns at once, as f.submit does: submit([kiln::after(f, ...),] args...,
  // into(outs...)), the bound arguments before args. The binding is kept alive until the fence
  // (a temporary one, f.bind(w).on(d).submit(...), too); args are the caller's to keep, as for
  // f.submit.
  template <class... Args>
  fence submit(Args&&... args) const {
    const device d = device_ ? *device_ : device::default_device();
    return std::apply(
        [&](const Bound&... b) { return submit_ordered(d, b..., std::forward<Args>(args)...); },
        *bound_);
  }
  bound_arguments on(device d) const {
    bound_arguments c = *this;
    c.device_ = d;
    return c;
  }

 private:
  // Function::submit_on with the order (a leading kiln::after(...), or none) first, holding the
  // binding, then the bound arguments.
  template <class... Args>
  fence submit_ordered(const device& d, const Bound&... b, Args&&... args) const {
    using first = std::remove_cvref_t<std::tuple_element_t<0, std::tuple<Args..., void>>>;
    if constexpr (std::is_same_v<first, submission_order>) {
      return [&](const submission_order& given, auto&&... rest) {
        submission_order order = given;
        order.keep = bound_;
        return Function::submit_on(d, workspace{}, order, b...,
                                   std::forward<decltype(rest)>(rest)...);
      }(std::forward<Args>(args)...);
    } else {
      submission_order order;
      order.keep = bound_;
      return Function::submit_on(d, workspace{}, order, b..., std::forward<Args>(args)...);
    }
  }

  std::shared_ptr<const std::tuple<Bound...>> bound_;
  std::optional<device> device_;
};

template <class F, class... P>
class function {
 public:
  // The frozen plan: a constant expression (static_assert(f.plan.dispatch_count() == 1)).
  static constexpr const auto& plan = detail::frozen_plan_v<F, P...>;
  static constexpr int parameter_count = sizeof...(P);
  static constexpr int result_count = plan.sizes.outputs;
  // value<T, extents> of each result, as traced.
  using result_values =
      typename detail::result_list<std::invoke_result_t<const F&, parameter_value_t<P>...>>::type;

  // f(args..., into(outs...)) writes the results in place; f(args...) returns them (a
  // std::vector, or a std::tuple of them for several results). Runs on the default device.
  template <class... Args>
  auto operator()(Args&&... args) const {
    return call(device::default_device(), workspace{}, std::forward<Args>(args)...);
  }

  bound_function<function> on(device d) const { return bound_function<function>(d); }

  // The first sizeof...(Bound) parameters bound once (weights, say): auto layer =
  // f.bind(wq, bq); layer(x, into(y)). See bound_arguments for what is kept.
  template <class... Bound>
  auto bind(Bound&&... bound) const {
    static_assert(sizeof...(Bound) <= sizeof...(P),
                  "kiln::fn::bind: more arguments than parameters");
    return bound_arguments<function, std::decay_t<Bound>...>(std::forward<Bound>(bound)...);
  }

  // Submits a call on the default device and returns at once (runtime/fence.hpp):
  // f.submit([kiln::after(f1, ...),] args..., into(outs...)). The fence is reached when the call
  // is done; its wait() throws the call's kiln::error. Calls on one device run in submission
  // order. kiln::buffers are kept alive until the fence; host data must be (numbers for scalars
  // are copied).
  template <class... Args>
  fence submit(Args&&... args) const {
    return submit_on(device::default_device(), workspace{}, std::forward<Args>(args)...);
  }

  // Writes the function as a compiled module (executable::save), which kiln::module::load runs
  // from <kiln/runtime.hpp> alone; needs <kiln/executable.hpp> in some translation unit of the
  // program (kiln's CMake package always has it).
  static void save(const std::string& path) {
    detail::need_fn_door("f.save").save(
        detail::program_of<F, P...>().plan(), compiler::parts_of<detail::frozen_trace_v<F, P...>>,
        parameter_count, result_count, path, detail::fn_prefix<F, P...>());
  }

  // Names the function as graph::set_name names a graph: its dumps (KILN_DUMP_DIR), Vulkan
  // notices, KILN_PROFILE lines, its traced compile under KILN_TRACE, reproducers and saved
  // modules then say <name>-<hash> instead of fn-<hash>. 1 to 63 letters, digits, '_', '-'
  // or '.' (not first: '.', '-'); before the function's first call, which names what it builds (a
  // later name is a kiln::error).
  static void set_name(std::string_view name) {
    std::string why;  // appended: GCC's -O3 warns falsely on "literal" + std::string
    if (!detail::is_function_name(name)) {
      why = "the name ";
      why += detail::quoted(name);
      why += " is not 1 to 63 letters, digits, '_', '-' or '.' (not first: '.', '-')";
    } else if (detail::fn_name<F, P...>::taken) {
      why = "the function has run (or was saved) as ";
      why += detail::program_of<F, P...>().name();
      why += " already: name it before its first call";
    }
    if (!why.empty()) throw error(errc::invalid_argument, "kiln::fn::set_name", why);
    detail::fn_name<F, P...>::text = name;
  }

  // The signature (runtime/abi.hpp): to_string(f.signature()) is its raw-ABI string.
  static kiln::signature signature() {
    std::vector<ir::input_decl> results;
    for (auto o : plan.outputs) results.push_back({plan.nodes[o].type, plan.nodes[o].dims});
    return make_signature(std::span(plan.inputs.data(), parameter_count), results);
  }
  // Whether a buffer described so can be argument i (0-based), answered before any call.
  static acceptance accepts(int i, const buffer_description& given) {
    const compiler::plan& p = detail::program_of<F, P...>().plan();
    std::vector<std::int32_t> parameters(parameter_count);
    std::iota(parameters.begin(), parameters.end(), 0);
    return accept_entry(signature().inputs, i, given, "kiln::fn", "argument", {},
                        runtime::argument_uses(p, parameters));
  }
  // Whether a buffer described so can take result r (0-based).
  static acceptance accepts_result(int r, const buffer_description& given) {
    return accept_entry(signature().results, r, given, "kiln::fn", "result");
  }

  template <class... Args>
  static auto call(const device& d, const workspace& ws, Args&&... args) {
    constexpr std::size_t n = sizeof...(Args);
    if constexpr (n > 0 && output_set<std::tuple_element_t<n - 1, std::tuple<Args...>>>) {
      auto all = std::forward_as_tuple(std::forward<Args>(args)...);
      auto& outs = std::get<n - 1>(all);
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        run<false>(d, ws, outs, nullptr, std::get<I>(all)...);
      }
      (std::make_index_sequence<n - 1>{});
    } else {
      return call_returning(d, ws, std::forward<Args>(args)...);
    }
  }

  template <class... Args>
  static fence submit_on(const device& d, const workspace& ws, Args&&... args) {
    constexpr std::size_t n = sizeof...(Args);
    auto all = std::forward_as_tuple(std::forward<Args>(args)...);
    using first = std::remove_cvref_t<std::tuple_element_t<0, std::tuple<Args..., void>>>;
    constexpr std::size_t skip = std::is_same_v<first, submission_order> ? 1 : 0;
    static_assert(n > skip && output_set<std::tuple_element_t<n - 1, std::tuple<Args..., void>>>,
                  "kiln::fn submit: give the results' buffers with into(...) last (a submitted "
                  "call cannot return them)");
    if constexpr (n > skip && output_set<std::tuple_element_t<n - 1, std::tuple<Args..., void>>>) {
      submission_order none;
      const submission_order* order = &none;
      if constexpr (skip) order = &std::get<0>(all);
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return run<true>(d, ws, std::get<n - 1>(all), order, std::get<skip + I>(all)...);
      }
      (std::make_index_sequence<n - 1 - skip>{});
    } else {
      return fence{};
    }
  }

 private:
  template <class... Args>
  static auto call_returning(const device& d, const workspace& ws, Args&&... args) {
    std::array<runtime::buffer_ref, parameter_count + 1> refs{};
    check_arguments<Args...>();
    std::size_t k = 0;
    ((refs[k++] = ref_of(args)), ...);
    std::array<std::int64_t, plan.sizes.symbols + 1> sym{};
    // (Tensor constants have static sizes: no symbol comes from them.)
    runtime::resolve_symbols(std::span(plan.inputs.data(), parameter_count), plan.nodes,
                             plan.symbols, plan.constraints,
                             std::span(refs.data(), parameter_count), sym.data(), "fn");
    auto storage = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple{
          detail::result_storage<typename std::tuple_element_t<I, result_values>::element>(
              runtime::concrete(plan.nodes[plan.outputs[I]].dims, sym.data()).element_count())...};
    }
    (std::make_index_sequence<result_count>{});
    std::apply(
        [&](auto&... r) { run<false>(d, ws, outputs{std::tuple{r.view()...}}, nullptr, args...); },
        storage);
    auto results = std::apply([](auto&... r) { return std::tuple{r.take()...}; }, storage);
    if constexpr (result_count == 1)
      return std::move(std::get<0>(results));
    else
      return results;
  }

  template <class... Args>
  static constexpr void check_arguments() {
    static_assert(sizeof...(Args) == parameter_count,
                  "kiln::fn call: pass one argument per declared tensor parameter (and optionally "
                  "into(...) last)");
    static_assert((tensor_argument<Args> && ...),
                  "kiln::fn call: an argument is not tensor data (std::vector, std::span, a "
                  "contiguous range, kiln::view(ptr, {sizes...}), or a number for a scalar)");
    if constexpr (sizeof...(Args) == parameter_count && (tensor_argument<Args> && ...))
      static_assert((std::is_same_v<argument_element_t<Args>, typename P::element> && ...),
                    "kiln::fn call: an argument's element type differs from its declared "
                    "tensor<T, ...> (kiln never converts implicitly)");
  }

  template <class A>
  static runtime::buffer_ref ref_of(const A& a) {
    if constexpr (device_buffer<A>) {
      return {nullptr, a.dims(), a.flat(), a.memory(), a.offset_bytes()};
    } else {
      return runtime::ref_of(as_view(const_cast<A&>(a)));
    }
  }

  // Runs the call, or submits it with `order` (then returns the fence). Which one is a template
  // argument, so that a file's plain calls do not compile the submission's code.
  template <bool Submit, class Outs, class... Args>
  static fence run(const device& d, const workspace& ws, const Outs& outs,
                   const submission_order* order, Args&... args) {
    check_arguments<Args...>();
    using out_views = decltype(outs.views);
    static_assert(std::tuple_size_v<out_views> == result_count,
                  "kiln::fn call: into(...) takes one buffer per result of the function");
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      static_assert(
          (std::is_same_v<typename output_traits<std::tuple_element_t<I, out_views>>::element,
                          typename std::tuple_element_t<I, result_values>::element> &&
           ...),
          "kiln::fn call: an into(...) buffer's element type differs from the result's");
      static_assert((output_traits<std::tuple_element_t<I, out_views>>::writable && ...),
                    "kiln::fn call: into(...) needs writable buffers");
    }
    (std::make_index_sequence<result_count>{});
    // The parameters, then the tensor constants (the plan's last inputs).
    std::array<runtime::buffer_ref, plan.sizes.inputs + 1> in_refs{};
    std::size_t k = 0;
    ((in_refs[k++] = ref_of(args)), ...);
    detail::tensor_constant_refs<plan>(d, in_refs);
    std::array<runtime::buffer_ref, result_count> out_refs{};
    std::apply(
        [&](const auto&... v) {
          std::size_t r = 0;
          ((out_refs[r++] = ref_of(v)), ...);
        },
        outs.views);
    auto in = std::span<const runtime::buffer_ref>(in_refs.data(), plan.sizes.inputs);
    auto sym = detail::bind_call<plan>(detail::program_of<F, P...>().plan(), in, out_refs);
    if constexpr (detail::frozen_trace_v<F, P...>.sizes.traces > 0)
      if (tracing_enabled()) {
        const detail::fn_door& door = detail::need_fn_door("tracing a kiln::fn");
        static const std::shared_ptr<const void> traced =
            door.compile_traced(compiler::parts_of<detail::frozen_trace_v<F, P...>>,
                                parameter_count, result_count, detail::fn_prefix<F, P...>());
        return door.run_traced(traced.get(), d, in.first(parameter_count), out_refs, ws, order);
      }
    if constexpr (Submit) {  // the sizes go with the call; the plan and its program are static
      runtime::owned_call call{{in.begin(), in.end()},
                               {out_refs.begin(), out_refs.end()},
                               {sym.begin(), sym.end()},
                               "fn",
                               {},
                               ws,
                               order->keep,
                               {},
                               {}};
      if (auto* reproduce = detail::fn_door_linked().reproduce)
        call.reproduce = [reproduce, d, args = call.args](const error& e) {
          reproducer_of(reproduce, d, args, e);
        };
      call.on_host = [sym](std::span<const runtime::buffer_ref> host_args,
                           std::span<const runtime::buffer_ref> host_results,
                           const std::vector<bool>* only, const runtime::arena& transients) {
        run_kernels(sym.data(), host_args, host_results, only, transients);
      };
      return runtime::submit(d, detail::program_of<F, P...>(), std::move(call), *order);
    } else {
      auto on_host = [&](std::span<const runtime::buffer_ref> host_args,
                         std::span<const runtime::buffer_ref> host_results,
                         const std::vector<bool>* only, const runtime::arena& transients) {
        run_kernels(sym.data(), host_args, host_results, only, transients);
      };
      try {
        runtime::execute(d, detail::program_of<F, P...>(), in, out_refs, sym.data(), "fn", on_host,
                         ws);
      } catch (const error& e) {
        if (auto* reproduce = detail::fn_door_linked().reproduce)
          reproducer_of(reproduce, d, in, e);  // throws e naming it, where KILN_REPRO_DIR is set
        throw;
      }
      return {};
    }
  }

  // The call's reproducer through the run-time door (parameters only: the tables are the
  // module's).
  template <class Reproduce>
  static void reproducer_of(Reproduce reproduce, const device& d,
                            std::span<const runtime::buffer_ref> in, const error& e) {
    reproduce(detail::program_of<F, P...>().plan(),
              compiler::parts_of<detail::frozen_trace_v<F, P...>>, parameter_count, result_count, d,
              in.first(parameter_count), e, detail::fn_prefix<F, P...>());
  }

  // The compile-time kernels over host data: the regions marked in `only` (or all), sizes `sym`.
  static void run_kernels(const std::int64_t* sym, std::span<const runtime::buffer_ref> host_args,
                          std::span<const runtime::buffer_ref> host_results,
                          const std::vector<bool>* only, const runtime::arena& transients) {
    cpu::run_plan(
        detail::program_of<F, P...>().plan(),
        [](int region, const void* const* in, const std::int64_t* step, void* const* out,
           std::int64_t n) { cpu::region_rows<plan>[region](in, step, out, n); },
        cpu::region_folds<plan>, host_args, host_results, sym, only, transients,
        detail::program_of<F, P...>().name());
  }
};

// Declares a compiled function: the parameters as tensor<element, sizes...>, the body as a
// captureless lambda taking one value per parameter. Traced and compiled at compile time.
template <class... P, class F>
consteval auto fn(F) {
  static_assert((tensor_parameter<P> && ...),
                "kiln::fn: declare each parameter as kiln::tensor<element, sizes...>");
  static_assert(std::is_empty_v<F> && std::is_default_constructible_v<F>,
                "kiln::fn: the lambda must not capture anything; pass run-time values as scalar "
                "parameters (kiln::tensor<T>)");
  static_assert(
      std::is_invocable_v<const F&, parameter_value_t<P>...>,
      "kiln::fn: the lambda must take exactly one argument per declared tensor parameter");
  if constexpr (traceable<F, P...>) {
    using R = std::invoke_result_t<const F&, parameter_value_t<P>...>;
    static_assert(function_result<R>,
                  "kiln::fn: the lambda must return a tensor expression or a std::tuple of them");
    if constexpr (detail::returns_rejected<R>::value)
      return detail::rejected_function{};  // its static_assert has spoken: nothing more to say
    else
      return function<F, P...>{};
  } else {
    return detail::rejected_function{};
  }
}

}  // namespace kiln
