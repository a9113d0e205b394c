// The cgroup v2 resize engine: the facade podshimd calls.
//
// resize() reads what the kernel holds, plans the changes in the kubelet's
// order (plan.h), applies them through the cgroupfs or systemd driver, shrinks
// memory without OOM kills (memory.reclaim + a memory.high clamp, refusing
// with the kubelet's "memory limit (N) below current usage (M)" when usage
// cannot fall below the new limit — kubernetes#135670), and rolls back in
// reverse on any failure. Only memory.high clamps are journaled (under
// state_dir/cgroup), so recover() can undo one a crash left behind.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "cgroup/convert.h"
#include "cgroup/path.h"
#include "cgroup/unit_manager.h"
#include "cgroup/usage_history.h"

namespace podshim::cgroup {

// One cgroup to resize: the path exactly as the runtime gave it (cgroupfs
// "/kubepods/..." or systemd "slice:prefix:name" / "x.slice"), an id for logs
// and locks, and the desired resources.
struct ResizeTarget {
  std::string id;
  std::string cgroup_path;
  K8sResources desired;
};

// Who writes the final values. All: the engine writes every attribute
// (hooks-only mode, podshimctl). ReclaimOnly: the runtime writes them (NRI
// mode, one writer per value); the engine only makes room for a memory
// shrink — clamps memory.high to the target and reclaims until usage fits —
// and keeps that clamp (journaled) until release() once the runtime's write
// has landed. Nothing else is written.
enum class WriteMode { All, ReclaimOnly };

struct PodResizeRequest {
  std::optional<ResizeTarget> pod;
  std::vector<ResizeTarget> containers;
  WriteMode mode = WriteMode::All;
};

struct StepReport {
  std::string id;
  std::string file;
  std::string before, after;
};

struct EngineOptions {
  std::string cgroup_root = "/sys/fs/cgroup";
  DriverKind driver = DriverKind::Auto;
  // Formula for container cgroups (what the runtime writes for shares).
  WeightFormula formula = WeightFormula::Quadratic;
  // When set, the container formula comes from here instead (weight_formula:
  // auto learns the runtime's formula while podshimd runs).
  std::shared_ptr<const WeightFormulaTracker> formulas;
  // Formula for pod cgroups: the kubelet converts pod weights itself with the
  // linear formula (cgroup_manager_linux.go getCPUWeight, still in 1.35), so
  // podshim matches it there lest the kubelet and podshim fight over the value.
  WeightFormula pod_formula = WeightFormula::Linear;
  std::string state_dir = "/var/lib/podshim";  // journal for memory.high clamps
  // The whole budget of one memory shrink: reclaim, the settle watch under
  // the memory.high clamp and the settle after the memory.max write. Well
  // under NRI's 2 s request timeout (at most 1.9 s).
  std::chrono::milliseconds shrink_timeout{1000};
  // Room a shrink leaves between what the cgroup cannot give back (anon,
  // shmem) or uses right after reclaim and the new limit. Not 0: the kernel
  // charges in per-CPU batches (MEMCG_CHARGE_BATCH, 64 pages per CPU, in
  // mm/memcontrol.c) and flushes memory.stat lazily, so a cgroup "just under"
  // its limit by our reading can be over it by a few MiB by the time it next
  // faults; a limit with no room at all turns the next allocation into a
  // memcg OOM kill. 8 MiB covers a 32-CPU node's charge stock with room left.
  uint64_t shrink_headroom_bytes = 8u << 20;
  // Growth-aware admission: refuse a shrink when the least-squares trend of
  // the cgroup's unreclaimable usage (anon + shmem, sampled while reclaiming
  // and settling) would cross target - headroom within this window.
  std::chrono::milliseconds shrink_growth_window{5000};
  // Pressure-aware staged shrink: back off (restore memory.high) and refuse
  // when the cgroup's memory PSI "some" stall share over the settle watch
  // (from memory.pressure totals), in percent, exceeds this.
  double shrink_pressure_threshold = 20.0;
  // How often the shrink samples memory.current / memory.stat / PSI.
  std::chrono::milliseconds shrink_tick{20};
  // The memory.current readings the read-back took before a request (null:
  // none, as in podshimctl). With them a memory shrink whose cgroup has
  // shown a flat trend and has ample room under the new limit skips the
  // watch under the memory.high clamp (shrink.cc, history_clears()).
  std::shared_ptr<const UsageHistory> usage_history;
  // How far memory.stat may lag the kernel's charges, bytes (shrink.cc
  // discounts that much of what it lists as reclaimable). Unset: 64 pages
  // per CPU online when the engine is created (memory_stat_lag_bytes()).
  std::optional<uint64_t> memory_stat_lag_bytes;
  std::shared_ptr<UnitManager> unit_manager;  // null → sd-bus system bus when needed
  // How long the sd-bus driver waits for systemd's SetUnitProperties reply
  // (sd-bus's own default is 25 s); then the write fails with ErrorKind::Timeout.
  std::chrono::milliseconds unit_call_timeout = kDefaultUnitCallTimeout;
  // The caller's sd-event loop, the one `schedule` runs on. With both set,
  // the sd-bus unit manager (when unit_manager is null) attaches its
  // connection to it and an asynchronous resize's SetUnitProperties call
  // waits on the loop: the attribute write continues from the reply and the
  // loop keeps serving meanwhile. Null: the call blocks (podshimctl, tests).
  sd_event* event = nullptr;

