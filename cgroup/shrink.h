// The memory shrink without OOM kills (kubernetes#135670):
// a timer-driven state machine, one per lowered memory.max, that the engine
// (engine.cc) runs for a resize. Internal to cgroup/: the facade is engine.h.
//
// 1. Pre-check: refuse (Usage) when what cannot be reclaimed plus headroom
//    is above the target; nothing is written. From memory.current, less
//    what memory.stat lists as reclaimable (file but shmem, slab), that less
//    how far memory.stat may lag (memory_stat_lag_bytes()); never below
//    memory.stat's anon + shmem.
// 2. Clamp memory.high to the target (journaled first): usage cannot grow
//    past it, writing it below usage makes the kernel reclaim, and
//    memory.high never invokes the OOM killer.
// 3. Reclaim (memory.reclaim, in chunks, one per tick) until usage +
//    headroom fits; refuse (Timeout) when the reclaim budget runs out.
// 4. Watch for `settle` under the clamp: PSI from memory.pressure and the
//    trend of anon + shmem (plus memory.current's rise while memory.stat
//    has not moved: a stale stat must not make growth look flat). Refuse (Pressure) when the stall share passes
//    the threshold; refuse (Growth) when the trend crosses target -
//    headroom within the growth window. Both restore memory.high.
// 5. Write memory.max, restore memory.high, watch `settle` again.
// ReclaimOnly stops after 4 and keeps the clamp until release().
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "cgroup/cgroup_dir.h"
#include "cgroup/clamp_journal.h"
#include "cgroup/engine.h"

namespace podshim::cgroup {

// The memory.high clamps ReclaimOnly resizes hold until release(): per
// cgroup (relpath), the memory.high to restore and the directory to restore
// it in. Thread-safe.
class HeldClamps {
 public:
  struct Entry {
    std::string prev_high;
    std::shared_ptr<CgroupDir> dir;
  };
  std::optional<std::string> prev_high(const std::string& relpath) const {
    std::lock_guard<std::mutex> g(mu_);
    auto it = m_.find(relpath);
    if (it == m_.end()) return std::nullopt;
    return it->second.prev_high;
  }
  std::optional<Entry> get(const std::string& relpath) const {
    std::lock_guard<std::mutex> g(mu_);
    auto it = m_.find(relpath);
    if (it == m_.end()) return std::nullopt;
    return it->second;
  }
  bool has(const std::string& relpath) const { return prev_high(relpath).has_value(); }
  void put(const std::string& relpath, std::string prev_high, std::shared_ptr<CgroupDir> dir) {
    std::lock_guard<std::mutex> g(mu_);
    m_[relpath] = Entry{std::move(prev_high), std::move(dir)};
  }
  void erase(const std::string& relpath) {
    std::lock_guard<std::mutex> g(mu_);
    m_.erase(relpath);
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Entry> m_;
};

// The cgroup being shrunk: its id for messages, its path below the root
// (the journal's and the held clamps' key) and its directory.
struct ShrinkCgroup {
  std::string id;
  std::string relpath;
  const CgroupDir* dir = nullptr;  // borrowed for the shrink's lifetime
};

// What a shrink needs from the engine.
struct ShrinkContext {
  const EngineOptions* opts = nullptr;
  // Runs a callback after a delay (the loop's timer, or the in-place waiter).
  std::function<void(std::chrono::milliseconds, std::function<void()>)> sched;
  // One attribute write to the cgroup (with the engine's seams and context).
  std::function<Result<void>(const std::string& file, const std::string& value)> write;
  // The memory.max write, through the cgroup's driver; the callback runs
  // when it has landed (after systemd's reply with the systemd driver).
  std::function<void(const std::string& value, std::function<void(Result<void>)>)> write_max;
  ClampJournal journal{-1};
  HeldClamps* held = nullptr;
  int root_fd = -1;
  ResizeReport* rep = nullptr;  // null: a rollback, nothing reported
  bool reclaim_only = false;
  std::vector<std::string>* clamped = nullptr;  // ReclaimOnly: clamps this op put on
  std::shared_ptr<void> keepalive;  // keeps the caller's state (and `dir`) alive
};

using ShrinkDone = std::function<void(Result<void>)>;

// How far memory.stat may lag the kernel's charges on this node, bytes:
// MEMCG_CHARGE_BATCH (64) pages per online CPU (mm/memcontrol.c flushes
// memory.stat lazily; see shrink.cc). Read once, by Engine::create, into
// EngineOptions::memory_stat_lag_bytes.
uint64_t memory_stat_lag_bytes();

// Lowers `cg`'s memory.max to `new_max` as above; `done` runs once, from
// `ctx.sched` or before this returns.
void shrink_memory(ShrinkContext ctx, ShrinkCgroup cg, const std::string& new_max, ShrinkDone done);

}  // namespace podshim::cgroup
