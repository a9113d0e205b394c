#include "cgroup/cgroup_dir.h"

#include <fcntl.h>
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

Result<CgroupDir> CgroupDir::open(int root_fd, std::string_view relpath) {
  auto fd = fs::open_beneath(root_fd, relpath, O_RDONLY | O_DIRECTORY);
  if (!fd) return wrap(fd, fmt::format("opening cgroup '{}'", relpath));
  return CgroupDir(std::move(*fd), std::string(relpath));
}

Result<std::string> CgroupDir::read(std::string_view attr) const {
  PODSHIM_TRY(check_attr(attr));
  for (auto k = kept_.begin(); k != kept_.end(); ++k) {
    if (k->attr != attr) continue;
    if (auto r = fs::read_attr_fd(k->fd.get(), attr, kMaxAttr)) return r;
    kept_.erase(k);  // opened afresh below: its error is the one to report
    break;
  }
  auto fd = fs::open_beneath(fd_.get(), attr, O_RDONLY);
  if (!fd) return wrap(Result<std::string>(Unexpected(fd.error())), fmt::format("cgroup '{}'", relpath_));
  auto r = fs::read_attr_fd(fd->get(), attr, kMaxAttr);
  if (!r) return wrap(r, fmt::format("cgroup '{}'", relpath_));
  if (kept_.size() < kMaxKept) kept_.push_back(Kept{std::string(attr), std::move(*fd)});
  return r;
}

Result<std::string> CgroupDir::read_trimmed(std::string_view attr) const {
  auto r = read(attr);
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

Result<std::map<std::string, uint64_t, std::less<>>> CgroupDir::read_keyed(std::string_view attr) const {
  auto r = read(attr);
  if (!r) return Unexpected(r.error());
  std::map<std::string, uint64_t, std::less<>> out;
  for (std::string_view line : str::split(*r, '\n')) {
    line = str::trim(line);
    if (line.empty()) continue;
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    auto v = str::parse_u64(line.substr(sp + 1));
    if (!v) continue;  // tolerate fields that are not plain counters
    out.emplace(std::string(line.substr(0, sp)), *v);
  }
  return out;
}

Result<void> CgroupDir::write(std::string_view attr, std::string_view value) const {
  PODSHIM_TRY(check_attr(attr));
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
