// SELinux labelling of the sources of mounts podshim injected (CDI mounts).
//
// A bind mount cannot be relabelled through `context=` (mount(2): for MS_BIND
// "the filesystemtype and data arguments are ignored"), so the source itself
// must carry a label the container may read; see facts Part 1d.
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
#include "shim/hook/oci.h"

namespace podshim::hook {

inline constexpr std::string_view kInjectedMountsAnnotation = "podshim.io/injected-mounts";

// The mounts[] entries whose destination the annotation lists; an error
// names a listed destination that config.json does not mount.
Result<std::vector<OciMount>> injected_mounts(const OciConfig& cfg,
                                              const std::map<std::string, std::string>& state_annotations);

class MountLabeler {
 public:
  virtual ~MountLabeler() = default;
  // Labels the sources of `mounts` for the container described by `cfg`;
  // returns how many sources were (re)labelled. A no-op returning 0 when
  // SELinux is disabled.
  virtual Result<size_t> label(const OciConfig& cfg, const std::vector<OciMount>& mounts) = 0;
};

// The production labeler, built on selinux/ (selinux_lib_dep): shared
// (`:z`, level s0) container_file_t labels, because CDI mount sources (driver
// libraries, metadata files) are the same host files in every container.
std::unique_ptr<MountLabeler> make_selinux_labeler();

}  // namespace podshim::hook
