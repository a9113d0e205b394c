// The two inputs of an OCI hook: the container state on stdin and the bundle's
// config.json (opencontainers/runtime-spec runtime.md §State, config.md).
//
// Both come from the runtime, but podshim-hook is also reachable through any
// hooks.d file an administrator writes, so every field is checked strictly and
// a malformed input is one clear error, never a partial run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace podshim::hook {

// Cap on the state JSON read from stdin. A real state is a few KiB (the
// annotations dominate); anything near a MiB is not a runtime talking.
inline constexpr size_t kMaxStateBytes = 1 << 20;
// Cap on config.json. Large specs exist (many mounts, seccomp profiles with
// hundreds of syscalls) but stay well below this.
inline constexpr size_t kMaxConfigBytes = 8 << 20;

// runtime-spec runtime.md §State. `pid` is 0 when absent (it is required only
// for the created and running states).
struct OciState {
  std::string oci_version;
  std::string id;
  std::string status;
  int64_t pid = 0;
  std::string bundle;
  std::map<std::string, std::string> annotations;
};

// One linux.devices entry (config-linux.md §Devices).
struct OciDevice {
  std::string path;
  std::string type;  // "c", "b", "u" or "p"
  int64_t major = 0;
  int64_t minor = 0;
};

// One mounts[] entry (config.md §Mounts).
struct OciMount {
  std::string destination;
  std::string source;
  std::string type;
  std::vector<std::string> options;
};

// The part of config.json the hook acts on.
// linux.resources' CPU and memory, as the runtime was asked to apply them
// (the CRI's LinuxContainerResources the kubelet sent). Absent fields stay
// unset.
struct OciResources {
  std::optional<uint64_t> cpu_shares, cpu_period;
  std::optional<int64_t> cpu_quota, memory_limit;
};

struct OciConfig {
  std::string cgroups_path;  // linux.cgroupsPath, verbatim (path or systemd "slice:prefix:name")
  OciResources resources;    // linux.resources.cpu / .memory
  std::string mount_label;   // linux.mountLabel
  std::string process_label; // process.selinuxLabel
  std::vector<OciDevice> devices;
  std::vector<OciMount> mounts;
  std::map<std::string, std::string> annotations;
};

// Parses and validates the state JSON: id non-empty and printable, bundle an
// absolute path with no "." or ".." components, status a known runtime-spec
// status, pid a non-negative integer, annotations a string→string object.
Result<OciState> parse_state(std::string_view json);

// Parses and validates config.json (only the fields in OciConfig are checked;
// the runtime owns the rest).
Result<OciConfig> parse_config(std::string_view json);

// Reads <bundle>/config.json: the bundle must be an absolute path to a
// directory and config.json a regular file in it, not a symlink.
Result<std::string> read_bundle_config(const std::string& bundle);

// Checks an id-like string (container id, pod uid): non-empty, at most `max`
// bytes, printable ASCII without spaces or '/'. `what` names it in errors.
Result<void> check_token(std::string_view what, std::string_view value, size_t max);

// A container id or pod uid as podshimd takes it (shim/core validate_id):
// 1..128 characters of [A-Za-z0-9_.-], not starting with '.'. Checked here so
// the hook refuses what podshimd would refuse instead of starting the
// container unregistered.
inline constexpr size_t kMaxIdBytes = 128;
Result<void> check_id(std::string_view what, std::string_view value);

}  // namespace podshim::hook
