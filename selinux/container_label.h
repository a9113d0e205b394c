// Where podshim learns a container's SELinux label.
//
// In podshim-hook (createRuntime) the OCI config.json is at hand:
// `process.selinuxLabel` is the process label and `linux.mountLabel` the
// label the runtime gives the container's own mounts (runtime-spec config.md,
// config-linux.md "Mount Label"). On NRI events after creation podshimd reads
// the label of the container's init process from /proc/<pid>/attr/current.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "selinux/label.h"

namespace podshim::selinux {

// A container's labels; either may be absent (a runtime without SELinux
// support, or a container that runs unconfined).
struct ContainerLabels {
  std::optional<Label> process;  // process.selinuxLabel
  std::optional<Label> mount;    // linux.mountLabel

  // The label whose level the container's files get: the mount label when
  // the runtime chose one (it is what runc puts in context= for the
  // container's own tmpfs mounts), else the process label.
  const Label* level_source() const {
    if (mount) return &*mount;
    if (process) return &*process;
    return nullptr;
  }
};

// Reads process.selinuxLabel and linux.mountLabel from an OCI config. Absent
// or empty fields are "no label"; a field of the wrong JSON type or an
// unparsable label is an error naming the field.
Result<ContainerLabels> labels_from_oci(const nlohmann::json& config);

// The same from plain strings (empty = absent).
Result<ContainerLabels> labels_from_strings(std::string_view process_label,
                                            std::string_view mount_label);

// Reads <pid>/attr/current beneath `proc_root_fd` (an fd on /proc, or on a
// fake tree in tests) with symlinks refused. pid must be in 1..4194304
// (PID_MAX_LIMIT). The kernel's trailing NUL/newline is stripped. A value
// that is not an SELinux context (an AppArmor profile name, "kernel") is an
// error naming it; call this only when selinux_enabled().
Result<Label> process_label_from_proc(int proc_root_fd, pid_t pid);

}  // namespace podshim::selinux
