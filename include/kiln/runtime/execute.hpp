// runtime::execute and runtime::submit: the one way both doors (kiln::fn and executable) reach a
// device, waiting for the call or not. The call's arguments have been checked and its sizes
// resolved; this picks the back end, and for a submission the path: straight to a Vulkan device's
// queue when the call needs nothing of the host, else the device's host queue, in order.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/copyable_function.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/runtime/abi.hpp"
#include "kiln/runtime/device.hpp"
#include "kiln/runtime/fence.hpp"
#include "kiln/runtime/program.hpp"
#include "kiln/runtime/signature.hpp"

struct VkSemaphore_T;  // a VkSemaphore (64-bit targets), without including vulkan_core.h

namespace kiln {
// A point on a timeline semaphore that the program made on d's VkDevice (d.vulkan_device()):
// submissions on d given it in kiln::after(...) wait for it on the device, and ones given it in
// .then_signal(...) signal it there. Its wait() waits on the host.
KILN_RUNTIME_API fence external_fence(const device& d, VkSemaphore_T* semaphore,
                                      std::uint64_t value);
}  // namespace kiln

namespace kiln::runtime {

// How plan p reads its parameters (the plan's inputs `parameters`, in order), for the buffer
// oracle (accept_entry). Results are written at any strides (region formation writes each result
// over its own extents).
KILN_RUNTIME_API std::vector<layout_use> argument_uses(const compiler::plan& p,
                                                       std::span<const std::int32_t> parameters);

// Runs `prog` for one call on `d`. sym: the resolved symbols. On the CPU, on_host runs every
// region (after the host-data checks); on Vulkan, the device runs the regions it can and on_host
// the rest, overlapping it. The call's transients live in ws where given, else in an arena of
// prog's for d. `who` names the caller in errors.
KILN_RUNTIME_API void execute(const device& d, const program& prog,
                              std::span<const buffer_ref> args, std::span<const buffer_ref> results,
                              const std::int64_t* sym, const std::string& who, host_regions on_host,
                              const workspace& ws);

// A call that runs after its submit(...) has returned: it owns its references, sizes and host
// function (which owns what it uses), and `keep` keeps its program alive. `then`, where given,
// runs on the host once the call has succeeded, before its fence is reached (so such a call goes
// through the host queue).
struct owned_call {
  std::vector<buffer_ref> args, results;
  std::vector<std::int64_t> sym;
  std::string who;
  copyable_function<void(std::span<const buffer_ref>, std::span<const buffer_ref>,
                         const std::vector<bool>*, const arena&)>
      on_host;
  workspace ws;
  std::shared_ptr<const void> keep;
  copyable_function<void()> then;
  // Given the call's failure: writes its reproducer (KILN_REPRO_DIR) and throws the error naming
  // it, or returns (then the error stands as it is).
  copyable_function<void(const error&)> reproduce;
};

// Submits `call` of `prog` on `d` after order.waits; returns at once with the fence it signals
// (and order.signals) when done. Calls on one device run in submission order. kiln's buffers
// among the arguments, results and workspace are kept alive until then; host memory must be.
KILN_RUNTIME_API fence submit(const device& d, const program& prog, owned_call call,
                              const submission_order& order);

}  // namespace kiln::runtime

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include <array>
#include <cstring>

#include "kiln/core/thread_kept.hpp"
#include "kiln/runtime/cpu/parallel.hpp"
#include "kiln/runtime/host_memory.hpp"
#include "kiln/runtime/vulkan/executor.hpp"

namespace kiln::runtime {

namespace detail {

// The arenas of one call, found when a back end asks (the Vulkan back end knows only after
// planning the call whether its transients are on the device or on the host): the caller's
// workspace where it is in that memory, else one of the program's, held until the call ends.
class call_arenas {
 public:
  call_arenas(const device& d, const program& prog, const workspace& ws, const std::int64_t* sym,
              const std::string& who)
      : d_(d), prog_(prog), ws_(ws), sym_(sym), who_(who) {
    if (!ws.given()) return;
    // (The CPU device's buffers are host memory, a workspace for calls on the CPU.)
    if (ws.memory() && ws.memory()->device_name() != d.name())
      throw error(errc::invalid_argument, who,
                  "the workspace is on " + ws.memory()->device_name() + " but the call runs on " +
                      d.name() + "; give memory of " + d.name() + " (" +
                      (d.type() == device::kind::cpu ? "host bytes" : "a buffer of that device") +
                      ")");
  }

