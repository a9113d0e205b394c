#include "base/log.h"

#include "base/str.h"

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

std::string escape(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && static_cast<unsigned char>(s[i]) >= 0x20 && static_cast<unsigned char>(s[i]) < 0x7f) ++i;
  if (i == s.size()) return std::string(s);  // printable ASCII: the usual case
  std::string o(s.substr(0, i));
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      o += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c >= 0x80) {
      // A whole UTF-8 sequence passes, unless it is a C1 control
      // (U+0080..U+009F: "\xc2\x9b" is the 8-bit CSI a terminal obeys).
      size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
      if (n > 0 && i + n <= s.size() && str::valid_utf8(s.substr(i, n)) &&
          !(c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0)) {
        o.append(s.substr(i, n));
        i += n;
        continue;
      }
    }
    o += fmt::format("\\x{:02x}", c);
    ++i;
  }
  return o;
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

void write(Level l, std::initializer_list<Field> fields, std::string_view raw) noexcept try {
  if (!enabled(l)) return;
  // Messages quote what clients sent (request paths, ids): control bytes,
  // C1 controls and bytes that are not UTF-8 are written as \xNN, so a log
  // line cannot move a terminal's cursor or recolour it (CWE-117).
  const std::string message = escape(raw);
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
  // A failed write to stderr has nowhere left to be reported.
  ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  (void)n;
} catch (...) {
  // Out of memory while formatting: the record is lost, the caller goes on.
}

namespace {
std::atomic<uint64_t> g_suppressed{0};
}

bool RateLimit::allow(std::chrono::steady_clock::time_point now, uint64_t* dropped) {
  std::lock_guard lk(mu_);
  *dropped = 0;
  if (start_ == std::chrono::steady_clock::time_point{} || now - start_ >= interval_) {
    *dropped = suppressed_;
    start_ = now;
    used_ = 0;
    suppressed_ = 0;
  }
  if (used_ < burst_) {
    ++used_;
    return true;
  }
  ++suppressed_;
  g_suppressed.fetch_add(1, std::memory_order_relaxed);
  return false;
}

uint64_t suppressed_total() { return g_suppressed.load(std::memory_order_relaxed); }

}  // namespace podshim::log
