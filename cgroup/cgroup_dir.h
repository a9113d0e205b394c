// One cgroup directory, owned as an fd: every attribute read and write is an
// openat relative to it (as crun does), so a path is validated once, when the
// directory is opened beneath the cgroup root with fs::open_beneath (openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, O_NOFOLLOW walk on older kernels).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/unique_fd.h"

namespace podshim::cgroup {

class CgroupDir {
 public:
  // Opens `relpath` (already validated by resolve_cgroup_path) beneath root_fd.
  static Result<CgroupDir> open(int root_fd, std::string_view relpath);

  // Attribute names are single kernel file names ("cpu.max"); anything with a
  // '/' or a leading '.' is refused.
  Result<std::string> read(std::string_view attr) const;
  // read() with surrounding whitespace removed.
  Result<std::string> read_trimmed(std::string_view attr) const;
  Result<uint64_t> read_u64(std::string_view attr) const;
  // "key value" files (memory.stat, memory.events) as a map.
  Result<std::map<std::string, uint64_t, std::less<>>> read_keyed(std::string_view attr) const;
  // One write(2), as the kernel's attribute contract expects.
  Result<void> write(std::string_view attr, std::string_view value) const;
  bool has(std::string_view attr) const;

  const std::string& relpath() const { return relpath_; }
  int fd() const { return fd_.get(); }

 private:
  CgroupDir(UniqueFd fd, std::string relpath) : fd_(std::move(fd)), relpath_(std::move(relpath)) {}
  UniqueFd fd_;
  std::string relpath_;
};

}  // namespace podshim::cgroup
