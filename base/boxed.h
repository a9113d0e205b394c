#pragma once

// Boxed<T>: an optional value kept on the heap. For fields that are almost
// always empty in objects there are thousands of: the resize conditions of
// a container (two std::optional<Condition> were 176 of a Container's 792
// bytes, on every container of the node, though only one being resized has
// one), or a CDI registry's rarely-set ContainerEdits fields (intelRdt is
// 136 bytes). Empty it is one pointer; copies are deep, so it has value
// semantics, and it reads like std::optional.

#include <memory>
#include <optional>
#include <utility>

namespace podshim {

template <class T>
class Boxed {
 public:
  Boxed() = default;
  Boxed(std::nullopt_t) {}
  Boxed(const T& v) : p_(std::make_unique<T>(v)) {}
  Boxed(T&& v) : p_(std::make_unique<T>(std::move(v))) {}
  Boxed(const std::optional<T>& o) : p_(o ? std::make_unique<T>(*o) : nullptr) {}
  Boxed(const Boxed& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  Boxed(Boxed&&) noexcept = default;
  Boxed& operator=(const Boxed& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  Boxed& operator=(Boxed&&) noexcept = default;
  Boxed& operator=(std::nullopt_t) {
    p_.reset();
    return *this;
  }
  Boxed& operator=(const T& v) {
    if (p_)
      *p_ = v;
    else
      p_ = std::make_unique<T>(v);
    return *this;
  }
  Boxed& operator=(T&& v) {
    if (p_)
      *p_ = std::move(v);
    else
      p_ = std::make_unique<T>(std::move(v));
    return *this;
  }
  Boxed& operator=(const std::optional<T>& o) {
    if (o)
      *this = *o;
    else
      p_.reset();
    return *this;
  }

  explicit operator bool() const { return static_cast<bool>(p_); }
  bool has_value() const { return static_cast<bool>(p_); }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }
  T& operator*() { return *p_; }
  const T& operator*() const { return *p_; }
  T& value() {
    if (!p_) throw std::bad_optional_access();
    return *p_;
  }
  const T& value() const {
    if (!p_) throw std::bad_optional_access();
    return *p_;
  }
  void reset() { p_.reset(); }
  template <class... A>
  T& emplace(A&&... a) {
    p_ = std::make_unique<T>(std::forward<A>(a)...);
    return *p_;
  }

  bool operator==(const Boxed& o) const { return p_ && o.p_ ? *p_ == *o.p_ : !p_ == !o.p_; }
  bool operator==(std::nullopt_t) const { return !p_; }

 private:
  std::unique_ptr<T> p_;
};

}  // namespace podshim
