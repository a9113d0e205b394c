// The one journal of the cgroup engine: memory.high clamps a shrink (or a
// ReclaimOnly resize) put on a cgroup, so a restart can undo one a crash
// left behind. One file per cgroup under state_dir/cgroup ("clamp-<hash>"):
// a magic line, the cgroup's path below the root, the memory.high to restore.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace podshim::cgroup {

class ClampJournal {
 public:
  // `state_fd`: the journal directory, borrowed for the journal's lifetime.
  explicit ClampJournal(int state_fd) : state_fd_(state_fd) {}
  // Records that `relpath`'s memory.high must go back to `prev_high`.
  Result<void> record(std::string_view relpath, std::string_view prev_high) const;
  // Forgets `relpath`'s clamp (after memory.high was restored).
  void drop(std::string_view relpath) const;
  // Restores every journaled clamp beneath `root_fd` and drops its entry; a
  // cgroup that is gone counts as restored. Also drops the plan journals of
  // podshim versions before the runtime became the source of truth.
  Result<void> recover(int root_fd) const;

 private:
  int state_fd_;
};

}  // namespace podshim::cgroup
