#include "base/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace podshim::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::Info)};
std::atomic<Target> g_target{Target::Stderr};
std::mutex g_ident_mu;
std::string g_identifier = "podshim";

// systemd sets JOURNAL_STREAM=<dev>:<ino> for services whose stderr is a
// journal stream; matching it against fd 2 tells us native records are safe
// and avoids double logging.
bool stderr_is_journal_stream() {
  const char* js = std::getenv("JOURNAL_STREAM");
  if (!js) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  return st.st_dev == dev && st.st_ino == ino;
}

bool stderr_is_open() { return fcntl(STDERR_FILENO, F_GETFD) >= 0; }

}  // namespace

void init(Target target, Level max_level, std::string_view identifier) {
  if (target == Target::Auto) {
    if (stderr_is_journal_stream() || !stderr_is_open()) {
      target = access("/run/systemd/journal/socket", W_OK) == 0 ? Target::Journal : Target::Null;
    } else {
      target = Target::Stderr;
    }
  }
  g_target.store(target);
  g_level.store(static_cast<int>(max_level));
  std::lock_guard lk(g_ident_mu);
  g_identifier = std::string(identifier);
}

void set_level(Level max_level) { g_level.store(static_cast<int>(max_level)); }
Level level() { return static_cast<Level>(g_level.load()); }
Target target() { return g_target.load(); }
bool enabled(Level l) {
  return g_target.load() != Target::Null && static_cast<int>(l) <= g_level.load();
}

bool parse_level(std::string_view s, Level* out) {
  struct {
    std::string_view name;
    Level level;
  } const names[] = {{"err", Level::Err},       {"error", Level::Err},
                     {"warning", Level::Warning}, {"warn", Level::Warning},
                     {"notice", Level::Notice},   {"info", Level::Info},
                     {"debug", Level::Debug}};
  for (const auto& n : names) {
    if (n.name == s) {
      *out = n.level;
      return true;
    }
  }
  return false;
}

std::string format_stderr_line(Level l, std::initializer_list<Field> fields,
                               std::string_view message) {
  std::string line = fmt::format("<{}>{}", static_cast<int>(l), message);
  for (const Field& f : fields) {
    line += fmt::format(" {}={}", f.key, f.value);
  }
  // One record per line: embedded newlines would split it in journald.
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  line += '\n';
  return line;
}

void write(Level l, std::initializer_list<Field> fields, std::string_view message) {
  if (!enabled(l)) return;
  if (g_target.load() == Target::Journal) {
    std::vector<std::string> items;
    items.reserve(fields.size() + 3);
    items.push_back(fmt::format("MESSAGE={}", message));
    items.push_back(fmt::format("PRIORITY={}", static_cast<int>(l)));
    {
      std::lock_guard lk(g_ident_mu);
      items.push_back(fmt::format("SYSLOG_IDENTIFIER={}", g_identifier));
    }
    for (const Field& f : fields) items.push_back(fmt::format("{}={}", f.key, f.value));
    std::vector<iovec> iov;
    iov.reserve(items.size());
    for (auto& s : items) iov.push_back(iovec{s.data(), s.size()});
    if (sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) >= 0) return;
    // Journal unreachable: fall through to stderr, which may still be read.
  }
  const std::string line = format_stderr_line(l, fields, message);
  // A single write(2) keeps concurrent lines from interleaving.
  ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  (void)n;
}

}  // namespace podshim::log
