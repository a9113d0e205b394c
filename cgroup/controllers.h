// The controller table: one row per cgroup v2 attribute podshim knows, with
// everything the node agent needs to know about it — which controller owns
// the file, how its value comes from the pod spec, how values compare and
// order, which systemd unit properties carry it, how it reads back, and how
// it is lowered (a plain write, or the journaled shrink). The planner
// (plan.cc), the engine's read of current values (engine.cc), the systemd
// driver's property mapping (driver.cc) and both read-backs (read_back.cc,
// shim/core/readback.cc) walk this table instead of naming attributes.
//
// cpu and memory are built in: the kubelet's conversions, the model's named
// fields and the shrink are theirs. Any other resource is one row given to
// register_resource() from one file: its name carries it through the status
// API (requests/limits), the model (K8sResources::extra, the JSON "extra"
// object), the metrics (resource label) and the drift report, with no other
// file naming it (tests/cgroup/descriptor_test.cc adds pids.max that way).
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
// own pod/container order (plan.h); registered resources come after both,
// in the same order among themselves.
enum class Resource { Memory, Cpu, Other };

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
  // A registered resource's name (a Kubernetes-style resource name, as in
  // requests/limits: "pids"); empty for the built-in rows. `want` reads it
  // from K8sResources::extra, `read_back` writes it to Actual::extra.
  std::string_view name = {};
  // Its metrics' unit label ("1", "byte").
  std::string_view unit = {};
  // Parses the status API's quantity for it ("1024", "1Ki"); null: plain
  // non-negative integers.
  Result<int64_t> (*quantity)(std::string_view text) = nullptr;
};

// Every row, in the order attributes are read and written within a step:
// the built-in ones, then the registered ones in registration order.
std::span<const Controller> controllers();
// The registered rows alone (those with a name).
std::span<const Controller> registered_resources();
// The row for `file`, or null.
const Controller* controller_for(std::string_view file);
// The registered row named `name`, or null.
const Controller* resource_named(std::string_view name);

// Adds a row for a resource beyond cpu and memory. It needs a name, a file,
// a controller, `want` and `read_back`; its `resource` is Other. Rows are
// fixed once podshim runs: register before the first use of the table (a
// static initializer in the file that defines the row does). Fails, adding
// nothing, when the name or file is taken, the row is incomplete, or the
// table is full.
Result<void> register_resource(const Controller& row);

// The value of registered resource `name` in `r`, if set (for `want`).
std::optional<int64_t> extra_value(const K8sResources& r, std::string_view name);

}  // namespace podshim::cgroup