  // p's arena for this call: on the device, or in host memory.
  arena operator()(const compiler::plan& p, bool on_device) {
    if (p.transients.empty()) return {};  // most plans: nothing to lay out or lend
    arena a{prog_.arenas().layout(p, sym_, p.graph.symbols.size() + 1)};
    const std::int64_t bytes = a.layout.bytes;
    if (bytes == 0) return a;
    if (ws_.given()) {
      if (on_device && !ws_.memory())
        throw error(errc::invalid_argument, who_,
                    "the workspace is host memory but the call's transients are on " + d_.name() +
                        "; give a buffer of that device (device.alloc<std::uint8_t>(" +
                        std::to_string(bytes) + "))");
      unsigned char* host = nullptr;
      std::size_t have = ws_.bytes();
      if (!on_device) {  // host bytes, or a device buffer the host can address
        host = ws_.memory() ? ws_.memory()->host_address()
                            : reinterpret_cast<unsigned char*>(ws_.host());
        if (host && ws_.memory()) host += ws_.offset();
        if (host) {  // the arena starts at a multiple of 64 bytes, as the CPU loads like
          auto skip = static_cast<std::size_t>(-reinterpret_cast<std::uintptr_t>(host) & 63);
          have = have > skip ? have - skip : 0;
          host += skip;
        }
      }
      if (on_device || host) {
        if (have < static_cast<std::size_t>(bytes))
          throw error(errc::invalid_argument, who_,
                      "the workspace holds " + std::to_string(have) +
                          " usable bytes but this call's transients need " + std::to_string(bytes) +
                          (on_device ? "" : " (from a 64-byte boundary)"));
        a.host = host;
        a.memory = on_device ? ws_.memory() : nullptr;
        a.offset = on_device ? ws_.offset() : 0;
        return a;
      }
      // A device-only workspace where the transients are on the host (a region fell back to
      // the CPU): the program's host arena serves.
    }
    const device* owner = on_device ? &d_ : nullptr;
    leases_.push_back(prog_.arenas().take(
        on_device ? static_cast<const void*>(d_.context()) : nullptr, bytes, [&](std::int64_t n) {
          return owner ? device_block(*owner, n) : arena_pool::host_block(n);
        }));
    a.host = leases_.back().get().host;
    a.memory = leases_.back().get().memory;
    return a;
  }

  // The leased arenas, held by the result until a submission that uses them is done.
  std::shared_ptr<void> release() {
    return std::make_shared<std::vector<arena_pool::lease>>(std::move(leases_));
  }

 private:
  static arena_pool::block device_block(const device& d, std::int64_t bytes) {
    auto memory = std::make_shared<buffer<std::uint8_t>>(d.alloc<std::uint8_t>(bytes));
    arena_pool::block b;
    b.memory = memory->memory();
    b.bytes = bytes;
    b.keep = std::move(memory);
    return b;
  }

  const device& d_;
  const program& prog_;
  const workspace& ws_;
  const std::int64_t* sym_;
  const std::string& who_;
  std::vector<arena_pool::lease> leases_;
};

inline submission_queue& host_queue_of(const device& d) {
  return d.type() == device::kind::cpu ? cpu_queue().queue : d.context()->host_queue();
}

// Row-major copies of the strided host arguments that a plan reads only row-major
// (compiler::reads_any_layout: through a reshape, as a gather's positions), for one call.
class row_major_copies {
 public:
  row_major_copies(const compiler::plan& p, std::vector<buffer_ref>& args) {
    for (std::size_t a = 0; a < args.size(); ++a) {
      buffer_ref& b = args[a];
      if (!b.strided || compiler::reads_any_layout(p, static_cast<std::int32_t>(a))) continue;
      const int bytes = size_in_bytes(p.graph.inputs[a].type);
      auto& m = memory_.emplace_back(static_cast<std::size_t>(b.dims.element_count() * bytes));
      pack(b, m.data(), bytes);
      b.data = m.data();
      b.strided = false;
    }
  }

