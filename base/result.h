// Errors as values: every fallible function in podshim returns Result<T>.
//
// Modelled on crun's libcrun_error_t (errno + message, wrapped with context as
// it travels up) on top of tl::expected, because g++ 12 has no std::expected.
// Exceptions from third-party parsers are caught inside the parse functions
// and never cross a component boundary.
#pragma once

#include <any>
#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <tl/expected.hpp>

namespace podshim {

// strerror that is thread-safe and never returns null.
std::string errno_string(int code);

// What an error means to a caller that must act on it. Callers branch on the
// kind (as crun's callers branch on crun_error_get_errno()), never on the
// message text; the facts behind a kind travel in Error::payload.
enum class ErrorKind : uint8_t {
  Other,
  // The cgroup engine refused a memory shrink below what the cgroup uses;
  // payload: cgroup::ShrinkRefusal (target, usage, anon, file, shmem).
  ShrinkRefused,
  // A wait ran out of time (a D-Bus call, a runtime's reply).
  Timeout,
};

// An error: the errno that caused it (0 when none applies), a message that
// reads well on its own ("opening cpu.max: Permission denied"), and for the
// failures callers handle, a kind and its payload. The message is formatted
// once, where the error is made, from the same facts as the payload.
struct Error {
  int code = 0;
  std::string message;
  ErrorKind kind = ErrorKind::Other;
  std::any payload;

  Error() = default;
  Error(int code_, std::string message_, ErrorKind kind_ = ErrorKind::Other, std::any payload_ = {})
      : code(code_), message(std::move(message_)), kind(kind_), payload(std::move(payload_)) {}

  // The payload as a T, or null when it holds something else (or nothing).
  template <typename T>
  const T* payload_as() const {
    return std::any_cast<T>(&payload);
  }

  // Returns this error with `context` prepended ("context: message"), so each
  // layer can say what it was doing without losing the cause, the errno, the
  // kind or the payload.
  [[nodiscard]] Error wrap(std::string_view context) const& {
    return Error{code, fmt::format("{}: {}", context, message), kind, payload};
  }
  [[nodiscard]] Error wrap(std::string_view context) && {
    message = fmt::format("{}: {}", context, message);
    return std::move(*this);
  }
  const std::string& str() const { return message; }
};

// A value or an Error. [[nodiscard]] so a dropped failure is a compile error.
template <typename T>
class [[nodiscard]] Result : public tl::expected<T, Error> {
 public:
  using tl::expected<T, Error>::expected;
  Result(const tl::expected<T, Error>& e) : tl::expected<T, Error>(e) {}  // NOLINT
  Result(tl::expected<T, Error>&& e) : tl::expected<T, Error>(std::move(e)) {}  // NOLINT
};

using Unexpected = tl::unexpected<Error>;

// An error with an explicit errno and a formatted message.
template <typename... Args>
Unexpected fail(int code, fmt::format_string<Args...> f, Args&&... args) {
  return Unexpected(Error{code, fmt::format(f, std::forward<Args>(args)...)});
}

// An error from the current errno: "<message>: <strerror(errno)>".
// errno is read before formatting so the formatting cannot clobber it.
template <typename... Args>
Unexpected fail_errno(fmt::format_string<Args...> f, Args&&... args) {
  const int saved = errno;
  std::string msg = fmt::format(f, std::forward<Args>(args)...);
  return Unexpected(Error{saved, fmt::format("{}: {}", msg, errno_string(saved))});
}

// An error from an explicit errno value (for APIs that return -errno).
template <typename... Args>
Unexpected fail_code(int code, fmt::format_string<Args...> f, Args&&... args) {
  std::string msg = fmt::format(f, std::forward<Args>(args)...);
  return Unexpected(Error{code, fmt::format("{}: {}", msg, errno_string(code))});
}

// Propagates a failed Result's error with context: `return wrap(r, "reading x")`.
template <typename T>
Unexpected wrap(const Result<T>& r, std::string_view context) {
  return Unexpected(r.error().wrap(context));
}

}  // namespace podshim

// Evaluates `expr` (a Result); on failure returns its error from the enclosing
// function, otherwise yields nothing. For Result<void> call chains.
#define PODSHIM_TRY(expr)                                          \
  do {                                                             \
    auto podshim_try_r_ = (expr);                                  \
    if (!podshim_try_r_) return ::podshim::Unexpected(std::move(podshim_try_r_).error()); \
  } while (0)
