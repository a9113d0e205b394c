// Pure mappings from NRI's requests, read in place (shim/nri/pbview.h), to
// podshim's model, and from resolved CDI edits to an NRI
// ContainerAdjustment. No I/O, so every rule is unit-testable on captured
// messages. Nothing here builds a libprotobuf object from a request.
#pragma once

#include <functional>
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
// optional fields become 0 ("unchanged"); a memory-only CRI update (cri-api
// LinuxContainerResources is proto3: a field left out reads 0) reaches NRI with the cpu fields present but zero, which means the same.
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
  // The hook as the runtime runs it: a path on the HOST (the runtime execs
  // OCI hooks in its own mount namespace, not in podshimd's).
  std::string hook_path = "/usr/libexec/podshim/podshim-hook";
  int hook_timeout_s = 10;
};

// Whether podshimd injects podshim-hook, and under which path.
struct HookDecision {
  bool inject = false;
  std::string path;     // the host path the adjustment names (when inject)
  std::string warning;  // why not (when !inject): names the path
};

// `host_path` is where the runtime will find podshim-hook on the host;
// `check_path` is the same file as podshimd sees it (on a host install the
// same path; in the DaemonSet the host directory mounted into podshimd's
// container, at the same path). `executable(path)` says whether an
// executable regular file is there (the daemon passes access(X_OK)). The
// hook is injected only when the copy reachable from the host is there: a
// hook the runtime cannot exec fails every container that gets it.
HookDecision decide_hook(const std::string& host_path, const std::string& check_path,
                         const std::function<bool(const std::string&)>& executable);

// Fills `adj` with the edits that the container does not already have, so
// that each one is in the final OCI spec exactly once whoever applied it
// (containerd 2.x and CRI-O apply CDI requests themselves, by CRI field and
// by annotation, before NRI plugins see the container):
//  - env entries ("K=V") already in `ctr` are skipped;
//  - device nodes by container path;
//  - mounts by destination;
//  - hooks (CDI's and podshim-hook) identical in path, args and env to one
//    at the same stage in `ctr` (NRI's Container.hooks, field 10 in every
//    NRI version podshim speaks) or already added, are skipped;
//  - no device-cgroup allow rule is added: the runtime adds one for every
//    device node of an adjustment itself. Only where the CDI spec's
//    permissions are narrower than that rule does a deny rule follow.
// Sets the annotations podshim.io/injected-devices and
// podshim.io/injected-mounts that podshim-hook reads (device checks, labels).
// Returns the device node paths added.
std::vector<std::string> edits_to_adjustment(const cdi::ResolvedEdits& edits,
                                             const pb::ContainerView& ctr,
                                             const AdjustmentOptions& opts,
                                             api::ContainerAdjustment* adj);

}  // namespace podshim::adapter
