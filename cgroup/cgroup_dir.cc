#include "cgroup/cgroup_dir.h"

#include <fcntl.h>

#include <algorithm>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/str.h"

namespace podshim::cgroup {
namespace {

constexpr size_t kMaxAttr = 1 << 16;

Result<void> check_attr(std::string_view attr) {
  if (attr.empty() || attr.front() == '.' || attr.find('/') != std::string_view::npos ||
      attr.find('\0') != std::string_view::npos)
    return fail(EINVAL, "invalid cgroup attribute name '{}'", attr);
  return {};
}

}  // namespace

Result<CgroupDir> CgroupDir::open(int root_fd, std::string_view relpath, bool cgroupfs) {
  auto fd = fs::open_beneath(root_fd, relpath, O_RDONLY | O_DIRECTORY);
  if (!fd) return wrap(fd, fmt::format("opening cgroup '{}'", relpath));
  return CgroupDir(std::move(*fd), std::string(relpath), cgroupfs);
}

CgroupDir::~CgroupDir() { close_all(); }

CgroupDir& CgroupDir::operator=(CgroupDir&& o) noexcept {
  if (this != &o) {
    close_all();
    fd_ = std::move(o.fd_);
    relpath_ = std::move(o.relpath_);
    cgroupfs_ = o.cgroupfs_;
    kept_ = std::move(o.kept_);
  }
  return *this;
}

void CgroupDir::close_all() {
  // A resize opens the directory and its attributes one after another, so
  // their numbers are usually contiguous: then one close_range (Linux 5.9)
  // closes them all instead of a close(2) each. Every number in [lo, hi]
  // is then one of ours (n distinct open fds spanning n numbers), so no
  // other fd of the process can be in the range. On any failure the
  // UniqueFds still own their fds and close them one by one.
  if (!fd_ || kept_.size() < 2) return;
  int lo = fd_.get(), hi = fd_.get();
  for (const Kept& k : kept_) {
    if (!k.fd) return;
    lo = std::min(lo, k.fd.get());
    hi = std::max(hi, k.fd.get());
  }
  if (static_cast<size_t>(hi - lo) != kept_.size()) return;
  if (::close_range(static_cast<unsigned>(lo), static_cast<unsigned>(hi), 0) != 0) return;
  // close_range() closed them all: only forget the numbers.
  (void)fd_.release();
  for (Kept& k : kept_) (void)k.fd.release();
}

bool CgroupDir::is_cgroupfs(int fd) {
  struct statfs st {};
  return fstatfs(fd, &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC;
}

Result<std::string> CgroupDir::read(std::string_view attr, Keep keep) const {
  PODSHIM_TRY(check_attr(attr));
  const bool want_rw = keep == Keep::ReadWrite;
  for (auto k = kept_.begin(); k != kept_.end(); ++k) {
    if (k->attr != attr) continue;
    if (want_rw && !k->writable) {
      kept_.erase(k);  // opened again below, for writing too
      break;
    }
    if (auto r = fs::read_attr_fd(k->fd.get(), attr, kMaxAttr)) {
      k->len = r->size();
      return r;
    }
    kept_.erase(k);  // opened afresh below: its error is the one to report
    break;
  }
  Result<UniqueFd> fd = Unexpected(Error{});
  bool writable = false;
  if (want_rw) {
    fd = fs::open_beneath(fd_.get(), attr, O_RDWR);
    writable = fd.has_value();
    // kernfs refuses a write open of a file without a write handler (EACCES);
    // an LSM or a read-only mount may too. Reading must still work.
    if (!fd && (fd.error().code == EACCES || fd.error().code == EPERM || fd.error().code == EROFS))
      fd = fs::open_beneath(fd_.get(), attr, O_RDONLY);
  } else {
    fd = fs::open_beneath(fd_.get(), attr, O_RDONLY);
  }
  if (!fd) return wrap(Result<std::string>(Unexpected(fd.error())), fmt::format("cgroup '{}'", relpath_));
  auto r = fs::read_attr_fd(fd->get(), attr, kMaxAttr);
  if (!r) return wrap(r, fmt::format("cgroup '{}'", relpath_));
  if (kept_.size() < kMaxKept) kept_.push_back(Kept{std::string(attr), std::move(*fd), writable, r->size()});
  return r;
}

Result<std::string> CgroupDir::read_trimmed(std::string_view attr, Keep keep) const {
  auto r = read(attr, keep);
  if (!r) return r;
  return std::string(str::trim(*r));
}

Result<uint64_t> CgroupDir::read_u64(std::string_view attr) const {
  auto r = read(attr);
  if (!r) return Unexpected(r.error());
  auto v = str::parse_u64(*r);
  if (!v) return wrap(v, fmt::format("cgroup '{}' {}", relpath_, attr));
  return v;
}

void parse_fields(std::string_view text, const std::string_view* keys, uint64_t* out, size_t n) {
  std::fill(out, out + n, uint64_t{0});
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = str::trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    const std::string_view k = line.substr(0, sp);
    for (size_t i = 0; i < n; ++i) {
      if (keys[i] != k) continue;
      // A field that is not a plain counter is left at 0.
      if (auto v = str::parse_u64(line.substr(sp + 1))) out[i] = *v;
      break;
    }
  }
}

Result<void> CgroupDir::read_fields(std::string_view attr, const std::string_view* keys, uint64_t* out,
                                    size_t n) const {
  auto r = read(attr);
  if (!r) return Unexpected(r.error());
  parse_fields(*r, keys, out, n);
  return {};
}

Result<void> CgroupDir::write(std::string_view attr, std::string_view value) const {
  PODSHIM_TRY(check_attr(attr));
  for (Kept& k : kept_) {
    if (k.attr != attr || !k.writable) continue;
    // The attribute's write handler takes the whole buffer whatever the
    // offset (kernfs); offset 0 keeps a plain file's content exact.
    if (auto w = fs::write_attr_fd(k.fd.get(), attr, value, /*at_start=*/true); !w)
      return wrap(w, fmt::format("cgroup '{}'", relpath_));
    // A plain file (not cgroup2) keeps a longer old value's tail unless cut;
    // a write at least as long as what the fd last saw replaced all of it.
    if (!cgroupfs_ && value.size() < k.len && ::ftruncate(k.fd.get(), static_cast<off_t>(value.size())) != 0)
      return fail_errno("cgroup '{}': truncating '{}' after writing '{}'", relpath_, attr, value);
    k.len = value.size();
    return {};
  }
  auto r = fs::write_attr_at(fd_.get(), attr, value);
  if (!r) return wrap(r, fmt::format("cgroup '{}'", relpath_));
  return r;
}

bool CgroupDir::has(std::string_view attr) const {
  if (!check_attr(attr)) return false;
  std::string a(attr);
  return ::faccessat(fd_.get(), a.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

}  // namespace podshim::cgroup
