// The controller table: one row per cgroup v2 attribute podshim knows, with
// everything the engine needs to know about it — which controller owns the
// file, how its value comes from the pod spec, how values compare and
// order, which systemd unit properties carry it, how it reads back, and
// how it is lowered (a plain write, or the journaled shrink). The planner
// (plan.cc), the engine's read of current values (engine.cc), the systemd
// driver's property mapping (unit_manager.cc) and the read-back
// (read_back.cc) walk this table instead of naming attributes, so adding an
// attribute is one row in controllers.cc plus its conversion functions.
//
// Not table-driven (yet): the fields of Actual (read-back results) and of
// AttrValues (podshimctl cgroup-values) are named per attribute; the shrink
// (shrink.cc) is memory.max's own state machine; the kubelet's ordering
// rules (plan.cc) are per resource, not per attribute.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "cgroup/convert.h"
#include "cgroup/unit_manager.h"

namespace podshim::cgroup {

struct Actual;  // engine.h

// The planner's groups: the kubelet orders memory before cpu, each with its
// own pod/container order (plan.h).
enum class Resource { Memory, Cpu };

// How a desired value is computed: the weight formula of the cgroup (pod
// or container) and whether the systemd driver's rounding applies.
struct ConvertContext {
  WeightFormula formula = WeightFormula::Quadratic;
  bool systemd_rounding = false;
};

// How a lower value is applied (and undone).
enum class Lowering {
  Write,   // a plain write; rollback writes the old value back
  Shrink,  // shrink.cc: memory.high clamp (journaled under state_dir/cgroup,
           // undone by recover() after a crash), reclaim, then the write
};

struct Controller {
  std::string_view file;        // the attribute file, e.g. "cpu.max"
  std::string_view controller;  // its controller (cgroup.controllers), e.g. "cpu"
  Resource resource = Resource::Cpu;
  // A limit (cpu.max, memory.max) rather than a request (cpu.weight): a
  // container's step is ordered by its limit when that changes, and a pod's
  // limits move before its requests (kubelet resizeContainers).
  bool limit = false;
  // The value a resize writes for `r`; nullopt: leave the file alone. Null:
  // resizes never write this attribute (it has only a systemd mapping).
  std::optional<std::string> (*want)(const K8sResources& r, const ConvertContext& c) = nullptr;
  // Whether writing `want` would change what the kernel holds as `cur`.
  bool (*differs)(std::string_view cur, std::string_view want) = nullptr;
  // A comparable size of a value (which way a change goes).
  long double (*magnitude)(std::string_view v) = nullptr;
  // The systemd unit properties carrying a value (runc's mapping,
  // opencontainers/cgroups systemd/v2.go). Null: none.
  Result<std::vector<UnitProperty>> (*properties)(std::string_view value) = nullptr;
  // Parses the kernel's value into `a` (cpu request via `f`). Null: not read back.
  Result<void> (*read_back)(std::string_view raw, Actual& a, WeightFormula f) = nullptr;
  Lowering lowering = Lowering::Write;
};

// Every row, in the order attributes are read and written within a step.
std::span<const Controller> controllers();
// The row for `file`, or null.
const Controller* controller_for(std::string_view file);

}  // namespace podshim::cgroup
