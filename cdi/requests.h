// Where a container's CDI requests come from:
//   - NRI Container.CDI_devices (the kubelet's CRI CDIDevice list, v0.10+);
//   - annotations "cdi.k8s.io/<anything>" (pkg/cdi annotations.go; still
//     honoured by containerd and CRI-O);
//   - podshim's own annotation "podshim.io/cdi-devices".
// Annotation values are comma-separated fully qualified names.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace podshim::cdi {

inline constexpr std::string_view kAnnotationPrefix = "cdi.k8s.io/";
inline constexpr std::string_view kPodshimAnnotation = "podshim.io/cdi-devices";

// The qualified names requested by annotations, in key order then value
// order, without duplicates. An unqualified name is an error naming the
// annotation key and the name (upstream ParseAnnotations fails on it too).
Result<std::vector<std::string>> devices_from_annotations(const std::map<std::string, std::string>& annotations);

// NRI's CDI device names first (validated), then the annotation requests;
// duplicates dropped.
Result<std::vector<std::string>> requested_devices(const std::vector<std::string>& nri_cdi_devices,
                                                   const std::map<std::string, std::string>& annotations);

}  // namespace podshim::cdi
