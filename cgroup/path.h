// Turning what a runtime hands over as a cgroup path into a path relative to
// the cgroup v2 root, for both drivers:
//   cgroupfs  "/kubepods/burstable/pod<uid>/<id>"
//   systemd   "kubepods-burstable-pod<uid>.slice:cri-containerd:<id>"
//             → kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/
//               cri-containerd-<id>.scope   (runc docs/systemd.md; CRI-O uses "crio")
//   systemd   "kubepods-burstable-pod<uid>.slice" (a pod's cgroup parent, a slice unit)
// Anything that could leave the cgroup root is refused here, before any I/O;
// the I/O itself then goes through CgroupDir (openat2 RESOLVE_BENEATH).
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace podshim::cgroup {

enum class DriverKind { Cgroupfs, Systemd, Auto };

Result<DriverKind> parse_driver(std::string_view s);  // "cgroupfs" | "systemd" | "auto"

struct CgroupLocation {
  DriverKind driver = DriverKind::Cgroupfs;  // never Auto
  std::string relpath;  // relative to the cgroup root, no leading '/'
  std::string unit;     // systemd unit owning the cgroup ("" for cgroupfs)
};

// Which driver a path's form implies: "a:b:c" or a bare "*.slice" → systemd,
// "/..." → cgroupfs.
Result<DriverKind> detect_driver(std::string_view runtime_path);

// Expands a slice name as systemd does: "a-b-c.slice" →
// "a.slice/a-b.slice/a-b-c.slice"; "-.slice" → "" (the root slice).
Result<std::string> expand_slice(std::string_view slice);

// Resolves a runtime path for `driver` (Auto: detect_driver). Refuses "..",
// ".", empty components, relative cgroupfs paths, the root itself, control
// characters and anything that is not a plain systemd unit name.
Result<CgroupLocation> resolve_cgroup_path(std::string_view runtime_path, DriverKind driver);

}  // namespace podshim::cgroup
