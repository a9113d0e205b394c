// Pod-level resources (KEP-2837 PodLevelResources, resized in place by
// KEP-5419): what the pod cgroup holds, and which pod-level values the
// apiserver refuses. Pure functions over the model's values, no I/O.
//
// Only regular containers are modelled (podshim's store has no init or
// sidecar containers); for them the kubelet's aggregation is a plain sum
// (component-helpers resource.AggregateContainerRequests; the init-container
// max() of KEP-753 does not arise).
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "shim/core/state.h"

namespace podshim::core {

// One container's resources and the name messages use for it.
struct NamedResources {
  std::string name;
  K8sResources resources;
};

// Whether any pod-level request or limit is set (resource.IsPodLevelResourcesSet).
bool has_pod_level(const K8sResources& pod);

// Pod-level resources after the apiserver's defaulting
// (pkg/apis/core/v1/defaults.go defaultPodRequests), only when a pod-level
// limit is set: a missing pod-level request becomes the containers' aggregate
// request for that resource when any container requests it (a container
// request defaults to its limit), otherwise the pod-level limit. Limits are
// left as given.
K8sResources default_pod_level(const K8sResources& pod, const std::vector<K8sResources>& containers);

// What the pod cgroup holds (pkg/kubelet/cm/helpers_linux.go
// ResourceConfigForPod with component-helpers PodRequests/PodLimits):
//   - cpu request (→ cpu.weight through shares): the pod-level request if set
//     (after defaulting), else the sum of the containers' requests; 0 (shares
//     2, weight 1) when nothing requests cpu, as for BestEffort pods.
//   - memory request (memory.min under MemoryQoS): likewise, unset when none.
//   - cpu / memory limit: the pod-level limit if set; else the sum of the
//     containers' limits if every container declares one; else unset ("max").
// Each resource is decided on its own: a pod-level cpu limit with no
// pod-level memory limit takes memory from the containers.
K8sResources pod_cgroup_target(const K8sResources& pod_level, const std::vector<K8sResources>& containers);

// Refuses (EINVAL) what the apiserver refuses for pod-level resources, in its
// words (pkg/apis/core/validation validateResourceRequirements and
// validatePodResourceConsistency), naming both values:
//   - a pod-level request above the pod-level limit (requests defaulted as
//     above): `spec.resources.requests[cpu]: Invalid value: "2": must be less
//     than or equal to cpu limit of 1`;
//   - containers whose requests add up to more than the pod-level request:
//     `spec.resources.requests[memory]: Invalid value: "256Mi": must be
//     greater than or equal to aggregate container requests of 300Mi`;
//   - a container limit above the pod-level limit (the containers' limits may
//     add up to more; no single one may exceed it): `container 'c1':
//     resources.limits[cpu]: Invalid value: "3": must be less than or equal
//     to pod limits of 1`.
// Nothing to check when no pod-level resource is set.
Result<void> validate_pod_level(const K8sResources& pod_resources, const std::vector<NamedResources>& containers);

}  // namespace podshim::core
