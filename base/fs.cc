#include "base/fs.h"

#include "base/str.h"
#include "base/syscall_deadline.h"

#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

namespace podshim::fs {
namespace {

std::atomic<bool> g_force_walk{false};
// Cached after the first ENOSYS so old kernels pay for the probe once.
std::atomic<bool> g_openat2_missing{false};

long sys_openat2(int dirfd, const char* path, open_how* how) {
#ifdef SYS_openat2
  return syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
#else
  errno = ENOSYS;
  return -1;
#endif
}

std::vector<std::string_view> split_components(std::string_view p) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i <= p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    out.push_back(p.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

Result<UniqueFd> walk_nofollow(int dirfd, std::string_view relpath, int flags, mode_t mode) {
  auto parts = split_components(relpath);
  UniqueFd cur;
  int at = dirfd;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    std::string name(parts[i]);
    int fd = ::openat(at, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail_errno("opening directory component '{}' of '{}'", name, relpath);
    cur.reset(fd);
    at = cur.get();
  }
  std::string last(parts.back());
  int fd = ::openat(at, last.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return fail_errno("opening '{}'", relpath);
  return UniqueFd(fd);
}

}  // namespace

void set_force_walk_for_testing(bool force) { g_force_walk.store(force); }

Result<UniqueFd> open_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fail_errno("opening directory '{}'", path);
  return UniqueFd(fd);
}

Result<void> check_relative(std::string_view relpath) {
  if (relpath.empty()) return fail(EINVAL, "empty path");
  if (relpath.find('\0') != std::string_view::npos) return fail(EINVAL, "path contains NUL");
  if (relpath.front() == '/') return fail(EINVAL, "path '{}' is absolute, expected relative", relpath);
  std::string_view bad;
  const bool ok = str::each_component(relpath, [&](std::string_view c) {
    bad = c;
    return !(c.empty() || c == "." || c == "..");
  });
  if (ok) return {};
  if (bad.empty()) return fail(EINVAL, "path '{}' has an empty component", relpath);
  return fail(EINVAL, "path '{}' contains a '{}' component", relpath, bad);
}

namespace {

// openat2 beneath dirfd: the fd, or -errno; -ENOSYS (and the other two
// reasons to fall back, see below) when the walk must be used instead.
long openat2_beneath(int dirfd, std::string_view relpath, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  // NUL-terminated on the stack: cgroup paths are ~130 bytes, and this runs
  // on every NRI UpdateContainer.
  char small[512];
  std::string big;
  const char* p;
  if (relpath.size() < sizeof small) {
    std::memcpy(small, relpath.data(), relpath.size());
    small[relpath.size()] = '\0';
    p = small;
  } else {
    big.assign(relpath);
    p = big.c_str();
  }
  long fd = sys_openat2(dirfd, p, &how);
  return fd >= 0 ? fd : -errno;
}

// ENOSYS: kernel < 5.6; EPERM/E2BIG: a seccomp filter or an old container
// runtime filtering the syscall. Fall back to the walk in all three.
bool fall_back(long err) { return err == -ENOSYS || err == -EPERM || err == -E2BIG; }

}  // namespace

Result<UniqueFd> open_beneath(int dirfd, std::string_view relpath, int flags, mode_t mode) {
  PODSHIM_TRY(check_relative(relpath));
  if (!g_force_walk.load() && !g_openat2_missing.load()) {
    long fd = openat2_beneath(dirfd, relpath, flags, mode);
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    if (!fall_back(fd)) {
      errno = static_cast<int>(-fd);
      return fail_errno("opening '{}'", relpath);
    }
    if (fd == -ENOSYS) g_openat2_missing.store(true);
  }
  return walk_nofollow(dirfd, relpath, flags, mode);
}

int open_beneath_errno(int dirfd, std::string_view relpath, int flags) {
  if (!check_relative(relpath)) return -EINVAL;
  if (!g_force_walk.load() && !g_openat2_missing.load()) {
    long fd = openat2_beneath(dirfd, relpath, flags, 0);
    if (fd >= 0 || !fall_back(fd)) return static_cast<int>(fd);
    if (fd == -ENOSYS) g_openat2_missing.store(true);
  }
  auto fd = walk_nofollow(dirfd, relpath, flags, 0);
  if (!fd) return -(fd.error().code ? fd.error().code : EIO);
  return fd->release();
}

Result<std::string> read_fd(int fd, size_t max) {
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail_errno("reading");
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max)
      return fail(EFBIG, "file is larger than the {} bytes allowed", max);
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Result<std::string> read_file_at(int dirfd, std::string_view relpath, size_t max) {
  auto fd = open_beneath(dirfd, relpath, O_RDONLY);
  if (!fd) return Unexpected(fd.error());
  auto data = read_fd(fd->get(), max);
  if (!data) return wrap(data, fmt::format("'{}'", relpath));
  return data;
}

Result<std::string> read_attr_at(int dirfd, std::string_view relpath, size_t max) {
  auto fd = open_beneath(dirfd, relpath, O_RDONLY);
  if (!fd) return Unexpected(fd.error());
  return read_attr_fd(fd->get(), relpath, max);
}

Result<std::string> read_attr_fd(int fd, std::string_view name, size_t max) {
  char buf[4096];
  ssize_t n;
  do n = ::pread(fd, buf, sizeof buf, 0); while (n < 0 && errno == EINTR);
  if (n < 0) return fail_errno("reading '{}'", name);
  if (static_cast<size_t>(n) > max) return fail(EFBIG, "'{}': file is larger than the {} bytes allowed", name, max);
  std::string out(buf, static_cast<size_t>(n));
  if (static_cast<size_t>(n) < sizeof buf) return out;
  if (::lseek(fd, n, SEEK_SET) < 0) return fail_errno("reading '{}'", name);
  auto rest = read_fd(fd, max - out.size());
  if (!rest) return wrap(rest, fmt::format("'{}'", name));
  out += *rest;
  return out;
}

Result<void> write_attr_at(int dirfd, std::string_view relpath, std::string_view data) {
  auto fd = open_beneath(dirfd, relpath, O_WRONLY | O_TRUNC);
  if (!fd) return Unexpected(fd.error());
  return write_attr_fd(fd->get(), relpath, data, /*at_start=*/false);
}

Result<void> write_attr_fd(int fd, std::string_view name, std::string_view data, bool at_start) {
  ssize_t n;
  do {
    n = at_start ? ::pwrite(fd, data.data(), data.size(), 0) : ::write(fd, data.data(), data.size());
  } while (n < 0 && errno == EINTR && !syscall_deadline_fired());
  if (n < 0 && errno == EINTR) return fail(EINTR, "writing '{}' to '{}' did not finish by its deadline", data, name);
  if (n < 0) return fail_errno("writing '{}' to '{}'", data, name);
  if (static_cast<size_t>(n) != data.size())
    return fail(EIO, "short write of '{}' to '{}' ({} of {} bytes)", data, name, n, data.size());
  return {};
}

Result<void> write_file_atomic_at(int dirfd, std::string_view relpath, std::string_view data,
                                  mode_t mode, bool durable) {
  PODSHIM_TRY(check_relative(relpath));
  std::string rel(relpath);
  size_t slash = rel.rfind('/');
  UniqueFd parent;
  int pdir = dirfd;
  std::string base = rel;
  if (slash != std::string::npos) {
    auto p = open_beneath(dirfd, rel.substr(0, slash), O_RDONLY | O_DIRECTORY);
    if (!p) return Unexpected(p.error());
    parent = std::move(*p);
    pdir = parent.get();
    base = rel.substr(slash + 1);
  }
  std::string tmp = fmt::format(".{}.tmp.{}", base, ::getpid());
  int fd = ::openat(pdir, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return fail_errno("creating '{}'", tmp);
  UniqueFd f(fd);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(f.get(), data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      auto e = fail_errno("writing '{}'", tmp);
      ::unlinkat(pdir, tmp.c_str(), 0);
      return e;
    }
    off += static_cast<size_t>(n);
  }
  if (::fchmod(f.get(), mode) != 0 || (durable && ::fsync(f.get()) != 0)) {
    auto e = fail_errno("syncing '{}'", tmp);
    ::unlinkat(pdir, tmp.c_str(), 0);
    return e;
  }
  f.reset();
  if (::renameat(pdir, tmp.c_str(), pdir, base.c_str()) != 0) {
    auto e = fail_errno("renaming '{}' to '{}'", tmp, base);
    ::unlinkat(pdir, tmp.c_str(), 0);
    return e;
  }
  if (durable) ::fsync(pdir);
  return {};
}

Result<std::string> read_file(const std::string& path, size_t max) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return fail_errno("opening '{}'", path);
  UniqueFd f(fd);
  auto data = read_fd(f.get(), max);
  if (!data) return wrap(data, fmt::format("'{}'", path));
  return data;
}

Result<void> mkdir_p(const std::string& path, mode_t mode) {
  if (path.empty()) return fail(EINVAL, "empty directory path");
  std::string cur;
  size_t i = 0;
  if (path[0] == '/') {
    cur = "/";
    i = 1;
  }
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) {
      if (cur.size() > 1 || (cur.size() == 1 && cur[0] != '/')) cur += '/';
      cur.append(path, i, j - i);
      if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
        return fail_errno("creating directory '{}'", cur);
    }
    i = j + 1;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail_errno("checking directory '{}'", path);
  if (!S_ISDIR(st.st_mode)) return fail(ENOTDIR, "'{}' exists and is not a directory", path);
  return {};
}

}  // namespace podshim::fs
