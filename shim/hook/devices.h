// Checks that the device nodes podshim injected into a container exist on the
// host as the spec says, right before the runtime creates them in the
// container.
//
// Which devices: only those podshimd lists in the annotation
// `podshim.io/injected-devices`, never every linux.devices entry. The spec
// legitimately carries devices that do not exist on the host at that path:
// `podman run --device /dev/sdb:/dev/sda` keeps sdb's numbers under the name
// /dev/sda, and NVIDIA's CDI specs carry fully specified
// /dev/nvidia-caps/nvidia-cap<N> nodes that the runtime mknods and the host
// never has (NVIDIA k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin/cdi.go). The
// container path is lost once CDI has resolved hostPath, so the annotation
// carries it.
//
// Annotation value: a JSON array whose elements are either a container path
// ("/dev/foo", host path = container path) or {"path": "...", "hostPath": "..."}.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "shim/hook/oci.h"

namespace podshim::hook {

inline constexpr std::string_view kInjectedDevicesAnnotation = "podshim.io/injected-devices";

// One device podshim injected: where it appears in the container and which
// host node backs it.
struct InjectedDevice {
  std::string path;
  std::string host_path;
};

// Parses the annotation value. An absent annotation is an empty list.
Result<std::vector<InjectedDevice>> parse_injected_devices(std::string_view value);

// Reads the list from the annotations (state annotations first, then the
// config's: runtimes copy config annotations into the state, so they agree).
Result<std::vector<InjectedDevice>> injected_devices(
    const std::map<std::string, std::string>& state_annotations,
    const std::map<std::string, std::string>& config_annotations);

// For each injected device: the linux.devices entry with the same path must
// exist, and the host node (resolved beneath `root_fd`, "/" in production,
// with no symlink followed at any component) must have the entry's type and,
// for c/b/u, its major:minor. Returns the number of devices checked.
Result<size_t> check_devices(int root_fd, const std::vector<InjectedDevice>& injected,
                             const std::vector<OciDevice>& spec_devices);

}  // namespace podshim::hook
