// The one journal of the cgroup engine: memory.high clamps a shrink (or a
// ReclaimOnly resize) put on a cgroup, so a restart can undo one a crash
// left behind.
//
// One append-only file, state_dir/cgroup/clamps.log: a header line, then one
// record per clamp put on ("C <len> <relpath> <memory.high to restore>") and
// per clamp taken off ("D <len> <relpath>"), each one write(2) with O_APPEND.
// The clamps in force are the C records without a later D. The file is cut
// back to its header when no clamp is in force and it has grown past 64 KiB
// (ftruncate: no new inode), and rewritten (rename) only past 1 MiB with a
// clamp held all along.
//
// Why not a file per clamp, as podshim had: that cost five system calls per
// clamp (create a temporary file, write, close, rename; unlink at the end)
// and a new inode per shrink, where ext4 scans its bitmaps to avoid reusing
// recently deleted inodes (recently_deleted(), fs/ext4/ialloc.c); an append
// is one write(2). podshim versions before this wrote "clamp-<hash>" files;
// recover() still replays and removes them.
//
// Not fsynced: the journal must survive a podshimd crash, which it does from
// the page cache; a node crash takes every cgroup it describes with it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace podshim::cgroup {

class ClampJournal {
 public:
  static constexpr std::string_view kFileName = "clamps.log";

  // A journal that has nowhere to write: record() fails.
  ClampJournal() = default;
  // `state_fd`: the journal directory, borrowed for the journal's lifetime.
  // Copies share one open file and one view of the clamps in force.
  explicit ClampJournal(int state_fd);

  // Records that `relpath`'s memory.high must go back to `prev_high`.
  Result<void> record(std::string_view relpath, std::string_view prev_high) const;
  // Forgets `relpath`'s clamp (after memory.high was restored).
  void drop(std::string_view relpath) const;
  // Restores every journaled clamp beneath `root_fd` and drops its entry; a
  // cgroup that is gone counts as restored. A clamp that cannot be restored
  // stays journaled (and the error says which). Also drops the plan
  // journals of podshim versions before the runtime became the source of
  // truth.
  Result<void> recover(int root_fd) const;

  // The clamps in force as the file in `state_fd` records them: relpath →
  // memory.high to restore (tests and diagnostics; recover() uses the same
  // reading).
  static Result<std::map<std::string, std::string>> read(int state_fd);

  struct Log;

 private:
  std::shared_ptr<Log> log_;
};

}  // namespace podshim::cgroup
