// kiln::variable: a persistent tensor (flow.variable) that compiled functions read and assign
// across calls, kept on the device of the call that last used it. Copies share it, so several
// executables can use one.
#pragma once

#include <cstdint>
#include <memory>
#include <ranges>
#include <span>
#include <string>

#include "kiln/core/dtype.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/runtime_boundary.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/runtime/buffer.hpp"
#include "kiln/runtime/device.hpp"

namespace kiln {

class variable {
 public:
  // A variable of element type t and static extents `dims`, named in messages; zeros until
  // loaded.
  KILN_RUNTIME_API variable(std::string name, dtype t, const shape& dims);
  // ... with a value from host data.
  template <std::ranges::contiguous_range R>
  requires element_type<std::ranges::range_value_t<R>> variable(std::string name, const R& values,
                                                                const shape& dims)
      : variable(std::move(name), dtype_of<std::ranges::range_value_t<R>>, dims) {
    load(values);
  }

  KILN_RUNTIME_API const std::string& name() const;
  KILN_RUNTIME_API dtype type() const;
  KILN_RUNTIME_API const shape& dims() const;
  // Where its value is: "host" until a call uses it, then that call's device.
  KILN_RUNTIME_API std::string device_name() const;

  // Sets its value from host data (its element count, of its dtype, row-major), after the calls
  // submitted so far on its device.
  template <std::ranges::contiguous_range R>
  void load(const R& values) {
    using T = std::ranges::range_value_t<R>;
    check_host(dtype_of<T>, std::ranges::size(values), "load");
    load_bytes(std::ranges::data(values), std::ranges::size(values) * sizeof(T));
  }
  // Copies its value to host memory, after the calls submitted so far on its device.
  template <std::ranges::contiguous_range R>
  void save(R&& out) const {
    using T = std::ranges::range_value_t<R>;
    check_host(dtype_of<T>, std::ranges::size(out), "save");
    save_bytes(std::ranges::data(out), std::ranges::size(out) * sizeof(T));
  }
  KILN_RUNTIME_API void load_bytes(const void* data, std::size_t bytes);
  KILN_RUNTIME_API void save_bytes(void* data, std::size_t bytes) const;

  // Its memory on d (moved there first) as a kiln::buffer of its extents, for a kiln::fn's
  // arguments and into(...): f.on(d)(w, g, into(w)) updates it in place where the plan allows.
  // The buffer stays the variable's value until the variable moves to another device.
  template <element_type T>
  buffer<T> buffer_on(const device& d) const {
    if (dtype_of<T> != type())
      throw error(errc::dtype_mismatch, "variable::buffer_on",
                  "'" + name() + "' is " + std::string(kiln::name(type())) + to_string(dims()) +
                      ", not " + std::string(kiln::name(dtype_of<T>)));
    return buffer<T>(memory_on(d), dims(), false);
  }

  // For the doors: its memory on d, moved there (through the host) from where it was.
  KILN_RUNTIME_API std::shared_ptr<runtime::device_memory> memory_on(const device& d) const;
  // The same variable: copies compare equal.
  friend bool operator==(const variable& a, const variable& b) { return a.s_ == b.s_; }

 private:
  KILN_RUNTIME_API void check_host(dtype t, std::size_t count, const char* what) const;
  struct state;
  std::shared_ptr<state> s_;
};

}  // namespace kiln

// The definitions behind the declarations above (core/runtime_boundary.hpp).
#if KILN_RUNTIME_BODY
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

