#include "cgroup/clamp_journal.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "base/fs.h"
#include "base/str.h"
#include "cgroup/cgroup_dir.h"
#include "cgroup/convert.h"

namespace podshim::cgroup {
namespace {

constexpr std::string_view kClampMagic = "podshim-clamp v1";

// A journal file name for a cgroup path: FNV-1a, enough to keep distinct
// cgroups in distinct files (the path itself is inside the file).
std::string file_name(std::string_view relpath) {
  uint64_t h = 1469598103934665603ull;
  for (char c : relpath) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return fmt::format("clamp-{:016x}", h);
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

}  // namespace

Result<void> ClampJournal::record(std::string_view relpath, std::string_view prev_high) const {
  std::string body = fmt::format("{}\n{}\n{}\n", kClampMagic, relpath, prev_high);
  // Atomic (rename) but not fsynced: the journal must survive a podshimd
  // crash, which it does from the page cache; a node crash takes every
  // cgroup it describes with it, so an fsync would buy nothing but latency.
  auto r = fs::write_file_atomic_at(state_fd_, file_name(relpath), body, 0600, /*durable=*/false);
  if (!r) return wrap(r, "journaling memory.high clamp");
  return {};
}

void ClampJournal::drop(std::string_view relpath) const {
  ::unlinkat(state_fd_, file_name(relpath).c_str(), 0);
}

Result<void> ClampJournal::recover(int root_fd) const {
  std::string errors;
  // 1. memory.high clamps left by a crash mid-shrink.
  auto clamps = list(state_fd_, "clamp-");
  if (!clamps) return Unexpected(clamps.error());
  for (const auto& name : *clamps) {
    auto body = fs::read_file_at(state_fd_, name);
    auto lines = body ? str::split(*body, '\n') : std::vector<std::string_view>{};
    if (lines.size() < 3 || lines[0] != kClampMagic) {
      errors += fmt::format("; malformed clamp journal '{}'", name);
      ::unlinkat(state_fd_, name.c_str(), 0);
      continue;
    }
    std::string rel(lines[1]), high(lines[2]);
    if (!fs::check_relative(rel) || !parse_memory_max(high)) {
      errors += fmt::format("; invalid clamp journal '{}'", name);
      ::unlinkat(state_fd_, name.c_str(), 0);
      continue;
    }
    auto dir = CgroupDir::open(root_fd, rel);
    if (!dir) {
      if (dir.error().code != ENOENT) {
        errors += "; " + dir.error().message;
        continue;
      }
    } else if (auto w = dir->write("memory.high", high); !w) {
      errors += "; " + w.error().message;
      continue;
    }
    ::unlinkat(state_fd_, name.c_str(), 0);
  }
  // 2. Plan journals written by podshim versions before the runtime became
  // the source of truth: nothing to replay (each step of the kubelet's order
  // is safe on its own), so drop them.
  if (auto plans = list(state_fd_, "plan-")) {
    for (const auto& name : *plans) ::unlinkat(state_fd_, name.c_str(), 0);
  }
  if (!errors.empty()) return fail(EIO, "recovering cgroup state{}", errors);
  return {};
}

}  // namespace podshim::cgroup
