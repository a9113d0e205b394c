// One cgroup directory, owned as an fd: every attribute read and write is an
// openat relative to it (as crun does), so a path is validated once, when the
// directory is opened beneath the cgroup root with fs::open_beneath (openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, O_NOFOLLOW walk on older kernels).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace podshim::cgroup {

class CgroupDir {
 public:
  // Opens `relpath` (already validated by resolve_cgroup_path) beneath root_fd.
  static Result<CgroupDir> open(int root_fd, std::string_view relpath);

  // Attribute names are single kernel file names ("cpu.max"); anything with a
  // '/' or a leading '.' is refused.
  //
  // The fds of the first kMaxKept attributes read stay open and are read
  // again with pread at offset 0 (kernfs regenerates a seq_file read from
  // offset 0): a memory decrease reads memory.stat, memory.current and the
  // limits again and again while it watches the cgroup, and an openat2
  // (a path walk with RESOLVE_BENEATH) plus close for each read was most of
  // its system time. A kept fd that fails is closed and the file opened
  // afresh, so a cgroup that went away reports the open's error.
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
  static constexpr size_t kMaxKept = 8;  // the attributes one resize reads

  CgroupDir(UniqueFd fd, std::string relpath) : fd_(std::move(fd)), relpath_(std::move(relpath)) {}
  UniqueFd fd_;
  std::string relpath_;
  struct Kept {
    std::string attr;
    UniqueFd fd;
  };
  mutable std::vector<Kept> kept_;
};

}  // namespace podshim::cgroup
