// Trace points at run time (flow.tensor.trace): whether functions record them, the host memory a
// call records them in, and where they go: the program's sink, else a line on stderr and, under
// KILN_DUMP_DIR, one .npy file per value.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/copyable_function.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/ir/graph.hpp"
#include "kiln/runtime/signature.hpp"

namespace kiln {

// One traced value of one call, as a sink sees it. `data` holds the elements row-major on the
// host, valid while the sink runs.
struct traced_value {
  std::string_view function;  // the function's name ("graph-<hash>", "fn-<hash>")
  std::uint64_t call = 0;     // which call of that function: 1, 2, ... in submission order
  std::string_view name;      // as given to trace(name, v)
  dtype type = dtype::f32;
  shape dims;  // this call's sizes
  const void* data = nullptr;
};

// Called once per trace point per call, after the call is done (for a submitted call, on the
// device's host queue before its fence is reached), so possibly on another thread.
using trace_sink = copyable_function<void(const traced_value&)>;

// Sends the trace points of functions to `sink` and turns tracing on for functions compiled from
// now on (an empty sink: back to the default, tracing as KILN_TRACE says); returns the sink it
// replaces.
KILN_RUNTIME_API trace_sink set_trace_sink(trace_sink sink);

// Whether a function compiled now records its trace points: a sink is set, or KILN_TRACE is set
// to anything but "" and "0". (A kiln::fn asks at each call: its plan without them is fixed.)
KILN_RUNTIME_API bool tracing_enabled();

namespace runtime {

// With tracing on, makes g's trace points results after its own and returns their names; with it
// off, drops them (so the plan is the one g has without them) and returns none.
inline std::vector<std::string> expose_traces(ir::graph& g) {
  std::vector<std::string> names;
  if (tracing_enabled())
    for (const ir::trace_point& t : g.traces) {
      g.outputs.push_back(t.node);
      names.emplace_back(t.text());
    }
  g.traces.clear();
  return names;
}

// One call's traced values: host memory for each (results `first`... of the plan), and the
// results that write them.
struct traced_values {
  std::string function;
  std::uint64_t call = 0;
  std::vector<std::string> names;
  std::vector<dtype> types;
  std::vector<shape> dims;
  std::vector<std::vector<unsigned char>> data;
  std::vector<buffer_ref> refs;
};

// Memory for the values of plan graph g's results from `first` on, named `names`, at the call's
// sizes `sym`.
KILN_RUNTIME_API std::shared_ptr<traced_values> trace_memory(const ir::graph& g, std::size_t first,
                                                             const std::vector<std::string>& names,
                                                             const std::int64_t* sym,
                                                             std::string function,
                                                             std::uint64_t call);

// Hands a finished call's values to the sink, or to the default one.
KILN_RUNTIME_API void deliver(const traced_values& values);

}  // namespace runtime
}  // namespace kiln

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "kiln/runtime/npy.hpp"

namespace kiln {
namespace detail {
struct trace_sink_slot {
  std::mutex mutex;
  trace_sink sink;
};
inline trace_sink_slot& sink_slot() {
  static trace_sink_slot slot;
  return slot;
}
}  // namespace detail

KILN_RUNTIME_API trace_sink set_trace_sink(trace_sink sink) {
  auto& slot = detail::sink_slot();
  std::lock_guard lock(slot.mutex);
  std::swap(slot.sink, sink);
  return sink;
}

KILN_RUNTIME_API bool tracing_enabled() {
  {
    auto& slot = detail::sink_slot();
    std::lock_guard lock(slot.mutex);
    if (slot.sink) return true;
  }
  const char* env = std::getenv("KILN_TRACE");
  return env && *env && std::strcmp(env, "0") != 0;
}

namespace runtime {
namespace detail {

// "graph-1 #2 'h' f32[2, 3]: 1, 2, 3, 4, 5, 6" (at most 16 elements, then how many in all).
inline std::string trace_line(const traced_value& v) {
  std::string out = "kiln trace: " + std::string(v.function) + " #" + std::to_string(v.call) +
                    " '" + std::string(v.name) + "' " + std::string(name(v.type)) +
                    to_string(v.dims) + ":";
  const std::int64_t n = v.dims.element_count();
  const auto* bytes = static_cast<const unsigned char*>(v.data);
  for (std::int64_t i = 0; i < n && i < 16; ++i) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", element_as_double(v.type, bytes, i));
    out += (i ? ", " : " ") + std::string(text);
  }
  if (n > 16) out += ", ... (" + std::to_string(n) + " elements)";
  return out;
}

// The default sink: a line on stderr, and under KILN_DUMP_DIR
// <dir>/<function>/trace/<call>-<name>.npy (characters other than letters, digits, '_', '-' and
// '.' in the name written as '_').
inline void default_sink(const traced_value& v) {
  std::fprintf(stderr, "%s\n", trace_line(v).c_str());
  const char* dir = std::getenv("KILN_DUMP_DIR");
  if (!dir || !*dir) return;
  std::string file = std::to_string(v.call) + "-";
  for (char c : v.name)
    file +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '_';
  auto folder = std::filesystem::path(dir) / std::string(v.function) / "trace";
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec)
    throw error(errc::invalid_argument, "trace",
                "could not make " + folder.string() + ": " + ec.message());
  write_npy((folder / (file + ".npy")).string(), v.type, v.dims, v.data);
}

}  // namespace detail

KILN_RUNTIME_API std::shared_ptr<traced_values> trace_memory(const ir::graph& g, std::size_t first,
                                                             const std::vector<std::string>& names,
                                                             const std::int64_t* sym,
                                                             std::string function,
                                                             std::uint64_t call) {
  auto v = std::make_shared<traced_values>();
  v->function = std::move(function);
  v->call = call;
  v->names = names;
  for (std::size_t k = 0; k < names.size(); ++k) {
    const ir::node& n = g.nodes[g.outputs[first + k]];
    const shape dims = concrete(n.dims, sym);
    v->types.push_back(n.type);
    v->dims.push_back(dims);
    v->data.emplace_back(static_cast<std::size_t>(dims.element_count() * size_in_bytes(n.type)));
  }
  for (std::size_t k = 0; k < names.size(); ++k)
    v->refs.push_back({v->data[k].data(), v->dims[k], false, nullptr});
  return v;
}

KILN_RUNTIME_API void deliver(const traced_values& values) {
  trace_sink sink;
  {
    auto& slot = kiln::detail::sink_slot();
    std::lock_guard lock(slot.mutex);
    sink = slot.sink;
  }
  for (std::size_t k = 0; k < values.names.size(); ++k) {
    traced_value v{values.function, values.call,    values.names[k],
                   values.types[k], values.dims[k], values.data[k].data()};
    if (sink)
      sink(v);
    else
      detail::default_sink(v);
  }
}

}  // namespace runtime
}  // namespace kiln
#endif  // KILN_RUNTIME_BODY
