// Runs a callable when the scope ends, unless release()d: the rollback idiom
// ("undo this unless we get to the end") without try/catch.
#pragma once

#include <utility>

namespace podshim {

template <typename F>
class [[nodiscard]] ScopeExit {
 public:
  explicit ScopeExit(F f) : f_(std::move(f)) {}
  ~ScopeExit() {
    if (active_) f_();
  }
  ScopeExit(const ScopeExit&) = delete;
  ScopeExit& operator=(const ScopeExit&) = delete;

  // Cancels the action: the work it would undo is now committed.
  void release() { active_ = false; }

 private:
  F f_;
  bool active_ = true;
};

}  // namespace podshim
