// The narrow interface the systemd driver needs from systemd: set runtime
// properties on a unit. Its only sd-bus implementation is in systemd_bus.cc;
// tests use a recording fake.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

// sd-event's loop (systemd/sd-event.h), forward-declared so that this header
// does not pull libsystemd's headers into every includer.
struct sd_event;

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
  // runtime so nothing is written to /etc, as runc does. Waits for the reply
  // (at most the call timeout): for callers without an event loop.
  virtual Result<void> set_unit_properties(const std::string& unit,
                                           const std::vector<UnitProperty>& props) = 0;
  // The same without waiting: `done` runs once, with the reply, from the
  // event loop the manager is attached to. A manager without a loop (and
  // this default) answers before it returns, through the blocking call.
  using Done = std::function<void(Result<void>)>;
  virtual void set_unit_properties_async(const std::string& unit, const std::vector<UnitProperty>& props,
                                         Done done) {
    done(set_unit_properties(unit, props));
  }
};

// Connects to the system bus lazily, on the first call (systemd_bus.cc).
// Each call waits at most `call_timeout` for systemd's reply instead of
// sd-bus's default of 25 s (sd_bus_call with usec 0), and then fails with
// ErrorKind::Timeout: a resize has NRI's 2 s in all.
inline constexpr std::chrono::milliseconds kDefaultUnitCallTimeout{1000};
struct SdBusOptions {
  std::chrono::microseconds call_timeout = kDefaultUnitCallTimeout;
  // The loop asynchronous calls (set_unit_properties_async) run on: their
  // connection is attached to it (sd_bus_attach_event) and used only from
  // the thread that runs it. Null: asynchronous calls block like the others.
  sd_event* event = nullptr;
  // The bus to talk to, in D-Bus address syntax ("unix:path=/run/systemd/private");
  // empty: the system bus. A non-empty address is a direct (peer-to-peer)
  // connection, as systemctl makes to systemd's private socket.
  std::string address;
};
std::shared_ptr<UnitManager> make_sdbus_unit_manager(SdBusOptions o);
std::shared_ptr<UnitManager> make_sdbus_unit_manager(std::chrono::microseconds call_timeout);
std::shared_ptr<UnitManager> make_sdbus_unit_manager();  // kDefaultUnitCallTimeout

// The unit properties that correspond to one cgroup attribute write, the way
// runc's systemd driver maps them (opencontainers/cgroups systemd/v2.go):
//   cpu.weight "N"          → CPUWeight=N
//   cpu.max "Q P" / "max P" → CPUQuotaPeriodUSec=P, CPUQuotaPerSecUSec=Q*1e6/P (or infinity)
//   memory.{max,high,low,min} → Memory{Max,High,Low,Min} ("max" → infinity)
// Other attributes (memory.reclaim…) have no property: an empty vector. A
// registered resource's row brings its own (pids.max → TasksMax in
// tests/cgroup/descriptor_test.cc).
// The mapping is the `properties` column of the controller table
// (controllers.cc).
Result<std::vector<UnitProperty>> properties_for_attr(std::string_view attr, std::string_view value);

}  // namespace podshim::cgroup
