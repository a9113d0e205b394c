// How attribute values reach a cgroup, one implementation per cgroup driver
// (as crun keeps one file per driver, src/libcrun/cgroup-cgroupfs.c and
// cgroup-systemd.c): cgroupfs writes the files; systemd sets the unit's
// properties first and then writes the files, as runc does, so a later
// `systemctl daemon-reload` re-applies the new values instead of reverting
// them (moby#41233, kubernetes#113857), and the files carry values systemd
// cannot express (periods below its minimum, opencontainers/cgroups#4).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "cgroup/path.h"
#include "cgroup/unit_manager.h"

namespace podshim::cgroup {

using AttrValuesList = std::vector<std::pair<std::string, std::string>>;  // (file, value), in order

class Driver {
 public:
  virtual ~Driver() = default;
  // One attribute write, as the engine does it (seams, error context).
  using WriteFile = std::function<Result<void>(const std::string& file, const std::string& value)>;
  // Sets `kv` on the cgroup at `loc`; `id` names it in errors. Waits for
  // everything (callers without a loop).
  virtual Result<void> set(const std::string& id, const CgroupLocation& loc, const AttrValuesList& kv,
                           const WriteFile& write) = 0;
  // The same, with `done` called once when it has landed or failed: from
  // the loop when the driver waits on one (systemd's reply), otherwise
  // before this returns. `write` must stay callable until then.
  using Done = std::function<void(Result<void>)>;
  virtual void set_async(const std::string& id, const CgroupLocation& loc, const AttrValuesList& kv,
                         WriteFile write, Done done) {
    done(set(id, loc, kv, write));
  }
};

std::unique_ptr<Driver> make_cgroupfs_driver();
// `units` yields the unit manager on first use (the system bus connects lazily).
std::unique_ptr<Driver> make_systemd_driver(std::function<Result<UnitManager*>()> units);

}  // namespace podshim::cgroup
