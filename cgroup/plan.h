// The resize planner: a pure function from current and desired attribute
// values to ordered steps, in the kubelet's order (kuberuntime_manager.go
// doPodResizeAction, KEP-1287 "Container resource limit update ordering"):
// for memory, then for cpu (then for registered resources, the same way):
//   1. pod cgroup increases   2. container decreases
//   3. pod cgroup decreases   4. container increases
// so a pod's limit is never below the sum of its containers' limits at any
// point, and a container never gets more than its pod allows.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cgroup/controllers.h"

namespace podshim::cgroup {

// One attribute of a cgroup: its row in the controller table, what the
// kernel holds now (raw, trimmed) and what it should become.
struct PlanAttr {
  const Controller* row = nullptr;
  std::string cur, want;
};

// What one cgroup holds now and what its attributes should become; an
// attribute not listed is left alone. Listed in table order.
struct PlanTarget {
  std::string id;
  bool is_pod = false;
  std::vector<PlanAttr> attrs;
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
// `cur` (the row's `differs`: memory values compare after page rounding,
// cpu.max numerically; a file without a row compares as text).
bool attr_differs(const std::string& file, const std::string& cur, const std::string& want);

}  // namespace podshim::cgroup
