// Resize admission and actuation, as the kubelet does it (KEP-1287 §Resize
// Status, pkg/kubelet/allocation): each request bumps the container's
// generation, then is judged
//   Infeasible — can never fit (exceeds node allocatable), would change the
//                pod's QoS class, or removes a request/limit;
//   Deferred   — fits in theory but not now (allocatable minus what the other
//                containers hold, i.e. their allocated requests);
//   restart-required — a changed resource's resizePolicy is RestartContainer
//                (podshim never restarts a container itself);
// otherwise the new values are allocated and actuated through an Actuator.
// Success clears the conditions; an actuation failure leaves
// PodResizeInProgress/Error with the actuator's message (for example the
// kubelet-form "memory limit (N) below current usage (M)" of an error of kind
// ErrorKind::ShrinkRefused); a resize during which the kernel OOM-killed in
// a target cgroup is AppliedWithOomKill, never Applied.
//
// Resizes from the runtime (NRI) were admitted by the kubelet already: for
// them admission is only the validity check, then the same actuation and
// the same recording.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "shim/core/cgroup_types.h"
#include "shim/core/state.h"

namespace podshim::core {

class Metrics;

// What the node can give pods.
struct NodeAllocatable {
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
};

// The machine's capacity: online CPUs (sysconf) × 1000 and MemTotal from
// /proc/meminfo (overridable root for tests: `proc_root` + "/meminfo").
Result<NodeAllocatable> machine_allocatable(const std::string& proc_root = "/proc");

// Where a resize intent comes from. Api: podshim's status API (podshimctl
// resize) — judged in full (Infeasible / Deferred / restart-required).
// NriUpdateContainer / NriUpdatePodSandbox: the runtime relaying what the
// kubelet already admitted — only checked for validity and applied safely.
enum class IntentSource { Api, NriUpdateContainer, NriUpdatePodSandbox };
std::string_view to_string(IntentSource s);

// What the service hands an Actuator: the targets with their new values
// (mode is the actuator's choice) and who asked.
struct Actuation {
  IntentSource source = IntentSource::Api;
  cgroup::PodResizeRequest plan;
};

// Applies an admitted resize to the node, now or later. Hooks-only mode:
// EngineActuator (the engine writes every value). NRI mode: NriActuator
// (shim/adapter), where the runtime writes and the engine only makes room.
class Actuator {
 public:
  using Done = std::function<void(Result<cgroup::ResizeReport>)>;
  virtual ~Actuator() = default;
  // Calls `done` exactly once, inline or later from the loop.
  virtual void apply(const Actuation& a, Done done) = 0;
  // Reads back what the kernel holds (limits, memory.current, memory.events;
  // not memory.stat); ENOTSUP when this actuator cannot.
  virtual Result<cgroup::Actual> read_actual(const std::string& cgroup_path);
};

// Which requests/limits a resize asks to remove (always Infeasible, as the
// apiserver says "resource limits cannot be removed").
struct Removals {
  bool cpu_request = false, cpu_limit = false, memory_request = false, memory_limit = false;
  bool any() const { return cpu_request || cpu_limit || memory_request || memory_limit; }
};

// A container resize: new resources plus, optionally, a new resizePolicy.
// Unset resource fields keep their desired (spec) value.
struct ContainerResize {
  std::string container_id;
  K8sResources resources;
  Removals remove;
  std::optional<ResizePolicy> cpu_policy;
  std::optional<ResizePolicy> memory_policy;
};

// A pod resize: pod-level resources (KEP-5419) and/or per-container resizes.
struct PodResize {
  std::string pod_uid;
  std::optional<K8sResources> pod_resources;
  std::vector<ContainerResize> containers;
};

// One resize, whatever its source: what every adapter translates into.
struct ResizeIntent {
  IntentSource source = IntentSource::Api;
  std::string pod_uid;                        // empty: a container of no known pod
  std::optional<K8sResources> pod_resources;  // pod-level (KEP-5419), or the pod cgroup (NRI)
  std::string pod_cgroup_path;                // NRI: the pod's cgroup as the runtime gave it
  std::vector<ContainerResize> containers;
  bool bump_generation = true;                // false: a re-evaluated Deferred resize
};

enum class ResizeOutcome {
  Applied,          // allocated and actuated; conditions cleared
  Unchanged,        // nothing to do; conditions cleared
  Deferred,         // PodResizePending/Deferred
  Infeasible,       // PodResizePending/Infeasible
  RestartRequired,  // allocated; the container must be restarted by its owner
  Error,            // PodResizeInProgress/Error
  // The new values were written, but memory.events counted an OOM kill in a
  // target cgroup during the resize or its settle period: never reported as
  // plainly applied. PodResizeInProgress/Error names the kill.
  AppliedWithOomKill,
  InProgress,       // actuation still running (the runtime, a shrink); see lastResizeOutcome
};
std::string_view to_string(ResizeOutcome o);

struct ResizeResult {
  ResizeOutcome outcome = ResizeOutcome::Unchanged;
  std::string message;
  // Generation per affected container (pod resizes touch several).
  std::map<std::string, int64_t> generations;
  cgroup::ResizeReport report;
};

// The resize service: every source's intent passes the same admission, one
// actuation and one place (finish) that records generation, conditions,
// metrics and the log line.
class ResizeManager {
 public:
  using Done = std::function<void(Result<ResizeResult>)>;
  // Borrows store, actuator and metrics (may be null) for its lifetime.
  ResizeManager(Store& store, Actuator& actuator, NodeAllocatable allocatable,
                Metrics* metrics = nullptr);