  // Runs `fn` on the caller's event loop after `delay`. The shrink is a
  // timer-driven state machine on it, so a reclaim that takes a second never
  // blocks the loop. Unset: the engine waits in place (podshimctl, tests).
  std::function<void(std::chrono::milliseconds delay, std::function<void()> fn)> schedule;
  // How long a shrink watches the cgroup under the memory.high clamp before
  // it writes memory.max, and again after the write before it reports (a
  // kill in either window is part of the outcome). Both come out of
  // shrink_timeout: each is at most a quarter of it.
  std::chrono::milliseconds settle{200};

  // Test seams (tests/kernel/crash holds a crash window open with these,
  // through podshimd's debug: config section): pause after a memory.high
  // clamp is written and journaled, and after the first step of a
  // multi-step plan. Zero: no pause. Waits on `schedule` like every other
  // wait of the engine.
  std::chrono::milliseconds test_pause_after_clamp{0}, test_pause_after_step{0};

  // A blocking resize (no `schedule`) gives up with ErrorKind::Timeout
  // after this long; zero: every target's shrink budget plus a few systemd
  // calls each, plus 10 s (Engine::Impl::blocking_deadline). The abandoned
  // op's cgroups stay busy in this engine: blocking callers are one-shot
  // (podshimctl, tests); podshimd resizes on its loop.
  std::chrono::milliseconds blocking_deadline{0};

  // Test seam: the clock the shrink measures by (its deadlines, the growth
  // rate, the pressure window), so that a test loop can run in virtual time
  // and a loaded machine cannot skew what it measures. Null: steady_clock.
  std::function<std::chrono::steady_clock::time_point()> clock;

