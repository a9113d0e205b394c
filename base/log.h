// Logging for podshim's programs.
//
// Library code (cgroup/, cdi/, selinux/) returns errors and does not log above
// debug; program code (shim/) logs each failure once, with context, and says
// ", ignoring" when it tolerates one (systemd's CODING_STYLE convention).
//
// Two sinks: stderr lines with a "<N>" syslog priority prefix, which journald
// turns into the right priority when stderr is a journal stream, and native
// journald records (sd_journal_sendv) carrying structured fields such as
// CONTAINER_ID. A pre-installed NRI plugin is started with no stdout/stderr at
// all (NRI pkg/adaptation newLaunchedPlugin), so Auto picks the journal then.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace podshim::log {

enum class Level : int { Err = 3, Warning = 4, Notice = 5, Info = 6, Debug = 7 };

enum class Target {
  Auto,     // journal if stderr is a journal stream or closed, else stderr
  Stderr,   // "<N>message key=value" lines on fd 2
  Journal,  // sd_journal_sendv
  Null,     // discard (tests)
};

// One structured field, e.g. {"CONTAINER_ID", id}. Keys follow journald rules
// (upper case, digits, underscore).
struct Field {
  std::string_view key;
  std::string_view value;
};

// Picks the sink and the most verbose level that is emitted. Safe to call again
// (SIGHUP reload). The identifier becomes SYSLOG_IDENTIFIER.
void init(Target target, Level max_level, std::string_view identifier = "podshim");
void set_level(Level max_level);
Level level();
Target target();
bool enabled(Level l);

// Parses "err|warning|notice|info|debug" (also "error", "warn").
bool parse_level(std::string_view s, Level* out);

// Emits one record. Never fails: a logging failure is not worth failing for.
void write(Level l, std::initializer_list<Field> fields, std::string_view message) noexcept;

// `s` with every byte that could act on a terminal or is not UTF-8 written
// as \xNN (C0 and C1 controls, DEL, ill-formed sequences); what write()
// does to every message.
std::string escape(std::string_view s);

template <typename... Args>
void at(Level l, std::initializer_list<Field> fields, fmt::format_string<Args...> f,
        Args&&... args) {
  if (!enabled(l)) return;
  write(l, fields, fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
void err(fmt::format_string<Args...> f, Args&&... args) {
  at(Level::Err, {}, f, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  at(Level::Warning, {}, f, std::forward<Args>(args)...);
}
template <typename... Args>
void notice(fmt::format_string<Args...> f, Args&&... args) {
  at(Level::Notice, {}, f, std::forward<Args>(args)...);
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  at(Level::Info, {}, f, std::forward<Args>(args)...);
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  at(Level::Debug, {}, f, std::forward<Args>(args)...);
}

// Rate limiting for messages a client can trigger at will (a denied request,
// a refused connection), after systemd's log_ratelimit_*(): at most `burst`
// records per `interval` from one call site; when a window with suppressed
// records ends, one record says how many were dropped. Every dropped record
// is counted in suppressed_total() (podshim_log_messages_suppressed_total).
class RateLimit {
 public:
  constexpr RateLimit(std::chrono::milliseconds interval, unsigned burst) : interval_(interval), burst_(burst) {}
  // Whether a record may be written now; `dropped` receives the count of
  // records suppressed in the window that just ended (0 if none).
  bool allow(std::chrono::steady_clock::time_point now, uint64_t* dropped);

 private:
  std::mutex mu_;
  std::chrono::milliseconds interval_;
  unsigned burst_;
  std::chrono::steady_clock::time_point start_{};
  unsigned used_ = 0;
  uint64_t suppressed_ = 0;
};

uint64_t suppressed_total();

template <typename... Args>
void limited(RateLimit& rl, Level l, std::initializer_list<Field> fields, fmt::format_string<Args...> f,
             Args&&... args) {
  if (!enabled(l)) return;
  uint64_t dropped = 0;
  if (!rl.allow(std::chrono::steady_clock::now(), &dropped)) return;
  if (dropped > 0) write(l, {}, fmt::format("{} similar messages suppressed (rate limit)", dropped));
  write(l, fields, fmt::format(f, std::forward<Args>(args)...));
}

// Formats a record as the stderr sink would (exposed for tests).
std::string format_stderr_line(Level l, std::initializer_list<Field> fields,
                               std::string_view message);

}  // namespace podshim::log
