// The one call podshim-hook (createRuntime) and podshimd make: label what
// podshim injected into one container.
//
// Input: the container's OCI config (for process.selinuxLabel and
// linux.mountLabel) and the mounts and devices podshim injected, as plain
// structs (no CDI types). Output: the mount-option edits the caller applies
// to config.json (fresh file systems get context="…"), what was relabelled,
// and informational notes for the caller to log (library code does not log).
//
// Decisions, in order:
// 1. Any mount carrying its own context=/fscontext=/defcontext=/rootcontext=
//    option is refused (mounts.h), whatever the SELinux state.
// 2. SELinux disabled or absent: nothing is labelled, no context= is added,
//    one note says so; never an error (the kernel rejects context= with
//    EINVAL then, as a tmpfs mount on Debian 12 shows, and go-selinux's
//    label.InitLabels returns empty labels).
// 3. A container without a label (no mountLabel, no selinuxLabel): nothing
//    to do, one note.
// 4. Bind mounts: the source is resolved and relabelled recursively with the
//    container's private file label (`:Z`), or with the shared one (`:z`,
//    level s0) when the source is shared (see ApplyConfig). Sources under
//    /dev are host device nodes and are not relabelled (noted).
// 5. Fresh file systems: context="<private file label>" is appended to the
//    options; each such superblock belongs to this container alone.
// 6. Devices: never relabelled. The runtime creates the node inside the
//    container's own /dev, a tmpfs mounted with context=<mountLabel> (runc
//    rootfs_linux.go), and host nodes are shared by many domains.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "selinux/container_label.h"
#include "selinux/label.h"
#include "selinux/mounts.h"
#include "selinux/relabel.h"

namespace podshim::selinux {

using InjectedMount = MountEntry;

struct InjectedDevice {
  std::string path;       // in the container
  std::string host_path;  // on the host (may equal path)
};

struct ApplyConfig {
  FileLabelConfig file;
  RelabelOptions relabel;
  // podshimd's record of which pods use which source; null in the hook,
  // which is a fresh process per container.
  SharedSourceTracker* tracker = nullptr;
  // The pod the container belongs to; required when tracker is set.
  std::string pod_uid;
  // Without a tracker, a source whose current label has our file type but
  // another container's level (or s0 already) was labelled for another pod:
  // label it shared instead of taking it away from that pod. A stale label
  // from a pod that is gone costs only isolation (s0), never access.
  bool infer_sharing_from_disk = true;
};

// The new option list for the mount with this destination.
struct MountEdit {
  std::string destination;
  std::vector<std::string> options;
};

struct LabelledSource {
  std::string source;    // as given
  std::string resolved;  // after resolving symlinks
  std::string label;
  Sharing sharing = Sharing::Private;
  RelabelStats stats;
};

struct ApplyResult {
  bool selinux_enabled = false;
  std::optional<Label> private_file_label;  // the container's `:Z` label
  std::vector<MountEdit> mount_edits;
  std::vector<LabelledSource> labelled;
  std::vector<std::string> notes;  // one line each, for the caller to log at info
};

Result<ApplyResult> apply_labels(const nlohmann::json& oci_config,
                                 const std::vector<InjectedMount>& mounts,
                                 const std::vector<InjectedDevice>& devices,
                                 const ApplyConfig& config = {});

// The same with the container's labels already known (NRI path, where the
// label comes from /proc/<pid>/attr/current).
Result<ApplyResult> apply_labels(const ContainerLabels& labels,
                                 const std::vector<InjectedMount>& mounts,
                                 const std::vector<InjectedDevice>& devices,
                                 const ApplyConfig& config = {});

}  // namespace podshim::selinux