  // Test seams. before_write runs before every attribute write (including
  // rollback writes); an error fails that write. after_step runs after each
  // planned step has been applied.
  std::function<Result<void>(const std::string& id, const std::string& file,
                             const std::string& value)> before_write;
  std::function<void(const std::vector<StepReport>& step)> after_step;
};

// Read back from the kernel, in Kubernetes units.
struct Actual {
  std::optional<int64_t> cpu_request_milli, cpu_limit_milli, memory_limit_bytes;
  uint64_t memory_current = 0, anon = 0, file = 0, shmem = 0;
  uint64_t oom = 0, oom_kill = 0, events_max = 0, events_high = 0;
  std::string cpu_max_raw, memory_max_raw;  // as the kernel wrote them; empty: no such file
  std::optional<CpuMax> cpu_max;            // cpu.max parsed (the period is the cgroup's own)
  std::optional<uint64_t> cpu_weight;
  // What the rows of registered resources read (K8sResources::extra).
  ExtraValues extra = {};
  // The shares→weight formula cpu_request_milli was converted with.
  WeightFormula formula = WeightFormula::Quadratic;
};

// memory.max of one cgroup, read alone: one open and one read, where
// read_actual() reads six files (memory.stat among them, which the kernel
// builds from every counter of the cgroup). The NRI UpdateContainer path only
// asks whether a new limit lowers the one in force.
struct MemoryMax {
  bool exists = false;                   // false: no such cgroup (not made yet, or removed)
  std::optional<uint64_t> limit_bytes;  // nullopt: "max"
};


// memory.events counters (cgroup v2 memory controller), or their deltas.
struct MemoryEvents {
  uint64_t oom = 0, oom_kill = 0, high = 0, max = 0;
  bool operator==(const MemoryEvents&) const = default;
};

struct ResizeReport {
  std::vector<StepReport> steps;  // every attribute written, in order
  uint64_t bytes_reclaimed = 0;
  // Per target id: memory.events deltas over the operation and the settle
  // period after it. A resize with an oom_kill here is never plainly applied.
  std::map<std::string, MemoryEvents> events;
  // WriteMode::All: what each target's cgroup holds once written (read_limits:
  // the limits, memory.current, memory.events; not memory.stat), by target
  // id, read through the op's own directory fd at its end.
  std::map<std::string, Actual> after;
  // Highest memory PSI avg10 seen while shrinking (percent), and the usage
  // growth rate measured while reclaiming (bytes/s, negative: shrinking).
  double psi_some_avg10 = 0, psi_full_avg10 = 0;
  // The share of the settle watch (percent) during which some / all tasks of
  // the cgroup stalled on memory (memory.pressure totals): what the pressure
  // threshold is compared with. Highest over the cgroups shrunk.
  double psi_some_window = 0, psi_full_window = 0;
  int64_t growth_bytes_per_sec = 0;
  std::chrono::milliseconds duration{0};
  bool killed() const {
    for (const auto& [id, e] : events)
      if (e.oom_kill) return true;
    return false;
  }
};

// The attribute values podshim writes for `r` (what `podshimctl
// cgroup-values` prints). cpu_weight is nullopt when neither request nor limit
// is set; it follows the limit when only the limit is set, as the kubelet does.
struct AttrValues {
  std::optional<std::string> cpu_weight;
  std::string cpu_max, memory_max;
};
AttrValues attr_values(const K8sResources& r, WeightFormula f, bool systemd_rounding = false);

// Why a memory shrink was refused: the payload of an Error of kind
// ErrorKind::ShrinkRefused (errno EBUSY). Bytes; `id` names the cgroup.
enum class ShrinkWhy { Usage, Growth, Pressure, Timeout };
// "usage", "growth", "pressure", "timeout" (metric labels, API fields).
std::string_view shrink_why_name(ShrinkWhy w);
struct ShrinkRefusal {
  std::string id;
  uint64_t target = 0, usage = 0, anon = 0, file = 0, shmem = 0;
  ShrinkWhy why = ShrinkWhy::Usage;
  // Of `file`: dirty or under writeback (memory.stat file_dirty +
  // file_writeback). Reclaim cannot free those pages before they are
  // written back; a Timeout with many of them may pass on a retry.
  uint64_t dirty = 0;
  int64_t growth_bytes_per_sec = 0;  // Growth (and measured for every why)
  double psi_some_avg10 = 0, psi_full_avg10 = 0;  // Pressure
  double psi_some_window = 0, psi_full_window = 0;  // Pressure: the figure compared
  double pressure_threshold = 0;  // Pressure
  std::chrono::milliseconds growth_window{0};  // Growth
  std::chrono::milliseconds elapsed{0};  // Timeout: how long reclaim ran
};
// The refusal as an Error, its message in the kubelet's words
// ("memory limit (N) below current usage (M)", pkg/kubelet/kuberuntime
// kuberuntime_container_linux.go) plus the breakdown.
Error shrink_refused(ShrinkRefusal r);

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(EngineOptions opts);
  ~Engine();

  using Done = std::function<void(Result<ResizeReport>)>;
  // Plans and executes with shrink safety and rollback. Resizes of the same
  // cgroup never interleave: a second one waits its turn in a queue (FIFO
  // per cgroup), without blocking the loop. With opts.schedule set, returns
  // at once and calls `done` from the loop; otherwise `done` runs before it
  // returns. opts.schedule is only ever called from the thread that runs the
  // loop, unless blocking resize() calls on other threads share cgroups
  // with asynchronous ones (a finished blocking resize hands its cgroups on).
  void resize(const PodResizeRequest& req, Done done);
  // The same, waiting in place (podshimctl, tests, the benchmarks): the same
  // state machine, its timers run by a waiter on the calling thread. Do not
  // call it on the loop thread while asynchronous resizes of the same
  // cgroups may be queued (it would wait for them on their own loop).
  Result<ResizeReport> resize(const PodResizeRequest& req);
  // Restores the memory.high clamps a ReclaimOnly resize left on these
  // cgroups (paths as in ResizeTarget), after the runtime's write landed or
  // failed. Unknown paths are ignored.
  Result<void> release(const std::vector<std::string>& cgroup_paths);
  // Kernel values of one cgroup; cpu request via the container formula.
  Result<Actual> read_actual(const std::string& cgroup_path);
  Result<MemoryMax> read_memory_max(const std::string& cgroup_path);
  // read_actual() without memory.stat (anon, file and shmem stay 0): what a
  // resize reports back once applied.
  Result<Actual> read_limits(const std::string& cgroup_path);
  // Repairs state left by a crash: restores journaled memory.high clamps.
  Result<void> recover();

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace podshim::cgroup
