// kiln::result<T>: a value or the kiln::error that stopped it, for callers that keep exceptions
// out of their own code (the graph API's try_ forms).
#pragma once

#include <type_traits>
#include <utility>
#include <variant>

#include "kiln/core/error.hpp"

namespace kiln {

template <class T>
class result {
 public:
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  result(error e) : v_(std::in_place_index<1>, std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  // The value; throws the error when there is none.
  T& value() & {
    if (!ok()) throw std::get<1>(v_);
    return std::get<0>(v_);
  }
  T&& value() && { return std::move(value()); }
  // The error; only when !ok().
  const error& failure() const { return std::get<1>(v_); }

 private:
  std::variant<T, error> v_;
};

template <>
class result<void> {
 public:
  result() = default;
  result(error e) : e_(std::move(e)), ok_(false) {}
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  void value() const {
    if (!ok_) throw e_;
  }
  const error& failure() const { return e_; }

 private:
  error e_{errc::invalid_argument, "", ""};
  bool ok_ = true;
};

// Runs f() and returns its value, or the kiln::error it threw.
template <class F>
auto try_call(F&& f) -> result<std::invoke_result_t<F>> {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<F>>) {
      std::forward<F>(f)();
      return {};
    } else {
      return std::forward<F>(f)();
    }
  } catch (const error& e) {
    return e;
  }
}

}  // namespace kiln
