// One cgroup directory, owned as an fd: every attribute read and write is an
// openat relative to it (as crun does), so a path is validated once, when the
// directory is opened beneath the cgroup root with fs::open_beneath (openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, O_NOFOLLOW walk on older kernels).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace podshim::cgroup {

// The values of `keys` in the text of a "key value" file (memory.stat,
// memory.events) into `out`, in the same order: 0 for a key the text lacks
// or whose value is not a plain counter. The one parser of these files.
void parse_fields(std::string_view text, const std::string_view* keys, uint64_t* out, size_t n);

class CgroupDir {
 public:
  // Opens `relpath` (already validated by resolve_cgroup_path) beneath root_fd.
  // `cgroupfs`: root_fd is on cgroup2 (is_cgroupfs), where an attribute write
  // replaces the value whatever its length; elsewhere (the fake trees of tests
  // and benchmarks, plain files) a write through a kept fd is followed by an
  // ftruncate to its length, as an O_TRUNC open did.
  static Result<CgroupDir> open(int root_fd, std::string_view relpath, bool cgroupfs = false);
  // Whether `fd` is on a cgroup2 file system.
  static bool is_cgroupfs(int fd);

  // How read() opens an attribute it keeps: ReadWrite for one that a write()
  // on this directory may follow (the engine's planned attributes), so the
  // write goes through the same fd with one pwrite instead of an openat2 +
  // write + close. A file that refuses a write open is kept read-only.
  enum class Keep { ReadOnly, ReadWrite };

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
  Result<std::string> read(std::string_view attr, Keep keep = Keep::ReadOnly) const;
  // read() with surrounding whitespace removed.
  Result<std::string> read_trimmed(std::string_view attr, Keep keep = Keep::ReadOnly) const;
  Result<uint64_t> read_u64(std::string_view attr) const;
  // The values of `keys` in a "key value" file, into `out` (same order; 0 for
  // a key the file lacks), without building a map: a resize reads
  // memory.events twice and only wants four of its counters.
  template <size_t N>
  Result<void> read_fields(std::string_view attr, const std::array<std::string_view, N>& keys,
                           std::array<uint64_t, N>& out) const {
    return read_fields(attr, keys.data(), out.data(), N);
  }
  // One write(2), as the kernel's attribute contract expects: a pwrite at
  // offset 0 on a kept read-write fd, else an O_TRUNC open, write, close.
  Result<void> write(std::string_view attr, std::string_view value) const;
  bool has(std::string_view attr) const;

  // Closes the directory and its kept attribute fds: one close_range when
  // their numbers are contiguous (opened one after another, as a resize
  // opens them), a close each otherwise.
  ~CgroupDir();
  CgroupDir(CgroupDir&&) noexcept = default;
  CgroupDir& operator=(CgroupDir&& o) noexcept;

  const std::string& relpath() const { return relpath_; }
  int fd() const { return fd_.get(); }

 private:
  static constexpr size_t kMaxKept = 8;  // the attributes one resize reads

  Result<void> read_fields(std::string_view attr, const std::string_view* keys, uint64_t* out, size_t n) const;
  void close_all();

  CgroupDir(UniqueFd fd, std::string relpath, bool cgroupfs)
      : fd_(std::move(fd)), relpath_(std::move(relpath)), cgroupfs_(cgroupfs) {}
  UniqueFd fd_;
  std::string relpath_;
  bool cgroupfs_ = false;
  struct Kept {
    std::string attr;
    UniqueFd fd;
    bool writable = false;
    // The file's length as last read or written through `fd`: a write at
    // least as long replaces all of it, so a plain file needs no ftruncate.
    size_t len = 0;
  };
  mutable std::vector<Kept> kept_;
};

}  // namespace podshim::cgroup
