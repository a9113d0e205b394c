// The CDI registry: spec files from ordered directories, devices by qualified
// name, and live refresh through inotify.
//
// Upstream semantics (pkg/cdi cache.go, spec-dirs.go): directories in
// increasing priority (default /etc/cdi, then /var/run/cdi; later wins); each
// scanned non-recursively in lexical order, only *.json and *.yaml; a missing
// directory is ignored; a per-file error is recorded and the scan goes on; the
// same device at equal priority is a conflict recorded on both files and the
// device becomes unresolvable.
//
// Safer than upstream: a spec file that is not a regular file (symlinks
// included), is group- or world-writable, or is not owned by the required
// owner (root) is ignored with an error, since its content becomes device
// nodes, mounts and hooks in someone's container.
//
// Not thread-safe: one owner (podshimd's event loop) calls refresh(), the
// watch callback and the lookups.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "cdi/edits.h"
#include "cdi/spec.h"

namespace podshim::cdi {

inline const std::vector<std::string>& default_spec_dirs() {
  static const std::vector<std::string> dirs = {"/etc/cdi", "/var/run/cdi"};
  return dirs;
}

struct RegistryOptions {
  // Increasing priority.
  std::vector<std::string> spec_dirs = default_spec_dirs();
  // Owner every spec file must have; nullopt accepts any owner (unit tests
  // running unprivileged, `podshimctl cdi validate` on a developer's files).
  std::optional<uid_t> required_owner = 0;
};

// One loaded, valid spec file.
struct SpecFile {
  std::string path;  // dir + "/" + file name
  int priority = 0;  // index of its directory
  std::string vendor;
  std::string cls;
  Spec spec;
};

// The verdict for one candidate file seen by the last scan.
struct FileVerdict {
  std::string path;
  bool loaded = false;               // parsed and valid (it may still have conflicts)
  std::vector<std::string> errors;   // load error, safety refusal, conflicts
};

// Registers `fd` with the caller's event loop; `on_readable` is to be called
// whenever fd is readable. podshimd adapts this to sd_event_add_io, which
// keeps cdi/ free of sd-event.
using FdWatcher = std::function<Result<void>(int fd, std::function<void()> on_readable)>;

class Registry {
 public:
  explicit Registry(RegistryOptions options = {});
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Rescans every directory and replaces the registry's content. Never fails
  // as a whole: per-file problems are in verdicts()/errors().
  void refresh();

  // Starts live refresh: an inotify fd watching every spec directory (and
  // the parent of a missing one, so a directory created later is picked up).
  // Events are coalesced: each readable callback drains the fd and refreshes
  // once. Call after construction; refresh() is done here too.
  Result<void> watch(const FdWatcher& register_fd);
  // The inotify fd (-1 before watch()); for tests and for loops that poll.
  int watch_fd() const { return inotify_.get(); }
  // Drains pending inotify events; refreshes if any concerned a spec file
  // or a directory. Returns whether a refresh happened.
  bool process_watch_events();

  // Sorted qualified names of every resolvable device.
  std::vector<std::string> devices() const;
  // One verdict per candidate file of the last scan, in scan order.
  const std::vector<FileVerdict>& verdicts() const { return verdicts_; }
  // path → errors, for files with at least one error.
  std::map<std::string, std::vector<std::string>> errors() const;
  const std::vector<std::shared_ptr<const SpecFile>>& specs() const { return specs_; }
  const RegistryOptions& options() const { return options_; }
  // Number of refreshes so far (tests of live refresh).
  uint64_t generation() const { return generation_; }

  // Looks up devices and merges their edits in request order: each spec's
  // global edits once (the first time one of its devices is seen), then the
  // device's own (pkg/cdi Cache.InjectDevices). Duplicate requests count once.
  // If any name is unresolvable nothing is merged and the error lists the
  // unresolvable names (ENOENT).
  Result<ContainerEdits> resolve(const std::vector<std::string>& names) const;

 private:
  struct DeviceEntry {
    std::shared_ptr<const SpecFile> spec;
    size_t index;  // in spec->spec.devices
  };
  void add_watches();

  RegistryOptions options_;
  std::vector<std::shared_ptr<const SpecFile>> specs_;
  std::map<std::string, DeviceEntry> devices_;
  std::vector<FileVerdict> verdicts_;
  UniqueFd inotify_;
  uint64_t generation_ = 0;
};

}  // namespace podshim::cdi

namespace podshim::cdi {

// registry.resolve(names) + resolve_edits(); cdi_devices is set to the
// de-duplicated request list. The daemon converts the result to an NRI
// ContainerAdjustment.
Result<ResolvedEdits> resolve_devices(const Registry& registry, const std::vector<std::string>& names,
                                      const ProcessIds& ids, const HostLookup& lookup = lstat_host_device);

// The OCI back end end to end: resolves `names`, takes the uid/gid defaults
// from the config's process.user and applies the edits to `config`. On any
// error `config` is left unchanged.
Result<void> inject_oci(const Registry& registry, nlohmann::json& config,
                        const std::vector<std::string>& names, const HostLookup& lookup = lstat_host_device);

}  // namespace podshim::cdi
