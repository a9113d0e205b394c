// Mount options and sharing for the mounts podshim injects.
//
// A fresh file system (tmpfs and the like: a new superblock) is labelled with
// the `context=` mount option, which sets the label of every inode of that
// superblock. It must be quoted, `context="system_u:object_r:…:s0:c1,c2"`,
// because the MCS part contains a comma that would otherwise split the option
// list (go-selinux FormatMountLabel writes it with %q; util-linux PR #1361).
// Bind mounts ignore mount data (man 2 mount, "Creating a bind mount"), so
// their sources are relabelled on disk instead (relabel.h).
//
// Smuggled security options: a CDI spec is written by a device driver, not by
// the pod's owner or the runtime. A `context=`, `fscontext=`, `defcontext=`
// or `rootcontext=` option in one of its mounts would pick a label for the
// container's files that the runtime did not choose (for example a host type
// the container could then write). podshim REFUSES such a mount with an error
// rather than silently replacing the option: replacing would hide a broken or
// hostile spec, and a refused container start names the spec to fix. This
// holds whether SELinux is enabled or not (with it disabled the kernel
// refuses context= on a fresh mount with EINVAL anyway).
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "selinux/label.h"

namespace podshim::selinux {

// One mount podshim injects, independent of CDI types: the OCI mount fields.
struct MountEntry {
  std::string source;
  std::string destination;
  std::string type;
  std::vector<std::string> options;
};

enum class MountKind {
  Bind,    // type "bind", or a "bind"/"rbind" option, or no type at all
  Fresh,   // a new superblock (tmpfs, ext4, …): gets context="…"
  Pseudo,  // proc, sysfs, cgroup…: labelled by policy (genfscon), left alone
};

MountKind classify(const MountEntry& m);

// Splits one option string on commas outside double quotes
// ("rw,context=\"a:b:c:s0:c1,c2\"" → {"rw", "context=\"a:b:c:s0:c1,c2\""}).
std::vector<std::string_view> split_options(std::string_view options);

// Fails (EPERM) naming the mount's destination and the option when any
// option, or any comma-separated part of one, is a context=, fscontext=,
// defcontext= or rootcontext= option (case-insensitive, spaces trimmed).
Result<void> check_no_security_options(const MountEntry& m);

// `context="<label>"`.
std::string context_option(const Label& label);

// Records which pods use which bind-mount source, so a source used by more
// than one pod gets the shared label (a private level would lock out every
// pod but the last one labelled). Thread-safe. Once a source is shared it
// stays shared until every pod using it is released.
class SharedSourceTracker {
 public:
  // Records that `pod_uid` uses `source` (an absolute, preferably resolved
  // path). Returns true when the source is now used by more than one pod.
  // Fails on an empty pod uid or a relative source.
  Result<bool> register_use(const std::string& source, const std::string& pod_uid);
  // Forgets a pod (all its sources); sources left with no pod are dropped.
  void release_pod(const std::string& pod_uid);
  bool is_shared(const std::string& source) const;
  size_t pods_using(const std::string& source) const;

  // {"sources": {"<path>": ["<pod uid>", …]}} for podshimd's state file.
  nlohmann::json to_json() const;
  static Result<SharedSourceTracker> from_json(const nlohmann::json& j);

  SharedSourceTracker() = default;
  SharedSourceTracker(SharedSourceTracker&& o) noexcept;
  SharedSourceTracker& operator=(SharedSourceTracker&& o) noexcept;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::set<std::string>> pods_by_source_;
};

}  // namespace podshim::selinux
