#include "selinux/relabel.h"

#include <dirent.h>
#include <fcntl.h>
#include <selinux/selinux.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "base/str.h"
#include "base/unique_fd.h"

namespace podshim::selinux {
namespace {

struct DirCloser {
  void operator()(DIR* d) const { closedir(d); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

struct FreeCon {
  void operator()(char* c) const { freecon(c); }
};

std::string join(std::string_view base, std::string_view name) {
  if (base.empty()) return std::string(name);
  return fmt::format("{}/{}", base, name);
}

// The label on an O_PATH fd; nullopt when the inode has none.
Result<std::optional<std::string>> fd_label(int fd) {
  char* con = nullptr;
  if (fgetfilecon_raw(fd, &con) < 0) {
    if (errno == ENODATA) return std::optional<std::string>{};
    return fail_errno("reading security.selinux");
  }
  std::unique_ptr<char, FreeCon> owned(con);
  return std::optional<std::string>(con);
}

class Walker {
 public:
  Walker(const Label& label, const RelabelOptions& opts, std::string root, dev_t dev)
      : label_(label.str()), opts_(opts), root_(std::move(root)), dev_(dev) {}

  // Labels the O_PATH fd `fd` (already fstat'ed as `st`), and descends into
  // it when it is a directory. `rel` is its path relative to the source.
  Result<void> visit(int fd, const struct stat& st, const std::string& rel, uint32_t depth) {
    ++stats_.visited;
    if (S_ISLNK(st.st_mode)) ++stats_.symlinks;
    PODSHIM_TRY(label_fd(fd, rel));
    if (!S_ISDIR(st.st_mode) || !opts_.recursive) return {};
    if (depth >= opts_.max_depth)
      return fail(ELOOP, "'{}' is nested deeper than {} directories", display(rel), opts_.max_depth);
    // Reopen the very inode that was labelled, readable, through its O_PATH
    // fd: no path is resolved again, so no swap can redirect the walk.
    int dfd = ::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return fail_errno("opening directory '{}'", display(rel));
    DirPtr dir(::fdopendir(dfd));
    if (!dir) {
      ::close(dfd);
      return fail_errno("reading directory '{}'", display(rel));
    }
    for (;;) {
      errno = 0;
      struct dirent* e = ::readdir(dir.get());
      if (!e) {
        if (errno) return fail_errno("reading directory '{}'", display(rel));
        break;
      }
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      std::string child_rel = join(rel, name);
      int cfd = ::openat(::dirfd(dir.get()), e->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (cfd < 0) {
        if (errno == ENOENT) continue;  // removed while we walked: nothing to label
        return fail_errno("opening '{}'", display(child_rel));
      }
      UniqueFd child(cfd);
      struct stat cst;
      if (::fstat(child.get(), &cst) < 0) return fail_errno("stat '{}'", display(child_rel));
      if (cst.st_dev != dev_) {
        // Another file system mounted here: not ours to relabel.
        ++stats_.mount_points_skipped;
        continue;
      }
      PODSHIM_TRY(visit(child.get(), cst, child_rel, depth + 1));
    }
    return {};
  }

  const RelabelStats& stats() const { return stats_; }

 private:
  std::string display(const std::string& rel) const { return rel.empty() ? root_ : join(root_, rel); }

  Result<void> label_fd(int fd, const std::string& rel) {
    auto cur = fd_label(fd);
    if (!cur) return wrap(cur, display(rel));
    if (*cur && **cur == label_) {
      ++stats_.unchanged;
      return {};
    }
    if (opts_.dry_run) {
      ++stats_.relabelled;
      return {};
    }
    // fsetfilecon_raw on an O_PATH fd: fsetxattr fails with EBADF, and
    // libselinux (≥ 3.4, fsetfilecon.c) retries with setxattr on
    // /proc/self/fd/N, whose magic link resolves to this inode, even a
    // symlink, without following it.
    if (fsetfilecon_raw(fd, label_.c_str()) < 0) {
      if (errno == ENOTSUP)
        return fail_errno("labelling '{}' with '{}' (the file system has no SELinux label support)",
                          display(rel), label_);
      return fail_errno("labelling '{}' with '{}'", display(rel), label_);
    }
    ++stats_.relabelled;
    return {};
  }

  std::string label_;
  RelabelOptions opts_;
  std::string root_;
  dev_t dev_;
  RelabelStats stats_;
};

Result<std::string> fd_path(int fd) {
  std::string link = fmt::format("/proc/self/fd/{}", fd);
  char buf[PATH_MAX + 1];
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n < 0) return fail_errno("resolving the path of fd {} through /proc (is /proc mounted?)", fd);
  if (static_cast<size_t>(n) >= sizeof buf) return fail(ENAMETOOLONG, "resolved path is too long");
  std::string p(buf, static_cast<size_t>(n));
  if (p.empty() || p[0] != '/' || str::ends_with(p, " (deleted)"))
    return fail(ENOENT, "'{}' does not name a file reachable by path", p);
  return p;
}

Result<void> check_absolute(std::string_view path) {
  if (path.empty()) return fail(EINVAL, "empty relabel path");
  if (path.find('\0') != std::string_view::npos) return fail(EINVAL, "relabel path contains NUL");
  if (path[0] != '/') return fail(EINVAL, "relabel path '{}' is not absolute", path);
  return {};
}

Result<UniqueFd> open_source(const std::string& path) {
  PODSHIM_TRY(check_absolute(path));
  // Symlinks in the source path are followed, as runc follows them when it
  // bind-mounts the source; the result is checked below.
  int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return fail_errno("opening '{}'", path);
  return UniqueFd(fd);
}

}  // namespace

Result<void> check_relabel_allowed(std::string_view p) {
  PODSHIM_TRY(check_absolute(p));
  for (std::string_view s : kSystemPaths)
    if (p == s)
      return fail(EPERM, "refusing to relabel system path '{}'", p);
  for (std::string_view t : kSystemTrees)
    if (str::starts_with(p, t) && p.size() > t.size() && p[t.size()] == '/')
      return fail(EPERM, "refusing to relabel '{}': it is under the system tree '{}'", p, t);
  return {};
}

Result<std::string> resolve_path(const std::string& path) {
  auto fd = open_source(path);
  if (!fd) return Unexpected(fd.error());
  auto p = fd_path(fd->get());
  if (!p) return wrap(p, fmt::format("resolving '{}'", path));
  return p;
}

Result<std::optional<std::string>> get_label(const std::string& path) {
  PODSHIM_TRY(check_absolute(path));
  int fd = ::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return fail_errno("opening '{}'", path);
  UniqueFd owned(fd);
  auto l = fd_label(fd);
  if (!l) return wrap(l, path);
  return l;
}

Result<RelabelStats> relabel(const std::string& path, const Label& label,
                             const RelabelOptions& options) {
  auto fd = open_source(path);
  if (!fd) return Unexpected(fd.error());
  auto resolved = fd_path(fd->get());
  if (!resolved) return wrap(resolved, fmt::format("resolving '{}'", path));
  auto allowed = check_relabel_allowed(*resolved);
  if (!allowed) {
    if (*resolved != path) return wrap(allowed, fmt::format("'{}' resolves to '{}'", path, *resolved));
    return Unexpected(allowed.error());
  }
  struct stat st;
  if (::fstat(fd->get(), &st) < 0) return fail_errno("stat '{}'", *resolved);
  Walker w(label, options, *resolved, st.st_dev);
  auto r = w.visit(fd->get(), st, "", 0);
  if (!r) return Unexpected(std::move(r).error());
  return w.stats();
}

}  // namespace podshim::selinux
