// The cgroup engine's value types, as shim/core sees them.
//
// shim/core codes against the fixed facade of cgroup/engine.h. While that
// header is still being written in parallel, the same declarations are
// provided here so the model compiles; once cgroup/engine.h exists it is used
// and the fallback below is dead code (to be deleted then).
#pragma once

#if __has_include("cgroup/engine.h")
#include "cgroup/engine.h"
#else
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace podshim::cgroup {
enum class WeightFormula { Linear, Quadratic };
enum class DriverKind { Cgroupfs, Systemd, Auto };
struct K8sResources {
  std::optional<int64_t> cpu_request_milli, cpu_limit_milli;
  std::optional<int64_t> memory_request_bytes, memory_limit_bytes;
};
struct ResizeTarget {
  std::string id;
  std::string cgroup_path;
  K8sResources desired;
};
struct PodResizeRequest {
  std::optional<ResizeTarget> pod;
  std::vector<ResizeTarget> containers;
};
struct Actual {
  std::optional<int64_t> cpu_request_milli, cpu_limit_milli, memory_limit_bytes;
  uint64_t memory_current = 0, anon = 0, file = 0, shmem = 0, oom = 0, oom_kill = 0,
           events_max = 0, events_high = 0;
  std::string cpu_weight_raw, cpu_max_raw, memory_max_raw;
};
struct StepReport {
  std::string id, file, before, after;
};
struct ResizeReport {
  std::vector<StepReport> steps;
  uint64_t bytes_reclaimed = 0;
};
}  // namespace podshim::cgroup
#endif
