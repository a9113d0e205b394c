#include "shim/core/oom_kills.h"

#include "base/log.h"

namespace podshim::core {

ActualResources to_actual(const cgroup::Actual& a, std::optional<int64_t> target_cpu_request) {
  ActualResources out;
  out.resources.cpu_request_milli = a.cpu_request_milli;
  if (a.cpu_weight)
    out.resources.cpu_request_milli = cgroup::held_cpu_request(*a.cpu_weight, target_cpu_request, a.formula);
  out.resources.cpu_limit_milli = a.cpu_limit_milli;
  out.resources.memory_limit_bytes = a.memory_limit_bytes;
  out.resources.extra = a.extra;
  out.memory_current = a.memory_current;
  out.oom_kill = a.oom_kill;
  out.read_unix_ms = now_unix_ms();
  return out;
}

uint64_t set_actual(Container& c, const ActualResources& act) {
  const uint64_t kills = c.actual && act.oom_kill > c.actual->oom_kill ? act.oom_kill - c.actual->oom_kill : 0;
  c.actual = act;
  return kills;
}

void count_oom_kills(Store& store, Metrics* metrics, std::string_view pod_uid, uint64_t kills) {
  if (kills == 0) return;
  if (metrics) metrics->oom_kills.inc({}, static_cast<double>(kills));
  if (pod_uid.empty()) return;
  auto r = store.update_pod(pod_uid, [&](Pod& p) {
    if (!p.actual) p.actual.emplace();  // the pod's cgroup not read yet: its counter alone
    p.actual->oom_kill += kills;
  });
  // ENOENT: a container of no known pod; only the container counts it.
  if (!r && r.error().code != ENOENT) log::warn("storing pod {}: {}", pod_uid, r.error().message);
}

void set_pod_actual(Pod& p, ActualResources act) {
  act.oom_kill = p.actual ? p.actual->oom_kill : 0;
  p.actual = std::move(act);
}

}  // namespace podshim::core
