// Directory-fd-relative file I/O.
//
// Every path podshim touches on behalf of someone else (a cgroup path from the
// runtime, a CDI mount source, a state file) is opened relative to a directory
// fd that podshim chose, never by string concatenation, in the way crun writes
// every cgroup attribute with openat() on one cgroup dirfd. open_beneath()
// refuses anything that would leave that directory: "..", absolute paths and
// symlinks at any component.
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/unique_fd.h"

namespace podshim::fs {

// Default cap on whole-file reads: kernel attribute files and configuration
// files are small; a larger file is an error, not an allocation.
inline constexpr size_t kDefaultMaxRead = 4 << 20;

// Opens a directory by absolute path (O_DIRECTORY|O_CLOEXEC, following
// symlinks in the administrator-chosen root path itself is allowed).
Result<UniqueFd> open_dir(const std::string& path);

// Checks a relative path for use under a directory fd: not empty, not
// absolute, no "." or ".." components, no empty components, no NUL.
Result<void> check_relative(std::string_view relpath);

// Opens `relpath` beneath `dirfd`. Uses openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS) where the kernel has it
// (Linux 5.6+), otherwise walks component by component with O_NOFOLLOW.
// O_CLOEXEC is always added. Symlinks anywhere, including the last
// component, are refused with ELOOP.
Result<UniqueFd> open_beneath(int dirfd, std::string_view relpath, int flags, mode_t mode = 0);

// open_beneath() for hot paths where a missing file is an answer, not an
// error: the fd (the caller closes it), or -errno, with no Error built.
int open_beneath_errno(int dirfd, std::string_view relpath, int flags);

// Forces the O_NOFOLLOW walk even where openat2 exists (tests of the fallback).
void set_force_walk_for_testing(bool force);

// Reads a whole file (or a kernel attribute) beneath dirfd, at most max bytes.
Result<std::string> read_file_at(int dirfd, std::string_view relpath,
                                 size_t max = kDefaultMaxRead);

// read_file_at() for kernel attribute files (cgroupfs, sysfs): a read that
// returns less than was asked is taken as the end, with no second read(2)
// to see 0. The kernel's seq_file fills a read until the buffer is full or
// the file ends (fs/seq_file.c, seq_read_iter), and a regular file (the fake
// trees of tests) returns short only at its end.
Result<std::string> read_attr_at(int dirfd, std::string_view relpath, size_t max = kDefaultMaxRead);
// read_attr_at on an open fd, from offset 0 whatever its position: an fd
// kept open reads the attribute whole again (kernfs regenerates a seq_file
// read from offset 0). `name` is for messages.
Result<std::string> read_attr_fd(int fd, std::string_view name, size_t max = kDefaultMaxRead);

// Reads an already-open fd from its current offset to EOF, at most max bytes.
Result<std::string> read_fd(int fd, size_t max = kDefaultMaxRead);

// Writes `data` with one write(2) to an existing file beneath dirfd (no
// O_CREAT): the contract of cgroup and sysfs attribute files, where one write
// is one operation and a short write is an error. It opens with O_TRUNC, as
// a shell's `echo v > memory.max` does: kernfs ignores the truncation, and a
// tree of regular files standing in for cgroupfs (tests, benchmarks) then
// holds exactly the last value written, not "max" over "201326592" read back
// as "max326592".
Result<void> write_attr_at(int dirfd, std::string_view relpath, std::string_view data);

// One write of `data` to an open attribute file `name` (for messages): at
// offset 0 with `at_start` (pwrite; a kept fd rewritten in place), else at
// the file position. EINTR is retried unless a SyscallDeadline armed on this
// thread has fired (base/syscall_deadline.h); a short write is an error.
Result<void> write_attr_fd(int fd, std::string_view name, std::string_view data, bool at_start);

// Replaces a file atomically and durably: writes a temporary file beside it,
// fsyncs it, renames it over `relpath` and fsyncs the directory. A reader (or
// podshim after a crash) sees the old content or the new, never a torn file.
// With durable=false the fsyncs are skipped (the rename is still atomic);
// a caller writing many files that way makes them durable with one syncfs().
Result<void> write_file_atomic_at(int dirfd, std::string_view relpath, std::string_view data,
                                  mode_t mode = 0600, bool durable = true);

// Convenience for absolute paths the administrator chose (configuration
// files): open with O_NOFOLLOW on the last component.
Result<std::string> read_file(const std::string& path, size_t max = kDefaultMaxRead);

// Creates a directory path with the given mode if it does not exist
// (like mkdir -p); existing directories are left as they are.
Result<void> mkdir_p(const std::string& path, mode_t mode);

}  // namespace podshim::fs