namespace kiln {

struct variable::state {
  std::string name;
  dtype type;
  shape dims;
  std::size_t bytes;
  mutable std::mutex mutex;
  std::vector<unsigned char> host;                 // its value until a call uses it
  std::shared_ptr<runtime::device_memory> memory;  // then its value, on that call's device
  std::optional<device> on;                        // (that device)
};

KILN_RUNTIME_API variable::variable(std::string name, dtype t, const shape& dims)
    : s_(std::make_shared<state>()) {
  if (!is_valid(t))
    throw error(errc::invalid_argument, "variable",
                "'" + name + "': dtype value " + std::to_string(static_cast<int>(t)) +
                    " is not a kiln::dtype");
  if (!dims.is_static())
    throw error(errc::invalid_argument, "variable",
                "'" + name + "' needs static extents, got " + to_string(dims));
  auto n = checked_element_count(dims, size_in_bytes(t), "variable", "'" + name + "'");
  s_->name = std::move(name);
  s_->type = t;
  s_->dims = dims;
  s_->bytes = static_cast<std::size_t>(n * size_in_bytes(t));
  s_->host.assign(s_->bytes, 0);
}

KILN_RUNTIME_API const std::string& variable::name() const { return s_->name; }
KILN_RUNTIME_API dtype variable::type() const { return s_->type; }
KILN_RUNTIME_API const shape& variable::dims() const { return s_->dims; }

KILN_RUNTIME_API std::string variable::device_name() const {
  std::lock_guard lock(s_->mutex);
  return s_->memory ? s_->memory->device_name() : "host";
}

KILN_RUNTIME_API void variable::check_host(dtype t, std::size_t count, const char* what) const {
  if (t != s_->type)
    throw error(errc::dtype_mismatch, std::string("variable::") + what,
                "'" + s_->name + "' is " + std::string(kiln::name(s_->type)) + to_string(s_->dims) +
                    " but the host data is " + std::string(kiln::name(t)));
  if (static_cast<std::int64_t>(count) != s_->dims.element_count())
    throw error(errc::shape_mismatch, std::string("variable::") + what,
                "'" + s_->name + "' holds " + std::to_string(s_->dims.element_count()) +
                    " elements (" + std::string(kiln::name(s_->type)) + to_string(s_->dims) +
                    ") but the host data has " + std::to_string(count));
}

namespace detail {
// The byte count of a load or a save, against the variable's.
inline void check_variable_bytes(const std::string& name, std::size_t have, std::size_t given,
                                 const void* data, const char* what) {
  if (!data && given > 0)
    throw error(errc::invalid_argument, std::string("variable::") + what,
                "'" + name + "': the data pointer is null (" + std::to_string(given) + " bytes)");
  if (given != have)
    throw error(
        errc::shape_mismatch, std::string("variable::") + what,
        "'" + name + "' holds " + std::to_string(have) + " bytes, got " + std::to_string(given));
}
}  // namespace detail

KILN_RUNTIME_API void variable::load_bytes(const void* data, std::size_t bytes) {
  std::lock_guard lock(s_->mutex);
  detail::check_variable_bytes(s_->name, s_->bytes, bytes, data, "load");
  if (s_->memory)
    s_->memory->write(data, bytes, 0);
  else if (bytes)
    std::memcpy(s_->host.data(), data, bytes);
}

KILN_RUNTIME_API void variable::save_bytes(void* data, std::size_t bytes) const {
  std::lock_guard lock(s_->mutex);
  detail::check_variable_bytes(s_->name, s_->bytes, bytes, data, "save");
  if (s_->memory)
    s_->memory->read(data, bytes, 0);
  else if (bytes)
    std::memcpy(data, s_->host.data(), bytes);
}

KILN_RUNTIME_API std::shared_ptr<runtime::device_memory> variable::memory_on(
    const device& d) const {
  std::lock_guard lock(s_->mutex);
  if (s_->memory && *s_->on == d) return s_->memory;
  std::vector<unsigned char> value;
  if (s_->memory) {  // on another device: its value through the host
    value.resize(s_->bytes);
    s_->memory->read(value.data(), s_->bytes, 0);
  }
  const std::vector<unsigned char>& from = s_->memory ? value : s_->host;
  auto fresh = d.alloc<std::uint8_t>(static_cast<std::int64_t>(s_->bytes));
  if (s_->bytes) fresh.upload(std::span<const std::uint8_t>(from.data(), from.size()));
  s_->memory = fresh.memory()->shared_from_this();
  s_->on = d;
  s_->host = {};
  return s_->memory;
}

}  // namespace kiln
#endif  // KILN_RUNTIME_BODY
