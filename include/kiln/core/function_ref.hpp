// kiln::function_ref: a non-owning reference to a callable, so that a run-time function can take
// a caller's lambda without being a template (and without <functional>'s std::function).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace kiln {

template <class Signature>
class function_ref;

template <class R, class... A>
class function_ref<R(A...)> {
 public:
  // Refers to `f`, which must outlive every call through this reference.
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, function_ref> &&
           std::is_invocable_r_v<R, F&, A...>) function_ref(F&& f)
  noexcept  // NOLINT: converting, like std::function
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, A... a) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...);
        }) {}

  R operator()(A... a) const { return call_(object_, std::forward<A>(a)...); }

 private:
  void* object_;
  R (*call_)(void*, A...);
};

}  // namespace kiln
