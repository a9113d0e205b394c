#include "cgroup/unit_manager.h"

#include "base/str.h"
#include "cgroup/convert.h"

namespace podshim::cgroup {

Result<std::vector<UnitProperty>> properties_for_attr(std::string_view attr, std::string_view value) {
  std::string_view v = str::trim(value);
  auto limit = [&](const char* prop) -> Result<std::vector<UnitProperty>> {
    auto m = parse_memory_max(v);
    if (!m) return wrap(m, attr);
    return std::vector<UnitProperty>{{prop, m->value_or(kUnitInfinity)}};
  };
  if (attr == "cpu.weight") {
    auto w = str::parse_u64(v);
    if (!w) return wrap(w, "cpu.weight");
    return std::vector<UnitProperty>{{"CPUWeight", *w}};
  }
  if (attr == "cpu.max") {
    auto m = parse_cpu_max(v);
    if (!m) return Unexpected(m.error());
    uint64_t per_sec = kUnitInfinity;
    if (m->quota_us) {
      per_sec = static_cast<uint64_t>(static_cast<unsigned __int128>(*m->quota_us) * 1000000 /
                                      m->period_us);
    }
    // Period first: systemd computes the written quota from both.
    return std::vector<UnitProperty>{{"CPUQuotaPeriodUSec", m->period_us},
                                     {"CPUQuotaPerSecUSec", per_sec}};
  }
  if (attr == "memory.max") return limit("MemoryMax");
  if (attr == "memory.high") return limit("MemoryHigh");
  if (attr == "memory.low") return limit("MemoryLow");
  if (attr == "memory.min") return limit("MemoryMin");
  if (attr == "pids.max") return limit("TasksMax");
  return std::vector<UnitProperty>{};
}

}  // namespace podshim::cgroup
