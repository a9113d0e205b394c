// Pure mappings from NRI's requests, read in place (shim/nri/pbview.h), to
// podshim's model, and from resolved CDI edits to an NRI
// ContainerAdjustment. No I/O, so every rule is unit-testable on captured
// messages. Nothing here builds a libprotobuf object from a request.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cdi/edits.h"
#include "cgroup/convert.h"
#include "shim/core/state.h"
#include "shim/nri/events.h"
#include "shim/nri/pbview.h"

namespace podshim::adapter {

namespace api = nri::api;
namespace pb = nri::pb;

// LinuxResources → the NRI/OCI values the engine understands. Absent
// optional fields become 0 ("unchanged"); facts §9: a memory-only CRI update
// reaches NRI with the cpu fields present but zero, which means the same.
cgroup::LinuxResourceValues linux_values(const pb::LinuxResourcesView& r);

// Kubernetes resources of a container or pod as NRI describes them, applied
// on top of `current` (zero fields keep the current value).
cgroup::K8sResources resources_from_nri(const pb::LinuxResourcesView& r,
                                        const cgroup::K8sResources& current = {});

// The reverse, for Runtime.UpdateContainers: shares from the request (or the
// limit), quota/period 100000, memory limit; unset limits are left out so the
// runtime keeps "max".
api::LinuxResources resources_to_nri(const cgroup::K8sResources& r);

// The QoS class from the pod's cgroup parent as the kubelet names it
// (".../burstable/..." or "kubepods-burstable-...", likewise besteffort;
// Guaranteed pods sit directly under kubepods).
core::QosClass qos_from_cgroup_parent(const std::string& parent);

// The pod as podshim models it. Fails on ids that cannot be file names.
Result<core::Pod> pod_from_nri(const pb::PodSandboxView& pod);
// The NRI-given fields of `pod` only (what pod_from_nri sets), onto an
// existing one; fails like pod_from_nri.
Result<void> assign_pod_from_nri(const pb::PodSandboxView& pod, core::Pod* out);

// Whether `known` already holds everything assign_pod_from_nri would set
// from `pod` (the runtime resends the pod with every container event):
// then there is nothing to build or store.
bool pod_unchanged(const pb::PodSandboxView& pod, const core::Pod& known);

// The container, with desired = allocated = its current resources.
Result<core::Container> container_from_nri(std::string_view pod_uid, const pb::ContainerView& ctr);
// The NRI-given fields (what container_from_nri sets) onto an existing
// container; `take_resources` false keeps desired and allocated.
Result<void> assign_container_from_nri(std::string_view pod_uid, const pb::ContainerView& ctr,
                                       bool take_resources, core::Container* out);

// Whether `known` already holds everything assign_container_from_nri
// would set (desired/allocated only when `take_resources`).
bool container_unchanged(std::string_view pod_uid, const pb::ContainerView& ctr, bool take_resources,
                         const core::Container& known);

// The annotations CDI requests are looked up in (cdi/requests.h: the
// cdi.k8s.io/ prefix and podshim.io/cdi-devices): the pod's overlaid with
// the container's (the container's win). Only those keys are copied, so
// for the usual container without CDI annotations this allocates nothing.
std::map<std::string, std::string> cdi_annotations(const pb::PodSandboxView& pod,
                                                   const pb::ContainerView& ctr);

std::string state_name(int32_t s);  // api::ContainerState

// What a CDI injection adds to a container through NRI.
struct AdjustmentOptions {
  // Add podshim-hook at createRuntime/poststop so SELinux labelling and the
  // device check run with the final OCI spec (issue: SELinux in NRI mode).
  bool inject_hook = true;
  std::string hook_path = "/usr/libexec/podshim/podshim-hook";
  int hook_timeout_s = 10;
};

// Fills `adj` with the edits that the container does not already have: env
// entries, device nodes (by container path) and mounts (by destination) that
// the runtime already put in `ctr` (containerd and CRI-O inject CDI devices
// from the CRI request themselves) are skipped, so nothing is added twice.
// Sets the annotations podshim.io/injected-devices and
// podshim.io/injected-mounts that podshim-hook reads (device checks, labels).
// Returns the device node paths added.
std::vector<std::string> edits_to_adjustment(const cdi::ResolvedEdits& edits,
                                             const pb::ContainerView& ctr,
                                             const AdjustmentOptions& opts,
                                             api::ContainerAdjustment* adj);

}  // namespace podshim::adapter
