// The read-back: what the kernel holds for every container (its `actual`),
// read at Synchronize, after every runtime event and periodically, and drift —
// a value the kernel holds that differs from the one podshim last gave it (a
// hand edit of memory.max, another agent's write) — reported as a Drift on the
// container (its `drift` list and the PodshimDrift condition), the
// podshim_drift metric and one log line per drift; with repair_drift those
// values are written again through the cgroup engine.
//
// Drift is judged against Container::kernel_target(), not `allocated`: after a
// resize that failed or was refused (PodResizeInProgress/Error) the kernel
// rightly keeps the values before it, and that is the resize's error, not
// drift. Drift is never a resize state either: it sets no PodResize*
// condition.
//
// Cost: the periodic pass runs on the daemon's loop in slices of at most
// `slice_budget` each, yielding to the loop between slices, so a node with
// thousands of containers never holds the loop for long. Each container costs
// one pread per attribute file (cpu.weight, cpu.max, memory.max,
// memory.current, memory.events) on fds kept open for the first `fd_cache`
// containers, or one openat (relative to the container's kept directory fd)
// + read + close per file for the rest; memory.stat is never read here (the
// kernel builds it from every counter of the cgroup, the costliest of these
// files). Kept fds are bounded by half the soft RLIMIT_NOFILE and closed when
// the container leaves the store or its cgroup goes away.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "cgroup/engine.h"
#include "shim/core/config.h"
#include "shim/core/metrics.h"
#include "shim/core/state.h"

namespace podshim::core {

// Drift resource names (the `resource` label of podshim_drift).
inline constexpr std::string_view kDriftCpuRequest = "cpu_request";
inline constexpr std::string_view kDriftCpuLimit = "cpu_limit";
inline constexpr std::string_view kDriftMemoryLimit = "memory_limit";

struct ReadBackOptions {
  std::string cgroup_root = "/sys/fs/cgroup";
  cgroup::DriverKind driver = cgroup::DriverKind::Auto;
  // The container formula: `formulas` when set (weight_formula: auto, and the
  // samples touch() is given feed it), else `formula`.
  cgroup::WeightFormula formula = cgroup::WeightFormula::Quadratic;
  std::shared_ptr<cgroup::WeightFormulaTracker> formulas;
  // Period of the full pass; zero: only at sync and runtime events.
  std::chrono::milliseconds interval{5000};
  // Loop time one slice may take before it yields (checked after each
  // container, so a slice overruns by at most one container's read).
  std::chrono::microseconds slice_budget{2000};
  // Containers whose attribute fds stay open between passes (5 each); the
  // rest open and close their files on every read, relative to a kept
  // directory fd. A kept attribute fd costs the kernel its seq_file buffer
  // (about 5 kB each on 6.1), a directory fd almost nothing.
  size_t fd_cache = 256;
  // Keep each container's directory fd (benchmarks turn it off to compare).
  bool keep_dirs = true;
  // Where each successful read's memory.current goes, for the engine's
  // memory shrinks (EngineOptions::usage_history); null: nowhere.
  std::shared_ptr<cgroup::UsageHistory> usage_history;
  // Rewrite the allocated values through the engine when drift is found.
  bool repair_drift = false;
  // An allocation younger than this is not judged: in NRI mode the runtime
  // writes the values after podshim accepted them, within its 2 s request
  // timeout (containerd/nri pkg/adaptation, DefaultPluginRequestTimeout).
  std::chrono::milliseconds settle{2000};
  // Runs `fn` on the loop after `delay` (the daemon: sd-event timers). Unset:
  // nothing runs by itself; tests and benchmarks call run_slice()/tick().
  std::function<void(std::chrono::milliseconds delay, std::function<void()> fn)> schedule;
  // Test seams: the monotonic clock, and where the module's log lines go.
  std::function<std::chrono::steady_clock::time_point()> now;
  std::function<void(log::Level, const std::string& container_id, const std::string& message)> log;
};

// podshimd's read-back options from its configuration (cgroup.root,
// cgroup.driver, cgroup.weight_formula and readback.*). The loop, the
// formula tracker and the usage history are the caller's to add.
ReadBackOptions readback_options(const Config& cfg);

// Runs on one thread, the daemon's loop: its store subscription is called on
// the thread that changes the store, and it changes the store itself.
class ReadBack {
 public:
  // Opens the cgroup root and subscribes to `store`. Borrows store, engine
  // (may be null: no repair) and metrics (may be null).
  static Result<std::unique_ptr<ReadBack>> create(Store& store, cgroup::Engine* engine, Metrics* metrics,
                                                  ReadBackOptions opts);
  ~ReadBack();
  ReadBack(const ReadBack&) = delete;
  ReadBack& operator=(const ReadBack&) = delete;

  // Arms the periodic pass (no-op without a schedule or with interval 0).
  void start();
  // After a runtime event (PostStartContainer, PostUpdateContainer): reads
  // the container now. `shares` (0: unknown) is what the runtime was asked
  // for, a sample for weight_formula: auto.
  void touch(const std::string& id, uint64_t shares = 0);
  // The same, at the head of the next slice instead of now: for a runtime
  // event whose answer should not wait for the cgroup reads (the runtime
  // holds its CRI call until a plugin answers PostUpdateContainer).
  // Without a schedule (or for a container not known yet) it is touch().
  void touch_soon(const std::string& id, uint64_t shares = 0);
  // After Synchronize: queues every container, read in the next slices
  // (and ends a hold()).
  void touch_all();
  // A Synchronize is arriving: the containers its pages upsert are queued
  // but not read until touch_all() (or kMaxHold, if the sync never ends),
  // so the loop reads the runtime's next page instead of cgroup files
  // between pages.
  void hold();
  static constexpr std::chrono::milliseconds kMaxHold{3000};

  // Reads queued containers until the slice budget is spent; returns how
  // many it read. The schedule calls it; tests and benchmarks may too.
  size_t run_slice();
  // Queues every container as the periodic timer does (tests, benchmarks).
  void tick();
  // Reads every container now, ignoring the budget (benchmarks).
  void read_all();

  struct Stats {
    uint64_t reads = 0;        // container reads
    uint64_t cached_reads = 0;  // of which through kept fds
    uint64_t gone = 0;         // cgroup missing (ENOENT): not an error
    uint64_t errors = 0;       // anything else
    uint64_t slices = 0, passes = 0;
    std::chrono::microseconds longest_slice{0}, last_pass{0};
  };
  Stats stats() const;
  size_t cached_containers() const;  // with their attribute fds kept
  size_t cached_dirs() const;        // with their directory fd kept
  size_t pending() const;

  struct Impl;

 private:
  explicit ReadBack(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace podshim::core
