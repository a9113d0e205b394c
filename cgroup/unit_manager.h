// The narrow interface the systemd driver needs from systemd: set runtime
// properties on a unit. Its only sd-bus implementation is in systemd_bus.cc;
// tests use a recording fake.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace podshim::cgroup {

// One unit property of D-Bus type "t" (every resource property podshim sets:
// CPUWeight, CPUQuotaPerSecUSec, CPUQuotaPeriodUSec, MemoryMax, MemoryHigh,
// MemoryLow, MemoryMin, TasksMax). UINT64_MAX is systemd's "infinity".
struct UnitProperty {
  std::string name;
  uint64_t value = 0;
  bool operator==(const UnitProperty&) const = default;
};

inline constexpr uint64_t kUnitInfinity = UINT64_MAX;

class UnitManager {
 public:
  virtual ~UnitManager() = default;
  // org.freedesktop.systemd1.Manager.SetUnitProperties(unit, runtime=true, props):
  // runtime so nothing is written to /etc, as runc does.
  virtual Result<void> set_unit_properties(const std::string& unit,
                                           const std::vector<UnitProperty>& props) = 0;
};

// Connects to the system bus lazily, on the first call (systemd_bus.cc).
// Each call waits at most `call_timeout` for systemd's reply instead of
// sd-bus's default of 25 s (sd_bus_call with usec 0), and then fails with
// ErrorKind::Timeout: a resize has NRI's 2 s in all.
inline constexpr std::chrono::milliseconds kDefaultUnitCallTimeout{1000};
std::shared_ptr<UnitManager> make_sdbus_unit_manager(std::chrono::microseconds call_timeout);
std::shared_ptr<UnitManager> make_sdbus_unit_manager();  // kDefaultUnitCallTimeout

// The unit properties that correspond to one cgroup attribute write, the way
// runc's systemd driver maps them (opencontainers/cgroups systemd/v2.go):
//   cpu.weight "N"          → CPUWeight=N
//   cpu.max "Q P" / "max P" → CPUQuotaPeriodUSec=P, CPUQuotaPerSecUSec=Q*1e6/P (or infinity)
//   memory.{max,high,low,min} → Memory{Max,High,Low,Min} ("max" → infinity)
//   pids.max               → TasksMax
// Other attributes (memory.reclaim…) have no property: an empty vector.
Result<std::vector<UnitProperty>> properties_for_attr(std::string_view attr, std::string_view value);

}  // namespace podshim::cgroup
