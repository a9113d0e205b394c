#include "cgroup/clamp_journal.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "base/fs.h"
#include "base/str.h"
#include "base/unique_fd.h"
#include "cgroup/cgroup_dir.h"
#include "cgroup/convert.h"

namespace podshim::cgroup {

struct ClampJournal::Log {
  int state_fd = -1;
  std::mutex mu;
  UniqueFd fd;  // kFileName, O_APPEND; opened at the first record
  uint64_t size = 0;
  std::map<std::string, std::string, std::less<>> live;  // in force, as journaled
};

namespace {

constexpr std::string_view kHeader = "podshim-clamps v1\n";
constexpr uint64_t kTruncateBytes = 64 << 10;  // cut back to the header when nothing is in force
constexpr uint64_t kRewriteBytes = 1 << 20;    // rewrite with what is in force
constexpr std::string_view kLegacyMagic = "podshim-clamp v1";

std::string on_record(std::string_view relpath, std::string_view high) {
  return fmt::format("C {} {} {}\n", relpath.size(), relpath, high);
}
std::string off_record(std::string_view relpath) { return fmt::format("D {} {}\n", relpath.size(), relpath); }

// Replays `body` into `live`. A last record without its newline is a write
// podshimd did not finish (it died in it): ignored, as it never took effect.
Result<void> replay(std::string_view body, std::map<std::string, std::string, std::less<>>* live) {
  if (body.substr(0, kHeader.size()) != kHeader) return fail(EINVAL, "no '{}' header", str::trim(kHeader));
  size_t pos = kHeader.size();
  size_t n = 0;
  while (pos < body.size()) {
    const size_t eol = body.find('\n', pos);
    if (eol == std::string_view::npos) break;  // torn tail
    ++n;
    std::string_view rec = body.substr(pos, eol - pos);
    pos = eol + 1;
    auto bad = [&] { return fail(EINVAL, "record {} malformed: '{}'", n, rec.substr(0, 200)); };
    if (rec.size() < 4 || (rec[0] != 'C' && rec[0] != 'D') || rec[1] != ' ') return bad();
    const size_t sp = rec.find(' ', 2);
    if (sp == std::string_view::npos) return bad();
    auto len = str::parse_u64(rec.substr(2, sp - 2));
    if (!len || *len > rec.size() - sp - 1) return bad();
    std::string rel(rec.substr(sp + 1, *len));
    std::string_view rest = rec.substr(sp + 1 + *len);
    if (!fs::check_relative(rel)) return bad();
    if (rec[0] == 'D') {
      if (!rest.empty()) return bad();
      live->erase(rel);
      continue;
    }
    if (rest.size() < 2 || rest[0] != ' ') return bad();
    std::string high(rest.substr(1));
    if (!parse_memory_max(high)) return bad();
    (*live)[rel] = high;
  }
  return {};
}

Result<std::vector<std::string>> list(int state_fd, std::string_view prefix) {
  int dfd = ::dup(state_fd);
  if (dfd < 0) return fail_errno("dup");
  DIR* dir = ::fdopendir(dfd);
  if (!dir) {
    ::close(dfd);
    return fail_errno("reading the cgroup state directory");
  }
  ::rewinddir(dir);
  std::vector<std::string> out;
  while (dirent* e = ::readdir(dir)) {
    std::string n = e->d_name;
    if (str::starts_with(n, prefix)) out.push_back(n);
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

Result<void> append(ClampJournal::Log& l, const std::string& rec) {
  if (!l.fd) {
    int fd = ::openat(l.state_fd, std::string(ClampJournal::kFileName).c_str(),
                      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return fail_errno("opening the clamp journal");
    l.fd = UniqueFd(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) return fail_errno("fstat of the clamp journal");
    l.size = static_cast<uint64_t>(st.st_size);
    if (l.size == 0) {
      if (::write(fd, kHeader.data(), kHeader.size()) != static_cast<ssize_t>(kHeader.size()))
        return fail_errno("writing the clamp journal header");
      l.size = kHeader.size();
    }
  }
  ssize_t n;
  do {
    n = ::write(l.fd.get(), rec.data(), rec.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(rec.size())) {
    return n < 0 ? fail_errno("appending to the clamp journal")
                 : fail(EIO, "short append to the clamp journal ({} of {} bytes)", n, rec.size());
  }
  l.size += rec.size();
  return {};
}

// Replaces the file with a header and the clamps in force.
Result<void> rewrite(ClampJournal::Log& l) {
  std::string body(kHeader);
  for (const auto& [rel, high] : l.live) body += on_record(rel, high);
  l.fd.reset();
  PODSHIM_TRY(fs::write_file_atomic_at(l.state_fd, ClampJournal::kFileName, body, 0600, /*durable=*/false));
  l.size = body.size();
  return {};
}

}  // namespace

ClampJournal::ClampJournal(int state_fd) : log_(std::make_shared<Log>()) { log_->state_fd = state_fd; }

Result<void> ClampJournal::record(std::string_view relpath, std::string_view prev_high) const {
  if (!log_ || log_->state_fd < 0) return fail(EINVAL, "journaling memory.high clamp: no state directory");
  if (!fs::check_relative(relpath) || !parse_memory_max(prev_high))
    return fail(EINVAL, "journaling memory.high clamp: invalid entry '{}' '{}'", relpath, prev_high);
  std::lock_guard lk(log_->mu);
  auto r = append(*log_, on_record(relpath, prev_high));
  if (!r) return wrap(r, "journaling memory.high clamp");
  log_->live[std::string(relpath)] = std::string(prev_high);
  return {};
}

void ClampJournal::drop(std::string_view relpath) const {
  if (!log_) return;
  std::lock_guard lk(log_->mu);
  auto it = log_->live.find(relpath);
  if (it == log_->live.end()) return;
  // A failed append leaves the C record in force: recover() then restores a
  // memory.high that already is restored, which is harmless.
  (void)append(*log_, off_record(relpath));
  log_->live.erase(it);
  if (log_->live.empty() && log_->size > kTruncateBytes && log_->fd) {
    if (::ftruncate(log_->fd.get(), static_cast<off_t>(kHeader.size())) == 0) log_->size = kHeader.size();
  } else if (log_->size > kRewriteBytes) {
    // A failed rewrite leaves the longer file, which still holds every clamp
    // in force; the next drop past the size tries again.
    (void)rewrite(*log_);
  }
}

Result<std::map<std::string, std::string>> ClampJournal::read(int state_fd) {
  std::map<std::string, std::string, std::less<>> live;
  auto body = fs::read_file_at(state_fd, kFileName, 64 << 20);
  if (!body) {
    if (body.error().code == ENOENT) return std::map<std::string, std::string>{};
    return Unexpected(body.error());
  }
  auto r = replay(*body, &live);
  if (!r) return wrap(r, fmt::format("clamp journal '{}'", kFileName));
  return std::map<std::string, std::string>(live.begin(), live.end());
}

Result<void> ClampJournal::recover(int root_fd) const {
  if (!log_ || log_->state_fd < 0) return {};
  std::string errors;
  auto restore = [&](const std::string& rel, const std::string& high) -> bool {
    auto dir = CgroupDir::open(root_fd, rel);
    if (!dir) {
      if (dir.error().code == ENOENT) return true;  // the cgroup went away, and its clamp with it
      errors += "; " + dir.error().message;
      return false;
    }
    if (auto w = dir->write("memory.high", high); !w) {
      errors += "; " + w.error().message;
      return false;
    }
    return true;
  };
  std::map<std::string, std::string, std::less<>> remaining;
  // 1. The log.
  auto live = read(log_->state_fd);
  if (!live) {
    // Unreadable: keep it for a person to look at, and start a new one.
    errors += "; " + live.error().message;
    const std::string aside = fmt::format("{}.corrupt", kFileName);
    ::renameat(log_->state_fd, std::string(kFileName).c_str(), log_->state_fd, aside.c_str());
  } else {
    for (const auto& [rel, high] : *live)
      if (!restore(rel, high)) remaining[rel] = high;
  }
  // 2. The file-per-clamp journal of earlier podshim versions.
  auto clamps = list(log_->state_fd, "clamp-");
  if (!clamps) return Unexpected(clamps.error());
  for (const auto& name : *clamps) {
    auto body = fs::read_file_at(log_->state_fd, name);
    auto lines = body ? str::split(*body, '\n') : std::vector<std::string_view>{};
    if (lines.size() < 3 || lines[0] != kLegacyMagic) {
      errors += fmt::format("; malformed clamp journal '{}'", name);
      ::unlinkat(log_->state_fd, name.c_str(), 0);
      continue;
    }
    std::string rel(lines[1]), high(lines[2]);
    if (!fs::check_relative(rel) || !parse_memory_max(high)) {
      errors += fmt::format("; invalid clamp journal '{}'", name);
      ::unlinkat(log_->state_fd, name.c_str(), 0);
      continue;
    }
    if (!restore(rel, high)) remaining[rel] = high;
    ::unlinkat(log_->state_fd, name.c_str(), 0);
  }
  // 3. Plan journals written by podshim versions before the runtime became
  // the source of truth: nothing to replay (each step of the kubelet's order
  // is safe on its own), so drop them.
  if (auto plans = list(log_->state_fd, "plan-")) {
    for (const auto& name : *plans) ::unlinkat(log_->state_fd, name.c_str(), 0);
  }
  {
    std::lock_guard lk(log_->mu);
    log_->live = std::move(remaining);
    if (!log_->live.empty()) {
      if (auto r = rewrite(*log_); !r) errors += "; " + r.error().message;
    } else {
      // Nothing in force: no file (NRI mode keeps nothing on disk until a
      // shrink clamps).
      log_->fd.reset();
      log_->size = 0;
      if (::unlinkat(log_->state_fd, std::string(kFileName).c_str(), 0) != 0 && errno != ENOENT)
        errors += fmt::format("; removing {}: {}", kFileName, std::strerror(errno));
    }
  }
  if (!errors.empty()) return fail(EIO, "recovering cgroup state{}", errors);
  return {};
}

}  // namespace podshim::cgroup
