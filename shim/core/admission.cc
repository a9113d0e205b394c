#include "shim/core/admission.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "shim/core/quantity.h"

namespace podshim::core {

namespace {

using std::optional;

// The containers' aggregate for one resource: the sum of their requests (a
// container request defaults to its limit, pkg/apis/core/v1/defaults.go),
// present only when some container has one; the sum of their limits,
// present only when every container declares one (ResourceConfigForPod's
// cpuLimitsDeclared / memoryLimitsDeclared).
struct Aggregate {
  optional<int64_t> cpu_request, memory_request, cpu_limit, memory_limit;
};

Aggregate aggregate(const std::vector<K8sResources>& cs) {
  Aggregate a;
  int64_t cpu_req = 0, mem_req = 0, cpu_lim = 0, mem_lim = 0;
  bool any_cpu_req = false, any_mem_req = false;
  bool all_cpu_lim = !cs.empty(), all_mem_lim = !cs.empty();
  for (const auto& r : cs) {
    if (auto v = r.cpu_request_milli ? r.cpu_request_milli : r.cpu_limit_milli) {
      cpu_req += *v;
      any_cpu_req = true;
    }
    if (auto v = r.memory_request_bytes ? r.memory_request_bytes : r.memory_limit_bytes) {
      mem_req += *v;
      any_mem_req = true;
    }
    // A zero limit is "no limit" (Quantity.IsZero in ResourceConfigForPod).
    if (r.cpu_limit_milli && *r.cpu_limit_milli > 0) cpu_lim += *r.cpu_limit_milli; else all_cpu_lim = false;
    if (r.memory_limit_bytes && *r.memory_limit_bytes > 0) mem_lim += *r.memory_limit_bytes; else all_mem_lim = false;
  }
  if (any_cpu_req) a.cpu_request = cpu_req;
  if (any_mem_req) a.memory_request = mem_req;
  if (all_cpu_lim) a.cpu_limit = cpu_lim;
  if (all_mem_lim) a.memory_limit = mem_lim;
  return a;
}

bool any_limit(const K8sResources& r) { return r.cpu_limit_milli || r.memory_limit_bytes; }

}  // namespace

bool has_pod_level(const K8sResources& pod) {
  return pod.cpu_request_milli || pod.cpu_limit_milli || pod.memory_request_bytes || pod.memory_limit_bytes;
}

K8sResources default_pod_level(const K8sResources& pod, const std::vector<K8sResources>& containers) {
  K8sResources out = pod;
  // defaultPodRequests runs only when pod-level limits are set.
  if (!any_limit(pod)) return out;
  const Aggregate a = aggregate(containers);
  if (!out.cpu_request_milli) out.cpu_request_milli = a.cpu_request ? a.cpu_request : pod.cpu_limit_milli;
  if (!out.memory_request_bytes)
    out.memory_request_bytes = a.memory_request ? a.memory_request : pod.memory_limit_bytes;
  return out;
}

K8sResources pod_cgroup_target(const K8sResources& pod_level, const std::vector<K8sResources>& containers) {
  const Aggregate a = aggregate(containers);
  const K8sResources p = default_pod_level(pod_level, containers);
  K8sResources out;
  // PodRequests: the containers' aggregate, then each pod-level request
  // replaces its resource. MilliCPUToShares(0) = MinShares: the pod cgroup
  // always gets a cpu.weight.
  out.cpu_request_milli = p.cpu_request_milli ? p.cpu_request_milli : a.cpu_request.value_or(0);
  out.memory_request_bytes = p.memory_request_bytes ? p.memory_request_bytes : a.memory_request;
  // PodLimits likewise; a pod-level limit counts as declared even when some
  // container has none (ResourceConfigForPod with IsPodLevelResourcesSet).
  out.cpu_limit_milli = p.cpu_limit_milli ? p.cpu_limit_milli : a.cpu_limit;
  out.memory_limit_bytes = p.memory_limit_bytes ? p.memory_limit_bytes : a.memory_limit;
  return out;
}

Result<void> validate_pod_level(const K8sResources& pod_resources, const std::vector<NamedResources>& containers) {
  if (!has_pod_level(pod_resources)) return {};
  std::vector<K8sResources> rs;
  rs.reserve(containers.size());
  for (const auto& c : containers) rs.push_back(c.resources);
  const K8sResources p = default_pod_level(pod_resources, rs);
  const Aggregate a = aggregate(rs);

  std::vector<std::string> errs;
  struct Res {
    const char* name;
    optional<int64_t> pod_req, pod_lim, agg_req;
    optional<int64_t> K8sResources::*ctr_lim;
    std::string (*fmt)(int64_t);
  };
  const Res res[] = {
      {"cpu", p.cpu_request_milli, p.cpu_limit_milli, a.cpu_request, &K8sResources::cpu_limit_milli,
       format_cpu_milli},
      {"memory", p.memory_request_bytes, p.memory_limit_bytes, a.memory_request, &K8sResources::memory_limit_bytes,
       format_memory_bytes},
  };
  for (const auto& r : res) {
    // validateResourceRequirements on spec.resources: request ≤ limit.
    if (r.pod_req && r.pod_lim && *r.pod_req > *r.pod_lim) {
      errs.push_back(fmt::format("spec.resources.requests[{}]: Invalid value: \"{}\": must be less than or equal "
                                 "to {} limit of {}",
                                 r.name, r.fmt(*r.pod_req), r.name, r.fmt(*r.pod_lim)));
    }
    // validatePodResourceConsistency: pod-level request ≥ aggregate requests.
    if (r.pod_req && r.agg_req && *r.agg_req > *r.pod_req) {
      errs.push_back(fmt::format("spec.resources.requests[{}]: Invalid value: \"{}\": must be greater than or equal "
                                 "to aggregate container requests of {}",
                                 r.name, r.fmt(*r.pod_req), r.fmt(*r.agg_req)));
    }
    // ... and no single container limit above the pod-level limit.
    if (r.pod_lim) {
      for (const auto& c : containers) {
        const auto& lim = c.resources.*(r.ctr_lim);
        if (lim && *lim > *r.pod_lim) {
          errs.push_back(fmt::format("container '{}': resources.limits[{}]: Invalid value: \"{}\": must be less "
                                     "than or equal to pod limits of {}",
                                     c.name, r.name, r.fmt(*lim), r.fmt(*r.pod_lim)));
        }
      }
    }
  }
  if (errs.empty()) return {};
  return fail(EINVAL, "{}", fmt::join(errs, "; "));
}

}  // namespace podshim::core
