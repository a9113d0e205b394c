// From merged CDI edits to container changes: device nodes completed from the
// host, then two back ends.
//
// ResolvedEdits is the neutral result (no protobuf here). It maps 1:1 onto an
// NRI ContainerAdjustment, which podshimd builds from it:
//   cdi_devices   → AddCDIDevice(name) where the runtime injects CDI itself
//                   (containerd/nri PR #98), instead of everything below
//   env           → AddEnv(key, value): "K=V", duplicate keys already merged
//                   (a later CDI entry replaces an earlier one in place)
//   devices       → AddDevice(LinuxDevice{path,type,major,minor,fileMode,uid,gid});
//                   de-duplicated by container path, the later one wins
//   device_rules  → AddLinuxResourcesDevice / resources.devices allow rules,
//                   one per b/c node in CDI order (duplicates kept, as upstream)
//   net_devices   → LinuxNetDevice by host interface name
//   mounts        → RemoveMount(destination) + AddMount; unique by destination
//                   (later wins) and stable-sorted by path depth
//   hooks         → AddHooks per OCI stage
//   intel_rdt     → LinuxIntelRdt
//   additional_gids → process additional gids; 0 and duplicates dropped
// apply_to_oci() is the second back end: the same edits applied to an OCI
// config.json in upstream v1.x order (env → device nodes → net devices →
// mounts → hooks → intelRdt → additional gids).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "cdi/spec.h"

namespace podshim::cdi {

// What lstat() says about a host device node.
struct HostDevice {
  std::string type;  // "b", "c" or "p"
  int64_t major = 0;
  int64_t minor = 0;
  uint32_t mode = 0;  // permission bits (st_mode & 0777)
};

// Looks up a host device node; the default lstat()s it (no symlink following,
// as runc's DeviceFromPath). Tests inject their own.
using HostLookup = std::function<Result<HostDevice>(const std::string& host_path)>;
Result<HostDevice> lstat_host_device(const std::string& host_path);

// The container's process.user ids, used as device uid/gid defaults when > 0.
struct ProcessIds {
  uint32_t uid = 0;
  uint32_t gid = 0;
};

struct LinuxDevice {
  std::string path;
  std::string type;
  int64_t major = 0;
  int64_t minor = 0;
  std::optional<uint32_t> file_mode;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  // The host node behind it (hostPath, or path when unset) and whether it
  // was looked up on the host (and found, of the declared type). Fully
  // specified nodes are taken as given and not looked up, so on_host is
  // false for them: they may exist only inside the container (NVIDIA's
  // nvidia-caps) and there is nothing podshim checked on the host.
  std::string host_path;
  bool on_host = false;
};

struct DeviceCgroupRule {  // always an allow rule
  std::string type;
  int64_t major = 0;
  int64_t minor = 0;
  std::string access;  // "rwm" by default; "" for permissions "none"
};

struct OciMount {
  std::string destination;
  std::string source;
  std::string type;
  std::vector<std::string> options;
};

struct OciHook {
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::optional<int64_t> timeout;
};

struct OciHooks {
  std::vector<OciHook> prestart, create_runtime, create_container, start_container, poststart,
      poststop;
  bool empty() const;
};

struct ResolvedEdits {
  std::vector<std::string> cdi_devices;  // the qualified names these edits came from
  std::vector<std::string> env;
  std::vector<LinuxDevice> devices;
  std::vector<DeviceCgroupRule> device_rules;
  std::vector<NetDevice> net_devices;
  std::vector<OciMount> mounts;
  OciHooks hooks;
  std::optional<IntelRdt> intel_rdt;
  std::vector<uint32_t> additional_gids;
};

// Completes device nodes from the host (pkg/cdi container-edits_unix.go
// fillMissingInfo, v1.0.x): hostPath defaults to path; a node with a type and
// a major (or type "p") is taken as given and the host is not consulted;
// otherwise the host node is looked up (missing → error; a type different
// from the declared one → error), major/minor copied when major is 0 and
// fileMode filled when unset. Each host path is looked up at most once per
// call, however many nodes name it. uid/gid default to the process ids when
// those are > 0. Then normalises the lists as described at the top of this
// file. Errors name the device path.
Result<ResolvedEdits> resolve_edits(const ContainerEdits& merged, const ProcessIds& ids,
                                    const HostLookup& lookup = lstat_host_device);
// The same over edits given in merge order (as ContainerEdits::append would
// concatenate them), without building the merged copy.
Result<ResolvedEdits> resolve_edits(std::span<const ContainerEdits* const> parts, const ProcessIds& ids,
                                    const HostLookup& lookup = lstat_host_device);

// process.user.uid/gid of an OCI config (0 when absent).
ProcessIds process_ids_from_oci(const nlohmann::json& config);

// Applies the edits to an OCI config in place. On error the config may be
// partly edited (as upstream); callers edit a copy when that matters.
Result<void> apply_to_oci(const ResolvedEdits& edits, nlohmann::json& config);

// resolve_edits(parts, ids from the config, lookup) + apply_to_oci in one
// pass, without copying the edits' strings into a ResolvedEdits first. On any
// error `config` is left unchanged; a resolution error is prefixed with
// "failed to inject CDI devices".
Result<void> inject_edits_oci(std::span<const ContainerEdits* const> parts, nlohmann::json& config,
                              const HostLookup& lookup = lstat_host_device);

// inject_edits_oci + config.dump(indent) (-1: compact), byte for byte,
// without building nlohmann nodes for the edits: they are written straight
// from the spec's strings into the output, next to the config's own entries.
// The validation and the errors are inject_edits_oci's; a string that is not
// UTF-8 (where dump() would throw) is an error too. This is the OCI back end
// to use; inject_edits_oci remains for callers that want the tree.
Result<std::string> inject_edits_oci_text(std::span<const ContainerEdits* const> parts, nlohmann::json config,
                                          int indent = -1, const HostLookup& lookup = lstat_host_device);

// Lexical path cleaning like Go's filepath.Clean ("/a//b/../c/" → "/a/c").
std::string clean_path(std::string_view p);

}  // namespace podshim::cdi
