// SELinux labelling of the sources of mounts podshim injected (CDI mounts).
//
// A bind mount cannot be relabelled through `context=` (mount(2): for MS_BIND
// "the filesystemtype and data arguments are ignored"), so the source itself
// must carry a label the container may read (as go-selinux's
// label.Relabel does for runc and CRI-O).
//
// Which mounts: those whose destinations podshimd lists in the annotation
// `podshim.io/injected-mounts` (a JSON array of container paths). Relabelling
// every bind mount source would relabel what the user mounted on purpose
// (podman only does that for an explicit :z/:Z).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "shim/hook/devices.h"
#include "shim/hook/oci.h"

namespace podshim::hook {

inline constexpr std::string_view kInjectedMountsAnnotation = "podshim.io/injected-mounts";

// The mounts[] entries whose destination the annotation lists; an error
// names a listed destination that config.json does not mount.
Result<std::vector<OciMount>> injected_mounts(const OciConfig& cfg,
                                              const std::map<std::string, std::string>& state_annotations);

// What labelling did, for the caller to log.
struct LabelReport {
  size_t labelled = 0;                // sources (re)labelled
  std::vector<std::string> notes;     // informational (info level)
  std::vector<std::string> warnings;  // worth a warning, not a failure
};

class MountLabeler {
 public:
  virtual ~MountLabeler() = default;
  // Labels the sources of `mounts` for the container whose config.json is
  // `config_json` (already validated into `cfg`). Nothing is labelled, and
  // no error returned, when SELinux is disabled.
  virtual Result<LabelReport> label(std::string_view config_json, const OciConfig& cfg,
                                    const std::vector<OciMount>& mounts,
                                    const std::vector<InjectedDevice>& devices) = 0;
};

// The production labeler: selinux::apply_labels() (selinux/apply.h), the one
// call podshim-hook and podshimd share: private (`:Z`) or, for a source
// another pod already uses, shared (`:z`) container_file_t labels, applied
// recursively with go-selinux's refusal list.
std::unique_ptr<MountLabeler> make_selinux_labeler();

}  // namespace podshim::hook
