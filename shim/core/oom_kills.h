// The one accounting of kernel OOM kills (cgroup v2 memory.events
// oom_kill). Every path that reads a container's cgroup (the read-back:
// periodic, at sync and after runtime events, shim/core/readback.cc; a
// resize's read-back, shim/core/resize.cc) stores what it read through
// set_actual and passes the kills it returns to count_oom_kills. A
// resize's memory.events deltas (ResizeReport::events) decide its outcome
// (applied_with_oom_kill) and message only: they count nothing, or a kill
// the read-back also sees, and the pod cgroup's delta (hierarchical: it
// repeats every kill of its containers), would be counted again.
#pragma once

#include <cstdint>
#include <string_view>

#include "cgroup/engine.h"
#include "shim/core/metrics.h"
#include "shim/core/state.h"

namespace podshim::core {

// What a cgroup's read-back (cgroup::read_back, the one read of a cgroup's
// values) reports as its actual resources, whichever path read it: the
// daemon's read-back or a resize's. `target_cpu_request` is the request the
// cgroup was last given (Container::kernel_target(); nullopt for a pod), for
// held_cpu_request's rule.
ActualResources to_actual(const cgroup::Actual& a, std::optional<int64_t> target_cpu_request);

// Stores `act` as the container's actual values and returns the kills it
// adds: how far oom_kill rose over the value stored before, which is the
// container's counter (podshim_container_oom_kills_total). A first read
// counts none (kills before podshim watched the cgroup, say before a
// restart of podshimd, are not new), nor does a value that went back (a new
// cgroup at the path).
uint64_t set_actual(Container& c, const ActualResources& act);

// Credits `kills` counted for a container of pod `pod_uid` to the pod's
// counter (Pod::actual's oom_kill: the kills counted in its containers)
// and to podshim_oom_kills_total (`metrics` may be null). Call it after the
// container is stored, not under the store's lock.
void count_oom_kills(Store& store, Metrics* metrics, std::string_view pod_uid, uint64_t kills);

// Stores `act`, read from the pod's cgroup, as the pod's actual values but
// keeps the pod's counter: the pod cgroup's oom_kill includes its
// containers' kills, which count_oom_kills has credited already.
void set_pod_actual(Pod& p, ActualResources act);

}  // namespace podshim::core
