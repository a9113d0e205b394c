// The resize planner: a pure function from current and desired attribute
// values to ordered steps, in the kubelet's order (kuberuntime_manager.go
// doPodResizeAction, KEP-1287 "Container resource limit update ordering"):
// for memory, then for cpu:
//   1. pod cgroup increases   2. container decreases
//   3. pod cgroup decreases   4. container increases
// so a pod's limit is never below the sum of its containers' limits at any
// point, and a container never gets more than its pod allows.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace podshim::cgroup {

enum class Resource { Memory, Cpu };

// What one cgroup holds now (raw attribute strings, trimmed) and what its
// attributes should become (nullopt: leave alone).
struct PlanTarget {
  std::string id;
  bool is_pod = false;
  std::string cur_cpu_weight, cur_cpu_max, cur_memory_max;
  std::optional<std::string> want_cpu_weight, want_cpu_max, want_memory_max;
};

struct AttrChange {
  std::string file;
  std::string before, after;
};

struct PlanStep {
  size_t target = 0;  // index into the PlanTarget vector
  Resource resource = Resource::Memory;
  bool increase = false;
  std::vector<AttrChange> changes;  // written in this order
};

// Orders the changes. Attributes already at their desired value produce no
// step, so re-planning after a successful resize yields an empty plan.
std::vector<PlanStep> plan_resize(const std::vector<PlanTarget>& targets);

// Whether writing `want` to `file` would change what the kernel holds as
// `cur` (memory values compare after page rounding, cpu.max numerically).
bool attr_differs(const std::string& file, const std::string& cur, const std::string& want);

}  // namespace podshim::cgroup
