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

#include <initializer_list>
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
void write(Level l, std::initializer_list<Field> fields, std::string_view message);

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

// Formats a record as the stderr sink would (exposed for tests).
std::string format_stderr_line(Level l, std::initializer_list<Field> fields,
                               std::string_view message);

}  // namespace podshim::log
