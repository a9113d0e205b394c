// Read-back: what the kernel holds for one cgroup, in Kubernetes units.
#pragma once

#include "base/result.h"
#include "cgroup/cgroup_dir.h"
#include "cgroup/convert.h"
#include "cgroup/engine.h"

namespace podshim::cgroup {

// cpu.weight (→ request via `f`), cpu.max, memory.max, memory.current,
// memory.stat (anon, file, shmem; only `with_stat`: the kernel builds it from
// every counter of the cgroup, the costliest of these files) and
// memory.events of `d`.
Result<Actual> read_back(const CgroupDir& d, WeightFormula f, bool with_stat = true);

}  // namespace podshim::cgroup
