// Read-back: what the kernel holds for one cgroup, in Kubernetes units.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "base/result.h"
#include "cgroup/cgroup_dir.h"
#include "cgroup/convert.h"
#include "cgroup/engine.h"

namespace podshim::cgroup {

// Where one read-back takes a cgroup's attribute files from: the engine's
// CgroupDir (read_back below) or the daemon's read-back, which keeps the
// files open across passes (shim/core/readback.cc).
class AttrSource {
 public:
  // The text of `file` (trimmed); nullopt: the file does not exist (its
  // controller is off in this cgroup). Valid until the next call.
  virtual Result<std::optional<std::string_view>> text(std::string_view file) = 0;

 protected:
  ~AttrSource() = default;
};

// The one read-back: every row of the table with a read_back (cpu.weight
// → request via `f`, cpu.max, memory.max, registered resources), then
// memory.current, memory.stat (anon, file, shmem; only `with_stat`: the
// kernel builds it from every counter of the cgroup, the costliest of these
// files) and memory.events. A file that does not exist is left unset (an
// attribute of a controller that is off); a cgroup with neither cpu nor
// memory attributes is ENOENT (removed). memory.stat is flushed lazily
// (mm/memcontrol.c: up to 64 pages per online CPU can be missing for ~2 s),
// so anon, file and shmem are for display only: nothing compares them or
// decides from them (memory.current is exact).
Result<Actual> read_back(AttrSource& src, WeightFormula f, bool with_stat);

// The same, from the files of `d`. `known`: attributes of the table read
// from the kernel earlier in the same resize and not written since (the
// resize held the cgroup's turn throughout); their values are taken as read
// instead of opening the file again.
struct KnownAttr {
  std::string_view file;
  std::string_view value;
};
Result<Actual> read_back(const CgroupDir& d, WeightFormula f, bool with_stat = true,
                         std::span<const KnownAttr> known = {});

// memory.events' oom, oom_kill, high and max of `d` (0 for a counter the
// kernel does not list): read_back's, and the engine's before/after deltas.
Result<MemoryEvents> read_memory_events(const CgroupDir& d);
// The same counters from memory.events' text (the daemon's read-back reads
// the file through its own kept fds).
MemoryEvents parse_memory_events(std::string_view text);

}  // namespace podshim::cgroup
