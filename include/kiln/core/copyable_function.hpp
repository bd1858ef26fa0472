// kiln::copyable_function: an owning, copyable callable (std::function's job, C++26's name)
// without <functional>, which every file that includes kiln would otherwise compile.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace kiln {

template <class Signature>
class copyable_function;

template <class R, class... A>
class copyable_function<R(A...)> {
 public:
  copyable_function() noexcept = default;
  copyable_function(std::nullptr_t) noexcept {}  // NOLINT: converting, like std::function
  // Owns a copy of `f` (moved in where it can be); a null function pointer makes it empty, as it
  // makes a std::function.
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, copyable_function> &&
           !std::is_member_pointer_v<std::decay_t<F>> &&
           std::is_copy_constructible_v<std::decay_t<F>> &&
           std::is_invocable_r_v<R, std::decay_t<F>&, A...>) copyable_function(F&& f) {  // NOLINT
    if constexpr (std::is_pointer_v<std::decay_t<F>>)
      if (f == nullptr) return;
    object_ = new std::decay_t<F>(std::forward<F>(f));
    ops_ = &ops_for<std::decay_t<F>>;
  }
  copyable_function(const copyable_function& o)
      : object_(o.ops_ ? o.ops_->clone(o.object_) : nullptr), ops_(o.ops_) {}
  copyable_function(copyable_function&& o) noexcept
      : object_(std::exchange(o.object_, nullptr)), ops_(std::exchange(o.ops_, nullptr)) {}
  copyable_function& operator=(copyable_function o) noexcept {
    std::swap(object_, o.object_);
    std::swap(ops_, o.ops_);
    return *this;
  }
  ~copyable_function() {
    if (ops_) ops_->destroy(object_);
  }

  // Whether it holds a callable: calling an empty one is undefined, as for a null pointer.
  explicit operator bool() const noexcept { return ops_ != nullptr; }
  R operator()(A... a) const { return ops_->call(object_, std::forward<A>(a)...); }

 private:
  // What each held type needs, one table per type (std::function's manager does this and more:
  // target(), target_type()).
  struct operations {
    R (*call)(void*, A&&...);
    void* (*clone)(const void*);
    void (*destroy)(void*);
  };
  template <class F>
  static constexpr operations ops_for{
      [](void* o, A&&... a) -> R {
        if constexpr (std::is_void_v<R>)
          (*static_cast<F*>(o))(std::forward<A>(a)...);  // a result, where F has one, dropped
        else
          return (*static_cast<F*>(o))(std::forward<A>(a)...);
      },
      [](const void* o) -> void* { return new F(*static_cast<const F*>(o)); },
      [](void* o) { delete static_cast<F*>(o); }};

  void* object_ = nullptr;
  const operations* ops_ = nullptr;
};

}  // namespace kiln