 private:
  std::vector<std::vector<unsigned char>> memory_;
};

// A call's arguments and results as host data (host_refs), in memory its thread keeps.
struct host_views {
  std::vector<buffer_ref> args, results;
};

// The call now, on this thread (the device's earlier submissions are done).
inline void execute_now(const device& d, const program& prog, std::span<const buffer_ref> args,
                        std::span<const buffer_ref> results, const std::int64_t* sym,
                        const std::string& who, host_regions on_host, const workspace& ws) {
  call_arenas arenas(d, prog, ws, sym, who);
  // The CPU device's buffers are host data, on every device.
  thread_kept<host_views> views;
  std::vector<buffer_ref>& in = views->args;
  const std::vector<buffer_ref>& out = views->results;
  host_refs(args, views->args);
  host_refs(results, views->results);
  // An empty argument's data may be null; a view that reads it where its mask takes another piece
  // (a concat's piece of run-time length 0) reads its first element (compiler::apply_view): zeros.
  alignas(64) static constexpr unsigned char no_elements[64] = {};
  for (buffer_ref& r : in)
    if (!r.memory && r.dims.element_count() == 0) r.data = no_elements;
  const row_major_copies copies(prog.plan(), in);
  switch (d.type()) {
    case device::kind::cpu:
      check_host(in, out, who);
      on_host(in, out, nullptr, arenas(prog.plan(), false));
      return;
    case device::kind::vulkan:
      vulkan::run(prog, *d.context(), in, out, sym, on_host, arenas);
      return;
  }
}

// What a submission holds until it is done: the call, kiln's buffers it uses, and copies of its
// scalar arguments.
struct held_call {
  owned_call call;
  std::vector<std::shared_ptr<const device_memory>> memory;
  std::shared_ptr<void> arenas;  // a direct submission's leased arenas
  std::vector<std::array<std::byte, 8>> scalars;
};

inline std::shared_ptr<held_call> hold(const program& prog, owned_call call) {
  auto h = std::make_shared<held_call>();
  h->call = std::move(call);
  // A number given for a scalar is often a temporary of the submitting expression: copied.
  auto& args = h->call.args;
  h->scalars.resize(args.size());
  for (std::size_t a = 0; a < args.size(); ++a)
    if (args[a].data && !args[a].memory && args[a].dims.rank == 0) {
      std::memcpy(h->scalars[a].data(), args[a].data,
                  size_in_bytes(prog.plan().graph.inputs[a].type));
      args[a].data = h->scalars[a].data();
    }
  for (auto* refs : {&h->call.args, &h->call.results})
    for (const buffer_ref& r : *refs)
      if (r.memory) h->memory.push_back(r.memory->weak_from_this().lock());
  if (h->call.ws.memory()) h->memory.push_back(h->call.ws.memory()->weak_from_this().lock());
  return h;
}

// Signals the points a submission was asked to signal besides its own.
inline void signal_all(const submission_order& order, kiln::detail::fence_state& state) {
  for (const fence& f : order.signals) try {
      if (f.line()) f.line()->signal(f.value());
    } catch (...) {
      state.fail(std::current_exception());
    }
}

// A Vulkan submission straight to the device queue when every fence it waits for is a point the
// device can wait on and nothing queued on the host comes before it; else 0.
inline fence submit_direct(const device& d, const program& prog,
                           const std::shared_ptr<held_call>& h, const submission_order& order) {
  vulkan::context& ctx = *d.context();
  // In order: nothing of the host queue may be pending (the device never waits for the host).
  if (ctx.host_line()->reached() < ctx.host_queue().last_pushed()) return {};
  std::vector<vulkan::semaphore_value> wait, signal;
  auto on_device = [&](const fence& f) -> const vulkan::semaphore_timeline* {
    auto* t = dynamic_cast<const vulkan::semaphore_timeline*>(f.line());
    return t && t->device() == ctx.device() ? t : nullptr;
  };
  for (const fence& f : order.waits) {
    if (f.ready()) {
      // Reached; a failure there is this call's, which the host queue reports through its fence.
      if (f.state() && f.state()->failed()) return {};
      continue;
    }
    auto* t = on_device(f);
    if (!t) return {};  // a host point: the host queue waits for it
    wait.push_back({t->semaphore(), f.value()});
  }
  for (const fence& f : order.signals) {
    auto* t = on_device(f);
    if (!t) return {};
    signal.push_back({t->semaphore(), f.value()});
  }
  call_arenas arenas(d, prog, h->call.ws, h->call.sym.data(), h->call.who);
  arena_source source = arenas;
  std::string needs_host;
  {
    // After every earlier direct submission (the device orders them through its timeline).
    std::lock_guard lock(ctx.mutex());
    if (std::uint64_t last = ctx.queue().last_submitted())
      wait.push_back({ctx.queue().timeline(), last});
  }
  // The CPU device's buffers are host data here, as in a synchronous call: the host queue's.
  std::vector<buffer_ref> in, out;
  host_refs(h->call.args, in);
  host_refs(h->call.results, out);
  const std::uint64_t value =
      vulkan::submit(prog, ctx, in, out, h->call.sym.data(), wait, signal, &source, &needs_host);
  if (!value) return {};
  h->arenas = arenas.release();
  ctx.retain(value, h);
  return fence(ctx.device_line(), value);
}

}  // namespace detail

KILN_RUNTIME_API std::vector<layout_use> argument_uses(const compiler::plan& p,
                                                       std::span<const std::int32_t> parameters) {
  std::vector<layout_use> uses;
  for (auto a : parameters)
    uses.push_back(compiler::reads_any_layout(p, a) ? layout_use::any_strides
                                                    : layout_use::row_major);
  return uses;
}

KILN_RUNTIME_API void execute(const device& d, const program& prog,
                              std::span<const buffer_ref> args, std::span<const buffer_ref> results,
                              const std::int64_t* sym, const std::string& who, host_regions on_host,
                              const workspace& ws) {
  // A call that waits is a submission and its wait: after what was submitted before it.
  detail::host_queue_of(d).drain();
  if (d.type() == device::kind::vulkan) d.context()->drop_finished();
  detail::execute_now(d, prog, args, results, sym, who, on_host, ws);
}

KILN_RUNTIME_API fence submit(const device& d, const program& prog, owned_call call,
                              const submission_order& order) {
  auto h = detail::hold(prog, std::move(call));
  if (d.type() == device::kind::vulkan && !h->call.then)
    if (fence f = detail::submit_direct(d, prog, h, order); f.state()) return f;
  std::shared_ptr<timeline> line;
  if (d.type() == device::kind::cpu)
    line = cpu_queue().line;
  else
    line = d.context()->host_line();
  auto state = std::make_shared<kiln::detail::fence_state>();
  state->line = line;
  submission_queue& q = detail::host_queue_of(d);
  // The task holds the device (a Vulkan context stays open until it has run).
  state->value = q.push([d, &prog, h, order, state, line, &q,
                         limit = cpu::thread_limit_of_this_thread()](std::uint64_t number) {
    const thread_limit threads(limit);  // the submitting thread's
    try {
      // A failure there is this call's. A fence that is not reached by the time the queue stops
      // (the process exits; the device closes) is given up, so that exit never waits on it.
      for (const fence& f : order.waits)
        while (!f.wait_for(std::chrono::milliseconds(20)))
          if (q.stopping())
            throw error(errc::invalid_argument, h->call.who,
                        "abandoned: the queue stopped while the call waited for a fence that was "
                        "not reached");
      const owned_call& c = h->call;
      detail::execute_now(d, prog, c.args, c.results, c.sym.data(), c.who, c.on_host, c.ws);
      if (c.then) c.then();
    } catch (const error& e) {
      try {
        if (h->call.reproduce) h->call.reproduce(e);
        throw;
      } catch (...) {
        state->fail(std::current_exception());
      }
    } catch (...) {
      state->fail(std::current_exception());
    }
    detail::signal_all(order, *state);
    line->signal(number);
  });
  return fence(state);
}

}  // namespace kiln::runtime

namespace kiln {
KILN_RUNTIME_API fence external_fence(const device& d, VkSemaphore_T* semaphore,
                                      std::uint64_t value) {
  if (d.type() != device::kind::vulkan || !semaphore)
    throw error(errc::invalid_argument, "external_fence",
                d.type() != device::kind::vulkan ? "takes a Vulkan device, got " + d.name()
                                                 : std::string("the semaphore is null"));
  return fence(d.context()->external_line(semaphore), value);
}
}  // namespace kiln
#endif  // KILN_RUNTIME_BODY