  // The one entry point. Errors are for requests that are wrong in
  // themselves: ENOENT (no such container/pod), EINVAL (limit below request,
  // negative values, a policy on a resource that is not there). Everything
  // else is an outcome. `done` runs once, inline or later from the loop.
  void submit(ResizeIntent intent, Done done);

  // The status API's form: submits and returns the outcome, or InProgress
  // when actuation completes later (the final one lands in the container's
  // last_outcome and conditions).
  Result<ResizeResult> resize_container(const ContainerResize& req);
  Result<ResizeResult> resize_pod(const PodResize& req);

  // Re-evaluates Deferred resizes, e.g. after a container went away.
  void retry_deferred();

  void set_allocatable(NodeAllocatable a);
  NodeAllocatable allocatable() const { return allocatable_; }

  // What one actuation was for one container it wrote (or tried to): how
  // long the actuator took, and whether it refused a shrink that lowered
  // this container's memory limit. Reported when the actuator answers,
  // before the outcome is stored (status::ContainerMetrics' duration and
  // refused-shrink series).
  struct ActuationRecord {
    std::string_view container_id;
    double seconds = 0;
    bool shrink_refused = false;
  };
  void on_actuation(std::function<void(const ActuationRecord&)> fn) { on_actuation_ = std::move(fn); }

  struct Flight;

 private:
  struct Item;     // one container of a resize
  struct PodView;  // the pod's containers before and after it
  struct Pending;  // why a resize waits (Deferred) or cannot be (Infeasible)

  Result<ResizeResult> sync_submit(ResizeIntent intent);
  // submit()'s steps, in order. Each is short and reads the resize's origin
  // (Flight::origin) as data: a runtime's update and an API request differ
  // in what is decided here, not in branches on their source.
  Result<void> plan(const ResizeIntent& intent, Flight& f);
  Result<void> plan_container(const ResizeIntent& intent, const ContainerResize& r, Flight& f);
  void new_generation(const ResizeIntent& intent, Flight& f);
  Result<std::optional<Pending>> admit(Flight& f);
  PodView pod_view(const Flight& f) const;
  static bool checks_pod_level(const Flight& f);
  Result<std::optional<Pending>> check_shape(const Flight& f, const PodView& v) const;
  Result<std::optional<Pending>> check_capacity(const Flight& f, const K8sResources& old_total) const;
  Store::Requests others_requests(const Flight& f) const;
  Result<Actuation> allocate(Flight& f);
  Result<std::optional<cgroup::ResizeTarget>> allocate_container(Flight& f, Item& it);
  void launch(const std::shared_ptr<Flight>& f, Actuation act);
  // The end of a resize: finish() when the actuator has answered (or at
  // once when nothing is written), reject() for a request refused before
  // anything was recorded, conclude() for every outcome.
  void finish(std::shared_ptr<Flight> f, Result<cgroup::ResizeReport> rep);
  void report_actuation(const Flight& f, const Result<cgroup::ResizeReport>& rep) const;
  void finish_failed(Flight& f, const Error& e);
  void finish_applied(Flight& f, const cgroup::ResizeReport& rep);
  void reject(Flight& f, Error e);
  // The flight's result holds the outcome. answer() calls done() with it;
  // conclude() records it and calls done() unless answer() has.
  void answer(Flight& f);
  void conclude(Flight& f);
  std::pair<ResizeOutcome, std::string> applied_outcome(const Flight& f, const cgroup::ResizeReport& rep) const;
  void set_pending(Flight& f, const Pending& p);
  void store_item(Item& it);
  void change_item(Flight& f, Item& it, const std::function<void(Container&)>& fn);
  std::optional<cgroup::Actual> read_after(const cgroup::ResizeReport& rep, const std::string& key,
                                           const std::string& cgroup_path);
  void observe_pressure(double some_avg10, double full_avg10);
  void record(const Flight& f, const Error* refused);

  // What `c` is allocated once the actuations still running for it have
  // completed: the last one's target, else its stored allocated values.
  const K8sResources& allocation(const Container& c) const;

  Store& store_;
  Actuator& actuator_;
  NodeAllocatable allocatable_;
  Metrics* metrics_;
  std::function<void(const ActuationRecord&)> on_actuation_;
  // Containers whose actuation was still running when submit() returned:
  // the target of the latest and how many run. The stored allocated
  // values are those before it until it completes, so a request is
  // compared with this instead; compared with the stored values, a request
  // back to them while a change ran was "unchanged", and the running one
  // then left the older request's values in place.
  struct Running {
    K8sResources target;
    int count = 0;
  };
  std::unordered_map<std::string, Running> running_;  // by container id: looked up for every container of a resized pod
  // The running targets' effective requests, summed (check_capacity's bound).
  Store::Requests running_requests_;
  void set_running_target(Running& r, const K8sResources& target);
};

}  // namespace podshim::core
