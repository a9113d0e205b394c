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
// ErrorKind::ShrinkRefused).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
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

// Applies a planned resize to the node. The default implementation wraps
// cgroup::Engine (shim/core/engine_actuator.h); in NRI mode the daemon routes
// through the runtime instead so its stored spec stays the source of truth.
class Actuator {
 public:
  virtual ~Actuator() = default;
  virtual Result<cgroup::ResizeReport> apply(const cgroup::PodResizeRequest& req) = 0;
  // Reads back what the kernel holds; ENOTSUP when this actuator cannot.
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

enum class ResizeOutcome {
  Applied,          // allocated and actuated; conditions cleared
  Unchanged,        // nothing to do; conditions cleared
  Deferred,         // PodResizePending/Deferred
  Infeasible,       // PodResizePending/Infeasible
  RestartRequired,  // allocated; the container must be restarted by its owner
  Error,            // PodResizeInProgress/Error
};
std::string_view to_string(ResizeOutcome o);

struct ResizeResult {
  ResizeOutcome outcome = ResizeOutcome::Unchanged;
  std::string message;
  // Generation per affected container (pod resizes touch several).
  std::map<std::string, int64_t> generations;
  cgroup::ResizeReport report;
};

class ResizeManager {
 public:
  // Borrows store, actuator and metrics (may be null) for its lifetime.
  ResizeManager(Store& store, Actuator& actuator, NodeAllocatable allocatable,
                Metrics* metrics = nullptr);

  // Errors are for requests that are wrong in themselves: ENOENT (no such
  // container/pod), EINVAL (limit below request, negative values, a policy on
  // a resource that is not there). Everything else is an outcome.
  Result<ResizeResult> resize_container(const ContainerResize& req);
  Result<ResizeResult> resize_pod(const PodResize& req);

  // Re-evaluates Deferred resizes, e.g. after a container went away.
  void retry_deferred();

  void set_allocatable(NodeAllocatable a);
  NodeAllocatable allocatable() const { return allocatable_; }

 private:
  Result<ResizeResult> run(const std::string& pod_uid, std::optional<K8sResources> pod_resources,
                           const std::vector<ContainerResize>& reqs, bool bump_generation);

  Store& store_;
  Actuator& actuator_;
  NodeAllocatable allocatable_;
  Metrics* metrics_;
};

}  // namespace podshim::core
